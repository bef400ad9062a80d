"""The bytes on disk: file names, dtypes, meta.json, window plans, atomic writes.

This is the only module that knows how winsample's files are laid out. Everything else
reads and writes them through the functions here.

A data folder written by ``winsample encode``::

    OUT_DIR/
    ├── train.bin        token ids of the train split, raw, no header
    ├── val.bin          token ids of the val split, raw, no header
    ├── train.docs.npy   int64 [D]: token offset where each train document starts (first is 0)
    ├── val.docs.npy     int64 [D]: the same for val
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
     "materialized": {"file", "shape", "dtype", "pad_id"}   (only with --materialize)}

The source checksum is copied from meta.json's split entry when that meta describes the file
(same name and byte size), so planning never reads the tokens; for a bare .bin it is streamed.
One plan per scale: ``PLAN.T512.npy``; shards: ``PLAN.shard0of4.npy`` (round-robin: shard r holds
rows r, r+K, …); materialized windows: ``PLAN.tokens.npy``, (n, span) ids in the .bin's dtype,
short windows padded with ``pad_id`` (their true length is the plan's ``length``).

Checksums are xxh3-128 (``"xxh3_128:<32 hex>"``): it runs at several GB/s, faster than the
disk, where sha256 would be the slowest part of a run.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import xxhash

from .errors import DataError, InputError

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
    d = np.dtype(dtype)
    if d.kind != "u" or d.itemsize not in (2, 4):
        raise InputError(f"unsupported token dtype {dtype!r}: use uint16 or uint32")
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
        bad = (ids < 0) | (ids >= limit)
        if bad.any():
            i = int(np.argmax(bad))
            raise DataError(
                f"{where}: token id {int(ids[i])} at position {i} is outside [0, {limit})"
                f" (n_vocab {n_vocab}, dtype {dtype})"
            )
    return ids.astype(dtype, copy=False)


def token_count(path: str | Path, dtype: str) -> int:
    """N for a token file; DataError if its byte size is not a multiple of the item size."""
    size = Path(path).stat().st_size
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
    return np.memmap(path, dtype=dtype, mode="r", shape=(n,))


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
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK_BYTES):
            h.update(chunk)
            if progress:
                progress(len(chunk))
    return format_checksum(h)


# --- atomic writes ----------------------------------------------------------------------


def tmp_path(path: str | Path) -> Path:
    """Where ``path`` is written before it is renamed into place (same folder, same disk)."""
    return Path(f"{path}.tmp")


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
            _roll_forward(stage, p.parent, json.loads(mark.read_text()))
            result = "rolled forward"
        else:
            shutil.rmtree(stage, ignore_errors=True)
            result = "cleaned"
    stem = p.name[:-4] if p.name.endswith(".npy") else p.name
    if p.parent.is_dir():
        for tmp in p.parent.glob(f"{glob_escape(stem)}.*.tmp"):
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
            _roll_forward(stage, out_dir, json.loads(mark.read_text()))
            result = "rolled forward"
        else:
            shutil.rmtree(stage, ignore_errors=True)
            result = "cleaned"
    if out_dir.is_dir():
        for split in SPLITS:
            for name in (bin_name(split), doc_index_name(split)):
                tmp_path(out_dir / name).unlink(missing_ok=True)
        tmp_path(out_dir / META_JSON).unlink(missing_ok=True)
    return result


# --- meta.json --------------------------------------------------------------------------

_SPLIT_KEYS = {"file": str, "tokens": int, "bytes": int, "documents": int, "checksum": str}


def validate_meta(meta: Any, where: str = META_JSON) -> dict:
    """Return ``meta`` if it follows the schema above, else raise DataError saying what's off."""

    def bad(msg: str):
        raise DataError(f"{where}: {msg}")

    if not isinstance(meta, dict):
        bad("not a JSON object")
    if meta.get("format") != FORMAT_NAME:
        bad(f"format is {meta.get('format')!r}, expected {FORMAT_NAME!r}")
    version = meta.get("version")
    if not isinstance(version, int):
        bad("missing integer 'version'")
    if version > FORMAT_VERSION:
        bad(f"format version {version} is newer than this winsample reads ({FORMAT_VERSION}); upgrade winsample")
    try:
        normalize_dtype(meta.get("dtype", ""))
    except (InputError, TypeError):
        bad(f"unsupported dtype {meta.get('dtype')!r}")
    tok = meta.get("tokenizer")
    if not isinstance(tok, dict) or not isinstance(tok.get("n_vocab"), int):
        bad("missing tokenizer.n_vocab")
    splits = meta.get("splits")
    if not isinstance(splits, dict) or not splits:
        bad("missing 'splits'")
    for name, s in splits.items():
        if not isinstance(s, dict):
            bad(f"splits.{name} is not an object")
        for key, typ in _SPLIT_KEYS.items():
            if not isinstance(s.get(key), typ) or isinstance(s.get(key), bool):
                bad(f"splits.{name}.{key} missing or not {typ.__name__}")
    return meta


def read_meta(path: str | Path) -> dict:
    """Read and validate meta.json; DataError if it is not JSON or breaks the schema."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise DataError(f"{path}: cannot read meta: {e}") from None
    try:
        meta = json.loads(text)
    except json.JSONDecodeError as e:
        raise DataError(f"{path}: not valid JSON (line {e.lineno}, column {e.colno}): {e.msg}") from None
    return validate_meta(meta, str(path))


def write_meta(path: str | Path, meta: dict) -> None:
    write_json_atomic(path, validate_meta(meta, str(path)))


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


def _load_npy(path: str | Path, what: str) -> np.ndarray:
    """``np.load`` without pickles: InputError if missing, DataError if not a readable .npy."""
    try:
        return np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except (ValueError, OSError) as e:
        raise DataError(f"{path}: not {what}: {e}") from None


def read_doc_index(path: str | Path) -> np.ndarray:
    starts = _load_npy(path, "a document index")
    if starts.ndim != 1 or starts.dtype.kind not in "iu":
        raise DataError(f"{path}: document index must be a 1-d integer array")
    return starts.astype(np.int64, copy=False)


# --- window plans -----------------------------------------------------------------------


def write_plan(path: str | Path, plan: np.ndarray, sidecar: dict) -> None:
    """Write ``plan`` (PLAN_DTYPE rows) to ``path`` and its sidecar to ``path.json``, atomically.

    The plan goes first and the sidecar last, so a plan without a sidecar is never current.
    """
    plan = np.asarray(plan, dtype=PLAN_DTYPE)
    side = {"format": PLAN_FORMAT, "version": PLAN_VERSION, **sidecar}
    with atomic_open(path) as f:
        np.save(f, plan)
    write_json_atomic(plan_sidecar(path), side)


def read_plan(path: str | Path) -> tuple[np.ndarray, dict]:
    """(plan rows, sidecar dict) from a plan written by ``write_plan``.

    DataError if the .npy is not a plan (wrong fields or dtypes) or the sidecar is missing,
    not JSON or from a newer version.
    """
    path = Path(path)
    arr = _load_npy(path, "a window plan (.npy)")
    if arr.dtype.names is None or any(n not in arr.dtype.names for n in PLAN_DTYPE.names):
        raise DataError(f"{path}: not a window plan: fields {arr.dtype.names}, expected {PLAN_DTYPE.names}")
    for name in PLAN_DTYPE.names:
        if arr.dtype[name].kind not in "iu":
            raise DataError(f"{path}: plan field {name!r} has dtype {arr.dtype[name]}, expected an integer")
    if arr.ndim != 1:
        raise DataError(f"{path}: a plan is a 1-d array, this one has shape {arr.shape}")
    side_path = plan_sidecar(path)
    try:
        side = json.loads(side_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(f"{side_path}: missing sidecar of plan {path}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise DataError(f"{side_path}: not valid JSON: {e}") from None
    if not isinstance(side, dict) or side.get("format") != PLAN_FORMAT:
        raise DataError(f"{side_path}: not a winsample plan sidecar")
    if not isinstance(side.get("version"), int) or side["version"] > PLAN_VERSION:
        raise DataError(f"{side_path}: plan version {side.get('version')} is newer than this winsample reads")
    return arr.astype(PLAN_DTYPE, copy=False), side
