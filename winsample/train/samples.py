"""Training samples: a batch's rows as x, y and what packed attention needs (numpy only).

A row is a window of a plan: the tokens ``w`` of one contiguous range of the .bin, or, in a
best-fit plan, of several segments side by side; ``L`` ≤ span tokens, padded after. Its
**segments** are the runs of ``w`` that belong to one document (a regular window is cut at every
document start inside it; a best-fit segment is one document or one piece of one). For the
T = span − 1 inputs of a targets plan, column j:

- ``x[j] = w[j]`` and ``y[j] = w[j + 1]`` for j < L − 1; after that x is ``pad_id``, y is
  ``ignore_index`` and ``attention_mask`` 0 (padding).
- ``segments[j]``: the segment of ``w[j]`` (0, 1, … in the row), −1 on padding.
- ``cross_doc_labels="mask"``: ``y[j]`` is ``ignore_index`` where ``w[j + 1]`` starts a segment
  (the label belongs to another document than its input); ``"keep"`` leaves it.
- ``position_ids``: ``"window"`` j; ``"doc"`` j minus the column of its segment's first token
  (restarting at 0 at every segment, Megatron's ``reset_position_ids``); ``"source"`` the token's
  offset inside its document (a window's first segment, or a later piece of a split document,
  starts past 0). Padding counts 0, 1, … from its first column under ``doc`` and ``source``.
- ``cu_seqlens``: int32 starts of every run of ``x.reshape(-1)`` that is one segment of one row,
  padding runs included as their own, then B·T (flash-attention's varlen layout);
  ``max_seqlen`` the longest run.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

from ..errors import ConfigError

POSITIONS = ("window", "doc", "source")
CROSS_DOC = ("keep", "mask")


def check_choice(who: str, name: str, value, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ConfigError(f"{who}: {name} must be one of {', '.join(choices)}, got {value!r}")
    return value


class Batch:
    """x, y (int64, (B, T)) and, computed when first read, ``position_ids`` (int64),
    ``attention_mask`` (int64), ``segments`` (int32), ``cu_seqlens`` (int32), ``max_seqlen``.

    Unpacks like the ``(x, y)`` tuple batches used to be: ``x, y = batch``; ``batch[0]`` is x.
    Pickles whole (a DataLoader worker's batch): a layout not yet made is made first.
    """

    def __init__(self, x: np.ndarray, y: np.ndarray, layout, positions: str):
        self.x, self.y = x, y
        self._make, self._positions = layout, positions  # a Layout, or a function that returns one

    @cached_property
    def _layout(self) -> Layout:
        return self._make if isinstance(self._make, Layout) else self._make()

    def __getstate__(self):  # to another process (a DataLoader worker's batch): a lazy layout is a closure, made now
        return dict(self.__dict__, _make=self._layout)

    def __iter__(self):
        return iter((self.x, self.y))

    def __len__(self) -> int:
        return 2

    def __getitem__(self, i):
        return (self.x, self.y)[i]

    def __repr__(self) -> str:
        return f"Batch(x={self.x.shape}, positions={self._positions!r})"

    @cached_property
    def attention_mask(self) -> np.ndarray:
        return (np.arange(self.x.shape[1]) < self._layout.real[:, None]).astype(np.int64)

    @cached_property
    def segments(self) -> np.ndarray:
        return self._layout.segments()

    @cached_property
    def position_ids(self) -> np.ndarray:
        return self._layout.positions(self._positions)

    @cached_property
    def cu_seqlens(self) -> np.ndarray:
        return self._runs()[0]

    @cached_property
    def max_seqlen(self) -> int:
        return self._runs()[1]

    def _runs(self) -> tuple[np.ndarray, int]:
        B, T = self.x.shape
        cu = self._layout.run_starts()
        cu = np.append(cu, B * T).astype(np.int32)
        return cu, int(np.diff(cu).max()) if len(cu) > 1 else 0


class Layout:
    """Where a batch's segments start, per row: the arithmetic behind ``Batch``'s fields.

    ``real``: x columns holding tokens per row (L − 1); ``seg_row``/``seg_col``: row and column
    (in w) of every segment start after a row's first, in row order; ``first_off``/``seg_off``:
    offset in its document of each row's first token / of each later segment's first token
    (``None`` when document offsets are unknown: ``positions="source"`` then refuses).
    """

    def __init__(self, T: int, real: np.ndarray, seg_row: np.ndarray, seg_col: np.ndarray,
                 first_off: np.ndarray | None, seg_off: np.ndarray | None):
        self.T, self.real = T, real
        keep = seg_col < real[seg_row]  # a segment starting at or after the last input column starts no input
        self.row, self.col = seg_row[keep], seg_col[keep]
        self.first_off = first_off
        self.seg_off = seg_off[keep] if seg_off is not None else None
        self._seg_all = (seg_row, seg_col)  # for the labels: a start at column L − 1 still takes y[L − 2]

    def starts_mask(self) -> np.ndarray:
        """bool (B, T): True at columns j > 0 where a segment starts (inputs only)."""
        m = np.zeros((len(self.real), self.T), bool)
        m[self.row, self.col] = True
        return m

    def label_cuts(self) -> tuple[np.ndarray, np.ndarray]:
        """(rows, columns) of the y entries whose label starts another segment: y[j] with w[j + 1] a start."""
        r, c = self._seg_all
        keep = c <= self.real[r]  # w[c] is y[c - 1], a real label while c - 1 < L - 1
        return r[keep], c[keep] - 1

    def segments(self) -> np.ndarray:
        seg = np.cumsum(self.starts_mask(), axis=1, dtype=np.int32)
        seg[np.arange(self.T) >= self.real[:, None]] = -1
        return seg

    def positions(self, mode: str) -> np.ndarray:
        B, T = len(self.real), self.T
        cols = np.broadcast_to(np.arange(T, dtype=np.int64), (B, T))
        if mode == "window":
            return np.ascontiguousarray(cols)
        first = np.zeros((B, T), np.int64)  # column where each token's run starts
        first[self.row, self.col] = self.col
        pad = self.real < T
        first[np.flatnonzero(pad), self.real[pad]] = self.real[pad]
        np.maximum.accumulate(first, axis=1, out=first)
        pos = cols - first
        if mode == "source":
            if self.first_off is None or self.seg_off is None:
                raise ConfigError('positions="source" needs the documents\' starts (a document index or EOT ids)')
            base = np.zeros((B, T), np.int64)
            base[:, 0] = self.first_off
            base[self.row, self.col] = self.seg_off
            base[np.flatnonzero(pad), self.real[pad]] = 0
            pos += np.take_along_axis(base, first, axis=1)  # `first` is the column of each token's run start
        return pos

    def run_starts(self) -> np.ndarray:
        """Flat indices in x.reshape(-1) where a run (row start, segment, padding) begins, sorted."""
        B, T = len(self.real), self.T
        rows = np.arange(B, dtype=np.int64) * T
        pad = self.real < T
        parts = [rows, self.row * T + self.col, rows[pad] + self.real[pad]]
        return np.unique(np.concatenate(parts))


def regular_layout(starts: np.ndarray, lengths: np.ndarray, T: int, doc_starts: np.ndarray | None) -> Layout:
    """The layout of contiguous windows ``[starts[i], starts[i] + lengths[i])``: segments start at
    every document start strictly inside (``doc_starts``, sorted; None: one segment per row)."""
    s = np.asarray(starts, np.int64)
    L = np.asarray(lengths, np.int64)
    real = np.minimum(L - 1, T)
    if doc_starts is None or not len(doc_starts):
        z = np.zeros(0, np.int64)
        return Layout(T, real, z, z, None, None)
    i0 = np.searchsorted(doc_starts, s, "right")
    i1 = np.searchsorted(doc_starts, s + L, "left")
    n = np.maximum(i1 - i0, 0)
    row = np.repeat(np.arange(len(s), dtype=np.int64), n)
    k = np.arange(int(n.sum()), dtype=np.int64) - np.repeat(np.cumsum(n) - n, n) + np.repeat(i0, n)
    col = doc_starts[k] - s[row]
    first_off = s - doc_starts[np.maximum(i0 - 1, 0)]
    return Layout(T, real, row, col, first_off, np.zeros(len(row), np.int64))


def segment_layout(seg_rows: np.ndarray, seg_starts: np.ndarray, seg_lengths: np.ndarray, seg_docs: np.ndarray,
                   n_rows: int, T: int, doc_starts: np.ndarray | None) -> Layout:
    """The layout of rows made of segments (a best-fit plan): ``seg_rows[k]`` is the row of
    segment k, segments of a row consecutive and in order."""
    r = np.asarray(seg_rows, np.int64)
    lens = np.asarray(seg_lengths, np.int64)
    total = np.bincount(r, weights=lens, minlength=n_rows).astype(np.int64)
    real = np.minimum(total - 1, T)
    first = np.ones(len(r), bool)
    first[1:] = r[1:] != r[:-1]
    col = np.cumsum(lens) - lens  # column of each segment: its offset inside its row
    col -= np.repeat(col[first], np.diff(np.append(np.flatnonzero(first), len(r))))
    off = None if doc_starts is None else np.asarray(seg_starts, np.int64) - doc_starts[np.asarray(seg_docs, np.int64)]
    first_off = None
    if off is not None:
        first_off = np.zeros(n_rows, np.int64)
        first_off[r[first]] = off[first]
    return Layout(T, real, r[~first], col[~first], first_off, off[~first] if off is not None else None)


def assemble(w: np.ndarray, lengths: np.ndarray, layout, pad_id: int, ignore_index: int, positions: str,
             cross_doc: str, fresh: np.ndarray | None = None) -> Batch:
    """The Batch of windows ``w`` (int64, (B, span)) of ``lengths`` tokens each (the rest of a row
    is not read). ``layout``: a Layout, or a function returning one when a field first needs it
    (it must, when ``cross_doc`` is "mask")."""
    x = w[:, :-1].copy()  # copies: C-contiguous, so torch's .view(-1) works
    y = w[:, 1:].copy()
    cols = np.arange(x.shape[1])
    pad = cols >= np.asarray(lengths, np.int64)[:, None] - 1  # no (x, y) pair there: the window ended
    x[pad] = pad_id
    y[pad] = ignore_index
    if cross_doc == "mask":
        y[layout.label_cuts()] = ignore_index
    if fresh is not None:
        y[cols < fresh.astype(np.int64)[:, None] - 1] = ignore_index
    return Batch(x, y, layout, positions)
