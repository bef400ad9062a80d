"""OSError as one line of text: the one errno-to-text rule."""

from __future__ import annotations

import errno
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import InputError

NO_ROOM = {  # errnos that mean the disk (or a limit) ran out of room
    errno.ENOSPC: "no space left on the device",
    errno.EFBIG: "file too large (a file-size limit was reached)",
    errno.EDQUOT: "disk quota exceeded",
}


def os_error_text(e: OSError, where: str = "", hint: str = "; free some space and run again") -> str:
    """The one errno-to-text rule: what a failed write means, in words, ``where`` after it and,
    when the disk ran out of room, ``hint`` (a short write without errno: a full disk, likely)."""
    if e.errno in NO_ROOM:
        return NO_ROOM[e.errno] + where + hint
    if e.errno is None:
        return f"{e.strerror or e}{where} (a short write: is the disk full?)"
    if e.errno == errno.EEXIST and e.filename and not Path(e.filename).is_dir():  # mkdir where a file stands
        return f"{e.filename} already exists and is in the way: move it away and run again"
    return (e.strerror or str(e)) + where


def write_error(out_dir: Path, e: OSError) -> InputError:
    """One line for a failed write into ``out_dir``: what ran out and in which file, and what to do."""
    name = f" while writing {Path(e.filename).name}" if e.filename else ""
    return InputError(f"{out_dir}: " + os_error_text(e, name, "; free some space (or pick another -o) and run again"))


@contextmanager
def naming(path: str | Path) -> Iterator[None]:
    """Give an OSError raised while writing ``path`` that file's name (numpy's and f.write's
    errors carry none, e.g. ``77741 requested and 674 written``)."""
    try:
        yield
    except OSError as e:
        if e.filename is None:
            raise OSError(e.errno, e.strerror or str(e), str(path)) from None
        raise
