"""``winsample mix``: several window plans → one mixture plan, served by weight.

The arithmetic (epoch length, counts, repeats, the order exact in every prefix) is
``planning.mixture``; this module reads the source plans, checks they can be mixed (one
tokenizer, one T, targets alike), and writes the mixture plan: ``MIXTURE_DTYPE`` rows (one per
source) and a sidecar naming each source plan by its path relative to the mixture's folder and
its rows checksum. The order itself is not written: ``winsample.Loader`` draws it per epoch from
the counts and its seed, so a mixture of 10^9 windows is a file of a few hundred bytes.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import disk, formats, tokensrc
from .errors import ConfigError, DataError, InputError
from .planning import mixture
from .train import Plan, read_plan

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


@dataclass(frozen=True)
class SourceSpec:
    """``NAME=WEIGHT:PLAN`` as given to ``mix``: the weight kept as written ("0.6" is exactly 3/5)."""

    name: str
    weight: str
    plan: str

    @classmethod
    def parse(cls, text: str) -> SourceSpec:
        name, eq, rest = text.partition("=")
        weight, colon, plan = rest.partition(":")
        if not eq or not colon or not plan:
            raise ConfigError(f"{text!r}: give each source as NAME=WEIGHT:PLAN, e.g. web=0.6:data/web/train.plan.npy")
        if not NAME.fullmatch(name):
            raise ConfigError(f"{text!r}: a source name is letters, digits, '_', '.', '-' (at most 64), got {name!r}")
        try:
            mixture.as_fraction(weight)  # a positive number
        except ConfigError as e:
            raise ConfigError(f"{text!r}: source {name}'s {e}") from None
        return cls(name, weight, plan)


MAX_EPOCH_WINDOWS = 1 << 32  # an epoch's order (source, window) is held whole by the Loader, verify and inspect


def build(specs: list[SourceSpec], out: str | Path, windows: int | None = None, epoch_of: str | None = None,
          max_repeats: int | None = None, seed: int | None = None) -> dict:
    """Check the sources, compute one epoch's counts and write the mixture plan ``out``; the summary.

    ConfigError (nothing written) for sources that cannot be mixed: a name twice, another T or
    targets, another tokenizer (naming both), ``max_repeats`` exceeded, an output over an input.
    """
    if not specs:
        raise ConfigError("mix needs at least one NAME=WEIGHT:PLAN source")
    names = [s.name for s in specs]
    if len(set(names)) < len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise ConfigError(f"source name {dup!r} given twice: each source needs its own name")
    if seed is not None and not 0 <= seed < 1 << 63:
        raise ConfigError(f"--seed must be in [0, 2**63), got {seed}")
    if windows is not None and epoch_of is not None:
        raise ConfigError("--windows and --epoch-of both set: give one")
    if windows is not None and windows > MAX_EPOCH_WINDOWS:
        raise ConfigError(f"--windows {windows:,}: an epoch's order is held in memory by every reader (~10 bytes a window),"
                          f" at most {MAX_EPOCH_WINDOWS:,} windows; mix a shorter epoch (the Loader walks epoch after epoch)")
    if epoch_of is not None and epoch_of not in names:
        raise ConfigError(f"--epoch-of {epoch_of}: no source of that name (sources: {', '.join(names)})")
    out = Path(out)
    if out.suffix != ".npy":
        raise ConfigError(f"-o {out}: a mixture plan is a .npy (and its .npy.json sidecar)")
    plans = [_read_source(s) for s in specs]
    _check_mixable(specs, plans)
    sizes = [len(p.windows) for p in plans]
    for s, n in zip(specs, sizes):
        if n == 0:
            raise ConfigError(f"source {s.name} ({s.plan}): the plan has no windows")
    counts = mixture.epoch_counts([s.weight for s in specs], sizes, windows,
                                  names.index(epoch_of) if epoch_of is not None else None)
    if sum(counts) > MAX_EPOCH_WINDOWS:
        raise ConfigError(f"the epoch would hold {sum(counts):,} windows, more than the {MAX_EPOCH_WINDOWS:,} a reader holds in"
                          " memory; give a shorter one with --windows")
    refuse_unserved(specs, counts)
    reps = mixture.repeats(counts, sizes)
    if max_repeats is not None:
        for s, (_, most) in zip(specs, reps):
            if most > max_repeats:
                raise ConfigError(f"source {s.name}: its share needs each window up to {most} times an epoch,"
                                  f" more than --max-repeats {max_repeats}; lower its weight or the epoch")
    inputs = [q for s in specs for q in tokensrc.plan_inputs(s.plan)]  # the plans and the datasets behind them
    disk.refuse_overwrite([out, formats.plan_sidecar(out)], inputs)
    formats.refuse_plan_files([out, formats.plan_sidecar(out)])  # -o PLAN.tokens.npy: another plan's windows
    folder = out.parent if str(out.parent) else Path(".")
    if not folder.is_dir():
        raise ConfigError(f"-o {out}: folder {folder} does not exist")
    rows = np.zeros(len(specs), formats.MIXTURE_DTYPE)
    rows["windows"], rows["count"] = sizes, counts
    rows["tokens"] = [int(p.windows["length"].sum(dtype=np.int64)) for p in plans]
    first = plans[0]
    rule = ({"rule": "windows", "windows": int(windows)} if windows is not None else
            {"rule": "epoch-of", "source": epoch_of} if epoch_of is not None else {"rule": "first-exhausted"})
    rule["prefix"] = mixture.PREFIX_WEIGHTS  # counts and order within one window of the weights (planning.mixture)
    side = formats.PlanSidecar(
        params={"T": first.T, "targets": first.targets, "span": first.span, "mixture": rule, "max_repeats": max_repeats,
                "seed": seed},
        stats={"windows": int(sum(counts))}, tokenizer=first.sidecar.tokenizer, has_source=False,
        sources=[formats.MixtureSource(name=s.name, plan=os.path.relpath(os.path.abspath(s.plan), os.path.abspath(folder)),
                                       weight=s.weight, rows_checksum=p.sidecar.rows_checksum,
                                       tokens_checksum=p.sidecar.source.checksum)
                 for s, p in zip(specs, plans)])
    # writers into one folder take turns (as windows' do): two runs with one -o never leave the
    # rows of one beside the sidecar of the other
    try:
        with disk.locked_folder(folder):
            formats.write_plan(out, rows, side)
    except OSError as e:  # a read-only folder, a full disk: the old pair is left as it was
        raise InputError(f"{out}: cannot write: {disk.os_error_text(e)}; nothing was written") from None
    return summary(specs, rows, reps, str(out))


def refuse_unserved(specs: list[SourceSpec], counts: list[int]) -> None:
    """ConfigError for a source an epoch serves no window of: a source listed and never served
    is a weight that went wrong."""
    for s, c in zip(specs, counts):
        if c == 0:
            raise ConfigError(f"source {s.name}: weight {s.weight} gives it none of the epoch's {sum(counts):,} windows;"
                              " raise its weight or the epoch (--windows), or leave it out")


def summary(specs: list[SourceSpec], rows: np.ndarray, reps: list[tuple[int, int]], out: str) -> dict:
    E = int(rows["count"].sum())
    return {"windows": E, "file": out, "sources": [
        {"name": s.name, "weight": s.weight, "share": int(r["count"]) / E if E else 0.0, "windows": int(r["windows"]),
         "count": int(r["count"]), "repeats": list(rp),
         "tokens": round(float(r["tokens"]) * int(r["count"]) / int(r["windows"])) if r["windows"] else 0}
        for s, r, rp in zip(specs, rows, reps)]}


def _read_source(s: SourceSpec) -> Plan:
    try:
        plan = read_plan(s.plan)
    except (DataError, ConfigError) as e:
        raise type(e)(f"source {s.name}: {e}") from None
    if plan.sidecar.mixture:
        raise ConfigError(f"source {s.name} ({s.plan}) is itself a mixture: mix its sources instead")
    if plan.sidecar.params.shard is not None:
        raise ConfigError(f"source {s.name} ({s.plan}) is one shard of a plan: give the whole plan (the Loader splits ranks)")
    why = mixture.unmixable(plan.sidecar.params)
    if why is not None:
        raise ConfigError(f"source {s.name} ({s.plan}): {why}")
    return plan


def _check_mixable(specs: list[SourceSpec], plans: list[Plan]) -> None:
    a, p0 = specs[0], plans[0]
    for s, p in zip(specs[1:], plans[1:]):
        if (p.T, p.targets) != (p0.T, p0.targets):
            raise ConfigError(f"source {s.name} ({s.plan}) has T {p.T}{'' if p.targets else ' without targets'}, source"
                              f" {a.name} ({a.plan}) T {p0.T}{'' if p0.targets else ' without targets'}: a batch has one T")
        t0, t = formats.tokenizer_identity(p0.sidecar.tokenizer), formats.tokenizer_identity(p.sidecar.tokenizer)
        if t != t0:
            raise ConfigError(f"source {s.name} ({s.plan}) was tokenized with {_tok(t)}, source {a.name} ({a.plan})"
                              f" with {_tok(t0)}: a mixture's ids must mean the same tokens"
                              + (f"; a plan of a bare .bin records one when windows is given --encoding: plan"
                                 f" {a.name if not t0 else s.name} again with it" if not t or not t0 else ""))


def _tok(t: dict) -> str:
    """A tokenizer identity for a message: its name and the keys that tell it apart."""
    if not t:
        return "no recorded tokenizer (a bare .bin planned without --encoding)"
    keys = ", ".join(f"{k} {v}" for k, v in t.items() if k != "name")
    return f"{t.get('name', 'a tokenizer file')} ({keys})"
