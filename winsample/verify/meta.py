"""The ``meta`` check (meta.json against the files it describes) and ``provenance``."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .. import formats, tokenizer
from ..errors import WinsampleError
from .registry import check
from .report import Report, Status
from .scan import FileScan


def load_meta_tokenizer(tok: dict, meta_file: Path | None):  # tok: meta's tokenizer entry
    """(encoding, None) or (None, error text) for meta's tokenizer entry."""
    try:
        return tokenizer.from_meta(tok, meta_file.parent if meta_file is not None else None), None
    except WinsampleError as e:
        return None, str(e)


@check("meta", help="meta.json's sizes, counts, checksums, doc indexes, tokenizer match the files",
       reads="meta.json, token files, document indexes, tokenizer", stage="dataset")
def meta(report: Report, ctx) -> None:
    """The meta line: meta.json against the files, or why there is none."""
    m, path, folder, enc = ctx.meta, ctx.path, ctx.folder, ctx.enc
    if ctx.meta_error is not None:
        report.add(META, str(ctx.meta_file.name if folder else ctx.meta_file), Status.FAIL, ctx.meta_error)
    elif m is not None:
        check_meta(report, m, ctx.meta_file, [t for t in ctx.targets if t.path in ctx.sizes], ctx.scans, enc, ctx.enc_error,
                   ctx.ranks_sha)
    elif ctx.megatron_idx is not None:
        report.add(META, path.name, Status.SKIP, f"no meta.json: a Megatron prefix, read as {ctx.dtype} (dtype code"
                   f" {ctx.megatron_idx.dtype_code}), n_vocab {ctx.n_vocab} ({enc.name}); no checksums or tokenizer record to compare")
    elif folder is not None:
        report.add(META, formats.META_JSON, Status.WARN, f"{folder}: no meta.json: read as {ctx.dtype}, n_vocab {ctx.n_vocab} ({enc.name})")
    else:
        report.add(META, path.name, Status.SKIP, f"no meta.json beside {path.name}: read as {ctx.dtype}, n_vocab {ctx.n_vocab} ({enc.name})")


@check("provenance", help="each document's source record (input, offset, line, id) is sound",
       reads="meta.json, provenance records, document indexes", stage="dataset")
def provenance(report: Report, ctx) -> None:
    """Where each document came from (datasets written before it have none; a meta.json that
    does not read: the meta line says why)."""
    if ctx.meta is not None and ctx.meta_error is None:
        check_provenance(report, ctx.meta, ctx.meta_file, ctx.targets)


META, PROVENANCE = meta.spec, provenance.spec


def check_meta(report, meta, meta_file, targets, scans, enc, enc_error, ranks_sha=None) -> None:
    problems: list[str] = []
    item = meta.itemsize
    for t in targets:
        e, s = t.entry, scans[t.path]
        if e is None:
            continue
        where = f"splits.{t.split}"
        if e.bytes != s.size:
            problems.append(f"{where}.bytes {e.bytes} but {t.label} has {s.size}")
        if e.tokens != s.n or e.tokens * item != s.size:
            problems.append(f"{where}.tokens {e.tokens} but {t.label} holds {s.n} (+{s.stray} stray bytes)")
        if e.checksum != s.checksum:
            problems.append(f"{where}.checksum {e.checksum} but {t.label} hashes to {s.checksum}")
        mt = e.max_token
        if mt is not None and s.max_id is not None and not s.stray and mt != s.max_id:
            problems.append(f"{where}.max_token {mt} but the largest id in {t.label} is {s.max_id}")
        if s.max_id is not None and s.max_id > formats.dtype_max(meta.dtype):
            problems.append(f"dtype {meta.dtype} cannot hold id {s.max_id}")
        if e.sharded:
            problems += _shard_doc_problems(s, e, where)
            continue
        if e.has_doc_index and e.doc_index is None:
            problems.append(f"{where}.doc_index is None, not a file name")
            continue
        di = e.doc_index or formats.doc_index_name(t.split)  # v1 files written before doc_index: the default name
        eot = meta.tokenizer.get("eot") if meta.eot_appended and isinstance(meta.tokenizer, dict) else None
        problems += _doc_index_problems(meta_file.parent / di, e, s, where, eot if formats.is_int(eot) else None)
    tok = meta.tokenizer
    if enc_error is not None:
        problems.append(f"tokenizer {meta.tokenizer_name!r} does not load: {enc_error}")
    elif enc is not None:
        if ranks_sha is not None:
            ranks_sha.result()  # the hash was computed in the background; mismatches reads it
        problems += tokenizer.mismatches(enc, tok)
    label = meta_file.name if not targets or meta_file.parent == targets[0].path.parent else str(meta_file)
    if problems:
        report.add(META, label, Status.FAIL, f"{len(problems)} disagreement(s): " + "; ".join(problems), problems=problems)
    else:
        what = (f"tokens, bytes, documents, checksums and tokenizer {meta.tokenizer_name!r} agree with the files" if targets
                else f"tokenizer {meta.tokenizer_name!r} agrees; no .bin in this layout: the splits are checked through their llm.c shards")
        report.add(META, label, Status.PASS, what)


def check_provenance(report: Report, meta: formats.Meta, meta_file: Path, targets) -> None:
    """One ``provenance`` line per split: its records against the document index and inputs."""
    from ..provenance import split_problems

    if not isinstance(meta.extra.get("provenance"), dict):
        report.add(PROVENANCE, meta_file.name, Status.SKIP, "no provenance recorded (a dataset written before winsample kept it)")
        return
    for t in targets:
        if t.entry is None:
            continue
        label = formats.prov_name(t.split)
        docs = t.entry.documents
        problems = split_problems(meta_file.parent, meta, t.split, docs)
        if problems:
            report.add(PROVENANCE, label, Status.FAIL, f"{len(problems)} problem(s): " + "; ".join(problems), problems=problems)
        else:
            report.add(PROVENANCE, label, Status.PASS, f"{docs} record(s), one per document of {t.label}: inputs, offsets, lines and ids sound",
                       records=docs)


def _doc_index_problems(p: Path, e: formats.SplitEntry, s: FileScan, where: str, eot: int | None = None) -> list[str]:
    """The document index against meta.json and the tokens; ``eot``: the id encode appended to
    every document (meta.json's ``eot_appended``), so the id before each start is that EOT."""
    if not p.exists():
        return [f"{where}: document index {p.name} is missing"]
    try:
        starts = formats.read_doc_index(p)
    except WinsampleError as err:
        return [f"{where}: {err}"]
    out = []
    if len(starts) != e.documents:
        out.append(f"{where}.documents {e.documents} but {p.name} lists {len(starts)}")
    if len(starts):
        if starts[0] != 0 or np.any(np.diff(starts) <= 0) or starts[-1] >= max(s.n, 1):
            out.append(f"{p.name}: document starts must begin at 0, increase, and stay below N = {s.n}")
        elif eot is not None and not s.stray and s.n:
            off = _ends_without_eot(s.tokens(), starts, eot)
            if off is not None:
                out.append(f"{p.name}: {off[0]} document(s) do not end with the EOT {eot} encode appended, the first"
                           f" at token {off[1]} (a start moved into a document?)")
    return out


END_STEP = 1 << 20  # document ends gathered at a time


def _ends_without_eot(tokens: np.ndarray, starts: np.ndarray, eot: int) -> tuple[int, int] | None:
    """(how many, the first position) of the ids just before a document start that are not
    ``eot``, or None: a start moved into a document no longer follows its EOT. One id per
    document, gathered in bounded steps (the file's last id is not looked at: --split tail cuts a
    document between train and val)."""
    count, first = 0, None
    for a in range(1, len(starts), END_STEP):
        ends = np.asarray(starts[a : a + END_STEP], np.int64) - 1
        off = ends[np.asarray(tokens[ends]) != eot]
        count += len(off)
        first = int(off[0]) if first is None and len(off) else first
    return (count, first) if count else None


def _shard_doc_problems(scan: FileScan, entry: formats.SplitEntry, where: str) -> list[str]:
    """The document-index check for a sharded split: counts and order, across shards."""
    out = list(getattr(scan, "shard_problems", []))
    try:
        starts = scan.tokens().doc_starts()
    except WinsampleError as e:
        return out + [f"{where}: {e}"]
    if len(starts) != entry.documents:
        out.append(f"{where}.documents {entry.documents} but the shard indexes list {len(starts)}")
    if len(starts) and (starts[0] != 0 or np.any(np.diff(starts) <= 0) or starts[-1] >= max(scan.n, 1)):
        out.append(f"{where}: document starts across shards must begin at 0, increase, and stay below N = {scan.n}")
    return out
