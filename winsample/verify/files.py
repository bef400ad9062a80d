"""The file stage: checks of each token file on its own (dtype_divisible, min_length,
vocab_range), from the figures of its one scan. ``check_min_length`` and ``check_vocab`` also
serve the llm.c shard streams (``llmc.py``)."""

from __future__ import annotations

import numpy as np

from ..formats import HIGH_HALF, wider_ids_share
from .registry import check
from .report import Report, Status
from .scan import FileScan, Target


@check("dtype_divisible", help="the size is whole tokens of the dtype (and no uint32 ids read as uint16)",
       reads="token files", stage="file")
def dtype_divisible(report: Report, ctx, target: Target, scan: FileScan) -> None:
    check_dtype(report, scan, guessed=ctx.meta is None and ctx.opts.dtype is None)  # --dtype: declared, not guessed


@check("min_length", help="N ≥ T + 1: at least one (x, y) pair of length T fits", reads="token files, plans' sidecars",
       stage="file")
def min_length(report: Report, ctx, target: Target, scan: FileScan) -> None:
    """N ≥ T + 1 of a token file (each plan's own min_length line: ``plan.py``)."""
    t, s = target, scan
    if s.n == 0 and not s.stray and t.entry is not None and t.entry.tokens == 0 and ctx.meta.fraction_of(t.split) == 0:
        report.add(MIN_LENGTH, s.label, Status.SKIP, f"empty by design: meta.json's split fraction for {t.split} is 0", tokens=0)
    else:
        check_min_length(report, s, ctx.opts.T, planned=bool(ctx.opts.plans or ctx.prepared))


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
            " like uint32 ids read as uint16; pass --dtype uint32 (or --meta with dtype uint32, or re-encode, which writes meta.json)",
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


def check_min_length(report: Report, s: FileScan, T: int | None, planned: bool = False) -> None:
    """N ≥ T + 1; with no ``T``, only N ≥ 2 (``planned``: plans are checked, each on its own line)."""
    if T is not None:
        status = Status.PASS if s.n >= T + 1 else Status.FAIL
        rel = "≥" if status == Status.PASS else "<"
        report.add(
            MIN_LENGTH, s.label, status,
            f"N = {s.n} {rel} T + 1 = {T + 1}" + ("" if status == Status.PASS else ": not one (x, y) pair of length T fits"),
            tokens=s.n, required=T + 1,
        )
    elif s.n < 2 and not s.stray:  # any T needs T + 1 ≥ 2 tokens
        what = "empty file: 0 tokens" if s.n == 0 else "1 token"
        report.add(MIN_LENGTH, s.label, Status.FAIL, f"{what}, not one (x, y) pair fits", tokens=s.n, required=2)
    else:
        how = "no -T given; a plan's T is checked on the plan's own min_length line" if planned \
            else "pass -T (or --plan) to check N ≥ T + 1"
        report.add(MIN_LENGTH, s.label, Status.SKIP, f"N = {s.n}; {how}", tokens=s.n)


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
