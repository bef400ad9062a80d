"""Megatron's indexed dataset: the .idx writer beside its reader (megatron-core's MMIDIDX layout)."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import disk, formats
from ..errors import ConfigError, DataError, InputError

# --- Megatron ---------------------------------------------------------------------------------

MEGATRON_MAGIC = b"MMIDIDX\x00\x00"
MEGATRON_VERSION = 1
MEGATRON_HEADER = struct.Struct("<9sQBQQ")  # magic, version, dtype code, sequences, doc-index count
MEGATRON_CODES = {"<u2": 8, "<u4": 4}  # winsample dtype → megatron-core DType code written
# Every megatron-core DType code → the numpy dtype its reader uses (the ones a token file can have).
MEGATRON_DTYPES = {1: "u1", 2: "i1", 3: "<i2", 4: "<i4", 5: "<i8", 6: "<f8", 7: "<f4", 8: "<u2"}
MEGATRON_TOKEN_DTYPES = {8: "<u2", 4: "<u4"}  # codes winsample can read as token ids (int32 ids ≥ 0 as uint32)
INT32_MAX = (1 << 31) - 1
INDEX_STEP = 1 << 20  # entries per streamed piece of an index


def megatron_index_name(split: str) -> str:
    return f"{split}.idx"


def _bounded(a: np.ndarray, lo: int, hi: int) -> np.ndarray:
    return np.asarray(a[lo:hi])


def write_megatron_index(path: str | Path, doc_starts: np.ndarray, n_tokens: int, dtype: str) -> dict:
    """Write the Megatron index of a token file of ``n_tokens`` ids whose documents start at
    ``doc_starts`` (int64, ascending, first 0; a memmap is read in bounded pieces).

    One sequence per document. Returns the layout entry for meta.json (file, bytes,
    sequences, dtype code, checksum). ConfigError when a document has 2³¹ tokens or more
    (lengths are int32). The file is written at ``path`` directly (the caller stages it).
    """
    dtype = formats.normalize_dtype(dtype)
    code = MEGATRON_CODES[dtype]
    item = np.dtype(dtype).itemsize
    d = len(doc_starts)
    hasher = disk.new_hasher()
    with open(path, "wb") as f:

        def put(data: bytes) -> None:
            f.write(data)
            hasher.update(data)

        put(MEGATRON_HEADER.pack(MEGATRON_MAGIC, MEGATRON_VERSION, code, d, d + 1))
        for lo in range(0, d, INDEX_STEP):  # lengths
            hi = min(d, lo + INDEX_STEP)
            starts = _bounded(doc_starts, lo, hi).astype(np.int64)
            nxt = int(doc_starts[hi]) if hi < d else n_tokens
            lengths = np.diff(np.append(starts, nxt))
            if lengths.size and int(lengths.max()) > INT32_MAX:
                i = lo + int(np.argmax(lengths))
                raise ConfigError(f"{path}: document {i} has {int(lengths.max())} tokens; a Megatron index holds at most 2^31 - 1 per sequence")
            put(lengths.astype("<i4").tobytes())
        for lo in range(0, d, INDEX_STEP):  # byte pointers
            put((_bounded(doc_starts, lo, min(d, lo + INDEX_STEP)).astype(np.int64) * item).astype("<i8").tobytes())
        for lo in range(0, d + 1, INDEX_STEP):  # document indices: 0, 1, …, d
            put(np.arange(lo, min(d + 1, lo + INDEX_STEP), dtype="<i8").tobytes())
    return {
        "file": Path(path).name,
        "bytes": MEGATRON_HEADER.size + 20 * d + 8,
        "sequences": d,
        "dtype_code": code,
        "checksum": disk.format_checksum(hasher),
    }


@dataclass
class MegatronIndex:
    """A parsed ``.idx``: counts and read-only views of its three arrays."""

    path: Path
    version: int
    dtype_code: int
    lengths: np.ndarray  # int32 [S]
    pointers: np.ndarray  # int64 [S], bytes
    doc_indices: np.ndarray  # int64 [C]

    @property
    def sequences(self) -> int:
        return len(self.lengths)

    @property
    def documents(self) -> int:
        return max(len(self.doc_indices) - 1, 0)

    @property
    def itemsize(self) -> int:
        return np.dtype(MEGATRON_DTYPES[self.dtype_code]).itemsize


def read_megatron_index(path: str | Path) -> MegatronIndex:
    """Parse a Megatron ``.idx``: DataError naming the file for a bad magic, version, dtype code
    or a size that disagrees with its counts; InputError if it is missing or unreadable."""
    path = Path(path)
    try:
        size = disk.require_regular(path, "a Megatron index (.idx)").st_size
        with disk.open_regular(path, "a Megatron index (.idx)") as f:
            head = f.read(MEGATRON_HEADER.size)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror}") from None
    if len(head) < MEGATRON_HEADER.size:
        raise DataError(f"{path}: {size} bytes, shorter than a Megatron index header ({MEGATRON_HEADER.size} bytes)")
    magic, version, code, s, c = MEGATRON_HEADER.unpack(head)
    if magic != MEGATRON_MAGIC:
        raise DataError(f"{path}: not a Megatron index: magic {magic!r}, expected {MEGATRON_MAGIC!r}")
    if version != MEGATRON_VERSION:
        raise DataError(f"{path}: Megatron index version {version}, megatron-core reads version {MEGATRON_VERSION}")
    if code not in MEGATRON_DTYPES:
        raise DataError(f"{path}: dtype code {code} is not one of megatron-core's ({', '.join(map(str, sorted(MEGATRON_DTYPES)))})")
    want = MEGATRON_HEADER.size + 12 * s + 8 * c
    if size != want:
        extra = "; a multimodal index (one mode byte per sequence) is not a token index" if size == want + s and s else ""
        raise DataError(
            f"{path}: {size} bytes, but its header counts {s} sequences and {c} document indices:"
            f" {want} bytes expected (truncated or corrupt){extra}"
        )
    o = MEGATRON_HEADER.size

    def view(dt: str, count: int, offset: int) -> np.ndarray:
        if count == 0:
            return np.zeros(0, dt)
        return np.memmap(path, dtype=dt, mode="r", offset=offset, shape=(count,))

    return MegatronIndex(path, version, code, view("<i4", s, o), view("<i8", s, o + 4 * s), view("<i8", c, o + 12 * s))


def megatron_problems(idx: MegatronIndex, bin_size: int, doc_starts: np.ndarray | None = None) -> list[str]:
    """What is wrong with ``idx`` as the index of a ``.bin`` of ``bin_size`` bytes.

    Checks: lengths ≥ 0 and summing to the .bin's token count, pointers starting at 0 and
    each the previous plus its length × itemsize (contiguous, as megatron-core's builder
    writes them), document indices starting at 0, never decreasing and ending at S. Given
    ``doc_starts`` (winsample's documents), also one sequence per document, at those starts.
    Bounded memory: the arrays are read in pieces.
    """
    name = idx.path.name
    out: list[str] = []
    item = idx.itemsize
    s = idx.sequences
    if bin_size % item:
        out.append(f"{name}: dtype code {idx.dtype_code} has {item}-byte ids but the .bin has {bin_size} bytes")
    total = 0  # tokens so far
    for lo in range(0, s, INDEX_STEP):
        hi = min(s, lo + INDEX_STEP)
        lengths = np.asarray(idx.lengths[lo:hi]).astype(np.int64)
        pointers = np.asarray(idx.pointers[lo:hi])
        if lengths.size and lengths.min() < 0:
            out.append(f"{name}: sequence {lo + int(np.argmin(lengths))} has a negative length")
            return out
        expect = (total + np.concatenate(([0], np.cumsum(lengths)[:-1]))) * item
        bad = pointers != expect
        if bad.any():
            i = int(np.argmax(bad))
            out.append(
                f"{name}: sequence {lo + i} points at byte {int(pointers[i])}, expected {int(expect[i])}"
                " (the previous pointer plus its length × itemsize)"
            )
            return out
        total += int(lengths.sum())
    if total * item != bin_size:
        out.append(f"{name}: sequence lengths sum to {total} tokens ({total * item} bytes), the .bin holds {bin_size} bytes")
    di = idx.doc_indices
    if len(di) == 0:
        out.append(f"{name}: no document indices (megatron-core expects at least [0])")
    else:
        if int(di[0]) != 0 or int(di[-1]) != s:
            out.append(f"{name}: document indices run from {int(di[0])} to {int(di[-1])}, expected 0 to {s} (the sequence count)")
        for lo in range(0, len(di), INDEX_STEP):
            part = np.asarray(di[max(lo - 1, 0) : lo + INDEX_STEP])
            if part.size > 1 and np.any(np.diff(part) < 0):
                out.append(f"{name}: document indices decrease near entry {lo + int(np.argmax(np.diff(part) < 0))}")
                break
    if doc_starts is not None and not out:
        d = len(doc_starts)
        if s != d or len(di) != d + 1:
            out.append(f"{name}: {s} sequences and {idx.documents} documents, meta.json's document index lists {d} documents")
        else:
            for lo in range(0, d, INDEX_STEP):
                hi = min(d, lo + INDEX_STEP)
                got = np.asarray(idx.pointers[lo:hi]) // item
                want = np.asarray(doc_starts[lo:hi]).astype(np.int64)
                if np.any(got != want) or np.any(np.asarray(di[lo:hi]) != np.arange(lo, hi)):
                    i = lo + int(np.argmax((got != want) | (np.asarray(di[lo:hi]) != np.arange(lo, hi))))
                    out.append(f"{name}: sequence {i} starts at token {int(got[i - lo])}, the document index says document {i} starts at {int(want[i - lo])}")
                    break
    return out


def megatron_doc_starts(idx: MegatronIndex) -> np.ndarray:
    """Token offsets where the index's documents start (empty documents dropped)."""
    if idx.sequences == 0:
        return np.zeros(0, np.int64)
    di = np.asarray(idx.doc_indices[:-1]).astype(np.int64)
    di = di[di < idx.sequences]
    starts = np.asarray(idx.pointers)[di] // idx.itemsize
    return np.unique(starts).astype(np.int64)


def megatron_token_dtype(idx: MegatronIndex) -> str:
    """The winsample dtype to read the index's .bin as; InputError for codes that are not token ids."""
    dt = MEGATRON_TOKEN_DTYPES.get(idx.dtype_code)
    if dt is None:
        raise InputError(
            f"{idx.path}: dtype code {idx.dtype_code} ({MEGATRON_DTYPES[idx.dtype_code]}): winsample reads"
            " token ids of code 8 (uint16) and 4 (int32) only"
        )
    return dt


def megatron_prefix(path: str | Path) -> Path | None:
    """The Megatron prefix ``path`` names (``data/train``, ``data/train.idx`` or ``data/train.bin``
    with a ``.idx`` beside it), or None."""
    p = Path(path)
    for prefix in (p, p.with_suffix("") if p.suffix in (".idx", ".bin") else None):
        if prefix is not None and Path(f"{prefix}.idx").is_file() and Path(f"{prefix}.bin").is_file():
            return prefix
    return None
