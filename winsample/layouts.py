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
    0       9         magic b"MMIDIDX\\x00\\x00"
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

llm.c shard (``dev/data/data_common.py`` ``write_datafile``; modded-nanogpt ``_load_data_shard``)::

    byte 0      1024 bytes: 256 little-endian int32: [20240520, 1, count, 0, 0, …, 0]
    byte 1024   count × uint16 token ids

Like llm.c's own ``fineweb.py``, every document is ``<|endoftext|>`` followed by its ids (the
EOT *before* the document, where winsample's ``.bin`` has it after), so each document starts
with an EOT: modded-nanogpt aligns its training sequences to those. A split of n ids gets
k = ⌈n / shard_tokens⌉ shards (default 100M, llm.c's shard size) of near-equal size, so no
shard is a small remainder (llm.c's loader asserts each holds at least B×T×processes + 1); a
document may continue into the next shard. Only uint16 exists in version 1, the only version the released readers
accept, so a vocabulary that needs uint32 is refused for this layout.
"""

from __future__ import annotations

import glob as globlib
import os
import re
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import formats
from .errors import ConfigError, DataError, InputError, WinsampleError

NANOGPT, MEGATRON, LLMC = "nanogpt", "megatron", "llmc"
LAYOUTS = (NANOGPT, MEGATRON, LLMC)
DEFAULT_LAYOUTS = (NANOGPT,)  # the files every other winsample command (and nanoGPT) reads

# --- Megatron ---------------------------------------------------------------------------------

MEGATRON_MAGIC = b"MMIDIDX\x00\x00"
MEGATRON_VERSION = 1
MEGATRON_HEADER = struct.Struct("<9sQBQQ")  # magic, version, dtype code, sequences, doc-index count
MEGATRON_CODES = {"<u2": 8, "<u4": 4}  # winsample dtype → megatron-core DType code written
# Every megatron-core DType code → the numpy dtype its reader uses (the ones a token file can have).
MEGATRON_DTYPES = {1: "u1", 2: "i1", 3: "<i2", 4: "<i4", 5: "<i8", 6: "<f8", 7: "<f4", 8: "<u2"}
MEGATRON_TOKEN_DTYPES = {8: "<u2", 4: "<u4"}  # codes winsample can read as token ids (int32 ids ≥ 0 as uint32)
_INT32_MAX = (1 << 31) - 1
_STEP = 1 << 20  # entries per streamed piece of an index


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
    hasher = formats.new_hasher()
    with open(path, "wb") as f:

        def put(data: bytes) -> None:
            f.write(data)
            hasher.update(data)

        put(MEGATRON_HEADER.pack(MEGATRON_MAGIC, MEGATRON_VERSION, code, d, d + 1))
        for lo in range(0, d, _STEP):  # lengths
            hi = min(d, lo + _STEP)
            starts = _bounded(doc_starts, lo, hi).astype(np.int64)
            nxt = int(doc_starts[hi]) if hi < d else n_tokens
            lengths = np.diff(np.append(starts, nxt))
            if lengths.size and int(lengths.max()) > _INT32_MAX:
                i = lo + int(np.argmax(lengths))
                raise ConfigError(f"{path}: document {i} has {int(lengths.max())} tokens; a Megatron index holds at most 2^31 - 1 per sequence")
            put(lengths.astype("<i4").tobytes())
        for lo in range(0, d, _STEP):  # byte pointers
            put((_bounded(doc_starts, lo, min(d, lo + _STEP)).astype(np.int64) * item).astype("<i8").tobytes())
        for lo in range(0, d + 1, _STEP):  # document indices: 0, 1, …, d
            put(np.arange(lo, min(d + 1, lo + _STEP), dtype="<i8").tobytes())
    return {
        "file": Path(path).name,
        "bytes": MEGATRON_HEADER.size + 20 * d + 8,
        "sequences": d,
        "dtype_code": code,
        "checksum": formats.format_checksum(hasher),
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
        size = formats.require_regular(path, "a Megatron index (.idx)").st_size
        with formats.open_regular(path, "a Megatron index (.idx)") as f:
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
    for lo in range(0, s, _STEP):
        hi = min(s, lo + _STEP)
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
        for lo in range(0, len(di), _STEP):
            part = np.asarray(di[max(lo - 1, 0) : lo + _STEP])
            if part.size > 1 and np.any(np.diff(part) < 0):
                out.append(f"{name}: document indices decrease near entry {lo + int(np.argmax(np.diff(part) < 0))}")
                break
    if doc_starts is not None and not out:
        d = len(doc_starts)
        if s != d or len(di) != d + 1:
            out.append(f"{name}: {s} sequences and {idx.documents} documents, meta.json's document index lists {d} documents")
        else:
            for lo in range(0, d, _STEP):
                hi = min(d, lo + _STEP)
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


# --- llm.c / modded-nanogpt ---------------------------------------------------------------------

LLMC_MAGIC = 20240520
LLMC_VERSION = 1
LLMC_HEADER_INTS = 256
LLMC_HEADER_BYTES = 4 * LLMC_HEADER_INTS
LLMC_DTYPE = "<u2"
LLMC_DIR = "llmc"
DEFAULT_SHARD_TOKENS = 100_000_000  # llm.c's fineweb.py shard size
_NAME_RE = re.compile(r"^(?P<stem>.*?)[_-]?(?P<num>\d+)\.bin$")


def llmc_shard_name(split: str, index: int) -> str:
    """A shard's path relative to OUT_DIR: ``llmc/train_000000.bin``."""
    return f"{LLMC_DIR}/{split}_{index:06d}.bin"


def llmc_header(count: int) -> bytes:
    h = np.zeros(LLMC_HEADER_INTS, "<i4")
    h[0], h[1], h[2] = LLMC_MAGIC, LLMC_VERSION, count
    return h.tobytes()


def read_llmc_header(path: str | Path) -> int:
    """The token count of llm.c shard ``path`` after checking its header and size.

    DataError naming the file: shorter than the header, magic or version not llm.c's
    uint16 format, a negative count, or a size other than 1024 + 2 × count bytes.
    """
    path = Path(path)
    try:
        size = formats.require_regular(path, "an llm.c shard").st_size
        with formats.open_regular(path, "an llm.c shard") as f:
            head = f.read(LLMC_HEADER_BYTES)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror}") from None
    if len(head) < LLMC_HEADER_BYTES:
        raise DataError(f"{path}: {size} bytes, shorter than an llm.c shard header ({LLMC_HEADER_BYTES} bytes)")
    magic, version, count = np.frombuffer(head, "<i4", 3).tolist()
    if magic != LLMC_MAGIC:
        raise DataError(f"{path}: not an llm.c shard: header magic {magic}, expected {LLMC_MAGIC}")
    if version != LLMC_VERSION:
        raise DataError(f"{path}: llm.c shard version {version}, expected {LLMC_VERSION} (uint16 ids)")
    if count < 0:
        raise DataError(f"{path}: header token count {count} is negative")
    want = LLMC_HEADER_BYTES + 2 * count
    if size != want:
        raise DataError(
            f"{path}: {size} bytes, but its header counts {count} tokens: {want} bytes expected"
            f" ({'truncated' if size < want else 'trailing bytes'})"
        )
    return count


def is_llmc_shard(path: str | Path) -> bool:
    """True when ``path`` is a file whose first bytes are llm.c's magic and version 1."""
    try:
        with formats.open_regular(path) as f:  # a FIFO is not a shard, and must not block
            head = f.read(8)
    except (OSError, WinsampleError):
        return False
    return len(head) == 8 and np.frombuffer(head, "<i4").tolist() == [LLMC_MAGIC, LLMC_VERSION]


def llmc_tokens(path: str | Path, count: int) -> np.ndarray:
    """Read-only memmap of a shard's ``count`` ids (after the 1024-byte header)."""
    if count == 0:
        return np.zeros(0, LLMC_DTYPE)
    return np.memmap(path, dtype=LLMC_DTYPE, mode="r", offset=LLMC_HEADER_BYTES, shape=(count,))


def _doc_ends_in(doc_starts: np.ndarray, n: int, lo: int, hi: int) -> np.ndarray:
    """Exclusive ends ``e`` of the documents with ``lo < e <= hi`` (a document ends where the next
    starts, the last at ``n``); ``doc_starts`` strictly increasing from 0."""
    a = int(np.searchsorted(doc_starts, lo + 1, "left"))
    b = int(np.searchsorted(doc_starts, hi, "right"))
    ends = np.asarray(doc_starts[a:b]).astype(np.int64)
    if len(doc_starts) and lo < n <= hi:
        ends = np.append(ends, n)
    return ends


def llmc_count(tokens: np.ndarray, doc_starts: np.ndarray, eot: int, eot_appended: bool) -> tuple[int, int]:
    """(ids in the llm.c stream of a split, trailing EOTs it leaves out).

    Each document ``[s, e)`` of the .bin becomes EOT + its ids, less a trailing EOT (the one
    encode appended). Only the id just before each document end is read.
    """
    n, d = len(tokens), len(doc_starts)
    dropped = 0
    if eot_appended:
        for lo in range(0, n, _STEP * 64):
            last = _doc_ends_in(doc_starts, n, lo, min(n, lo + _STEP * 64)) - 1
            if len(last):
                dropped += int(np.count_nonzero(np.asarray(tokens[last]) == eot))
    return n + d - dropped, dropped


def llmc_stream(tokens: np.ndarray, doc_starts: np.ndarray, eot: int, eot_appended: bool,
                chunk_tokens: int = 1 << 20) -> Iterator[np.ndarray]:
    """The llm.c ids of a split, in pieces: an EOT before each document, its appended EOT left out."""
    n = len(tokens)
    eot_arr = np.array(eot, dtype=tokens.dtype)
    for lo in range(0, n, chunk_tokens):
        hi = min(n, lo + chunk_tokens)
        chunk = np.asarray(tokens[lo:hi])
        a, b = int(np.searchsorted(doc_starts, lo, "left")), int(np.searchsorted(doc_starts, hi, "left"))
        at = np.asarray(doc_starts[a:b]).astype(np.int64) - lo  # documents starting in [lo, hi)
        drop = np.zeros(0, np.int64)
        if eot_appended:
            last = _doc_ends_in(doc_starts, n, lo, hi) - 1 - lo
            drop = last[chunk[last] == eot]
        # Inside a long document nothing starts or ends: the piece as it is (no copy).
        out = np.insert(chunk, at, eot_arr) if len(at) else chunk
        if len(drop):
            keep = np.ones(len(chunk), bool)
            keep[drop] = False
            out = out[np.insert(keep, at, True)]
        yield out


class _ShardWriter:
    """Writes one split's llm.c ids into shards of at most ``shard_tokens``, header first."""

    def __init__(self, folder: Path, split: str, total: int, shard_tokens: int):
        self.folder, self.split, self.total = folder, split, total
        # k = ceil(total / shard_tokens) shards of near-equal size (they differ by at most one id):
        # never a small remainder shard, which llm.c's loader would refuse (it asserts every
        # shard holds at least B*T*processes + 1 tokens).
        self.k = -(-total // shard_tokens)
        self.entries: list[dict] = []
        self.f = None
        self.left = 0  # ids still to write into the open shard
        self.written = 0

    def _open(self) -> None:
        i = len(self.entries)
        count = self.total // self.k + (1 if i < self.total % self.k else 0)
        name = llmc_shard_name(self.split, i)
        path = self.folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        self.f = open(path, "wb")
        self.hasher = formats.new_hasher()
        head = llmc_header(count)
        self.f.write(head)
        self.hasher.update(head)
        self.left = count
        self.entries.append({"file": name, "tokens": count, "bytes": LLMC_HEADER_BYTES + 2 * count})

    def _close(self) -> None:
        self.f.close()
        self.f = None
        self.entries[-1]["checksum"] = formats.format_checksum(self.hasher)

    def write(self, ids: np.ndarray) -> None:
        ids = np.ascontiguousarray(ids, dtype=LLMC_DTYPE)
        while ids.size:
            if self.f is None:
                self._open()
            part, ids = ids[: self.left], ids[self.left :]
            self.f.write(part)  # the array's own bytes (contiguous, little-endian): no copy
            self.hasher.update(part)
            self.left -= part.size
            self.written += part.size
            if self.left == 0:
                self._close()

    def finish(self) -> list[dict]:
        if self.f is not None:
            self._close()
        if self.written != self.total:
            raise RuntimeError(f"llm.c shards of {self.split}: wrote {self.written} ids, counted {self.total}")
        return self.entries


def write_llmc_split(folder: str | Path, split: str, tokens: np.ndarray, doc_starts: np.ndarray, eot: int,
                     eot_appended: bool, shard_tokens: int = DEFAULT_SHARD_TOKENS) -> dict:
    """Write ``folder/llmc/<split>_NNNNNN.bin`` from a split's .bin ids and document starts.

    One streaming pass over ``tokens`` (and a gather of the ids before each document end,
    to count the shards' sizes before their headers are written). Returns the layout entry
    of the split: tokens, documents, shards [{file, tokens, bytes, checksum}].
    """
    if tokens.dtype.itemsize != 2:
        raise ConfigError("the llmc layout holds uint16 ids only (llm.c shard version 1)")
    total, _ = llmc_count(tokens, doc_starts, eot, eot_appended)
    w = _ShardWriter(Path(folder), split, total, shard_tokens)
    for piece in llmc_stream(tokens, doc_starts, eot, eot_appended):
        w.write(piece)
    return {"tokens": total, "documents": len(doc_starts), "shards": w.finish()}


@dataclass
class LlmcShard:
    path: Path
    count: int


def llmc_shard_files(spec: str | Path) -> list[Path]:
    """The shard files an llm.c dataset path names: one file, a folder (its ``*.bin``), or a glob;
    sorted by name (shard order). InputError when it names none."""
    s = str(spec)
    if any(c in s for c in "*?[") and not Path(s).exists():
        files = sorted(Path(p) for p in globlib.glob(s) if Path(p).is_file())
        if not files:
            raise InputError(f"{s}: the pattern matches no file")
        return files
    p = Path(s)
    if p.is_dir():
        files = sorted(q for q in p.glob("*.bin") if q.is_file())
        if not files:
            raise InputError(f"{p}: no .bin shard in this folder")
        return files
    if not p.exists():
        raise InputError(f"{p}: no such file or folder")
    return [p]


def group_shards(files: list[Path]) -> dict[str, list[Path]]:
    """Shards grouped by name without their number (``fineweb_train_000001.bin`` → ``fineweb_train``),
    each group in name order: one token stream per group (a split)."""
    groups: dict[str, list[Path]] = {}
    for f in files:
        m = _NAME_RE.match(f.name)
        key = m.group("stem") if m and m.group("stem") else f.stem
        groups.setdefault(key, []).append(f)
    return {k: sorted(v) for k, v in sorted(groups.items())}


def missing_shards(files: list[Path]) -> list[str]:
    """Names of the shards missing between the lowest and highest number of one group (llm.c's
    fineweb starts train at 000001: the first number is not assumed to be 0)."""
    nums = {}
    for f in files:
        m = _NAME_RE.match(f.name)
        if m:
            nums[int(m.group("num"))] = (f.name, m)
    if len(nums) < 2:
        return []
    name, m = nums[min(nums)]
    width = len(m.group("num"))
    head = name[: m.start("num")]
    return [f"{head}{k:0{width}d}.bin" for k in range(min(nums), max(nums) + 1) if k not in nums]


def split_of_group(name: str) -> str | None:
    """'train' / 'val' for a shard group name that says which (``fineweb_val`` → val), else None."""
    low = name.lower()
    if re.search(r"(^|[^a-z])(val|valid|validation)([^a-z]|$)", low):
        return "val"
    if re.search(r"(^|[^a-z])train([^a-z]|$)", low):
        return "train"
    return None


def llmc_doc_problems(tokens: np.ndarray, eot: int, doc_starts: np.ndarray | None, label: str) -> list[str]:
    """EOT checks of an llm.c stream: it starts with EOT, and (given winsample's ``doc_starts``
    in llm.c coordinates) every document starts with EOT and EOTs stand nowhere else."""
    out: list[str] = []
    n = len(tokens)
    if n == 0:
        return out
    if int(tokens[0]) != eot:
        out.append(f"{label}: the first id is {int(tokens[0])}, not the EOT {eot}: documents must start with <|endoftext|>")
    if doc_starts is None:
        return out
    d = len(doc_starts)
    j = 0
    for lo, chunk in formats.iter_chunks(tokens, formats.CHUNK_BYTES // 2):
        hi = lo + len(chunk)
        pos = np.flatnonzero(np.asarray(chunk) == eot) + lo
        k = int(np.searchsorted(doc_starts, hi, "left"))
        want = np.asarray(doc_starts[j:k]).astype(np.int64)
        j = k
        if len(pos) != len(want) or np.any(pos != want):
            missing = np.setdiff1d(want, pos)
            extra = np.setdiff1d(pos, want)
            if len(missing):
                out.append(f"{label}: document {int(np.searchsorted(doc_starts, missing[0]))} starts at id {int(missing[0])} without an EOT")
            else:
                out.append(f"{label}: an EOT at id {int(extra[0])} where no document starts")
            break
    if j != d:
        out.append(f"{label}: {d} documents expected, the stream ends before document {j}")
    return out


def shard_entry_problems(split: str, entry: dict) -> list[str]:
    """The shard names meta.json lists for ``split`` must be exactly those encode writes
    (``llmc/<split>_000000.bin``, …): a name read from metadata never leads out of the folder."""
    if split not in formats.SPLITS:
        return [f"layouts.llmc.splits names {split!r}, not train or val"]
    shards = entry.get("shards") if isinstance(entry, dict) else None
    if not isinstance(shards, list):
        return [f"layouts.llmc.splits.{split}.shards is not a list"]
    out = []
    for i, sh in enumerate(shards):
        want = llmc_shard_name(split, i)
        if not isinstance(sh, dict) or sh.get("file") != want:
            got = sh.get("file") if isinstance(sh, dict) else sh
            out.append(f"layouts.llmc.splits.{split}.shards[{i}].file is {got!r}, expected {want!r}")
    return out


def foreign_layout(path: str | Path, meta_path=None) -> tuple[str, object] | None:
    """("llmc", {group: shard files}) or ("megatron", prefix) when ``path`` names such data
    without a winsample meta.json describing it; None otherwise (winsample's own files).
    With ``meta_path``: ("llmc", groups) only for shards that meta.json's layouts.llmc lists
    (``llmc_owner`` then finds it), else None."""
    s = str(path)
    p = Path(s)
    if meta_path is not None:
        groups = _llmc_groups(p, s)
        owner = llmc_owner(groups, meta_path) if groups else None
        return (LLMC, groups) if owner is not None else None
    if not p.exists() and any(c in s for c in "*?["):
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


def _llmc_groups(p: Path, s: str) -> dict[str, list[Path]] | None:
    """The shard groups ``p`` names (a shard, a folder of them, a glob), or None."""
    try:
        if not p.exists() and any(c in s for c in "*?["):
            return group_shards(llmc_shard_files(s))
        if p.is_file() and is_llmc_shard(p):
            return {p.stem: [p]}
        if p.is_dir():
            files = sorted(p.glob("*.bin"))
            return group_shards(files) if files and any(is_llmc_shard(f) for f in files) else None
    except InputError:
        return None
    return None


@dataclass
class LlmcGroup:
    """What the owning meta.json says of one group of shards: its split, the split's entry (the
    group compared with it when it is all the split's shards), and the split's shards the group
    lacks (``missing``: names as meta.json lists them)."""

    split: str
    entry: dict
    missing: list[str]

    @property
    def partial(self) -> bool:
        return bool(self.missing)

    def compared(self) -> dict:
        """The entry to check the group's shards against: the split's, or, for a part of it, one
        of just the group's shards (no document count: meta.json records none for a part)."""
        if not self.partial:
            return self.entry
        mine = [sh for sh in self.entry["shards"] if sh["file"] not in self.missing]
        return {"shards": mine, "tokens": sum(sh["tokens"] for sh in mine)}


@dataclass
class LlmcOwner:
    """The winsample data folder's meta.json that lists some llm.c shards (``llmc_owner``):
    ``groups`` it lists, by group name; ``problem``: why it could not be used (a meta.json that
    does not read, shard entries that are not encode's), the meta then None."""

    meta_file: Path
    meta: formats.Meta | None
    groups: dict[str, LlmcGroup]
    problem: str | None = None


def _owner_file(files: list[Path], meta_path=None) -> Path | None:
    """``meta_path``, else the meta.json above the shards' ``llmc/`` folder (by the folder's
    absolute name, then its real one: ``verify .`` inside it, a link to it), when it exists."""
    if meta_path is not None:
        return Path(meta_path)
    for parent in (Path(os.path.abspath(files[0])).parent, _real(files[0]).parent):
        if parent.name == LLMC_DIR and (parent.parent / formats.META_JSON).is_file():
            return parent.parent / formats.META_JSON
    return None


def _real(p: Path) -> Path:
    try:
        return p.resolve()
    except (OSError, RuntimeError):  # a link loop
        return Path(os.path.abspath(p))


def _llmc_entries(meta: formats.Meta) -> tuple[dict[str, dict], str | None]:
    """({split: entry} of meta's layouts.llmc whose shards are encode's names with integer token
    counts, the first problem found or None). A meta.json with no llm.c layout lists none: no problem."""
    desc = meta.to_json().get("layouts")
    if desc is None or (isinstance(desc, dict) and LLMC not in desc):
        return {}, None
    splits = layout_splits({"layouts": desc}, LLMC)
    if splits is None:
        return {}, "meta.json: layouts.llmc.splits is not an object of split entries"
    good, problem = {}, None
    for split, entry in splits.items():
        problems = shard_entry_problems(split, entry)
        if not problems and not all(isinstance(sh.get("tokens"), int) and not isinstance(sh.get("tokens"), bool) for sh in entry["shards"]):
            problems = [f"layouts.llmc.splits.{split}.shards: a token count that is not an integer"]
        if problems:
            problem = problem or f"meta.json: {problems[0]}"
        else:
            good[split] = entry
    return good, problem


def llmc_owner(groups: dict[str, list[Path]], meta_path=None) -> LlmcOwner | None:
    """The meta.json that lists ``groups``' shards under layouts.llmc: ``meta_path``, else the one
    above their ``llmc/`` folder (``encode --layout llmc`` writes them there). None when there is
    none, or it lists none of them. One that does not read, or whose shard entries are not the
    names encode writes, is returned with its ``problem`` (a name read from metadata is only ever
    compared with the files given, never opened)."""
    files = [f for fs in groups.values() for f in fs]
    meta_file = _owner_file(files, meta_path) if files else None
    if meta_file is None or not meta_file.is_file():
        return None
    try:
        meta = formats.load_meta(meta_file)
    except WinsampleError as e:
        return LlmcOwner(meta_file, None, {}, f"{meta_file}: {e}")
    splits, problem = _llmc_entries(meta)
    listed: dict[Path, tuple[str, str]] = {}  # real path -> (split, the name meta.json lists)
    for split, entry in splits.items():
        for sh in entry["shards"]:
            listed[_real(meta_file.parent / sh["file"])] = (split, sh["file"])
    found = {}
    for name, fs in groups.items():
        got = [listed.get(_real(f)) for f in fs]
        if not got or None in got or len({split for split, _ in got}) != 1:
            continue
        split = got[0][0]
        have = {n for _, n in got}
        found[name] = LlmcGroup(split, splits[split], [sh["file"] for sh in splits[split]["shards"] if sh["file"] not in have])
    if not found and problem is None:
        return None
    return LlmcOwner(meta_file, meta, found, f"{meta_file}: {problem.removeprefix('meta.json: ')}" if problem else None)


def written(meta: dict | None) -> tuple[str, ...]:
    """The layouts a meta.json describes (one written before layouts existed: nanogpt)."""
    if meta is None:
        return ()
    desc = meta.get("layouts")
    if not isinstance(desc, dict):
        return DEFAULT_LAYOUTS
    return tuple(n for n in LAYOUTS if isinstance(desc.get(n), dict))


def stale_llmc(out_dir: Path, keep: set[str]) -> list[str]:
    """Names (relative to OUT_DIR) of llm.c shards in ``OUT_DIR/llmc`` that ``keep`` does not list."""
    d = out_dir / LLMC_DIR
    if not d.is_dir():
        return []
    return sorted(f"{LLMC_DIR}/{n}" for n in os.listdir(d) if n.endswith(".bin") and f"{LLMC_DIR}/{n}" not in keep)


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


def check_layouts(value: str | Sequence[str], dtype: str, n_vocab: int, shard_tokens: int, eot: int | None = -1) -> tuple[str, ...]:
    """The parsed layouts, or ConfigError for a combination no writer can produce (before any work).

    ``eot``: the tokenizer's end-of-text id (None: it has none, which llmc needs before each document)."""
    chosen = parse_layouts(value)
    if LLMC in chosen and eot is None:
        raise ConfigError("--layout llmc puts <|endoftext|> before each document, and this tokenizer has no end-of-text id")
    if LLMC in chosen:
        if formats.normalize_dtype(dtype) != LLMC_DTYPE:
            raise ConfigError(
                f"--layout llmc holds uint16 ids only (llm.c shard version 1, the only one its readers accept);"
                f" this vocabulary has {n_vocab} ids and needs {dtype}: drop llmc or use a vocabulary of at most 65536 ids"
            )
        if not 1 <= shard_tokens <= _INT32_MAX:
            raise ConfigError(f"--shard-tokens {shard_tokens} must be in [1, 2^31 - 1] (an llm.c header counts in int32)")
    if MEGATRON in chosen and n_vocab > _INT32_MAX + 1:
        raise ConfigError(f"--layout megatron: {n_vocab} ids do not fit int32, the widest integer code a Megatron index has")
    return chosen


def eot_positions(tokens, eot: int) -> np.ndarray:
    """int64 positions of ``eot`` in a token stream (memmap or shard stream), in bounded pieces:
    the document starts of an llm.c stream, where every document begins with its EOT."""
    parts = [np.flatnonzero(np.asarray(chunk) == eot) + lo for lo, chunk in formats.iter_chunks(tokens, formats.CHUNK_BYTES // 2)]
    return np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, np.int64)


def llmc_stream_checksum(files: list[Path], progress=None) -> str:
    """The checksum of an llm.c shard stream: ``combine_checksums`` of each shard file's own
    (header included), as meta.json records each shard's."""
    return formats.combine_checksums((Path(f).stat().st_size, formats.checksum_file(f, progress)) for f in files)


def layout_splits(meta: dict, name: str) -> dict[str, dict] | None:
    """``meta["layouts"][name]["splits"]`` when it is an object of objects, else None (malformed)."""
    desc = meta.get("layouts")
    entry = desc.get(name) if isinstance(desc, dict) else None
    splits = entry.get("splits") if isinstance(entry, dict) else None
    if not isinstance(splits, dict) or not all(isinstance(v, dict) for v in splits.values()):
        return None
    return splits
