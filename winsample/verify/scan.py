"""One pass over a token file (or a sharded split): size, checksum, id range and shingles.

Each token file is read once, in pieces over a read-only memmap (shared with the checks that
read it later, so no page is faulted in twice): that one pass computes the max id, the
out-of-range count and first position, the xxh3-128 checksum and (for a train/val pair) the
k-token shingle hashes used by split_leakage.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .. import disk, formats, tokensrc
from ..errors import InputError
from .shingles import SHINGLE_K, Shingler

Progress = Callable[[int], None]


@dataclass
class FileScan:
    """What one streaming pass learned about a token file."""

    path: Path
    label: str  # name shown in the report
    dtype: str
    size: int  # bytes
    n: int  # whole tokens (size // itemsize)
    stray: int  # bytes left over after the last whole token
    checksum: str
    max_id: int | None = None  # None for an empty or unreadable-as-tokens file
    bad_count: int = 0  # ids >= n_vocab
    first_bad: int | None = None  # position (tokens) of the first id >= n_vocab
    first_bad_id: int | None = None
    shingles: np.ndarray | None = None  # sampled k-shingle hashes (uint64), in file order
    offset: int = 0  # bytes before the first id (an llm.c shard's header); size and n count after it
    _map: np.ndarray | None = field(default=None, repr=False, compare=False)

    def tokens(self) -> np.ndarray:
        """Read-only view of the whole tokens (the stray tail bytes, if any, left out).

        One mapping per scan, reused: pages the scan faulted in need no new faults later."""
        if self.n == 0:
            return np.zeros(0, dtype=self.dtype)
        if self._map is None:
            self._map = np.memmap(self.path, dtype=self.dtype, mode="r", offset=self.offset, shape=(self.n,))
        return self._map

    def release(self) -> None:
        """Drop the mapping and its file descriptor (``tokens()`` maps the file again when asked)."""
        self._map = None


def require_file(path: Path) -> None:
    if not path.exists():
        raise InputError(f"{path}: no such file")
    if not path.is_file():
        raise InputError(f"{path}: not a regular file")


def scan_file(
    path: str | Path,
    dtype: str,
    n_vocab: int,
    *,
    label: str | None = None,
    shingle_bits: int | None = None,
    progress: Progress | None = None,
    offset: int = 0,
    tokens: np.ndarray | None = None,
) -> FileScan:
    """One pass over ``path``: range figures, checksum and (if ``shingle_bits`` is set) shingles.

    ``tokens``: a read-only map of the same ids that other checks already read (the dataset's
    ``OpenSplit.tokens``): the scan pages it in, so they fault no page twice.

    InputError if the file is missing, not a file or unreadable. A size that is not a multiple
    of the item size is recorded (``stray``) and only the checksum is computed.
    """
    path = Path(path)
    require_file(path)
    try:
        size = path.stat().st_size - offset
        with open(path, "rb") as f:
            head = f.read(offset)
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror}") from None
    item = np.dtype(dtype).itemsize
    scan = FileScan(path, label or path.name, dtype, size, size // item, size % item, "", offset=offset)
    if scan.stray:
        scan.checksum = disk.checksum_file(path, progress)
        return scan
    if tokens is not None and len(tokens) == scan.n and tokens.dtype == np.dtype(dtype):
        scan._map = tokens
    tokens = scan.tokens()
    hasher = disk.new_hasher()
    hasher.update(head)  # the checksum is the whole file's (an llm.c shard: header included)
    shingler = Shingler(SHINGLE_K, shingle_bits) if shingle_bits is not None else None
    ranges = _RangeScan(n_vocab, shingler)
    try:
        _read(tokens, item, hasher, ranges, progress)
    except OSError as e:  # e.g. an I/O error while paging the memmap in
        raise InputError(f"{path}: cannot read: {e}") from None
    scan.bad_count, scan.first_bad, scan.first_bad_id = ranges.bad_count, ranges.first_bad, ranges.first_bad_id
    max_id = ranges.max_id
    scan.checksum = disk.format_checksum(hasher)
    scan.max_id = max_id if max_id >= 0 else None
    if shingler is not None:
        scan.shingles = shingler.result()
    return scan


def _read(tokens: np.ndarray, item: int, hasher, ranges: _RangeScan, progress: Progress | None) -> None:
    """Feed ``tokens`` in file order to ``hasher`` and ``ranges`` (which also shingles, when it has a Shingler)."""
    chunk_tokens = disk.checksums.CHUNK_BYTES // item
    if ranges.shingler is None:
        # One thread: each piece is hashed, then scanned for the range figures while it is
        # still in this core's cache. A second thread would fault the same pages in beside
        # this one (the two contend) and spend about as much CPU again: CPU that the plan
        # checks and retokenize, which verify runs beside the scan, need more.
        for lo, chunk in formats.iter_chunks(tokens, SCAN_PIECE // item):
            hasher.update(chunk)
            ranges.feed(lo, chunk)
            if progress:
                progress(chunk.nbytes)
    else:
        # Shingles cost more than the hash: a helper thread takes the range figures and
        # shingles, chunk by chunk in file order, while this thread hashes the same chunk
        # (xxhash and numpy release the GIL). At most AHEAD chunks are queued (memmap
        # views: no copies).
        pending: deque = deque()
        with ThreadPoolExecutor(1) as pool:
            for lo, chunk in formats.iter_chunks(tokens, chunk_tokens):
                pending.append(pool.submit(ranges.feed, lo, chunk))
                hasher.update(chunk)
                while len(pending) > AHEAD:
                    pending.popleft().result()
                if progress:
                    progress(chunk.nbytes)
            while pending:
                pending.popleft().result()


AHEAD = 2  # chunks the range/shingle thread may lag behind the hashing thread
SCAN_PIECE = 4 << 20  # bytes hashed then range-scanned at a time without shingles: stays in cache


class _RangeScan:
    """Max id, out-of-range count and first position, and shingles, fed chunks in file order."""

    def __init__(self, n_vocab: int, shingler: Shingler | None):
        self.n_vocab, self.shingler = n_vocab, shingler
        self.max_id = -1
        self.bad_count = 0
        self.first_bad: int | None = None
        self.first_bad_id: int | None = None

    def feed(self, lo: int, chunk: np.ndarray) -> None:
        m = int(chunk.max())
        if m >= self.n_vocab:  # rare: only then pay for the mask
            bad = chunk >= self.n_vocab
            if self.first_bad is None:
                i = int(np.argmax(bad))
                self.first_bad, self.first_bad_id = lo + i, int(chunk[i])
            self.bad_count += int(np.count_nonzero(bad))
        self.max_id = max(self.max_id, m)
        if self.shingler is not None:
            self.shingler.feed(chunk)


def scan_logical(src: tokensrc.OpenSplit, n_vocab: int, *, label: str, shingle_bits=None, progress=None) -> FileScan:
    """The one pass over a sharded split: each shard scanned, the results combined.

    Returns a ``FileScan`` of the logical stream (size, tokens, combined checksum, max id,
    out-of-range count and first position, shingles) whose ``tokens()`` is the stream, and whose
    ``shard_problems`` lists shards that disagree with their own meta entries.
    """
    stream = src.tokens
    dtype, entry = src.dtype, src.entry
    parts, problems, shingles = [], [], []
    total = stray = bad = 0
    max_id = first_bad = first_bad_id = None
    for j, sh in enumerate(entry.shards):
        s = scan_file(stream.paths[j], dtype, n_vocab, label=sh.file, shingle_bits=shingle_bits, progress=progress)
        parts.append((s.size, s.checksum))
        if s.checksum != sh.checksum:
            problems.append(f"{sh.file} hashes to {s.checksum}, meta.json says {sh.checksum}")
        if s.max_id is not None and sh.max_token is not None and s.max_id != sh.max_token:
            problems.append(f"{sh.file}: largest id {s.max_id}, meta.json says {sh.max_token}")
        stray += s.stray
        if s.bad_count and first_bad is None:
            first_bad, first_bad_id = total + s.first_bad, s.first_bad_id
        bad += s.bad_count
        if s.max_id is not None:
            max_id = s.max_id if max_id is None else max(max_id, s.max_id)
        if s.shingles is not None:
            shingles.append(s.shingles)  # shingles across a shard edge are left out: a sample anyway
        total += s.n
    size = total * src.itemsize + stray
    scan = FileScan(src.path, label, dtype, size, total, stray, disk.combine_checksums(parts),
                    max_id, bad, first_bad, first_bad_id,
                    np.concatenate(shingles) if shingle_bits is not None and shingles else
                    (np.zeros(0, np.uint64) if shingle_bits is not None else None))
    scan.tokens = lambda: stream  # the logical stream instead of one memmap
    scan.shard_problems = problems
    return scan


@dataclass
class Target:
    """A token file to check: its split name (when known), meta entry and how it opened."""

    path: Path
    label: str
    split: str | None = None
    entry: formats.SplitEntry | None = None
    src: tokensrc.OpenSplit | None = None
