"""Training-loop API: read a plan, draw (x, y) batches from it.

A ``Plan`` is the plan rows (``formats.PLAN_DTYPE``), its sidecar (``formats.PlanSidecar``) and the numbers a loop
needs (T, span, targets). ``get_batch`` samples only *full* windows (length == span): a short
window (a short document, ``--tail short``, a semantic window ending early) has no fixed
(T,) shape, so it is skipped rather than padded; train on those through ``--materialize``
(padded, with their lengths) if you need them, or use ``winsample.Loader`` (train/loader.py), which
walks every window once per epoch and pads short ones. A best-fit plan's windows are drawn padded
(they are short by design). Both return a ``Batch`` (train/samples.py) that unpacks to (x, y).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from .. import disk, formats
from ..errors import ConfigError, DataError, WinsampleError
from ..tokensrc import open_planned, plan_tokens
from .samples import CROSS_DOC, POSITIONS, Batch, check_choice, gather

MAX_BATCH = 1 << 24  # windows in one batch: beyond this a typo, not a batch (2**24 × T ids would not fit memory)


def check_batch_size(who: str, batch_size) -> int:
    """``batch_size`` as an int in [1, MAX_BATCH], else ConfigError naming ``who``."""
    if not isinstance(batch_size, (int, np.integer)) or isinstance(batch_size, bool):
        raise ConfigError(f"{who}: batch_size must be an int, got {batch_size!r}")
    if not 1 <= batch_size <= MAX_BATCH:
        raise ConfigError(f"{who}: batch_size must be in [1, {MAX_BATCH}], got {batch_size}")
    return int(batch_size)


@dataclass
class Plan:
    """A window plan: ``rows`` (start, length, doc, fresh; segments for a best-fit plan),
    ``sidecar`` (params, source, stats)."""

    rows: np.ndarray
    sidecar: formats.PlanSidecar
    path: Path | None = None

    def __getstate__(self):  # to a worker process: not the loss mask get_batch mapped (it maps its own)
        return {k: v for k, v in self.__dict__.items() if k != "_planned_mask"}

    @property
    def best_fit(self) -> bool:
        """Rows are segments (``formats.PACKED_DTYPE``), several per window."""
        return self.sidecar.best_fit

    @property
    def packed(self) -> bool:
        """Whole documents side by side in each window (``--pack best-fit`` or greedy ``--pack``):
        windows shorter than the span by design, served padded by default."""
        return self.best_fit or self.sidecar.params.pack is True

    @cached_property
    def windows(self) -> np.ndarray:
        """One ``PLAN_DTYPE`` row per window. For a best-fit plan: its first segment's start and
        doc, its total length, fresh 0 (the tokens are the segments', see ``segment_index``)."""
        if not self.best_fit:
            return self.rows
        first = self.segment_index
        out = np.zeros(len(first) - 1, formats.PLAN_DTYPE)
        if len(out):
            out["start"], out["doc"] = self.rows["start"][first[:-1]], self.rows["doc"][first[:-1]]
            out["length"] = np.add.reduceat(self.rows["length"].astype(np.int64), first[:-1])
        return out

    @cached_property
    def segment_index(self) -> np.ndarray:
        """Best-fit plans: int64 [windows + 1], window i's segments are rows ``[idx[i], idx[i+1])``.
        DataError unless the window numbers run 0, 1, … without a gap."""
        w = self.rows["window"].astype(np.int64)
        if len(w) and (w[0] != 0 or (np.diff(w) < 0).any() or (np.diff(w) > 1).any()):
            raise DataError(f"{self.path or 'plan'}: segment rows must be sorted by window, numbered 0, 1, … without a gap")
        return np.searchsorted(w, np.arange((int(w[-1]) + 2) if len(w) else 1), "left").astype(np.int64)

    @cached_property
    def columns(self) -> dict[str, np.ndarray]:
        """Contiguous int64 copies of the columns a batch reads (a field of the structured rows is
        a strided view): ``win_start``, ``win_length`` (per window) and, for a best-fit plan,
        ``seg_start``, ``seg_length``, ``seg_doc`` (per segment)."""
        cols = {"win_start": self.windows["start"].astype(np.int64), "win_length": self.windows["length"].astype(np.int64)}
        if self.best_fit:
            cols.update(seg_start=self.rows["start"].astype(np.int64), seg_length=self.rows["length"].astype(np.int64),
                        seg_doc=self.rows["doc"].astype(np.int64))
        return cols

    @property
    def T(self) -> int:
        return int(self.sidecar.T)

    @property
    def span(self) -> int:
        return int(self.sidecar.span)

    @property
    def targets(self) -> bool:
        return self.sidecar.targets

    @property
    def full(self) -> np.ndarray:
        """Start offsets of the windows that span the full ``span`` tokens (contiguous plans)."""
        return self.windows["start"][self.windows["length"] == self.span]

    def __len__(self) -> int:
        """Windows of the plan."""
        return len(self.windows)


def read_plan(path) -> Plan:
    """Load ``PLAN.npy`` and its sidecar (DataError if either is not a winsample plan, or if its
    rows are no longer the ones its sidecar's ``rows_checksum`` records: a plan edited by hand)."""
    rows, side = formats.load_plan(path)
    if side.rows_checksum is not None and formats.rows_checksum(rows) != side.rows_checksum:  # ~5 GB/s: cheap beside training
        made, again = ("mix", "mix its sources again") if side.mixture else ("windows", "plan it again")
        raise DataError(f"{path}: its rows are not the ones its sidecar records (rows_checksum): edited after {made}"
                        f" wrote them; {again} (winsample verify names the check)")
    return Plan(rows, side, Path(path))


def get_batch(plan: Plan | str | Path, tokens, batch_size: int, rng, *, positions: str = "window",
              cross_doc_labels: str = "keep", ignore_index: int = -1, loss_mask=None) -> Batch:
    """A Batch of ``batch_size`` windows drawn uniformly, with replacement, by ``rng`` (a
    ``np.random.Generator`` or an int seed): ``x, y = get_batch(...)``, int64 C-contiguous
    (batch_size, T), y = x shifted by one token, plus the packed fields of ``train.samples.Batch``.

    A contiguous plan's draws are its full windows (length == span), so x and y hold no padding;
    a packed plan's (``Plan.packed``) are all its windows, padded after their tokens (x with the
    tokenizer's EOT, y with ``ignore_index``). ``positions`` and ``cross_doc_labels`` as for ``Loader``.
    ``plan`` is a ``Plan`` or its path (``read_plan``); ``tokens`` the token array (a memmap of
    the plan's .bin) or its path (opened by ``tokensrc.open_source``); only the drawn windows are read.
    ``loss_mask``: None applies the loss mask of the token file (``encode --chat``: y is
    ``ignore_index`` where the label is not trained on): the one given by its path, or, for an
    array, the plan's own token file's (found by its sidecar); an array (one 0/1 per token) is
    applied as that mask, False serves every label.
    """
    check_batch_size("get_batch", batch_size)
    check_choice("get_batch", "positions", positions, POSITIONS)
    check_choice("get_batch", "cross_doc_labels", cross_doc_labels, CROSS_DOC)
    if isinstance(plan, (str, Path)):
        plan = read_plan(plan)
    elif not isinstance(plan, Plan):  # e.g. np.load(PLAN.npy): the rows alone say nothing of T or targets
        raise ConfigError(f"get_batch takes a Plan or a plan's path, not a {type(plan).__name__}: pass the .npy's path"
                          " (its sidecar says T and targets) or winsample.read_plan(path)")
    if not plan.targets:
        raise ConfigError("plan was made with --no-targets: a window has no next token for y; re-plan with targets")
    src = None
    if isinstance(tokens, (str, Path)):
        src = open_planned(tokens, plan.sidecar.source)  # a bare file: the width the plan was made for
        tokens = src.tokens
        one_file = src.files is None and not src.sharded and src.path.is_file()
        check_sample(plan.path or "plan", plan.sidecar.source, src.path if one_file else None, {})
    want = plan.sidecar.source.tokens
    if want is not None and len(tokens) != want:
        raise DataError(
            f"{plan.path or 'plan'} was made for {want} tokens ({plan.sidecar.source.file}),"
            f" but the tokens given hold {len(tokens)}: pass the .bin the plan was made for"
        )
    if plan.__dict__.get("_rows_fit") != len(tokens):  # checked once per plan object (a training loop draws often)
        check_rows(plan, len(tokens), plan.path or "plan")
        plan.__dict__["_rows_fit"] = len(tokens)
    win = plan.windows
    eligible = np.arange(len(win)) if plan.packed else np.flatnonzero(win["length"] == plan.span)
    if not len(eligible):
        raise DataError(f"{plan.path or 'plan'}: no full-length window (span {plan.span}) to draw a batch from")
    if not isinstance(rng, np.random.Generator):
        if not isinstance(rng, (int, np.integer)) or isinstance(rng, bool) or rng < 0:
            # None would seed from the OS: batches no run could repeat (randomness only from a seed)
            raise ConfigError(f"get_batch: rng must be a np.random.Generator or an int seed >= 0, got {rng!r}")
        rng = np.random.default_rng(int(rng))
    pick = eligible[rng.integers(0, len(eligible), size=batch_size)]
    eot = plan_eot(plan, src.tokenizer_entry if src is not None else None)

    def docs() -> np.ndarray:
        from .. import planning  # loaded only when a field needs the documents

        if src is not None:
            return np.asarray(planning.documents(src, "doc", tokens)[0], np.int64)
        return planning.boundaries.doc_starts_from_eot(np.asarray(tokens), eot)

    batch = gather(tokens, plan, pick, plan.T, eot, int(ignore_index), positions, cross_doc_labels, docs)
    mask = loss_mask
    if mask is None and src is None:  # an array: the mask beside the plan's own token file, if it has one
        mask = _planned_mask(plan, len(tokens))
    if mask is None and src is not None and src.entry is not None and src.entry.mask is not None and src.entry.mask.tokens:
        mask = open_mask(src.path.parent / src.entry.mask.file, src.entry.mask.tokens)
    if mask is not None and mask is not False:
        if len(mask) != len(tokens):
            raise ConfigError(f"get_batch: loss_mask has {len(mask)} entries for {len(tokens)} tokens")
        trained = gather(mask, plan, pick, plan.T, 0, 0, "window", "keep", docs).y
        batch.y[trained == 0] = int(ignore_index)
    return batch


def _planned_mask(plan: Plan, n: int):
    """The loss mask of the token file ``plan`` was made for (found by its sidecar, as the Loader
    finds it) when that file has one and holds ``n`` tokens, else None; looked up once per plan
    object. nanoGPT's loop passes a memmap: a chat set's prompts must not train silently."""
    if "_planned_mask" not in plan.__dict__:
        found = None
        if plan.path is not None:
            try:
                src = open_planned(plan_tokens(plan.path, plan.sidecar.source), plan.sidecar.source)
            except WinsampleError:  # the plan's file is elsewhere: the array is all there is
                if plan.sidecar.tokenizer is not None:  # a bare .bin planned with no --encoding has no mask to miss
                    warnings.warn(f"get_batch: {plan.path}'s token file is not where its sidecar says, so no loss mask"
                                  " was looked up for the tokens given and every label is served: pass the token"
                                  " file's path, or loss_mask= its mask (False: every label)", stacklevel=3)
                src = None
            m = src.entry.mask if src is not None and src.entry is not None else None
            if m is not None and m.tokens and src.n == n:
                found = open_mask(src.path.parent / m.file, m.tokens)
        plan.__dict__["_planned_mask"] = found
    return plan.__dict__["_planned_mask"]


def check_rows(plan: Plan, n: int, where) -> None:
    """DataError unless every row of ``plan`` lies inside the tokens [0, ``n``) and every window
    holds 2 to span tokens (a best-fit plan's segments at least 1 each)."""
    rows, what = plan.rows, "segment" if plan.best_fit else "window"
    if len(rows) and (int(rows["start"].min()) < 0 or int((rows["start"].astype(np.int64) + rows["length"]).max()) > n):
        raise DataError(f"{where}: a {what} lies outside the tokens [0, {n})")
    if plan.best_fit and len(rows) and int(rows["length"].min()) < 1:
        raise DataError(f"{where}: segment lengths must be at least 1")
    win = plan.windows  # a best-fit plan's windows: their segments' total
    if len(win) and (int(win["length"].min()) < 2 or int(win["length"].max()) > plan.span):
        raise DataError(f"{where}: window lengths must be in [2, span {plan.span}]")


def check_sample(where, source, token_file, cache: dict) -> None:
    """DataError when ``token_file`` is not the file the plan was made for by the sampled checksum
    the sidecar records (``disk.sample_checksum``: size, first and last MiB, 16 spread blocks):
    a .bin of the right length but other content is caught before training on it, at ~3 MiB read."""
    if token_file is None or not source.sample:
        return
    if token_file not in cache:
        cache[token_file] = disk.sample_checksum(token_file)
    if cache[token_file] != source.sample:
        raise DataError(f"{where} was made for other tokens than {token_file}: the sampled checksum (size, first and last"
                        f" MiB, 16 spread blocks) differs; pass the .bin the plan was made for (verify checks it whole)")


def plan_eot(plan: Plan, tokenizer_entry: dict | None = None) -> int:
    """The end-of-document id: the plan sidecar's tokenizer's, else ``tokenizer_entry``'s (meta.json),
    else GPT-2's (a bare .bin is nanoGPT's)."""
    for tok in (plan.sidecar.tokenizer or {}, tokenizer_entry or {}):
        if isinstance(tok.get("eot"), int) and not isinstance(tok.get("eot"), bool):
            return tok["eot"]
    from .. import tokenizer

    return tokenizer.load(tokenizer.DEFAULT_ENCODING).eot


def open_mask(path: Path, tokens: int) -> np.ndarray:
    """A split's loss mask as a memmap of ``tokens`` bytes; DataError when it is missing or of
    another size than its tokens (``winsample verify`` says more)."""
    try:
        size = path.stat().st_size
    except OSError as e:
        raise DataError(f"{path}: the loss mask meta.json names is not readable ({e.strerror}); encode again") from None
    if size != tokens:
        raise DataError(f"{path}: {size} bytes for {tokens} tokens (one byte per token): run `winsample verify`")
    return np.memmap(path, dtype=np.uint8, mode="r", shape=(tokens,))
