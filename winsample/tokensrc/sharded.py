"""A sharded split read as one logical token stream (the concatenation of its shard files)."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np

from ..errors import DataError, InputError
from ..formats.meta import SplitEntry
from ..formats.names import META_JSON
from ..formats.npy import read_doc_index
from ..formats.tokens import open_tokens

# --- sharded splits: one logical stream ------------------------------------------------------


def _open_maps() -> int:
    """Files of a ConcatTokens mapped at once (``ConcatTokens._part``): a quarter of this process's
    limit on open files (each map holds one), at least 64; FineWeb-10B's ~100 llm.c shards stay
    mapped under the usual 1024, a thousand shards do not pass it."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):
        return 64
    return 1 << 16 if soft == resource.RLIM_INFINITY else max(64, soft // 4)


OPEN_MAPS = _open_maps()


class ConcatTokens:
    """The concatenation of token files ``paths`` (``counts`` tokens each), read lazily.

    A read-only 1-d array-like: ``len``, ``dtype``, slicing ``[lo:hi]`` (a memmap view when the
    range lies in one file, a copy when it spans files), integer-array indexing, ``take`` and
    ``__array__`` (the whole stream: small cases only). Features accept it wherever they take a
    memmap, so a sharded split plans and checks exactly like the merged ``train.bin`` would.
    """

    ndim = 1

    def __init__(self, paths: list[Path], counts: list[int], dtype: str, doc_parts=None, header_bytes: int = 0):
        self.header_bytes = header_bytes  # bytes before the ids in each file (llm.c shards: 1024)
        self.paths = [Path(p) for p in paths]
        self.counts = [int(c) for c in counts]
        self.dtype = np.dtype(dtype)
        self.offsets = np.concatenate([[0], np.cumsum(self.counts, dtype=np.int64)]).astype(np.int64)
        self._maps: dict[int, np.ndarray] = {}  # mapped files, least recently used first
        self._lock = threading.Lock()
        self._doc_parts = doc_parts  # [(doc index path, continues)] per file, or None

    def __len__(self) -> int:
        return int(self.offsets[-1])

    def __getstate__(self):  # to another process: the file list, not its maps or its lock
        return {**self.__dict__, "_maps": {}, "_lock": None}

    def __setstate__(self, state) -> None:
        self.__dict__.update(state, _lock=threading.Lock())

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
        """File ``j``'s ids, mapped; at most ``OPEN_MAPS`` files stay mapped (each map holds a file
        descriptor: a stream of a thousand llm.c shards would pass the usual limit of 1024). A view
        handed out keeps its own map alive, so dropping one here never invalidates a caller's array."""
        with self._lock:  # threads share a stream (planning.boundaries scans it on several)
            m = self._maps.pop(j, None)
            if m is not None:
                self._maps[j] = m  # most recently used last
                return m
            while len(self._maps) >= OPEN_MAPS:
                del self._maps[next(iter(self._maps))]
        if self.header_bytes:
            m = np.zeros(0, self.dtype) if self.counts[j] == 0 else np.memmap(
                self.paths[j], dtype=self.dtype, mode="r", offset=self.header_bytes, shape=(self.counts[j],))
        else:
            m = open_tokens(self.paths[j], self.dtype.str)
            if len(m) != self.counts[j]:
                raise DataError(f"{self.paths[j]}: holds {len(m)} tokens, meta.json says {self.counts[j]}")
        with self._lock:
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
        out = np.empty(hi - lo, self.dtype)  # each file's piece copied at once: no map held for the rest
        for j in range(j0, j1 + 1):
            off = int(self.offsets[j])
            a, b = max(lo - off, 0), min(hi - off, self.counts[j])
            out[off + a - lo : off + b - lo] = self._part(j)[a:b]
        return out

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
            starts = read_doc_index(path)
            if len(starts) and (starts[0] < 0 or starts[-1] >= max(self.counts[j], 1) or np.any(np.diff(starts) <= 0)):
                raise DataError(f"{path}: document starts must increase and stay inside [0, {self.counts[j]})")
            parts.append(starts + self.offsets[j])
        starts = np.concatenate(parts) if parts else np.zeros(0, np.int64)
        if len(self) and (len(starts) == 0 or starts[0] != 0):
            # the stream's first tokens always start a document (the tail piece with --split tail)
            starts = np.concatenate([[0], starts])
        return starts.astype(np.int64)


def stream_of(folder: str | Path, entry: SplitEntry, dtype: str) -> ConcatTokens:
    """The logical stream of a sharded split entry; InputError if a shard file is missing,
    DataError if one's size differs from its entry."""
    folder = Path(folder)
    paths, counts, docs = [], [], []
    for sh in entry.shards or []:
        p = folder / sh.file
        if not p.is_file():
            raise InputError(f"{p}: shard file listed in {folder / META_JSON} is missing")
        size = p.stat().st_size
        if size != sh.bytes:
            raise DataError(f"{p}: {size} bytes, but meta.json says {sh.bytes}: the shard changed since it was encoded")
        paths.append(p)
        counts.append(sh.tokens)
        docs.append((folder / sh.doc_index if sh.doc_index else None, sh.continues))
    return ConcatTokens(paths, counts, dtype, docs)
