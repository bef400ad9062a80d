"""meta.json and plan sidecars: the typed schema in formats.py (Meta, SplitEntry, ShardEntry, PlanSidecar).

Every bad field is refused by name with a DataError (exit 1 from verify); unknown fields are
kept and ignored; the golden v1 file keeps reading and writes back byte for byte.
"""

import copy
import json
import re
import shutil

import numpy as np
import pytest
from click.testing import CliRunner

from winsample import formats
from winsample.cli import main
from winsample.errors import DataError

from ..conftest import FIXTURES

GOLDEN = FIXTURES / "golden_v1"
GOLDEN_META = json.loads((GOLDEN / "meta.json").read_text())


def bad_meta(edit):
    meta = copy.deepcopy(GOLDEN_META)
    edit(meta)
    return meta


def test_golden_v1_reads_as_typed_meta_and_writes_back_the_same_bytes(tmp_path):
    meta = formats.load_meta(GOLDEN / "meta.json")
    assert meta.version == 1 and meta.dtype == "<u2" and meta.n_vocab == 50257
    assert meta.splits["train"] == formats.SplitEntry(
        file="train.bin", tokens=15, bytes=30, documents=2, checksum="xxh3_128:732a8d192fc7f0e69fa0c4dd4a0bf9a0",
        doc_index="train.docs.npy", max_token=50256)
    assert meta.split_for("data/val.bin")[0] == "val" and meta.split_for("other.bin") is None
    formats.write_meta(tmp_path / "meta.json", meta)
    assert (tmp_path / "meta.json").read_bytes() == (GOLDEN / "meta.json").read_bytes()


def test_unknown_fields_are_ignored_and_kept():
    meta = bad_meta(lambda m: (m.update(future={"x": 1}), m["splits"]["train"].update(provenance="p.npy"),
                               m["tokenizer"].update(added_tokens=3)))
    typed = formats.Meta.from_json(meta)
    assert typed.extra == {"future": {"x": 1}} and typed.splits["train"].extra == {"provenance": "p.npy"}
    assert typed.to_json() == meta


@pytest.mark.parametrize(("edit", "words"), [
    (lambda m: m.update(version=True), "version"),
    (lambda m: m.update(version=0), "version 0"),
    (lambda m: m.update(version=2), "newer"),
    (lambda m: m.update(version="1"), "version"),
    (lambda m: m.update(dtype="uint16"), "dtype 'uint16'"),
    (lambda m: m.update(dtype="<i2"), "dtype '<i2'"),
    (lambda m: m.update(dtype=None), "dtype None"),
    (lambda m: m["tokenizer"].update(n_vocab=True), "tokenizer.n_vocab"),
    (lambda m: m["tokenizer"].update(n_vocab=0), "tokenizer.n_vocab is 0"),
    (lambda m: m["tokenizer"].update(eot=50257), "tokenizer.eot is 50257"),
    (lambda m: m["tokenizer"].update(file=7), "tokenizer.file"),
    (lambda m: m.update(tokenizer=[]), "tokenizer"),
    (lambda m: m.update(eot_appended="yes"), "eot_appended"),
    (lambda m: m["split"].update(fraction=1.5), "split.fraction"),
    (lambda m: m["split"].update(seed="x"), "split.seed"),
    (lambda m: m.update(splits={}), "splits"),
    (lambda m: m["splits"]["train"].update(tokens=-1), "splits.train.tokens is -1"),
    (lambda m: m["splits"]["train"].update(tokens=True), "splits.train.tokens"),
    (lambda m: m["splits"]["train"].update(bytes=2.5), "splits.train.bytes"),
    (lambda m: m["splits"]["val"].pop("documents"), "splits.val.documents is missing"),
    (lambda m: m["splits"]["train"].update(max_token=-3), "splits.train.max_token"),
    (lambda m: m["splits"]["train"].update(checksum=5), "splits.train.checksum"),
    (lambda m: m["splits"]["train"].update(file="../train.bin"), "splits.train.file '../train.bin'"),
    (lambda m: m["splits"]["train"].update(file="/etc/passwd"), "splits.train.file '/etc/passwd'"),
    (lambda m: m["splits"]["train"].update(file="sub/train.bin"), "not a plain file name"),
    (lambda m: m["splits"]["train"].update(file=".."), "not a plain file name"),
    (lambda m: m["splits"]["train"].update(doc_index="../x.npy"), "splits.train.doc_index"),
    (lambda m: m["splits"].update(train="train.bin"), "splits.train is not an object"),
    (lambda m: m.update(inputs={}), "inputs"),
])
def test_bad_meta_field_is_refused_by_name(edit, words):
    with pytest.raises(DataError) as e:
        formats.Meta.from_json(bad_meta(edit), "d/meta.json")
    assert str(e.value).startswith("d/meta.json: ") and words in str(e.value)


def sharded_meta(**shard):
    entry = {"file": "shards/train-00000.bin", "doc_index": "shards/train-00000.docs.npy", "tokens": 15, "bytes": 30,
             "documents": 2, "max_token": 50256, "checksum": "xxh3_128:0", "continues": False, **shard}
    return bad_meta(lambda m: m["splits"]["train"].update(doc_index=None, shards=[entry]))


def test_sharded_entry_reads_and_round_trips():
    meta = sharded_meta()
    typed = formats.Meta.from_json(meta)
    assert typed.splits["train"].sharded and typed.splits["train"].shards[0].file == "shards/train-00000.bin"
    assert typed.to_json() == meta


@pytest.mark.parametrize(("shard", "words"), [
    ({"file": "train-00000.bin"}, "shards[0].file 'train-00000.bin'"),
    ({"file": "shards/../../x.bin"}, "shards[0].file"),
    ({"file": "shards/a/b.bin"}, "shards[0].file"),
    ({"file": "/shards/x.bin"}, "shards[0].file"),
    ({"doc_index": "../d.npy"}, "shards[0].doc_index"),
    ({"continues": 1}, "shards[0].continues"),
    ({"tokens": -5}, "shards[0].tokens"),
])
def test_bad_shard_entry_is_refused_by_name(shard, words):
    with pytest.raises(DataError, match=r"splits\.train\.") as e:
        formats.Meta.from_json(sharded_meta(**shard))
    assert words in str(e.value)


def golden_copy(tmp_path):
    d = tmp_path / "d"
    shutil.copytree(GOLDEN, d)
    return d


def test_split_file_present_but_its_entry_removed_fails(tmp_path):
    d = golden_copy(tmp_path)
    meta = json.loads((d / "meta.json").read_text())
    del meta["splits"]["val"]
    (d / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(DataError, match="val.bin is in .* but splits.val does not describe it"):
        formats.load_meta(d / "meta.json")
    (d / "val.bin").unlink()  # without the file, one split is a fine dataset
    assert list(formats.load_meta(d / "meta.json").splits) == ["train"]


@pytest.mark.parametrize("edit", [
    lambda m: m.update(version=False),
    lambda m: m["splits"]["train"].update(file="../outside.bin"),
    lambda m: m.update(dtype="uint16"),
    lambda m: m["splits"].pop("val"),
])
def test_verify_exits_1_on_a_bad_meta_field_naming_it(tmp_path, edit):
    d = golden_copy(tmp_path)
    meta = json.loads((d / "meta.json").read_text())
    edit(meta)
    (d / "meta.json").write_text(json.dumps(meta))
    r = CliRunner().invoke(main, ["verify", str(d), "--json"])
    assert r.exit_code == 1, r.output
    doc = json.loads(r.stdout)
    (m,) = [c for c in doc["checks"] if c["name"] == "meta"]
    assert m["status"] == "fail" and "meta.json" in m["detail"]


def write_plan(tmp_path, **side):
    plan = tmp_path / "p.npy"
    rows = np.zeros(1, formats.PLAN_DTYPE)
    base = {"source": {"path": "d/train.bin", "file": "train.bin", "bytes": 30, "checksum": "xxh3_128:0", "dtype": "<u2",
                       "tokens": 15}, "params": {"T": 4, "span": 5}, "stats": {"windows": 1}}
    for k, v in side.items():
        base[k] = v
    formats.write_plan(plan, rows, base)
    return plan


def test_plan_sidecar_reads_typed_and_round_trips(tmp_path):
    plan = write_plan(tmp_path)
    rows, side = formats.load_plan(plan)
    assert side.source.file == "train.bin" and side.source.tokens == 15 and side.params.span == 5
    assert side.to_json() == json.loads(formats.plan_sidecar(plan).read_text())


@pytest.mark.parametrize(("side", "words"), [
    ({"version": True}, "version"),
    ({"version": 0}, "version 0"),
    ({"version": 9}, "newer"),
    ({"source": {"file": "../train.bin"}}, "source.file '../train.bin'"),
    ({"source": {"file": "train.bin", "dtype": "float32"}}, "source.dtype"),
    ({"source": {"file": "train.bin", "bytes": -1}}, "source.bytes"),
    ({"source": "train.bin"}, "source is not a JSON object"),
    ({"params": {"span": 0}}, "params.span is 0"),
    ({"params": {"T": "4"}}, "params.T"),
    ({"params": []}, "params is not a JSON object"),
    ({"stats": {"windows": -1}}, "stats.windows"),
    ({"materialized": {"file": "/tmp/x.npy"}}, "materialized.file"),
])
def test_bad_sidecar_field_is_refused_by_name(tmp_path, side, words):
    plan = write_plan(tmp_path, **side)
    with pytest.raises(DataError) as e:
        formats.load_plan(plan)
    assert str(e.value).startswith(f"{formats.plan_sidecar(plan)}: ") and words in str(e.value)


def test_a_plan_with_an_extra_field_is_refused_by_name(tmp_path):
    # a field no plan has (a hand-edited .npy): one line naming it, never numpy's "Cannot cast"
    plan = write_plan(tmp_path)
    rows = np.load(plan)
    wider = np.zeros(len(rows), np.dtype(rows.dtype.descr + [("weight", "<f4")]))
    for name in rows.dtype.names:
        wider[name] = rows[name]
    np.save(plan, wider)
    with pytest.raises(DataError, match="fields weight are not a plan's: a plan holds exactly start, length, doc, fresh"):
        formats.load_plan(plan)


@pytest.mark.parametrize(("side", "words"), [
    ({"params": {"T": 4, "span": 5, "tail": "middle"}}, "params.tail is 'middle', not one of align, short, drop"),
    ({"params": {"T": 4, "span": 5, "pack": "yes"}}, "params.pack is 'yes', not one of false, true, best-fit"),
    ({"params": {"T": 4, "span": 5, "pack": 1}}, "params.pack is 1, not one of false, true, best-fit"),
    ({"params": {"T": 4, "span": 5, "stride": 0}}, "params.stride"),
    ({"params": {"T": 2**63, "span": 5}}, "params.T is 9223372036854775808, above 2147483647"),  # the rows' int32 length
    ({"params": {"T": 4, "span": 2**31}}, "params.span is 2147483648, above 2147483647"),
])
def test_sidecar_values_windows_never_writes_are_refused_by_name(tmp_path, side, words):
    # #29 class 11: validated like the rest, not left for a reader to trip on
    plan = write_plan(tmp_path, **side)
    with pytest.raises(DataError, match=re.escape(words)):
        formats.load_plan(plan)


def test_a_split_method_encode_never_writes_is_refused(tmp_path):
    meta = json.loads((GOLDEN / "meta.json").read_text())
    meta["split"]["method"] = "random"
    (tmp_path / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(DataError, match="split.method is 'random', not one of doc, tail"):
        formats.load_meta(tmp_path / "meta.json")
