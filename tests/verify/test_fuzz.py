"""Mutation fuzz of the verifier: from a sound dataset and plan, many seeded random mutations.

For each mutation the test computes, independently of winsample's readers, *what a training
run would read*: meta.json's dtype and vocabulary size, every window of the plan as raw
``tokens[start:start+length]`` of the file meta.json names (the plan's columns read without a
cast), the whole val split, the materialized windows and the sidecar's T / span / targets /
shuffle / shard parameters. Then:

- if that differs from the sound dataset's (or cannot be computed at all), ``verify`` must not
  exit 0;
- ``verify`` never crashes (an exit other than 0, 1, 2; "internal error"; an exception) and
  never hangs (each run has a ``signal.alarm`` deadline).

A mutation that changes nothing a training run reads (a byte of ``inputs`` in meta.json, a
doc index of a plan that ignores documents, …) may pass or fail. The counts are reported in
docs/reliability.md (``test_reliability_doc_quotes_the_fuzz_figures`` checks them).
"""

from __future__ import annotations

import copy
import io
import json
import random
import shutil
import signal
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from winsample.cli import main
from winsample.encode import encode_corpus

from ..conftest import CORPUS, REPO

SEED = 19
MUTATIONS = 500  # random ones, besides TARGETED: about 15 s of CPU
DEADLINE_S = 20  # one verify run; a hang fails here instead of blocking the suite
FILES = ("train.bin", "val.bin", "train.docs.npy", "val.docs.npy", "meta.json", "plan.npy", "plan.npy.json", "plan.tokens.npy")
NPYS = ("train.docs.npy", "val.docs.npy", "plan.npy", "plan.tokens.npy")
ODD_VALUES = [None, True, False, 0, 1, -1, -5, 2, 7, 2**31, 2**32 + 65, 2**63, -(2**63), 1e308, 0.5, "", "x", "../train.bin",
              "/etc/passwd", "val.bin", "train.bin", "<u2", ">u2", "<u4", "uint32", "|u1", [], {}, [1, 2], {"a": 1}]


@pytest.fixture(scope="module")
def sound(tmp_path_factory) -> Path:
    """A data folder (train.bin, val.bin, doc indexes, meta.json) with a materialized plan in it."""
    root = tmp_path_factory.mktemp("fuzz")
    src = root / "docs"
    src.mkdir()
    play = (CORPUS / "hamlet.txt").read_text(encoding="utf-8")
    for i in range(6):
        (src / f"{i}.txt").write_text(play[i * 2000 : (i + 1) * 2000])
    data = root / "data"
    encode_corpus([str(src)], data, split="tail", val_fraction=0.2, workers=1)
    r = CliRunner().invoke(main, ["windows", str(data / "train.bin"), "-T", "32", "--materialize", "-o", str(data / "plan.npy"), "-q"])
    assert r.exit_code == 0, r.stderr
    for name in FILES:
        assert (data / name).is_file(), name
    return data


def run_verify(folder: Path) -> tuple[int, str]:
    """verify's exit code and output, in-process, under a deadline."""
    def hang(signum, frame):
        raise TimeoutError(f"verify ran past {DEADLINE_S} s")

    old = signal.signal(signal.SIGALRM, hang)
    signal.alarm(DEADLINE_S)
    try:
        r = CliRunner().invoke(main, ["verify", str(folder), "--plan", str(folder / "plan.npy"), "--show", "1"])
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        raise AssertionError(f"verify raised {type(r.exception).__name__}: {r.exception}") from r.exception
    return r.exit_code, r.stdout + r.stderr


def training_view(folder: Path):
    """What a training run reads, computed without winsample (raises if it cannot be read)."""
    meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
    dtype = np.dtype(meta["dtype"])
    assert dtype.kind == "u"
    n_vocab = meta["tokenizer"]["n_vocab"]
    splits = meta["splits"]
    train = np.fromfile(folder / splits["train"]["file"], dtype)
    val = np.fromfile(folder / splits["val"]["file"], dtype)
    assert Path(splits["train"]["file"]).name == splits["train"]["file"] and Path(splits["val"]["file"]).name == splits["val"]["file"]
    rows = np.load(folder / "plan.npy", allow_pickle=False)
    side = json.loads((folder / "plan.npy.json").read_text(encoding="utf-8"))
    p = side["params"]
    windows = []
    for start, length in zip(rows["start"].tolist(), rows["length"].tolist()):
        assert 0 <= start and 0 < length and start + length <= len(train)
        windows.append(train[start : start + length].astype(np.int64).tobytes())
    mat = np.load(folder / side["materialized"]["file"], allow_pickle=False)
    return (dtype.str, n_vocab, tuple(windows), val.astype(np.int64).tobytes(), mat.dtype.str, mat.shape, mat.tobytes(),
            p["T"], p["span"], p.get("targets", True), bool(p.get("shuffle")), p.get("shards") or 1, p.get("shard") or 0)


# --- mutations ------------------------------------------------------------------------------


def flip_byte(rng, folder):
    name = rng.choice(FILES)
    b = bytearray((folder / name).read_bytes())
    i = rng.randrange(len(b))
    b[i] ^= rng.randrange(1, 256)
    (folder / name).write_bytes(bytes(b))
    return f"byte {i} of {name}"


def resize(rng, folder):
    name = rng.choice(FILES)
    b = (folder / name).read_bytes()
    if rng.random() < 0.5:
        n = rng.randrange(len(b))
        (folder / name).write_bytes(b[:n])
        return f"{name} cut to {n} bytes"
    extra = bytes(rng.randrange(256) for _ in range(rng.choice([1, 2, 3, 4, 64])))
    (folder / name).write_bytes(b + extra)
    return f"{name} + {len(extra)} bytes"


def _leaves(obj, path=()):
    yield path
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _leaves(v, path + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _leaves(v, path + (i,))


def json_field(rng, folder):
    name = rng.choice(["meta.json", "plan.npy.json"])
    doc = json.loads((folder / name).read_text(encoding="utf-8"))
    path = rng.choice([p for p in _leaves(doc) if p])
    parent = doc
    for k in path[:-1]:
        parent = parent[k]
    key, old = path[-1], parent[path[-1]]
    how = rng.random()
    if how < 0.15 and isinstance(parent, dict):
        del parent[key]
        what = "deleted"
    else:
        pool = list(ODD_VALUES)
        if isinstance(old, bool):
            pool += [not old]
        elif isinstance(old, int):
            pool += [old + 1, old - 1, old * 2, -old, str(old)]
        elif isinstance(old, float):
            pool += [old + 0.01, -old]
        elif isinstance(old, str):
            pool += [old.upper(), old + "x", old[:-1], " " + old]
        new = copy.deepcopy(rng.choice(pool))
        parent[key] = new
        what = f"= {new!r}"
    (folder / name).write_text(json.dumps(doc), encoding="utf-8")
    return f"{name}: {'.'.join(map(str, path))} {what}"


def npy_header(rng, folder):
    name = rng.choice(NPYS)
    raw = (folder / name).read_bytes()
    f = io.BytesIO(raw)
    version = np.lib.format.read_magic(f)
    read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    shape, fortran, dtype = read(f)
    data = raw[f.tell():]
    how = rng.randrange(5)
    if how == 0:
        shape = (shape[0] + rng.choice([-1, 1, shape[0], 1 << 40]),) + tuple(shape[1:])
    elif how == 1 and len(shape) == 2:
        shape = (shape[1], shape[0])
    elif how == 1:
        shape = tuple(shape) + (1,)
    elif how == 2:
        fortran = not fortran
    elif how == 3 and dtype.names:
        field = rng.choice(dtype.names)
        swap = {"<i8": rng.choice(["<u8", ">i8", "<f8"]), "<i4": rng.choice(["<u4", ">i4", "<i8", "<f4"])}
        dtype = np.dtype([(n, swap.get(dtype[n].str, dtype[n].str) if n == field else dtype[n].str) for n in dtype.names])
    else:
        dtype = np.dtype(rng.choice([">u2", "<u4", "<i2", "<f2", "<i8", ">i8", "<u8"]))
    out = io.BytesIO()
    try:
        np.lib.format.write_array_header_1_0(out, {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": fortran,
                                                   "shape": shape})
    except ValueError:
        np.lib.format.write_array_header_2_0(out, {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": fortran,
                                                   "shape": shape})
    (folder / name).write_bytes(out.getvalue() + data)
    return f"{name} header: shape {shape}, fortran {fortran}, dtype {dtype}"


def plan_row(rng, folder):
    rows = np.load(folder / "plan.npy")
    i = rng.randrange(len(rows))
    field = rng.choice(["start", "length", "doc", "fresh"])
    delta = rng.choice([-1, 1, 2, 1000, -(10**6), 2**31 - 1])
    with np.errstate(over="ignore"):
        rows[field][i] = rows[field][i] + delta if field in ("start", "doc") else np.int32(np.int64(rows[field][i]) + delta)
    np.save(folder / "plan.npy", rows)
    return f"plan row {i}: {field} {delta:+d}"


def token_id(rng, folder):
    name = rng.choice(["train.bin", "val.bin", "plan.tokens.npy"])
    if name.endswith(".npy"):
        a = np.load(folder / name)
        a.flat[rng.randrange(a.size)] = rng.choice([0, 1, 50256, 50257, 65535])
        np.save(folder / name, a)
    else:
        a = np.fromfile(folder / name, "<u2")
        a[rng.randrange(len(a))] = rng.choice([0, 1, 50256, 50257, 65535])
        a.tofile(folder / name)
    return f"an id of {name}"


MUTATORS = [(flip_byte, 4), (resize, 1), (json_field, 4), (npy_header, 2), (plan_row, 1), (token_id, 1)]

# The probe's own examples and their neighbours, applied once each on top of the random ones.
TARGETED = [
    ("meta.json", ("dtype",), v) for v in (">u2", "<u4", "u2", "uint16", "|u1", "<i2", "")
] + [
    ("meta.json", ("version",), v) for v in (-5, True, 0, 2, "1", 1.0)
] + [
    ("meta.json", ("splits", s, k), v) for s in ("train", "val") for k in ("file", "doc_index")
    for v in ("../data/train.bin", "/etc/passwd", "val.bin" if s == "train" else "train.bin", "", None, "sub/x.bin")
] + [
    ("meta.json", ("splits", s, k), v) for s in ("train", "val") for k in ("tokens", "bytes", "documents", "max_token")
    for v in (-1, True, 2**64, "3", None)
] + [
    ("meta.json", ("splits", "val"), "delete"), ("meta.json", ("splits", "train"), "delete"),
    ("meta.json", ("tokenizer", "n_vocab"), 65536), ("meta.json", ("tokenizer", "n_vocab"), 50256),
    ("meta.json", ("tokenizer", "eot"), 0), ("meta.json", ("tokenizer", "name"), "cl100k_base"),
] + [
    ("plan.npy.json", ("params", k), v) for k, vals in {
        "shards": (2, 5, 0, -1, True), "shard": (1, 3), "shuffle": (True, 1), "targets": (False, 0, None),
        "T": (31, 33, 10**19, -1), "span": (32, 34, 0), "stride": (0, 10**9), "boundaries": ("doc", "x"),
    }.items() for v in vals
] + [
    ("plan.npy.json", ("version",), v) for v in (-5, True, 2)
] + [
    ("plan.npy.json", ("source", k), v) for k in ("file", "bytes", "checksum", "dtype", "tokens")
    for v in ("../data/train.bin", "val.bin", -1, None, ">u2")
] + [
    ("plan.npy.json", ("materialized", k), v) for k in ("file", "shape", "dtype", "pad_id")
    for v in ("../data/plan.tokens.npy", "plan.npy", [1, 33], ">u2", -1, None)
] + [
    ("plan.npy.json", ("stats", k), v) for k in ("windows", "coverage", "covered_tokens") for v in (0, -1, 10**9)
]


def targeted(folder: Path, name: str, path: tuple, value) -> str:
    doc = json.loads((folder / name).read_text(encoding="utf-8"))
    parent = doc
    for k in path[:-1]:
        parent = parent[k]
    if value == "delete":
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    (folder / name).write_text(json.dumps(doc), encoding="utf-8")
    return f"{name}: {'.'.join(map(str, path))} {'deleted' if value == 'delete' else f'= {value!r}'}"


def test_verify_never_passes_a_mutation_a_training_run_would_see_nor_crashes_nor_hangs(sound, tmp_path):
    base_view = training_view(sound)
    assert run_verify(sound)[0] == 0
    rng = random.Random(SEED)
    kinds = [m for m, w in MUTATORS for _ in range(w)]
    counts: Counter = Counter()
    slipped = []
    for k in range(MUTATIONS + len(TARGETED)):
        work = tmp_path / f"m{k}"
        shutil.copytree(sound, work, ignore=shutil.ignore_patterns(".*"))
        if k < len(TARGETED):
            what = targeted(work, *TARGETED[k])
        else:
            what = rng.choice(kinds)(rng, work)
        try:
            view = training_view(work)
        except Exception:
            view = None  # a training run could not read it at all
        code, out = run_verify(work)
        assert code in (0, 1, 2), (what, code, out)
        assert "internal error" not in out and "Traceback" not in out, (what, out)
        changed = view != base_view
        counts["mutations"] += 1
        counts["changed" if changed else "unchanged"] += 1
        counts[f"exit {code}"] += 1
        if changed and code == 0:
            slipped.append((what, out[-600:]))
        if not changed and code == 0:
            counts["harmless passed"] += 1
        shutil.rmtree(work)
    print(f"\nfuzz figures: {dict(counts)}")
    assert not slipped, [w for w, _ in slipped]
    assert counts["changed"] >= (MUTATIONS + len(TARGETED)) // 3  # a good share are changes that matter


def test_reliability_doc_quotes_the_fuzz_figures():
    doc = (REPO / "docs" / "reliability.md").read_text(encoding="utf-8")
    assert f"{MUTATIONS} seeded mutations" in doc and f"random.Random({SEED})" in doc
    assert f"plus {len(TARGETED)}" in doc and f"{MUTATIONS + len(TARGETED)} mutations" in doc
