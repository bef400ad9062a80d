"""The ``split_leakage`` check: how many of val's shingles (``shingles.py``, kept by the scans)
are also train's."""

from __future__ import annotations

import numpy as np

from . import leakers
from .registry import check
from .report import Report, Status
from .scan import FileScan
from .shingles import SHINGLE_K


@check("split_leakage", help="share of val's 32-token shingles also in train ≤ --max-leakage",
       reads="train and val token files", stage="dataset")
def split_leakage(report: Report, ctx) -> None:
    """A data folder's train against its val (``ctx.shingle_bits`` is set when both are there)."""
    if ctx.shingle_bits is None:
        return
    by_split = {t.split: t for t in ctx.targets}
    check_leakage(report, ctx.scans[by_split["train"].path], ctx.scans[by_split["val"].path], ctx.shingle_bits,
                  ctx.opts.max_leakage, targets=(by_split["train"], by_split["val"]))


SPLIT_LEAKAGE = split_leakage.spec


def check_leakage(report: Report, train: FileScan, val: FileScan, bits: int, max_leakage: float, targets=None) -> None:
    """Share of ``val``'s shingles found in ``train``'s. On a failure with ``targets`` (the train
    and val ``scan.Target``): the worst val documents (``leakers.py``: provenance, their share,
    an exact copy in train) as the ``worst_documents`` figure, and a ``suggestion``."""
    label = f"{val.label} vs {train.label}"
    rate = 2.0**-bits
    if train.checksum == val.checksum:
        report.add(
            SPLIT_LEAKAGE, label, Status.FAIL,
            f"{val.label} is byte-identical to {train.label} (checksum {val.checksum}): val measures nothing",
            share=1.0, sample_rate=rate,
        )
        return
    if val.n < SHINGLE_K:
        report.add(SPLIT_LEAKAGE, label, Status.SKIP, f"{val.label} has {val.n} < {SHINGLE_K} tokens: no {SHINGLE_K}-token shingle")
        return
    unread = [s.label for s in (train, val) if s.shingles is None]
    if unread:  # a size that is no whole number of tokens: its line above fails; its ids were not read
        report.add(SPLIT_LEAKAGE, label, Status.SKIP, f"{' and '.join(unread)} not read as tokens (its size is no whole"
                   f" number of {train.dtype} ids: see its line above): no shingles to compare")
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
    more = {}
    if status == Status.FAIL and targets is not None:  # which documents, and what to do: only when it fails
        worst = leakers.worst_documents(*targets, train.tokens(), val.tokens(), train_set, bits)
        if worst:
            more = {"worst_documents": worst, "suggestion": leakers.suggestion(worst)}
    report.add(
        SPLIT_LEAKAGE, label, status,
        f"{share:.2%} of {val.label}'s {SHINGLE_K}-token shingles are also in {train.label} ({rel} {max_leakage:.2%}; {how},"
        f" {len(val.shingles)} val / {n_train} train hashes)",
        share=share, max_leakage=max_leakage, k=SHINGLE_K, sample_rate=rate,
        val_shingles=len(val.shingles), train_shingles=n_train, **more,
    )
