"""All the human text of the commands: summary lines on stderr and verify's report.

What a command prints for people is built here from what its library call returned, so the
library never formats for a terminal and the commands stay parse → call → print.
"""

from __future__ import annotations

import click

from ..terminal import terminal_safe
from .common import plural

LONG_RUN_WORDS = "4 Mi characters"  # encode's LONG_RUN_CHARS, in words (render imports no library module)


def encode_summary(summary: dict, out_dir) -> str:
    """The line encode prints when it is done: what was encoded, and the notes worth a look."""
    extra = ""
    if summary["skipped_empty"]:  # read but not written: "encoded" counts what is in train and val
        extra += f" ({summary['skipped_empty']} more read: empty, skipped)"
    dropped = summary.get("duplicates_dropped")  # encode --dedup exact
    if dropped is not None:
        extra += f", {plural(dropped, 'exact duplicate')} dropped"
    if summary["replaced_characters"]:
        extra += f", {summary['replaced_characters']} invalid UTF-8 sequences replaced"
    resumed = summary.get("resumed")
    if resumed and resumed.get("discarded"):
        extra += f", nothing resumed ({resumed['discarded']})"
    elif resumed and "parts" in resumed:  # a run in parts reuses whole parts
        extra += f", resumed: {resumed['parts']} of {resumed['of']} parts reused"
    elif resumed:
        extra += f", resumed after {resumed['inputs']} input(s) ({resumed['tokens']:,} tokens reused)"
    if summary["forced_cuts"]:
        extra += (f", {plural(summary['forced_cuts'], 'forced cut')} in text with no safe cut for"
                  f" {LONG_RUN_WORDS} (the ids there may differ from encoding it whole)")
    if summary.get("boms_stripped"):
        extra += f", {plural(summary['boms_stripped'], 'byte-order mark')} dropped"
    if summary.get("skipped_inputs") or summary.get("skipped_records"):
        extra += f", bad input skipped: {_skipped(summary)}"
    if summary.get("whole_documents"):
        extra += (f", {plural(summary['whole_documents'], 'long document')} encoded whole"
                  " (the tokenizer has no safe-cut rule: one worker each)")
    return (
        f"encoded {plural(summary['documents'] - summary['skipped_empty'] - (dropped or 0), 'document')}{extra}:"
        f" train {plural(summary['train']['tokens'], 'token')} ({plural(summary['train']['documents'], 'doc')}),"
        f" val {plural(summary['val']['tokens'], 'token')} ({plural(summary['val']['documents'], 'doc')}),"
        f" {summary['mb_per_s']} MB/s → {out_dir}"
        + (f" (layouts: {', '.join(summary['layouts'])})" if summary.get("layouts", ["nanogpt"]) != ["nanogpt"] else "")
    )


BAD_SHOWN = 20  # bad inputs listed on stderr (encode.decoding.BAD_SHOWN; render imports no library module)


def _skipped(summary: dict) -> str:
    parts = []
    if summary.get("skipped_inputs"):
        parts.append(plural(summary["skipped_inputs"], "file"))
    if summary.get("skipped_records"):
        parts.append(plural(summary["skipped_records"], "record"))  # JSONL lines, Parquet or Arrow rows
    return " and ".join(parts)


def skipped_warning(summary: dict, counted_in: str = "meta.json's stats") -> list[str]:
    """``warning: bad input skipped: …`` and a line for each skipped input (the first BAD_SHOWN): empty when none was."""
    if not (summary.get("skipped_inputs") or summary.get("skipped_records")):
        return []
    bad = summary.get("bad_inputs", [])
    shown = bad[:BAD_SHOWN]
    total = summary.get("skipped_inputs", 0) + summary.get("skipped_records", 0)
    listed = f"the first {len(shown)}" if total > len(shown) else "each"
    head = (f"warning: bad input skipped (--on-bad-input skip): {_skipped(summary)}; {listed} below,"
            f" all counted in {counted_in}")
    return [head] + [f"skipped: {b['error']}" for b in shown]


def not_read_warning(not_read: dict) -> str:
    """``warning: 3 file(s) not read (2 .rst, 1 hidden …)``: what the folders held and encode (or chunk) left."""
    from ..encode.inputs import FOLDER_SUFFIXES

    kinds = sorted(not_read.items(), key=lambda kv: (-kv[1], kv[0]))
    shown = ", ".join(f"{n} {kind}" for kind, n in kinds[:4])
    return terminal_safe(f"warning: {sum(not_read.values())} file(s) not read ({shown}{', …' if len(kinds) > 4 else ''}):"
            f" a folder gives only {'/'.join(FOLDER_SUFFIXES)} files (and .gz/.zst forms, and .json.gz/.json.zst), not hidden ones, and does"
            " not follow symlinked folders; name others to read them")


def wide_ids_warning(hint: dict) -> str:
    """``warning:`` for a bare .bin read as uint16 whose ids look like uint32 ones (windows)."""
    return terminal_safe(f"warning: {hint['file']}: read as uint16 (no meta.json), but {hint['zero_high_halves']:.0%} of its odd"
                         " uint16 halves are near zero, as uint32 ids read as uint16 are: if it holds uint32 ids,"
                         " plan it again with --dtype uint32")


def plan_summary(s: dict, boundaries: str | None = None) -> list[str]:
    """What windows prints for one plan written (``boundaries``: the option given, None when left
    to the default): its figures, and a note when it trains on little."""
    from ..verify import percent

    lines = []
    where = ", ".join(s["files"]) or "stdout"
    if "fill" in s:
        return [packing_line(s) + f" → {where}"]
    lines.append(f"{plural(s['windows'], 'window')} of span {s['span']} (T {s['T']}, {_how(s)}) over"
                 f" {plural(s['tokens'], 'token')}: coverage {percent(s['coverage'])}, {uncovered(s)} → {where}")
    if not s["windows"]:  # written (an empty val split may be meant), but nothing trains on it
        lines.append(f"note: no window fits in {plural(s['tokens'], 'token')} (span {s['span']}): the plan is empty;"
                 " verify fails its min_length and the Loader refuses it")
    elif s["tokens"] < s["span"]:  # by the contract (--short keep), but rarely meant
        lines.append(f"note: {plural(s['tokens'], 'token')} < span {s['span']}: no full window, only"
                     f" {'a short one' if s['windows'] == 1 else 'short ones'}"
                 " (get_batch draws full windows only; --short drop skips short ones)")
    elif s.get("pack") != "greedy" and _many_short(s):  # records, short documents: data the Loader's default leaves out
        edge = {None: "the end of a document or of the file", "none": "the end of the file",
                "doc": "the end of a document"}.get(boundaries, f"a {boundaries} edge")
        are = "is" if s["short_windows"] == 1 else "are"
        lines.append(f"note: {s['short_windows']:,} of the {plural(s['windows'], 'window')} {are} shorter than the span (ended"
                     f" by {edge}), holding {plural(s['short_tokens'], 'token')} ({s['short_tokens'] / max(s['tokens'], 1):.1%}"
                     " of the file, a token counted once per window): winsample.Loader leaves short windows out"
                     " unless short='pad', and get_batch draws full windows only; pad them (short='pad'), or pack them"
                     " into full windows (--pack best-fit)")
    return lines


def _how(s: dict) -> str:
    """How the windows were laid: the stride and overlap, and within documents (``--boundaries doc``,
    greedy packing) how many documents were long enough to be windowed at that stride at all."""
    stride = f"stride {s['stride']}, overlap {s['overlap']:.1%}"
    packed = "greedy packing, " if s.get("pack") == "greedy" else ""
    if "long_documents" not in s:
        return packed + stride
    if not s["long_documents"]:  # each document in one window: the stride never applied
        return f"{packed}no document longer than the span"
    return f"{packed}{plural(s['long_documents'], 'document')} longer than the span, windowed at {stride}"


def _many_short(s: dict) -> bool:
    """A quarter of the windows short, or short windows holding 1% of the tokens (a greedy
    packed plan's are served padded: the Loader's default for it)."""
    n = s.get("short_windows", 0)
    return n > 0 and (n * 4 >= s["windows"] or s.get("short_tokens", 0) * 100 >= s["tokens"])


def mixture_lines(r: dict) -> list[str]:
    """What mix prints: the epoch, and each source's share, windows and repeats."""
    lines = [f"{plural(r['windows'], 'window')} an epoch from {plural(len(r['sources']), 'source')} → {r['file']}"]
    for s in r["sources"]:
        lo, hi = s["repeats"]
        rep = "each window once at most" if hi <= 1 else f"each window {lo}–{hi} times" if lo != hi else f"each window {hi} times"
        lines.append(f"  {s['name']}: weight {s['weight']}, {s['count']:,} of its {s['windows']:,} windows ({s['share']:.2%};"
                     f" {rep}), ~{s['tokens']:,} tokens")
    return lines


def chunk_line(r: dict) -> str:
    """What chunk prints: chunks, documents, the largest chunk, where they went."""
    split = f"; {plural(r['split_char'], 'chunk')} widened to whole characters" if r["split_char"] else ""
    blank = f", {r['blank_documents']:,} of them blank (no chunk)" if r.get("blank_documents") else ""
    return (f"{plural(r['chunks'], 'chunk')} of {plural(r['documents'], 'document')}{blank} ({r['characters']:,} characters),"
            f" at most {r['max_tokens']:,} of {r['T']:,} tokens ({r['tokenizer']}), overlap {r['overlap']},"
            f" boundaries {r['boundaries']}{split} → {r['file']}")


def packing_line(s: dict) -> str:
    """One line for a best-fit plan (a windows summary or a sidecar's stats with T and span)."""
    cut = {"split": s.get("documents_split"), "truncated": s.get("documents_truncated"), "dropped": s.get("documents_dropped")}
    long = ", ".join(f"{n:,} {what}" for what, n in cut.items() if n) or "none"
    return (f"{plural(s['windows'], 'window')} of span {s['span']} (T {s['T']}, best-fit) hold {plural(s['segments'], 'segment')}:"
            f" fill {s['fill']:.2%}, {plural(s['padding_tokens'], 'padding token')}; documents longer than the span: {long};"
            f" {plural(s['uncovered_tokens'], 'token')} of {s['tokens']:,} not planned")


def uncovered(s: dict) -> str:
    """Where the tokens no window covers are: head (an offset), tail, and the documents no window
    reaches (``--short drop``: shorter than the span), each named when there are any."""
    parts = [plural(s["uncovered_tail"], "tail token")]
    if s.get("uncovered_head"):
        parts.insert(0, plural(s["uncovered_head"], "head token"))
    said = " and ".join(parts) + " uncovered"
    if s.get("uncovered_dropped"):
        said += f", and {plural(s['uncovered_dropped'], 'token')} in documents no window reaches"
    return said


_MARK = {"pass": "✓", "fail": "✗", "warn": "!", "skip": "·"}
_COLOUR = {"pass": "green", "fail": "red", "warn": "yellow", "skip": None}
# The part of a decoded window that the previous window already showed is wrapped in ⟦…⟧
# (visible in logs and pipes too) and, on a colour terminal, also dimmed.
OVERLAP_OPEN, OVERLAP_CLOSE = "⟦", "⟧"
# A best-fit window is its segments side by side: each segment's text follows a ⟪doc D [s, e)⟫ mark.
SEGMENT_OPEN, SEGMENT_CLOSE = "⟪", "⟫"


def _packed_window(w, paint) -> list[str]:
    """A decoded best-fit window: a head line, then each segment's text after its ⟪doc D [s, e)⟫ mark."""
    from ..provenance import source_text

    safe = terminal_safe
    head = f"── {_position(w)}{safe(w.file)} window {w.window}: {w.length} tokens in {plural(len(w.segments), 'segment')}"
    body = []
    for g in w.segments:
        where = f" · {safe(source_text(g['source']), keep='')}" if g.get("source") is not None else ""
        mark = f"{SEGMENT_OPEN}doc {g['doc']} [{g['start']}, {g['start'] + g['length']}){where}{SEGMENT_CLOSE}"
        body.append(paint(mark, dim=True) + safe(g["text"]))
    out = [paint(head, bold=True), "".join(body)]
    if w.shown is not None:
        out.append(paint(f"… ({w.length - w.shown:,} more tokens not shown)", dim=True))
    return out


def _position(w) -> str:
    """A mixture's window: the position of epoch 0 it is served at, before its source's file."""
    return "" if w.position is None else f"position {w.position}: "


def _worst_documents(figures: dict) -> list[str]:
    """split_leakage's failing documents, one indented line each, and what to do."""
    worst = figures.get("worst_documents")
    if not worst:
        return []
    from ..provenance import source_text
    from ..verify import percent

    def where(w: dict, split: str) -> str:
        src = f" ({terminal_safe(source_text(w['source']), keep='')})" if w.get("source") else ""
        return f"{split} document {w['doc']}{src}"

    lines = []
    for w in worst:
        copy = f", an exact copy of {where(w['copy_of'], 'train')}" if w.get("copy_of") else ""
        lines.append(f"    {where(w, 'val')}: {percent(w['share'])} of its {plural(w['shingles'], 'shingle')}"
                     f" also in train{copy}")
    lines.append(f"    → {figures['suggestion']}")
    return lines


def verify_text(report, strict: bool, quiet: bool, colour: bool) -> str:
    """The human report: one line per check, then the decoded windows, then a verdict.

    With -q only the checks that did not pass (like ``ruff -q``): nothing at all when all is
    well, and the exit code says the rest."""
    paint = (lambda t, **k: click.style(t, **k)) if colour else (lambda t, **k: t)
    safe = terminal_safe  # file names, details and corpus text come from the data: never raw to a terminal
    width = max((len(safe(c.file)) for c in report.checks), default=0)
    lines = []
    for c in report.checks:
        if quiet and c.status in ("pass", "skip"):
            continue
        mark = paint(_MARK[c.status], fg=_COLOUR[c.status], bold=True) if _COLOUR[c.status] else _MARK[c.status]
        lines.append(f"{mark} {c.name:<15} {safe(c.file):<{width}}  {safe(c.detail, keep='')}")
        lines += _worst_documents(c.figures)
    if report.windows and not quiet:
        lines.append("")
        for w in report.windows:
            if w.segments is not None:
                lines += _packed_window(w, paint)
                continue
            at = "" if w.position is None else f" window {w.window}"
            head = f"── {_position(w)}{safe(w.file)}{at} [{w.start}, {w.start + w.length}) {w.length} tokens"
            # the shared part is marked where it is the text's own beginning (a character cut by the
            # window edge decodes otherwise): else the text is shown unmarked, never twice
            marked = bool(w.overlap) and w.text.startswith(w.overlap_text)
            if w.overlap:
                head += f", first {w.overlap} shared with the previous window" + (f" {OVERLAP_OPEN}…{OVERLAP_CLOSE}" if marked else "")
            if w.source is not None:
                from ..provenance import source_text

                head += f" · from {safe(source_text(w.source), keep='')}"
            lines.append(paint(head, bold=True))
            if marked:
                rest = w.text[len(w.overlap_text):]
                lines.append(paint(OVERLAP_OPEN + safe(w.overlap_text) + OVERLAP_CLOSE, dim=True) + safe(rest))
            else:
                lines.append(safe(w.text))
            if w.shown is not None:
                lines.append(paint(f"… ({w.length - w.shown:,} more tokens not shown)", dim=True))
    n = {s: sum(c.status == s for c in report.checks) for s in _MARK}
    counts = f"{n['pass']} passed, {n['fail']} failed, {n['warn']} warnings, {n['skip']} skipped"
    if report.ok(strict):
        verdict = paint("verify: ok", fg="green", bold=True) + f" ({counts})"
    else:
        why = " (--strict: warnings fail)" if strict and not n["fail"] else ""
        verdict = paint("verify: FAILED", fg="red", bold=True) + f" ({counts}){why}"
    if quiet:
        return "\n".join(lines)
    lines += ["", verdict]
    return "\n".join(lines)
