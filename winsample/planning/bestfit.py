"""Best-fit decreasing packing: whole documents placed into windows of ``span`` tokens.

The rule (``best_fit``), which a brute force in the tests restates line by line:

- items are placed in order of decreasing length, ties by item number (ascending);
- an item goes into the open window with the *least* room left that still holds it, ties to the
  lowest window number; when no window holds it, a new window opens (numbered in opening order).

Documents longer than the span are first cut into pieces (``pieces``): ``split`` (span-sized
pieces, then the remainder: every token planned once), ``truncate`` (the first span tokens) or
``drop`` (left out). A packed plan's rows are segments (``formats.PACKED_DTYPE``): one per piece,
sorted by window, and within a window by position in the .bin.

Implementation: items of one length ℓ are placed together. The window with the least room r ≥ ℓ
takes ⌊r / ℓ⌋ items in a row (after each it still has the least room), so one group is a cumsum
over the open windows in (room, number) order. Those windows sit on a stack, least room on top;
windows whose room fell below ℓ wait in buckets by room and join the top of the stack when the
length reaches their room (lengths only decrease). O(items + span) numpy work, no per-item loop.
"""

from __future__ import annotations

import bisect

import numpy as np

from ..errors import ConfigError
from .options import PACKED_DTYPE

LONG = ("split", "truncate", "drop")
_SHIFT = 32  # a window's stack key: room << 32 | window number (room < 2**31, windows < 2**32)


def pieces(doc_starts, doc_ends, span: int, long: str = "split") -> tuple[np.ndarray, np.ndarray, np.ndarray, dict]:
    """(starts, lengths, docs, counts) of the pieces to pack, in document order.

    Empty documents give none. ``counts``: ``documents_split`` / ``_truncated`` / ``_dropped``
    (documents longer than ``span``, by what ``long`` did to them), ``tokens_truncated`` (cut off
    their ends) and ``tokens_dropped`` (of dropped documents).
    """
    if long not in LONG:
        raise ConfigError(f"--long must be one of {', '.join(LONG)}, got {long!r}")
    ds = np.asarray(doc_starts, np.int64)
    de = np.asarray(doc_ends, np.int64)
    L = de - ds
    big = L > span
    counts = {"documents_split": 0, "documents_truncated": 0, "documents_dropped": 0, "tokens_truncated": 0,
              "tokens_dropped": 0}
    if long == "split":
        n = np.where(L > 0, -(-L // span), 0)  # ceil(L / span) pieces, the last one the remainder
        counts["documents_split"] = int(big.sum())
    else:
        n = (L > 0).astype(np.int64)
        if long == "drop":
            n[big] = 0
        counts[f"documents_{'truncated' if long == 'truncate' else 'dropped'}"] = int(big.sum())
        counts[f"tokens_{'truncated' if long == 'truncate' else 'dropped'}"] = int((L[big] - (span if long == "truncate" else 0)).sum())
    doc = np.repeat(np.arange(len(ds), dtype=np.int64), n)
    k = np.arange(len(doc), dtype=np.int64) - np.repeat(np.cumsum(n) - n, n)  # piece number in its document
    starts = ds[doc] + k * span
    lengths = np.minimum(de[doc] - starts, span)
    return starts, lengths, doc, counts


def best_fit(lengths, span: int) -> np.ndarray:
    """int64 window number of every item (``lengths``, each in [1, span]) under the module's rule."""
    lengths = np.asarray(lengths, np.int64)
    out = np.empty(len(lengths), np.int64)
    if not len(lengths):
        return out
    if int(lengths.min()) < 1 or int(lengths.max()) > span:
        raise ValueError("best_fit: every length must be in [1, span]")
    order = np.argsort(-lengths, kind="stable")  # decreasing length, ties by item number
    sl = lengths[order]
    cuts = np.flatnonzero(np.diff(sl)) + 1
    firsts = np.concatenate([[0], cuts])
    ends = np.concatenate([cuts, [len(sl)]])
    stack = np.empty(len(lengths) + 1, np.int64)  # keys, decreasing from bottom to top
    top = 0
    waiting: dict[int, list[np.ndarray]] = {}  # room -> window numbers whose room is below the length now
    n_windows = 0
    prev = span + 1
    smallest = int(sl[-1])
    mask = (1 << _SHIFT) - 1
    for a, b in zip(firsts.tolist(), ends.tolist()):
        ell, m = int(sl[a]), b - a
        # windows whose room reached [ell, prev) join the stack: their rooms are below every room
        # on it, so they go on top, least room (then lowest number) last
        joining = []
        for room in range(prev - 1, ell - 1, -1):
            got = waiting.pop(room, None)
            if got:
                ids = np.sort(np.concatenate(got))[::-1]
                joining.append((room << _SHIFT) | ids)
        if joining:
            j = np.concatenate(joining)
            stack[top : top + len(j)] = j
            top += len(j)
        prev = ell
        k = min(top, m)  # each window takes at least one item: at most m of them are used
        keys = stack[top - k : top][::-1]  # least room first
        rooms = keys >> _SHIFT
        cq = np.cumsum(rooms // ell)
        if k and cq[-1] >= m:
            used = int(np.searchsorted(cq, m))  # windows 0..used take items; the last may take fewer
            take = np.diff(np.concatenate([[0], cq[: used + 1]]))
            take[-1] = m - (cq[used - 1] if used else 0)
            ids = keys[: used + 1] & mask
            new_ids = np.zeros(0, np.int64)
            new_take = new_ids
        else:
            take = np.diff(np.concatenate([[0], cq]))
            ids = keys & mask
            rest = m - (int(cq[-1]) if k else 0)
            per = span // ell
            nb = -(-rest // per)
            new_ids = np.arange(n_windows, n_windows + nb, dtype=np.int64)
            new_take = np.full(nb, per, np.int64)
            new_take[-1] = rest - (nb - 1) * per
            n_windows += nb
        top -= len(ids)
        out[order[a:b]] = np.repeat(np.concatenate([ids, new_ids]), np.concatenate([take, new_take]))
        left_ids = np.concatenate([ids, new_ids])
        left = np.concatenate([rooms[: len(ids)], np.full(len(new_ids), span, np.int64)]) - \
            np.concatenate([take, new_take]) * ell
        for wid, room in zip(left_ids[left >= ell].tolist(), left[left >= ell].tolist()):
            # only the group's last window can keep room >= ell: it goes back in key order
            _push(stack, top, (room << _SHIFT) | wid)
            top += 1
        low = (left < ell) & (left >= smallest)  # rooms no later (shorter) item can use are dropped
        for room in np.unique(left[low]).tolist():
            waiting.setdefault(room, []).append(left_ids[low & (left == room)])
    return out


def _push(stack: np.ndarray, top: int, key: int) -> None:
    """Insert ``key`` into ``stack[:top]`` (decreasing) keeping it decreasing."""
    view = stack[top - 1 :: -1] if top else stack[:0]  # increasing
    i = top - bisect.bisect_right(view, key)  # entries above position i are smaller than key
    stack[i + 1 : top + 1] = stack[i:top].copy()
    stack[i] = key


def plan_best_fit(doc_starts, doc_ends, span: int, long: str = "split", targets: bool = True) -> tuple[np.ndarray, dict]:
    """(segment rows, counts) of a best-fit plan over documents ``[doc_starts[i], doc_ends[i])``.

    Rows are ``PACKED_DTYPE`` sorted by (window, start). With ``targets`` a window of one token
    holds no (x, y) pair and is left out (counted in ``tokens_dropped``). ``counts`` as
    ``pieces``' plus ``padding_tokens`` (span × windows − planned tokens).
    """
    starts, lengths, docs, counts = pieces(doc_starts, doc_ends, span, long)
    win = best_fit(lengths, span)
    order = np.lexsort((starts, win))
    rows = np.empty(len(starts), PACKED_DTYPE)
    rows["window"], rows["start"], rows["length"], rows["doc"] = win[order], starts[order], lengths[order], docs[order]
    if targets and len(rows):
        total = np.bincount(rows["window"], weights=rows["length"]).astype(np.int64)
        lone = total[rows["window"]] < 2
        if lone.any():
            counts["tokens_dropped"] += int(lone.sum())
            rows = rows[~lone]
            _, rows["window"] = np.unique(rows["window"], return_inverse=True)
    n_windows = int(rows["window"][-1]) + 1 if len(rows) else 0
    counts["padding_tokens"] = n_windows * span - int(rows["length"].sum(dtype=np.int64))
    return rows, counts
