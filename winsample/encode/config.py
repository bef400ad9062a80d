"""The options of one ``winsample encode`` run: :class:`EncodeConfig`, checked once when made.

``cli.encode`` builds one from its options and calls ``encode.run``; both runners (the local
one, ``executors.local``, and ``--engine ray``, ``executors.ray``) take it whole. What a run
derives from it and the tokenizer (the token dtype, the EOT / BOS ids) is :class:`RunSpec`.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path

from .. import formats, tokensrc
from ..errors import ConfigError
from .decoding import BAD_MODES, codec_of

SPLIT_METHODS = formats.SPLIT_METHODS  # meta.json's split.method: one home
ERROR_MODES = ("strict", "replace")
ENGINES = ("local", "ray")
DEDUP_MODES = ("exact",)  # encode --dedup (dedup.py)
MAX_WORKERS = 1024  # --workers: processes started at once
DEFAULT_SHARD_BYTES = 256 << 20  # --engine ray without --merge: 256 MiB of input per shard task (~20 s of tiktoken per core)
DEFAULT_PART_BYTES = 32 << 20  # a run in parts (--workers > 1, --engine ray --merge): input per part (enough to balance a few workers)

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b)?\s*$", re.I)


def parse_size(text: str | int) -> int:
    """'256MB' / '64KB' / '1.5G' / '4096' → bytes (K, M, G, T are powers of 1024)."""
    if isinstance(text, int):
        return text
    m = _SIZE.match(str(text))
    if not m:
        raise ConfigError(f"--shard-size {text!r}: give bytes like 256MB, 64KB or 1G")
    n = float(m.group(1)) * 1024 ** " kmgt".index((m.group(2) or " ").lower())
    if n < 1:
        raise ConfigError(f"--shard-size {text!r} must be at least 1 byte")
    return int(n)


def check_options(split: str, errors: str, val_fraction: float, workers: int | None) -> None:
    """ConfigError for option values no engine can use (before anything is read or written)."""
    if split not in SPLIT_METHODS:
        raise ConfigError(f"unknown split {split!r}: choose doc or tail")
    if errors not in ERROR_MODES:
        raise ConfigError(f"unknown errors mode {errors!r}: choose strict or replace")
    if not 0 <= val_fraction < 1:
        raise ConfigError(f"--val-fraction {val_fraction} must be in [0, 1)")
    if workers is not None and workers < 1:
        raise ConfigError(f"--workers {workers} must be at least 1")
    if workers is not None and workers > MAX_WORKERS:  # each is a process: bounded before any is started
        raise ConfigError(f"--workers {workers}: at most {MAX_WORKERS} encoder processes")


@dataclass(frozen=True)
class EncodeConfig:
    """Everything that decides a run's output (``encode_corpus``'s docstring says what each does).

    ``resume``, ``layout`` and ``shard_tokens`` are the local engine's; ``address``,
    ``shard_size`` and ``merge`` are ``--engine ray``'s. Made once; ConfigError (exit 2) for
    values no engine can use, in the order the runners always checked them.
    """

    inputs: tuple[str, ...]
    out_dir: str | Path
    encoding: str = "gpt2"
    tokenizer_file: str | None = None
    pattern: str | None = None
    val_fraction: float = 0.1
    split: str = "doc"
    seed: int = 1337
    workers: int | None = None
    text_field: str = "text"
    id_field: str | None = None
    fmt: str = "auto"
    eot: bool = True
    eot_token: str | None = None  # the end-of-document token's text or id; None: the tokenizer's default
    bos: bool = False
    dtype: str | None = None
    errors: str = "strict"
    input_encoding: str | None = None  # --input-encoding: the codec of text without a BOM (None: UTF-8)
    on_bad_input: str = "fail"  # fail (list every bad input, write nothing) or skip (leave them out, count and list them)
    backend: str = "auto"
    engine: str = "local"
    resume: bool = False
    layout: Sequence[str] | str = tokensrc.DEFAULT_LAYOUTS
    shard_tokens: int = tokensrc.DEFAULT_SHARD_TOKENS
    address: str | None = None
    shard_size: str | int | None = None  # None: DEFAULT_SHARD_BYTES (ray), DEFAULT_PART_BYTES (local)
    merge: bool = False
    chat: bool = False  # records' conversations rendered with a chat template (encode/sft.py)
    messages_field: str = "messages"
    chat_template: str | None = None  # a file, a built-in name (chatml), None: the tokenizer's own
    prompt_field: str | None = None  # with response_field: prompt/response pairs
    response_field: str | None = None
    loss: str | None = None  # assistant | completion | all; None: assistant for a chat, completion for pairs
    dedup: str | None = None  # "exact": a document whose text an earlier kept one had is dropped
    shard_bytes: int = field(init=False, default=0)  # shard_size in bytes: a Ray task's, or a local part's

    def __post_init__(self) -> None:
        object.__setattr__(self, "inputs", tuple(str(i) for i in self.inputs))
        if self.engine not in ENGINES:
            raise ConfigError(f"unknown engine {self.engine!r}: choose local or ray")
        check_options(self.split, self.errors, self.val_fraction, self.workers)
        # Any integer: the seed is the split hash's text prefix, and datasets made with negative
        # ones must rebuild byte for byte (windows' seeds feed a 64-bit generator: [0, 2**64) there).
        if isinstance(self.seed, bool) or not hasattr(self.seed, "__index__"):
            raise ConfigError(f"--seed must be an integer, got {self.seed!r}")
        object.__setattr__(self, "seed", operator.index(self.seed))
        if (self.prompt_field is None) != (self.response_field is None):
            raise ConfigError("--prompt-field and --response-field go together: give both")
        if self.loss is not None and not self.records:
            raise ConfigError("--loss applies to --chat or --prompt-field/--response-field records")
        if self.chat_template is not None and not self.chat:
            raise ConfigError("--chat-template applies with --chat")
        if self.eot_token is not None and not self.eot:
            raise ConfigError("--eot-token names the end-of-document token that --no-eot leaves out: give one of them")
        if self.dedup is not None and self.dedup not in DEDUP_MODES:
            raise ConfigError(f"unknown --dedup {self.dedup!r}: choose {', '.join(DEDUP_MODES)}")
        if self.dedup is not None and self.engine == "ray":
            raise ConfigError("--dedup exact judges documents in input order on one machine: drop --engine ray or --dedup")
        object.__setattr__(self, "input_encoding", codec_of(self.input_encoding))  # a codec's one name; UTF-8: None
        if self.on_bad_input not in BAD_MODES:
            raise ConfigError(f"unknown --on-bad-input {self.on_bad_input!r}: choose fail or skip")
        if self.engine == "ray" and (self.input_encoding or self.on_bad_input != "fail"):
            raise ConfigError("--input-encoding and --on-bad-input skip apply to --engine local: drop them, or use --engine local")
        default = DEFAULT_SHARD_BYTES if self.engine == "ray" and not self.merge else DEFAULT_PART_BYTES  # --merge: the local parts
        object.__setattr__(self, "shard_bytes", default if self.shard_size is None else parse_size(self.shard_size))

    @classmethod
    def of(cls, inputs: Sequence[str], out_dir: str | Path, *, resume_partial: bool = False, **options) -> EncodeConfig:
        """A config from ``encode_corpus`` / ``encode_ray``'s keyword arguments (``resume_partial``: ``resume``)."""
        names = {f.name for f in fields(cls) if f.init}
        unknown = sorted(set(options) - names)
        if unknown:
            raise TypeError(f"unexpected option(s): {', '.join(unknown)}")
        return cls(tuple(inputs), out_dir, resume=resume_partial or options.pop("resume", False), **options)

    @property
    def records(self) -> bool:
        """True for a run of conversations or prompt/response pairs (each record one unit, with a loss mask)."""
        return self.chat or self.prompt_field is not None

    @property
    def tail(self) -> bool:
        return self.split == "tail"


@dataclass(frozen=True)
class RunSpec:
    """What a run derives from its config and tokenizer: the token dtype and the edge ids."""

    config: EncodeConfig
    dtype: str
    eot_id: int | None
    bos_id: int | None

    def options(self) -> dict:
        """The output-deciding options as a checkpoint journal records them (``--resume`` compares
        them): the same keys, in the same order, as every winsample before the package."""
        c = self.config
        opts = dict(split=c.split, fraction=c.val_fraction, seed=c.seed, eot=c.eot, dtype=self.dtype, errors=c.errors,
                    text_field=c.text_field, eot_id=self.eot_id, id_field=c.id_field)
        if c.bos:  # only when asked: a checkpoint made before --bos existed stays comparable
            opts.update(bos=True, bos_id=self.bos_id)
        if c.dedup:  # likewise: a checkpoint with and one without --dedup differ here
            opts.update(dedup=c.dedup)
        if c.input_encoding:  # likewise
            opts.update(input_encoding=c.input_encoding)
        if c.on_bad_input != "fail":
            opts.update(on_bad_input=c.on_bad_input)
        return opts


__all__ = ["EncodeConfig", "RunSpec", "check_options", "parse_size", "SPLIT_METHODS", "ERROR_MODES",
           "DEFAULT_SHARD_BYTES", "DEFAULT_PART_BYTES", "MAX_WORKERS"]
