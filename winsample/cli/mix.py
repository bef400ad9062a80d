"""``winsample mix``: several window plans → one mixture plan."""

from __future__ import annotations

import click

from .common import emit_json, json_option, quiet_option, say
from .main import main
from .render import mixture_lines


@main.command("mix")
@click.argument("sources", nargs=-1, required=True, metavar="NAME=WEIGHT:PLAN...")
@click.option("-o", "--output", required=True, help="The mixture plan (MIX.plan.npy, and its .json sidecar).")
@click.option("--windows", type=click.IntRange(min=1), metavar="N",
              help="Windows per epoch, shared by weight (largest remainder) [default: one pass over the source that runs out first].")
@click.option("--epoch-of", "epoch_of", metavar="NAME", help="An epoch is one pass over this source's plan.")
@click.option("--max-repeats", type=click.IntRange(min=1), metavar="R",
              help="Refuse a mix that serves some window more than R times an epoch (naming the source).")
@click.option("--seed", type=int, help="Also seeds the sources' permutations (with the Loader's seed and the epoch) [default: the Loader's seed alone].")
@quiet_option
@json_option
def mix_cmd(sources, output, windows, epoch_of, max_repeats, seed, quiet, as_json):
    """Mix window plans by weight: a plan winsample.Loader serves, exact in every prefix.

    Weights are proportions of windows. After any k windows of an epoch each source has been
    served within one window of its share of k; a source asked for more windows than its plan
    has is repeated evenly (each window ⌊r⌋ or ⌈r⌉ times). The order is drawn per epoch from
    the Loader's seed (and --seed); the sources must share one tokenizer and one T.

    \b
      winsample mix web=0.6:data/web/train.plan.npy code=0.3:data/code/train.plan.npy \\
                    books=0.1:data/books/train.plan.npy -o mix.plan.npy
    """
    from ..mixing import SourceSpec, build

    report = build([SourceSpec.parse(s) for s in sources], output, windows, epoch_of, max_repeats, seed)
    if as_json:
        emit_json(report, wrote=report["file"])
    for line in mixture_lines(report):
        say(quiet, line)
