"""Command-line interface: parse options, call one library function, print, pick the exit code.

stdout carries data (``--json``, ``-o -``); stderr carries progress bars, summaries and errors.
Exit codes: 0 success, 1 the data failed a check, 2 the tool could not do the job.
Every ``WinsampleError`` becomes one line on stderr here, in ``WinsampleGroup.invoke``.
"""

from . import early, encode, inspect, mix, verify, windows  # noqa: F401  (early first: see early.py; each other registers its command)
from .common import EXIT_CODE_KEY
from .main import entry, main

__all__ = ["EXIT_CODE_KEY", "entry", "main"]
