"""The ``decode`` check: the first --show windows (of the first plan, or of a token file) as text;
where the data has a loss mask, the text it trains on between « and »."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..errors import WinsampleError
from .packed import window_index
from .registry import check
from .report import Report, Status, Window

if TYPE_CHECKING:
    from .plan import Plan

NO_PLAN_WINDOW = 64  # tokens per decoded window when there is neither a plan nor -T

SHOW_TOKENS = 512  # tokens of each shown window that are decoded for the report


@check("decode", help="the first --show windows decode with the tokenizer", reads="plans or token files, tokenizer",
       stage="final")
def decode(report: Report, ctx) -> None:
    """The first --show windows of the first plan (``ctx.first_plan``; a mixture: its first
    positions, ``mixture.show_mixture``), else of the first token file."""
    from .mixture import Mixture, show_mixture  # imported here: its checks are listed after this module's

    if isinstance(ctx.first_plan, Mixture):
        show_mixture(report, ctx.first_plan, ctx.opts.show)
        return
    show_windows(report, ctx.first_plan, ctx.targets, ctx.scans, ctx.enc, ctx.enc_error, ctx.opts.T, ctx.opts.show)


DECODE = decode.spec


def show_windows(report: Report, plan: Plan | None, targets, scans, enc, enc_error, T, show) -> None:
    """decode's line, and the windows it decodes into ``report.windows``."""
    if show <= 0:
        report.add(DECODE, "", Status.SKIP, "--show 0")
        return
    if plan is not None and plan.side.best_fit:
        show_packed(report, plan, targets, enc, enc_error, show)
        return
    if plan is not None:
        scan = plan.scan
        starts = plan.rows["start"][:show].astype(np.int64)
        lengths = plan.rows["length"][:show].astype(np.int64)
        label = f"{plan.label} → {scan.label}"
    else:
        scan = next((scans[t.path] for t in targets if not scans[t.path].stray), None)
        if scan is None:
            report.add(DECODE, "", Status.SKIP, "no file readable as whole tokens")
            return
        w = T or NO_PLAN_WINDOW
        starts = np.arange(0, min(scan.n, w * show), w, dtype=np.int64)
        lengths = np.minimum(w, scan.n - starts)
        label = scan.label
    if enc is None:
        report.add(DECODE, label, Status.WARN, f"cannot decode: {enc_error}")
        return
    tokens = scan.tokens()
    n = len(tokens)
    problems = 0
    prev_s = prev_e = None
    tracer, mask = _tracer_of(scan, targets), _mask_of(scan, targets)
    for s, L in zip(starts.tolist(), lengths.tolist()):
        # A person reads the first SHOW_TOKENS of each window: a long-context T must not print the file.
        s0, end = max(s, 0), min(s + L, n)
        e0 = min(end, s0 + SHOW_TOKENS)
        ids = tokens[s0:e0].tolist() if e0 > s0 else []
        ov = 0
        if prev_e is not None and prev_s <= s0 < prev_e:
            ov = min(prev_e, end) - s0
        try:
            text = _text(enc, ids, None if mask is None else mask[s0:e0])
            otext = _text(enc, ids[:ov], None if mask is None else mask[s0 : s0 + ov])
            if mask is not None and 0 < ov < len(ids) and mask[s0 + ov - 1] and mask[s0 + ov]:
                otext = otext[: -len(TRAINED[1])]  # a trained run goes on past the shared part: left open, as in text
        except Exception as e:  # ids outside the vocabulary: tiktoken raises
            text, otext, problems = f"<cannot decode: {type(e).__name__}>", "", problems + 1
        source = tracer.document(int(tracer.doc_at(s0))) if tracer is not None and s0 < n else None
        report.windows.append(Window(scan.label, s, L, text, ov, otext, source, e0 - s0 if e0 < end else None))
        prev_s, prev_e = s0, end
    shown = len(report.windows)
    if problems:
        report.add(DECODE, label, Status.WARN, f"{problems} of {shown} window(s) hold ids the tokenizer cannot decode")
    else:
        report.add(DECODE, label, Status.PASS, f"{shown} window(s) decoded with {enc.name}", shown=shown)


def show_packed(report: Report, plan: Plan, targets, enc, enc_error, show: int) -> None:
    """decode of a best-fit plan: its first ``show`` windows, each its segments side by side
    (each decoded on its own; SHOW_TOKENS per window in all)."""
    scan, label = plan.scan, f"{plan.label} → {plan.scan.label}"
    idx = window_index(plan.rows)
    if idx is None:
        report.add(DECODE, label, Status.SKIP, "window numbers are not 0, 1, … in row order (see order, packing): no window to show")
        return
    if enc is None:
        report.add(DECODE, label, Status.WARN, f"cannot decode: {enc_error}")
        return
    tokens, tracer, mask, problems = scan.tokens(), _tracer_of(scan, targets), _mask_of(scan, targets), 0
    n = len(tokens)
    for i in range(min(show, len(idx) - 1)):
        rows, left, segs = plan.rows[idx[i] : idx[i + 1]], SHOW_TOKENS, []
        for s, L, doc in zip(rows["start"].tolist(), rows["length"].tolist(), rows["doc"].tolist()):
            s0 = min(max(s, 0), n)
            ids = tokens[s0 : max(s0, min(s + L, n, s0 + left))].tolist()
            left -= len(ids)
            try:
                text = _text(enc, ids, None if mask is None else mask[s0 : s0 + len(ids)])
            except Exception as e:  # ids outside the vocabulary: tiktoken raises
                text, problems = f"<cannot decode: {type(e).__name__}>", problems + 1
            seg = {"start": s, "length": L, "doc": doc, "text": text, "shown_tokens": len(ids)}
            if tracer is not None and s0 < n:
                seg["source"] = tracer.document(int(tracer.doc_at(s0)))
            segs.append(seg)
        total, shown = int(rows["length"].sum()), SHOW_TOKENS - left
        report.windows.append(Window(scan.label, segs[0]["start"], total, "".join(g["text"] for g in segs), source=segs[0].get("source"),
                                     shown=shown if shown < total else None, window=i, segments=segs))
    shown_n = min(show, len(idx) - 1)
    if problems:
        report.add(DECODE, label, Status.WARN, f"{problems} segment(s) of {shown_n} window(s) hold ids the tokenizer cannot decode")
    else:
        report.add(DECODE, label, Status.PASS, f"{shown_n} best-fit window(s) decoded with {enc.name}, each its segments side by side",
                   shown=shown_n)


def _tracer_of(scan, targets):
    """The provenance tracer of the file ``scan`` read, or None (none recorded, or unsound:
    the ``provenance`` check reports that)."""
    from ..provenance import open_tracer

    for t in targets:
        if t.label == scan.label and t.entry is not None:
            try:
                return open_tracer(t.path)
            except WinsampleError:
                return None
    return None


TRAINED = ("«", "»")  # around the text a loss mask trains on (encode --chat / --prompt-field)


def _text(enc, ids: list[int], mask=None) -> str:
    """``ids`` as text; with ``mask`` (one 0/1 per id) each trained run between « and »."""
    if mask is None or not len(ids):
        return enc.decode(ids)
    m = np.asarray(mask[: len(ids)], np.uint8)
    cuts = [0, *(np.flatnonzero(np.diff(m)) + 1).tolist(), len(ids)]
    parts = []
    for a, b in zip(cuts, cuts[1:]):
        piece = enc.decode(ids[a:b])
        parts.append(f"{TRAINED[0]}{piece}{TRAINED[1]}" if m[a] else piece)
    return "".join(parts)


def _mask_of(scan, targets):
    """The loss mask of the file ``scan`` read (a memmap), or None (no mask recorded, or one that
    does not fit: the ``loss_mask`` check reports that)."""
    for t in targets:
        mask = t.entry.mask if t.label == scan.label and t.entry is not None else None
        if mask is not None:
            path = t.path.parent / mask.file
            try:
                if mask.tokens and path.stat().st_size == mask.tokens == scan.n:
                    return np.memmap(path, dtype=np.uint8, mode="r")
            except OSError:
                return None
    return None
