"""The file stage: checks of each token file on its own (dtype_divisible, min_length,
vocab_range), from the figures of its one scan. ``check_min_length`` and ``check_vocab`` also
serve the llm.c shard streams (``llmc.py``)."""

from __future__ import annotations

import numpy as np

from .registry import check
from .report import Report, Status
from .scan import FileScan, Target

WIDE_SAMPLE = 1 << 20  # tokens looked at to tell uint32 ids read as uint16, in WIDE_BLOCKS blocks spread over the file
WIDE_BLOCKS = 16
WIDE_MIN = 64  # fewer tokens than this: too few to tell
HIGH_HALF = 16  # a uint32 id below 2^20 (every vocabulary winsample knows) has a high half below this


def wider_ids_share(tokens: np.ndarray) -> float | None:
    """For a file read as uint16 without meta.json: the share of its odd uint16 halves below 16
    when its even halves mostly are not (uint32 ids read as uint16 look like ``low, high, low,
    high``, every high half 0 for an id under 65,536 and 1 or 2 for a Qwen or Llama-3 id above it).
    None when it does not look so. Looks at up to ``WIDE_SAMPLE`` tokens in ``WIDE_BLOCKS`` blocks
    spread over the whole file: text whose first megabyte is English and the rest CJK still shows."""
    n = len(tokens)
    if n < WIDE_MIN or np.dtype(tokens.dtype).itemsize != 2:
        return None
    if n <= WIDE_SAMPLE:
        t = np.asarray(tokens)
    else:
        size = WIDE_SAMPLE // WIDE_BLOCKS
        starts = np.linspace(0, n - size, WIDE_BLOCKS).astype(np.int64) // 2 * 2  # even: a uint32's low half first
        t = np.concatenate([np.asarray(tokens[s : s + size]) for s in starts])
    odd, even = float(np.mean(t[1::2] < HIGH_HALF)), float(np.mean(t[0::2] < HIGH_HALF))
    return odd if odd >= 0.99 and even <= 0.5 else None


@check("dtype_divisible", help="the size is whole tokens of the dtype (and no uint32 ids read as uint16)",
       reads="token files", stage="file")
def dtype_divisible(report: Report, ctx, target: Target, scan: FileScan) -> None:
    check_dtype(report, scan, guessed=ctx.meta is None)


@check("min_length", help="N ≥ T + 1: at least one (x, y) pair of length T fits", reads="token files, plans' sidecars",
       stage="file")
def min_length(report: Report, ctx, target: Target, scan: FileScan) -> None:
    """N ≥ T + 1 of a token file (each plan's own min_length line: ``plan.py``)."""
    t, s = target, scan
    if s.n == 0 and not s.stray and t.entry is not None and t.entry.tokens == 0 and ctx.meta.fraction_of(t.split) == 0:
        report.add(MIN_LENGTH, s.label, Status.SKIP, f"empty by design: meta.json's split fraction for {t.split} is 0", tokens=0)
    else:
        check_min_length(report, s, ctx.opts.T)


@check("vocab_range", help="every id is below the tokenizer's n_vocab", reads="token files, tokenizer", stage="file")
def vocab_range(report: Report, ctx, target: Target, scan: FileScan) -> None:
    check_vocab(report, scan, ctx.n_vocab)


DTYPE_DIVISIBLE, MIN_LENGTH, VOCAB_RANGE = dtype_divisible.spec, min_length.spec, vocab_range.spec


def check_dtype(report: Report, s: FileScan, guessed: bool = False) -> None:
    item = np.dtype(s.dtype).itemsize
    share = wider_ids_share(s.tokens()) if guessed and not s.stray and s.n else None
    if share is not None:
        report.add(
            DTYPE_DIVISIBLE, s.label, Status.FAIL,
            f"read as {s.dtype} (no meta.json), but {share:.0%} of its odd uint16 halves are below {HIGH_HALF}: these look"
            " like uint32 ids read as uint16; pass --meta with dtype uint32 (or re-encode, which writes meta.json)",
            bytes=s.size, itemsize=item, stray_bytes=0, tokens=s.n, zero_high_halves=share,
        )
        return
    if s.stray:
        report.add(
            DTYPE_DIVISIBLE, s.label, Status.FAIL,
            f"{s.size} bytes is not a multiple of {item} ({s.dtype}): {s.stray} stray byte(s) at the end;"
            " the file is truncated or was written with another dtype",
            bytes=s.size, itemsize=item, stray_bytes=s.stray,
        )
    else:
        report.add(
            DTYPE_DIVISIBLE, s.label, Status.PASS, f"{s.size} bytes = {s.n} tokens × {item} ({s.dtype})",
            bytes=s.size, itemsize=item, stray_bytes=0, tokens=s.n,
        )


def check_min_length(report: Report, s: FileScan, T: int | None) -> None:
    if T is not None:
        status = Status.PASS if s.n >= T + 1 else Status.FAIL
        rel = "≥" if status == Status.PASS else "<"
        report.add(
            MIN_LENGTH, s.label, status,
            f"N = {s.n} {rel} T + 1 = {T + 1}" + ("" if status == Status.PASS else ": not one (x, y) pair of length T fits"),
            tokens=s.n, required=T + 1,
        )
    elif s.n == 0 and not s.stray:
        report.add(MIN_LENGTH, s.label, Status.FAIL, "empty file: 0 tokens, not one (x, y) pair fits", tokens=0, required=2)
    else:
        report.add(MIN_LENGTH, s.label, Status.SKIP, f"N = {s.n}; pass -T (or --plan) to check N ≥ T + 1", tokens=s.n)


def check_vocab(report: Report, s: FileScan, n_vocab: int) -> None:
    if s.stray:
        report.add(VOCAB_RANGE, s.label, Status.SKIP, "not readable as whole tokens (see dtype_divisible)")
    elif s.n == 0:
        report.add(VOCAB_RANGE, s.label, Status.PASS, "empty file: no ids", n_vocab=n_vocab, max_id=None, out_of_range=0)
    elif s.bad_count:
        report.add(
            VOCAB_RANGE, s.label, Status.FAIL,
            f"{s.bad_count} id(s) ≥ n_vocab {n_vocab}, max id {s.max_id}; first: id {s.first_bad_id} at token {s.first_bad}",
            n_vocab=n_vocab, max_id=s.max_id, out_of_range=s.bad_count, first_position=s.first_bad,
        )
    else:
        report.add(
            VOCAB_RANGE, s.label, Status.PASS, f"max id {s.max_id} < n_vocab {n_vocab}",
            n_vocab=n_vocab, max_id=s.max_id, out_of_range=0,
        )
