"""The plan stage: each --plan placed on its token file (``check_plans``, ``open_plan``), and the
checks of its figures, from one pass over its rows: plan_bounds, min_length, order, duplicates
and coverage (``plan_bounds`` adds their lines). The checks that read its windows' tokens,
alignment and materialized, are in ``plan_windows.py``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import formats
from ..errors import DataError, WinsampleError
from ..planning.boundaries import sorted_unique
from .figures import PlanFigures, Prepared, coverage_in_order, int_param, plan_figures, plan_file
from .files import MIN_LENGTH
from .registry import check, define, run_stage
from .report import Report, Status, percent
from .scan import FileScan


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
    plan_path: Path | None = None  # the plan file
    got: Prepared | None = None  # its rows and sidecar as read (with the helper thread's figures)


def check_plans(report: Report, ctx) -> None:
    """Each of ``ctx.opts.plans`` in the order given: placed on its token file, then every check of
    the plan stage (a mixture: ``mixture.check_mixture``, its sources against their own token
    files); ``ctx.first_plan``: the first one placed (decode shows it)."""
    for p in ctx.opts.plans:
        got = load_plan_once(Path(p), ctx.prepared.get(Path(p)))
        if isinstance(got, Prepared) and got.side.mixture:
            from .mixture import check_mixture  # imported here: its checks are listed after this module's

            mix = check_mixture(report, ctx.opts, Path(p), got)
            ctx.first_plan = ctx.first_plan if ctx.first_plan is not None else mix
            continue
        plan = _locate(report, Path(p), got, ctx.path, ctx.folder, ctx.scans)
        if plan is None:
            continue
        if ctx.first_plan is None:
            ctx.first_plan = plan
        run_stage("plan", report, ctx, plan)


def open_plan(report: Report, ctx, plan_path: Path) -> Plan | None:
    """The plan with the scan of its token file, or None after a plan_bounds line saying why not."""
    got = load_plan_once(plan_path, ctx.prepared.get(plan_path))
    return _locate(report, plan_path, got, ctx.path, ctx.folder, ctx.scans)


@check("plan_bounds", help="windows (best-fit: segments) lie inside the token file the sidecar names",
       reads="plans, sidecars, token files", stage="plan")
def plan_bounds(report: Report, ctx, plan: Plan) -> None:
    """plan_bounds, then the other checks of the plan's figures: min_length, order, duplicates, coverage.
    A best-fit plan's rows are segments: ``packed.check_packed`` reports its lines instead."""
    if plan.side.best_fit:
        from .packed import check_packed  # imported here: its checks are listed after this module's

        check_packed(report, ctx, plan)
        return
    got, n = plan.got, plan.scan.n
    fig = got.figures if got.figures is not None and got.n == n else plan_figures(plan.rows, n, plan.span)
    _check_bounds(report, plan, got, fig, ctx.targets)
    if plan.span is not None:  # min_length: N ≥ span (T + 1 with targets, T without)
        status = Status.PASS if n >= plan.span else Status.FAIL
        what = f"T + 1 = {plan.span}" if plan.targets else f"span = {plan.span} (no targets)"
        report.add(MIN_LENGTH, plan.label, status, f"N = {n} {'≥' if status == Status.PASS else '<'} {what}",
                   tokens=n, required=plan.span)
    _check_order(report, plan, fig)
    columns = _check_duplicates(report, plan, fig)
    check_coverage(report, plan.label, len(plan.rows), n, plan.side, ctx.opts.min_coverage, _coverage(plan, fig, columns),
                    _target_docs(plan, fig))


PLAN_BOUNDS = plan_bounds.spec
ORDER = define("order", "starts never decrease (best-fit: by window, then start) or a seeded shuffle", "plans, sidecars")
DUPLICATES = define("duplicates", "no two windows of a plan are identical (best-fit: no token in two segments)", "plans")
COVERAGE = define("coverage", "share of tokens inside at least one window ≥ --min-coverage", "plans, sidecars")


def load_plan_once(plan_path: Path, prepared=None) -> Prepared | DataError:
    """The plan as the helper thread prepared it (``prepared``: its future), else read now (a
    DataError when it does not read)."""
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
    if scan is None and folder is None and side.source.file:  # PATH holds several streams (llm.c groups): the plan's own
        named = [k for k in scans if k.name == side.source.file]
        if len(named) != 1 and side.source.checksum:  # another glob of the same stream ('train_0*.bin'): by its checksum
            named = [k for k, sc in scans.items() if getattr(sc, "checksum", None) == side.source.checksum]
        if len(named) == 1:
            file_path, scan = named[0], scans[named[0]]
    if scan is None:
        report.add(PLAN_BOUNDS, label, Status.FAIL, f"plan is for {side.source.file!r}, which is not in {folder or path}")
        return None
    if scan.stray:
        report.add(PLAN_BOUNDS, label, Status.SKIP, f"{scan.label} is not whole tokens (see dtype_divisible)")
        return None
    params = side.params
    return Plan(label, got.rows, side, scan, file_path, int_param(params, "span"), int_param(params, "T"),
                params.targets, plan_path, got)


def _check_bounds(report: Report, plan: Plan, got: Prepared, fig: PlanFigures, targets) -> None:
    """plan_bounds: made for this file, a sidecar whose parameters fit each other, every window inside [0, N)."""
    rows, side, scan, span, n = plan.rows, plan.side, plan.scan, plan.span, plan.scan.n
    params = side.params
    problems = source_problems(plan, targets)
    if span is None or span < 1:
        problems.append(f"sidecar params.span is {params.span!r}, not a positive integer")
    problems += param_problems(params, side, rows, span, plan.T, plan.targets)
    nwin = int_param(side.stats, "windows")
    if nwin is not None and nwin != len(rows):
        problems.append(f"sidecar stats.windows {nwin} but the plan has {len(rows)} rows")
    problems += rows_checksum_problems(got, rows)
    if fig.bad:
        problems.append(_first_out_of_bounds(rows, fig, n, span))
    figs = {"windows": len(rows), "tokens": n, "span": span, "bad_windows": fig.bad}
    if problems:
        report.add(PLAN_BOUNDS, plan.label, Status.FAIL, "; ".join(problems), **figs)
    else:
        unsummed = "" if side.rows_checksum else " (no rows_checksum: written before winsample kept one, so edited rows would not show)"
        report.add(PLAN_BOUNDS, plan.label, Status.PASS, f"{len(rows)} windows inside [0, {n}), lengths ≤ span {span}; made for"
                   f" {scan.label}{unsummed}", **figs)


def rows_checksum_problems(got: Prepared, rows: np.ndarray) -> list[str]:
    """Why the rows are not the ones windows wrote (the sidecar's ``rows_checksum``), or nothing."""
    side = got.side
    if side.rows_checksum is None:
        return []
    have = got.rows_checksum or formats.rows_checksum(rows)
    if have == side.rows_checksum:
        return []
    return [f"the rows are not the ones windows wrote: the sidecar's rows_checksum is {side.rows_checksum},"
            f" the rows' {have} (a row was edited, added, removed or reordered)"]


def source_problems(plan: Plan, targets) -> list[str]:
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
        bare = next((t.entry is None and t.src is not None and t.src.layout is None for t in targets if t.path == plan.path), False)
        problems.append(f"sidecar dtype {src.dtype!r} but {scan.label} is read as {scan.dtype}"
                        + (f" (no meta.json says its width: pass --dtype {formats.dtype_name(src.dtype)})" if bare else ""))
    # the tokenizer a plan records is what the Loader pads with (eot) and decodes by: it must be the data's
    described = next((t.src.tokenizer_entry for t in targets if t.path == plan.path and t.src is not None), None)
    mine, theirs = formats.tokenizer_identity(plan.side.tokenizer), formats.tokenizer_identity(described)
    if plan.side.tokenizer is not None and described is not None and mine != theirs:
        diff = ", ".join(f"{k} {mine.get(k)!r} (meta.json: {theirs.get(k)!r})" for k in sorted(set(mine) | set(theirs))
                         if mine.get(k) != theirs.get(k))
        problems.append(f"the sidecar's tokenizer is not meta.json's: {diff}")
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


def param_problems(params: formats.PlanParams, side, rows, span, T, targets_flag) -> list[str]:
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


def _same_dtype(a, b) -> bool | None:
    try:
        return formats.normalize_dtype(a) == formats.normalize_dtype(b)
    except (WinsampleError, TypeError):
        return False


def check_coverage(report, label, nrows: int, n, side, min_coverage, c: dict | None, target_docs: int = 0) -> None:
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
