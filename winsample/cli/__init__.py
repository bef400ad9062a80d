"""Command-line interface: parse options, call one library function, print, pick the exit code.

stdout carries data (``--json``, ``-o -``); stderr carries progress bars, summaries and errors.
Exit codes: 0 success, 1 the data failed a check, 2 the tool could not do the job.
Every ``WinsampleError`` becomes one line on stderr here, in ``WinsampleGroup.invoke``.
"""

from . import early  # noqa: F401, I001  (first: see early.py)
from .common import EXIT_CODE_KEY
from .main import entry, load_commands, main  # a command's module loads when it runs (main.COMMANDS)

__all__ = ["EXIT_CODE_KEY", "entry", "load_commands", "main"]
