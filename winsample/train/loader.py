"""The training loader: every window of a plan once per epoch, across ranks, by (epoch, step).

``Loader(plan, tokens_path, batch_size, seed, rank, world_size)`` serves (x, y) batches:

- **epochs**: the eligible windows of the epoch's plan (all of them with ``short="pad"``, the
  full-length ones with ``short="drop"``), sorted by start, are put in the order
  ``np.random.default_rng([seed, epoch, 2]).permutation(n)``. Step s of rank r takes positions
  ``[(s × world_size + r) × batch_size, … + batch_size)`` of that order, so over all ranks every
  eligible window is served exactly once per epoch; the last ``left_out`` < world_size ×
  batch_size windows of the order are not served that epoch (other windows are left out in
  another epoch, since the order changes), and every rank gets the same number of batches.
- **pure**: ``batch(epoch, step)`` depends only on (plan, seed, epoch, step, rank, world_size).
  Nothing reads or moves a global random state, so evaluation cannot change training batches,
  and resuming is remembering (epoch, step).
- **short windows** (``short="pad"``): a window of length L < T + 1 gives x[j] = its tokens for
  j < L − 1 and the tokenizer's EOT after; y[j] = the next tokens for j < L − 1 and
  ``ignore_index`` after, so ``cross_entropy(..., ignore_index=...)`` trains on exactly the
  window's L − 1 (x, y) pairs. ``short`` defaults to ``"drop"``, and to ``"pad"`` for a packed
  plan, best-fit or greedy (whose windows are whole documents, shorter than the span by design).
- **packed samples**: a batch is a ``Batch`` (train/samples.py): ``x, y = batch`` as before, plus
  ``position_ids`` (``positions="window"|"doc"|"source"``), ``attention_mask``, ``segments``,
  ``cu_seqlens`` and ``max_seqlen``; ``cross_doc_labels="mask"`` makes every label that belongs to
  another document than its input ``ignore_index``. Documents are those of the plan's .bin (its
  document index, else EOT ids); a best-fit plan's windows are its segments side by side.
- **A loss mask** (a data folder from ``encode --chat`` / ``--prompt-field``: ``<split>.mask.bin``):
  y[j] is ``ignore_index`` where the label's token is not trained on (a prompt, a user turn), so
  the model learns from the answers only; ``loss_mask=False`` serves every label.
- **labels="fresh"**: y[j] is also ``ignore_index`` where an earlier window of the plan (by start)
  already has that token as a label: j < fresh − 1, from the plan's ``fresh`` column.
- **plans per epoch**: ``plan`` is a Plan or a path; a sequence (epoch e uses item e mod its
  length); or a callable epoch → Plan or path. A plan made with ``--random-offset`` (and
  ``--boundaries none|doc``) is re-planned in process for every epoch with its seed: epoch e
  gets exactly the windows ``winsample windows … --random-offset --seed S --epoch e`` writes.

Positions are token indices into the .bin; ranges are half-open.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from .. import formats
from ..errors import ConfigError, DataError
from ..tokensrc import open_planned, plan_tokens
from .batch import Plan, check_batch_size, check_rows, check_sample, open_mask, plan_eot, read_plan
from .mixed import Mixed
from .samples import CROSS_DOC, POSITIONS, Batch, check_choice, gather, regular_layout

MAX_ID = (1 << 32) - 1  # the widest token id a .bin holds (uint32)
SHORT = ("drop", "pad")  # None: drop, or pad for a best-fit plan
LABELS = ("all", "fresh")
ORDER_STREAM = 2  # third word of the permutation's seed: [seed, epoch, 2] (windows --shuffle uses 1)
CACHED_EPOCHS = 2  # epochs whose plan and order are kept (the current one and the one before)
MAX_COUNTED_EPOCHS = 100_000  # locate() through plans made anew per epoch: beyond, a typo or a lost step count


class StepOutOfRange(ConfigError, IndexError):
    """``batch(epoch, step)`` with a step outside ``[0, steps(epoch))``."""


@dataclass(frozen=True)
class Exposure:
    """How one epoch of a Loader trains on the file (all ranks together).

    ``trained_tokens``: labels trained on (y entries that are not ``ignore_index``).
    ``targets_min/mean/max``: times each *targetable* token (a label of some window of the plan)
    is a label this epoch; ``untrained``: targetable tokens that are no label this epoch
    (dropped short windows, the left-out windows, ``fresh`` masking of those); ``untargetable``:
    tokens of the file no window of the plan has as a label (first tokens, uncovered head/tail).
    ``mean = trained_tokens / targetable``, so "how many times did we see the corpus" is exact.
    """

    epoch: int
    batches: int  # per rank
    world_size: int
    batch_size: int
    windows: int  # eligible windows of the epoch's plan
    served: int  # windows served, all ranks: batches × world_size × batch_size
    left_out: int  # windows - served
    file_tokens: int
    trained_tokens: int
    targetable: int
    untargetable: int
    untrained: int
    targets_min: int
    targets_mean: float
    targets_max: int
    sources: list | None = None  # a mixture: each source's windows, served, tokens, repeats and label counts

    def to_json(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        return (f"epoch {self.epoch}: {self.batches:,} batches per rank × {self.world_size} ranks × {self.batch_size}"
                f" = {self.served:,} of {self.windows:,} windows ({self.left_out} left out); trains on"
                f" {self.trained_tokens:,} labels; each of the {self.targetable:,} targetable tokens is a label"
                f" min {self.targets_min} / mean {self.targets_mean:.3f} / max {self.targets_max} times"
                f" ({self.untrained:,} never this epoch; {self.untargetable:,} tokens of the file are no window's label)")


@dataclass
class _Epoch:
    plan: Plan
    rows: np.ndarray  # eligible rows, sorted by start
    index: np.ndarray  # their row numbers in plan.rows
    order: np.ndarray  # permutation of range(len(rows))
    steps: int
    left_out: int
    mix: tuple | None = None  # a mixture: (source, window) of every position, served in this order


class Loader:
    """(x, y) batches of a window plan by (epoch, step); see the module docstring for the contract.

    ``plan``: a Plan, a plan path, a sequence of them (one per epoch, cycled) or a callable
    epoch → Plan or path. ``tokens_path``: the .bin the plan was made for (``data/train.bin``;
    an array of its tokens also works). ``seed``: a non-negative int, the order's only source of
    randomness. ``pad_id``: x's padding (default: the tokenizer's EOT from the plan's sidecar,
    else meta.json's, else GPT-2's 50256).
    """

    def __init__(self, plan, tokens_path=None, batch_size: int | None = None, seed: int | None = None, rank: int = 0,
                 world_size: int = 1,
                 short: str | None = None, ignore_index: int = -1, labels: str = "all", pad_id: int | None = None,
                 positions: str = "window", cross_doc_labels: str = "keep", loss_mask: bool = True):
        check_batch_size("Loader", batch_size)
        for name, v in (("seed", seed), ("rank", rank), ("world_size", world_size), ("ignore_index", ignore_index)) + \
                ((("pad_id", pad_id),) if pad_id is not None else ()):
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool):
                raise ConfigError(f"Loader: {name} must be an int, got {v!r}")
        if pad_id is not None and not 0 <= pad_id <= MAX_ID:  # x holds token ids: a pad must be one
            raise ConfigError(f"Loader: pad_id must be a token id in [0, {MAX_ID}], got {pad_id}")
        if not -(1 << 63) <= ignore_index < (1 << 63):  # y is int64
            raise ConfigError(f"Loader: ignore_index must fit int64, got {ignore_index}")
        if seed < 0:
            raise ConfigError(f"Loader: seed must be >= 0, got {seed}")
        if world_size < 1 or not 0 <= rank < world_size:
            raise ConfigError(f"Loader: need 0 <= rank < world_size, got rank {rank}, world_size {world_size}")
        if short is not None and short not in SHORT:
            raise ConfigError(f"Loader: short must be one of {', '.join(SHORT)}, got {short!r}")
        self.positions = check_choice("Loader", "positions", positions, POSITIONS)
        self.cross_doc_labels = check_choice("Loader", "cross_doc_labels", cross_doc_labels, CROSS_DOC)
        if labels not in LABELS:
            raise ConfigError(f"Loader: labels must be one of {', '.join(LABELS)}, got {labels!r}")
        self.batch_size, self.seed, self.rank, self.world_size = int(batch_size), int(seed), int(rank), int(world_size)
        self.short, self.ignore_index, self.labels = short, int(ignore_index), labels
        self._source = plan
        self._base: Plan | None = None  # the one plan given as a Plan or a path, read once
        self._mixed: Mixed | None = None  # a mixture plan's sources
        tokens_path = self._find_tokens(plan, tokens_path, short)
        self._tokens_arg = tokens_path
        self._tokens = None if isinstance(tokens_path, (str, Path)) else tokens_path
        self._tokenizer = None  # meta.json's tokenizer entry of tokens_path
        self._doc_starts = None  # the .bin's document starts, read when a batch first needs them
        self._sampled: dict = {}  # token file → its sample checksum, computed once
        self._mask = None  # the token file's loss mask (encode --chat / --prompt-field), read where a batch needs it
        self.loss_mask = bool(loss_mask)
        if self._mixed is None:
            self._open()
        self._cache: OrderedDict[int, _Epoch] = OrderedDict()
        self._steps: list[int] = []  # steps of epochs 0, 1, … as far as ``locate`` has looked
        first = self._epoch(0)
        self.T, self.span = first.plan.T, first.plan.span
        self.eot = self._eot(first.plan)  # where documents end in tokens given as an array (no document index)
        self.pad_id = int(pad_id) if pad_id is not None else self.eot

    # -- the contract --

    def __len__(self) -> int:
        """Batches per epoch on this rank, equal on every rank (epoch 0's; ``steps(e)`` for others)."""
        return self.steps(0)

    def steps(self, epoch: int) -> int:
        """Batches of ``epoch`` on each rank: eligible windows // (world_size × batch_size)."""
        return self._epoch(epoch).steps

    @property
    def left_out(self) -> int:
        """Eligible windows of epoch 0 served by no rank (< world_size × batch_size); ``left_out_of(e)``."""
        return self.left_out_of(0)

    def left_out_of(self, epoch: int) -> int:
        return self._epoch(epoch).left_out

    def plan(self, epoch: int) -> Plan:
        """The plan epoch ``epoch`` walks."""
        return self._epoch(epoch).plan

    def row_index(self, epoch: int, step: int) -> np.ndarray:
        """int64 window numbers, in ``plan(epoch).windows`` (``rows`` itself but for a best-fit plan,
        whose rows are segments), of the lines of batch (epoch, step) on this rank."""
        ep = self._epoch(epoch)
        if not 0 <= step < ep.steps:
            raise StepOutOfRange(f"step {step} of epoch {epoch} is outside [0, {ep.steps}): the epoch has {ep.steps} batches per rank")
        lo = (int(step) * self.world_size + self.rank) * self.batch_size
        return ep.index[ep.order[lo : lo + self.batch_size]]

    def rows(self, epoch: int, step: int) -> np.ndarray:
        """The windows (``start, length, doc, fresh``: ``Plan.windows``) of the lines of batch
        (epoch, step), in line order; ``row_index`` numbers them (a best-fit plan's window numbers).
        A mixture's rows are ``source`` (an index into ``sources``), ``window`` (in that source's
        plan), ``start`` and ``length`` (in that source's token file)."""
        ep = self._epoch(epoch)
        if ep.mix is not None:
            pos = self.row_index(epoch, step)
            return self._mixed.rows(ep.mix[0][pos], ep.mix[1][pos])
        return ep.plan.windows[self.row_index(epoch, step)]

    @property
    def sources(self) -> list[str]:
        """A mixture's source names, in the order ``rows(...)["source"]`` numbers them ([] otherwise)."""
        return list(self._mixed.names) if self._mixed is not None else []

    def batch(self, epoch: int, step: int) -> Batch:
        """The Batch of (epoch, step): ``x, y = batch`` (int64, C-contiguous, (batch_size, T); y[i, j]
        the label of x[i, j]) and its packed-attention fields (train/samples.py).

        Padding, ``fresh`` and cross-document masking as in the module docstring. Pure: same
        arguments, same arrays.
        """
        ep = self._epoch(epoch)
        if ep.mix is not None:
            pos = self.row_index(epoch, step)
            return self._mixed.gather(ep.mix[0][pos], ep.mix[1][pos], self.T, self.pad_id, self.ignore_index,
                                      self.positions, self.cross_doc_labels, self.labels == "fresh", self.loss_mask)
        return self._gather(ep.plan, self.row_index(epoch, step))

    def epoch(self, epoch: int, start: int = 0) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """``batch(epoch, s)`` for s in [start, steps(epoch)): resume an epoch at step ``start``."""
        n = self.steps(epoch)
        if not 0 <= start <= n:  # checked now, not at the first next()
            raise StepOutOfRange(f"start {start} is outside [0, {n}] for epoch {epoch}")
        return (self.batch(epoch, s) for s in range(start, n))

    def locate(self, k: int) -> tuple[int, int]:
        """(epoch, step) of the k-th batch on this rank when epochs are walked one after another.

        For a loop that counts iterations (nanoGPT): ``loader.batch(*loader.locate(k))``. O(1) for
        one plan (every epoch has the same batches) and for a list of plans (they cycle); a plan
        re-planned per epoch (``--random-offset``, a callable) is counted epoch by epoch, at most
        ``MAX_COUNTED_EPOCHS`` of them (ConfigError past that: pass (epoch, step) to ``batch``).
        """
        if not isinstance(k, (int, np.integer)) or isinstance(k, bool):
            raise ConfigError(f"Loader.locate: k must be an int, got {k!r}")
        if k < 0:
            raise StepOutOfRange(f"batch number {k} is negative")
        k = int(k)
        period = self._period()
        if period is not None:  # epochs' batch counts repeat with this period: arithmetic
            while len(self._steps) < period:  # counted once (each is a plan's check)
                self._steps.append(self._count(len(self._steps)))
            counts = self._steps[:period]
            per_cycle = sum(counts)
            if per_cycle == 0:
                raise DataError("epoch 0 has no full batch: cannot count batches past it")
            cycles, k = divmod(k, per_cycle)
            for e, n in enumerate(counts):
                if k < n:
                    return cycles * period + e, k
                k -= n
        epoch = 0
        while True:
            if epoch == len(self._steps):
                if epoch >= MAX_COUNTED_EPOCHS:
                    raise ConfigError(f"Loader.locate: batch {k} lies past {MAX_COUNTED_EPOCHS:,} epochs, each planned anew to"
                                      " count its batches; keep (epoch, step) in the loop and call batch(epoch, step)")
                n = self._count(epoch)
                if n == 0:
                    raise DataError(f"epoch {epoch} has no full batch: cannot count batches past it")
                self._steps.append(n)
            n = self._steps[epoch]
            if k < n:
                return epoch, int(k)
            k -= n
            epoch += 1

    def _period(self) -> int | None:
        """Epochs after which the plans (and so the batch counts) repeat; None when unknown."""
        src = self._source
        if callable(src) and not isinstance(src, Plan):
            return None
        if isinstance(src, Sequence) and not isinstance(src, (str, bytes)):
            return len(src) or None
        return None if self._base is not None and self._base.sidecar.params.random_offset else 1

    def _count(self, epoch: int) -> int:
        """``steps(epoch)`` without drawing the epoch's order when it is not cached."""
        if epoch in self._cache:
            return self._cache[epoch].steps
        if self._mixed is not None:  # every epoch of a mixture serves the same counts
            return sum(self._mixed.counts) // (self.world_size * self.batch_size)
        plan = self._resolve(epoch)
        self._check(plan, epoch)
        win = plan.windows
        n = int((win["length"] == plan.span).sum()) if self._short(plan) == "drop" else len(win)
        return n // (self.world_size * self.batch_size)

    def exposure(self, epoch: int = 0) -> Exposure:
        """How many labels epoch ``epoch`` trains on, and how often each token is a label (all ranks).
        A mixture's figures are its sources' together, and ``sources`` has each one's own."""
        ep = self._epoch(epoch)
        if ep.mix is not None:
            return self._mixture_exposure(epoch, ep)
        served_idx = ep.index[np.sort(ep.order[: ep.steps * self.world_size * self.batch_size])]
        plan = ep.plan
        if plan.best_fit or self.cross_doc_labels == "mask":  # labels per segment, not per window
            everything = self._label_rows(plan, np.arange(len(plan.windows)))
            served = self._label_rows(plan, np.sort(served_idx))
        else:
            everything, served = plan.rows, plan.rows[np.sort(served_idx)]
        f = label_counts(everything, served, len(self._open()), fresh=self.labels == "fresh", mask=self._mask)
        return Exposure(epoch=int(epoch), batches=ep.steps, world_size=self.world_size, batch_size=self.batch_size,
                        windows=len(ep.rows), served=len(served_idx), left_out=ep.left_out, **f)

    def _mixture_exposure(self, epoch: int, ep: _Epoch) -> Exposure:
        served = ep.steps * self.world_size * self.batch_size
        src, win = ep.mix[0][:served], ep.mix[1][:served]
        parts, per_source = [], []
        for i, (name, plan) in enumerate(zip(self._mixed.names, self._mixed.plans)):
            idx = np.sort(win[src == i])
            every = np.arange(len(plan.windows))
            docs = lambda i=i: self._mixed.docs(i)  # noqa: E731
            f = label_counts(self._label_rows(plan, every, docs), self._label_rows(plan, idx, docs),
                             len(self._mixed.tokens(i)), fresh=self.labels == "fresh",
                             mask=self._mixed.mask(i) if self.loss_mask else None)
            times = np.bincount(idx, minlength=len(plan.windows))
            per_source.append({"name": name, "windows": len(plan.windows), "served": int(len(idx)),
                               "tokens": int(plan.windows["length"][idx].sum(dtype=np.int64)),
                               "repeats_min": int(times.min()) if len(times) else 0,
                               "repeats_max": int(times.max()) if len(times) else 0, **f})
            parts.append(f)
        total = {k: sum(f[k] for f in parts) for k in ("file_tokens", "trained_tokens", "targetable", "untargetable", "untrained")}
        return Exposure(epoch=int(epoch), batches=ep.steps, world_size=self.world_size, batch_size=self.batch_size,
                        windows=len(ep.mix[0]), served=served, left_out=ep.left_out, **total,
                        targets_min=min(f["targets_min"] for f in parts), targets_max=max(f["targets_max"] for f in parts),
                        targets_mean=total["trained_tokens"] / total["targetable"] if total["targetable"] else 0.0,
                        sources=per_source)

    def _label_rows(self, plan: Plan, index: np.ndarray, docs=None) -> np.ndarray:
        """PLAN_DTYPE rows whose label ranges ``[start + max(fresh, 1), start + length)`` are exactly
        the labels windows ``index`` train on, one row per segment (for ``label_counts``)."""
        if not len(index):  # a source an epoch draws no window of (a mixture written before mix refused that)
            return np.zeros(0, formats.PLAN_DTYPE)
        win = plan.windows[index]
        mask = self.cross_doc_labels == "mask"
        if plan.best_fit:
            first = plan.segment_index
            per = first[index + 1] - first[index]
            lo = first[index]
            start_in = np.cumsum(per) - per
            segs = plan.rows[np.arange(int(per.sum()), dtype=np.int64) + np.repeat(lo - start_in, per)]
            a, l = segs["start"].astype(np.int64), segs["length"].astype(np.int64)
            lead = np.zeros(len(a), bool)
            lead[np.cumsum(per) - per] = True  # each window's first segment
            fresh = np.zeros(len(a), np.int64)
        else:
            lay = regular_layout(win["start"], win["length"], self.T, (docs or self._docs)())
            cut_row, cut_col = lay.cuts
            per = np.bincount(cut_row, minlength=len(win)) + 1
            row = np.repeat(np.arange(len(win)), per)
            ends = np.full(len(row), 0, np.int64)
            lead = np.zeros(len(row), bool)
            lead[np.cumsum(per) - per] = True
            col = np.zeros(len(row), np.int64)
            col[~lead] = cut_col
            a = win["start"].astype(np.int64)[row] + col
            ends[:-1] = a[1:]
            last = np.append(lead[1:], True)  # the last segment of its window
            ends[last] = (win["start"].astype(np.int64) + win["length"])[row[last]]
            l = ends - a
            fresh = None
        out = np.zeros(len(a), formats.PLAN_DTYPE)
        extend = ~lead & (not mask)  # kept: a later segment's first token is the previous token's label
        if fresh is None:  # the window's fresh labels start at token start + fresh: from the row's own start
            fresh = np.clip(win["start"].astype(np.int64)[row] + win["fresh"][row] - (a - extend), 0, l + extend)
        out["start"], out["length"], out["fresh"] = a - extend, l + extend, fresh
        return out

    # -- internals --

    def _gather(self, plan: Plan, index: np.ndarray) -> Batch:
        fresh = plan.windows["fresh"][index] if self.labels == "fresh" else None
        batch = gather(self._open(), plan, index, self.T, self.pad_id, self.ignore_index, self.positions,
                       self.cross_doc_labels, self._docs, fresh)
        if self._mask is not None:  # a label whose token is not trained on (a prompt, a user turn) is ignored
            trained = gather(self._mask, plan, index, self.T, 0, 0, "window", "keep", self._docs).y
            batch.y[trained == 0] = self.ignore_index
        return batch

    def _docs(self) -> np.ndarray:
        """int64 document starts of the tokens (document index, else EOT ids), read once."""
        if self._doc_starts is None:
            from .. import planning

            if isinstance(self._tokens_arg, (str, Path)):
                src = open_planned(self._tokens_arg, self._planned_source())
                ds, _ = planning.documents(src, "doc", src.tokens)
            else:
                ds = planning.boundaries.doc_starts_from_eot(np.asarray(self._tokens), self.eot)
            self._doc_starts = np.ascontiguousarray(ds, np.int64)
        return self._doc_starts

    def _find_tokens(self, plan, tokens_path, short):
        """``tokens_path``, or the token file the plan names when it is None (``tokensrc.plan_tokens``);
        for a mixture, its sources (``Mixed``), which name their own."""
        one = not callable(plan) and not (isinstance(plan, Sequence) and not isinstance(plan, (str, bytes)))
        if one and not isinstance(plan, (Plan, str, Path)):  # np.load(PLAN.npy): rows say nothing of T or targets
            raise ConfigError(f"Loader takes a Plan, a plan's path, a list of them or a function epoch → plan, not a"
                              f" {type(plan).__name__}: pass the .npy's path (its sidecar says T and targets)")
        if one:
            self._base = plan if isinstance(plan, Plan) else read_plan(plan)
        if one and self._base.sidecar.mixture:
            if tokens_path is not None:
                raise ConfigError("Loader: a mixture's sources name their own token files: leave tokens_path out")
            if short == "drop":
                raise ConfigError("Loader: a mixture serves every window its counts say (short ones padded): leave short out")
            self._mixed = Mixed(self._base)
            return None
        if tokens_path is None:
            if not one or self._base.path is None:
                raise ConfigError("Loader: tokens_path is needed unless the plan is one file whose sidecar names its tokens")
            tokens_path = plan_tokens(self._base.path, self._base.sidecar.source)
        return tokens_path

    def _planned_source(self):
        """The sidecar ``source`` of the one plan given (a bare token file is read at its width), or None."""
        return self._base.sidecar.source if self._base is not None else None

    def _open(self):
        if self._tokens is None:
            # tokensrc.open_source (a bare file at the width its plan records), refused early when it cannot be planned
            src = open_planned(self._tokens_arg, self._planned_source())
            self._tokenizer = src.tokenizer_entry  # meta.json's tokenizer entry (None for a bare .bin)
            self._token_file = src.path if src.files is None and not src.sharded and src.path.is_file() else None
            self._tokens = src.tokens  # a memmap, or the logical stream of a sharded split
            mask = src.entry.mask if src.entry is not None else None
            if mask is not None and mask.tokens and self.loss_mask:
                self._mask = open_mask(src.path.parent / mask.file, mask.tokens)
        return self._tokens

    def _resolve(self, epoch: int) -> Plan:
        src = self._source
        if callable(src) and not isinstance(src, Plan):
            got = src(epoch)
        elif isinstance(src, Sequence) and not isinstance(src, (str, bytes)):
            if not len(src):
                raise ConfigError("Loader: an empty list of plans")
            got = src[epoch % len(src)]
        else:
            if self._base is None:
                self._base = src if isinstance(src, Plan) else read_plan(src)
            p = self._base.sidecar.params
            if p.random_offset and p.epoch != epoch:  # a new offset every epoch
                return replan_for_epoch(self._base, self._tokens_arg, epoch)
            return self._base
        if isinstance(got, Plan):
            return got
        if not isinstance(got, (str, Path)):
            raise ConfigError(f"Loader: the plan of epoch {epoch} is a {type(got).__name__}: give a Plan or a plan's path")
        return read_plan(got)

    def _epoch(self, epoch: int) -> _Epoch:
        if not isinstance(epoch, (int, np.integer)) or isinstance(epoch, bool) or epoch < 0:
            raise ConfigError(f"Loader: epoch must be an int >= 0, got {epoch!r}")
        epoch = int(epoch)
        if epoch in self._cache:
            self._cache.move_to_end(epoch)
            return self._cache[epoch]
        plan = self._resolve(epoch)
        if self._mixed is not None:
            return self._mixture_epoch(plan, epoch)
        self._check(plan, epoch)
        rows = plan.windows
        short = self._short(plan)
        index = np.flatnonzero(rows["length"] == plan.span) if short == "drop" else np.arange(len(rows))
        index = index[np.argsort(rows["start"][index], kind="stable")]
        n = len(index)
        per_step = self.world_size * self.batch_size
        steps = n // per_step
        if epoch == 0 and steps == 0:
            what = "full-length windows" if short == "drop" else "windows"
            short_ones = len(rows) - n if short == "drop" else 0
            hint = f"; short='pad' also serves the {short_ones} shorter window(s)" if short_ones else ""
            if not len(rows):
                hint = "; the plan has no windows at all (its token file is shorter than one window, or empty)"
            raise DataError(f"{plan.path or 'plan'}: {n} {what}, fewer than world_size × batch_size = {per_step}:"
                            f" not one batch per rank{hint}")
        order = np.random.default_rng([self.seed, epoch, ORDER_STREAM]).permutation(n)
        ep = _Epoch(plan, rows[index], index, order, steps, n - steps * per_step)
        self._cache[epoch] = ep
        while len(self._cache) > CACHED_EPOCHS:
            self._cache.popitem(last=False)
        return ep

    def _mixture_epoch(self, plan: Plan, epoch: int) -> _Epoch:
        """A mixture's epoch: its positions served in the order ``Mixed.epoch`` draws (the prefix
        property lives in that order, so ranks take consecutive positions, never a permutation)."""
        src, win = self._mixed.epoch(self.seed, epoch)
        n, per_step = len(src), self.world_size * self.batch_size
        steps = n // per_step
        if steps == 0:
            raise DataError(f"{plan.path or 'mixture'}: {n} windows an epoch, fewer than world_size × batch_size = {per_step}")
        ident = np.arange(n, dtype=np.int64)
        ep = _Epoch(plan, None, ident, ident, steps, n - steps * per_step, mix=(src, win))
        self._cache[epoch] = ep
        while len(self._cache) > CACHED_EPOCHS:
            self._cache.popitem(last=False)
        return ep

    def _short(self, plan: Plan) -> str:
        """``short`` as given, else "pad" for a packed plan and "drop" for any other."""
        return self.short or ("pad" if plan.packed else "drop")

    def _check(self, plan: Plan, epoch: int) -> None:
        where = plan.path or f"the plan of epoch {epoch}"
        if not plan.targets:
            raise ConfigError(f"{where}: made with --no-targets: a window has no next token for y; re-plan with targets")
        p = plan.sidecar.params
        if p.shard is not None and self.world_size > 1:
            raise ConfigError(f"{where}: is shard {p.shard} of {p.shards}; give the Loader the whole plan, it splits the windows by rank itself")
        if self._cache:
            first = next(iter(self._cache.values())).plan
            if plan.span != first.span:
                raise ConfigError(f"{where}: T {plan.T}, but epoch {next(iter(self._cache))}'s plan has T {first.T}: one T per Loader")
        source = plan.sidecar.source
        want, n = source.tokens, len(self._open())  # opened again in a process the Loader was pickled to
        named = self._tokens_arg if isinstance(self._tokens_arg, (str, Path)) else "the tokens given"
        if isinstance(want, int) and n != want:
            raise DataError(f"{where} was made for {want} tokens ({source.file}),"
                            f" but {named} holds {n}: pass the .bin the plan was made for")
        check_sample(where, source, getattr(self, "_token_file", None), self._sampled)
        dtype = getattr(self._tokens, "dtype", None)
        if isinstance(self._tokens_arg, (str, Path)) and source.dtype and dtype is not None and np.dtype(dtype).itemsize != np.dtype(formats.normalize_dtype(source.dtype)).itemsize:
            raise DataError(f"{where} was made for {source.dtype} tokens, but {named} holds {np.dtype(dtype)}")
        check_rows(plan, n, where)

    def _eot(self, plan: Plan) -> int:
        return plan_eot(plan, self._tokenizer)

    def __getstate__(self):  # for DataLoader workers: send paths, not a memmap or cached orders
        state = dict(self.__dict__)
        if isinstance(self._tokens_arg, (str, Path)):
            state["_tokens"] = None
        state["_cache"] = OrderedDict()
        state["_doc_starts"] = None  # read again in the worker (from the document index) when needed
        return state


def label_counts(plan_rows: np.ndarray, served: np.ndarray, n: int, fresh: bool = False, mask=None) -> dict:
    """Times each token is a label when the windows ``served`` (rows of the plan) are trained on once.

    A window [s, s + L) has labels at tokens [s + 1, s + L) (from s + fresh with ``fresh``).
    Keys as ``Exposure``'s: file_tokens, trained_tokens, targetable (tokens some window of
    ``plan_rows`` has as a label), untargetable, untrained, targets_min/mean/max (over the
    targetable tokens). O(windows log windows), no per-token array. With a loss ``mask`` (one
    0/1 per token) only the tokens it trains on count, file_tokens included: a prompt's token is
    never a trained label.
    """
    ps = plan_rows["start"].astype(np.int64)
    ss = served["start"].astype(np.int64)
    sb = ss + served["length"]
    sa = np.minimum(ss + (np.maximum(served["fresh"], 1) if fresh else 1), sb)
    count, plan_count, seg = _sweep(sa, sb, ps + 1, ps + plan_rows["length"], mask)
    if mask is not None:
        n = _ones_before(np.array([len(mask)], np.int64), mask)[0]
    targetable = int(seg[plan_count > 0].sum())
    trained = int((seg * count).sum())
    hit = (plan_count > 0) & (seg > 0)
    return {"file_tokens": int(n), "trained_tokens": trained, "targetable": targetable, "untargetable": int(n) - targetable,
            "untrained": int(seg[hit & (count == 0)].sum()),
            "targets_min": int(count[hit].min()) if hit.any() else 0,
            "targets_mean": trained / targetable if targetable else 0.0,
            "targets_max": int(count.max()) if len(count) else 0}


def _ones_before(u: np.ndarray, mask) -> np.ndarray:
    """For each of the sorted positions ``u``: how many 1s ``mask`` has before it, in one pass
    over ``mask`` in bounded pieces (a memmap is not read whole)."""
    out = np.zeros(len(u), np.int64)
    total = k = 0
    for a in range(0, len(mask), MASK_PIECE):
        part = np.asarray(mask[a : a + MASK_PIECE], np.int64)
        c = np.concatenate([[0], np.cumsum(part)])
        hi = int(np.searchsorted(u, a + len(part), side="right"))
        out[k:hi] = total + c[np.clip(u[k:hi] - a, 0, len(part))]
        total += int(c[-1])
        k = hi
    out[k:] = total
    return out


MASK_PIECE = 1 << 24  # mask bytes counted at a time


def _sweep(sa, sb, pa, pb, mask=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Over the segments between the sorted distinct ends of intervals [sa, sb) and [pa, pb):
    (how many [sa, sb) cover each segment, how many [pa, pb) do, segment lengths: with a loss
    ``mask``, the trained tokens in each). O(n log n) in the intervals, no per-token array."""
    pos = np.concatenate([sa, sb, pa, pb]).astype(np.int64)
    if not len(pos):
        z = np.zeros(0, np.int64)
        return z, z, z
    u, inv = np.unique(pos, return_inverse=True)
    n1, n2 = len(sa), len(pa)
    ds = np.bincount(inv[: 2 * n1], weights=np.r_[np.ones(n1), -np.ones(n1)], minlength=len(u))
    dp = np.bincount(inv[2 * n1 :], weights=np.r_[np.ones(n2), -np.ones(n2)], minlength=len(u))
    lengths = np.diff(u) if mask is None else np.diff(_ones_before(u, mask))
    return (np.cumsum(ds)[:-1].round().astype(np.int64), np.cumsum(dp)[:-1].round().astype(np.int64), lengths)


def replan_for_epoch(plan: Plan, tokens_path, epoch: int) -> Plan:
    """The plan ``winsample windows`` writes for ``epoch`` with the same options as ``plan`` (a
    ``--random-offset`` plan): windows over ``tokens_path`` with that epoch's offset."""
    from .. import planning  # the planning layer, not the windows command; loaded only to re-plan

    if not isinstance(tokens_path, (str, Path)):
        raise ConfigError("Loader: a --random-offset plan is re-planned for each epoch from the .bin: pass tokens_path as a path")
    p = plan.sidecar.params
    if p.boundaries in ("paragraph", "sentence"):
        raise ConfigError(f"{plan.path or 'plan'}: --random-offset with --boundaries {p.boundaries} is refused by windows; re-plan it")
    src = open_planned(tokens_path, plan.sidecar.source)  # a bare file: the width the plan was made for
    bare = src.entry is None and src.layout is None
    (res,) = planning.build_plans(tokens_path, replace(planning.Options.replan(p, epoch), dtype=src.dtype if bare else None))
    # the same source and tokenizer; this epoch's params and stats
    side = replace(plan.sidecar, params=formats.PlanParams(res["params"]), stats=formats.PlanStats(res["stats"]))
    return Plan(res["rows"], side, None)
