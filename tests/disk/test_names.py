"""The one untrusted-name rule: every name read from metadata goes through ``disk.is_plain_name``."""

from __future__ import annotations

import json

import pytest

from winsample import disk, formats
from winsample.errors import DataError

OUTSIDE = ["", ".", "..", "../x.bin", "a/b.bin", "a\\b.bin", "x\0.bin", ".hidden.bin", " train.bin", "train.bin\n", 7, None]


@pytest.mark.parametrize("name", OUTSIDE)
def test_a_name_that_could_leave_its_folder_or_hide_is_refused(name):
    assert not disk.is_plain_name(name)
    with pytest.raises(DataError, match="where: .* is not a plain file name inside its folder"):
        disk.plain_name(name, "where")


@pytest.mark.parametrize("name", ["train.bin", "val.docs.npy", "a b.bin", "données.bin", "x..y"])
def test_ordinary_file_names_pass(name):
    assert disk.is_plain_name(name) and disk.plain_name(name, "w") == name


def test_meta_json_and_provenance_use_the_same_rule(tmp_path):
    """A hidden split file name passes neither meta.json's reader nor provenance's (the provenance
    reader had its own, looser copy of the rule)."""
    meta = {"format": "winsample", "version": 1, "dtype": "<u2",
            "tokenizer": {"name": "gpt2", "n_vocab": 50257, "eot": 50256},
            "splits": {"train": {"file": ".train.bin", "doc_index": None, "tokens": 0, "bytes": 0,
                                 "documents": 0, "max_token": None, "checksum": None}}}
    (tmp_path / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(DataError, match="'.train.bin'"):
        formats.load_meta(tmp_path / "meta.json")
    meta["splits"]["train"]["file"] = "train.bin"
    entry = {"file": ".train.prov.npy", "ids": None, "documents": 0}
    with pytest.raises(DataError, match="provenance.splits.train.file '.train.prov.npy' is not a file name"):
        formats.read_provenance(tmp_path, {"provenance": {"splits": {"train": entry}}}, "train")


def test_a_small_metadata_file_is_read_by_its_size_not_the_64_mib_bound(tmp_path):
    # #29 class 5: under `ulimit -v`, reading a 2 KB meta.json allocated MAX_METADATA_BYTES first
    import subprocess
    import sys

    meta = tmp_path / "meta.json"
    meta.write_text('{"format": "winsample"}' + " " * 2000)
    code = ("import resource, sys\nfrom winsample.disk import read_small_text\n"
            "vm = int([l for l in open('/proc/self/status') if l.startswith('VmSize')][0].split()[1]) * 1024\n"
            "resource.setrlimit(resource.RLIMIT_AS, (vm + (32 << 20), resource.RLIM_INFINITY))\n"
            "print(len(read_small_text(sys.argv[1], 'a meta.json')))")
    r = subprocess.run([sys.executable, "-c", code, str(meta)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(len(meta.read_text()))
