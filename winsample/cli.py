"""Command-line interface: parse options, call one library function, print, pick the exit code.

stdout carries data (``--json``, ``-o -``); stderr carries progress bars, summaries and errors.
Exit codes: 0 success, 1 the data failed a check, 2 the tool could not do the job.
Every ``WinsampleError`` becomes one line on stderr here, in ``WinsampleGroup.invoke``.
"""

from __future__ import annotations

import json
import os
import signal
import sys

import click
from tqdm import tqdm

from . import __version__
from .errors import Interrupted, WinsampleError


class WinsampleGroup(click.Group):
    """The one place where library errors become messages and exit codes."""

    def invoke(self, ctx: click.Context):
        signal.signal(signal.SIGTERM, _raise_interrupted)
        try:
            return super().invoke(ctx)
        except WinsampleError as e:
            _fail(ctx, f"error: {e}", e.exit_code)
        except KeyboardInterrupt:
            _fail(ctx, f"error: {Interrupted(signal.SIGINT)}", 128 + signal.SIGINT)
        except BrokenPipeError:
            # `winsample … | head` closed stdout: stop quietly, and keep Python from
            # complaining again when it flushes stdout at exit.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            ctx.exit(0)
        except (click.exceptions.Exit, click.ClickException, click.exceptions.Abort):
            raise
        except Exception as e:  # a bug: one line, and the traceback only when asked for
            if os.environ.get("WINSAMPLE_DEBUG"):
                raise
            _fail(ctx, f"internal error: {type(e).__name__}: {e} (set WINSAMPLE_DEBUG=1 for a traceback)", 2)


def _raise_interrupted(signum, frame):
    raise Interrupted(signum)


def _fail(ctx: click.Context, message: str, code: int):
    click.echo(message, err=True)
    ctx.exit(code)


def progress(quiet: bool, **kwargs) -> tqdm:
    """A tqdm bar on stderr, off with -q or when stderr is not a terminal."""
    return tqdm(file=sys.stderr, disable=quiet or not sys.stderr.isatty(), dynamic_ncols=True, **kwargs)


def say(quiet: bool, message: str) -> None:
    """A line for people, on stderr, unless -q."""
    if not quiet:
        click.echo(message, err=True)


def emit_json(obj) -> None:
    """The one JSON document of ``--json``, on stdout."""
    click.echo(json.dumps(obj, indent=2, ensure_ascii=False))


quiet_option = click.option("-q", "--quiet", is_flag=True, help="No progress bar or summary on stderr.")
json_option = click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout.")


@click.group(cls=WinsampleGroup, context_settings={"help_option_names": ["-h", "--help"], "auto_envvar_prefix": "WINSAMPLE"})
@click.version_option(__version__, "--version", prog_name="winsample")
def main():
    """Turn text into token files, cut them into training windows, and prove both are sound.

    \b
      winsample encode corpus/ -o data/          text → train.bin, val.bin, meta.json
      winsample windows data/train.bin -T 1024 -o train.plan.npy
      winsample verify data/ --plan train.plan.npy
    """


# --- encode -------------------------------------------------------------------------------


@main.command()
def encode():
    """Encode text into train.bin / val.bin / meta.json (not implemented yet)."""
    raise WinsampleError("not implemented yet")


# --- windows ------------------------------------------------------------------------------


@main.command()
def windows():
    """Plan training windows over a token file (not implemented yet)."""
    raise WinsampleError("not implemented yet")


# --- verify -------------------------------------------------------------------------------


@main.command()
def verify():
    """Check token files and window plans (not implemented yet)."""
    raise WinsampleError("not implemented yet")
