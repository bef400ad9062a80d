"""Window plans: where each training window starts and how long it is, as integer offsets.

The planning layer under ``winsample windows`` (which writes the plans) and the Loader (which
re-plans a ``--random-offset`` plan per epoch); it writes nothing.

All positions are token indices into the .bin; every range is half-open ``[start, end)``.
``span`` = T + 1 with targets (x = w[:T], y = w[1:]) or T without. For one document
``[ds, de)`` of L = de - ds tokens, stride S and offset O:

- L >= span: O is clamped to L - span; regular starts ds+O, ds+O+S, … while start + span <= de.
  If the last regular window ends before de, ``tail`` decides: ``align`` adds [de-span, de)
  (never a duplicate), ``short`` adds the leftover [last end - 1, de) with targets ([last end, de)
  without), ``drop`` adds nothing.
- 0 < L < span: one short window [ds, de) with ``short="keep"``, none with ``"drop"``.
- Semantic edges (paragraph/sentence): see ``plan_semantic``.

With targets a window [s, e) trains on x = tokens[s:e-1], y = tokens[s+1:e]: its first token is
never a label. So with targets every window holds at least 2 tokens (one (x, y) pair; a shorter
document or leftover gets no window and counts as uncovered), and a window that continues the
previous one of its document starts at or before that one's end - 1, so no token inside is
skipped as a label (the exception is a regular stride > T, which the user chose).

Plain mode never reads tokens: the plan is arithmetic over N and the document edges,
vectorised over windows. ``fresh`` = leading tokens of a window already covered by earlier
windows of its document, so coverage = Σ (length − fresh) with no per-token array.
"""

from . import boundaries
from .bestfit import best_fit, plan_best_fit
from .build import build_plans, doc_edges, documents, load_tokenizer, plan_params
from .options import (
                      BOUNDARIES,
                      FORMATS,
                      LONGS,
                      MAX_POSITION,
                      MAX_SHARDS,
                      MAX_T,
                      PACKED_DTYPE,
                      PACKS,
                      PLAN_DTYPE,
                      SHORTS,
                      TAILS,
                      Options,
                      check_options,
                      draw_offset,
                      epoch_offset,
                      is_best_fit,
                      resolve_stride,
                      span_of,
)
from .planners import SemanticPlanner, plan_packed, plan_regular, plan_semantic
from .stats import fill_fresh, make_rows, packed_stats, plan_stats, shard_rows, shard_stats, shuffle_rows

__all__ = [
    "BOUNDARIES", "FORMATS", "LONGS", "MAX_POSITION", "MAX_SHARDS", "MAX_T", "PACKED_DTYPE", "PACKS", "PLAN_DTYPE",
    "SHORTS", "TAILS", "Options", "SemanticPlanner", "best_fit", "boundaries", "build_plans", "check_options",
    "doc_edges", "documents", "draw_offset", "epoch_offset", "fill_fresh", "is_best_fit", "load_tokenizer",
    "make_rows", "packed_stats", "plan_best_fit", "plan_packed", "plan_params",
    "plan_regular", "plan_semantic", "plan_stats", "resolve_stride", "shard_rows", "shard_stats", "shuffle_rows",
    "span_of",
]
