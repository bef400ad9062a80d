"""The writers' locks, both on flock: a data folder is written by one run at a time (``locked``:
OUT_DIR/.winsample.lock, a second run fails at once, naming the holder's pid); a plan's folder
takes ``locked_folder`` (a second writer waits its turn). The kernel drops either when its holder
dies, so no lock outlives a crash."""

from __future__ import annotations

import os
import stat
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


LOCK_TRIES = 5  # re-opens of the lock when a failing run removed it under us (a race; 1 is enough in practice)


def _make_dirs(out_dir: Path) -> list[Path]:
    """Create ``out_dir`` and its missing parents; return the folders this call made, outermost first.

    A folder another process makes at the same moment is not recorded: it is not ours to remove.
    """
    missing = []
    p = out_dir
    while not p.is_dir():
        missing.append(p)
        if p.parent == p:
            break
        p = p.parent
    made = []
    for d in reversed(missing):
        try:
            d.mkdir()
        except FileExistsError:
            if not d.is_dir():
                raise
            continue
        made.append(d)
    return made


def _remove_made(made: list[Path]) -> None:
    """rmdir the folders in ``made``, innermost first; stop at the first that is not empty.

    Only ``rmdir``: a folder someone put anything into is left as it is, never deleted with it.
    """
    for d in reversed(made):
        try:
            os.rmdir(d)
        except OSError:
            return


@contextmanager
def locked(out_dir: Path):
    """Create OUT_DIR if missing and hold OUT_DIR/.winsample.lock while the body runs.

    InputError (exit 2) at once if another run holds the lock, or if OUT_DIR cannot be created
    or written. If the body raises and this call created OUT_DIR (and any parents), what it
    created is removed again when the folder holds nothing but the lock: a failed run into a
    new folder leaves no folder behind. A kept ``.partial/`` (an interrupt, for ``--resume``)
    keeps the folder. A folder that existed before keeps its lock file (it means nothing alone).
    """
    try:
        import fcntl
    except ImportError:  # not POSIX: no lock, as before
        fcntl = None
    made: list[Path] = []
    fd = None
    try:
        for _ in range(LOCK_TRIES):
            try:
                made += _make_dirs(out_dir)
            except FileExistsError as e:  # a file where a folder of the path must be
                what = Path(e.filename) if e.filename else out_dir
                raise InputError(f"{out_dir}: cannot create output folder: {what} exists and is not a folder") from None
            except OSError as e:
                raise InputError(f"{out_dir}: cannot create output folder: {e.strerror}") from None
            if fcntl is None:
                break
            fd = _take_lock(fcntl, out_dir)
            if fd is not None:
                break
        else:
            raise InputError(f"{out_dir}: its lock file kept being removed by other winsample runs; run again")
        yield
    except BaseException:
        if fd is not None:
            if made:
                _drop_lock_file(out_dir, fd)
            os.close(fd)  # releases the flock
            fd = None
        _remove_made(made)
        raise
    finally:
        if fd is not None:
            os.close(fd)  # releases the flock


def _take_lock(fcntl, out_dir: Path) -> int | None:
    """The fd of OUT_DIR's lock file, flock'ed and holding our pid; None when the file we locked
    was removed meanwhile (a failed run cleaning up the folder it made: try again)."""
    path = out_dir / LOCK_NAME
    try:
        # O_NOFOLLOW: a planted symlink named .winsample.lock must not make us truncate its target
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0), 0o644)
    except OSError as e:
        if os.path.islink(path):
            raise InputError(f"{path}: is a symbolic link, not winsample's lock file; remove it") from None
        raise InputError(f"{out_dir}: cannot write there: {e.strerror}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise InputError(f"{path}: is not a regular file, so not winsample's lock file; remove it")
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            raise InputError(
                f"{out_dir}: is being written by another winsample (pid {pid}); wait for it or pick another -o"
            ) from None
        # The lock only counts if the path still names the file we locked: a failing run may
        # have unlinked it (see _drop_lock_file) between our open and our flock.
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(path))
        except FileNotFoundError:
            same = False
        if not same:
            os.close(fd)
            return None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        return fd
    except BaseException:
        os.close(fd)
        raise


def _drop_lock_file(out_dir: Path, fd: int) -> None:
    """Unlink OUT_DIR's lock file, still holding its flock, if OUT_DIR holds nothing else.

    Only called when this run created OUT_DIR. Unlinking a lock file is unsafe in general: a
    run that opened it, and waits to flock it, would then lock a file no one else can find, and
    two runs could write at once. Here it is safe because (1) the folder is new, so no run that
    predates ours can be waiting on it; (2) a run that started meanwhile and opened the file
    either fails its flock at once (we still hold it) or, if it gets the flock after we let go,
    sees that the path no longer names that file and starts over (``_take_lock``): it then
    recreates the lock (and the folder if we removed it) and records that it made them;
    (3) a run that creates a new lock file after our unlink makes the folder non-empty, so our
    rmdir fails and the folder stays for it. Anything but our lock in the folder (a kept
    ``.partial/``, a file a user put there) and nothing is removed.
    """
    path = out_dir / LOCK_NAME
    try:
        if os.listdir(out_dir) == [LOCK_NAME] and os.path.samestat(os.fstat(fd), os.stat(path)):
            os.unlink(path)
    except OSError:
        pass  # could not tell or could not unlink: leave the lock, and so the folder
