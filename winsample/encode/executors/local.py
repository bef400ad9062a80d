"""``winsample encode``: text → train.bin / val.bin / doc indexes / meta.json, streaming and parallel.

Two ways to run the same pipeline (one set of steps, ``_LocalRun``)::

    read bytes (1 MiB) → UTF-8 decode → cut big documents at safe points (chunking.py)
      → batches of ~1 MiB text → encode_ordinary + range check + cast
      → results in order → hold the current document's ids → train or val writer

**In parts** (``--workers N`` > 1, the usual case; ``shards.py``): N forked workers each run the
whole pipeline on one contiguous part of the input at a time (files, byte ranges of a text
file cut at safe points, line ranges of a JSONL file); the coordinator only plans and merges.
**As one stream** (``--workers 1``, stdin, ``--dedup``, an input of one part): one process reads
and writes; its encoders (``pool.make_pool``) are processes for the reference libraries (they
hold the GIL), threads for the fast engine, as many as the input repays.

At most ``4 × workers`` batches (2 × encoder threads) are in flight, so memory does not grow with the corpus. A
document's ids are held until its end decides its split (in memory up to ``HOLD_BYTES``, then
in a spill file in the staging folder), and everything is written into
``formats.staging_dir(out_dir)`` and committed as one set, meta.json last.

This module is the local runner of the pipeline in ``encode/pipeline.py`` (shared with ``executors.ray``):
the split rule, empty-document skip and EOT (``pipeline.DocRule``), ids, split writers, meta.json
and the summary come from there; batching, the worker pool, holding a document until its split
is known and ``--resume`` are this runner's own. ``--split tail``: val gets the last
``floor(N × fraction)`` of the N tokens, cut at a token boundary (nanoGPT's shakespeare split).
A document cut in two counts in both splits: val's first "document" is then the tail piece.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ... import __version__, disk, formats, tokenizer, tokensrc
from ...errors import ConfigError, DataError, Interrupted, WinsampleError
from ...tokenizer.chunking import TextChunker
from .. import badinput, decoding, inputs, pipeline, resume
from ..config import EncodeConfig, RunSpec
from ..inputs import Origin, iter_documents, jsonl_docs
from ..pipeline import DocCut, DocEnd, DocResume, DocRule, InputDone, Piece, SplitWriter, encode_texts
from ..ranges import RangeFault, SpanReader, range_error, read_text_range
from ..textfile import TextFile
from . import checkpoint, shards
from . import pool as pool_mod
from .finish import finish_streams, write_layouts
from .shards import Span

PIECE_CHARS = pipeline.PIECE_CHARS  # a big document is cut into pieces of about this many chars
LONG_RUN_CHARS = pipeline.LONG_RUN_CHARS  # a stretch this long without a safe cut is cut by force (counted)
TASK_CHARS = 1 << 20  # text per batch sent to a worker: amortises IPC, keeps latency low
PIECE_BYTES = 1 << 20  # a plain-text file is sent to workers as byte ranges of about this size
RANGE_MIN_BYTES = 64 << 10  # smaller plain-text files are read and decoded here and sent as text
INFLIGHT_PER_WORKER = 4  # batches in flight per worker process: covers the main process's stalls, still bounded
WRITE_BACK_SECONDS = 1.0  # how often what is written is synced inside a long input (no checkpoint)
INFLIGHT_PER_THREAD = 2  # per encoder thread (the fast engine): no pipe to cover, less memory held
HOLD_BYTES = 32 << 20  # a document's ids beyond this wait in a spill file, not in memory
PARTS_IN_FLIGHT = 2  # parts handed to the pool per worker (a run in parts): the copies of finished ones wait behind few

ProgressFn = Callable[..., None]


# --- the run ------------------------------------------------------------------------------


def encode_corpus(inputs: Sequence[str], out_dir: str | Path, *, progress: ProgressFn | None = None,
                  notice: Callable[[str], None] | None = None, **options) -> dict:
    """Encode ``inputs`` (paths, folders, ``-``) into OUT_DIR as one atomic set; return the summary.

    Each document becomes ``encode_ordinary(text)`` (+ the EOT id unless ``eot=False``), and
    its origin a provenance record (``formats``: input, byte offset, line, and the JSONL field /
    Parquet column ``id_field`` when given: a string or integer, else DataError). The summary has ``train``/``val`` ``{tokens, documents}`` plus counts and timing.
    ``backend`` (``tokenizer.with_backend``): ``auto``, ``fast`` or ``reference``; the ids are
    the same whichever runs, and meta.json's ``backend`` says which did. ``notice(line)`` gets
    the one line that says why ``auto`` fell back to the reference.
    ``progress(nbytes, ntokens, total=None)`` is called with increments of input bytes read and
    tokens written; the first call carries ``total`` (input bytes, None if unknown).
    Raises DataError (bad data), InputError / ConfigError (cannot do the job); on any error
    or interrupt OUT_DIR keeps its previous set and no temp file, and an OUT_DIR (and parents)
    this run created is removed again unless an interrupt keeps ``.partial/`` in it.

    Outputs grow in ``OUT_DIR/.partial/`` with a checkpoint at the end of an input file at most
    every ``resume.CHECKPOINT_SECONDS``. After an interrupt (signal, kill, power loss) the partial
    is kept; ``resume_partial=True`` continues from its checkpoint when the inputs and options
    still match (else starts over) and gives the same bytes as an uninterrupted run. A run
    without it, an error the run detects, and success all remove the partial.

    ``layout``: which layouts to write (``layouts.LAYOUTS``, a sequence or a comma list):
    ``nanogpt`` (train.bin/val.bin + doc indexes), ``megatron`` (+ train.idx/val.idx beside the
    .bin files), ``llmc`` (llmc/<split>_NNNNNN.bin shards of at most ``shard_tokens`` ids). The
    foreign layouts are derived from the split files before anything is committed (no second
    read of the text), and land in the same atomic set; without nanogpt and megatron no .bin
    is kept. ConfigError before anything is read for a combination that cannot work (llmc
    with a uint32 vocabulary).
    """
    return run_local(EncodeConfig.of(inputs, out_dir, **options), progress=progress, notice=notice)


@dataclass
class _Setup:
    """What a local run settled before reading: its spec, tokenizer, inputs, OUT_DIR and encoders."""

    spec: RunSpec
    enc: tokenizer.Tokenizer
    backend_entry: dict
    describe: dict
    chosen: tuple
    sources: list
    out_dir: Path
    workers: int
    threads: int
    params: dict  # everything that changes the output bytes: a checkpoint made with others is not reused
    plan: list | None = None  # a run in parts: each part's spans (``shards.plan_parts``); None: one stream
    keep_parts: bool = False  # a run in parts on a cluster: finished parts outlive a failure, and a rerun reuses them


def prepare(config: EncodeConfig, notice, parts: bool = False) -> _Setup:
    """Every check before anything is read, in the order they always ran. ``parts``: plan a run
    in parts whatever the worker count (the workers are a cluster's: ``executors.ray``)."""
    enc = tokenizer.choose_eot(tokenizer.load(config.encoding, config.tokenizer_file, config.pattern or "gpt2"), config.eot_token)
    pipeline.check_pattern(enc, config.tokenizer_file, config.pattern)
    dtype = pipeline.resolve_dtype(enc, config.dtype)
    chosen = tokensrc.check_layouts(config.layout, dtype, enc.n_vocab, config.shard_tokens, enc.eot)
    pipeline.check_edges(enc, config.eot, config.bos)
    if tokensrc.LLMC in chosen and config.bos:  # llm.c shards mark every document start with the EOT themselves
        raise ConfigError("--layout llmc starts each document with the end-of-document id itself: drop --bos")
    sources = inputs.resolve_inputs(list(config.inputs), config.fmt, notice)
    out_dir = pipeline.check_out_dir(config.out_dir, sources, config.tokenizer_file)
    workers = config.workers or os.cpu_count() or 1  # OUT_DIR is created by disk.locked(), which removes it again on failure
    enc, backend_entry = tokenizer.with_backend(enc, config.backend)
    if notice is not None and backend_entry.get("note"):
        notice(backend_entry.pop("note"))
    describe = enc.describe()
    spec = RunSpec(config, dtype, enc.eot, enc.bos)
    if config.resume and not resume.resumable(sources):
        raise ConfigError("--resume cannot continue reading stdin (-): encode a file instead")
    pipeline.check_split_possible(sources, config.split, config.val_fraction)  # the last check before reading: it hides no other
    # --resume of a run in parts reuses its parts whatever the worker count, --workers 1 included
    plan = _plan(config, spec, enc, sources, workers, parts or (config.resume and shards.any_part(formats.partial_dir(out_dir))))
    if plan is None:  # a run in parts: each worker sets its own (init_part_worker), the coordinator keeps the default
        pool_mod.bound_malloc(fast=enc.backend == "fast", on_main=workers == 1)
    threads = workers if plan is not None else _encoder_threads(enc, workers, sources)
    # what a checkpoint must match to be resumed: the backend too, so that meta.json's names the one that wrote every id
    params = dict(spec.options(), format=config.fmt, tokenizer=describe, winsample_version=__version__,
                  backend=backend_entry["name"])
    return _Setup(spec, enc, backend_entry, describe, chosen, sources, out_dir, workers, threads, params, plan)


def _plan(config: EncodeConfig, spec: RunSpec, enc, sources, workers: int, parts: bool = False) -> list | None:
    """The parts of a run in parts, or None for one stream: one worker, stdin, ``--dedup`` (a
    document is kept only if no earlier one had its text: one stream's question), or an input
    that makes fewer than two parts (one compressed file: the encoder pool spreads its batches).
    ``parts``: the workers are a cluster's (``prepare``): parts whatever their number."""
    if (workers == 1 and not parts) or config.dedup is not None or not resume.resumable(sources):
        return None
    skip = config.on_bad_input == "skip"  # a bad text file is left out whole: it is read whole first
    early = DocRule.of(spec).early is not None and not skip
    plan = shards.plan_parts(sources, config.shard_bytes, enc, early, RANGE_MIN_BYTES, config.errors, config.input_encoding)
    return plan if len(plan) > 1 or parts else None


def _encoder_threads(enc, workers: int, sources) -> int:
    """How many encoders run: ``workers``, but for the fast engine only as many as the input repays."""
    if enc.backend != "fast":
        return workers
    if workers == 1:
        enc.start_budget()
        return 1
    # one engine per thread, each built holding the GIL: only as many as the input repays
    size = pipeline.known_text_bytes(sources)
    threads = pipeline.encoder_threads(workers, size, *(enc.engine_costs() if size is not None else (0.0, 1.0)))
    enc.hand_over()  # the first encoder thread takes the checked engine; the others build their own
    return threads


def run_local(config: EncodeConfig, *, progress: ProgressFn | None = None, notice: Callable[[str], None] | None = None) -> dict:
    """``encode_corpus`` with its options as one ``EncodeConfig``."""
    return run_prepared(prepare(config, notice), progress=progress)


def run_prepared(setup: _Setup, part_pool=None, *, progress: ProgressFn | None = None) -> dict:
    """The run ``prepare`` settled. ``part_pool(setup)``: the pool a run in parts hands its parts
    to, with ``multiprocessing.Pool``'s ``apply_async``, ``terminate`` and ``join`` (Ray tasks:
    ``executors.ray``); None: forked processes of this machine."""
    t0 = time.perf_counter()
    # The pool starts before the lock and the staging files exist, so forked workers hold neither.
    if setup.plan is not None:
        pool = (part_pool or _fork_pool)(setup)
        if setup.enc.backend == "fast":
            # A forked worker keeps the engine the self-check proved (a large tokenizer.json's
            # build: ~0.3 s a worker saved); the coordinator encodes nothing and drops its own.
            setup.enc.release()
    else:
        pool = pool_mod.make_pool(setup.threads, setup.enc, setup.spec.dtype) if setup.workers > 1 else None
    committed = failed = False
    try:
        try:
            with disk.locked(setup.out_dir):
                result, meta = _commit(setup, pool, progress)
                committed = True
        except BaseException:
            failed = True
            raise
        finally:
            if pool is not None:
                pool_mod.close_pool(pool, failed) if setup.plan is not None else pool.close(failed)
    except KeyboardInterrupt as e:  # a signal after the commit (the lock let go, the pool closed): the set is whole
        if not committed:
            raise
        raise Interrupted.after_commit(e, str(setup.out_dir)) from None
    extra = {"resumed": result.resumed, "encoding": setup.enc.name, "backend": setup.backend_entry["name"],
             "dtype": setup.spec.dtype, "layouts": list(setup.chosen), "workers": setup.workers, "encoders": setup.threads,
             **({"parts": len(setup.plan)} if setup.plan is not None else {})}
    return pipeline.summary(setup.out_dir, meta, result.stats, setup.sources, time.perf_counter() - t0, extra)


def _fork_pool(setup: _Setup):
    return pool_mod.make_part_pool(setup.workers, init_part_worker, setup, __name__)


def _commit(setup: _Setup, pool, progress) -> tuple[_Result, formats.Meta]:
    """Encode into OUT_DIR/.partial, then commit the set; on an interrupt keep a checkpoint for
    --resume (``setup.keep_parts``: on any failure, the finished parts of a run in parts)."""
    out_dir = setup.out_dir
    work = formats.partial_dir(out_dir)
    if setup.plan is not None and setup.spec.config.resume:
        shards.refuse_one_stream_checkpoint(work)
    keep = False
    stage = None
    try:
        # Inside the try: a signal that lands right after the staging folder is made must
        # still remove it (seen in the SIGTERM test on a loaded machine).
        stage = formats.staging_dir(out_dir)
        if setup.plan is not None:
            result = _run_parts(setup, work, pool, progress)
        else:
            start = checkpoint.open_partial(work, setup.params, setup.sources, setup.spec.config.resume)
            result = _LocalRun(setup, work, pool, progress, start).run()
        meta = _stage(setup, work, stage, result)
        return result, meta
    except (KeyboardInterrupt, Interrupted) as e:
        if stage is not None and disk.was_committed(stage):  # the COMMIT mark is written: recover finishes the moves
            formats.recover(out_dir)
            raise Interrupted.after_commit(e, str(out_dir)) from None
        # Interrupted from outside: a checkpoint is work --resume can reuse.
        keep = (work / formats.PARTIAL_JOURNAL).exists() or shards.any_done(work)
        formats.recover(out_dir)  # no COMMIT mark yet: drops the staging folder
        if not keep:
            raise
        kept = Interrupted(e.signum if isinstance(e, Interrupted) else signal.SIGINT)
        again = "rerun to continue" if setup.keep_parts else "rerun with --resume to continue"  # a cluster's run always reuses
        kept.args = (f"{kept}; the work done so far is kept in {work}: {again}",)
        raise kept from None
    except OSError as e:
        formats.recover(out_dir)
        keep = setup.keep_parts and shards.any_done(work)
        raise disk.write_error(out_dir, e) from None
    except BaseException as e:
        formats.recover(out_dir)
        # bad input is fixed by a changed input, whose rerun could reuse no part: nothing to keep
        keep = setup.keep_parts and not isinstance(e, DataError) and shards.any_done(work)
        raise
    finally:
        if not keep:
            try:  # a run in parts' .partial can be gigabytes: a signal may land here, after the commit
                shutil.rmtree(work, ignore_errors=True)
            except KeyboardInterrupt as e:
                if not (stage is not None and disk.was_committed(stage)):
                    raise
                raise Interrupted.after_commit(e, str(out_dir)) from None


def _stage(setup: _Setup, work: Path, stage: Path, result: _Result) -> formats.Meta:
    """meta.json of the result, the layouts written, everything moved to ``stage`` and committed."""
    out_dir, id_field = setup.out_dir, setup.spec.config.id_field
    splits = {s: pipeline.split_entry(s, result.writers[s]) for s in formats.SPLITS}
    meta = pipeline.build_meta(setup.sources, setup.describe, setup.spec, splits, result.stats, provenance=result.provenance)
    meta.extra["backend"] = setup.backend_entry
    for s in formats.SPLITS:
        w = result.writers[s]
        size = w.path.stat().st_size
        if size != w.tokens * w.item:
            raise DataError(f"{w.path}: wrote {size} bytes, expected {w.tokens} tokens × {w.item}")
    names, remove = write_layouts(work, out_dir, meta, setup.chosen, setup.spec)
    for s in formats.SPLITS:  # provenance describes documents, whatever the layouts
        names.append(formats.prov_name(s))
        if id_field is not None:
            names.append(formats.prov_ids_name(s))
    remove += pipeline.plain_set_leftovers(out_dir, id_field)  # an earlier run's ids, a records run's masks
    pipeline.commit_set(work, stage, out_dir, names, meta, remove)
    return meta


@dataclass
class _Result:
    writers: dict  # split name -> SplitWriter (or finish_tail's record)
    stats: dict
    provenance: dict
    resumed: dict | None


class _LocalRun:
    """Read, encode and write everything into ``stage`` (the partial folder); ``run`` returns
    the writers and stats. ``start`` (``checkpoint.open_partial``) may hold a checkpoint to
    continue from; checkpoints are written with the run's params when every input is a file."""

    def __init__(self, setup: _Setup, stage: Path, pool, progress, start: dict, part: bool = False):
        self.setup, self.stage, self.pool, self.progress = setup, stage, pool, progress
        self.part = part  # one part of a run in parts: no checkpoints; bad input is the coordinator's to report
        self.sources, self.enc, self.spec = setup.sources, setup.enc, setup.spec
        self.writers, self.stats, self.resumed, self.seen = checkpoint.resume_writers(stage, self.spec, start)
        self.holder = pipeline.DocHolder(stage, self.spec.dtype, HOLD_BYTES)
        self.rule = DocRule.of(self.spec)
        self.checkpoints = not part and resume.resumable(self.sources)  # a part never walks every input
        self.syncer = checkpoint.Checkpointer()
        self.last_checkpoint = self.last_sync = time.monotonic()
        self.writer: SplitWriter | None = None  # the current document's writer, once known
        self.fresh = True  # no piece of the current document seen yet

    def sync(self, done: int | None = None, snap: dict | None = None) -> None:
        """With ``done``: a checkpoint (inputs ``[:done]`` complete, ``snap`` their stats), made
        at most every CHECKPOINT_SECONDS, waiting for a write-back still syncing rather than
        skipping. Without: a write-back (sync what is written, record nothing), at most every
        WRITE_BACK_SECONDS and only when the helper is idle: inside a long input too, so that
        the final fsync before the commit has little left to wait for."""
        now = time.monotonic()
        if done is not None:
            if not self.checkpoints or now - self.last_checkpoint < resume.CHECKPOINT_SECONDS:
                return
        elif self.part or now - self.last_sync < WRITE_BACK_SECONDS or self.syncer.busy():
            return  # a part's files need no sync (shards.write_done); the coordinator writes the outputs back
        to_sync: list = []
        states = {name: w.checkpoint(to_sync) for name, w in self.writers.items()}
        if self.seen is not None:
            self.seen.checkpoint(to_sync)
        record = None
        if done is not None:
            stage, params, sources = self.stage, self.setup.params, self.sources

            def record() -> None:
                with disk.naming(stage / formats.PARTIAL_JOURNAL):
                    resume.write_journal(stage, params, sources, done, states, snap)

            self.last_checkpoint = now
        self.syncer.start(to_sync, record)
        self.last_sync = now

    def consume(self, items: list, ids: np.ndarray, lengths: np.ndarray, maxes: np.ndarray) -> None:
        """Hand a batch's ids to the writers, event by event (``pipeline.Piece`` / ``DocEnd`` / ``InputDone``)."""
        offsets = np.concatenate(([0], np.cumsum(lengths))).tolist()
        maxes = maxes.tolist()
        k = 0
        for item in items:
            if type(item) is Piece:
                self._piece(item.dest, ids[offsets[k] : offsets[k + 1]], maxes[k])
                k += 1
            elif type(item) is InputDone:
                self.sync(item.index + 1, item.stats)
            elif type(item) is DocEnd:
                self._end(item)
            elif type(item) is DocResume:  # a document an earlier part began: no start, no BOS here
                self.writer, self.fresh = self.writers[item.dest], False
            else:  # DocCut: the document goes on in the next part, which ends it
                if item.origin is not None:
                    self.writer.add_origin(item.origin)
                self.writer, self.fresh = None, True
        if self.progress:
            self.progress(0, int(lengths.sum()))

    def _piece(self, dest: str | None, piece: np.ndarray, m: int) -> None:
        if self.fresh:
            self.fresh = False
            if self.rule.bos_ids is not None:  # the document's first piece: BOS before it
                piece = np.concatenate((self.rule.bos_ids, piece))
                m = max(m, self.rule.bos_id)
        if dest is not None and self.writer is None:
            self.writer = self.writers[dest]
            self.writer.start_doc()
            self.holder.flush_to(self.writer)
        if self.writer is not None:
            self.writer.write(piece, m)
        else:
            self.holder.add(piece, m)

    def _end(self, end: DocEnd) -> None:
        if end.dest == "skip":
            self.holder.flush_to(None)
        else:
            w = self.writer
            if w is None:
                w = self.writers[end.dest]
                w.start_doc()
                self.holder.flush_to(w)
            if end.origin is not None:
                w.add_origin(end.origin)
            if self.rule.eot_ids is not None:
                w.write(self.rule.eot_ids, self.spec.eot_id)
        self.writer = None
        self.fresh = True

    def result(self, items: list, get) -> None:
        try:
            out = get()
        except RangeFault as f:  # a byte range of a text file: the exact error reading it gives
            raise range_error(self.sources[f.args[0]], *f.args[1:]) from None
        self.consume(items, *out)
        self.sync()

    def run(self) -> _Result:
        self.encode()
        return self._finish()

    def encode(self, spans: list[Span] | None = None) -> _Batches:
        """Read, encode and write every input (``spans``: only these parts of them); the writers closed."""
        first = self.resumed["inputs"] if self.resumed else 0
        progress = self.progress
        if progress:
            progress(0, 0, pipeline.known_text_bytes(self.sources))
            if first:
                progress(self.resumed["input_bytes"], self.resumed["tokens"])
        read_cb = (lambda n: progress(n, 0)) if progress else None
        batches = _Batches(self.sources, self.spec, self.stats, read_cb, self.enc, self.seen)
        try:
            try:
                self._encode_all(batches.batches(first, spans))
            except decoding.BadInput as e:  # --on-bad-input fail: every bad input, read on to find them
                if self.part:
                    raise
                c = self.spec.config
                raise badinput.every_bad(self.sources, e, batches.reading, c.text_field, c.id_field) from None
            self.syncer.wait()
        finally:
            self.syncer.wait(raising=False)  # before the files close: their descriptors are being synced
            self.holder.close()
            if self.seen is not None:
                self.seen.close()
            for w in self.writers.values():
                w.close()
        return batches

    def _encode_all(self, batches) -> None:
        """Every batch encoded (here, or by the pool with a bounded number in flight), in order."""
        pool, enc, dtype = self.pool, self.enc, self.spec.dtype
        inflight: deque = deque()
        per = INFLIGHT_PER_THREAD if enc.backend == "fast" else INFLIGHT_PER_WORKER
        limit = max(1, per * self.setup.threads)
        while True:
            try:
                items, texts, where = next(batches)
            except StopIteration:
                break
            except WinsampleError:
                # Reading a later input failed: a fault in a range read before it comes first.
                for _, fut in inflight:
                    try:
                        pool.get(fut)
                    except RangeFault as f:
                        raise range_error(self.sources[f.args[0]], *f.args[1:]) from None
                    except Exception:
                        pass
                raise
            if pool is None:
                self.result(items, lambda texts=texts, where=where: encode_texts(enc, dtype, texts, where))
                continue
            inflight.append((items, pool.submit(texts, where)))
            while len(inflight) >= limit:
                items0, fut = inflight.popleft()
                self.result(items0, lambda fut=fut: pool.get(fut))
        while inflight:
            items0, fut = inflight.popleft()
            self.result(items0, lambda fut=fut: pool.get(fut))

    def _finish(self) -> _Result:
        return _Result(*finish_streams(self.spec, self.stage, self.writers, self.stats, self.sources), self.resumed)


class _Batches:
    """(items, texts, where) batches of about TASK_CHARS chars, documents in order.

    ``items`` describes the batch in order (``pipeline`` events): a ``Piece`` for each text
    (its writer when the document's split is already known), a ``DocEnd`` at each document's
    end, an ``InputDone`` (with the stats so far) when an input is read to its end. ``stats``
    counts on from what it holds. Documents are cut where ``tok`` says cutting is safe. ``seen``
    (``--dedup exact``): the hashes of the documents kept so far; a repeat's ``DocEnd`` is a skip.
    """

    def __init__(self, sources, spec: RunSpec, stats: dict, read_cb, tok: tokenizer.Tokenizer, seen=None):
        self.sources, self.config, self.stats, self.read_cb, self.tok = sources, spec.config, stats, read_cb, tok
        self.seen = seen
        self.rule = DocRule.of(spec)
        # A tokenizer with no safe-cut rule (SentencePiece, an unproven tokenizer.json): every
        # document goes to one worker whole, and those longer than one piece are counted.
        self.whole = not tok.can_cut
        c = self.config  # how this run decodes, and its counts: replaced, BOMs, bad input skipped
        self.reading = decoding.Reading(c.errors, c.input_encoding, c.on_bad_input == "skip", hint=c.engine == "local")
        self.replaced = self.reading.replaced
        self.lines: dict[int, int] = {}  # span position -> JSONL lines read in it (a part of a file)
        self.items: list = []
        self.texts: list = []
        self.size = 0
        self.where0 = None

    def _add(self, item, text) -> None:
        self.items.append(item)
        self.texts.append(text)
        self.size += (text[3] - text[2]) if isinstance(text, tuple) else len(text)

    def _take(self, where_next):
        """The batch so far (and a new one begun, starting at ``where_next``)."""
        batch = self.items, self.texts, self.where0
        self.items, self.texts, self.size, self.where0 = [], [], 0, where_next
        return batch

    def batches(self, first: int = 0, spans: list[Span] | None = None):
        """The batches, reading from input ``first`` on (``spans``: only these parts of the inputs)."""
        stats = self.stats
        replaced_base = stats["replaced_characters"]
        base = dict(stats)  # a resumed run's counts: this run's are added to them
        try:
            spans = [Span(i) for i in range(first, len(self.sources))] if spans is None else spans
            for where, doc, origin in self._documents(spans):
                if where is None:  # input number `doc` is read to its end (or its span)
                    stats["replaced_characters"] = replaced_base + self.replaced.count
                    decoding.add_counts(stats, base, self.reading)
                    self.items.append(InputDone(doc, dict(stats)))
                    continue
                if isinstance(doc, TextSpan):  # a part of a text file cut in parts: no split to decide
                    yield from self._text_span(doc, where, origin)
                    continue
                stats["documents"] += 1
                if self.where0 is None:
                    self.where0 = where
                if isinstance(doc, TextFile):  # a plain-text file: byte ranges, read and decoded by workers
                    has_text, (val, digest) = yield from self._text_file(doc, where)
                elif isinstance(doc, str) and (len(doc) <= PIECE_CHARS or self.whole):  # small, or uncuttable: no chunker
                    has_text, (val, digest) = self._small(doc)
                else:
                    has_text, (val, digest) = yield from self._big(doc, where)
                dest = self.rule.dest(has_text, val)
                stats["documents_skipped_empty"] += dest == "skip"
                if dest != "skip" and self.seen is not None and not self.seen.add(digest):
                    dest = "skip"  # the same text as a document kept before it: the first stays
                    stats[pipeline.DEDUP_STAT] += 1
                self.items.append(DocEnd(dest, origin))
                if self.size >= TASK_CHARS:
                    yield self._take(None)
        except WinsampleError:
            # Reading failed: a bad byte range of an earlier file, still in this batch, comes first.
            for t in self.texts:
                if isinstance(t, tuple):
                    try:
                        read_text_range(*t)
                    except RangeFault as f:
                        raise range_error(self.sources[f.args[0]], *f.args[1:]) from None
            raise
        if self.items:
            yield self.items, self.texts, self.where0 or ""

    def _text_file(self, doc: TextFile, where):
        rule = self.rule
        h = rule.hasher()  # TextFile.open saw text in the file's first bytes
        if self.whole and doc.size > PIECE_BYTES:
            self.stats["whole_documents"] += 1
        for spec in doc.ranges(max(doc.size, 1) if self.whole else PIECE_BYTES, h, self.read_cb):
            self._add(rule.piece(), spec)
            if self.size >= TASK_CHARS:
                yield self._take(where)
        self.stats["forced_cuts"] += doc.forced_cuts  # at the characters the decoded path cuts at (TextFile._next_cut)
        return True, rule.judge_hash(h)

    def _text_span(self, span: TextSpan, where, origin: Origin):
        """The events of part ``[start, stop)`` of a text file cut in parts (``shards.plan_parts``
        cuts one only when its split is known before its end): the document begins where the
        part starts at byte 0, and ends where it stops at the file's end."""
        dest, first = self.rule.early, span.start == 0
        if first:
            self.stats["documents"] += 1
        else:
            self.items.append(DocResume(dest))
        if self.where0 is None:
            self.where0 = where
        for spec in span.tf.ranges(PIECE_BYTES, None, self.read_cb, span.start, span.stop):
            self._add(self.rule.piece(), spec)
            if self.size >= TASK_CHARS:
                yield self._take(where)
        self.stats["forced_cuts"] += span.tf.forced_cuts
        self.items.append(DocEnd(dest, origin if first else None) if span.stop == span.tf.size else DocCut(origin if first else None))
        if self.size >= TASK_CHARS:
            yield self._take(None)

    def _small(self, doc: str) -> tuple[bool, tuple[bool, int | None]]:
        if len(doc) > PIECE_CHARS:
            self.stats["whole_documents"] += 1
        has_text = self.rule.has_text(doc)
        if has_text:
            self._add(self.rule.piece(), doc)
        return has_text, self.rule.judge_text(doc)

    def _joined(self, doc, h) -> bool:
        """The decoded pieces of a text file, joined: one document, one task (no safe-cut rule)."""
        rule = self.rule
        parts = []
        for text in doc:
            rule.feed(h, text)
            parts.append(text)
        text = "".join(parts)
        del parts
        if len(text) > PIECE_CHARS:
            self.stats["whole_documents"] += 1
        has_text = rule.has_text(text)
        if text:
            self._add(rule.piece(has_text), text)
        return has_text

    def _big(self, doc, where):
        rule = self.rule
        h = rule.hasher()
        has_text = False
        chunker = TextChunker(PIECE_CHARS, LONG_RUN_CHARS, self.tok.last_safe_cut)
        if isinstance(doc, str):  # a big JSONL/Parquet text: feed it in slices so it spreads over workers
            big = doc
            doc = (big[i : i + PIECE_CHARS] for i in range(0, len(big), PIECE_CHARS))
        elif self.whole:
            has_text = self._joined(doc, h)
            doc = iter(())
        for text in doc:
            rule.feed(h, text)
            if not has_text and rule.has_text(text):
                has_text = True
            for piece in chunker.feed(text):
                self._add(rule.piece(has_text), piece)
                if self.size >= TASK_CHARS:
                    yield self._take(where)
        for piece in chunker.finish():
            self._add(rule.piece(has_text), piece)
        self.stats["forced_cuts"] += chunker.forced_cuts
        return has_text, rule.judge_hash(h)

    def _documents(self, spans: list[Span]):
        """(where, document, origin) of ``iter_documents`` over the inputs of ``spans``, with
        ``(None, i, None)`` after input i's last document (or its span's); a plain-text file that
        can be read as byte ranges comes as a ``TextFile`` instead (one document: offset 0, line 1),
        a part of one as a ``TextSpan``."""
        c, sources, reading = self.config, self.sources, self.reading
        for pos, span in enumerate(spans):
            i = span.index
            src = sources[i]
            if not span.whole:
                yield from self._span_documents(pos, span)
                yield None, i, None
                continue
            if reading.skip and src.kind == "text" and src.path is not None:  # a file is one document: checked first
                bad = badinput.first_problem(src, reading)
                if bad is not None:
                    reading.left_out(bad)
                    yield None, i, None
                    continue
            tf = TextFile.open(src, i, c.errors, RANGE_MIN_BYTES, self.tok.last_safe_cut_bytes, LONG_RUN_CHARS,
                               c.input_encoding)
            if tf is None:
                yield from iter_documents([src], text_field=c.text_field, progress=self.read_cb, id_field=c.id_field,
                                          origins=True, index=i, reading=reading)
            else:
                try:
                    yield sources[i].label, tf, Origin(i, 0, 1, None)
                except BaseException:
                    tf.abort()
                    raise
                tf.close()
            yield None, i, None

    def _span_documents(self, pos: int, span: Span):
        """The documents of a part of an input (a JSONL file cut after a line end, a text file at a safe cut)."""
        c, src, i = self.config, self.sources[span.index], span.index
        if src.kind == "text":
            tf = TextFile.open(src, i, c.errors, RANGE_MIN_BYTES, self.tok.last_safe_cut_bytes, LONG_RUN_CHARS, c.input_encoding)
            if tf is None:
                raise DataError(f"{src.label}: its first bytes changed since the run was planned; encode a stable copy")
            try:
                yield src.label, TextSpan(tf, span.start, span.end), Origin(i, 0, 1, None)
            except BaseException:
                tf.abort()
                raise
            tf.close()
            return
        reader = SpanReader(src, span.start, span.end, self.reading)
        try:
            for where, text, offset, line, doc_id in jsonl_docs(reader, self.reading.errors, c.text_field, c.id_field, 0, self.reading):
                yield where, text, Origin(i, offset, line, doc_id)
        except BaseException:
            reader.abort()
            raise
        reader.close()
        self.lines[pos] = reader.lines


# --- a run in parts (--workers N): every worker runs the whole pipeline on its own parts -----

_PART: dict = {}  # a part worker's setup, given once by its initializer


def init_part_worker(setup: _Setup) -> None:
    pool_mod.worker_started()
    use_setup(setup)


def use_setup(setup: _Setup, processes: int | None = None) -> None:
    """This process encodes parts of ``setup``'s run (a forked worker, or a Ray task's worker);
    ``processes``: how many encode side by side on this machine (default ``setup.workers``)."""
    pool_mod.bound_malloc(fast=setup.enc.backend == "fast", on_main=True)
    if setup.enc.backend == "fast":  # each worker's engine cache gets its share of the run's budget
        setup.enc.start_budget(processes=processes or setup.workers)
    _PART["setup"] = setup


def encode_part(k: int, spans: list[Span], folder: str, key: dict, sources: dict) -> shards.Part:
    """Part ``k`` (``spans`` of ``sources``, its inputs by index) read, encoded and written into
    ``folder`` as one stream of a single run is (this process's own encoder, on its main thread),
    then recorded done (``shards.write_done``). The inputs come with the part, so that a forked
    worker never touches the coordinator's list of them (a touched page is a copied page)."""
    work = Path(folder).parent.parent  # shards.part_dir: the run's folder, where the outputs grow
    folder = shards.fresh_part_dir(work, k)  # emptied here: a retried task (Ray) must not append to a dead attempt's files
    setup = dataclasses.replace(_PART["setup"], sources=sources)
    run = _LocalRun(setup, folder, None, None, {"journal": None, "note": None}, part=True)
    places = shards.Places(work / shards.PLACES, list(run.writers))
    placed = [shards.PlacedFile(w.path, work / formats.bin_name(name), places, k, name, shards.PLACE_HOLD_BYTES)
              for name, w in run.writers.items()]
    for w, p in zip(run.writers.values(), placed):  # ids straight into the output once the part's place is known
        w.send_to(p)
    try:
        batches = run.encode(spans)
    except BaseException:
        for p in placed:  # a worker that goes on (a Ray task's) must not count ids it no longer holds
            p.discard()
        raise
    sizes = sum((s.end - s.start) if not s.whole else (sources[s.index].size or 0) for s in spans)
    unpacked = {s.index: sources[s.index].decompressed for s in spans if sources[s.index].decompressed is not None}
    part = shards.Part(k, {n: shards.Stream.of_writer(w) for n, w in run.writers.items()}, run.stats, batches.lines, sizes,
                       decompressed=unpacked)
    if not places.current():  # a task that outlived its run (cancelled, late) records nothing in the next one's folder
        raise WinsampleError(f"part {k}: the run it belongs to has ended; nothing more is written")
    shards.write_done(folder, key, part)
    return part


def _run_parts(setup: _Setup, work: Path, pool, progress) -> _Result:
    """The coordinator of a run in parts: the parts not reused handed to the workers, then merged in order."""
    spec, plan = setup.spec, setup.plan
    c = spec.config
    parts, key, note = shards.open_parts(work, setup.params, setup.sources, plan, c.resume or setup.keep_parts, spec.dtype)
    note = note if c.resume or not setup.keep_parts else None  # a run that always reuses (keep_parts) found none: nothing to say
    if progress:
        progress(0, 0, pipeline.known_text_bytes(setup.sources))
        for p in parts.values():
            progress(p.input_bytes, sum(s.tokens for s in p.streams.values()))
    merger = shards.Merger(work, DocRule.of(spec).writers, spec.dtype, pool.apply_async, len(plan))
    try:
        try:
            shards.encode_parts(plan, encode_part, pool, PARTS_IN_FLIGHT * setup.workers, work, parts, key, merger, progress,
                                lambda k: {s.index: setup.sources[s.index] for s in plan[k]})
        except BaseException:
            pool_mod.close_pool(pool, failed=True)  # no worker writes on while what it wrote is cleaned up
            merger.close()
            raise
    except RangeFault as f:
        raise range_error(setup.sources[f.args[0]], *f.args[1:]) from None
    except decoding.BadInput as e:  # the first bad input found; others may lie in earlier parts
        reading = decoding.Reading(c.errors, c.input_encoding, False, hint=c.engine == "local")  # Ray refuses both options
        raise badinput.every_bad(setup.sources, e, reading, c.text_field, c.id_field, start=0) from None
    ordered = [parts[k] for k in range(len(plan))]
    for p in ordered:  # a .gz / .zst input's decompressed size, as the worker that read it found it
        for i, n in p.decompressed.items():
            setup.sources[i].decompressed = n
    writers = merger.finish(lambda f: pool_mod.pool_get(pool, f), plan, ordered, work, setup.sources,
                            c.val_fraction if c.tail else None)
    stats = shards.merge_stats(ordered, decoding.BAD_KEPT)
    reused = sum(p.reused for p in ordered)
    resumed = {"parts": reused, "of": len(plan)} if reused else ({"parts": 0, "discarded": note} if note else None)
    out, stats, prov = finish_streams(spec, work, writers, stats, setup.sources)
    return _Result(out, stats, prov, resumed)


@dataclass
class TextSpan:
    """Bytes ``[start, stop)`` of text file ``tf``, between two safe cuts: a part of its one document."""

    tf: TextFile
    start: int
    stop: int


__all__ = ["encode_corpus", "run_local"]
