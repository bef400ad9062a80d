"""A mixture plan opened for serving: its source plans, their tokens, and an epoch's order.

``Mixed(plan)`` reads each source plan the mixture's sidecar names (path relative to the mixture's
folder; its rows checksum must be the one the mixture recorded) and finds its token file by the
plan's own sidecar (``tokensrc.plan_tokens``). ``epoch(seed, e)`` is ``planning.mixture``'s
order: (source, window) of every position, exact in every prefix. ``gather`` builds the Batch of
some positions, each row from its own source's tokens.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import DataError, InputError
from ..planning import boundaries as bnd
from ..planning import mixture
from ..tokensrc import MIXTURE_HINT, open_planned, plan_tokens
from .batch import Plan, check_sample, open_mask, read_plan
from .samples import Batch, Layout, fast_reader, gather, regular_layout

MIX_ROW = np.dtype([("source", "<i4"), ("window", "<i8"), ("start", "<i8"), ("length", "<i4")])


class Mixed:
    """The sources of mixture plan ``plan`` (a ``Plan`` read from ``plan.path``)."""

    def __init__(self, plan: Plan):
        side = plan.sidecar
        where = plan.path or "mixture"
        folder = Path(plan.path).parent if plan.path else Path(".")
        self.names = [s.name for s in side.sources]
        self.counts = plan.rows["count"].astype(np.int64).tolist()
        self.weights = [s.weight for s in side.sources]
        self.prefix = mixture.prefix_rule(side.params.mixture)  # the rule the plan was made with
        salt = side.params.seed  # mix --seed
        self.salt = salt if isinstance(salt, int) and not isinstance(salt, bool) and salt >= 0 else None
        self.plans: list[Plan] = []
        for s, row in zip(side.sources, plan.rows):
            missing = s.missing(folder)
            if missing is not None:
                raise InputError(f"{where}: source {s.name}: {missing}")
            p = read_plan(s.path_in(folder))
            why = mixture.unmixable(p.sidecar.params)
            if why is not None:  # a mixture made before mix refused such a source
                raise DataError(f"{where}: source {s.name} ({s.path_in(folder)}): {why}")
            if s.rows_checksum and p.sidecar.rows_checksum != s.rows_checksum:
                raise DataError(f"{where}: source {s.name} ({s.path_in(folder)}) changed since the mixture was made"
                                " (its rows checksum differs): run winsample mix again")
            if s.tokens_checksum and p.sidecar.source.checksum != s.tokens_checksum:
                raise DataError(f"{where}: source {s.name} ({s.path_in(folder)}) was made over other tokens since the mixture"
                                f" was made ({p.sidecar.source.checksum}, the mixture recorded {s.tokens_checksum})")
            if len(p.windows) != int(row["windows"]):
                raise DataError(f"{where}: source {s.name} has {len(p.windows)} windows, the mixture says {int(row['windows'])}")
            if p.span != plan.span:
                raise DataError(f"{where}: source {s.name} has span {p.span}, the mixture {plan.span}")
            self.plans.append(p)
        self.sizes = [len(p.windows) for p in self.plans]
        # each source's token file found now (its size and recorded checksum, no token read): a
        # source that cannot be found fails the Loader's construction, not its first batch
        self.token_paths = [plan_tokens(p.path, p.sidecar.source, MIXTURE_HINT) for p in self.plans]
        self._tokens: list = [None] * len(self.plans)
        self._docs: list = [None] * len(self.plans)
        self._masks: list = [None] * len(self.plans)  # each source's loss mask (a memmap), False: none
        self._plain: bool | None = None  # every source plain (``_all_plain``), known once their tokens are open
        self._buffers: tuple | None = None  # every source's tokens, for the one C call of a plain batch

    def __getstate__(self):  # to a DataLoader worker (inside the Loader): paths, not memmaps or tables
        state = dict(self.__dict__, _tokens=[None] * len(self.plans), _docs=[None] * len(self.plans), _plain=None,
                     _buffers=None, _masks=[None] * len(self.plans))
        state.pop("_first", None)
        state.pop("_columns", None)
        return state

    def tokens(self, i: int):
        """Source ``i``'s tokens (a memmap), opened when first needed."""
        if self._tokens[i] is None:
            p = self.plans[i]
            src = open_planned(self.token_paths[i], p.sidecar.source)
            one_file = src.files is None and not src.sharded and src.path.is_file()
            check_sample(p.path, p.sidecar.source, src.path if one_file else None, {})
            if len(p.windows) and int((p.windows["start"] + p.windows["length"]).max()) > src.n:
                raise DataError(f"{p.path}: a window ends past the end of its tokens ({src.n})")
            self._tokens[i] = (src, src.tokens)
        return self._tokens[i][1]

    def mask(self, i: int):
        """Source ``i``'s loss mask (``encode --chat`` / ``--prompt-field``), or None."""
        if self._masks[i] is None:
            self.tokens(i)
            src = self._tokens[i][0]
            m = src.entry.mask if src.entry is not None else None
            self._masks[i] = open_mask(src.path.parent / m.file, m.tokens) if m is not None and m.tokens else False
        return self._masks[i] if self._masks[i] is not False else None

    def docs(self, i: int) -> np.ndarray:
        """Source ``i``'s document starts (document index, else EOT ids), read once."""
        if self._docs[i] is None:
            from .. import planning

            self.tokens(i)
            src = self._tokens[i][0]
            self._docs[i] = np.asarray(planning.documents(src, "doc", src.tokens)[0], np.int64)
        return self._docs[i]

    def epoch(self, seed: int, epoch: int) -> tuple[np.ndarray, np.ndarray]:
        """(source, window) of every position of ``epoch``: ``planning.mixture.mixture_epoch``."""
        return mixture.mixture_epoch(self.counts, self.sizes, seed, epoch, self.salt, self.weights, self.prefix)

    def rows(self, src: np.ndarray, win: np.ndarray) -> np.ndarray:
        """``MIX_ROW`` rows: each position's source, window, and that window's start and length."""
        out = np.zeros(len(src), MIX_ROW)
        out["source"], out["window"] = src, win
        for i, p in enumerate(self.plans):
            k = src == i
            if k.any():
                w = p.windows[win[k]]
                out["start"][k], out["length"][k] = w["start"], w["length"]
        return out

    def gather(self, src: np.ndarray, win: np.ndarray, T: int, pad_id: int, ignore_index: int, positions: str,
               cross_doc: str, fresh: bool = False, loss_mask: bool = True) -> Batch:
        """The Batch of positions (``src``, ``win``): each source's rows built from its own tokens
        (``fresh``: labels="fresh", from each source plan's ``fresh`` column), then put back in
        position order; a source with a loss mask (``loss_mask``) has its untrained labels ignored."""
        batch = self._gather(src, win, T, pad_id, ignore_index, positions, cross_doc, fresh)
        for i in np.unique(src).tolist() if loss_mask else []:
            mask = self.mask(i)
            if mask is not None:
                k = np.flatnonzero(src == i)
                trained = gather(mask, self.plans[i], win[k], T, 0, 0, "window", "keep", lambda i=i: self.docs(i)).y
                rows = batch.y[k]
                rows[trained == 0] = ignore_index
                batch.y[k] = rows
        return batch

    def _gather(self, src: np.ndarray, win: np.ndarray, T: int, pad_id: int, ignore_index: int, positions: str,
                cross_doc: str, fresh: bool) -> Batch:
        if positions == "window" and cross_doc == "keep" and not fresh and self._all_plain():
            return self._gather_plain(src, win, T, pad_id, ignore_index)
        parts = []
        for i in np.unique(src).tolist():
            k = np.flatnonzero(src == i)
            b = gather(self.tokens(i), self.plans[i], win[k], T, pad_id, ignore_index, positions, cross_doc,
                       lambda i=i: self.docs(i), self.plans[i].windows["fresh"][win[k]] if fresh else None)
            parts.append((k, b))
        return stack(parts, len(src), T)

    def _all_plain(self) -> bool:
        """Every source's windows are contiguous ranges the C reader copies (no best-fit plan; each
        token file a little-endian uint16/32 memmap); then ``_columns`` holds all their windows."""
        if self._plain is None:
            self._plain = all(not p.best_fit and fast_reader(self.tokens(i)) is not None
                              for i, p in enumerate(self.plans))
            if self._plain:  # every source's windows end to end: one lookup per batch, not one per source
                self._first = np.cumsum([0] + self.sizes[:-1]).astype(np.int64)
                self._columns = np.stack([np.concatenate([p.windows[f].astype(np.int64) for p in self.plans])
                                          for f in ("start", "length")])  # (2, windows): starts, lengths
        return self._plain

    def _gather_plain(self, src: np.ndarray, win: np.ndarray, T: int, pad_id: int, ignore_index: int) -> Batch:
        """``gather`` for plain (x, y) of regular windows, the default Loader's batch: every row,
        whatever its source, written by one ``rows_xy_multi`` call straight into the batch's x and y
        (no sub-batch, no copy, no sort by source); the packed fields made from each source's
        layout when first read."""
        B = len(src)
        g = self._first[src]
        g += win
        got = self._columns.take(g, axis=1)  # (2, B): each row's start and length
        real = got[1] - 1  # x columns with a label
        np.minimum(real, T, out=real)
        x = np.empty((B, T), np.int64)
        y = np.empty((B, T), np.int64)
        if self._buffers is None:  # every source's tokens, and their widths, for the one C call
            self._buffers = tuple(self.tokens(i) for i in range(len(self.plans)))
            self._widths = np.array([t.dtype.itemsize for t in self._buffers], np.int64)
        starts, lengths = got
        bnd.FAST.rows_xy_multi(self._buffers, self._widths, src.astype(np.int64), np.arange(B, dtype=np.int64) * (T + 1),
                               starts, lengths, real, T, pad_id, ignore_index, x, y)
        layouts = []

        def layout() -> list[tuple[np.ndarray, Layout]]:  # each source's rows and their layout, made once
            if not layouts:
                for i in np.unique(src).tolist():
                    k = np.flatnonzero(src == i)
                    layouts.append((k, regular_layout(starts[k], lengths[k], T, self.docs(i))))
            return layouts

        def segments():
            out = np.empty((B, T), np.int32)
            for k, lay in layout():
                out[k] = lay.segments()
            return out

        def run_starts():
            flat = [k[s // T] * T + s % T for k, lay in layout() for s in [lay.run_starts()]]
            return np.sort(np.concatenate(flat))

        def position_ids():  # positions="window": the column, in every row
            return np.ascontiguousarray(np.broadcast_to(np.arange(T, dtype=np.int64), (B, T)))

        return Batch(x, y, real, "window",
                     fields={"position_ids": position_ids, "segments": segments, "run_starts": run_starts})


def stack(parts: list[tuple[np.ndarray, Batch]], B: int, T: int) -> Batch:
    """One Batch of B rows from sub-batches, ``parts`` = (their rows in it, the sub-batch)."""
    x = np.empty((B, T), np.int64)
    y = np.empty((B, T), np.int64)
    real = np.empty(B, np.int64)
    for k, b in parts:
        x[k], y[k], real[k] = b.x, b.y, b._real

    def field(name, dtype):
        def make():
            out = np.empty((B, T), dtype)
            for k, b in parts:
                out[k] = getattr(b, name)
            return out
        return make

    def run_starts():
        flat = [(k[s // T]) * T + s % T for k, b in parts for s in [b.cu_seqlens[:-1].astype(np.int64)]]
        return np.sort(np.concatenate(flat)) if flat else np.zeros(0, np.int64)

    positions = parts[0][1]._positions if parts else "window"
    return Batch(x, y, real, positions, fields={"position_ids": field("position_ids", np.int64),
                                                "segments": field("segments", np.int32), "run_starts": run_starts})
