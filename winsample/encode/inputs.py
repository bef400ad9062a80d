"""Inputs of ``winsample encode``: find the files, read documents as streams of text.

- a file is read by its name: ``*.jsonl`` (``.jsonl.gz``, ``.jsonl.zst``, and ``.json.gz`` /
  ``.json.zst``: Dolma's names) is JSONL (one document per line, the string field
  ``text_field``), ``*.parquet`` is Parquet and ``*.arrow`` an Arrow IPC file (one document per
  row of column ``text_field``, needs pyarrow: ``parquet``, ``arrow``), anything else is plain
  UTF-8 text, one document per file (``.gz`` and ``.zst`` are decompressed as they are read:
  ``zst``);
- a folder is searched recursively for ``.txt .md .text .jsonl`` and their ``.gz`` / ``.zst``
  forms (and ``.json.gz`` / ``.json.zst``), in sorted path order; names starting with ``.``
  (``.git``, editor files) are skipped; a folder written by Hugging Face ``datasets``'
  ``save_to_disk`` is read as its ``.arrow`` files instead, in its own order (``savedset``);
- ``-`` is stdin: one text document, or JSONL with ``fmt="jsonl"``.

Each document can come with its ``Origin``: the input's index, the byte offset where the
document starts in it (a JSONL record's line; 0 for a text file; in the decompressed stream of
a ``.gz`` / ``.zst``), its 1-based line (a text file: 1; Parquet, Arrow: the 1-based row) and
the value of ``id_field`` (a string or integer field / column; missing or any other type is bad input).

Text is read in ``READ_BYTES`` pieces through an incremental UTF-8 decoder, so a document never
has to fit in memory and an invalid byte is reported with its offset and line. A JSONL line is
one document and is held in memory whole.
"""

from __future__ import annotations

import codecs
import errno
import gzip
import json
import os
import stat
import sys
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from .. import disk
from ..errors import ConfigError, DataError, InputError, json_place
from ..records import MISSING, field_value
from .decoding import BadInput, Reading, Replaced, encoded_len, sniff, splits_lines, utf8_decoder, utf16_hint
from .savedset import saved_dataset

FOLDER_SUFFIXES = (".txt", ".md", ".text", ".jsonl")
# A compressed .json is JSON Lines: Dolma and RedPajama-v2 ship their records as *.json.gz (a
# folder takes these too); a plain .json stays text, and a folder leaves it (configs, metadata).
PACKED_JSONL = ".json"
COMPRESSED = {".gz": "gzip", ".zst": "zstd"}  # suffix -> what it is decompressed as; such a file is one stream, never cut
TABLES = ("parquet", "arrow")  # kinds read as rows of a column (pyarrow)
FORMATS = ("auto", "text", "jsonl")
READ_BYTES = 1 << 20  # per read: big enough for disk speed, small enough to keep memory flat
GZ_STEP = 64 << 10  # decompressed bytes per gzip read: how close a broken stream's error position is


class Origin(NamedTuple):
    """Where a document starts: ``input`` (index into the inputs), ``offset`` (bytes, in the
    decompressed stream for .gz / .zst), ``line`` (1-based) and ``id`` (str, int or None)."""

    input: int
    offset: int
    line: int
    id: str | int | None = None


INPUT_FILE = "an input file"  # what open_regular says an input was expected to be


@dataclass
class Source:
    """One input to read. ``label`` is the path as the user wrote it (or as found in their folder)."""

    label: str
    path: Path | None  # None for stdin
    kind: str  # "text" | "jsonl" | "parquet" | "arrow"
    gz: bool
    size: int | None  # bytes on disk; None for stdin until read
    mtime_ns: int | None = None  # modification time when found (then when opened); None for stdin
    # status-change time, likewise: any write moves it, and nothing puts it back (cp -p, rsync -a and
    # touch -r restore mtime), so a checkpoint keyed by it notices content rewritten at the same size and mtime
    ctime_ns: int | None = None

    decompressed: int | None = None  # .gz / .zst: bytes of the decompressed stream, once read whole
    dev: int | None = None  # st_dev and st_ino when found: the same file named twice is told apart from two
    ino: int | None = None
    zst: bool = False  # zstd-compressed (``gz`` is gzip)

    @property
    def compressed(self) -> bool:
        """Read through a decompressor: one stream, never cut in byte ranges; offsets count decompressed bytes."""
        return self.gz or self.zst

    def open(self):
        """The file opened to read (binary), never blocking: InputError naming ``label`` if it
        went, or is no longer a regular file (a FIFO), since it was listed."""
        return disk.open_regular(self.path, INPUT_FILE, self.label)

    def meta(self) -> dict:
        # A name that is not UTF-8 (surrogate-escaped by Python) shows its bytes as \xNN.
        label = self.label.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        out = {"path": label, "bytes": self.size or 0}
        if self.compressed and self.decompressed is not None:  # the bound of a provenance offset in it
            out["decompressed_bytes"] = self.decompressed
        return out


def _compression(name: str) -> tuple[str, str]:
    """(the name without its compression suffix, the suffix: ``.gz``, ``.zst`` or "")."""
    suffix = os.path.splitext(name)[1]
    return (name[: -len(suffix)], suffix) if suffix in COMPRESSED else (name, "")


def _kind_of(name: str, fmt: str) -> tuple[str, str]:
    """(kind, compression suffix) of a file by its name."""
    base, codec = _compression(name.lower())  # B.TXT, c.JSONL, d.Jsonl.GZ: suffixes in any case
    if fmt != "auto":
        return fmt, codec
    if base.endswith(".jsonl") or (codec and base.endswith(PACKED_JSONL)):
        return "jsonl", codec
    if not codec and base.endswith(".parquet"):
        return "parquet", ""
    if not codec and base.endswith(".arrow"):
        return "arrow", ""
    return "text", codec


def _folder_matches(name: str) -> bool:
    base, codec = _compression(name.lower())
    return base.endswith(FOLDER_SUFFIXES) or bool(codec and base.endswith(PACKED_JSONL))


HIDDEN = "hidden (a name starting with .)"
LINKED_FOLDER = "symlinked folder (not followed)"


class Inputs(list):
    """The sources of a run, in order (a list of ``Source``), and ``not_read``: what the folders
    named held that is not read, counted by kind (a suffix, ``HIDDEN``, ``LINKED_FOLDER``)."""

    def __init__(self, sources=(), not_read: dict | None = None):
        super().__init__(sources)
        self.not_read = dict(not_read or {})


def _walk(top: Path, passed: Counter | None = None) -> list[Path]:
    """Files under ``top`` whose names match, depth first, without recursion (a folder nested
    thousands deep is fine) and without following symlinked folders (a loop is harmless).
    ``passed`` counts the other files by suffix (what a folder holds that is not read).

    A subfolder that cannot be listed is an InputError (exit 2): skipping it would silently
    leave its documents out of the corpus. Names starting with ``.`` are skipped, and counted
    in ``passed`` (``HIDDEN``), as are symlinked folders (``LINKED_FOLDER``)."""
    found: list[Path] = []
    stack = [top]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as it:
                entries = list(it)
        except OSError as e:
            raise InputError(f"{folder}: cannot read folder: {e.strerror}; fix its permissions or leave it out") from None
        for e in entries:
            if e.name.startswith("."):  # hidden: .git, editors' swap files; counted, not read
                if passed is not None:
                    passed[HIDDEN] += 1
                continue
            try:
                is_dir = e.is_dir(follow_symlinks=False)
                linked_dir = not is_dir and e.is_symlink() and e.is_dir()
            except OSError:
                is_dir = linked_dir = False
            if linked_dir:  # symlinked folders are not followed (a loop is harmless); counted
                if passed is not None:
                    passed[LINKED_FOLDER] += 1
                continue
            if is_dir:
                stack.append(Path(e.path))
            elif _folder_matches(e.name):
                found.append(Path(e.path))
            elif passed is not None:
                passed[Path(e.name).suffix.lower() or "without a suffix"] += 1
    return found


def resolve_inputs(args: list[str], fmt: str = "auto", notice: Callable[[str], None] | None = None) -> Inputs:
    """Expand INPUT arguments to sources, in order. InputError for a missing path or empty folder;
    ConfigError for a file reached twice under one name (named twice, or inside a folder also
    named): its documents would be encoded twice. One reached again under another name (a link,
    named or in a folder: ``_once_each``) is read once. ``notice(line)`` hears of those, and of
    files a folder holds that are not read (other suffixes). ConfigError, naming the extra, for
    an input whose decompressor or pyarrow is not installed."""
    if fmt not in FORMATS:
        raise ConfigError(f"unknown input format {fmt!r}: choose one of {', '.join(FORMATS)}")
    if not args:
        raise InputError("no inputs given")
    out = Inputs()
    seen: dict = {}  # (device, inode) -> the argument that reached it first
    for arg in args:
        arg = str(arg)
        if arg == "-":
            if "-" in seen:
                raise ConfigError("- (stdin) is given twice: it can be read once")
            seen["-"] = "-"
            out.append(Source("-", None, "jsonl" if fmt == "jsonl" else "text", False, None))
            continue
        p = Path(arg)
        saved = saved_dataset(p, arg, notice) if p.is_dir() else None
        if saved is not None:  # a datasets folder: its .arrow files in its own order
            sources = [_source(str(f), f, "arrow", "") for f in saved]
        elif p.is_dir():
            passed: Counter = Counter()
            found = _walk(p, passed)
            if not found:
                raise InputError(f"{arg}: folder has no {'/'.join(FOLDER_SUFFIXES)} files (or .gz/.zst forms,"
                                 f" or .json.gz/.json.zst) to encode{_tables_hint(arg, passed)}")
            for kind, n in passed.items():
                out.not_read[kind] = out.not_read.get(kind, 0) + n
            # parts: Path's own order, without its slow comparisons (a folder of 40,000 files)
            sources = _once_each([_source(str(f), f, *_kind_of(f.name, fmt)) for f in sorted(found, key=_parts)], arg, notice)
        elif p.exists():
            if not p.is_file():
                raise InputError(f"{arg}: not a regular file or folder")
            sources = [_source(arg, p, *_kind_of(p.name, fmt))]
        else:
            try:
                os.stat(p)
            except OSError as e:
                if e.errno == errno.ELOOP:  # a loop of links named here: what a folder's own loop says
                    raise InputError(f"{arg}: cannot read: {e.strerror}") from None
            raise InputError(f"{arg}: no such file or folder")
        for src in sources:
            key = _file_key(src)
            if key in seen and os.path.abspath(src.label) != os.path.abspath(seen[key]):  # another name: a link (`dir/*`)
                if notice is not None:
                    notice(f"{src.label}: the file {seen[key]} already gave (a link to it), read once")
                continue
            if key in seen:
                via = "" if seen[key] == src.label else f" (already reached as {seen[key]})"
                raise ConfigError(f"{src.label}: given twice{via}: its documents would be encoded twice; name each input once")
            seen[key] = src.label
            out.append(src)
    _check_readers(out)
    return out


def _parts(p: Path) -> tuple:
    return p.parts


def _check_readers(sources: list[Source]) -> None:
    """ConfigError naming the extra, before anything is read, when an input needs a library
    that is not installed (else a run would stop there, after the inputs before it)."""
    from . import tables, zst

    first = next((s for s in sources if s.zst), None)
    if first is not None:
        zst.module(first.label)
    first = next((s for s in sources if s.kind in TABLES), None)
    if first is not None:
        tables.pyarrow(first.label, "Parquet" if first.kind == "parquet" else "Arrow files", first.kind)


def _tables_hint(arg: str, passed: Counter) -> str:
    """For a folder of only .arrow / .parquet files (a datasets cache): how to encode them."""
    tables = [s for s in (".arrow", ".parquet") if passed[s]]
    if not tables:
        return ""
    return (f"; it holds {' and '.join(tables)} files, which a folder walk leaves (a cache mixes splits):"
            f" name the ones to encode, e.g. {Path(arg) / ('*train*' + tables[0])}")


def _file_key(src: Source):
    """What tells files apart: (device, inode); on a filesystem without inode numbers (0), the resolved path."""
    return (src.dev, src.ino) if src.ino else str(src.path.resolve())


def _once_each(sources: list[Source], arg: str, notice: Callable[[str], None] | None) -> list[Source]:
    """A folder's files, each file once: a link (symbolic or hard) to a file the same folder
    already gave is left out, the first in name order kept, and ``notice`` hears of it. (A real
    tree often holds such links; the folder was named once. A file given twice under one name
    by the arguments themselves is still refused: see ``resolve_inputs``.)"""
    first: dict = {}
    kept, dropped = [], []
    for src in sources:
        key = _file_key(src)
        if key in first:
            dropped.append((src.label, first[key]))
            continue
        first[key] = src.label
        kept.append(src)
    if dropped and notice is not None:
        label, same = dropped[0]
        more = f" and {len(dropped) - 1} more" if len(dropped) > 1 else ""
        notice(f"{arg}: {len(dropped)} file(s) reached twice through links, read once: {label} is {same}{more}")
    return kept


def _source(label: str, path: Path, kind: str, codec: str) -> Source:
    try:
        st = os.stat(path)
    except OSError as e:  # a dangling symlink or symlink loop found in a folder, a file removed meanwhile
        raise InputError(f"{label}: cannot read: {e.strerror}") from None
    if not stat.S_ISREG(st.st_mode):  # a FIFO or device would block or never end: refused, not read
        raise InputError(f"{label}: not a regular file (a FIFO, socket or device); encode a regular file or pipe it to -")
    return Source(label, path, kind, codec == ".gz", st.st_size, st.st_mtime_ns, st.st_ctime_ns, dev=st.st_dev,
                  ino=st.st_ino, zst=codec == ".zst")


class Reader:
    """Reads one source's bytes in pieces; checks the file did not change while it was read.
    ``replaced`` counts what ``--errors replace`` replaces in what it reads."""

    def __init__(self, src: Source, progress: Callable[[int], None] | None, replaced: Replaced | None = None):
        self.src = src
        self.progress = progress
        self.replaced = replaced if replaced is not None else Replaced()
        self.raw = None
        self.aborted = False  # abort() was called: closed without the check that the file did not change
        self.offset = 0  # bytes of (decompressed) data handed out so far
        self._disk_pos = 0
        if src.path is None and sys.stdin is None:  # `<&-`: Python sets sys.stdin to None
            raise InputError(f"{src.label}: standard input is closed: pipe the text in, or name the files")
        # open_regular: InputError if the file went, or something else took its place, since it was listed
        self.raw = sys.stdin.buffer if src.path is None else src.open()
        self.stat = None if src.path is None else os.fstat(self.raw.fileno())
        if self.stat is not None:
            src.mtime_ns, src.ctime_ns = self.stat.st_mtime_ns, self.stat.st_ctime_ns
        self.bad_data: tuple = (zlib.error,)  # what the decompressor raises on broken data (and OSError, EOFError)
        self.broken: BadInput | None = None  # a break in compressed data, raised by the read after the data before it
        self.stream = self.raw
        try:
            if src.gz:
                self.stream = gzip.GzipFile(fileobj=self.raw, mode="rb")
            elif src.zst:
                from .zst import open_zst  # the optional decompressor, only for a .zst input

                self.stream, self.bad_data = open_zst(self.raw, src.label)
        except BaseException:
            self.abort()
            raise

    def read(self, n: int = READ_BYTES) -> bytes:
        if self.broken is not None:  # the data decompressed before a break went out with the last read
            raise self.broken
        got: list[bytes] = []
        try:
            if self.src.compressed:
                # in GZ_STEP pieces: a read that fails drops what it decompressed, so the error's
                # position is this close (a truncated file fails at its end, not at the read's start)
                size = 0
                # read1: one step of the decompressor, so a break after a member's end loses none of it
                step = getattr(self.stream, "read1", self.stream.read)
                while size < n and (piece := step(min(GZ_STEP, n - size))):
                    got.append(piece)
                    size += len(piece)
                data = b"".join(got)
            else:
                data = self.stream.read(n)
        except (OSError, EOFError, *self.bad_data) as e:
            if not self.src.compressed:
                raise InputError(f"{self.src.label}: cannot read: {e}") from None
            self.broken = self._broken(e, self.offset + sum(map(len, got)))
            if not got:
                raise self.broken from None
            data = b"".join(got)  # what decompressed before the break is read first (--on-bad-input skip keeps it)
        self.offset += len(data)
        if self.progress:
            pos = self.raw.tell() if (self.src.compressed and self.src.path is not None) else self.offset
            self.progress(pos - self._disk_pos)
            self._disk_pos = pos
        return data

    def _starts_compressed(self) -> bool:
        """Whether the file's first bytes are its codec's magic number (gzip ``1f 8b``; a zstd
        frame ``28 b5 2f fd`` or a skippable frame ``5? 2a 4d 18``); True where they cannot be read."""
        try:
            head = os.pread(self.raw.fileno(), 4, 0)
        except (OSError, ValueError, AttributeError):
            return True
        if self.src.gz:
            return head[:2] == b"\x1f\x8b"
        return head == b"\x28\xb5\x2f\xfd" or (len(head) == 4 and head[0] >> 4 == 5 and head[1:] == b"\x2a\x4d\x18")

    def _broken(self, e: BaseException, at: int) -> BadInput:
        """The one line for compressed data that fails to decompress, ``at`` bytes into its stream."""
        try:
            raw_at = self.raw.tell()  # where in the compressed file the reader stopped
        except (OSError, ValueError):
            raw_at = None
        where = f"near compressed byte {raw_at:,}" if raw_at is not None else "in its data"
        codec = COMPRESSED[".gz" if self.src.gz else ".zst"]
        if at == 0 and not self._starts_compressed():
            # the reader had read ahead (its position is past the fault): the fault is byte 0
            return BadInput(f"{self.src.label}: not {codec} data: its first bytes are not {codec}'s magic number"
                            f" (is it compressed at all?): {e}", self.src, 0)
        hint = ("; bytes follow the last gzip member (trailing garbage): cut them off, or decompress what is valid"
                if "Not a gzipped file" in str(e) and raw_at else "")
        return BadInput(f"{self.src.label}: broken {codec} data {where} ({at:,} bytes decompressed before it): {e}{hint}",
                        self.src, at)

    def where(self, offset: int) -> str:
        return f"byte {offset}{' of the decompressed data' if self.src.compressed else ''}"

    def close(self) -> None:
        """Close, and DataError if the file changed (size or mtime) while it was read."""
        if self.src.path is None:
            self.src.size = self.offset
            return
        after = os.fstat(self.raw.fileno())
        self.raw.close()
        if not self.src.compressed and self.stat.st_size == 0 and after.st_size == 0 and self.offset > 0:
            raise DataError(f"{self.src.label}: the system reports its size as 0 bytes, but it reads as {self.offset:,}"
                            " (a /proc or /sys file, made as it is read): encode a copy of it (cp it to a file first)")
        now = self.src.path.stat() if self.src.path.exists() else after
        changed = (
            (after.st_size, after.st_mtime_ns) != (self.stat.st_size, self.stat.st_mtime_ns)
            or (now.st_size, now.st_mtime_ns) != (self.stat.st_size, self.stat.st_mtime_ns)
            or (not self.src.compressed and self.offset != self.stat.st_size)
        )
        if changed:
            raise changed_error(self.src.label, self.stat.st_size, now.st_size)
        self.src.size = self.stat.st_size
        if self.src.compressed:
            self.src.decompressed = self.offset

    def abort(self) -> None:
        self.aborted = True
        if self.raw is not None and self.src.path is not None:
            self.raw.close()


def _nul_error(reader: Reader, offset: int, data: bytes = b"", line: int | None = None, record: bool = False) -> BadInput:
    """A NUL byte at ``offset``: a binary file (``data``: the bytes around it, from a 4-aligned
    offset, to tell UTF-16 or UTF-32 text without a BOM by its NUL bytes)."""
    return BadInput(
        f"{reader.src.label}: binary file (NUL byte at {reader.where(offset)}); winsample encodes UTF-8 text"
        + utf16_hint(data), reader.src, offset, line, record)


def _utf8_error(reader: Reader, offset: int, line: int, e: UnicodeDecodeError, reading: Reading | None = None,
                record: bool = False) -> BadInput:
    bad = e.object[e.start : e.start + 4]
    fix = ("fix the file, pass --errors replace, or name its encoding with --input-encoding (latin-1, cp1252, …)"
           if reading is not None and reading.hint else "fix the file or pass --errors replace")
    return BadInput(
        f"{reader.src.label}: invalid UTF-8 at {reader.where(offset)} (line {line}): {e.reason}"
        f" (bytes {bytes(bad).hex(' ')}); {fix}", reader.src, offset, line, record)


def _decode_error(reader: Reader, offset: int, line: int | None, e: UnicodeDecodeError, codec: str,
                  record: bool = False) -> BadInput:
    bad = e.object[e.start : e.start + 4]
    at = f"{reader.where(offset)}" + (f" (line {line})" if line is not None else "")
    return BadInput(f"{reader.src.label}: invalid {codec.upper()} at {at}: {e.reason} (bytes {bytes(bad).hex(' ')});"
                    " fix the file, pass --errors replace, or name its encoding with --input-encoding", reader.src, offset, line, record)


def _reading(reader, errors: str, reading: Reading | None) -> Reading:
    return reading if reading is not None else Reading(errors, replaced=reader.replaced)


def _first(reader, reading: Reading) -> tuple[bytes, str]:
    """The first bytes of ``reader``, a byte-order mark at the file's first byte removed (and
    counted), and the codec they are in: the mark's, else ``reading``'s, else UTF-8."""
    data = reader.read()
    if getattr(reader, "base", 0) == 0:  # the file's first byte (not a later part of it)
        bom, n = sniff(data)
        if bom is not None:
            reading.boms += 1
            return data[n:], bom
    return data, reading.encoding or "utf-8"


def text_chunks(reader: Reader, errors: str, reading: Reading | None = None) -> Iterator[str]:
    """The decoded text of a whole plain-text source, in pieces (``reading``: codec, counts)."""
    reading = _reading(reader, errors, reading)
    data, codec = _first(reader, reading)
    if codec != "utf-8":
        yield from _decoded_chunks(reader, data, codec, reading)
        return
    dec = utf8_decoder(reading.errors, reading.replaced)
    line = 1
    while True:
        final = not data
        start = reader.offset - len(data)
        if data and b"\0" in data:
            raise _nul_error(reader, start + data.index(b"\0"), data if start % 4 == 0 else b"")
        pending = len(dec.getstate()[0])
        try:
            text = dec.decode(data, final)
        except UnicodeDecodeError as e:
            # e.object is the decoder's pending bytes followed by `data`.
            raise _utf8_error(reader, start - pending + e.start, line + e.object[: e.start].count(b"\n"), e, reading) from None
        line += data.count(b"\n")  # bytes: memchr-fast, and a \n byte is always a newline in UTF-8
        if text:
            yield text
        if final:
            return
        data = reader.read()


def _pending(dec) -> int:
    """Bytes an incremental decoder holds back (the start of a character still to come)."""
    held = dec.getstate()[0]
    return len(held) if isinstance(held, (bytes, bytearray)) else 0


def _decoded_chunks(reader: Reader, data: bytes, codec: str, reading: Reading) -> Iterator[str]:
    """``text_chunks`` in a codec other than UTF-8 (a BOM's or ``--input-encoding``'s)."""
    dec = codecs.getincrementaldecoder(codec)(reading.handler())
    line = 1
    while True:
        final = not data
        start = reader.offset - len(data)
        pending = _pending(dec)
        try:
            text = dec.decode(data, final)
        except UnicodeDecodeError as e:
            before = bytes(e.object[: e.start]).decode(codec, "replace").count("\n")
            raise _decode_error(reader, start - pending + e.start, line + before, e, codec) from None
        nul = text.find("\0")
        if nul >= 0:
            raise _nul_error(reader, start - pending + encoded_len(text[:nul], codec))
        line += text.count("\n")
        if text:
            yield text
        if final:
            return
        data = reader.read()




def scalar_id(where: str, obj: dict, id_field: str):
    """``obj[id_field]`` (``field_value``) if it is a string or integer, else DataError naming ``where``."""
    value = field_value(obj, id_field)
    if value is MISSING:
        keys = ", ".join(list(obj)[:5])
        raise DataError(f"{where}: no field {id_field!r} for --id-field (fields: {keys or 'none'})")
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        kind = "null" if value is None else type(value).__name__
        raise DataError(f"{where}: --id-field {id_field!r} is {kind}, not a string or integer")
    return value


def _jsonl_lines(reader, reading: Reading) -> Iterator[tuple[int | list[int], list]]:
    """(starts, lines) for each piece read of a JSONL source: its whole lines and where they
    start: bytes, in a codec where a b"\\n" byte ends a line, and the offset of the first (the
    others follow, each after the one before and its b"\\n"); else decoded text, and the
    offset of each. Sets ``reader.lines`` (lines so far) and ``reader.codec``."""
    data, codec = _first(reader, reading)
    reader.codec, reader.lines = codec, 0
    if not splits_lines(codec):
        yield from _decoded_lines(reader, data, codec, reading)
        return
    carry = b""
    offset = reader.offset - len(data)  # byte offset of the start of the current line (after a BOM)
    while True:
        buf = carry + data if carry else data
        lines = buf.split(b"\n")
        carry = lines.pop() if data else b""
        if not data:
            lines = [buf] if buf else []
        reader.lines += len(lines)
        yield offset, lines
        offset += len(buf) - len(carry)  # the lines and their b"\n" each
        if not data:
            return
        data = reader.read()


def _decoded_lines(reader, data: bytes, codec: str, reading: Reading) -> Iterator[tuple[list[int], list[str]]]:
    """``_jsonl_lines`` of UTF-16 or UTF-32 text: lines split in the decoded text, each line's
    offset its bytes in ``codec`` after those before it. Undecodable bytes end the file (BadInput)."""
    dec = codecs.getincrementaldecoder(codec)(reading.handler())
    carry, offset, unit = "", reader.offset - len(data), encoded_len("\n", codec)
    while True:
        final = not data
        start = reader.offset - len(data)
        pending = _pending(dec)
        try:
            text = dec.decode(data, final)
        except UnicodeDecodeError as e:
            raise _decode_error(reader, start - pending + e.start, None, e, codec) from None
        lines = (carry + text).split("\n")
        carry = "" if final else lines.pop()
        if final and lines == [""]:
            lines = []
        starts = [offset]
        for line in lines:
            offset += encoded_len(line, codec) + unit
            starts.append(offset)
        reader.lines += len(lines)
        yield starts, lines
        if final:
            return
        data = reader.read()


def _text_of(reader, raw: bytes | str, start: int, lineno: int, reading: Reading) -> str:
    """The text of JSONL line ``raw`` (not blank); BadInput (a record) for a NUL or undecodable bytes."""
    if isinstance(raw, str):
        if "\0" in raw:
            raise _nul_error(reader, start, line=lineno, record=True)
        return raw
    if b"\0" in raw:
        raise _nul_error(reader, start + raw.index(b"\0"), line=lineno, record=True)
    codec = reader.codec
    try:
        if codec != "utf-8":
            return raw.decode(codec, reading.handler())
        return raw.decode("utf-8") if reading.errors == "strict" else utf8_decoder(reading.errors, reading.replaced).decode(raw, True)
    except UnicodeDecodeError as e:
        if codec != "utf-8":
            raise _decode_error(reader, start + e.start, lineno, e, codec, record=True) from None
        raise _utf8_error(reader, start + e.start, lineno, e, reading, record=True) from None


def _parse(where: str, s: str, field: str | None, id_field: str | None) -> tuple[str | dict, str | int | None]:
    """(text, id) of a JSONL line's text ``s`` (``field`` None: the whole record, a dict, in place
    of the text); DataError naming ``where`` for a line that is no usable record."""
    try:
        obj = json.loads(s)
    except json.JSONDecodeError as e:
        raise DataError(f"{where}: not valid JSON: {json_place(e)}") from None
    except RecursionError:  # Python's parser recurses per level of nesting
        raise DataError(f"{where}: JSON nested too deeply to read") from None
    except ValueError as e:  # an integer of more than 4300 digits (Python's hint on how to lift it dropped)
        raise DataError(f"{where}: JSON value cannot be read: {str(e).split('; use sys.')[0]}") from None
    if not isinstance(obj, dict):
        what = "an object (a record)" if field is None else f"an object with a {field!r} field"
        raise DataError(f"{where}: a JSONL line must be {what}, got {type(obj).__name__}")
    if field is None:
        return obj, (scalar_id(where, obj, id_field) if id_field is not None else None)
    text = field_value(obj, field)
    if text is MISSING:
        keys = ", ".join(list(obj)[:5])
        raise DataError(f"{where}: no field {field!r} (fields: {keys or 'none'}); pick one with --text-field"
                        " (a.b for a field inside an object)")
    if not isinstance(text, str):
        kind = "null" if text is None else type(text).__name__
        raise DataError(f"{where}: field {field!r} is {kind}, not a string")
    return text, (scalar_id(where, obj, id_field) if id_field is not None else None)


def jsonl_docs(reader, errors: str, field: str | None, id_field: str | None = None, base: int = 0,
               reading: Reading | None = None) -> Iterator[tuple[str, str, int, int, str | int | None]]:
    """(where, text, offset, line, id) for each line of a JSONL source; blank lines are skipped
    (but counted: ``line`` is the record's line in the file). ``offset`` is the line's first
    byte, plus ``base``. When the source is read to its end, ``reader.lines`` is its line count.
    ``field`` None: the whole record (a dict) in place of the text (conversations).

    A bad line is a BadInput; with ``reading.skip`` it is left out and counted instead (and
    bad data that ends the file, such as broken gzip, leaves out the rest of the file)."""
    reading = _reading(reader, errors, reading)
    pieces = _jsonl_lines(reader, reading)
    lines_before = 0  # a part's lines are counted from its first; its messages add those before it, once needed
    plain = reading.errors == "strict" and reading.encoding is None  # the common case, decoded inline
    while True:
        lineno = getattr(reader, "lines", 0)
        try:
            starts, lines = next(pieces)
        except StopIteration:
            return
        except BadInput as e:
            if not reading.skip:
                raise
            reading.left_out(e)
            return
        utf8 = plain and reader.codec == "utf-8"
        offset = starts if isinstance(starts, int) else None
        for k, raw in enumerate(lines):
            lineno += 1
            if offset is None:
                start = starts[k]
            else:
                start, offset = offset, offset + len(raw) + 1
            if not raw.strip():
                continue
            try:
                try:
                    text, doc_id, where = _record(reader, raw, start, lineno + lines_before, utf8, reading, field, id_field)
                except BadInput:
                    if lines_before or not hasattr(reader, "lines_before"):
                        raise
                    # a part of a file that starts after its first line: its messages name the file's line
                    lines_before = reader.lines_before()
                    text, doc_id, where = _record(reader, raw, start, lineno + lines_before, utf8, reading, field, id_field)
            except BadInput as e:
                if not reading.skip:
                    raise
                reading.left_out(e)
                continue
            yield where, text, base + start, lineno, doc_id


def _record(reader, raw: bytes | str, start: int, lineno: int, utf8: bool, reading: Reading, field: str | None,
            id_field: str | None) -> tuple[str | dict, str | int | None, str]:
    """(text, id, where) of JSONL line ``raw``, line ``lineno`` of its file; BadInput (a record) if it is none."""
    where = f"{reader.src.label}:{lineno}"
    if utf8 and b"\0" not in raw:
        try:
            s = raw.decode("utf-8")
        except UnicodeDecodeError:
            s = _text_of(reader, raw, start, lineno, reading)
    else:
        s = _text_of(reader, raw, start, lineno, reading)
    try:
        text, doc_id = _parse(where, s, field, id_field)
    except DataError as e:
        raise BadInput(str(e), reader.src, start, lineno, record=True) from None
    return text, doc_id, where


def iter_documents(
    sources: list[Source],
    *,
    text_field: str = "text",
    errors: str = "strict",
    progress: Callable[[int], None] | None = None,
    id_field: str | None = None,
    origins: bool = False,
    index: int = 0,
    replaced: Replaced | None = None,
    reading: Reading | None = None,
) -> Iterator[tuple]:
    """(where, document) for each document in input order: the whole text (JSONL, Parquet) or
    an iterator of its text pieces (a text file), which the caller must consume before asking
    for the next document. With ``origins``: (where, document, Origin), the input index
    counted from ``index`` for ``sources[0]``; ``id_field`` is read (and checked) per record.
    ``progress(nbytes)`` is called with bytes read from disk (compressed bytes for .gz / .zst);
    ``replaced`` counts what ``errors="replace"`` replaces; ``reading`` (instead of ``errors``
    and ``replaced``): the codec, what bad input does, and the counts (``decoding.Reading``).
    """
    if reading is None:
        reading = Reading(errors, replaced=replaced)
    for k, src in enumerate(sources):
        i = index + k
        if src.kind in TABLES:  # pyarrow, and these readers, only for a Parquet or Arrow input
            if src.kind == "parquet":
                from .parquet import parquet_docs as table_docs
            else:
                from .arrow import arrow_docs as table_docs
            for where, text, row, doc_id in table_docs(src, text_field, progress, id_field, reading):
                yield (where, text, Origin(i, 0, row, doc_id)) if origins else (where, text)
            continue
        reader = Reader(src, progress, reading.replaced)
        try:
            if src.kind == "jsonl":
                for where, text, offset, line, doc_id in jsonl_docs(reader, reading.errors, text_field, id_field, 0, reading):
                    yield (where, text, Origin(i, offset, line, doc_id)) if origins else (where, text)
            else:
                doc = _aborting(text_chunks(reader, reading.errors, reading), reader)
                yield (src.label, doc, Origin(i, 0, 1, None)) if origins else (src.label, doc)
                if reader.aborted:  # the consumer caught the document's BadInput and goes on (--on-bad-input skip)
                    continue
        except BaseException:
            reader.abort()
            raise
        reader.close()


def _aborting(chunks: Iterator[str], reader: Reader) -> Iterator[str]:
    """``chunks``, with ``reader`` aborted when they raise: a file read in part is no changed file."""
    try:
        yield from chunks
    except BaseException:
        reader.abort()
        raise


def changed_error(label: str, before: int, now: int) -> DataError:
    """Exit 1 for an input written to while it was read (its size, or its modification time and
    then the size is the same)."""
    how = f"{before} bytes before, {now} after" if before != now else f"still {before} bytes, but written to meanwhile"
    return DataError(f"{label}: the file changed while it was being read ({how}); encode a stable copy")
