"""Read a sharded dataset (``encode --engine ray`` without ``--merge``) as one token stream per split.

The layout is in ``formats``' docstring. :class:`ConcatTokens` is a read-only 1-d array-like
over a split's shard files, in order: ``len``, ``dtype``, slicing ``[lo:hi]`` (a memmap view
when the range lies in one file, a copy when it spans files), integer-array indexing,
``take`` and ``__array__`` (the whole stream: small cases only). ``windows`` and ``verify``
accept it wherever they take a memmap, so a sharded split plans and checks exactly like the
merged ``train.bin`` would (document starts included; a shard edge is a document edge only
where a document really ends there).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from . import formats
from .errors import DataError, InputError, WinsampleError


class ConcatTokens:
    """The concatenation of token files ``paths`` (``counts`` tokens each), read lazily."""

    ndim = 1

    def __init__(self, paths: list[Path], counts: list[int], dtype: str, doc_parts=None, header_bytes: int = 0):
        self.header_bytes = header_bytes  # bytes before the ids in each file (llm.c shards: 1024)
        self.paths = [Path(p) for p in paths]
        self.counts = [int(c) for c in counts]
        self.dtype = np.dtype(dtype)
        self.offsets = np.concatenate([[0], np.cumsum(self.counts, dtype=np.int64)]).astype(np.int64)
        self._maps: dict[int, np.ndarray] = {}
        self._doc_parts = doc_parts  # [(doc index path, continues)] per file, or None

    def __len__(self) -> int:
        return int(self.offsets[-1])

    @property
    def shape(self) -> tuple[int]:
        return (len(self),)

    @property
    def size(self) -> int:
        return len(self)

    @property
    def nbytes(self) -> int:
        return len(self) * self.dtype.itemsize

    def _part(self, j: int) -> np.ndarray:
        m = self._maps.get(j)
        if m is None and self.header_bytes:
            m = np.zeros(0, self.dtype) if self.counts[j] == 0 else np.memmap(
                self.paths[j], dtype=self.dtype, mode="r", offset=self.header_bytes, shape=(self.counts[j],))
            self._maps[j] = m
        elif m is None:
            m = formats.open_tokens(self.paths[j], self.dtype.str)
            if len(m) != self.counts[j]:
                raise DataError(f"{self.paths[j]}: holds {len(m)} tokens, meta.json says {self.counts[j]}")
            self._maps[j] = m
        return m

    def _range(self, lo: int, hi: int) -> np.ndarray:
        if hi <= lo:
            return np.zeros(0, self.dtype)
        j0 = int(np.searchsorted(self.offsets, lo, "right")) - 1
        j1 = int(np.searchsorted(self.offsets, hi, "left")) - 1
        if j0 == j1:  # one file: a view, no copy
            off = int(self.offsets[j0])
            return self._part(j0)[lo - off : hi - off]
        parts = []
        for j in range(j0, j1 + 1):
            off = int(self.offsets[j])
            parts.append(self._part(j)[max(lo - off, 0) : min(hi - off, self.counts[j])])
        return np.concatenate(parts)

    def take(self, idx) -> np.ndarray:
        """Ids at token positions ``idx`` (any shape; negative counts from the end)."""
        idx = np.asarray(idx, dtype=np.int64)
        flat = idx.ravel()
        n = len(self)
        flat = np.where(flat < 0, flat + n, flat)
        if flat.size and (flat.min() < 0 or flat.max() >= n):
            raise IndexError(f"index out of range for a stream of {n} tokens")
        out = np.empty(flat.shape, self.dtype)
        which = np.searchsorted(self.offsets, flat, "right") - 1
        for j in np.unique(which).tolist():  # one gather per file touched, not per token
            sel = which == j
            out[sel] = self._part(j)[flat[sel] - self.offsets[j]]
        return out.reshape(idx.shape)

    def __getitem__(self, key):
        if isinstance(key, slice):
            lo, hi, step = key.indices(len(self))
            if step == 1:
                return self._range(lo, hi)
            return self.take(np.arange(lo, hi, step, dtype=np.int64))
        if isinstance(key, (int, np.integer)):
            return self.take(np.int64(key))[()]
        return self.take(key)

    def __array__(self, dtype=None, copy=None):
        arr = self._range(0, len(self))
        return np.asarray(arr, dtype=dtype) if dtype is not None else np.asarray(arr)

    def doc_starts(self) -> np.ndarray:
        """int64 token offsets where documents start in the stream (0 first, when not empty)."""
        if self._doc_parts is None:
            raise DataError("no document index for this stream")
        parts = []
        for j, (path, _cont) in enumerate(self._doc_parts):
            starts = formats.read_doc_index(path)
            if len(starts) and (starts[0] < 0 or starts[-1] >= max(self.counts[j], 1) or np.any(np.diff(starts) <= 0)):
                raise DataError(f"{path}: document starts must increase and stay inside [0, {self.counts[j]})")
            parts.append(starts + self.offsets[j])
        starts = np.concatenate(parts) if parts else np.zeros(0, np.int64)
        if len(self) and (len(starts) == 0 or starts[0] != 0):
            # the stream's first tokens always start a document (the tail piece with --split tail)
            starts = np.concatenate([[0], starts])
        return starts.astype(np.int64)


def stream_of(folder: Path, entry: dict, dtype: str) -> ConcatTokens:
    """The logical stream of a sharded split entry; InputError if a shard file is missing."""
    paths, counts, docs = [], [], []
    for sh in entry["shards"]:
        p = folder / sh["file"]
        if not p.is_file():
            raise InputError(f"{p}: shard file listed in {folder / formats.META_JSON} is missing")
        size = p.stat().st_size
        if size != sh["bytes"]:
            raise DataError(f"{p}: {size} bytes, but meta.json says {sh['bytes']}: the shard changed since it was encoded")
        paths.append(p)
        counts.append(sh["tokens"])
        docs.append((folder / sh["doc_index"], bool(sh.get("continues"))))
    return ConcatTokens(paths, counts, dtype, docs)


def open_logical(path, meta_path=None):
    """(meta, split entry, stream) when ``path`` names a split of a sharded dataset, else None.

    ``path`` is the split's logical name (``data/train.bin``) with the meta.json beside it or
    given as ``meta_path``. Anything else (an ordinary file, an unreadable meta) gives None,
    so the caller's own checks and messages apply.
    """
    path = Path(path)
    mp = Path(meta_path) if meta_path else path.parent / formats.META_JSON
    if not mp.is_file():
        return None
    try:
        meta = formats.read_meta(mp)
    except WinsampleError:
        return None
    found = formats.split_of(meta, path)
    if found is None or not formats.is_sharded(found[1]):
        return None
    dtype = formats.normalize_dtype(meta["dtype"])
    return meta, found[1], stream_of(mp.parent, found[1], dtype)


def scan_logical(folder: Path, entry: dict, dtype: str, n_vocab: int, *, label: str, shingle_bits=None, progress=None):
    """verify's one pass over a sharded split: each shard scanned, the results combined.

    Returns a ``verify.FileScan`` of the logical stream (size, tokens, combined checksum, max
    id, out-of-range count and first position, shingles) whose ``tokens()`` is the stream, and
    whose ``shard_problems`` lists shards that disagree with their own meta entries.
    """
    from .verify import FileScan, scan_file

    stream = stream_of(folder, entry, dtype)
    item = np.dtype(dtype).itemsize
    parts, problems, shingles = [], [], []
    total = stray = bad = 0
    max_id = first_bad = first_bad_id = None
    for j, sh in enumerate(entry["shards"]):
        s = scan_file(stream.paths[j], dtype, n_vocab, label=sh["file"], shingle_bits=shingle_bits, progress=progress)
        parts.append((s.size, s.checksum))
        if s.checksum != sh["checksum"]:
            problems.append(f"{sh['file']} hashes to {s.checksum}, meta.json says {sh['checksum']}")
        if s.max_id is not None and sh.get("max_token") is not None and s.max_id != sh["max_token"]:
            problems.append(f"{sh['file']}: largest id {s.max_id}, meta.json says {sh['max_token']}")
        stray += s.stray
        if s.bad_count and first_bad is None:
            first_bad, first_bad_id = total + s.first_bad, s.first_bad_id
        bad += s.bad_count
        if s.max_id is not None:
            max_id = s.max_id if max_id is None else max(max_id, s.max_id)
        if s.shingles is not None:
            shingles.append(s.shingles)  # shingles across a shard edge are left out: a sample anyway
        total += s.n
    size = total * item + stray
    scan = FileScan(folder / entry["file"], label, dtype, size, total, stray, formats.combine_checksums(parts),
                    max_id, bad, first_bad, first_bad_id,
                    np.concatenate(shingles) if shingle_bits is not None and shingles else
                    (np.zeros(0, np.uint64) if shingle_bits is not None else None))
    scan.tokens = lambda: stream  # the logical stream instead of one memmap
    scan.shard_problems = problems
    return scan


def doc_problems(scan, entry: dict, where: str) -> list[str]:
    """verify's document-index check for a sharded split: counts and order, across shards."""
    out = list(getattr(scan, "shard_problems", []))
    try:
        starts = scan.tokens().doc_starts()
    except WinsampleError as e:
        return out + [f"{where}: {e}"]
    if len(starts) != entry["documents"]:
        out.append(f"{where}.documents {entry['documents']} but the shard indexes list {len(starts)}")
    if len(starts) and (starts[0] != 0 or np.any(np.diff(starts) <= 0) or starts[-1] >= max(scan.n, 1)):
        out.append(f"{where}: document starts across shards must begin at 0, increase, and stay below N = {scan.n}")
    return out


def read_shard_meta(path: Path) -> dict | None:
    """A shard's own meta (written last by its task), or None if absent or unreadable."""
    try:
        obj = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return obj if isinstance(obj, dict) and obj.get("format") == formats.SHARD_FORMAT else None
