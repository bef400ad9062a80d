"""Loaded first with the CLI (``cli/__init__`` imports it before any command module).

A Ctrl-C while Python is still importing numpy and the commands (the first ~0.3 s) would end in
a KeyboardInterrupt traceback: no handler of ours runs yet. This hook turns any uncaught
KeyboardInterrupt into the one line and exit code every other interrupt gets.
"""

from __future__ import annotations

import os
import sys

_previous = sys.excepthook


def _one_line(kind, value, tb):
    if issubclass(kind, KeyboardInterrupt):
        sys.stderr.write("error: interrupted by SIGINT; nothing was written\n")
        sys.stderr.flush()
        os._exit(getattr(value, "exit_code", 130))
    _previous(kind, value, tb)


sys.excepthook = _one_line
