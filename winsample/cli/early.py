"""Loaded first with the CLI (``cli/__init__`` imports it before any command module).

A Ctrl-C while Python is still importing numpy and the commands (the first ~0.3 s) would end in
a KeyboardInterrupt traceback: no handler of ours runs yet. This hook turns any uncaught
KeyboardInterrupt into the one line and exit code every other interrupt gets.

Under a memory limit (``ulimit -v``) the libraries fail in their own ways: numpy's OpenBLAS
spins forever when its thread buffers cannot be mapped (below ~100 MiB of address space), a
shared library "failed to map segment" (ImportError), a thread "can't start" (RuntimeError). So:
OpenBLAS gets one thread (winsample does no linear algebra), a limit too
small to load the libraries at all is refused at once, and those failures, wherever they surface,
are one line and exit 2 (``out_of_memory``), not a hang or a traceback.
"""

from __future__ import annotations

import os
import sys

MIN_ADDRESS_SPACE = 256 << 20  # bytes: below it OpenBLAS can hang (~100 MiB) and the fast engine abort on its tables (~190 MiB)

_previous = sys.excepthook


def address_space_limit() -> int | None:
    """The soft ``RLIMIT_AS`` in bytes, or None when unlimited (or unknown)."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    except (ImportError, OSError, ValueError):
        return None
    return None if soft == resource.RLIM_INFINITY else soft


def out_of_memory(e: BaseException) -> str | None:
    """One line for an exception that is the process running out of memory, else None."""
    text = str(e)
    memory = (isinstance(e, MemoryError)
              or (isinstance(e, (ImportError, OSError)) and ("failed to map segment" in text
                                                             or "annot allocate memory" in text))
              or (isinstance(e, RuntimeError) and "can't start new thread" in text))
    if not memory:
        return None
    limit = address_space_limit()
    where = f"the address-space limit (ulimit -v) is {limit >> 20} MiB" if limit is not None else "no memory left"
    return f"error: out of memory ({type(e).__name__}: {text.splitlines()[0] if text else 'no details'}): {where}"


def _one_line(kind, value, tb):
    if issubclass(kind, KeyboardInterrupt):
        sys.stderr.write("error: interrupted by SIGINT; nothing was written\n")
        sys.stderr.flush()
        os._exit(getattr(value, "exit_code", 130))
    said = out_of_memory(value) if value is not None else None
    if said is not None and not os.environ.get("WINSAMPLE_DEBUG"):
        sys.stderr.write(said + "\n")
        sys.stderr.flush()
        os._exit(2)
    _previous(kind, value, tb)


sys.excepthook = _one_line

# winsample does no linear algebra: numpy's OpenBLAS gets no thread of its own. Each one is a
# process's idle thread that spins after a fork (~0.05 s of CPU in every encode worker, measured
# with perf), and its buffers are what a small address-space limit cannot map.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

_limit = address_space_limit()
if _limit is not None:
    if _limit < MIN_ADDRESS_SPACE:
        sys.stderr.write(f"error: the address-space limit (ulimit -v) is {_limit >> 20} MiB; winsample needs at least"
                         f" {MIN_ADDRESS_SPACE >> 20} MiB to load its libraries\n")
        sys.stderr.flush()
        os._exit(2)
