"""verify's vectorised pieces against brute force: coverage union, shingle hashes, sampling."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from winsample import disk
from winsample import formats, verify

from .test_verify import brute_share, hamlet_ids, macbeth_ids, make_folder  # noqa: F401 (fixtures)


@settings(max_examples=150, deadline=None)
@given(
    n=st.integers(1, 200),
    wins=st.lists(st.tuples(st.integers(-20, 220), st.integers(0, 60)), max_size=30),
)
def test_coverage_union_equals_a_boolean_mask(n, wins):
    start = np.array([s for s, _ in wins], dtype=np.int64)
    end = start + np.array([w for _, w in wins], dtype=np.int64)
    mask = np.zeros(n, dtype=bool)
    for s, e in zip(start, end):
        mask[max(s, 0) : max(min(e, n), 0)] = True
    c = verify.coverage_stats(start, end, n)
    assert c["covered"] == int(mask.sum())
    # largest run of False: brute force over the mask, first one on ties
    best, best_at, run_at = 0, 0, None
    for i in range(n + 1):
        if i < n and not mask[i]:
            run_at = i if run_at is None else run_at
        elif run_at is not None:
            if i - run_at > best:
                best, best_at = i - run_at, run_at
            run_at = None
    assert c["gap_length"] == best
    if best:
        assert not mask[c["gap_start"] : c["gap_start"] + best].any()
    covered_idx = np.flatnonzero(mask)
    assert c["tail"] == (n - 1 - covered_idx[-1] if len(covered_idx) else n)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 50256), min_size=32, max_size=300), st.sampled_from(["<u2", "<u4"]))
def test_both_shingle_hashes_are_equal_exactly_for_equal_shingles(ids, dtype):
    ids = ids + ids[: len(ids) // 3]  # repeat a part so some shingles are equal
    t = np.array(ids, dtype=dtype)
    n = len(ids) - 31
    tuples = [tuple(ids[i : i + 32]) for i in range(n)]
    for h in (verify.shingle_hashes(t, 32), verify._hash_at(t, np.arange(n), 32)):
        assert len(h) == n
        same_hash = {(i, j) for i in range(0, n, 7) for j in range(n) if h[i] == h[j]}
        same_text = {(i, j) for i in range(0, n, 7) for j in range(n) if tuples[i] == tuples[j]}
        assert same_hash == same_text


def test_shingles_across_chunk_edges_count_once(tmp_path, monkeypatch, hamlet_ids, macbeth_ids):
    train, val = hamlet_ids[:3000], hamlet_ids[2500:2700] + macbeth_ids[:300]
    folder = make_folder(tmp_path / "d", train, val)
    whole = verify.verify(folder)
    monkeypatch.setattr(disk, "CHUNK_BYTES", 2 * 37)  # 37 tokens a chunk: most shingles straddle edges
    monkeypatch.setattr(verify, "_SUB", 11)
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


def test_library_never_prints(capsys, tmp_path, hamlet_ids):
    folder = make_folder(tmp_path / "d", hamlet_ids[:500], hamlet_ids[600:700])
    verify.verify(folder)
    assert capsys.readouterr() == ("", "")


def _mask(n: int, start, end) -> np.ndarray:
    m = np.zeros(n, dtype=bool)
    for s, e in zip(start, end):
        m[max(s, 0) : max(min(e, n), 0)] = True
    return m


@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(0, 150),
    wins=st.lists(st.tuples(st.integers(-10, 170), st.integers(-2, 40), st.integers(0, 6)), max_size=30),
    in_order=st.booleans(),
    span=st.one_of(st.none(), st.integers(1, 40)),
    block=st.integers(1, 7),
)
def test_plan_figures_in_blocks_equal_brute_force_over_the_whole_plan(n, wins, in_order, span, block):
    if in_order:
        wins = sorted(wins)
    rows = np.zeros(len(wins), dtype=formats.PLAN_DTYPE)
    for i, (s, L, d) in enumerate(wins):
        rows[i] = (s, L, d, 0)
    f = verify.plan_figures(rows, n, span, block=block)
    bad = [i for i, (s, L, _) in enumerate(wins) if s < 0 or L < 1 or s + L > n or (span is not None and L > span)]
    assert (f.bad, f.first_bad) == (len(bad), bad[0] if bad else None)
    dec = [i for i in range(1, len(wins)) if wins[i][0] < wins[i - 1][0]]
    assert (f.decreases, f.first_decrease) == (len(dec), dec[0] if dec else None)
    assert f.increasing == all(wins[i][0] > wins[i - 1][0] for i in range(1, len(wins)))
    docs = [d for _, _, d in wins]
    assert f.docs == (len(set(docs)) if docs == sorted(docs) else None)
    if dec:
        assert f.coverage is None  # out of start order: the caller sorts the whole plan
        return
    start = np.array([s for s, _, _ in wins], dtype=np.int64)
    end = start + np.array([L for _, L, _ in wins], dtype=np.int64)
    if n:
        assert {k: v for k, v in f.coverage.items() if k != "covered_shifted"} == verify.coverage_stats(start, end, n)
    assert f.coverage["covered"] == int(_mask(n, start, end).sum())
    assert f.coverage["covered_shifted"] == int(_mask(n, start + 1, end).sum())  # tokens some window has as a target
    assert f.coverage["window_tokens"] == sum(max(0, min(e, n)) - max(0, min(s, n)) for s, e in zip(start, end))


@pytest.mark.parametrize(("share", "shown"), [(1.0, "100.00%"), (1 - 1e-7, "99.99%"), (0.99994, "99.99%"), (0.5, "50.00%"),
                                              (1e-7, "0.01%"), (0.0, "0.00%"), (0.123456, "12.35%")])
def test_percent_reads_100_or_0_only_when_exactly_so(share, shown):
    assert verify.percent(share) == shown
