"""Errors raised by the winsample library.

The CLI turns each into one line on stderr and an exit code (like ruff's):

    0  success
    1  the data failed a check  (DataError: invalid UTF-8, out-of-range ids, verify failures)
    2  the tool could not do the job (InputError, ConfigError, anything unexpected)

The library never prints and never calls sys.exit; it raises one of these.
"""

from __future__ import annotations


class WinsampleError(Exception):
    """Base class. ``exit_code`` is what the CLI exits with; ``details``: lines the CLI prints
    before the error's own (each one line), e.g. every bad input a run found."""

    exit_code = 2
    details: tuple[str, ...] = ()


class DataError(WinsampleError):
    """The input data is bad (exit 1): the message names the file and position."""

    exit_code = 1


class InputError(WinsampleError):
    """An input is missing, unreadable or of the wrong kind (exit 2)."""

    exit_code = 2


class ConfigError(WinsampleError):
    """Options that cannot work together, or a tokenizer that cannot be loaded (exit 2)."""

    exit_code = 2


class Interrupted(KeyboardInterrupt):
    """SIGINT (exit 130), SIGTERM (143) or SIGHUP (129) arrived; nothing was committed (or,
    given ``committed``, the cleanup after a commit was cut short).

    A ``KeyboardInterrupt``, not a WinsampleError: no ``except Exception`` (a fallback, a retry,
    a third-party library's) can swallow a signal and carry on; only cleanup code that re-raises
    sees it. The CLI turns it into one line and exit 128 + signum."""

    def __init__(self, signum: int, committed: str | None = None, done: str | None = None):
        import signal

        self.signum = signum
        self.exit_code = 128 + signum
        self.committed = committed
        # ``committed``: the output the run had already committed, whole, when the signal came;
        # ``done``: what the run left, said instead (a stream: what it had printed)
        done = done or (f"{committed} was committed whole before it arrived" if committed else "nothing was written")
        super().__init__(f"interrupted by {signal.Signals(signum).name}; {done}")

    @classmethod
    def after_commit(cls, e: KeyboardInterrupt, committed: str) -> Interrupted:
        """``e`` (the CLI's Interrupted, or Ctrl-C's bare KeyboardInterrupt) as a signal that came
        after ``committed`` was committed whole."""
        if isinstance(e, Interrupted) and e.committed:
            return e
        return cls(getattr(e, "signum", 2), committed=committed)  # 2: SIGINT, a bare KeyboardInterrupt's


def json_place(e, line: bool = False) -> str:
    """A ``json.JSONDecodeError`` as words with its place, for a message: "Expecting value at
    column 9", "Unterminated string starting at line 3, column 22" (Python's own message ends
    in "at" for some errors, the place then following it)."""
    where = f"line {e.lineno}, column {e.colno}" if line else f"column {e.colno}"
    return f"{e.msg} {where}" if e.msg.endswith(" at") else f"{e.msg} at {where}"
