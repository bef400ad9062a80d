"""--layout nanogpt writes nanoGPT's meta.pkl where its train.py needs one (#33 item 8).

nanoGPT's train.py (karpathy/nanoGPT, train.py, "attempt to derive vocab_size from the dataset")
reads ``data_dir/meta.pkl`` and sizes the model's embedding by ``meta['vocab_size']``, else 50304.
A vocabulary above 50304 without meta.pkl crashes its embedding lookup.
"""

import json
import os
import pickle

import numpy as np
from click.testing import CliRunner

from winsample.cli import main

from ..conftest import CORPUS


def nanogpt_vocab_size(data_dir) -> int:
    """The lines of nanoGPT's train.py that pick the model's vocab_size, verbatim but for the return."""
    meta_path = os.path.join(data_dir, 'meta.pkl')
    meta_vocab_size = None
    if os.path.exists(meta_path):
        with open(meta_path, 'rb') as f:
            meta = pickle.load(f)
        meta_vocab_size = meta['vocab_size']
    return meta_vocab_size if meta_vocab_size is not None else 50304


def encode(*args):
    r = CliRunner().invoke(main, ["encode", str(CORPUS), "-q", *map(str, args)])
    assert r.exit_code == 0, r.stderr
    return r


def test_a_vocabulary_above_50304_gets_a_meta_pkl_that_train_py_sizes_its_embedding_by(tmp_path, cl100k_ranks_file):
    out = tmp_path / "data"
    encode("--tokenizer-file", cl100k_ranks_file, "--pattern", "cl100k", "-o", out)
    meta = json.loads((out / "meta.json").read_text())
    assert meta["dtype"] == "<u4"  # little-endian uint32
    assert meta["layouts"]["nanogpt"]["meta_pkl"] == "meta.pkl"
    vocab = nanogpt_vocab_size(out)
    assert vocab == meta["tokenizer"]["n_vocab"] > 100_000  # cl100k: 100,256 ranks, then its special tokens
    for split in ("train", "val"):  # every id the model sees indexes inside its embedding
        ids = np.memmap(out / f"{split}.bin", dtype=np.uint32, mode="r")
        assert int(ids.max()) < vocab
    assert pickle.loads((out / "meta.pkl").read_bytes()) == {"vocab_size": vocab}  # nothing else in it


def test_gpt2_gets_no_meta_pkl_so_sample_py_keeps_working(tmp_path):
    out = tmp_path / "data"
    encode("-o", out)
    assert not (out / "meta.pkl").exists()
    assert nanogpt_vocab_size(out) == 50304  # train.py's default covers GPT-2's 50257 ids


def test_reencoding_with_a_small_vocabulary_removes_the_stale_meta_pkl(tmp_path, cl100k_ranks_file):
    out = tmp_path / "data"
    encode("--tokenizer-file", cl100k_ranks_file, "--pattern", "cl100k", "-o", out)
    assert (out / "meta.pkl").exists()
    encode("-o", out)
    assert not (out / "meta.pkl").exists()  # it would size the model for the old vocabulary
    v = CliRunner().invoke(main, ["verify", str(out)])
    assert v.exit_code == 0, v.stdout


def test_verify_and_inspect_read_a_dataset_with_meta_pkl(tmp_path, cl100k_ranks_file):
    out = tmp_path / "data"
    encode("--tokenizer-file", cl100k_ranks_file, "--pattern", "cl100k", "-o", out)
    assert CliRunner().invoke(main, ["verify", str(out)]).exit_code == 0
    assert CliRunner().invoke(main, ["inspect", str(out)]).exit_code == 0
