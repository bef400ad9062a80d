"""``winsample encode``: text → train.bin / val.bin / doc indexes / meta.json.

- ``config``: :class:`EncodeConfig`, a run's options, checked once;
- ``inputs``: finding the inputs and reading their documents (text, gzip, JSONL, Parquet);
- ``textfile``: a plain-text file as byte ranges cut at safe points (the workers decode them);
- ``decoding``: byte-order marks, ``--input-encoding``, ``BadInput`` and a run's ``Reading`` (its counts);
- ``badinput``: ``--on-bad-input``: a text file checked before it is read (skip), every bad input found (fail);
- ``pipeline``: what both runners do with a document (split rule, ids, writers, meta.json);
- ``resume``: the checkpoint journal of ``--resume``;
- ``executors.local``: the local runner (encoder processes or threads);
- ``executors.ray``: ``--engine ray``, the same bytes from Ray tasks (Ray imported only there);
  ``executors.ray_parts``: ``--merge``, the local runner's parts as Ray tasks;
- ``sft``: ``--chat`` / ``--prompt-field``: records rendered whole, with a loss mask beside the tokens.
"""

from __future__ import annotations

import time

from .. import formats
from ..errors import Interrupted
from .config import ERROR_MODES, SPLIT_METHODS, EncodeConfig
from .executors.local import encode_corpus, run_local


def run(config: EncodeConfig, *, progress=None, notice=None) -> dict:
    """Run ``config`` on its engine (``local`` or ``ray``); return the summary (``--json`` prints it).

    A signal raises ``Interrupted``; one that came after the set was committed (meta.json went in
    last, so a new one says so) names the folder as committed whole, whichever step it cut short."""
    before, start = formats.meta_stamp(config.out_dir), time.time_ns()
    try:
        return _run(config, progress, notice)
    except KeyboardInterrupt as e:
        if (isinstance(e, Interrupted) and e.committed) or not formats.committed_since(config.out_dir, before, start):
            raise
        raise Interrupted.after_commit(e, str(config.out_dir)) from None


def _run(config: EncodeConfig, progress, notice) -> dict:
    if config.records:
        from .sft import run as run_records

        return run_records(config, progress=progress, notice=notice)
    if config.engine == "ray":
        from .executors.ray import run_ray

        return run_ray(config, progress=progress, notice=notice)
    return run_local(config, progress=progress, notice=notice)


__all__ = ["run", "encode_corpus", "EncodeConfig", "SPLIT_METHODS", "ERROR_MODES"]
