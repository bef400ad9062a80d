"""Layouts other frameworks read: Megatron's ``.idx`` beside a ``.bin``, llm.c / modded-nanogpt shards.

This module knows the bytes of the foreign layouts (as ``formats`` knows winsample's own):
how to write them in one streaming pass from a split's token file and document starts, and
how to read and check them. It imports ``formats`` and ``errors`` only.

``--layout`` names (``LAYOUTS``):

- ``nanogpt`` (the default): ``train.bin`` / ``val.bin`` (raw ids, no header) and
  ``train.docs.npy`` / ``val.docs.npy``; what every other winsample command reads, what
  nanoGPT memmaps and what OLMo-core reads as it is.
- ``megatron``: ``train.idx`` / ``val.idx`` beside the ``.bin`` files (which are byte for byte a
  Megatron ``.bin``), so ``--data-path OUT/train`` works in Megatron-LM, NeMo and GPT-NeoX.
- ``llmc``: ``llmc/train_000000.bin, …`` and ``llmc/val_000000.bin, …``: llm.c's headed shards,
  which modded-nanogpt reads too.

Megatron index (megatron-core ``indexed_dataset.py``, ``_IndexWriter``), little-endian::

    offset  size      field
    0       9         magic b"MMIDIDX\x00\x00"
    9       8         version, uint64 = 1
    17      1         dtype code, uint8: 8 = uint16, 4 = int32 (there is no uint32 code)
    18      8         S = sequence count, uint64
    26      8         C = document-index count, uint64 (= documents + 1)
    34      4 × S     sequence lengths, int32 (tokens)
    34+4S   8 × S     sequence pointers, int64 (bytes into the .bin; 0, then running sums)
    34+12S  8 × C     document indices, int64 (sequence numbers: 0, then each document's end)

winsample writes one sequence per document (the document's ids with its EOT, as Megatron's
``preprocess_data.py --append-eod`` does), so the document indices are ``0, 1, …, S``. A
uint32 ``.bin`` gets code 4 (int32): every id below 2³¹ has the same four bytes in both, and
winsample refuses a vocabulary of more than 2³¹ ids for this layout.

llm.c shard (``dev/data/data_common.py`` ``write_datafile``; modded-nanogpt ``_load_data_shard``,
llm.c's ``train_llama3.py`` for version 7)::

    byte 0      1024 bytes: 256 little-endian int32: [magic, version, count, 0, 0, …, 0]
                version 1: [20240520, 1, …], uint16 ids; version 7: [20240801, 7, …], uint32 ids
    byte 1024   count token ids

Like llm.c's own ``fineweb.py``, every document is ``<|endoftext|>`` followed by its ids (the
EOT *before* the document, where winsample's ``.bin`` has it after), so each document starts
with an EOT: modded-nanogpt aligns its training sequences to those. A split of n ids gets
k = ⌈n / shard_tokens⌉ shards (default 100M, llm.c's shard size) of near-equal size, so no
shard is a small remainder (llm.c's loader asserts each holds at least B×T×processes + 1); a
document may continue into the next shard. uint16 ids are written as version 1 shards (llm.c's
C trainer, modded-nanogpt), uint32 ids as version 7 (llm.c's Llama 3 format).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .. import disk, formats
from ..errors import ConfigError

NANOGPT, MEGATRON, LLMC = "nanogpt", "megatron", "llmc"
LAYOUTS = (NANOGPT, MEGATRON, LLMC)
DEFAULT_LAYOUTS = (NANOGPT,)  # the files every other winsample command (and nanoGPT) reads


def written(meta: dict | None) -> tuple[str, ...]:
    """The layouts a meta.json describes (one written before layouts existed: nanogpt)."""
    if meta is None:
        return ()
    desc = meta.get("layouts")
    if not isinstance(desc, dict):
        return DEFAULT_LAYOUTS
    return tuple(n for n in LAYOUTS if isinstance(desc.get(n), dict))


# --- choosing layouts ---------------------------------------------------------------------------


def parse_layouts(value: str | Sequence[str]) -> tuple[str, ...]:
    """``"nanogpt,megatron"`` (or a sequence of names) → ``("nanogpt", "megatron")``, in LAYOUTS order.

    ConfigError for an unknown or empty list."""
    items = value.split(",") if isinstance(value, str) else list(value)
    names = [v.strip().lower() for v in items if v.strip()]
    if not names:
        raise ConfigError(f"--layout needs at least one of {', '.join(LAYOUTS)}")
    unknown = [n for n in names if n not in LAYOUTS]
    if unknown:
        raise ConfigError(f"--layout {unknown[0]!r}: unknown layout; choose from {', '.join(LAYOUTS)} (a comma list)")
    return tuple(n for n in LAYOUTS if n in names)


def eot_positions(tokens, eot: int) -> np.ndarray:
    """int64 positions of ``eot`` in a token stream (memmap or shard stream), in bounded pieces:
    the document starts of an llm.c stream, where every document begins with its EOT."""
    parts = [np.flatnonzero(np.asarray(chunk) == eot) + lo for lo, chunk in formats.iter_chunks(tokens, disk.checksums.CHUNK_BYTES // 2)]
    return np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, np.int64)


def layout_splits(meta: dict, name: str) -> dict[str, dict] | None:
    """``meta["layouts"][name]["splits"]`` when it is an object of objects, else None (malformed)."""
    desc = meta.get("layouts")
    entry = desc.get(name) if isinstance(desc, dict) else None
    splits = entry.get("splits") if isinstance(entry, dict) else None
    if not isinstance(splits, dict) or not all(isinstance(v, dict) for v in splits.values()):
        return None
    return splits
