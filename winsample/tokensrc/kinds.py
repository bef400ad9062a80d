"""Which layout a file is (sniffed from its bytes), and which layouts a run may write."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from .. import disk, formats
from ..errors import ConfigError, WinsampleError
from .layouts import LLMC, MEGATRON, parse_layouts
from .llmc import group_shards, is_llmc_shard, llmc_groups, llmc_owner, llmc_shard_files
from .megatron import INT32_MAX, megatron_prefix


def foreign_layout(path: str | Path, meta_path=None) -> tuple[str, object] | None:
    """("llmc", {group: shard files}) or ("megatron", prefix) when ``path`` names such data
    without a winsample meta.json describing it; None otherwise (winsample's own files).
    With ``meta_path``: ("llmc", groups) only for shards that meta.json's layouts.llmc lists
    (``llmc_owner`` then finds it), else None."""
    s = str(path)
    p = Path(s)
    if meta_path is not None:
        groups = llmc_groups(p, s)
        owner = llmc_owner(groups, meta_path) if groups else None
        return (LLMC, groups) if owner is not None else None
    if not p.exists() and disk.is_glob(s):
        return LLMC, group_shards(llmc_shard_files(s))
    prefix = megatron_prefix(p)
    if prefix is not None:
        meta = Path(prefix).parent / formats.META_JSON
        described = False
        if meta.is_file() and p.suffix != ".idx":
            try:
                described = formats.load_meta(meta).split_for(f"{prefix}.bin") is not None
            except WinsampleError:
                described = True  # a meta.json that does not read: the meta check says so
        # the prefix itself (data/train) is Megatron's name for the pair; data/train.bin with a
        # meta.json describing it stays winsample's own file
        if not p.exists() or (not described and p.suffix in (".idx", ".bin")):
            return MEGATRON, prefix
    if p.is_file() and is_llmc_shard(p):
        meta = p.parent / formats.META_JSON
        try:
            described = meta.is_file() and formats.load_meta(meta).split_for(p) is not None
        except WinsampleError:
            described = False
        if not described:
            return LLMC, {p.stem: [p]}
    if p.is_dir() and not (p / formats.META_JSON).exists() and not any((p / formats.bin_name(x)).exists() for x in formats.SPLITS):
        files = sorted(p.glob("*.bin"))
        if files and any(is_llmc_shard(f) for f in files):
            return LLMC, group_shards(files)  # one that is not a shard fails its header check
    return None


def check_layouts(value: str | Sequence[str], dtype: str, n_vocab: int, shard_tokens: int, eot: int | None = -1) -> tuple[str, ...]:
    """The parsed layouts, or ConfigError for a combination no writer can produce (before any work).

    ``eot``: the tokenizer's end-of-text id (None: it has none, which llmc needs before each document)."""
    chosen = parse_layouts(value)
    if LLMC in chosen and eot is None:
        raise ConfigError("--layout llmc puts <|endoftext|> before each document, and this tokenizer has no end-of-text id")
    if LLMC in chosen:  # uint16 ids: version 1 shards; uint32: version 7 (llm.c's Llama 3 format)
        if not 1 <= shard_tokens <= INT32_MAX:
            raise ConfigError(f"--shard-tokens {shard_tokens} must be in [1, 2^31 - 1] (an llm.c header counts in int32)")
    if MEGATRON in chosen and n_vocab > INT32_MAX + 1:
        raise ConfigError(f"--layout megatron: {n_vocab} ids do not fit int32, the widest integer code a Megatron index has")
    return chosen
