"""verify's shingle hashes against brute force: exact and sampled, across chunk edges."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from winsample import disk, verify
from winsample.verify import shingles

from .test_run import brute_share, hamlet_ids, macbeth_ids, make_folder  # noqa: F401 (fixtures)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 50256), min_size=32, max_size=300), st.sampled_from(["<u2", "<u4"]))
def test_both_shingle_hashes_are_equal_exactly_for_equal_shingles(ids, dtype):
    ids = ids + ids[: len(ids) // 3]  # repeat a part so some shingles are equal
    t = np.array(ids, dtype=dtype)
    n = len(ids) - 31
    tuples = [tuple(ids[i : i + 32]) for i in range(n)]
    for h in (verify.shingle_hashes(t, 32), verify.hash_at(t, np.arange(n), 32)):
        assert len(h) == n
        same_hash = {(i, j) for i in range(0, n, 7) for j in range(n) if h[i] == h[j]}
        same_text = {(i, j) for i in range(0, n, 7) for j in range(n) if tuples[i] == tuples[j]}
        assert same_hash == same_text


def test_shingles_across_chunk_edges_count_once(tmp_path, monkeypatch, hamlet_ids, macbeth_ids):
    train, val = hamlet_ids[:3000], hamlet_ids[2500:2700] + macbeth_ids[:300]
    folder = make_folder(tmp_path / "d", train, val)
    whole = verify.verify(folder)
    monkeypatch.setattr(disk.checksums, "CHUNK_BYTES", 2 * 37)  # 37 tokens a chunk: most shingles straddle edges
    monkeypatch.setattr(shingles, "HASH_STEP", 11)
    chunked = verify.verify(folder)
    a = next(c for c in whole.checks if c.name == "split_leakage").figures
    b = next(c for c in chunked.checks if c.name == "split_leakage").figures
    assert a["val_shingles"] == b["val_shingles"] == len(val) - 31
    assert a["share"] == b["share"] == pytest.approx(brute_share(train, val))


def test_sampled_leakage_keeps_fewer_hashes_and_estimates_the_share(tmp_path, hamlet_ids, macbeth_ids):
    train = hamlet_ids[:30000]
    val = hamlet_ids[10000:14000] + macbeth_ids[:12000]  # a quarter of val is train's text
    folder = make_folder(tmp_path / "d", train, val)
    report = verify.verify(folder, max_shingles=4000)
    leak = next(c for c in report.checks if c.name == "split_leakage")
    bits = verify.sampling_bits(len(train) + len(val), 4000)
    assert bits == 4 and leak.figures["sample_rate"] == 1 / 16
    assert leak.figures["train_shingles"] < len(train) / 8
    expected = brute_share(train, val)
    assert expected == pytest.approx(4000 / 16000, abs=0.01)
    assert leak.figures["share"] == pytest.approx(expected, abs=0.06)
    assert leak.status == "fail"


def test_sampling_is_consistent_so_a_copy_is_found_whole(hamlet_ids):
    t = np.array(hamlet_ids[:20000], dtype=np.uint16)
    keep_a = verify.anchor_starts(t, 5)
    keep_b = verify.anchor_starts(t[1000:5000], 5) + 1000
    inside = keep_a[(keep_a >= 1000) & (keep_a < 4999)]
    assert np.array_equal(inside, keep_b[keep_b < 4999])  # same content → same choice
    assert 0.5 / 32 < len(keep_a) / len(t) < 2 / 32  # about 2**-5 of positions on real text
