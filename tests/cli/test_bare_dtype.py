"""--dtype uint16|uint32: the width of a bare token file (one no meta.json describes).

A bare ``.bin`` is read as uint16 (nanoGPT's convention) unless ``--dtype`` says otherwise;
without it, one whose ids look like uint32 ones gets a warning. A plan made with ``--dtype``
is served at that width later (Loader, get_batch, verify --plan). Token ids come from tiktoken
directly (``ref_gpt2``); the file is written here with numpy, never by winsample.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

import winsample
from winsample.cli import main
from winsample.train.loader import replan_for_epoch

from ..conftest import CORPUS


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture
def wide(tmp_path, ref_gpt2) -> tuple:
    """A bare .bin of uint32 ids (GPT-2's, each document followed by <|endoftext|>), as another tool writes it."""
    text = (CORPUS / "sonnets.txt").read_text(encoding="utf-8")
    ids = []
    for para in [p for p in text.split("\n\n") if p.strip()][:40]:
        ids += ref_gpt2.encode_ordinary(para) + [ref_gpt2.eot_token]
    ids = np.array(ids, dtype="<u4")
    path = tmp_path / "data" / "train.bin"
    path.parent.mkdir()
    ids.tofile(path)
    return path, ids.astype(np.int64)


def test_windows_on_a_bare_uint32_file_warns_and_keeps_reading_uint16(wide, tmp_path):
    path, ids = wide
    for quiet in ((), ("-q",)):
        plan = tmp_path / f"p{len(quiet)}.npy"
        r = run("windows", path, "-T", "64", "-o", plan, *quiet)
        assert r.exit_code == 0, r.output
        assert r.stdout == ""
        warns = [line for line in r.stderr.splitlines() if line.startswith("warning:")]
        assert len(warns) == 1 and str(path) in warns[0] and "--dtype uint32" in warns[0]
        side = json.loads(plan.with_name(plan.name + ".json").read_text())
        assert side["source"]["tokens"] == 2 * len(ids) and side["source"]["dtype"] == "<u2"  # as before: nanoGPT's uint16


def test_windows_dtype_uint32_plans_the_ids_and_the_loader_serves_them(wide, tmp_path):
    path, ids = wide
    plan = tmp_path / "p.npy"
    r = run("windows", path, "-T", "64", "--boundaries", "doc", "-o", plan, "--dtype", "uint32")
    assert r.exit_code == 0, r.output
    assert "warning" not in r.stderr
    side = json.loads((tmp_path / "p.npy.json").read_text())
    assert side["source"]["tokens"] == len(ids) and side["source"]["dtype"] == "<u4"
    rows = np.load(plan)
    eots = np.flatnonzero(ids == 50256)
    docs_starts = np.r_[0, eots[:-1] + 1]  # each document ends with its EOT
    firsts = rows["start"][np.r_[True, rows["doc"][1:] != rows["doc"][:-1]]]
    assert firsts.tolist() == docs_starts.tolist()
    want = {int(s): ids[s : s + 65] for s, n in zip(rows["start"], rows["length"]) if n == 65}
    for loader in (winsample.Loader(plan, batch_size=4, seed=0), winsample.Loader(plan, path, batch_size=4, seed=0)):
        b = loader.batch(0, 0)
        for x, y in zip(b.x.tolist(), b.y.tolist()):
            s = next(s for s, w in want.items() if w[:64].tolist() == x)
            assert y == want[s][1:].tolist()
    x, y = winsample.get_batch(plan, path, 8, 0)[:2]
    assert all(any(w[:64].tolist() == row for w in want.values()) for row in x.tolist())
    r = run("verify", "--plan", plan, "--show", "0", "--json")  # no --dtype: the plan says the width
    assert r.exit_code == 0, r.output
    checks = {(c["name"], c["file"]): c for c in json.loads(r.stdout)["checks"]}
    assert checks[("dtype_divisible", "train.bin")]["tokens"] == len(ids)


def test_a_random_offset_plan_is_replanned_at_its_width(wide, tmp_path):
    path, ids = wide
    plans = {}
    for epoch in (0, 1):
        plans[epoch] = tmp_path / f"e{epoch}.npy"
        r = run("windows", path, "-T", "32", "--random-offset", "--seed", "7", "--epoch", epoch, "--dtype", "uint32",
                "-o", plans[epoch], "-q")
        assert r.exit_code == 0, r.output
    again = replan_for_epoch(winsample.read_plan(plans[0]), path, 1)
    np.testing.assert_array_equal(again.rows, np.load(plans[1]))


def test_verify_and_inspect_read_a_bare_file_at_the_declared_width(wide):
    path, ids = wide
    r = run("verify", path, "--show", "0", "--json")
    fail = {c["name"]: c for c in json.loads(r.stdout)["checks"] if c["status"] == "fail"}
    assert r.exit_code == 1 and "--dtype uint32" in fail["dtype_divisible"]["detail"]
    r = run("verify", path, "--dtype", "uint32", "--show", "0", "--json")
    assert r.exit_code == 0, r.output
    checks = {c["name"]: c for c in json.loads(r.stdout)["checks"]}
    assert checks["dtype_divisible"]["tokens"] == len(ids) and checks["vocab_range"]["max_id"] == int(ids.max())
    r = run("inspect", path, "--at", "3", "--count", "10", "--json")
    rep = json.loads(r.stdout)
    assert r.exit_code == 0 and rep["tokens"] == 2 * len(ids) and any("--dtype uint32" in w for w in rep["warnings"])
    r = run("inspect", path, "--at", "3", "--count", "10", "--dtype", "uint32", "--json")
    rep = json.loads(r.stdout)
    assert r.exit_code == 0 and rep["ids"] == ids[3:13].tolist() and rep["tokens"] == len(ids)
    assert not any("--dtype" in w for w in rep["warnings"])


def test_verify_tokens_and_a_uint32_plan_without_dtype_says_to_pass_it(wide, tmp_path):
    path, _ = wide
    plan = tmp_path / "p.npy"
    assert run("windows", path, "-T", "64", "-o", plan, "--dtype", "uint32", "-q").exit_code == 0
    r = run("verify", path, "--plan", plan, "--show", "0", "--json")
    assert r.exit_code == 1
    bounds = next(c for c in json.loads(r.stdout)["checks"] if c["name"] == "plan_bounds")
    assert bounds["status"] == "fail" and "pass --dtype uint32" in bounds["detail"]


def test_a_bare_uint16_file_gets_no_warning(tmp_path, ref_gpt2):
    path = tmp_path / "train.bin"
    text = (CORPUS / "sonnets.txt").read_text(encoding="utf-8")
    np.array(ref_gpt2.encode_ordinary(text[:20000]), "<u2").tofile(path)
    r = run("windows", path, "-T", "64", "-o", tmp_path / "p.npy")
    assert r.exit_code == 0 and "warning" not in r.stderr


@pytest.mark.parametrize("command", [
    ("windows", "{bin}", "-T", "8", "-o", "{out}"),
    ("verify", "{bin}"),
    ("verify", "{folder}"),
    ("inspect", "{bin}"),
])
def test_dtype_that_contradicts_meta_json_is_one_line_exit_2(tmp_path, command):
    folder = tmp_path / "data"
    assert run("encode", CORPUS / "sonnets.txt", "-o", folder, "--split", "tail", "-q").exit_code == 0  # gpt2: uint16
    out = tmp_path / "p.npy"
    args = [a.format(bin=folder / "train.bin", folder=folder, out=out) for a in command]
    r = run(*args, "--dtype", "uint32")
    assert r.exit_code == 2 and r.stdout == "" and not out.exists()
    assert r.stderr.count("\n") == 1 and "--dtype uint32" in r.stderr and "meta.json" in r.stderr and "uint16" in r.stderr
    assert run(*args, "--dtype", "uint16").exit_code == 0  # the same width: nothing to contradict


def test_verify_plan_alone_of_a_uint16_plan_still_flags_uint32_ids(wide, tmp_path):
    path, _ = wide
    plan = tmp_path / "p.npy"
    assert run("windows", path, "-T", "64", "-o", plan, "-q").exit_code == 0  # planned as uint16, despite the warning
    r = run("verify", "--plan", plan, "--show", "0", "--json")
    assert r.exit_code == 1
    dtype = next(c for c in json.loads(r.stdout)["checks"] if c["name"] == "dtype_divisible")
    assert dtype["status"] == "fail" and "--dtype uint32" in dtype["detail"]


@pytest.mark.parametrize("command", ["windows", "verify", "inspect"])
def test_dtype_that_contradicts_an_llmc_header_or_a_megatron_index_is_one_line_exit_2(tmp_path, command):
    folder = tmp_path / "data"
    r = run("encode", CORPUS / "sonnets.txt", "-o", folder, "--split", "tail", "--layout", "megatron,llmc", "-q")
    assert r.exit_code == 0, r.output
    other = tmp_path / "mg"  # a Megatron prefix alone: its index is the only record
    other.mkdir()
    for name in ("train.bin", "train.idx"):
        (other / name).write_bytes((folder / name).read_bytes())
    out = tmp_path / "p.npy"
    for target, record in ((folder / "llmc" / "train_000000.bin", "llm.c header"), (other / "train", "train.idx")):
        args = [command, target] + (["-T", "8", "-o", out] if command == "windows" else [])
        r = run(*args, "--dtype", "uint32")
        assert r.exit_code == 2 and r.stdout == "" and not out.exists(), (target, r.output)
        assert r.stderr.count("\n") == 1 and record in r.stderr and "says uint16" in r.stderr
