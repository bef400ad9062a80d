"""The checks verify runs: each one's stable name, a one-line help text, what it reads, and the
function that adds its lines to the report.

This is the one list of check names: ``CHECK_NAMES``, ``winsample verify --help`` (and so
docs/cli.md) and the package docstring are generated from it, and the report's lines are added
under its ``CheckSpec`` s (``report.add(spec, ...)``), never under a free string.

Adding a check is one decorated function, in the module whose inputs it reads::

    @check("my_check", help="one line for --help", reads="token files", stage="file")
    def my_check(report, ctx, target, scan):
        report.add(my_check.spec, scan.label, Status.PASS, "what was found")

It is listed after the checks registered before it and runs last in its stage. The stages, in
the order ``run.py`` runs them, and the arguments each function takes:

- ``file``: ``fn(report, ctx, target, scan)``, once per whole-token file (its ``scan.Target`` and
  its one ``scan.FileScan``), after every file is scanned;
- ``dataset``: ``fn(report, ctx)``, once, after the file stage (``ctx``: ``context.Dataset``,
  its tokenizer, meta.json, every scan, the options as ``ctx.opts``);
- ``plan``: ``fn(report, ctx, plan)``, once per ``--plan`` that was placed on its token file
  (``plan.Plan``), and once per source plan of a mixture (with its own token file's ``ctx``);
- ``mixture``: ``fn(report, opts, mix)``, once per mixture plan (``mixture.Mixture``), in place
  of the plan stage; a mixture is checked with or without a data folder, so its checks take the
  options (``VerifyOptions``), not a dataset;
- ``final``: ``fn(report, ctx)``, once, after the plans (``ctx.first_plan``: the first one).

llm.c shards named on their own (``llmc.verify_llmc``) have their own file checks and run only
the ``plan`` and ``final`` stages.

A function may add lines for several checks (the plan checks share one pass, the llm.c checks
one scan): the other names are declared with ``define`` beside it. ``runs_before`` puts a
function before another of its stage (the report's order, which the golden test records).
``unregister`` takes a check out again (for tests).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

STAGES = ("file", "dataset", "plan", "mixture", "final")


@dataclass(frozen=True)
class CheckSpec:
    """A registered check. ``name`` is stable: scripts match on it in the JSON report. ``stage``
    and ``run``: the stage function that adds its lines (None: a group owner's function does)."""

    name: str
    help: str  # one line, for --help and the docs
    reads: str  # what it reads
    stage: str | None = None
    run: Callable | None = field(default=None, compare=False, repr=False)

    def __str__(self) -> str:
        return self.name


_REGISTRY: dict[str, CheckSpec] = {}  # in the order they are listed
_RUNS: dict[str, list[str]] = {s: [] for s in STAGES}  # each stage's checks with a function, in run order


def define(name: str, help: str, reads: str) -> CheckSpec:
    """Register a check whose lines another check's function adds (a group: plan, llm.c);
    its position in ``CHECK_NAMES`` is the order of registration."""
    return _add(CheckSpec(name, help, reads))


def _add(spec: CheckSpec) -> CheckSpec:
    if spec.name in _REGISTRY:
        raise ValueError(f"check {spec.name!r} is registered twice")
    _REGISTRY[spec.name] = spec
    return spec


def check(name: str, *, help: str, reads: str, stage: str, runs_before: str | None = None):
    """Decorator: register the check ``name`` and the function of ``stage`` that adds its lines
    (its signature: the module docstring). The function is returned as is, with ``.spec``."""
    if stage not in STAGES:
        raise ValueError(f"check {name!r}: stage {stage!r} is not one of {', '.join(STAGES)}")
    if runs_before is not None and runs_before not in _RUNS[stage]:
        raise ValueError(f"check {name!r}: runs_before {runs_before!r} is no {stage} check")

    def register(fn: Callable) -> Callable:
        spec = _add(CheckSpec(name, help, reads, stage, fn))
        runs = _RUNS[stage]
        runs.insert(runs.index(runs_before) if runs_before is not None else len(runs), name)
        fn.spec = spec
        return fn

    return register


def unregister(name: str) -> None:
    """Take the check ``name`` (and its function) out of the registry."""
    spec = _REGISTRY.pop(name)
    if spec.stage is not None:
        _RUNS[spec.stage].remove(name)


def run_stage(stage: str, report, ctx, *args) -> None:
    """Run every function of ``stage``, in order, on ``(report, ctx, *args)``."""
    for name in tuple(_RUNS[stage]):
        _REGISTRY[name].run(report, ctx, *args)


def runs(stage: str) -> tuple[str, ...]:
    """The checks of ``stage`` that have a function, in the order they run."""
    return tuple(_RUNS[stage])


def checks() -> tuple[CheckSpec, ...]:
    """Every registered check, in the order they are listed."""
    return tuple(_REGISTRY.values())


def __getattr__(attr: str):
    """``CHECKS`` and ``CHECK_NAMES``: the registry as it is now."""
    if attr == "CHECKS":
        return checks()
    if attr == "CHECK_NAMES":
        return tuple(_REGISTRY)
    raise AttributeError(f"module {__name__!r} has no attribute {attr!r}")


def get(name: str) -> CheckSpec:
    """The registered check called ``name`` (KeyError if none)."""
    return _REGISTRY[name]


def help_lines(width: int = 17) -> list[str]:
    """One line per check, ``name  help``: the list ``winsample verify --help`` shows."""
    return [f"{c.name:<{width}}{c.help}" for c in checks()]


def doc_list() -> str:
    """The check names as the package docstring lists them."""
    return ", ".join(_REGISTRY)
