"""A data folder as a whole: the files it owns, its staging folder and recovery after an interrupted commit."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from ..disk.atomic import remove_stale_tmp
from ..disk.lock import LOCK_NAME
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


def meta_stamp(out_dir: str | Path) -> tuple | None:
    """The identity of ``out_dir``'s meta.json (None: none there): (dev, inode, mtime in ns, size).
    Every encode commits a set with meta.json moved in last, under a new inode (``committed_since``)."""
    try:
        st = os.stat(Path(out_dir) / META_JSON)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)


def committed_since(out_dir: str | Path, before: tuple | None, start_ns: int) -> bool:
    """Whether a run that found meta.json as ``before`` (``meta_stamp``) and started at
    ``start_ns`` (``time.time_ns()``) committed a set: meta.json is another file now, written
    since the start. An earlier run's set that ``recover`` moved in was written before it."""
    now = meta_stamp(out_dir)
    # 1 s of slack: a file's mtime comes from the kernel's coarse clock, a few ms behind time_ns
    return now is not None and now != before and now[2] >= start_ns - 1_000_000_000


def unfinished_commit(folder: str | Path) -> str:
    """Why ``folder``'s files may not match its meta.json, when an encode stopped while moving its
    committed set in (its staging folder holds the COMMIT mark; the next encode into the folder
    finishes the moves first), as a clause to put after a mismatch; else ""."""
    if (Path(folder) / STAGING_DIR / COMMIT_MARK).exists():
        return (f"; an encode into {folder} stopped while moving its new set in ({STAGING_DIR} holds the rest):"
                " run that encode again, which finishes the move first")
    return ""


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
    it can be told: the token file, the meta.json (``meta_path`` or the one in/beside it),
    winsample's own split names in the folder, and every name meta.json holds, wherever it holds
    it (split files, indexes, provenance, other layouts' files, a tokenizer file, and any kind
    added later).
    Outputs must never be one of these (``refuse_overwrite``). Never raises on a broken meta."""
    path = Path(path)
    folder = path if path.is_dir() else path.parent
    files = [] if path.is_dir() else [path]
    if meta_path and Path(meta_path) != folder / META_JSON:  # --meta elsewhere: the token file's own folder is the dataset's too
        files += dataset_files(path)
    mp = Path(meta_path) if meta_path else folder / META_JSON
    files.append(mp)
    for split in SPLITS:
        files += [folder / bin_name(split), folder / doc_index_name(split)]
    files.append(folder / LOCK_NAME)  # encode's lock: replaced, a second encode into the folder would no longer wait
    try:
        meta = json.loads(read_small_text(mp, "meta.json"))
    except (WinsampleError, ValueError, RecursionError):
        meta = None
    base = mp.parent
    # One rule for every kind of file a dataset has or will have (provenance, other layouts' files,
    # a tokenizer file, …): every name meta.json holds anywhere is protected, not a list of kinds.
    stack = [meta] if isinstance(meta, dict) else []
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            stack += list(v.values())
        elif isinstance(v, list):
            stack += v
        elif isinstance(v, str) and v and "\0" not in v and len(v) < 4096:
            files += [Path(v), base / v] if os.path.isabs(v) else [base / v]
    return files
