"""Provenance: where each document came from (records, ids), written beside the tokens."""

from __future__ import annotations

import json
import os
from array import array
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from ..disk import checksums
from ..disk.atomic import atomic_open
from ..disk.checksums import format_checksum, new_hasher
from ..disk.names import is_plain_name, open_own
from ..errors import DataError, InputError
from .meta import Meta
from .names import META_JSON
from .npy import load_npy_mmap

# --- provenance: where each document came from ------------------------------------------------
#
#   OUT_DIR/train.prov.npy      PROV_DTYPE [D]: one record per document of train.docs.npy, same order
#   OUT_DIR/train.prov.ids.npy  uint8 [B]: the documents' ids (JSON text) back to back; only with --id-field
#
# A record is (input, offset, line, id_end):
#   input   uint32  index into meta.json's "inputs"
#   offset  int64   byte offset in that input where the document starts: a JSONL record's line,
#                   0 for a text file (a document is the whole file, however encode cut it into
#                   ranges); in the *decompressed* stream for .gz / .zst inputs (the offset a
#                   reader of `zcat FILE` / `zstdcat FILE` sees; a compressed stream has no random
#                   access); 0 for a Parquet or Arrow row
#   line    int64   1-based line of the record (JSONL: its line, counting blank lines too; a
#                   text file: 1; Parquet, Arrow: the 1-based row)
#   id_end  int64   end of the document's id in the ids file: its id is bytes
#                   [id_end[d-1], id_end[d]) (from 0 for d = 0), the id's JSON text (a string
#                   "…" or an integer); an empty range means no id (a text file, or no --id-field)
#
# meta.json gains (absent from datasets written before provenance; they read and verify as before):
#   "provenance": {"version": 1, "id_field": "id" | null, "offset": "bytes, decompressed",
#                  "splits": {"train": {"file": "train.prov.npy", "ids": "train.prov.ids.npy" | null,
#                                       "documents": D, "checksum": "xxh3_128:…",
#                                       "ids_checksum": "xxh3_128:…" | null}, "val": {…}}}
# and each .gz / .zst input entry gains "decompressed_bytes" (the bound its offsets lie below).
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

    def abandon(self) -> None:
        """Close both files without writing what is buffered (they are being thrown away)."""
        for f in (self._rec, self._ids):
            try:
                f.close()
            except (OSError, ValueError):
                pass

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
            with open_own(path) as f:  # never through a link planted in .partial/
                if os.fstat(f.fileno()).st_size < nbytes:
                    ok = False
                f.truncate(nbytes)
                while data := f.read(checksums.CHUNK_BYTES):
                    h.update(data)
            ok = ok and format_checksum(h) == want
            setattr(self, attr, h)
        self._rec = open_own(self.rec_path, append=True)
        self._ids = open_own(self.ids_path, append=True)
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
                    data = src.read(min(left, checksums.CHUNK_BYTES))
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
        try:
            return decode_id(bytes(self.ids[a:b]))
        except (ValueError, RecursionError):  # not what encode_id writes: a damaged ids file
            raise DataError(f"{self.path}: the id of document {d} (bytes {a}..{b} of its ids file) is not valid"
                            " JSON: the provenance ids are damaged") from None

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
    if not is_plain_name(name):
        raise DataError(f"{folder / META_JSON}: provenance.splits.{split}.file {name!r} is not a file name in its folder")
    rec = load_npy_mmap(folder / name, "a provenance file")
    if rec.dtype != PROV_DTYPE or rec.ndim != 1:
        raise DataError(f"{folder / name}: not a provenance file: dtype {rec.dtype}, shape {rec.shape}")
    ids = None
    if entry.get("ids") is not None:
        ids_name = entry["ids"]
        if not is_plain_name(ids_name):
            raise DataError(f"{folder / META_JSON}: provenance.splits.{split}.ids {ids_name!r} is not a file name in its folder")
        ids = load_npy_mmap(folder / ids_name, "a provenance ids file")
        if ids.dtype != np.uint8 or ids.ndim != 1:
            raise DataError(f"{folder / ids_name}: not a provenance ids file: dtype {ids.dtype}, shape {ids.shape}")
    return Provenance(rec, ids, meta.get("inputs") or [], prov.get("id_field"), folder / name)
