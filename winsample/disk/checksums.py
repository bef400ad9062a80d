"""Checksums: xxh3-128 of a file or a stream, and a checksum of checksums for a set of parts."""

from __future__ import annotations

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
