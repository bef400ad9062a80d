"""megatron-core (the registry package, a real client) reads what ``encode --layout megatron`` writes.

Its ``IndexedDataset`` gives back every document; its ``GPTDataset`` builds training samples on
CPU (the compiled ``helpers_cpp`` ships in the wheel); its own ``IndexedDatasetBuilder`` writes
byte-identical .bin/.idx files for the same documents. Importing megatron-core takes ~10 s, so
everything here shares one import.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from winsample import tokensrc
from winsample.cli import main

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # "Transformer Engine and Apex are not installed": not used here
    from megatron.core.datasets.blended_megatron_dataset_builder import BlendedMegatronDatasetBuilder
    from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig
    from megatron.core.datasets.indexed_dataset import IndexedDataset, IndexedDatasetBuilder

EOT = 50256


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture(scope="module")
def encoded(tmp_path_factory) -> Path:
    rng = np.random.default_rng(11)
    words = "alpha beta gamma delta river stone window token shard index".split()
    docs = [" ".join(rng.choice(words, int(rng.integers(5, 300)))) for _ in range(40)]
    folder = tmp_path_factory.mktemp("mg")
    src = folder / "docs.jsonl"
    src.write_text("".join(json.dumps({"text": t}) + "\n" for t in docs))
    out = folder / "out"
    r = run("encode", src, "-o", out, "--layout", "nanogpt,megatron", "--val-fraction", "0.2", "-q")
    assert r.exit_code == 0, r.output
    return out


def _documents(out: Path, split: str, dtype="<u2") -> list[np.ndarray]:
    """The split's documents, cut from its .bin at winsample's own document index."""
    tokens = np.fromfile(out / f"{split}.bin", dtype=dtype)
    return np.split(tokens, np.load(out / f"{split}.docs.npy")[1:])


@pytest.mark.parametrize("split", ["train", "val"])
def test_indexed_dataset_gives_back_every_document(encoded, split):
    docs = _documents(encoded, split)
    ds = IndexedDataset(str(encoded / split))
    assert len(ds) == len(docs) > 0
    np.testing.assert_array_equal(ds.document_indices, np.arange(len(docs) + 1))
    for i, d in enumerate(docs):
        got = ds[i]
        assert got.dtype == np.uint16
        np.testing.assert_array_equal(got, d)
        assert got[-1] == EOT  # one sequence per document, its EOT included (--append-eod)
    np.testing.assert_array_equal(ds.sequence_lengths, [len(d) for d in docs])


def test_megatron_builder_writes_the_same_bytes_for_the_same_documents(encoded, tmp_path):
    for split in ("train", "val"):
        prefix = tmp_path / split
        b = IndexedDatasetBuilder(f"{prefix}.bin", dtype=np.uint16)
        for d in _documents(encoded, split):
            b.add_document(d, [len(d)])
        b.finalize(f"{prefix}.idx")
        assert (encoded / f"{split}.bin").read_bytes() == Path(f"{prefix}.bin").read_bytes()
        assert (encoded / f"{split}.idx").read_bytes() == Path(f"{prefix}.idx").read_bytes()


def test_uint32_bin_index_equals_the_builder_with_int32(tmp_path, encoded):
    """No uint32 code exists: winsample writes code 4 (int32), the bytes of ids < 2^31 being the same."""
    docs = _documents(encoded, "train")
    ours = tmp_path / "ours.idx"
    starts = np.cumsum([0] + [len(d) for d in docs[:-1]])
    tokensrc.write_megatron_index(ours, starts, sum(map(len, docs)), "<u4")
    b = IndexedDatasetBuilder(str(tmp_path / "ref.bin"), dtype=np.int32)
    for d in docs:
        b.add_document(d, [len(d)])
    b.finalize(str(tmp_path / "ref.idx"))
    assert ours.read_bytes() == (tmp_path / "ref.idx").read_bytes()
    (tmp_path / "ours.bin").write_bytes(np.concatenate(docs).astype("<u4").tobytes())
    assert (tmp_path / "ours.bin").read_bytes() == (tmp_path / "ref.bin").read_bytes()
    ds = IndexedDataset(str(tmp_path / "ours"))
    np.testing.assert_array_equal(ds[3], docs[3].astype(np.int32))


class _Tokenizer:
    """What GPTDatasetConfig asks of a tokenizer: the vocabulary size and the end-of-document id."""

    vocab_size = 50257
    eod = EOT
    unique_identifiers = {"class": "_Tokenizer"}


def test_gpt_dataset_builds_samples_on_cpu_from_the_documents(encoded, tmp_path):
    T = 64
    cfg = GPTDatasetConfig(
        random_seed=1234, sequence_length=T, blend=([str(encoded / "train")], None), split="1,0,0",
        tokenizer=_Tokenizer(), reset_position_ids=False, reset_attention_mask=False, eod_mask_loss=False,
        path_to_cache=str(tmp_path / "cache"), mmap_bin_files=True,
    )
    train, _, _ = BlendedMegatronDatasetBuilder(GPTDataset, [50, None, None], lambda: True, cfg).build()
    assert len(train) >= 50
    docs = _documents(encoded, "train")
    # Megatron's sample i: shuffle_index[i] → (document_index position, offset) pairs in sample_index;
    # its T+1 tokens run through the documents in document_index order (epochs concatenated).
    stream = np.concatenate([docs[d] for d in train.document_index]).astype(np.int64)
    ends = np.cumsum([0] + [len(docs[d]) for d in train.document_index])
    for i in range(0, len(train), 7):
        j = train.shuffle_index[i]
        pos, off = train.sample_index[j]
        start = ends[pos] + off
        s = train[i]
        np.testing.assert_array_equal(s["tokens"].numpy(), stream[start : start + T])
        np.testing.assert_array_equal(s["labels"].numpy(), stream[start + 1 : start + T + 1])


def test_winsample_verifies_a_prefix_megatron_core_wrote(tmp_path, encoded):
    """Data made by another tool: megatron-core's own builder output, no meta.json."""
    prefix = tmp_path / "corpus_text_document"
    b = IndexedDatasetBuilder(f"{prefix}.bin", dtype=np.uint16)
    for d in _documents(encoded, "val"):
        b.add_document(d, [len(d)])
    b.finalize(f"{prefix}.idx")
    r = run("verify", prefix, "--show", "1", "--json")
    assert r.exit_code == 0, r.output
    checks = {c["name"]: c for c in json.loads(r.stdout)["checks"]}
    assert checks["megatron_index"]["status"] == "pass" and checks["vocab_range"]["status"] == "pass"
