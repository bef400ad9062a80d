"""The one writer lock: a folder is written by one run at a time (flock on LOCK_NAME)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import InputError

LOCK_NAME = ".winsample.lock"  # flock'ed by a writer so two runs never write one folder


@contextmanager
def locked_folder(folder: str | Path) -> Iterator[None]:
    """Hold an exclusive flock on ``folder`` itself while the body writes files into it.

    For plan writers: a second run writing into the same folder waits (a few renames, or one
    plan's writing) and then writes its own complete set, so two runs writing one plan at once
    can never mix their files. Nothing is left in the folder; the kernel drops the lock when its
    holder dies; a signal still ends a waiting process."""
    try:
        import fcntl
    except ImportError:  # not POSIX: no lock
        yield
        return
    folder = Path(folder) if str(folder) else Path(".")
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise InputError(f"{folder}: cannot write there: {e.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
