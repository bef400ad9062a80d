"""What a file on disk claims and a reader uses is checked; what sits in the folder and belongs
to the dataset is checked or refused, never skipped (#29, class 2). Each case passed before."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from winsample.cli import main

from ..conftest import CORPUS


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def failing(r) -> set[str]:
    return {c["name"] for c in json.loads(r.stdout)["checks"] if c["status"] == "fail"}


@pytest.fixture
def data(tmp_path):
    assert run("encode", CORPUS, "-o", tmp_path / "data", "--layout", "nanogpt,megatron,llmc", "--shard-tokens", 40000,
               "-q").exit_code == 0
    return tmp_path / "data"


def swap_first_two_lengths(idx):
    # Megatron .idx: magic (9) + version (8) + dtype code (1) + sequences (8) + documents (8), then int32 lengths
    b = bytearray(idx.read_bytes())
    off = 9 + 8 + 1 + 8 + 8
    lengths = np.frombuffer(bytes(b[off : off + 8]), "<i4").copy()
    assert lengths[0] != lengths[1]  # else the swap would change nothing
    b[off : off + 8] = lengths[::-1].tobytes()
    idx.write_bytes(bytes(b))


@pytest.mark.parametrize("target", ["train", "train.idx", "train.bin"])
def test_a_split_named_alone_checks_its_megatron_index_too(data, target):
    swap_first_two_lengths(data / "train.idx")
    r = run("verify", data / target, "--json")
    assert r.exit_code == 1 and "megatron_index" in failing(r)


def test_deleting_the_layouts_entry_does_not_hide_a_corrupt_index(data):
    swap_first_two_lengths(data / "train.idx")
    meta = json.loads((data / "meta.json").read_text())
    del meta["layouts"]
    (data / "meta.json").write_text(json.dumps(meta))
    r = run("verify", data, "--json")
    assert r.exit_code == 1 and "megatron_index" in failing(r)


def test_llmc_shards_meta_json_does_not_describe_are_refused(data):
    meta = json.loads((data / "meta.json").read_text())
    del meta["layouts"]["llmc"]
    (data / "meta.json").write_text(json.dumps(meta))
    r = run("verify", data, "--json")
    assert r.exit_code == 1 and "llmc_shards" in failing(r)
    line = next(c for c in json.loads(r.stdout)["checks"] if c["name"] == "llmc_shards")
    assert "meta.json does not describe" in line["detail"]


def test_an_edited_eot_in_a_plan_sidecar_fails_plan_bounds(data, tmp_path):
    run("windows", data / "train.bin", "-T", 64, "-o", tmp_path / "p.npy", "-q")
    side = json.loads((tmp_path / "p.npy.json").read_text())
    side["tokenizer"]["eot"] = 13  # the Loader would pad x with it
    (tmp_path / "p.npy.json").write_text(json.dumps(side))
    r = run("verify", data, "--plan", tmp_path / "p.npy", "--json")
    assert r.exit_code == 1 and "plan_bounds" in failing(r)
    assert "eot 13 (meta.json: 50256)" in json.dumps(json.loads(r.stdout))


@pytest.mark.parametrize(("made_with", "edit"), [
    (("--boundaries", "doc", "--pack"), {"pack": False, "boundaries": "none"}),
    (("--boundaries", "doc"), {"boundaries": "none"}),
    (("--stride", 16), {"stride": 32}),
    (("--tail", "drop"), {"tail": "align"}),
])
def test_an_edited_parameter_fails_plan_params(data, tmp_path, made_with, edit):
    run("windows", data / "train.bin", "-T", 64, *made_with, "-o", tmp_path / "p.npy", "-q")
    r = run("verify", data, "--plan", tmp_path / "p.npy", "--json")
    assert r.exit_code == 0, r.stdout  # as written: the rows are what windows makes
    side = json.loads((tmp_path / "p.npy.json").read_text())
    side["params"].update(edit)
    (tmp_path / "p.npy.json").write_text(json.dumps(side))
    r = run("verify", data, "--plan", tmp_path / "p.npy", "--json")
    assert r.exit_code == 1 and "plan_params" in failing(r)


def test_a_bare_uint32_file_of_mostly_wide_ids_after_an_english_start_is_named(tmp_path):
    """#33 item 3: the hint looked at the first 2^20 values and wanted their high halves 0, so a
    Qwen-style uint32 file (ids above 65,535: high halves 1 and 2) whose first megabyte is English
    passed as uint16. Now the blocks are spread over the file and a high half is anything below 16."""
    from winsample.verify import wider_ids_share

    rng = np.random.default_rng(33)
    ids = np.concatenate([rng.integers(0, 30_000, 600_000), rng.integers(65_536, 151_643, 1_400_000)]).astype("<u4")
    as16 = ids.view("<u2")
    assert np.mean(as16[: 1 << 20][1::2] == 0) == 1.0  # the old look: the first 2^20 halves, high halves all 0 ...
    assert np.mean(as16[1::2] == 0) < 0.5  # ... though most of the file's are not
    assert wider_ids_share(as16) == 1.0
    (tmp_path / "train.bin").write_bytes(ids.tobytes())
    r = CliRunner().invoke(main, ["verify", str(tmp_path / "train.bin"), "--json"])
    bad = [c for c in json.loads(r.stdout)["checks"] if c["status"] == "fail"]
    assert r.exit_code == 1 and any(c["name"] == "dtype_divisible" and "look like uint32 ids read as uint16" in c["detail"]
                                    for c in bad)
    genuine = rng.integers(0, 50_257, 2_000_000).astype("<u2")  # real uint16 ids: no false alarm
    assert wider_ids_share(genuine) is None


def test_a_plan_whose_windows_are_not_the_models_length_fails_with_minus_T(data, tmp_path):
    """A new user's trial: `verify --plan p.npy -T 512` passed a plan of 1024-token windows, which
    a model of block size 512 cannot take. -T is the model's input length: each plan must have it."""
    plan = tmp_path / "p.npy"
    assert run("windows", data / "train.bin", "-T", 1024, "--stride", 512, "-o", plan, "-q").exit_code == 0
    r = run("verify", data, "--plan", plan, "-T", 512, "--max-leakage", 1, "--json", "-q")
    assert r.exit_code == 1 and failing(r) == {"context_length"}
    line = next(c for c in json.loads(r.stdout)["checks"] if c["name"] == "context_length")
    assert line["detail"] == "the plan's windows are T = 1024 tokens, but the model takes -T 512: plan again with -T 512, or give the model's own length"
    r = run("verify", data, "--plan", plan, "-T", 1024, "--max-leakage", 1, "--json", "-q")
    assert r.exit_code == 0 and [c["status"] for c in json.loads(r.stdout)["checks"] if c["name"] == "context_length"] == ["pass"]
    r = run("verify", data, "--plan", plan, "--max-leakage", 1, "--json", "-q")  # no -T: the plan's own T is the length
    assert r.exit_code == 0 and "context_length" not in {c["name"] for c in json.loads(r.stdout)["checks"]}


def test_a_plan_whose_token_file_cannot_be_opened_fails_alone_and_the_others_are_checked(data, tmp_path):
    """A review: a plan whose own file opened with an InputError (a .tok named by a meta.json
    elsewhere) stopped verify with exit 2, before the other plans were checked."""
    (tmp_path / "dt").mkdir()
    (tmp_path / "mt").mkdir()
    (tmp_path / "dt" / "train.tok").write_bytes((data / "train.bin").read_bytes())
    meta = json.loads((data / "meta.json").read_text())
    meta["splits"]["train"]["file"] = "train.tok"
    (tmp_path / "mt" / "meta.json").write_text(json.dumps(meta))
    assert run("windows", tmp_path / "dt" / "train.tok", "--meta", tmp_path / "mt" / "meta.json", "-T", 64, "-o",
               tmp_path / "tk.npy", "-q").exit_code == 0
    assert run("windows", data / "train.bin", "-T", 64, "-o", tmp_path / "ok.npy", "-q").exit_code == 0
    r = run("verify", "--plan", tmp_path / "tk.npy", "--plan", tmp_path / "ok.npy", "--max-leakage", 1, "--json", "-q")
    assert r.exit_code == 1
    checks = json.loads(r.stdout)["checks"]
    assert [c["file"] for c in checks if c["status"] == "fail"] == ["tk.npy"]
    assert any(c["file"] == "ok.npy" and c["name"] == "alignment" and c["status"] == "pass" for c in checks)
