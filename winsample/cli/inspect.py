"""``winsample inspect``: what a token file, data folder or plan holds; writes nothing."""

from __future__ import annotations

import click

from .common import bare_dtype_option, emit, emit_json, json_option, named, quiet_option, use_color
from .main import main

_INSPECT_STYLES = {"head": {"bold": True}, "key": {"fg": "cyan"}, "mark": {"dim": True}, "warn": {"fg": "yellow"}}


@main.command("inspect")
@click.argument("path", type=click.Path(path_type=str))
@click.option("--at", "at", type=int, default=0, show_default=True, metavar="I",
              help="First token (of a .bin), row (of a plan), window (of a best-fit plan) or position (of a mixture) to show.")
@click.option("--count", "count", type=click.IntRange(min=0, max=1_000_000), default=32, show_default=True, metavar="K",
              help="How many tokens, plan rows, best-fit windows or mixture positions to show (at most 1,000,000: a look, not an export).")
@click.option("--meta", "meta_path", type=click.Path(exists=True, dir_okay=False), default=None,
              help="meta.json describing PATH, when it is not beside it.")
@click.option("--encoding", callback=named, default=None, metavar="NAME",
              help="Tokenizer to decode with, instead of the one meta.json names: a tiktoken name, or a tokenizer file or folder (gpt2 without meta).")
@bare_dtype_option
@quiet_option  # accepted as by every command; inspect draws no bar and its report is the data (stdout)
@json_option
def inspect_cmd(path, at, count, meta_path, encoding, dtype, quiet, as_json):
    """Show what a token file, data folder or window plan holds; writes nothing.

    \b
    PATH a .bin:    meta summary and tokens [I, I+K) as ids and decoded, │ between tokens
                    (⏎ a newline, ⟨e6 bb⟩ bytes that are not UTF-8 on their own)
    PATH a folder:  meta summary of every split
    PATH a plan:    parameters, counts and windows [I, I+K) (start, length, doc, fresh; where the
                    data has provenance, doc is the document the window starts in, with its
                    offset there and source, whatever --boundaries made the plan's doc field);
                    a best-fit plan: fill, padding, segments and windows [I, I+K) as their segments; a mixture
                    (mix): its sources, the epoch and positions [I, I+K) of epoch 0 as the Loader
                    serves them with seed 0 (source, window, start, length)

    Checksums are shown as recorded, not recomputed: `winsample verify` checks them.
    """
    from ..inspect import AtOutOfRange, inspect_path, render_text

    try:
        report = inspect_path(path, at=at, count=count, meta_path=meta_path, encoding=encoding, dtype=dtype)
    except AtOutOfRange as e:
        raise click.BadParameter(str(e), param_hint="'--at'") from None
    if as_json:
        emit_json(report)
        return
    color = use_color()
    style = (lambda text, role: click.style(text, **_INSPECT_STYLES[role])) if color else (lambda text, role: text)
    emit(render_text(report, style), color=color)
