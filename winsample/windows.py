"""Window plans: where each training window starts and how long it is, as integer offsets.

All positions are token indices into the .bin; every range is half-open ``[start, end)``.
``span`` = T + 1 with targets (x = w[:T], y = w[1:]) or T without. For one document
``[ds, de)`` of L = de - ds tokens, stride S and offset O:

- L >= span: O is clamped to L - span; regular starts ds+O, ds+O+S, … while start + span <= de.
  If the last regular window ends before de, ``tail`` decides: ``align`` adds [de-span, de)
  (never a duplicate), ``short`` adds the leftover [last end - 1, de) with targets ([last end, de)
  without), ``drop`` adds nothing.
- 0 < L < span: one short window [ds, de) with ``short="keep"``, none with ``"drop"``.
- Semantic edges (paragraph/sentence): see ``plan_semantic``.

With targets a window [s, e) trains on x = tokens[s:e-1], y = tokens[s+1:e]: its first token is
never a label. So with targets every window holds at least 2 tokens (one (x, y) pair; a shorter
document or leftover gets no window and counts as uncovered), and a window that continues the
previous one of its document starts at or before that one's end - 1, so no token inside is
skipped as a label (the exception is a regular stride > T, which the user chose).

Plain mode never reads tokens: the plan is arithmetic over N and the document edges,
vectorised over windows. ``fresh`` = leading tokens of a window already covered by earlier
windows of its document, so coverage = Σ (length − fresh) with no per-token array.
"""

from __future__ import annotations

import json
import os
from bisect import bisect_left, bisect_right
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from . import boundaries as bnd
from . import disk
from . import tokensrc
from . import formats, provenance
from .errors import ConfigError, DataError, InputError

PLAN_DTYPE = formats.PLAN_DTYPE
TAILS = ("align", "drop", "short")
SHORTS = ("keep", "drop")
BOUNDARIES = ("none", "doc", "paragraph", "sentence")
FORMATS = ("npy", "txt", "jsonl")
MAX_T = (1 << 31) - 2  # span = T + 1 fits the plan's int32 length column
MAX_POSITION = 1 << 62  # token positions (int64) with room for start + length
MAX_SHARDS = 1 << 16  # --shards: one plan file each; more ranks than this is a typo
MATERIALIZE_ROWS = 4096  # rows gathered per batch when materializing: memory ~ rows × span × 8 B


# --- parameters ---------------------------------------------------------------------------


def span_of(T: int, targets: bool = True) -> int:
    """Tokens a window spans: T + 1 with targets (x and y overlap by T - 1), T without."""
    if T < 1:
        raise ConfigError(f"-T must be at least 1, got {T}")
    return T + 1 if targets else T


def resolve_stride(span: int, T: int, stride: int | None = None, overlap: float | None = None) -> int:
    """Stride in tokens: ``stride``, or round(span × (1 − overlap)) (at least 1), or T // 2."""
    if stride is not None and overlap is not None:
        raise ConfigError("--stride and --overlap both set: give one")
    if overlap is not None:
        if not 0 <= overlap < 1:
            raise ConfigError(f"--overlap must be in [0, 1), got {overlap}")
        stride = max(1, round(span * (1 - overlap)))
    elif stride is None:
        stride = max(1, T // 2)  # the article's pre-training default: half overlap
    if stride < 1:
        raise ConfigError(f"--stride must be at least 1, got {stride}")
    if stride > span:
        # Windows further apart than they are long leave gaps no window covers.
        raise ConfigError(f"--stride {stride} is larger than the span {span}: tokens between windows would never be seen; use a stride <= {span}")
    return int(stride)


def draw_offset(seed: int, epoch: int, stride: int) -> int:
    """The epoch's start offset, uniform in [0, stride), from ``np.random.default_rng([seed, epoch])``.

    One draw per epoch, shared by every document: same (seed, epoch) → same offset.
    """
    return int(np.random.default_rng([seed, epoch]).integers(0, stride))


# --- plans over document edges ---------------------------------------------------------------


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
        out_s.append(ds[keep]); out_l.append(L[keep]); out_d.append(keep + d0)
        active = active[~small]
        # state of the open documents, compacted: start, previous end, doc end, doc number.
        # pe starts at s + ov: "e <= max(s + ov, pe)" is then just "e <= pe" (later s <= pe - ov)
        s = np.maximum(ds[active], Pl[np.searchsorted(Pl, self.first[d0:d1][active], "right") - 1])
        pe, ea, dd = s + ov, de[active], active + d0
        while len(s) > self.SCALAR_BELOW:
            last = ea - s <= span
            if last.any():
                out_s.append(s[last]); out_l.append(ea[last] - s[last]); out_d.append(dd[last])
                go = ~last
                s, pe, ea, dd = s[go], pe[go], ea[go], dd[go]
            lim = s + span
            i1 = np.searchsorted(Pl, lim, "right")  # also the first index past e: e is lim or Pl[i1 - 1]
            e = Pl[i1 - 1]  # an edge before the document is <= s <= pe: replaced by lim below
            e = np.where(e <= pe, lim, e)
            out_s.append(s); out_l.append(e - s); out_d.append(dd)
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
            out_s.append(rs); out_l.append(rl); out_d.append(rd)
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
            rows_s.append(cur_s); rows_l.append(cur_e - cur_s); rows_d.append(cur_d)

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


def make_rows(starts, lengths, docs) -> np.ndarray:
    rows = np.empty(len(starts), PLAN_DTYPE)
    rows["start"], rows["length"], rows["doc"] = starts, lengths, docs
    rows["fresh"] = _fresh(np.asarray(starts, np.int64), np.asarray(lengths, np.int64))  # on the plain arrays: no strided reads
    return rows


def fill_fresh(rows: np.ndarray) -> None:
    """Set ``fresh`` = tokens of each window already covered by earlier windows (rows by start)."""
    if len(rows):
        rows["fresh"] = _fresh(rows["start"].astype(np.int64), rows["length"].astype(np.int64))


def _fresh(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Tokens of each window (by start) that earlier windows already cover. Documents never
    overlap, so the running maximum of earlier ends covers them all at once."""
    if not len(starts):
        return np.zeros(0, np.int64)
    prev = np.empty(len(starts), np.int64)
    prev[0] = -1
    np.maximum.accumulate(starts[:-1] + lengths[:-1], out=prev[1:])
    np.subtract(prev, starts, out=prev)
    return np.clip(prev, 0, lengths, out=prev)


def plan_stats(rows: np.ndarray, n: int, doc_starts, doc_ends) -> dict:
    """Counts for the sidecar: windows, covered/uncovered tokens, uncovered head and tail.

    ``rows`` sorted by start. Head/tail are summed over documents that got a window; tokens of
    documents that got none are ``uncovered_dropped``. Computed over windows, not tokens.
    """
    # the columns once as contiguous int64 (a field of the packed rows is a strided view)
    starts, lengths = rows["start"].astype(np.int64), rows["length"].astype(np.int64)
    covered = int(lengths.sum() - rows["fresh"].sum(dtype=np.int64)) if len(rows) else 0
    ds = np.asarray(doc_starts, np.int64)
    de = np.asarray(doc_ends, np.int64)
    head = tail = 0
    dropped = int((de - ds).sum())
    if len(rows):
        # rows are sorted by start, so each document's windows are contiguous
        d = rows["doc"].astype(np.int64)
        if (d[1:] >= d[:-1]).all():  # the usual case: first index of each doc without np.unique
            first = np.flatnonzero(np.concatenate([[True], d[1:] != d[:-1]]))
            docs = d[first]
        else:
            docs, first = np.unique(d, return_index=True)
        ends = starts + lengths
        head = int((starts[first] - ds[docs]).sum())
        last_end = np.maximum.reduceat(ends, first)
        # a packed window ends inside a later document: the tail is that document's rest
        doc_of_end = np.searchsorted(ds, last_end - 1, "right") - 1
        tail = int((de[doc_of_end] - last_end).sum())
        # documents touched by some window (packed windows touch several): +1 at the first, -1 after the last
        m = len(ds) + 1
        touch = np.bincount(_doc_at(ds, starts, d), minlength=m)
        ends -= 1
        touch -= np.bincount(_doc_at(ds, ends, d) + 1, minlength=m)
        dropped = int((de - ds)[np.cumsum(touch)[:-1] == 0].sum())
    uncovered = n - covered
    return {
        "windows": int(len(rows)),
        "coverage": (covered / n) if n else 1.0,
        "covered_tokens": covered,
        "uncovered_tokens": uncovered,
        "uncovered_tail": tail,
        "uncovered_head": head,
        "uncovered_dropped": dropped,
    }


def _doc_at(ds: np.ndarray, pos: np.ndarray, guess: np.ndarray) -> np.ndarray:
    """``searchsorted(ds, pos, "right") - 1`` (the last document starting at or before each
    position), taking ``guess`` where it already is that (most windows lie in their own
    document: two gathers instead of a binary search per window)."""
    g = np.asarray(guess, np.int64)
    nxt = np.minimum(g + 1, len(ds) - 1)
    ok = (ds[g] <= pos) & ((g + 1 == len(ds)) | (ds[nxt] > pos))
    if ok.all():
        return g
    out = g.copy()
    out[~ok] = np.searchsorted(ds, pos[~ok], "right") - 1
    return out


def shuffle_rows(rows: np.ndarray, seed: int, epoch: int) -> np.ndarray:
    """Rows in a permuted order from ``np.random.default_rng([seed, epoch, 1])``."""
    return rows[np.random.default_rng([seed, epoch, 1]).permutation(len(rows))]


def shard_rows(rows: np.ndarray, k: int) -> list[np.ndarray]:
    """Round-robin split: shard r gets rows r, r+k, r+2k, … (sizes differ by at most one)."""
    return [rows[r::k] for r in range(k)]


def shard_stats(part: np.ndarray, n: int, doc_starts, doc_ends) -> dict:
    """``plan_stats`` of one shard's rows alone: its windows, and the tokens they cover by themselves.

    ``fresh`` of the rows counts overlap with windows of the whole plan, so it is recomputed on a
    sorted copy (the shard's rows are left as they are).
    """
    r = part[np.argsort(part["start"], kind="stable")].copy()
    fill_fresh(r)
    stats = plan_stats(r, n, doc_starts, doc_ends)
    stats["documents"] = int(len(doc_starts))
    return stats


# --- the job: one token file → plan files -------------------------------------------------


def describe_source(bin_path, meta_path=None, encoding=None) -> tokensrc.OpenSplit:
    """``tokensrc.open_split`` of ``bin_path`` (``meta_path`` or the sibling meta.json), refused
    before anything is planned when it cannot be: a size that is not whole tokens (InputError:
    exit 2, nothing written), a file that changed since its meta.json was written (DataError)."""
    foreign = tokensrc.foreign_layout(bin_path, meta_path)
    if foreign is not None:
        return _foreign_source(Path(bin_path), *foreign, encoding, meta_path)
    src = tokensrc.open_split(bin_path, meta_path, encoding)
    if src.stray:
        item = src.itemsize
        raise InputError(
            f"{src.path}: {src.nbytes} bytes is not a multiple of {item} (dtype {src.dtype}):"
            f" {src.stray} stray byte(s); the file is truncated or has the wrong dtype"
        )
    if (problem := src.size_problem()) is not None:
        raise DataError(problem)
    return src


def _foreign_source(path: Path, layout: str, what, encoding=None, meta_path=None) -> tokensrc.OpenSplit:
    """The OpenSplit of llm.c shards (``what``: {group: files}) or a Megatron prefix (``what``: prefix).
    Shards a data folder's meta.json lists (``tokensrc.llmc_owner``) take its tokenizer, unless
    ``encoding`` names one."""
    if layout == tokensrc.MEGATRON:
        idx = tokensrc.read_megatron_index(f"{what}.idx")
        bin_path = Path(f"{what}.bin")
        dtype = tokensrc.megatron_token_dtype(idx)
        nbytes = bin_path.stat().st_size
        problems = tokensrc.megatron_problems(idx, nbytes)
        if problems:
            raise DataError(f"{idx.path}: " + "; ".join(problems) + "; run winsample verify")
        starts = tokensrc.megatron_doc_starts(idx)
        n = nbytes // np.dtype(dtype).itemsize
        if n and (len(starts) == 0 or starts[0] != 0):  # ids before the first document: a piece of its own
            starts = np.concatenate([[0], starts]).astype(np.int64)
        return tokensrc.OpenSplit(bin_path, dtype, n, nbytes, encoding=encoding, layout=layout, known_starts=starts)
    if len(what) != 1:
        raise InputError(f"{path}: holds {len(what)} groups of llm.c shards ({', '.join(what)}); plan one at a time, e.g. {path}/{next(iter(what))}_*.bin")
    files = next(iter(what.values()))
    counts = [tokensrc.read_llmc_header(f) for f in files]
    stream = tokensrc.ConcatTokens(files, counts, tokensrc.LLMC_DTYPE, header_bytes=tokensrc.LLMC_HEADER_BYTES)
    owner = tokensrc.llmc_owner(what, meta_path) if encoding is None else None
    tok = None
    if owner is not None and owner.meta is not None:
        from . import tokenizer

        tok = tokenizer.from_meta(owner.meta.tokenizer, owner.meta_file.parent)
    return tokensrc.OpenSplit(path, tokensrc.LLMC_DTYPE, len(stream), stream.nbytes, encoding=encoding, layout=layout,
                             files=files, _tokens=stream, _tokenizer=tok)


def load_tokenizer(src: tokensrc.OpenSplit, why: str):
    """``src.tokenizer`` (the one rule: ``--encoding``, else meta's, its ``file`` included, else
    gpt2), or ConfigError naming ``why`` when it cannot be loaded."""
    try:
        return src.tokenizer
    except ConfigError as e:
        raise ConfigError(f"{src.path}: {e} (or a --meta describing a known tokenizer), needed for {why}") from None


def doc_edges(src: tokensrc.OpenSplit, tokens, eot: int | None, progress=None) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends) of documents: from the doc index when there is one, else from EOT positions."""
    n = src.n
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    if src.layout == tokensrc.LLMC:  # every document starts with its EOT
        starts = tokensrc.eot_positions(tokens, eot)
        if len(starts) == 0 or starts[0] != 0:
            starts = np.concatenate([[0], starts]).astype(np.int64)
        return starts, np.append(starts[1:], n)
    starts = src.doc_starts()
    if starts is None:
        starts = bnd.doc_starts_from_eot(tokens, eot, progress)
    return starts, np.append(starts[1:], n)


@dataclass
class Options:
    """Everything ``windows`` takes besides paths (CLI names in comments)."""

    T: list[int]  # -T, one plan per value
    targets: bool = True
    stride: int | None = None
    overlap: float | None = None
    offset: int | None = None
    random_offset: bool = False
    seed: int | None = None
    epoch: int | None = None
    tail: str | None = None  # None → align
    short: str = "keep"
    boundaries: str = "none"
    pack: bool = False
    shuffle: bool = False
    shards: int | None = None
    materialize: bool = False
    format: str = "npy"
    decode: bool = False
    encoding: str | None = None
    extra: dict = field(default_factory=dict)


def check_options(o: Options) -> None:
    """ConfigError for options that cannot work (before anything is read or written)."""
    if not o.T:
        raise ConfigError("-T needs at least one value")
    for T in o.T:
        span_of(T, o.targets)
        if T > MAX_T:  # a plan's length column is int32
            raise ConfigError(f"-T {T} is larger than a plan can hold (at most {MAX_T:,} tokens per window)")
    for name, v in (("--stride", o.stride), ("--offset", o.offset)):
        if v is not None and abs(v) > MAX_POSITION:
            raise ConfigError(f"{name} {v} is out of range (a token position is below 2**62)")
    for name, v in (("--seed", o.seed), ("--epoch", o.epoch)):
        if v is not None and not 0 <= v < 1 << 64:
            raise ConfigError(f"{name} must be in [0, 2**64), got {v}")
    if o.shards is not None and o.shards > MAX_SHARDS:
        raise ConfigError(f"--shards {o.shards}: at most {MAX_SHARDS:,} plan files (one per rank)")
    if o.offset is not None and o.random_offset:
        raise ConfigError("--offset and --random-offset both set: give one")
    if o.offset is not None and o.offset < 0:
        raise ConfigError(f"--offset must be >= 0, got {o.offset}")
    if o.epoch is not None and not (o.random_offset or o.shuffle):
        # Without them every epoch's plan is the same: a silently ignored --epoch hides a typo.
        raise ConfigError("--epoch changes nothing without --random-offset or --shuffle: add one, or drop --epoch")
    if (o.random_offset or o.shuffle) and o.seed is None:
        raise ConfigError("--random-offset and --shuffle need --seed N (randomness only from an explicit seed)")
    if o.tail is not None and o.tail not in TAILS:
        raise ConfigError(f"--tail must be one of {', '.join(TAILS)}")
    if o.short not in SHORTS:
        raise ConfigError(f"--short must be one of {', '.join(SHORTS)}")
    if o.boundaries not in BOUNDARIES:
        raise ConfigError(f"--boundaries must be one of {', '.join(BOUNDARIES)}")
    if o.pack and o.boundaries != "doc":
        raise ConfigError("--pack packs whole documents: use it with --boundaries doc")
    if o.random_offset and o.boundaries in ("paragraph", "sentence"):
        # Every cut snaps to the nearest edge, so an offset only moves each document's first
        # window and the rest land on the same edges (99.8% of windows shared between epochs).
        raise ConfigError(f"--random-offset does not move the cuts of --boundaries {o.boundaries} (they snap to the same edges every epoch):"
                          " use --boundaries doc|none with --random-offset, or one semantic plan for every epoch (winsample.Loader reorders it per epoch)")
    if o.tail is not None and o.boundaries in ("paragraph", "sentence"):
        raise ConfigError("--tail applies to --boundaries none|doc; with paragraph|sentence every document's last window already ends at its end")
    if o.shards is not None and o.shards < 1:
        raise ConfigError(f"--shards must be at least 1, got {o.shards}")
    if o.format not in FORMATS:
        raise ConfigError(f"--format must be one of {', '.join(FORMATS)}")
    if o.decode and o.format != "jsonl":
        raise ConfigError("--decode adds text to --format jsonl only")
    if o.format != "npy" and (o.shards or o.materialize or len(o.T) > 1):
        raise ConfigError("--shards, --materialize and several -T values need --format npy")
    for T in o.T:
        resolve_stride(span_of(T, o.targets), T, o.stride, o.overlap)


def output_paths(out: str, T: int, multi: bool, shards: int | None) -> list[Path]:
    base = formats.plan_for_scale(out, T) if multi else Path(out)
    if not shards:
        return [base]
    return [formats.plan_shard(base, r, shards) for r in range(shards)]


def _check_writable(path: Path) -> None:
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        why = "is not a folder" if folder.exists() else "does not exist"
        raise InputError(f"{path}: cannot write: {folder} {why}")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(f"{path}: cannot write: folder {folder} is not writable")
    disk.check_replaceable(path)


def _epoch_offset(o: Options, stride: int) -> int:
    """The start offset: --offset, or the epoch's draw with --random-offset, else 0."""
    if o.random_offset:
        return draw_offset(o.seed, o.epoch if o.epoch is not None else 0, stride)
    return o.offset or 0


def build_plans(bin_path, o: Options, meta_path=None, progress=None) -> list[dict]:
    """Compute one plan per T. Returns dicts with ``T``, ``rows``, ``params``, ``stats``, ``source``.

    Reads tokens only for doc edges without a doc index, semantic edges or nothing else.
    """
    check_options(o)
    src = describe_source(bin_path, meta_path, o.encoding)
    tail = o.tail or "align"
    tokens = None
    enc = None
    semantic = o.boundaries in ("paragraph", "sentence")
    if semantic:
        enc = load_tokenizer(src, f"--boundaries {o.boundaries}")
    if o.boundaries != "none" or o.materialize or o.decode:
        tokens = src.tokens
    if o.boundaries == "none":
        ds = np.zeros(1 if src.n else 0, np.int64)
        de = np.full(len(ds), src.n, np.int64)
    else:
        eot = None
        if not src.sharded and src.doc_index is None and src.known_starts is None:
            try:
                eot = src.eot
            except ConfigError as e:
                raise ConfigError(f"{src.path}: {e}, needed for finding documents by EOT") from None
        ds, de = doc_edges(src, tokens, eot, progress)
    planners = {}
    if semantic:  # one streaming pass over the tokens feeds one planner per T
        for T in o.T:
            span = span_of(T, o.targets)
            stride = resolve_stride(span, T, o.stride, o.overlap)
            planners[T] = SemanticPlanner(ds, de, span, stride, _epoch_offset(o, stride), o.short, o.targets)
        try:
            for known, found in bnd.iter_boundaries(tokens, o.boundaries, enc, progress=progress):
                for p in planners.values():
                    p.feed(found, known)
        except DataError as e:  # e.g. an id outside the vocabulary: name the file
            raise DataError(f"{src.path}: {e}") from None
    results = []
    for T in o.T:
        span = span_of(T, o.targets)
        stride = resolve_stride(span, T, o.stride, o.overlap)
        offset = _epoch_offset(o, stride)
        epoch = o.epoch if o.epoch is not None else (0 if o.random_offset or o.shuffle else None)
        if semantic:
            rows = planners[T].finish()
        elif o.pack:
            rows = plan_packed(ds, de, span, stride, offset, tail, o.short, o.targets)
        else:
            rows = plan_regular(ds, de, span, stride, offset, tail, o.short, o.targets)
        stats = plan_stats(rows, src.n, ds, de)
        stats["documents"] = int(len(ds))
        if o.shuffle:
            rows = shuffle_rows(rows, o.seed, epoch)
        params = {
            "T": T, "targets": o.targets, "span": span, "stride": stride,
            "overlap": 1 - stride / span, "offset": offset if (o.offset is not None or o.random_offset) else None,
            "random_offset": o.random_offset, "seed": o.seed, "epoch": epoch,
            "tail": tail, "short": o.short, "boundaries": o.boundaries, "pack": o.pack,
            "shuffle": o.shuffle, "shard": None, "shards": o.shards,
            "shard_method": "round-robin" if o.shards else None,
        }
        if semantic:
            params["tail"] = "align"  # the last window of each document ends at its end
        results.append({"T": T, "rows": rows, "params": params, "stats": stats, "doc_starts": ds, "doc_ends": de})
    return [dict(r, src=src, tokens=tokens, enc=enc, meta_path=meta_path) for r in results]


def source_entry(src: tokensrc.OpenSplit, progress=None) -> formats.PlanSource:
    """The sidecar's ``source``: checksum from meta.json when it describes the file, else streamed."""
    if src.files is not None:  # llm.c shards: the checksum verify computes for the stream
        checksum = tokensrc.llmc_stream_checksum(src.files, progress)
    else:
        checksum = src.checksum if src.entry is not None else disk.checksum_file(src.path, progress)
    return formats.PlanSource(path=str(src.path), file=src.path.name, bytes=src.nbytes, checksum=checksum,
                              dtype=src.dtype, tokens=src.n)


def materialize(path: Path, rows: np.ndarray, tokens, span: int, pad_id: int, dtype: str) -> None:
    """(n, span) token windows as .npy at ``path``, short windows padded with ``pad_id``; atomic."""
    from numpy.lib.format import open_memmap

    with disk.atomic_path(path) as tmp:
        arr = open_memmap(tmp, mode="w+", dtype=np.dtype(dtype), shape=(len(rows), span))
        cols = np.arange(span, dtype=np.int64)
        n = len(tokens)
        for lo in range(0, len(rows), MATERIALIZE_ROWS):
            r = rows[lo : lo + MATERIALIZE_ROWS]
            idx = r["start"][:, None] + cols
            w = np.asarray(tokens[np.minimum(idx, max(n - 1, 0))]) if n else np.zeros(idx.shape, dtype)
            w = np.where(cols < r["length"][:, None], w, pad_id)
            arr[lo : lo + len(r)] = w
        arr.flush()
        del arr


def run(bin_path, out: str, o: Options, meta_path=None, stream=None, progress=None) -> list[dict]:
    """Plan ``bin_path`` and write the result; returns one summary dict per plan file set.

    ``out`` is the plan path (``-`` with ``stream``, a text stream, for txt/jsonl).
    Every check happens before anything is written.
    """
    check_options(o)
    multi = len(o.T) > 1
    if not out:
        raise ConfigError("-o is empty: give the plan's file name, or - for --format txt|jsonl on stdout")
    if out == "-":
        if o.format == "npy":
            raise ConfigError("-o - streams text: use --format txt or jsonl, or give a file name for .npy")
    else:
        if out.endswith(("/", os.sep)):
            raise ConfigError(f"-o {out}: names a folder; give the plan's file name, e.g. {out}train.plan.npy")
        disk.refuse_overwrite(written_paths(out, o), formats.dataset_files(bin_path, meta_path))
        suffix = Path(out).suffix.lower()
        text_name = suffix in (".txt", ".tsv", ".jsonl")
        if (o.format == "npy" and text_name) or (o.format != "npy" and suffix == ".npy"):
            raise ConfigError(f"-o {out} with --format {o.format}: the name says {suffix[1:]}, the contents would be"
                              f" {o.format}; name it {Path(out).stem}.{'npy' if o.format == 'npy' else o.format} or pick the other --format")
        for T in o.T:
            for p in output_paths(out, T, multi, o.shards):
                _check_writable(p)
    return _plan_and_write(bin_path, out, o, meta_path, stream, progress, multi)


def written_paths(out: str, o: Options) -> list[Path]:
    """Every file a run with ``-o out`` writes: plans, their sidecars and materialized windows."""
    if o.format != "npy":
        return [Path(out)]
    paths = []
    for T in o.T:
        for p in output_paths(out, T, len(o.T) > 1, o.shards):
            paths += [p, formats.plan_sidecar(p)] + ([formats.materialized_path(p)] if o.materialize else [])
    return paths


def _plan_and_write(bin_path, out: str, o: Options, meta_path, stream, progress, multi: bool) -> list[dict]:
    plans = build_plans(bin_path, o, meta_path, progress)
    summaries: list[dict] = []
    # .npy plans: every file of this run is written into a staging folder beside the plan and
    # moved into place as one set (sidecars last), so a crash leaves the old set or the new one.
    # Writers into one folder take turns (disk.locked_folder): two runs writing one plan at
    # once each leave a complete set, never the plan of one with the tokens of the other.
    with disk.locked_folder(Path(out).parent) if o.format == "npy" else nullcontext():
        _write_all(plans, out, o, multi, stream, summaries)
    return summaries


def _write_all(plans, out: str, o: Options, multi: bool, stream, summaries: list) -> None:
    stage = None
    names: list[str] = []
    try:
        try:
            stage = formats.plan_staging_dir(out) if o.format == "npy" else None  # in the try: see encode
        except OSError as e:  # e.g. a folder that lists as writable but is not (/proc)
            raise InputError(f"{out}: cannot write beside it: {e.strerror or e}") from None
        try:
            _write_plans(plans, out, o, multi, stream, stage, names, summaries)
            if stage is not None:
                names.sort(key=lambda n: n.endswith(".json"))  # sidecars last: a plan is current only with its sidecar
                disk.commit_staged(stage, Path(out).parent, names)
        except BrokenPipeError:  # `-o - | head` closed stdout: the CLI stops quietly, as after any command
            raise
        except OSError as e:  # a full disk, a quota: name the file and say what happened
            where = e.filename or out
            raise InputError(f"{where}: cannot write: {disk.os_error_text(e)}; nothing was written") from None
    except BaseException:
        if o.format == "npy":
            formats.recover_plan(out)  # no COMMIT mark yet: drops the staging folder
        raise


def _write_plans(plans, out: str, o: Options, multi: bool, stream, stage, names: list, summaries: list) -> None:
    for plan in plans:
        rows, params, stats, src = plan["rows"], plan["params"], plan["stats"], plan["src"]
        summary = {"windows": stats["windows"], "span": params["span"], "coverage": stats["coverage"],
                   "uncovered_tail": stats["uncovered_tail"], "T": params["T"], "stride": params["stride"],
                   "overlap": params["overlap"], "offset": params["offset"], "tokens": src.n,
                   "covered_tokens": stats["covered_tokens"], "uncovered_tokens": stats["uncovered_tokens"],
                   "uncovered_head": stats["uncovered_head"], "files": []}
        if o.format != "npy":
            _write_text(out, rows, o, plan, stream)
            summary["files"] = [] if out == "-" else [out]
            summaries.append(summary)
            continue
        source = source_entry(src)
        paths = output_paths(out, plan["T"], multi, o.shards)
        parts = shard_rows(rows, o.shards) if o.shards else [rows]
        pad_id = None
        if o.materialize:
            enc = plan["enc"]
            pad_id = enc.eot if enc else src.eot
        for r, (p, part) in enumerate(zip(paths, parts)):
            side_params = dict(params, shard=r if o.shards else None)
            side = formats.PlanSidecar(source=source, params=side_params, stats=stats,
                                       tokenizer=src.tokenizer_entry or None)
            if o.shards:  # a shard's stats describe its own rows; the whole plan's go to plan_stats
                side.stats = shard_stats(part, src.n, plan["doc_starts"], plan["doc_ends"])
                side.plan_stats = stats
            if o.materialize:
                mp = formats.materialized_path(p)
                with disk.naming(mp):
                    materialize(stage / mp.name, part, plan["tokens"], params["span"], pad_id, src.dtype)
                side.materialized = {"file": mp.name, "shape": [int(len(part)), params["span"]],
                                     "dtype": src.dtype, "pad_id": int(pad_id)}
                summary["files"].append(str(mp))
                names.append(mp.name)
            with disk.naming(p):
                formats.write_plan(stage / p.name, part, side)
            names += [p.name, formats.plan_sidecar(p).name]
            summary["files"].append(str(p))
        summaries.append(summary)


def _write_text(out: str, rows: np.ndarray, o: Options, plan: dict, stream) -> None:
    def lines():
        if o.format == "txt":
            for lo in range(0, len(rows), 65536):  # rows formatted in batches, not one by one
                r = rows[lo : lo + 65536]
                yield "".join(f"{s}\t{n}\n" for s, n in zip(r["start"].tolist(), r["length"].tolist()))
            return
        enc = None
        if o.decode:
            enc = plan["enc"] or load_tokenizer(plan["src"], "--decode")
        # With provenance, "doc" is the document the window starts in (a window planned across
        # documents included) and "source" where that document came from.
        tracer = provenance.tracer_for(plan["src"], plan.get("meta_path"))
        for lo in range(0, len(rows), 65536):
            batch = rows[lo : lo + 65536]
            docs = tracer.doc_at(batch["start"]).tolist() if tracer is not None and len(batch) else None
            for k, row in enumerate(batch):
                i = lo + k
                start = int(row["start"])
                obj: dict[str, Any] = {"start": start, "length": int(row["length"]), "doc": int(row["doc"])}
                if docs is not None:
                    obj["doc"] = docs[k]
                    obj["doc_offset"] = start - int(tracer.starts[docs[k]])  # tokens into the document
                obj["fresh"] = int(row["fresh"])
                if docs is not None:
                    obj["source"] = tracer.document(docs[k])
                if enc is not None:
                    s = obj["start"]
                    ids = np.asarray(plan["tokens"][s : s + obj["length"]])
                    if len(ids) and int(ids.max()) >= enc.n_vocab:  # tiktoken raises KeyError on them
                        j = int(np.argmax(ids >= enc.n_vocab))
                        raise DataError(f"{plan['src'].path}: token {s + j}: id {int(ids[j])} is not in the tokenizer"
                                        f" ({enc.name}, n_vocab {enc.n_vocab}); cannot --decode window {i}")
                    obj["text"] = enc.decode(ids.tolist())
                yield json.dumps(obj, ensure_ascii=False) + "\n"

    if out == "-":
        for chunk in lines():
            stream.write(chunk)
    else:
        with disk.naming(out), disk.atomic_open(out, "w") as f:
            for chunk in lines():
                f.write(chunk)
