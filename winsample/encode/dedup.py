"""``encode --dedup exact``: the documents already kept, as xxh3-128 hashes of their text.

A document whose text (its UTF-8 bytes) hashes like one kept before it, in input order, is
dropped, whichever split either would go to: the first occurrence stays. (With ``--split doc``
equal texts always fall in the same split, since the split hashes the text: the drop removes
repeats inside it; with ``--split tail`` it also keeps a later copy out of val.) The decision is
made where documents are read, in input order, so it does not depend on the worker count.

Memory: 16 bytes per kept document (two uint64 columns, in sorted runs merged as they grow,
plus at most ``PENDING`` recent hashes in a set); while two runs merge, the larger is held twice.
For ``--resume`` every kept hash is also appended to ``dedup.hashes.raw`` in the partial folder,
synced with each checkpoint; a resumed run reads back as many as the checkpoint kept documents.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import xxhash

from .. import disk
from . import resume

PENDING = 1 << 16  # hashes held in a Python set before they become a sorted run
FILE = "dedup.hashes.raw"
_MASK = (1 << 64) - 1


def new_hasher():
    return xxhash.xxh3_128()


def digest_of_text(text: str) -> int:
    """The hash ``--dedup exact`` compares: xxh3-128 of the text's UTF-8 (lone surrogates kept)."""
    return xxhash.xxh3_128_intdigest(text.encode("utf-8", "surrogatepass"))


class Seen:
    """The hashes of the documents kept so far: ``add`` says whether a hash is new (and keeps it)."""

    def __init__(self, stage: Path):
        self.path = stage / FILE
        self.pending: set[int] = set()
        self.runs: list[tuple[np.ndarray, np.ndarray]] = []  # (hi, lo) sorted by (hi, lo); sizes decreasing
        self.count = 0
        self._buf = bytearray()
        with disk.naming(self.path):
            self.f = open(self.path, "ab")

    def __contains__(self, digest: int) -> bool:
        if digest in self.pending:
            return True
        hi, lo = np.uint64(digest >> 64), np.uint64(digest & _MASK)
        for his, los in self.runs:
            i = int(np.searchsorted(his, hi))
            while i < len(his) and his[i] == hi:
                if los[i] == lo:
                    return True
                i += 1
        return False

    def add(self, digest: int) -> bool:
        """True when ``digest`` is new (it is then kept), False when a kept document had it."""
        if digest in self:
            return False
        self.pending.add(digest)
        self.count += 1
        self._buf += digest.to_bytes(16, "little")
        if len(self.pending) >= PENDING:
            self._settle()
        return True

    def _settle(self) -> None:
        """The pending set as a sorted run; equal-sized runs merged, so at most log2(n) runs remain."""
        if self.pending:
            vals = sorted(self.pending)
            self.runs.append(_run(np.array([v >> 64 for v in vals], np.uint64), np.array([v & _MASK for v in vals], np.uint64)))
            self.pending = set()
        while len(self.runs) >= 2 and len(self.runs[-2][0]) <= 2 * len(self.runs[-1][0]):
            (h2, l2), (h1, l1) = self.runs.pop(), self.runs.pop()
            self.runs.append(_run(np.concatenate((h1, h2)), np.concatenate((l1, l2))))

    def flush(self) -> None:
        """Write the hashes kept since the last flush to the file."""
        if self._buf:
            with disk.naming(self.path):
                self.f.write(self._buf)
                self.f.flush()
            self._buf = bytearray()

    def checkpoint(self, to_sync: list) -> None:
        """Flush, and add the file's ``(fd, path)`` to those a checkpoint syncs."""
        self.flush()
        to_sync.append((self.f.fileno(), self.path))

    def reopen(self, kept: int) -> None:
        """Continue from a checkpoint that had kept ``kept`` documents: their hashes, read back
        from the file (cut there); ``resume.Stale`` when it holds fewer."""
        self.f.close()
        try:
            f = disk.open_own(self.path)
        except OSError as e:
            raise resume.Stale(f"{self.path}: {e.strerror}") from None
        data = f.read(kept * 16)
        if len(data) < kept * 16:
            f.close()
            raise resume.Stale(f"{self.path}: holds {len(data) // 16} document hashes, the checkpoint kept {kept}")
        f.truncate(kept * 16)
        f.seek(kept * 16)
        self.f = f
        words = np.frombuffer(data, dtype="<u8").reshape(-1, 2)
        self.pending, self.runs, self.count, self._buf = set(), [], kept, bytearray()
        if kept:
            self.runs.append(_run(words[:, 1].copy(), words[:, 0].copy()))

    def close(self) -> None:
        with disk.naming(self.path):
            self.flush()
            self.f.close()


def _run(hi: np.ndarray, lo: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.lexsort((lo, hi))
    return hi[order], lo[order]


__all__ = ["Seen", "digest_of_text", "new_hasher"]
