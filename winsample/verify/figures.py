"""A plan's own figures, from its rows and N alone (bounds, order, documents, coverage): one
pass over the rows in blocks, memory flat in the plan's size, run on a helper thread during
verify's scans (``prepare_plan``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import formats, tokensrc
from ..errors import DataError, WinsampleError


def int_param(d, *keys):
    """The integer at ``keys`` of a sidecar part (``PlanParams``, ``PlanStats``, a dict), None if
    it is not an integer (absent, null, or a value a tampered sidecar holds)."""
    v = d
    for k in keys:
        if isinstance(v, dict):
            v = v.get(k)
        elif hasattr(v, "KEYS") and k in v.KEYS:
            v = getattr(v, k)
        else:
            return None
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def plan_file(side: formats.PlanSidecar, path: Path, folder) -> Path | None:
    """The token file a plan applies to: PATH itself, or the sidecar's source.file in the folder."""
    if folder is None:
        return path
    if side.source.file:
        return folder / side.source.file
    return None


@dataclass
class Prepared:
    """What a plan gives without its token file: rows, sidecar, and its figures for N tokens."""

    rows: np.ndarray
    side: formats.PlanSidecar
    n: int | None = None
    figures: PlanFigures | None = None
    rows_checksum: str | None = None  # of the rows as read
    replanned: tuple | None = None  # replan.replan's (status, rows or why), made on the plan thread


def prepare_plan(plan_path: Path, path: Path, folder, sizes: dict, encoding: str | None = None) -> Prepared | DataError:
    try:
        rows, side = formats.load_plan(plan_path)
    except DataError as e:
        return e
    prep = Prepared(rows, side, rows_checksum=formats.rows_checksum(rows) if side.rows_checksum else None)
    fp = plan_file(side, path, folder)
    n = sizes.get(fp) if fp is not None else None
    if n is not None and not side.best_fit and not side.mixture:  # segments (packed.py), or sources (mixture.py)
        prep.n, prep.figures = n, plan_figures(rows, n, int_param(side.params, "span"))
    if fp is not None and n is not None and not side.mixture:  # plan_params' re-planning, beside the scans
        from .replan import replan  # the check module imports this one

        try:
            bare = tokensrc.open_source(fp, strict=False).entry is None
        except WinsampleError:
            bare = True
        prep.replanned = replan(side, fp, bare, encoding)
    return prep


PLAN_BLOCK = 1 << 14  # plan rows per step of plan_figures: its ~10 work arrays stay in cache


@dataclass
class PlanFigures:
    """What the plan checks need from the rows and N alone. Rows are plan row indexes."""

    bad: int = 0  # rows out of bounds: start < 0, length < 1, start + length > N, length > span
    first_bad: int | None = None
    decreases: int = 0  # rows whose start is below the previous row's
    first_decrease: int | None = None
    increasing: bool = True  # starts strictly increase, so no two rows are the same window
    docs: int | None = None  # distinct values of the doc column; None: the column is not sorted
    coverage: dict | None = None  # _CoverageRun's figures; None: rows not in start order


class _Work:
    """Work arrays of one block, allocated once: a fresh temporary per step would cost a page
    fault per 4 kB each time (the allocator hands big blocks back to the system when freed)."""

    def __init__(self, m: int):
        self.i = [np.empty(m, np.int64) for _ in range(10)]
        self.b = [np.empty(m, bool) for _ in range(2)]

    def take(self, k: int):
        return [a[:k] for a in self.i], [a[:k] for a in self.b]


def _count_first(mask: np.ndarray, at: int) -> tuple[int, int | None]:
    """(true entries, index of the first plus ``at``, or None)."""
    k = int(np.count_nonzero(mask))
    return k, (at + int(np.argmax(mask)) if k else None)


def plan_figures(rows: np.ndarray, n: int, span: int | None, block: int = PLAN_BLOCK) -> PlanFigures:
    """One pass over ``rows`` in blocks of ``block`` rows, memory flat in the plan's size.
    Coverage is found here only for rows in start order (what ``windows`` writes without
    --shuffle); else ``coverage`` is None."""
    f = PlanFigures()
    cov = _CoverageRun(n)
    work = _Work(min(block, len(rows)))
    prev_start = prev_doc = None
    docs, docs_sorted = 0, True
    for lo in range(0, len(rows), block):
        r = rows[lo : lo + block]
        (start, length, end, tmp, *cov_work), (bad, flag) = work.take(len(r))  # cov_work: 6 arrays
        start[...] = r["start"]
        length[...] = r["length"]
        np.less(start, 0, out=bad)
        bad |= np.less(length, 1, out=flag)
        bad |= np.greater(start, np.subtract(n, length, out=tmp), out=flag)  # not end > n: start + length can wrap int64
        if span is not None:
            bad |= np.greater(length, span, out=flag)
        k, first = _count_first(bad, lo)
        f.bad += k
        f.first_bad = f.first_bad if f.first_bad is not None else first
        # each row against the one before it (the plan's first row has none)
        edge = prev_start is not None and int(start[0]) < prev_start
        k, first = _count_first(np.less(start[1:], start[:-1], out=flag[1:]), lo + 1)
        if f.first_decrease is None:
            f.first_decrease = lo if edge else first
        f.decreases += k + edge
        f.increasing = f.increasing and (prev_start is None or int(start[0]) > prev_start) and bool(
            np.greater(start[1:], start[:-1], out=flag[1:]).all())
        prev_start = int(start[-1])
        if f.decreases == 0:
            cov.feed(start, np.add(start, length, out=end), cov_work)
        if docs_sorted:
            doc = r["doc"]
            if (prev_doc is not None and int(doc[0]) < prev_doc) or np.less(doc[1:], doc[:-1], out=flag[1:]).any():
                docs_sorted = False
            else:
                docs += int(np.count_nonzero(np.not_equal(doc[1:], doc[:-1], out=flag[1:]))) + (prev_doc != int(doc[0]))
                prev_doc = int(doc[-1])
    f.docs = docs if docs_sorted else None
    f.coverage = cov.result() if f.decreases == 0 else None
    return f


class _CoverageRun:
    """The union of windows [start, end) clipped to [0, n), fed in start order a block at a time:
    covered tokens, largest gap, tail, head, segments (maximal covered runs), window_tokens (each
    window's tokens, counted once per window) and covered_shifted (the union of [start + 1, end):
    the tokens that are some window's target). Window i adds max(0, end_i - max(start_i, reach))
    new tokens, reach being how far the windows before it cover."""

    def __init__(self, n: int):
        self.n = n
        self.reach = 0  # how far the windows so far cover (exclusive end)
        self.head: int | None = None  # first covered token
        self.covered = self.shifted = self.window_tokens = self.segments = 0
        self.best_gap, self.gap_start = None, 0

    def feed(self, start: np.ndarray, end: np.ndarray, work: list[np.ndarray]) -> None:
        """``start``/``end``: int64, end exclusive, read only; ``work``: 6 scratch arrays of their length."""
        n = self.n
        s, e, s1, before, reach, new = work
        np.clip(start, 0, n, out=s)
        np.clip(end, 0, n, out=e)
        np.clip(np.add(start, 1, out=s1), 0, n, out=s1)
        self.window_tokens += int(np.subtract(e, s, out=new).sum())
        keep = e > s
        if not keep.all():  # empty windows (past N, or length < 1) add nothing
            s, e, s1 = s[keep], e[keep], s1[keep]
            before, reach, new = before[: len(s)], reach[: len(s)], new[: len(s)]
        if not len(s):
            return
        np.maximum.accumulate(e, out=reach)
        np.maximum(reach, self.reach, out=reach)
        before[0] = self.reach  # before[i]: how far the windows before i reach
        before[1:] = reach[:-1]
        # window i adds max(0, e_i - max(s_i, before_i)) new tokens
        self.covered += int(np.maximum(np.subtract(e, np.maximum(s, before, out=new), out=new), 0, out=new).sum())
        self.shifted += int(np.maximum(np.subtract(e, np.maximum(s1, before, out=s1), out=s1), 0, out=s1).sum())
        gaps = np.subtract(s, before, out=new)  # uncovered tokens right before each window (if > 0)
        first = 0
        if self.head is None:
            self.head, first = int(s[0]), 1  # the first window's gap is the head, not between segments
        self.segments += int(np.count_nonzero(gaps[first:] > 0))
        i = int(np.argmax(gaps))
        if self.best_gap is None or gaps[i] > self.best_gap:  # the first largest, as np.argmax over all
            self.best_gap, self.gap_start = int(gaps[i]), int(before[i])
        self.reach = int(reach[-1])

    def result(self) -> dict:
        n = self.n
        if self.head is None:
            return {"covered": 0, "gap_start": 0, "gap_length": n, "tail": n, "head": n, "segments": 0,
                    "window_tokens": self.window_tokens, "covered_shifted": 0}
        tail = n - self.reach
        gap_start, gap_len = self.gap_start, max(self.best_gap, 0)
        if tail > gap_len:
            gap_start, gap_len = self.reach, tail
        return {"covered": self.covered, "gap_start": gap_start, "gap_length": gap_len, "tail": tail, "head": self.head,
                "segments": 1 + self.segments, "window_tokens": self.window_tokens, "covered_shifted": self.shifted}


def coverage_stats(start: np.ndarray, end: np.ndarray, n: int) -> dict:
    """Union of windows [start, end) clipped to [0, n): covered tokens, largest gap, tail/head,
    segments and window_tokens (``coverage_in_order`` without ``covered_shifted``)."""
    c = coverage_in_order(start, end, n)
    del c["covered_shifted"]
    return c


def coverage_in_order(start: np.ndarray, end: np.ndarray, n: int) -> dict:
    """``_CoverageRun``'s figures of windows in any order: sorted by start (stable) unless they
    already are, then fed in blocks."""
    start = np.asarray(start, dtype=np.int64)
    end = np.asarray(end, dtype=np.int64)
    if not (start[1:] >= start[:-1]).all():  # plans are usually in start order already: skip the sort
        o = np.argsort(start, kind="stable")
        start, end = start[o], end[o]
    run = _CoverageRun(n)
    work = _Work(min(PLAN_BLOCK, len(start)))
    for lo in range(0, len(start), PLAN_BLOCK):
        ints, _ = work.take(len(start[lo : lo + PLAN_BLOCK]))
        run.feed(start[lo : lo + PLAN_BLOCK], end[lo : lo + PLAN_BLOCK], ints[:6])
    return run.result()
