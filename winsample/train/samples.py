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
from ..planning import boundaries as bnd

POSITIONS = ("window", "doc", "source")
CROSS_DOC = ("keep", "mask")


def check_choice(who: str, name: str, value, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ConfigError(f"{who}: {name} must be one of {', '.join(choices)}, got {value!r}")
    return value


class Batch:
    """x, y (int64, (B, T)) and ``position_ids`` (int64), ``attention_mask`` (int64),
    ``segments`` (int32), ``cu_seqlens`` (int32), ``max_seqlen``: given when the batch was built
    in one pass, else computed from the layout when first read.

    Unpacks like the ``(x, y)`` tuple batches used to be: ``x, y = batch``; ``batch[0]`` is x.
    Pickles whole (a DataLoader worker's batch): a layout not yet made is made first.
    """

    def __init__(self, x: np.ndarray, y: np.ndarray, real: np.ndarray, positions: str, layout=None,
                 fields: dict | None = None):
        self.x, self.y, self._real = x, y, real
        self._make, self._positions = layout, positions  # a Layout, or a function that returns one
        self._given = fields or {}  # position_ids, segments, run_starts built with x and y (or functions making them)

    @cached_property
    def _layout(self) -> Layout:
        return self._make if isinstance(self._make, Layout) else self._make()

    def __getstate__(self):  # to another process (a DataLoader worker's batch): closures are made now
        state = dict(self.__dict__, _given={k: self._field(k) for k in self._given})
        if self._make is not None and not isinstance(self._make, Layout):
            state["_make"] = self._layout
        return state

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
        return (np.arange(self.x.shape[1]) < self._real[:, None]).astype(np.int64)

    @cached_property
    def segments(self) -> np.ndarray:
        return self._field("segments") if "segments" in self._given else self._layout.segments()

    @cached_property
    def position_ids(self) -> np.ndarray:
        if "position_ids" in self._given:
            return self._field("position_ids")
        return self._layout.positions(self._positions)

    @cached_property
    def cu_seqlens(self) -> np.ndarray:
        return self._runs()[0]

    @cached_property
    def max_seqlen(self) -> int:
        return self._runs()[1]

    def _field(self, name: str) -> np.ndarray:
        got = self._given[name]
        return got() if callable(got) else got  # a stacked batch's fields are made when first read

    def _runs(self) -> tuple[np.ndarray, int]:
        B, T = self.x.shape
        cu = self._field("run_starts") if "run_starts" in self._given else self._layout.run_starts()
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
        self.cuts = (seg_row, seg_col)  # every segment start after a row's first (one at column L − 1 still takes y[L − 2])

    def starts_mask(self) -> np.ndarray:
        """bool (B, T): True at columns j > 0 where a segment starts (inputs only)."""
        m = np.zeros((len(self.real), self.T), bool)
        m[self.row, self.col] = True
        return m

    def label_cuts(self) -> tuple[np.ndarray, np.ndarray]:
        """(rows, columns) of the y entries whose label starts another segment: y[j] with w[j + 1] a start."""
        r, c = self.cuts
        keep = c <= self.real[r]  # w[c] is y[c - 1], a real label while c - 1 < L - 1
        return r[keep], c[keep] - 1

    def segments(self) -> np.ndarray:
        seg = np.cumsum(self.starts_mask(), axis=1, dtype=np.int32)
        seg[np.arange(self.T) >= self.real[:, None]] = -1
        return seg

    def positions(self, mode: str) -> np.ndarray:
        B, T = len(self.real), self.T
        if mode == "window":
            return np.ascontiguousarray(np.broadcast_to(np.arange(T, dtype=np.int64), (B, T)))
        if mode == "source" and (self.first_off is None or self.seg_off is None):
            raise ConfigError('positions="source" needs the documents\' starts (a document index or EOT ids)')
        starts, base = self._runs(with_base=mode == "source")
        # one cumsum over the flat columns: +1 a column, and at a run's first column a jump back
        # to its base (0, or its offset in its document under "source")
        step = np.ones(B * T, np.int64)
        if len(starts):
            jump = 1 - (starts[1:] - starts[:-1])
            if base is None:
                step[0] = 0
            else:
                step[0] = base[0]
                jump += base[1:] - base[:-1]
            step[starts[1:]] = jump
        return np.cumsum(step, out=step).reshape(B, T)

    def _runs(self, with_base: bool = False) -> tuple[np.ndarray, np.ndarray | None]:
        """Flat indices in x.reshape(-1) where a run (row start, segment, padding) begins, sorted, and
        with ``with_base`` the offset in its document of each run's first token (padding: 0)."""
        B, T = len(self.real), self.T
        rows = np.arange(B, dtype=np.int64) * T
        pad = self.real < T
        starts = np.concatenate([rows, self.row * T + self.col, rows[pad] + self.real[pad]])
        if not with_base:
            return np.unique(starts), None  # sorted, and a row with no input (real 0) once
        base = np.concatenate([self.first_off, self.seg_off, np.zeros(int(pad.sum()), np.int64)]).astype(np.int64)
        order = np.argsort(starts, kind="stable")
        return starts[order], base[order]

    def run_starts(self) -> np.ndarray:
        """Flat indices in x.reshape(-1) where a run (row start, segment, padding) begins, sorted."""
        return self._runs()[0]


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


def segment_layout(row: np.ndarray, col: np.ndarray, lead: np.ndarray, lengths: np.ndarray, T: int,
                   off: np.ndarray | None) -> Layout:
    """The layout of rows made of segments (a best-fit plan): segment k lies in row ``row[k]`` at
    column ``col[k]``, a row's segments consecutive and in order, ``lead`` the index of each row's
    first segment; ``lengths`` the rows' token counts; ``off`` each segment's offset in its
    document (None: unknown)."""
    later = np.ones(len(row), bool)
    later[lead] = False
    real = np.minimum(np.asarray(lengths, np.int64) - 1, T)
    return Layout(T, real, row[later], col[later], None if off is None else off[lead],
                  None if off is None else off[later])


def fast_reader(tokens):
    """The C reader when it can read ``tokens`` directly: a C-contiguous little-endian uint16/32
    array (a .bin's memmap); None for a sharded stream or without the C module."""
    if bnd.FAST is None or not hasattr(bnd.FAST, "rows_xy") or not isinstance(tokens, np.ndarray):
        return None
    dt = tokens.dtype
    if dt.kind != "u" or dt.itemsize not in (2, 4) or dt.byteorder == ">" or not tokens.flags.c_contiguous:
        return None
    return bnd.FAST


def read_runs(tokens, B: int, span: int, dst: np.ndarray, src: np.ndarray) -> np.ndarray:
    """(B, span) array of ``tokens``' dtype: from flat position ``dst[k]`` on, the tokens from
    ``src[k]`` on, up to ``dst[k + 1]`` (``dst`` increasing, ``dst[0]`` 0). One integer-array read
    for the whole batch, not one slice per run; past its last run a row holds whatever tokens
    follow (clipped to the file), which no field reads."""
    idx = np.ones(B * span, np.int64)
    if len(dst):
        idx[0] = src[0]
        idx[dst[1:]] = (src[1:] - src[:-1]) - (dst[1:] - dst[:-1]) + 1
    np.cumsum(idx, out=idx)
    if isinstance(tokens, np.ndarray):  # a memmap: one gather, indices past the end clipped
        return np.asarray(tokens).take(idx, mode="clip").reshape(B, span)
    np.minimum(idx, len(tokens) - 1, out=idx)  # a sharded split's stream: its own take
    return np.asarray(tokens[idx]).reshape(B, span)


MODES = {"window": 0, "doc": 1, "source": 2}  # rows_packed's position modes


def assemble(tokens, B: int, T: int, dst: np.ndarray, src: np.ndarray, lens: np.ndarray, real: np.ndarray, layout,
             pad_id: int, ignore_index: int, positions: str, cross_doc: str, fresh: np.ndarray | None = None) -> Batch:
    """The Batch of B rows whose tokens are the runs ``tokens[src[k] : src[k] + lens[k]]`` placed
    at flat position ``dst[k]`` of (B, T + 1) rows, ``real[i]`` x columns with a label each.
    ``layout``: a Layout, or a function returning one when a field first needs it (it must be
    one when ``cross_doc`` is "mask")."""
    x = np.empty((B, T), np.int64)  # int64, C-contiguous, so torch's .view(-1) works
    y = np.empty((B, T), np.int64)
    if fast_reader(tokens) is not None:  # one C pass: runs into x and y, then the padding
        bnd.FAST.rows_xy(tokens, tokens.dtype.itemsize, dst, src, lens, real, T, pad_id, ignore_index, x, y)
    else:
        w = read_runs(tokens, B, T + 1, dst, src)
        x[:], y[:] = w[:, :-1], w[:, 1:]
        pad = np.arange(T) >= real[:, None]  # no (x, y) pair there: the window ended
        x[pad] = pad_id
        y[pad] = ignore_index
    if cross_doc == "mask":
        y[layout.label_cuts()] = ignore_index
    _mask_fresh(y, fresh, ignore_index)
    return Batch(x, y, real, positions, layout)


def assemble_segments(tokens, B: int, T: int, runs: tuple, real: np.ndarray, pad_id: int, ignore_index: int,
                      positions: str, cross_doc: str, fresh: np.ndarray | None = None) -> Batch:
    """The Batch of rows made of segments, every field in one C pass (``_fast.c``'s
    ``rows_packed``): ``runs`` = (row, col, src, len, base) int64 arrays, one run per segment,
    sorted by (row, col), each row's runs tiling it from column 0."""
    row, col, src, lens, base = runs
    x = np.empty((B, T), np.int64)
    y = np.empty((B, T), np.int64)
    pos = np.empty((B, T), np.int64)
    seg = np.empty((B, T), np.int32)
    bnd.FAST.rows_packed(tokens, tokens.dtype.itemsize, row, col, src, lens, base, real, T, pad_id, ignore_index,
                         MODES[positions], cross_doc == "mask", x, y, pos, seg)
    _mask_fresh(y, fresh, ignore_index)
    keep = col < real[row]  # a run starting at the last column or later starts no input
    padded = np.flatnonzero(real < T)
    starts = np.sort(np.concatenate([row[keep] * T + col[keep], padded * T + real[padded]]))
    return Batch(x, y, real, positions, fields={"position_ids": pos, "segments": seg, "run_starts": starts})


def _mask_fresh(y: np.ndarray, fresh: np.ndarray | None, ignore_index: int) -> None:
    if fresh is not None:
        y[np.arange(y.shape[1]) < fresh.astype(np.int64)[:, None] - 1] = ignore_index


def gather(tokens, plan, index: np.ndarray, T: int, pad_id: int, ignore_index: int, positions: str, cross_doc: str,
           docs, fresh: np.ndarray | None = None) -> Batch:
    """The Batch of windows ``index`` of ``plan`` (a ``train.Plan``) over ``tokens``.

    Reads only those windows' tokens, in one C pass when it can (``rows_packed``, ``rows_xy``),
    else one integer-array read. ``docs``: a function returning the tokens' int64 document
    starts, called only when a field needs them (positions other than ``window``, masking, or
    ``segments`` read later).
    """
    index = np.asarray(index, np.int64)
    B = len(index)
    cols = plan.columns
    lengths = cols["win_length"][index]
    real = np.minimum(lengths - 1, T)  # x columns with a label
    fast = fast_reader(tokens) is not None
    if plan.best_fit:  # each window is its segments side by side
        first = plan.segment_index
        lo = first[index]
        per = first[index + 1] - lo
        lead = np.cumsum(per) - per  # each row's first segment, in the batch's list
        segs = np.arange(int(lead[-1] + per[-1]) if B else 0, dtype=np.int64) + np.repeat(lo - lead, per)
        starts = cols["seg_start"][segs]
        lens = cols["seg_length"][segs]
        row = np.repeat(np.arange(B, dtype=np.int64), per)
        col = np.cumsum(lens) - lens
        col -= np.repeat(col[lead], per)  # offset inside its row
        off = starts - docs()[cols["seg_doc"][segs]] if positions == "source" else None
        if fast:
            base = off if off is not None else np.zeros(len(row), np.int64)
            return assemble_segments(tokens, B, T, (row, col, starts, lens, base), real, pad_id, ignore_index,
                                     positions, cross_doc, fresh)
        layout = segment_layout(row, col, lead, lengths, T, off)
        return assemble(tokens, B, T, row * (T + 1) + col, starts, lens, real, layout, pad_id, ignore_index, positions,
                        cross_doc, fresh)
    starts = cols["win_start"][index]
    if positions != "window" or cross_doc == "mask":
        layout = regular_layout(starts, lengths, T, docs())
        if fast:
            return assemble_segments(tokens, B, T, _regular_runs(layout, starts, lengths), real, pad_id, ignore_index,
                                     positions, cross_doc, fresh)
    else:
        layout = lambda: regular_layout(starts, lengths, T, docs())  # noqa: E731  (read only when a field needs it)
    return assemble(tokens, B, T, np.arange(B, dtype=np.int64) * (T + 1), starts, lengths, real, layout, pad_id,
                    ignore_index, positions, cross_doc, fresh)


def _regular_runs(layout: Layout, starts: np.ndarray, lengths: np.ndarray) -> tuple:
    """(row, col, src, len, base) of contiguous windows cut at the document starts inside them."""
    B = len(starts)
    cut_row, cut_col = layout.cuts
    row = np.concatenate([np.arange(B, dtype=np.int64), cut_row])
    col = np.concatenate([np.zeros(B, np.int64), cut_col])
    order = np.argsort(row * (int(lengths.max()) + 1) + col, kind="stable") if len(cut_row) else np.arange(B)
    row, col = row[order], col[order]
    last = np.append(row[1:] != row[:-1], True)  # a row's last run ends with the window
    lens = np.where(last, lengths[row], np.append(col[1:], 0)) - col
    first = col == 0
    base = np.where(first, layout.first_off[row] if layout.first_off is not None else 0, 0).astype(np.int64)
    return row, col, starts[row] + col, lens, base
