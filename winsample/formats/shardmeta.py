"""A shard's own meta (shards/shard-NNNNN.json), written last by its task."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..disk.atomic import write_json_atomic
from ..errors import DataError
from .meta import ShardEntry, check_version
from .names import SHARD_FORMAT
from .schema import get_int, get_obj, get_str, schema_error


@dataclass
class ShardMeta:
    """``shards/shard-NNNNN.json``: what one Ray task wrote (its inputs, counts, shard entries).

    ``splits`` maps the task's streams (train/val, or all with ``--split tail``) to their
    ``ShardEntry``; ``key`` identifies the inputs and options the task ran with, so a rerun
    reuses an intact shard. ``reused`` is not stored: the driver's note that it was.
    """

    index: int
    key: str
    inputs: list
    input_bytes: int
    splits: dict[str, ShardEntry]
    stats: dict
    version: int = 1
    reused: bool = field(default=False, compare=False)

    def to_json(self) -> dict:
        return {"format": SHARD_FORMAT, "version": self.version, "index": self.index, "key": self.key,
                "inputs": self.inputs, "input_bytes": self.input_bytes,
                "splits": {n: e.to_json() for n, e in self.splits.items()}, "stats": self.stats}

    @classmethod
    def from_json(cls, obj: Any, where: str) -> ShardMeta:
        if not isinstance(obj, dict) or obj.get("format") != SHARD_FORMAT:
            schema_error(where, "not a winsample shard meta")
        version = check_version(obj, where, 1, "shard meta")
        splits = get_obj(obj, "splits", where, "", required=True)
        stats = get_obj(obj, "stats", where, "") or {}
        if not isinstance(obj.get("inputs", []), list):
            schema_error(where, "inputs is not a JSON list")
        return cls(index=get_int(obj, "index", where, "shard"), key=get_str(obj, "key", where, "shard"),
                   inputs=obj.get("inputs", []), input_bytes=get_int(obj, "input_bytes", where, "shard"),
                   splits={n: ShardEntry.from_json(e, where, f"splits.{n}") for n, e in splits.items()},
                   stats=stats, version=version)


def write_shard_meta(path: str | Path, meta: ShardMeta) -> None:
    write_json_atomic(path, meta.to_json())


def read_shard_meta(path: str | Path) -> ShardMeta | None:
    """A shard's own meta (written last by its task), or None if absent, unreadable or broken
    (the task then runs again)."""
    try:
        return ShardMeta.from_json(json.loads(Path(path).read_text(encoding="utf-8")), str(path))
    except (OSError, ValueError, RecursionError, DataError):
        return None
