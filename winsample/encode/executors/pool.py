"""The local runner's encoders: threads for the fast engine (its batch call releases the GIL: no
process to start, no ids to pickle back), else processes (tiktoken holds the GIL while it
encodes), and glibc's malloc set for the run's allocation pattern (``bound_malloc``)."""

from __future__ import annotations

import contextlib
import gc
import multiprocessing as mp
import os
import signal
import threading

from ... import tokenizer
from ...errors import InputError
from ..pipeline import encode_texts

# --- worker side --------------------------------------------------------------------------

_WORKER: dict = {}  # a worker process's tokenizer and dtype (its initializer sets them)


HELD_SIGNALS = (signal.SIGINT, signal.SIGTERM) + ((signal.SIGHUP,) if hasattr(signal, "SIGHUP") else ())
SERVER_SIGNALS = f"{__package__}.forkserver_signals"  # every forkserver's first preload: it outlives a group signal


def worker_started() -> None:
    """A worker process's signals: the main process handles Ctrl-C; a terminate, a hang-up or
    the main process's death end the worker quietly. Forked with them held (``_held``), the
    worker lets them in only once its own handlers are set."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the main process's to handle
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # Pool.terminate() must just stop us
    if hasattr(signal, "SIGHUP"):
        signal.signal(signal.SIGHUP, signal.SIG_DFL)  # a hang-up ends a worker quietly
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, HELD_SIGNALS)
    _init_worker_death()
    if os.getppid() == 1:  # the main process died before we got here
        os._exit(0)


def _init_worker(spec: tuple) -> None:
    worker_started()
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


class EncoderPool:
    """The run's encoders: ``submit(texts, where)`` → a result ``get`` returns, in order of asking.

    Threads (the fast engine) are given the tokenizer with each task, so nothing of the run is
    kept in this module; a worker process keeps its own in ``_WORKER`` (set by its initializer).
    """

    def __init__(self, pool, tok, dtype: str, threads: bool):
        self.pool, self.tok, self.dtype, self.threads = pool, tok, dtype, threads

    def submit(self, texts: list, where: str):
        if self.threads:
            return self.pool.apply_async(encode_texts, (self.tok, self.dtype, texts, where))
        return self.pool.apply_async(_worker_task, (texts, where))

    def get(self, fut):
        return pool_get(self.pool, fut)

    def close(self, failed: bool = False) -> None:
        close_pool(self.pool, failed)


def make_pool(workers: int, tok, dtype: str) -> EncoderPool:
    """The encoder pool: threads for the fast engine (it releases the GIL: no process to start,
    no ids to pickle back), else processes (tiktoken holds the GIL while it encodes)."""
    if isinstance(tok, tokenizer.Tokenizer) and tok.backend == "fast":
        from multiprocessing.pool import ThreadPool

        pool = ThreadPool(workers)
        pool._winsample_workers = []  # a thread cannot die alone: an exception reaches the result
        return EncoderPool(pool, tok, dtype, threads=True)
    methods = mp.get_all_start_methods()
    # fork is fastest (workers inherit the loaded encoding) but unsafe once threads exist.
    if "fork" in methods and threading.active_count() == 1:
        ctx = mp.get_context("fork")
    elif "forkserver" in methods:
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload([SERVER_SIGNALS])
    else:
        ctx = mp.get_context("spawn")
    return EncoderPool(_start(ctx, workers, _init_worker, (tok, dtype)), tok, dtype, threads=False)


def _start(ctx, workers: int, initializer, arg):
    """``ctx.Pool`` of ``workers`` processes, each given ``arg`` once (``initializer``), started
    with signals held (``_held``); its processes listed: one dying fails the run (``pool_get``)."""
    with _held():
        pool = ctx.Pool(workers, initializer=initializer, initargs=(arg,))
        pool._winsample_workers = list(pool._pool)
    return pool


@contextlib.contextmanager
def _held():
    """SIGINT, SIGTERM and SIGHUP held on this thread while worker processes are started. A
    forked worker has the main process's handlers until ``worker_started`` sets its own: a
    signal to the whole process group in between raised the main process's exception in the
    worker's start (a traceback on stderr). Held, it waits for the worker's own handlers (a
    worker inherits the mask), and for the main process until the pool is made. The pool's
    threads, started here, keep them held: signals go to the main thread, as Python's do."""
    if not hasattr(signal, "pthread_sigmask") or threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.pthread_sigmask(signal.SIG_BLOCK, HELD_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def make_forkserver_pool(workers: int, initializer, arg):
    """``workers`` processes, each a fresh interpreter (forkserver, else spawn: nothing of this
    process's threads or libraries' state is copied), each given ``arg`` once (``initializer``,
    which calls ``worker_started``); signals held while they start, as ``make_part_pool``'s."""
    ctx = mp.get_context("forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn")
    if ctx.get_start_method() == "forkserver":
        ctx.set_forkserver_preload([SERVER_SIGNALS])
    return _start(ctx, workers, initializer, arg)


def make_part_pool(workers: int, initializer, setup, preload: str):
    """``workers`` processes for a run in parts, each given ``setup`` once (``initializer``).

    fork where it is safe (no thread of ours yet; the fast engine encodes on its caller's
    thread, never a pool of its own, and OpenBLAS's thread survives a fork by design): a
    worker starts at once, shares the coordinator's pages, and no server process is added to
    the tree. Else forkserver, whose server imports ``preload`` once."""
    methods = mp.get_all_start_methods()
    if "fork" in methods and threading.active_count() == 1:
        ctx = mp.get_context("fork")
        # what the coordinator holds (the inputs' list: ~1 kB an input) stays shared with the
        # workers: a worker's collector would otherwise write into every object's page
        gc.freeze()
    else:
        ctx = mp.get_context("forkserver" if "forkserver" in methods else "spawn")
        if "forkserver" in methods:
            ctx.set_forkserver_preload([SERVER_SIGNALS, preload])
    return _start(ctx, workers, initializer, setup)


WORKER_POLL_SECONDS = 0.2  # how often a wait for a worker's result checks that the workers live


def pool_get(pool, fut):
    """``fut.get()``, but a worker that dies (a crash in the tokenizer, a kill, out of memory)
    fails the run with one line instead of waiting forever: Pool replaces a dead worker and
    the task it held is never answered."""
    while True:
        try:
            return fut.get(WORKER_POLL_SECONDS)
        except mp.TimeoutError:
            pass
        check_alive(pool)


def check_alive(pool) -> None:
    """InputError (the pool stopped) when one of the pool's worker processes died."""
    for proc in getattr(pool, "_winsample_workers", ()):
        code = proc.exitcode
        if code is not None:
            _abandon_pool(pool)
            how = f"killed by signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
            raise InputError(f"an encoder worker process (pid {proc.pid}) died ({how}); nothing was written:"
                             " run again, or with --workers 1 to see the error")


REAP_SECONDS = 5.0  # how long a killed worker is waited for (SIGKILL: it ends at once)


def _abandon_pool(pool) -> None:
    """Stop a pool one of whose workers died, or a failed run's (``close_pool``): no respawning,
    every worker killed and reaped, and no ``terminate()`` (it would wait forever for the queue
    lock a worker may have died holding, or for the rest of a message it died sending)."""
    from multiprocessing import pool as mpool

    pool._winsample_broken = True
    try:
        pool._worker_handler._state = mpool.TERMINATE
        pool._change_notifier.put(None)
        if pool._worker_handler is not threading.current_thread():
            pool._worker_handler.join(REAP_SECONDS)  # ended, it starts no worker in place of a dead one
    except Exception:
        pass
    procs = list(getattr(pool, "_pool", ())) + list(getattr(pool, "_winsample_workers", ()))
    for proc in procs:
        try:
            proc.kill()
        except Exception:
            pass
    try:
        pool._terminate.cancel()  # the exit-time finalizer would call terminate() too
    except Exception:
        pass
    for proc in procs:  # reaped: no worker writes on while what it wrote is cleaned up
        try:
            proc.join(REAP_SECONDS)
        except Exception:
            pass
    pool._state = mpool.TERMINATE  # its __del__ would post to a pipe already closed: a traceback on stderr
    _release_locks(pool)


def _release_locks(pool) -> None:
    """Unlink the named semaphores of a pool started by forkserver or spawn (its queues' locks)
    now, as their finalizers would at a normal exit: a signalled run ends with ``os._exit``, and
    the resource tracker then warned on stderr of "leaked semaphore objects"."""
    from multiprocessing import synchronize, util

    names = set()
    for q in (getattr(pool, "_inqueue", None), getattr(pool, "_outqueue", None), getattr(pool, "_change_notifier", None)):
        for lock in (getattr(q, "_rlock", None), getattr(q, "_wlock", None)):
            name = getattr(getattr(lock, "_semlock", None), "name", None)
            if name:
                names.add(name)
    for f in list(getattr(util, "_finalizer_registry", {}).values()) if names else ():
        args = getattr(f, "_args", None) or (None,)
        if getattr(f, "_callback", None) is synchronize.SemLock._cleanup and args[0] in names:
            try:
                f()  # runs once and leaves the registry
            except Exception:
                pass


def close_pool(pool, failed: bool = False) -> None:
    """Stop ``pool``'s workers and wait for them to end. ``failed``: the run is ending on an
    error or a signal. A signal sent to the whole process group (a closed terminal's SIGHUP, a
    service manager's SIGTERM) ends the workers at once, and one may die halfway through
    sending a result: ``terminate()`` and ``join()`` would then wait forever for the rest of
    that message. So a failed run's worker processes are killed and reaped instead
    (``_abandon_pool``), and the pool's own threads, blocked on the pipe, are left behind
    (daemons)."""
    if getattr(pool, "_winsample_broken", False):
        return
    if failed and getattr(pool, "_winsample_workers", None):  # processes (a thread pool lists none)
        _abandon_pool(pool)
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





def bound_malloc(fast: bool, on_main: bool) -> None:
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
    engines' shared budget (``fastengine.Budget``) bounds the peak, and its ``malloc_trim``
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


__all__ = ["EncoderPool", "make_pool", "make_forkserver_pool", "make_part_pool", "worker_started", "pool_get", "check_alive", "close_pool",
           "bound_malloc"]
