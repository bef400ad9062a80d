"""The end of a local run: ``--split tail``'s cut of the one stream into train and val
(``finish_tail``), and the foreign layouts derived from the split files (``write_layouts``)."""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np

from ... import disk, formats, tokensrc
from .. import pipeline
from ..config import RunSpec
from ..pipeline import SplitWriter, starts_chunks, write_index


class _Done:
    """Tokens, documents, checksum, max of a finished split (what meta.json reports)."""

    def __init__(self, path, item, tokens, documents, checksum, max_token, dtype):
        self.path, self.item, self.tokens, self.documents = path, item, tokens, documents
        self.checksum, self.max_token, self.dtype = checksum, max_token, dtype


def finish_streams(spec: RunSpec, stage: Path, writers: dict, stats: dict, sources) -> tuple[dict, dict, dict]:
    """The end of a run (one stream, or parts merged): the ``--split tail`` cut, document indexes,
    provenance, the final checks; (each split's writer or ``finish_tail`` record, stats, provenance)."""
    c = spec.config
    if c.tail:
        out, prov = finish_tail(stage, writers["all"], c.val_fraction, spec.dtype, c.id_field)
        stats["tail_cut"] = out["train"].tokens
    else:
        out = writers
        prov = {}
        for s in formats.SPLITS:
            write_index(stage, out[s].starts_path, stage / formats.doc_index_name(s), out[s].documents)
            w = out[s].prov
            with disk.naming(stage / formats.prov_name(s)):
                prov[s] = formats.write_provenance(stage, s, [formats.prov_segment(w.rec_path, w.ids_path)], c.id_field)
    pipeline.check_outcome(sources, stats, out["train"].tokens, out["val"].tokens, c.val_fraction, c.tail)
    return out, stats, prov


def finish_tail(stage: Path, w: SplitWriter, fraction: float, dtype: str, id_field: str | None = None) -> tuple[dict, dict]:
    """Cut the one stream at N - floor(N × fraction): train.bin keeps the head, val.bin gets the tail."""
    n = w.tokens
    cut = n - math.floor(n * fraction)
    item = w.item
    all_path = w.path
    # val.bin: copy the tail, hashing as it is written.
    val_path = stage / formats.bin_name("val")
    vh, vmax = disk.new_hasher(), -1
    with disk.naming(val_path), open(all_path, "rb") as src, open(val_path, "wb") as dst:
        src.seek(cut * item)
        while data := src.read(disk.checksums.CHUNK_BYTES):
            dst.write(data)
            vh.update(data)
            vmax = max(vmax, int(np.frombuffer(data, dtype=dtype).max()))
    # train: the checksum at the cut, from the last snapshot before it (≤ SNAPSHOT_BYTES re-read).
    pos, th, tmax = max((s for s in w.snapshots if s[0] <= cut * item), key=lambda s: s[0])
    th = th.copy()
    with open(all_path, "rb+") as f:
        f.seek(pos)
        left = cut * item - pos
        while left:
            data = f.read(min(left, disk.checksums.CHUNK_BYTES))
            left -= len(data)
            th.update(data)
            tmax = max(tmax, int(np.frombuffer(data, dtype=dtype).max()))
        f.truncate(cut * item)
    train_path = stage / formats.bin_name("train")
    os.replace(all_path, train_path)
    k, vcount, prov = cut_index(stage, w, cut, id_field)
    return {
        "train": _Done(train_path, item, cut, k, disk.format_checksum(th), tmax, dtype),
        "val": _Done(val_path, item, n - cut, vcount, disk.format_checksum(vh), vmax, dtype),
    }, prov


def cut_index(stage: Path, w, cut: int, id_field: str | None) -> tuple[int, int, dict]:
    """The document indexes and provenance of train and val of one stream ``w`` (a writer's
    starts and provenance files) cut at token ``cut``: (train's documents, val's documents,
    each split's provenance entry)."""
    n = w.tokens
    # Document starts: those before the cut stay in train; val's are shifted, and start with
    # the tail piece of a document the cut fell inside.
    starts = np.memmap(w.starts_path, dtype="<i8", mode="r") if w.documents else np.zeros(0, "<i8")
    k = int(np.searchsorted(starts, cut, side="left"))
    mid_doc = cut < n and (k == len(starts) or int(starts[k]) != cut)
    del starts
    write_index(stage, w.starts_path, stage / formats.doc_index_name("train"), k, hi=k)
    vcount = w.documents - k + (1 if mid_doc else 0)
    chunks = starts_chunks(w.starts_path, lo=k, shift=cut)
    if mid_doc:
        chunks = _prepend(np.zeros(1, "<i8"), chunks)
    with disk.naming(stage / formats.doc_index_name("val")):
        formats.write_doc_index_stream(stage / formats.doc_index_name("val"), vcount, chunks)
    # Provenance: train's are the first k records; val's the rest, after a copy of the record of
    # the document the cut fell inside (its tail piece is val's first document).
    rec, ids = w.prov.rec_path, w.prov.ids_path
    val_segs = ([formats.prov_segment(rec, ids, k - 1, k)] if mid_doc else []) + [formats.prov_segment(rec, ids, k)]
    prov = {}
    for s, segs in (("train", [formats.prov_segment(rec, ids, 0, k)]), ("val", val_segs)):
        with disk.naming(stage / formats.prov_name(s)):
            prov[s] = formats.write_provenance(stage, s, segs, id_field)
    return k, vcount, prov


def done(path: Path, item: int, tokens: int, documents: int, checksum: str, max_token: int, dtype: str) -> _Done:
    """A finished split as meta.json reports it (what ``finish_tail`` returns for each side)."""
    return _Done(path, item, tokens, documents, checksum, max_token, dtype)


def _prepend(first, rest):
    yield first
    yield from rest


def write_layouts(work: Path, out_dir: Path, meta: formats.Meta, chosen: tuple, spec: RunSpec) -> tuple[list[str], list[str]]:
    """Write the foreign layouts into ``work`` from its split files; describe them in ``meta``.

    Returns (names to commit, relative to OUT_DIR; names in OUT_DIR to remove: files of layouts
    an earlier run wrote that this set does not have). Reads the .bin files once more (not the
    text), in bounded pieces; the Megatron index needs only the document starts.
    """
    names: list[str] = []
    keep_bin = tokensrc.NANOGPT in chosen or tokensrc.MEGATRON in chosen
    desc: dict = {}
    if keep_bin:
        for s in formats.SPLITS:
            names += [formats.bin_name(s), formats.doc_index_name(s)]
    if tokensrc.NANOGPT in chosen:
        desc[tokensrc.NANOGPT] = {"splits": {s: {"file": formats.bin_name(s), "doc_index": formats.doc_index_name(s)} for s in formats.SPLITS}}
        if tokensrc.needs_meta_pkl(meta.n_vocab):  # nanoGPT's train.py sizes its embedding from it
            with disk.naming(work / tokensrc.META_PKL):
                tokensrc.write_meta_pkl(work / tokensrc.META_PKL, meta.n_vocab)
            desc[tokensrc.NANOGPT]["meta_pkl"] = tokensrc.META_PKL
            names.append(tokensrc.META_PKL)
    dtype = spec.dtype
    shard_tokens = spec.config.shard_tokens
    if tokensrc.MEGATRON in chosen:
        entries = {}
        for s in formats.SPLITS:
            path = work / tokensrc.megatron_index_name(s)
            with disk.naming(path):
                e = tokensrc.write_megatron_index(path, _doc_starts(work, s), meta.splits[s].tokens, dtype)
            entries[s] = dict(e, data=formats.bin_name(s))
            names.append(tokensrc.megatron_index_name(s))
        desc[tokensrc.MEGATRON] = {"version": tokensrc.MEGATRON_VERSION, "dtype_code": tokensrc.MEGATRON_CODES[dtype], "splits": entries}
    if tokensrc.LLMC in chosen:
        entries = {}
        for s in formats.SPLITS:
            tokens = formats.open_tokens(work / formats.bin_name(s), dtype)
            starts = _doc_starts(work, s)
            with disk.naming(work / tokensrc.LLMC_DIR):
                entries[s] = tokensrc.write_llmc_split(work, s, tokens, starts, spec.eot_id, spec.config.eot, shard_tokens)
                names += [sh["file"] for sh in entries[s]["shards"]]
                mask = meta.splits[s].mask
                if mask is not None and mask.tokens:  # records: each shard's loss mask beside it
                    m = np.memmap(work / mask.file, dtype=np.uint8, mode="r", shape=(mask.tokens,))
                    pieces = tokensrc.llmc_mask_stream(tokens, m, starts, spec.eot_id, spec.config.eot)
                    names += tokensrc.write_llmc_masks(work, s, pieces, entries[s]["shards"])
                    del m
            del tokens
        fmt = tokensrc.llmc_format_for(dtype)  # version 1 for uint16 ids, 7 for uint32
        desc[tokensrc.LLMC] = {
            "magic": fmt.magic, "version": fmt.version, "shard_tokens": shard_tokens,
            "eot": spec.eot_id, "eot_before_each_document": True, "splits": entries,
        }
    meta.extra["layouts"] = desc  # tokensrc.py's own entry of meta.json
    if not keep_bin:
        for s in formats.SPLITS:  # the split's logical name stays; its files are not kept
            meta.splits[s].doc_index = None
    remove = [tokensrc.megatron_index_name(s) for s in formats.SPLITS if tokensrc.MEGATRON not in chosen]
    if tokensrc.META_PKL not in names:  # an earlier run's, for another vocabulary
        remove.append(tokensrc.META_PKL)
    if not keep_bin:
        remove += [n for s in formats.SPLITS for n in (formats.bin_name(s), formats.doc_index_name(s))]
    remove += tokensrc.stale_llmc(out_dir, set(names))
    return names, [r for r in remove if os.path.lexists(out_dir / r)]


def _doc_starts(work: Path, split: str) -> np.ndarray:
    """The document starts of a staged split (a read-only memmap of its .docs.npy)."""
    with formats.NPY_HEADER_LOCK:
        return np.load(work / formats.doc_index_name(split), mmap_mode="r", allow_pickle=False)


__all__ = ["finish_tail", "write_layouts"]
