"""``winsample windows``: training-window plans of a token file, written as .npy (+ sidecar), txt or jsonl.

The command is ``write.run``; the planning (options, planners, stats, edges) is ``winsample.planning``,
re-exported here so ``windows.Options``, ``windows.plan_regular`` … keep working.
"""

from ..planning import (
                        BOUNDARIES,
                        FORMATS,
                        MAX_POSITION,
                        MAX_SHARDS,
                        MAX_T,
                        PLAN_DTYPE,
                        SHORTS,
                        TAILS,
                        Options,
                        SemanticPlanner,
                        boundaries,
                        build_plans,
                        check_options,
                        doc_edges,
                        draw_offset,
                        fill_fresh,
                        load_tokenizer,
                        make_rows,
                        plan_packed,
                        plan_regular,
                        plan_semantic,
                        plan_stats,
                        resolve_stride,
                        shard_rows,
                        shard_stats,
                        shuffle_rows,
                        span_of,
)
from .write import MATERIALIZE_ROWS, check_writable, materialize, output_paths, run, source_entry, written_paths

__all__ = [
    "BOUNDARIES", "FORMATS", "MATERIALIZE_ROWS", "MAX_POSITION", "MAX_SHARDS", "MAX_T", "PLAN_DTYPE", "SHORTS",
    "TAILS", "Options", "SemanticPlanner", "boundaries", "build_plans", "check_options", "check_writable",
    "doc_edges", "draw_offset", "fill_fresh", "load_tokenizer", "make_rows", "materialize", "output_paths",
    "plan_packed", "plan_regular", "plan_semantic", "plan_stats", "resolve_stride", "run", "shard_rows",
    "shard_stats", "shuffle_rows", "source_entry", "span_of", "written_paths",
]
