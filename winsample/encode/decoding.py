"""How encode turns an input's bytes into text, and what a run does with input it cannot read.

- A byte-order mark at a file's first byte decides its codec (``sniff``): UTF-8's is dropped
  (counted), a UTF-16 or UTF-32 one (either byte order) means the file is decoded with that
  codec. Without one, the codec is ``--input-encoding`` (``codec_of``: any Python codec name,
  checked before anything is read), else UTF-8.
- Bad input (bytes the codec cannot decode, a NUL byte, a JSONL line that is not a usable
  record, broken gzip data) is a ``BadInput``: a ``DataError`` that knows its source, byte and
  line. ``Reading`` is one run's way of reading (``errors``, codec, ``--on-bad-input``) and
  its tally: BOMs stripped, and with ``skip`` the files and records left out, each listed
  (``Reading.bad``, the first ``BAD_KEPT``).
"""

from __future__ import annotations

import codecs
import itertools

from ..errors import ConfigError, DataError

BAD_MODES = ("fail", "skip")
BAD_KEPT = 100  # bad inputs listed in meta.json's stats and the summary (all are counted)
BAD_SHOWN = 20  # bad inputs listed on stderr, one a line, when a run fails or skips them
# The longest mark first: UTF-32-LE's starts with UTF-16-LE's.
BOMS = ((codecs.BOM_UTF32_LE, "utf-32-le"), (codecs.BOM_UTF32_BE, "utf-32-be"), (codecs.BOM_UTF8, "utf-8"),
        (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"))
# A codec name without a byte order reads text without a BOM in the machine's order: fixed here,
# so that the same file gives the same ids on every machine.
ORDERED = {"utf-16": "utf-16-le", "utf-32": "utf-32-le", "utf-8-sig": "utf-8"}


def codec_of(name: str | None) -> str | None:
    """``--input-encoding`` as a codec name (None: UTF-8, the default); ConfigError if Python has no such text codec."""
    if name is None:
        return None
    try:
        info = codecs.lookup(name)
    except (LookupError, TypeError):
        info = None
    if info is None or not getattr(info, "_is_text_encoding", True):
        raise ConfigError(f"unknown --input-encoding {name!r}: give a Python codec name such as latin-1, cp1252 or utf-16")
    codec = ORDERED.get(info.name, info.name)
    return None if codec == "utf-8" else codec


def sniff(head: bytes) -> tuple[str | None, int]:
    """(codec, length) of the byte-order mark ``head`` starts with; (None, 0) for none."""
    for bom, codec in BOMS:
        if head.startswith(bom):
            return codec, len(bom)
    return None, 0


def splits_lines(codec: str) -> bool:
    """Whether a b"\\n" byte is always a line end in ``codec`` (UTF-8, Latin-1, cp1252, …; not UTF-16/32)."""
    return not codec.startswith(("utf-16", "utf-32"))


def encoded_len(text: str, codec: str) -> int:
    """Bytes ``text`` takes in ``codec``: a position in decoded text as a byte offset."""
    return len(text.encode(codec, "surrogatepass" if codec.startswith("utf-") else "replace"))


def utf16_hint(data: bytes) -> str:
    """``; it looks like UTF-16-LE without a byte-order mark: …`` when the NUL bytes of ``data``
    (a file's bytes from a 4-aligned offset) fall where ASCII text in UTF-16 or UTF-32 has them; else ""."""
    sample = data[: 4096 - 4096 % 4]
    n = len(sample) // 4
    if n < 1:
        return ""
    zeros = [sample[k::4].count(0) for k in range(4)]  # NUL bytes at each position of a 4-byte group
    for codec, where in (("utf-32-le", (0, 1, 1, 1)), ("utf-32-be", (1, 1, 1, 0)),
                         ("utf-16-le", (0, 1, 0, 1)), ("utf-16-be", (1, 0, 1, 0))):
        if all(z >= 0.6 * n if nul else z <= 0.1 * n for z, nul in zip(zeros, where)):
            return (f"; it looks like {codec.upper()} without a byte-order mark: save it as UTF-8,"
                    f" or pass --input-encoding {codec}")
    return ""


class BadInput(DataError):
    """Input the run cannot read as text or records: its ``src``, ``byte`` (in the decompressed
    stream for .gz; None when unknown) and ``line`` (None when unknown). ``record``: a JSONL
    line (the file's other records are fine), not the whole file."""

    def __init__(self, message: str, src, byte: int | None = None, line: int | None = None, record: bool = False):
        super().__init__(message)
        self.src, self.byte, self.line, self.record = src, byte, line, record

    def __reduce__(self):  # pickled (a Ray task's error): the arguments this __init__ takes
        return self.__class__, (str(self), self.src, self.byte, self.line, self.record), self.__dict__

    def entry(self) -> dict:
        """The bad input as meta.json's ``stats.bad_inputs`` and ``--json`` list it."""
        label = self.src.label.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        return {"input": label, "byte": self.byte, "line": self.line, "error": str(self)}


class BadInputs(DataError):
    """Several bad inputs found by one run (``--on-bad-input fail``): ``details`` lists them."""


_handlers = itertools.count()


class Replaced:
    """How many invalid byte sequences one run replaced by U+FFFD (``--errors replace``).

    A run makes its own and hands it to the readers (``iter_documents``), so two runs in one
    process never count each other's."""

    def __init__(self) -> None:
        self.count = 0


class Reading:
    """One run's way of reading its inputs, and what it counted doing so.

    ``errors`` (``strict`` / ``replace``), ``encoding`` (a codec from ``codec_of``; None: UTF-8),
    ``skip`` (``--on-bad-input skip``), ``hint`` (the command has ``--input-encoding`` and
    ``--on-bad-input``, as the local engine's does: its errors may name them). Counts: ``replaced`` (a ``Replaced``), ``boms``, ``skipped_inputs`` (files left out), ``skipped_records`` (JSONL
    lines left out); ``bad``: the first ``BAD_KEPT`` of those as entries."""

    def __init__(self, errors: str = "strict", encoding: str | None = None, skip: bool = False,
                 replaced: Replaced | None = None, hint: bool = False):
        self.errors, self.encoding, self.skip, self.hint = errors, encoding, skip, hint
        self.replaced = replaced if replaced is not None else Replaced()
        self.boms = 0
        self.skipped_inputs = 0
        self.skipped_records = 0
        self.bad: list[dict] = []
        self._handler: str | None = None

    def handler(self) -> str:
        """The codec error handler of ``errors``: ``strict``, or one that replaces like ``replace`` and counts."""
        if self.errors == "strict":
            return "strict"
        if self._handler is None:
            replaced = self.replaced

            def count(e):
                replaced.count += 1
                return "\ufffd", e.end

            self._handler = f"winsample-replace-{next(_handlers)}"
            codecs.register_error(self._handler, count)
        return self._handler

    def left_out(self, bad: BadInput) -> None:
        """Count ``bad`` as skipped (a record or the rest of its input) and list it."""
        if bad.record:
            self.skipped_records += 1
        else:
            self.skipped_inputs += 1
        if len(self.bad) < BAD_KEPT:
            self.bad.append(bad.entry())

    def counts(self) -> dict:
        """The stats this tally adds to a run's (``boms_stripped``, ``skipped_inputs``, ``skipped_records``)."""
        return {"boms_stripped": self.boms, "skipped_inputs": self.skipped_inputs, "skipped_records": self.skipped_records}


def add_counts(stats: dict, base: dict, reading: Reading) -> None:
    """``stats`` += what ``reading`` counted on top of ``base`` (a resumed run's counts); a
    count still 0 and an empty list are not added (meta.json gains keys only when they say something)."""
    for key, n in reading.counts().items():
        total = base.get(key, 0) + n
        if total:
            stats[key] = total
    bad = list(base.get("bad_inputs", [])) + reading.bad
    if bad:
        stats["bad_inputs"] = bad[:BAD_KEPT]


def many_bad(errors: list[str], total: int, hint: bool = True) -> BadInputs:
    """The error of a run that found ``total`` bad inputs (``errors``: the first ones' messages),
    each listed in its ``details`` (the first ``BAD_SHOWN``); ``hint``: name ``--on-bad-input skip``."""
    shown = errors[:BAD_SHOWN]
    more = f" (the first {len(shown)} listed above)" if total > len(shown) else " (listed above)"
    fix = ", or pass --on-bad-input skip to leave them out and list them" if hint else ""
    err = BadInputs(f"{total} bad inputs{more}: fix them{fix}")
    err.details = tuple(f"bad input: {e}" for e in shown)
    return err


__all__ = ["Replaced", "BAD_MODES", "BAD_KEPT", "BAD_SHOWN", "BadInput", "BadInputs", "Reading", "codec_of", "sniff",
           "splits_lines", "encoded_len", "utf16_hint", "add_counts", "many_bad"]


class ReplacingDecoder:
    """Incremental UTF-8 that replaces each invalid sequence by U+FFFD and counts it in ``replaced``:
    exactly what Python's ``replace`` error handler gives (the decode resumes after the bad
    bytes, where the handler would resume)."""

    def __init__(self, replaced: Replaced):
        self.replaced = replaced
        self.pending = b""

    def getstate(self) -> tuple[bytes, int]:
        return self.pending, 0

    def decode(self, data: bytes, final: bool = False) -> str:
        view = memoryview(self.pending + data if self.pending else data)
        out = []
        while True:
            try:
                text, used = codecs.utf_8_decode(view, "strict", final)
            except UnicodeDecodeError as e:
                out.append(str(view[: e.start], "utf-8"))  # valid up to the bad bytes
                out.append("\ufffd")
                self.replaced.count += 1
                view = view[e.end :]
                continue
            out.append(text)
            self.pending = bytes(view[used:])
            return "".join(out) if len(out) > 1 else text


def utf8_decoder(errors: str, replaced: Replaced):
    """The incremental UTF-8 decoder of ``errors`` (``strict`` raises; ``replace`` counts in ``replaced``)."""
    if errors == "strict":
        return codecs.getincrementaldecoder("utf-8")("strict")
    return ReplacingDecoder(replaced)
