"""The encode pipeline both runners share: ``encode`` (a local process pool) and ``engine_ray``.

What a runner does with a document is decided here, once: the split rule and the empty-document
skip (:class:`DocRule`), the ids (``encode_texts``: the tokenizer's ``encode`` + the vocabulary
check before the cast), the split writer that appends, hashes and records document starts
(:class:`SplitWriter`), the document index (``write_index``), and the meta.json that describes
the result (``split_entry`` + ``build_meta``, typed by ``formats.Meta``), the final checks
(``check_outcome``) and the summary both return (``summary``). A runner owns only how work is
spread (``encode``: batches to worker processes, resume; ``engine_ray``: shards as Ray tasks).

Split rules (``DocRule``):

- ``doc``: a document goes to val when ``xxh3_64(b"<seed>\\0" + utf8(text)) < fraction × 2**64``
  — it depends only on the seed and the document's own text;
- ``tail``: one stream ("all"), cut by the runner at ``N - floor(N × fraction)`` tokens.

A document with no non-whitespace text is skipped (counted in ``documents_skipped_empty``);
every other one ends with the EOT id unless ``eot`` is off. With ``--dedup exact`` a document
whose text an earlier kept one had is dropped too (``duplicates_dropped``, ``dedup.py``).
"""

from __future__ import annotations

import errno
import math
import os
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import xxhash

from .. import __version__, disk, formats, tokenizer, tokensrc
from ..errors import ConfigError, DataError, InputError
from . import dedup, resume
from .config import ERROR_MODES, SPLIT_METHODS, EncodeConfig, RunSpec, check_options  # noqa: F401 (re-exported)
from .inputs import Origin
from .ranges import read_text_range
from .textfile import LONG_RUN_CHARS as LONG_RUN

PIECE_CHARS = 1 << 20  # a big document is cut into pieces of about this many chars
LONG_RUN_CHARS = LONG_RUN  # a stretch this long without a safe cut is cut by force (counted)
WRITE_BYTES = 1 << 20  # ids gathered per write+hash call
SNAPSHOT_BYTES = 64 << 20  # --split tail: hash snapshots this far apart bound the re-read
STATS = ("documents", "documents_skipped_empty", "forced_cuts", "replaced_characters", "whole_documents")
DEDUP_STAT = "duplicates_dropped"  # a stat only a --dedup run keeps (other runs' meta.json stays as it was)
READING_STATS = ("boms_stripped", "skipped_inputs", "skipped_records", "bad_inputs")  # in stats only when not 0 / empty


# --- where a document goes ------------------------------------------------------------------


class DocRule:
    """The split rule, empty-document skip and EOT of one run (``split``, ``fraction``, ``seed``,
    ``eot``, ``eot_id``, ``dtype`` as encode's options)."""

    def __init__(self, split: str, fraction: float, seed: int, eot: bool, eot_id: int | None, dtype: str,
                 bos_id: int | None = None, dedup: str | None = None):
        self.tail = split == "tail"
        self.threshold = int(fraction * 2**64)  # doc split: hash < threshold → val
        self.prefix = f"{seed}\0".encode()
        self.hashing = not self.tail and self.threshold > 0
        self.eot_ids = np.array([eot_id], dtype=dtype) if eot else None
        self.eot_id = eot_id
        self.bos_ids = np.array([bos_id], dtype=dtype) if bos_id is not None else None  # encode --bos
        self.bos_id = bos_id
        self.dedup = dedup is not None  # --dedup exact: each document's text hashed, a repeat dropped
        # the writer a document goes to when that is known before its end (None: wait for its hash)
        self.early = None if self.dedup else "all" if self.tail else ("train" if self.threshold == 0 else None)

    @classmethod
    def of(cls, spec: RunSpec) -> DocRule:
        c = spec.config
        return cls(c.split, c.val_fraction, c.seed, c.eot, spec.eot_id, spec.dtype, spec.bos_id if c.bos else None, c.dedup)

    def piece(self, has_text: bool = True) -> Piece:
        """The event of a text piece of a document: its writer when known before the document's end."""
        return PIECES[self.early if has_text else None]

    @property
    def writers(self) -> list[str]:
        """The streams a run writes: ``all`` (tail, cut at the end) or train and val."""
        return ["all"] if self.tail else list(formats.SPLITS)

    def hasher(self):
        """A streaming hasher of a document's text for the doc rule and ``--dedup`` (None when
        no hash is needed); it takes the text's UTF-8 bytes, in order (``update``)."""
        split = xxhash.xxh3_64(self.prefix) if self.hashing else None
        return DocHasher(split) if self.dedup else split

    def feed(self, h, text: str) -> None:
        if h is not None:
            h.update(text.encode("utf-8", "surrogatepass"))

    def val_of_hash(self, h) -> bool:
        if isinstance(h, DocHasher):
            h = h.split
        return h is not None and h.intdigest() < self.threshold

    def val_of_text(self, text: str) -> bool:
        """The doc rule for a whole document held as one str."""
        return self.hashing and xxhash.xxh3_64_intdigest(self.prefix + text.encode("utf-8", "surrogatepass")) < self.threshold

    def judge_hash(self, h) -> tuple[bool, int | None]:
        """(val, the document's --dedup hash or None) once ``h`` saw its whole text."""
        return self.val_of_hash(h), h.digest.intdigest() if isinstance(h, DocHasher) else None

    def judge_text(self, text: str) -> tuple[bool, int | None]:
        """``judge_hash`` for a whole document held as one str."""
        return self.val_of_text(text), dedup.digest_of_text(text) if self.dedup else None

    @staticmethod
    def has_text(text: str) -> bool:
        return bool(text) and not text.isspace()

    def dest(self, has_text: bool, val: bool) -> str:
        """``skip`` (no text), ``all`` (tail), ``val`` or ``train``."""
        if not has_text:
            return "skip"
        return "all" if self.tail else ("val" if val else "train")


class DocHasher:
    """The split hasher (or None) and the ``--dedup`` hasher of one document, fed together."""

    __slots__ = ("split", "digest")

    def __init__(self, split):
        self.split, self.digest = split, dedup.new_hasher()

    def update(self, data) -> None:
        if self.split is not None:
            self.split.update(data)
        self.digest.update(data)


# --- the events of a batch, in document order (a runner's reader → its writer) ---------------


@dataclass(frozen=True, slots=True)
class Piece:
    """The ids of one text of the batch belong to the current document; ``dest``: its writer
    when that is known before the document's end (``DocRule.early``), else None (hold them)."""

    dest: str | None


PIECES = {d: Piece(d) for d in (None, "all", "train")}  # one of each: a batch holds many


@dataclass(frozen=True, slots=True)
class DocEnd:
    """The current document is complete: ``dest`` (``skip``, ``all``, ``train``, ``val``), where it
    came from (None: recorded already, by the part that began it)."""

    dest: str
    origin: Origin | None


@dataclass(frozen=True, slots=True)
class DocResume:
    """A document begun in an earlier part (a text file cut across parts) goes on here, into ``dest``."""

    dest: str


@dataclass(frozen=True, slots=True)
class DocCut:
    """The current document goes on in the next part: no EOT here; ``origin``: where it began,
    recorded by the part that holds its start (None in a part that resumed it)."""

    origin: Origin | None


@dataclass(frozen=True, slots=True)
class InputDone:
    """Input ``index`` is read to its end; ``stats``: the run's counts so far (a checkpoint's)."""

    index: int
    stats: dict


def new_stats(dedup: bool = False) -> dict:
    return dict.fromkeys(STATS + ((DEDUP_STAT,) if dedup else ()), 0)


# --- ids ------------------------------------------------------------------------------------


class DocHolder:
    """The ids of the document being read, until its split is known: in memory up to
    ``hold_bytes``, then in a spill file in ``stage``."""

    def __init__(self, stage: Path, dtype: str, hold_bytes: int):
        self.path = stage / "document.spill.raw"
        self.hold_bytes = hold_bytes
        self.dtype = dtype
        self.parts: list[tuple[np.ndarray, int]] = []  # (ids, their max)
        self.nbytes = 0
        self.spill = None
        self.spilled = 0

    def add(self, ids: np.ndarray, max_id: int) -> None:
        self.parts.append((ids, max_id))
        self.nbytes += ids.nbytes
        if self.nbytes > self.hold_bytes:
            with disk.naming(self.path):
                if self.spill is None:
                    self.spill = open(self.path, "w+b")
                for p, _ in self.parts:
                    self.spill.write(p.data)
            self.spilled += self.nbytes
            self.parts, self.nbytes = [], 0

    def flush_to(self, writer: SplitWriter | None) -> None:
        """Write everything held to ``writer`` (None: drop it) and start empty."""
        if self.spilled:
            if writer is not None:
                self.spill.seek(0)
                left = self.spilled
                while left:
                    data = self.spill.read(min(left, disk.checksums.CHUNK_BYTES))
                    left -= len(data)
                    writer.write(np.frombuffer(data, dtype=self.dtype))
            self.spill.seek(0)
            self.spill.truncate()
            self.spilled = 0
        if writer is not None:
            for p, m in self.parts:
                writer.write(p, m)
        self.parts, self.nbytes = [], 0

    def close(self) -> None:
        if self.spill is not None:
            self.spill.close()
            self.path.unlink(missing_ok=True)


def encode_texts(tok: tokenizer.Tokenizer, dtype: str, texts: Sequence[str], where: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Concatenated ids of ``texts`` (cast to ``dtype`` after a range check), each one's length and max id.

    An entry of ``texts`` may be a byte-range spec of a file (``ranges.read_text_range``'s
    arguments): it is read and decoded here (``RangeFault`` if it cannot be).
    """
    utf8 = tok.backend == "fast"  # the fast engine reads UTF-8 bytes: no str to build and convert back
    ids, lengths = tok.encode_many([
        (read_text_range(*t, as_bytes=utf8) if isinstance(t, tuple) else t) for t in texts
    ])
    if lengths.all():
        maxes = np.maximum.reduceat(ids, np.cumsum(lengths) - lengths) if len(ids) else np.zeros(0, np.int64)
    else:  # reduceat misreads empty segments
        ends = np.cumsum(lengths)
        maxes = np.array([int(ids[e - n : e].max()) if n else -1 for e, n in zip(ends.tolist(), lengths.tolist())], dtype=np.int64)
    return formats.check_and_cast(ids, dtype, tok.n_vocab, where), lengths, maxes.astype(np.int64)


# --- the split writer ------------------------------------------------------------------


class SplitWriter:
    """Appends ids to one .bin in the staging folder, hashing as it writes; records doc starts."""

    def __init__(self, stage: Path, name: str, dtype: str, tail_fraction: float | None = None):
        self.name = name
        self.dtype = dtype
        self.item = np.dtype(dtype).itemsize
        self.path = stage / formats.bin_name(name)
        # "ab": the work folder is empty on a fresh run; on --resume, reopen() cuts the file back.
        # writes come in WRITE_BYTES blocks (see _flush): a buffer that size passes them straight through
        self.f = open(self.path, "ab", buffering=WRITE_BYTES)
        self.hasher = disk.new_hasher()
        self.tokens_flushed = 0
        self._pending: list[np.ndarray] = []
        self._pending_bytes = 0
        self.max_token = -1
        self.documents = 0
        self.starts_path = stage / f"{name}.starts.raw"
        self._starts_f = open(self.starts_path, "ab")
        self._starts = array("q")
        self.starts_hasher = disk.new_hasher()  # for --resume checkpoints
        self.prov = formats.ProvenanceWriter(stage, name)  # where each document came from
        # --split tail: (byte position, hasher copy, max so far) every SNAPSHOT_BYTES, so the
        # train checksum at the cut needs at most SNAPSHOT_BYTES read back.
        self.tail_fraction = tail_fraction
        self.snapshots = [(0, disk.new_hasher(), -1)] if tail_fraction is not None else None

    def send_to(self, sink) -> None:
        """Write the ids to ``sink`` (``write``, ``flush``, ``close``; a part's ``shards.PlacedFile``)
        instead of this writer's own file; before anything is written."""
        with disk.naming(self.path):
            self.f.close()
        self.f = sink

    def start_doc(self) -> None:
        self._starts.append(self.tokens)
        self.documents += 1
        if len(self._starts) >= 1 << 16:
            self._flush_starts()

    def add_origin(self, origin) -> None:
        """Record where the document last started came from (a ``sources.Origin``)."""
        self.prov.add(origin.input, origin.offset, origin.line, b"" if origin.id is None else formats.encode_id(origin.id))

    def _flush_starts(self) -> None:
        data = self._starts.tobytes()
        with disk.naming(self.starts_path):
            self._starts_f.write(data)
        self.starts_hasher.update(data)
        del self._starts[:]

    def write(self, ids: np.ndarray, max_id: int | None = None) -> None:
        """Append ``ids`` (already ``dtype``); ``max_id`` is their max if the caller knows it."""
        if not ids.size:
            return
        m = int(ids.max()) if max_id is None else max_id
        if m > self.max_token:
            self.max_token = m
        # Many small documents: gather their ids and write/hash them in ~1 MiB blocks.
        self._pending.append(ids)
        self._pending_bytes += ids.nbytes
        if self._pending_bytes >= WRITE_BYTES:
            self._flush()

    def _flush(self) -> None:
        if not self._pending:
            return
        # cast("B"): bytes.join copies a uint16/uint32 memoryview item by item (~40 MB/s), bytes at memcpy speed
        buf = self._pending[0].data if len(self._pending) == 1 else b"".join([p.data.cast("B") for p in self._pending])
        with disk.naming(self.path):
            self.f.write(buf)
        self.hasher.update(buf)
        self.tokens_flushed += self._pending_bytes // self.item
        self._pending, self._pending_bytes = [], 0
        if self.snapshots is not None:
            pos = self.tokens_flushed * self.item
            if pos - self.snapshots[-1][0] >= SNAPSHOT_BYTES:
                # Everything written is flushed now, so max_token is the max of bytes [0, pos).
                self.snapshots.append((pos, self.hasher.copy(), self.max_token))
                lowest_cut = (self.tokens_flushed - math.floor(self.tokens_flushed * self.tail_fraction)) * self.item
                while len(self.snapshots) > 1 and self.snapshots[1][0] <= lowest_cut:
                    self.snapshots.pop(0)

    @property
    def tokens(self) -> int:
        return self.tokens_flushed + self._pending_bytes // self.item

    @property
    def checksum(self) -> str:
        """The checksum of everything written so far (after ``close``: of the whole file)."""
        return disk.format_checksum(self.hasher)

    def close(self) -> None:
        try:
            self._flush()
            self._flush_starts()
        finally:
            with disk.naming(self.path):
                self.f.close()
            with disk.naming(self.starts_path):
                self._starts_f.close()
            with disk.naming(self.prov.rec_path):
                self.prov.close()

    def abandon(self) -> None:
        """Close every file without writing what is buffered: the files are being thrown away
        (a checkpoint that no longer applies), and some may already be closed."""
        for f in (self.f, self._starts_f):
            try:
                f.close()
            except (OSError, ValueError):  # a buffered write that cannot land: the file is discarded anyway
                pass
        self.prov.abandon()

    # --- checkpoints (--resume) ---

    def checkpoint(self, to_sync: list) -> dict:
        """Flush everything written and append each file's ``(fd, path)`` to ``to_sync``: the
        caller fsyncs them before it records the state; the state ``reopen`` needs to continue
        from here."""
        self._flush()
        self._flush_starts()
        files = [(self.f, self.path), (self._starts_f, self.starts_path)]
        for f, path in files:
            with disk.naming(path):
                f.flush()
        with disk.naming(self.prov.rec_path):
            prov = self.prov.checkpoint(files)
        to_sync += [(f.fileno(), path) for f, path in files]
        return {
            "bytes": self.tokens_flushed * self.item,
            "checksum": disk.format_checksum(self.hasher),
            "documents": self.documents,
            "starts_checksum": disk.format_checksum(self.starts_hasher),
            "max_token": self.max_token,
            "prov": prov,
        }

    def reopen(self, state: dict) -> None:
        """Continue a checkpointed file: cut it back to ``state`` and re-hash what stays.

        ``resume.Stale`` if a file is shorter than the checkpoint or its bytes differ.
        """
        self.f.close()
        self._starts_f.close()
        n, docs = state["bytes"], state["documents"]
        if n % self.item:
            raise resume.Stale(f"{self.path}: checkpoint at byte {n}, not a whole number of {self.item}-byte tokens")
        self.f, self.hasher, snaps = _reopen(self.path, n, self.dtype if self.snapshots is not None else None)
        self._starts_f, self.starts_hasher, _ = _reopen(self.starts_path, docs * 8, None)
        if disk.format_checksum(self.hasher) != state["checksum"]:
            raise resume.Stale(f"{self.path}: bytes differ from the checkpoint")
        if disk.format_checksum(self.starts_hasher) != state["starts_checksum"]:
            raise resume.Stale(f"{self.starts_path}: bytes differ from the checkpoint")
        try:
            prov_ok = state["prov"]["records"] == docs and self.prov.reopen(state["prov"])
        except OSError as e:
            raise resume.Stale(f"{self.prov.rec_path}: {e.strerror or e}") from None
        if not prov_ok:
            raise resume.Stale(f"{self.prov.rec_path}: provenance records differ from the checkpoint")
        self.tokens_flushed = n // self.item
        self.documents = docs
        self.max_token = state["max_token"]
        if self.snapshots is not None:
            # Any snapshot at or before the cut gives the same train checksum; keep the pruning rule.
            self.snapshots = snaps
            lowest_cut = (self.tokens_flushed - math.floor(self.tokens_flushed * self.tail_fraction)) * self.item
            while len(self.snapshots) > 1 and self.snapshots[1][0] <= lowest_cut:
                self.snapshots.pop(0)


def _reopen(path: Path, nbytes: int, dtype: str | None):
    """Open ``path`` for appending after its first ``nbytes`` (the rest is cut off); return the
    file, the hasher of those bytes and, given the token ``dtype`` (``--split tail``),
    (position, hasher, max id so far) snapshots every SNAPSHOT_BYTES."""
    try:
        f = disk.open_own(path, buffering=WRITE_BYTES)  # never through a link planted in .partial/
    except OSError as e:
        raise resume.Stale(f"{path}: {e.strerror}") from None
    if os.fstat(f.fileno()).st_size < nbytes:
        f.close()
        raise resume.Stale(f"{path}: shorter than the checkpoint")
    f.truncate(nbytes)
    h = disk.new_hasher()
    snaps = [(0, disk.new_hasher(), -1)] if dtype else None
    pos, mx = 0, -1
    while pos < nbytes:
        data = f.read(min(disk.checksums.CHUNK_BYTES, nbytes - pos, SNAPSHOT_BYTES - pos % SNAPSHOT_BYTES))
        if not data:
            break
        h.update(data)
        pos += len(data)
        if dtype:
            mx = max(mx, int(np.frombuffer(data, dtype=dtype).max()))
            if pos % SNAPSHOT_BYTES == 0:
                snaps.append((pos, h.copy(), mx))
    f.seek(nbytes)
    return f, h, snaps


def starts_chunks(raw: Path, lo: int = 0, hi: int | None = None, shift: int = 0, step: int = 1 << 20):
    """Doc start offsets ``lo:hi`` of a raw int64 file, minus ``shift``, in bounded pieces."""
    n = raw.stat().st_size // 8
    hi = n if hi is None else hi
    with open(raw, "rb") as f:
        for a in range(lo, hi, step):
            f.seek(a * 8)
            yield np.fromfile(f, dtype="<i8", count=min(step, hi - a)) - shift


def write_index(stage: Path, raw: Path, path: Path, count: int, **kw) -> None:
    """Write the document index ``path`` from the raw int64 starts a SplitWriter recorded (``starts_chunks`` ``kw``)."""
    with disk.naming(path):
        formats.write_doc_index_stream(path, count, starts_chunks(raw, **kw))



# --- writing safely ----------------------------------------------------------------------

# A write that failed because the disk (or a limit) is full: the words for the message.
def resolve_dtype(tok: tokenizer.Tokenizer, dtype: str | None) -> str:
    if dtype is None:
        return formats.dtype_for_vocab(tok.n_vocab)
    dt = formats.normalize_dtype(dtype)
    if formats.dtype_max(dt) + 1 < tok.n_vocab:
        raise ConfigError(
            f"encoding {tok.name!r} has {tok.n_vocab} ids, more than uint16 holds (65536): use --dtype uint32"
        )
    return dt


def check_out_dir(out_dir, sources, tokenizer_file=None, sharded: bool = False) -> Path:
    """OUT_DIR as a Path; ConfigError / InputError (exit 2, nothing written) for an empty -o, a
    file, or a folder where an output would replace an input (``encode a.txt -o .`` is fine,
    ``encode train.bin -o .`` is not)."""
    if str(out_dir) == "":
        raise ConfigError("-o is empty: give the output folder (-o . for the current one)")
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        what = "a file" if out_dir.is_file() else "not a folder (a FIFO, socket or device)"
        raise InputError(f"{out_dir}: output path is {what}; pick another -o")
    if not out_dir.exists() and os.path.islink(out_dir):
        why = "which does not exist; create that folder, or pick another -o"
        try:
            os.stat(out_dir)
        except OSError as e:
            if e.errno == errno.ELOOP:
                why = "which leads back to itself (a loop of links); pick another -o"
        raise InputError(f"{out_dir}: output path is a symbolic link to {os.readlink(out_dir)}, {why}")
    outs = [out_dir / formats.META_JSON, out_dir / disk.LOCK_NAME]  # the lock file is written with the writer's pid
    for split in formats.SPLITS:  # every layout's names: a run may also remove another layout's files
        outs += [out_dir / formats.bin_name(split), out_dir / formats.doc_index_name(split)]
    owned = set_names(out_dir)
    outs += [out_dir / n for n in owned]
    # folders a run writes or removes whole: the layouts', and its work and staging folders
    subdirs = [out_dir / tokensrc.LLMC_DIR, out_dir / formats.PARTIAL_DIR, out_dir / disk.STAGING_DIR] + (
        [out_dir / formats.SHARDS_DIR] if sharded else [])
    ins = [s.path for s in sources if s.path is not None] + ([tokenizer_file] if tokenizer_file else [])
    known = {(s.dev, s.ino): s.path for s in sources if s.path is not None and s.ino}  # stated when found
    rest = [s.path for s in sources if s.path is not None and not s.ino] + ([tokenizer_file] if tokenizer_file else [])
    rest += ["-"] if any(s.path is None for s in sources) else []  # stdin redirected from a file (`< OUT/val.bin`)
    disk.refuse_overwrite(outs + subdirs, rest, known)
    for o in outs:  # a commit renames over each name: a link there would be replaced, found only at the end
        if o.name != disk.LOCK_NAME:  # the lock is opened, never renamed over: disk.locked says what a planted one is
            disk.check_replaceable(o)
    for sub in subdirs:  # an input inside OUT_DIR/llmc, OUT_DIR/.partial, … could be overwritten or removed
        i = disk.first_inside(sub, ins)
        if i is not None:
            raise ConfigError(f"{i}: is inside {sub}, which this run writes: pick another -o")
    refuse_unrecorded(out_dir, owned)
    return out_dir


def set_names(out_dir: Path) -> list[str]:
    """Names (relative to OUT_DIR) besides the token files and their document indexes that a set
    may have and a run writes, replaces or removes: the other layouts' files (Megatron's ``.idx``,
    nanoGPT's ``meta.pkl``, the llm.c shards and masks found there), provenance and loss masks."""
    names = [tokensrc.META_PKL]
    for split in formats.SPLITS:
        names += [tokensrc.megatron_index_name(split), formats.prov_name(split), formats.prov_ids_name(split),
                  formats.mask_name(split)]
    return names + tokensrc.stale_llmc(out_dir, set())


def refuse_unrecorded(out_dir: Path, names: list[str]) -> None:
    """ConfigError (exit 2, before anything is read) for a file of ``names`` in OUT_DIR that no
    earlier set there wrote (OUT_DIR/meta.json does not name it): a run replaces or removes those
    names, and a file another tool put there (a Megatron ``.idx``, llm.c shards, a ``meta.pkl``)
    would be lost, or left to be read with the new set. The token files and document indexes
    themselves are outputs by name, replaced like any output."""
    meta = out_dir / formats.META_JSON
    recorded = {os.path.normpath(p) for p in map(str, formats.dataset_files(out_dir))} if meta.is_file() else set()
    for name in names:
        path = out_dir / name
        if os.path.lexists(path) and os.path.normpath(str(path)) not in recorded:
            whose = f"{meta} does not name it" if meta.is_file() else f"{out_dir} has no meta.json"
            raise ConfigError(f"{path}: this run would replace or remove it, and no earlier winsample set wrote it"
                              f" ({whose}): move it away, or pick another -o")


def check_edges(tok: tokenizer.Tokenizer, eot: bool, bos: bool) -> None:
    """ConfigError, naming the option to change, when the tokenizer lacks the id a document edge needs."""
    if eot and tok.eot is None:
        raise ConfigError(
            f"{tok.file_label()}: the tokenizer has no end-of-document token"
            f" ({_no_token_reason(tok, 'eos')}): name one with --eot-token TEXT|ID, or pass --no-eot to encode without one"
        )
    if bos and tok.bos is None:
        raise ConfigError(
            f"{tok.file_label()}: the tokenizer has no beginning-of-document token"
            f" ({_no_token_reason(tok, 'bos')}): drop --bos"
        )


def check_pattern(tok: tokenizer.Tokenizer, tokenizer_file, pattern: str | None) -> None:
    """ConfigError when ``--pattern`` was given where it cannot apply (it would be ignored):
    without a ``--tokenizer-file``, or with a tokenizer file that is not a ``.tiktoken`` one."""
    if pattern is None:
        return
    if tokenizer_file is None:
        raise ConfigError(f"--pattern {pattern} names the pre-tokenizer of a .tiktoken --tokenizer-file; --encoding {tok.name} has its own: drop --pattern")
    if tok.family != "tiktoken":
        raise ConfigError(f"{tokenizer_file}: a {tok.family} tokenizer carries its own pre-tokenizer: drop --pattern {pattern}")


def _no_token_reason(tok: tokenizer.Tokenizer, which: str) -> str:
    if tok.family == "hf":
        return f"no tokenizer_config.json with a {which}_token beside its tokenizer.json"
    if tok.family == "sentencepiece":
        return f"the model's {which}_id is -1"
    return "no <|endoftext|>"


def known_text_bytes(sources) -> int | None:
    """The inputs' bytes of text, when the sizes say it (None: stdin, gzip, zstd, Parquet or Arrow)."""
    if any(s.size is None or s.compressed or s.kind in ("parquet", "arrow") for s in sources):
        return None
    return sum(s.size for s in sources)


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


PAYBACK = 2.0  # a further encoder thread must save this many times its engine's build


def encoder_threads(workers: int, text_bytes: int | None, build_seconds: float, bytes_per_second: float,
                    cpus: int | None = None) -> int:
    """How many of ``workers`` fast-engine threads repay their engine's build.

    Every thread beyond the first builds an engine of its own, and a build holds the GIL
    (every thread waits for it). A k-th thread would save at most ``B / s / (k × (k - 1))``
    seconds on ``B`` bytes at ``s`` bytes a second per engine, on a k-th CPU: it is started only
    when that is more than ``PAYBACK`` times its build, and never beyond ``cpus`` (default:
    ``usable_cpus()``). The margin, because threads scale less than that bound (measured: 1.3 to
    1.8 on 2 cores, not 2), a further engine costs its size in memory (~100 MB for a 4 MB
    tokenizer.json), and both figures are measured at start-up on a machine that may be busy.
    Unknown size (``text_bytes`` None): as many as ``workers`` and the CPUs allow.
    """
    most = max(1, min(workers, cpus or usable_cpus()))
    if text_bytes is None:
        return most
    k = 1
    while k < most and text_bytes / max(bytes_per_second, 1.0) / (k * (k + 1)) > PAYBACK * build_seconds:
        k += 1
    return k


def check_split_possible(sources, split: str, fraction: float) -> None:
    """ConfigError before anything is read when the split is sure to leave train or val empty:
    one plain-text input is one document, and --split doc keeps each document whole."""
    if split == "doc" and fraction > 0 and len(sources) == 1 and sources[0].kind == "text" and sources[0].size != 0:
        raise ConfigError(f"{sources[0].label}: one text input is one document, and --split doc puts each document whole in"
                          f" train or val, so one of them would be empty: use --split tail (the last {fraction:g} of its"
                          " tokens become val), or --val-fraction 0")


# --- what the run wrote: meta.json and the summary ------------------------------------------


def split_entry(name: str, w, *, file: str | None = None, doc_index: str | None = None) -> formats.SplitEntry:
    """The meta.json entry of split ``name`` as written by ``w`` (a SplitWriter or a ``Done``)."""
    return formats.SplitEntry(
        file=file or formats.bin_name(name), doc_index=doc_index or formats.doc_index_name(name), tokens=w.tokens,
        bytes=w.tokens * w.item, documents=w.documents, max_token=w.max_token if w.tokens else None,
        checksum=w.checksum,
    )


def build_meta(sources, tokenizer_entry: dict, spec: RunSpec, splits: dict[str, formats.SplitEntry], stats: dict,
               sharded: dict | None = None, provenance: dict | None = None) -> formats.Meta:
    """meta.json of a run over ``sources`` with ``spec`` (split, fraction, seed, eot, dtype);
    ``provenance``: each split's provenance entry (``formats.write_provenance``)."""
    c = spec.config
    return formats.Meta(
        dtype=spec.dtype, tokenizer=tokenizer_entry, splits=splits, version=formats.FORMAT_VERSION,
        winsample_version=__version__, eot_appended=c.eot,
        split={"method": c.split, "fraction": c.val_fraction, "seed": c.seed},
        inputs=[s.meta() for s in sources], stats=stats, sharded=sharded,
        extra={"bos_prepended": bool(c.bos), **({"dedup": c.dedup} if c.dedup else {}),
               **({} if provenance is None else {"provenance": formats.prov_meta(c.id_field, provenance)})},
    )


def plain_set_leftovers(out_dir: Path, id_field: str | None) -> list[str]:
    """Names in OUT_DIR of an earlier set that a set of plain text (every engine's) does not have
    and must remove as it commits: provenance ids without ``--id-field``, and the loss masks of an
    earlier records run (left, the dataset would read them as this set's: meta.json refuses that)."""
    names = [formats.prov_ids_name(s) for s in formats.SPLITS] if id_field is None else []
    names += [formats.mask_name(s) for s in formats.SPLITS]
    return [n for n in names if (Path(out_dir) / n).is_file()]


def commit_set(work: Path, stage: Path, out_dir: Path, names: list[str], meta: formats.Meta, remove: list[str]) -> None:
    """Move ``names`` from ``work`` to ``stage``, write meta.json there, and commit the set into
    OUT_DIR as one (``disk.commit_staged``: meta.json last; ``remove``: names of an earlier set)."""
    for name in names:
        (stage / name).parent.mkdir(parents=True, exist_ok=True)
        os.replace(work / name, stage / name)
    with disk.naming(stage / formats.META_JSON):
        formats.write_meta(stage / formats.META_JSON, meta)
    disk.commit_staged(stage, out_dir, names + [formats.META_JSON], remove)


def check_outcome(sources, stats: dict, train_tokens: int, val_tokens: int, fraction: float, tail: bool) -> None:
    """DataError when no document had text; ConfigError when the split leaves train (or, with a
    fraction above 0, val) empty — the same words whichever runner found it."""
    kept = stats["documents"] - stats["documents_skipped_empty"]
    if kept == 0:
        empty = stats["documents_skipped_empty"]
        why = [f"{empty} document{'s' if empty != 1 else ''} empty or whitespace-only"] if empty else []
        for key, unit in (("skipped_records", "record"), ("skipped_inputs", "file")):  # --on-bad-input skip
            n = stats.get(key, 0)
            why += [f"{n} {unit}{'s' if n != 1 else ''} skipped as bad input"] if n else []
        bad = stats.get("bad_inputs") or []
        if why and bad and isinstance(bad[0], dict) and bad[0].get("error"):  # the reason, not only the count
            why[-1] += f", the first: {bad[0]['error']}"
        what = "the input holds" if len(sources) == 1 else "the inputs hold"
        more = f" and {len(sources) - 3} more" if len(sources) > 3 else ""
        raise DataError(f"{', '.join(s.label for s in sources[:3])}{more}: no document has any text"
                        f" ({', '.join(why) or what + ' no document at all'}); nothing to encode")
    hint = "a single or few documents want --split tail" if not tail else "use more text or a larger --val-fraction"
    if train_tokens == 0:
        raise ConfigError(f"the split leaves train empty ({kept} document(s), --val-fraction {fraction}): {hint}")
    if fraction > 0 and val_tokens == 0:
        raise ConfigError(f"the split leaves val empty ({kept} document(s), --val-fraction {fraction}): {hint}, or --val-fraction 0")


def summary(out_dir, meta: formats.Meta, stats: dict, sources, seconds: float, extra: dict) -> dict:
    """What a run returns (``--json`` prints it): counts per split and in all, ``extra`` (the
    runner's own fields), input bytes and speed."""
    in_bytes = sum(s.size or 0 for s in sources)
    train, val = meta.splits["train"], meta.splits["val"]
    return {
        "out_dir": str(out_dir),
        "train": {"tokens": train.tokens, "documents": train.documents},
        "val": {"tokens": val.tokens, "documents": val.documents},
        "documents": stats["documents"],
        "skipped_empty": stats["documents_skipped_empty"],
        "replaced_characters": stats["replaced_characters"],
        "forced_cuts": stats["forced_cuts"],
        "whole_documents": stats.get("whole_documents", 0),
        **({DEDUP_STAT: stats[DEDUP_STAT]} if DEDUP_STAT in stats else {}),
        # only when there is something to say (--input-encoding, --on-bad-input skip, a file with a BOM)
        **{k: stats[k] for k in READING_STATS if stats.get(k)},
        **({"not_read": dict(sorted(sources.not_read.items()))} if getattr(sources, "not_read", None) else {}),  # unread
        **extra,
        "input_bytes": in_bytes,
        "seconds": round(seconds, 3),
        "mb_per_s": round(in_bytes / 1e6 / seconds, 2) if seconds > 0 else None,
    }
