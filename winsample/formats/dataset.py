"""A data folder as a whole: the files it owns, its staging folder and recovery after an interrupted commit."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from ..disk.atomic import remove_stale_tmp
from ..disk.names import read_small_text
from ..disk.staging import COMMIT_MARK, STAGING_DIR, read_commit_mark, roll_forward
from ..errors import WinsampleError
from .names import META_JSON, SPLITS, bin_name, doc_index_name
from .provenance import prov_ids_name, prov_name


def staging_dir(out_dir: str | Path) -> Path:
    """A fresh, empty folder inside ``out_dir`` to write a new set of files into."""
    out_dir = Path(out_dir)
    recover(out_dir)
    stage = out_dir / STAGING_DIR
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir(parents=True)
    return stage


def recover(out_dir: str | Path) -> str | None:
    """Finish or discard what an interrupted run left in ``out_dir``.

    Returns "rolled forward", "cleaned" or None (nothing to do). Stale ``*.tmp`` files of
    winsample's own names are removed too.
    """
    out_dir = Path(out_dir)
    stage = out_dir / STAGING_DIR
    result = None
    if stage.is_dir():
        mark = stage / COMMIT_MARK
        if mark.exists():
            roll_forward(stage, out_dir, *read_commit_mark(mark))
            result = "rolled forward"
        else:
            shutil.rmtree(stage, ignore_errors=True)
            result = "cleaned"
    if out_dir.is_dir():
        for split in SPLITS:
            for name in (bin_name(split), doc_index_name(split), prov_name(split), prov_ids_name(split)):
                remove_stale_tmp(out_dir / name)
        remove_stale_tmp(out_dir / META_JSON)
    return result


def dataset_files(path: str | Path, meta_path: str | Path | None = None) -> list[Path]:
    """Every file of the dataset ``path`` (a data folder or a token file) belongs to, as far as
    it can be told: the token file, the meta.json (``meta_path`` or the one in/beside it), the
    files it names, winsample's own names in the folder, and a tokenizer file it names.
    Outputs must never be one of these (``refuse_overwrite``). Never raises on a broken meta."""
    path = Path(path)
    folder = path if path.is_dir() else path.parent
    files = [] if path.is_dir() else [path]
    mp = Path(meta_path) if meta_path else folder / META_JSON
    files.append(mp)
    for split in SPLITS:
        files += [folder / bin_name(split), folder / doc_index_name(split)]
    try:
        meta = json.loads(read_small_text(mp, "meta.json"))
    except (WinsampleError, ValueError, RecursionError):
        meta = None
    base = mp.parent
    if isinstance(meta, dict):
        entries = list(meta["splits"].values()) if isinstance(meta.get("splits"), dict) else []
        for e in entries:
            if not isinstance(e, dict):
                continue
            for sub in [e] + [x for x in (e.get("shards") if isinstance(e.get("shards"), list) else []) if isinstance(x, dict)]:
                for key in ("file", "doc_index"):
                    if isinstance(sub.get(key), str) and sub[key] and "\0" not in sub[key]:
                        files.append(base / sub[key])
        tok = meta.get("tokenizer")
        if isinstance(tok, dict) and isinstance(tok.get("file"), str) and tok["file"] and "\0" not in tok["file"]:
            files += [Path(tok["file"]), base / tok["file"]]
        stack = [meta.get("layouts")]  # other layouts' files (Megatron .idx, llm.c shards): every name they list
        while stack:
            v = stack.pop()
            if isinstance(v, dict):
                stack += list(v.values())
            elif isinstance(v, list):
                stack += v
            elif isinstance(v, str) and v and "\0" not in v and not os.path.isabs(v):
                files.append(base / v)
    return files
