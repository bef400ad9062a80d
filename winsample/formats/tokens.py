"""Token files: dtypes, counts, casting with the vocabulary checked first, and memmaps."""

from __future__ import annotations

import ctypes
import mmap
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from ..disk.names import require_regular
from ..errors import DataError, InputError

# Explicit little-endian dtype strings: a .bin never depends on the machine's byte order.
DTYPES = {"uint16": "<u2", "uint32": "<u4"}
DEFAULT_DTYPE = "<u2"  # nanoGPT's uint16; a bare .bin with no meta.json is read as this


# --- dtypes and token files -------------------------------------------------------------

WIDE_SAMPLE = 1 << 20  # tokens looked at to tell uint32 ids read as uint16, in WIDE_BLOCKS blocks spread over the file
WIDE_BLOCKS = 16
WIDE_MIN = 64  # fewer tokens than this: too few to tell
HIGH_HALF = 16  # a uint32 id below 2^20 (every vocabulary winsample knows) has a high half below this


def wider_ids_share(tokens: np.ndarray) -> float | None:
    """For a file read as uint16 without meta.json: the share of its odd uint16 halves below 16
    when its even halves mostly are not (uint32 ids read as uint16 look like ``low, high, low,
    high``, every high half 0 for an id under 65,536 and 1 or 2 for a Qwen or Llama-3 id above it).
    None when it does not look so. Looks at up to ``WIDE_SAMPLE`` tokens in ``WIDE_BLOCKS`` blocks
    spread over the whole file: text whose first megabyte is English and the rest CJK still shows."""
    n = len(tokens)
    if n < WIDE_MIN or np.dtype(tokens.dtype).itemsize != 2:
        return None
    if n <= WIDE_SAMPLE:
        t = np.asarray(tokens)
    else:
        size = WIDE_SAMPLE // WIDE_BLOCKS
        starts = np.linspace(0, n - size, WIDE_BLOCKS).astype(np.int64) // 2 * 2  # even: a uint32's low half first
        t = np.concatenate([np.asarray(tokens[s : s + size]) for s in starts])
    odd, even = float(np.mean(t[1::2] < HIGH_HALF)), float(np.mean(t[0::2] < HIGH_HALF))
    return odd if odd >= 0.99 and even <= 0.5 else None



def dtype_for_vocab(n_vocab: int) -> str:
    """The smallest dtype holding every id of a vocabulary of ``n_vocab`` ids (0..n_vocab-1)."""
    return "<u2" if n_vocab <= 1 << 16 else "<u4"


def normalize_dtype(dtype: str) -> str:
    """'uint16' / 'u2' / '<u2' → '<u2' (and the same for uint32)."""
    if dtype in DTYPES:
        return DTYPES[dtype]
    try:
        d = np.dtype(dtype)
    except (TypeError, ValueError):
        raise InputError(f"unsupported token dtype {dtype!r}: use uint16 or uint32") from None
    if d.kind != "u" or d.itemsize not in (2, 4) or d.byteorder == ">" or (d.byteorder == "=" and not np.little_endian):
        # a big-endian dtype is not these files' ('>u2' read as '<u2' would pass with wrong ids)
        raise InputError(f"unsupported token dtype {dtype!r}: use uint16 or uint32 (little-endian)")
    return "<u2" if d.itemsize == 2 else "<u4"


def dtype_name(dtype: str) -> str:
    """'<u2' → 'uint16', '<u4' → 'uint32': the name --dtype takes."""
    return "uint16" if np.dtype(dtype).itemsize == 2 else "uint32"


def dtype_max(dtype: str) -> int:
    return int(np.iinfo(np.dtype(dtype)).max)


def check_and_cast(ids: np.ndarray, dtype: str, n_vocab: int, where: str) -> np.ndarray:
    """Cast ``ids`` to ``dtype`` after proving every id is in [0, n_vocab) and fits the dtype.

    A plain ``astype(np.uint16)`` wraps 65536 to 0 without a word; this raises DataError naming
    ``where`` and the first bad position instead.
    """
    ids = np.asarray(ids)
    if ids.size:
        limit = min(n_vocab, dtype_max(dtype) + 1)
        if ids.dtype.kind == "u" and int(ids.max()) < limit:  # one pass: the usual case (encoders give uint32)
            return ids.astype(dtype, copy=False)
        bad = (ids < 0) | (ids >= limit)
        if bad.any():
            i = int(np.argmax(bad))
            raise DataError(
                f"{where}: token id {int(ids[i])} at position {i} is outside [0, {limit})"
                f" (n_vocab {n_vocab}, dtype {dtype})"
            )
    return ids.astype(dtype, copy=False)


def token_count(path: str | Path, dtype: str) -> int:
    """N for a token file; DataError if its byte size is not a multiple of the item size,
    InputError if it is missing or not a regular file."""
    size = require_regular(path, "a token file").st_size
    item = np.dtype(dtype).itemsize
    if size % item:
        raise DataError(
            f"{path}: {size} bytes is not a multiple of {item} (dtype {dtype}):"
            f" {size % item} stray byte(s); the file is truncated or has the wrong dtype"
        )
    return size // item


def refuse_unlabelled(path: str | Path, described: bool) -> None:
    """InputError unless ``path`` is described by a meta.json or named like a token file (*.bin).

    A bare file is read as nanoGPT's uint16 ids; a text file read that way gives nonsense that
    no check can catch, so it is refused instead of planned or verified."""
    path = Path(path)
    if not described and path.suffix != ".bin":
        raise InputError(
            f"{path}: not a .bin and no meta.json describes it, so it is not a token file;"
            f" encode text first (winsample encode {path} -o data/) or pass --meta"
        )


def open_tokens(path: str | Path, dtype: str = DEFAULT_DTYPE) -> np.ndarray:
    """Read-only memmap of a token file (an empty array for an empty file)."""
    path = Path(path)
    try:
        n = token_count(path, dtype)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror}") from None
    if n == 0:  # np.memmap refuses empty files
        return np.zeros(0, dtype=dtype)
    try:
        return np.memmap(path, dtype=dtype, mode="r", shape=(n,))
    except OSError as e:  # no read permission
        raise InputError(f"{path}: cannot read: {e.strerror or e}") from None


def iter_chunks(tokens: np.ndarray, chunk_tokens: int) -> Iterator[tuple[int, np.ndarray]]:
    """(offset, view) pairs covering ``tokens`` in order, each at most ``chunk_tokens`` long."""
    for lo in range(0, len(tokens), chunk_tokens):
        yield lo, tokens[lo : lo + chunk_tokens]


def release_pages(tokens: np.ndarray, lo: int = 0, hi: int | None = None) -> None:
    """Drop the pages of ``tokens[lo:hi]`` from this process's resident set, where ``tokens`` is a
    read-only memmap of a file (``open_tokens``); the page cache keeps them, and a later read maps
    them again. A pass over a large file calls it after each bounded piece, so that its mapped
    pages (counted in the process's resident size) stay bounded too. Anything else (an array in
    memory, whose pages would be lost) is left alone; so is a kernel that refuses the advice."""
    if not isinstance(tokens, np.memmap) or tokens.mode != "r" or not hasattr(mmap, "MADV_DONTNEED"):
        return
    hi = len(tokens) if hi is None else min(hi, len(tokens))
    if hi <= lo:
        return
    page = mmap.PAGESIZE
    a = tokens[lo:hi].ctypes.data
    start = a - a % page
    length = tokens[lo:hi].ctypes.data + (hi - lo) * tokens.itemsize - start
    try:
        _libc().madvise(ctypes.c_void_p(start), ctypes.c_size_t(length), mmap.MADV_DONTNEED)
    except (OSError, AttributeError, ValueError):
        pass


def _libc():
    global _LIBC
    if _LIBC is None:
        _LIBC = ctypes.CDLL(None, use_errno=True)
    return _LIBC


_LIBC = None
