"""The parameters of a window plan: -T, stride, offset, tails, and the checks they must pass.

``Options`` is everything ``winsample windows`` takes besides paths; ``check_options`` refuses
what cannot work before anything is read or written. See ``planning`` for the window arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .. import formats
from ..errors import ConfigError

PLAN_DTYPE = formats.PLAN_DTYPE
PACKED_DTYPE = formats.PACKED_DTYPE
TAILS = ("align", "drop", "short")
SHORTS = ("keep", "drop")
BOUNDARIES = ("none", "doc", "paragraph", "sentence")
FORMATS = ("npy", "txt", "jsonl")
PACKS = ("greedy", "best-fit")
LONGS = ("split", "truncate", "drop")
MAX_T = (1 << 31) - 2  # span = T + 1 fits the plan's int32 length column
MAX_POSITION = 1 << 62  # token positions (int64) with room for start + length
MAX_SHARDS = 1 << 16  # --shards: one plan file each; more ranks than this is a typo
MAX_SCALES = 256  # -T values in one run: one plan file set each; thousands are a runaway, not a sweep


def span_of(T: int, targets: bool = True) -> int:
    """Tokens a window spans: T + 1 with targets (x and y overlap by T - 1), T without."""
    if T < 1:
        raise ConfigError(f"-T must be at least 1, got {T}")
    return T + 1 if targets else T


def resolve_stride(span: int, T: int, stride: int | None = None, overlap: float | None = None) -> int:
    """Stride in tokens: ``stride``, or round(span × (1 − overlap)) (at least 1), or T // 2."""
    if stride is not None and overlap is not None:
        raise ConfigError("--stride and --overlap both set: give one")
    if overlap is not None:
        if not 0 <= overlap < 1:
            raise ConfigError(f"--overlap must be in [0, 1), got {overlap}")
        stride = max(1, round(span * (1 - overlap)))
    elif stride is None:
        stride = max(1, T // 2)  # the article's pre-training default: half overlap
    if stride < 1:
        raise ConfigError(f"--stride must be at least 1, got {stride}")
    if stride > span:
        # Windows further apart than they are long leave gaps no window covers.
        raise ConfigError(f"--stride {stride} is larger than the span {span}: tokens between windows would never be seen; use a stride <= {span}")
    return int(stride)


def draw_offset(seed: int, epoch: int, stride: int) -> int:
    """The epoch's start offset, uniform in [0, stride), from ``np.random.default_rng([seed, epoch])``.

    One draw per epoch, shared by every document: same (seed, epoch) → same offset.
    """
    return int(np.random.default_rng([seed, epoch]).integers(0, stride))


@dataclass
class Options:
    """Everything ``windows`` takes besides paths (CLI names in comments)."""

    T: list[int]  # -T, one plan per value
    targets: bool = True
    stride: int | None = None
    overlap: float | None = None
    offset: int | None = None
    random_offset: bool = False
    seed: int | None = None
    epoch: int | None = None
    tail: str | None = None  # None → align
    short: str = "keep"
    boundaries: str = "none"
    pack: bool | str = False  # False, True or "greedy" (in file order), "best-fit" (best-fit decreasing)
    long: str | None = None  # best-fit: a document longer than the span is split (default), truncated or dropped
    shuffle: bool = False
    shards: int | None = None
    materialize: bool = False
    format: str = "npy"
    decode: bool = False
    encoding: str | None = None
    dtype: str | None = None  # --dtype: a bare token file's width (None: its meta.json's, else uint16)
    extra: dict = field(default_factory=dict)

    @classmethod
    def replan(cls, params, epoch: int) -> Options:
        """The options that cut a ``--random-offset`` plan (its sidecar's ``PlanParams``) for
        ``epoch``: the same cut, that epoch's offset."""
        return cls(T=[int(params.T)], targets=bool(params.targets), stride=int(params.stride), random_offset=True,
                   seed=int(params.seed), epoch=int(epoch), tail=params.tail, short=params.short or "keep",
                   boundaries=params.boundaries or "none", pack=bool(params.pack), shuffle=bool(params.shuffle))


def check_options(o: Options) -> None:
    """ConfigError for options that cannot work (before anything is read or written)."""
    if not o.T:
        raise ConfigError("-T needs at least one value")
    if len(o.T) > MAX_SCALES:
        raise ConfigError(f"-T: {len(o.T):,} scales in one run; at most {MAX_SCALES} (one plan set each): run windows again for more")
    for T in o.T:
        span_of(T, o.targets)
        if T > MAX_T:  # a plan's length column is int32
            raise ConfigError(f"-T {T} is larger than a plan can hold (at most {MAX_T:,} tokens per window)")
    for name, v in (("--stride", o.stride), ("--offset", o.offset)):
        if v is not None and abs(v) > MAX_POSITION:
            raise ConfigError(f"{name} {v} is out of range (a token position is below 2**62)")
    for name, v in (("--seed", o.seed), ("--epoch", o.epoch)):
        if v is not None and not 0 <= v < 1 << 64:
            raise ConfigError(f"{name} must be in [0, 2**64), got {v}")
    if o.shards is not None and o.shards > MAX_SHARDS:
        raise ConfigError(f"--shards {o.shards}: at most {MAX_SHARDS:,} plan files (one per rank)")
    if o.offset is not None and o.random_offset:
        raise ConfigError("--offset and --random-offset both set: give one")
    if o.offset is not None and o.offset < 0:
        raise ConfigError(f"--offset must be >= 0, got {o.offset}")
    if o.epoch is not None and not (o.random_offset or o.shuffle):
        # Without them every epoch's plan is the same: a silently ignored --epoch hides a typo.
        raise ConfigError("--epoch changes nothing without --random-offset or --shuffle: add one, or drop --epoch")
    if (o.random_offset or o.shuffle) and o.seed is None:
        raise ConfigError("--random-offset and --shuffle need --seed N (randomness only from an explicit seed)")
    if o.tail is not None and o.tail not in TAILS:
        raise ConfigError(f"--tail must be one of {', '.join(TAILS)}")
    if o.short not in SHORTS:
        raise ConfigError(f"--short must be one of {', '.join(SHORTS)}")
    if o.boundaries not in BOUNDARIES:
        raise ConfigError(f"--boundaries must be one of {', '.join(BOUNDARIES)}")
    if o.pack not in (False, True) + PACKS:
        raise ConfigError(f"--pack must be one of {', '.join(PACKS)}, got {o.pack!r}")
    if o.long is not None and o.long not in LONGS:
        raise ConfigError(f"--long must be one of {', '.join(LONGS)}")
    if o.pack == "best-fit":
        _check_best_fit(o)
    else:
        if o.long is not None:
            raise ConfigError("--long says what --pack best-fit does with a document longer than the span: add --pack best-fit")
        if o.pack and o.boundaries != "doc":
            raise ConfigError("--pack packs whole documents: use it with --boundaries doc")
    if o.random_offset and o.boundaries in ("paragraph", "sentence"):
        # Every cut snaps to the nearest edge, so an offset only moves each document's first
        # window and the rest land on the same edges (99.8% of windows shared between epochs).
        raise ConfigError(f"--random-offset does not move the cuts of --boundaries {o.boundaries} (they snap to the same edges every epoch):"
                          " use --boundaries doc|none with --random-offset, or one semantic plan for every epoch (winsample.Loader reorders it per epoch)")
    if o.tail is not None and o.boundaries in ("paragraph", "sentence"):
        raise ConfigError("--tail applies to --boundaries none|doc; with paragraph|sentence every document's last window already ends at its end")
    if o.shards is not None and o.shards < 1:
        raise ConfigError(f"--shards must be at least 1, got {o.shards}")
    if o.format not in FORMATS:
        raise ConfigError(f"--format must be one of {', '.join(FORMATS)}")
    if o.decode and o.format != "jsonl":
        raise ConfigError("--decode adds text to --format jsonl only")
    if o.format != "npy" and (o.shards or o.materialize or len(o.T) > 1):
        raise ConfigError("--shards, --materialize and several -T values need --format npy")
    for T in o.T:
        resolve_stride(span_of(T, o.targets), T, o.stride, o.overlap)


def is_best_fit(o: Options) -> bool:
    return o.pack == "best-fit"


def _check_best_fit(o: Options) -> None:
    """Best-fit windows hold whole documents side by side, so the options that place regular
    windows (or split a plan's rows) have nothing to act on: refused, never silently ignored."""
    if o.boundaries not in ("none", "doc"):
        raise ConfigError(f"--pack best-fit packs whole documents: --boundaries {o.boundaries} does not apply (leave it out, or doc)")
    given = [name for name, v in (("--stride", o.stride), ("--overlap", o.overlap), ("--offset", o.offset),
                                  ("--random-offset", o.random_offset or None), ("--tail", o.tail),
                                  ("--shuffle", o.shuffle or None), ("--shards", o.shards),
                                  ("--materialize", o.materialize or None), ("--epoch", o.epoch)) if v is not None]
    if o.short != "keep":
        given.append("--short drop")
    if given:
        raise ConfigError(f"--pack best-fit places whole documents side by side: {', '.join(given)} does not apply"
                          " (winsample.Loader orders and splits the windows per epoch and rank itself)")
    if o.format != "npy":
        raise ConfigError("--pack best-fit writes a segment plan: use --format npy (inspect PLAN shows its windows)")


def epoch_offset(o: Options, stride: int) -> int:
    """The start offset: --offset, or the epoch's draw with --random-offset, else 0."""
    if o.random_offset:
        return draw_offset(o.seed, o.epoch if o.epoch is not None else 0, stride)
    return o.offset or 0
