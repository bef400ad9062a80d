"""A mixture's plain (x, y) batches (train/mixed.py ``_gather_plain``: each source's rows written by
one C call straight into the batch) against the per-source path (a sub-batch per source, stacked)
and against the tokens themselves: x, y and every packed field, short windows padded, pickled.
"""

from __future__ import annotations

import json
import pickle
import random
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import winsample
from winsample.cli import main
from winsample.planning import boundaries as bnd
from winsample.train import mixed

from ..conftest import CORPUS

T = 32
PAD = 50256


def run(*args):
    r = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return r


@pytest.fixture(scope="module")
def mix(tmp_path_factory) -> Path:
    """Three sources of real text, one planned at document edges with its short windows kept."""
    root = tmp_path_factory.mktemp("mixed")
    rng = random.Random(5)
    for name, play, opts in (("a", "hamlet.txt", ()), ("b", "macbeth.txt", ("--boundaries", "doc", "--short", "keep")),
                             ("c", "romeo_and_juliet.txt", ())):
        words = (CORPUS / play).read_text(encoding="utf-8").split()
        with open(root / f"{name}.jsonl", "w", encoding="utf-8") as f:
            at = 0
            for _ in range(40):
                n = rng.randint(5, 90)
                f.write(json.dumps({"text": " ".join(words[at : at + n])}) + "\n")
                at += n
        run("encode", root / f"{name}.jsonl", "-o", root / name, "--val-fraction", 0, "-q")
        run("windows", root / name / "train.bin", "-T", T, *opts, "-o", root / f"{name}.npy", "-q")
    run("mix", f"a=0.5:{root / 'a.npy'}", f"b=0.3:{root / 'b.npy'}", f"c=0.2:{root / 'c.npy'}", "--windows", 90,
        "-o", root / "mix.npy", "-q")
    return root / "mix.npy"


FIELDS = ("attention_mask", "position_ids", "segments", "cu_seqlens", "max_seqlen")


def test_plain_gather_matches_per_source_path_and_tokens(mix, monkeypatch):
    if bnd.FAST is None:
        pytest.skip("C module not built: the plain path is the C reader's")
    fast = winsample.Loader(mix, batch_size=5, seed=3, pad_id=PAD)
    slow = winsample.Loader(mix, batch_size=5, seed=3, pad_id=PAD)
    monkeypatch.setattr(slow._mixed, "_all_plain", lambda: False)
    assert fast._mixed._all_plain()
    tokens = {i: np.fromfile(Path(mix).parent / name / "train.bin", np.uint16).astype(np.int64)
              for i, name in enumerate(fast.sources)}
    short = 0
    for epoch in range(2):
        for step in range(fast.steps(epoch)):
            a, b = fast.batch(epoch, step), slow.batch(epoch, step)
            assert np.array_equal(a.x, b.x) and np.array_equal(a.y, b.y)
            assert a.x.flags.c_contiguous and a.x.dtype == np.int64 and a.y.dtype == np.int64
            for name in FIELDS:
                assert np.array_equal(getattr(a, name), getattr(b, name)), name
            for r, row in enumerate(fast.rows(epoch, step)):  # brute force: the window's own tokens
                w = tokens[int(row["source"])][row["start"] : row["start"] + row["length"]]
                L = len(w) - 1
                short += L < T
                assert np.array_equal(a.x[r, :L], w[:-1]) and np.array_equal(a.y[r, :L], w[1:])
                assert (a.x[r, L:] == PAD).all() and (a.y[r, L:] == fast.ignore_index).all()
            c = pickle.loads(pickle.dumps(fast.batch(epoch, step)))
            for name in ("x", "y", *FIELDS):
                assert np.array_equal(getattr(c, name), getattr(b, name)), name
    assert short, "some window is short: padding is checked"


def test_other_fields_take_the_per_source_path(mix):
    """positions="doc" or masked labels are built per source (the plain path is only (x, y) of windows)."""
    lo = winsample.Loader(mix, batch_size=4, seed=0, positions="doc", cross_doc_labels="mask")
    called = []
    orig = mixed.Mixed._gather_plain
    try:
        mixed.Mixed._gather_plain = lambda *a, **k: called.append(1) or orig(*a, **k)
        lo.batch(0, 0)
    finally:
        mixed.Mixed._gather_plain = orig
    assert not called


def test_loader_pickles_without_tokens_or_tables(mix):
    """A Loader over a mixture goes to a DataLoader worker as paths: no source's tokens, no window table."""
    lo = winsample.Loader(mix, batch_size=5, seed=3)
    before = lo.batch(0, 1)
    lo._mixed._all_plain()  # opens every source's tokens (and, with the C module, the window table)
    assert all(t is not None for t in lo._mixed._tokens)
    copy = pickle.loads(pickle.dumps(lo))
    assert copy._mixed._tokens == [None] * 3 and not hasattr(copy._mixed, "_columns")
    again = copy.batch(0, 1)
    assert np.array_equal(again.x, before.x) and np.array_equal(again.y, before.y)
