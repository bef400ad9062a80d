"""Planning one token file: open it, find its documents (and semantic edges), plan every -T.

``build_plans`` is the whole computation of ``winsample windows`` without writing anything;
the Loader calls it to re-plan a ``--random-offset`` plan for each epoch.
"""

from __future__ import annotations

import numpy as np

from .. import tokensrc
from ..errors import ConfigError, DataError
from ..tokensrc import open_source
from . import boundaries as bnd
from .bestfit import plan_best_fit
from .options import Options, check_options, epoch_offset, is_best_fit, resolve_stride, span_of
from .planners import SemanticPlanner, plan_packed, plan_regular
from .stats import packed_stats, plan_stats, shuffle_rows


def load_tokenizer(src: tokensrc.OpenSplit, why: str):
    """``src.tokenizer`` (the one rule: ``--encoding``, else meta's, its ``file`` included, else
    gpt2), or ConfigError naming ``why`` when it cannot be loaded."""
    try:
        return src.tokenizer
    except ConfigError as e:
        raise ConfigError(f"{src.path}: {e} (or a --meta describing a known tokenizer), needed for {why}") from None


def doc_edges(src: tokensrc.OpenSplit, tokens, eot: int | None, progress=None) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends) of documents: from the doc index when there is one, else from EOT positions."""
    n = src.n
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    if src.layout == tokensrc.LLMC:  # every document starts with its EOT
        starts = tokensrc.eot_positions(tokens, eot)
        if len(starts) == 0 or starts[0] != 0:
            starts = np.concatenate([[0], starts]).astype(np.int64)
        return starts, np.append(starts[1:], n)
    starts = src.doc_starts()
    if starts is None:
        starts = bnd.doc_starts_from_eot(tokens, eot, progress)
    return starts, np.append(starts[1:], n)


def build_plans(bin_path, o: Options, meta_path=None, progress=None) -> list[dict]:
    """Compute one plan per T. Returns dicts with ``T``, ``rows``, ``params``, ``stats``, ``source``,
    ``warnings`` (lines for a person: what the plan cannot do that the options asked for).

    Reads tokens only for doc edges without a doc index, semantic edges or nothing else.
    """
    check_options(o)
    src = open_source(bin_path, meta_path, o.encoding, dtype=o.dtype)
    tokens = None
    enc = None
    semantic = o.boundaries in ("paragraph", "sentence")
    warnings = []
    if semantic:
        enc = load_tokenizer(src, f"--boundaries {o.boundaries}")
        warnings += [w for w in [bnd.edges_lost(enc, o.boundaries)] if w]
    if o.boundaries != "none" or o.materialize or o.decode:
        tokens = src.tokens
    if is_best_fit(o):
        tokens = src.tokens  # a memmap: read only where there is no document index (EOT scan)
        ds, de = documents(src, "doc", tokens, progress)
        return [_best_fit_plan(o, T, src, ds, de) | dict(src=src, tokens=tokens, enc=None, meta_path=meta_path)
                for T in o.T]
    ds, de = documents(src, o.boundaries, tokens, progress)
    planners = _semantic_plans(src, o, tokens, enc, ds, de, progress) if semantic else {}
    results = []
    for T in o.T:
        span = span_of(T, o.targets)
        stride = resolve_stride(span, T, o.stride, o.overlap)
        offset = epoch_offset(o, stride)
        epoch = o.epoch if o.epoch is not None else (0 if o.random_offset or o.shuffle else None)
        if semantic:
            rows = planners[T].finish()
        elif o.pack:
            rows = plan_packed(ds, de, span, stride, offset, o.tail or "align", o.short, o.targets)
        else:
            rows = plan_regular(ds, de, span, stride, offset, o.tail or "align", o.short, o.targets)
        stats = plan_stats(rows, src.n, ds, de)
        stats["documents"] = int(len(ds))
        if o.shuffle:
            rows = shuffle_rows(rows, o.seed, epoch)
        params = plan_params(o, T, span, stride, offset, epoch)
        results.append({"T": T, "rows": rows, "params": params, "stats": stats, "doc_starts": ds, "doc_ends": de})
    return [dict(r, src=src, tokens=tokens, enc=enc, meta_path=meta_path, warnings=warnings) for r in results]


def _best_fit_plan(o: Options, T: int, src, ds, de) -> dict:
    span = span_of(T, o.targets)
    rows, counts = plan_best_fit(ds, de, span, o.long or "split", o.targets)
    stats = packed_stats(rows, src.n, span, counts)
    stats["documents"] = int(len(ds))
    params = plan_params(o, T, span, span, 0, None)
    return {"T": T, "rows": rows, "params": params, "stats": stats, "doc_starts": ds, "doc_ends": de}


def documents(src: tokensrc.OpenSplit, boundaries: str, tokens, progress=None) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends) of the documents windows stay inside: the whole file with ``boundaries``
    none, else ``doc_edges`` (EOT from the tokenizer when there is no doc index)."""
    if boundaries == "none":
        ds = np.zeros(1 if src.n else 0, np.int64)
        return ds, np.full(len(ds), src.n, np.int64)
    eot = None
    if not src.sharded and src.doc_index is None and src.known_starts is None:
        try:
            eot = src.eot
        except ConfigError as e:
            raise ConfigError(f"{src.path}: {e}, needed for finding documents by EOT") from None
    return doc_edges(src, tokens, eot, progress)


def _semantic_plans(src: tokensrc.OpenSplit, o: Options, tokens, enc, ds, de, progress) -> dict[int, SemanticPlanner]:
    """One streaming pass over the tokens feeds one ``SemanticPlanner`` per T (still to ``finish``)."""
    planners = {}
    for T in o.T:
        span = span_of(T, o.targets)
        stride = resolve_stride(span, T, o.stride, o.overlap)
        planners[T] = SemanticPlanner(ds, de, span, stride, epoch_offset(o, stride), o.short, o.targets)
    try:
        for known, found in bnd.iter_boundaries(tokens, o.boundaries, enc, progress=progress):
            for p in planners.values():
                p.feed(found, known)
    except DataError as e:  # e.g. an id outside the vocabulary: name the file
        raise DataError(f"{src.path}: {e}") from None
    return planners


def plan_params(o: Options, T: int, span: int, stride: int, offset: int, epoch: int | None) -> dict:
    """The sidecar's ``params`` of the plan for ``T``."""
    params = {
        "T": T, "targets": o.targets, "span": span, "stride": stride,
        "overlap": 1 - stride / span, "offset": offset if (o.offset is not None or o.random_offset) else None,
        "random_offset": o.random_offset, "seed": o.seed, "epoch": epoch,
        "tail": o.tail or "align", "short": o.short, "boundaries": o.boundaries, "pack": o.pack,
        "shuffle": o.shuffle, "shard": None, "shards": o.shards,
        "shard_method": "round-robin" if o.shards else None,
    }
    if is_best_fit(o):  # windows hold whole documents side by side: no stride, offset or tail
        params.update(overlap=0.0, tail=None, boundaries="doc", long=o.long or "split")
    elif o.pack == "greedy":
        params["pack"] = True  # greedy plans have always recorded true
    if o.boundaries in ("paragraph", "sentence"):
        params["tail"] = "align"  # the last window of each document ends at its end
    return params
