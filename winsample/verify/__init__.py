"""Checks of token files and window plans: ``verify(path, ...) -> Report``.

The library never prints. Every problem in the data becomes a ``Check`` with status ``fail``
(or ``warn``); only a run that cannot happen at all (PATH missing, a file unreadable or not a
file, a --plot PNG that is one of the files checked, a --plan or --meta that does not exist)
raises ``InputError`` (exit 2).

Check names (stable; scripts match on them; ``registry.py`` is their one list): {check_names}.

Each check is one function, registered where it is written with ``@registry.check(name, help=,
reads=, stage=)``; ``run.py`` runs the stages (``file``, ``dataset``, ``plan``, ``final``) by
iterating the registry. Adding a check is one such function in the module whose inputs it reads
(``registry.py`` says how); it is listed, documented and run with no other edit. ``checks.py``
imports the check modules in the order their checks are listed.

Each token file is read once, in pieces over a read-only memmap (``scan.py``), shared with the
checks that read it later. A plan's own figures (bounds, order, coverage: ``figures.py``) come
from one pass over its rows in blocks, on a helper thread during the scans; the ``retokenize``
sample (``retokenize.py``) is re-encoded on another. The modules, by concern: ``report.py`` (the
report and its exit status), ``registry.py`` (the checks), ``options.py`` (``VerifyOptions``),
``run.py`` (``verify``: what to check, the stages), ``context.py`` (``Dataset``: the ``ctx`` of
every check), ``scan.py`` / ``shingles.py`` (the one pass over a file), ``files.py`` (per-file
checks), ``meta.py`` (meta, provenance), ``plan.py`` / ``figures.py`` (each plan's figures:
plan_bounds, order, duplicates, coverage), ``replan.py`` (plan_params: the rows are what windows makes with
the recorded parameters), ``packed.py`` (a best-fit plan's segments: its figures
and packing, segments, packed_stats), ``leakage.py`` (split_leakage), ``plan_windows.py``
(alignment, materialized), ``mixture.py`` (a mixture from ``mix``: mixture_sources,
mixture_counts, mixture_prefix, then each source plan against its own token file), ``decode.py``,
``recode.py`` / ``retokenize.py`` (retokenize), ``llmc.py``, ``megatron.py`` (the foreign layouts).
PATH a plan, or no PATH: the plans alone, each against the token file its sidecar names
(``run.verify_plans``).
Units: positions, starts and lengths are in tokens; ends are exclusive.
"""

from __future__ import annotations

from ..formats import WIDE_MIN, WIDE_SAMPLE, wider_ids_share
from . import checks, registry  # checks first: it imports the check modules in the order they are listed
from .decode import NO_PLAN_WINDOW, SHOW_TOKENS
from .figures import PLAN_BLOCK, PlanFigures, Prepared, coverage_stats, plan_figures, prepare_plan
from .options import DEFAULT_MAX_LEAKAGE, DEFAULT_MIN_COVERAGE, DEFAULT_SHOW, VerifyOptions
from .plan_windows import ALIGN_CELLS, ALIGN_SAMPLE, MATERIALIZED_CELLS, training_pair
from .registry import CheckSpec, check
from .report import Check, Report, Status, Window, percent
from .run import verify, verify_with
from .scan import FileScan, Progress, scan_file, scan_logical
from .shingles import MAX_SHINGLES, SHINGLE_K, anchor_starts, hash_at, sampling_bits, shingle_hashes

__doc__ = __doc__.format(check_names=registry.doc_list())



def __getattr__(attr: str):
    """``CHECKS`` and ``CHECK_NAMES``: the registry as it is now (``registry.checks()``)."""
    if attr in ("CHECKS", "CHECK_NAMES"):
        return getattr(registry, attr)
    raise AttributeError(f"module {__name__!r} has no attribute {attr!r}")


__all__ = [
    "ALIGN_CELLS", "ALIGN_SAMPLE", "CHECKS", "CHECK_NAMES", "Check", "CheckSpec", "DEFAULT_MAX_LEAKAGE",
    "DEFAULT_MIN_COVERAGE", "DEFAULT_SHOW", "FileScan", "MATERIALIZED_CELLS", "MAX_SHINGLES", "NO_PLAN_WINDOW",
    "PLAN_BLOCK", "PlanFigures", "Prepared", "Progress", "Report", "SHINGLE_K", "SHOW_TOKENS", "Status",
    "VerifyOptions", "WIDE_MIN", "WIDE_SAMPLE", "Window", "anchor_starts", "check", "coverage_stats", "hash_at", "percent",
    "plan_figures", "prepare_plan", "registry", "sampling_bits", "scan_file", "scan_logical", "shingle_hashes",
    "training_pair", "verify", "verify_with", "wider_ids_share",
]
