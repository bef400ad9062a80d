"""``winsample windows``: training-window plans of a token file, written as .npy (+ sidecar), txt or jsonl.

The command is ``write.run``; what it plans with (options, planners, stats, edges) is the
library ``winsample.planning``, which the Loader re-plans with too.
"""

from .write import MATERIALIZE_ROWS, check_writable, materialize, output_paths, run, source_entry, written_paths

__all__ = ["MATERIALIZE_ROWS", "check_writable", "materialize", "output_paths", "run", "source_entry", "written_paths"]
