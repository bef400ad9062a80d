"""One rule protects every file a dataset owns: whatever meta.json names, wherever it names it."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from winsample import formats
from winsample.cli import main


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("ds")
    with open(root / "docs.jsonl", "w", encoding="utf-8") as f:
        for i in range(40):
            f.write(json.dumps({"id": f"r{i}", "text": f"record {i} " * 50}) + "\n")
    r = CliRunner().invoke(main, ["encode", str(root / "docs.jsonl"), "-o", str(root / "data"), "--id-field", "id",
                                  "--val-fraction", "0.3", "-q", "--workers", "1"])
    assert r.exit_code == 0, r.stderr
    return root / "data"


def test_provenance_files_are_files_of_the_dataset(data):
    files = set(formats.dataset_files(data))
    for split in ("train", "val"):
        assert data / f"{split}.prov.npy" in files and data / f"{split}.prov.ids.npy" in files


@pytest.mark.parametrize("target", ["train.prov.npy", "val.prov.ids.npy"])
def test_no_output_overwrites_provenance(data, target):
    before = (data / target).read_bytes()
    r = CliRunner().invoke(main, ["windows", str(data / "train.bin"), "-T", "16", "-o", str(data / target), "-q"])
    assert r.exit_code == 2, r.stderr
    plan = data.parent / "p.npy"
    assert CliRunner().invoke(main, ["windows", str(data / "train.bin"), "-T", "16", "-o", str(plan), "-q"]).exit_code == 0
    r = CliRunner().invoke(main, ["verify", str(data), "--plan", str(plan), "--plot", str(data / target), "-q"])
    assert r.exit_code == 2, r.stderr
    assert (data / target).read_bytes() == before


def test_a_name_of_a_kind_added_later_is_protected_too(tmp_path, data):
    """A future meta.json entry (masks, mixtures) is covered without changing the rule."""
    meta = json.loads((data / "meta.json").read_text())
    meta["loss_masks"] = {"splits": {"train": {"file": "train.mask.npy"}}}
    (tmp_path / "meta.json").write_text(json.dumps(meta))
    assert tmp_path / "train.mask.npy" in formats.dataset_files(tmp_path)
