"""``winsample windows``: a token file → window plans."""

from __future__ import annotations

import sys

import click

from .. import planning
from .. import windows as windows_mod
from . import render
from .common import bare_dtype_option, emit_json, json_option, named, progress, quiet_option, say
from .main import main


def _parse_scales(ctx, param, values):
    """-T 512,1024 and -T 512 -T 1024 both mean two scales (in the order given, no repeats)."""
    scales = []
    for value in values:
        try:
            scales += [int(v) for v in str(value).split(",")]  # an empty item (10,,20) is a typo, not nothing
        except ValueError:
            raise click.BadParameter(f"{value!r}: give an integer or a comma list like 512,1024") from None
    if not scales:
        raise click.BadParameter("give at least one value")
    return list(dict.fromkeys(scales))


@main.command()
@click.argument("bin_path", metavar="BIN", type=click.Path(dir_okay=True))
@click.option("-T", "--context", "T", required=True, multiple=True, callback=_parse_scales,
              help="Model input length in tokens; several (-T 512 -T 1024 or 512,1024) write one plan per scale.")
@click.option("--stride", type=int, help="Tokens between window starts, 1 to the span (T + 1, or T with --no-targets) [default: T // 2]; a larger stride would skip tokens and is refused.")
@click.option("--overlap", type=float, help="Overlap rate F in [0, 1): stride = round(span × (1 − F)).")
@click.option("--targets/--no-targets", default=True, show_default=True,
              help="Windows span T+1 tokens (x = w[:T], y = w[1:]) or just T (a plan for other readers: the Loader"
                   " serves (x, y), so it refuses one).")
@click.option("--offset", type=int, help="First start (clamped to N − span).")
@click.option("--random-offset", is_flag=True, help="Offset drawn uniformly from [0, stride) per (seed, epoch); --boundaries none|doc only (semantic cuts snap to the same edges).")
@click.option("--seed", type=int, help="Seed for --random-offset and --shuffle.")
@click.option("--epoch", type=int, help="Epoch for --random-offset and --shuffle [default: 0].")
@click.option("--tail", type=click.Choice(planning.TAILS),
              help="Leftover after the last regular window: one window at N − span (align, default), a shorter one (short), or none (drop).")
@click.option("--short", type=click.Choice(planning.SHORTS), default="keep", show_default=True,
              help="A document shorter than the span: one short window, or none.")
@click.option("--boundaries", type=click.Choice(planning.BOUNDARIES), default=None,
              help="Never cross documents (doc); also end/start on paragraph or sentence edges when they fit"
                   " [default: none; doc for records with a loss mask (encode --chat / --prompt-field)].")
@click.option("--pack", type=click.Choice(planning.PACKS), is_flag=False, flag_value="greedy",
              help="Pack whole documents into shared windows (implies --boundaries doc). greedy (--pack alone): in file order,"
                   " each window filled while the next document fits, long documents windowed as usual; best-fit: best-fit"
                   " decreasing, much fuller windows (fill near 1 with many short documents), segments from anywhere in the"
                   " file. Choose best-fit to train on packed documents with winsample.Loader (positions=\"doc\","
                   " cross_doc_labels=\"mask\"); greedy for plans other tools read as contiguous (start, length) windows.")
@click.option("--long", type=click.Choice(planning.LONGS),
              help="--pack best-fit: a document longer than the span is cut into span-sized pieces (split, default: every token once),"
                   " cut to its first span tokens (truncate), or left out (drop).")
@click.option("--shuffle", is_flag=True, help="Permute window order by (seed, epoch).")
@click.option("--shards", type=int, help="Split into K plan files, round-robin (PLAN.shard0ofK.npy …).")
@click.option("--materialize", is_flag=True, help="Also write the token windows, (n, span), as PLAN.tokens.npy.")
@click.option("--format", "fmt", type=click.Choice(planning.FORMATS), default="npy", show_default=True,
              help="npy plan + sidecar, txt (start<TAB>length lines) or jsonl.")
@click.option("--decode", is_flag=True, help="With --format jsonl: add each window's text.")
@click.option("-o", "--output", required=True, help="Plan file (PLAN.npy), or - for txt/jsonl on stdout.")
@click.option("--meta", "meta_path", type=click.Path(dir_okay=False),
              help="meta.json describing BIN [default: the one beside it; for llm.c shards, the data folder's above llmc/].")
@click.option("--encoding", callback=named, help="Tokenizer when meta.json does not name a usable one: a tiktoken name, or a tokenizer file or folder [bare .bin: gpt2].")
@bare_dtype_option
@quiet_option
@json_option
def windows(bin_path, T, stride, overlap, targets, offset, random_offset, seed, epoch, tail, short, boundaries,
            pack, long, shuffle, shards, materialize, fmt, decode, output, meta_path, encoding, dtype, quiet, as_json):
    """Plan training windows over a token file: integer offsets, exact and reproducible.

    \b
      winsample windows data/train.bin -T 1024 -o train.plan.npy
      winsample windows data/train.bin -T 256 --boundaries paragraph -o plan.npy
      winsample windows data/train.bin -T 2048 --pack best-fit -o packed.plan.npy
      winsample windows data/train.bin -T 8 --stride 4 --format txt -o - | head
    """
    if as_json and output == "-":
        raise click.UsageError("--json and -o - both want stdout: write the plan to a file, or drop --json")
    opts = planning.Options(
        T=T, targets=targets, stride=stride, overlap=overlap, offset=offset, random_offset=random_offset,
        seed=seed, epoch=epoch, tail=tail, short=short, boundaries=boundaries, pack=pack or False, long=long,
        shuffle=shuffle,
        shards=shards, materialize=materialize, format=fmt, decode=decode, encoding=encoding, dtype=dtype,
    )
    with progress(quiet, unit="tok", unit_scale=True, desc="scanning") as bar:
        summaries = windows_mod.run(bin_path, output, opts, meta_path, stream=sys.stdout, progress=bar.update)
    hint = next((s["looks_uint32"] for s in summaries if "looks_uint32" in s), None)
    if hint is not None:  # a diagnostic: shown even with -q
        click.echo(render.wide_ids_warning(hint), err=True)
    for line in dict.fromkeys(w for s in summaries for w in s.get("warnings", ())):  # shown even with -q (as encode's)
        click.echo(render.terminal_safe(f"warning: {line}"), err=True)
    if as_json:
        emit_json(summaries[0] if len(summaries) == 1 else {"plans": summaries}, wrote=output)
    for s in summaries:
        for line in render.plan_summary(s, boundaries):
            say(quiet, line)
