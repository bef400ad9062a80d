"""The ``plan_params`` check: a plan's rows are what ``windows`` makes with the parameters its
sidecar records, over the token file it names. A sidecar is a claim the Loader and the other
checks rely on (``pack``, ``boundaries``, ``stride``, ``tail``, …); re-planning is the one test
that catches an edited parameter whatever it is, and an edited row too."""

from __future__ import annotations

import numpy as np

from .. import planning
from ..errors import WinsampleError
from .registry import check
from .report import Report, Status


@check("plan_params", help="the rows are what windows makes with the sidecar's parameters (an edited parameter or row shows)",
       reads="plans, sidecars, token files", stage="plan")
def plan_params(report: Report, ctx, plan) -> None:
    side = plan.side
    if side.mixture:
        return
    got = plan.got.replanned if plan.got is not None and plan.got.replanned is not None else None
    if got is None:  # not re-planned on the helper thread during the scans: now
        bare = next((t.entry is None for t in ctx.targets if t.path == plan.path), True)
        got = replan(side, plan.path, bare, ctx.opts.encoding)
    status, words = got
    if status != Status.PASS:
        report.add(PLAN_PARAMS, plan.label, status, words)
        return
    rows, mine, p = words, plan.rows, side.params
    if len(rows) == len(mine) and all(np.array_equal(rows[f], mine[f]) for f in mine.dtype.names):
        report.add(PLAN_PARAMS, plan.label, Status.PASS, f"the {len(mine):,} rows are what windows makes with the sidecar's"
                   f" parameters ({describe(p)})")
        return
    k = next((i for i in range(min(len(rows), len(mine))) if rows[i].tolist() != mine[i].tolist()), min(len(rows), len(mine)))
    report.add(PLAN_PARAMS, plan.label, Status.FAIL,
               f"the rows are not what windows makes with the sidecar's parameters ({describe(p)}): it makes"
               f" {len(rows):,} rows, the plan holds {len(mine):,}; first difference at row {k}"
               " (the parameters or the rows were edited, or the plan was made by other means)")


def replan(side, token_path, bare: bool, encoding: str | None = None) -> tuple:
    """(Status.PASS, the rows ``windows`` makes from ``side``'s parameters over ``token_path``), or
    (FAIL or SKIP, why not). Pure: verify runs it on its plan thread while the scans run.
    ``encoding``: verify's --encoding, for a bare file whose plan records no tokenizer."""
    try:
        opts = options_of(side, bare, encoding)
    except (WinsampleError, TypeError, ValueError) as e:
        return Status.FAIL, f"the sidecar's parameters are not ones windows takes: {e}"
    if opts is None:
        return Status.SKIP, "a plan from before its parameters were all recorded"
    tok = side.tokenizer or {}
    if bare and not encoding and ("sha256" in tok or "file" in tok):  # its tokenizer file: only --encoding names it
        return Status.SKIP, f"made with the tokenizer file {tok.get('name')!r}: pass it as --encoding to re-plan"
    p = side.params
    sharded = p.shards not in (None, 1)
    if sharded and not (_count(p.shards) and _count(p.shard, lo=0) and p.shard < p.shards):
        return Status.SKIP, "its shard numbers are not usable (plan_bounds says why)"
    try:
        (got,) = planning.build_plans(token_path, opts)
    except (WinsampleError, TypeError, ValueError) as e:  # a parameter of the wrong type is a claim windows never made
        return Status.FAIL, f"windows cannot make a plan with the sidecar's parameters: {e}"
    rows = got["rows"]
    return Status.PASS, planning.shard_rows(rows, p.shards)[p.shard] if sharded else rows


PLAN_PARAMS = plan_params.spec


def describe(p) -> str:
    keys = ("T", "stride", "offset", "tail", "short", "boundaries", "pack", "long", "shuffle")
    return ", ".join(f"{k} {getattr(p, k)!r}" for k in keys if getattr(p, k) is not None)


def options_of(side, bare: bool = False, encoding: str | None = None) -> planning.Options | None:
    """The ``windows`` options that made a plan, from its sidecar (None: too old to say);
    ``bare``: its token file has no meta.json, so the tokenizer is ``encoding`` (verify's
    --encoding), else the tiktoken name the plan records, and its width the one the plan was made
    for (``windows --dtype``)."""
    p = side.params
    if p.T is None or p.stride is None:
        return None
    pack = p.pack
    # a tiktoken name the plan records loads by its name; a tokenizer file's recorded name does not (verify's --encoding does)
    tok = side.tokenizer or {}
    enc = None if "sha256" in tok or "file" in tok else tok.get("name")
    best_fit = pack == "best-fit"
    return planning.Options(
        T=[int(p.T)], targets=bool(p.targets), stride=None if best_fit else int(p.stride),
        offset=None if (p.random_offset or p.offset is None or best_fit) else int(p.offset),
        random_offset=bool(p.random_offset), seed=p.seed, epoch=p.epoch if (p.random_offset or p.shuffle) else None,
        tail=None if best_fit or p.boundaries in ("paragraph", "sentence") else p.tail, short=p.short or "keep",
        boundaries="none" if best_fit and p.boundaries == "doc" else (p.boundaries or "none"),
        pack=pack, long=p.long if best_fit else None, shuffle=bool(p.shuffle),
        encoding=(encoding or _usable(enc)) if bare else None, dtype=side.source.dtype if bare else None)


def _count(v, lo: int = 1) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= lo


def _usable(name):
    """The tokenizer name to plan with when the token file has no meta.json: the one the plan records."""
    return name if isinstance(name, str) and name else None
