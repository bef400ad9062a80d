"""Plan rows and their counts: ``fresh`` (tokens earlier windows already cover), coverage stats,
shuffling and round-robin shards. Rows are ``formats.PLAN_DTYPE``; positions are token indices.
"""

from __future__ import annotations

import numpy as np

from .options import PLAN_DTYPE


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


def packed_stats(rows: np.ndarray, n: int, span: int, counts: dict) -> dict:
    """The sidecar's stats of a best-fit plan (segment rows, ``bestfit.plan_best_fit``'s counts).

    Segments never overlap, so covered tokens are their lengths' sum; ``fill`` = covered /
    (windows × span), ``padding_tokens`` = windows × span − covered.
    """
    windows = int(rows["window"][-1]) + 1 if len(rows) else 0
    covered = int(rows["length"].sum(dtype=np.int64))
    return {
        "windows": windows,
        "coverage": (covered / n) if n else 1.0,
        "covered_tokens": covered,
        "uncovered_tokens": n - covered,
        "uncovered_tail": counts["tokens_truncated"],
        "uncovered_head": 0,
        "uncovered_dropped": counts["tokens_dropped"],
        "segments": int(len(rows)),
        "fill": covered / (windows * span) if windows else 0.0,
        "padding_tokens": windows * span - covered,
        "documents_split": counts["documents_split"],
        "documents_truncated": counts["documents_truncated"],
        "documents_dropped": counts["documents_dropped"],
    }


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

