"""The ``retokenize`` check as verify runs it: which documents of which token files it samples,
started on a helper thread before the scans (``start``), its lines once the plans are checked.
The sampling and re-encoding itself: ``retokenize.py``."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..errors import WinsampleError
from . import retokenize as engine
from .registry import check
from .report import Report, Status
from .scan import Target


@check("retokenize", help="a seeded sample of documents encodes again to the same ids",
       reads="token files, document indexes, tokenizer", stage="final", runs_before="decode")
def retokenize(report: Report, ctx) -> None:
    """The outcomes ``start`` left in ``ctx.retokenize`` (nothing when it sampled no file)."""
    retok = ctx.retokenize
    if retok is None:
        return
    if isinstance(retok, tuple):
        report.add(RETOKENIZE, "", *retok)
        return
    for o in retok.result():
        report.add(RETOKENIZE, o.label, o.status, o.detail, documents=o.documents, bytes=o.bytes, mismatches=o.mismatches)


RETOKENIZE = retokenize.spec


def start(ctx) -> None:
    """``ctx.retokenize``: a future of the retokenize outcomes (``retokenize.check``) for the
    whole-token files of the dataset (tiktoken releases the GIL: it runs during the scans), a
    (status, detail) pair when the check cannot run at all, or None (no file to sample)."""
    if ctx.enc is None:
        ctx.retokenize = (Status.SKIP, f"the tokenizer does not load: {ctx.enc_error}")
        return
    pairs = [(t, u) for t in ctx.targets if (u := _unit(ctx, t)) is not None]
    if not pairs:
        return
    pool = ThreadPoolExecutor(1)
    kind = (ctx.meta.extra.get("records") or {}).get("kind") if ctx.meta is not None else None
    if kind is None:
        ctx.retokenize = pool.submit(engine.check, ctx.enc, [u for _, u in pairs], ctx.opts.retokenize_sample, ctx.opts.retokenize_bytes)
    else:  # conversations and prompt/response pairs were encoded their own way: re-derived that way
        ctx.retokenize = pool.submit(_records, ctx, pairs, kind)
    pool.shutdown(wait=False)


def _tracer(t: Target):
    """The provenance of target ``t`` (None: none recorded, or unsound: ``provenance`` says so)."""
    from ..provenance import tracer_for

    try:
        return tracer_for(t.src) if t.src is not None else None
    except WinsampleError:
        return None


def _records(ctx, pairs: list, kind: str) -> list[engine.Outcome]:
    from .. import records as record_rules
    from . import records

    rule = record_rules.RecordRule.from_json(ctx.meta.extra.get("records") or {})
    out = []
    docs = max(1, ctx.opts.retokenize_sample // len(pairs)) if ctx.opts.retokenize_sample > 0 else 0
    for t, u in pairs:
        entry = ctx.meta.splits.get(t.split)
        if docs == 0 or entry is None or entry.mask is None:
            out.append(engine.Outcome(u.label, "skip", "--retokenize-sample 0" if docs == 0 else "no loss mask recorded"))
            continue
        path = ctx.folder / entry.mask.file
        if not path.is_file() or path.stat().st_size != len(u.tokens):
            out.append(engine.Outcome(u.label, "skip", "its loss mask does not read (loss_mask says why)"))
            continue
        mask = np.memmap(path, dtype=np.uint8, mode="r")
        tok = ctx.enc.reference()
        out.append(records.sample(tok, u, mask, kind, u.eot_appended, docs, records.Rerender(tok, rule, _tracer(t), ctx.meta.inputs)))
    return out


def _unit(ctx, t: Target) -> engine.Unit | None:
    """What retokenize samples from one token file (None: a file it leaves to other checks)."""
    meta, src = ctx.meta, t.src
    if t.path not in ctx.sizes or src is None or src.sharded or src.layout is not None:
        return None  # llm.c streams and shard sets are not sampled (yet)
    if src.stray or src.n == 0:
        return None  # dtype_divisible / min_length say why
    tail = meta is not None and (meta.split or {}).get("method") == "tail"
    eot_appended = bool(meta.eot_appended) if meta is not None and meta.eot_appended is not None else meta is not None
    try:
        starts = src.doc_starts()
    except (WinsampleError, OSError):
        starts = None  # the meta check names a broken index; documents then split at EOT
    return engine.Unit(t.label, src.tokens, starts, eot_appended and starts is not None, ctx.enc.eot,
                       partial_first=tail and t.split == "val", partial_last=tail and t.split == "train",
                       recorded=meta is not None,
                       bos_prepended=bool(meta is not None and meta.extra.get("bos_prepended")))
