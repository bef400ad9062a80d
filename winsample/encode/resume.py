"""Checkpoints of ``winsample encode`` so that ``--resume`` reuses the work of a crashed run.

``encode`` grows its outputs in ``OUT_DIR/.partial/`` (``formats.partial_dir``). At the end of
an input file, at most once every ``CHECKPOINT_SECONDS``, it flushes and fsyncs them and
atomically rewrites ``.partial/journal.json``::

    {"format": "winsample-partial", "version": 1,
     "params":  {…everything that changes the output bytes: tokenizer (name, ranks sha256,
                 n_vocab, eot), dtype, eot, split method / fraction / seed, text field,
                 input format, errors mode, winsample version…},
     "inputs":  [{"path": absolute path, "bytes": size, "mtime_ns": …, "ctime_ns": …}, …],  # the inputs done
     "writers": {"train": {"bytes", "checksum", "documents", "starts_checksum", "max_token"}, …},
     "stats":   {…counts so far…}}

A checkpoint is trusted only when the new run's parameters equal ``params`` and its first
``len(inputs)`` inputs are the same files (absolute path, size, mtime_ns, ctime_ns), and each file in
``.partial/`` still holds at least the checkpointed bytes whose xxh3-128 equals the recorded
checksum. Bytes written after the checkpoint are cut off. Anything else: the partial is
discarded and the run starts from the first input, saying why.
"""

from __future__ import annotations

import os
from pathlib import Path

from .. import disk, formats
from ..errors import WinsampleError

JOURNAL_FORMAT = "winsample-partial"
JOURNAL_VERSION = 1
CHECKPOINT_SECONDS = 1.0  # at most one fsync'ed checkpoint per second: cheap, loses ≤ 1 s + one input
DROPPED = "an interrupted run's work was dropped: a run without --resume starts over"  # a plain run's note when it drops a checkpoint


class Stale(Exception):
    """The partial cannot be trusted; the message says why."""


def input_key(src) -> dict:
    return {"path": os.path.abspath(src.path), "bytes": src.size, "mtime_ns": src.mtime_ns, "ctime_ns": src.ctime_ns}


def resumable(sources) -> bool:
    """Checkpoints need a stable identity for every input: not stdin."""
    return all(s.path is not None for s in sources)


def write_journal(work: Path, params: dict, sources, done: int, writers: dict, stats: dict) -> None:
    """Record that ``sources[:done]`` are fully in ``writers`` (already flushed and fsynced)."""
    disk.write_json_atomic(work / formats.PARTIAL_JOURNAL, {
        "format": JOURNAL_FORMAT,
        "version": JOURNAL_VERSION,
        "params": params,
        "inputs": [input_key(s) for s in sources[:done]],
        "writers": writers,
        "stats": stats,
    })


def read_journal(work: Path, params: dict, sources) -> dict:
    """The journal if it applies to this run (inputs and parameters unchanged), else ``Stale``."""
    path = work / formats.PARTIAL_JOURNAL
    if not os.path.lexists(path):
        raise Stale("no checkpoint in " + str(work))
    try:
        j = formats.load_json(path, "a checkpoint journal")
    except WinsampleError as e:
        raise Stale(f"unreadable checkpoint: {e}") from None
    if not isinstance(j, dict) or j.get("format") != JOURNAL_FORMAT or j.get("version") != JOURNAL_VERSION:
        raise Stale(f"{path}: not a checkpoint this winsample writes")
    problem = malformed(j)
    if problem:
        raise Stale(f"{path}: malformed checkpoint ({problem})")
    if j.get("params") != params:
        changed = sorted(k for k in set(params) | set(j.get("params") or {}) if (j.get("params") or {}).get(k) != params.get(k))
        raise Stale(f"options changed since the checkpoint ({', '.join(changed)})")
    done = j.get("inputs") or []
    if len(done) > len(sources):
        raise Stale(f"the checkpoint covers {len(done)} inputs, this run has {len(sources)}")
    for rec, src in zip(done, sources):
        if rec != input_key(src):
            raise Stale(f"{src.label}: changed since the checkpoint (path, size, mtime or ctime)")
    return j


WRITER_NAMES = ("train", "val", "all")  # the files a checkpoint may describe (all: --split tail)
_STATE = {"bytes": int, "documents": int, "checksum": str, "starts_checksum": str}
STAT_KEYS = ("documents", "documents_skipped_empty", "forced_cuts", "replaced_characters", "whole_documents")
OPTIONAL_STATS = ("boms_stripped", "skipped_inputs", "skipped_records", "duplicates_dropped")  # kept only when not 0 (and bad_inputs, a list); duplicates_dropped: --dedup runs only


def _count(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def malformed(j: dict) -> str | None:
    """What is wrong with a journal's fields (every one is untrusted: a tampered journal must
    never put a wrong count into meta.json or cut a file at a position that is not a token)."""
    writers = j.get("writers")
    if not isinstance(writers, dict) or not writers or not set(writers) <= set(WRITER_NAMES):
        return "writers must name train/val or all"
    for name, st in writers.items():
        if not isinstance(st, dict):
            return f"writers.{name} is not an object"
        for key, typ in _STATE.items():
            v = st.get(key)
            if not (_count(v) if typ is int else isinstance(v, str)):
                return f"writers.{name}.{key} is {v!r}"
        mt = st.get("max_token")
        if mt is not None and not (isinstance(mt, int) and not isinstance(mt, bool) and mt >= -1):  # -1: no id yet
            return f"writers.{name}.max_token is {st['max_token']!r}"
    stats = j.get("stats")
    if not isinstance(stats, dict):
        return "stats are not the counts a run keeps"
    bad = stats.get("bad_inputs", [])
    counts = {k: v for k, v in stats.items() if k != "bad_inputs"}
    if ((set(counts) | {"whole_documents"}) - set(OPTIONAL_STATS)) != set(STAT_KEYS) or not all(_count(v) for v in counts.values()):
        return "stats are not the counts a run keeps"
    if not isinstance(bad, list) or not all(isinstance(b, dict) for b in bad):
        return "stats.bad_inputs is not a list of bad inputs"
    inputs = j.get("inputs")
    if not isinstance(inputs, list) or not all(isinstance(r, dict) for r in inputs):
        return "inputs is not a list of files"
    return None


__all__ = ["CHECKPOINT_SECONDS", "Stale", "read_journal", "write_journal", "resumable", "input_key", "malformed"]
