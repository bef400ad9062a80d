"""A plain UTF-8 text file read as byte ranges cut at safe points: encode's fast path.

The main process finds the cuts (reading only a small window near each, or streaming the bytes
through the split hasher); workers read and decode their own range (``ranges.read_text_range``).
A stretch with no safe cut is cut by force where ``tokenizer.chunking`` says, counted in
characters from the last safe cut, so these ranges end where the decoded path's pieces do.
"""

from __future__ import annotations

import codecs
import os
from collections.abc import Iterator

from ..errors import DataError
from ..tokenizer.chunking import last_safe_cut_bytes
from .decoding import sniff
from .inputs import READ_BYTES, Source, changed_error

HEAD_BYTES = 64 << 10  # a file's first bytes, decoded to tell text from empty/whitespace-only
CUT_WINDOW = 64 << 10  # bytes searched back from a target for a safe cut (grows x4 if none)
LONG_RUN_CHARS = 4 << 20  # chars of a stretch without a safe cut before it is cut by force (tokenizer.chunking)


class TextFile:
    """A plain UTF-8 text file (one document) planned as byte ranges cut at safe points.

    The main process reads only a small window near each cut (and, when the document's hash
    is wanted, streams the bytes through the hasher); workers read and decode their own range
    with ``read_text_range``. Valid UTF-8 bytes are exactly ``text.encode()``, so hashes match
    the decoded path. Use ``open`` (None when the file must take the decoded path: compressed,
    stdin, ``--errors replace``, ``--input-encoding``, small, starting with a byte-order mark or
    with no text in its first ``HEAD_BYTES``, or not valid UTF-8 there).
    """

    @classmethod
    def open(cls, src: Source, index: int, errors: str, min_bytes: int, cut_bytes=None,
             long_run: int = LONG_RUN_CHARS, encoding: str | None = None) -> TextFile | None:
        """``cut_bytes(window, base)``: the tokenizer's ``last_safe_cut_bytes`` (default: chunking's rule)."""
        if src.kind != "text" or src.compressed or src.path is None or errors != "strict" or encoding is not None:
            return None
        if src.size is None or src.size < min_bytes:
            return None
        f = src.open()  # InputError: gone, unreadable, or no longer a regular file
        try:
            st = os.fstat(f.fileno())
            head = os.pread(f.fileno(), HEAD_BYTES, 0)
            if st.st_size < min_bytes or b"\0" in head or sniff(head)[0] is not None:  # a BOM: the decoded path drops it
                f.close()
                return None
            dec = codecs.getincrementaldecoder("utf-8")("strict")
            text = dec.decode(head, len(head) == st.st_size)
        except UnicodeDecodeError:
            f.close()
            return None
        except BaseException:
            f.close()
            raise
        if not text or text.isspace():  # maybe an empty document: the decoded path decides
            f.close()
            return None
        return cls(src, index, f, st, cut_bytes, long_run)

    def __init__(self, src: Source, index: int, f, st, cut_bytes=None, long_run: int = LONG_RUN_CHARS):
        self.src, self.index, self.f, self.stat = src, index, f, st
        self.cut_bytes = cut_bytes or last_safe_cut_bytes
        self.size = st.st_size
        src.mtime_ns, src.ctime_ns = st.st_mtime_ns, st.st_ctime_ns
        self.long_run = long_run  # chars: a stretch this long without a safe cut is cut by force (TextChunker's rule)
        self.forced_cuts = 0

    def ranges(self, piece_bytes: int, hasher=None, progress=None, start: int = 0, stop: int | None = None) -> Iterator[tuple]:
        """Range specs for ``read_text_range``, in order, each ``piece_bytes`` (+ a few) long or
        shorter, cut at safe points; where none lies within ``piece_bytes`` the range grows to
        the next one, up to ``long_run`` characters (then a forced cut, counted in
        ``forced_cuts``). ``hasher`` gets every byte, in order. ``[start, stop)``: a part of the
        file between two safe cuts (a part of a run cut in parts); its ranges end where the
        whole file's would have ids the same (a forced cut falls where it does in the whole
        file: the last safe cut before a stretch without one is where both count from)."""
        fd = self.f.fileno()
        path = os.fsdecode(self.src.path)
        pos = start
        stop = self.size if stop is None else stop
        buf = bytearray(READ_BYTES) if hasher is not None else None
        while pos < stop:
            end = min(self._next_cut(fd, pos, piece_bytes), stop)
            if hasher is not None:
                self._hash(hasher, buf, pos, end)
            if progress:
                progress(end - pos)
            yield (self.index, path, pos, end, self.size, self.stat.st_mtime_ns)
            pos = end

    def _next_cut(self, fd: int, pos: int, piece_bytes: int) -> int:
        """The end of the range starting at ``pos`` (a cut): the last safe cut at or below a target
        (``pos`` + ``piece_bytes``, growing by that until one is found), or a forced cut: the byte
        after ``long_run`` characters when there is no safe cut before it (``tokenizer.chunking``'s
        rule, so the decoded path cuts at the same character)."""
        target = pos + piece_bytes
        floor = pos  # cuts at or below floor + a few bytes are known not to exist
        forced = None  # the byte after long_run chars from pos, once the stretch can be that long
        while True:
            if forced is None and min(target, self.size) - pos > self.long_run:  # chars <= bytes
                forced = self._after_chars(fd, pos, self.long_run) or self.size
            if target >= self.size:
                break
            cut = self._last_cut(fd, floor, min(target + 8, self.size), pos)  # the chars a cut <= target needs lie below
            if cut is not None:
                if forced is not None and cut > forced and self._last_cut_at_most(fd, floor, forced, pos) is None:
                    return self._force(forced)
                return cut
            if forced is not None and forced + 2 <= target:  # decided: no safe cut up to it
                return self._force(forced)
            floor = max(pos, target - 8)
            target += piece_bytes
        if forced is not None and forced < self.size and self._last_cut_at_most(fd, floor, forced, pos) is None:
            return self._force(forced)  # the file's last stretch: a char follows the cut (the last char is never a safe cut)
        return self.size

    def _force(self, at: int) -> int:
        self.forced_cuts += 1
        return at

    def _last_cut(self, fd: int, floor: int, hi: int, pos: int) -> int | None:
        """The last safe cut in bytes (floor, hi - 8] above ``pos``, searched back in growing windows."""
        window, lo = CUT_WINDOW, hi
        while lo > floor:
            lo = max(floor, hi - window)
            cut = self.cut_bytes(os.pread(fd, hi - lo, lo), lo)
            if cut is not None and cut > pos:
                return cut
            hi = lo + 8  # overlap: a cut just above lo needs the char before it
            window *= 4
        return None

    def _last_cut_at_most(self, fd: int, floor: int, limit: int, pos: int) -> int | None:
        """The last safe cut in (floor, limit] above ``pos``. Safe cuts sit on ASCII characters (a
        space, a line break), so a window ending one byte past a cut c holds what any cut before c needs."""
        hi = min(limit + 8, self.size)
        while True:
            c = self._last_cut(fd, floor, hi, pos)
            if c is None or c <= limit:
                return c
            hi = c + 1

    def _after_chars(self, fd: int, pos: int, n: int) -> int | None:
        """The byte offset ``n`` characters after ``pos`` (the lead byte of character n), or None at the end."""
        import numpy as np  # only here: a stretch of millions of chars with no safe cut

        seen, at = 0, pos
        while at < self.size:
            data = os.pread(fd, min(READ_BYTES, self.size - at), at)
            if not data:
                return None
            leads = np.flatnonzero((np.frombuffer(data, np.uint8) & 0xC0) != 0x80)
            if seen + len(leads) > n:
                return at + int(leads[n - seen])
            seen, at = seen + len(leads), at + len(data)
        return None

    def _hash(self, hasher, buf: bytearray, start: int, end: int) -> None:
        view = memoryview(buf)
        self.f.seek(start)
        left = end - start
        while left:
            n = self.f.readinto(view[: min(left, len(buf))])
            if not n:
                raise self._changed()
            hasher.update(view[:n])
            left -= n

    def _changed(self) -> DataError:
        try:
            now = self.src.path.stat().st_size
        except OSError:
            now = self.size
        return changed_error(self.src.label, self.size, now)

    def close(self) -> None:
        """Close; DataError if the file changed (size or mtime) while it was planned."""
        after = os.fstat(self.f.fileno())
        self.f.close()
        try:
            now = self.src.path.stat()
        except OSError:
            now = after
        key = (self.stat.st_size, self.stat.st_mtime_ns)
        if (after.st_size, after.st_mtime_ns) != key or (now.st_size, now.st_mtime_ns) != key:
            raise changed_error(self.src.label, self.size, now.st_size)
        self.src.size = self.size

    def abort(self) -> None:
        self.f.close()
