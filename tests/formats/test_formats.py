import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import xxhash

from winsample import disk, formats
from winsample.errors import DataError, InputError

from ..conftest import FIXTURES

GOLDEN = FIXTURES / "golden_v1"


def test_golden_v1_files_still_read(ref_gpt2):
    """A data folder written by format version 1 must keep reading, byte for byte."""
    meta = formats.read_meta(GOLDEN / "meta.json")
    docs = {"train": ["Hello world", "滑动窗口。"], "val": ["The end."]}
    for split, texts in docs.items():
        entry = meta["splits"][split]
        tokens = formats.open_tokens(GOLDEN / entry["file"], meta["dtype"])
        expected = [i for t in texts for i in ref_gpt2.encode_ordinary(t) + [50256]]
        assert tokens.tolist() == expected
        assert entry["tokens"] == len(expected) and entry["bytes"] == 2 * len(expected)
        assert entry["checksum"] == "xxh3_128:" + xxhash.xxh3_128(np.array(expected, "<u2").tobytes()).hexdigest()
        assert disk.checksum_file(GOLDEN / entry["file"]) == entry["checksum"]
        starts = formats.read_doc_index(GOLDEN / entry["doc_index"])
        assert list(starts) == list(np.cumsum([0] + [len(ref_gpt2.encode_ordinary(t)) + 1 for t in texts])[:-1])


def test_golden_bin_is_what_nanogpt_reads():
    data = np.memmap(GOLDEN / "train.bin", dtype=np.uint16, mode="r")
    assert data[:2].tolist() == [15496, 995]  # "Hello", " world"


@pytest.mark.parametrize(("n_vocab", "dtype"), [(50257, "<u2"), (65536, "<u2"), (65537, "<u4"), (200019, "<u4")])
def test_dtype_rule(n_vocab, dtype):
    assert formats.dtype_for_vocab(n_vocab) == dtype


def test_check_and_cast_refuses_id_that_would_wrap():
    ids = np.array([1, 2, 65536, 3])
    assert ids.astype(np.uint16)[2] == 0  # what a plain cast silently does
    with pytest.raises(DataError, match="position 2"):
        formats.check_and_cast(ids, "<u2", 100000, "doc.txt")


def test_check_and_cast_refuses_id_beyond_vocab():
    with pytest.raises(DataError, match="50257"):
        formats.check_and_cast(np.array([50257]), "<u2", 50257, "x")
    assert formats.check_and_cast(np.array([50256]), "<u2", 50257, "x").dtype == np.dtype("<u2")


def test_odd_byte_count_names_stray_bytes(tmp_path):
    p = tmp_path / "odd.bin"
    p.write_bytes(b"\x00" * 7)
    with pytest.raises(DataError, match="1 stray byte"):
        formats.open_tokens(p, "<u2")


def test_empty_bin_opens_as_empty(tmp_path):
    p = tmp_path / "empty.bin"
    p.write_bytes(b"")
    assert len(formats.open_tokens(p)) == 0


def test_missing_bin_is_input_error(tmp_path):
    with pytest.raises(InputError):
        formats.open_tokens(tmp_path / "nope.bin")


def test_atomic_open_keeps_old_file_on_failure(tmp_path):
    p = tmp_path / "out.bin"
    p.write_bytes(b"old")
    with pytest.raises(RuntimeError):
        with disk.atomic_open(p) as f:
            f.write(b"half of the new")
            raise RuntimeError("disk full")
    assert p.read_bytes() == b"old"
    assert list(tmp_path.iterdir()) == [p]


def test_atomic_open_replaces_on_success(tmp_path):
    p = tmp_path / "out.bin"
    p.write_bytes(b"old")
    with disk.atomic_open(p) as f:
        f.write(b"new")
        assert p.read_bytes() == b"old"  # not visible until the block ends
    assert p.read_bytes() == b"new"
    assert not disk.tmp_path(p).exists()


def test_meta_not_json(tmp_path):
    p = tmp_path / "meta.json"
    p.write_text('{"format": "winsample", ')
    with pytest.raises(DataError, match="not valid JSON"):
        formats.read_meta(p)


def test_meta_from_newer_version_is_refused(tmp_path):
    meta = json.loads((GOLDEN / "meta.json").read_text())
    meta["version"] = formats.FORMAT_VERSION + 1
    p = tmp_path / "meta.json"
    p.write_text(json.dumps(meta))
    with pytest.raises(DataError, match="newer"):
        formats.read_meta(p)


def test_meta_missing_split_field(tmp_path):
    meta = json.loads((GOLDEN / "meta.json").read_text())
    del meta["splits"]["val"]["tokens"]
    with pytest.raises(DataError, match="splits.val.tokens"):
        formats.validate_meta(meta)


def test_plan_round_trip(tmp_path):
    plan = np.zeros(3, dtype=formats.PLAN_DTYPE)
    plan["start"] = [0, 4, 8]
    plan["length"] = 5
    formats.write_plan(tmp_path / "p.npy", plan, {"T": 4})
    got, side = formats.read_plan(tmp_path / "p.npy")
    assert got.tolist() == plan.tolist() and side["T"] == 4 and side["format"] == "winsample-plan"


def test_plan_with_wrong_fields_is_refused(tmp_path):
    np.save(tmp_path / "p.npy", np.zeros(3, dtype=[("begin", "<i8")]))
    (tmp_path / "p.npy.json").write_text(json.dumps({"format": "winsample-plan", "version": 1}))
    with pytest.raises(DataError, match="not a window plan"):
        formats.read_plan(tmp_path / "p.npy")


def test_plan_without_sidecar_is_refused(tmp_path):
    np.save(tmp_path / "p.npy", np.zeros(3, dtype=formats.PLAN_DTYPE))
    with pytest.raises(DataError, match="sidecar"):
        formats.read_plan(tmp_path / "p.npy")


def test_staged_set_appears_only_on_commit(tmp_path):
    out = tmp_path / "data"
    shutil.copytree(GOLDEN, out)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    stage = formats.staging_dir(out)
    (stage / "train.bin").write_bytes(b"\x01\x00")
    (stage / "meta.json").write_text("{}")
    # a crash here: the old set is untouched and the next run cleans the stage
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
    assert formats.recover(out) == "cleaned"
    assert not stage.exists()
    stage = formats.staging_dir(out)
    (stage / "train.bin").write_bytes(b"\x01\x00")
    (stage / "meta.json").write_text("{}")
    disk.commit_staged(stage, out, ["train.bin", "meta.json"])
    assert (out / "train.bin").read_bytes() == b"\x01\x00" and (out / "meta.json").read_text() == "{}"
    assert not stage.exists()


def test_recover_rolls_forward_an_interrupted_commit(tmp_path):
    out = tmp_path / "data"
    out.mkdir()
    (out / "train.bin").write_bytes(b"old")
    stage = formats.staging_dir(out)
    (stage / "train.bin").write_bytes(b"new")
    (stage / "meta.json").write_text("{}")
    (stage / "COMMIT").write_text(json.dumps(["train.bin", "meta.json"]))  # died right after the mark
    assert formats.recover(out) == "rolled forward"
    assert (out / "train.bin").read_bytes() == b"new" and (out / "meta.json").exists()


def test_a_crash_at_any_step_of_the_moves_never_shows_an_old_file_beside_a_new_one(tmp_path, monkeypatch):
    """New-user trial: a kill -9 between the moves of a committed set left the new train.bin beside
    the old train.idx, and megatron-core read the pair without an error (3,101 of 3,105
    sequences wrong). Now the old files go first (meta.json first of all), then the new ones come
    in (meta.json last): after a crash at every step, each visible file is of one set only, the
    set is whole (old or new) or lacks files, and the next run finishes the moves."""
    names = ["train.bin", "train.idx", "val.bin", "val.idx", "meta.json"]
    steps = 0
    while True:
        out = tmp_path / f"data{steps}"
        out.mkdir()
        for n in names + ["llmc/train_000000.bin"]:
            (out / n).parent.mkdir(exist_ok=True)
            (out / n).write_bytes(b"old " + n.encode())
        stage = formats.staging_dir(out)
        for n in names:
            (stage / n).write_bytes(b"new " + n.encode())
        def counted(real, calls=[], steps=steps, mark=stage / "COMMIT"):  # noqa: B006 (one list per set)
            def op(*a, **k):
                if mark.exists():  # the moves (writing the mark renames too)
                    if len(calls) == steps:
                        raise KeyboardInterrupt  # the crash: nothing after this step runs
                    calls.append(1)
                return real(*a, **k)
            return op

        with monkeypatch.context() as m:
            m.setattr(disk.staging.os, "replace", counted(os.replace))
            m.setattr(disk.staging.Path, "unlink", counted(Path.unlink))
            try:
                disk.commit_staged(stage, out, names, remove=["llmc/train_000000.bin"])
                done = True
            except KeyboardInterrupt:
                done = False
        seen = {str(p.relative_to(out)): p.read_bytes().split()[0] for p in out.rglob("*")
                if p.is_file() and disk.STAGING_DIR not in p.parts}
        assert len(set(seen.values())) <= 1, (steps, seen)  # never old beside new
        if "meta.json" in seen:  # a set that claims to be whole is whole
            assert set(seen) == set(names) | ({"llmc/train_000000.bin"} if seen["meta.json"] == b"old" else set()), steps
        if done:
            break
        assert formats.recover(out) == "rolled forward"
        assert {str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*") if p.is_file()} == \
            {n: b"new " + n.encode() for n in names}, steps
        steps += 1
    assert steps == 2 * len(names) + 1  # 5 unlinks of old files, 1 removal, 5 moves: a crash tried before each


def test_a_plan_whose_moves_were_cut_short_is_refused_with_the_remedy_until_recovered(tmp_path):
    """The plan's files go through the same moves (old ones out, sidecar first; new ones in,
    sidecar last): a reader that finds the committed stage beside a plan missing its sidecar
    is told to run windows again, not that the plan has no sidecar."""
    from click.testing import CliRunner

    from winsample.cli import main

    np.arange(1000, dtype=np.uint16).tofile(tmp_path / "t.bin")
    plan = tmp_path / "plan.npy"
    assert CliRunner().invoke(main, ["windows", str(tmp_path / "t.bin"), "-T", "8", "-o", str(plan), "-q"]).exit_code == 0
    stage = formats.plan_staging_dir(plan)
    for name in ("plan.npy", "plan.npy.json"):
        shutil.copy(tmp_path / name, stage / name)
    (stage / "COMMIT").write_text(json.dumps(["plan.npy", "plan.npy.json"]))
    (tmp_path / "plan.npy.json").unlink()  # a kill right after the old sidecar went
    with pytest.raises(DataError, match="a windows run writing this plan stopped while moving its files in .*"
                                        " run that windows command again, which finishes the move first"):
        formats.load_plan(plan)
    assert formats.recover_plan(plan) == "rolled forward"
    rows, side = formats.load_plan(plan)
    assert len(rows) == side.stats.windows


def test_every_npy_header_parse_holds_the_lock(tmp_path, monkeypatch):
    """numpy parses .npy headers with ast.literal_eval, which CPython 3.11 cannot run on two threads
    at once (a SystemError seen in verify): formats' readers must each hold NPY_HEADER_LOCK."""
    import ast

    real, held = ast.literal_eval, []

    def checked(text):
        held.append(formats.NPY_HEADER_LOCK.locked())
        return real(text)

    monkeypatch.setattr(ast, "literal_eval", checked)
    np.save(tmp_path / "d.npy", np.arange(5, dtype=np.int64))
    np.save(tmp_path / "empty.npy", np.zeros(0, dtype=np.int64))
    formats.read_doc_index(tmp_path / "d.npy")  # npy_header, then np.load
    formats.load_npy_mmap(tmp_path / "d.npy", "a test array")
    formats.load_npy_mmap(tmp_path / "empty.npy", "a test array")  # the empty-body fallback
    assert len(held) >= 4 and all(held)
