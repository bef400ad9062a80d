"""Adversarial inputs: each kind below is built here and its documented outcome asserted.

An outcome is the exit code, a fragment of the one error line (or verify's report) naming the
file and position, and what is written: for a success, train.bin equals tiktoken's ids of the
texts listed (computed here with ``ref_gpt2``); for a failure, nothing at all. The table in
docs/reliability.md lists every kind id; ``test_reliability_doc_matches_the_suite`` checks it.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from winsample import disk, formats
from winsample.cli import main
from winsample.encode import encode_corpus

from .conftest import CORPUS, REPO
from .encode import test_faults

EOT = 50256
MIB = 1 << 20  # sources.READ_BYTES: one read


@dataclass
class Kind:
    id: str
    make: Callable[[Path], list]  # builds the input under tmp, returns argv after `winsample`
    code: int
    needles: tuple = ()  # in the error line (encode, windows) or the report (verify)
    texts: Callable[[Path], list] | None = None  # success: train.bin == tiktoken of these, EOT after each
    isolate: bool = False  # run as a subprocess with a timeout (could hang if the guard broke)
    extra: Callable | None = field(default=None, repr=False)  # (tmp, result) → more assertions


def enc(*inputs, more=()):
    """argv of encode into tmp/out, everything in train.bin (val fraction 0), one worker."""
    return lambda tmp: ["encode", *[i(tmp) if callable(i) else tmp / i for i in inputs], "-o", tmp / "out",
                        "--val-fraction", "0", "--workers", "1", *more]


def file(name: str, data: bytes | str):
    def make(tmp):
        p = tmp / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data.encode() if isinstance(data, str) else data)
        return p
    return make


def folder(name: str, **files):
    def make(tmp):
        for n, data in files.items():
            file(f"{name}/{n}", data)(tmp)
        return tmp / name
    return make


def words(nbytes: int) -> str:
    """nbytes of ASCII prose-like text without a newline."""
    base = "the quick brown fox jumps over the lazy dog 12345 "
    return (base * (nbytes // len(base) + 1))[:nbytes]


def jl(**obj) -> str:
    return json.dumps(obj) + "\n"


# --- data folders for verify / windows kinds ---------------------------------------------------------


def data_folder(tmp) -> Path:
    src = tmp / "docs"
    src.mkdir(exist_ok=True)
    play = (CORPUS / "hamlet.txt").read_text(encoding="utf-8")
    for i in range(8):  # distinct text: a sound folder passes every verify check (see the test below)
        (src / f"{i}.txt").write_text(play[i * 3000 : (i + 1) * 3000])
    out = tmp / "data"
    encode_corpus([str(src)], out, split="tail", val_fraction=0.2, workers=1)
    return out


def with_plan(tmp, edit: Callable[[Path], None]) -> list:
    data = data_folder(tmp)
    r = CliRunner().invoke(main, ["windows", str(data / "train.bin"), "-T", "64", "-o", str(tmp / "plan.npy"), "-q"])
    assert r.exit_code == 0, r.stderr
    edit(tmp / "plan.npy")
    return ["verify", data, "--plan", tmp / "plan.npy", "--show", "0"]


def bad_bin(tmp, data: bytes, cmd: str) -> list:
    p = tmp / "bad.bin"
    p.write_bytes(data)
    if cmd == "verify":
        return ["verify", p, "--show", "0"]
    return ["windows", p, "-T", "4", "-o", tmp / "p.npy"]


def plan_fields(fields):
    def edit(p):
        plan = np.load(p)
        np.save(p, np.zeros(len(plan), dtype=fields))
    return edit


def side_edit(fn):
    def edit(p):
        side = json.loads(formats.plan_sidecar(p).read_text())
        fn(side)
        formats.plan_sidecar(p).write_text(json.dumps(side))
    return edit


def fifo(name):
    def make(tmp):
        p = tmp / name
        p.parent.mkdir(parents=True, exist_ok=True)
        os.mkfifo(p)
        return p
    return make


def symlink(name, target):
    def make(tmp):
        p = tmp / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.symlink_to(target)
        return p
    return make


def both(*makers):
    """Run several builders; the last one's path is the input."""
    def make(tmp):
        for m in makers:
            last = m(tmp)
        return last
    return make


NON_UTF8 = os.fsdecode(b"caf\xe9 \xff.txt")  # a name that is not UTF-8: Python surrogate-escapes it
BOUNDARY_OK = words(MIB - 1) + "€ and on"  # the 3 bytes of € straddle the first 1 MiB read
BOUNDARY_BAD = words(MIB - 1).encode() + b"\xe2\x82X more"  # € cut short across the read boundary
LONG_LINE = words(3 * MIB)  # 3 reads, 3 pieces: the paths a 50 MB line takes
LINE_50MB = words(50 * 10**6)  # the sizes, once each: a plain line and a JSONL record
LINE_100MB = words(100 * 10**6 - 13)  # + '{"text": ""}\n' = 100 MB of JSONL line
DEEP = '{"text": "deep", "n": ' + "[" * 100_000 + "]" * 100_000 + "}\n"


def _meta_paths(tmp, r):
    return [i["path"] for i in formats.read_meta(tmp / "out" / "meta.json")["inputs"]]


KINDS = [
    # --- text bytes ---
    Kind("utf8-char-across-read-boundary", enc(file("a.txt", BOUNDARY_OK)), 0, texts=lambda t: [BOUNDARY_OK]),
    Kind("invalid-utf8-across-read-boundary", enc(file("a.txt", BOUNDARY_BAD)), 1,
         ("a.txt: invalid UTF-8 at byte 1048575 (line 1)", "--errors replace")),
    Kind("truncated-utf8-at-eof", enc(file("a.txt", b"ends in \xe2\x82")), 1, ("a.txt: invalid UTF-8 at byte 8",)),
    Kind("overlong-encoding", enc(file("a.txt", b"slash \xc0\xaf here")), 1, ("a.txt: invalid UTF-8 at byte 6", "c0 af")),
    Kind("invalid-utf8-replaced", enc(file("a.txt", b"x \xc0\xaf y"), more=["--errors", "replace"]), 0,
         texts=lambda t: ["x \ufffd\ufffd y"]),
    Kind("bom-dropped", enc(file("a.txt", b"\xef\xbb\xbfHello")), 0, texts=lambda t: ["Hello"]),  # #33: a BOM is no text
    Kind("crlf-and-lone-cr", enc(file("a.txt", b"one\r\ntwo\rthree\n")), 0, texts=lambda t: ["one\r\ntwo\rthree\n"]),
    Kind("nul-byte", enc(file("a.txt", b"text\x00more")), 1, ("a.txt: binary file (NUL byte at byte 4)",)),
    Kind("long-line", enc(file("a.txt", LONG_LINE)), 0, texts=lambda t: [LONG_LINE]),
    Kind("line-of-50-mb", enc(file("a.txt", LINE_50MB), more=["--workers", "2"]), 0, texts=lambda t: [LINE_50MB]),
    Kind("empty-file-skipped", enc(folder("in", **{"a.txt": "real", "b.txt": ""})), 0, texts=lambda t: ["real"]),
    Kind("whitespace-only-file-skipped", enc(folder("in", **{"a.txt": "real", "b.txt": " \t \u3000 "})), 0,
         texts=lambda t: ["real"]),
    Kind("only-newlines-file-skipped", enc(folder("in", **{"a.txt": "\n" * 1000, "b.txt": "real"})), 0,
         texts=lambda t: ["real"]),
    Kind("no-text-at-all", enc(folder("in", **{"a.txt": "", "b.txt": "\n\n"})), 1, ("no document has any text",)),
    Kind("endoftext-literal", enc(file("a.txt", "before <|endoftext|> after")), 0,
         texts=lambda t: ["before <|endoftext|> after"]),
    # --- JSONL ---
    Kind("jsonl-long-line", enc(file("a.jsonl", jl(text=LONG_LINE))), 0, texts=lambda t: [LONG_LINE]),
    Kind("jsonl-line-of-100-mb", enc(file("a.jsonl", jl(text=LINE_100MB)), more=["--workers", "2"]), 0,
         texts=lambda t: [LINE_100MB]),
    Kind("jsonl-lone-surrogate-escape", enc(file("a.jsonl", '{"text": "a\\ud800b"}\n')), 0,
         texts=lambda t: ["a\ud800b"]),  # tiktoken's encode_ordinary turns it into U+FFFD
    Kind("jsonl-escaped-nul-is-text", enc(file("a.jsonl", '{"text": "a\\u0000b"}\n')), 0, texts=lambda t: ["a\x00b"]),
    Kind("jsonl-field-number", enc(file("a.jsonl", jl(text="ok") + jl(text=3.5))), 1, ("a.jsonl:2: field 'text' is float",)),
    Kind("jsonl-field-null", enc(file("a.jsonl", jl(text=None))), 1, ("a.jsonl:1: field 'text' is null, not a string",)),
    Kind("jsonl-field-list", enc(file("a.jsonl", jl(text=["a"]))), 1, ("a.jsonl:1: field 'text' is list",)),
    Kind("jsonl-duplicate-keys-last-wins", enc(file("a.jsonl", '{"text": "first", "text": "second"}\n')), 0,
         texts=lambda t: ["second"]),
    Kind("jsonl-deeply-nested", enc(file("a.jsonl", jl(text="ok") + DEEP)), 1, ("a.jsonl:2: JSON nested too deeply",)),
    Kind("jsonl-line-not-object", enc(file("a.jsonl", "[1, 2]\n")), 1, ("a.jsonl:1: a JSONL line must be an object",)),
    Kind("jsonl-empty-string-skipped", enc(file("a.jsonl", jl(text="") + jl(text="kept"))), 0, texts=lambda t: ["kept"]),
    # --- compressed ---
    Kind("gzip-truncated", enc(file("a.txt.gz", gzip.compress(words(50_000).encode())[:-30])), 1,
         ("a.txt.gz: broken gzip data",)),
    Kind("gz-not-gzip", enc(file("a.jsonl.gz", jl(text="plain"))), 1, ("a.jsonl.gz: not gzip data: its first bytes are not gzip's magic number", "Not a gzipped file")),
    # --- files and folders ---
    Kind("symlink-loop-folder-not-followed", enc(both(folder("in", **{"a.txt": "once"}), symlink("in/sub/up", ".."))), 0,
         texts=lambda t: ["once"]),
    Kind("symlink-loop-file", enc(both(folder("in", **{"a.txt": "x"}), symlink("in/loop.txt", "loop.txt"), lambda t: t / "in")), 2,
         ("loop.txt: cannot read: Too many levels of symbolic links",)),
    Kind("symlink-loop-argument", enc(both(symlink("l1.txt", "l2.txt"), symlink("l2.txt", "l1.txt"), lambda t: t / "l1.txt")), 2,
         ("l1.txt: cannot read: Too many levels of symbolic links",)),
    Kind("fifo-argument", enc(fifo("pipe.txt")), 2, ("pipe.txt: not a regular file or folder",), isolate=True),
    Kind("fifo-in-folder", enc(both(folder("in", **{"a.txt": "x"}), fifo("in/pipe.txt"), lambda t: t / "in")), 2,
         ("pipe.txt: not a regular file (a FIFO",), isolate=True),
    Kind("name-with-spaces", enc(file("my file .txt", "spaced")), 0, texts=lambda t: ["spaced"],
         extra=lambda t, r: _meta_paths(t, r) == [str(t / "my file .txt")]),
    Kind("name-not-utf8", enc(file(NON_UTF8, "named oddly")), 0, texts=lambda t: ["named oddly"],
         extra=lambda t, r: _meta_paths(t, r) == [str(t).replace("\\", "\\\\") + "/caf\\xe9 \\xff.txt"]),
    Kind("name-not-utf8-bad-content", enc(file(NON_UTF8, b"\xff")), 1, ("caf", ".txt: invalid UTF-8 at byte 0")),
    # --- token files and plans ---
    Kind("bin-1-byte-verify", lambda t: bad_bin(t, b"\x01", "verify"), 1, ("dtype_divisible", "bad.bin", "1 stray byte")),
    Kind("bin-1-byte-windows", lambda t: bad_bin(t, b"\x01", "windows"), 2, ("bad.bin: 1 bytes is not a multiple of 2",)),
    Kind("bin-all-65535", lambda t: bad_bin(t, b"\xff\xff" * 5000, "verify"), 1, ("vocab_range", "65535")),
    Kind("plan-wrong-dtype", lambda t: with_plan(t, plan_fields([(n, "<f8") for n in formats.PLAN_DTYPE.names])), 1,
         ("plan.npy", "has dtype float64, expected an integer")),
    Kind("plan-wrong-fields", lambda t: with_plan(t, plan_fields([("start", "<i8"), ("length", "<i4")])), 1,
         ("plan.npy", "not a window plan: fields")),
    Kind("sidecar-lies-about-checksum", lambda t: with_plan(t, side_edit(lambda s: s["source"].update(checksum="xxh3_128:" + "0" * 32))), 1,
         ("plan_bounds", "plan.npy", "made for another file", "xxh3_128:000000")),
    Kind("sidecar-lies-about-size", lambda t: with_plan(t, side_edit(lambda s: s["source"].update(bytes=s["source"]["bytes"] + 2))), 1,
         ("plan_bounds", "plan.npy", "made for another file")),
    Kind("meta-json-not-json", lambda t: (data_folder(t) / "meta.json").write_text("{oops") and ["verify", t / "data", "--show", "0"], 1,
         ("meta.json", "not valid JSON")),
]


# --- issue #19: the classes of defect an outside probe found -----------------------------------------
# Each kind below is one case of a class; docs/reliability.md lists them under their class.

_SNAP: dict = {}


def snapshot(folder: Path) -> dict:
    """Every file under ``folder`` (name → bytes), hidden ones included."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def on_data(argv_of, edit=None, plan=False):
    """Build the data folder (and a plan with ``plan``), apply ``edit(tmp)``, remember every
    file, and return the argv ``argv_of(tmp)``; ``unchanged`` then asserts nothing was touched."""
    def make(tmp):
        data = data_folder(tmp)
        if plan:
            r = CliRunner().invoke(main, ["windows", str(data / "train.bin"), "-T", "64", "-o", str(tmp / "plan.npy"), "-q"])
            assert r.exit_code == 0, r.stderr
        if edit:
            edit(tmp)
        _SNAP[tmp] = snapshot(tmp)
        return argv_of(tmp)
    return make


def unchanged(tmp, r) -> bool:
    after = snapshot(tmp)
    after = {k: v for k, v in after.items() if not k.endswith(disk.LOCK_NAME)}
    before = {k: v for k, v in _SNAP.pop(tmp).items() if not k.endswith(disk.LOCK_NAME)}
    assert after == before, sorted(set(after) ^ set(before)) or [k for k in after if after[k] != before.get(k)]
    return True


def plan_of(tmp, edit_rows=None, edit_side=None, T=64, more=()):
    """A plan of data/train.bin edited in place: rows (a structured array, any dtype) and sidecar."""
    data = data_folder(tmp)
    r = CliRunner().invoke(main, ["windows", str(data / "train.bin"), "-T", str(T), "-o", str(tmp / "plan.npy"), "-q", *more])
    assert r.exit_code == 0, r.stderr
    if edit_rows:
        rows = np.load(tmp / "plan.npy")
        np.save(tmp / "plan.npy", edit_rows(rows))
    if edit_side:
        side = json.loads(formats.plan_sidecar(tmp / "plan.npy").read_text())
        edit_side(side)
        formats.plan_sidecar(tmp / "plan.npy").write_text(json.dumps(side))
    return ["verify", data, "--plan", tmp / "plan.npy", "--show", "0"]


def widen(field, value, dtype="<i8"):
    """Rows re-stored with ``field`` as ``dtype`` and row 0's ``field`` set to ``value``."""
    def edit(rows):
        dt = [(n, dtype if n == field else rows.dtype[n]) for n in rows.dtype.names]
        out = rows.astype(dt)
        out[field][0] = value
        return out
    return edit


def npy_claiming(rows: int, dtype="<i8"):
    """.npy bytes whose header claims ``rows`` rows but holds 3."""
    import io
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": dtype, "fortran_order": False, "shape": (rows,)})
    return buf.getvalue() + np.zeros(3, dtype).tobytes()


def parquet_file(name, texts=None, corrupt=False, raw_strings=None):
    def make(tmp):
        import pyarrow as pa
        import pyarrow.parquet as pq
        p = tmp / name
        if raw_strings is not None:  # a string column whose bytes are not UTF-8 (no validation on build)
            data = b"".join(raw_strings)
            offsets = np.cumsum([0] + [len(x) for x in raw_strings]).astype("<i4")
            arr = pa.Array.from_buffers(pa.string(), len(raw_strings), [None, pa.py_buffer(offsets.tobytes()), pa.py_buffer(data)])
            table = pa.table({"text": arr})
        else:
            table = pa.table({"text": texts})
        pq.write_table(table, p, compression="NONE", use_dictionary=False)
        if corrupt:  # scribble over the middle of the data pages, keep the footer
            b = bytearray(p.read_bytes())
            for i in range(8, len(b) // 2):
                b[i] = (b[i] * 7 + 13) & 0xFF
            p.write_bytes(bytes(b))
        return p
    return make


def deep_folder(depth):
    def make(tmp):
        fd = os.open(tmp, os.O_RDONLY)
        here = os.getcwd()
        try:
            os.chdir(tmp)
            os.mkdir("deep")
            os.chdir("deep")
            for _ in range(depth):
                os.mkdir("d")
                os.chdir("d")
            Path("a.txt").write_text("deep down")
        finally:
            os.chdir(here)
            os.close(fd)
        return tmp / "deep"
    return make


def rm_deep(top: Path) -> None:
    """Remove a folder nested thousands deep without recursion (``shutil.rmtree`` and pytest's
    own cleanup of old temp folders recurse per level and would fail on it)."""
    here = os.getcwd()
    os.chdir(top)
    depth = 0
    try:
        while True:
            for e in list(os.scandir(".")):
                if not e.is_dir(follow_symlinks=False):
                    os.unlink(e.name)
            subs = [e.name for e in os.scandir(".") if e.is_dir(follow_symlinks=False)]
            if subs:
                os.chdir(subs[0])
                depth += 1
                continue
            if depth == 0:
                break
            os.chdir("..")
            depth -= 1
            for e in list(os.scandir(".")):
                if e.is_dir(follow_symlinks=False) and not any(os.scandir(e.name)):
                    os.rmdir(e.name)
    finally:
        os.chdir(here)
    os.rmdir(top)


def gz_corrupt_body(tmp):
    b = bytearray(gzip.compress(words(50_000).encode()))
    b[20:50] = bytes(30)  # the deflate stream, not the header: "Error -3 while decompressing"
    p = tmp / "a.txt.gz"
    p.write_bytes(bytes(b))
    return p


def tampered_journal(tmp, journal):
    src = tmp / "in"
    src.mkdir()
    (src / "a.txt").write_text("first")
    (src / "b.txt").write_text("second")
    work = tmp / "out" / formats.PARTIAL_DIR
    work.mkdir(parents=True)
    (work / formats.PARTIAL_JOURNAL).write_text(journal)
    return src


def commit_mark(stage_of, names):
    """A stale staging folder whose COMMIT mark lists ``names``, and a victim file outside."""
    def edit(tmp):
        stage = stage_of(tmp)
        stage.mkdir(parents=True, exist_ok=True)
        (stage / "COMMIT").write_text(json.dumps(names) if not isinstance(names, str) else names)
        (tmp / "victim.txt").write_text("mine")
    return edit


def mat_plan(tmp, edit):
    """A --materialize plan of data/train.bin (and another one, other.npy, with -T 32), edited."""
    data = data_folder(tmp)
    for T, name in (("64", "plan.npy"), ("32", "other.npy")):
        r = CliRunner().invoke(main, ["windows", str(data / "train.bin"), "-T", T, "--materialize", "-o", str(tmp / name), "-q"])
        assert r.exit_code == 0, r.stderr
    edit(tmp / "plan.npy")
    return ["verify", data, "--plan", tmp / "plan.npy", "--show", "0"]


def poke_npy(path: Path, index: int, value: int) -> None:
    arr = np.load(path)
    arr.flat[index] = value if arr.flat[index] != value else value + 1
    np.save(path, arr)


def bare_u32(tmp):
    """uint32 ids of real text, no meta.json: nanoGPT's uint16 reading sees id, 0, id, 0, …"""
    data = data_folder(tmp)
    p = tmp / "wide.bin"
    np.fromfile(data / "train.bin", "<u2")[:4000].astype("<u4").tofile(p)
    return ["verify", p, "--show", "0"]


def meta_edit(tmp, edit):
    """The data folder with its meta.json edited by ``edit(dict)``: verify's argv."""
    data = data_folder(tmp)
    meta = json.loads((data / "meta.json").read_text())
    edit(meta)
    (data / "meta.json").write_text(json.dumps(meta))
    return ["verify", data, "--show", "0"]


def doc_start_moved(tmp, by: int):
    """The data folder with train's second document start moved ``by`` tokens: verify's argv."""
    data = data_folder(tmp)
    starts = np.load(data / "train.docs.npy")
    starts[1] += by
    np.save(data / "train.docs.npy", starts)
    return ["verify", data, "--show", "0"]


def pairs_meta_edit(tmp, edit):
    """A prompt/response dataset (a loss mask per split) with its meta.json edited by ``edit(dict)``: verify's argv."""
    src = tmp / "pairs.jsonl"
    src.write_text("".join(json.dumps({"prompt": f"Question {i}?", "response": f"Answer {i}."}) + "\n" for i in range(40)))
    r = CliRunner().invoke(main, ["encode", str(src), "--prompt-field", "prompt", "--response-field", "response",
                                  "-o", str(tmp / "sft"), "-q"])
    assert r.exit_code == 0, r.stderr
    meta = json.loads((tmp / "sft" / "meta.json").read_text())
    edit(meta)
    (tmp / "sft" / "meta.json").write_text(json.dumps(meta))
    return ["verify", tmp / "sft", "--show", "0"]


def pairs_mask_inverted(tmp):
    """A prompt/response dataset whose train mask is inverted, its checksum and trained count
    updated in meta.json, its records gone (nothing to encode again): verify's argv."""
    argv = pairs_meta_edit(tmp, lambda m: None)
    (tmp / "pairs.jsonl").unlink()
    sft = tmp / "sft"
    inv = (1 - np.fromfile(sft / "train.mask.bin", np.uint8)).astype(np.uint8)
    inv.tofile(sft / "train.mask.bin")
    meta = json.loads((sft / "meta.json").read_text())
    meta["splits"]["train"]["mask"].update(checksum=disk.checksum_file(sft / "train.mask.bin"), trained=int(inv.sum()))
    (sft / "meta.json").write_text(json.dumps(meta))
    return argv


def plan_txt(tmp):
    return tmp / "data" / "train.bin"


CLASS_KINDS = [
    # --- 1: an output never overwrites an input ---
    Kind("out-plan-over-its-bin", on_data(lambda t: ["windows", t / "data/train.bin", "-T", "64", "-o", t / "data/train.bin"]), 2,
         ("data/train.bin: is an input of this command",), extra=unchanged),
    Kind("out-plan-over-meta", on_data(lambda t: ["windows", t / "data/train.bin", "-T", "64", "-o", t / "data/meta.json"]), 2,
         ("data/meta.json: is an input",), extra=unchanged),
    Kind("out-txt-over-other-split", on_data(lambda t: ["windows", t / "data/train.bin", "-T", "64", "--format", "txt", "-o", t / "data/val.bin"]), 2,
         ("data/val.bin: is an input of this command or a file of the dataset it reads",), extra=unchanged),
    Kind("out-sidecar-over-meta", on_data(lambda t: ["windows", t / "data/train.bin", "-T", "64", "-o", t / "data/meta"]), 2,
         ("data/meta.json: is an input",), extra=unchanged),
    Kind("out-plan-over-doc-index", on_data(lambda t: ["windows", t / "data/train.bin", "-T", "64", "-o", t / "data/train.docs.npy"]), 2,
         ("train.docs.npy: is an input",), extra=unchanged),
    Kind("out-materialized-over-input", on_data(lambda t: ["windows", t / "data/train.bin", "-T", "64", "--materialize", "-o", t / "data/val.npy"],
                                                edit=lambda t: (t / "data/val.tokens.npy").symlink_to(t / "data/val.bin")), 2,
         ("val.tokens.npy: is an input", "the same file as"), extra=unchanged),
    Kind("out-through-symlink", on_data(lambda t: ["windows", t / "data/train.bin", "-T", "64", "--format", "txt", "-o", t / "link.txt"],
                                        edit=lambda t: (t / "link.txt").symlink_to(t / "data/train.bin")), 2,
         ("link.txt: is an input", "(the same file as"), extra=unchanged),
    Kind("out-plan-over-a-link-to-stdout", on_data(lambda t: ["windows", t / "data/train.bin", "-T", "64", "-o", t / "out.npy"],
                                                   edit=lambda t: (t / "out.npy").symlink_to("/proc/self/fd/1")), 2,
         ("out.npy: cannot write: it is a symbolic link",),
         extra=lambda t, r: os.readlink(t / "out.npy") == "/proc/self/fd/1" and not (t / "out.npy.json").exists()),
    Kind("out-plan-sidecar-is-a-link", on_data(lambda t: ["windows", t / "data/train.bin", "-T", "64", "--materialize", "-o", t / "s.npy"],
                                               edit=lambda t: (t / "s.npy.json").symlink_to("/proc/self/fd/1")), 2,
         ("s.npy.json: cannot write: it is a symbolic link",),
         extra=lambda t, r: os.readlink(t / "s.npy.json") == "/proc/self/fd/1" and not (t / "s.npy").exists()
         and not (t / "s.tokens.npy").exists()),
    Kind("out-through-hard-link", on_data(lambda t: ["windows", t / "data/train.bin", "-T", "64", "--format", "txt", "-o", t / "hard.bin"],
                                          edit=lambda t: os.link(t / "data/val.bin", t / "hard.bin")), 2,
         ("hard.bin: is an input", "(the same file as"), extra=unchanged),
    Kind("out-through-other-spelling", on_data(lambda t: ["windows", t / "data/train.bin", "-T", "64", "-o", t / "data/../data/./meta.json"]), 2,
         ("meta.json: is an input",), extra=unchanged),
    Kind("out-meta-option-target", on_data(lambda t: ["windows", t / "data/train.bin", "--meta", t / "data/meta.json", "-T", "64", "--format", "txt",
                                                      "-o", t / "data/meta.json"]), 2, ("meta.json: is an input",), extra=unchanged),
    Kind("out-plot-over-bin", on_data(lambda t: ["verify", t / "data", "--plan", t / "plan.npy", "--plot", t / "data/train.bin"], plan=True), 2,
         ("data/train.bin: is an input",), extra=unchanged),
    Kind("out-plot-over-sidecar", on_data(lambda t: ["verify", t / "data", "--plan", t / "plan.npy", "--plot", t / "plan.npy.json"], plan=True), 2,
         ("plan.npy.json: is an input",), extra=unchanged),
    Kind("out-plot-over-bin-no-path", on_data(lambda t: ["verify", "--plan", t / "plan.npy", "--plot", t / "data/train.bin"], plan=True), 2,
         ("data/train.bin: is an input",), extra=unchanged),  # the dataset found from the plan's sidecar
    Kind("out-plot-over-doc-index-no-path", on_data(lambda t: ["verify", t / "plan.npy", "--plot", t / "data/val.docs.npy"], plan=True), 2,
         ("data/val.docs.npy: is an input",), extra=unchanged),
    Kind("out-mix-over-source-dataset", on_data(lambda t: ["mix", f"a=1:{t / 'plan.npy'}", "-o", t / "data/train.docs.npy"], plan=True), 2,
         ("data/train.docs.npy: is an input",), extra=unchanged),
    Kind("out-mix-over-source-meta", on_data(lambda t: ["mix", f"a=1:{t / 'plan.npy'}", "-o", t / "data/meta.npy"],
                                             edit=lambda t: os.link(t / "data/meta.json", t / "data/meta.npy"), plan=True), 2,
         ("data/meta.npy: is an input", "(the same file as"), extra=unchanged),
    Kind("out-windows-meta-elsewhere-over-own-meta", on_data(lambda t: ["windows", t / "data/train.bin", "--meta", t / "m2/meta.json", "-T", "64",
                                                                        "-o", t / "data/own.npy"],
                                                             edit=lambda t: ((t / "m2").mkdir(), shutil.copy(t / "data/meta.json", t / "m2/meta.json"),
                                                                             os.link(t / "data/meta.json", t / "data/own.npy"))), 2,
         ("data/own.npy: is an input",), extra=unchanged),
    Kind("out-windows-input-in-plan-staging-folder", on_data(lambda t: ["windows", t / f".p.npy{disk.STAGING_DIR}/train.bin", "-T", "64", "-o", t / "p.npy"],
                                                             edit=lambda t: shutil.copytree(t / "data", t / f".p.npy{disk.STAGING_DIR}")), 2,
         (f".p.npy{disk.STAGING_DIR}/train.bin: is inside", "which this run writes and removes"), extra=unchanged),
    Kind("out-plan-over-encode-lock", on_data(lambda t: ["windows", t / "data/train.bin", "-T", "64", "-o", t / f"data/{disk.LOCK_NAME}"],
                                              edit=lambda t: (t / "data" / disk.LOCK_NAME).write_text("4242\n")), 2,
         (f"data/{disk.LOCK_NAME}: is an input",), extra=unchanged),
    Kind("out-encode-over-input", enc(file("in/train.bin", "a text file named like a token file"), more=[]), 0,
         texts=lambda t: ["a text file named like a token file"]),  # control: -o tmp/out, no clash
    Kind("out-encode-into-inputs-folder", lambda t: ["encode", file("in/train.bin", "text")(t), "-o", t / "in"], 2,
         ("in/train.bin: is an input",)),
    Kind("out-encode-input-in-layout-folder", lambda t: ["encode", file("in/llmc/a.txt", "text")(t), "-o", t / "in"], 2,
         ("in/llmc/a.txt: is inside", "llmc, which this run writes")),
    Kind("out-encode-input-is-the-lock-file", lambda t: ["encode", file(f"in/{disk.LOCK_NAME}", "my text\n")(t), "--format", "text",
                                                          "-o", t / "in", "--val-fraction", "0"], 2,
         (f"in/{disk.LOCK_NAME}: is an input",), extra=lambda t, r: (t / "in" / disk.LOCK_NAME).read_text() == "my text\n"),
    Kind("out-encode-input-in-work-folder", lambda t: ["encode", file("in/.partial/a.txt", "text")(t), "-o", t / "in", "--val-fraction", "0"], 2,
         ("in/.partial/a.txt: is inside", ".partial, which this run writes"),
         extra=lambda t, r: (t / "in/.partial/a.txt").read_text() == "text"),
    Kind("out-encode-input-in-staging-folder", lambda t: ["encode", file(f"in/{disk.STAGING_DIR}/a.txt", "text")(t), "-o", t / "in",
                                                           "--val-fraction", "0"], 2,
         (f"in/{disk.STAGING_DIR}/a.txt: is inside", f"{disk.STAGING_DIR}, which this run writes"),
         extra=lambda t, r: (t / "in" / disk.STAGING_DIR / "a.txt").read_text() == "text"),
    Kind("out-encode-over-megatron-index", lambda t: ["encode", file("in/train.idx", "text")(t), "-o", t / "in"], 2,
         ("in/train.idx: is an input",)),
    # --- 2: names read from metadata stay inside their folder ---
    Kind("commit-mark-escapes-out-dir", on_data(lambda t: ["encode", t / "docs", "-o", t / "data", "--split", "tail", "--val-fraction", "0.2", "--workers", "1"],
                                                edit=commit_mark(lambda t: t / "data" / disk.STAGING_DIR, ["../victim.txt"])), 1,
         (f"{disk.STAGING_DIR}/COMMIT: corrupt commit mark", "nothing was moved"), extra=unchanged),
    Kind("commit-mark-absolute-path", on_data(lambda t: ["encode", t / "docs", "-o", t / "data", "--workers", "1"],
                                              edit=commit_mark(lambda t: t / "data" / disk.STAGING_DIR, ["/etc/passwd"])), 1,
         ("corrupt commit mark",), extra=unchanged),
    Kind("commit-mark-not-json", on_data(lambda t: ["encode", t / "docs", "-o", t / "data", "--workers", "1"],
                                         edit=commit_mark(lambda t: t / "data" / disk.STAGING_DIR, "{[")), 1,
         ("corrupt commit mark",), extra=unchanged),
    Kind("plan-commit-mark-escapes", on_data(lambda t: ["windows", t / "data/train.bin", "-T", "64", "-o", t / "p/plan.npy"],
                                             edit=commit_mark(lambda t: t / "p" / f".plan.npy{disk.STAGING_DIR}", ["../victim.txt"])), 1,
         ("COMMIT: corrupt commit mark",), extra=unchanged),
    Kind("journal-names-outside", enc(lambda t: tampered_journal(t, json.dumps({
         "format": "winsample-partial", "version": 1, "params": {}, "inputs": [],
         "writers": {"../../x": {"bytes": 0}}, "stats": {}})), more=["--resume"]), 0, texts=lambda t: ["first", "second"]),
    # --- 3: verify never passes corrupt data (the meta.json/sidecar field cases: tests/test_formats.py) ---
    Kind("plan-length-beyond-int32", lambda t: plan_of(t, widen("length", (1 << 32) + 65)), 1,
         ("plan.npy: row 0: length 4294967361 does not fit the plan's int32",)),
    Kind("plan-start-beyond-int64", lambda t: plan_of(t, widen("start", 1 << 63, "<u8")), 1, ("row 0: start 9223372036854775808 does not fit",)),
    Kind("materialized-of-another-plan", lambda t: mat_plan(t, lambda p: shutil.copy(p.parent / "other.tokens.npy", formats.materialized_path(p))), 1,
         ("materialized", "plan.tokens.npy", "the plan needs (")),
    Kind("materialized-one-id-edited", lambda t: mat_plan(t, lambda p: poke_npy(formats.materialized_path(p), 5, 17)), 1,
         ("materialized", "1 of", "rows differ from the plan's windows", "first: row 0")),
    Kind("materialized-not-in-sidecar", lambda t: mat_plan(t, side_edit(lambda s: s.pop("materialized"))), 1,
         ("plan.tokens.npy lies beside the plan but its sidecar does not describe it",)),
    Kind("sidecar-claims-shard-to-skip-coverage", lambda t: plan_of(t, lambda r: r[::4].copy(), lambda s: (
         s["params"].update(shards=2, shard=0), s["stats"].update(windows=(s["stats"]["windows"] + 3) // 4))), 1,
         ("a shard of 2 without plan_stats.windows", "coverage")),
    Kind("sidecar-claims-shuffle-to-hide-disorder", lambda t: plan_of(t, lambda r: r[::-1].copy(), lambda s: s["params"].update(
         shuffle=True, seed=1, epoch=0)), 1, ("order", "params.shuffle, but the rows are not the (seed 1, epoch 0) permutation",)),
    Kind("sidecar-claims-no-targets", lambda t: plan_of(t, edit_side=lambda s: s["params"].update(targets=False)), 1,
         ("params.span 65 but T 64 with targets false spans 64",)),
    Kind("bare-uint32-bin-read-as-uint16", lambda t: bare_u32(t), 1,
         ("dtype_divisible", "these look like uint32 ids read as uint16")),
    # class 2/3 cases in meta.json and sidecar fields (validated by formats' typed schema, issue #13)
    Kind("meta-split-file-escapes", lambda t: meta_edit(t, lambda m: m["splits"]["train"].update(file="../elsewhere/train.bin")), 1,
         ("meta", "'../elsewhere/train.bin'",)),
    Kind("meta-split-file-absolute", lambda t: meta_edit(t, lambda m: m["splits"]["val"].update(file="/etc/passwd")), 1,
         ("meta", "'/etc/passwd'",)),
    Kind("meta-doc-index-escapes", lambda t: meta_edit(t, lambda m: m["splits"]["train"].update(doc_index="../x.npy")), 1,
         ("meta", "'../x.npy'",)),
    Kind("meta-dtype-big-endian", lambda t: meta_edit(t, lambda m: m.update(dtype=">u2")), 1, ("meta", "'>u2'",)),
    Kind("meta-version-negative", lambda t: meta_edit(t, lambda m: m.update(version=-5)), 1, ("meta", "version",)),
    Kind("meta-version-bool", lambda t: meta_edit(t, lambda m: m.update(version=True)), 1, ("meta", "version",)),
    Kind("meta-entry-removed-file-kept", lambda t: meta_edit(t, lambda m: m["splits"].pop("val")), 1, ("meta", "val.bin",)),
    Kind("doc-index-start-moved-into-a-document", lambda t: doc_start_moved(t, 3), 1,
         ("meta", "train.docs.npy: 1 document(s) do not end with the EOT 50256 encode appended", "a start moved into a document?")),
    Kind("mask-inverted-with-its-checksum", pairs_mask_inverted, 1,
         ("loss_mask", "document 0 is not its prompt (untrained) then its response (trained)")),
    Kind("meta-mask-entry-removed-file-kept", lambda t: pairs_meta_edit(t, lambda m: m["splits"]["train"].pop("mask")), 1,
         ("meta", "train.mask.bin is in", "records no loss mask")),
    Kind("sidecar-materialized-escapes", lambda t: mat_plan(t, side_edit(lambda s: s["materialized"].update(file="../data/val.bin"))), 1,
         ("plan.npy", "'../data/val.bin'",)),
    # --- 4: nothing hangs; special files refused before they are opened ---
    Kind("fifo-plan-verify", lambda t: on_data(lambda t: ["verify", t / "data", "--plan", fifo("p.npy")(t), "--show", "0"])(t), 2,
         ("p.npy: not a regular file (a FIFO",), isolate=True),
    Kind("fifo-sidecar-verify", on_data(lambda t: ["verify", t / "data", "--plan", t / "plan.npy", "--show", "0"], plan=True,
                                        edit=lambda t: (formats.plan_sidecar(t / "plan.npy").unlink(), fifo("plan.npy.json")(t))), 2,
         ("plan.npy.json: not a regular file (a FIFO",), isolate=True),
    Kind("fifo-meta-verify", on_data(lambda t: ["verify", t / "data", "--show", "0"], edit=lambda t: ((t / "data/meta.json").unlink(), fifo("data/meta.json")(t))), 2,
         ("meta.json: not a regular file (a FIFO",), isolate=True),
    Kind("fifo-meta-windows", on_data(lambda t: ["windows", t / "data/train.bin", "-T", "8", "-o", t / "p.npy"],
                                      edit=lambda t: ((t / "data/meta.json").unlink(), fifo("data/meta.json")(t))), 2,
         ("meta.json: not a regular file (a FIFO",), isolate=True),
    Kind("fifo-doc-index-windows", on_data(lambda t: ["windows", t / "data/train.bin", "-T", "8", "--boundaries", "doc", "-o", t / "p.npy"],
                                           edit=lambda t: ((t / "data/train.docs.npy").unlink(), fifo("data/train.docs.npy")(t))), 2,
         ("train.docs.npy: not a regular file (a FIFO",), isolate=True),
    Kind("fifo-bin-windows", lambda t: ["windows", fifo("a.bin")(t), "-T", "8", "-o", t / "p.npy"], 2, ("a.bin: not a regular file",), isolate=True),
    Kind("fifo-bin-verify", lambda t: ["verify", fifo("a.bin")(t)], 2, ("a.bin: not a regular file",), isolate=True),
    Kind("fifo-tokenizer-file", lambda t: enc(file("a.txt", "x"), more=["--tokenizer-file", fifo("ranks.fifo")(t)])(t), 2,
         ("ranks.fifo: not a regular file; expected a tokenizer file",), isolate=True,
         extra=None),
    Kind("fifo-meta-option-windows", on_data(lambda t: ["windows", t / "data/train.bin", "--meta", fifo("m.json")(t), "-T", "8", "-o", t / "p.npy"]), 2,
         ("m.json: not a regular file (a FIFO",), isolate=True),
    Kind("fifo-inspect", lambda t: ["inspect", fifo("a.bin")(t)], 2, ("a.bin: not a regular file",), isolate=True),
    Kind("shards-a-billion", lambda t: bad_bin(t, b"\x01\x00" * 100, "windows") + ["--shards", "1000000000"], 2,
         ("--shards 1000000000: at most 65,536",), isolate=True),
    Kind("npy-header-claims-2-40-rows", lambda t: plan_of(t) and (t / "plan.npy").write_bytes(npy_claiming(1 << 40, formats.PLAN_DTYPE.descr))
         and ["verify", t / "data", "--plan", t / "plan.npy", "--show", "0"], 1, ("plan.npy", "the .npy header says (1099511627776,)",), isolate=True),
    Kind("doc-index-header-claims-2-40", on_data(lambda t: ["windows", t / "data/train.bin", "-T", "8", "--boundaries", "doc", "-o", t / "p.npy"],
                                                 edit=lambda t: (t / "data/train.docs.npy").write_bytes(npy_claiming(1 << 40))), 1,
         ("train.docs.npy: not a document index", "header says (1099511627776,)"), isolate=True),
    # --- 5: bad input is exit 1 naming the file and position, never "internal error" ---
    Kind("gz-corrupt-body", enc(gz_corrupt_body), 1, ("a.txt.gz: broken gzip data near compressed byte", "Error -3 while decompressing")),
    Kind("parquet-corrupt-pages", enc(parquet_file("a.parquet", ["some text " * 50] * 40, corrupt=True)), 1,
         ("a.parquet: row 0 or after: unreadable Parquet data",)),
    Kind("parquet-not-utf8", enc(parquet_file("a.parquet", raw_strings=[b"fine", b"caf\xe9"])), 1,
         ("a.parquet: row 1: column 'text' is not UTF-8",)),
    Kind("jsonl-number-5000-digits", enc(file("a.jsonl", jl(text="ok") + '{"text": "x", "n": ' + "9" * 5000 + "}\n")), 1,
         ("a.jsonl:2: JSON value cannot be read", "4300 digits")),
    Kind("folder-1000-deep", enc(deep_folder(1000)), 0, texts=lambda t: ["deep down"]),
    Kind("t-10-to-the-19", lambda t: bad_bin(t, b"\x01\x00" * 100, "windows")[:2] + ["-T", str(10**19), "-o", t / "p.npy"], 2,
         ("-T 10000000000000000000 is larger than a plan can hold",)),
    Kind("seed-negative", lambda t: bad_bin(t, b"\x01\x00" * 100, "windows") + ["--random-offset", "--seed", "-1"], 2,
         ("--seed must be in [0, 2**64), got -1",)),
    Kind("workers-a-hundred-million", enc(file("a.txt", "x"), more=["--workers", "100000000"]), 2,
         ("--workers 100000000: at most 1024 encoder processes",), isolate=True),
    Kind("min-coverage-nan", on_data(lambda t: ["verify", t / "data", "--plan", t / "plan.npy", "--min-coverage", "nan"], plan=True), 2,
         ("--min-coverage nan: must be a share in [0, 1]",)),
    Kind("sidecar-is-a-folder", on_data(lambda t: ["verify", t / "data", "--plan", t / "plan.npy", "--show", "0"], plan=True,
                                        edit=lambda t: (formats.plan_sidecar(t / "plan.npy").unlink(), formats.plan_sidecar(t / "plan.npy").mkdir())), 2,
         ("plan.npy.json: a folder; expected a plan sidecar",)),
    Kind("decode-ids-not-in-tokenizer", lambda t: bad_bin(t, b"\xff\xff" * 50, "windows") + ["--format", "jsonl", "--decode", "-o", "-"], 1,
         ("bad.bin: token 0: id 65535 is not in the tokenizer",)),
    Kind("journal-tampered", enc(lambda t: tampered_journal(t, '{"format": "winsample-partial", "version": 1, "writers": 7}'), more=["--resume"]), 0,
         texts=lambda t: ["first", "second"]),
    Kind("journal-not-json", enc(lambda t: tampered_journal(t, "\x00garbage"), more=["--resume"]), 0, texts=lambda t: ["first", "second"]),
    # --- 6: no silent input loss ---
    Kind("suffixes-in-any-case", enc(folder("in", **{"B.TXT": "upper", "c.JSONL": jl(text="jsonl"), "d.Md": "mixed"})), 0,
         texts=lambda t: ["upper", "jsonl", "mixed"]),
    Kind("out-empty-encode", lambda t: ["encode", file("a.txt", "x")(t), "-o", ""], 2, ("-o is empty",)),
    Kind("out-empty-windows", lambda t: bad_bin(t, b"\x01\x00" * 100, "windows")[:-2] + ["-o", ""], 2, ("-o is empty",)),
    # --- 8: small ones ---
    Kind("newline-in-file-name", enc(file("two\nlines.txt", b"bad \xff byte")), 1, ("two\\nlines.txt: invalid UTF-8 at byte 4",)),
    Kind("users-own-tmp-kept", on_data(lambda t: ["encode", t / "docs", "-o", t / "data", "--split", "tail", "--val-fraction", "0.2", "--workers", "1"],
                                       edit=lambda t: (t / "data/train.bin.tmp").write_text("my notes")), 0,
         extra=lambda t, r: (t / "data/train.bin.tmp").read_text() == "my notes"),
    Kind("meta-unreadable-exit-2", on_data(lambda t: ["verify", t / "data", "--show", "0"],
                                           edit=lambda t: ((t / "data/meta.json").unlink(), (t / "data/meta.json").mkdir())), 2,
         ("meta.json: a folder; expected meta",)),
    Kind("bin-unreadable-exit-2", on_data(lambda t: ["verify", t / "data", "--show", "0"],
                                          edit=lambda t: ((t / "data/train.bin").unlink(), (t / "data/train.bin").mkdir())), 2,
         ("train.bin: is a folder",)),
]
KINDS += CLASS_KINDS


def _run(argv, isolate):
    if isolate:
        r = subprocess.run([sys.executable, "-m", "winsample", *map(os.fsencode, map(str, argv))],
                           capture_output=True, timeout=30)  # a hang fails here, never blocks the suite
        return r.returncode, r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")
    r = CliRunner().invoke(main, [str(a) for a in argv])
    if r.exception and not isinstance(r.exception, SystemExit):
        raise r.exception
    return r.exit_code, r.stdout, r.stderr


@pytest.mark.parametrize("kind", KINDS, ids=[k.id for k in KINDS])
def test_adversarial_input_has_its_documented_outcome(tmp_path, kind, ref_gpt2):
    try:
        _check_kind(tmp_path, kind, ref_gpt2)
    finally:
        if (tmp_path / "deep").is_dir():  # folder-1000-deep: pytest could not remove it later
            rm_deep(tmp_path / "deep")


def _check_kind(tmp_path, kind, ref_gpt2):
    argv = kind.make(tmp_path)
    code, out, err = _run(argv, kind.isolate)
    assert code == kind.code, (out, err)
    if argv[0] == "verify" and kind.code == 1:
        report = out
        for n in kind.needles:
            assert n in report, (n, report)
        assert "verify: FAILED" in report
        return
    if kind.code:
        line = err.strip()
        assert "\n" not in line and line.startswith("error: "), err
        assert "internal error" not in line and "Traceback" not in err
        for n in kind.needles:
            assert n in line, (n, line)
        if argv[0] == "encode":  # nothing written
            written = tmp_path / "out"
            assert not written.exists() or (test_faults.data_set(written) == {} and test_faults.leftovers(written) == [])
        if kind.extra:
            assert kind.extra(tmp_path, (code, out, err))
        return
    if kind.extra:
        assert kind.extra(tmp_path, (code, out, err))
    if kind.texts is None:
        return
    out_dir = Path(argv[argv.index("-o") + 1])
    got = np.fromfile(out_dir / "train.bin", "<u2").tolist()
    expected = []
    for t in kind.texts(tmp_path):
        expected += ref_gpt2.encode_ordinary(t) + [EOT]
    assert got == expected
    assert got.count(EOT) == len(kind.texts(tmp_path))  # no text ever became the control id


def test_the_unedited_data_folder_and_plan_pass_verify(tmp_path):
    """The control for the verify kinds: they fail because of the edit, not the folder."""
    code, out, _ = _run(with_plan(tmp_path, lambda p: None), False)
    assert code == 0 and "verify: ok" in out, out


def test_there_are_at_least_30_kinds():
    assert len(KINDS) >= 30 and len({k.id for k in KINDS}) == len(KINDS)


_NOT_IN_DOC = {"test_adversarial_input_has_its_documented_outcome", "test_the_unedited_data_folder_and_plan_pass_verify",
               "test_there_are_at_least_30_kinds", "test_reliability_doc_matches_the_suite"}


def test_reliability_doc_matches_the_suite():
    """docs/reliability.md lists every kind and quotes the counts the tests enforce."""
    doc = (REPO / "docs" / "reliability.md").read_text(encoding="utf-8")
    listed = re.findall(r"^\| `([a-z0-9-]+)` \|", doc, flags=re.M)
    assert sorted(listed) == sorted(k.id for k in KINDS)
    assert f"{len(KINDS)} kinds of bad input" in doc and f"{len(CLASS_KINDS)} of them cases of the hardening classes" in doc
    mine = [n for n, v in globals().items() if n.startswith("test_") and callable(v) and v.__module__ == __name__]
    for test in [n for n in mine if n not in _NOT_IN_DOC]:
        assert f"`{test}`" in doc, test  # every class test is named on the page
    assert f"{test_faults.KILLS} `kill -9`" in doc and f"{test_faults.MATERIALIZE_KILLS} `kill -9`" in doc
    assert "outputs lost: 0" in doc


# --- issue #19: cases that need processes, signals or a patched system call ---------------------------

from winsample.encode import resume  # noqa: E402

from .encode.test_faults import _crash_after_checkpoints, _docs, encode_args, one_error_line, small_batches, wait_for  # noqa: E402,F401


def _children(pid: int) -> list[int]:
    try:
        return [int(x) for x in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True).stdout
        return [int(x) for x in out.split()]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.fixture
def reaped():
    """Popen objects a test starts; killed at the end whatever happened (a hang must not outlive it)."""
    started: list = []
    yield started
    for p in started:
        if p.poll() is None:
            for kid in _children(p.pid):
                try:
                    os.kill(kid, signal.SIGKILL)
                except OSError:
                    pass
            p.kill()
            p.wait()


def _encode_with_workers(tmp_path, kill_corpus, reaped):
    out = tmp_path / "out"
    # SIGHUP at its default in the child (a suite run under nohup passes SIG_IGN on, which winsample keeps)
    p = subprocess.Popen(encode_args(kill_corpus, out, 1, 2), stderr=subprocess.PIPE,
                         preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL))
    reaped.append(p)
    deadline = time.monotonic() + 30
    while len(_children(p.pid)) < 2 or not (out / formats.PARTIAL_DIR).exists():  # the pool is up and working
        assert p.poll() is None and time.monotonic() < deadline
        time.sleep(0.01)
    return p, out


from .encode.test_faults import kill_corpus  # noqa: E402,F401


def test_a_killed_worker_fails_the_run_with_one_line_and_no_hang(tmp_path, kill_corpus, reaped):
    p, out = _encode_with_workers(tmp_path, kill_corpus, reaped)
    os.kill(_children(p.pid)[0], signal.SIGKILL)
    _, err = p.communicate(timeout=30)  # before the fix: waited forever for the task the worker held
    assert p.returncode == 2
    line = one_error_line(err)
    assert "an encoder worker process" in line and "died (killed by signal SIGKILL)" in line
    assert test_faults.data_set(out) == {}


def test_sighup_interrupts_like_sigterm_one_line_no_brokenpipe_from_workers(tmp_path, kill_corpus, reaped):
    p, out = _encode_with_workers(tmp_path, kill_corpus, reaped)
    p.send_signal(signal.SIGHUP)
    _, err = p.communicate(timeout=30)
    assert p.returncode == 128 + signal.SIGHUP
    assert "SIGHUP" in one_error_line(err) and b"BrokenPipeError" not in err


def test_workers_end_quietly_when_the_main_process_is_killed(tmp_path, kill_corpus, reaped):
    p, out = _encode_with_workers(tmp_path, kill_corpus, reaped)
    kids = _children(p.pid)
    p.kill()
    _, err = p.communicate(timeout=30)  # the workers share the pipe: it closes only when they are gone too
    deadline = time.monotonic() + 10
    while any(_alive(k) for k in kids):
        assert time.monotonic() < deadline, "workers outlived the main process"
        time.sleep(0.05)
    assert err == b"", err.decode(errors="replace")[-2000:]


def test_an_unreadable_subfolder_fails_instead_of_being_skipped(tmp_path, monkeypatch):
    src = folder("in", **{"a.txt": "kept", "secret/b.txt": "would be lost"})(tmp_path)
    real = os.scandir

    def scandir(path):  # as a non-root user would see a chmod 000 folder (root reads it anyway)
        if Path(path).name == "secret":
            raise PermissionError(13, "Permission denied", str(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)
    r = CliRunner().invoke(main, ["encode", str(src), "-o", str(tmp_path / "out"), "--workers", "1"])
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr.strip() == f"error: {src / 'secret'}: cannot read folder: Permission denied; fix its permissions or leave it out"
    assert not (tmp_path / "out").exists()


def test_full_disk_while_writing_a_plan_names_the_file_exit_2(tmp_path):
    data = data_folder(tmp_path)
    (tmp_path / "p").mkdir()

    def limit():
        import resource

        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, 100_000))

    r = subprocess.run([sys.executable, "-m", "winsample", "windows", str(data / "train.bin"), "-T", "16", "--stride", "1",
                        "--materialize", "-o", str(tmp_path / "p" / "plan.npy")], capture_output=True, preexec_fn=limit, timeout=60)
    assert r.returncode == 2
    line = one_error_line(r.stderr)
    assert "plan" in line and "cannot write: file too large (a file-size limit was reached)" in line and "nothing was written" in line
    assert os.listdir(tmp_path / "p") == []


def test_two_plan_writers_at_once_never_mix_their_files(tmp_path):
    """Two `windows --materialize -o same.npy` of different -T, started together, 3 times: each
    exits 0 (they take turns), and the plan, sidecar and tokens left are one run's set."""
    data = data_folder(tmp_path)
    out = tmp_path / "same.npy"
    for _ in range(3):
        ps = [subprocess.Popen([sys.executable, "-m", "winsample", "windows", str(data / "train.bin"), "-T", T, "--materialize",
                                "-o", str(out), "-q"], stderr=subprocess.PIPE) for T in ("32", "48")]
        for p in ps:
            _, err = p.communicate(timeout=60)
            assert p.returncode == 0, err
        side = json.loads(formats.plan_sidecar(out).read_text())
        rows = np.load(out)
        toks = np.load(formats.materialized_path(out))
        assert toks.shape == (len(rows), side["params"]["span"]) == tuple(side["materialized"]["shape"])
        assert side["stats"]["windows"] == len(rows)
        tokens = np.fromfile(data / "train.bin", "<u2")
        assert all((toks[i] == tokens[s : s + side["params"]["span"]]).all() for i, s in enumerate(rows["start"][:50]))
        code, report, _ = _run(["verify", data, "--plan", out, "--show", "0"], False)
        assert code == 0, report


def test_a_tampered_real_checkpoint_is_discarded_and_the_run_starts_over(tmp_path, small_batches):
    src = _docs(tmp_path / "in")
    kw = dict(val_fraction=0.3, seed=5, workers=1)
    encode_corpus([str(src)], tmp_path / "clean", **kw)
    out = tmp_path / "out"
    journal = _crash_after_checkpoints(out, [str(src)], **kw)
    path = out / formats.PARTIAL_DIR / formats.PARTIAL_JOURNAL
    for bad, reason in [({"bytes": -2}, "writers.train.bytes is -2"), ({"documents": "3"}, "writers.train.documents is '3'"),
                        ({"bytes": journal["writers"]["train"]["bytes"] + 1}, "not a whole number of 2-byte tokens")]:
        j = json.loads(json.dumps(journal))
        j["writers"]["train"].update(bad)
        with pytest.raises(resume.Stale, match=reason):
            if resume.malformed(j) is not None:
                raise resume.Stale(resume.malformed(j))
            encode_mod_reopen(out, j)
    j = json.loads(json.dumps(journal))
    j["stats"]["documents"] = -1
    path.write_text(json.dumps(j))
    s = encode_corpus([str(src)], out, resume_partial=True, **kw)
    assert s["resumed"]["discarded"].endswith("malformed checkpoint (stats are not the counts a run keeps)")
    assert test_faults.data_set(out) == test_faults.data_set(tmp_path / "clean")


def encode_mod_reopen(out, journal):
    from winsample.encode.pipeline import SplitWriter as W

    probe = W.__new__(W)  # only reopen's checks: the item size, before any file is touched
    probe.item, probe.path = 2, out / formats.PARTIAL_DIR / "train.bin"
    probe.f = probe._starts_f = open(os.devnull, "rb")
    probe.reopen(journal["writers"]["train"])


_BLOCKED_CHILD = """
import os, sys, threading, time
from winsample import cli, windows
r, w = os.pipe()
threading.Thread(target=os.read, args=(r, 1)).start()  # a helper thread blocked in a read, not a daemon
def slow(*a, **k):
    print("running", flush=True)
    time.sleep(60)
windows.run = slow
sys.argv = ["winsample", "windows", "x.bin", "-T", "8", "-o", "p.npy"]
cli.entry()
"""


def test_a_signal_ends_the_process_even_with_a_helper_thread_blocked_in_a_read(tmp_path, reaped):
    p = subprocess.Popen([sys.executable, "-c", _BLOCKED_CHILD], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    reaped.append(p)
    assert p.stdout.readline() == b"running\n"
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=20)  # before cli.entry: "interrupted" printed, then waited for the thread forever
    assert p.returncode == 143
    assert one_error_line(err) == "error: interrupted by SIGTERM; nothing was written"
