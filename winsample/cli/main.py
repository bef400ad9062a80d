"""The ``winsample`` group: the one place where library errors become one line and an exit code."""

from __future__ import annotations

import atexit
import errno
import importlib
import os
import signal
import sys
import threading
import traceback

import click

from .. import __version__
from ..disk import os_error_text
from ..errors import Interrupted, WinsampleError
from ..terminal import terminal_safe
from .common import EXIT_CODE_KEY
from .early import out_of_memory

COMMANDS = ("chunk", "encode", "inspect", "mix", "verify", "windows")  # each a module of this package that registers it


class WinsampleGroup(click.Group):
    """The one place where library errors become messages and exit codes; a command's module
    (and what it imports) is loaded only when that command runs (``--version`` loads none)."""

    def list_commands(self, ctx):
        return sorted(set(COMMANDS) | set(self.commands))

    def get_command(self, ctx, name):
        if name not in self.commands and name in COMMANDS:
            importlib.import_module(f"{__package__}.{name}")  # its @main.command() registers it
        return super().get_command(ctx, name)

    def invoke(self, ctx: click.Context):
        signal.signal(signal.SIGTERM, _raise_interrupted)
        if hasattr(signal, "SIGHUP") and signal.getsignal(signal.SIGHUP) is signal.SIG_DFL:
            signal.signal(signal.SIGHUP, _raise_interrupted)  # a closed terminal: clean up like SIGTERM
        try:
            return super().invoke(ctx)
        except WinsampleError as e:
            for line in e.details:  # e.g. each bad input of a run, one a line, before the error
                click.echo(_one_line(line), err=True)
            _fail(ctx, f"error: {e}", e.exit_code)
        except KeyboardInterrupt as e:  # Ctrl-C, or Interrupted raised by the handlers above
            stop = e if isinstance(e, Interrupted) else Interrupted(signal.SIGINT)
            _fail(ctx, f"error: {stop}", stop.exit_code)
        except BrokenPipeError:
            # `winsample … | head` closed stdout: stop quietly, and keep Python from
            # complaining again when it flushes stdout at exit.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            # a command whose verdict is known before it prints (verify) keeps its exit code
            ctx.exit(ctx.meta.get(EXIT_CODE_KEY, 0))
        except click.exceptions.NoArgsIsHelpError:  # a bare command: its help, as click shows it
            raise
        except click.UsageError as e:  # a subcommand's options, an unknown command
            _fail(ctx, _usage_line(e), e.exit_code)
        except (click.exceptions.Exit, click.ClickException, click.exceptions.Abort):
            raise
        except OSError as e:  # the system refused a path (a folder on it that is not this user's to open): no bug
            _traceback_if_asked()
            _fail(ctx, f"error: {_os_error_line(e)}", 2)
        except Exception as e:  # a bug: one line, and the traceback only when asked for
            _traceback_if_asked()
            said = out_of_memory(e)
            if said is not None:  # not a bug: a memory limit the libraries met
                _fail(ctx, said, 2)
            _fail(ctx, f"internal error: {type(e).__name__}: {e} (set WINSAMPLE_DEBUG=1 for a traceback)", 2)

    def make_context(self, info_name, args, parent=None, **extra):
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.exceptions.NoArgsIsHelpError:  # bare `winsample`: the help, as click shows it
            raise
        except click.UsageError as e:  # the group's own options (`winsample --bogus`)
            click.echo(_usage_line(e), err=True)
            raise click.exceptions.Exit(e.exit_code) from None


def _usage_line(e: click.UsageError) -> str:
    """A usage error as one line, like every other error: click's own is three (usage, hint, message)."""
    where = e.ctx.command_path if e.ctx is not None else "winsample"
    return f"error: {e.format_message().rstrip('.')} (see '{where} --help')".replace("\n", " ")


def entry(prog_name: str = "winsample") -> None:
    """The ``winsample`` command: ``main``, and an end that always comes, through ``os._exit``.

    After a signal (exit 128 + N) the process ends as soon as its cleanup is done: a helper
    thread may still be blocked in a read, which Python would wait for at exit, and Ray's C++
    exit handler raced its own threads after cancelled tasks (a crash at exit, seen once in a
    few SIGTERMs). After any other end, the other threads and the exit handlers finish first,
    with a signal held (the command is done: the run exits with its own code) and a second one
    ending the process at once. Python's own finalization is skipped: it puts the default
    action back on SIGTERM, and a signal in the teardown after it (Ray's, tens of milliseconds)
    killed a finished run without a word."""
    try:
        main(prog_name=prog_name)
        code = 0
    except SystemExit as e:
        if isinstance(e.code, str):
            print(e.code, file=sys.stderr)
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    if code < 128:
        _finish_with_signals_held()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # a closed pipe: nothing more can reach it
            pass
    os._exit(code)


def _finish_with_signals_held() -> None:
    """What Python does at exit before its finalization: threading's shutdown (an executor's idle
    workers told to stop, then the threads that are not daemons joined) and the ``atexit``
    handlers. A first SIGINT, SIGTERM or SIGHUP waits; a second ends the process with 128 + N."""
    held: list[int] = []

    def hold(signum, frame):
        if held:
            os._exit(128 + signum)
        held.append(signum)

    for signum in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)):
        if signum is not None and callable(signal.getsignal(signum)):
            signal.signal(signum, hold)
    shutdown = getattr(threading, "_shutdown", None)  # Python's own: also stops idle executor workers
    if shutdown is not None:
        shutdown()
    else:
        for thread in threading.enumerate():
            if thread is not threading.current_thread() and not thread.daemon:
                thread.join()
    atexit._run_exitfuncs()


def _raise_interrupted(signum, frame):
    raise Interrupted(signum)


def _one_line(message: str) -> str:
    # one line, whatever a file name holds: a newline in a name must not split the error line
    return terminal_safe(message.replace("\r", "\\r").replace("\n", "\\n"), keep="\t")


def _traceback_if_asked() -> None:
    """WINSAMPLE_DEBUG=1: the traceback on stderr, above the one line; the exit code stays the same."""
    if os.environ.get("WINSAMPLE_DEBUG"):
        traceback.print_exc()


def _os_error_line(e: OSError) -> str:
    """An OSError the library let through, as ``PATH: what the system said``."""
    what = os_error_text(e)
    if e.errno in (errno.EACCES, errno.EPERM):
        what += " (the file, or a folder on its path, does not let this user in)"
    paths = [str(p) for p in (e.filename, e.filename2) if p is not None]
    return f"{' → '.join(paths)}: {what}" if paths else what


def _fail(ctx: click.Context, message: str, code: int):
    click.echo(_one_line(message), err=True)
    ctx.exit(code)


def load_commands() -> dict:
    """Every command loaded: ``main.commands`` complete (docs, tests that walk the tree)."""
    for name in COMMANDS:
        main.get_command(None, name)
    return main.commands


def _version(ctx: click.Context, _param, value) -> None:
    if not value or ctx.resilient_parsing:
        return
    from ..planning import boundaries  # whether the C kernels load (and WINSAMPLE_PURE): their one home

    click.echo(f"winsample {__version__} (C kernels: {'off' if boundaries.FAST is None else 'on'})")
    ctx.exit()


@click.group(cls=WinsampleGroup, context_settings={"help_option_names": ["-h", "--help"], "auto_envvar_prefix": "WINSAMPLE"})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_version,
              help="Show the version and exit.")
def main():
    """Turn text into token files, cut them into training windows, and prove both are sound.

    \b
      winsample encode corpus/ -o data/          text → train.bin, val.bin, meta.json
      winsample windows data/train.bin -T 1024 -o train.plan.npy
      winsample verify data/ --plan train.plan.npy
    """
