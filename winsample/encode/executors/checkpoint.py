"""``--resume`` in the local runner: the partial to continue (``open_partial``), its writers
reopened at the checkpoint (``resume_writers``), and checkpoints made durable off the main
thread (``Checkpointer``); the journal itself is ``encode.resume``'s."""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Callable
from pathlib import Path

from ... import disk
from .. import dedup, pipeline, resume
from ..config import RunSpec
from ..pipeline import DocRule, SplitWriter

CHECKPOINT_IN_BACKGROUND = True  # tests that stop a run right after a checkpoint turn this off


def open_partial(work: Path, params: dict, sources, want: bool) -> dict:
    """{"journal": the checkpoint to continue from, or None, "note": why none was used}.

    Without a usable checkpoint ``work`` is made empty (a plain run always starts over, and
    says so when it drops one: ``resume.DROPPED``).
    """
    note = None
    if want:
        try:
            return {"journal": resume.read_journal(work, params, sources), "note": None}
        except resume.Stale as e:
            note = str(e)
    elif work.is_dir() and any(work.iterdir()):  # a checkpoint, or a run in parts' parts
        note = resume.DROPPED
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    return {"journal": None, "note": note}


def new_writers(stage: Path, spec: RunSpec) -> dict:
    tail = spec.config.val_fraction if spec.config.tail else None
    return {s: SplitWriter(stage, s, spec.dtype, tail_fraction=tail) for s in DocRule.of(spec).writers}


def resume_writers(stage: Path, spec: RunSpec, start: dict) -> tuple[dict, dict, dict, dedup.Seen | None]:
    """(writers, stats, summary of what was reused, the ``--dedup`` hashes or None): continued
    from ``start``'s checkpoint when its files hold exactly the checkpointed bytes, else new and
    empty (the folder cleared)."""
    on = spec.config.dedup is not None
    stats = pipeline.new_stats(on)
    writers, seen = new_writers(stage, spec), (dedup.Seen(stage) if on else None)
    j, note = start["journal"], start["note"]
    if j is not None:
        try:
            if set(j["writers"]) != set(writers):
                raise resume.Stale("the checkpoint's files do not match the split method")
            for name, w in writers.items():
                w.reopen(j["writers"][name])
            got = dict(stats, **j["stats"])
            if seen is not None:  # the hashes of the documents the checkpoint kept
                seen.reopen(got["documents"] - got["documents_skipped_empty"] - got[pipeline.DEDUP_STAT])
            done = len(j["inputs"])
            return writers, got, {
                "inputs": done, "input_bytes": sum(r["bytes"] for r in j["inputs"]),
                "tokens": sum(w.tokens for w in writers.values()),
            }, seen
        except (resume.Stale, KeyError, TypeError) as e:
            note = str(e) if isinstance(e, resume.Stale) else f"malformed checkpoint ({e})"
            for w in writers.values():
                w.abandon()  # not close(): reopen may have left them closed, and nothing of them is kept
            if seen is not None:
                seen.f.close()
            shutil.rmtree(stage, ignore_errors=True)
            stage.mkdir()
            writers, seen = new_writers(stage, spec), (dedup.Seen(stage) if on else None)
    return writers, stats, ({"inputs": 0, "discarded": note} if note else None), seen


class Checkpointer:
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
                    with disk.naming(path):
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


__all__ = ["Checkpointer", "open_partial", "new_writers", "resume_writers", "CHECKPOINT_IN_BACKGROUND"]
