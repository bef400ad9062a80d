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
@click.argument("inputs", nargs=-1, required=True, metavar="INPUT...")
@click.option("-o", "--out", "out_dir", required=True, type=click.Path(), help="Folder for train.bin, val.bin, meta.json (created if missing).")
@click.option("--encoding", default="gpt2", show_default=True, help="tiktoken encoding name (gpt2 works offline).")
@click.option("--tokenizer-file", type=click.Path(), help="A .tiktoken ranks file (optionally .gz) instead of --encoding.")
@click.option("--pattern", type=click.Choice(["gpt2", "cl100k", "o200k"]), default="gpt2", show_default=True, help="Pre-tokenizer regex for --tokenizer-file.")
@click.option("--val-fraction", type=click.FloatRange(0, 1, max_open=True), default=0.1, show_default=True, help="Share of documents (or tokens, --split tail) for val.bin.")
@click.option("--split", type=click.Choice(["doc", "tail"]), default="doc", show_default=True, help="doc: by a seeded hash of each document's text; tail: the last tokens.")
@click.option("--seed", type=int, default=1337, show_default=True, help="Seed of the document hash (--split doc).")
@click.option("--workers", type=click.IntRange(min=1), default=None, help="Encoder processes [default: CPU count]; 1 runs in-process.")
@click.option("--text-field", default="text", show_default=True, help="JSONL field / Parquet column holding the text.")
@click.option("--format", "fmt", type=click.Choice(["auto", "text", "jsonl"]), default="auto", show_default=True, help="Input format; auto: by file extension (stdin: text).")
@click.option("--no-eot", is_flag=True, help="Do not append <|endoftext|> after each document.")
@click.option("--dtype", type=click.Choice(["uint16", "uint32"]), default=None, help="Token dtype [default: uint16, uint32 if the vocabulary needs it].")
@click.option("--errors", type=click.Choice(["strict", "replace"]), default="strict", show_default=True, help="Invalid UTF-8: fail, or replace with U+FFFD and count.")
@quiet_option
@json_option
def encode(inputs, out_dir, encoding, tokenizer_file, pattern, val_fraction, split, seed, workers, text_field, fmt, no_eot, dtype, errors, quiet, as_json):
    """Encode text files, folders or - (stdin) into OUT_DIR/train.bin, val.bin and meta.json.

    \b
      winsample encode corpus/ -o data/
      winsample encode docs.jsonl --text-field body --split tail -o data/ --json
    """
    from .encode import encode_corpus

    bar = progress(quiet, unit="B", unit_scale=True, unit_divisor=1024, desc="encode")
    tokens = [0]

    def on_progress(nbytes, ntokens, total=None):
        if total is not None:
            bar.total = total
            bar.refresh()
        if nbytes:
            bar.update(nbytes)
        if ntokens:
            tokens[0] += ntokens
            bar.set_postfix(tokens=f"{tokens[0]:,}", refresh=False)

    try:
        summary = encode_corpus(
            list(inputs), out_dir, encoding=encoding, tokenizer_file=tokenizer_file, pattern=pattern,
            val_fraction=val_fraction, split=split, seed=seed, workers=workers, text_field=text_field,
            fmt=fmt, eot=not no_eot, dtype=dtype, errors=errors, progress=on_progress,
        )
    finally:
        bar.close()
    extra = ""
    if summary["skipped_empty"]:
        extra += f", {summary['skipped_empty']} empty skipped"
    if summary["replaced_characters"]:
        extra += f", {summary['replaced_characters']} invalid UTF-8 sequences replaced"
    if summary["unsplittable_runs"]:
        extra += f", {summary['unsplittable_runs']} long run(s) without a safe cut encoded whole"
    say(
        quiet,
        f"encoded {summary['documents']} documents{extra}: train {summary['train']['tokens']:,} tokens"
        f" ({summary['train']['documents']} docs), val {summary['val']['tokens']:,} tokens"
        f" ({summary['val']['documents']} docs), {summary['mb_per_s']} MB/s → {out_dir}",
    )
    if as_json:
        emit_json(summary)


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
