"""The plan checks that read its windows' tokens: alignment ((x, y) as get_batch builds them,
in a sample of windows) and materialized (PLAN.tokens.npy holds exactly the windows); and
context_length (the windows are as long as the model's input, ``-T``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .. import disk, formats
from ..errors import WinsampleError
from ..planning.boundaries import sorted_unique
from .packed import window_index
from .plan import Plan
from .registry import check
from .report import Report, Status

ALIGN_SAMPLE = 256  # windows checked by `alignment` (all of them when the plan is smaller)
ALIGN_CELLS = 1 << 18  # ids of sampled windows `alignment` stacks at once (~2 MB of int64 per array)
MATERIALIZED_CELLS = 1 << 22  # ids of PLAN.tokens.npy compared per step: ~32 MB of int64 indexes


@check("alignment", help="y is x shifted by one token in a sample of windows", reads="plans, token files", stage="plan")
def alignment(report: Report, ctx, plan: Plan) -> None:
    _check_alignment(report, plan, plan.T, plan.span, plan.targets)


@check("materialized", help="a plan's PLAN.tokens.npy holds exactly its windows", reads="plans, materialized windows",
       stage="plan")
def materialized(report: Report, ctx, plan: Plan) -> None:
    _check_materialized(report, plan.plan_path, plan.label, plan.rows, plan.side, plan.scan, plan.span)


@check("context_length", help="a plan's windows are -T tokens long, the model's input length (only with -T)", reads="plans",
       stage="plan")
def context_length(report: Report, ctx, plan: Plan) -> None:
    T = ctx.opts.T
    if T is None:  # no length of the model's given: the plan's own T is the one its windows are checked by
        return
    if plan.T is None:
        report.add(CONTEXT_LENGTH, plan.label, Status.SKIP, "the sidecar records no T (see plan_bounds)", required=T)
    elif plan.T == T:
        report.add(CONTEXT_LENGTH, plan.label, Status.PASS, f"windows of T = {T} tokens, the model's input length (-T)", T=T)
    else:
        report.add(CONTEXT_LENGTH, plan.label, Status.FAIL, f"the plan's windows are T = {plan.T} tokens, but the model takes"
                   f" -T {T}: plan again with -T {T}, or give the model's own length", T=plan.T, required=T)


ALIGNMENT, MATERIALIZED, CONTEXT_LENGTH = alignment.spec, materialized.spec, context_length.spec


def _check_materialized(report, plan_path: Path, label, rows, side, scan, span) -> None:
    """PLAN.tokens.npy, when the sidecar names it or it lies beside the plan, must hold exactly
    the plan's windows: shape (rows, span), the token file's dtype, row i = tokens[start:start +
    length] then ``pad_id``. A training run reading it never sees the .bin, so nothing else
    would notice it belongs to another plan (two runs racing) or was edited."""
    mat = side.materialized
    path = formats.materialized_path(plan_path)
    if mat is None and not path.exists():
        return
    if side.best_fit:  # windows refuses --materialize with --pack best-fit
        what = "its sidecar names materialized windows" if mat is not None else f"{path.name} lies beside it (another plan's)"
        report.add(MATERIALIZED, path.name, Status.FAIL, f"a best-fit plan has no materialized windows, but {what}")
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
    if plan.side.best_fit:
        _check_packed_alignment(report, plan, T, span)
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


def _check_packed_alignment(report, plan: Plan, T: int, span: int) -> None:
    """A best-fit window is its segments side by side: w, then x = w[:L − 1], y = w[1:L], in a sample of windows."""
    idx, label = window_index(plan.rows), plan.label
    if idx is None:
        report.add(ALIGNMENT, label, Status.SKIP, "window numbers are not 0, 1, … in row order (see order, packing): no window to gather")
        return
    tokens = np.asarray(plan.scan.tokens())
    n, W = len(tokens), len(idx) - 1
    pick = sorted_unique(np.linspace(0, W - 1, min(W, ALIGN_SAMPLE)).round().astype(np.int64))
    why, crossing = {}, 0
    for i in pick.tolist():
        seg = plan.rows[idx[i] : idx[i + 1]]
        s, L = seg["start"].astype(np.int64), seg["length"].astype(np.int64)
        total = int(L.sum())
        if (s < 0).any() or (L < 1).any() or (s > n - L).any():
            why[i] = (int(s[0]), "a segment lies outside the tokens")
            continue
        if not 2 <= total <= span:
            why[i] = (int(s[0]), f"{total} tokens: x = w[:L − 1] must hold 1 to T = {T}")
            continue
        w = np.concatenate([tokens[a : a + b] for a, b in zip(s.tolist(), L.tolist())]).astype(np.int64)
        pos = np.repeat(s - (np.cumsum(L) - L), L) + np.arange(total)  # independent: the .bin position of w[j]
        x, y = w[:-1], w[1:]
        if not (np.array_equal(x, tokens[pos[:-1]]) and np.array_equal(y, tokens[pos[1:]]) and np.array_equal(x[1:], y[:-1])):
            why[i] = (int(s[0]), "y is not x shifted by one token")
        crossing += len(seg) - 1
    if why:
        i = min(why)
        report.add(ALIGNMENT, label, Status.FAIL, f"{len(why)} of {len(pick)} sampled window(s) misaligned; first: window {i}"
                   f" (first segment at {why[i][0]}): {why[i][1]}", checked=len(pick), misaligned=len(why))
        return
    report.add(ALIGNMENT, label, Status.PASS, f"{len(pick)} of {W} windows {'(an even sample) ' if len(pick) < W else ''}checked:"
               f" each its segments side by side (w), x = w[:L−1], y = w[1:L], L ≤ T + 1 = {span}; {crossing} of their labels"
               " cross a segment edge (winsample.Loader's cross_doc_labels='mask' drops them)",
               checked=len(pick), misaligned=0, crossing_labels=crossing)


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
