"""OSError as one line of text: the one errno-to-text rule."""

from __future__ import annotations

import errno
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_NO_ROOM = {
    errno.ENOSPC: "no space left on the device",
    errno.EFBIG: "file too large (a file-size limit was reached)",
    errno.EDQUOT: "disk quota exceeded",
}


def os_error_text(e: OSError) -> str:
    """What a failed write means, in words (a short write without errno: a full disk, likely)."""
    if e.errno in _NO_ROOM:
        return _NO_ROOM[e.errno] + "; free some space and run again"
    if e.errno is None:
        return f"{e.strerror or e} (a short write: is the disk full?)"
    return e.strerror or str(e)


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
