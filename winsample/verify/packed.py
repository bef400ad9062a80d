"""Best-fit packed plans (``PlanSidecar.best_fit``): rows are segments (``formats.PACKED_DTYPE``),
several per window, so the plan's figures are checked here instead of by ``plan.py``'s window
arithmetic. ``check_packed`` adds the plan stage's lines for such a plan:

- plan_bounds: made for this file; every segment inside [0, N), 1 ≤ length ≤ span; parameters
  that fit a best-fit plan (``params.long`` one of split/truncate/drop; no shuffle, shards,
  offset or materialized windows); rows as windows wrote them (``rows_checksum``);
- min_length (N against T + 1: a warning, since best-fit windows may be short), order (rows by
  window, then start), duplicates (no token in two segments), coverage (as for any plan);
- packing: windows numbered 0, 1, … without a gap, each holding ≤ span tokens (≥ 2 with targets);
- segments: each segment is a whole document or the piece ``params.long`` gives (split: pieces at
  ds, ds + span, … of min(span, de − start) tokens; truncate: [ds, ds + span); drop: none for a
  document longer than the span), its ``doc`` the document it lies in, and every piece planned;
- packed_stats: the sidecar's stats are what the rows (and the documents) give.

Documents are the token file's, found as ``windows`` finds them (its document index, else EOT
ids; an llm.c stream: its EOTs). With targets, a window of one token holds no (x, y) pair and
``windows`` leaves it out: a 1-token piece may be missing when no window has room left for it
(every window full), and at most one such.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np

from .. import formats, planning, tokensrc
from ..errors import WinsampleError
from .figures import coverage_in_order
from .files import MIN_LENGTH
from .plan import (
    DUPLICATES,
    ORDER,
    PLAN_BOUNDS,
    Plan,
    check_coverage,
    param_problems,
    rows_checksum_problems,
    source_problems,
)
from .registry import define
from .report import Report, Status

MAX_SPAN = (1 << 31) - 1  # a segment's length is int32: a larger span is no window size

PACKING = define("packing", "best-fit: windows numbered 0, 1, …, each ≤ span tokens (≥ 2 with targets)",
                 "plans, sidecars")
SEGMENTS = define("segments", "best-fit: each segment a whole document or its --long piece, each piece planned",
                  "plans, sidecars, document indexes or token files")
PACKED_STATS = define("packed_stats", "best-fit: the sidecar's stats (fill, padding, documents split, …) are the rows'",
                      "plans, sidecars, document indexes or token files")


@dataclass
class PackedFigures:
    """What the rows of a best-fit plan give without its documents. Rows are plan row indexes."""

    start: np.ndarray  # int64 columns
    length: np.ndarray
    window: np.ndarray
    inside: np.ndarray  # bool: start ≥ 0, 1 ≤ length ≤ span, start + length ≤ N
    misordered: np.ndarray  # rows (≥ 1) that come before the row above them in (window, start) order
    ids: np.ndarray  # distinct window numbers, increasing
    totals: np.ndarray  # tokens of each of ``ids``
    numbering: str | None  # why the window numbers are not 0, 1, …, W − 1 (None: they are)
    planned: int = 0  # the segments' tokens, summed
    coverage: dict = field(default_factory=dict)  # figures.coverage_in_order of the segments inside

    @property
    def windows(self) -> int:
        return len(self.ids)


def packed_figures(rows: np.ndarray, n: int, span: int | None) -> PackedFigures:
    """The figures of segment rows over N tokens (vectorised: a sort when rows are out of order)."""
    start, length, window = (rows[k].astype(np.int64) for k in ("start", "length", "window"))
    inside = (start >= 0) & (length >= 1) & (start <= n - length)  # not start + length ≤ n: that can wrap
    if span is not None:
        inside &= length <= span
    later = (window[1:] > window[:-1]) | ((window[1:] == window[:-1]) & (start[1:] >= start[:-1]))
    misordered = np.flatnonzero(~later) + 1
    o = np.argsort(window, kind="stable") if len(misordered) else np.arange(len(rows))
    w = window[o]
    cuts = np.flatnonzero(np.diff(w)) + 1
    firsts = np.concatenate([[0], cuts]).astype(np.int64) if len(w) else np.zeros(0, np.int64)
    ids = w[firsts]
    totals = np.add.reduceat(length[o], firsts) if len(w) else np.zeros(0, np.int64)
    numbering = None
    if len(ids) and ids[0] != 0:
        numbering = f"window numbers start at {int(ids[0])}, not 0"
    elif len(ids) and ids[-1] != len(ids) - 1:
        g = int(np.flatnonzero(np.diff(ids) > 1)[0])
        numbering = f"no window numbered {int(ids[g]) + 1} between windows {int(ids[g])} and {int(ids[g + 1])}"
    s, e = start[inside], start[inside] + length[inside]
    return PackedFigures(start, length, window, inside, misordered, ids, totals, numbering, int(length.sum()),
                         coverage_in_order(s, e, n))


def window_index(rows: np.ndarray) -> np.ndarray | None:
    """int64 [W + 1]: window i's segments are rows ``[idx[i], idx[i + 1])``; None unless the rows
    are sorted by window and the windows numbered 0, 1, … without a gap."""
    w = rows["window"].astype(np.int64)
    if len(w) and (w[0] != 0 or (np.diff(w) < 0).any() or (np.diff(w) > 1).any()):
        return None
    return np.searchsorted(w, np.arange(int(w[-1]) + 2 if len(w) else 1)).astype(np.int64)


def check_packed(report: Report, ctx, plan: Plan) -> None:
    """Every line of the plan stage's figures for a best-fit plan (the module docstring)."""
    if plan.span is not None and plan.span > MAX_SPAN:  # no segment reaches it: as good as none (plan_bounds says so)
        plan = dataclasses.replace(plan, span=None)
    n, span, label = plan.scan.n, plan.span, plan.label
    fig = packed_figures(plan.rows, n, span)
    foreign = _check_bounds(report, ctx, plan, fig)
    if span is not None:  # a best-fit window may be short (padded): only a file too short for any window fails
        ok, least = n >= span, 2 if plan.targets is True else 1
        what = f"T + 1 = {span}" if plan.targets is True else f"span = {span} (no targets)"
        why = "" if ok else (": no window of this best-fit plan can be full (each is padded to the span)" if n >= least else
                             f": not one window of {least} token(s) fits")
        report.add(MIN_LENGTH, label, Status.PASS if ok else Status.WARN if n >= least else Status.FAIL,
                   f"N = {n} {'≥' if ok else '<'} {what}{why}", tokens=n, required=span)
    _check_order(report, plan, fig)
    _check_duplicates(report, plan, fig)
    check_coverage(report, label, len(plan.rows), n, plan.side, ctx.opts.min_coverage, fig.coverage)
    _check_packing(report, plan, fig)
    # a plan of another file: its segments and figures say nothing of this file's documents
    docs = plan_documents(ctx, plan) if not foreign else FOREIGN
    if isinstance(docs, str):
        docs = f"cannot find the documents: {docs}" if not foreign else docs
        report.add(SEGMENTS, label, Status.SKIP, docs)
        _check_stats(report, plan, fig, docs, (-1, 0), foreign)
        return
    _check_stats(report, plan, fig, docs, _check_segments(report, plan, fig, *docs))


def plan_documents(ctx, plan: Plan) -> tuple[np.ndarray, np.ndarray] | str:
    """(starts, ends) of the documents of the plan's token file as ``windows`` finds them, or why not."""
    target = next((t for t in ctx.targets if t.path == plan.path), None)
    src = target.src if target is not None else None
    tokens = plan.scan.tokens()
    try:
        if src is None:  # an llm.c stream named on its own: every document starts with its EOT
            eot = getattr(ctx.enc, "eot", None)
            if eot is None:
                return "no tokenizer EOT id to find llm.c documents by"
            starts = tokensrc.eot_positions(tokens, eot) if plan.scan.n else np.zeros(0, np.int64)
            if plan.scan.n and (not len(starts) or starts[0] != 0):
                starts = np.concatenate([[0], starts]).astype(np.int64)
            return starts, np.append(starts[1:], plan.scan.n).astype(np.int64)
        eot = src.eot if src.meta is not None else getattr(ctx.enc, "eot", None)
        return planning.doc_edges(src, tokens, eot)
    except WinsampleError as e:  # a broken document index: the meta check names it
        return str(e)


FOREIGN = "it was made for another file (see plan_bounds): this file's documents are not the plan's"


def _check_bounds(report: Report, ctx, plan: Plan, fig: PackedFigures) -> bool:
    """plan_bounds of a best-fit plan: its file, its parameters, its rows as written, every segment
    inside. True when the sidecar names another file (size or checksum) than the one scanned."""
    side, span, n = plan.side, plan.span, plan.scan.n
    problems = source_problems(plan, ctx.targets)
    src = side.source
    foreign = src.bytes != plan.scan.size or (src.checksum is not None and src.checksum != plan.scan.checksum)
    if span is None or span < 1:
        problems.append(f"sidecar params.span is {side.params.span!r}, not a positive integer up to {MAX_SPAN}")
    problems += param_problems(side.params, side, plan.rows, span, plan.T, plan.targets) + _best_fit_problems(side)
    problems += rows_checksum_problems(plan.got, plan.rows)
    bad = np.flatnonzero(~fig.inside)
    if len(bad):
        i = int(bad[0])
        s, L = int(fig.start[i]), int(fig.length[i])
        why = [w for w, hit in (("start < 0", s < 0), ("length < 1", L < 1), (f"end {s + L} > N = {n}", s > n - L),
                                (f"length > span {span}", span is not None and L > span)) if hit]
        problems.append(f"{len(bad)} segment(s) out of bounds; first: row {i} [{s}, {s + L}) ({', '.join(why)})")
    figs = {"segments": len(plan.rows), "tokens": n, "span": span, "bad_segments": len(bad)}
    if problems:
        report.add(PLAN_BOUNDS, plan.label, Status.FAIL, "; ".join(problems), **figs)
    else:
        report.add(PLAN_BOUNDS, plan.label, Status.PASS, f"best-fit plan: {len(plan.rows)} segments inside [0, {n}),"
                   f" lengths ≤ span {span}; made for {plan.scan.label}", **figs)
    return foreign


def _best_fit_problems(side: formats.PlanSidecar) -> list[str]:
    """Sidecar claims a best-fit plan cannot make (windows refuses the options behind them)."""
    p, out = side.params, []
    if p.long not in planning.LONGS:
        out.append(f"params.long is {p.long!r}, not one of {', '.join(planning.LONGS)}")
    for key in ("shuffle", "random_offset"):
        if getattr(p, key) not in (False, None):
            out.append(f"params.{key} is {getattr(p, key)!r}: a best-fit plan is never shuffled or offset")
    if p.shards not in (None, 1) or p.shard not in (None, 0):
        out.append(f"params.shard {p.shard!r} of {p.shards!r}: a best-fit plan is one file (the Loader splits it by rank)")
    if p.offset not in (None, 0):
        out.append(f"params.offset is {p.offset!r}: a best-fit plan has no offset")
    if side.materialized is not None:
        out.append("the sidecar names materialized windows: a best-fit plan has none (windows refuses --materialize)")
    return out


def _check_order(report: Report, plan: Plan, fig: PackedFigures) -> None:
    m = fig.misordered
    if len(m):
        i = int(m[0])
        report.add(ORDER, plan.label, Status.FAIL, f"{len(m)} row(s) out of (window, start) order; first: row {i}"
                   f" (window {int(fig.window[i])}, start {int(fig.start[i])}) after row {i - 1} (window"
                   f" {int(fig.window[i - 1])}, start {int(fig.start[i - 1])})", decreases=len(m), first_row=i)
    else:
        report.add(ORDER, plan.label, Status.PASS, "rows by window, then start (as windows writes a best-fit plan)")


def _check_duplicates(report: Report, plan: Plan, fig: PackedFigures) -> None:
    """No token is in two segments (segments inside the file only: plan_bounds names the others)."""
    idx = np.flatnonzero(fig.inside)
    s, e = fig.start[idx], fig.start[idx] + fig.length[idx]
    o = np.argsort(s, kind="stable")
    s, e, idx = s[o], e[o], idx[o]
    reach = np.maximum.accumulate(e) if len(e) else e
    hit = np.flatnonzero(s[1:] < reach[:-1]) + 1  # starts before an earlier segment ends
    if not len(hit):
        report.add(DUPLICATES, plan.label, Status.PASS, "no token is in two segments", duplicates=0)
        return
    k = int(hit[0])
    j = int(np.flatnonzero(e[:k] > s[k])[0])  # an earlier segment it overlaps
    a, b = int(idx[j]), int(idx[k])
    same = s[j] == s[k] and e[j] == e[k]
    what = (f"row {b} repeats row {a} [{s[k]}, {e[k]}) (document {int(plan.rows['doc'][b])} planned twice)" if same else
            f"row {b} [{s[k]}, {e[k]}) overlaps row {a} [{s[j]}, {e[j]})")
    report.add(DUPLICATES, plan.label, Status.FAIL, f"{len(hit)} segment(s) hold tokens an earlier one holds; e.g. {what}",
               duplicates=len(hit))


def _check_packing(report: Report, plan: Plan, fig: PackedFigures) -> None:
    span, label = plan.span, plan.label
    if span is None:
        report.add(PACKING, label, Status.SKIP, "no params.span to hold the windows to (see plan_bounds)")
        return
    problems = [fig.numbering] if fig.numbering else []
    for what, hit in (("more than the span " + str(span), fig.totals > span),
                      ("fewer than 2: no (x, y) pair", (fig.totals < 2) if plan.targets is True else fig.totals < 1)):
        if hit.any():
            w = int(np.argmax(hit))
            problems.append(f"{int(hit.sum())} window(s) hold {what}; first: window {int(fig.ids[w])}, {int(fig.totals[w])} tokens")
    figs = {"windows": fig.windows, "span": span}
    if problems:
        report.add(PACKING, label, Status.FAIL, "; ".join(problems), **figs)
        return
    fill = fig.planned / (fig.windows * span) if fig.windows else 0.0
    sizes = f", {int(fig.totals.min())} to {int(fig.totals.max())} tokens each" if fig.windows else ""
    report.add(PACKING, label, Status.PASS, f"{fig.windows} windows numbered 0 … {fig.windows - 1}{sizes} (span {span});"
               f" fill {fill:.2%}", fill=fill, **figs)


def _expected(lengths: np.ndarray, span: int, long: str) -> tuple[np.ndarray, np.ndarray]:
    """(pieces, tokens) ``--long long`` plans of documents of ``lengths``."""
    big = lengths > span
    if long == "split":
        return np.where(lengths > 0, -(-lengths // span), 0), lengths
    if long == "truncate":
        return (lengths > 0).astype(np.int64), np.minimum(lengths, span)
    keep = (lengths > 0) & ~big
    return keep.astype(np.int64), np.where(keep, lengths, 0)


def _check_segments(report: Report, plan: Plan, fig: PackedFigures, ds: np.ndarray, de: np.ndarray) -> tuple[int, int]:
    """segments; returns (the document, tokens) of a 1-token piece left out as a lone window, or (-1, 0)."""
    span, long, label = plan.span, plan.side.params.long, plan.label
    if span is None or long not in planning.LONGS:
        report.add(SEGMENTS, label, Status.SKIP, f"params.span {span!r} / params.long {long!r}: no piece rule (see plan_bounds)")
        return -1, 0
    idx = np.flatnonzero(fig.inside)
    s, L, doc = fig.start[idx], fig.length[idx], plan.rows["doc"][idx].astype(np.int64)
    d = np.maximum(np.searchsorted(ds, s, "right") - 1, 0)  # the document each segment starts in
    dl, k = de[d] - ds[d], s - ds[d]
    if long == "split":
        at, want = np.where(dl > span, k % span == 0, k == 0), np.minimum(span, dl - k)
    elif long == "truncate":
        at, want = k == 0, np.minimum(dl, span)
    else:
        at, want = (k == 0) & (dl <= span), dl
    good = at & (L == want) & (doc == d)
    problems = []
    if not good.all():
        r = int(np.argmax(~good))
        problems.append(f"{int((~good).sum())} segment(s) are not a document or its piece; first: row {int(idx[r])}"
                        f" [{int(s[r])}, {int(s[r] + L[r])}): {_why(int(k[r]), int(L[r]), int(want[r]), int(doc[r]), int(d[r]), int(ds[d[r]]), int(de[d[r]]), span, long)}")
    lengths = de - ds
    pieces, tokens = _expected(lengths, span, long)
    u = np.unique(s[good], return_index=True)[1]  # each piece once, however often it is planned
    if len(u) < good.sum():
        again = np.setdiff1d(np.arange(int(good.sum())), u)[0]
        problems.append(f"{int(good.sum()) - len(u)} piece(s) planned more than once; first: row {int(idx[good][again])}"
                        f" [{int(s[good][again])}, {int(s[good][again] + L[good][again])}) of document {int(d[good][again])}")
    have = np.bincount(d[good][u], minlength=len(ds))
    got_tokens = np.bincount(d[good][u], weights=L[good][u], minlength=len(ds)).astype(np.int64)
    short_pieces, short_tokens = pieces - have, tokens - got_tokens
    lone = (-1, 0)
    if short_pieces.sum() == 1 and short_tokens.sum() == 1 and plan.targets is True and (fig.totals == span).all():
        lone = (int(np.argmax(short_pieces)), 1)  # windows leaves out a window of one token
    elif short_pieces.any():
        m = int(np.argmax(short_pieces > 0))
        problems.append(f"{int(short_pieces.sum())} piece(s) of {int((short_pieces > 0).sum())} document(s) not planned;"
                        f" first: document {m} [{int(ds[m])}, {int(de[m])}): {int(have[m])} of {int(pieces[m])} planned"
                        f" (--long {long}, span {span})")
    figs = {"segments": len(plan.rows), "documents": len(ds), "long": long}
    if problems:
        report.add(SEGMENTS, label, Status.FAIL, "; ".join(problems), **figs)
        return lone
    note = ("; 1 token left out: a 1-token piece with every window full (a window of one token holds no (x, y) pair)"
            if lone[1] else "")
    report.add(SEGMENTS, label, Status.PASS, f"{len(plan.rows)} segments: whole documents and their --long {long} pieces"
               f" (span {span}), each of the {int((pieces > 0).sum())} documents planned has all its pieces, once each{note}",
               **figs)
    return lone


def _why(k: int, L: int, want: int, doc: int, d: int, ds: int, de: int, span: int, long: str) -> str:
    """Why one segment is not a document or its piece (``k``: its offset in document ``d`` [ds, de))."""
    where, into = f"document {d} [{ds}, {de})", f"{k} token{'' if k == 1 else 's'} into"
    if long == "drop" and de - ds > span and k == 0:
        return f"{where} is longer than the span {span}: --long drop leaves it out"
    if long == "split" and de - ds > span and k % span:
        return f"starts {into} {where}: pieces of a split document start every {span} tokens"
    if k:
        return f"starts {into} {where}, not at its start"
    if L != want:
        return f"holds {L} tokens; {where} gives {'a piece' if long != 'drop' else 'a segment'} of {want}"
    return f"its doc column says {doc}, but it lies in document {d}"


def _check_stats(report: Report, plan: Plan, fig: PackedFigures, docs, lone: tuple[int, int], foreign: bool = False) -> None:
    """packed_stats: each figure the sidecar records, against the rows and (``docs``: (starts,
    ends), or why there are none) the documents; ``lone``: what ``_check_segments`` returned.
    ``foreign``: the plan names another file, whose figures these are not (not compared)."""
    span, n, long = plan.span, plan.scan.n, plan.side.params.long
    if span is None or foreign:
        report.add(PACKED_STATS, plan.label, Status.SKIP, FOREIGN if foreign else "no params.span to count windows by (see plan_bounds)")
        return
    covered = fig.coverage["covered"]
    want = {
        "windows": fig.windows, "segments": len(plan.rows), "covered_tokens": covered, "uncovered_tokens": n - covered,
        "coverage": covered / n if n else 1.0, "fill": fig.planned / (fig.windows * span) if fig.windows else 0.0,
        "padding_tokens": fig.windows * span - fig.planned, "uncovered_head": 0,
    }
    why_not = docs if isinstance(docs, str) else None if long in planning.LONGS else f"params.long {long!r}"
    if why_not is None:
        want.update(_document_stats(fig, *docs, span, long, lone))
    wrong = []
    for key, value in want.items():
        have = getattr(plan.side.stats, key)
        num = isinstance(have, (int, float)) and not isinstance(have, bool)
        if not num or not (math.isclose(have, value, rel_tol=1e-9, abs_tol=1e-12) if isinstance(value, float) else have == value):
            wrong.append(f"stats.{key} {have!r}, the rows give {value!r}")
    said = (f"{want['windows']} windows, {want['segments']} segments, fill {want['fill']:.2%}, {want['padding_tokens']}"
            " padding tokens")
    figs = {k: want[k] for k in ("windows", "segments", "fill", "padding_tokens")}
    if wrong:
        report.add(PACKED_STATS, plan.label, Status.FAIL, f"the sidecar's stats are not the plan's: {'; '.join(wrong)}",
                   wrong=len(wrong))
    elif why_not is not None:
        report.add(PACKED_STATS, plan.label, Status.SKIP, f"{said}: as the sidecar records; {why_not}, so uncovered_tail,"
                   " uncovered_dropped and the document counts are not compared", **figs)
    else:
        report.add(PACKED_STATS, plan.label, Status.PASS, f"{said}; documents split/truncated/dropped {want['documents_split']}/"
                   f"{want['documents_truncated']}/{want['documents_dropped']}: as the sidecar records", **figs)


def _document_stats(fig: PackedFigures, ds: np.ndarray, de: np.ndarray, span: int, long: str, lone: tuple[int, int]) -> dict:
    """The stats that need the documents: tokens cut off planned documents (uncovered_tail), of
    documents never planned (uncovered_dropped, with a 1-token piece left out), and counts."""
    lengths = de - ds
    idx = np.flatnonzero(fig.inside)
    d = np.maximum(np.searchsorted(ds, fig.start[idx], "right") - 1, 0)
    planned = np.bincount(d, weights=fig.length[idx], minlength=len(ds)).astype(np.int64)
    lone_doc, lone_tokens = lone
    in_planned = lone_tokens if lone_doc >= 0 and planned[lone_doc] > 0 else 0  # the rest of a split document is planned
    big = int((lengths > span).sum())
    return {"uncovered_tail": int((lengths - planned)[planned > 0].sum()) - in_planned,
            "uncovered_dropped": int(lengths[planned == 0].sum()) + in_planned, "documents": len(ds),
            "documents_split": big if long == "split" else 0, "documents_truncated": big if long == "truncate" else 0,
            "documents_dropped": big if long == "drop" else 0}


__all__ = ["PACKED_STATS", "PACKING", "SEGMENTS", "PackedFigures", "check_packed", "packed_figures", "plan_documents",
           "window_index"]
