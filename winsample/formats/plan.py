"""Window plans: PLAN_DTYPE rows, the typed sidecar (PlanSidecar), and their atomic writer and reader."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..disk.atomic import TMP_SUFFIX, atomic_paths, dump_json
from ..disk.checksums import format_checksum, new_hasher
from ..disk.names import glob_escape
from ..disk.staging import COMMIT_MARK, STAGING_DIR, read_commit_mark, roll_forward
from ..errors import ConfigError, DataError, WinsampleError
from .meta import check_version
from .names import materialized_path, plan_family, plan_sidecar
from .npy import load_npy
from .schema import extra_keys, get_dtype, get_int, get_name, get_obj, get_str, read_json, schema_error

PLAN_FORMAT = "winsample-plan"
PLAN_VERSION = 3  # 2: best-fit packed plans (segment rows); 3: mixtures; every other plan is still written as 1
PACKED_VERSION = 2
MIXTURE_VERSION = 3

PLAN_DTYPE = np.dtype([("start", "<i8"), ("length", "<i4"), ("doc", "<i8"), ("fresh", "<i4")])
# a best-fit packed plan: one row per segment (a document or a piece of one), sorted by window
PACKED_DTYPE = np.dtype([("window", "<i8"), ("start", "<i8"), ("length", "<i4"), ("doc", "<i8")])
# a mixture: one row per source plan (the sidecar's ``sources``, in order): its windows, the
# windows it serves per epoch, and the tokens its windows span (one pass over its plan)
MIXTURE_DTYPE = np.dtype([("windows", "<i8"), ("count", "<i8"), ("tokens", "<i8")])
MAX_SPAN = (1 << 31) - 1  # a window's length is an int32 in the rows: params.T, span and stride at most this


def plan_staging_dir(plan_path: str | Path) -> Path:
    """A fresh, empty folder beside ``plan_path`` to write one ``windows`` run's files into.

    Named after the plan (``.PLAN.npy.winsample-staging``), so runs writing different plans
    into one folder do not share it; what an interrupted run left there is finished or
    discarded first (``recover_plan``).
    """
    recover_plan(plan_path)
    stage = plan_stage_path(plan_path)
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir(parents=True)
    return stage


def plan_stage_path(plan_path: str | Path) -> Path:
    """The staging folder a run writing ``plan_path`` commits from (``.PLAN.npy.winsample-staging``)."""
    p = Path(plan_path)
    return p.parent / f".{p.name}{STAGING_DIR}"


def recover_plan(plan_path: str | Path) -> str | None:
    """``recover`` for the files of one plan: roll a committed stage forward or drop it,
    and remove stale ``*.tmp`` files of the plan's own names (all scales and shards)."""
    p = Path(plan_path)
    stage = plan_stage_path(p)
    result = None
    if stage.is_dir():
        mark = stage / COMMIT_MARK
        if mark.exists():
            roll_forward(stage, p.parent, *read_commit_mark(mark))
            result = "rolled forward"
        else:
            shutil.rmtree(stage, ignore_errors=True)
            result = "cleaned"
    stem = p.name[:-4] if p.name.endswith(".npy") else p.name
    if p.parent.is_dir():
        for tmp in p.parent.glob(f".{glob_escape(stem)}.*{TMP_SUFFIX}"):
            tmp.unlink(missing_ok=True)
    return result


# --- window plans -----------------------------------------------------------------------


@dataclass
class PlanSource:
    """``source`` of a plan sidecar: the token file the plan was made for."""

    file: str | None = None  # its name (a plain name: a plan applies to a file of its data folder)
    path: str | None = None  # as given to ``windows``
    bytes: int | None = None
    checksum: str | None = None
    dtype: str | None = None
    tokens: int | None = None
    sample: str | None = None  # disk.sample_checksum of the token file: what the Loader compares, cheaply
    from_plan: str | None = None  # its path relative to the plan's folder when written: found from any working folder
    extra: dict = field(default_factory=dict)

    KEYS = ("path", "file", "bytes", "checksum", "dtype", "tokens", "sample", "from_plan")

    @classmethod
    def from_json(cls, obj: dict, where: str) -> PlanSource:
        return cls(
            file=get_name(obj, "file", where, "source", required=False, nullable=True),
            path=get_str(obj, "path", where, "source", required=False, nullable=True),
            bytes=get_int(obj, "bytes", where, "source", required=False),
            checksum=get_str(obj, "checksum", where, "source", required=False, nullable=True),
            dtype=get_dtype(obj, "dtype", where, "source", required=False),
            tokens=get_int(obj, "tokens", where, "source", required=False),
            sample=get_str(obj, "sample", where, "source", required=False, nullable=True),
            from_plan=get_str(obj, "from_plan", where, "source", required=False, nullable=True),
            extra=extra_keys(obj, cls.KEYS),
        )

    def to_json(self) -> dict:
        out = {k: getattr(self, k) for k in self.KEYS if getattr(self, k) is not None}
        out.update(self.extra)
        return out


class _Fields:
    """A sidecar object whose known keys are attributes (a key it lacks reads as the field's
    default) and whose JSON is written back key for key, in the order it was read or built.

    Values are kept as written, not coerced: ``verify`` reports a tampered value (``targets:
    "yes"``) as a failing check, which it could not if reading refused it."""

    KEYS: tuple[str, ...] = ()

    def __init__(self, values: dict | None = None, **fields):
        values = dict(values or {}, **fields)
        object.__setattr__(self, "keys", tuple(values))  # present keys, in order
        object.__setattr__(self, "extra", {k: v for k, v in values.items() if k not in self.KEYS})
        for k in self.KEYS:
            object.__setattr__(self, k, values.get(k, self.DEFAULTS.get(k)))

    DEFAULTS: dict = {}

    def __setattr__(self, name, value):
        raise AttributeError(f"{type(self).__name__} is read-only: use replace()")

    def __contains__(self, key: str) -> bool:
        return key in self.keys

    def __eq__(self, other) -> bool:
        return type(other) is type(self) and other.to_json() == self.to_json()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.to_json()!r})"

    def replace(self, **changes):
        """A copy with ``changes`` (a key not there yet is added at the end)."""
        return type(self)(dict(self.to_json(), **changes))

    def to_json(self) -> dict:
        return {k: (getattr(self, k) if k in self.KEYS else self.extra[k]) for k in self.keys}


class PlanParams(_Fields):
    """``params`` of a plan sidecar: how ``windows`` cut the plan (``formats`` docstring).

    ``T``/``span``/``stride`` are validated positive integers where present; the others are
    windows' option values. A plan written before a key existed reads that key's default."""

    KEYS = ("T", "targets", "span", "stride", "overlap", "offset", "random_offset", "seed", "epoch", "tail", "short",
            "boundaries", "pack", "long", "shuffle", "shard", "shards", "shard_method", "mixture", "max_repeats")
    DEFAULTS = {"targets": True, "random_offset": False, "pack": False, "shuffle": False}
    T: int | None
    targets: bool
    span: int | None
    stride: int | None
    overlap: float | None
    offset: int | None
    random_offset: bool
    seed: int | None
    epoch: int | None
    tail: str | None
    short: str | None
    boundaries: str | None
    pack: bool | str  # false; true: greedy (in file order); "best-fit": a segment plan (PACKED_DTYPE rows)
    long: str | None  # best-fit: split, truncate or drop (what happened to documents longer than the span)
    shuffle: bool
    shard: int | None
    shards: int | None
    shard_method: str | None
    mixture: dict | None  # a mixture's epoch rule: {"rule": "windows", "windows": N}, {"rule": "epoch-of", "source": NAME}
    # or {"rule": "first-exhausted"} (``mix``; a mixture's ``seed`` is ``mix --seed``)
    max_repeats: int | None  # a mixture: ``mix --max-repeats`` (null: none given)


class PlanStats(_Fields):
    """``stats`` (and ``plan_stats``) of a plan sidecar: its figures, all in tokens but
    ``windows`` and ``coverage`` (the share of tokens inside at least one window)."""

    KEYS = ("windows", "coverage", "covered_tokens", "uncovered_tokens", "uncovered_tail", "uncovered_head",
            "uncovered_dropped", "documents", "segments", "fill", "padding_tokens", "documents_split",
            "documents_truncated", "documents_dropped")
    windows: int | None
    coverage: float | None
    covered_tokens: int | None
    uncovered_tokens: int | None
    uncovered_tail: int | None
    uncovered_head: int | None
    uncovered_dropped: int | None
    documents: int | None
    segments: int | None  # best-fit plans: rows (documents and pieces of documents)
    fill: float | None  # packed plans: planned tokens / (windows × span)
    padding_tokens: int | None  # windows × span − planned tokens
    documents_split: int | None  # best-fit: documents longer than the span, by what --long did to them
    documents_truncated: int | None
    documents_dropped: int | None


_SIDECAR_KEYS = ("format", "version", "source", "params", "stats", "plan_stats", "tokenizer", "materialized", "sources",
                 "rows_checksum", "output")


@dataclass
class MixtureSource:
    """One entry of a mixture sidecar's ``sources``: a window plan and its share.

    ``plan``: the plan's path relative to the mixture plan's folder (as ``mix`` wrote it);
    ``rows_checksum``: that plan's own ``rows_checksum`` when the mixture was made (an edited
    or re-planned source is caught); ``tokens_checksum``: its token file's (a plan re-made over
    another dataset of the same length has the same rows, not the same tokens); ``weight``: as given (a decimal string or a number)."""

    name: str
    plan: str
    weight: Any
    rows_checksum: str | None = None
    tokens_checksum: str | None = None  # the source plan's source.checksum: its token file, when mixed
    extra: dict = field(default_factory=dict)

    KEYS = ("name", "plan", "weight", "rows_checksum", "tokens_checksum")

    @classmethod
    def from_json(cls, obj: Any, where: str, i: int) -> MixtureSource:
        if not isinstance(obj, dict):
            schema_error(where, f"sources[{i}] is not a JSON object")
        name = get_str(obj, "name", where, f"sources[{i}]")
        plan = get_str(obj, "plan", where, f"sources[{i}]")
        if not name or not plan or "\x00" in plan:
            schema_error(where, f"sources[{i}]: a source needs a name and a plan path")
        w = obj.get("weight")
        if isinstance(w, bool) or not isinstance(w, (int, float, str)):
            schema_error(where, f"sources[{i}].weight is not a number")
        return cls(name=name, plan=plan, weight=w,
                   tokens_checksum=get_str(obj, "tokens_checksum", where, f"sources[{i}]", required=False, nullable=True),
                   rows_checksum=get_str(obj, "rows_checksum", where, f"sources[{i}]",
                                                                            required=False, nullable=True),
                   extra=extra_keys(obj, cls.KEYS))

    def to_json(self) -> dict:
        out = {k: getattr(self, k) for k in self.KEYS if getattr(self, k) is not None}
        out.update(self.extra)
        return out

    def path_in(self, folder: Path) -> Path:
        """The source plan of a mixture plan that lies in ``folder``."""
        return Path(folder) / self.plan

    def missing(self, folder: Path) -> str | None:
        """Why the source plan is not in ``folder`` (a mixture moved without its sources), or None."""
        path = self.path_in(folder)
        if os.path.lexists(path):
            return None
        return f"{path}: no such plan (the mixture names {self.plan!r}, relative to its own folder, {os.path.abspath(folder)})"


@dataclass
class PlanSidecar:
    """``PLAN.npy.json``: what a plan was made from and with (schema in this module's docstring).

    ``params`` and ``stats`` are windows' own figures (params.span and params.T, when present,
    are positive integers); ``materialized.file`` is a plain name beside the plan.
    """

    def __post_init__(self):  # built from dicts (windows, tests): typed from here on
        if isinstance(self.params, dict):
            self.params = PlanParams(self.params)
        if isinstance(self.stats, dict):
            self.stats = PlanStats(self.stats)
        if isinstance(self.plan_stats, dict):
            self.plan_stats = PlanStats(self.plan_stats)

    source: PlanSource = field(default_factory=PlanSource)
    params: PlanParams = field(default_factory=PlanParams)
    stats: PlanStats = field(default_factory=PlanStats)
    plan_stats: PlanStats | None = None  # a shard of a plan: the whole plan's stats (``stats`` are the shard's)
    tokenizer: dict | None = None
    materialized: dict | None = None
    rows_checksum: str | None = None  # xxh3-128 of the rows as write_plan saved them; None: a plan from before it was kept
    sources: list[MixtureSource] | None = None  # a mixture: its source plans, in row order
    version: int = 1  # write_plan writes PACKED_VERSION for a segment plan, MIXTURE_VERSION for a mixture, 1 for every other
    output: str | None = None  # the -o name of the windows run that wrote the file (``stale_family``); None: not recorded
    extra: dict = field(default_factory=dict)
    has_source: bool = field(default=True, repr=False, compare=False)

    @property
    def windows(self) -> int | None:
        """The window count the sidecar records (``stats.windows``), None if it records none."""
        return self.stats.windows

    @property
    def n_vocab(self) -> int | None:
        """The vocabulary size of the tokenizer the sidecar records, None without one."""
        return (self.tokenizer or {}).get("n_vocab")

    @property
    def T(self) -> int | None:
        return self.params.T

    @property
    def span(self) -> int | None:
        return self.params.span

    @property
    def targets(self) -> bool:
        """Windows carry next-token targets (``params.targets``; true when not recorded)."""
        return bool(self.params.targets)

    @property
    def mixture(self) -> bool:
        """A mixture of plans: rows are its sources (``MIXTURE_DTYPE``), ``sources`` names them."""
        return self.sources is not None

    @property
    def best_fit(self) -> bool:
        """A best-fit packed plan: rows are segments (``PACKED_DTYPE``), several per window."""
        return self.params.pack == "best-fit"

    @classmethod
    def from_json(cls, obj: Any, where: str) -> PlanSidecar:
        if not isinstance(obj, dict) or obj.get("format") != PLAN_FORMAT:
            schema_error(where, "not a winsample plan sidecar")
        version = check_version(obj, where, PLAN_VERSION, "plan")
        src = get_obj(obj, "source", where, "")
        params = get_obj(obj, "params", where, "") or {}
        if params.get("pack") == "best-fit" and version < PACKED_VERSION:
            schema_error(where, f"params.pack 'best-fit' needs plan version {PACKED_VERSION}, the file says {version}")
        for key in ("T", "span", "stride"):  # a window's length is an int32 in the rows
            if key in params and params[key] is not None:
                get_int(params, key, where, "params", lo=1, hi=MAX_SPAN)
        T, span = params.get("T"), params.get("span")
        if T is not None and span is not None:  # windows writes span = T + 1 with targets, T without
            targets = bool(params.get("targets", True))  # PlanSidecar.targets' rule
            if span != T + targets:
                schema_error(where, f"params.span {span} but T {T} with targets {json_name(targets)} spans {T + targets}")
        for key in ("seed", "epoch"):  # the draws of a seeded plan are re-made from them (the Loader, verify)
            if params.get(key) is not None:
                get_int(params, key, where, "params", lo=None)
        if params.get("random_offset") is True and params.get("seed") is None:  # the Loader re-plans each epoch from it
            schema_error(where, "params.random_offset is true but params.seed is missing (its draws come from the seed)")
        for key, allowed in (("tail", ("align", "short", "drop")), ("pack", (False, True, "best-fit")),
                             ("long", ("split", "truncate", "drop"))):  # the values windows writes, and only those
            v = params.get(key)
            if v is not None and not any(v is a if isinstance(a, bool) else (v == a and not isinstance(v, bool)) for a in allowed):
                schema_error(where, f"params.{key} is {v!r}, not one of {', '.join(map(json_name, allowed))}")
        stats = get_obj(obj, "stats", where, "") or {}
        if "windows" in stats:
            get_int(stats, "windows", where, "stats")
        plan_stats = get_obj(obj, "plan_stats", where, "")
        tok = get_obj(obj, "tokenizer", where, "")
        if tok is not None:  # the Loader pads with the EOT: an id the model has, or none
            n_vocab = get_int(tok, "n_vocab", where, "tokenizer", lo=1, hi=1 << 32, required=False, nullable=True)
            get_int(tok, "eot", where, "tokenizer", lo=0, hi=(n_vocab or 1 << 32) - 1, required=False, nullable=True)
        mat = get_obj(obj, "materialized", where, "")
        if mat is not None:
            get_name(mat, "file", where, "materialized")
            get_dtype(mat, "dtype", where, "materialized", required=False)
        rows_sum = get_str(obj, "rows_checksum", where, "", required=False)
        output = get_name(obj, "output", where, "", required=False)
        sources = obj.get("sources")
        if sources is not None:
            if version < MIXTURE_VERSION:
                schema_error(where, f"sources (a mixture) needs plan version {MIXTURE_VERSION}, the file says {version}")
            if not isinstance(sources, list) or not sources:
                schema_error(where, "sources is not a non-empty JSON list")
            sources = [MixtureSource.from_json(x, where, i) for i, x in enumerate(sources)]
        return cls(sources=sources, source=PlanSource.from_json(src or {}, where), params=PlanParams(params), stats=PlanStats(stats),
                   plan_stats=PlanStats(plan_stats) if plan_stats is not None else None, tokenizer=tok,
                   materialized=mat, rows_checksum=rows_sum, version=version, output=output, extra=extra_keys(obj, _SIDECAR_KEYS),
                   has_source=src is not None)

    def to_json(self) -> dict:
        out: dict = {"format": PLAN_FORMAT, "version": self.version}
        if self.has_source:
            out["source"] = self.source.to_json()
        out.update(params=self.params.to_json(), stats=self.stats.to_json())
        if self.plan_stats is not None:
            out["plan_stats"] = self.plan_stats.to_json()
        if self.tokenizer is not None:
            out["tokenizer"] = self.tokenizer
        if self.materialized is not None:
            out["materialized"] = self.materialized
        if self.sources is not None:
            out["sources"] = [x.to_json() for x in self.sources]
        if self.rows_checksum is not None:
            out["rows_checksum"] = self.rows_checksum
        if self.output is not None:
            out["output"] = self.output
        out.update(self.extra)
        return out


def json_name(v) -> str:
    return "true" if v is True else "false" if v is False else str(v)


def rows_dtype(packed: bool | str) -> np.dtype:
    """The rows' dtype: ``PACKED_DTYPE`` (segments) for a best-fit plan (``packed`` true),
    ``MIXTURE_DTYPE`` for a mixture (``packed == "mixture"``), else ``PLAN_DTYPE``."""
    if packed == "mixture":
        return MIXTURE_DTYPE
    return PACKED_DTYPE if packed else PLAN_DTYPE


def _kind(rows: np.ndarray) -> bool | str:
    names = rows.dtype.names or ()
    return "mixture" if "count" in names else "window" in names


def stale_family(plan_path: str | Path, keep: set[str]) -> tuple[list[str], list[str]]:
    """(stale, unrecorded): the names of ``plan_family(plan_path)`` not in ``keep`` that an earlier
    ``windows -o`` of this same name wrote, as their sidecars record (``output``), which a new set
    replaces; and those whose sidecar records no ``output`` (plans written before it was), which
    stay and the run names. A plan of another run whose name only looks like one of the family's
    (``-o train.T256.npy`` beside ``-o train.npy``) is in neither."""
    p = Path(plan_path)
    owners = {q.name: _recorded_output(_sidecar_of(q)) for q in plan_family(p) if q.name not in keep}
    return [n for n, o in owners.items() if o == p.name], [n for n, o in owners.items() if o is None]


def _sidecar_of(q: Path) -> Path:
    """The sidecar a file of a plan family belongs to (materialized windows: their plan's)."""
    if q.name.endswith(".json"):
        return q
    if q.name.endswith(".tokens.npy") and not os.path.lexists(plan_sidecar(q)):
        return plan_sidecar(q.with_name(q.name[: -len(".tokens.npy")] + ".npy"))
    return plan_sidecar(q)


def _recorded_output(sidecar: Path) -> str | None:
    """The ``output`` a plan sidecar records, None for anything else (missing, no plan's, not read)."""
    try:
        return PlanSidecar.from_json(read_json(sidecar, "a plan sidecar"), str(sidecar)).output
    except (WinsampleError, OSError, ValueError, RecursionError):
        return None


def write_plan(path: str | Path, plan: np.ndarray, sidecar: dict | PlanSidecar) -> None:
    """Write ``plan`` (PLAN_DTYPE rows, or PACKED_DTYPE segments) to ``path`` and its sidecar to
    ``path.json``, atomically.

    Both are written whole first, then renamed, the plan first and the sidecar last, so a plan
    without its sidecar is never current.
    The sidecar's ``rows_checksum`` is set to the rows' (``rows_checksum``): an edited row shows;
    its ``version`` is PACKED_VERSION for segments, 1 for window rows (which version 1 readers read).
    """
    packed = _kind(plan)
    plan = np.ascontiguousarray(plan, dtype=rows_dtype(packed))
    side = sidecar.to_json() if isinstance(sidecar, PlanSidecar) else {"format": PLAN_FORMAT, "version": 1, **sidecar}
    if packed:
        side["version"] = MIXTURE_VERSION if packed == "mixture" else PACKED_VERSION
    side["rows_checksum"] = rows_checksum(plan)
    # both written whole before either is renamed into place, the sidecar last: a full disk or an
    # interrupt while writing leaves the old pair, never new rows beside an old sidecar
    with atomic_paths(path, plan_sidecar(path)) as (rows_tmp, side_tmp):
        with open(rows_tmp, "wb") as f:
            np.save(f, plan)
        with open(side_tmp, "w", encoding="utf-8") as f:
            dump_json(side, f)


def rows_checksum(rows: np.ndarray) -> str:
    """xxh3-128 of plan rows as ``write_plan`` saves them (PLAN_DTYPE or PACKED_DTYPE,
    little-endian, in order)."""
    h = new_hasher()
    h.update(np.ascontiguousarray(rows, dtype=rows_dtype(_kind(rows))))
    return format_checksum(h)


def _read_plan_rows(path: Path, packed: bool | None = False) -> np.ndarray:
    """The rows, checked against ``rows_dtype(packed)`` (``None``: whichever the fields say)."""
    arr = load_npy(path, "a window plan (.npy)")
    if packed is None:
        packed = _kind(arr) if arr.dtype.names is not None else False
    want_dtype = rows_dtype(packed)
    if arr.dtype.names is not None and set(arr.dtype.names) == set(want_dtype.names) | set(arr.dtype.names) \
            and len(arr.dtype.names) > len(want_dtype.names):  # no field of ours missing, others added
        extra = [n for n in arr.dtype.names if n not in want_dtype.names]
        raise DataError(f"{path}: fields {', '.join(extra)} are not a plan's: a plan holds exactly {', '.join(want_dtype.names)}")
    if arr.dtype.names is None or any(n not in arr.dtype.names for n in want_dtype.names):
        kind = "a mixture's sources" if packed == "mixture" else "a best-fit plan's segments" if packed else "a window plan"
        raise DataError(f"{path}: not {kind}: fields {arr.dtype.names}, expected {want_dtype.names}")
    for name in want_dtype.names:
        if arr.dtype[name].kind not in "iu":
            raise DataError(f"{path}: plan field {name!r} has dtype {arr.dtype[name]}, expected an integer")
    if arr.ndim != 1:
        raise DataError(f"{path}: a plan is a 1-d array, this one has shape {arr.shape}")
    for name in want_dtype.names:  # a value the plan's own dtype cannot hold would wrap when cast
        have, want = arr.dtype[name], want_dtype[name]
        if np.can_cast(have, want, "safe") or not len(arr):
            continue
        col = arr[name]
        lim = np.iinfo(want)
        bad = (col > lim.max) | (col < lim.min) if have.kind == "i" else col > np.uint64(lim.max)
        if bad.any():
            i = int(np.argmax(bad))
            raise DataError(f"{path}: row {i}: {name} {int(col[i])} does not fit the plan's {want} (stored as {have})")
    return arr.astype(want_dtype, copy=False)


def _read_sidecar_json(path: Path) -> Any:
    side_path = plan_sidecar(path)
    if not os.path.lexists(side_path):
        raise DataError(f"{side_path}: missing sidecar of plan {path}")
    return read_json(side_path, "a plan sidecar")  # InputError (exit 2) for a FIFO, a folder, no permission


def read_sidecar(path: str | Path) -> PlanSidecar:
    """The typed sidecar of the plan ``path`` alone (its rows not read): DataError or InputError
    as ``load_plan`` gives them."""
    return PlanSidecar.from_json(_read_sidecar_json(Path(path)), str(plan_sidecar(path)))


def is_plan(path: str | Path) -> bool:
    """Whether ``path`` is a plan: a file whose sidecar (``PATH.json``) reads as a plan's."""
    p = Path(path)
    if not p.name or not p.is_file():
        return False
    try:
        read_sidecar(p)
    except (WinsampleError, OSError, ValueError, RecursionError):
        return False
    return True


def plan_owning(path: str | Path) -> Path | None:
    """The plan that ``path`` is a file of: its sidecar (``PLAN.json``) or its materialized windows
    (``materialized_path``: ``X.tokens.npy`` of ``X.npy``, ``X.tokens`` of ``X``); None otherwise."""
    p, name = Path(path), Path(path).name
    candidates = []
    if name.endswith(".json"):
        candidates.append(p.with_name(name[: -len(".json")]))
    for tail, plan_tail in ((".tokens.npy", ".npy"), (".tokens", "")):
        if name.endswith(tail) and len(name) > len(tail):
            candidates.append(p.with_name(name[: -len(tail)] + plan_tail))
    for plan in candidates:
        if (p == plan_sidecar(plan) or p == materialized_path(plan)) and is_plan(plan):
            return plan
    return None


def refuse_plan_files(outputs: list[Path]) -> None:
    """ConfigError (nothing written) when one of ``outputs`` is a file of another plan that exists
    (its sidecar or materialized windows, ``plan_owning``), or, not being one of this run's plans
    (those whose sidecar is among ``outputs``: an older plan of the name is replaced), is a plan
    itself: writing it would leave that plan unreadable, or serving the windows of another."""
    own = {str(o) for o in outputs}
    for o in map(Path, outputs):
        plan = plan_owning(o)
        if plan is not None and str(plan) not in own:
            what = "sidecar" if o == plan_sidecar(plan) else "materialized windows"
            raise ConfigError(f"-o {o}: is the {what} of the plan {plan}; writing it would break that plan:"
                              " pick another output path")
        if str(plan_sidecar(o)) not in own and is_plan(o):
            raise ConfigError(f"{o}: is a plan, which this run would write over with another file:"
                              " pick another output path")


def load_plan(path: str | Path) -> tuple[np.ndarray, PlanSidecar]:
    """(plan rows, typed sidecar) of a plan written by ``write_plan``.

    DataError if the .npy is not a plan (wrong fields or dtypes) or the sidecar is missing,
    not JSON, from a newer version or has a field of the wrong type.
    """
    path = Path(path)
    _refuse_unfinished(path)
    if not os.path.lexists(plan_sidecar(path)):
        _read_plan_rows(path, None)  # a file that is no plan at all says so before its missing sidecar
    side = PlanSidecar.from_json(_read_sidecar_json(path), str(plan_sidecar(path)))
    return _read_plan_rows(path, "mixture" if side.mixture else side.best_fit), side


def _refuse_unfinished(path: Path) -> None:
    """DataError when a ``windows`` run writing ``path`` stopped while moving its committed files in
    (some of the old plan's files are gone, some of the new one's not yet there)."""
    if (plan_stage_path(path) / COMMIT_MARK).exists():
        raise DataError(f"{path}: a windows run writing this plan stopped while moving its files in"
                        f" ({plan_stage_path(path).name} holds the rest): run that windows command again,"
                        " which finishes the move first")


def read_plan(path: str | Path) -> tuple[np.ndarray, dict]:
    """``load_plan`` with the sidecar as the plain dict (for code not yet on the dataclasses)."""
    path = Path(path)
    _refuse_unfinished(path)
    if not os.path.lexists(plan_sidecar(path)):
        _read_plan_rows(path, None)
    obj = _read_sidecar_json(path)
    side = PlanSidecar.from_json(obj, str(plan_sidecar(path)))
    return _read_plan_rows(path, "mixture" if side.mixture else side.best_fit), obj
