"""Checks of each token file on its own (dtype_divisible, min_length, vocab_range) and of a
train/val pair (split_leakage), from the figures of its one scan."""

from __future__ import annotations

import numpy as np

from .registry import DTYPE_DIVISIBLE, MIN_LENGTH, SPLIT_LEAKAGE, VOCAB_RANGE
from .report import Report, Status
from .scan import FileScan
from .shingles import SHINGLE_K

WIDE_SAMPLE = 1 << 20  # tokens looked at to tell uint32 ids read as uint16
WIDE_MIN = 64  # fewer tokens than this: too few to tell


def wider_ids_share(tokens: np.ndarray) -> float | None:
    """For a file read as uint16 without meta.json: the share of its odd uint16 halves that are
    0 when its even halves mostly are not (uint32 ids < 65536 read as uint16 look like
    ``id, 0, id, 0``: plausible ids, every second one GPT-2's "!"). None when it does not look so."""
    t = np.asarray(tokens[: min(len(tokens), WIDE_SAMPLE)])
    if len(t) < WIDE_MIN or t.dtype.itemsize != 2:
        return None
    odd, even = float(np.mean(t[1::2] == 0)), float(np.mean(t[0::2] == 0))
    return odd if odd >= 0.9 and even <= 0.5 else None


def check_dtype(report: Report, s: FileScan, guessed: bool = False) -> None:
    item = np.dtype(s.dtype).itemsize
    share = wider_ids_share(s.tokens()) if guessed and not s.stray and s.n else None
    if share is not None:
        report.add(
            DTYPE_DIVISIBLE, s.label, Status.FAIL,
            f"read as {s.dtype} (no meta.json), but {share:.0%} of its odd uint16 halves are 0: these look like uint32"
            " ids read as uint16; pass --meta with dtype uint32 (or re-encode, which writes meta.json)",
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


def check_leakage(report: Report, train: FileScan, val: FileScan, bits: int, max_leakage: float) -> None:
    label = f"{val.label} vs {train.label}"
    rate = 2.0**-bits
    if train.checksum == val.checksum:
        report.add(
            SPLIT_LEAKAGE, label, Status.FAIL,
            f"{val.label} is byte-identical to {train.label} (checksum {val.checksum}): val measures nothing",
            share=1.0, sample_rate=rate,
        )
        return
    if train.shingles is None or val.shingles is None or val.n < SHINGLE_K:
        report.add(SPLIT_LEAKAGE, label, Status.SKIP, f"{val.label} has {val.n} < {SHINGLE_K} tokens: no {SHINGLE_K}-token shingle")
        return
    if len(val.shingles) == 0:
        report.add(SPLIT_LEAKAGE, label, Status.WARN, f"no val shingle fell in the sample (rate 1/{2**bits}); share unknown", sample_rate=rate)
        return
    train_set = np.sort(train.shingles)  # sort + binary search: faster than np.unique/np.isin here
    if len(train_set):
        at = np.searchsorted(train_set, val.shingles).clip(max=len(train_set) - 1)
        found = int(np.count_nonzero(train_set[at] == val.shingles))
    else:
        found = 0
    share = found / len(val.shingles)
    n_train = int(np.count_nonzero(np.diff(train_set))) + 1 if len(train_set) else 0
    how = "exact" if bits == 0 else f"sampled 1/{2**bits}"
    status = Status.PASS if share <= max_leakage else Status.FAIL
    rel = "≤" if status == Status.PASS else ">"
    report.add(
        SPLIT_LEAKAGE, label, status,
        f"{share:.2%} of {val.label}'s {SHINGLE_K}-token shingles are also in {train.label} ({rel} {max_leakage:.2%}; {how},"
        f" {len(val.shingles)} val / {n_train} train hashes)",
        share=share, max_leakage=max_leakage, k=SHINGLE_K, sample_rate=rate,
        val_shingles=len(val.shingles), train_shingles=n_train,
    )
