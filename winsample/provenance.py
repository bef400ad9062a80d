"""Trace a window or a document back to its source: input file, line, byte offset, record id.

``encode`` records, per document, where it came from (``formats``' provenance files). This
module joins those records with a split's document index, so that any token position, plan
row or document number names its source::

    t = open_tracer("data/train.bin")          # None for a dataset written without provenance
    t.document(3)    # {"path": "docs.jsonl", "line": 7, "offset": 812, "input": 0, "id": "q-17"}
    t.window(4096)   # {"doc": 5, "doc_offset": 120, "source": {…}}: the document it STARTS in
    trace_row("train.plan.npy", 17)            # the same for row 17 of a plan, plus the row

A window that crosses documents (planned without ``--boundaries doc``) is named by the
document its first token lies in; ``doc_offset`` is that token's position in the document
(tokens), the "offset in the original document" a supervised or retrieval window is stored with.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from . import disk, formats, tokensrc
from .errors import DataError, InputError


class Tracer:
    """One split's provenance joined with its document starts (token offsets, ascending)."""

    def __init__(self, prov: formats.Provenance, doc_starts: np.ndarray, n_tokens: int, label: str):
        self.prov, self.starts, self.n, self.label = prov, np.asarray(doc_starts, np.int64), int(n_tokens), label
        if len(prov) != len(self.starts):
            raise DataError(
                f"{prov.path}: {len(prov)} provenance records, but {label} has {len(self.starts)} documents;"
                " run `winsample verify` on the folder"
            )

    @property
    def documents(self) -> int:
        return len(self.starts)

    def document(self, d: int) -> dict:
        """Where document ``d`` came from: ``{"path", "line", "offset", "input"}`` and ``"id"`` when recorded."""
        return self.prov.source(int(d))

    def doc_at(self, positions) -> np.ndarray:
        """The document each token position lies in (int64, same shape); positions in ``[0, N)``."""
        pos = np.asarray(positions, np.int64)
        if pos.size and (pos.min() < 0 or pos.max() >= max(self.n, 1)):
            raise InputError(f"{self.label}: token position outside [0, {self.n})")
        return np.searchsorted(self.starts, pos, "right") - 1

    def window(self, start: int) -> dict:
        """``{"doc", "doc_offset", "source"}`` of the window starting at token ``start``."""
        d = int(self.doc_at(start))
        return {"doc": d, "doc_offset": int(start) - int(self.starts[d]), "source": self.document(d)}


def open_tracer(bin_path, meta_path=None) -> Tracer | None:
    """The ``Tracer`` of a split's token file (``data/train.bin``, merged or sharded), or None
    when it has no meta.json, no document index or no provenance (datasets from before it)."""
    return tracer_for(tokensrc.open_source(bin_path, meta_path, strict=False))


def tracer_for(src, meta_path=None) -> Tracer | None:
    """``open_tracer`` for a split already opened (``tokensrc.open_source``)."""
    if src.meta is None or src.name is None or src.layout is not None:
        return None
    prov = formats.read_provenance(src.folder, src.meta, src.name)
    if prov is None:
        return None
    starts = src.doc_starts()
    if starts is None:
        return None
    return Tracer(prov, starts, src.n, str(src.path))


def source_text(source: dict) -> str:
    """``path:line`` and the id, as people read it: ``docs.jsonl:7 id=q-17``."""
    out = f"{source.get('path')}:{source.get('line')}"
    if source.get("id") is not None:
        out += f" id={source['id']}"
    return out


def plan_source_bin(plan_path, side: dict) -> Path | None:
    """The token file a plan was made from: its sidecar's path as written, else the same file
    name beside the plan (a plan moved with its data); None when neither exists."""
    src = side.source or formats.PlanSource()  # a typed formats.PlanSidecar
    plan_dir = Path(plan_path).parent
    for cand in (src.path, str(plan_dir / src.path) if src.path else None,
                 str(plan_dir / src.file) if src.file else None):
        if not cand:
            continue
        p = Path(cand)
        if p.is_file() or (p.parent / formats.META_JSON).is_file():
            return p
    return None


def plan_tracer(plan_path, side: dict) -> Tracer | None:
    """The ``Tracer`` of the split a plan was made from, or None (no provenance, file gone, or
    a file other than the one planned: its byte size differs from the sidecar's; a mixture, whose
    sources each have their own)."""
    if side.mixture:
        return None
    p = plan_source_bin(plan_path, side)
    if p is None:
        return None
    try:
        t = open_tracer(p)
    except InputError:
        return None
    want = side.source.tokens if side.source is not None else None
    if t is not None and want is not None and want != t.n:
        raise DataError(f"{plan_path}: planned over {want} tokens, but {p} now holds {t.n}: re-plan it")
    return t


def trace_row(plan_path, row: int) -> dict:
    """Row ``row`` of plan ``plan_path`` (``start``, ``length``, ``doc``, ``fresh``; of a best-fit
    plan, one segment: ``window`` instead of ``fresh``) with the ``doc`` it starts in, its
    ``doc_offset`` and ``source``; InputError when the plan's data has no provenance."""
    rows, side = formats.load_plan(plan_path)
    if side.mixture:  # its rows are its sources, not windows of one token file
        raise InputError(f"{plan_path} is a mixture: its rows are its {len(side.sources)} source plans; trace a row of one"
                         f" of them ({', '.join(s.plan for s in side.sources)})")
    if not 0 <= row < len(rows):
        raise InputError(f"{plan_path}: row {row} is outside [0, {len(rows)})")
    t = plan_tracer(plan_path, side)
    if t is None:
        raise InputError(f"{plan_path}: its token file has no provenance (encoded before it, or moved); re-encode to trace windows")
    r = rows[row]
    last = "window" if side.best_fit else "fresh"  # a best-fit plan's rows are segments of windows
    out = {"row": int(row), "start": int(r["start"]), "length": int(r["length"]), last: int(r[last])}
    if not 0 <= out["start"] < t.n:  # an edited or broken plan: name it and the row, not the token file
        raise DataError(f"{plan_path}: row {row} starts at {out['start']}, outside its tokens [0, {t.n}); run `winsample verify`")
    out.update(t.window(out["start"]))
    return out


def trace_document(bin_path, doc: int, meta_path=None) -> dict:
    """Where document ``doc`` of a split (``data/train.bin``) came from; InputError without provenance."""
    t = open_tracer(bin_path, meta_path)
    if t is None:
        raise InputError(f"{bin_path}: no provenance recorded (encoded before it, or no meta.json); re-encode to trace documents")
    return t.document(doc)


__all__ = ["Tracer", "open_tracer", "trace_row", "trace_document", "source_text", "plan_tracer"]


# --- checks (verify's `provenance`) ---------------------------------------------------------

CHECK_CHUNK = 1 << 20  # records per step: memory stays flat whatever the corpus size
ID_SAMPLE = 1024  # ids parsed per split (evenly spread); the checksum covers every byte


def _offset_bounds(inputs: list) -> np.ndarray:
    """Per input, the bound its offsets lie below: decompressed bytes for a .gz / .zst when
    recorded, else its bytes; -1 (no bound) for a .gz / .zst whose decompressed size was not recorded."""
    out = np.full(len(inputs), -1, np.int64)
    for i, e in enumerate(inputs):
        if not isinstance(e, dict):
            continue
        if isinstance(e.get("decompressed_bytes"), int):
            out[i] = e["decompressed_bytes"]
        elif isinstance(e.get("bytes"), int) and not str(e.get("path", "")).endswith((".gz", ".zst")):
            out[i] = e["bytes"]
    return out


def split_problems(folder, meta: dict, split: str, documents: int) -> list[str]:
    """What is wrong with ``split``'s provenance in data folder ``folder`` (empty: sound).

    One record per document of the split's document index (``documents``); each names an
    input of meta's ``inputs``, an offset inside that input's recorded size (the decompressed
    size for .gz) and a line >= 1; records strictly increase by (input, offset, line), as
    documents are read in input order; the id ranges tile the ids file, sampled ids parse as a
    string or integer; both files match the checksums meta.json records.
    """
    if isinstance(meta, formats.Meta):
        meta = meta.to_json()
    id_field, entries = formats.prov_entries(meta) or (None, {})
    entry = entries.get(split)
    where = f"provenance.splits.{split}"
    if not isinstance(entry, dict):
        return [f"{where} is missing"]
    try:
        prov = formats.read_provenance(folder, meta, split)
    except (DataError, InputError) as e:
        return [str(e)]
    name = entry.get("file")
    recs, ids = prov.records, prov.ids
    out = []
    n = len(recs)
    if n != documents:
        out.append(f"{name} has {n} records, but the split has {documents} documents")
    if entry.get("documents") != n:
        out.append(f"{where}.documents {entry.get('documents')} but {name} has {n} records")
    if (ids is None) != (id_field is None):
        out.append(f"{where}: ids file {'missing' if ids is None else 'present'} but id_field is {id_field!r}")
    bounds = _offset_bounds(meta.get("inputs") or [])
    h = disk.new_hasher()
    prev = None  # (input, offset, line, id_end) of the record before the chunk
    bad_input = bad_offset = bad_line = bad_order = bad_ids = 0
    first_bad = None
    for lo in range(0, n, CHECK_CHUNK):
        c = np.asarray(recs[lo : lo + CHECK_CHUNK])
        h.update(c.tobytes())
        inp, off, line, ide = (c[k].astype(np.int64) for k in ("input", "offset", "line", "id_end"))
        wrong_input = inp >= len(bounds)
        bound = np.where(wrong_input, -1, bounds[np.minimum(inp, max(len(bounds) - 1, 0))] if len(bounds) else -1)
        wrong_off = (off < 0) | ((bound >= 0) & (off >= bound))
        wrong_line = line < 1
        if prev is not None:
            inp_p, off_p, line_p, ide_p = (np.concatenate([[prev[k]], x[:-1]]) for k, x in enumerate((inp, off, line, ide)))
        else:
            inp_p, off_p, line_p, ide_p = (np.concatenate([[v], x[:-1]]) for v, x in zip((-1, -1, -1, 0), (inp, off, line, ide)))
        later = (inp > inp_p) | ((inp == inp_p) & ((off > off_p) | ((off == off_p) & (line > line_p))))
        wrong_ids = ide < ide_p
        for flag in (wrong_input, wrong_off, wrong_line, ~later, wrong_ids):
            if flag.any() and first_bad is None:
                first_bad = lo + int(np.argmax(flag))
        bad_input += int(wrong_input.sum())
        bad_offset += int((wrong_off & ~wrong_input).sum())
        bad_line += int(wrong_line.sum())
        bad_order += int((~later).sum())
        bad_ids += int(wrong_ids.sum())
        prev = (int(inp[-1]), int(off[-1]), int(line[-1]), int(ide[-1]))
    if bad_input:
        out.append(f"{name}: {bad_input} record(s) name an input outside meta.json's {len(bounds)} inputs")
    if bad_offset:
        out.append(f"{name}: {bad_offset} record(s) have a byte offset outside their input's recorded size")
    if bad_line:
        out.append(f"{name}: {bad_line} record(s) have a line below 1")
    if bad_order:
        out.append(f"{name}: {bad_order} record(s) do not come after the one before (input, offset, line)")
    if bad_ids:
        out.append(f"{name}: {bad_ids} id range(s) end before they start")
    if first_bad is not None:
        out[-1] += f"; first bad record: {first_bad}"
    if disk.format_checksum(h) != entry.get("checksum"):
        out.append(f"{where}.checksum {entry.get('checksum')} but {name} hashes to {disk.format_checksum(h)}")
    if ids is not None:
        last = int(recs["id_end"][-1]) if n else 0
        if last != len(ids):
            out.append(f"{entry.get('ids')}: {len(ids)} bytes, but the records' ids end at {last}")
        hi = disk.new_hasher()
        for lo in range(0, len(ids), disk.checksums.CHUNK_BYTES):
            hi.update(np.asarray(ids[lo : lo + disk.checksums.CHUNK_BYTES]).tobytes())
        if disk.format_checksum(hi) != entry.get("ids_checksum"):
            out.append(f"{where}.ids_checksum {entry.get('ids_checksum')} but {entry.get('ids')} hashes to {disk.format_checksum(hi)}")
        if not bad_ids and last == len(ids):
            for d in np.unique(np.linspace(0, n - 1, min(n, ID_SAMPLE)).astype(np.int64)).tolist() if n else []:
                try:
                    v = prov.id_of(d)
                except (ValueError, UnicodeDecodeError):
                    v = ()
                if v is not None and (isinstance(v, bool) or not isinstance(v, (str, int))):
                    out.append(f"{entry.get('ids')}: the id of document {d} is not a JSON string or integer")
                    break
    return out
