"""Atomic writes: a file appears whole under its name or not at all (temp file, fsync, rename)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..errors import InputError
from .names import glob_escape

# --- atomic writes ----------------------------------------------------------------------


TMP_SUFFIX = ".winsample.tmp"


def tmp_path(path: str | Path) -> Path:
    """Where ``path`` is written before it is renamed into place (same folder, same disk).

    A hidden name with this process's pid (``.train.bin.4242.winsample.tmp``): never a name a
    user gives their own file (their ``train.bin.tmp`` is left alone), and two processes
    writing one path never write one temp file."""
    path = Path(path)
    return path.parent / f".{path.name}.{os.getpid()}{TMP_SUFFIX}"


def remove_stale_tmp(path: str | Path, dead_only: bool = False) -> None:
    """Remove temp files ``tmp_path`` gave for ``path`` in earlier (killed) runs, any pid;
    ``dead_only``: only those whose process is gone (no lock keeps another run from writing it)."""
    path = Path(path)
    if path.parent.is_dir():
        for tmp in path.parent.glob(f".{glob_escape(path.name)}.*{TMP_SUFFIX}"):
            pid = tmp.name[len(path.name) + 2 : -len(TMP_SUFFIX)]
            if pid.isdigit() and not (dead_only and _alive(int(pid))):
                tmp.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):  # another user's process, or not a pid to ask about: kept
        return True
    return True


def fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def check_replaceable(path: str | Path) -> None:
    """InputError unless ``path`` is absent or a regular file: an atomic write renames over it,
    which would replace a device such as /dev/null with a plain file (as root) or fail on a folder,
    and would replace a symbolic link itself, not write through it (``/dev/stdout``, a link to
    ``/proc/self/fd/1``, became a plan file)."""
    path = Path(path)
    if os.path.islink(path):
        raise InputError(f"{path}: cannot write: it is a symbolic link, which writing the file whole would replace"
                         " rather than write through; give the path of a new or regular file")
    if os.path.lexists(path) and not path.is_file():
        what = "a folder" if path.is_dir() else "not a regular file"
        raise InputError(f"{path}: cannot write: it exists and is {what}; give a new or regular file's path")


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temp path to write; on success fsync it and rename it over ``path``.

    On any exception (including KeyboardInterrupt) the temp file is removed and ``path`` is
    left exactly as it was. ``path`` must be absent or a regular file (``check_replaceable``).
    """
    path = Path(path)
    check_replaceable(path)
    tmp = tmp_path(path)
    try:
        yield tmp
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fsync_dir(path.parent)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@contextmanager
def atomic_open(path: str | Path, mode: str = "wb") -> Iterator[Any]:
    """``open(path, mode)`` that only replaces ``path`` when the block succeeds."""
    with atomic_path(path) as tmp:
        with open(tmp, mode) as f:
            yield f


@contextmanager
def atomic_paths(*paths: str | Path) -> Iterator[list[Path]]:
    """``atomic_path`` for files written together: yield a temp path for each; on success fsync
    them all, then rename each over its path in the order given (the last last). An exception
    while they are written (a full disk included) removes them all and replaces none; one that
    lands between two renames (a signal) leaves the earlier files new beside the later ones old,
    which the caller must be able to tell (a plan's rows against its sidecar's rows_checksum)."""
    paths_ = [Path(p) for p in paths]
    for p in paths_:
        check_replaceable(p)
    tmps = [tmp_path(p) for p in paths_]
    try:
        yield tmps
        for t in tmps:
            with open(t, "rb+") as f:
                os.fsync(f.fileno())
        for t, p in zip(tmps, paths_):
            os.replace(t, p)
        for folder in dict.fromkeys(p.parent for p in paths_):
            fsync_dir(folder)
    except BaseException:
        for t in tmps:
            t.unlink(missing_ok=True)
        raise


def dump_json(obj: Any, f) -> None:
    """winsample's JSON files as written: two-space indent, keys in order, UTF-8 text, a final newline."""
    json.dump(obj, f, indent=2, sort_keys=False, ensure_ascii=False)
    f.write("\n")


def write_json_atomic(path: str | Path, obj: Any) -> None:
    with atomic_open(path, "w") as f:
        dump_json(obj, f)
