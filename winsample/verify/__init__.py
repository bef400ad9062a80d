"""Checks of token files and window plans: ``verify(path, ...) -> Report``.

The library never prints. Every problem in the data becomes a ``Check`` with status ``fail``
(or ``warn``); only a run that cannot happen at all (PATH missing, a file unreadable or not a
file, a --plot PNG that is one of the files checked, a --plan or --meta that does not exist)
raises ``InputError`` (exit 2).

Check names (stable; scripts match on them; ``registry.py`` is their one list): {check_names}.

Each token file is read once, in pieces over a read-only memmap (``scan.py``), shared with the
checks that read it later. A plan's own figures (bounds, order, coverage: ``figures.py``) come
from one pass over its rows in blocks, on a helper thread during the scans; the ``retokenize``
sample (``retokenize.py``) is re-encoded on another. The modules, by concern: ``report.py`` (the
report and its exit status), ``registry.py`` (the checks), ``options.py`` (``VerifyOptions``),
``run.py`` (``verify``: what to check, in which order), ``scan.py`` / ``shingles.py`` (the one
pass over a file), ``files.py`` (per-file checks and split_leakage), ``meta.py`` (meta,
provenance), ``plan.py`` / ``figures.py`` (plan checks), ``decode.py``, ``llmc.py``,
``megatron.py`` (the foreign layouts).
Units: positions, starts and lengths are in tokens; ends are exclusive.
"""

from __future__ import annotations

from . import registry
from .decode import NO_PLAN_WINDOW, SHOW_TOKENS
from .figures import PLAN_BLOCK, PlanFigures, Prepared, coverage_stats, plan_figures, prepare_plan
from .files import WIDE_MIN, WIDE_SAMPLE, wider_ids_share
from .options import DEFAULT_MAX_LEAKAGE, DEFAULT_MIN_COVERAGE, DEFAULT_SHOW, VerifyOptions
from .plan import ALIGN_CELLS, ALIGN_SAMPLE, MATERIALIZED_CELLS, training_pair
from .registry import CHECK_NAMES, CHECKS, CheckSpec
from .report import Check, Report, Status, Window, percent
from .run import verify, verify_with
from .scan import FileScan, Progress, scan_file, scan_logical
from .shingles import MAX_SHINGLES, SHINGLE_K, anchor_starts, hash_at, sampling_bits, shingle_hashes

__doc__ = __doc__.format(check_names=registry.doc_list())

__all__ = [
    "ALIGN_CELLS", "ALIGN_SAMPLE", "CHECKS", "CHECK_NAMES", "Check", "CheckSpec", "DEFAULT_MAX_LEAKAGE",
    "DEFAULT_MIN_COVERAGE", "DEFAULT_SHOW", "FileScan", "MATERIALIZED_CELLS", "MAX_SHINGLES", "NO_PLAN_WINDOW",
    "PLAN_BLOCK", "PlanFigures", "Prepared", "Progress", "Report", "SHINGLE_K", "SHOW_TOKENS", "Status",
    "VerifyOptions", "WIDE_MIN", "WIDE_SAMPLE", "Window", "anchor_starts", "coverage_stats", "hash_at", "percent",
    "plan_figures", "prepare_plan", "registry", "sampling_bits", "scan_file", "scan_logical", "shingle_hashes",
    "training_pair", "verify", "verify_with", "wider_ids_share",
]
