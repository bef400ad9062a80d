"""``winsample encode``: text → train.bin / val.bin / doc indexes / meta.json, streaming and parallel.

Pipeline (one main process, ``workers`` encoders; with the fast engine, as many threads as
the input repays: ``pipeline.encoder_threads``)::

    read bytes (1 MiB) → UTF-8 decode → cut big documents at safe points (chunking.py)
      → batches of ~1 MiB text → workers: encode_ordinary + range check + cast
      → results in order → hold the current document's ids → train or val writer

The encoders are processes for the reference libraries (they hold the GIL while they encode)
and threads of the main process for the fast engine (its batch call releases the GIL, so no
process is started and no ids are sent back through a pipe; ``_make_pool``).

At most ``4 × workers`` batches (2 × encoder threads) are in flight, so memory does not grow with the corpus. A
document's ids are held until its end decides its split (in memory up to ``HOLD_BYTES``, then
in a spill file in the staging folder), and everything is written into
``formats.staging_dir(out_dir)`` and committed as one set, meta.json last.

This module is the local runner of the pipeline in ``pipeline.py`` (shared with ``engine_ray``):
the split rule, empty-document skip and EOT (``pipeline.DocRule``), ids, split writers, meta.json
and the summary come from there; batching, the worker pool, holding a document until its split
is known and ``--resume`` are this runner's own. ``--split tail``: val gets the last
``floor(N × fraction)`` of the N tokens, cut at a token boundary (nanoGPT's shakespeare split).
A document cut in two counts in both splits: val's first "document" is then the tail piece.
"""

from __future__ import annotations

import math
import multiprocessing as mp
import os
import shutil
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from ... import __version__, formats, layouts, tokenizer
from .. import pipeline, resume
from ...chunking import TextChunker
from ...errors import ConfigError, DataError, InputError, Interrupted, WinsampleError
from ..pipeline import (
    ERROR_MODES, SPLIT_METHODS, DocRule, SplitWriter, check_options, encode_texts, locked, starts_chunks,
    write_error, write_index,
)
from ..inputs import (
    READ_BYTES, Origin, RangeFault, TextFile, iter_documents, range_error, read_text_range, replaced_count, resolve_inputs, text_pieces,
)

PIECE_CHARS = pipeline.PIECE_CHARS  # a big document is cut into pieces of about this many chars
LONG_RUN_CHARS = pipeline.LONG_RUN_CHARS  # a piece longer than this had no safe cut: counted as unsplittable
TASK_CHARS = 1 << 20  # text per batch sent to a worker: amortises IPC, keeps latency low
PIECE_BYTES = 1 << 20  # a plain-text file is sent to workers as byte ranges of about this size
RANGE_MIN_BYTES = 64 << 10  # smaller plain-text files are read and decoded here and sent as text
INFLIGHT_PER_WORKER = 4  # batches in flight per worker process: covers the main process's stalls, still bounded
CHECKPOINT_IN_BACKGROUND = True  # tests that stop a run right after a checkpoint turn this off
WRITE_BACK_SECONDS = 1.0  # how often what is written is synced inside a long input (no checkpoint)
INFLIGHT_PER_THREAD = 2  # per encoder thread (the fast engine): no pipe to cover, less memory held
HOLD_BYTES = 32 << 20  # a document's ids beyond this wait in a spill file, not in memory

ProgressFn = Callable[..., None]


# --- worker side --------------------------------------------------------------------------

_WORKER: dict = {}


def _init_worker(spec: tuple) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the main process's to handle
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # Pool.terminate() must just stop us
    if hasattr(signal, "SIGHUP"):
        signal.signal(signal.SIGHUP, signal.SIG_DFL)  # a hang-up ends a worker quietly
    _init_worker_death()
    if os.getppid() == 1:  # the main process died before we got here
        os._exit(0)
    tok, dtype = spec  # fork: the parent's tokenizer; forkserver/spawn: unpickling reloads it
    try:
        _WORKER["enc"] = tok if isinstance(tok, tokenizer.Tokenizer) else tokenizer.load(*tok)
    except Exception as e:  # raising in an initializer makes Pool respawn forever
        _WORKER["error"] = e
    _WORKER["dtype"] = dtype


def _worker_task(texts: list[str], where: str):
    if "error" in _WORKER:
        raise _WORKER["error"]
    return encode_texts(_WORKER["enc"], _WORKER["dtype"], texts, where)


def _make_pool(workers: int, spec: tuple):
    """The encoder pool: threads for the fast engine (it releases the GIL: no process to start,
    no ids to pickle back), else processes (tiktoken holds the GIL while it encodes)."""
    tok, dtype = spec
    if isinstance(tok, tokenizer.Tokenizer) and tok.backend == "fast":
        from multiprocessing.pool import ThreadPool

        pool = ThreadPool(workers, initializer=_WORKER.update, initargs=({"enc": tok, "dtype": dtype},))
        pool._winsample_workers = []  # a thread cannot die alone: an exception reaches the result
        return pool
    methods = mp.get_all_start_methods()
    # fork is fastest (workers inherit the loaded encoding) but unsafe once threads exist.
    if "fork" in methods and threading.active_count() == 1:
        ctx = mp.get_context("fork")
    elif "forkserver" in methods:
        ctx = mp.get_context("forkserver")
    else:
        ctx = mp.get_context("spawn")
    pool = ctx.Pool(workers, initializer=_init_worker, initargs=(spec,))
    pool._winsample_workers = list(pool._pool)  # the worker processes: one dying fails the run (_pool_get)
    return pool


WORKER_POLL_SECONDS = 0.2  # how often a wait for a worker's result checks that the workers live


def _pool_get(pool, fut):
    """``fut.get()``, but a worker that dies (a crash in the tokenizer, a kill, out of memory)
    fails the run with one line instead of waiting forever: Pool replaces a dead worker and
    the task it held is never answered."""
    while True:
        try:
            return fut.get(WORKER_POLL_SECONDS)
        except mp.TimeoutError:
            pass
        for proc in getattr(pool, "_winsample_workers", ()):
            code = proc.exitcode
            if code is not None:
                _abandon_pool(pool)
                how = f"killed by signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
                raise InputError(f"an encoder worker process (pid {proc.pid}) died ({how}); nothing was written:"
                                 " run again, or with --workers 1 to see the error")


def _abandon_pool(pool) -> None:
    """Stop a pool one of whose workers died: no respawning, every worker killed, and no
    ``terminate()`` (it would wait forever for the queue lock a worker may have died holding)."""
    from multiprocessing import pool as mpool

    pool._winsample_broken = True
    try:
        pool._worker_handler._state = mpool.TERMINATE
        pool._change_notifier.put(None)
    except Exception:
        pass
    for proc in list(pool._pool) + list(getattr(pool, "_winsample_workers", ())):
        try:
            proc.kill()
        except Exception:
            pass
    try:
        pool._terminate.cancel()  # the exit-time finalizer would call terminate() too
    except Exception:
        pass


def _close_pool(pool) -> None:
    if getattr(pool, "_winsample_broken", False):
        return
    pool.terminate()
    pool.join()


def _init_worker_death() -> None:
    """Linux: end this worker when the main process dies (no orphan spamming BrokenPipeError)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
    except Exception:  # not Linux, no libc: the worker ends when its pipe closes instead
        pass




# --- main side: writers -------------------------------------------------------------------


class _Holder:
    """The ids of the document being read, until its split is known; spills past HOLD_BYTES."""

    def __init__(self, stage: Path, dtype: str):
        self.path = stage / "document.spill.raw"
        self.dtype = dtype
        self.parts: list[tuple[np.ndarray, int]] = []  # (ids, their max)
        self.nbytes = 0
        self.spill = None
        self.spilled = 0

    def add(self, ids: np.ndarray, max_id: int) -> None:
        self.parts.append((ids, max_id))
        self.nbytes += ids.nbytes
        if self.nbytes > HOLD_BYTES:
            with formats.naming(self.path):
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
                    data = self.spill.read(min(left, formats.CHUNK_BYTES))
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


# --- the run ------------------------------------------------------------------------------

def _bound_malloc(fast: bool, on_main: bool) -> None:
    """Set glibc's malloc for the run's allocation pattern: megabyte buffers (text batches, id
    arrays, up to ~4 MB for 1M chars of non-ASCII text), allocated and freed by the thousand.

    Worker processes (``fast`` False): by default glibc raises its mmap threshold to the
    largest block freed so far, so every later 1 MiB batch comes from the heap, whose holes are
    kept: a worker's RSS then creeps up with the corpus. A fixed threshold serves them by mmap,
    returned to the OS on free.

    The fast engine on the main thread (``on_main``: --workers 1): the default dynamic
    thresholds still hand much of each batch back to the OS and fault it in again (~190k page
    faults, 1.1 s of system time over 400 MB of prose). An 8 MiB mmap threshold and a 64 MiB
    trim threshold keep the batches on the heap for reuse: 3.3-3.7 s instead of 4.5-4.7 s, peak
    RSS +11 MB (measured; the engine's own cache is bounded by its budget, whose rebuilds call
    ``malloc_trim`` whatever the threshold).

    The fast engine's threads: nothing. A fixed 128 KiB threshold would make every batch fault
    its pages in afresh (measured: 4 s of system time over 400 MB); larger ones gained nothing
    there; and one glibc arena for the process (M_ARENA_MAX=1) serializes the engines'
    allocations: gigatoken's SentencePiece engine allocates on every call, and two threads on
    one arena gained 1.2-1.3x over one instead of ~2x (measured, 80 MB of unique text). The
    engines' shared budget (``fastengine._Budget``) bounds the peak, and its ``malloc_trim``
    after a rebuild trims every arena (measured, 2 threads, an arena each: 214-216 MB at 100 MB
    of unique text, 237-241 MB at 400 MB).
    """
    if fast and not on_main:
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        if fast:
            libc.mallopt(-3, 8 << 20)  # M_MMAP_THRESHOLD (fixed: no dynamic change)
            libc.mallopt(-1, 64 << 20)  # M_TRIM_THRESHOLD
        else:
            libc.mallopt(-3, 128 << 10)  # M_MMAP_THRESHOLD (fixed: no dynamic raise)
    except (OSError, AttributeError):  # not glibc: nothing to do
        pass


def encode_corpus(
    inputs: Sequence[str],
    out_dir: str | Path,
    *,
    encoding: str = "gpt2",
    tokenizer_file: str | None = None,
    pattern: str | None = None,
    val_fraction: float = 0.1,
    split: str = "doc",
    seed: int = 1337,
    workers: int | None = None,
    text_field: str = "text",
    fmt: str = "auto",
    eot: bool = True,
    dtype: str | None = None,
    errors: str = "strict",
    progress: ProgressFn | None = None,
    resume_partial: bool = False,
    layout: Sequence[str] | str = layouts.DEFAULT_LAYOUTS,
    shard_tokens: int = layouts.DEFAULT_SHARD_TOKENS,
    backend: str = "auto",
    notice: Callable[[str], None] | None = None,
    id_field: str | None = None,
    bos: bool = False,
) -> dict:
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
    t0 = time.perf_counter()
    check_options(split, errors, val_fraction, workers)
    enc = tokenizer.load(encoding, tokenizer_file, pattern or "gpt2")
    pipeline.check_pattern(enc, tokenizer_file, pattern)
    dtype = pipeline.resolve_dtype(enc, dtype)
    chosen = layouts.check_layouts(layout, dtype, enc.n_vocab, shard_tokens, enc.eot)
    pipeline.check_edges(enc, eot, bos)
    if layouts.LLMC in chosen and bos:  # llm.c shards mark every document start with the EOT themselves
        raise ConfigError("--layout llmc starts each document with the end-of-document id itself: drop --bos")
    sources = resolve_inputs(list(inputs), fmt, notice)
    out_dir = pipeline.check_out_dir(out_dir, sources, tokenizer_file)
    workers = workers or os.cpu_count() or 1  # OUT_DIR is created by locked(), which removes it again on failure
    enc, backend_entry = tokenizer.with_backend(enc, backend)
    if notice is not None and backend_entry.get("note"):
        notice(backend_entry.pop("note"))
    _bound_malloc(fast=enc.backend == "fast", on_main=workers == 1)

    describe = enc.describe()
    opts = dict(
        split=split, fraction=val_fraction, seed=seed, eot=eot, dtype=dtype, errors=errors,
        text_field=text_field, eot_id=enc.eot, id_field=id_field,
    )
    if bos:  # only when asked: a checkpoint made before --bos existed stays comparable
        opts.update(bos=True, bos_id=enc.bos)
    if resume_partial and not resume.resumable(sources):
        raise ConfigError("--resume cannot continue reading stdin (-): encode a file instead")
    pipeline.check_split_possible(sources, split, val_fraction)  # the last check before reading: it hides no other
    threads = workers
    if enc.backend == "fast":
        if workers > 1:
            # one engine per thread, each built holding the GIL: only as many as the input repays
            size = pipeline.known_text_bytes(sources)
            threads = pipeline.encoder_threads(workers, size, *(enc.engine_costs() if size is not None else (0.0, 1.0)))
            enc.hand_over()  # the first encoder thread takes the checked engine; the others build their own
        else:
            enc.start_budget()
    # Everything that changes the output bytes: a checkpoint made with other values is not reused.
    params = dict(opts, format=fmt, tokenizer=describe, winsample_version=__version__)
    # The pool starts before the lock and the staging files exist, so forked workers hold neither.
    pool = _make_pool(threads, (enc, dtype)) if workers > 1 else None
    try:
        with locked(out_dir):
            work = formats.partial_dir(out_dir)
            keep = False
            try:
                # Inside the try: a signal that lands right after the staging folder is made must
                # still remove it (seen in the SIGTERM test on a loaded machine).
                stage = formats.staging_dir(out_dir)
                start = _open_partial(work, params, sources, resume_partial)
                result = _run(sources, work, enc, opts, pool, threads, progress, start, params)
                splits = {s: pipeline.split_entry(s, result["writers"][s]) for s in formats.SPLITS}
                meta = pipeline.build_meta(sources, describe, opts, splits, result["stats"], provenance=result["provenance"])
                meta.extra["backend"] = backend_entry
                for s in formats.SPLITS:
                    w = result["writers"][s]
                    size = w.path.stat().st_size
                    if size != w.tokens * w.item:
                        raise DataError(f"{w.path}: wrote {size} bytes, expected {w.tokens} tokens × {w.item}")
                names, remove = _write_layouts(work, out_dir, meta, chosen, opts, shard_tokens)
                for s in formats.SPLITS:  # provenance describes documents, whatever the layouts
                    names.append(formats.prov_name(s))
                    if id_field is not None:
                        names.append(formats.prov_ids_name(s))
                    elif (out_dir / formats.prov_ids_name(s)).is_file():
                        remove.append(formats.prov_ids_name(s))  # an earlier run's ids: not this set's
                for name in names:
                    (stage / name).parent.mkdir(parents=True, exist_ok=True)
                    os.replace(work / name, stage / name)
                with formats.naming(stage / formats.META_JSON):
                    formats.write_meta(stage / formats.META_JSON, meta)
                formats.commit_staged(stage, out_dir, names + [formats.META_JSON], remove)
            except (KeyboardInterrupt, Interrupted) as e:
                # Interrupted from outside: a checkpoint is work --resume can reuse.
                keep = (work / formats.PARTIAL_JOURNAL).exists()
                formats.recover(out_dir)  # no COMMIT mark yet: drops the staging folder
                if not keep:
                    raise
                signum = e.signum if isinstance(e, Interrupted) else signal.SIGINT
                kept = Interrupted(signum)
                kept.args = (f"{kept}; the work done so far is kept in {work}: rerun with --resume to continue",)
                raise kept from None
            except OSError as e:
                formats.recover(out_dir)
                raise write_error(out_dir, e) from None
            except BaseException:
                formats.recover(out_dir)
                raise
            finally:
                if not keep:
                    shutil.rmtree(work, ignore_errors=True)
    finally:
        if pool is not None:
            _close_pool(pool)

    extra = {"resumed": result["resumed"], "encoding": enc.name, "backend": backend_entry["name"], "dtype": dtype, "layouts": list(chosen), "workers": workers,
             "encoders": threads}
    return pipeline.summary(out_dir, meta, result["stats"], sources, time.perf_counter() - t0, extra)


def _write_layouts(work: Path, out_dir: Path, meta: formats.Meta, chosen: tuple, opts: dict, shard_tokens: int) -> tuple[list[str], list[str]]:
    """Write the foreign layouts into ``work`` from its split files; describe them in ``meta``.

    Returns (names to commit, relative to OUT_DIR; names in OUT_DIR to remove: files of layouts
    an earlier run wrote that this set does not have). Reads the .bin files once more (not the
    text), in bounded pieces; the Megatron index needs only the document starts.
    """
    names: list[str] = []
    keep_bin = layouts.NANOGPT in chosen or layouts.MEGATRON in chosen
    desc: dict = {}
    if keep_bin:
        for s in formats.SPLITS:
            names += [formats.bin_name(s), formats.doc_index_name(s)]
    if layouts.NANOGPT in chosen:
        desc[layouts.NANOGPT] = {"splits": {s: {"file": formats.bin_name(s), "doc_index": formats.doc_index_name(s)} for s in formats.SPLITS}}
    dtype = opts["dtype"]
    if layouts.MEGATRON in chosen:
        entries = {}
        for s in formats.SPLITS:
            path = work / layouts.megatron_index_name(s)
            with formats.naming(path):
                e = layouts.write_megatron_index(path, _doc_starts(work, s), meta.splits[s].tokens, dtype)
            entries[s] = dict(e, data=formats.bin_name(s))
            names.append(layouts.megatron_index_name(s))
        desc[layouts.MEGATRON] = {"version": layouts.MEGATRON_VERSION, "dtype_code": layouts.MEGATRON_CODES[dtype], "splits": entries}
    if layouts.LLMC in chosen:
        entries = {}
        for s in formats.SPLITS:
            tokens = formats.open_tokens(work / formats.bin_name(s), dtype)
            with formats.naming(work / layouts.LLMC_DIR):
                entries[s] = layouts.write_llmc_split(work, s, tokens, _doc_starts(work, s), opts["eot_id"], opts["eot"], shard_tokens)
            del tokens
            names += [sh["file"] for sh in entries[s]["shards"]]
        desc[layouts.LLMC] = {
            "magic": layouts.LLMC_MAGIC, "version": layouts.LLMC_VERSION, "shard_tokens": shard_tokens,
            "eot": opts["eot_id"], "eot_before_each_document": True, "splits": entries,
        }
    meta.extra["layouts"] = desc  # layouts.py's own entry of meta.json
    if not keep_bin:
        for s in formats.SPLITS:  # the split's logical name stays; its files are not kept
            meta.splits[s].doc_index = None
    remove = [layouts.megatron_index_name(s) for s in formats.SPLITS if layouts.MEGATRON not in chosen]
    if not keep_bin:
        remove += [n for s in formats.SPLITS for n in (formats.bin_name(s), formats.doc_index_name(s))]
    remove += layouts.stale_llmc(out_dir, set(names))
    return names, [r for r in remove if os.path.lexists(out_dir / r)]


def _doc_starts(work: Path, split: str) -> np.ndarray:
    """The document starts of a staged split (a read-only memmap of its .docs.npy)."""
    with formats.NPY_HEADER_LOCK:
        return np.load(work / formats.doc_index_name(split), mmap_mode="r", allow_pickle=False)


def _open_partial(work: Path, params: dict, sources, want: bool) -> dict:
    """{"journal": the checkpoint to continue from, or None, "note": why none was used}.

    Without a usable checkpoint ``work`` is made empty (a plain run always starts over).
    """
    note = None
    if want:
        try:
            return {"journal": resume.read_journal(work, params, sources), "note": None}
        except resume.Stale as e:
            note = str(e)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    return {"journal": None, "note": note}


def _new_writers(stage: Path, opts: dict) -> dict:
    tail = opts["fraction"] if opts["split"] == "tail" else None
    return {s: SplitWriter(stage, s, opts["dtype"], tail_fraction=tail) for s in DocRule.of(opts).writers}


def _resume_writers(stage: Path, opts: dict, start: dict) -> tuple[dict, dict, dict]:
    """(writers, stats, summary of what was reused): continued from ``start``'s checkpoint when
    its files hold exactly the checkpointed bytes, else new and empty (the folder cleared)."""
    stats = pipeline.new_stats()
    writers = _new_writers(stage, opts)
    j, note = start["journal"], start["note"]
    if j is not None:
        try:
            if set(j["writers"]) != set(writers):
                raise resume.Stale("the checkpoint's files do not match the split method")
            for name, w in writers.items():
                w.reopen(j["writers"][name])
            done = len(j["inputs"])
            return writers, dict(stats, **j["stats"]), {
                "inputs": done, "input_bytes": sum(r["bytes"] for r in j["inputs"]),
                "tokens": sum(w.tokens for w in writers.values()),
            }
        except (resume.Stale, KeyError, TypeError) as e:
            note = str(e) if isinstance(e, resume.Stale) else f"malformed checkpoint ({e})"
            for w in writers.values():
                w.close()
            shutil.rmtree(stage, ignore_errors=True)
            stage.mkdir()
            writers = _new_writers(stage, opts)
    return writers, stats, ({"inputs": 0, "discarded": note} if note else None)


class _Checkpointer:
    """Makes a checkpoint durable off the main thread, so that encoding goes on meanwhile:
    fsyncs the files it covers, then records it (``start``; no record: a write-back only).
    One at a time: ``start`` waits for the previous one; ``busy`` while syncing (a write-back
    is then skipped). ``wait`` joins it and raises what it raised."""

    def __init__(self):
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def busy(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self, to_sync: list, record: Callable[[], None] | None) -> None:
        """Sync ``to_sync`` ((fd, path) pairs), then call ``record``, after the previous one ends.
        The helper syncs its own duplicates of the descriptors: should the run close its files
        while the helper still works (a second interrupt during the final wait), a number
        reused by another file is never synced in their place."""
        self.wait()
        fds = [(os.dup(fd), path) for fd, path in to_sync]

        def run() -> None:
            try:
                for fd, path in fds:
                    with formats.naming(path):
                        os.fsync(fd)
                if record is not None:
                    record()
            except BaseException as e:  # noqa: BLE001 -- handed to the main thread by wait()
                self._error = e
            finally:
                for fd, _ in fds:
                    os.close(fd)

        self._thread = threading.Thread(target=run, name="winsample-checkpoint", daemon=True)
        self._thread.start()
        if not CHECKPOINT_IN_BACKGROUND:
            self.wait()

    def wait(self, raising: bool = True) -> None:
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        error, self._error = self._error, None
        if error is not None and raising:
            raise error


def _run(sources, stage: Path, enc, opts: dict, pool, workers: int, progress, start=None, params=None) -> dict:
    """Read, encode and write everything into ``stage``; return writers and stats.

    ``start`` (from ``_open_partial``) may hold a checkpoint to continue from; checkpoints
    are written with ``params`` when every input is a file.
    """
    dtype = opts["dtype"]
    tail = opts["split"] == "tail"
    start = start or {"journal": None, "note": None}
    writers, stats, resumed = _resume_writers(stage, opts, start)
    first = resumed["inputs"] if resumed else 0
    if progress:
        total = pipeline.known_text_bytes(sources)
        progress(0, 0, total)
        if first:
            progress(resumed["input_bytes"], resumed["tokens"])
    read_cb = (lambda n: progress(n, 0)) if progress else None

    holder = _Holder(stage, dtype)
    rule = DocRule.of(opts)
    eot_ids, bos_ids = rule.eot_ids, rule.bos_ids
    checkpoints = params is not None and resume.resumable(sources)
    last_checkpoint = [time.monotonic()]

    syncer = _Checkpointer()
    last_sync = [time.monotonic()]

    def sync(done: int | None = None, snap: dict | None = None) -> None:
        """With ``done``: a checkpoint (inputs ``[:done]`` complete, ``snap`` their stats), made
        at most every CHECKPOINT_SECONDS, waiting for a write-back still syncing rather than
        skipping. Without: a write-back (sync what is written, record nothing), at most every
        WRITE_BACK_SECONDS and only when the helper is idle: inside a long input too, so that
        the final fsync before the commit has little left to wait for."""
        now = time.monotonic()
        if done is not None:
            if not checkpoints or now - last_checkpoint[0] < resume.CHECKPOINT_SECONDS:
                return
        elif now - last_sync[0] < WRITE_BACK_SECONDS or syncer.busy():
            return
        to_sync: list = []
        states = {name: w.checkpoint(to_sync) for name, w in writers.items()}
        record = None
        if done is not None:
            def record() -> None:
                with formats.naming(stage / formats.PARTIAL_JOURNAL):
                    resume.write_journal(stage, params, sources, done, states, snap)

            last_checkpoint[0] = now
        syncer.start(to_sync, record)
        last_sync[0] = now

    # Consumer state: the document whose ids are arriving.
    cur = {"writer": None, "fresh": True}  # fresh: no piece of the document seen yet

    def consume(items: list, ids: np.ndarray, lengths: np.ndarray, maxes: np.ndarray) -> None:
        offsets = np.concatenate(([0], np.cumsum(lengths))).tolist()
        maxes = maxes.tolist()
        k = 0
        for item in items:
            if item is None or isinstance(item, str):  # a piece; str = its split is already known
                piece = ids[offsets[k] : offsets[k + 1]]
                m = maxes[k]
                k += 1
                if cur["fresh"]:
                    cur["fresh"] = False
                    if bos_ids is not None:  # the document's first piece: BOS before it
                        piece = np.concatenate((bos_ids, piece))
                        m = max(m, rule.bos_id)
                if item is not None and cur["writer"] is None:
                    cur["writer"] = writers[item]
                    cur["writer"].start_doc()
                    holder.flush_to(cur["writer"])
                if cur["writer"] is not None:
                    cur["writer"].write(piece, m)
                else:
                    holder.add(piece, m)
            elif item[0] == "source":  # ("source", i, stats): input i is complete
                sync(item[1] + 1, item[2])
            else:  # ("end", dest, origin): the document is complete
                dest = item[1]
                if dest == "skip":
                    holder.flush_to(None)
                else:
                    w = cur["writer"]
                    if w is None:
                        w = writers[dest]
                        w.start_doc()
                        holder.flush_to(w)
                    w.add_origin(item[2])
                    if eot_ids is not None:
                        w.write(eot_ids, opts["eot_id"])
                cur["writer"] = None
                cur["fresh"] = True
        if progress:
            progress(0, int(lengths.sum()))

    def result(items: list, get) -> None:
        try:
            out = get()
        except RangeFault as f:  # a byte range of a text file: the exact error reading it gives
            raise range_error(sources[f.args[0]], f.args[1], f.args[2]) from None
        consume(items, *out)
        sync()

    inflight: deque = deque()
    per = INFLIGHT_PER_THREAD if enc.backend == "fast" else INFLIGHT_PER_WORKER
    limit = max(1, per * workers)
    batches = _batches(sources, opts, stats, read_cb, first, enc)
    try:
        while True:
            try:
                items, texts, where = next(batches)
            except StopIteration:
                break
            except WinsampleError:
                # Reading a later input failed: a fault in a range read before it comes first.
                for _, fut in inflight:
                    try:
                        _pool_get(pool, fut)
                    except RangeFault as f:
                        raise range_error(sources[f.args[0]], f.args[1], f.args[2]) from None
                    except Exception:
                        pass
                raise
            if pool is None:
                result(items, lambda: encode_texts(enc, dtype, texts, where))
                continue
            inflight.append((items, pool.apply_async(_worker_task, (texts, where))))
            while len(inflight) >= limit:
                items0, fut = inflight.popleft()
                result(items0, lambda: _pool_get(pool, fut))
        while inflight:
            items0, fut = inflight.popleft()
            result(items0, lambda: _pool_get(pool, fut))
        syncer.wait()
    finally:
        syncer.wait(raising=False)  # before the files close: their descriptors are being synced
        holder.close()
        for w in writers.values():
            w.close()

    frac = opts["fraction"]
    if tail:
        out, prov = _finish_tail(stage, writers["all"], frac, dtype, opts["id_field"])
        stats["tail_cut"] = out["train"].tokens
    else:
        out = writers
        prov = {}
        for s in formats.SPLITS:
            write_index(stage, out[s].starts_path, stage / formats.doc_index_name(s), out[s].documents)
            w = out[s].prov
            with formats.naming(stage / formats.prov_name(s)):
                prov[s] = formats.write_provenance(stage, s, [formats.prov_segment(w.rec_path, w.ids_path)], opts["id_field"])
    pipeline.check_outcome(sources, stats, out["train"].tokens, out["val"].tokens, frac, tail)
    return {"writers": out, "stats": stats, "resumed": resumed, "provenance": prov}


def _batches(sources, opts: dict, stats: dict, read_cb, first: int = 0, tok: tokenizer.Tokenizer | None = None):
    """Yield (items, texts, where) batches of about TASK_CHARS chars, documents in order.

    ``items`` describes the batch in order: None / a split name for each text piece (the name
    when the document's split is already known), ``("end", split or "skip")`` at each
    document's end, ``("source", i, stats so far)`` when input ``i`` is read to its end.
    Reading starts at input ``first``; ``stats`` counts on from what it holds. Documents are
    cut where ``tok`` says cutting is safe (default: chunking's rule).
    """
    cut = tok.last_safe_cut if tok is not None else None
    rule = DocRule.of(opts)
    early = rule.early
    # A tokenizer with no safe-cut rule (SentencePiece, an unproven tokenizer.json): every
    # document goes to one worker whole, and those longer than one piece are counted.
    whole = tok is not None and not tok.can_cut
    items: list = []
    texts: list[str] = []
    size = 0
    where0 = None
    replaced_base, replaced_before = stats["replaced_characters"], replaced_count()
    try:
        for where, doc, origin in _documents(sources, first, opts, read_cb, tok):
            if where is None:  # input number `doc` is read to its end
                stats["replaced_characters"] = replaced_base + replaced_count() - replaced_before
                items.append(("source", doc, dict(stats)))
                continue
            stats["documents"] += 1
            if where0 is None:
                where0 = where
            if isinstance(doc, TextFile):  # a plain-text file: byte ranges, read and decoded by workers
                h = rule.hasher()
                has_text = True  # TextFile.open saw text in the file's first bytes
                if whole and doc.size > PIECE_BYTES:
                    stats["whole_documents"] += 1
                for spec in doc.ranges(max(doc.size, 1) if whole else PIECE_BYTES, h, read_cb):
                    items.append(early)
                    texts.append(spec)
                    size += spec[3] - spec[2]
                    if size >= TASK_CHARS:
                        yield items, texts, where0
                        items, texts, size, where0 = [], [], 0, where
                # A run the decoded path counts (a piece > LONG_RUN_CHARS chars, fed READ_BYTES at a
                # time) needs more than LONG_RUN_CHARS - READ_BYTES - 2 chars without a safe cut, so a
                # range at least that many bytes long: only then is the file read again to count.
                if doc.oversized and doc.longest > LONG_RUN_CHARS - READ_BYTES - 8:
                    stats["unsplittable_runs"] += _unsplittable_runs(doc.src, cut)
                val = rule.val_of_hash(h)
            elif isinstance(doc, str) and (len(doc) <= PIECE_CHARS or whole):  # small, or uncuttable: no chunker
                if len(doc) > PIECE_CHARS:
                    stats["whole_documents"] += 1
                has_text = rule.has_text(doc)
                if has_text:
                    items.append(early)
                    texts.append(doc)
                    size += len(doc)
                val = rule.val_of_text(doc)
            else:
                h = rule.hasher()
                has_text = False
                chunker = TextChunker(PIECE_CHARS, LONG_RUN_CHARS, cut)
                if isinstance(doc, str):  # a big JSONL/Parquet text: feed it in slices so it spreads over workers
                    big = doc
                    doc = (big[i : i + PIECE_CHARS] for i in range(0, len(big), PIECE_CHARS))
                elif whole:  # the decoded pieces of a text file, joined: one document, one task
                    parts = []
                    for text in doc:
                        rule.feed(h, text)
                        parts.append(text)
                    text = "".join(parts)
                    del parts
                    if len(text) > PIECE_CHARS:
                        stats["whole_documents"] += 1
                    has_text = rule.has_text(text)
                    doc = iter(())
                    if text:
                        items.append(early if has_text else None)
                        texts.append(text)
                        size += len(text)
                for text in doc:
                    rule.feed(h, text)
                    if not has_text and rule.has_text(text):
                        has_text = True
                    for piece in chunker.feed(text):
                        items.append(early if has_text else None)
                        texts.append(piece)
                        size += len(piece)
                        if size >= TASK_CHARS:
                            yield items, texts, where0
                            items, texts, size, where0 = [], [], 0, where
                for piece in chunker.finish():
                    items.append(early if has_text else None)
                    texts.append(piece)
                    size += len(piece)
                stats["unsplittable_runs"] += chunker.unsplittable_runs
                val = rule.val_of_hash(h)
            dest = rule.dest(has_text, val)
            stats["documents_skipped_empty"] += dest == "skip"
            items.append(("end", dest, origin))
            if size >= TASK_CHARS:
                yield items, texts, where0
                items, texts, size, where0 = [], [], 0, None
    except WinsampleError:
        # Reading failed: a bad byte range of an earlier file, still in this batch, comes first.
        for t in texts:
            if isinstance(t, tuple):
                try:
                    read_text_range(*t)
                except RangeFault as f:
                    raise range_error(sources[f.args[0]], f.args[1], f.args[2]) from None
        raise
    if items:
        yield items, texts, where0 or ""


def _documents(sources, first: int, opts: dict, read_cb, tok: tokenizer.Tokenizer | None = None):
    """(where, document, origin) of ``iter_documents`` over ``sources[first:]``, with
    ``(None, i, None)`` after input i's last document; a plain-text file that can be read as
    byte ranges comes as a ``TextFile`` instead (one document: offset 0, line 1)."""
    for i in range(first, len(sources)):
        tf = TextFile.open(sources[i], i, opts["errors"], RANGE_MIN_BYTES, tok.last_safe_cut_bytes if tok is not None else None)
        if tf is None:
            yield from iter_documents([sources[i]], text_field=opts["text_field"], errors=opts["errors"], progress=read_cb,
                                      id_field=opts["id_field"], origins=True, index=i)
        else:
            try:
                yield sources[i].label, tf, Origin(i, 0, 1, None)
            except BaseException:
                tf.abort()
                raise
            tf.close()
        yield None, i, None


def _unsplittable_runs(src, cut=None) -> int:
    """``TextChunker.unsplittable_runs`` for the decoded text of ``src``, as the decoded path counts them."""
    chunker = TextChunker(PIECE_CHARS, LONG_RUN_CHARS, cut)
    for text in text_pieces(src):
        chunker.feed(text)
    chunker.finish()
    return chunker.unsplittable_runs


class _Done:
    """Tokens, documents, checksum, max of a finished split (what meta.json reports)."""

    def __init__(self, path, item, tokens, documents, checksum, max_token, dtype):
        self.path, self.item, self.tokens, self.documents = path, item, tokens, documents
        self.checksum, self.max_token, self.dtype = checksum, max_token, dtype


def _finish_tail(stage: Path, w: SplitWriter, fraction: float, dtype: str, id_field: str | None = None) -> tuple[dict, dict]:
    """Cut the one stream at N - floor(N × fraction): train.bin keeps the head, val.bin gets the tail."""
    n = w.tokens
    cut = n - math.floor(n * fraction)
    item = w.item
    all_path = w.path
    # val.bin: copy the tail, hashing as it is written.
    val_path = stage / formats.bin_name("val")
    vh, vmax = formats.new_hasher(), -1
    with formats.naming(val_path), open(all_path, "rb") as src, open(val_path, "wb") as dst:
        src.seek(cut * item)
        while data := src.read(formats.CHUNK_BYTES):
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
            data = f.read(min(left, formats.CHUNK_BYTES))
            left -= len(data)
            th.update(data)
            tmax = max(tmax, int(np.frombuffer(data, dtype=dtype).max()))
        f.truncate(cut * item)
    train_path = stage / formats.bin_name("train")
    os.replace(all_path, train_path)
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
    with formats.naming(stage / formats.doc_index_name("val")):
        formats.write_doc_index_stream(stage / formats.doc_index_name("val"), vcount, chunks)
    # Provenance: train's are the first k records; val's the rest, after a copy of the record of
    # the document the cut fell inside (its tail piece is val's first document).
    rec, ids = w.prov.rec_path, w.prov.ids_path
    val_segs = ([formats.prov_segment(rec, ids, k - 1, k)] if mid_doc else []) + [formats.prov_segment(rec, ids, k)]
    prov = {}
    for s, segs in (("train", [formats.prov_segment(rec, ids, 0, k)]), ("val", val_segs)):
        with formats.naming(stage / formats.prov_name(s)):
            prov[s] = formats.write_provenance(stage, s, segs, id_field)
    return {
        "train": _Done(train_path, item, cut, k, formats.format_checksum(th), tmax, dtype),
        "val": _Done(val_path, item, n - cut, vcount, formats.format_checksum(vh), vmax, dtype),
    }, prov


def _prepend(first, rest):
    yield first
    yield from rest


__all__ = ["encode_corpus", "SPLIT_METHODS", "ERROR_MODES"]
