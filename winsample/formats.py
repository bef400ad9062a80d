"""The bytes on disk: file names, dtypes, meta.json, window plans, atomic writes.

This is the only module that knows how winsample's files are laid out. Everything else
reads and writes them through the functions here: ``load_meta`` / ``write_meta`` (meta.json as
a typed ``Meta`` of ``SplitEntry`` / ``ShardEntry``), ``load_plan`` / ``write_plan`` (rows and a
typed ``PlanSidecar``), and ``open_split`` — the one rule by which every command opens a token
stream (its meta, dtype, N, tokens as a memmap or the logical stream of a sharded split,
document starts, tokenizer). The dataclasses are the schema's one home: their ``from_json``
validates every field below, and keeps unknown fields.

A data folder written by ``winsample encode``::

    OUT_DIR/
    ├── train.bin        token ids of the train split, raw, no header
    ├── val.bin          token ids of the val split, raw, no header
    ├── train.docs.npy   int64 [D]: token offset where each train document starts (first is 0)
    ├── val.docs.npy     int64 [D]: the same for val
    ├── train.prov.npy   PROV_DTYPE [D]: where each train document came from (provenance, below)
    ├── train.prov.ids.npy  uint8: the documents' ids (encode --id-field only); val.* the same
    ├── meta.json        written last; describes the files above (schema below)
    ├── .winsample.lock  held (flock) while a run writes here; holds the writer's pid
    └── .partial/        only while a run works, or after one was interrupted: its growing
                         outputs and ``journal.json`` (checkpoints ``encode --resume`` trusts)

A token file (``*.bin``) is N ids back to back, little-endian, no header, no padding::

    byte   0      2      4            2(N-1)      2N
           +------+------+--  ...  --+------+
           | id0  | id1  |           |idN-1 |        dtype '<u2' (uint16): every id < 65536
           +------+------+--  ...  --+------+
                                                    dtype '<u4' (uint32): 4 bytes per id

It opens in nanoGPT unchanged: ``np.memmap("train.bin", dtype=np.uint16, mode="r")``.
N = file size // itemsize; a size that is not a multiple of itemsize is corrupt.

meta.json (``FORMAT_VERSION`` 1)::

    {
      "format": "winsample", "version": 1, "winsample_version": "0.1.0",
      "dtype": "<u2",
      "tokenizer": {"name": "gpt2", "ranks_sha256": "306c…", "n_vocab": 50257, "eot": 50256},
      "eot_appended": true,
      "split": {"method": "doc", "fraction": 0.1, "seed": 1337},
      "splits": {
        "train": {"file": "train.bin", "doc_index": "train.docs.npy", "tokens": 123,
                  "bytes": 246, "documents": 4, "max_token": 50256,
                  "checksum": "xxh3_128:9f…"},
        "val":   {…same keys…}
      },
      "inputs": [{"path": "corpus/a.txt", "bytes": 1234}],
      "stats": {…free-form counts: skipped empty documents, replaced characters…}
    }

Readers accept any file whose ``version`` is <= FORMAT_VERSION; fields are only ever added.

A sharded dataset (``encode --engine ray`` without ``--merge``) keeps its tokens in
``OUT_DIR/shards/`` and its meta.json in OUT_DIR; the split entries describe one *logical*
token stream per split, the concatenation of the split's shard files in order::

    OUT_DIR/
    ├── meta.json                 as above, plus "sharded" and per-split "shards" (below)
    └── shards/
        ├── train-00000.bin       a shard's train ids (--split doc); "all-NNNNN" with --split tail
        ├── train-00000.docs.npy  int64: token offsets (in this file) of documents that START here
        ├── val-00000.bin …
        └── shard-00000.json      written last by the shard's task: its inputs, counts, checksums

    "splits": {"train": {"file": "train.bin", "doc_index": null, "tokens", "bytes", "documents",
                         "max_token", "checksum": "xxh3_128-shards:…",
                         "shards": [{"file": "shards/train-00000.bin", "doc_index": "shards/train-00000.docs.npy",
                                     "tokens", "bytes", "documents", "max_token", "checksum": "xxh3_128:…",
                                     "continues": false}, …]}},
    "sharded": {"layout": "winsample-shards", "version": 1, "count": K, "shard_bytes": 262144,
                "shards": [{"index": 0, "meta": "shards/shard-00000.json",
                            "inputs": [{"path", "start", "end"}]}, …]}

``file`` is the name ``--merge`` gives the split (so ``data/train.bin`` names the logical stream
whether or not it was merged); ``continues`` says the file's first tokens belong to a document
that started in an earlier file of the split (a big text file cut at a safe point). The split's
checksum is ``combine_checksums`` of its shard files (a checksum of their checksums, so no
pass over the whole stream is needed); ``--merge`` writes an ordinary dataset whose split
entries equal those of ``--engine local``.

A window plan (``PLAN.npy``) is a structured numpy array, one row per window, ``PLAN_DTYPE``:
``start`` (int64, token index into the .bin), ``length`` (int32, tokens spanned),
``doc`` (int64, document number), ``fresh`` (int32, leading tokens already covered by an earlier
window of the same document). Rows are sorted by start unless the plan was shuffled. Beside it
``PLAN.npy.json`` (written last) holds::

    {"format": "winsample-plan", "version": 1,
     "source": {"path": "data/train.bin", "file": "train.bin", "bytes": 246, "checksum": "xxh3_128:…",
                "dtype": "<u2", "tokens": 123},
     "params": {"T", "targets", "span", "stride", "overlap" (1 - stride/span), "offset", "random_offset",
                "seed", "epoch", "tail", "short", "boundaries", "pack", "shuffle", "shard", "shards",
                "shard_method"},
     "stats":  {"windows", "coverage" (share of tokens in >= 1 window), "covered_tokens",
                "uncovered_tokens", "uncovered_tail", "uncovered_head", "uncovered_dropped", "documents"},
     "tokenizer": {…the tokenizer entry of meta.json, when known…},
     "materialized": {"file", "shape", "dtype", "pad_id"}   (only with --materialize),
     "rows_checksum": "xxh3_128:…" (of the rows as written: an edited row shows)}

The source checksum is copied from meta.json's split entry when that meta describes the file
(same name and byte size), so planning never reads the tokens; for a bare .bin it is streamed.
One plan per scale: ``PLAN.T512.npy``; shards: ``PLAN.shard0of4.npy`` (round-robin: shard r holds
rows r, r+K, …); materialized windows: ``PLAN.tokens.npy``, (n, span) ids in the .bin's dtype,
short windows padded with ``pad_id`` (their true length is the plan's ``length``).

Checksums are xxh3-128 (``"xxh3_128:<32 hex>"``): it runs at several GB/s, faster than the
disk, where sha256 would be the slowest part of a run.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import stat
import threading
from array import array
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import xxhash

from .errors import ConfigError, DataError, InputError, WinsampleError, json_place

FORMAT_NAME = "winsample"
FORMAT_VERSION = 1
PLAN_FORMAT = "winsample-plan"
PLAN_VERSION = 1

SPLITS = ("train", "val")
META_JSON = "meta.json"
LOCK_NAME = ".winsample.lock"  # flock'ed by a writer so two runs never write one folder
CHECKSUM_ALGO = "xxh3_128"

# Explicit little-endian dtype strings: a .bin never depends on the machine's byte order.
DTYPES = {"uint16": "<u2", "uint32": "<u4"}
DEFAULT_DTYPE = "<u2"  # nanoGPT's uint16; a bare .bin with no meta.json is read as this

PLAN_DTYPE = np.dtype([("start", "<i8"), ("length", "<i4"), ("doc", "<i8"), ("fresh", "<i4")])

# Bytes per read when streaming a file (checksums, range checks): big enough to run at disk
# speed, small enough that memory stays flat whatever the file size.
CHUNK_BYTES = 16 << 20


def bin_name(split: str) -> str:
    return f"{split}.bin"


def doc_index_name(split: str) -> str:
    return f"{split}.docs.npy"


SHARDS_DIR = "shards"
SHARD_LAYOUT = "winsample-shards"
SHARD_FORMAT = "winsample-shard"
SHARD_CHECKSUM = f"{CHECKSUM_ALGO}-shards"


def shard_bin_name(split: str, index: int) -> str:
    """A shard's token file, relative to OUT_DIR: ``shards/train-00012.bin``."""
    return f"{SHARDS_DIR}/{split}-{index:05d}.bin"


def shard_doc_index_name(split: str, index: int) -> str:
    return f"{SHARDS_DIR}/{split}-{index:05d}.docs.npy"


def shard_prov_name(split: str, index: int) -> str:
    """A shard's raw provenance records (``ProvenanceWriter``'s), joined into ``prov_name`` by the driver."""
    return f"{SHARDS_DIR}/{split}-{index:05d}.prov.raw"


def shard_prov_ids_name(split: str, index: int) -> str:
    return f"{SHARDS_DIR}/{split}-{index:05d}.prov.ids.raw"


def shard_meta_name(index: int) -> str:
    return f"{SHARDS_DIR}/shard-{index:05d}.json"


def is_sharded(split_entry: dict | None) -> bool:
    """True for a meta.json split entry whose tokens live in shard files."""
    return isinstance(split_entry, dict) and isinstance(split_entry.get("shards"), list)


def combine_checksums(parts: Iterable[tuple[int, str]]) -> str:
    """Checksum of a sharded split: xxh3-128 over ``"<bytes> <checksum>\n"`` of each shard in order."""
    h = new_hasher()
    for nbytes, checksum in parts:
        h.update(f"{nbytes} {checksum}\n".encode())
    return f"{SHARD_CHECKSUM}:{h.hexdigest()}"


def plan_sidecar(plan_path: str | Path) -> Path:
    return Path(f"{plan_path}.json")


def _with_infix(plan_path: str | Path, infix: str) -> Path:
    """``PLAN.npy`` → ``PLAN.<infix>.npy`` (the infix goes before a final .npy, else at the end)."""
    p = str(plan_path)
    return Path(f"{p[:-4]}.{infix}.npy" if p.endswith(".npy") else f"{p}.{infix}")


def plan_for_scale(plan_path: str | Path, T: int) -> Path:
    """Plan file for one of several -T values: ``PLAN.T512.npy``."""
    return _with_infix(plan_path, f"T{T}")


def plan_shard(plan_path: str | Path, rank: int, shards: int) -> Path:
    """Plan file of one data-parallel rank: ``PLAN.shard0of4.npy``."""
    return _with_infix(plan_path, f"shard{rank}of{shards}")


def materialized_path(plan_path: str | Path) -> Path:
    """Token windows written beside a plan: ``PLAN.tokens.npy``."""
    return _with_infix(plan_path, "tokens")


# --- dtypes and token files -------------------------------------------------------------


def dtype_for_vocab(n_vocab: int) -> str:
    """The smallest dtype holding every id of a vocabulary of ``n_vocab`` ids (0..n_vocab-1)."""
    return "<u2" if n_vocab <= 1 << 16 else "<u4"


def normalize_dtype(dtype: str) -> str:
    """'uint16' / 'u2' / '<u2' → '<u2' (and the same for uint32)."""
    if dtype in DTYPES:
        return DTYPES[dtype]
    try:
        d = np.dtype(dtype)
    except (TypeError, ValueError):
        raise InputError(f"unsupported token dtype {dtype!r}: use uint16 or uint32") from None
    if d.kind != "u" or d.itemsize not in (2, 4) or d.byteorder == ">" or (d.byteorder == "=" and not np.little_endian):
        # a big-endian dtype is not these files' ('>u2' read as '<u2' would pass with wrong ids)
        raise InputError(f"unsupported token dtype {dtype!r}: use uint16 or uint32 (little-endian)")
    return "<u2" if d.itemsize == 2 else "<u4"


def dtype_max(dtype: str) -> int:
    return int(np.iinfo(np.dtype(dtype)).max)


def check_and_cast(ids: np.ndarray, dtype: str, n_vocab: int, where: str) -> np.ndarray:
    """Cast ``ids`` to ``dtype`` after proving every id is in [0, n_vocab) and fits the dtype.

    A plain ``astype(np.uint16)`` wraps 65536 to 0 without a word; this raises DataError naming
    ``where`` and the first bad position instead.
    """
    ids = np.asarray(ids)
    if ids.size:
        limit = min(n_vocab, dtype_max(dtype) + 1)
        if ids.dtype.kind == "u" and int(ids.max()) < limit:  # one pass: the usual case (encoders give uint32)
            return ids.astype(dtype, copy=False)
        bad = (ids < 0) | (ids >= limit)
        if bad.any():
            i = int(np.argmax(bad))
            raise DataError(
                f"{where}: token id {int(ids[i])} at position {i} is outside [0, {limit})"
                f" (n_vocab {n_vocab}, dtype {dtype})"
            )
    return ids.astype(dtype, copy=False)


def token_count(path: str | Path, dtype: str) -> int:
    """N for a token file; DataError if its byte size is not a multiple of the item size,
    InputError if it is missing or not a regular file."""
    size = require_regular(path, "a token file").st_size
    item = np.dtype(dtype).itemsize
    if size % item:
        raise DataError(
            f"{path}: {size} bytes is not a multiple of {item} (dtype {dtype}):"
            f" {size % item} stray byte(s); the file is truncated or has the wrong dtype"
        )
    return size // item


def refuse_unlabelled(path: str | Path, described: bool) -> None:
    """InputError unless ``path`` is described by a meta.json or named like a token file (*.bin).

    A bare file is read as nanoGPT's uint16 ids; a text file read that way gives nonsense that
    no check can catch, so it is refused instead of planned or verified."""
    path = Path(path)
    if not described and path.suffix != ".bin":
        raise InputError(
            f"{path}: not a .bin and no meta.json describes it, so it is not a token file;"
            f" encode text first (winsample encode {path} -o data/) or pass --meta"
        )


def open_tokens(path: str | Path, dtype: str = DEFAULT_DTYPE) -> np.ndarray:
    """Read-only memmap of a token file (an empty array for an empty file)."""
    path = Path(path)
    try:
        n = token_count(path, dtype)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror}") from None
    if n == 0:  # np.memmap refuses empty files
        return np.zeros(0, dtype=dtype)
    try:
        return np.memmap(path, dtype=dtype, mode="r", shape=(n,))
    except OSError as e:  # no read permission
        raise InputError(f"{path}: cannot read: {e.strerror or e}") from None


def iter_chunks(tokens: np.ndarray, chunk_tokens: int) -> Iterator[tuple[int, np.ndarray]]:
    """(offset, view) pairs covering ``tokens`` in order, each at most ``chunk_tokens`` long."""
    for lo in range(0, len(tokens), chunk_tokens):
        yield lo, tokens[lo : lo + chunk_tokens]


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


# --- atomic writes ----------------------------------------------------------------------


TMP_SUFFIX = ".winsample.tmp"


def tmp_path(path: str | Path) -> Path:
    """Where ``path`` is written before it is renamed into place (same folder, same disk).

    A hidden name with this process's pid (``.train.bin.4242.winsample.tmp``): never a name a
    user gives their own file (their ``train.bin.tmp`` is left alone), and two processes
    writing one path never write one temp file."""
    path = Path(path)
    return path.parent / f".{path.name}.{os.getpid()}{TMP_SUFFIX}"


def remove_stale_tmp(path: str | Path) -> None:
    """Remove temp files ``tmp_path`` gave for ``path`` in earlier (killed) runs, any pid."""
    path = Path(path)
    if path.parent.is_dir():
        for tmp in path.parent.glob(f".{glob_escape(path.name)}.*{TMP_SUFFIX}"):
            if tmp.name[len(path.name) + 2 : -len(TMP_SUFFIX)].isdigit():
                tmp.unlink(missing_ok=True)


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def check_replaceable(path: str | Path) -> None:
    """InputError unless ``path`` is absent or a regular file: an atomic write renames over it,
    which would replace a device such as /dev/null with a plain file (as root) or fail on a folder."""
    path = Path(path)
    if os.path.lexists(path) and not path.is_file():
        what = "a folder" if path.is_dir() else "not a regular file"
        raise InputError(f"{path}: cannot write: it exists and is {what}; give a new or regular file's path")


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temp path to write; on success fsync it and rename it over ``path``.

    On any exception (including KeyboardInterrupt) the temp file is removed and ``path`` is
    left exactly as it was. ``path`` must be absent or a regular file (``check_replaceable``).
    """
    path = Path(path)
    check_replaceable(path)
    tmp = tmp_path(path)
    try:
        yield tmp
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
        _fsync_dir(path.parent)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@contextmanager
def atomic_open(path: str | Path, mode: str = "wb") -> Iterator[Any]:
    """``open(path, mode)`` that only replaces ``path`` when the block succeeds."""
    with atomic_path(path) as tmp:
        with open(tmp, mode) as f:
            yield f


def write_json_atomic(path: str | Path, obj: Any) -> None:
    with atomic_open(path, "w") as f:
        json.dump(obj, f, indent=2, sort_keys=False, ensure_ascii=False)
        f.write("\n")


_NO_ROOM = {
    errno.ENOSPC: "no space left on the device",
    errno.EFBIG: "file too large (a file-size limit was reached)",
    errno.EDQUOT: "disk quota exceeded",
}


def os_error_text(e: OSError) -> str:
    """What a failed write means, in words (a short write without errno: a full disk, likely)."""
    if e.errno in _NO_ROOM:
        return _NO_ROOM[e.errno] + "; free some space and run again"
    if e.errno is None:
        return f"{e.strerror or e} (a short write: is the disk full?)"
    return e.strerror or str(e)


@contextmanager
def naming(path: str | Path) -> Iterator[None]:
    """Give an OSError raised while writing ``path`` that file's name (numpy's and f.write's
    errors carry none, e.g. ``77741 requested and 674 written``)."""
    try:
        yield
    except OSError as e:
        if e.filename is None:
            raise OSError(e.errno, e.strerror or str(e), str(path)) from None
        raise


@contextmanager
def locked_folder(folder: str | Path) -> Iterator[None]:
    """Hold an exclusive flock on ``folder`` itself while the body writes files into it.

    For plan writers: a second run writing into the same folder waits (a few renames, or one
    plan's writing) and then writes its own complete set, so two runs writing one plan at once
    can never mix their files. Nothing is left in the folder; the kernel drops the lock when its
    holder dies; a signal still ends a waiting process."""
    try:
        import fcntl
    except ImportError:  # not POSIX: no lock
        yield
        return
    folder = Path(folder) if str(folder) else Path(".")
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise InputError(f"{folder}: cannot write there: {e.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


# --- a set of files that must appear together ----------------------------------------------

STAGING_DIR = ".winsample-staging"
_COMMIT_MARK = "COMMIT"
PARTIAL_DIR = ".partial"  # encode's work folder; kept after an interrupt for --resume
PARTIAL_JOURNAL = "journal.json"  # in PARTIAL_DIR: the last checkpoint (see resume.py)


def partial_dir(out_dir: str | Path) -> Path:
    """Where ``encode`` grows its outputs before they are staged (``OUT_DIR/.partial``)."""
    return Path(out_dir) / PARTIAL_DIR


def plan_staging_dir(plan_path: str | Path) -> Path:
    """A fresh, empty folder beside ``plan_path`` to write one ``windows`` run's files into.

    Named after the plan (``.PLAN.npy.winsample-staging``), so runs writing different plans
    into one folder do not share it; what an interrupted run left there is finished or
    discarded first (``recover_plan``).
    """
    recover_plan(plan_path)
    stage = _plan_stage(plan_path)
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir(parents=True)
    return stage


def _plan_stage(plan_path: str | Path) -> Path:
    p = Path(plan_path)
    return p.parent / f".{p.name}{STAGING_DIR}"


def recover_plan(plan_path: str | Path) -> str | None:
    """``recover`` for the files of one plan: roll a committed stage forward or drop it,
    and remove stale ``*.tmp`` files of the plan's own names (all scales and shards)."""
    p = Path(plan_path)
    stage = _plan_stage(p)
    result = None
    if stage.is_dir():
        mark = stage / _COMMIT_MARK
        if mark.exists():
            _roll_forward(stage, p.parent, *read_commit_mark(mark))
            result = "rolled forward"
        else:
            shutil.rmtree(stage, ignore_errors=True)
            result = "cleaned"
    stem = p.name[:-4] if p.name.endswith(".npy") else p.name
    if p.parent.is_dir():
        for tmp in p.parent.glob(f".{glob_escape(stem)}.*{TMP_SUFFIX}"):
            tmp.unlink(missing_ok=True)
    return result


def glob_escape(name: str) -> str:
    """``name`` with glob's special characters quoted."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in name)


def staging_dir(out_dir: str | Path) -> Path:
    """A fresh, empty folder inside ``out_dir`` to write a new set of files into."""
    out_dir = Path(out_dir)
    recover(out_dir)
    stage = out_dir / STAGING_DIR
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir(parents=True)
    return stage


def commit_staged(stage: Path, out_dir: str | Path, names: list[str], remove: Iterable[str] = ()) -> None:
    """Move ``names`` from ``stage`` into ``out_dir`` as one set; the last name goes in last.

    A name may lie in a subfolder (``llmc/train_000000.bin``): the folder is made in
    ``out_dir`` as needed. ``remove``: names in ``out_dir`` the new set no longer has (a layout
    an earlier run wrote), deleted before the last name goes in, so no stale file stays
    beside the new set. Files are fsynced, then a COMMIT mark (the names) is written: from
    that moment the new set is the truth, and ``recover`` finishes the moves if the process
    dies midway. Before the mark, an interrupted run leaves the previous set untouched.
    """
    out_dir = Path(out_dir)
    for name in names:
        with open(stage / name, "rb+") as f:
            os.fsync(f.fileno())
    remove = [r for r in remove if r not in names]
    with atomic_open(stage / _COMMIT_MARK, "w") as f:
        json.dump({"names": names, "remove": remove} if remove else names, f)
    _roll_forward(stage, out_dir, names, remove)


def read_commit_mark(mark: Path) -> tuple[list[str], list[str]]:
    """(names, remove) of a COMMIT mark; DataError (nothing moved) unless each is a relative
    path of plain names (``train.bin``, ``llmc/train_000000.bin``) inside the folder.

    A mark is metadata like any other: a stale or planted one naming ``../../x`` must not make
    a run move or delete a file outside its folder."""
    try:
        obj = json.loads(read_small_text(mark, "a commit mark"))
    except (ValueError, DataError) as e:
        obj = e
    names = remove = None
    if isinstance(obj, list):
        names, remove = obj, []
    elif isinstance(obj, dict) and set(obj) <= {"names", "remove"}:
        names, remove = obj.get("names"), obj.get("remove", [])
    ok = isinstance(names, list) and bool(names) and isinstance(remove, list)
    if ok:
        try:
            for name in names + remove:
                inside_name(name, str(mark))
        except DataError:
            ok = False
    if not ok:
        raise DataError(f"{mark}: corrupt commit mark (not a list of file names inside {mark.parent.parent}); nothing was moved:"
                        f" check the folder and remove {mark.parent}")
    return names, remove


def inside_name(name: Any, where: str) -> str:
    """``name`` if it is a relative path of plain names (``plain_name`` for each part), else DataError."""
    if not isinstance(name, str) or not name:
        raise DataError(f"{where}: {name!r} is not a file name inside its folder")
    for part in name.split("/"):
        plain_name(part, where)
    return name


def _roll_forward(stage: Path, out_dir: Path, names: list[str] | dict, remove: Iterable[str] = ()) -> None:
    if isinstance(names, dict):  # a mark with removals: {"names": [...], "remove": [...]}
        names, remove = names["names"], names.get("remove", [])
    for i, name in enumerate(names):
        if i == len(names) - 1:
            for r in remove:
                (out_dir / r).unlink(missing_ok=True)
        if (stage / name).exists():
            (out_dir / name).parent.mkdir(parents=True, exist_ok=True)
            os.replace(stage / name, out_dir / name)
    _fsync_dir(out_dir)
    shutil.rmtree(stage, ignore_errors=True)


def recover(out_dir: str | Path) -> str | None:
    """Finish or discard what an interrupted run left in ``out_dir``.

    Returns "rolled forward", "cleaned" or None (nothing to do). Stale ``*.tmp`` files of
    winsample's own names are removed too.
    """
    out_dir = Path(out_dir)
    stage = out_dir / STAGING_DIR
    result = None
    if stage.is_dir():
        mark = stage / _COMMIT_MARK
        if mark.exists():
            _roll_forward(stage, out_dir, *read_commit_mark(mark))
            result = "rolled forward"
        else:
            shutil.rmtree(stage, ignore_errors=True)
            result = "cleaned"
    if out_dir.is_dir():
        for split in SPLITS:
            for name in (bin_name(split), doc_index_name(split), prov_name(split), prov_ids_name(split)):
                remove_stale_tmp(out_dir / name)
        remove_stale_tmp(out_dir / META_JSON)
    return result


# --- untrusted names, special files, sizes ----------------------------------------------

MAX_METADATA_BYTES = 64 << 20  # meta.json, sidecars, journals, marks: JSON this big is not ours
MAX_NPY_HEADER = 10000  # bytes of a .npy header (numpy's own limit; it writes a few hundred)


def plain_name(name: Any, where: str) -> str:
    """``name`` if it is a plain file name (no folder part, not ``.``/``..``, not hidden, no NUL),
    else DataError naming ``where``: names read from metadata must stay inside their folder."""
    ok = (isinstance(name, str) and name not in ("", ".", "..") and not name.startswith(".")
          and not any(c in name for c in "/\\\0") and name == name.strip())
    if not ok:
        raise DataError(f"{where}: {name!r} is not a plain file name inside its folder")
    return name


def require_regular(path: str | Path, what: str = "file") -> os.stat_result:
    """stat of ``path``; InputError if it is missing or not a regular file (a FIFO, socket, device
    or folder is refused before it is opened, so reading it can never block)."""
    path = Path(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        kind = "a folder" if stat.S_ISDIR(st.st_mode) else "not a regular file (a FIFO, socket or device)"
        raise InputError(f"{path}: {kind}; expected {what}")
    return st


def open_regular(path: str | Path, what: str = "file"):
    """``open(path, "rb")`` that never blocks: O_NONBLOCK open, then a regular-file check on the
    opened file (so a FIFO swapped in after a stat is still refused); InputError otherwise."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{path}: a folder; expected {what}") from None
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = "a folder" if stat.S_ISDIR(st.st_mode) else "not a regular file (a FIFO, socket or device)"
            raise InputError(f"{path}: {kind}; expected {what}")
        if hasattr(os, "O_NONBLOCK"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_small_text(path: str | Path, what: str) -> str:
    """The UTF-8 text of a metadata file (at most MAX_METADATA_BYTES); InputError if it cannot be
    read (missing, not a regular file, no permission: exit 2), DataError if it is not text."""
    path = Path(path)
    with open_regular(path, what) as f:
        try:
            data = f.read(MAX_METADATA_BYTES + 1)
        except OSError as e:
            raise InputError(f"{path}: cannot read: {e.strerror or e}") from None
    if len(data) > MAX_METADATA_BYTES:
        raise DataError(f"{path}: larger than {MAX_METADATA_BYTES >> 20} MiB: not {what}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DataError(f"{path}: not UTF-8 text (byte {e.start}): not {what}") from None


def _same(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def refuse_overwrite(outputs: Iterable[str | Path], inputs: Iterable[str | Path]) -> None:
    """ConfigError (exit 2, nothing written) if an output path names one of the inputs.

    Compared by real path (symlinks resolved) and, for files that exist, by device and inode
    (hard links), so no spelling of an input's path gets past."""
    seen: dict[str, str] = {}
    stats: list[tuple[os.stat_result, str]] = []
    for i in inputs:
        if i is None or str(i) in ("", "-"):
            continue
        seen.setdefault(os.path.realpath(i), str(i))
        try:
            stats.append((os.stat(i), str(i)))
        except OSError:
            pass
    for o in outputs:
        if o is None or str(o) in ("", "-"):
            continue
        hit = seen.get(os.path.realpath(o))
        if hit is None:
            try:
                st = os.stat(o)
            except OSError:
                st = None
            hit = next((name for s, name in stats if st is not None and _same(s, st)), None)
        if hit is not None:
            same = "" if hit == str(o) else f" (the same file as {hit})"
            raise ConfigError(f"{o}: is an input of this command or a file of the dataset it reads{same};"
                              " writing it would destroy it: pick another output path")


def dataset_files(path: str | Path, meta_path: str | Path | None = None) -> list[Path]:
    """Every file of the dataset ``path`` (a data folder or a token file) belongs to, as far as
    it can be told: the token file, the meta.json (``meta_path`` or the one in/beside it), the
    files it names, winsample's own names in the folder, and a tokenizer file it names.
    Outputs must never be one of these (``refuse_overwrite``). Never raises on a broken meta."""
    path = Path(path)
    folder = path if path.is_dir() else path.parent
    files = [] if path.is_dir() else [path]
    mp = Path(meta_path) if meta_path else folder / META_JSON
    files.append(mp)
    for split in SPLITS:
        files += [folder / bin_name(split), folder / doc_index_name(split)]
    try:
        meta = json.loads(read_small_text(mp, "meta.json"))
    except (WinsampleError, ValueError, RecursionError):
        meta = None
    base = mp.parent
    if isinstance(meta, dict):
        entries = list(meta["splits"].values()) if isinstance(meta.get("splits"), dict) else []
        for e in entries:
            if not isinstance(e, dict):
                continue
            for sub in [e] + [x for x in (e.get("shards") if isinstance(e.get("shards"), list) else []) if isinstance(x, dict)]:
                for key in ("file", "doc_index"):
                    if isinstance(sub.get(key), str) and sub[key] and "\0" not in sub[key]:
                        files.append(base / sub[key])
        tok = meta.get("tokenizer")
        if isinstance(tok, dict) and isinstance(tok.get("file"), str) and tok["file"] and "\0" not in tok["file"]:
            files += [Path(tok["file"]), base / tok["file"]]
        stack = [meta.get("layouts")]  # other layouts' files (Megatron .idx, llm.c shards): every name they list
        while stack:
            v = stack.pop()
            if isinstance(v, dict):
                stack += list(v.values())
            elif isinstance(v, list):
                stack += v
            elif isinstance(v, str) and v and "\0" not in v and not os.path.isabs(v):
                files.append(base / v)
    return files


# --- meta.json: the schema's one home ------------------------------------------------------
#
# Meta, SplitEntry, ShardEntry and PlanSidecar (below) are the schema of meta.json and of a plan's
# sidecar: ``from_json`` validates every field it knows (types, ranges, names that must stay
# inside their folder) and keeps unknown fields in ``extra`` (readers ignore them, writers keep
# them); ``to_json`` gives back the dict, keys in the order encode writes them.

META_DTYPES = ("<u2", "<u4")  # the only dtype strings meta.json and sidecars may hold


def _bad(where: str, msg: str):
    raise DataError(f"{where}: {msg}")


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _get_int(obj: dict, key: str, where: str, path: str, *, lo: int | None = 0, hi: int | None = None,
             required: bool = True, nullable: bool = False):
    """``obj[key]`` checked to be an int in ``[lo, hi]`` (None allowed when ``nullable``)."""
    if key not in obj:
        if required:
            _bad(where, f"{path}.{key} is missing")
        return None
    v = obj[key]
    if v is None and nullable:
        return None
    if not _is_int(v):
        _bad(where, f"{path}.{key} is {v!r}, not an integer")
    if lo is not None and v < lo:
        _bad(where, f"{path}.{key} is {v}, below {lo}")
    if hi is not None and v > hi:
        _bad(where, f"{path}.{key} is {v}, above {hi}")
    return v


def _get_str(obj: dict, key: str, where: str, path: str, *, required: bool = True, nullable: bool = False):
    name = f"{path}.{key}" if path else key
    if key not in obj:
        if required:
            _bad(where, f"{name} is missing")
        return None
    v = obj[key]
    if v is None and nullable:
        return None
    if not isinstance(v, str):
        _bad(where, f"{name} is {v!r}, not a string")
    return v


def _get_obj(obj: dict, key: str, where: str, path: str, *, required: bool = False) -> dict | None:
    if key not in obj or (obj[key] is None and not required):
        if required:
            _bad(where, f"{path + '.' if path else ''}{key} is missing")
        return None
    v = obj[key]
    if not isinstance(v, dict):
        _bad(where, f"{path + '.' if path else ''}{key} is not a JSON object")
    return v


def is_plain_name(name: Any) -> bool:
    """True for a file name that stays inside its folder: no separator, not ``.``/``..``, not empty."""
    return (isinstance(name, str) and name not in ("", ".", "..") and "/" not in name and "\\" not in name
            and "\0" not in name)


def is_shard_name(name: Any) -> bool:
    """True for ``shards/<plain name>`` exactly (a shard file's name in meta.json)."""
    prefix = SHARDS_DIR + "/"
    return isinstance(name, str) and name.startswith(prefix) and is_plain_name(name[len(prefix):])


def _get_name(obj: dict, key: str, where: str, path: str, *, shard: bool = False, required: bool = True,
              nullable: bool = False):
    v = _get_str(obj, key, where, path, required=required, nullable=nullable)
    if v is not None and not (is_shard_name(v) if shard else is_plain_name(v)):
        want = f"'{SHARDS_DIR}/<name>'" if shard else "a plain file name inside the folder"
        _bad(where, f"{path}.{key} {v!r} is not {want}")
    return v


def _get_dtype(obj: dict, key: str, where: str, path: str, *, required: bool = True):
    v = obj.get(key)
    if key not in obj and not required:
        return None
    if v not in META_DTYPES:
        _bad(where, f"{(path + '.') if path else ''}{key} {v!r} is not one of {', '.join(META_DTYPES)}"
             f" (unsupported dtype)")
    return v


def _extra(obj: dict, known) -> dict:
    return {k: v for k, v in obj.items() if k not in known}


_ENTRY_KEYS = ("file", "doc_index", "tokens", "bytes", "documents", "max_token", "checksum")


@dataclass
class ShardEntry:
    """One shard file of a sharded split (``splits.<name>.shards[i]``); names are ``shards/<plain>``."""

    file: str
    doc_index: str | None
    tokens: int
    bytes: int
    documents: int
    max_token: int | None
    checksum: str
    continues: bool = False  # its first tokens belong to a document started in an earlier shard
    extra: dict = field(default_factory=dict)

    KEYS = _ENTRY_KEYS + ("continues",)

    @classmethod
    def from_json(cls, obj: Any, where: str, path: str) -> ShardEntry:
        if not isinstance(obj, dict):
            _bad(where, f"{path} is not a JSON object")
        cont = obj.get("continues", False)
        if not isinstance(cont, bool):
            _bad(where, f"{path}.continues is {cont!r}, not true or false")
        return cls(
            file=_get_name(obj, "file", where, path, shard=True),
            doc_index=_get_name(obj, "doc_index", where, path, shard=True, required=False, nullable=True),
            tokens=_get_int(obj, "tokens", where, path), bytes=_get_int(obj, "bytes", where, path),
            documents=_get_int(obj, "documents", where, path),
            max_token=_get_int(obj, "max_token", where, path, required=False, nullable=True),
            checksum=_get_str(obj, "checksum", where, path), continues=cont, extra=_extra(obj, cls.KEYS),
        )

    def to_json(self) -> dict:
        return {"file": self.file, "doc_index": self.doc_index, "tokens": self.tokens, "bytes": self.bytes,
                "documents": self.documents, "max_token": self.max_token, "checksum": self.checksum,
                "continues": self.continues, **self.extra}


@dataclass
class SplitEntry:
    """``splits.<name>`` of meta.json: one split's token file (or logical stream of shards).

    ``file`` and ``doc_index`` are plain names inside the data folder (``doc_index`` None: no
    index recorded, or a sharded split whose shards carry theirs); ``tokens``, ``bytes``,
    ``documents`` are counts; ``max_token`` the largest id (None for an empty split).
    """

    file: str
    tokens: int
    bytes: int
    documents: int
    checksum: str
    doc_index: str | None = None
    max_token: int | None = None
    shards: list[ShardEntry] | None = None  # a sharded split: its files, in stream order
    extra: dict = field(default_factory=dict)
    has_doc_index: bool = field(default=True, repr=False, compare=False)  # False: the key was absent

    KEYS = _ENTRY_KEYS + ("shards",)

    @property
    def sharded(self) -> bool:
        return self.shards is not None

    def files(self, folder: str | Path) -> list[tuple[Path, int]]:
        """(path, recorded bytes) of the token files holding this split: its shards, or its file."""
        folder = Path(folder)
        if self.shards is not None:
            return [(folder / e.file, e.bytes) for e in self.shards]
        return [(folder / self.file, self.bytes)]

    @classmethod
    def from_json(cls, obj: Any, where: str, path: str) -> SplitEntry:
        if not isinstance(obj, dict):
            _bad(where, f"{path} is not an object")
        shards = None
        if "shards" in obj and obj["shards"] is not None:
            if not isinstance(obj["shards"], list):
                _bad(where, f"{path}.shards is not a list")
            shards = [ShardEntry.from_json(e, where, f"{path}.shards[{i}]") for i, e in enumerate(obj["shards"])]
        return cls(
            file=_get_name(obj, "file", where, path),
            tokens=_get_int(obj, "tokens", where, path), bytes=_get_int(obj, "bytes", where, path),
            documents=_get_int(obj, "documents", where, path), checksum=_get_str(obj, "checksum", where, path),
            doc_index=_get_name(obj, "doc_index", where, path, required=False, nullable=True),
            max_token=_get_int(obj, "max_token", where, path, required=False, nullable=True),
            shards=shards, extra=_extra(obj, cls.KEYS), has_doc_index="doc_index" in obj,
        )

    def to_json(self) -> dict:
        out = {"file": self.file}
        if self.has_doc_index or self.doc_index is not None:
            out["doc_index"] = self.doc_index
        out.update(tokens=self.tokens, bytes=self.bytes, documents=self.documents, max_token=self.max_token,
                   checksum=self.checksum)
        if self.shards is not None:
            out["shards"] = [e.to_json() for e in self.shards]
        out.update(self.extra)
        return out


_META_KEYS = ("format", "version", "winsample_version", "dtype", "tokenizer", "eot_appended", "split", "splits",
              "inputs", "stats", "sharded")


def _check_tokenizer(tok: Any, where: str) -> dict:
    """meta's ``tokenizer`` entry: an object with n_vocab (≥ 1), eot in [0, n_vocab), string name,
    ranks_sha256, file, pattern, family when present. Its other fields are the family's own."""
    if not isinstance(tok, dict):
        _bad(where, "missing tokenizer.n_vocab (tokenizer is not an object)")
    if not _is_int(tok.get("n_vocab")):
        _bad(where, f"missing tokenizer.n_vocab (or not an integer: {tok.get('n_vocab')!r})")
    n = _get_int(tok, "n_vocab", where, "tokenizer", lo=1)
    _get_int(tok, "eot", where, "tokenizer", lo=0, hi=n - 1, required=False, nullable=True)  # null: none (--no-eot)
    _get_int(tok, "bos", where, "tokenizer", lo=0, hi=n - 1, required=False, nullable=True)
    for key in ("name", "ranks_sha256", "file", "pattern", "family"):
        _get_str(tok, key, where, "tokenizer", required=False)
    return tok


def _check_split_rule(rule: Any, where: str) -> dict | None:
    if rule is None:
        return None
    if not isinstance(rule, dict):
        _bad(where, "split is not a JSON object")
    _get_str(rule, "method", where, "split", required=False)
    f = rule.get("fraction")
    if "fraction" in rule and (not isinstance(f, (int, float)) or isinstance(f, bool) or not 0 <= f <= 1):
        _bad(where, f"split.fraction is {f!r}, not a number in [0, 1]")
    _get_int(rule, "seed", where, "split", lo=None, required=False)
    return rule


def _check_sharded(sh: Any, where: str) -> dict | None:
    if sh is None:
        return None
    if not isinstance(sh, dict):
        _bad(where, "sharded is not a JSON object")
    _get_int(sh, "version", where, "sharded", lo=1, required=False)
    _get_int(sh, "count", where, "sharded", required=False)
    if "shards" in sh:
        if not isinstance(sh["shards"], list):
            _bad(where, "sharded.shards is not a list")
        for i, e in enumerate(sh["shards"]):
            if not isinstance(e, dict):
                _bad(where, f"sharded.shards[{i}] is not a JSON object")
            _get_int(e, "index", where, f"sharded.shards[{i}]", required=False)
            _get_name(e, "meta", where, f"sharded.shards[{i}]", shard=True, required=False)
    return sh


def _check_version(obj: dict, where: str, newest: int, what: str) -> int:
    v = obj.get("version")
    if not _is_int(v):
        _bad(where, f"missing integer 'version' (got {v!r})")
    if v > newest:
        _bad(where, f"{what} version {v} is newer than this winsample reads ({newest}); upgrade winsample")
    if v < 1:
        _bad(where, f"{what} version {v} is not a version (1..{newest})")
    return v


@dataclass
class Meta:
    """meta.json: one data folder's description (the schema in this module's docstring).

    ``dtype`` is ``'<u2'`` or ``'<u4'``; ``tokenizer`` the tokenizer entry (its family's fields,
    see ``tokenizer.Tokenizer.describe``); ``splits`` maps split names to entries; ``split`` is the
    rule encode used (method, fraction, seed); ``inputs``, ``stats`` and ``sharded`` are kept as read.
    """

    dtype: str
    tokenizer: dict
    splits: dict[str, SplitEntry]
    version: int = FORMAT_VERSION
    winsample_version: str | None = None
    eot_appended: bool | None = None
    split: dict | None = None
    inputs: list | None = None
    stats: dict | None = None
    sharded: dict | None = None
    extra: dict = field(default_factory=dict)

    @property
    def itemsize(self) -> int:
        return np.dtype(self.dtype).itemsize

    @property
    def n_vocab(self) -> int:
        return int(self.tokenizer["n_vocab"])

    @property
    def tokenizer_name(self) -> str | None:
        return self.tokenizer.get("name")

    def split_for(self, file: str | Path) -> tuple[str, SplitEntry] | None:
        """(name, entry) of the split whose ``file`` is named like ``file``'s last part, or None."""
        name = Path(file).name
        for split, e in self.splits.items():
            if e.file == name:
                return split, e
        return None

    def fraction_of(self, split: str | None) -> float | None:
        """The share of tokens encode meant ``split`` to get (val: the fraction; train: 1 − it)."""
        f = (self.split or {}).get("fraction")
        if not isinstance(f, (int, float)) or isinstance(f, bool) or split not in ("train", "val"):
            return None
        return f if split == "val" else 1 - f

    @classmethod
    def from_json(cls, obj: Any, where: str = META_JSON, folder: str | Path | None = None) -> Meta:
        """Validate and type ``obj``; DataError naming ``where`` and the field if anything is off.

        With ``folder`` (the data folder), a split file there (``train.bin``, ``val.bin``) that no
        entry describes fails too: a meta entry removed is never read as "no such split".
        """
        if not isinstance(obj, dict):
            _bad(where, "not a JSON object")
        if obj.get("format") != FORMAT_NAME:
            _bad(where, f"format is {obj.get('format')!r}, expected {FORMAT_NAME!r}")
        version = _check_version(obj, where, FORMAT_VERSION, "format")
        dtype = _get_dtype(obj, "dtype", where, "")
        tok = _check_tokenizer(obj.get("tokenizer"), where)
        splits = obj.get("splits")
        if not isinstance(splits, dict) or not splits:
            _bad(where, "missing 'splits'")
        entries = {name: SplitEntry.from_json(e, where, f"splits.{name}") for name, e in splits.items()}
        eot = obj.get("eot_appended")
        if eot is not None and not isinstance(eot, bool):
            _bad(where, f"eot_appended is {eot!r}, not true or false")
        for key, typ in (("inputs", list), ("stats", dict)):
            if obj.get(key) is not None and not isinstance(obj[key], typ):
                _bad(where, f"{key} is not a JSON {'list' if typ is list else 'object'}")
        meta = cls(
            dtype=dtype, tokenizer=tok, splits=entries, version=version,
            winsample_version=_get_str(obj, "winsample_version", where, "meta", required=False, nullable=True),
            eot_appended=eot, split=_check_split_rule(obj.get("split"), where), inputs=obj.get("inputs"),
            stats=obj.get("stats"), sharded=_check_sharded(obj.get("sharded"), where), extra=_extra(obj, _META_KEYS),
        )
        if folder is not None:
            meta.check_folder(folder, where)
        return meta

    def check_folder(self, folder: str | Path, where: str = META_JSON) -> None:
        """DataError if a split's token file lies in ``folder`` but no entry describes it."""
        described = {e.file for e in self.splits.values()}
        for split in SPLITS:
            name = bin_name(split)
            if name not in described and (Path(folder) / name).exists():
                _bad(where, f"{name} is in {folder} but splits.{split} does not describe it"
                     " (its entry was removed?); re-encode, or restore the entry")

    def to_json(self) -> dict:
        out: dict = {"format": FORMAT_NAME, "version": self.version}
        if self.winsample_version is not None:
            out["winsample_version"] = self.winsample_version
        out.update(dtype=self.dtype, tokenizer=self.tokenizer)
        if self.eot_appended is not None:
            out["eot_appended"] = self.eot_appended
        if self.split is not None:
            out["split"] = self.split
        out["splits"] = {name: e.to_json() for name, e in self.splits.items()}
        for key in ("inputs", "stats", "sharded"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        out.update(self.extra)
        return out


def validate_meta(meta: Any, where: str = META_JSON) -> dict:
    """Return ``meta`` if it follows the schema (``Meta.from_json``), else raise DataError saying what's off."""
    Meta.from_json(meta, where)
    return meta


def load_json(path: str | Path, what: str) -> Any:
    """Parsed JSON of a metadata file: InputError if it cannot be read (exit 2, like a token
    file), DataError naming the line and column if it is not JSON (too deep, a number of
    thousands of digits: the same)."""
    text = read_small_text(path, what)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise DataError(f"{path}: not valid JSON: {json_place(e, line=True)}") from None
    except RecursionError:
        raise DataError(f"{path}: JSON nested too deeply to read: not {what}") from None
    except ValueError as e:  # e.g. an integer of more than 4300 digits
        raise DataError(f"{path}: not readable JSON: {str(e).split('; use sys.')[0]}") from None



def _read_json(path: Path, what: str) -> Any:
    return load_json(path, what)


def load_meta(path: str | Path) -> Meta:
    """Read meta.json as a ``Meta``; DataError if it is not JSON or breaks the schema
    (including a split file in its folder that no entry describes), InputError if missing."""
    path = Path(path)
    return Meta.from_json(_read_json(path, "meta"), str(path), path.parent)


def read_meta(path: str | Path) -> dict:
    """``load_meta``, as the plain dict (for code not yet on the dataclasses)."""
    path = Path(path)
    obj = _read_json(path, "meta")
    Meta.from_json(obj, str(path), path.parent)
    return obj


def write_meta(path: str | Path, meta: Meta | dict) -> None:
    """Write meta.json atomically (a dict is validated first, and written as given)."""
    if isinstance(meta, Meta):
        obj = meta.to_json()
        Meta.from_json(obj, str(path))
    else:
        obj = validate_meta(meta, str(path))
    write_json_atomic(path, obj)


def find_meta_for(bin_path: str | Path) -> Path | None:
    """The meta.json beside ``bin_path`` if it describes that file, else None."""
    bin_path = Path(bin_path)
    meta = bin_path.parent / META_JSON
    return meta if meta.exists() else None


def split_of(meta: dict, bin_path: str | Path) -> tuple[str, dict] | None:
    """(split name, split entry) of ``meta`` describing the file named like ``bin_path``."""
    for name, s in meta["splits"].items():
        if s["file"] == Path(bin_path).name:
            return name, s
    return None


# --- document index ---------------------------------------------------------------------


def write_doc_index(path: str | Path, starts: np.ndarray) -> None:
    """Write document start offsets (tokens, ascending int64) as a .npy file, atomically."""
    with atomic_open(path) as f:
        np.save(f, np.asarray(starts, dtype="<i8"))


def write_doc_index_stream(path: str | Path, count: int, chunks: Iterable[np.ndarray]) -> None:
    """Like ``write_doc_index`` (same bytes) for ``count`` offsets given in pieces: memory stays flat."""
    with atomic_open(path) as f:
        np.lib.format.write_array_header_1_0(f, {"descr": "<i8", "fortran_order": False, "shape": (count,)})
        written = 0
        for chunk in chunks:
            chunk = np.ascontiguousarray(chunk, dtype="<i8")
            f.write(chunk.data)
            written += chunk.size
        if written != count:
            raise ValueError(f"{path}: wrote {written} document offsets, announced {count}")


# numpy parses a .npy header with ast.literal_eval, which CPython 3.11 cannot run on two threads
# at once ("SystemError: AST constructor recursion depth mismatch", seen in verify: its plan
# thread loads the plan while the main thread loads provenance): every header read takes this.
NPY_HEADER_LOCK = threading.Lock()


def npy_header(f, path: str | Path, what: str) -> tuple[tuple, bool, np.dtype, int]:
    """(shape, fortran_order, dtype, data offset) of an open .npy file, read without trusting it:
    DataError unless the header is a plain (no objects) array whose data fits the file's size."""
    fmt = np.lib.format
    size = os.fstat(f.fileno()).st_size
    try:
        version = fmt.read_magic(f)
        with NPY_HEADER_LOCK:
            if version == (1, 0):
                header = fmt.read_array_header_1_0(f, max_header_size=MAX_NPY_HEADER)
            elif version in ((2, 0), (3, 0)):
                header = fmt.read_array_header_2_0(f, max_header_size=MAX_NPY_HEADER)
            else:
                raise ValueError(f"unknown .npy version {version}")
    except Exception as e:  # numpy parses the header with Python's tokenizer: any of its errors
        raise DataError(f"{path}: not {what}: bad .npy header: {type(e).__name__}: {e}") from None
    shape, fortran, dtype = header
    if dtype.hasobject:
        raise DataError(f"{path}: not {what}: .npy holds Python objects")
    if not all(isinstance(d, int) and d >= 0 for d in shape):
        raise DataError(f"{path}: not {what}: .npy shape {shape}")
    count = 1
    for d in shape:
        count *= d
    offset = f.tell()
    need = count * dtype.itemsize
    if need != size - offset:
        raise DataError(f"{path}: not {what}: the .npy header says {shape} of {dtype} ({need} bytes),"
                        f" the file holds {size - offset} bytes of data")
    return shape, fortran, dtype, offset


def _load_npy(path: str | Path, what: str) -> np.ndarray:
    """``np.load`` without pickles, its header checked against the file size first (a header
    claiming 2**40 rows is corrupt, never an allocation): InputError if missing or not a regular
    file, DataError if not a readable .npy."""
    with open_regular(path, what) as f:
        shape, fortran, dtype, _ = npy_header(f, path, what)
        try:
            f.seek(0)
            with NPY_HEADER_LOCK:  # np.load parses the header again
                return np.load(f, allow_pickle=False)
        except OSError as e:
            raise InputError(f"{path}: cannot read: {e.strerror or e}") from None
        except (ValueError, EOFError) as e:
            raise DataError(f"{path}: not {what}: {e}") from None


def read_doc_index(path: str | Path) -> np.ndarray:
    starts = _load_npy(path, "a document index")
    if starts.ndim != 1 or starts.dtype.kind not in "iu":
        raise DataError(f"{path}: document index must be a 1-d integer array")
    return starts.astype(np.int64, copy=False)


# --- window plans -----------------------------------------------------------------------


@dataclass
class PlanSource:
    """``source`` of a plan sidecar: the token file the plan was made for."""

    file: str | None = None  # its name (a plain name: a plan applies to a file of its data folder)
    path: str | None = None  # as given to ``windows``
    bytes: int | None = None
    checksum: str | None = None
    dtype: str | None = None
    tokens: int | None = None
    extra: dict = field(default_factory=dict)

    KEYS = ("path", "file", "bytes", "checksum", "dtype", "tokens")

    @classmethod
    def from_json(cls, obj: dict, where: str) -> PlanSource:
        return cls(
            file=_get_name(obj, "file", where, "source", required=False, nullable=True),
            path=_get_str(obj, "path", where, "source", required=False, nullable=True),
            bytes=_get_int(obj, "bytes", where, "source", required=False),
            checksum=_get_str(obj, "checksum", where, "source", required=False, nullable=True),
            dtype=_get_dtype(obj, "dtype", where, "source", required=False),
            tokens=_get_int(obj, "tokens", where, "source", required=False),
            extra=_extra(obj, cls.KEYS),
        )

    def to_json(self) -> dict:
        out = {k: getattr(self, k) for k in self.KEYS if getattr(self, k) is not None}
        out.update(self.extra)
        return out


_SIDECAR_KEYS = ("format", "version", "source", "params", "stats", "plan_stats", "tokenizer", "materialized", "rows_checksum")


@dataclass
class PlanSidecar:
    """``PLAN.npy.json``: what a plan was made from and with (schema in this module's docstring).

    ``params`` and ``stats`` are windows' own figures (params.span and params.T, when present,
    are positive integers); ``materialized.file`` is a plain name beside the plan.
    """

    source: PlanSource = field(default_factory=PlanSource)
    params: dict = field(default_factory=dict)
    stats: dict = field(default_factory=dict)
    plan_stats: dict | None = None  # a shard of a plan: the whole plan's stats (``stats`` are the shard's)
    tokenizer: dict | None = None
    materialized: dict | None = None
    rows_checksum: str | None = None  # xxh3-128 of the rows as write_plan saved them; None: a plan from before it was kept
    version: int = PLAN_VERSION
    extra: dict = field(default_factory=dict)
    has_source: bool = field(default=True, repr=False, compare=False)

    @property
    def windows(self) -> int | None:
        """The window count the sidecar records (``stats.windows``), None if it records none."""
        return self.stats.get("windows")

    @property
    def n_vocab(self) -> int | None:
        """The vocabulary size of the tokenizer the sidecar records, None without one."""
        return (self.tokenizer or {}).get("n_vocab")

    @property
    def T(self) -> int | None:
        return self.params.get("T")

    @property
    def span(self) -> int | None:
        return self.params.get("span")

    @property
    def targets(self) -> bool:
        """Windows carry next-token targets (``params.targets``; true when not recorded)."""
        return bool(self.params.get("targets", True))

    @classmethod
    def from_json(cls, obj: Any, where: str) -> PlanSidecar:
        if not isinstance(obj, dict) or obj.get("format") != PLAN_FORMAT:
            _bad(where, "not a winsample plan sidecar")
        version = _check_version(obj, where, PLAN_VERSION, "plan")
        src = _get_obj(obj, "source", where, "")
        params = _get_obj(obj, "params", where, "") or {}
        for key in ("T", "span", "stride"):
            if key in params and params[key] is not None:
                _get_int(params, key, where, "params", lo=1)
        stats = _get_obj(obj, "stats", where, "") or {}
        if "windows" in stats:
            _get_int(stats, "windows", where, "stats")
        plan_stats = _get_obj(obj, "plan_stats", where, "")
        tok = _get_obj(obj, "tokenizer", where, "")
        mat = _get_obj(obj, "materialized", where, "")
        if mat is not None:
            _get_name(mat, "file", where, "materialized")
            _get_dtype(mat, "dtype", where, "materialized", required=False)
        rows_sum = _get_str(obj, "rows_checksum", where, "", required=False)
        return cls(source=PlanSource.from_json(src or {}, where), params=params, stats=stats, plan_stats=plan_stats, tokenizer=tok,
                   materialized=mat, rows_checksum=rows_sum, version=version, extra=_extra(obj, _SIDECAR_KEYS),
                   has_source=src is not None)

    def to_json(self) -> dict:
        out: dict = {"format": PLAN_FORMAT, "version": self.version}
        if self.has_source:
            out["source"] = self.source.to_json()
        out.update(params=self.params, stats=self.stats)
        if self.plan_stats is not None:
            out["plan_stats"] = self.plan_stats
        if self.tokenizer is not None:
            out["tokenizer"] = self.tokenizer
        if self.materialized is not None:
            out["materialized"] = self.materialized
        if self.rows_checksum is not None:
            out["rows_checksum"] = self.rows_checksum
        out.update(self.extra)
        return out


def write_plan(path: str | Path, plan: np.ndarray, sidecar: dict | PlanSidecar) -> None:
    """Write ``plan`` (PLAN_DTYPE rows) to ``path`` and its sidecar to ``path.json``, atomically.

    The plan goes first and the sidecar last, so a plan without a sidecar is never current.
    The sidecar's ``rows_checksum`` is set to the rows' (``rows_checksum``): an edited row shows.
    """
    plan = np.ascontiguousarray(plan, dtype=PLAN_DTYPE)
    side = sidecar.to_json() if isinstance(sidecar, PlanSidecar) else {"format": PLAN_FORMAT, "version": PLAN_VERSION, **sidecar}
    side["rows_checksum"] = rows_checksum(plan)
    with atomic_open(path) as f:
        np.save(f, plan)
    write_json_atomic(plan_sidecar(path), side)


def rows_checksum(rows: np.ndarray) -> str:
    """xxh3-128 of plan rows as ``write_plan`` saves them (PLAN_DTYPE, little-endian, in order)."""
    h = new_hasher()
    h.update(np.ascontiguousarray(rows, dtype=PLAN_DTYPE))
    return format_checksum(h)


def _read_plan_rows(path: Path) -> np.ndarray:
    arr = _load_npy(path, "a window plan (.npy)")
    if arr.dtype.names is None or any(n not in arr.dtype.names for n in PLAN_DTYPE.names):
        raise DataError(f"{path}: not a window plan: fields {arr.dtype.names}, expected {PLAN_DTYPE.names}")
    for name in PLAN_DTYPE.names:
        if arr.dtype[name].kind not in "iu":
            raise DataError(f"{path}: plan field {name!r} has dtype {arr.dtype[name]}, expected an integer")
    if arr.ndim != 1:
        raise DataError(f"{path}: a plan is a 1-d array, this one has shape {arr.shape}")
    for name in PLAN_DTYPE.names:  # a value the plan's own dtype cannot hold would wrap when cast
        have, want = arr.dtype[name], PLAN_DTYPE[name]
        if np.can_cast(have, want, "safe") or not len(arr):
            continue
        col = arr[name]
        lim = np.iinfo(want)
        bad = (col > lim.max) | (col < lim.min) if have.kind == "i" else col > np.uint64(lim.max)
        if bad.any():
            i = int(np.argmax(bad))
            raise DataError(f"{path}: row {i}: {name} {int(col[i])} does not fit the plan's {want} (stored as {have})")
    return arr.astype(PLAN_DTYPE, copy=False)


def _read_sidecar_json(path: Path) -> Any:
    side_path = plan_sidecar(path)
    if not os.path.lexists(side_path):
        raise DataError(f"{side_path}: missing sidecar of plan {path}")
    return _read_json(side_path, "a plan sidecar")  # InputError (exit 2) for a FIFO, a folder, no permission


def load_plan(path: str | Path) -> tuple[np.ndarray, PlanSidecar]:
    """(plan rows, typed sidecar) of a plan written by ``write_plan``.

    DataError if the .npy is not a plan (wrong fields or dtypes) or the sidecar is missing,
    not JSON, from a newer version or has a field of the wrong type.
    """
    path = Path(path)
    rows = _read_plan_rows(path)
    return rows, PlanSidecar.from_json(_read_sidecar_json(path), str(plan_sidecar(path)))


def read_plan(path: str | Path) -> tuple[np.ndarray, dict]:
    """``load_plan`` with the sidecar as the plain dict (for code not yet on the dataclasses)."""
    path = Path(path)
    rows = _read_plan_rows(path)
    obj = _read_sidecar_json(path)
    PlanSidecar.from_json(obj, str(plan_sidecar(path)))
    return rows, obj


# --- sharded splits: one logical stream ------------------------------------------------------


class ConcatTokens:
    """The concatenation of token files ``paths`` (``counts`` tokens each), read lazily.

    A read-only 1-d array-like: ``len``, ``dtype``, slicing ``[lo:hi]`` (a memmap view when the
    range lies in one file, a copy when it spans files), integer-array indexing, ``take`` and
    ``__array__`` (the whole stream: small cases only). Features accept it wherever they take a
    memmap, so a sharded split plans and checks exactly like the merged ``train.bin`` would.
    """

    ndim = 1

    def __init__(self, paths: list[Path], counts: list[int], dtype: str, doc_parts=None, header_bytes: int = 0):
        self.header_bytes = header_bytes  # bytes before the ids in each file (llm.c shards: 1024)
        self.paths = [Path(p) for p in paths]
        self.counts = [int(c) for c in counts]
        self.dtype = np.dtype(dtype)
        self.offsets = np.concatenate([[0], np.cumsum(self.counts, dtype=np.int64)]).astype(np.int64)
        self._maps: dict[int, np.ndarray] = {}
        self._doc_parts = doc_parts  # [(doc index path, continues)] per file, or None

    def __len__(self) -> int:
        return int(self.offsets[-1])

    @property
    def shape(self) -> tuple[int]:
        return (len(self),)

    @property
    def size(self) -> int:
        return len(self)

    @property
    def nbytes(self) -> int:
        return len(self) * self.dtype.itemsize

    def _part(self, j: int) -> np.ndarray:
        m = self._maps.get(j)
        if m is None and self.header_bytes:
            m = np.zeros(0, self.dtype) if self.counts[j] == 0 else np.memmap(
                self.paths[j], dtype=self.dtype, mode="r", offset=self.header_bytes, shape=(self.counts[j],))
            self._maps[j] = m
        elif m is None:
            m = open_tokens(self.paths[j], self.dtype.str)
            if len(m) != self.counts[j]:
                raise DataError(f"{self.paths[j]}: holds {len(m)} tokens, meta.json says {self.counts[j]}")
            self._maps[j] = m
        return m

    def _range(self, lo: int, hi: int) -> np.ndarray:
        if hi <= lo:
            return np.zeros(0, self.dtype)
        j0 = int(np.searchsorted(self.offsets, lo, "right")) - 1
        j1 = int(np.searchsorted(self.offsets, hi, "left")) - 1
        if j0 == j1:  # one file: a view, no copy
            off = int(self.offsets[j0])
            return self._part(j0)[lo - off : hi - off]
        parts = []
        for j in range(j0, j1 + 1):
            off = int(self.offsets[j])
            parts.append(self._part(j)[max(lo - off, 0) : min(hi - off, self.counts[j])])
        return np.concatenate(parts)

    def take(self, idx) -> np.ndarray:
        """Ids at token positions ``idx`` (any shape; negative counts from the end)."""
        idx = np.asarray(idx, dtype=np.int64)
        flat = idx.ravel()
        n = len(self)
        flat = np.where(flat < 0, flat + n, flat)
        if flat.size and (flat.min() < 0 or flat.max() >= n):
            raise IndexError(f"index out of range for a stream of {n} tokens")
        out = np.empty(flat.shape, self.dtype)
        which = np.searchsorted(self.offsets, flat, "right") - 1
        for j in np.unique(which).tolist():  # one gather per file touched, not per token
            sel = which == j
            out[sel] = self._part(j)[flat[sel] - self.offsets[j]]
        return out.reshape(idx.shape)

    def __getitem__(self, key):
        if isinstance(key, slice):
            lo, hi, step = key.indices(len(self))
            if step == 1:
                return self._range(lo, hi)
            return self.take(np.arange(lo, hi, step, dtype=np.int64))
        if isinstance(key, (int, np.integer)):
            return self.take(np.int64(key))[()]
        return self.take(key)

    def __array__(self, dtype=None, copy=None):
        arr = self._range(0, len(self))
        return np.asarray(arr, dtype=dtype) if dtype is not None else np.asarray(arr)

    def doc_starts(self) -> np.ndarray:
        """int64 token offsets where documents start in the stream (0 first, when not empty)."""
        if self._doc_parts is None:
            raise DataError("no document index for this stream")
        parts = []
        for j, (path, _cont) in enumerate(self._doc_parts):
            starts = read_doc_index(path)
            if len(starts) and (starts[0] < 0 or starts[-1] >= max(self.counts[j], 1) or np.any(np.diff(starts) <= 0)):
                raise DataError(f"{path}: document starts must increase and stay inside [0, {self.counts[j]})")
            parts.append(starts + self.offsets[j])
        starts = np.concatenate(parts) if parts else np.zeros(0, np.int64)
        if len(self) and (len(starts) == 0 or starts[0] != 0):
            # the stream's first tokens always start a document (the tail piece with --split tail)
            starts = np.concatenate([[0], starts])
        return starts.astype(np.int64)


def stream_of(folder: str | Path, entry: SplitEntry, dtype: str) -> ConcatTokens:
    """The logical stream of a sharded split entry; InputError if a shard file is missing,
    DataError if one's size differs from its entry."""
    folder = Path(folder)
    paths, counts, docs = [], [], []
    for sh in entry.shards or []:
        p = folder / sh.file
        if not p.is_file():
            raise InputError(f"{p}: shard file listed in {folder / META_JSON} is missing")
        size = p.stat().st_size
        if size != sh.bytes:
            raise DataError(f"{p}: {size} bytes, but meta.json says {sh.bytes}: the shard changed since it was encoded")
        paths.append(p)
        counts.append(sh.tokens)
        docs.append((folder / sh.doc_index if sh.doc_index else None, sh.continues))
    return ConcatTokens(paths, counts, dtype, docs)


@dataclass
class ShardMeta:
    """``shards/shard-NNNNN.json``: what one Ray task wrote (its inputs, counts, shard entries).

    ``splits`` maps the task's streams (train/val, or all with ``--split tail``) to their
    ``ShardEntry``; ``key`` identifies the inputs and options the task ran with, so a rerun
    reuses an intact shard. ``reused`` is not stored: the driver's note that it was.
    """

    index: int
    key: str
    inputs: list
    input_bytes: int
    splits: dict[str, ShardEntry]
    stats: dict
    version: int = 1
    reused: bool = field(default=False, compare=False)

    def to_json(self) -> dict:
        return {"format": SHARD_FORMAT, "version": self.version, "index": self.index, "key": self.key,
                "inputs": self.inputs, "input_bytes": self.input_bytes,
                "splits": {n: e.to_json() for n, e in self.splits.items()}, "stats": self.stats}

    @classmethod
    def from_json(cls, obj: Any, where: str) -> ShardMeta:
        if not isinstance(obj, dict) or obj.get("format") != SHARD_FORMAT:
            _bad(where, "not a winsample shard meta")
        version = _check_version(obj, where, 1, "shard meta")
        splits = _get_obj(obj, "splits", where, "", required=True)
        stats = _get_obj(obj, "stats", where, "") or {}
        if not isinstance(obj.get("inputs", []), list):
            _bad(where, "inputs is not a JSON list")
        return cls(index=_get_int(obj, "index", where, "shard"), key=_get_str(obj, "key", where, "shard"),
                   inputs=obj.get("inputs", []), input_bytes=_get_int(obj, "input_bytes", where, "shard"),
                   splits={n: ShardEntry.from_json(e, where, f"splits.{n}") for n, e in splits.items()},
                   stats=stats, version=version)


def write_shard_meta(path: str | Path, meta: ShardMeta) -> None:
    write_json_atomic(path, meta.to_json())


def read_shard_meta(path: str | Path) -> ShardMeta | None:
    """A shard's own meta (written last by its task), or None if absent, unreadable or broken
    (the task then runs again)."""
    try:
        return ShardMeta.from_json(json.loads(Path(path).read_text(encoding="utf-8")), str(path))
    except (OSError, ValueError, RecursionError, DataError):
        return None


# --- opening a split: the one rule ---------------------------------------------------------


def find_meta(path: str | Path) -> Path | None:
    """The meta.json of ``path``: inside it when it is a folder, else beside it; None if absent."""
    path = Path(path)
    mp = path / META_JSON if path.is_dir() else path.parent / META_JSON
    # present but not a regular file (a FIFO, a folder): returned, so reading it fails (exit 2)
    # instead of the data being checked as if it had no meta.json
    return mp if os.path.lexists(mp) else None


@dataclass
class OpenSplit:
    """One token stream, opened by ``open_split``: everything a feature needs to read it.

    ``path`` is the name it was opened by (for a sharded split the logical ``data/train.bin``);
    ``n`` tokens of ``dtype`` in ``nbytes`` bytes (``stray``: bytes past the last whole token,
    which make ``tokens`` raise DataError); ``meta``/``name``/``entry``: the meta.json that
    describes it, its split name and entry (None for a bare ``.bin``).
    """

    path: Path
    dtype: str
    n: int
    nbytes: int
    stray: int = 0
    meta: Meta | None = None
    meta_path: Path | None = None
    name: str | None = None
    entry: SplitEntry | None = None
    encoding: str | None = None  # an explicit --encoding: beats meta's tokenizer
    layout: str | None = None  # "llmc" / "megatron": data another tool wrote, opened by layouts.py
    known_starts: np.ndarray | None = field(default=None, repr=False)  # document starts the layout gives
    files: list | None = None  # llm.c: the shard files of the stream
    _tokens: Any = field(default=None, repr=False)
    _tokenizer: Any = field(default=None, repr=False)

    @property
    def folder(self) -> Path:
        """The data folder: where meta.json's names resolve."""
        return self.meta_path.parent if self.meta_path is not None else self.path.parent

    @property
    def sharded(self) -> bool:
        return self.entry is not None and self.entry.sharded

    @property
    def itemsize(self) -> int:
        return np.dtype(self.dtype).itemsize

    @property
    def tokens(self):
        """A read-only memmap of the file, or the ``ConcatTokens`` of a sharded split."""
        if self._tokens is None:
            if self.sharded:
                self._tokens = stream_of(self.folder, self.entry, self.dtype)
            else:
                self._tokens = open_tokens(self.path, self.dtype)
        return self._tokens

    @property
    def tokenizer_entry(self) -> dict | None:
        """meta.json's tokenizer entry, or None without a meta."""
        return self.meta.tokenizer if self.meta is not None else None

    @property
    def n_vocab(self) -> int:
        """meta's n_vocab; without a meta, the tokenizer's."""
        return self.meta.n_vocab if self.meta is not None else self.tokenizer.n_vocab

    @property
    def eot(self) -> int | None:
        """The end-of-document id: the ``--encoding`` tokenizer's when one is given, else the one
        meta records, else the tokenizer's."""
        if not self.encoding and self.meta is not None and _is_int(self.meta.tokenizer.get("eot")):
            return self.meta.tokenizer["eot"]
        return self.tokenizer.eot

    @property
    def tokenizer(self):
        """The tokenizer by ``tokenizer.resolve``'s one rule: ``--encoding``, else meta's (its
        ``file`` found as recorded or in the data folder), else gpt2. ConfigError if it cannot load."""
        if self._tokenizer is None:
            from . import tokenizer

            self._tokenizer = tokenizer.resolve(self.encoding, self.tokenizer_entry, self.folder)
        return self._tokenizer

    @property
    def doc_index(self) -> Path | None:
        """The document index file meta names for this (unsharded) split, when it exists."""
        if self.entry is None or self.sharded or not self.entry.doc_index:
            return None
        p = self.folder / self.entry.doc_index
        return p if p.exists() else None

    def doc_starts(self) -> np.ndarray | None:
        """int64 document starts from the index (across shards for a sharded split); None when
        there is none. DataError if they do not begin at 0, increase and stay below N."""
        if self.known_starts is not None:
            return self.known_starts
        if self.sharded:
            return self.tokens.doc_starts() if self.n else np.zeros(0, np.int64)
        p = self.doc_index
        if p is None:
            return None
        starts = read_doc_index(p)
        if self.n and (len(starts) == 0 or starts[0] != 0 or np.any(np.diff(starts) <= 0) or starts[-1] >= self.n):
            raise DataError(f"{p}: document starts must begin at 0, increase strictly and stay below N={self.n}")
        return starts

    @property
    def checksum(self) -> str | None:
        """The checksum meta records for this split (None without one)."""
        return self.entry.checksum if self.entry is not None else None

    def size_problem(self) -> str | None:
        """Why the file does not match its meta entry's size (it changed since encode), or None."""
        if self.entry is not None and not self.sharded and self.entry.bytes != self.nbytes:
            return (f"{self.path}: {self.nbytes} bytes, but {self.meta_path} says {self.entry.bytes}: the file"
                    " changed since it was encoded; re-encode it or pass a matching --meta")
        return None


NO_META = "no meta"  # open_split(path, NO_META): a bare token file, whatever lies beside it


def is_logical(path: str | Path, meta: str | Path | None = None) -> bool:
    """True when ``path`` names a split kept in shards (described by ``meta`` or the meta.json
    beside it), which opens by that name though no such file exists. A meta that does not read
    gives False (its error shows where the meta is read)."""
    path = Path(path)
    mp = Path(meta) if meta is not None else path.parent / META_JSON
    try:
        found = load_meta(mp).split_for(path) if mp.is_file() else None
    except WinsampleError:
        return False
    return found is not None and found[1].sharded


def _meta_arg(meta, path: Path) -> tuple[Meta | None, Path | None, bool]:
    """(Meta, its path, given explicitly) from ``open_split``'s ``meta`` argument."""
    if isinstance(meta, str) and meta == NO_META:
        return None, None, False
    if isinstance(meta, Meta):
        return meta, None, True
    if meta is not None:
        mp = Path(meta)
        if not mp.exists():
            raise InputError(f"{mp}: no such meta file")
        return load_meta(mp), mp, True
    mp = path.parent / META_JSON
    if os.path.lexists(mp):  # a FIFO or folder named meta.json fails to load (exit 2): never ignored
        return load_meta(mp), mp, False
    return None, None, False


def open_split(path: str | Path, meta: str | Path | Meta | None = None, encoding: str | None = None,
               *, meta_path: str | Path | None = None) -> OpenSplit:
    """Open the token stream ``path`` by the one rule every feature uses.

    ``meta``: a meta.json path (or a ``Meta``, with ``meta_path`` its file), else the meta.json
    beside ``path`` if there is one. A meta given explicitly must describe ``path`` (InputError
    otherwise); one found beside it that describes other files is ignored (a bare ``.bin``, read
    as ``DEFAULT_DTYPE``). A split kept in shards opens by its logical name (``data/train.bin``,
    which need not exist). ``encoding``: an explicit tokenizer name for ``.tokenizer``.

    InputError: no such file, a folder, or a non-``.bin`` no meta describes (``refuse_unlabelled``);
    DataError: a meta.json that breaks the schema.
    """
    path = Path(path)
    m, mp, explicit = _meta_arg(meta, path)
    if meta_path is not None:
        mp = Path(meta_path)
    found = m.split_for(path) if m is not None else None
    if found is None and explicit:
        files = ", ".join(e.file for e in m.splits.values())
        raise InputError(f"{mp or 'meta'}: describes {files}, not {path.name}; pass the meta.json written with it")
    if found is None:
        m = mp = None
    name, entry = found if found else (None, None)
    dtype = m.dtype if m is not None else DEFAULT_DTYPE
    if entry is not None and entry.sharded:
        return OpenSplit(path, dtype, entry.tokens, entry.bytes, 0, m, mp, name, entry, encoding)
    if not path.exists():
        raise InputError(f"{path}: no such file")
    if path.is_dir():
        raise InputError(f"{path}: is a folder; give a token file such as {path / 'train.bin'}")
    refuse_unlabelled(path, entry is not None)
    try:
        size = path.stat().st_size
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror}") from None
    item = np.dtype(dtype).itemsize
    return OpenSplit(path, dtype, size // item, size, size % item, m, mp, name, entry, encoding)


def open_folder(folder: str | Path, meta: str | Path | Meta | None = None, encoding: str | None = None,
                *, meta_path: str | Path | None = None) -> list[OpenSplit]:
    """The splits of a data folder: each split meta.json describes (sharded ones included), or,
    without a meta, the ``train.bin`` / ``val.bin`` present. InputError if there are none."""
    folder = Path(folder)
    if meta is None:
        meta = find_meta(folder)
    if meta is None:
        out = [open_split(folder / bin_name(s), encoding=encoding) for s in SPLITS if (folder / bin_name(s)).exists()]
        for o in out:
            o.name = o.path.stem
    else:
        m, mp, _ = _meta_arg(meta, folder / "x")
        mp = Path(meta_path) if meta_path is not None else mp
        out = [open_split(folder / e.file, m, encoding, meta_path=mp) for e in m.splits.values()]
    if not out:
        raise InputError(f"{folder}: no train.bin / val.bin and no meta.json: not a data folder")
    return out


# --- provenance: where each document came from ------------------------------------------------
#
#   OUT_DIR/train.prov.npy      PROV_DTYPE [D]: one record per document of train.docs.npy, same order
#   OUT_DIR/train.prov.ids.npy  uint8 [B]: the documents' ids (JSON text) back to back; only with --id-field
#
# A record is (input, offset, line, id_end):
#   input   uint32  index into meta.json's "inputs"
#   offset  int64   byte offset in that input where the document starts: a JSONL record's line,
#                   0 for a text file (a document is the whole file, however encode cut it into
#                   ranges); in the *decompressed* stream for .gz inputs (the offset a reader of
#                   `zcat FILE` sees; a gzip stream has no random access); 0 for a Parquet row
#   line    int64   1-based line of the record (JSONL: its line, counting blank lines too; a
#                   text file: 1; Parquet: the 1-based row)
#   id_end  int64   end of the document's id in the ids file: its id is bytes
#                   [id_end[d-1], id_end[d]) (from 0 for d = 0), the id's JSON text (a string
#                   "…" or an integer); an empty range means no id (a text file, or no --id-field)
#
# meta.json gains (absent from datasets written before provenance; they read and verify as before):
#   "provenance": {"version": 1, "id_field": "id" | null, "offset": "bytes, decompressed",
#                  "splits": {"train": {"file": "train.prov.npy", "ids": "train.prov.ids.npy" | null,
#                                       "documents": D, "checksum": "xxh3_128:…",
#                                       "ids_checksum": "xxh3_128:…" | null}, "val": {…}}}
# and each .gz input entry gains "decompressed_bytes" (the bound a .gz offset lies below).
# The records are written in the same streaming pass as the tokens (28 bytes per document plus
# its id), in input order per split, so they are the same bytes for any worker count or engine.

PROV_VERSION = 1
PROV_DTYPE = np.dtype([("input", "<u4"), ("offset", "<i8"), ("line", "<i8"), ("id_end", "<i8")])
PROV_OFFSET_UNIT = "bytes, decompressed"


def prov_name(split: str) -> str:
    return f"{split}.prov.npy"


def prov_ids_name(split: str) -> str:
    return f"{split}.prov.ids.npy"


def encode_id(value) -> bytes:
    """The stored form of a document id: its JSON text (``"abc"`` or ``42``), UTF-8."""
    if type(value) is int:  # the common case, without json's machinery
        return str(value).encode()
    return _ID_ENCODER.encode(value).encode("utf-8", "surrogatepass")


_ID_ENCODER = json.JSONEncoder(ensure_ascii=False)


def decode_id(data: bytes):
    """The id whose stored form is ``data`` (None for an empty range: no id)."""
    if not data:
        return None
    return json.loads(data.decode("utf-8", "surrogatepass"))


class ProvenanceWriter:
    """Appends one record per document to raw staging files ``<name>.prov.raw`` / ``.ids.raw``.

    ``add(input, offset, line, id_bytes)`` per document, in document order; ``finish`` writes
    the ``.npy`` files. Memory stays flat: records are written in blocks of ``BLOCK`` documents.
    """

    BLOCK = 1 << 16

    def __init__(self, stage: Path, name: str):
        self.rec_path = Path(stage) / f"{name}.prov.raw"
        self.ids_path = Path(stage) / f"{name}.prov.ids.raw"
        self._rec = open(self.rec_path, "ab")
        self._ids = open(self.ids_path, "ab")
        self.count = 0
        self.id_bytes = 0
        self.rec_hasher = new_hasher()  # of the raw bytes, for --resume checkpoints
        self.ids_hasher = new_hasher()
        # columns in plain arrays: an append is ~0.1 µs, a structured-array row assignment ~1 µs
        self._cols = (array("I"), array("q"), array("q"), array("q"))
        self._idbuf: list[bytes] = []

    def add(self, input_index: int, offset: int, line: int, id_bytes: bytes = b"") -> None:
        if id_bytes:
            self._idbuf.append(id_bytes)
            self.id_bytes += len(id_bytes)
        inp, off, ln, end = self._cols
        inp.append(input_index)
        off.append(offset)
        ln.append(line)
        end.append(self.id_bytes)
        self.count += 1
        if len(inp) == self.BLOCK:
            self.flush()

    def flush(self) -> None:
        try:
            self._flush()
        except OSError as e:  # a full disk: name the file (f.write errors carry no name)
            if e.filename is None:
                raise OSError(e.errno, e.strerror or str(e), str(self.rec_path)) from None
            raise

    def _flush(self) -> None:
        inp = self._cols[0]
        if len(inp):
            block = np.empty(len(inp), PROV_DTYPE)
            for name, col in zip(PROV_DTYPE.names, self._cols):
                block[name] = np.frombuffer(col, dtype=col.typecode)
                del col[:]
            data = block.tobytes()
            self._rec.write(data)
            self.rec_hasher.update(data)
        if self._idbuf:
            data = b"".join(self._idbuf)
            self._ids.write(data)
            self.ids_hasher.update(data)
            self._idbuf = []

    def close(self) -> None:
        try:
            self.flush()
        finally:
            self._rec.close()
            self._ids.close()

    def checkpoint(self, files: list) -> dict:
        """Flush; append the files (file, path) a durable checkpoint must fsync to ``files``."""
        self.flush()
        for f, path in ((self._rec, self.rec_path), (self._ids, self.ids_path)):
            f.flush()
            files.append((f, path))
        return {"records": self.count, "id_bytes": self.id_bytes,
                "checksum": format_checksum(self.rec_hasher), "ids_checksum": format_checksum(self.ids_hasher)}

    def reopen(self, state: dict) -> bool:
        """Continue from a checkpoint ``state``: cut the files back to it; False if they differ."""
        self._rec.close()
        self._ids.close()
        ok = True
        for path, nbytes, want, attr in (
            (self.rec_path, state["records"] * PROV_DTYPE.itemsize, state["checksum"], "rec_hasher"),
            (self.ids_path, state["id_bytes"], state["ids_checksum"], "ids_hasher"),
        ):
            h = new_hasher()
            with open(path, "r+b") as f:
                if os.fstat(f.fileno()).st_size < nbytes:
                    ok = False
                f.truncate(nbytes)
                while data := f.read(CHUNK_BYTES):
                    h.update(data)
            ok = ok and format_checksum(h) == want
            setattr(self, attr, h)
        self._rec = open(self.rec_path, "ab")
        self._ids = open(self.ids_path, "ab")
        self.count, self.id_bytes = state["records"], state["id_bytes"]
        return ok


def iter_prov_records(rec_path: Path, lo: int = 0, hi: int | None = None, step: int = 1 << 16) -> Iterator[np.ndarray]:
    """Records ``lo:hi`` of a raw records file (``ProvenanceWriter``'s), in bounded pieces."""
    n = Path(rec_path).stat().st_size // PROV_DTYPE.itemsize
    hi = n if hi is None else hi
    with open(rec_path, "rb") as f:
        for a in range(lo, hi, step):
            f.seek(a * PROV_DTYPE.itemsize)
            yield np.fromfile(f, dtype=PROV_DTYPE, count=min(step, hi - a))


def _record_at(rec_path: Path, k: int) -> np.ndarray:
    with open(rec_path, "rb") as f:
        f.seek(k * PROV_DTYPE.itemsize)
        return np.fromfile(f, dtype=PROV_DTYPE, count=1)[0]


def prov_segment(rec_path: Path, ids_path: Path, lo: int = 0, hi: int | None = None,
                 line_fix: tuple[int, int] | None = None) -> dict:
    """Records ``[lo, hi)`` of a raw records stream (and their ids) as a piece of a split.

    ``line_fix = (input, base)``: add ``base`` to the line of records of that input (a shard
    that starts inside a JSONL file counts its lines from its own first byte).
    """
    n = Path(rec_path).stat().st_size // PROV_DTYPE.itemsize
    hi = n if hi is None else hi
    id0 = int(_record_at(rec_path, lo - 1)["id_end"]) if lo > 0 else 0
    id1 = int(_record_at(rec_path, hi - 1)["id_end"]) if hi > lo else id0
    return {"rec": Path(rec_path), "ids": Path(ids_path), "lo": lo, "hi": hi, "id0": id0, "id1": id1, "line_fix": line_fix}


def write_provenance(folder: Path, split: str, segments: list[dict], id_field: str | None) -> dict:
    """Write ``split``'s provenance files into ``folder`` (atomically) as the concatenation of
    ``segments`` (``prov_segment``); return its entry for meta.json's ``provenance.splits``."""
    folder = Path(folder)
    count = sum(s["hi"] - s["lo"] for s in segments)
    id_total = sum(s["id1"] - s["id0"] for s in segments)
    rec_h = new_hasher()
    base = 0
    with atomic_open(folder / prov_name(split)) as f:
        np.lib.format.write_array_header_1_0(
            f, {"descr": np.lib.format.dtype_to_descr(PROV_DTYPE), "fortran_order": False, "shape": (count,)})
        for s in segments:
            for chunk in iter_prov_records(s["rec"], s["lo"], s["hi"]):
                chunk["id_end"] += base - s["id0"]
                if s["line_fix"] is not None and s["line_fix"][1]:
                    inp, add = s["line_fix"]
                    chunk["line"][chunk["input"] == inp] += add
                data = chunk.tobytes()
                f.write(data)
                rec_h.update(data)
            base += s["id1"] - s["id0"]
    entry = {"file": prov_name(split), "ids": None, "documents": count,
             "checksum": format_checksum(rec_h), "ids_checksum": None}
    if id_field is None:
        return entry
    ids_h = new_hasher()
    with atomic_open(folder / prov_ids_name(split)) as f:
        np.lib.format.write_array_header_1_0(f, {"descr": "|u1", "fortran_order": False, "shape": (id_total,)})
        for s in segments:
            with open(s["ids"], "rb") as src:
                src.seek(s["id0"])
                left = s["id1"] - s["id0"]
                while left:
                    data = src.read(min(left, CHUNK_BYTES))
                    if not data:
                        raise ValueError(f"{s['ids']}: shorter than its records say")
                    f.write(data)
                    ids_h.update(data)
                    left -= len(data)
    entry.update(ids=prov_ids_name(split), ids_checksum=format_checksum(ids_h))
    return entry


def prov_entries(meta) -> tuple[str | None, dict] | None:
    """(id_field, {split: entry}) of meta's ``provenance`` (a ``Meta`` or its dict), or None
    for a dataset written before provenance."""
    if isinstance(meta, Meta):
        meta = meta.to_json()
    prov = meta.get("provenance") if isinstance(meta, dict) else None
    if not isinstance(prov, dict):
        return None
    splits = prov.get("splits")
    return prov.get("id_field"), {k: v for k, v in (splits if isinstance(splits, dict) else {}).items() if isinstance(v, dict)}


def prov_meta(id_field: str | None, splits: dict) -> dict:
    """meta.json's ``provenance`` object."""
    return {"version": PROV_VERSION, "id_field": id_field, "offset": PROV_OFFSET_UNIT, "splits": splits}


class Provenance:
    """Read side of one split's provenance: ``len``, ``record(d)`` and ``source(d)``.

    ``inputs`` is meta.json's ``inputs`` list. Files are memory-mapped, so a lookup reads a
    few bytes whatever the corpus size.
    """

    def __init__(self, records: np.ndarray, ids: np.ndarray | None, inputs: list, id_field: str | None,
                 path: Path | None = None):
        self.records, self.ids, self.inputs, self.id_field, self.path = records, ids, inputs, id_field, path

    def __len__(self) -> int:
        return len(self.records)

    def id_of(self, d: int):
        if self.ids is None:
            return None
        a = int(self.records["id_end"][d - 1]) if d > 0 else 0
        b = int(self.records["id_end"][d])
        return decode_id(bytes(self.ids[a:b]))

    def source(self, d: int) -> dict:
        """``{"path", "line", "offset", "input"}`` plus ``"id"`` when ids were recorded, for document ``d``."""
        if not 0 <= d < len(self.records):
            raise InputError(f"{self.path}: document {d} is outside [0, {len(self.records)})")
        r = self.records[d]
        i = int(r["input"])
        path = self.inputs[i].get("path") if 0 <= i < len(self.inputs) and isinstance(self.inputs[i], dict) else None
        out = {"path": path, "line": int(r["line"]), "offset": int(r["offset"]), "input": i}
        if self.ids is not None:
            out["id"] = self.id_of(d)
        return out


def read_provenance(folder: str | Path, meta: dict, split: str) -> Provenance | None:
    """``split``'s provenance in data folder ``folder`` (described by ``meta``), or None when the
    dataset has none (written before provenance). DataError if the files are unreadable."""
    if isinstance(meta, Meta):
        meta = meta.to_json()
    prov = meta.get("provenance")
    if not isinstance(prov, dict):
        return None
    entry = (prov.get("splits") or {}).get(split)
    if not isinstance(entry, dict):
        return None
    folder = Path(folder)
    name = entry.get("file")
    if not _plain_name(name):
        raise DataError(f"{folder / META_JSON}: provenance.splits.{split}.file {name!r} is not a file name in its folder")
    rec = _load_npy_mmap(folder / name, "a provenance file")
    if rec.dtype != PROV_DTYPE or rec.ndim != 1:
        raise DataError(f"{folder / name}: not a provenance file: dtype {rec.dtype}, shape {rec.shape}")
    ids = None
    if entry.get("ids") is not None:
        ids_name = entry["ids"]
        if not _plain_name(ids_name):
            raise DataError(f"{folder / META_JSON}: provenance.splits.{split}.ids {ids_name!r} is not a file name in its folder")
        ids = _load_npy_mmap(folder / ids_name, "a provenance ids file")
        if ids.dtype != np.uint8 or ids.ndim != 1:
            raise DataError(f"{folder / ids_name}: not a provenance ids file: dtype {ids.dtype}, shape {ids.shape}")
    return Provenance(rec, ids, meta.get("inputs") or [], prov.get("id_field"), folder / name)


def _plain_name(name) -> bool:
    return isinstance(name, str) and bool(name) and name not in (".", "..") and "/" not in name and "\\" not in name and "\0" not in name


def _load_npy_mmap(path: Path, what: str) -> np.ndarray:
    try:
        with NPY_HEADER_LOCK:
            return np.load(path, mmap_mode="r", allow_pickle=False)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except (ValueError, OSError) as e:
        if "empty file" in str(e) or "cannot mmap an empty file" in str(e) or "mmap length" in str(e):
            with NPY_HEADER_LOCK:
                return np.load(path, allow_pickle=False)  # zero records: numpy cannot map an empty body
        raise DataError(f"{path}: not {what}: {e}") from None
