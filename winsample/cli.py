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
from . import windows as windows_mod
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


def _parse_scales(ctx, param, value):
    try:
        scales = [int(v) for v in str(value).split(",") if v.strip()]
    except ValueError:
        raise click.BadParameter(f"{value!r}: give an integer or a comma list like 512,1024") from None
    if not scales:
        raise click.BadParameter("give at least one value")
    return scales


@main.command()
@click.argument("bin_path", metavar="BIN", type=click.Path(dir_okay=True))
@click.option("-T", "--context", "T", required=True, callback=_parse_scales,
              help="Model input length in tokens; a comma list (512,1024) writes one plan per scale.")
@click.option("--stride", type=int, help="Tokens between window starts [default: T // 2].")
@click.option("--overlap", type=float, help="Overlap rate F in [0, 1): stride = round(span × (1 − F)).")
@click.option("--targets/--no-targets", default=True, show_default=True,
              help="Windows span T+1 tokens (x = w[:T], y = w[1:]) or just T.")
@click.option("--offset", type=int, help="First start (clamped to N − span).")
@click.option("--random-offset", is_flag=True, help="Offset drawn uniformly from [0, stride) per (seed, epoch).")
@click.option("--seed", type=int, help="Seed for --random-offset and --shuffle.")
@click.option("--epoch", type=int, help="Epoch for --random-offset and --shuffle [default: 0].")
@click.option("--tail", type=click.Choice(windows_mod.TAILS),
              help="Leftover after the last regular window: one window at N − span (align, default), a shorter one (short), or none (drop).")
@click.option("--short", type=click.Choice(windows_mod.SHORTS), default="keep", show_default=True,
              help="A document shorter than the span: one short window, or none.")
@click.option("--boundaries", type=click.Choice(windows_mod.BOUNDARIES), default="none", show_default=True,
              help="Never cross documents (doc); also end/start on paragraph or sentence edges when they fit.")
@click.option("--pack", is_flag=True, help="With --boundaries doc: pack whole short documents into shared windows.")
@click.option("--shuffle", is_flag=True, help="Permute window order by (seed, epoch).")
@click.option("--shards", type=int, help="Split into K plan files, round-robin (PLAN.shard0ofK.npy …).")
@click.option("--materialize", is_flag=True, help="Also write the token windows, (n, span), as PLAN.tokens.npy.")
@click.option("--format", "fmt", type=click.Choice(windows_mod.FORMATS), default="npy", show_default=True,
              help="npy plan + sidecar, txt (start<TAB>length lines) or jsonl.")
@click.option("--decode", is_flag=True, help="With --format jsonl: add each window's text.")
@click.option("-o", "--output", required=True, help="Plan file (PLAN.npy), or - for txt/jsonl on stdout.")
@click.option("--meta", "meta_path", type=click.Path(dir_okay=False), help="meta.json describing BIN [default: the one beside it].")
@click.option("--encoding", help="Tokenizer name when meta.json does not name a usable one [bare .bin: gpt2].")
@quiet_option
@json_option
def windows(bin_path, T, stride, overlap, targets, offset, random_offset, seed, epoch, tail, short, boundaries,
            pack, shuffle, shards, materialize, fmt, decode, output, meta_path, encoding, quiet, as_json):
    """Plan training windows over a token file: integer offsets, exact and reproducible.

    \b
      winsample windows data/train.bin -T 1024 -o train.plan.npy
      winsample windows data/train.bin -T 256 --boundaries paragraph -o plan.npy
      winsample windows data/train.bin -T 8 --stride 4 --format txt -o - | head
    """
    opts = windows_mod.Options(
        T=T, targets=targets, stride=stride, overlap=overlap, offset=offset, random_offset=random_offset,
        seed=seed, epoch=epoch, tail=tail, short=short, boundaries=boundaries, pack=pack, shuffle=shuffle,
        shards=shards, materialize=materialize, format=fmt, decode=decode, encoding=encoding,
    )
    with progress(quiet, unit="tok", unit_scale=True, desc="scanning") as bar:
        summaries = windows_mod.run(bin_path, output, opts, meta_path, stream=sys.stdout, progress=bar.update)
    if as_json:
        doc = summaries[0] if len(summaries) == 1 else {"plans": summaries}
        if output == "-":
            click.echo(json.dumps(doc, indent=2, ensure_ascii=False), err=True)
        else:
            emit_json(doc)
    for s in summaries:
        where = ", ".join(s["files"]) or "stdout"
        say(quiet, f"{s['windows']} windows of span {s['span']} (T {s['T']}, stride {s['stride']},"
                   f" overlap {s['overlap']:.1%}) over {s['tokens']} tokens: coverage {s['coverage']:.2%},"
                   f" {s['uncovered_tail']} tail token(s) uncovered → {where}")


# --- verify -------------------------------------------------------------------------------


@main.command()
def verify():
    """Check token files and window plans (not implemented yet)."""
    raise WinsampleError("not implemented yet")
