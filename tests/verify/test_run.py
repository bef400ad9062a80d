"""`winsample verify`: every check on good data, and every bad input of issue 5 named by its check.

Inputs are built here with numpy and formats' writers; expected figures come from hand
arithmetic, brute force over Python sets, xxhash called directly, or tiktoken (ref_gpt2).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import xxhash
from click.testing import CliRunner

from winsample import disk, formats
from winsample.cli import main

from ..conftest import CORPUS, FIXTURES, GPT2_SHA256

GOLDEN = FIXTURES / "golden_v1"
GPT2 = {"name": "gpt2", "ranks_sha256": GPT2_SHA256, "n_vocab": 50257, "eot": 50256}


# --- builders ---------------------------------------------------------------------------------


def xxh(data: bytes) -> str:
    return "xxh3_128:" + xxhash.xxh3_128(data).hexdigest()


def write_bin(path: Path, ids) -> bytes:
    data = np.asarray(ids, dtype="<u2").tobytes()
    path.write_bytes(data)
    return data


def make_folder(root: Path, train, val, docs=None) -> Path:
    """A data folder with meta.json written from figures computed here, not by winsample."""
    root.mkdir(parents=True, exist_ok=True)
    splits = {}
    for split, ids in (("train", train), ("val", val)):
        data = write_bin(root / f"{split}.bin", ids)
        starts = (docs or {}).get(split, [0] if len(ids) else [])
        formats.write_doc_index(root / f"{split}.docs.npy", np.array(starts, dtype=np.int64))
        splits[split] = {
            "file": f"{split}.bin", "doc_index": f"{split}.docs.npy", "tokens": len(ids), "bytes": len(data),
            "documents": len(starts), "max_token": int(max(ids)) if len(ids) else 0, "checksum": xxh(data),
        }
    meta = {
        "format": "winsample", "version": 1, "winsample_version": "0.1.0", "dtype": "<u2", "tokenizer": dict(GPT2),
        "eot_appended": True, "split": {"method": "doc", "fraction": 0.1, "seed": 1337}, "splits": splits,
        "inputs": [], "stats": {},
    }
    formats.write_meta(root / "meta.json", meta)
    return root


def make_plan(path: Path, bin_path: Path, starts, lengths, *, T, targets=True, shuffle=False, **extra) -> Path:
    """A plan + sidecar; the sidecar names ``bin_path`` by size and checksum computed here."""
    starts = np.asarray(starts, dtype=np.int64)
    rows = np.zeros(len(starts), dtype=formats.PLAN_DTYPE)
    rows["start"] = starts
    rows["length"] = lengths
    data = bin_path.read_bytes()
    span = T + 1 if targets else T
    side = {
        "source": {"path": str(bin_path), "file": bin_path.name, "bytes": len(data), "checksum": xxh(data),
                   "dtype": "<u2", "tokens": len(data) // 2},
        "params": {"T": T, "targets": targets, "span": span, "stride": None, "shuffle": shuffle},
        "stats": {"windows": len(starts)},
        **extra,
    }
    formats.write_plan(path, rows, side)
    return path


def edit_sidecar(plan: Path, fn) -> None:
    """Apply ``fn`` to the plan's sidecar dict and write it back (a sidecar that now says otherwise)."""
    side = json.loads(formats.plan_sidecar(plan).read_text())
    fn(side)
    formats.plan_sidecar(plan).write_text(json.dumps(side))


def run(*args):
    return CliRunner().invoke(main, ["verify", *map(str, args)])


# For files made here from slices of a tokenization or from made-up ids: they are not the
# tokenization of their text, which retokenize rightly reports (its own tests: test_retokenize.py).
NO_RETOKENIZE = "--retokenize-sample=0"


def run_json(*args) -> tuple[int, dict]:
    r = run(*args, "--json")
    return r.exit_code, json.loads(r.stdout)


def checks(doc: dict, name: str, file: str | None = None) -> list[dict]:
    return [c for c in doc["checks"] if c["name"] == name and (file is None or c["file"] == file)]


def one(doc: dict, name: str, file: str | None = None) -> dict:
    found = checks(doc, name, file)
    assert len(found) == 1, (name, file, doc["checks"])
    return found[0]


@pytest.fixture
def golden(tmp_path) -> Path:
    return Path(shutil.copytree(GOLDEN, tmp_path / "data"))


@pytest.fixture(scope="module")
def hamlet_ids(ref_gpt2) -> list[int]:
    return ref_gpt2.encode_ordinary((CORPUS / "hamlet.txt").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def macbeth_ids(ref_gpt2) -> list[int]:
    return ref_gpt2.encode_ordinary((CORPUS / "macbeth.txt").read_text(encoding="utf-8"))


def brute_share(train, val, k=32) -> float:
    seen = {tuple(train[i : i + k]) for i in range(len(train) - k + 1)}
    vs = [tuple(val[i : i + k]) for i in range(len(val) - k + 1)]
    return sum(v in seen for v in vs) / len(vs)


# --- good data: each check passes --------------------------------------------------------------


def test_golden_fixture_passes_every_file_check_and_meta(golden):
    code, doc = run_json(golden)
    assert code == 0 and doc["ok"] is True
    for f, n in (("train.bin", 15), ("val.bin", 4)):
        assert one(doc, "dtype_divisible", f)["status"] == "pass"
        assert one(doc, "dtype_divisible", f)["tokens"] == n
        assert one(doc, "vocab_range", f)["status"] == "pass"
        assert one(doc, "vocab_range", f)["max_id"] == 50256  # the EOT ends every document
    assert one(doc, "meta")["status"] == "pass"
    assert one(doc, "decode")["status"] == "pass"


def test_golden_fixture_human_report_has_one_marked_line_per_check(golden):
    r = run(golden)
    assert r.exit_code == 0
    lines = [line for line in r.stdout.splitlines() if line and line[0] in "✓✗!·"]
    assert len(lines) == 12  # 3 per file × 2, meta, provenance (skipped: v1 has none), split_leakage, retokenize × 2, decode
    assert any(line.startswith("✓ meta") for line in lines)
    assert r.stdout.rstrip().splitlines()[-1].startswith("verify: ok")
    assert "\x1b[" not in r.stdout  # no colour when stdout is not a terminal


def test_min_length_passes_when_n_is_t_plus_1(tmp_path):
    p = tmp_path / "nine.bin"
    write_bin(p, range(9))
    code, doc = run_json(p, "-T", 8)
    assert code == 0 and one(doc, "min_length")["status"] == "pass"


def test_10000_tokens_T512_stride_256_plan_passes_with_full_coverage(tmp_path):
    n, T, S = 10000, 512, 256
    span = T + 1
    p = tmp_path / "train.bin"
    write_bin(p, np.arange(n) % 50000)
    starts = list(range(0, n - span + 1, S))  # 0 … 9472: 38 regular windows
    assert len(starts) == 38 and starts[-1] == 9472
    starts.append(n - span)  # tail aligned: 9487
    plan = make_plan(tmp_path / "p.npy", p, starts, span, T=T)
    code, doc = run_json(p, "--plan", plan)
    assert code == 0, doc
    for name in ("plan_bounds", "min_length", "order", "duplicates", "coverage", "alignment"):
        assert one(doc, name, "p.npy")["status"] == "pass", name
    cov = one(doc, "coverage", "p.npy")
    assert cov["coverage"] == 1.0 and cov["uncovered_tail"] == 0 and cov["largest_gap_length"] == 0
    assert cov["windows_per_token"] == pytest.approx(39 * 513 / 10000)
    assert cov["overlap_ratio"] == pytest.approx(1 - 10000 / (39 * 513))
    assert one(doc, "alignment", "p.npy")["checked"] == 39  # small plan: every window


def test_tail_drop_plan_reports_the_15_uncovered_tail_tokens(tmp_path):
    n, span = 10000, 513
    p = tmp_path / "train.bin"
    write_bin(p, np.zeros(n))
    plan = make_plan(tmp_path / "p.npy", p, range(0, n - span + 1, 256), span, T=512)
    code, doc = run_json(p, "--plan", plan)
    cov = one(doc, "coverage")
    assert code == 0 and cov["status"] == "pass"  # 99.85% ≥ 95%
    assert cov["covered_tokens"] == 9472 + 513 and cov["uncovered_tail"] == 15
    assert (cov["largest_gap_start"], cov["largest_gap_length"]) == (9985, 15)


def test_book_N10_T4_every_legal_start_0_to_5_is_aligned(tmp_path):
    p = tmp_path / "ten.bin"
    write_bin(p, range(10))  # token i is i, so y must be x + 1 element-wise
    plan = make_plan(tmp_path / "p.npy", p, range(6), 5, T=4)
    code, doc = run_json(p, "--plan", plan)
    assert code == 0
    a = one(doc, "alignment")
    assert a["status"] == "pass" and a["checked"] == 6
    from winsample.verify import training_pair

    tokens = formats.open_tokens(p)
    for s in range(6):
        x, y = training_pair(tokens, s, 4)
        assert x.tolist() == list(range(s, s + 4)) and y.tolist() == list(range(s + 1, s + 5))
    x, y = training_pair(tokens, 5, 4)
    assert x.tolist() == [5, 6, 7, 8] and y.tolist() == [6, 7, 8, 9]  # the book's last legal window
    x, y = training_pair(tokens, 6, 4)
    assert len(x) == 4 and len(y) == 3  # start 6 is illegal: the target loses its last token


def test_book_N10_T4_start_6_fails_alignment_and_bounds(tmp_path):
    p = tmp_path / "ten.bin"
    write_bin(p, range(10))
    plan = make_plan(tmp_path / "p.npy", p, range(7), 5, T=4)
    r = run(p, "--plan", plan)
    assert r.exit_code == 1
    code, doc = run_json(p, "--plan", plan)
    a = one(doc, "alignment")
    assert a["status"] == "fail" and a["misaligned"] == 1 and "start 6" in a["detail"]
    b = one(doc, "plan_bounds")
    assert b["status"] == "fail" and b["bad_windows"] == 1 and "row 6" in b["detail"]


def test_targets_plan_whose_span_is_not_T_plus_1_is_refused_as_its_sidecar_says(tmp_path):
    # x and y from 4 tokens: y would lose one (the Loader served truncated batches from such a sidecar)
    p = tmp_path / "ten.bin"
    write_bin(p, range(10))
    plan = make_plan(tmp_path / "p.npy", p, [0, 4], 4, T=4)
    edit_sidecar(plan, lambda side: side["params"].update(span=4))
    code, doc = run_json(p, "--plan", plan)
    bounds = one(doc, "plan_bounds")
    assert code == 1 and bounds["status"] == "fail" and "params.span 4 but T 4 with targets true spans 5" in bounds["detail"]


def test_no_targets_plan_needs_span_tokens_and_skips_alignment(tmp_path):
    p = tmp_path / "eight.bin"
    write_bin(p, range(8))
    plan = make_plan(tmp_path / "p.npy", p, [0, 4], 4, T=4, targets=False)
    code, doc = run_json(p, "--plan", plan)
    assert code == 0
    m = one(doc, "min_length", "p.npy")
    assert m["status"] == "pass" and m["required"] == 4
    assert one(doc, "alignment")["status"] == "skip"


def test_shuffled_plan_may_go_backwards_when_it_is_the_seeds_permutation(tmp_path):
    p = tmp_path / "t.bin"
    write_bin(p, range(30))
    order = np.random.default_rng([7, 0, 1]).permutation(3)  # windows --shuffle --seed 7 --epoch 0
    starts = np.array([0, 10, 20])[order].tolist()
    assert starts != sorted(starts)
    plan = make_plan(tmp_path / "p.npy", p, starts, 10, T=9, shuffle=True)
    edit_sidecar(plan, lambda side: side["params"].update(seed=7, epoch=0))
    code, doc = run_json(p, "--plan", plan)
    assert code == 0 and one(doc, "order")["status"] == "pass"
    assert one(doc, "coverage")["coverage"] == 1.0


def test_a_sidecar_saying_shuffle_cannot_hide_rows_out_of_order(tmp_path):
    p = tmp_path / "t.bin"
    write_bin(p, range(30))
    plan = make_plan(tmp_path / "p.npy", p, [20, 0, 10], 10, T=9, shuffle=True)  # no seed: not a shuffle we can tell
    code, doc = run_json(p, "--plan", plan)
    assert code == 1 and one(doc, "order")["status"] == "fail"
    assert np.random.default_rng([7, 0, 1]).permutation(3).tolist() != [2, 0, 1]  # seed 7 would not give this order
    edit_sidecar(plan, lambda side: side["params"].update(seed=7, epoch=0))
    code, doc = run_json(p, "--plan", plan)
    assert code == 1 and "not the (seed 7, epoch 0) permutation" in one(doc, "order")["detail"]


def test_leakage_between_different_plays_passes_with_the_exact_share(tmp_path, hamlet_ids, macbeth_ids):
    train, val = hamlet_ids[2000:22000], macbeth_ids[2000:7000]
    folder = make_folder(tmp_path / "d", train, val)
    code, doc = run_json(folder, NO_RETOKENIZE)
    leak = one(doc, "split_leakage")
    assert code == 0 and leak["status"] == "pass"
    assert leak["sample_rate"] == 1.0  # small files: every shingle, exact
    assert leak["share"] == pytest.approx(brute_share(train, val))
    assert leak["val_shingles"] == len(val) - 31


# --- bad input: each names its failing check, exit 1 -------------------------------------------


def test_odd_byte_count_fails_dtype_divisible_naming_1_stray_byte(golden):
    with open(golden / "train.bin", "ab") as f:
        f.write(b"\x07")
    r = run(golden)
    assert r.exit_code == 1 and r.stderr == ""
    assert any(line.startswith("✗ dtype_divisible train.bin") and "1 stray byte" in line for line in r.stdout.splitlines())
    code, doc = run_json(golden)
    d = one(doc, "dtype_divisible", "train.bin")
    assert d["status"] == "fail" and d["stray_bytes"] == 1 and d["bytes"] == 31
    assert one(doc, "meta")["status"] == "fail"  # meta says 30 bytes


def test_ids_beyond_vocab_report_count_max_and_first_position(tmp_path):
    ids = np.arange(20) + 100
    ids[7], ids[11] = 50257, 60000  # first bad id at position 7
    p = tmp_path / "bad.bin"
    write_bin(p, ids)
    code, doc = run_json(p)
    v = one(doc, "vocab_range")
    assert code == 1 and doc["ok"] is False
    assert v["status"] == "fail" and v["first_position"] == 7 and v["out_of_range"] == 2 and v["max_id"] == 60000


def test_bad_id_in_a_later_chunk_reports_its_file_position(tmp_path, monkeypatch):
    monkeypatch.setattr(disk.checksums, "CHUNK_BYTES", 64)  # 32 tokens per chunk
    ids = np.zeros(1000, dtype=np.int64)
    ids[777] = 50300
    p = tmp_path / "bad.bin"
    write_bin(p, ids)
    code, doc = run_json(p)
    assert code == 1 and one(doc, "vocab_range")["first_position"] == 777


@pytest.mark.parametrize(
    ("starts", "length", "why"),
    [([-3, 0], 5, "start < 0"), ([0, 8], 5, "end 13 > N = 10"), ([0, 2], [5, 7], "length > span 5")],
    ids=["negative", "out_of_range", "over_long"],
)
def test_plan_with_bad_windows_fails_plan_bounds(tmp_path, starts, length, why):
    p = tmp_path / "ten.bin"
    write_bin(p, range(10))
    plan = make_plan(tmp_path / "p.npy", p, starts, length, T=4)
    code, doc = run_json(p, "--plan", plan)
    b = one(doc, "plan_bounds")
    assert code == 1 and b["status"] == "fail" and why in b["detail"] and b["bad_windows"] == 1


def test_plan_made_for_another_file_fails_plan_bounds(tmp_path):
    a, b = tmp_path / "a" / "train.bin", tmp_path / "b" / "train.bin"
    a.parent.mkdir()
    b.parent.mkdir()
    write_bin(a, range(100))
    write_bin(b, range(1, 101))  # same name and size, other content
    plan = make_plan(tmp_path / "p.npy", a, [0, 50], 50, T=49)
    assert run(a, "--plan", plan).exit_code == 0
    code, doc = run_json(b, "--plan", plan)
    assert code == 1 and "another file" in one(doc, "plan_bounds")["detail"]


EDITS = {  # each leaves every window in bounds and in start order: only the rows' checksum tells
    "start moved by one": lambda r: r["start"].__setitem__(1, r["start"][1] + 1),
    "length cut": lambda r: r["length"].__setitem__(2, 60),
    "doc renumbered": lambda r: r["doc"].__setitem__(0, 5),
    "fresh changed": lambda r: r["fresh"].__setitem__(3, 7),
}


@pytest.mark.parametrize("edit", sorted(EDITS) + ["row removed"])
def test_plan_rows_edited_after_windows_wrote_them_fail_plan_bounds(tmp_path, edit):
    p = tmp_path / "ten.bin"
    write_bin(p, range(1000))
    plan = make_plan(tmp_path / "p.npy", p, [*range(0, 900, 100), 899], 101, T=100)  # covers all 1000 tokens
    assert run(p, "--plan", plan, NO_RETOKENIZE).exit_code == 0
    rows = np.load(plan)
    if edit == "row removed":
        rows = rows[1:]
        edit_sidecar(plan, lambda side: side["stats"].update(windows=9))  # the count fixed to match: still caught
    else:
        EDITS[edit](rows)
    np.save(plan, rows)
    code, doc = run_json(p, "--plan", plan, NO_RETOKENIZE)
    b = one(doc, "plan_bounds")
    assert code == 1 and b["status"] == "fail" and "the rows are not the ones windows wrote" in b["detail"]


def test_plan_from_before_rows_checksums_still_verifies_and_says_so(tmp_path):
    p = tmp_path / "ten.bin"
    write_bin(p, range(1000))
    plan = make_plan(tmp_path / "p.npy", p, [*range(0, 900, 100), 899], 101, T=100)
    edit_sidecar(plan, lambda side: side.pop("rows_checksum"))
    code, doc = run_json(p, "--plan", plan, NO_RETOKENIZE)
    b = one(doc, "plan_bounds")
    assert code == 0 and b["status"] == "pass" and "no rows_checksum" in b["detail"]


def test_a_wrong_checksum_in_meta_copied_into_a_plan_is_named_as_meta_s(tmp_path, hamlet_ids):
    """windows copies meta.json's checksum (it never reads the tokens then): when that is wrong, the
    plan is not "made for another file", and verify says where the wrong figure came from."""
    folder = make_folder(tmp_path / "d", hamlet_ids[:3000], hamlet_ids[5000:5400])
    meta = json.loads((folder / "meta.json").read_text())
    meta["splits"]["train"]["checksum"] = "xxh3_128:" + "0" * 32
    (folder / "meta.json").write_text(json.dumps(meta))
    r = CliRunner().invoke(main, ["windows", str(folder / "train.bin"), "-T", "100", "-o", str(tmp_path / "p.npy"), "-q"])
    assert r.exit_code == 0, r.stderr
    code, doc = run_json(folder, "--plan", tmp_path / "p.npy", NO_RETOKENIZE)
    b = one(doc, "plan_bounds", "p.npy")
    assert code == 1 and "is the one meta.json records for train.bin" in b["detail"] and "another file" not in b["detail"]
    assert one(doc, "meta")["status"] == "fail"


def test_plan_from_folder_applies_to_the_file_its_sidecar_names(tmp_path, hamlet_ids):
    folder = make_folder(tmp_path / "d", hamlet_ids[:1000], hamlet_ids[5000:5400])
    good = make_plan(tmp_path / "val.npy", folder / "val.bin", [0, 50, 100, 150, 200, 250, 299], 101, T=100)
    code, doc = run_json(folder, "--plan", good, NO_RETOKENIZE)
    assert code == 0 and one(doc, "plan_bounds")["detail"].endswith("made for val.bin")
    edit_sidecar(good, lambda side: side["source"].update(file="train.bin"))  # it lies about its source
    code, doc = run_json(folder, "--plan", good)
    assert code == 1 and one(doc, "plan_bounds")["status"] == "fail"


def test_plan_npy_with_wrong_fields_fails_plan_bounds_without_traceback(tmp_path):
    p = tmp_path / "t.bin"
    write_bin(p, range(10))
    plan = tmp_path / "p.npy"
    np.save(plan, np.arange(6, dtype=np.float32))
    formats.plan_sidecar(plan).write_text("{}")
    r = run(p, "--plan", plan)
    assert r.exit_code == 1 and "Traceback" not in r.stdout + r.stderr
    assert any(line.startswith("✗ plan_bounds") for line in r.stdout.splitlines())


def test_plan_without_sidecar_fails_plan_bounds(tmp_path):
    p = tmp_path / "t.bin"
    write_bin(p, range(10))
    plan = make_plan(tmp_path / "p.npy", p, [0], 5, T=4)
    formats.plan_sidecar(plan).unlink()
    code, doc = run_json(p, "--plan", plan)
    assert code == 1 and "missing sidecar" in one(doc, "plan_bounds")["detail"]


def test_decreasing_starts_fail_order_and_repeated_window_fails_duplicates(tmp_path):
    p = tmp_path / "t.bin"
    write_bin(p, range(40))
    plan = make_plan(tmp_path / "p.npy", p, [0, 20, 10, 20, 30], 10, T=9)
    code, doc = run_json(p, "--plan", plan)
    o, d = one(doc, "order"), one(doc, "duplicates")
    assert code == 1
    assert o["status"] == "fail" and o["first_row"] == 2 and o["decreases"] == 1
    assert d["status"] == "fail" and d["duplicates"] == 1


def test_low_coverage_fails_and_names_the_largest_gap(tmp_path):
    p = tmp_path / "t.bin"
    write_bin(p, range(40))
    # windows [0,5) [10,15) [22,27): gaps 5 at 5, 7 at 15, tail 13 at 27
    plan = make_plan(tmp_path / "p.npy", p, [0, 10, 22], 5, T=4)
    code, doc = run_json(p, "--plan", plan)
    c = one(doc, "coverage")
    assert code == 1 and c["status"] == "fail"
    assert c["covered_tokens"] == 15 and c["coverage"] == pytest.approx(15 / 40)
    assert (c["largest_gap_start"], c["largest_gap_length"]) == (27, 13) and c["uncovered_tail"] == 13
    code, doc = run_json(p, "--plan", plan, "--min-coverage", 0.3)
    assert code == 0 and one(doc, "coverage")["status"] == "pass"


def test_truncated_meta_json_fails_meta_check_and_nothing_is_guessed(golden):
    """A meta.json that does not read leaves the dtype and the tokenizer unknown: the files are
    not checked as uint16 gpt2 ids (a uint32 DeepSeek set then "failed" its vocabulary and decode,
    under a line that said there was no meta.json); the one line says why, exit 1."""
    text = (golden / "meta.json").read_text()
    (golden / "meta.json").write_text(text[: len(text) // 2])
    r = run(golden)
    assert r.exit_code == 1 and "Traceback" not in r.stdout + r.stderr
    code, doc = run_json(golden)
    assert code == 1 and [c["name"] for c in doc["checks"]] == ["meta"]
    m = one(doc, "meta")
    assert m["status"] == "fail" and "not valid JSON" in m["detail"] and "other checks need its dtype and tokenizer: not run" in m["detail"]


def test_meta_from_a_newer_format_version_fails_meta_check(golden):
    meta = json.loads((golden / "meta.json").read_text())
    meta["version"] = 99
    (golden / "meta.json").write_text(json.dumps(meta))
    code, doc = run_json(golden)
    assert code == 1 and "newer" in one(doc, "meta")["detail"]


@pytest.mark.parametrize(
    ("key", "value", "words"),
    [("tokens", 16, "splits.train.tokens 16"), ("documents", 3, "splits.train.documents 3"),
     ("checksum", "xxh3_128:" + "0" * 32, "splits.train.checksum"), ("bytes", 32, "splits.train.bytes 32")],
)
def test_meta_with_wrong_counts_fails_meta_check(golden, key, value, words):
    meta = json.loads((golden / "meta.json").read_text())
    meta["splits"]["train"][key] = value
    (golden / "meta.json").write_text(json.dumps(meta))
    code, doc = run_json(golden)
    m = one(doc, "meta")
    assert code == 1 and m["status"] == "fail" and words in m["detail"]


def test_meta_naming_other_tokenizer_ranks_fails_meta_check(golden):
    meta = json.loads((golden / "meta.json").read_text())
    meta["tokenizer"]["ranks_sha256"] = "0" * 64
    (golden / "meta.json").write_text(json.dumps(meta))
    code, doc = run_json(golden)
    assert code == 1 and "ranks_sha256" in one(doc, "meta")["detail"]


def test_val_identical_to_train_fails_split_leakage(tmp_path, hamlet_ids):
    ids = hamlet_ids[:3000]
    folder = make_folder(tmp_path / "d", ids, ids)
    code, doc = run_json(folder)
    leak = one(doc, "split_leakage")
    assert code == 1 and leak["status"] == "fail" and "byte-identical" in leak["detail"]


def test_val_made_of_train_text_fails_split_leakage_with_the_exact_share(tmp_path, ref_gpt2, hamlet_ids):
    train = hamlet_ids[:20000]
    # val: a passage of train's text re-encoded, between two passages of another play
    passage = ref_gpt2.decode(hamlet_ids[8000:9000])
    val = (
        ref_gpt2.encode_ordinary((CORPUS / "tempest.txt").read_text()[10000:12000])
        + ref_gpt2.encode_ordinary(passage)
        + ref_gpt2.encode_ordinary((CORPUS / "tempest.txt").read_text()[20000:22000])
    )
    folder = make_folder(tmp_path / "d", train, val)
    code, doc = run_json(folder)
    leak = one(doc, "split_leakage")
    expected = brute_share(train, val)
    assert expected > 0.3  # the planted passage is a large part of val
    assert code == 1 and leak["status"] == "fail" and leak["share"] == pytest.approx(expected)


def test_T_larger_than_file_fails_min_length_N8_T8(tmp_path):
    p = tmp_path / "eight.bin"
    write_bin(p, range(8))
    r = run(p, "-T", 8)
    assert r.exit_code == 1
    assert any(line.startswith("✗ min_length") and "N = 8 < T + 1 = 9" in line for line in r.stdout.splitlines())


def test_empty_bin_fails_min_length_and_passes_vocab_range(tmp_path):
    p = tmp_path / "empty.bin"
    p.write_bytes(b"")
    code, doc = run_json(p)
    assert code == 1
    assert one(doc, "min_length")["status"] == "fail"
    assert one(doc, "vocab_range")["status"] == "pass"


def test_a_one_token_bin_fails_min_length_as_an_empty_one_does(tmp_path):
    """Any T needs T + 1 ≥ 2 tokens: one token holds no (x, y) pair, with or without -T."""
    p = tmp_path / "one.bin"
    write_bin(p, [7])
    code, doc = run_json(p)
    assert code == 1
    check = one(doc, "min_length")
    assert check["status"] == "fail" and "1 token, not one (x, y) pair fits" in check["detail"]
    write_bin(p, [7, 8])
    code, doc = run_json(p)  # two tokens: T = 1 fits, so without -T the check cannot judge
    assert one(doc, "min_length")["status"] == "skip"


# --- could not run: exit 2 -------------------------------------------------------------------------


def test_missing_path_exits_2_with_one_line(tmp_path):
    r = run(tmp_path / "nope")
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and "no such file" in r.stderr


def test_missing_plan_exits_2(tmp_path):
    p = tmp_path / "t.bin"
    write_bin(p, range(10))
    r = run(p, "--plan", tmp_path / "nope.npy")
    assert r.exit_code == 2 and "nope.npy" in r.stderr


def test_unreadable_token_file_exits_2(golden):
    (golden / "val.bin").unlink()
    (golden / "val.bin").mkdir()  # a folder where a file must be: cannot be read
    r = run(golden)
    assert r.exit_code == 2 and "val.bin" in r.stderr and r.stdout == ""


# --- output contract -------------------------------------------------------------------------------


def test_json_output_is_only_the_json_document_with_the_issue_shape(golden):
    r = run(golden, "--json")
    assert r.stderr == ""
    doc = json.loads(r.stdout)
    assert set(doc) == {"ok", "checks", "windows"}
    for c in doc["checks"]:
        assert {"name", "file", "status", "detail"} <= set(c) and c["status"] in {"pass", "fail", "warn", "skip"}
    for w in doc["windows"]:
        assert {"file", "start", "length", "text"} <= set(w)


def test_folder_without_meta_warns_and_strict_turns_the_warning_into_exit_1(golden):
    (golden / "meta.json").unlink()
    code, doc = run_json(golden)
    assert code == 0 and doc["ok"] is True and one(doc, "meta")["status"] == "warn"
    code, doc = run_json(golden, "--strict")
    assert code == 1 and doc["ok"] is False


def test_decoded_windows_mark_the_overlap_with_the_previous_window(tmp_path, ref_gpt2, hamlet_ids):
    ids = hamlet_ids[3000:3200]
    p = tmp_path / "t.bin"
    write_bin(p, ids)
    plan = make_plan(tmp_path / "p.npy", p, range(0, 200 - 40, 30), 41, T=40)  # 11 shared tokens
    r = run(p, "--plan", plan, "--show", 3)
    assert r.exit_code == 0
    second = ref_gpt2.decode(ids[30:71])
    overlap = ref_gpt2.decode(ids[30:41])
    assert "⟦" + overlap + "⟧" + second[len(overlap):] in r.stdout
    assert "⟦" + ref_gpt2.decode(ids[0:11]) not in r.stdout  # the first window has no predecessor
    code, doc = run_json(p, "--plan", plan, "--show", 3)
    assert [w["start"] for w in doc["windows"]] == [0, 30, 60]
    assert [w["text"] for w in doc["windows"]] == [ref_gpt2.decode(ids[s : s + 41]) for s in (0, 30, 60)]
    assert [w["overlap"] for w in doc["windows"]] == [0, 11, 11]


def test_single_bin_beside_its_meta_is_checked_against_its_own_split(golden):
    code, doc = run_json(golden / "val.bin")
    assert code == 0 and one(doc, "meta", "meta.json")["status"] == "pass"
    assert [c["file"] for c in checks(doc, "dtype_divisible")] == ["val.bin"]


def test_quiet_report_lists_only_what_did_not_pass(tmp_path):
    p = tmp_path / "eight.bin"
    write_bin(p, range(8))
    r = run(p, "-T", 8, "-q", NO_RETOKENIZE)
    marked = [line for line in r.stdout.splitlines() if line and line[0] in "✓✗!·"]
    assert r.exit_code == 1 and len(marked) == 1 and marked[0].startswith("✗ min_length")
    assert "──" not in r.stdout  # no decoded windows with -q


def test_colour_only_on_a_terminal_and_never_with_NO_COLOR(monkeypatch, golden):
    import sys

    from winsample import verify
    from winsample.cli import common, render

    report = verify.verify(golden)
    assert "\x1b[" in render.verify_text(report, strict=False, quiet=False, colour=True)
    assert "\x1b[" not in render.verify_text(report, strict=False, quiet=False, colour=False)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert common.use_color()
    monkeypatch.setenv("NO_COLOR", "1")
    assert not common.use_color()


def test_progress_callback_sees_every_byte_once(golden):
    from winsample import verify

    seen = []
    verify.verify(golden, progress=seen.append)
    assert sum(seen) == (golden / "train.bin").stat().st_size + (golden / "val.bin").stat().st_size


def test_end_to_end_exit_codes_in_a_subprocess(golden, tmp_path):
    import subprocess
    import sys

    def ws(*args):
        return subprocess.run([sys.executable, "-m", "winsample", "verify", *map(str, args)], capture_output=True, text=True)

    ok = ws(golden, "--json")
    assert ok.returncode == 0 and json.loads(ok.stdout)["ok"] is True
    (golden / "val.bin").write_bytes((golden / "train.bin").read_bytes())
    bad = ws(golden, "--json")
    assert bad.returncode == 1 and one(json.loads(bad.stdout), "split_leakage")["status"] == "fail"
    assert ws(tmp_path / "missing").returncode == 2


def test_alignment_of_a_plan_with_only_short_windows_warns_not_passes(tmp_path):
    """N = 285 < T + 1 = 1001: windows keeps one short window; alignment must not claim a pass."""
    p = tmp_path / "short.bin"
    write_bin(p, [i % 50000 for i in range(285)])
    plan = tmp_path / "p.npy"
    r = CliRunner().invoke(main, ["windows", str(p), "-T", "1000", "-o", str(plan), "-q"])
    assert r.exit_code == 0
    r = CliRunner().invoke(main, ["verify", str(p), "--plan", str(plan), "--json"])
    doc = json.loads(r.stdout)
    align = [c for c in doc["checks"] if c["name"] == "alignment"][0]
    assert align["status"] == "warn" and "285 < T + 1 = 1001" in align["detail"]
    assert r.exit_code == 1  # min_length fails: N < T + 1


@pytest.mark.parametrize(("stride", "status"), [(64, "pass"), (65, "warn")])
def test_coverage_warns_when_window_joins_leave_tokens_never_predicted(tmp_path, stride, status):
    """T = 64, span 65: stride 65 tiles tokens without gaps, yet token 65, 130, … is never a y."""
    p = tmp_path / "t.bin"
    n = 65 * 10
    write_bin(p, [i % 50000 for i in range(n)])
    plan = tmp_path / "p.npy"
    r = CliRunner().invoke(main, ["windows", str(p), "-T", "64", "--stride", str(stride), "-o", str(plan), "-q"])
    assert r.exit_code == 0
    doc = json.loads(CliRunner().invoke(main, ["verify", str(p), "--plan", str(plan), "--json"]).stdout)
    cov = [c for c in doc["checks"] if c["name"] == "coverage"][0]
    # by hand: stride 64 → windows at 0, 64, …: every token but token 0 is some window's y
    # stride 65 → windows at 0, 65, …, 585: tokens 0, 65, …, 585 (10 of them) are never a y
    assert cov["status"] == status
    assert cov["never_target_tokens"] == (1 if stride == 64 else 10)


def test_null_doc_index_in_meta_fails_the_meta_check(golden):
    meta = json.loads((golden / "meta.json").read_text())
    meta["splits"]["train"]["doc_index"] = None
    (golden / "meta.json").write_text(json.dumps(meta))
    code, doc = run_json(golden)
    m = one(doc, "meta")
    assert code == 1 and m["status"] == "fail" and "splits.train.doc_index is None" in m["detail"]


def test_a_start_that_would_wrap_int64_is_out_of_bounds(tmp_path):
    p = tmp_path / "t.bin"
    write_bin(p, range(40))
    plan = make_plan(tmp_path / "p.npy", p, [0, 2**63 - 3], 5, T=4)  # start + 5 wraps to a negative int64
    code, doc = run_json(p, "--plan", plan)
    assert code == 1 and one(doc, "plan_bounds")["status"] == "fail"


def test_val_empty_by_design_passes(tmp_path):
    """encode --val-fraction 0 writes an empty val.bin on purpose: verify must not fail it."""
    src = tmp_path / "a.txt"
    src.write_text("Some text to encode, twice over.\n\nAnd a second paragraph.\n")
    r = CliRunner().invoke(main, ["encode", str(src), "-o", str(tmp_path / "d"), "--val-fraction", "0", "--workers", "1", "-q"])
    assert r.exit_code == 0, r.stderr
    code, doc = run_json(tmp_path / "d")
    assert code == 0, [c for c in doc["checks"] if c["status"] == "fail"]
    assert one(doc, "min_length", "val.bin")["status"] == "skip"


def test_a_shard_is_not_held_to_the_whole_plans_coverage(tmp_path):
    p = tmp_path / "t.bin"
    write_bin(p, range(40))
    plan = make_plan(tmp_path / "p.npy", p, [0, 16], 9, T=8)  # rank 0 of 2: windows 0, 2 of [0, 8, 16, 24]
    edit_sidecar(plan, lambda side: (side["params"].update(shards=2, shard=0), side.update(plan_stats={"windows": 4})))
    code, doc = run_json(p, "--plan", plan)
    cov = one(doc, "coverage")
    assert cov["status"] == "skip" and cov["covered_tokens"] == 18 and "2 ranks" in cov["detail"]


def test_a_shard_claim_that_does_not_hold_is_held_to_coverage(tmp_path):
    p = tmp_path / "t.bin"
    write_bin(p, range(40))
    plan = make_plan(tmp_path / "p.npy", p, [0, 16], 9, T=8)
    for claim, why in [({}, "a shard of 2 without plan_stats.windows"),
                       ({"plan_stats": {"windows": 7}}, "shard 0 of 2 of a 7-window plan holds 4 rows, this one 2")]:
        edit_sidecar(plan, lambda side, claim=claim: (side["params"].update(shards=2, shard=0), side.pop("plan_stats", None), side.update(claim)))
        code, doc = run_json(p, "--plan", plan)
        assert code == 1 and one(doc, "coverage")["status"] == "fail" and why in one(doc, "plan_bounds")["detail"]


def test_a_one_token_window_in_a_targets_plan_fails_alignment(tmp_path):
    p = tmp_path / "t.bin"
    write_bin(p, range(40))
    plan = make_plan(tmp_path / "p.npy", p, [0, 4, 39], [5, 5, 1], T=4)
    code, doc = run_json(p, "--plan", plan, "--min-coverage", 0)
    a = one(doc, "alignment")
    assert code == 1 and a["status"] == "fail" and "row 2 at start 39, length 1" in a["detail"]


def test_a_long_window_is_shown_by_its_first_512_tokens_not_the_whole_file(tmp_path, ref_gpt2):
    # 3000 tokens, -T 2000, no plan: verify shows windows of T tokens; the report decodes 512 of them.
    ids = np.array([ref_gpt2.encode_ordinary(" word")[0]] * 3000, dtype="<u2")
    (tmp_path / "t.bin").write_bytes(ids.tobytes())
    r = CliRunner().invoke(main, ["verify", str(tmp_path / "t.bin"), "-T", "2000", "--show", "1", "--json"])
    doc = json.loads(r.stdout)
    (w,) = doc["windows"]
    assert (w["length"], w["shown_tokens"], w["text"]) == (2000, 512, " word" * 512)
    human = CliRunner().invoke(main, ["verify", str(tmp_path / "t.bin"), "-T", "2000", "--show", "1"])
    assert " word" * 513 not in human.stdout and "1,488 more tokens not shown" in human.stdout


def test_library_never_prints(capsys, tmp_path, hamlet_ids):
    from winsample import verify

    folder = make_folder(tmp_path / "d", hamlet_ids[:500], hamlet_ids[600:700])
    verify.verify(folder)
    assert capsys.readouterr() == ("", "")
