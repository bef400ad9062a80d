"""``encode --engine ray --merge`` as the local runner's run in parts, each part a Ray task.

``executors.ray`` sends a ``--merge`` run here when the local plan spreads the input as its own
shards would (``parts_spread``). The local runner (``local.run_prepared``) then runs with
``PartPool`` as its pool: ``apply_async`` as ``multiprocessing``'s, each call a Ray task on a
worker that fetches the run's setup once (``_part_task``). Parts write their ids in place and the
driver merges them as the local coordinator does; finished parts outlive a failed run and the
same command reuses them (``local._Setup.keep_parts``), as the shards do. Ray is imported by
the caller (or, in a worker, by the task); ``import winsample`` never loads it.
"""

from __future__ import annotations

import os
import shutil
import threading
import time

from ... import formats
from ...errors import InputError, Interrupted
from . import local
from .ray import MAX_RETRIES

CANCEL_WAIT_SECONDS = 10  # a failed run in parts waits this long for its cancelled tasks to end


def parts_spread(setup) -> bool:
    """Whether the local runner's parts spread the input as this module's shards would: no text
    file larger than a shard left whole (with ``--split doc`` a text file's split is known only
    at its end, so parts never cut one; the shard tasks do, deciding it in a task of its own)."""
    limit = setup.spec.config.shard_bytes
    return not any(s.whole and setup.sources[s.index].kind == "text" and (setup.sources[s.index].size or 0) > limit
                   for part in setup.plan for s in part)


def run_parts_on_ray(ray, setup, progress) -> dict:
    """``local.run_prepared`` with Ray tasks as its workers: the same parts, the same merge."""
    setup.workers = max(1, int(ray.cluster_resources().get("CPU", 1)))  # the cluster's, not this machine's
    try:
        summary = local.run_prepared(setup, lambda s: PartPool(ray, s), progress=progress)
    except Interrupted as e:
        if e.committed:  # a signal after the commit: the new set is in place all the same
            shutil.rmtree(setup.out_dir / formats.SHARDS_DIR, ignore_errors=True)
        raise
    # an earlier unmerged run's shards: its meta.json, which named them, is replaced (as the shard path's merge does)
    shutil.rmtree(setup.out_dir / formats.SHARDS_DIR, ignore_errors=True)
    resumed = summary.get("resumed") or {}  # the line printed says how many parts a rerun reused
    summary.update(engine="ray", merged=True, shards=summary.get("parts", 0), shards_reused=resumed.get("parts", 0))
    return summary


_RUN: dict = {}  # a Ray worker's run in parts: its key (the setup itself is the local runner's to keep)


def _part_task(key: str, boxed: list, fn, args: tuple):
    """``fn(*args)`` in a Ray worker set up for run ``key`` (its setup fetched once a worker)."""
    if _RUN.get("key") != key:
        import ray

        setup = ray.get(boxed[0])  # in a list: Ray passes the reference, not the value
        local.use_setup(setup, processes=min(setup.workers, os.cpu_count() or 1))  # this node's share
        _RUN["key"] = key
    return fn(*args)


class _Future:
    """A Ray task's result as ``multiprocessing``'s ``AsyncResult``: ``ready``, ``get(timeout)``."""

    def __init__(self, callback, error_callback):
        self.callback, self.error_callback = callback, error_callback
        self.done = threading.Event()
        self.value = self.error = None

    def settle(self, value=None, error: BaseException | None = None) -> None:
        self.value, self.error = value, error
        self.done.set()
        if error is None and self.callback:
            self.callback(value)
        elif error is not None and self.error_callback:
            self.error_callback(error)

    def ready(self) -> bool:
        return self.done.is_set()

    def get(self, timeout: float | None = None):
        import multiprocessing as mp

        if not self.done.wait(timeout):
            raise mp.TimeoutError
        if self.error is not None:
            raise self.error
        return self.value


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


class PartPool:
    """Ray tasks as the pool of a run in parts: ``apply_async(fn, args)`` runs ``fn`` on the
    cluster (``MAX_RETRIES`` on a dead worker); a thread of the driver settles the results. A
    task's own exception arrives as itself (``WinsampleError``, a bad range), Ray's failures as
    InputError; if the thread itself fails (the cluster is gone), every result waiting fails too."""

    def __init__(self, ray, setup):
        import uuid

        self.ray = ray
        self.key = uuid.uuid4().hex
        self.boxed = [ray.put(setup)]  # pickled once: each worker unpickles (and checks) the tokenizer once
        self.task = ray.remote(num_cpus=1, max_retries=MAX_RETRIES)(_part_task)
        self.lock = threading.Lock()
        self.pending: dict = {}
        self.closed = False
        self.broken: InputError | None = None
        self.waiter = threading.Thread(target=self._settle, name="winsample-ray-results", daemon=True)
        self.waiter.start()

    def apply_async(self, fn, args: tuple, callback=None, error_callback=None) -> _Future:
        fut = _Future(callback, error_callback)
        if self.broken is not None:
            fut.settle(error=self.broken)
            return fut
        with self.lock:  # held while submitting: terminate() cancels every task it knows of
            self.pending[self.task.remote(self.key, self.boxed, fn, args)] = fut
        return fut

    def _settle(self) -> None:
        try:
            self._settle_results()
        except BaseException as e:  # Ray Client lost, an error in Ray itself: nothing waits forever
            self.broken = InputError(f"the Ray cluster stopped answering: {_first_line(e)}")
            with self.lock:
                futs, self.pending = list(self.pending.values()), {}
            for fut in futs:
                fut.settle(error=self.broken)

    def _settle_results(self) -> None:
        ray = self.ray
        while not self.closed:
            with self.lock:
                refs = list(self.pending)
            if not refs:
                time.sleep(0.005)
                continue
            done, _ = ray.wait(refs, num_returns=1, timeout=0.1)
            for ref in done:
                with self.lock:
                    fut = self.pending.pop(ref, None)
                if fut is None:  # terminate() let it go
                    continue
                try:
                    value = ray.get(ref)
                except ray.exceptions.RayTaskError as e:
                    cause = getattr(e, "cause", None)
                    fut.settle(error=cause if isinstance(cause, Exception) else InputError(f"a Ray task failed: {_first_line(e)}"))
                except ray.exceptions.RayError as e:
                    fut.settle(error=InputError(f"Ray could not run a task: {_first_line(e)}"))
                else:
                    fut.settle(value)

    def terminate(self) -> None:
        self.closed = True
        with self.lock:
            self.cancelled, self.pending = list(self.pending), {}
        for ref in self.cancelled:
            self.ray.cancel(ref, force=True)

    def join(self) -> None:
        """Return once no task of the run can still write: a cancelled one may be mid-part."""
        self.waiter.join()
        refs = getattr(self, "cancelled", [])
        if refs:
            self.ray.wait(refs, num_returns=len(refs), timeout=CANCEL_WAIT_SECONDS)
