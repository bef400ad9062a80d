"""Untrusted names and files: a name read from metadata stays inside its folder; special files and sizes are refused."""

from __future__ import annotations

import errno
import os
import stat
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..errors import ConfigError, DataError, InputError


def glob_escape(name: str) -> str:
    """``name`` with glob's special characters quoted."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in name)


def inside_name(name: Any, where: str) -> str:
    """``name`` if it is a relative path of plain names (``plain_name`` for each part), else DataError."""
    if not isinstance(name, str) or not name:
        raise DataError(f"{where}: {name!r} is not a file name inside its folder")
    for part in name.split("/"):
        plain_name(part, where)
    return name


# --- untrusted names, special files, sizes ----------------------------------------------

MAX_METADATA_BYTES = 64 << 20  # meta.json, sidecars, journals, marks: JSON this big is not ours


def plain_name(name: Any, where: str) -> str:
    """``name`` if ``is_plain_name``, else DataError naming ``where``."""
    if not is_plain_name(name):
        raise DataError(f"{where}: {name!r} is not a plain file name inside its folder")
    return name


def require_regular(path: str | Path, what: str = "file") -> os.stat_result:
    """stat of ``path``; InputError if it is missing or not a regular file (a FIFO, socket, device
    or folder is refused before it is opened, so reading it can never block)."""
    path = Path(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        kind = "a folder" if stat.S_ISDIR(st.st_mode) else "not a regular file (a FIFO, socket or device)"
        raise InputError(f"{path}: {kind}; expected {what}")
    return st


def open_regular(path: str | Path, what: str = "file", label: str | None = None):
    """``open(path, "rb")`` that never blocks: O_NONBLOCK open, then a regular-file check on the
    opened file (so a FIFO swapped in after a stat is still refused); InputError otherwise,
    naming it ``label`` (default: the path)."""
    path = Path(path)
    name = path if label is None else label
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise InputError(f"{name}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{name}: a folder; expected {what}") from None
    except OSError as e:
        raise InputError(f"{name}: cannot read: {e.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = "a folder" if stat.S_ISDIR(st.st_mode) else "not a regular file (a FIFO, socket or device)"
            raise InputError(f"{name}: {kind}; expected {what}")
        if hasattr(os, "O_NONBLOCK"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def open_own(path: str | Path, append: bool = False, buffering: int = -1):
    """A file of winsample's own staging area opened to update (``r+b``, or ``ab``): never
    through a symbolic link (O_NOFOLLOW) and only a regular file, so a link planted in
    ``.partial/`` cannot make a resumed run write outside it. OSError otherwise (ELOOP for a link)."""
    flags = os.O_RDWR | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) | (os.O_APPEND if append else 0)
    fd = os.open(path, flags)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        return os.fdopen(fd, "ab" if append else "r+b", buffering=buffering)
    except BaseException:
        os.close(fd)
        raise


def read_small_text(path: str | Path, what: str) -> str:
    """The UTF-8 text of a metadata file (at most MAX_METADATA_BYTES); InputError if it cannot be
    read (missing, not a regular file, no permission: exit 2), DataError if it is not text."""
    path = Path(path)
    with open_regular(path, what) as f:
        try:
            size = os.fstat(f.fileno()).st_size  # read what is there: read(64 MiB) would allocate it first
            data = f.read(min(size, MAX_METADATA_BYTES) + 1)
        except OSError as e:
            raise InputError(f"{path}: cannot read: {e.strerror or e}") from None
    if len(data) > MAX_METADATA_BYTES:
        raise DataError(f"{path}: larger than {MAX_METADATA_BYTES >> 20} MiB: not {what}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DataError(f"{path}: not UTF-8 text (byte {e.start}): not {what}") from None


def refuse_overwrite(outputs: Iterable[str | Path], inputs: Iterable[str | Path], known: dict | None = None) -> None:
    """ConfigError (exit 2, nothing written) if an output path names one of the inputs.

    Compared by device and inode, so no spelling of an input's path gets past (a symlink, a
    hard link, ``..``). An input ``"-"`` is standard input: the file it is redirected from, if
    any. Only an output that exists can name an input (the inputs exist), so with none the
    inputs are not looked at: a run over many files stats them only when it must.
    ``known``: inputs already stated, ``{(st_dev, st_ino): name}`` (not stated again)."""
    live = []
    for o in outputs:
        if o is None or str(o) in ("", "-"):
            continue
        try:
            live.append((os.stat(o), str(o)))
        except OSError:
            pass
    if not live:
        return
    wanted = {(st.st_dev, st.st_ino): name for st, name in live}
    for key, i in (known or {}).items():
        if key in wanted:
            o = wanted[key]
            same = "" if str(i) == o else f" (the same file as {i})"
            raise ConfigError(f"{o}: is an input of this command or a file of the dataset it reads{same};"
                              " writing it would destroy it: pick another output path")
    for i in inputs:
        if i is None or str(i) == "":
            continue
        try:
            # "-": standard input, when it is a file (`< data/val.bin`): that file is read
            st = os.fstat(sys.stdin.fileno()) if str(i) == "-" else os.stat(i)
        except (OSError, ValueError, AttributeError):  # a stdin with no file behind it (a test runner's)
            continue
        if str(i) == "-" and not stat.S_ISREG(st.st_mode):
            continue
        o = wanted.get((st.st_dev, st.st_ino))
        if o is not None:
            same = "" if str(i) == o else f" (the same file as {'standard input' if str(i) == '-' else i})"
            raise ConfigError(f"{o}: is an input of this command or a file of the dataset it reads{same};"
                              " writing it would destroy it: pick another output path")


def is_glob(path: str | Path) -> bool:
    """True when ``path`` holds a glob character (``*``, ``?``, ``[``): a pattern of names, such as llm.c shards'."""
    return any(c in str(path) for c in "*?[")


def first_inside(folder: str | Path, paths: Iterable[str | Path]) -> str | None:
    """The first of ``paths`` whose real location lies inside ``folder`` (None: none, or no such
    folder). A path's folder is resolved once for all the files in it; a path that is itself a
    symlink is resolved whole."""
    if not os.path.isdir(folder):
        return None
    prefix = os.path.realpath(folder) + os.sep
    dirs: dict[str, str] = {}
    for p in paths:
        p = str(p)
        if os.path.islink(p):
            real = os.path.realpath(p)
        else:
            d, name = os.path.split(os.path.abspath(p))
            if d not in dirs:
                dirs[d] = os.path.realpath(d)
            real = os.path.join(dirs[d], name)
        if real.startswith(prefix):
            return p
    return None


def is_plain_name(name: Any) -> bool:
    """The one rule for a name read from metadata (meta.json, sidecars, marks, journals): a plain
    file name that stays inside its folder. No folder part (``/`` or ``\\``), not ``.``/``..``,
    not hidden (a leading ``.``: winsample's own work files are hidden), no NUL, no leading or
    trailing whitespace, not empty."""
    return (isinstance(name, str) and name not in ("", ".", "..") and not name.startswith(".")
            and not any(c in name for c in "/\\\0") and name == name.strip())
