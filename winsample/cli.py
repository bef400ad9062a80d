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


# --- inspect ------------------------------------------------------------------------------


def use_color(stream=None) -> bool:
    """Colour only on a terminal, and never when NO_COLOR is set to anything (no-color.org)."""
    stream = stream or sys.stdout
    return bool(stream.isatty()) and not os.environ.get("NO_COLOR")


_INSPECT_STYLES = {"head": {"bold": True}, "key": {"fg": "cyan"}, "mark": {"dim": True}, "warn": {"fg": "yellow"}}


@main.command("inspect")
@click.argument("path", type=click.Path(exists=True, path_type=str))
@click.option("--at", "at", type=int, default=0, show_default=True, metavar="I",
              help="First token (of a .bin) or row (of a plan) to show.")
@click.option("--count", "count", type=click.IntRange(min=0), default=32, show_default=True, metavar="K",
              help="How many tokens or plan rows to show.")
@click.option("--meta", "meta_path", type=click.Path(exists=True, dir_okay=False), default=None,
              help="meta.json describing PATH, when it is not beside it.")
@click.option("--encoding", default=None, metavar="NAME",
              help="Tokenizer to decode with, instead of the one meta.json names (gpt2 without meta).")
@json_option
def inspect_cmd(path, at, count, meta_path, encoding, as_json):
    """Show what a token file, data folder or window plan holds; writes nothing.

    \b
    PATH a .bin:    meta summary and tokens [I, I+K) as ids and decoded, │ between tokens
                    (⏎ a newline, ⟨e6 bb⟩ bytes that are not UTF-8 on their own)
    PATH a folder:  meta summary of every split
    PATH a plan:    parameters, counts and windows [I, I+K) (start, length, doc, fresh)

    Checksums are shown as recorded, not recomputed: `winsample verify` checks them.
    """
    from .inspect import AtOutOfRange, inspect_path, render_text

    try:
        report = inspect_path(path, at=at, count=count, meta_path=meta_path, encoding=encoding)
    except AtOutOfRange as e:
        raise click.BadParameter(str(e), param_hint="'--at'") from None
    if as_json:
        emit_json(report)
        return
    color = use_color()
    style = (lambda text, role: click.style(text, **_INSPECT_STYLES[role])) if color else (lambda text, role: text)
    click.echo(render_text(report, style), color=color)
