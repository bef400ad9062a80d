"""Checkpoints of ``winsample encode`` so that ``--resume`` reuses the work of a crashed run.

``encode`` grows its outputs in ``OUT_DIR/.partial/`` (``formats.partial_dir``). At the end of
an input file, at most once every ``CHECKPOINT_SECONDS``, it flushes and fsyncs them and
atomically rewrites ``.partial/journal.json``::

    {"format": "winsample-partial", "version": 1,
     "params":  {…everything that changes the output bytes: tokenizer (name, ranks sha256,
                 n_vocab, eot), dtype, eot, split method / fraction / seed, text field,
                 input format, errors mode, winsample version…},
     "inputs":  [{"path": absolute path, "bytes": size, "mtime_ns": …}, …],  # the inputs done
     "writers": {"train": {"bytes", "checksum", "documents", "starts_checksum", "max_token"}, …},
     "stats":   {…counts so far…}}

A checkpoint is trusted only when the new run's parameters equal ``params`` and its first
``len(inputs)`` inputs are the same files (absolute path, size, mtime_ns), and each file in
``.partial/`` still holds at least the checkpointed bytes whose xxh3-128 equals the recorded
checksum. Bytes written after the checkpoint are cut off. Anything else: the partial is
discarded and the run starts from the first input, saying why.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from . import formats

JOURNAL_FORMAT = "winsample-partial"
JOURNAL_VERSION = 1
CHECKPOINT_SECONDS = 1.0  # at most one fsync'ed checkpoint per second: cheap, loses ≤ 1 s + one input


class Stale(Exception):
    """The partial cannot be trusted; the message says why."""


def input_key(src) -> dict:
    return {"path": os.path.abspath(src.path), "bytes": src.size, "mtime_ns": src.mtime_ns}


def resumable(sources) -> bool:
    """Checkpoints need a stable identity for every input: not stdin."""
    return all(s.path is not None for s in sources)


def write_journal(work: Path, params: dict, sources, done: int, writers: dict, stats: dict) -> None:
    """Record that ``sources[:done]`` are fully in ``writers`` (already flushed and fsynced)."""
    formats.write_json_atomic(work / formats.PARTIAL_JOURNAL, {
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
    try:
        j = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise Stale("no checkpoint in " + str(work)) from None
    except (OSError, ValueError) as e:
        raise Stale(f"{path}: unreadable checkpoint: {e}") from None
    if not isinstance(j, dict) or j.get("format") != JOURNAL_FORMAT or j.get("version") != JOURNAL_VERSION:
        raise Stale(f"{path}: not a checkpoint this winsample writes")
    if j.get("params") != params:
        changed = sorted(k for k in set(params) | set(j.get("params") or {}) if (j.get("params") or {}).get(k) != params.get(k))
        raise Stale(f"options changed since the checkpoint ({', '.join(changed)})")
    done = j.get("inputs") or []
    if len(done) > len(sources):
        raise Stale(f"the checkpoint covers {len(done)} inputs, this run has {len(sources)}")
    for rec, src in zip(done, sources):
        if rec != input_key(src):
            raise Stale(f"{src.label}: changed since the checkpoint (path, size or mtime)")
    return j


__all__ = ["CHECKPOINT_SECONDS", "Stale", "read_journal", "write_journal", "resumable", "input_key"]
