"""What reaches the terminal: text read from data made safe to print (corpus text, file names,
meta fields), and what a library's native code writes to standard error itself (``stderr_held``)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable


def hex_bytes(data: bytes) -> str:
    """``b'\\xe6\\xbb'`` → ``⟨e6 bb⟩``."""
    return "⟨" + " ".join(f"{b:02x}" for b in data) + "⟩"


def terminal_safe(text: str, keep: str = "\n\t") -> str:
    """``text`` with every control character but ``keep`` shown as its hex (``⟨1b⟩``), so text
    read from data (a corpus, a file name, a meta field) can never drive the terminal it is
    printed on: no escape sequence (colours, clearing the screen, OSC 52 clipboard writes), no
    carriage return overwriting a line. C0 and C1 controls and DEL are escaped."""
    if text.isprintable() or not any(_is_control(ch) and ch not in keep for ch in text):
        return text
    return "".join(hex_bytes(ch.encode()) if _is_control(ch) and ch not in keep else ch for ch in text)


def _is_control(ch: str) -> bool:
    o = ord(ch)
    return o < 0x20 or 0x7F <= o <= 0x9F


@contextlib.contextmanager
def stderr_held(keep: Callable[[bytes, bool], bytes]):
    """Standard error (fd 2) held in a temporary file while the body runs (native code writes
    there before Python sees anything: a Rust panic, Ray's C++ logging); afterwards
    ``keep(held, ok)`` of it is written out, ``ok`` False when the body raised."""
    import tempfile  # only here: every command imports this module

    try:
        saved = os.dup(2)
    except OSError:  # no stderr to hold
        yield
        return
    held = tempfile.TemporaryFile()
    ok = False
    try:
        os.dup2(held.fileno(), 2)
        yield
        ok = True
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        held.seek(0)
        data = keep(held.read(), ok)
        held.close()
        if data:
            os.write(2, data)
