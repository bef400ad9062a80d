"""A plan's figures against brute force: the coverage union and plan_figures in blocks."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from winsample import formats, verify


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
    # largest run of False: brute force over the mask
    best, run_at = 0, None
    for i in range(n + 1):
        if i < n and not mask[i]:
            run_at = i if run_at is None else run_at
        elif run_at is not None:
            if i - run_at > best:
                best = i - run_at
            run_at = None
    assert c["gap_length"] == best
    if best:
        assert not mask[c["gap_start"] : c["gap_start"] + best].any()
    covered_idx = np.flatnonzero(mask)
    assert c["tail"] == (n - 1 - covered_idx[-1] if len(covered_idx) else n)


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
