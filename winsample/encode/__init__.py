"""``winsample encode``: text → train.bin / val.bin / doc indexes / meta.json.

- ``inputs``: finding the inputs and reading their documents (text, gzip, JSONL, Parquet);
- ``pipeline``: what both runners do with a document (split rule, ids, writers, meta.json);
- ``resume``: the checkpoint journal of ``--resume``;
- ``executors.local``: the local runner (encoder processes or threads);
- ``executors.ray``: ``--engine ray``, the same bytes from Ray tasks.
"""

from __future__ import annotations

from .executors.local import encode_corpus
from .pipeline import ERROR_MODES, SPLIT_METHODS

__all__ = ["encode_corpus", "SPLIT_METHODS", "ERROR_MODES"]
