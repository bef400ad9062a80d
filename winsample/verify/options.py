"""verify's options: one frozen, typed object instead of a dozen keyword arguments."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .retokenize import DEFAULT_BYTES, DEFAULT_DOCS
from .shingles import MAX_SHINGLES

DEFAULT_MIN_COVERAGE = 0.95  # the source article's threshold for "the corpus is actually seen"
DEFAULT_MAX_LEAKAGE = 0.01  # 1% of val shingles also in train: above that val loss is optimistic
DEFAULT_SHOW = 5  # the article's habit: read five windows before every training run

Progress = Callable[[int], None]


@dataclass(frozen=True)
class VerifyOptions:
    """What ``verify`` checks and how. ``T``: model input length for min_length (tokens).
    ``encoding``: tokenizer for vocab_range and decode when no meta.json says otherwise (default
    gpt2). ``retokenize_sample``: documents the retokenize check re-encodes with the reference (0:
    skip it), at most ``retokenize_bytes`` of their text. ``writes``: files the caller will write
    (--plot's PNG), refused when one is a file checked. ``dtype``: the width of a bare token file
    (``--dtype``), refused when a meta.json, llm.c header or Megatron index says otherwise."""

    plans: Sequence[str | Path] = ()
    T: int | None = None
    min_coverage: float = DEFAULT_MIN_COVERAGE
    max_leakage: float = DEFAULT_MAX_LEAKAGE
    show: int = DEFAULT_SHOW
    meta_path: str | Path | None = None
    encoding: str | None = None
    dtype: str | None = None
    max_shingles: int = MAX_SHINGLES
    progress: Progress | None = None
    writes: Sequence[str | Path] = ()
    retokenize_sample: int = DEFAULT_DOCS
    retokenize_bytes: int = DEFAULT_BYTES
