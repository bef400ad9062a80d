"""Checksums: xxh3-128 of a file or a stream, and a checksum of checksums for a set of parts."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import xxhash

from .names import open_regular

CHECKSUM_ALGO = "xxh3_128"

# Bytes per read when streaming a file (checksums, range checks): big enough to run at disk
# speed, small enough that memory stays flat whatever the file size.
CHUNK_BYTES = 16 << 20
SHARD_CHECKSUM = f"{CHECKSUM_ALGO}-shards"


def combine_checksums(parts: Iterable[tuple[int, str]]) -> str:
    """Checksum of a sharded split: xxh3-128 over ``"<bytes> <checksum>\n"`` of each shard in order."""
    h = new_hasher()
    for nbytes, checksum in parts:
        h.update(f"{nbytes} {checksum}\n".encode())
    return f"{SHARD_CHECKSUM}:{h.hexdigest()}"


# --- checksums --------------------------------------------------------------------------


def new_hasher():
    """A streaming hasher; feed it bytes with ``update``, finish with ``format_checksum``."""
    return xxhash.xxh3_128()


def format_checksum(hasher) -> str:
    return f"{CHECKSUM_ALGO}:{hasher.hexdigest()}"


def checksum_file(path: str | Path, progress=None) -> str:
    """Checksum of a whole file, read in CHUNK_BYTES pieces; ``progress(nbytes)`` per piece."""
    h = new_hasher()
    with open_regular(path, "a token file") as f:
        while chunk := f.read(CHUNK_BYTES):
            h.update(chunk)
            if progress:
                progress(len(chunk))
    return format_checksum(h)


SAMPLE_ALGO = f"{CHECKSUM_ALGO}-sampled"
SAMPLE_EDGE = 1 << 20  # the first and the last MiB
SAMPLE_BLOCKS, SAMPLE_BLOCK = 16, 64 << 10  # and 16 blocks of 64 KiB spread evenly between


def sample_checksum(path: str | Path) -> str:
    """``xxh3_128-sampled:<hex>``: the file's size, its first and last MiB and 16 blocks of 64 KiB
    at evenly spread offsets, hashed (at most ~3 MiB read, whatever the size). Equal for equal
    files; a different file of the same size differs unless it agrees on every sampled byte, so it
    catches a swapped or re-encoded file, not a single edited byte between the samples (the full
    checksum, which ``verify`` computes, does)."""
    h = new_hasher()
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        h.update(size.to_bytes(8, "little"))
        spans = [(0, SAMPLE_EDGE)] + [(size * i // (SAMPLE_BLOCKS + 1), SAMPLE_BLOCK) for i in range(1, SAMPLE_BLOCKS + 1)]
        spans.append((max(size - SAMPLE_EDGE, 0), SAMPLE_EDGE))
        for at, n in spans:
            f.seek(at)
            h.update(f.read(min(n, max(size - at, 0))))
    return f"{SAMPLE_ALGO}:{h.hexdigest()}"
