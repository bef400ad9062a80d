"""The local runner's parts: the input planned as contiguous spans, each part encoded whole by
one worker process (read, decode, cut, encode, cast, split, hash, write), and the parts merged.

Plan (``plan_parts``, the coordinator): inputs in order are packed into parts of about
``EncodeConfig.shard_bytes`` input bytes (``--shard-size``, ``ray_plan.plan_shards``); a file that does not fit is cut only
where the bytes cannot depend on the cut: a JSONL file after a line end, a plain UTF-8 text
file at one of the tokenizer's safe cuts, and that only when its split is known before its end
(``--split tail`` or ``--val-fraction 0``: no hash of the whole text to wait for). The plan
depends on the inputs and the part size only, never on ``--workers``.

Parts (``Part``): a worker writes its part's split streams exactly as a single run writes them
(``SplitWriter``; document starts and provenance into ``.partial/parts/NNNNN/``) and writes
``done.json`` last, with every file's size and checksum (and for ids written in place, their
byte offset in the output); ``--resume`` reuses a part whose ``done.json`` matches the run and
whose bytes are still those (so a part's files need no fsync of their own).

Merge (``Merger``, the coordinator): as soon as the parts before a part are known, its place in
each split file is published (``Places``). A worker holds its part's ids in memory until it
learns the place and writes them there itself (``PlacedFile``), so most ids are written once;
a part that ends first (or holds too much) writes its own file, which is copied into place
(``os.copy_file_range``: in the kernel, run by the workers). What lands is written back in the
background; then each whole file is hashed once
(xxh3-128 over mapped pages), document starts shifted, provenance records joined (lines of a
JSONL part that starts inside its file counted on from the parts before). The result is what
one writer would have written, so the single run's finish (the ``--split tail`` cut, indexes,
layouts, meta.json) follows.
"""

from __future__ import annotations

import json
import math
import mmap
import os
import queue
import shutil
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np
import xxhash

from ... import disk, formats
from ...errors import ConfigError, WinsampleError
from ...tokenizer import fastengine
from ..inputs import Source
from ..pipeline import starts_chunks
from ..textfile import TextFile
from .checkpoint import Checkpointer
from .pool import WORKER_POLL_SECONDS, check_alive
from .ray_plan import plan_shards

WRITE_BACK_SECONDS = 1.0  # how often what the merge copied in is synced while parts are still encoded

PARTS_DIR = "parts"  # in OUT_DIR/.partial/
DONE = "done.json"  # in a part's folder, written last
PLACES = "places.bin"  # in OUT_DIR/.partial/: where each part's ids go (``Places``)
PLACE_HOLD_BYTES = 32 << 20  # ids a part's stream holds in memory waiting for its place (``PlacedFile``)
PLACE_WAIT = (0.25, 0.1)  # a part that ends before its place is known waits this share of its time (at most s) for it
DONE_FORMAT = "winsample-part"


class Span(NamedTuple):
    """Input ``index``, bytes ``[start, end)`` of it (None, None: the whole input)."""

    index: int
    start: int | None = None
    end: int | None = None

    @property
    def whole(self) -> bool:
        return self.start is None


def plan_parts(sources, part_bytes: int, tok, early: bool, min_text_bytes: int, errors: str, encoding: str | None) -> list[list[Span]]:
    """The run's parts, each a list of ``Span``s in input order (see the module docstring).

    ``early``: the split of a document is known before its end (a text file may be cut);
    ``min_text_bytes``, ``errors``, ``encoding``: what ``TextFile.open`` needs to read a text file
    in byte ranges (only such a file is cut).
    """
    def cuttable(src: Source) -> bool:
        if encoding is not None:  # a byte b"\n" may not end a line in another codec
            return False
        if src.kind == "jsonl":
            return True
        if not (early and tok.can_cut):
            return False
        tf = TextFile.open(src, 0, errors, min_text_bytes, tok.last_safe_cut_bytes)
        if tf is None:
            return False
        tf.abort()
        return True

    out = []
    for shard in plan_shards(sources, part_bytes, tok, cuttable, taper=True):
        out.append([Span(i) if (a, b) == (0, sources[i].size or 0) else Span(i, a, b) for i, a, b in shard])
    return out


def plan_key(plan: list[list[Span]]) -> list:
    return [[[s.index, s.start, s.end] for s in part] for part in plan]


# --- a part: what a worker wrote ----------------------------------------------------------


@dataclass
class Stream:
    """One split stream of a part (``SplitWriter``'s files in its folder), or of the merged run:
    what ``pipeline.split_entry`` and the single run's finish read of a writer."""

    name: str
    path: Path
    item: int
    tokens: int
    documents: int
    max_token: int
    checksum: str
    starts_path: Path
    prov: object  # .rec_path, .ids_path, .count, .id_bytes
    sums: dict = field(default_factory=dict)  # checksums of the starts and provenance files (a part's)
    snapshots: list | None = None  # --split tail: where finish_tail hashes train from (one, at 0)
    placed_at: int | None = None  # a part's ids written straight into the run's output (``path``) at this byte

    @classmethod
    def of_writer(cls, w) -> Stream:
        sums = {"starts": disk.format_checksum(w.starts_hasher), "prov": disk.format_checksum(w.prov.rec_hasher),
                "prov_ids": disk.format_checksum(w.prov.ids_hasher)}
        placed = getattr(w.f, "placed_at", None)  # a part's writer sends its ids to a PlacedFile
        return cls(w.name, w.f.output if placed is not None else w.path, w.item, w.tokens, w.documents, w.max_token,
                   w.checksum, w.starts_path, ProvFiles(w.prov.rec_path, w.prov.ids_path, w.prov.count, w.prov.id_bytes),
                   sums, placed_at=placed)

    def to_json(self, folder: Path) -> dict:
        return {"name": self.name, "tokens": self.tokens, "documents": self.documents, "max_token": self.max_token,
                "checksum": self.checksum, "records": self.prov.count, "id_bytes": self.prov.id_bytes,
                "file": None if self.placed_at is not None else self.path.name, "placed_at": self.placed_at,
                "starts": self.starts_path.name, "prov": self.prov.rec_path.name,
                "prov_ids": self.prov.ids_path.name, "sums": self.sums}

    @classmethod
    def from_json(cls, folder: Path, d: dict, item: int) -> Stream:
        placed = d.get("placed_at")
        if placed is not None and (not isinstance(placed, int) or placed < 0):
            raise ValueError(f"placed_at {placed!r}")
        for v in (d["name"], d["file"] if placed is None else "x", d["starts"], d["prov"], d["prov_ids"]):
            if not isinstance(v, str) or Path(v).name != v or v in (".", ".."):  # names read here stay in the part's folder
                raise ValueError(f"file name {v!r}")
        # a placed part's ids are in the run's output, two folders up (part_dir): a name of our own, not read from the file
        path = folder.parent.parent / formats.bin_name(d["name"]) if placed is not None else folder / d["file"]
        return cls(d["name"], path, item, d["tokens"], d["documents"], d["max_token"], d["checksum"],
                   folder / d["starts"], ProvFiles(folder / d["prov"], folder / d["prov_ids"], d["records"], d["id_bytes"]),
                   d["sums"], placed_at=placed)


@dataclass
class ProvFiles:
    rec_path: Path
    ids_path: Path
    count: int
    id_bytes: int


@dataclass
class Part:
    """A finished part: its streams by split name, its stats (keys in the order they first
    counted), for each span the JSONL lines it read (``lines``, by span position), and the
    decompressed size of each .gz / .zst input it read (``decompressed``, by input)."""

    index: int
    streams: dict[str, Stream]
    stats: dict
    lines: dict = field(default_factory=dict)
    input_bytes: int = 0
    reused: bool = False
    decompressed: dict = field(default_factory=dict)


def part_dir(work: Path, k: int) -> Path:
    return work / PARTS_DIR / f"{k:05d}"


def write_done(folder: Path, key: dict, part: Part) -> None:
    """Record ``part`` as complete: ``done.json``, written atomically after its files. Its files
    are not fsynced: ``read_done`` trusts a part only while its files' checksums still match,
    so a part torn by a power loss is encoded again, and the merged files are synced at the commit."""
    disk.write_json_atomic(folder / DONE, {
        "format": DONE_FORMAT, "version": 1, "key": key, "stats": part.stats,
        "lines": {str(k): v for k, v in part.lines.items()}, "input_bytes": part.input_bytes,
        "decompressed": {str(k): v for k, v in part.decompressed.items()},
        "streams": {n: s.to_json(folder) for n, s in part.streams.items()},
    })


def read_done(folder: Path, key: dict, k: int, item: int) -> Part | None:
    """The part recorded in ``folder`` for ``key``, when its files hold exactly what it records; else None."""
    try:
        with open(folder / DONE, encoding="utf-8") as f:
            d = json.load(f)
        if not isinstance(d, dict) or d.get("format") != DONE_FORMAT or d.get("key") != key:
            return None
        streams = {n: Stream.from_json(folder, s, item) for n, s in d["streams"].items()}
        for s in streams.values():
            if s.starts_path.stat().st_size != s.documents * 8:
                return None
            if s.placed_at is None:
                if s.path.stat().st_size != s.tokens * item or disk.checksum_file(s.path) != s.checksum:
                    return None
            elif (s.path.stat().st_size < s.placed_at + s.tokens * item
                  or disk.format_checksum(hash_range(s.path, s.placed_at, s.tokens * item)) != s.checksum):
                return None
            files = {"starts": s.starts_path, "prov": s.prov.rec_path, "prov_ids": s.prov.ids_path}
            if any(disk.checksum_file(files[n]) != c for n, c in s.sums.items()):
                return None
            if s.prov.rec_path.stat().st_size != s.prov.count * formats.PROV_DTYPE.itemsize:
                return None
            if s.prov.ids_path.stat().st_size != s.prov.id_bytes:
                return None
        return Part(k, streams, d["stats"], {int(a): b for a, b in d["lines"].items()}, d["input_bytes"], reused=True,
                    decompressed={int(a): b for a, b in d["decompressed"].items()})
    except (OSError, ValueError, KeyError, TypeError, AttributeError, WinsampleError):
        return None


def open_parts(work: Path, params: dict, sources, plan: list[list[Span]], want: bool, dtype: str) -> tuple[dict, dict, str | None]:
    """(the parts of an earlier run to reuse by number, the key of this run's parts, why none
    were reused or None). Without ``want`` (``--resume``), or when the earlier run had other
    options, inputs or parts, ``work`` is made empty (without ``want``, the note says so when
    finished parts were dropped)."""
    from .. import resume  # the input identity a checkpoint uses

    key = {"run": xxhash.xxh3_128_hexdigest(json.dumps(
        [params, [resume.input_key(s) for s in sources], plan_key(plan)], sort_keys=True, default=str).encode())}
    parts, note = {}, None
    if want:
        item = np.dtype(dtype).itemsize
        for k in range(len(plan)):
            p = read_done(part_dir(work, k), dict(key, part=k), k, item)
            if p is not None:
                parts[k] = p
        if not parts:  # a finished run leaves no parts behind: say so, as the one-stream runner does
            note = ("no part of an earlier run with these inputs and options was complete" if any_part(work)
                    else f"no checkpoint in {work}")
    elif work.is_dir() and any(work.iterdir()):  # finished parts, or a one-stream run's checkpoint
        note = resume.DROPPED
    if not parts:
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir()
    return parts, key, note


def any_part(work: Path) -> bool:
    """Whether ``work`` holds a part's folder, finished or not (an interrupted run in parts)."""
    folder = work / PARTS_DIR
    return folder.is_dir() and any(folder.iterdir())


def refuse_one_stream_checkpoint(work: Path) -> None:
    """ConfigError when ``work`` holds a one-stream run's checkpoint (its journal, no part): a run
    in parts cannot continue it, and ``--resume`` must not drop it."""
    if (work / formats.PARTIAL_JOURNAL).is_file() and not any_part(work):
        raise ConfigError(f"{work} holds the checkpoint of a run as one stream (--workers 1, stdin or --dedup), which a run"
                          " in parts cannot continue: resume it with --workers 1 --resume, or run without --resume to start over")


def any_done(work: Path) -> bool:
    """Whether ``work`` holds a finished part (work ``--resume`` can reuse)."""
    folder = work / PARTS_DIR
    return folder.is_dir() and any((p / DONE).is_file() for p in folder.iterdir())


def fresh_part_dir(work: Path, k: int) -> Path:
    folder = part_dir(work, k)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder


def encode_parts(plan: list[list[Span]], task, pool, in_flight: int, work: Path, parts: dict, key: dict, merger: Merger,
                 progress, inputs_of) -> None:
    """Every part not in ``parts`` encoded by ``task(k, spans, folder, key, inputs_of(k))`` on the pool, at most
    ``in_flight`` handed out at a time, so that each part's copy into the outputs (``merger.add``,
    in order) waits behind few of them; the first part in order that fails is the error."""
    done, failed = queue.SimpleQueue(), {}
    todo = deque(k for k in range(len(plan)) if k not in parts)
    running: set[int] = set()

    def submit() -> None:
        while todo and len(running) < in_flight and not failed:
            k = todo.popleft()
            running.add(k)
            pool.apply_async(task, (k, plan[k], str(part_dir(work, k)), dict(key, part=k), inputs_of(k)),
                             callback=lambda p, k=k: done.put((k, p, None)), error_callback=lambda e, k=k: done.put((k, None, e)))

    submit()
    head = 0
    while head < len(plan):
        while head in parts:  # in order: each part's place in the outputs is known once those before it are
            merger.add(parts[head])
            head += 1
        if head == len(plan):
            break
        if failed and min(failed) < min(running, default=len(plan)):
            raise failed[min(failed)]
        merger.write_back()
        try:
            k, p, err = done.get(timeout=WORKER_POLL_SECONDS)
        except queue.Empty:
            check_alive(pool)
            continue
        running.discard(k)
        if err is not None:
            failed[k] = err
            continue
        parts[k] = p
        if progress:
            progress(p.input_bytes, sum(s.tokens for s in p.streams.values()))
        submit()


# --- the merge -----------------------------------------------------------------------------


def merge_stats(parts: list[Part], bad_kept: int) -> dict:
    """The run's stats: each count summed over the parts, keys in the order a single run adds
    them (a part's order, then the keys a later part adds); ``bad_inputs`` joined in order."""
    out: dict = {}
    for p in parts:
        for k, v in p.stats.items():
            if k == "bad_inputs":
                out[k] = (out.get(k, []) + v)[:bad_kept]
            else:
                out[k] = out.get(k, 0) + v
    return out


def copy_into(src: str, dst: str, src_offset: int, dst_offset: int, nbytes: int) -> None:
    """Copy bytes ``[src_offset, src_offset + nbytes)`` of ``src`` to ``dst_offset`` of ``dst``
    (``os.copy_file_range``: in the kernel, else through memory); a worker's share of a merge."""
    with open(src, "rb") as f, open(dst, "r+b") as out:
        left, at, to = nbytes, src_offset, dst_offset
        copy = getattr(os, "copy_file_range", None)
        while left and copy is not None:
            try:
                n = copy(f.fileno(), out.fileno(), left, at, to)
            except OSError:  # another file system, an old kernel: copy through memory
                break
            if not n:
                break
            left, at, to = left - n, at + n, to + n
        while left:
            data = os.pread(f.fileno(), min(left, disk.checksums.CHUNK_BYTES), at)
            if not data:
                raise OSError(f"{src}: shorter than its part records")
            os.pwrite(out.fileno(), data, to)
            left, at, to = left - len(data), at + len(data), to + len(data)


def hash_file(path: Path, size: int | None = None):
    """The xxh3-128 hasher of a file's first ``size`` bytes (None: all), hashed from its pages
    mapped ``CHUNK_BYTES`` at a time (no copy, and no more than that mapped at once: mapped file
    pages count in the process's resident size)."""
    h = disk.new_hasher()
    step = disk.checksums.CHUNK_BYTES
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size if size is None else size
        for a in range(0, size, step):
            with mmap.mmap(f.fileno(), min(step, size - a), offset=a, access=mmap.ACCESS_READ) as m:
                view = memoryview(m)
                h.update(view)
                view.release()
    return h


def hash_range(path: Path, start: int, nbytes: int):
    """The xxh3-128 hasher of bytes ``[start, start + nbytes)`` of a file (read in ``CHUNK_BYTES`` pieces)."""
    h = disk.new_hasher()
    buf = bytearray(min(max(nbytes, 1), disk.checksums.CHUNK_BYTES))
    with open(path, "rb", buffering=0) as f:
        at, left = start, nbytes
        while left:
            view = memoryview(buf)[: min(left, len(buf))]
            n = os.preadv(f.fileno(), [view], at)
            if not n:
                raise OSError(f"{path}: shorter than a part records")
            h.update(view[:n])
            at, left = at + n, left - n
    return h


class Places:
    """Where each part's ids go in each output stream: a byte offset once every part before it is
    known (``publish``, by the coordinator), else -1. A small file of int64 both sides map (it
    lives in the run's folder), so a worker however started reads what the coordinator wrote.
    Each run's table is a new file (``current``: a worker whose run has ended, a Ray task that
    outlived its cancel, sees that its table is no longer the run folder's and writes nothing)."""

    def __init__(self, path: Path, names: list[str], parts: int | None = None):
        self.names, self.path = list(names), path
        if parts is not None:  # the coordinator: a new table, nothing known
            with disk.naming(path):
                tmp = path.with_name(path.name + ".new")
                tmp.unlink(missing_ok=True)  # created afresh: never written through a link planted there
                with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644), "wb") as f:
                    np.full((max(parts, 1), len(names)), -1, np.int64).tofile(f)
                os.replace(tmp, path)
        self.table = np.memmap(path, np.int64, "r+" if parts is not None else "r").reshape(-1, len(names))
        self.ino = os.stat(path).st_ino  # the table just mapped (a run replaces it only before its first part)

    def current(self) -> bool:
        """Whether this table is still its run folder's (the run it belongs to goes on)."""
        try:
            return os.stat(self.path).st_ino == self.ino
        except OSError:
            return False

    def publish(self, k: int, offsets: dict[str, int]) -> None:
        if k < len(self.table):
            self.table[k] = [offsets[n] for n in self.names]  # aligned 8-byte stores: a reader sees one or the other

    def get(self, k: int, name: str) -> int | None:
        at = int(self.table[k, self.names.index(name)])
        return at if at >= 0 else None


class PlacedFile:
    """Where a part's split stream writes its ids (``SplitWriter.send_to``): held in memory until
    the part's place in the run's output is known (``Places``: every part before it finished),
    then written there, and what follows straight after, so the merge has nothing to copy. If
    more than ``hold`` bytes wait first, or the part ends before its place is known, the ids go
    to the part's own file instead (``own``), which the merge copies into place."""

    def __init__(self, own: Path, output: Path, places: Places, k: int, name: str, hold: int):
        self.own, self.output, self.places, self.k, self.name, self.hold = own, output, places, k, name, hold
        self.held: list[tuple[mmap.mmap, int]] = []
        self.held_bytes = 0
        self.fd: int | None = None  # the output, once placed
        self.file = None  # the part's own file, once it spilled
        self.placed_at: int | None = None
        self.at = 0
        self.started = time.monotonic()

    def _hold(self, buf) -> None:
        # In memory of its own (an anonymous map), given back to the system as soon as it is
        # written: on the heap, freed ids would stay resident and count against the engine's budget.
        m = mmap.mmap(-1, max(len(buf), 1))
        m.write(buf)
        self.held.append((m, len(buf)))
        self.held_bytes += len(buf)
        fastengine.hold_outside(len(buf))

    def _decide(self, last: bool) -> None:
        at = self.places.get(self.k, self.name)
        if at is None and last:
            # The part before it, started a little earlier, usually ends within moments: a short
            # wait saves writing the ids to a file of their own and copying them again.
            now = time.monotonic()
            deadline = now + min((now - self.started) * PLACE_WAIT[0], PLACE_WAIT[1])
            while at is None and time.monotonic() < deadline:
                time.sleep(0.002)
                at = self.places.get(self.k, self.name)
        if at is not None:
            self._check_current()
            self.fd = os.open(self.output, os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0))  # the Merger's own file
            self.placed_at = self.at = at
        elif last or self.held_bytes > self.hold:
            self._check_current()
            self.file = open(self.own, "wb")
        else:
            return
        held, self.held, self.held_bytes = self.held, [], 0
        for m, n in held:
            self._put(memoryview(m)[:n])
            m.close()
            fastengine.hold_outside(-n)

    def _check_current(self) -> None:
        if not self.places.current():
            self.discard()
            raise WinsampleError(f"part {self.k}: the run it belongs to has ended; nothing more is written")

    def discard(self) -> None:
        """Give back what is held (its count too: the process may encode other parts) and close."""
        held, self.held, self.held_bytes = self.held, [], 0
        for m, n in held:
            m.close()
            fastengine.hold_outside(-n)
        if self.fd is not None and self.fd >= 0:
            os.close(self.fd)
        if self.file is not None:
            self.file.close()
        self.fd = -1  # closed: close() writes nothing more

    def _put(self, buf) -> None:
        if self.fd is None:
            self.file.write(buf)
            return
        self._check_current()  # one stat a block: never into the output of a run that is not ours
        view = memoryview(buf).cast("B")
        while view:
            n = os.pwrite(self.fd, view, self.at)
            self.at, view = self.at + n, view[n:]

    def write(self, buf) -> None:
        if self.fd is None and self.file is None:
            self._hold(memoryview(buf).cast("B"))  # a copy: buf may view ids the caller reuses
            self._decide(last=False)
        else:
            self._put(buf)

    def flush(self) -> None:
        if self.file is not None:
            self.file.flush()

    def close(self) -> None:
        if self.fd is None and self.file is None:
            self._decide(last=True)
        if self.fd is not None:
            if self.fd >= 0:
                os.close(self.fd)
            self.fd = -1  # closed; placed_at stays
        elif self.file is not None:
            self.file.close()


class Merger:
    """The run's output streams, each part's bytes placed at their offset as soon as every part
    before it is known: a part's worker writes them there itself when it learns its place in
    time (``PlacedFile``), else the copies (``copy_into``) go to the workers with ``submit(fn,
    args)``, so that they fill the time a worker has no part left to encode."""

    def __init__(self, stage: Path, names: list[str], dtype: str, submit, parts: int):
        self.item, self.submit = np.dtype(dtype).itemsize, submit
        self.paths = {n: stage / formats.bin_name(n) for n in names}
        self.offsets = dict.fromkeys(names, 0)
        self.copies: list = []
        self.files = {}
        for n, path in self.paths.items():
            with disk.naming(path):
                # kept open: what lands is synced from here. On --resume the output holds the
                # reused parts placed in it (open_parts emptied the folder otherwise), and is
                # opened as our own file: never through a link planted in .partial/.
                self.files[n] = disk.open_own(path) if os.path.lexists(path) else open(path, "xb")
        self.places = Places(stage / PLACES, names, parts)
        self.places.publish(0, self.offsets)
        self.syncer = Checkpointer()
        self.last_sync, self.synced = time.monotonic(), 0

    def write_back(self) -> None:
        """Sync what the copies wrote so far, off this thread, at most every ``WRITE_BACK_SECONDS``
        (as a single run does), so that the commit's own fsync has little left to wait for."""
        landed = sum(f.ready() for f in self.copies)
        if landed > self.synced and time.monotonic() - self.last_sync >= WRITE_BACK_SECONDS and not self.syncer.busy():
            self.syncer.start([(f.fileno(), self.paths[n]) for n, f in self.files.items()], None)
            self.last_sync, self.synced = time.monotonic(), landed

    def close(self) -> None:
        self.syncer.wait(raising=False)
        for f in self.files.values():
            f.close()

    def add(self, part: Part) -> None:
        """Place ``part`` after the parts added before it (copied, unless its worker placed it),
        and publish where the next part goes."""
        for n, path in self.paths.items():
            s = part.streams[n]
            nbytes = s.tokens * self.item
            if s.placed_at is not None:
                if s.placed_at != self.offsets[n]:  # the bytes of a run are the same every time: never
                    raise WinsampleError(f"internal error: part {part.index} of {n} was written at byte {s.placed_at},"
                                         f" its place is {self.offsets[n]}; rerun without --resume")
            elif nbytes:
                self.copies.append(self.submit(copy_into, (str(s.path), str(path), 0, self.offsets[n], nbytes)))
            self.offsets[n] += nbytes
        self.places.publish(part.index + 1, self.offsets)

    def finish(self, get, plan: list[list[Span]], parts: list[Part], stage: Path, sources,
               tail_fraction: float | None) -> dict[str, Stream]:
        """Every copy done (``get(future)``); each output as one stream with its document starts,
        provenance and checksum, or with ``--split tail`` (``tail_fraction``) the snapshot
        ``finish_tail`` hashes on from: the hash and max id of the parts before the one the cut falls in."""
        for f in self.copies:
            get(f)
        for n, f in self.files.items():  # a resumed run's output may hold bytes of parts beyond the end
            with disk.naming(self.paths[n]):
                f.truncate(self.offsets[n])
        self.close()
        out = {}
        for n, path in self.paths.items():
            s = merge_index(plan, parts, stage, n, sources, self.item)
            s.path = path
            if tail_fraction is None:
                s.checksum = disk.format_checksum(hash_file(path))
            else:
                cut = s.tokens - math.floor(s.tokens * tail_fraction)
                pos = top = 0
                for p in parts:
                    t = p.streams[n]
                    if pos + t.tokens > cut:
                        break
                    pos, top = pos + t.tokens, max(top, t.max_token)
                s.snapshots = [(pos * self.item, hash_file(path, pos * self.item), top if pos else -1)]
            out[n] = s
        return out


def merge_index(plan: list[list[Span]], parts: list[Part], stage: Path, name: str, sources, item: int) -> Stream:
    """Split ``name``'s document starts and provenance of ``parts`` joined (its tokens not: ``path`` None)."""
    streams = [p.streams[name] for p in parts]
    starts = stage / f"{name}.starts.raw"
    with disk.naming(starts), open(starts, "wb") as out:
        shift = 0
        for s in streams:
            for chunk in starts_chunks(s.starts_path):
                out.write((chunk + shift).tobytes())
            shift += s.tokens
    prov = _merge_prov(plan, parts, stage, name, sources)
    maxes = [s.max_token for s in streams if s.tokens]
    return Stream(name, None, item, sum(s.tokens for s in streams), sum(s.documents for s in streams),
                  max(maxes) if maxes else -1, "", starts, prov)


def _merge_prov(plan, parts: list[Part], stage: Path, name: str, sources) -> ProvFiles:
    """Each part's raw provenance records joined (ids offsets shifted; a JSONL part that starts
    inside its file has its lines counted on from the parts before it)."""
    rec_path, ids_path = stage / f"{name}.prov.raw", stage / f"{name}.provids.raw"
    lines_seen: dict[int, int] = {}  # input -> lines read by the parts so far
    id_base = count = 0
    with disk.naming(rec_path), open(rec_path, "wb") as rec, open(ids_path, "wb") as ids:
        for spans, p in zip(plan, parts):
            s = p.streams[name]
            fix = None
            for pos, span in enumerate(spans):
                if not span.whole and span.start > 0 and sources[span.index].kind == "jsonl":
                    fix = (span.index, lines_seen.get(span.index, 0))
                lines_seen[span.index] = lines_seen.get(span.index, 0) + p.lines.get(pos, 0)
            for chunk in formats.iter_prov_records(s.prov.rec_path):
                chunk["id_end"] += id_base
                if fix is not None and fix[1]:
                    chunk["line"][chunk["input"] == fix[0]] += fix[1]
                rec.write(chunk.tobytes())
            with open(s.prov.ids_path, "rb") as src:
                shutil.copyfileobj(src, ids)
            id_base += s.prov.id_bytes
            count += s.prov.count
    return ProvFiles(rec_path, ids_path, count, id_base)


__all__ = ["Span", "encode_parts", "plan_parts", "plan_key", "Stream", "Part", "part_dir", "fresh_part_dir", "open_parts", "any_done", "any_part",
           "refuse_one_stream_checkpoint", "write_done", "read_done", "merge_stats", "Merger", "merge_index", "copy_into", "hash_file"]
