"""Which val documents make ``split_leakage`` fail: each one's share of its own shingles found in
train, the worst named with their provenance, and whether one is an exact copy of a train document.

Run only when the check fails. It reads val once more (its shingles again, with positions:
``shingles.shingles_at``) and keeps two counts per val document (16 bytes each); a shingle
counts for the document it lies wholly inside (one that runs on into the next document is left
out, so an exact copy scores 100%). Exact copies are looked for among train documents of the same
length whose first and last tokens agree, at most ``MAX_COPY_TOKENS`` tokens hashed in all.
"""

from __future__ import annotations

import numpy as np
import xxhash

from .. import provenance
from ..errors import WinsampleError
from .shingles import SHINGLE_K, shingles_at

WORST = 5  # val documents named
MAX_COPY_TOKENS = 64 << 20  # train tokens hashed, at most, looking for exact copies


def worst_documents(train_t, val_t, train_tokens, val_tokens, train_set: np.ndarray, bits: int) -> list[dict]:
    """The val documents with the highest share of their shingles in ``train_set`` (sorted
    hashes), worst first: ``{"doc", "shingles", "in_train", "share", "source", "copy_of"}``;
    ``copy_of`` ``{"doc", "source"}`` names an identical train document. Empty when val has no
    document index."""
    starts = _starts(val_t)
    if starts is None or not len(starts) or not len(train_set):
        return []
    n = len(val_tokens)
    ends = np.append(starts[1:], n)
    total = np.zeros(len(starts), np.int64)
    found = np.zeros(len(starts), np.int64)
    for h, pos in shingles_at(val_tokens, SHINGLE_K, bits):
        doc = np.searchsorted(starts, pos, "right") - 1
        inside = pos + SHINGLE_K <= ends[doc]
        doc, h = doc[inside], h[inside]
        at = np.searchsorted(train_set, h).clip(max=len(train_set) - 1)
        total += np.bincount(doc, minlength=len(starts))
        found += np.bincount(doc[train_set[at] == h], minlength=len(starts))
    hit = np.flatnonzero(found)
    if not len(hit):
        return []
    share = found[hit] / total[hit]
    order = np.lexsort((hit, -found[hit], -share))[:WORST]  # highest share, then most shingles, then first
    val_trace, train_trace = _tracer(val_t), _tracer(train_t)
    copies = _exact_copies(_starts(train_t), train_tokens, val_tokens, starts, ends,
                           [int(hit[i]) for i in order if share[i] == 1.0])
    out = []
    for i in order:
        d = int(hit[i])
        c = copies.get(d)
        out.append({"doc": d, "shingles": int(total[d]), "in_train": int(found[d]), "share": float(share[i]),
                    "source": _source(val_trace, d),
                    "copy_of": None if c is None else {"doc": c, "source": _source(train_trace, c)}})
    return out


def suggestion(worst: list[dict]) -> str:
    """What to do about them, in one line."""
    if any(w["copy_of"] is not None for w in worst):
        return ("val holds exact copies of train documents: re-encode with --dedup exact (the first copy, in input order,"
                " stays; the later ones are dropped)")
    return ("no exact copy among them: near-duplicates (shared headers, boilerplate, vendored code) that --dedup exact"
            " cannot see; filter them before encoding, or accept them with --max-leakage")


def _starts(t) -> np.ndarray | None:
    try:
        starts = t.src.doc_starts() if t.src is not None else None
    except (WinsampleError, OSError):
        return None  # the meta check names a broken index
    return None if starts is None else np.asarray(starts, np.int64)


def _tracer(t):
    try:
        return provenance.tracer_for(t.src) if t.src is not None else None
    except (WinsampleError, OSError):
        return None  # the provenance check names what is wrong


def _source(tracer, d: int) -> dict | None:
    if tracer is None:
        return None
    try:
        return tracer.document(d)
    except (WinsampleError, OSError):
        return None


def _exact_copies(train_starts, train_tokens, val_tokens, starts, ends, docs: list[int]) -> dict[int, int]:
    """{val document: the first train document with the same ids} for ``docs``."""
    if train_starts is None or not len(train_starts) or not docs:
        return {}
    n = len(train_tokens)
    t_ends = np.append(train_starts[1:], n)
    t_len = t_ends - train_starts
    budget = MAX_COPY_TOKENS
    out = {}
    for d in docs:
        s, e = int(starts[d]), int(ends[d])
        ids = np.asarray(val_tokens[s:e])
        same = np.flatnonzero(t_len == e - s)
        if len(same):
            same = same[_gather(train_tokens, train_starts[same]) == ids[0]]
        if len(same):
            same = same[_gather(train_tokens, t_ends[same] - 1) == ids[-1]]
        want = xxhash.xxh3_128_intdigest(ids.tobytes())
        for c in same.tolist():
            if budget < e - s:
                return out
            budget -= e - s
            if xxhash.xxh3_128_intdigest(np.asarray(train_tokens[train_starts[c] : t_ends[c]]).tobytes()) == want:
                out[d] = c
                break
    return out


def _gather(tokens, at: np.ndarray) -> np.ndarray:
    """``tokens[at]``, for a memmap or a sharded stream (which takes slices only)."""
    if isinstance(tokens, np.ndarray):
        return np.asarray(tokens[at])
    return np.array([int(tokens[int(i) : int(i) + 1][0]) for i in at], dtype=np.int64)
