"""The checks of a window plan against its token file: plan_bounds, min_length, order,
duplicates, coverage, alignment and materialized."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import disk, formats
from ..errors import DataError, WinsampleError
from ..planning.boundaries import sorted_unique
from .figures import PlanFigures, Prepared, coverage_in_order, int_param, plan_figures, plan_file
from .options import DEFAULT_MIN_COVERAGE
from .registry import ALIGNMENT, COVERAGE, DUPLICATES, MATERIALIZED, MIN_LENGTH, ORDER, PLAN_BOUNDS
from .report import Report, Status, percent
from .scan import FileScan

ALIGN_SAMPLE = 256  # windows checked by `alignment` (all of them when the plan is smaller)
ALIGN_CELLS = 1 << 18  # ids of sampled windows `alignment` stacks at once (~2 MB of int64 per array)


@dataclass
class Plan:
    """A plan whose token file is known: its rows and sidecar, that file's scan, and the sidecar's
    parameters the checks read (``span``, ``T`` and ``targets`` as recorded)."""

    label: str
    rows: np.ndarray
    side: formats.PlanSidecar
    scan: FileScan
    path: Path | None = None
    span: int | None = None
    T: int | None = None
    targets: object = True  # params.targets as written (a non-bool is a plan_bounds problem)


def check_plans(report: Report, plans, path: Path, folder, scans, targets, min_coverage: float = DEFAULT_MIN_COVERAGE,
                prepared: dict | None = None) -> Plan | None:
    """Every check of each plan, in the order given; the first plan that could be checked (decode shows it)."""
    first = None
    for p in plans:
        got = check_plan(report, Path(p), path, folder, scans, targets, min_coverage, (prepared or {}).get(Path(p)))
        if got is not None and first is None:
            first = got
    return first


def check_plan(report: Report, plan_path: Path, path: Path, folder, scans, targets, min_coverage: float,
               prepared=None) -> Plan | None:
    """The checks of one plan against its token file; the Plan, or None when it cannot be read or placed."""
    got = _load(plan_path, prepared)
    plan = _locate(report, plan_path, got, path, folder, scans)
    if plan is None:
        return None
    n = plan.scan.n
    fig = got.figures if got.figures is not None and got.n == n else plan_figures(plan.rows, n, plan.span)
    _check_bounds(report, plan, got, fig, targets)
    if plan.span is not None:  # min_length: N ≥ span (T + 1 with targets, T without)
        status = Status.PASS if n >= plan.span else Status.FAIL
        what = f"T + 1 = {plan.span}" if plan.targets else f"span = {plan.span} (no targets)"
        report.add(MIN_LENGTH, plan.label, status, f"N = {n} {'≥' if status == Status.PASS else '<'} {what}",
                   tokens=n, required=plan.span)
    _check_order(report, plan, fig)
    columns = _check_duplicates(report, plan, fig)
    _check_coverage(report, plan.label, len(plan.rows), n, plan.side, min_coverage, _coverage(plan, fig, columns),
                    _target_docs(plan, fig))
    _check_alignment(report, plan, plan.T, plan.span, plan.targets)
    _check_materialized(report, plan_path, plan.label, plan.rows, plan.side, plan.scan, plan.span)
    return plan


def _load(plan_path: Path, prepared) -> Prepared | DataError:
    """The plan as the helper thread prepared it, else read now (a DataError when it does not read)."""
    got = prepared.result() if prepared is not None else None
    if got is None:
        try:
            got = Prepared(*formats.load_plan(plan_path))
        except DataError as e:
            got = e
    return got


def _locate(report: Report, plan_path: Path, got, path: Path, folder, scans) -> Plan | None:
    """The plan with the scan of the token file it applies to, or None after a plan_bounds line saying why not."""
    label = plan_path.name
    if isinstance(got, DataError):
        report.add(PLAN_BOUNDS, label, Status.FAIL, str(got))
        return None
    side = got.side
    file_path = plan_file(side, path, folder)
    if file_path is None:
        report.add(PLAN_BOUNDS, label, Status.FAIL, f"{formats.plan_sidecar(plan_path)}: sidecar names no source.file")
        return None
    scan = scans.get(file_path)
    if scan is None:
        report.add(PLAN_BOUNDS, label, Status.FAIL, f"plan is for {side.source.file!r}, which is not in {folder}")
        return None
    if scan.stray:
        report.add(PLAN_BOUNDS, label, Status.SKIP, f"{scan.label} is not whole tokens (see dtype_divisible)")
        return None
    params = side.params
    return Plan(label, got.rows, side, scan, file_path, int_param(params, "span"), int_param(params, "T"),
                params.targets)


def _check_bounds(report: Report, plan: Plan, got: Prepared, fig: PlanFigures, targets) -> None:
    """plan_bounds: made for this file, a sidecar whose parameters fit each other, every window inside [0, N)."""
    rows, side, scan, span, n = plan.rows, plan.side, plan.scan, plan.span, plan.scan.n
    params = side.params
    problems = _source_problems(plan, targets)
    if span is None or span < 1:
        problems.append(f"sidecar params.span is {params.span!r}, not a positive integer")
    problems += _param_problems(params, side, rows, span, plan.T, plan.targets)
    nwin = int_param(side.stats, "windows")
    if nwin is not None and nwin != len(rows):
        problems.append(f"sidecar stats.windows {nwin} but the plan has {len(rows)} rows")
    if side.rows_checksum is not None:
        have = got.rows_checksum or formats.rows_checksum(rows)
        if have != side.rows_checksum:
            problems.append(f"the rows are not the ones windows wrote: the sidecar's rows_checksum is {side.rows_checksum},"
                            f" the rows' {have} (a row was edited, added, removed or reordered)")
    if fig.bad:
        problems.append(_first_out_of_bounds(rows, fig, n, span))
    figs = {"windows": len(rows), "tokens": n, "span": span, "bad_windows": fig.bad}
    if problems:
        report.add(PLAN_BOUNDS, plan.label, Status.FAIL, "; ".join(problems), **figs)
    else:
        unsummed = "" if side.rows_checksum else " (no rows_checksum: written before winsample kept one, so edited rows would not show)"
        report.add(PLAN_BOUNDS, plan.label, Status.PASS, f"{len(rows)} windows inside [0, {n}), lengths ≤ span {span}; made for"
                   f" {scan.label}{unsummed}", **figs)


def _source_problems(plan: Plan, targets) -> list[str]:
    """Whether the sidecar's source (size, checksum, dtype) is the scanned file."""
    src, scan = plan.side.source, plan.scan
    problems = []
    if src.bytes != scan.size or src.checksum != scan.checksum:
        recorded = next((t.entry.checksum for t in targets if t.path == plan.path and t.entry is not None), None)
        if src.bytes == scan.size and src.checksum == recorded:  # windows copied meta.json's checksum, which is wrong
            problems.append(f"the sidecar's checksum {src.checksum} is the one meta.json records for {scan.label}, and the"
                            f" file's is {scan.checksum}: meta.json is wrong or the file changed since (see the meta check)")
        else:
            problems.append(
                f"made for another file: sidecar says {src.file!r} of {src.bytes} bytes, {src.checksum};"
                f" {scan.label} has {scan.size} bytes, {scan.checksum}"
            )
    if src.dtype is not None and _same_dtype(src.dtype, scan.dtype) is False:
        problems.append(f"sidecar dtype {src.dtype!r} but {scan.label} is read as {scan.dtype}")
    return problems


def _first_out_of_bounds(rows: np.ndarray, fig: PlanFigures, n: int, span: int | None) -> str:
    i = fig.first_bad
    si, li = int(rows["start"][i]), int(rows["length"][i])
    why = []
    if si < 0:
        why.append("start < 0")
    if li < 1:
        why.append("length < 1")
    if si + li > n:
        why.append(f"end {si + li} > N = {n}")
    if span is not None and li > span:
        why.append(f"length > span {span}")
    return f"{fig.bad} window(s) out of bounds; first: row {i} [{si}, {si + li}) ({', '.join(why)})"


def _check_order(report: Report, plan: Plan, fig: PlanFigures) -> None:
    rows, label = plan.rows, plan.label
    if plan.side.params.shuffle:
        _check_shuffle(report, label, rows, plan.side.params)
    elif fig.decreases:
        i = fig.first_decrease
        report.add(
            ORDER, label, Status.FAIL,
            f"{fig.decreases} place(s) where start decreases; first: row {i} starts at {int(rows['start'][i])} after"
            f" {int(rows['start'][i - 1])} (and the sidecar does not say shuffle)",
            decreases=fig.decreases, first_row=i,
        )
    else:
        report.add(ORDER, label, Status.PASS, "starts never decrease")


def _check_duplicates(report: Report, plan: Plan, fig: PlanFigures) -> tuple[np.ndarray, np.ndarray] | None:
    """duplicates; returns the whole-plan (start, end) columns when it built them (plans out of
    start order or with repeats), for coverage to reuse."""
    rows, columns = plan.rows, None
    if len(rows) > 1 and not fig.increasing:
        start = rows["start"].astype(np.int64)
        length = rows["length"].astype(np.int64)
        end = start + length
        columns = (start, end)
        o = np.lexsort((length, start))
        same = (np.diff(start[o]) == 0) & (np.diff(length[o]) == 0)
        dups = int(np.count_nonzero(same))
    else:
        dups = 0  # strictly increasing starts: none repeats
    if dups:
        j = int(o[int(np.argmax(same)) + 1])
        report.add(
            DUPLICATES, plan.label, Status.FAIL,
            f"{dups} duplicate window(s); e.g. row {j} repeats [{start[j]}, {end[j]})", duplicates=dups,
        )
    else:
        report.add(DUPLICATES, plan.label, Status.PASS, "no two windows are identical", duplicates=0)
    return columns


def _target_docs(plan: Plan, fig: PlanFigures) -> int:
    """With targets a window's first token is input only: the first token of each covered run and
    of each document can never be a y; more such tokens mean stride > T skipped labels."""
    if not (plan.targets and len(plan.rows)):
        return 0
    return fig.docs if fig.docs is not None else len(sorted_unique(np.sort(plan.rows["doc"])))


def _coverage(plan: Plan, fig: PlanFigures, columns) -> dict | None:
    c, n = fig.coverage, plan.scan.n
    if c is None and n:  # rows out of start order: the whole-plan path sorts them
        if columns is None:
            start = plan.rows["start"].astype(np.int64)
            columns = (start, start + plan.rows["length"].astype(np.int64))
        c = coverage_in_order(*columns, n)
    return c


def _shard_problem(params: formats.PlanParams, side, nrows: int) -> str | None:
    """Why a sidecar's claim to be one rank's shard does not hold (None: it does). A shard's
    coverage is not checked alone, so the claim must be consistent: shard r of K of a plan of W
    rows (``plan_stats.windows``) holds exactly the rows r, r + K, …"""
    k, r = params.shards, params.shard
    if k is None:
        return None if r is None else f"params.shard is {r!r} but params.shards is null"
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        return f"params.shards is {k!r}, not a positive integer"
    if k == 1:
        return None if r in (None, 0) else f"params.shard {r!r} of 1"
    if not isinstance(r, int) or isinstance(r, bool) or not 0 <= r < k:
        return f"params.shard is {r!r}, not in [0, {k})"
    whole = int_param(side.plan_stats or {}, "windows")
    if whole is None or whole < 0:
        return f"a shard of {k} without plan_stats.windows (the whole plan's count)"
    expect = len(range(r, whole, k))
    if nrows != expect:
        return f"shard {r} of {k} of a {whole}-window plan holds {expect} rows, this one {nrows}"
    return None


def _param_problems(params: formats.PlanParams, side, rows, span, T, targets_flag) -> list[str]:
    """Sidecar parameters that do not fit each other or the rows: a sidecar may not switch a
    check off by claiming what is not so (no targets, a shard, a shuffle)."""
    out = []
    if not isinstance(targets_flag, bool):
        out.append(f"params.targets is {targets_flag!r}, not true/false")
    elif T is not None and span is not None and span != T + int(targets_flag):
        out.append(f"params.span {span} but T {T} with targets {str(targets_flag).lower()} spans {T + int(targets_flag)}")
    elif T is None and params.T is not None:
        out.append(f"params.T is {params.T!r}, not an integer")
    why = _shard_problem(params, side, len(rows))
    if why:
        out.append(why)
    sh = params.shuffle
    if sh is not None and not isinstance(sh, bool):
        out.append(f"params.shuffle is {sh!r}, not true/false")
    return out


def _check_shuffle(report, label, rows, params) -> None:
    """A shuffled plan must be the seed's permutation of its rows in start order (what
    ``windows --shuffle`` writes), so a sidecar saying ``shuffle`` cannot hide rows out of order."""
    from ..planning import shuffle_rows

    seed, epoch, k = params.seed, params.epoch, params.shards
    ok_int = lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0  # noqa: E731
    if not ok_int(seed) or not ok_int(epoch):
        report.add(ORDER, label, Status.FAIL, f"params.shuffle without a usable seed/epoch ({seed!r}, {epoch!r}): cannot tell a shuffle from disorder")
        return
    if isinstance(k, int) and k > 1:
        report.add(ORDER, label, Status.SKIP, f"one of {k} shards of a shuffled plan: its order is checked with the others' rows")
        return
    o = np.lexsort((rows["length"], rows["start"]))
    if np.array_equal(shuffle_rows(rows[o], seed, epoch), rows):
        report.add(ORDER, label, Status.PASS, f"rows are the (seed {seed}, epoch {epoch}) permutation of the start order")
    else:
        report.add(ORDER, label, Status.FAIL, f"params.shuffle, but the rows are not the (seed {seed}, epoch {epoch}) permutation"
                   " of the plan in start order: the plan was reordered or edited")


MATERIALIZED_CELLS = 1 << 22  # ids of PLAN.tokens.npy compared per step: ~32 MB of int64 indexes


def _check_materialized(report, plan_path: Path, label, rows, side, scan, span) -> None:
    """PLAN.tokens.npy, when the sidecar names it or it lies beside the plan, must hold exactly
    the plan's windows: shape (rows, span), the token file's dtype, row i = tokens[start:start +
    length] then ``pad_id``. A training run reading it never sees the .bin, so nothing else
    would notice it belongs to another plan (two runs racing) or was edited."""
    mat = side.materialized
    path = formats.materialized_path(plan_path)
    if mat is None and not path.exists():
        return
    name = mat.get("file") if isinstance(mat, dict) else None
    if mat is not None and (not isinstance(mat, dict) or name != path.name):
        report.add(MATERIALIZED, label, Status.FAIL, f"sidecar materialized is {mat!r}: expected an object naming {path.name!r}")
        return
    if mat is None:
        report.add(MATERIALIZED, path.name, Status.FAIL, f"{path.name} lies beside the plan but its sidecar does not describe it")
        return
    pad = mat.get("pad_id")
    if span is None or not isinstance(pad, int) or isinstance(pad, bool):
        report.add(MATERIALIZED, path.name, Status.FAIL, f"sidecar materialized.pad_id {pad!r} / params.span {span!r}: cannot check it")
        return
    try:
        with disk.open_regular(path, "materialized windows (.npy)") as f:
            shape, fortran, dtype, offset = formats.npy_header(f, path, "materialized windows (.npy)")
    except WinsampleError as e:
        report.add(MATERIALIZED, path.name, Status.FAIL, str(e))
        return
    want = (len(rows), span)
    if tuple(shape) != want or fortran or np.dtype(dtype) != np.dtype(scan.dtype) or mat.get("shape") != list(want):
        report.add(MATERIALIZED, path.name, Status.FAIL, f"shape {tuple(shape)} of {dtype}{' (Fortran order)' if fortran else ''},"
                   f" sidecar says {mat.get('shape')!r}; the plan needs {want} of {np.dtype(scan.dtype)}")
        return
    if not len(rows) or not span:
        report.add(MATERIALIZED, path.name, Status.PASS, "empty, as the plan")
        return
    arr = np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=want)
    tokens = scan.tokens()
    n = len(tokens)
    step_rows = max(1, MATERIALIZED_CELLS // span)
    step_cols = min(span, MATERIALIZED_CELLS)
    differs = np.zeros(len(rows), bool)
    for lo in range(0, len(rows), step_rows):
        r = rows[lo : lo + step_rows]
        for c0 in range(0, span, step_cols):
            cols = np.arange(c0, min(span, c0 + step_cols), dtype=np.int64)
            idx = np.clip(r["start"].astype(np.int64)[:, None] + cols, 0, max(n - 1, 0))
            expect = np.asarray(tokens[idx]) if n else np.zeros(idx.shape, dtype)
            expect = np.where(cols < r["length"].astype(np.int64)[:, None], expect, pad)
            differs[lo : lo + len(r)] |= np.any(np.asarray(arr[lo : lo + len(r), c0 : c0 + len(cols)]) != expect, axis=1)
    bad = int(np.count_nonzero(differs))
    first = int(np.argmax(differs)) if bad else None
    del arr
    if bad:
        report.add(MATERIALIZED, path.name, Status.FAIL, f"{bad} of {len(rows)} rows differ from the plan's windows of {scan.label};"
                   f" first: row {first} (start {int(rows['start'][first])}): it belongs to another plan or was edited",
                   rows=len(rows), differing=bad)
    else:
        report.add(MATERIALIZED, path.name, Status.PASS, f"{len(rows)} rows equal the plan's windows of {scan.label} (pad {pad})",
                   rows=len(rows), differing=0)


def _same_dtype(a, b) -> bool | None:
    try:
        return formats.normalize_dtype(a) == formats.normalize_dtype(b)
    except (WinsampleError, TypeError):
        return False


def _check_coverage(report, label, nrows: int, n, side, min_coverage, c: dict | None, target_docs: int = 0) -> None:
    """``nrows``: the plan's rows; ``c``: their ``coverage_stats`` (with ``covered_shifted`` when ``target_docs``);
    ``target_docs`` > 0 for a targets plan: the number of documents it has windows in."""
    if n == 0:
        report.add(COVERAGE, label, Status.SKIP, "empty file: nothing to cover")
        return
    k = int_param(side.params, "shards")
    if k is not None and k > 1 and _shard_problem(side.params, side, nrows) is None:
        # one rank's share of a sharded plan covers about 1/K by design (the claim is checked)
        report.add(COVERAGE, label, Status.SKIP, f"shard of a plan split over {k} ranks: alone it covers {c['covered'] / n:.2%}"
                   f" of {n} tokens; check the unsharded plan for coverage", covered_tokens=c["covered"], shards=k)
        return
    total_len = c["window_tokens"]
    share = c["covered"] / n
    overlap = 1 - c["covered"] / total_len if total_len else 0.0
    depth = total_len / n
    figs = dict(
        coverage=share, min_coverage=min_coverage, covered_tokens=c["covered"], uncovered_tokens=n - c["covered"],
        largest_gap_start=c["gap_start"], largest_gap_length=c["gap_length"], uncovered_tail=c["tail"],
        uncovered_head=c["head"], overlap_ratio=overlap, windows_per_token=depth,
    )
    detail = (
        f"{percent(share)} of {n} tokens in ≥1 window ({'≥' if share >= min_coverage else '<'} {min_coverage:.0%});"
        f" largest gap {c['gap_length']} at {c['gap_start']}, tail {c['tail']} uncovered;"
        f" overlap {overlap:.1%}, {depth:.2f} windows per token"
    )
    if share < min_coverage:
        report.add(COVERAGE, label, Status.FAIL, detail, **figs)
        return
    if target_docs:
        never = c["covered"] - c["covered_shifted"]  # in a window, never a y
        bound = c.get("segments", 1) + target_docs - 1
        figs["never_target_tokens"] = never
        if never > bound:
            report.add(COVERAGE, label, Status.WARN, detail + f"; but {never} tokens inside windows are never a target"
                       f" (at most {bound} must be: the first of each covered run and document): a window's first"
                       " token is input only, so a window that starts where the previous one ends skips that label;"
                       " start each window at or before the previous end − 1 (stride ≤ T)", **figs)
            return
    said = int_param(side.stats, "covered_tokens")
    if said is not None and said != c["covered"]:
        report.add(COVERAGE, label, Status.WARN, detail + f"; but the sidecar claims {said} covered tokens", **figs)
        return
    report.add(COVERAGE, label, Status.PASS, detail, **figs)


def training_pair(tokens: np.ndarray, s: int, T: int) -> tuple[np.ndarray, np.ndarray]:
    """(x, y) as nanoGPT's get_batch builds them: tokens[s:s+T] and tokens[s+1:s+1+T], as int64."""
    return tokens[s : s + T].astype(np.int64), tokens[s + 1 : s + 1 + T].astype(np.int64)


def _check_alignment(report, plan: Plan, T: int | None, span: int | None, targets_flag) -> None:
    label = plan.label
    if not targets_flag:
        report.add(ALIGNMENT, label, Status.SKIP, "a --no-targets plan has no (x, y) pairs")
        return
    if T is None or span is None:
        report.add(ALIGNMENT, label, Status.FAIL, "sidecar lacks params.T / params.span: cannot tell the (x, y) layout")
        return
    if span != T + 1:
        report.add(ALIGNMENT, label, Status.FAIL, f"targets plan with T = {T} must span T + 1 = {T + 1} tokens; sidecar says span {span}")
        return
    rows = plan.rows
    if len(rows) == 0:
        report.add(ALIGNMENT, label, Status.SKIP, "empty plan")
        return
    tiny = np.flatnonzero(rows["length"] < 2)  # every row, not a sample: one comparison
    if len(tiny):
        r = int(tiny[0])
        report.add(ALIGNMENT, label, Status.FAIL, f"{len(tiny)} window(s) shorter than 2 tokens hold no (x, y) pair;"
                   f" first: row {r} at start {int(rows['start'][r])}, length {int(rows['length'][r])}",
                   checked=len(rows), misaligned=len(tiny))
        return
    tokens = np.asarray(plan.scan.tokens())  # a plain view: no memmap wrapping per slice
    pick = sorted_unique(np.linspace(0, len(rows) - 1, min(len(rows), ALIGN_SAMPLE)).round().astype(np.int64))
    _report_alignment(report, label, _misaligned(tokens, rows, pick, T), len(pick), len(rows), len(tokens), T)


def _misaligned(tokens: np.ndarray, rows: np.ndarray, pick: np.ndarray, T: int) -> dict[int, tuple[int, str]]:
    """The sampled rows ``pick`` whose (x, y) is not as get_batch builds it: row -> (start, what is wrong)."""
    n = len(tokens)
    why: dict[int, tuple[int, str]] = {}
    starts = rows["start"][pick].astype(np.int64)
    lengths = rows["length"][pick].astype(np.int64)
    full = (lengths >= T + 1) & (starts >= 0) & (starts <= n - T - 1)
    group = max(1, ALIGN_CELLS // T)  # windows per step: at most ALIGN_CELLS ids held at once
    rows_full, starts_full = pick[full], starts[full]
    for g in range(0, len(starts_full), group):  # the usual window, a batch at a time, stacked as get_batch stacks them
        fs = starts_full[g : g + group]
        x = np.stack([tokens[s : s + T] for s in fs.tolist()]).astype(np.int64)
        y = np.stack([tokens[s + 1 : s + 1 + T] for s in fs.tolist()]).astype(np.int64)
        # independent index arithmetic: position of x[j] is s + j, of y[j] is s + j + 1
        idx = fs[:, None] + np.arange(T, dtype=np.int64)
        ok = (x == np.take(tokens, idx)).all(1) & (y == np.take(tokens, idx + 1)).all(1) & (x[:, 1:] == y[:, :-1]).all(1)
        for r, s in zip(rows_full[g : g + group][~ok].tolist(), fs[~ok].tolist()):
            why[r] = (s, "y is not x shifted by one token")
    for r in pick[~full].tolist():  # short windows and windows past the end: one at a time
        s, L = int(rows["start"][r]), int(rows["length"][r])
        problem = _short_window_problem(tokens, s, L, T)
        if problem is not None:
            why[r] = (s, problem)
    return why


def _short_window_problem(tokens: np.ndarray, s: int, L: int, T: int) -> str | None:
    """What is wrong with the (x, y) of a window shorter than T + 1 or past the end (None: nothing)."""
    n = len(tokens)
    Tw = T if L >= T + 1 else L - 1  # a short window trains on L - 1 pairs
    if s < 0 or Tw < 1:
        return f"start {s} / length {L} gives no (x, y) pair"
    x, y = training_pair(tokens, s, Tw)
    if len(x) != Tw or len(y) != Tw:
        return f"x has {len(x)} tokens, y has {len(y)}, T = {Tw} (last legal start is N - T - 1 = {n - Tw - 1})"
    idx = s + np.arange(Tw, dtype=np.int64)
    if not (np.array_equal(x, np.take(tokens, idx)) and np.array_equal(y, np.take(tokens, idx + 1)) and np.array_equal(x[1:], y[:-1])):
        return "y is not x shifted by one token"
    return None


def _report_alignment(report, label: str, why: dict, checked: int, nrows: int, n: int, T: int) -> None:
    bad = [(r, *why[r]) for r in sorted(why)]
    if bad:
        r, s, what = bad[0]
        report.add(
            ALIGNMENT, label, Status.FAIL, f"{len(bad)} of {checked} sampled window(s) misaligned; first: row {r} at start {s}: {what}",
            checked=checked, misaligned=len(bad),
        )
    elif n < T + 1:  # only short windows: each is aligned, but no full (B, T) batch exists
        report.add(
            ALIGNMENT, label, Status.WARN,
            f"{checked} short window(s) aligned (y = x shifted by one), but N = {n} < T + 1 = {T + 1}:"
            f" no full window of T = {T}; get_batch has nothing to draw",
            checked=checked, misaligned=0,
        )
    else:
        report.add(
            ALIGNMENT, label, Status.PASS,
            f"{checked} of {nrows} windows {'(an even sample) ' if checked < nrows else ''}checked:"
            f" x = tokens[s:s+{T}], y = tokens[s+1:s+{T + 1}] (last legal start {n - T - 1})",
            checked=checked, misaligned=0,
        )
