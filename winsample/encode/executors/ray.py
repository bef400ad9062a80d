"""``winsample encode --engine ray``: the same bytes as the local engine, encoded by Ray tasks.

Ray is optional (``pip install 'winsample[ray]'``) and imported only inside these functions,
so ``import winsample`` never loads it. What a document becomes — the split rule, EOT, empty
documents skipped, ids, split writers, meta.json, the final checks and the summary — is the
local runner's, from ``pipeline.py``; this module owns only what is Ray's: shard planning, the
tasks and their retries, the tail cut across shards and ``--merge``.

Plan (driver, deterministic): inputs in order are packed into shards of about
``shard_bytes`` input bytes. A shard is a list of pieces ``(file, start, end)`` (bytes); small
files share a shard, and an uncompressed text or JSONL file that does not fit is cut — text
at the first safe cut (the tokenizer's ``iter_safe_cuts``) at or after the target byte (so its ids equal those of the
whole document), JSONL after a line end. ``.gz``, ``.zst``, Parquet and Arrow files are never cut.

Tasks (one per shard, ``max_retries`` on a dead worker): each writes
``shards/{train,val}-NNNNN.bin`` (``all-NNNNN`` with ``--split tail``), their document
indexes, and ``shards/shard-NNNNN.json`` last. A rerun first checks a shard's meta, its
key (inputs with size and mtime, options) and its files' sizes and checksums; an intact shard
is reused, anything else is recomputed.

Split decisions:

- ``doc``: a document inside one shard is decided in that shard by ``pipeline.DocRule``, as
  the local runner decides it (xxh3_64 of seed and text). A text file cut across shards is ONE document, so it is decided
  once, by a separate task that streams the whole file (hash and "has any text"); the shards
  holding its pieces take that result as an argument (Ray runs them after it). Its first piece
  records the document start; its last piece appends the EOT.
- ``tail``: tasks write one stream per shard; when all have reported, the driver computes the
  global cut ``N - floor(N × fraction)`` and rewrites only the shard the cut falls in, as a
  train head and a val tail.

The driver then writes meta.json describing the sharded dataset (``formats`` docstring), or
with ``merge`` concatenates the shards into train.bin / val.bin (streaming copy, hashed as it
is copied) and writes the ordinary meta.json, whose split entries equal the local engine's.

``merge`` where the local runner's parts spread the input as shards would: no shards at all,
the local runner with Ray tasks as its pool (``ray_parts``).
"""

from __future__ import annotations

import math
import os
import shutil
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import xxhash

from ... import disk, formats, tokenizer
from ...errors import ConfigError, DataError, InputError, WinsampleError
from ...tokenizer.chunking import TextChunker
from .. import inputs, pipeline, ranges
from ..config import DEFAULT_SHARD_BYTES, EncodeConfig, RunSpec, parse_size  # noqa: F401 (re-exported)
from ..pipeline import LONG_RUN_CHARS, PIECE_CHARS, DocRule, SplitWriter, check_pattern, encode_texts, write_index
from ..ranges import RangeFault, range_error
from ..textfile import TextFile
from .local import PIECE_BYTES
from .ray_cluster import import_ray, on_cluster
from .ray_plan import plan_shards
from .shards import copy_into, hash_file

MAX_RETRIES = 3  # Ray re-runs a task whose worker died this many times
# --- the shard task -------------------------------------------------------------------------

@dataclass(frozen=True)
class ShardJob:
    """What every task of one run needs: where to write, the tokenizer and the options that
    decide the bytes (all in a shard's key, but ``out_dir`` and ``backend``)."""

    out_dir: str
    encoding: str
    pattern: str
    dtype: str
    split: str
    tokenizer_file: str | None
    fraction: float
    seed: int
    eot: bool
    eot_id: int | None
    errors: str
    text_field: str
    id_field: str | None
    backend: str
    bos: bool = False
    bos_id: int | None = None
    tokenizer_sha256: str | None = None

    @classmethod
    def of(cls, spec: RunSpec, out_dir: Path, enc, backend: str) -> ShardJob:
        c = spec.config
        return cls(
            out_dir=str(out_dir.resolve()), encoding=c.encoding, pattern=c.pattern or "gpt2", dtype=spec.dtype,
            split=c.split, tokenizer_file=str(Path(c.tokenizer_file).resolve()) if c.tokenizer_file else None,
            fraction=c.val_fraction, seed=c.seed, eot=c.eot, eot_id=enc.eot, errors=c.errors, text_field=c.text_field,
            id_field=c.id_field, backend=backend, bos=c.bos, bos_id=enc.bos if c.bos else None,
            # a changed tokenizer.json / .model at the same path must not reuse shards
            tokenizer_sha256=enc.sha256 if enc.family != "tiktoken" else None,
        )

    def keyed(self) -> dict:
        """The options in a shard's key, as they always were: ``bos`` only when asked (shards
        made before --bos existed keep their keys), the tokenizer's hash only for files."""
        out = {k: v for k, v in asdict(self).items() if k not in ("out_dir", "backend")}  # every backend writes the same bytes
        if not self.bos:
            del out["bos"], out["bos_id"]
        if self.tokenizer_sha256 is None:
            del out["tokenizer_sha256"]
        return out

    def rule(self) -> DocRule:
        return DocRule(self.split, self.fraction, self.seed, self.eot, self.eot_id, self.dtype, self.bos_id if self.bos else None)


_ENC: dict = {}  # a worker process's tokenizer, kept for its next task of the same job


def _encoding(job: ShardJob):
    key = (job.encoding, job.tokenizer_file, job.pattern, job.backend)
    if key not in _ENC:
        _ENC.clear()
        # the driver chose the backend (its self-check passed there); fast checks itself again here
        _ENC[key] = tokenizer.with_backend(tokenizer.load(*key[:3]), key[3])[0]
    return _ENC[key]


def _source(p: dict) -> inputs.Source:
    return inputs.Source(p["label"], Path(p["path"]), p["kind"], p["gz"], p["size"], zst=p["zst"])


def _check_unchanged(p: dict, st: os.stat_result | None = None) -> None:
    """DataError if input ``p`` (or ``st``, its stat as a reader opened it) is not as planned."""
    try:
        st = st or os.stat(p["path"])
    except OSError as e:
        raise InputError(f"{p['label']}: cannot read: {e.strerror}") from None
    if (st.st_size, st.st_mtime_ns) != (p["size"], p["mtime_ns"]):
        raise DataError(f"{p['label']}: the file changed since the job was planned ({p['size']} bytes then, {st.st_size} now); encode a stable copy")


def decide_text(p: dict, job: ShardJob) -> tuple[bool, bool]:
    """(goes to val, has any non-whitespace text) for the one document of text file ``p``.

    The same rule as the local runner (``pipeline.DocRule``). Hashing reads and checks the whole
    file (DataError on invalid UTF-8 or a NUL byte, as the local engine); without it, reading
    stops at the first non-whitespace text, since every shard task checks its own byte range
    anyway and the whole file's shards wait on this answer.
    """
    _check_unchanged(p)
    rule = job.rule()
    h = rule.hasher()
    has_text = False
    for _where, doc in inputs.iter_documents([_source(p)], text_field=job.text_field, errors=job.errors):
        for text in doc:
            rule.feed(h, text)
            if not has_text and rule.has_text(text):
                has_text = True
                if h is None:
                    return False, True
    return rule.val_of_hash(h), has_text


def _documents(p: dict, start: int, end: int, job: ShardJob, replaced: inputs.Replaced, lines: dict | None = None):
    """(where, document, origin) for the documents of piece ``[start, end)`` of input ``p``
    (``inputs.iter_documents`` for a whole file, else ``ranges.range_documents``)."""
    _check_unchanged(p)
    if start == 0 and end == p["size"]:
        src = _source(p)
        yield from inputs.iter_documents([src], text_field=job.text_field, errors=job.errors, id_field=job.id_field,
                                         origins=True, index=p["index"], replaced=replaced)
        if lines is not None and src.decompressed is not None:  # a .gz / .zst read whole: meta.json records its size
            lines["decompressed"] = src.decompressed
        return
    yield from ranges.range_documents(p["label"], p["path"], p["kind"], p["index"], start, end, text_field=job.text_field,
                                      errors=job.errors, id_field=job.id_field, replaced=replaced, counted=lines)


def _outputs_intact(out: Path, meta: formats.ShardMeta) -> bool:
    for e in meta.splits.values():
        path, idx = out / e.file, out / e.doc_index if e.doc_index else None
        try:
            if path.stat().st_size != e.bytes or idx is None or not idx.exists():
                return False
            if disk.checksum_file(path) != e.checksum or len(formats.read_doc_index(idx)) != e.documents:
                return False
            x = e.extra
            rec, ids = out / x["prov"], out / x["prov_ids"]
            if rec.stat().st_size != e.documents * formats.PROV_DTYPE.itemsize or ids.stat().st_size != x["prov_id_bytes"]:
                return False
            if disk.checksum_file(rec) != x["prov_checksum"] or disk.checksum_file(ids) != x["prov_ids_checksum"]:
                return False
        except (OSError, WinsampleError, KeyError, TypeError):
            return False
    return bool(meta.splits)


class _ShardEncoder:
    """One shard's documents into its split writers: the local runner's steps, one shard at a time."""

    def __init__(self, job: ShardJob, work: Path):
        self.job, self.enc, self.rule = job, _encoding(job), job.rule()
        self.writers = {n: SplitWriter(work, n, job.dtype) for n in self.rule.writers}
        self.continues = dict.fromkeys(self.writers, False)
        self.stats = pipeline.new_stats()
        self.replaced = inputs.Replaced()
        self.piece_lines: dict[int, dict] = {}  # piece number -> {"lines": n} for a JSONL piece read as a range,
        # {"decompressed": n} for a .gz / .zst read whole

    def write_text(self, w: SplitWriter, texts, where) -> None:
        chunker = TextChunker(PIECE_CHARS, LONG_RUN_CHARS, self.enc.last_safe_cut)
        for text in texts:
            for piece in chunker.feed(text):
                self._write_piece(w, piece, where)
        for piece in chunker.finish():
            self._write_piece(w, piece, where)
        self.stats["forced_cuts"] += chunker.forced_cuts

    def _write_piece(self, w: SplitWriter, piece: str, where) -> None:
        ids, _, maxes = encode_texts(self.enc, self.job.dtype, [piece], where)
        w.write(ids, int(maxes[0]))

    def start_doc(self, w: SplitWriter, origin: inputs.Origin) -> None:
        w.start_doc()
        w.add_origin(origin)
        if self.rule.bos_ids is not None:  # encode --bos
            w.write(self.rule.bos_ids, self.rule.bos_id)

    def end_doc(self, w: SplitWriter) -> None:
        if self.rule.eot_ids is not None:
            w.write(self.rule.eot_ids, self.rule.eot_id)

    def cut_piece(self, p: dict, start: int, end: int, decision: tuple[bool, bool]) -> None:
        """A piece of a text file cut across shards: one document, decided by ``decide_text``."""
        first, last = start == 0, end == p["size"]
        val, has_text = decision
        if first:
            self.stats["documents"] += 1
            self.stats["documents_skipped_empty"] += not has_text
        dest = self.rule.dest(has_text, val)
        if dest == "skip":
            return
        w = self.writers[dest]
        if first:
            self.start_doc(w, inputs.Origin(p["index"], 0, 1, None))  # a text file is one document from byte 0
        elif w.tokens == 0 and w.documents == 0:
            self.continues[w.name] = True
        if not self._write_ranges(w, p, start, end):
            for where, doc, _origin in _documents(p, start, end, self.job, self.replaced):
                self.write_text(w, doc, where)
        if last:
            self.end_doc(w)

    def _write_ranges(self, w: SplitWriter, p: dict, start: int, end: int) -> bool:
        """Bytes ``[start, end)`` of text file ``p`` encoded as the local runner encodes a part of
        one (``TextFile.ranges``: UTF-8 bytes straight to the engine, no str built), or False
        where the file takes the decoded path (``TextFile.open``: a BOM, ``--errors replace``…)."""
        _check_unchanged(p)
        src = _source(p)
        tf = TextFile.open(src, p["index"], self.job.errors, 0, self.enc.last_safe_cut_bytes, LONG_RUN_CHARS)
        if tf is None:
            return False
        try:
            _check_unchanged(p, tf.stat)  # what was opened, not only what was looked at before
            for spec in tf.ranges(PIECE_BYTES, None, None, start, end):
                ids, _, maxes = encode_texts(self.enc, self.job.dtype, [spec], p["label"])
                w.write(ids, int(maxes[0]))
        except RangeFault as f:
            tf.abort()
            raise range_error(src, *f.args[1:]) from None
        except BaseException:
            tf.abort()
            raise
        tf.close()
        self.stats["forced_cuts"] += tf.forced_cuts
        return True

    def piece(self, k: int, p: dict, start: int, end: int) -> None:
        """Whole documents: JSONL lines, Parquet rows, a whole text file."""
        val = has_text = None
        if p["kind"] == "text":  # a whole text file: decide first (one extra read), then encode
            val, has_text = decide_text(p, self.job)
        counted = self.piece_lines[k] = {}
        for where, doc, origin in _documents(p, start, end, self.job, self.replaced, counted):
            self.stats["documents"] += 1
            if isinstance(doc, str):
                has_text, val = self.rule.has_text(doc), self.rule.val_of_text(doc)
                texts = (doc[i : i + PIECE_CHARS] for i in range(0, len(doc), PIECE_CHARS))
            else:
                texts = doc
            dest = self.rule.dest(has_text, val)
            if dest == "skip":
                self.stats["documents_skipped_empty"] += 1
                for _ in texts:  # still read it: errors in it must surface as locally
                    pass
                continue
            w = self.writers[dest]
            self.start_doc(w, origin)
            self.write_text(w, texts, where)
            self.end_doc(w)

    def run(self, pieces: list, decisions: tuple) -> None:
        try:
            for k, (p, start, end, dec) in enumerate(pieces):
                if p["kind"] == "text" and not (start == 0 and end == p["size"]):
                    self.cut_piece(p, start, end, decisions[dec])
                else:
                    self.piece(k, p, start, end)
        finally:
            for w in self.writers.values():
                w.close()
        self.stats["replaced_characters"] = self.replaced.count

    def entries(self, work: Path, out: Path, idx: int) -> dict[str, formats.ShardEntry]:
        """Each writer's files moved into ``out`` under the shard's names, and their entries."""
        entries = {}
        for n, w in self.writers.items():
            size = w.path.stat().st_size
            if size != w.tokens * w.item:
                raise DataError(f"{w.path}: wrote {size} bytes, expected {w.tokens} tokens × {w.item}")
            docs = work / formats.doc_index_name(n)
            write_index(work, w.starts_path, docs, w.documents)
            e = pipeline.split_entry(n, w, file=formats.shard_bin_name(n, idx), doc_index=formats.shard_doc_index_name(n, idx))
            # provenance records of the documents starting here (raw; the driver joins them)
            prov = {"prov": formats.shard_prov_name(n, idx), "prov_ids": formats.shard_prov_ids_name(n, idx),
                    "prov_id_bytes": w.prov.id_bytes, "prov_checksum": disk.format_checksum(w.prov.rec_hasher),
                    "prov_ids_checksum": disk.format_checksum(w.prov.ids_hasher)}
            entries[n] = formats.ShardEntry(e.file, e.doc_index, e.tokens, e.bytes, e.documents, e.max_token, e.checksum,
                                            self.continues[n], extra=prov)
            os.replace(w.path, out / e.file)
            os.replace(docs, out / e.doc_index)
            os.replace(w.prov.rec_path, out / prov["prov"])
            os.replace(w.prov.ids_path, out / prov["prov_ids"])
        return entries


def shard_task(job: ShardJob, shard: dict, *decisions) -> formats.ShardMeta:
    """Encode one shard into ``OUT_DIR/shards``; return its meta (``reused``: it was intact).

    Documents go where ``pipeline.DocRule`` sends them, their ids from ``pipeline.encode_texts``
    into ``pipeline.SplitWriter``s: the local runner's steps, one shard at a time.
    """
    out = Path(job.out_dir)
    idx = shard["index"]
    meta_path = out / formats.shard_meta_name(idx)
    old = formats.read_shard_meta(meta_path)
    if old is not None and old.key == shard["key"] and _outputs_intact(out, old):
        old.reused = True
        return old
    meta_path.unlink(missing_ok=True)

    work = out / formats.SHARDS_DIR / f".work-{idx:05d}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    encoder = _ShardEncoder(job, work)
    encoder.run(shard["pieces"], decisions)  # if it fails, the driver removes the work folder (_run_tasks)
    entries = encoder.entries(work, out, idx)
    inputs_ = []
    for k, (p, s, e, _) in enumerate(shard["pieces"]):
        inputs_.append({"path": p["label"], "start": s, "end": e})
        for key in ("lines", "decompressed"):
            if key in encoder.piece_lines.get(k, {}):
                inputs_[-1][key] = encoder.piece_lines[k][key]
    meta = formats.ShardMeta(index=idx, key=shard["key"], inputs=inputs_, stats=encoder.stats, splits=entries,
                             input_bytes=sum(e - s for _, s, e, _ in shard["pieces"]))
    formats.write_shard_meta(meta_path, meta)
    shutil.rmtree(work, ignore_errors=True)
    return meta


# --- the driver -----------------------------------------------------------------------------


def encode_ray(inputs: Sequence[str], out_dir: str | Path, *, progress=None, notice=None, **options) -> dict:
    """Encode ``inputs`` on Ray into a sharded dataset in OUT_DIR (or, ``merge``, an ordinary one).

    Options as ``encode.encode_corpus`` (``EncodeConfig``'s fields); ``address``: ``ray.init``
    address (None: start a local cluster of ``workers`` CPUs, default all); ``shard_size``:
    input bytes per task. OUT_DIR must be on storage every node sees. Returns the summary of
    ``encode_corpus`` plus ``shards`` and ``shards_reused``. ``progress(nbytes, ntokens,
    total=None)`` per finished shard.
    """
    return run_ray(EncodeConfig.of(inputs, out_dir, engine="ray", **options), progress=progress, notice=notice)


@dataclass
class _Setup:
    """What the driver settled before any task: the run's spec, tokenizer, inputs, OUT_DIR."""

    spec: RunSpec
    enc: object
    backend_entry: dict
    sources: list
    out_dir: Path


def _prepare(config: EncodeConfig, notice) -> _Setup:
    """The checks before anything is written, in the order they always ran."""
    enc = tokenizer.choose_eot(tokenizer.load(config.encoding, config.tokenizer_file, config.pattern or "gpt2"), config.eot_token)
    check_pattern(enc, config.tokenizer_file, config.pattern)
    dtype = pipeline.resolve_dtype(enc, config.dtype)
    backend_entry = tokenizer.with_backend(enc, config.backend)[1]
    if notice is not None and backend_entry.get("note"):
        notice(backend_entry.pop("note"))
    pipeline.check_edges(enc, config.eot, config.bos)
    sources = inputs.resolve_inputs(list(config.inputs), config.fmt, notice)
    for s in sources:
        if s.path is None:
            raise ConfigError("--engine ray reads inputs from files every node can see, not stdin: save it to a file first")
    out_dir = pipeline.check_out_dir(config.out_dir, sources, config.tokenizer_file, sharded=True)
    pipeline.check_split_possible(sources, config.split, config.val_fraction)
    try:
        (out_dir / formats.SHARDS_DIR).mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(f"{out_dir}: cannot create output folder: {e.strerror}") from None
    return _Setup(RunSpec(config, dtype, enc.eot, enc.bos), enc, backend_entry, sources, out_dir)


def run_ray(config: EncodeConfig, *, progress=None, notice=None) -> dict:
    """``encode_ray`` with its options as one ``EncodeConfig``."""
    ray = import_ray()
    if config.merge:
        from . import local
        from .ray_parts import parts_spread, run_parts_on_ray

        setup = local.prepare(config, notice, parts=True)
        if setup.plan is not None and parts_spread(setup):  # the local runner's parts, each encoded by a Ray task
            setup.keep_parts = True
            return on_cluster(ray, config, lambda: run_parts_on_ray(ray, setup, progress))
        notice = None  # what prepare had to say is said: not twice
    return _run_shards(ray, config, progress, notice)


def _run_shards(ray, config: EncodeConfig, progress, notice) -> dict:
    """A sharded dataset (or, ``merge``, one that makes no parts) from Ray's own shard tasks."""
    t0 = time.perf_counter()
    setup = _prepare(config, notice)
    enc, sources, out_dir = setup.enc, setup.sources, setup.out_dir
    describe = enc.describe()
    job = ShardJob.of(setup.spec, out_dir, enc, setup.backend_entry["name"])
    with disk.locked(out_dir):
        formats.recover(out_dir)
        plan = plan_shards(sources, config.shard_bytes, enc)
        metas = on_cluster(ray, config, lambda: _run_tasks(ray, job, sources, plan, progress), commits=False)  # committed below
        splits, stats = _finish(out_dir, metas, config, sources, setup.spec.dtype)
        for shard, m in zip(plan, metas):  # a compressed input's decompressed size, as its task read it
            for (i, _a, _b), rec in zip(shard, m.inputs):
                if isinstance(rec.get("decompressed"), int):
                    sources[i].decompressed = rec["decompressed"]
        prov_segs = _prov_segments(out_dir, plan, metas, splits, sources, tail=config.tail)
        meta = pipeline.build_meta(sources, describe, setup.spec, splits, stats)
        meta.extra["backend"] = setup.backend_entry
        _write_dataset(out_dir, config, meta, metas, splits, prov_segs)
    extra = {"encoding": enc.name, "dtype": setup.spec.dtype, "engine": "ray", "merged": config.merge, "shards": len(metas),
             "shards_reused": sum(m.reused for m in metas)}
    return pipeline.summary(out_dir, meta, stats, sources, time.perf_counter() - t0, extra)


def _write_dataset(out_dir: Path, config: EncodeConfig, meta: formats.Meta, metas: list, splits: dict, prov_segs: dict) -> None:
    """Commit the result: merged into train.bin / val.bin (``merge``), or meta.json over the shards."""
    id_field = config.id_field
    keep = {formats.shard_meta_name(m.index) for m in metas}
    for m in metas:
        for e in m.splits.values():
            keep |= {e.file, e.doc_index, e.extra["prov"], e.extra["prov_ids"]}  # raw records: a rerun reuses the shard
    if config.merge:
        _merge(out_dir, meta, prov_segs, id_field)
        shutil.rmtree(out_dir / formats.SHARDS_DIR, ignore_errors=True)
        return
    for s in splits.values():
        for e in s.shards:
            keep |= {e.file, e.doc_index}
    meta.sharded = {
        "layout": formats.SHARD_LAYOUT, "version": 1, "count": len(metas), "shard_bytes": config.shard_bytes,
        "shards": [{"index": m.index, "meta": formats.shard_meta_name(m.index), "inputs": m.inputs} for m in metas],
    }
    # provenance is one file per split, as --merge and the local engine write it
    meta.extra["provenance"] = formats.prov_meta(id_field, {
        s: formats.write_provenance(out_dir, s, prov_segs[s], id_field) for s in formats.SPLITS})
    leftovers = pipeline.plain_set_leftovers(out_dir, id_field)  # an earlier run's ids, a records run's masks
    formats.write_meta(out_dir / formats.META_JSON, meta)
    for name in leftovers:
        (out_dir / name).unlink(missing_ok=True)
    # the meta now describes the shards: files of an earlier merged or local set go
    for s in formats.SPLITS:
        for name in (formats.bin_name(s), formats.doc_index_name(s)):
            (out_dir / name).unlink(missing_ok=True)
    _prune(out_dir, keep)


def _shard_key(job: ShardJob, pieces: list) -> str:
    keyed = job.keyed()
    if job.split == "tail":  # tail shards do not depend on the fraction or seed: reusable
        keyed.pop("fraction"), keyed.pop("seed")
    return xxhash.xxh3_128_hexdigest(repr((sorted(keyed.items()), pieces)).encode())


def _run_tasks(ray, job: ShardJob, sources, plan, progress) -> list[dict]:
    task = ray.remote(num_cpus=1, max_retries=MAX_RETRIES)(shard_task)
    decide = ray.remote(num_cpus=1, max_retries=MAX_RETRIES)(decide_text)
    info = []
    for s in sources:
        st = os.stat(s.path)
        info.append({"label": s.label, "path": str(s.path.resolve()), "kind": s.kind, "gz": s.gz, "zst": s.zst,
                     "size": st.st_size, "mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns, "index": len(info)})
    cut_files = {i for shard in plan for i, a, b in shard if sources[i].kind == "text" and not (a == 0 and b == info[i]["size"])}
    decision_refs = {i: decide.remote(info[i], job) for i in sorted(cut_files)}
    refs = {}
    for k, shard in enumerate(plan):
        args, pieces = [], []
        for i, a, b in shard:
            dec = None
            if i in decision_refs:
                dec = len(args)
                args.append(decision_refs[i])
            pieces.append((info[i], a, b, dec))
        # the input's index is in the key: provenance records name inputs by index
        key = _shard_key(job, [(info[i]["path"], info[i]["size"], info[i]["mtime_ns"], info[i]["ctime_ns"], a, b, i)
                               for i, a, b in shard])
        refs[task.remote(job, {"index": k, "pieces": pieces, "key": key}, *args)] = k
    if progress:
        progress(0, 0, sum(p["size"] for p in info))
    results: dict[int, dict] = {}
    pending = list(refs)
    try:
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            for r in done:
                try:
                    m = ray.get(r)
                except ray.exceptions.RayTaskError as e:
                    cause = getattr(e, "cause", None)
                    if isinstance(cause, WinsampleError):
                        raise cause from None
                    raise InputError(f"shard {refs[r]}: Ray task failed: {type(cause or e).__name__}: {cause or e}".splitlines()[0]) from None
                except ray.exceptions.RayError as e:
                    raise InputError(f"shard {refs[r]}: Ray could not run the task: {str(e).splitlines()[0]}") from None
                results[refs[r]] = m
                if progress:
                    progress(m.input_bytes, sum(e.tokens for e in m.splits.values()))
    except BaseException:
        for r in pending:
            ray.cancel(r, force=True)
        if pending:  # a task killed mid-shard leaves its work folder: gone once no task can write on
            ray.wait(pending, num_returns=len(pending), timeout=10)
        for work in (Path(job.out_dir) / formats.SHARDS_DIR).glob(".work-*"):
            shutil.rmtree(work, ignore_errors=True)
        raise
    return [results[k] for k in range(len(plan))]


def _split_entry(name: str, parts: list[formats.ShardEntry]) -> formats.SplitEntry:
    maxes = [p.max_token for p in parts if p.max_token is not None]
    return formats.SplitEntry(
        file=formats.bin_name(name), doc_index=None, tokens=sum(p.tokens for p in parts), bytes=sum(p.bytes for p in parts),
        documents=sum(p.documents for p in parts), max_token=max(maxes) if maxes else None,
        checksum=disk.combine_checksums((p.bytes, p.checksum) for p in parts), shards=parts,
    )


def _finish(out_dir: Path, metas: list[formats.ShardMeta], config: EncodeConfig, sources, dtype: str) -> tuple[dict, dict]:
    """Split entries of the sharded dataset (cutting one shard for --split tail) and stats; the local engine's checks."""
    stats = {k: sum(m.stats[k] for m in metas) for k in pipeline.STATS}
    frac, tail = config.val_fraction, config.tail
    if tail:
        parts = {"train": [], "val": []}
        alls = [m.splits["all"] for m in metas]
        offsets = np.concatenate([[0], np.cumsum([a.tokens for a in alls])])
        n = int(offsets[-1])
        cut = n - math.floor(n * frac)
        stats["tail_cut"] = cut
        k = int(np.searchsorted(offsets, cut, "right")) - 1  # the non-empty shard holding token `cut`
        for j, a in enumerate(alls):
            if j < k or k >= len(alls):
                parts["train"].append(a)
            elif j > k:
                parts["val"].append(a)
            else:
                head, tail_part = _cut_shard(out_dir, metas[j].index, a, cut - int(offsets[j]), dtype)
                parts["train"].append(head)
                parts["val"].append(tail_part)
    else:
        parts = {s: [m.splits[s] for m in metas] for s in formats.SPLITS}
    splits = {s: _split_entry(s, parts[s]) for s in formats.SPLITS}
    pipeline.check_outcome(sources, stats, splits["train"].tokens, splits["val"].tokens, frac, tail)
    return splits, stats


def _cut_shard(out_dir: Path, idx: int, a: formats.ShardEntry, c: int, dtype: str) -> tuple[formats.ShardEntry, formats.ShardEntry]:
    """Write shard ``idx``'s stream as train (tokens [0, c)) and val ([c, end)) files; their entries."""
    tokens = formats.open_tokens(out_dir / a.file, dtype)
    starts = formats.read_doc_index(out_dir / a.doc_index)
    k = int(np.searchsorted(starts, c, "left"))
    head_starts = starts[:k]
    tail_starts = starts[k:] - c
    if c < len(tokens) and (len(tail_starts) == 0 or tail_starts[0] != 0):
        tail_starts = np.concatenate([[0], tail_starts])  # val starts with the tail piece of a document
    item = np.dtype(dtype).itemsize
    out = []
    for name, lo, hi, st, cont in (("train", 0, c, head_starts, a.continues), ("val", c, len(tokens), tail_starts, False)):
        file, doc_index = formats.shard_bin_name(name, idx), formats.shard_doc_index_name(name, idx)
        h, mx = disk.new_hasher(), -1
        with disk.atomic_open(out_dir / file) as f:
            for _, chunk in formats.iter_chunks(tokens[lo:hi], disk.checksums.CHUNK_BYTES // item):
                data = np.ascontiguousarray(chunk).tobytes()
                f.write(data)
                h.update(data)
                mx = max(mx, int(chunk.max()))
        formats.write_doc_index(out_dir / doc_index, st)
        out.append(formats.ShardEntry(file, doc_index, hi - lo, (hi - lo) * item, len(st), mx if hi > lo else None,
                                      disk.format_checksum(h), bool(cont and hi > lo)))
    return out[0], out[1]


def _prov_segments(out_dir: Path, plan, metas: list[dict], splits: dict, sources, tail: bool) -> dict:
    """Each split's provenance as ``formats.prov_segment`` pieces of the shards' raw records.

    A shard that starts inside a JSONL file counted lines from its first byte: the lines of the
    earlier pieces of that file are added. With ``--split tail`` the one stream is cut where the
    tokens were: train gets the first ``documents`` records, val the rest after a copy of the
    record of the document the cut fell inside (as the local engine does).
    """
    seen: dict[int, int] = {}
    names = ["all"] if tail else list(formats.SPLITS)
    segs = {n: [] for n in names}
    for shard, m in zip(plan, metas):
        fix = None
        for (i, a, _b), rec in zip(shard, m.inputs):
            if a > 0 and sources[i].kind == "jsonl":
                fix = (i, seen.get(i, 0))
            seen[i] = seen.get(i, 0) + rec.get("lines", 0)
        for n in names:
            e = m.splits[n].extra
            segs[n].append(formats.prov_segment(out_dir / e["prov"], out_dir / e["prov_ids"], line_fix=fix))
    if not tail:
        return segs
    total = sum(s["hi"] - s["lo"] for s in segs["all"])
    k = splits["train"].documents
    mid = k + splits["val"].documents == total + 1
    return {"train": _slice_segments(segs["all"], 0, k),
            "val": _slice_segments(segs["all"], k - 1 if mid else k, total)}


def _slice_segments(segs: list[dict], lo: int, hi: int) -> list[dict]:
    """Records ``[lo, hi)`` of the concatenation of ``segs``, as segments."""
    out, off = [], 0
    for s in segs:
        n = s["hi"] - s["lo"]
        a, b = max(lo, off), min(hi, off + n)
        if a < b:
            out.append(formats.prov_segment(s["rec"], s["ids"], s["lo"] + a - off, s["lo"] + b - off, s["line_fix"]))
        off += n
    return out


def _merge(out_dir: Path, meta: formats.Meta, prov_segs: dict, id_field: str | None) -> None:
    """Concatenate each split's shards into OUT_DIR/{split}.bin + doc index; commit with meta.json, as a set."""
    stage = formats.staging_dir(out_dir)
    try:
        names = []
        prov = {}
        for s in formats.SPLITS:
            prov[s] = formats.write_provenance(stage, s, prov_segs[s], id_field)
            names += [formats.prov_name(s)] + ([formats.prov_ids_name(s)] if id_field is not None else [])
        meta.extra["provenance"] = formats.prov_meta(id_field, prov)
        for s in formats.SPLITS:
            entry = meta.splits[s]
            written, target = 0, stage / formats.bin_name(s)
            target.touch()
            for e in entry.shards:  # copied in the kernel (copy_file_range), then hashed from mapped pages, once
                size = (out_dir / e.file).stat().st_size
                copy_into(str(out_dir / e.file), str(target), 0, written, size)
                written += size
            if written != entry.bytes:
                raise DataError(f"{out_dir / formats.SHARDS_DIR}: shards of {s} hold {written} bytes, expected {entry.bytes}")
            h = hash_file(target)

            def starts_chunks(entry=entry):
                off = 0
                for j, e in enumerate(entry.shards):
                    st = formats.read_doc_index(out_dir / e.doc_index) + off
                    if j == 0 and e.tokens and (len(st) == 0 or st[0] != 0):
                        st = np.concatenate([[0], st])
                    off += e.tokens
                    yield st

            formats.write_doc_index_stream(stage / formats.doc_index_name(s), entry.documents, starts_chunks())
            meta.splits[s] = formats.SplitEntry(
                file=formats.bin_name(s), doc_index=formats.doc_index_name(s), tokens=entry.tokens, bytes=entry.bytes,
                documents=entry.documents, max_token=entry.max_token, checksum=disk.format_checksum(h),
            )
            names += [formats.bin_name(s), formats.doc_index_name(s)]
        formats.write_meta(stage / formats.META_JSON, meta)
        disk.commit_staged(stage, out_dir, names + [formats.META_JSON], pipeline.plain_set_leftovers(out_dir, id_field))
    except OSError as e:
        formats.recover(out_dir)
        raise InputError(f"{out_dir}: cannot write: {e.strerror or e}") from None
    except BaseException:
        formats.recover(out_dir)
        raise


def _prune(out_dir: Path, keep: set[str]) -> None:
    """Remove files in OUT_DIR/shards that the new dataset does not use (earlier runs' shards)."""
    folder = out_dir / formats.SHARDS_DIR
    for p in folder.iterdir():
        rel = f"{formats.SHARDS_DIR}/{p.name}"
        if rel in keep:
            continue
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)


__all__ = ["encode_ray", "run_ray", "ShardJob", "plan_shards", "parse_size", "DEFAULT_SHARD_BYTES"]
