"""An input read in byte ranges: a part of a JSONL or text file (``range_documents``, Ray's
shards), and the encoder's fast path for plain text (``read_text_range``: a worker reads and
decodes its own range; a ``RangeFault`` becomes the one-line error the decoded path gives)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from typing import NamedTuple

from .. import disk
from ..errors import InputError, WinsampleError
from .decoding import Reading, Replaced
from .inputs import INPUT_FILE, READ_BYTES, Origin, Reader, Source, changed_error, jsonl_docs, text_chunks


class RangeReader:
    """Bytes ``[start, end)`` of a file, read like a ``Reader`` (a piece of an input cut in parts)."""

    def __init__(self, label: str, path, start: int, end: int, replaced: Replaced | None = None):
        self.src = Part(f"{label} (part from byte {start})")
        self.replaced = replaced if replaced is not None else Replaced()
        self.f = disk.open_regular(path, INPUT_FILE, label)  # InputError if it went (or a FIFO came) since it was listed
        self.f.seek(start)
        self.base, self.left, self.offset = start, end - start, 0

    def read(self, n: int = READ_BYTES) -> bytes:
        data = self.f.read(min(n, self.left)) if self.left else b""
        self.left -= len(data)
        self.offset += len(data)
        return data

    def where(self, offset: int) -> str:
        return f"byte {self.base + offset}"

    def close(self) -> None:
        self.f.close()


class SpanReader(RangeReader):
    """Bytes ``[start, end)`` of input ``src`` (a file cut into parts read by several workers),
    read like a ``Reader`` of that input: its own label in messages, offsets and bytes counted
    in the file, and DataError at ``close`` if the file changed (size or mtime) since ``src``
    was stated. A JSONL part counts its lines from its own first; ``lines_before()`` counts
    those before it (read only when a message needs a line number)."""

    def __init__(self, src: Source, start: int, end: int, reading: Reading):
        super().__init__(src.label, src.path, start, end, reading.replaced)
        self.src = src
        self.offset = start  # offsets are the file's: a message names the byte in the file
        self.left = end - start
        st = os.fstat(self.f.fileno())
        if (st.st_size, st.st_mtime_ns) != (src.size, src.mtime_ns):
            self.f.close()
            raise changed_error(src.label, src.size, st.st_size)
        self._before: int | None = None

    def where(self, offset: int) -> str:
        return f"byte {offset}"

    def lines_before(self) -> int:
        """The lines of the file before this part (the b"\\n" bytes before its first byte)."""
        if self._before is None:
            n, pos = 0, 0
            with self.src.open() as f:
                while pos < self.base:
                    data = f.read(min(READ_BYTES, self.base - pos))
                    if not data:
                        break
                    n += data.count(b"\n")
                    pos += len(data)
            self._before = n
        return self._before

    def close(self) -> None:
        st = os.fstat(self.f.fileno())
        self.f.close()
        if (st.st_size, st.st_mtime_ns) != (self.src.size, self.src.mtime_ns):
            raise changed_error(self.src.label, self.src.size, st.st_size)

    def abort(self) -> None:
        self.f.close()


class Part(NamedTuple):
    """What a reader of a part says its source is (its label)."""

    label: str
    gz: bool = False


def range_documents(label: str, path, kind: str, index: int, start: int, end: int, *, text_field: str = "text",
                    errors: str = "strict", id_field: str | None = None, replaced: Replaced | None = None,
                    counted: dict | None = None) -> Iterator[tuple[str, object, Origin]]:
    """(where, document, Origin) for the documents in bytes ``[start, end)`` of input ``index``
    (a JSONL part cut after a line end, or part of a text file: one document of text pieces).

    In a JSONL part an origin's line counts from the part's first line (the caller adds the
    lines before it); its line count goes to ``counted["lines"]``.
    """
    reader = RangeReader(label, path, start, end, replaced)
    try:
        if kind == "jsonl":
            for where, text, offset, line, doc_id in jsonl_docs(reader, errors, text_field, id_field, start):
                yield where, text, Origin(index, offset, line, doc_id)
            if counted is not None:
                counted["lines"] = reader.lines
        else:
            yield reader.src.label, text_chunks(reader, errors), Origin(index, 0, 1, None)
    finally:
        reader.close()


# --- plain-text files as byte ranges (the encoder's fast path) ------------------------------


class RangeFault(Exception):
    """A byte range could not be used as text: ``args = (source index, "bytes" | "changed" |
    "unreadable", size planned[, why it could not be opened])``.

    Raised in an encoder worker; the main process turns it into the exact one-line error
    (``TextFile.error``) that reading the file through ``iter_documents`` would give.
    """


def read_text_range(i: int, path: str, start: int, end: int, size: int, mtime_ns: int, as_bytes: bool = False) -> str | bytes:
    """Bytes ``[start, end)`` of a file, checked (size and mtime as when planned, no NUL) and
    decoded as strict UTF-8 (``as_bytes``: checked to be UTF-8 and returned as they are, for an
    encoder that takes UTF-8 itself); ``RangeFault(i, kind)`` otherwise."""
    try:  # non-blocking: a FIFO put in the file's place must not hang the worker
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise RangeFault(i, "unreadable", size, e.strerror or str(e)) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise RangeFault(i, "unreadable", size, "not a regular file")
        if (st.st_size, st.st_mtime_ns) != (size, mtime_ns):
            raise RangeFault(i, "changed", size)
        parts, pos = [], start
        while pos < end:
            data = os.pread(fd, end - pos, pos)
            if not data:
                raise RangeFault(i, "changed", size)
            parts.append(data)
            pos += len(data)
    finally:
        os.close(fd)
    data = parts[0] if len(parts) == 1 else b"".join(parts)
    if b"\0" in data:
        raise RangeFault(i, "bytes", size)
    if as_bytes and data.isascii():  # ASCII is UTF-8: nothing to decode
        return data
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise RangeFault(i, "bytes", size) from None
    return data if as_bytes else text


def range_error(src: Source, kind: str, size: int, why: str | None = None) -> WinsampleError:
    """The one-line error for a ``RangeFault`` on ``src``: for bad bytes, exactly the one the
    decoded path gives (the file is read again from its start to find it); for a file that
    could not be opened (``why``), the InputError opening it gives (``no such file``: removed
    since it was listed; not a regular file), else ``cannot read: why`` (a passing failure)."""
    if kind == "unreadable":
        src.open().close()  # raises what is wrong with it now
        return InputError(f"{src.label}: cannot read: {why}")
    if kind == "bytes":
        reader = Reader(src, None)
        try:
            for _ in text_chunks(reader, "strict", Reading(hint=True)):
                pass
        finally:
            reader.abort()
    try:
        now = src.path.stat().st_size
    except OSError:
        now = 0
    return changed_error(src.label, size, now)

