"""encode --layout megatron,llmc and verify / windows / inspect on those layouts.

Expectations come from the published formats, written out here independently of
winsample.layouts: llm.c's shard (``dev/data/data_common.py``: 256 little-endian int32
[20240520, 1, count, 0…], then uint16 ids), its loader (``dataloader.h``: a batch of B×T+1
tokens per step), modded-nanogpt's ``_load_data_shard`` and its BOS-aligned starts, and
megatron-core's index (tested against megatron-core itself in test_megatron_client.py).
Token ids come from tiktoken directly (the ``ref_gpt2`` fixture), never from winsample.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from winsample.cli import main

EOT = 50256


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def make_docs(n: int = 14, seed: int = 3) -> list[str]:
    rng = np.random.default_rng(seed)
    words = "the window stride token shard index model train data river stone light map seven".split()
    return [" ".join(rng.choice(words, int(rng.integers(20, 400)))) + "." for _ in range(n)]


@pytest.fixture
def corpus(tmp_path) -> tuple[Path, list[str]]:
    docs = make_docs()
    path = tmp_path / "docs.jsonl"
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in docs))
    return path, docs


# --- llm.c's format, written from its published description -------------------------------


def llmc_read_shard(path: Path) -> np.ndarray:
    """llm.c dataloader.h / modded-nanogpt _load_data_shard: header checks, then count uint16 ids."""
    raw = path.read_bytes()
    header = np.frombuffer(raw[:1024], dtype="<i4")
    assert header.shape == (256,)
    assert header[0] == 20240520, "magic number mismatch in the data .bin file"
    assert header[1] == 1, "unsupported version"
    count = int(header[2])
    assert not header[3:].any()
    tokens = np.frombuffer(raw[1024:], dtype="<u2")
    assert len(tokens) == count, "number of tokens read does not match header"
    assert len(raw) == 1024 + 2 * count
    return tokens


def llmc_batches(files: list[Path], B: int, T: int):
    """llm.c's DataLoader (single process): each step reads B*T+1 tokens at the current position,
    x = buf[:-1], y = buf[1:], advances B*T; the next shard when fewer than B*T+1 are left."""
    for f in files:
        tokens = llmc_read_shard(f)
        pos = 0
        while pos + B * T + 1 <= len(tokens):
            buf = tokens[pos : pos + B * T + 1].astype(np.int64)
            yield buf[:-1].reshape(B, T), buf[1:].reshape(B, T)
            pos += B * T


def bos_starts(tokens: np.ndarray) -> np.ndarray:
    """modded-nanogpt's document starts: the positions of BOS (= <|endoftext|> for GPT-2)."""
    return np.flatnonzero(tokens == EOT)


def expected_llmc_stream(ref, docs: list[str]) -> np.ndarray:
    """llm.c's fineweb.py: tokens = [eot] + encode_ordinary(text) for each document."""
    out = []
    for t in docs:
        out += [EOT] + ref.encode_ordinary(t)
    return np.array(out, dtype=np.int64)


# --- writing ------------------------------------------------------------------------------


def test_llmc_shards_are_eot_then_document_for_each_document_in_order(tmp_path, corpus, ref_gpt2):
    path, docs = corpus
    out = tmp_path / "out"
    r = run("encode", path, "-o", out, "--layout", "llmc", "--val-fraction", "0", "--shard-tokens", "1000", "-q")
    assert r.exit_code == 0, r.output
    files = sorted((out / "llmc").glob("train_*.bin"))
    assert [f.name for f in files] == [f"train_{i:06d}.bin" for i in range(len(files))]
    stream = np.concatenate([llmc_read_shard(f) for f in files]).astype(np.int64)
    want = expected_llmc_stream(ref_gpt2, docs)
    np.testing.assert_array_equal(stream, want)
    # ceil(n / --shard-tokens) shards, at most --shard-tokens each, sizes within one token
    counts = [len(llmc_read_shard(f)) for f in files]
    assert len(files) == -(-len(want) // 1000) > 1
    assert max(counts) <= 1000 and max(counts) - min(counts) <= 1
    # modded-nanogpt finds one document start per document, where each document begins
    lengths = [len(ref_gpt2.encode_ordinary(t)) + 1 for t in docs]
    np.testing.assert_array_equal(bos_starts(stream), np.cumsum([0] + lengths[:-1]))
    # without nanogpt or megatron no .bin is kept
    assert not (out / "train.bin").exists() and not (out / "train.docs.npy").exists()
    assert not list((out / "llmc").glob("val_*.bin"))  # --val-fraction 0: no val shard


def test_llmc_batches_of_B_times_T_plus_1_tokens_read_the_stream_in_order(tmp_path, corpus, ref_gpt2):
    path, docs = corpus
    out = tmp_path / "out"
    assert run("encode", path, "-o", out, "--layout", "llmc", "--val-fraction", "0", "-q").exit_code == 0
    files = sorted((out / "llmc").glob("train_*.bin"))
    assert len(files) == 1  # default --shard-tokens 100M
    want = expected_llmc_stream(ref_gpt2, docs)
    B, T = 2, 64
    steps = list(llmc_batches(files, B, T))
    assert len(steps) == (len(want) - 1) // (B * T)
    for k, (x, y) in enumerate(steps):
        lo = k * B * T
        np.testing.assert_array_equal(x.ravel(), want[lo : lo + B * T])
        np.testing.assert_array_equal(y.ravel(), want[lo + 1 : lo + B * T + 1])
    assert steps[0][0][0, 0] == EOT  # the first sequence starts at a document start


def test_llmc_with_no_eot_still_puts_eot_before_every_document(tmp_path, corpus, ref_gpt2):
    path, docs = corpus
    out = tmp_path / "out"
    assert run("encode", path, "-o", out, "--layout", "nanogpt,llmc", "--val-fraction", "0", "--no-eot", "-q").exit_code == 0
    stream = llmc_read_shard(out / "llmc" / "train_000000.bin").astype(np.int64)
    np.testing.assert_array_equal(stream, expected_llmc_stream(ref_gpt2, docs))
    # the nanoGPT file is the plain concatenation (no EOT at all), unchanged by the extra layout
    nano = np.fromfile(out / "train.bin", dtype="<u2").astype(np.int64)
    np.testing.assert_array_equal(nano, np.concatenate([ref_gpt2.encode_ordinary(t) for t in docs]))


def test_an_empty_val_split_by_design_verifies_as_the_nanogpt_one_does(tmp_path, corpus):
    """New-user trial: --layout llmc --val-fraction 0 wrote an empty llmc/val shard that verify then
    failed (min_length: "empty file"), while the empty val.bin beside it is "empty by design"."""
    path, _ = corpus
    out = tmp_path / "out"
    assert run("encode", path, "-o", out, "--layout", "nanogpt,llmc", "--val-fraction", "0", "-q").exit_code == 0
    r = run("verify", out, "--json")
    doc = json.loads(r.stdout)
    lines = {(c["name"], c["file"]): c for c in doc["checks"]}
    assert r.exit_code == 0 and lines["min_length", "llmc/val_*.bin"]["status"] == "skip"
    assert "empty by design" in lines["min_length", "llmc/val_*.bin"]["detail"]
    assert sorted(p.name for p in (out / "llmc").iterdir()) == ["train_000000.bin"]  # no empty shard to name on its own


def test_llmc_split_tail_cuts_a_document_and_both_pieces_start_with_eot(tmp_path, corpus, ref_gpt2):
    path, docs = corpus
    out = tmp_path / "out"
    assert run("encode", path, "-o", out, "--layout", "nanogpt,llmc", "--split", "tail", "--val-fraction", "0.37", "-q").exit_code == 0
    meta = json.loads((out / "meta.json").read_text())
    nano = np.concatenate([[*ref_gpt2.encode_ordinary(t), EOT] for t in docs]).astype(np.int64)
    n = len(nano)
    cut = n - int(n * 0.37)
    assert meta["splits"]["train"]["tokens"] == cut
    train = llmc_read_shard(out / "llmc" / "train_000000.bin").astype(np.int64)
    val = llmc_read_shard(out / "llmc" / "val_000000.bin").astype(np.int64)
    # each split: EOT before each of its documents (pieces included), the appended EOT dropped
    for stream, part in ((train, nano[:cut]), (val, nano[cut:])):
        pieces = np.split(part, np.flatnonzero(part == EOT) + 1)
        want = np.concatenate([[EOT, *p[p != EOT]] for p in pieces if len(p)])
        np.testing.assert_array_equal(stream, want)
    assert run("verify", out, "--show", "0").exit_code == 0


def test_megatron_layout_writes_idx_beside_bin_and_verify_passes(tmp_path, corpus):
    path, _ = corpus
    out = tmp_path / "out"
    r = run("encode", path, "-o", out, "--layout", "megatron", "-q")
    assert r.exit_code == 0, r.output
    for split in ("train", "val"):
        raw = (out / f"{split}.idx").read_bytes()
        magic, version, code, s, c = struct.unpack("<9sQBQQ", raw[:34])
        starts = np.load(out / f"{split}.docs.npy")
        n = (out / f"{split}.bin").stat().st_size // 2
        assert (magic, version, code, s, c) == (b"MMIDIDX\x00\x00", 1, 8, len(starts), len(starts) + 1)
        lengths = np.frombuffer(raw, "<i4", s, 34)
        pointers = np.frombuffer(raw, "<i8", s, 34 + 4 * s)
        doc_idx = np.frombuffer(raw, "<i8", c, 34 + 12 * s)
        np.testing.assert_array_equal(lengths, np.diff(np.append(starts, n)))
        np.testing.assert_array_equal(pointers, starts * 2)
        np.testing.assert_array_equal(doc_idx, np.arange(s + 1))
        assert len(raw) == 34 + 12 * s + 8 * c
    meta = json.loads((out / "meta.json").read_text())
    assert set(meta["layouts"]) == {"megatron"}
    r = run("verify", out, "--show", "0", "--json")
    assert r.exit_code == 0, r.output
    checks = json.loads(r.stdout)["checks"]
    assert [c["status"] for c in checks if c["name"] == "megatron_index"] == ["pass", "pass"]


def test_megatron_uint32_bin_gets_the_int32_code_with_the_same_bytes(tmp_path, corpus, ref_gpt2):
    path, docs = corpus
    out = tmp_path / "out"
    assert run("encode", path, "-o", out, "--layout", "megatron", "--dtype", "uint32", "--val-fraction", "0", "-q").exit_code == 0
    raw = (out / "train.idx").read_bytes()
    assert raw[17] == 4  # megatron-core DType.int32
    as_int32 = np.fromfile(out / "train.bin", dtype="<i4")
    want = np.concatenate([[*ref_gpt2.encode_ordinary(t), EOT] for t in docs])
    np.testing.assert_array_equal(as_int32, want)
    s = struct.unpack("<Q", raw[18:26])[0]
    np.testing.assert_array_equal(np.frombuffer(raw, "<i8", s, 34 + 4 * s), np.load(out / "train.docs.npy") * 4)


def test_llmc_of_uint32_ids_is_llmcs_version_7(tmp_path, corpus, ref_gpt2):
    # llm.c's Llama 3 shards (train_llama3.py): magic 20240801, version 7, uint32 ids (tests/tokensrc/test_llmc_v7.py)
    path, docs = corpus
    out = tmp_path / "out"
    r = run("encode", path, "-o", out, "--layout", "nanogpt,llmc", "--dtype", "uint32", "--val-fraction", "0", "-q")
    assert r.exit_code == 0, r.output
    raw = (out / "llmc" / "train_000000.bin").read_bytes()
    header = np.frombuffer(raw[:1024], "<i4")
    assert header[:3].tolist() == [20240801, 7, (len(raw) - 1024) // 4] and not header[3:].any()
    np.testing.assert_array_equal(np.frombuffer(raw[1024:], "<u4"), expected_llmc_stream(ref_gpt2, docs))


@pytest.mark.parametrize("bad", ["parquet", "", "nanogpt,,foo"])
def test_unknown_layout_is_a_usage_error(tmp_path, corpus, bad):
    path, _ = corpus
    r = run("encode", path, "-o", tmp_path / "out", "--layout", bad, "-q")
    assert r.exit_code == 2 and "--layout" in r.stderr
    assert not (tmp_path / "out").exists()


def test_default_layout_is_nanogpt_only(tmp_path, corpus):
    path, _ = corpus
    out = tmp_path / "out"
    assert run("encode", path, "-o", out, "-q").exit_code == 0
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == [
        "meta.json", "train.bin", "train.docs.npy", "train.prov.npy", "val.bin", "val.docs.npy", "val.prov.npy"]  # + provenance
    assert list(json.loads((out / "meta.json").read_text())["layouts"]) == ["nanogpt"]


def test_a_new_set_removes_layout_files_the_old_set_had(tmp_path, corpus):
    path, _ = corpus
    out = tmp_path / "out"
    assert run("encode", path, "-o", out, "--layout", "nanogpt,megatron,llmc", "--shard-tokens", "500", "-q").exit_code == 0
    many = sorted((out / "llmc").glob("*.bin"))
    assert len(many) > 4 and (out / "train.idx").exists()
    assert run("encode", path, "-o", out, "--layout", "llmc", "-q").exit_code == 0
    assert sorted(p.name for p in (out / "llmc").glob("*.bin")) == ["train_000000.bin", "val_000000.bin"]
    assert not (out / "train.idx").exists() and not (out / "train.bin").exists()
    assert run("verify", out, "--show", "0").exit_code == 0
    assert run("encode", path, "-o", out, "-q").exit_code == 0
    assert not (out / "llmc").exists() and (out / "train.bin").exists()  # the folder the old set alone filled goes too


def test_a_folder_the_old_set_shared_with_a_users_file_stays_with_that_file(tmp_path, corpus):
    path, _ = corpus
    out = tmp_path / "out"
    assert run("encode", path, "-o", out, "--layout", "nanogpt,llmc", "-q").exit_code == 0
    (out / "llmc" / "README.txt").write_text("mine")
    assert run("encode", path, "-o", out, "-q").exit_code == 0
    assert [p.name for p in (out / "llmc").iterdir()] == ["README.txt"]


def test_the_three_layouts_hold_the_same_documents(tmp_path, corpus):
    path, _ = corpus
    out = tmp_path / "out"
    assert run("encode", path, "-o", out, "--layout", "nanogpt,megatron,llmc", "-q").exit_code == 0
    for split in ("train", "val"):
        nano = np.fromfile(out / f"{split}.bin", "<u2").astype(np.int64)
        starts = np.load(out / f"{split}.docs.npy")
        docs = np.split(nano, starts[1:])
        llmc = np.concatenate([llmc_read_shard(f) for f in sorted((out / "llmc").glob(f"{split}_*.bin"))]).astype(np.int64)
        ldocs = np.split(llmc, bos_starts(llmc)[1:])
        assert len(ldocs) == len(docs)
        for a, b in zip(docs, ldocs):
            np.testing.assert_array_equal(b, [EOT, *a[:-1]])  # EOT moved from after to before


# --- verify: corruptions name the file -----------------------------------------------------


@pytest.fixture
def layered(tmp_path, corpus) -> Path:
    path, _ = corpus
    out = tmp_path / "out"
    assert run("encode", path, "-o", out, "--layout", "nanogpt,megatron,llmc", "--shard-tokens", "700", "-q").exit_code == 0
    assert run("verify", out, "--show", "0").exit_code == 0
    return out


def _poke(path: Path, offset: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


def _failed(out: Path, *extra) -> list[dict]:
    r = run("verify", out, "--show", "0", "--json", *extra)
    assert r.exit_code == 1, r.output
    return [c for c in json.loads(r.stdout)["checks"] if c["status"] == "fail"]


def test_llmc_bad_magic_fails_naming_the_shard(layered):
    _poke(layered / "llmc" / "train_000001.bin", 0, struct.pack("<i", 20240521))
    fails = _failed(layered)
    assert any(c["name"] == "llmc_shards" and "train_000001.bin" in c["detail"] and "magic" in c["detail"] for c in fails)


def test_llmc_wrong_count_fails_naming_the_shard(layered):
    _poke(layered / "llmc" / "val_000000.bin", 8, struct.pack("<i", 699))
    fails = _failed(layered)
    assert any(c["name"] == "llmc_shards" and "val_000000.bin" in c["detail"] and "699" in c["detail"] for c in fails)


def test_llmc_truncated_shard_fails_naming_it(layered):
    f = layered / "llmc" / "train_000002.bin"
    f.write_bytes(f.read_bytes()[:-3])
    fails = _failed(layered)
    assert any(c["name"] == "llmc_shards" and "train_000002.bin" in c["detail"] and "truncated" in c["detail"] for c in fails)


def test_llmc_changed_token_fails_its_checksum_and_a_missing_eot_fails_documents(layered, tmp_path):
    f = layered / "llmc" / "train_000000.bin"
    _poke(f, 1024, struct.pack("<H", 11))  # the first EOT becomes an ordinary id
    fails = _failed(layered)
    assert any(c["name"] == "llmc_shards" and "train_000000.bin" in c["detail"] and "hashes" in c["detail"] for c in fails)
    # the same file away from its meta.json: no checksum, but the stream no longer starts with EOT
    f = shutil.copy(f, tmp_path / f.name)
    r = run("verify", f, "--show", "0", "--json")
    checks = {c["name"]: c for c in json.loads(r.stdout)["checks"]}
    assert checks["llmc_documents"]["status"] == "warn" and "11" in checks["llmc_documents"]["detail"]


def test_llmc_id_outside_the_vocabulary_fails_vocab_range(layered):
    _poke(layered / "llmc" / "val_000000.bin", 1024 + 2 * 5, struct.pack("<H", 60000))
    fails = _failed(layered)
    assert any(c["name"] == "vocab_range" and "val" in c["file"] for c in fails)


@pytest.mark.parametrize(
    "offset, data, words",
    [
        (0, b"XXIDIDX\x00\x00", "magic"),
        (9, struct.pack("<Q", 2), "version"),
        (17, bytes([9]), "dtype code"),
        (34, struct.pack("<i", 3), "points at"),  # the first sequence length: the next pointer disagrees
    ],
)
def test_megatron_index_corruption_fails_naming_the_idx(layered, offset, data, words):
    _poke(layered / "train.idx", offset, data)
    fails = _failed(layered)
    assert any(c["name"] == "megatron_index" and "train.idx" in c["detail"] + c["file"] and words in c["detail"] for c in fails), fails


def test_megatron_last_length_corruption_fails_the_sum(layered):
    raw = (layered / "train.idx").read_bytes()
    s = struct.unpack("<Q", raw[18:26])[0]
    _poke(layered / "train.idx", 34 + 4 * (s - 1), struct.pack("<i", 1))
    fails = _failed(layered)
    assert any(c["name"] == "megatron_index" and "train.idx" in c["detail"] and "sum to" in c["detail"] for c in fails)


def test_megatron_pointer_corruption_fails_naming_the_idx(layered):
    raw = (layered / "train.idx").read_bytes()
    s = struct.unpack("<Q", raw[18:26])[0]
    assert s >= 2
    _poke(layered / "train.idx", 34 + 4 * s + 8, struct.pack("<q", 7))  # the second pointer
    fails = _failed(layered)
    assert any(c["name"] == "megatron_index" and "train.idx" in c["detail"] and "points at byte 7" in c["detail"] for c in fails)


def test_megatron_truncated_index_fails_naming_it(layered):
    f = layered / "val.idx"
    f.write_bytes(f.read_bytes()[:-8])
    fails = _failed(layered)
    assert any(c["name"] == "megatron_index" and "val.idx" in c["detail"] and "truncated" in c["detail"] for c in fails)


# --- data without meta.json -----------------------------------------------------------------


def test_verify_takes_an_llmc_folder_a_glob_and_one_shard_without_meta(layered, tmp_path):
    bare = tmp_path / "bare"  # the shards alone, no data folder above them
    shutil.copytree(layered / "llmc", bare)
    for target in (bare, f"{bare}/train_*.bin", bare / "val_000000.bin"):
        r = run("verify", target, "--show", "1", "--json")
        assert r.exit_code == 0, r.output
        rep = json.loads(r.stdout)
        names = {c["name"] for c in rep["checks"]}
        assert {"llmc_shards", "vocab_range", "llmc_documents", "meta"} <= names
        meta = next(c for c in rep["checks"] if c["name"] == "meta")
        assert meta["status"] == "skip" and "no checksums" in meta["detail"]
    r = run("verify", f"{layered}/llmc/nothing_*.bin")
    assert r.exit_code == 2 and "matches no file" in r.stderr


def _llmc_alone(target, *extra) -> tuple[int, dict]:
    r = run("verify", target, "--show", "0", "--json", *extra)
    return r.exit_code, {(c["name"], c["file"]): c for c in json.loads(r.stdout)["checks"]}


def test_llmc_shards_verified_alone_are_compared_with_their_data_folders_meta(layered):
    # encode --layout llmc lists every shard in the meta.json above llmc/: verifying the shards on
    # their own must use it (a new user's `verify data/llmc/` passed a corrupted shard)
    meta = json.loads((layered / "meta.json").read_text())
    train = meta["layouts"]["llmc"]["splits"]["train"]
    assert len(train["shards"]) >= 3
    for target, extra in ((layered / "llmc", ()), (f"{layered}/llmc/train_*.bin", ()), (layered / "llmc", ("--meta", layered / "meta.json")),
                          (layered / "llmc" / "train_000001.bin", ())):
        code, checks = _llmc_alone(target, *extra)
        assert code == 0
        metas = [c for (name, _), c in checks.items() if name == "meta"]
        assert len(metas) == 1 and metas[0]["status"] == "pass" and "lists these shards" in metas[0]["detail"]
        shards = [c for (name, _), c in checks.items() if name == "llmc_shards"]
        assert shards and all(c["status"] == "pass" and "checksums as meta.json records" in c["detail"] for c in shards)
    _poke(layered / "llmc" / "train_000001.bin", 1024 + 2 * 10, b"\x07\x00")  # one id changed: header and size still agree
    want = train["shards"][1]["checksum"]
    for target in (layered / "llmc", layered / "llmc" / "train_000001.bin"):
        code, checks = _llmc_alone(target)
        assert code == 1
        bad = [c for (name, _), c in checks.items() if name == "llmc_shards" and c["status"] == "fail"]
        assert len(bad) == 1 and "train_000001.bin: hashes to" in bad[0]["detail"] and want in bad[0]["detail"]
    r = run("inspect", layered / "llmc" / "train_000000.bin", "--count", "2", "--json")
    rep = json.loads(r.stdout)
    assert r.exit_code == 0 and rep["listed_in"] == str(layered / "meta.json")
    assert not any("not recorded anywhere" in w for w in rep["warnings"])


def test_a_shard_lost_from_the_data_folders_llmc_fails_naming_it(layered):
    # the shards named on their own must still be all of the split meta.json lists
    names = [sh["file"] for sh in json.loads((layered / "meta.json").read_text())["layouts"]["llmc"]["splits"]["train"]["shards"]]
    assert len(names) >= 3
    for lost in (names[1], names[-1]):  # from the middle, and the last (no gap in the numbers to see)
        f = layered / lost
        keep = f.read_bytes()
        f.unlink()
        for target in (layered / "llmc", f"{layered}/llmc/train_*.bin"):
            code, checks = _llmc_alone(target)
            assert code == 1
            bad = [c for (name, _), c in checks.items() if name == "llmc_shards" and c["status"] == "fail"]
            assert len(bad) == 1 and bad[0]["missing"] == [lost] and lost in bad[0]["detail"]
        f.write_bytes(keep)
    code, checks = _llmc_alone(layered / names[0])  # one shard file: compared alone, not a loss
    assert code == 0


def test_llmc_owner_is_found_from_inside_the_folder_and_through_a_link(layered, tmp_path, monkeypatch):
    _poke(layered / "llmc" / "train_000001.bin", 1024 + 2 * 10, b"\x07\x00")
    os.symlink(layered / "llmc", tmp_path / "shards")
    for cwd, target in ((layered / "llmc", "."), (layered / "llmc", "train_000001.bin"), (tmp_path, "shards")):
        monkeypatch.chdir(cwd)
        code, checks = _llmc_alone(target)
        assert code == 1, (cwd, target)
        assert any(name == "llmc_shards" and c["status"] == "fail" and "hashes to" in c["detail"] for (name, _), c in checks.items())


@pytest.mark.parametrize("layouts_value", [["llmc"], "llmc", {"llmc": {"splits": {"train": {"shards": [{"file": "llmc/train_000000.bin", "tokens": "9"}]}}}}])
def test_a_broken_layouts_entry_fails_the_meta_check_of_shards_named_alone(layered, layouts_value):
    meta = json.loads((layered / "meta.json").read_text())
    meta["layouts"] = layouts_value
    (layered / "meta.json").write_text(json.dumps(meta))
    code, checks = _llmc_alone(layered / "llmc" / "train_000000.bin")
    assert code == 1  # not an internal error (2), not a pass as if there were no meta.json
    metas = [c for (name, _), c in checks.items() if name == "meta"]
    assert metas and metas[0]["status"] == "fail" and "cannot be compared" in metas[0]["detail"]


def test_shards_under_a_data_folder_whose_meta_has_no_llmc_layout_read_as_without_meta(layered):
    meta = json.loads((layered / "meta.json").read_text())
    del meta["layouts"]["llmc"]  # a data folder written without --layout llmc; these shards are someone else's
    (layered / "meta.json").write_text(json.dumps(meta))
    code, checks = _llmc_alone(layered / "llmc")
    assert code == 0
    metas = [c for (name, _), c in checks.items() if name == "meta"]
    assert len(metas) == 1 and metas[0]["status"] == "skip" and "no checksums" in metas[0]["detail"]


def test_windows_reads_shards_a_meta_lists_with_or_without_meta(layered, tmp_path):
    plans = []
    for extra in ((), ("--meta", layered / "meta.json")):
        out = tmp_path / f"p{len(plans)}.npy"
        r = run("windows", f"{layered}/llmc/train_*.bin", "-T", "32", "--boundaries", "doc", "-o", out, "-q", *extra)
        assert r.exit_code == 0, r.output
        plans.append(np.load(out))
    np.testing.assert_array_equal(plans[0], plans[1])


def test_a_shard_missing_from_the_numbers_is_a_warning_without_meta(layered, tmp_path):
    shards = sorted((layered / "llmc").glob("train_*.bin"))
    assert len(shards) >= 3, "the fixture must have at least three train shards"
    for f in shards:
        if f != shards[1]:
            (tmp_path / f.name).write_bytes(f.read_bytes())
    r = run("verify", tmp_path, "--show", "1", "--json")
    assert r.exit_code == 0  # a warning: without meta.json the shards could have been left out on purpose
    warn = [c for c in json.loads(r.stdout)["checks"] if c["name"] == "llmc_shards" and c["status"] == "warn"]
    assert len(warn) == 1 and warn[0]["missing"] == [shards[1].name]
    assert run("verify", tmp_path, "--show", "1", "--strict").exit_code == 1
    assert tokensrc.missing_shards([Path("fineweb_train_000001.bin"), Path("fineweb_train_000002.bin")]) == []  # llm.c starts at 1


def test_windows_plans_an_llmc_glob_and_verify_checks_the_plan(layered, tmp_path):
    plan = tmp_path / "p.npy"
    pattern = f"{layered}/llmc/train_*.bin"
    r = run("windows", pattern, "-T", "64", "--boundaries", "doc", "-o", plan, "-q")
    assert r.exit_code == 0, r.output
    rows = np.load(plan)
    stream = np.concatenate([llmc_read_shard(f) for f in sorted((layered / "llmc").glob("train_*.bin"))])
    # --boundaries doc: every document's first window starts at one of its EOTs
    starts = set(bos_starts(stream.astype(np.int64)).tolist())
    firsts = rows["start"][np.r_[True, rows["doc"][1:] != rows["doc"][:-1]]]
    assert set(firsts.tolist()) <= starts and len(firsts) == len(starts)
    assert rows["start"].max() + rows["length"].max() <= len(stream)
    r = run("verify", pattern, "--plan", plan, "--show", "1")
    assert r.exit_code == 0, r.output


def test_a_plan_of_an_llmc_glob_finds_its_shards_from_its_sidecar(layered, tmp_path, monkeypatch):
    # the sidecar records the glob as given: verify with no PATH, verify of the shards' folder
    # (train and val, two streams) and the Loader must all find the stream through it
    monkeypatch.chdir(layered)
    (tmp_path / "plans").mkdir()
    plan = tmp_path / "plans" / "p.npy"
    assert run("windows", "llmc/train_*.bin", "-T", "64", "--boundaries", "doc", "-o", plan, "-q").exit_code == 0
    for args in (["verify", "--plan", plan], ["verify", "llmc", "--plan", plan]):
        r = run(*args, "--show", "0", "--json")
        assert r.exit_code == 0, r.output
        bounds = [c for c in json.loads(r.stdout)["checks"] if c["name"] == "plan_bounds"]
        assert [c["status"] for c in bounds] == ["pass"], bounds
    stream = np.concatenate([llmc_read_shard(f) for f in sorted(Path("llmc").glob("train_*.bin"))])
    import winsample

    x, y = winsample.Loader(plan, batch_size=2, seed=0).batch(0, 0)
    spans = {tuple(stream[s : s + 65].tolist()) for s in np.load(plan)["start"].tolist()}
    assert x.shape == (2, 64)
    assert all(tuple(xr.tolist()) + (int(yr[-1]),) in spans and yr[:-1].tolist() == xr[1:].tolist() for xr, yr in zip(x, y))
    # a plan of another stream is named as such, with the folder it is not in
    other = tmp_path / "plans" / "t.npy"
    assert run("windows", "train.bin", "-T", "64", "-o", other, "-q").exit_code == 0
    r = run("verify", "llmc", "--plan", other, "--show", "0")
    assert r.exit_code == 1 and "plan is for 'train.bin', which is not in llmc" in r.stdout


def test_windows_and_verify_take_a_megatron_prefix_without_meta(layered, tmp_path):
    other = tmp_path / "mg"
    other.mkdir()
    for name in ("train.bin", "train.idx"):
        (other / name).write_bytes((layered / name).read_bytes())
    r = run("verify", other / "train", "--show", "0", "--json")
    assert r.exit_code == 0, r.output
    assert {c["name"] for c in json.loads(r.stdout)["checks"]} >= {"megatron_index", "vocab_range"}
    plan = tmp_path / "p.npy"
    r = run("windows", other / "train", "-T", "32", "--boundaries", "doc", "-o", plan, "-q")
    assert r.exit_code == 0, r.output
    rows = np.load(plan)
    docs = np.load(layered / "train.docs.npy")
    assert len(np.unique(rows["doc"])) == len(docs)  # documents from the index
    _poke(other / "train.idx", 0, b"NOTANIDX\x00")
    r = run("verify", other / "train", "--show", "0")
    assert r.exit_code == 1 and "train.idx" in r.stdout


def test_inspect_shows_an_llmc_shard_and_a_megatron_prefix(layered):
    r = run("inspect", layered / "llmc" / "train_000000.bin", "--count", "4", "--json")
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)
    shard = llmc_read_shard(layered / "llmc" / "train_000000.bin")
    assert rep["layout"] == "llmc" and rep["ids"] == shard[:4].tolist() and rep["ids"][0] == EOT
    assert rep["tokens"] == len(shard) <= 700
    r = run("inspect", layered / "train", "--count", "3", "--json")
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)
    raw = np.fromfile(layered / "train.bin", "<u2")[:3].tolist()
    assert rep["layout"] == "megatron" and rep["ids"] == raw


def test_end_to_end_chain_in_a_subprocess(tmp_path, corpus):
    path, _ = corpus
    out = tmp_path / "out"
    ws = [sys.executable, "-m", "winsample"]
    subprocess.run([*ws, "encode", str(path), "-o", str(out), "--layout", "megatron,llmc", "-q"], check=True)
    r = subprocess.run([*ws, "verify", str(out), "--show", "0"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr + r.stdout
    assert "megatron_index" in r.stdout and "llmc_shards" in r.stdout


def test_engine_ray_refuses_foreign_layouts_before_any_work(tmp_path, corpus):
    path, _ = corpus
    r = run("encode", path, "-o", tmp_path / "out", "--engine", "ray", "--layout", "nanogpt,llmc", "-q")
    assert r.exit_code == 2 and "--layout" in r.stderr and "local" in r.stderr
    assert not (tmp_path / "out").exists()


def test_shard_names_in_meta_cannot_lead_out_of_the_folder(layered):
    meta = json.loads((layered / "meta.json").read_text())
    meta["layouts"]["llmc"]["splits"]["train"]["shards"][0]["file"] = "../../etc/passwd"
    (layered / "meta.json").write_text(json.dumps(meta))
    fails = _failed(layered)
    assert any(c["name"] == "llmc_shards" and "../../etc/passwd" in c["detail"] for c in fails)


# --- invariants of the streaming writers (small pieces, so every piece edge is exercised) ---

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from winsample import tokensrc  # noqa: E402
from winsample.tokensrc import megatron  # noqa: E402

_docs = st.lists(st.lists(st.integers(0, 50255), min_size=1, max_size=9), min_size=1, max_size=25)


@settings(max_examples=60, deadline=None)
@given(docs=_docs, appended=st.booleans(), cut_last=st.booleans(), chunk=st.integers(1, 17), shard=st.integers(1, 23))
def test_llmc_writer_equals_eot_plus_each_document_for_any_piece_and_shard_size(tmp_path_factory, docs, appended, cut_last, chunk, shard):
    ids, starts = [], []
    for i, d in enumerate(docs):
        starts.append(len(ids))
        ids += d
        if appended and not (cut_last and i == len(docs) - 1):  # --split tail leaves the cut piece without EOT
            ids.append(EOT)
    tokens = np.array(ids, "<u2")
    starts = np.array(starts, "<i8")
    want = [t for d in docs for t in [EOT, *d]]
    got = np.concatenate(list(tokensrc.llmc_stream(tokens, starts, EOT, appended, chunk)))
    assert got.tolist() == want
    folder = tmp_path_factory.mktemp("w")
    entry = tokensrc.write_llmc_split(folder, "train", tokens, starts, EOT, appended, shard)
    stream = np.concatenate([llmc_read_shard(folder / sh["file"]) for sh in entry["shards"]])
    assert stream.tolist() == want and entry["tokens"] == len(want)
    counts = [sh["tokens"] for sh in entry["shards"]]
    assert len(counts) == -(-len(want) // shard) and max(counts) <= shard and max(counts) - min(counts) <= 1


@settings(max_examples=40, deadline=None)
@given(lengths=st.lists(st.integers(1, 40), min_size=0, max_size=30), step=st.integers(1, 7), wide=st.booleans())
def test_megatron_index_bytes_for_any_piece_size(tmp_path_factory, monkeypatch_module, lengths, step, wide):
    monkeypatch_module.setattr(megatron, "INDEX_STEP", step)
    starts = np.cumsum([0] + lengths[:-1]).astype("<i8") if lengths else np.zeros(0, "<i8")
    n = int(sum(lengths))
    path = tmp_path_factory.mktemp("m") / "x.idx"
    tokensrc.write_megatron_index(path, starts, n, "<u4" if wide else "<u2")
    item = 4 if wide else 2
    s = len(lengths)
    want = (b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, 4 if wide else 8, s, s + 1)
            + np.array(lengths, "<i4").tobytes() + (starts * item).astype("<i8").tobytes() + np.arange(s + 1, dtype="<i8").tobytes())
    assert path.read_bytes() == want
    idx = tokensrc.read_megatron_index(path)
    assert tokensrc.megatron_problems(idx, n * item, starts) == []


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


def test_verify_checks_a_plan_made_on_a_megatron_prefix(layered, tmp_path):
    plan = tmp_path / "p.npy"
    other = tmp_path / "mg"
    other.mkdir()
    for name in ("val.bin", "val.idx"):
        (other / name).write_bytes((layered / name).read_bytes())
    assert run("windows", other / "val", "-T", "16", "-o", plan, "-q").exit_code == 0
    r = run("verify", other / "val", "--plan", plan, "--show", "0", "--json")
    assert r.exit_code == 0, r.output
    checks = {c["name"]: c["status"] for c in json.loads(r.stdout)["checks"]}
    assert checks["plan_bounds"] == "pass" and checks["coverage"] == "pass"


def test_windows_on_a_folder_of_train_and_val_shards_asks_for_one_stream(layered, tmp_path):
    r = run("windows", layered / "llmc", "-T", "16", "-o", tmp_path / "p.npy", "-q")
    assert r.exit_code == 2 and "train_*.bin" in r.stderr
    assert not (tmp_path / "p.npy").exists()


def test_llmc_stream_passes_a_piece_inside_one_long_document_on_without_copying():
    tokens = np.arange(1, 101, dtype="<u2")  # one document of 100 ids, no EOT appended
    starts = np.array([0], "<i8")
    pieces = list(tokensrc.llmc_stream(tokens, starts, EOT, False, chunk_tokens=10))
    assert np.concatenate(pieces).tolist() == [EOT, *range(1, 101)]
    assert not np.shares_memory(pieces[0], tokens)  # the document's start: EOT inserted, a new array
    assert all(np.shares_memory(p, tokens) for p in pieces[1:])  # the rest: the .bin's own ids


def test_verify_and_windows_read_more_llmc_shards_than_the_process_may_open_files(tmp_path):
    """~300 shards under a limit of 128 open files (llm.c's FineWeb-100B is ~1,000 shards against
    the usual 1,024): each shard's map is dropped once read, so verify passes and windows plans
    the whole stream, in a process whose RLIMIT_NOFILE is 128."""
    docs = make_docs(n=200)
    path = tmp_path / "docs.jsonl"
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in docs))
    out = tmp_path / "out"
    assert run("encode", path, "-o", out, "--layout", "llmc", "--shard-tokens", "100", "-q").exit_code == 0
    shards = sorted((out / "llmc").glob("*.bin"))
    assert len(shards) > 256
    limited = ("import resource, sys; resource.setrlimit(resource.RLIMIT_NOFILE, (128, 128));"
               " from winsample.cli.main import entry; sys.argv[0] = 'winsample'; entry()")
    for args in (["verify", str(out), "-q"], ["windows", str(out / "llmc" / "train_*.bin"), "-T", "64", "--boundaries",
                                               "doc", "-o", str(tmp_path / "p.npy"), "-q"]):
        r = subprocess.run([sys.executable, "-c", limited, *args], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, (args[0], r.stderr)


def _resident() -> int:
    with open("/proc/self/statm", "rb") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="reads the resident size from /proc")
def test_llmc_pass_over_a_48_MB_bin_leaves_its_pages_out_of_the_resident_set(tmp_path):
    # Mapped file pages count in the process's resident size: a pass that kept every page of the
    # .bin it read mapped grew by the whole file (the coordinator's peak in a --layout llmc run).
    from winsample import formats, tokensrc

    n = 24 << 20  # 48 MB of uint16 ids
    rng = np.random.default_rng(0)
    ids = rng.integers(0, EOT, n, dtype=np.uint16)
    starts = np.array([0, 5, n // 3, n - 7], "<i8")
    ids[starts[1:] - 1] = EOT  # each document but the last ends with its appended EOT
    ids[-1] = EOT
    ids.tofile(tmp_path / "train.bin")
    del ids
    tokens = formats.open_tokens(tmp_path / "train.bin", "<u2")
    before = _resident()
    entry = tokensrc.write_llmc_split(tmp_path, "train", tokens, starts, EOT, True, shard_tokens=16 << 20)
    grew = _resident() - before
    assert entry["tokens"] == n  # an EOT put before each of the 4 documents, the 4 appended ones left out
    assert grew < 16 << 20, f"the pass left {grew >> 20} MB resident"
    first = llmc_read_shard(tmp_path / entry["shards"][0]["file"])
    assert first[0] == EOT and first[1:6].tolist() == tokens[:5].tolist()[:4] + [EOT]  # doc 0's 4 ids, its EOT left out, doc 1's EOT


def test_release_pages_leaves_an_in_memory_array_as_it_is():
    from winsample import formats

    a = np.arange(10, dtype=np.uint16)
    formats.release_pages(a)
    assert a.tolist() == list(range(10))


def test_a_glob_over_two_groups_of_shards_hints_at_a_glob_in_their_folder(layered):
    r = run("windows", f"{layered}/llmc/*.bin", "-T", "32", "-o", layered / "x.npy")
    assert r.exit_code == 2 and r.stderr.strip().endswith(f"plan one at a time, e.g. {layered}/llmc/train_*.bin")


def test_a_plan_over_part_of_a_groups_glob_is_placed_on_its_stream_by_its_checksum(layered, tmp_path):
    # review: 'train_0*.bin' is not the folder's key 'train_*.bin'; the stream is the one of its checksum
    plan = tmp_path / "p.npy"
    assert run("windows", f"{layered}/llmc/train_0*.bin", "-T", "32", "-o", plan, "-q").exit_code == 0
    r = run("verify", layered / "llmc", "--plan", plan, "--show", "0", "--json")
    bounds = [c for c in json.loads(r.stdout)["checks"] if c["name"] == "plan_bounds"]
    assert r.exit_code == 0 and [c["status"] for c in bounds] == ["pass"], r.stdout
