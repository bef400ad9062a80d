"""File names of a dataset and of a plan: the one place that spells them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..disk.names import is_plain_name

SPLITS = ("train", "val")
META_JSON = "meta.json"


def bin_name(split: str) -> str:
    return f"{split}.bin"


def doc_index_name(split: str) -> str:
    return f"{split}.docs.npy"


def mask_name(split: str) -> str:
    """A split's loss mask: one byte per token, 1 where the model trains on that token (``encode --chat``)."""
    return f"{split}.mask.bin"


SHARDS_DIR = "shards"
SHARD_LAYOUT = "winsample-shards"
SHARD_FORMAT = "winsample-shard"


def shard_bin_name(split: str, index: int) -> str:
    """A shard's token file, relative to OUT_DIR: ``shards/train-00012.bin``."""
    return f"{SHARDS_DIR}/{split}-{index:05d}.bin"


def shard_doc_index_name(split: str, index: int) -> str:
    return f"{SHARDS_DIR}/{split}-{index:05d}.docs.npy"


def shard_prov_name(split: str, index: int) -> str:
    """A shard's raw provenance records (``ProvenanceWriter``'s), joined into ``prov_name`` by the driver."""
    return f"{SHARDS_DIR}/{split}-{index:05d}.prov.raw"


def shard_prov_ids_name(split: str, index: int) -> str:
    return f"{SHARDS_DIR}/{split}-{index:05d}.prov.ids.raw"


def shard_meta_name(index: int) -> str:
    return f"{SHARDS_DIR}/shard-{index:05d}.json"


def plan_sidecar(plan_path: str | Path) -> Path:
    return Path(f"{plan_path}.json")


def _with_infix(plan_path: str | Path, infix: str) -> Path:
    """``PLAN.npy`` → ``PLAN.<infix>.npy`` (the infix goes before a final .npy, else at the end)."""
    p = str(plan_path)
    return Path(f"{p[:-4]}.{infix}.npy" if p.endswith(".npy") else f"{p}.{infix}")


def plan_for_scale(plan_path: str | Path, T: int) -> Path:
    """Plan file for one of several -T values: ``PLAN.T512.npy``."""
    return _with_infix(plan_path, f"T{T}")


def plan_shard(plan_path: str | Path, rank: int, shards: int) -> Path:
    """Plan file of one data-parallel rank: ``PLAN.shard0of4.npy``."""
    return _with_infix(plan_path, f"shard{rank}of{shards}")


def materialized_path(plan_path: str | Path) -> Path:
    """Token windows written beside a plan: ``PLAN.tokens.npy``."""
    return _with_infix(plan_path, "tokens")


def plan_family(plan_path: str | Path) -> list[Path]:
    """The files that exist beside ``plan_path`` under the names a run with ``-o plan_path``
    writes (``plan_for_scale``, ``plan_shard``, ``materialized_path``, sidecars, in any
    combination), whoever wrote them: ``plan.stale_family`` picks those an earlier run with this
    same -o wrote, which a new run's set replaces."""
    import re

    p = Path(plan_path)
    name = p.name
    if not name.endswith(".npy") or not p.parent.is_dir():
        return []
    stem = re.escape(name[:-4])
    own = re.compile(rf"^{stem}(\.T[0-9]+)?(\.shard[0-9]+of[0-9]+)?(\.tokens)?\.npy(\.json)?$")
    # fullmatch: `$` would also match before a final newline (a file 'PLAN.npy\n' is no file of the plan)
    return sorted(q for q in p.parent.iterdir() if own.fullmatch(q.name) and (q.is_file() or q.is_symlink()))


PARTIAL_DIR = ".partial"  # encode's work folder; kept after an interrupt for --resume
PARTIAL_JOURNAL = "journal.json"  # in PARTIAL_DIR: the last checkpoint (see resume.py)


def partial_dir(out_dir: str | Path) -> Path:
    """Where ``encode`` grows its outputs before they are staged (``OUT_DIR/.partial``)."""
    return Path(out_dir) / PARTIAL_DIR


def is_shard_name(name: Any) -> bool:
    """True for ``shards/<plain name>`` exactly (a shard file's name in meta.json)."""
    prefix = SHARDS_DIR + "/"
    return isinstance(name, str) and name.startswith(prefix) and is_plain_name(name[len(prefix):])
