"""What every command shares: the -q / --json options, progress bars, lines for people, JSON on stdout."""

from __future__ import annotations

import json
import os
import sys

import click

from ..disk.oserror import os_error_text
from ..errors import InputError

EXIT_CODE_KEY = "winsample.exit_code"  # ctx.meta: the exit code to keep if stdout closes early


class NoBar:
    """What ``progress`` gives with no bar to draw: tqdm's calls, doing nothing (tqdm, and the
    importlib.metadata it imports, cost ~50 ms of a start that draws no bar)."""

    total = None

    def update(self, n=1) -> None:
        pass

    def refresh(self) -> None:
        pass

    def set_postfix(self, **kwargs) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        pass


def progress(quiet: bool, **kwargs):
    """A tqdm bar on stderr, off with -q or when stderr is not a terminal."""
    if quiet or not sys.stderr.isatty():
        return NoBar()
    from tqdm import tqdm

    # tqdm starts a monitor thread with its first bar; a second thread makes encode's worker
    # pool use forkserver instead of fork (workers then reload the tokenizer).
    tqdm.monitor_interval = 0
    return tqdm(file=sys.stderr, dynamic_ncols=True, **kwargs)


def say(quiet: bool, message: str) -> None:
    """A line for people, on stderr, unless -q."""
    if not quiet:
        click.echo(message, err=True)


def plural(n: int, word: str, many: str | None = None) -> str:
    """'1 document', '2 documents' (``many`` for irregular plurals)."""
    return f"{n:,} {word if n == 1 else many or word + 's'}"


def use_color(stream=None) -> bool:
    """Colour only on a terminal, and never when NO_COLOR is set to anything (no-color.org)."""
    stream = stream or sys.stdout
    return bool(stream.isatty()) and not os.environ.get("NO_COLOR")


def emit(text: str, wrote: str | None = None, color: bool | None = None) -> None:
    """``text`` on stdout, flushed: the one way data reaches stdout. A closed pipe stays a
    BrokenPipeError (the CLI exits quietly); any other failure (a full disk behind ``>``) is one
    line saying so, and, with ``wrote``, that the command's own outputs are complete."""
    try:
        click.echo(text, color=color)
        sys.stdout.flush()
    except BrokenPipeError:
        raise
    except OSError as e:
        done = f"; {wrote} was written and is complete" if wrote else ""
        raise InputError(f"stdout: cannot write: {os_error_text(e)}{done}") from None


def emit_json(obj, wrote: str | None = None) -> None:
    """The one JSON document of ``--json``, on stdout (``emit``)."""
    emit(json.dumps(obj, indent=2, ensure_ascii=False), wrote)


quiet_option = click.option("-q", "--quiet", is_flag=True, help="No progress bar or summary on stderr.")


def named(ctx, param, value):
    """An option callback: an empty name (``--encoding ""``) is refused, not read as the default."""
    if value is not None and not str(value).strip():
        raise click.BadParameter("is empty: give a tokenizer's name, or leave the option out")
    return value


def tokenizer_options(f):
    """--encoding, --tokenizer-file, --pattern: the tokenizer a command encodes text with (encode, chunk)."""
    f = click.option("--pattern", type=click.Choice(["gpt2", "cl100k", "o200k"]), default=None, help="Pre-tokenizer regex for a .tiktoken --tokenizer-file (default gpt2); a tokenizer.json or SentencePiece file has its own.")(f)
    f = click.option("--tokenizer-file", type=click.Path(), help="Instead of --encoding: a Hugging Face tokenizer.json (or its folder, with tokenizer_config.json), a SentencePiece model, or a .tiktoken ranks file (optionally .gz); told apart by content.")(f)
    return click.option("--encoding", default="gpt2", show_default=True, callback=named, help="tiktoken encoding name (gpt2 works offline).")(f)
json_option = click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout.")
bare_dtype_option = click.option(
    "--dtype", type=click.Choice(["uint16", "uint32"]), default=None,
    help="Width of a bare token file's ids, one no meta.json describes [default: uint16, nanoGPT's];"
         " refused when meta.json, an llm.c header or a Megatron index says otherwise.")
