"""The planners: window rows over document edges (regular, semantic, packed); pure functions.

See ``planning`` (the package docstring) for the window arithmetic they implement.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right

import numpy as np

from . import boundaries as bnd
from .stats import fill_fresh, make_rows


def _ranks_in_groups(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(group id, index within group) for every item of consecutive groups of ``counts`` items."""
    group = np.repeat(np.arange(len(counts)), counts)
    firsts = np.cumsum(counts) - counts
    return group, np.arange(int(counts.sum()), dtype=np.int64) - firsts[group]


def plan_regular(doc_starts, doc_ends, span: int, stride: int, offset: int = 0,
                 tail: str = "align", short: str = "keep", targets: bool = True) -> np.ndarray:
    """PLAN_DTYPE rows for documents ``[doc_starts[i], doc_ends[i])``, regular starts (module doc).

    Vectorised over windows; ``doc`` is the document's index; rows sorted by start. ``targets``:
    short windows need 2 tokens and a short tail starts one token before the last end.
    """
    ov = int(bool(targets))  # tokens a continuing window must share with the previous one
    ds = np.asarray(doc_starts, np.int64)
    de = np.asarray(doc_ends, np.int64)
    L = de - ds
    full = L >= span
    O = np.minimum(offset, np.maximum(L - span, 0))
    k = np.where(full, (L - span - O) // stride + 1, 0)
    last_end = ds + O + (k - 1) * stride + span
    extra = full & (last_end < de) & (tail != "drop")
    shortwin = (~full) & (L > ov) & (short == "keep")  # with targets: at least one (x, y) pair
    counts = k + extra + shortwin
    d, j = _ranks_in_groups(counts)
    starts = ds[d] + O[d] + j * stride
    lengths = np.full(len(d), span, np.int64)
    is_tail = extra[d] & (j == k[d])
    if tail == "align":
        starts = np.where(is_tail, de[d] - span, starts)
    else:  # short: the leftover [last end - ov, de), so the last end's token is a target too
        starts = np.where(is_tail, last_end[d] - ov, starts)
        lengths = np.where(is_tail, de[d] - last_end[d] + ov, lengths)
    is_short = shortwin[d]
    starts = np.where(is_short, ds[d], starts)
    lengths = np.where(is_short, L[d], lengths)
    return make_rows(starts, lengths, d)


def plan_semantic(doc_starts, doc_ends, edges, span: int, stride: int, offset: int = 0,
                  short: str = "keep", targets: bool = True) -> np.ndarray:
    """Rows whose edges land on ``edges`` (token indices) where they can; sizes are hard.

    Per document [ds, de) (doc edges always count as edges); ov = 1 with ``targets``, else 0:

    - L <= span: one window [ds, de) (a short one obeys ``short``; with targets L >= 2).
    - first start: the last edge at or before ds + min(O, L - span) (ds if none).
    - from a start s, while de - s > span: the end e is the last edge in
      (max(prev end, s + ov), s + span] (hard cut at s + span when there is none; so a window
      has >= 1 + ov tokens); the next start is the edge in [max(s + 1, b - span), e - ov]
      (b = first edge after e, so the next window reaches a new edge) nearest to
      e − (span − S), ties to the earlier one; with no edge there, the regular position
      clip(e − (span − S), lo, e − ov) with lo = max(s + 1, b - span) (so the window can still
      reach b), or s + 1 when lo > e - ov. The last window is [s, de).

    Starts strictly increase, each start <= previous end - ov (no gap; with targets every token
    after the first start is some window's target), every length <= span.
    All edges in memory at once; ``SemanticPlanner`` takes them chunk by chunk instead.
    """
    E = np.sort(np.asarray(edges, np.int64))
    E = bnd.sorted_unique(E)
    p = SemanticPlanner(doc_starts, doc_ends, span, stride, offset, short, targets)
    p.feed(E, None)
    return p.finish()


class SemanticPlanner:
    """``plan_semantic`` over edges that arrive in file order, in bounded memory.

    ``feed(edges, known)``: sorted edges, all edges ``<= known`` delivered so far (``None``: all
    of them). Documents whose edges are all known are planned together, vectorised over
    documents (one numpy round per window index, or one C call with ``_fast``); the one document
    that reaches past ``known`` is planned window by window as far as its known edges allow
    (placing a window from start s needs the edges up to s + 2 × span). Only edges at or after
    the earliest start still to be placed are kept, and planning runs once ``FLUSH_EDGES`` edges
    are waiting, so memory is bounded by that, not by N; the plan rows (O(N / stride)) are the
    output.
    """

    FLUSH_EDGES = 1 << 18  # edges held before planning: 2 MB of int64, so searches stay in cache
    SCALAR_BELOW = 24  # documents still open after which a scalar step beats a numpy round
    FAST_CAP = None  # rows per C call; None: an estimate (tests set it tiny to exercise the resume)

    def __init__(self, doc_starts, doc_ends, span: int, stride: int, offset: int = 0, short: str = "keep",
                 targets: bool = True):
        self.ds = np.ascontiguousarray(doc_starts, np.int64)
        self.de = np.ascontiguousarray(doc_ends, np.int64)
        self.span, self.stride, self.short = int(span), int(stride), short
        self.ov = int(bool(targets))  # with targets, a window's first token is no label: overlap >= 1
        L = self.de - self.ds
        self.first = self.ds + np.minimum(offset, np.maximum(L - span, 0))  # where the first start aims
        self.next_doc = 0  # documents before it are fully planned
        self.cur: tuple[int, int] | None = None  # (s, pe) of next_doc when it is started but open
        self.held: list[np.ndarray] = []
        self.held_n = 0
        self.out: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []

    def feed(self, edges, known: int | None) -> None:
        edges = np.asarray(edges, np.int64)
        if len(edges):
            self.held.append(edges)
            self.held_n += len(edges)
        if known is None or self.held_n >= self.FLUSH_EDGES:
            self._plan(known)

    def finish(self) -> np.ndarray:
        self._plan(None)
        if not self.out:
            return make_rows(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64))
        s, l, d = (np.concatenate(x) for x in zip(*self.out))
        return make_rows(s, l, d)

    # -- internals --

    def _plan(self, known: int | None) -> None:
        P = np.concatenate(self.held) if len(self.held) > 1 else (self.held[0] if self.held else np.zeros(0, np.int64))
        ds, de, span = self.ds, self.de, self.span
        K = None if known is None else int(known)
        end = len(ds) if K is None else int(np.searchsorted(de, K, "right"))  # docs before `end` are complete
        d = self.next_doc
        if self.cur is not None:  # the open document first: its windows come before the others
            s, pe = self.cur
            if not self._scalar(P, d, s, pe, None if d < end else K):
                self._keep(P, self.cur[0])
                return
            d += 1
        if d < end:
            self._rounds(P, d, end)
            d = end
        # document d (if any) reaches past K: start it as far as its known edges allow
        if d < len(ds) and K is not None and self.first[d] <= K and de[d] - ds[d] > span:
            if self._scalar(P, d, self._first_start(P, d), int(ds[d]), K):
                d += 1
        self.next_doc = d
        keep_from = self.cur[0] if self.cur is not None else (int(ds[d]) if d < len(ds) else None)
        if self.cur is None and K is not None and d < len(ds) and self.first[d] > K:
            # not started (a large --offset): of the edges before K only the last can be its first start
            i = int(np.searchsorted(P, K, "right")) - 1
            if i >= 0 and P[i] > keep_from:
                keep_from = int(P[i])
        self._keep(P, keep_from)

    def _keep(self, P: np.ndarray, keep_from: int | None) -> None:
        if keep_from is None:
            self.held, self.held_n = [], 0
            return
        rest = P[np.searchsorted(P, keep_from, "left") :]
        self.held, self.held_n = ([rest.copy()] if len(rest) else []), len(rest)

    def _first_start(self, P: np.ndarray, d: int) -> int:
        i = int(np.searchsorted(P, self.first[d], "right")) - 1
        return max(int(self.ds[d]), int(P[i]) if i >= 0 else -1)

    def _fast(self, P: np.ndarray, d0: int, d1: int, s: int, pe: int, K: int | None) -> bool:
        """``_rounds`` (s = -1) or ``_scalar`` (one document) in C (``_fast.c``'s ``plan``): the
        same windows. Records an open document's state in ``self.cur``; True when all are done."""
        P = np.ascontiguousarray(P, np.int64)
        size = int(self.de[d1 - 1] - (s if s >= 0 else self.ds[d0]))
        cap = self.FAST_CAP or d1 - d0 + size // self.stride + 64  # about the windows ahead; grown if not
        while True:
            out = [np.empty(cap, np.int64) for _ in range(3)]
            w, d, s, pe, status = bnd.FAST.plan(
                P, self.ds, self.de, self.first, d0, d1, s, pe, -1 if K is None else K, self.span,
                self.stride, self.ov, self.short == "keep", *out)
            if w:
                self.out.append(tuple(x[:w] if w > cap // 2 else x[:w].copy() for x in out))
            if status != 1:  # 1: out of room, resume at document d from (s, pe)
                break
            d0, cap = d, 2 * cap
        self.cur = (s, pe) if status == 2 else None
        return status == 0

    def _scalar(self, P: np.ndarray, d: int, s: int, pe: int, K: int | None) -> bool:
        """Place document ``d``'s windows one by one from state (s, pe); with ``K``, only while
        its edges are known. Records the state in ``self.cur``; True when the document is done."""
        if bnd.FAST is not None:
            return self._fast(P, d, d + 1, s, pe, K)
        span, stride, ov = self.span, self.stride, self.ov
        ds, de = int(self.ds[d]), int(self.de[d])
        lo = int(np.searchsorted(P, s, "left"))
        hi = int(np.searchsorted(P, de if K is None else min(de, K), "right"))
        E = P[lo:hi].tolist()  # this document's known edges from s on: bisect on a list is cheapest
        out_s, out_l = [], []
        done = False
        while True:
            if de - s <= span:
                out_s.append(s)
                out_l.append(de - s)
                done = True
                break
            if K is not None and s + 2 * span > K:
                break
            lim = s + span
            k = bisect_right(E, lim)
            e = E[k - 1] if k else ds
            if e <= s + ov or e <= pe:  # too short for a (x, y) pair, or no progress: cut hard
                e = lim
            out_s.append(s)
            out_l.append(e - s)
            t = e - (span - stride)
            k2 = bisect_right(E, e)
            b = min(E[k2], de) if k2 < len(E) else de
            lo = max(s + 1, b - span)
            i0, i1 = bisect_left(E, lo), bisect_right(E, e - ov) - 1
            if i0 <= i1:
                j = bisect_left(E, t)
                left, right = E[min(max(j - 1, i0), i1)], E[min(max(j, i0), i1)]
                ns = right if abs(right - t) < abs(left - t) else left
            else:
                ns = min(max(t, lo if lo <= e - ov else s + 1), e - ov)  # reach b when it can
            s, pe = ns, e
        if out_s:
            n = len(out_s)
            self.out.append((np.array(out_s, np.int64), np.array(out_l, np.int64), np.full(n, d, np.int64)))
        self.cur = None if done else (s, pe)
        return done

    def _rounds(self, P: np.ndarray, d0: int, d1: int) -> None:
        """Plan documents [d0, d1), none started, all edges known: one numpy round per window
        index over the documents still open; the last few open ones go to ``_scalar``."""
        if bnd.FAST is not None:
            self._fast(P, d0, d1, -1, -1, None)
            return
        span, stride, ov = self.span, self.stride, self.ov
        ds, de = self.ds[d0:d1], self.de[d0:d1]
        L = de - ds
        Pl = np.concatenate([[-1], P, [np.iinfo(np.int64).max // 4]])  # sentinels: every search lands inside
        out_s, out_l, out_d = [], [], []
        active = np.flatnonzero(L > 0)
        small = L[active] <= span
        keep = active[small & ((L[active] == span) | (self.short == "keep")) & (L[active] > ov)]
        out_s.append(ds[keep])
        out_l.append(L[keep])
        out_d.append(keep + d0)
        active = active[~small]
        # state of the open documents, compacted: start, previous end, doc end, doc number.
        # pe starts at s + ov: "e <= max(s + ov, pe)" is then just "e <= pe" (later s <= pe - ov)
        s = np.maximum(ds[active], Pl[np.searchsorted(Pl, self.first[d0:d1][active], "right") - 1])
        pe, ea, dd = s + ov, de[active], active + d0
        while len(s) > self.SCALAR_BELOW:
            last = ea - s <= span
            if last.any():
                out_s.append(s[last])
                out_l.append(ea[last] - s[last])
                out_d.append(dd[last])
                go = ~last
                s, pe, ea, dd = s[go], pe[go], ea[go], dd[go]
            lim = s + span
            i1 = np.searchsorted(Pl, lim, "right")  # also the first index past e: e is lim or Pl[i1 - 1]
            e = Pl[i1 - 1]  # an edge before the document is <= s <= pe: replaced by lim below
            e = np.where(e <= pe, lim, e)
            out_s.append(s)
            out_l.append(e - s)
            out_d.append(dd)
            t = e - (span - stride)
            b = np.minimum(ea, Pl[i1])
            i1 -= 1 + (Pl[i1 - 1] > e - ov)  # the last edge <= e - ov (edges are unique)
            lo = np.maximum(s + 1, b - span)
            i0 = np.searchsorted(Pl, lo, "left")
            # nearest edge to t in [i0, i1]: the first one >= t (clipped into the range) or the
            # one before it; when every edge is < t, the clipped one is the last and still wins
            r = np.minimum(np.maximum(np.searchsorted(Pl, t, "left"), i0), i1)
            right, left = Pl[r], Pl[np.maximum(r - 1, i0)]
            pick = np.where(np.abs(right - t) < np.abs(left - t), right, left)
            lo = np.where(lo <= e - ov, lo, s + 1)  # no edge to start on: still reach b when it can
            s = np.where(i0 <= i1, pick, np.minimum(np.maximum(t, lo), e - ov))
            pe = e
        for i in range(len(s)):  # the few long documents left: scalar steps, cheaper than rounds
            self._scalar(P, int(dd[i]), int(s[i]), int(pe[i]), None)
            rs, rl, rd = self.out.pop()
            out_s.append(rs)
            out_l.append(rl)
            out_d.append(rd)
        starts = np.concatenate(out_s)
        order = np.argsort(starts, kind="stable")
        self.out.append((starts[order], np.concatenate(out_l)[order], np.concatenate(out_d)[order]))


def plan_packed(doc_starts, doc_ends, span: int, stride: int, offset: int = 0,
                tail: str = "align", short: str = "keep", targets: bool = True) -> np.ndarray:
    """Whole documents packed greedily, in order, into windows of at most ``span`` tokens.

    A document longer than span is planned alone with ``plan_regular``; the others go into the
    current window while they fit. ``doc`` is the first document of the window. With ``targets``
    a window of one token (a lone 1-token document) is dropped: it holds no (x, y) pair. (A loop
    over documents: greedy packing is sequential by nature.)
    """
    ov = int(bool(targets))
    ds = np.asarray(doc_starts, np.int64).tolist()
    de = np.asarray(doc_ends, np.int64).tolist()
    rows_s, rows_l, rows_d = [], [], []
    cur_s = cur_e = cur_d = None
    long_docs = []

    def flush():
        if cur_s is not None and cur_e - cur_s > ov and (cur_e - cur_s == span or short == "keep"):
            rows_s.append(cur_s)
            rows_l.append(cur_e - cur_s)
            rows_d.append(cur_d)

    for i, (a, b) in enumerate(zip(ds, de)):
        if b - a > span:
            flush()
            cur_s = None
            long_docs.append(i)
            continue
        if b == a:
            continue
        if cur_s is not None and b - cur_s <= span and a == cur_e:
            cur_e = b
        else:
            flush()
            cur_s, cur_e, cur_d = a, b, i
    flush()
    packed = make_rows(np.array(rows_s, np.int64), np.array(rows_l, np.int64), np.array(rows_d, np.int64))
    if long_docs:
        idx = np.array(long_docs)
        big = plan_regular(np.asarray(doc_starts)[idx], np.asarray(doc_ends)[idx], span, stride, offset, tail, short, targets)
        big["doc"] = idx[big["doc"]]
        packed = np.concatenate([packed, big])
        packed = packed[np.argsort(packed["start"], kind="stable")]
        fill_fresh(packed)
    return packed

