"""A set of files that must appear together: written into a staging folder, committed by a mark, rolled forward after a crash."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Iterable
from pathlib import Path

from ..errors import DataError
from .atomic import atomic_open, fsync_dir
from .names import inside_name, read_small_text

# --- a set of files that must appear together ----------------------------------------------

STAGING_DIR = ".winsample-staging"
COMMIT_MARK = "COMMIT"


def commit_staged(stage: Path, out_dir: str | Path, names: list[str], remove: Iterable[str] = ()) -> None:
    """Move ``names`` from ``stage`` into ``out_dir`` as one set; the last name goes in last.

    A name may lie in a subfolder (``llmc/train_000000.bin``): the folder is made in
    ``out_dir`` as needed. ``remove``: names in ``out_dir`` the new set no longer has (a layout
    an earlier run wrote), deleted before the last name goes in, so no stale file stays
    beside the new set (nor a subfolder they alone filled). Files are fsynced, then a COMMIT mark (the names) is written: from
    that moment the new set is the truth, and ``recover`` finishes the moves if the process
    dies midway. Before the mark, an interrupted run leaves the previous set untouched.
    """
    out_dir = Path(out_dir)
    for name in names:
        with open(stage / name, "rb+") as f:
            os.fsync(f.fileno())
    remove = [r for r in remove if r not in names]
    with atomic_open(stage / COMMIT_MARK, "w") as f:
        json.dump({"names": names, "remove": remove} if remove else names, f)
    roll_forward(stage, out_dir, names, remove)


def was_committed(stage: Path) -> bool:
    """Whether the set staged in ``stage`` was committed: its COMMIT mark is written (``roll_forward``
    finishes the moves) or the folder is gone (the moves done; nothing else removes it)."""
    return not stage.exists() or (stage / COMMIT_MARK).exists()


def read_commit_mark(mark: Path) -> tuple[list[str], list[str]]:
    """(names, remove) of a COMMIT mark; DataError (nothing moved) unless each is a relative
    path of plain names (``train.bin``, ``llmc/train_000000.bin``) inside the folder.

    A mark is metadata like any other: a stale or planted one naming ``../../x`` must not make
    a run move or delete a file outside its folder."""
    try:
        obj = json.loads(read_small_text(mark, "a commit mark"))
    except (ValueError, DataError) as e:
        obj = e
    names = remove = None
    if isinstance(obj, list):
        names, remove = obj, []
    elif isinstance(obj, dict) and set(obj) <= {"names", "remove"}:
        names, remove = obj.get("names"), obj.get("remove", [])
    ok = isinstance(names, list) and bool(names) and isinstance(remove, list)
    if ok:
        try:
            for name in names + remove:
                inside_name(name, str(mark))
        except DataError:
            ok = False
    if not ok:
        raise DataError(f"{mark}: corrupt commit mark (not a list of file names inside {mark.parent.parent}); nothing was moved:"
                        f" check the folder and remove {mark.parent}")
    return names, remove


def roll_forward(stage: Path, out_dir: Path, names: list[str] | dict, remove: Iterable[str] = ()) -> None:
    """Finish the moves of a committed set: first every old file it replaces goes (the last name,
    meta.json, first; then ``remove``), then the new files go in (the last name last). A kill
    midway leaves files missing, which every reader notices (and the next run finishes the
    moves), never an old file beside a new one: a Megatron ``.idx`` of the old set over a ``.bin``
    of the new read without an error. Only a name whose new file is still staged is replaced, so
    the moves can be finished after a crash in any step."""
    if isinstance(names, dict):  # a mark with removals: {"names": [...], "remove": [...]}
        names, remove = names["names"], names.get("remove", [])
    pending = [name for name in names if (stage / name).exists()]
    for name in reversed(pending):  # meta.json (the last name) first: the set stops claiming to be whole
        (out_dir / name).unlink(missing_ok=True)
    for r in remove:
        (out_dir / r).unlink(missing_ok=True)
    for d in sorted({(out_dir / r).parent for r in remove} - {out_dir}, key=lambda d: len(d.parts), reverse=True):
        with contextlib.suppress(OSError):  # only a folder the old set alone filled: rmdir leaves any other
            d.rmdir()
    fsync_dir(out_dir)
    for name in pending:
        (out_dir / name).parent.mkdir(parents=True, exist_ok=True)
        os.replace(stage / name, out_dir / name)
    fsync_dir(out_dir)
    shutil.rmtree(stage, ignore_errors=True)
