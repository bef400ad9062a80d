"""Retrieval chunks: token-exact windows of a text, as text with character offsets.

``chunk(text, tokenizer="gpt2", T=512, overlap=64, boundaries="none")`` cuts one string;
``chunk_records(records, ...)`` a stream of records; ``run`` (``winsample chunk``) files, folders
and JSONL to chunk JSONL. One text at a time:

1. Encode it (ids, as ``encode`` would: ordinary text, no EOT), and place every token edge in
   characters (``tokenizer.offsets``: needs a tokenizer whose tokens spell the text byte for byte).
2. Plan windows of at most T tokens: ``boundaries="none"`` starts a window T − overlap tokens
   after the previous one's start (or at its end, when that chunk was cut short to less: step 3),
   the last one running to the end (shorter); with the training planner, ``"paragraph"`` /
   ``"sentence"`` is ``planning.plan_semantic`` over the text's edges (``windows --boundaries``,
   without targets: span T, stride T − overlap), so ends land on edges where one is in reach and the
   overlap is the one nearest to ``overlap`` that starts on an edge; a window of whitespace alone
   (between the edges after "\\n\\n" and "\\n" of one break) is joined to a neighbour.
3. A window of tokens [a, b) becomes ``text[char_start:char_end]``: whole characters (an edge
   inside a multi-byte character widens the range to it: ``split_char``). That text is encoded
   again, and ``tokens`` is *its* count: a byte-level BPE can count a piece cut out of a text
   differently from the same bytes in place, and a widened range has more bytes. While the count
   is over T the window gives up tokens at its end (the excess each time). Where both ends are the
   tokenizer's safe cuts (``encode(a + b) == encode(a) + encode(b)``) and no character is split, the
   piece's tokens are the window's own, and it is not encoded again. A window never starts
   after the previous one ended (the chunk just before it, even where that one was cut to end
   short of an earlier chunk's end), so no token is skipped and the chunks cover the text: the
   union of their ranges is ``[0, len(text))``, and a window cut short is followed by one that
   starts no later than where it ended.

Every chunk: ``text == source_text[char_start:char_end]`` and ``tokens == len(encode(text)) <= T``.
A text of whitespace alone has no chunks, as the empty text.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import sys
from array import array
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from . import disk, formats, records, tokenizer
from .errors import ConfigError, DataError, InputError, Interrupted
from .planning import boundaries as bnd
from .planning import plan_semantic
from .tokenizer.offsets import CharOffsets

BOUNDARIES = ("none", "paragraph", "sentence")


@dataclass
class Chunk:
    """One chunk of a text: ``text == source_text[char_start:char_end]`` (characters, end exclusive),
    ``tokens`` its token count by the tokenizer (≤ T); ``token_start``/``token_end`` the window of the
    text's own encoding it was cut from; ``split_char``: a window edge fell inside a character and the
    range was widened to the whole character; ``index``: its number in its text (0, 1, …);
    ``id`` and ``source`` for a record (``chunk_records``, ``winsample chunk``)."""

    text: str
    char_start: int
    char_end: int
    tokens: int
    token_start: int
    token_end: int
    split_char: bool
    index: int
    id: str | None = None
    source: dict | None = None

    def to_json(self) -> dict:
        """The fields in the order a chunk line shows them: id, text, char_start, char_end, tokens, source, then the rest."""
        d = asdict(self)
        return {k: d[k] for k in CHUNK_FIELDS}


CHUNK_FIELDS = ("id", "text", "char_start", "char_end", "tokens", "source", "token_start", "token_end", "split_char", "index")


class Chunker:
    """The chunking of one tokenizer and one (T, overlap, boundaries): ``chunker(text)`` → chunks."""

    def __init__(self, tok="gpt2", T: int = 512, overlap: int | None = None, boundaries: str | None = "none",
                 pattern: str | None = None):
        self.tok = _tokenizer(tok, pattern)
        if overlap is None and isinstance(T, int):
            overlap = T // 8  # 64 for 512
        boundaries = boundaries or "none"
        if boundaries not in BOUNDARIES:
            raise ConfigError(f"boundaries must be one of {', '.join(BOUNDARIES)}, got {boundaries!r}")
        if not isinstance(T, int) or T < 8:
            raise ConfigError(f"T must be an integer ≥ 8 (a character can take 4 tokens), got {T!r}")
        if not isinstance(overlap, int) or not 0 <= overlap < T:
            raise ConfigError(f"overlap must be an integer in [0, T), got {overlap!r} with T {T}")
        self.T, self.overlap, self.boundaries = T, overlap, boundaries
        self.offsets = CharOffsets(self.tok)

    def __call__(self, text: str) -> list[Chunk]:
        if not isinstance(text, str):
            raise ConfigError(f"a text to chunk must be a str, got {type(text).__name__}")
        if text.isspace():  # nothing a retriever could match: no chunk, as for the empty text
            return []
        try:
            ids = np.asarray(self.tok.encode(text), np.int64)
        except ValueError as e:  # tiktoken's regex stops at ~10^6 characters of one whitespace run
            raise DataError(f"the tokenizer cannot encode this text whole ({e}); a chunk's count is that of its text"
                            " encoded whole, so such a document (a run of about a million spaces or newlines) cannot"
                            " be chunked: remove the run, or pass --on-bad-input skip") from None
        chars, inside = self.offsets.edges(ids)
        if int(chars[-1]) != len(text):  # exact_decode promises it; a surrogate or the like breaks it
            raise ConfigError(f"{self.tok.name}: the tokens of this text spell {int(chars[-1])} characters, the text has"
                              f" {len(text)}: it holds surrogate code points (a pair of them where one character belongs)")
        return self._cut(text, ids, chars, inside, self._windows(ids))

    def _windows(self, ids: np.ndarray) -> list[tuple[int, int]]:
        n, T, S = len(ids), self.T, self.T - self.overlap
        if n == 0:
            return []
        if self.boundaries == "none":
            return []  # placed one by one in _cut, each from the chunk before it
        edges = bnd.find_boundaries(ids, self.boundaries, self.tok)
        rows = plan_semantic([0], [n], edges, T, S, targets=False)
        return self._no_blank(ids, [(int(a), int(a + L)) for a, L in zip(rows["start"], rows["length"])])

    def _no_blank(self, ids: np.ndarray, windows: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """``windows`` with each one of whitespace alone joined to a neighbour: "\\n\\n\\n" is two GPT-2
        tokens with an edge after each, and the planner makes the one between them a window; a
        chunk of whitespace helps no retriever. The window before takes it when the sum fits in T,
        else the window after starts at it (and gives up tokens at its end if it must: ``_cut``); at
        the end of the text, a window of T tokens that ends there (it overlaps the one before)."""
        out: list[tuple[int, int]] = []
        carry = None  # the start of a blank window the next one takes
        for a, b in windows:
            if b - a <= 16 and self.tok.decode(ids[a:b].tolist()).isspace():
                if out and b - out[-1][0] <= self.T and out[-1][1] >= a:
                    out[-1] = (out[-1][0], max(out[-1][1], b))
                    continue
                if carry is None:
                    carry = a
                continue
            out.append((min(a, carry) if carry is not None else a, b))
            carry = None
        if carry is not None:  # blank at the very end, the window before full: a window of T that ends at the end
            end = windows[-1][1]
            out.append((max(out[-1][0] + 1, end - self.T), end) if out else (carry, end))
        return out

    def _cut(self, text: str, ids, chars, inside, windows: list[tuple[int, int]]) -> list[Chunk]:
        out: list[Chunk] = []
        n, T, S = len(ids), self.T, self.T - self.overlap
        # covered: the furthest token end so far; last_end: the end of the chunk just made, which can be
        # short of covered (cut short below an earlier chunk's end): the next window starts by last_end
        todo, covered, last_start, last_end = deque(windows), 0, -1, 0
        while covered < n:
            if self.boundaries == "none":  # every S tokens; after a chunk cut short to less, from its end
                a = 0 if last_start < 0 else min(last_start + S, last_end)
                b = min(a + T, n)
            elif todo:
                a, b = todo.popleft()
            else:  # the planner's last window was cut short: one more from where the overlap would start
                a = max(covered - self.overlap, last_start + 1)
                b = min(a + T, n)
            a = max(min(a, last_end), last_start + 1)  # never after the previous end (no gap), never its start again
            if b <= covered:
                continue  # a window the chunks before already cover
            b = min(b, a + T)
            while True:
                cs, ce, split = self.offsets.span(chars, inside, a, b)
                piece = text[cs:ce]
                if not split and self._safe(text, cs) and self._safe(text, ce):
                    count = b - a  # cut at safe points, the piece encodes to its own tokens: no need to ask
                else:
                    count = len(self.tok.encode(piece))
                if count <= T:
                    break
                if b - a <= 1:
                    raise ConfigError(f"T {T}: one token's characters take {count} tokens on their own")
                b = max(a + 1, b - (count - T))
            out.append(Chunk(piece, cs, ce, count, a, b, split, len(out)))
            covered, last_start, last_end = max(covered, b), a, b
        return out

    def _safe(self, text: str, p: int) -> bool:
        """Cutting ``text`` at character ``p`` changes no token (the tokenizer's safe-cut rule; its ends are safe)."""
        return p <= 0 or p >= len(text) or self.tok.last_safe_cut(text, p, p) == p


def chunk(text: str, tokenizer="gpt2", T: int = 512, overlap: int | None = None, boundaries: str | None = "none",
          pattern: str | None = None) -> list[Chunk]:
    """Chunks of ``text`` (module docstring): each at most ``T`` tokens by ``tokenizer`` (a name such as
    "gpt2", a tokenizer file or folder, or a ``winsample.tokenizer.Tokenizer``), consecutive ones sharing
    about ``overlap`` tokens (default T // 8: 64 for 512), their ranges covering the text."""
    return Chunker(tokenizer, T, overlap, boundaries, pattern)(text)


def chunk_records(records: Iterable, tokenizer="gpt2", T: int = 512, overlap: int | None = None,
                  boundaries: str | None = "none", pattern: str | None = None) -> Iterator[Chunk]:
    """Chunks of each record in turn: a record is a str, an ``(id, text)`` pair or a dict with
    ``"text"`` (and ``"id"``). A chunk's ``id`` is ``"<record id>#<index>"`` (the record's number
    when it has no id), its ``source`` ``{"record": number, "id": id}``. A chunk id names one
    chunk: a record whose id (as text: ``1`` and ``"1"`` are one) an earlier record had is a
    DataError, raised before any of its chunks."""
    if isinstance(records, (str, bytes, dict)):  # iterating one would give its characters or keys
        raise ConfigError(f"records: an iterable of records (a list, a generator), got one {type(records).__name__}")
    chunker = Chunker(tokenizer, T, overlap, boundaries, pattern)
    seen: dict[str, int] = {}
    for n, rec in enumerate(records):
        rid, text = _record(rec, n)
        key = str(rid if rid is not None else n)
        if seen.setdefault(key, n) != n:
            raise DataError(f"record {n}: its id {key!r} is the one record {seen[key]} has: a chunk id (ID#K) must name"
                            " one record; give each record its own id")
        for c in chunker(text):
            c.id, c.source = f"{key}#{c.index}", {"record": n, "id": rid}
            yield c


def _line(obj: dict) -> str:
    """One JSON line, UTF-8 as it is; a text holding a lone surrogate (a JSONL record may escape one,
    ``"\\ud800"``) has no UTF-8, so that line is written with JSON's ``\\u`` escapes instead."""
    line = json.dumps(obj, ensure_ascii=False) + "\n"
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(obj) + "\n"
    return line


def _record(rec, n: int):
    if isinstance(rec, str):
        return None, rec
    if isinstance(rec, dict) and isinstance(rec.get("text"), str):
        return rec.get("id"), rec["text"]
    if isinstance(rec, tuple) and len(rec) == 2 and isinstance(rec[1], str):
        return rec[0], rec[1]
    raise ConfigError(f"record {n}: a str, an (id, text) pair or a dict with a \"text\" string, got {type(rec).__name__}")


def _tokenizer(tok, pattern: str | None):
    if isinstance(tok, tokenizer.Tokenizer):
        return tok
    if not isinstance(tok, (str, Path)):
        raise ConfigError(f"tokenizer: a name, a file or a Tokenizer, got {type(tok).__name__}")
    name = str(tok)
    if any(c in name for c in "/\\") or name.endswith((".json", ".model", ".tiktoken", ".gz")):
        return tokenizer.load(tokenizer_file=name, pattern=pattern or "gpt2")
    return tokenizer.resolve(name)  # a name first: a folder called gpt2 where the command runs is no tokenizer


# --- winsample chunk ------------------------------------------------------------------------------


def run(inputs: list[str], out: str, T: int = 512, overlap: int | None = None, boundaries: str = "none",
        encoding: str = "gpt2", tokenizer_file: str | None = None, pattern: str | None = None,
        text_field: str = "text", id_field: str | None = None, fmt: str = "auto", errors: str = "strict",
        stream=None, progress=None, notice=None, on_bad_input: str = "fail") -> dict:
    """Chunk every document of ``inputs`` (``encode``'s inputs: text files, one document each; JSONL
    records; folders; ``-``) into chunk JSONL at ``out`` (written whole or not at all; ``-``: ``stream``).
    Each line: ``id`` (``<path>:<line>#<index>``, or ``<record id>#<index>`` with ``id_field``),
    ``text``, ``char_start``, ``char_end``, ``tokens``, ``source`` (path, line, id), and the window's
    ``token_start``, ``token_end``, ``split_char``, ``index``. ``on_bad_input``: ``fail`` (the
    first bad file or record is the error) or ``skip`` (left out, counted and listed in the
    summary: ``skipped_inputs``, ``skipped_records``, ``bad_inputs``). Returns the summary."""
    from .encode import inputs as inp
    from .encode.decoding import BadInput, Reading

    tok = tokenizer.load(tokenizer_file=tokenizer_file, pattern=pattern or "gpt2") if tokenizer_file is not None \
        else tokenizer.resolve(encoding)  # the one rule for --encoding: a name first, a path only when no name
    chunker = Chunker(tok, T, overlap, boundaries, pattern)
    sources = inp.resolve_inputs(list(inputs), fmt, notice)
    if out != "-":
        _leave_out_earlier_output(sources, inputs, out, notice)
        folder = Path(out).parent
        owned = formats.dataset_files(folder) if (folder / formats.META_JSON).is_file() else []  # a data folder's files
        stdin = ["-"] if any(s.path is None for s in sources) else []  # redirected from a file (`< notes.txt`)
        disk.refuse_overwrite([out], [s.path for s in sources if s.path is not None] + owned + stdin)
    counts = {"documents": 0, "blank_documents": 0, "chunks": 0, "characters": 0, "split_char": 0, "max_tokens": 0}
    ids = _IdLedger() if id_field is not None else None  # chunk ids are keys: a repeated record id is bad input

    reading = Reading(errors, skip=on_bad_input == "skip")

    def lines() -> Iterator[str]:
        docs = inp.iter_documents(sources, text_field=text_field, id_field=id_field, origins=True, progress=progress,
                                  reading=reading)
        for _, doc, origin in docs:
            try:  # a text file is read whole before any of its chunks: a bad one gives none
                text = doc if isinstance(doc, str) else "".join(doc)
            except BadInput as e:
                if not reading.skip:
                    raise
                reading.left_out(e)
                continue
            label = sources[origin.input].label
            rid = origin.id if origin.id is not None else f"{label}:{origin.line}"
            try:
                chunks = chunker(text)
            except DataError as e:  # the tokenizer's own limit (a run of a million spaces): this document's fault
                bad = BadInput(f"{label}:{origin.line}: {e}", sources[origin.input], origin.offset, origin.line,
                               record=sources[origin.input].kind == "jsonl")
                if not reading.skip:
                    raise bad from None
                reading.left_out(bad)
                continue
            if ids is not None:
                ids.add(str(rid), origin.input, origin.line)
            counts["documents"] += 1
            counts["blank_documents"] += not text or text.isspace()
            counts["characters"] += len(text)
            for c in chunks:
                c.id = f"{rid}#{c.index}"
                c.source = {"path": label, "line": origin.line, "id": origin.id}
                counts["chunks"] += 1
                counts["split_char"] += c.split_char
                counts["max_tokens"] = max(counts["max_tokens"], c.tokens)
                yield _line(c.to_json())

    try:
        if out == "-":
            try:
                for line in lines():
                    (stream or sys.stdout).write(line)
            except KeyboardInterrupt as e:  # a signal (the CLI's Interrupted) or Ctrl-C: some chunks are out already
                raise Interrupted(getattr(e, "signum", 2), done="the chunks printed before it are on standard output") from None
            if ids is not None:
                ids.check([src.label for src in sources], id_field, "the chunks of every record, both of that id"
                          " included, are on standard output (streamed before the ids could be compared)")
        else:
            disk.remove_stale_tmp(out, dead_only=True)  # a killed run's half-written chunks (kill -9 runs no cleanup)
            with disk.naming(out), disk.atomic_open(out, "w") as f:
                for line in lines():
                    f.write(line)
                if ids is not None:  # inside: a refusal leaves nothing written
                    ids.check([src.label for src in sources], id_field, "nothing was written")
    except BrokenPipeError:  # `-o - | head`: the CLI stops quietly
        raise
    except OSError as e:  # a read-only folder, a full disk (a file, or stdout on /dev/full); not an input's error
        if e.filename is not None and Path(e.filename).name not in (Path(out).name, disk.tmp_path(out).name):
            raise
        where = "standard output" if out == "-" else out
        raise InputError(f"{where}: cannot write: {disk.os_error_text(e)}" + ("" if out == "-" else "; nothing was written")) from None
    unread = {"not_read": dict(sorted(sources.not_read.items()))} if sources.not_read else {}  # what the folders held and were left
    skipped = {"skipped_inputs": reading.skipped_inputs, "skipped_records": reading.skipped_records,
               "bad_inputs": list(reading.bad)} if reading.skipped_inputs or reading.skipped_records else {}
    return {"file": out, "T": T, "overlap": chunker.overlap, "boundaries": boundaries, "tokenizer": chunker.tok.name, **counts,
            **unread, **skipped}


class _IdLedger:
    """The record ids a chunk run has seen, 28 bytes each (a 16-byte hash: two different ids of
    10^9 records share one with a chance near 10^-21; where it was): ``check`` raises
    DataError naming two records of one id. Ids compare as the text a chunk id holds (1 and "1"
    both make "1#0")."""

    def __init__(self):
        self.hi, self.lo, self.inputs, self.lines = array("Q"), array("Q"), array("I"), array("Q")

    def add(self, rid: str, input_index: int, line: int) -> None:
        digest = hashlib.blake2b(rid.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        self.hi.append(int.from_bytes(digest[:8], "little"))
        self.lo.append(int.from_bytes(digest[8:], "little"))
        self.inputs.append(input_index)
        self.lines.append(line)

    def check(self, labels: list[str], field: str, after: str) -> None:
        if len(self.hi) < 2:
            return
        hi, lo = np.frombuffer(self.hi, np.uint64), np.frombuffer(self.lo, np.uint64)
        order = np.lexsort((lo, hi))  # stable: records of one id stay in reading order
        same = np.flatnonzero((hi[order][1:] == hi[order][:-1]) & (lo[order][1:] == lo[order][:-1]))
        if not len(same):
            return
        pairs = sorted((int(order[k]), int(order[k + 1])) for k in same)  # (earlier, later) records of one id
        a, b = min(pairs, key=lambda p: p[1])  # the first repeat in reading order
        where = [f"{labels[self.inputs[i]]}:{self.lines[i]}" for i in (a, b)]
        raise DataError(f"{where[1]}: its {field} is the one {where[0]} has ({len(pairs)} repeat(s) in all): a chunk id"
                        f" (ID#K) must name one record; give each record its own id; {after}")


def _leave_out_earlier_output(sources: list, inputs: list[str], out: str, notice) -> None:
    """An earlier run's chunks inside a folder named as input (`chunk docs/ -o docs/chunks.jsonl`)
    are no input of this run: the output, replaced whole, leaves ``sources`` (with a note). Named
    as an input itself, or no output of this command (``_earlier_chunks``), it stays: refused later."""
    if not _earlier_chunks(out) or any(_same_file(a, out) for a in inputs if a != "-"):
        return
    mine = [k for k, src in enumerate(sources) if src.path is not None and _same_file(src.path, out)]
    for k in reversed(mine):
        if notice is not None:
            notice(f"{sources[k].label}: the output of this run, left out of the folder's inputs")
        del sources[k]
    if not len(sources):
        raise InputError(f"{', '.join(map(str, inputs))}: nothing to chunk but the output {out} itself")


def _earlier_chunks(path: str) -> bool:
    """True when ``path`` is a regular file of one name (no link) that is empty or whose first line
    is a chunk: what this command wrote, so a run may replace it. Anything else (data of the user's
    inside the folder chunked) stays an input, and the output is refused."""
    try:
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
            return False
        return st.st_size == 0 or set(CHUNK_FIELDS) <= set(records.read_record(path, 0, path))
    except (OSError, DataError):
        return False


def _same_file(a, b) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False
