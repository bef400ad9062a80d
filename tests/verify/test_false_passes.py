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
