"""A mixture plan (``winsample mix``; ``formats.PlanSidecar.mixture``): its rows are its sources
(``formats.MIXTURE_DTYPE``), so verify checks it in place of the plan stage (``check_mixture``),
with or without a data folder:

- the ``mixture`` stage, on the mixture and the plans it names:

  - mixture_sources (a line per source): the source plan is there and reads; it is a whole window
    plan (not a mixture, not one shard of a plan); it is unchanged since ``mix`` (the rows checksum
    in its sidecar, and of its rows, is the one the mixture recorded); its T, targets and span are
    the mixture's; its tokenizer is the mixture's (``formats.tokenizer_identity``), so every
    source's ids mean the same tokens;
  - mixture_counts: the rows as ``mix`` wrote them (rows_checksum), one per source; parameters
    ``mix`` could have written; each row's windows and tokens those of its source plan; the counts
    what ``planning.mixture.epoch_counts`` gives for the recorded weights, windows and rule;
    ``stats.windows`` their sum; no window served more than ``max_repeats`` times an epoch;
  - mixture_prefix: the order the Loader serves (``planning.mixture.order``) keeps every source
    within one window of its share after every prefix: |s_i − k·w_i| < 1 for k = 1 … E, w_i the
    weights normalised (checked in exact integers: |s_i·Q − k·a_i| < Q for w_i = a_i / Q); a plan
    made before ``params.mixture.prefix`` ("weights") is held to the rule it was made with, its
    counts' rates: |s_i·E − k·c_i| < E;

- then each source plan is verified as ``verify TOKENS --plan SOURCE_PLAN`` verifies it, against
  the token file its sidecar names (``tokensrc.plan_tokens``): that file's checks, its meta.json's,
  and the plan stage. Their lines are marked with the source: ``NAME:FILE``, and ``mixture`` and
  ``source`` in the JSON.

decode (``show_mixture``) shows the first --show positions of epoch 0 for seed 0, each decoded
from its own source. A source plan that is missing, or is no plan, fails mixture_sources (exit 1),
as a plan made for a file that is not there fails plan_bounds: what is wrong is the mixture, and
the other sources are still checked. One that is there but cannot be opened at all (no permission,
not a file) stops verify (exit 2), as an unreadable PATH does.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import formats, tokensrc
from ..errors import ConfigError, DataError
from ..planning import mixture as rule
from ..train import Plan as Served
from .figures import Prepared, int_param
from .plan import PLAN_BOUNDS
from .registry import check, run_stage
from .report import Report, Status

RULES = ("windows", "epoch-of", "first-exhausted")  # params.mixture.rule, as mix writes it
PREFIX_BLOCK = 1 << 20  # positions of the order compared at a time (a few int64 arrays of this length)
INT64_MAX = (1 << 63) - 1  # s·Q and k·a are exact in int64 while E·Q stays below this
SEED_LIMIT = 1 << 63


@dataclass
class Source:
    """One entry of the mixture's ``sources``: where its plan is, and what reading it gave."""

    index: int
    entry: formats.MixtureSource
    path: Path  # the mixture's folder / entry.plan
    label: str  # NAME:PLAN_FILE, the report's name for it
    got: Prepared | None = None  # its rows, sidecar and the rows' checksum; None: ``error`` says why
    error: str | None = None
    ds: object = None  # its token file's ``context.Dataset`` once verified (decode reads its plan there)

    def windows(self) -> np.ndarray | str:
        """One PLAN_DTYPE row per window as the Loader serves them (a best-fit plan: per window,
        not per segment), or why its windows cannot be counted."""
        if self.got is None:
            return self.error or "not read"
        if self.got.side.mixture:
            return "it is a mixture itself"
        try:
            return Served(self.got.rows, self.got.side, self.path).windows
        except DataError as e:
            return str(e)


@dataclass
class Mixture:
    """A mixture plan as read: its rows (one per source), sidecar, and its sources."""

    label: str
    path: Path
    rows: np.ndarray
    side: formats.PlanSidecar
    rows_checksum: str  # of the rows as read
    sources: list[Source]

    def figures(self, s: Source) -> dict:
        return {"mixture": self.label, "source": s.entry.name}


def open_mixture(plan_path: Path, got: Prepared) -> Mixture:
    """The mixture and each source plan it names (relative to its folder), read once."""
    sources = []
    for i, e in enumerate(got.side.sources):
        s = Source(i, e, e.path_in(plan_path.parent), f"{e.name}:{Path(e.plan).name}")
        s.error = e.missing(plan_path.parent)
        if s.error is None:
            try:
                rows, side = formats.load_plan(s.path)
                s.got = Prepared(rows, side, rows_checksum=formats.rows_checksum(rows))
            except DataError as err:
                s.error = str(err)
        sources.append(s)
    have = got.rows_checksum or formats.rows_checksum(got.rows)
    return Mixture(plan_path.name, plan_path, got.rows, got.side, have, sources)


def check_mixture(report: Report, opts, plan_path: Path, got: Prepared) -> Mixture:
    """The ``mixture`` stage's checks, then each source plan verified against its own token file."""
    mix = open_mixture(plan_path, got)
    run_stage("mixture", report, opts, mix)
    verify_sources(report, opts, mix)
    return mix


def verify_sources(report: Report, opts, mix: Mixture) -> None:
    """Each readable source plan, as ``verify TOKENS --plan SOURCE_PLAN`` checks it (no decode:
    the mixture's own shows its positions), its lines marked with the source."""
    from .run import check_dataset  # run imports the check modules: not at import time

    for s in mix.sources:
        if s.got is None or s.got.side.mixture:  # mixture_sources said why
            continue
        try:
            tokens = tokensrc.plan_tokens(s.path, s.got.side.source, tokensrc.MIXTURE_HINT)
        except DataError as e:
            report.add(PLAN_BOUNDS, s.label, Status.FAIL, str(e), **mix.figures(s))
            continue
        sub, s.ds = check_dataset(tokens, dataclasses.replace(opts, plans=(s.path,), show=0, meta_path=None, writes=()))
        for c in sub.checks:
            if c.name == "decode":  # --show 0 above
                continue
            c.file = f"{s.entry.name}:{c.file}"
            c.figures.update(mix.figures(s))
            report.checks.append(c)


# --- mixture_sources ------------------------------------------------------------------------------


@check("mixture_sources", help="a mixture's source plans: there, unchanged since mix, one tokenizer, one T",
       reads="mixture plans, source plans and sidecars", stage="mixture")
def mixture_sources(report: Report, opts, mix: Mixture) -> None:
    want = formats.tokenizer_identity(mix.side.tokenizer)
    for s in mix.sources:
        figs = dict(mix.figures(s), plan=s.entry.plan)
        if s.got is None:
            report.add(MIXTURE_SOURCES, s.label, Status.FAIL, f"source {s.entry.name}: {s.error}", **figs)
            continue
        problems, doubts = _source_problems(s, mix, want)
        if problems:
            report.add(MIXTURE_SOURCES, s.label, Status.FAIL, f"source {s.entry.name} ({s.path}): " + "; ".join(problems),
                       **figs)
            continue
        side = s.got.side
        said = (f"{s.entry.plan}: rows as mixed ({s.entry.rows_checksum}), T {side.params.T}"
                f"{'' if side.params.targets else ' without targets'}, tokenizer {want.get('name', 'unnamed')}")
        if doubts:
            report.add(MIXTURE_SOURCES, s.label, Status.WARN, said + "; but " + "; ".join(doubts), **figs)
        else:
            report.add(MIXTURE_SOURCES, s.label, Status.PASS, said, **figs)


MIXTURE_SOURCES = mixture_sources.spec


def _source_problems(s: Source, mix: Mixture, want: dict) -> tuple[list[str], list[str]]:
    """(why the source cannot be served as the mixture says, what cannot be told)."""
    side, rec = s.got.side, s.entry.rows_checksum
    if side.mixture:
        return ["it is a mixture itself: mix its sources instead"], []
    problems, doubts = [], []
    shards = side.params.shards
    if shards not in (None, 1):
        problems.append(f"it is shard {side.params.shard!r} of {shards!r} of a plan: the Loader splits the whole plan by rank")
    why = rule.unmixable(side.params)
    if why is not None:
        problems.append(why)
    if rec is None:
        doubts.append("the mixture records no rows_checksum for it: a source re-planned since would not show")
    elif side.rows_checksum != rec:
        problems.append(f"re-planned or edited since the mixture was made: its sidecar's rows_checksum is {side.rows_checksum},"
                        f" the mixture recorded {rec}")
    elif s.got.rows_checksum != rec:
        problems.append(f"its rows were edited since the mixture was made: they hash to {s.got.rows_checksum},"
                        f" the mixture recorded {rec}")
    if s.entry.tokens_checksum and side.source.checksum != s.entry.tokens_checksum:
        problems.append(f"made over other tokens since the mixture was made: its source checksum is {side.source.checksum},"
                        f" the mixture recorded {s.entry.tokens_checksum}")
    for key in ("T", "targets", "span"):
        a, b = getattr(side.params, key), getattr(mix.side.params, key)
        if (a, type(a)) != (b, type(b)):
            problems.append(f"its params.{key} is {a!r}, the mixture's {b!r}: a batch has one T")
    tok = formats.tokenizer_identity(side.tokenizer)
    if tok != want:
        problems.append(f"tokenized with {_tok(tok)}, the mixture with {_tok(want)}: a mixture's ids must mean the same"
                        " tokens in every source")
    elif not tok:
        doubts.append("no tokenizer is recorded (its sidecar nor the mixture's): that its ids mean what the other sources'"
                      " do cannot be told")
    return problems, doubts


def _tok(t: dict) -> str:
    if not t:
        return "no recorded tokenizer"
    rest = ", ".join(f"{k} {v}" for k, v in t.items() if k != "name")
    return f"{t.get('name', 'an unnamed tokenizer')}{f' ({rest})' if rest else ''}"


# --- mixture_counts -------------------------------------------------------------------------------


@check("mixture_counts", help="a mixture's rows: each source's windows and tokens, its count per epoch by weight",
       reads="mixture plans and sidecars, source plans", stage="mixture")
def mixture_counts(report: Report, opts, mix: Mixture) -> None:
    rows, side = mix.rows, mix.side
    problems = []
    if side.rows_checksum is None:
        problems.append("the sidecar has no rows_checksum (mix always writes one): edited rows would not show")
    elif side.rows_checksum != mix.rows_checksum:
        problems.append(f"the rows are not the ones mix wrote: the sidecar's rows_checksum is {side.rows_checksum}, the"
                        f" rows' {mix.rows_checksum} (a row was edited, added, removed or reordered)")
    if len(rows) != len(mix.sources):
        problems.append(f"{len(rows)} rows for {len(mix.sources)} sources: one row per source")
        report.add(MIXTURE_COUNTS, mix.label, Status.FAIL, "; ".join(problems), mixture=mix.label, sources=len(mix.sources),
                   rows=len(rows))
        return
    problems += _param_problems(mix) + _row_problems(mix)
    expected, how = _expected(mix)
    counts = [int(c) for c in rows["count"]]
    figs = {"mixture": mix.label, "windows": sum(counts), "counts": counts}
    if expected is None:
        problems.append(how)
    elif expected != counts:
        names = [s.entry.name for s in mix.sources]
        weights = ", ".join(str(s.entry.weight) for s in mix.sources)
        sizes = ", ".join(f"{int(n):,}" for n in rows["windows"])
        problems.append(f"counts {_per(names, counts)}, but weights {weights} over windows {sizes} by {how} give"
                        f" {_per(names, expected)}")
        figs["expected_counts"] = expected
    total = sum(expected if expected is not None else counts)
    if int_param(side.stats, "windows") != total:
        problems.append(f"stats.windows is {side.stats.windows!r}, the counts {'give' if expected else 'sum to'} {total:,}")
    if problems:
        report.add(MIXTURE_COUNTS, mix.label, Status.FAIL, "; ".join(problems), **figs)
        return
    E = sum(counts)
    parts = [f"{s.entry.name} {c:,} of {int(r['windows']):,} ({c / max(E, 1):.2%}{_repeats(c, int(r['windows']))})"
             for s, c, r in zip(mix.sources, counts, rows)]
    report.add(MIXTURE_COUNTS, mix.label, Status.PASS, f"{E:,} windows an epoch by {how}: {', '.join(parts)}; rows as mix"
               " wrote them", **figs)


MIXTURE_COUNTS = mixture_counts.spec


def _per(names: list[str], values: list[int]) -> str:
    return ", ".join(f"{n} {v:,}" for n, v in zip(names, values))


def _repeats(count: int, n: int) -> str:
    lo, hi = count // n, -(-count // n)
    return "" if hi <= 1 else f"; each window {hi}×" if lo == hi else f"; each window {lo}–{hi}×"


def _is_int(v, lo: int | None = None, hi: int | None = None) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and (lo is None or v >= lo) and (hi is None or v < hi)


def _param_problems(mix: Mixture) -> list[str]:
    """Parameters ``mix`` could not have written: T, targets, span; names; max_repeats; seed."""
    p, out = mix.side.params, []
    if not _is_int(p.T, 1) or not isinstance(p.targets, bool) or p.span != p.T + int(p.targets is True):
        out.append(f"params T {p.T!r}, targets {p.targets!r}, span {p.span!r}: not a T, true/false and T + 1 (T without"
                   " targets)")
    names = [s.entry.name for s in mix.sources]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        out.append(f"source name(s) {', '.join(dup)} given twice")
    if p.max_repeats is not None and not _is_int(p.max_repeats, 1):
        out.append(f"params.max_repeats is {p.max_repeats!r}, not a positive integer")
    if p.seed is not None and not _is_int(p.seed, 0, SEED_LIMIT):
        out.append(f"params.seed is {p.seed!r}, not an integer in [0, 2**63)")
    for s in mix.sources:
        try:
            rule.as_fraction(s.entry.weight)
        except ConfigError as e:
            out.append(f"source {s.entry.name}: {e}")
    return out


def _row_problems(mix: Mixture) -> list[str]:
    """Each row against its source plan (windows, tokens) and max_repeats."""
    out, cap = [], mix.side.params.max_repeats
    for s, r in zip(mix.sources, mix.rows):
        n, c, name = int(r["windows"]), int(r["count"]), s.entry.name
        if n < 1 or c < 0:
            out.append(f"row {name}: windows {n}, count {c}: a source has windows and a count ≥ 0")
            continue
        if _is_int(cap, 1) and -(-c // n) > cap:
            out.append(f"{name}: {c:,} windows an epoch of its {n:,} serve some window {-(-c // n)} times, over max_repeats {cap}")
        win = s.windows()
        if isinstance(win, str):
            continue  # mixture_sources names why (a plan that does not read or count)
        tokens = int(win["length"].sum(dtype=np.int64))
        if len(win) != n:
            out.append(f"row {name}: windows {n:,}, but its plan has {len(win):,}")
        if int(r["tokens"]) != tokens:
            out.append(f"row {name}: tokens {int(r['tokens']):,}, but its plan's windows span {tokens:,}")
    return out


def _expected(mix: Mixture) -> tuple[list[int] | None, str]:
    """(the counts the recorded weights, windows and rule give, the rule in words), or (None, why none)."""
    names = [s.entry.name for s in mix.sources]
    r = mix.side.params.mixture
    kind = r.get("rule") if isinstance(r, dict) else None
    windows = epoch_of = None
    if kind == "windows" and _is_int(r.get("windows"), 1):
        windows, how = r["windows"], f"--windows {r['windows']}"
    elif kind == "epoch-of" and r.get("source") in names:
        epoch_of, how = names.index(r["source"]), f"--epoch-of {r['source']} (one pass over it)"
    elif kind == "first-exhausted":
        how = "one pass over the source that runs out first"
    else:
        return None, f"params.mixture is {r!r}: not a rule mix writes ({', '.join(RULES)}, with its value)"
    if r.get("prefix", rule.PREFIX_WEIGHTS) != rule.PREFIX_WEIGHTS:
        return None, f"params.mixture.prefix is {r['prefix']!r}: mix writes {rule.PREFIX_WEIGHTS!r} (or none, before it)"
    sizes = [int(x) for x in mix.rows["windows"]]
    if min(sizes) < 1:
        return None, "a source of no windows: no count to compare"
    try:
        return rule.epoch_counts([s.entry.weight for s in mix.sources], sizes, windows, epoch_of,
                                 rule.prefix_rule(r)), how
    except ConfigError as e:  # a weight that is no positive number (named above)
        return None, f"no counts follow from the recorded weights and rule: {e}"


# --- mixture_prefix -------------------------------------------------------------------------------


@check("mixture_prefix", help="a mixture's order: after every prefix each source within one window of its share",
       reads="mixture plans", stage="mixture")
def mixture_prefix(report: Report, opts, mix: Mixture) -> None:
    counts = [int(c) for c in mix.rows["count"]]
    E, label = sum(counts), mix.label
    if min(counts, default=0) < 0 or not counts:
        report.add(MIXTURE_PREFIX, label, Status.SKIP, "counts below 0 (see mixture_counts): no order to draw", mixture=label)
        return
    if E == 0:
        report.add(MIXTURE_PREFIX, label, Status.SKIP, "an epoch of 0 windows: no prefix to check", mixture=label)
        return
    prefix = rule.prefix_rule(mix.side.params.mixture)
    try:
        weights = [s.entry.weight for s in mix.sources]
        order = rule.order(counts, weights, prefix)
        rates, den = rule.integer_weights(weights) if prefix == rule.PREFIX_WEIGHTS else (counts, E)
    except ConfigError as e:  # weights no mix writes, or counts no order keeps within one window
        report.add(MIXTURE_PREFIX, label, Status.FAIL, f"no order: {e}", mixture=label)
        return
    if E * den > INT64_MAX:
        report.add(MIXTURE_PREFIX, label, Status.SKIP, f"an epoch of {E:,} windows at weights over {den:,}: past what"
                   " this check computes exactly in int64", mixture=label)
        return
    worst, first = prefix_bound(order, counts, rates, den)
    share = "share" if prefix == rule.PREFIX_WEIGHTS else "counts' rate (a plan made before the weights' bound)"
    figs = {"mixture": label, "windows": E, "max_deviation": worst / den}
    if first is not None:
        k, i, s = first
        name = mix.sources[i].entry.name if i < len(mix.sources) else f"#{i}"
        report.add(MIXTURE_PREFIX, mix.label, Status.FAIL, f"after {k:,} of {E:,} windows source {name} was served {s:,}"
                   f" times, its {share} is {k * rates[i] / den:,.3f}: one window or more off", prefix=k, **figs)
        return
    report.add(MIXTURE_PREFIX, mix.label, Status.PASS, f"after every prefix of the {E:,} windows each source is within"
               f" {worst / den:.3f} of a window of its {share} (< 1)", **figs)


MIXTURE_PREFIX = mixture_prefix.spec


def prefix_bound(order: np.ndarray, counts: list[int], rates: list[int], den: int,
                 block: int = PREFIX_BLOCK) -> tuple[int, tuple[int, int, int] | None]:
    """(worst, first) over the prefixes k = 1 … E of ``order`` (E = Σ counts), each source's share
    after k being k·rates_i/den: worst = the largest |s_i(k)·den − k·rates_i| (den times the
    largest |s_i(k) − k·rates_i/den|, s_i(k) the positions of source i among the first k); first =
    (k, i, s_i(k)) at the first prefix where that reaches den, or None. An order of another length,
    holding a source outside [0, len(counts)), or not serving each source its count, fails at its end."""
    E, c, rate = sum(counts), np.asarray(counts, np.int64), np.asarray(rates, np.int64)
    order = np.asarray(order)
    served = np.zeros(len(c), np.int64)
    worst, first = 0, None
    for lo in range(0, max(len(order), E), block):
        part = order[lo : lo + block]
        k = np.arange(lo + 1, lo + len(part) + 1, dtype=np.int64)
        for i in range(len(c)):
            s = served[i] + np.cumsum(part == i, dtype=np.int64)
            dev = np.abs(s * den - k * rate[i])
            if len(dev):
                worst = max(worst, int(dev.max()))
                bad = np.flatnonzero(dev >= den)
                if len(bad) and (first is None or lo + int(bad[0]) + 1 < first[0]):
                    first = (lo + int(bad[0]) + 1, i, int(s[bad[0]]))
                served[i] = s[-1]
        if first is not None:
            break
    if first is None and (len(order) != E or (served != c).any()):  # the last prefix: every source's own count
        i = int(np.argmax(served != c)) if (served != c).any() else 0
        first = (len(order), i, int(served[i]))
        worst = max(worst, den)
    return worst, first


# --- decode ---------------------------------------------------------------------------------------


def first_positions(counts: list[int], sizes: list[int], stop: int, salt: int | None, weights: list,
                    prefix: str) -> tuple[np.ndarray, np.ndarray]:
    """(source, window) of positions [0, stop) of epoch 0 for seed 0: the first ``stop`` of
    ``planning.mixture.mixture_epoch``, each source's windows drawn only as far as needed (the
    first m of a source's sequence do not depend on how many follow)."""
    src = rule.order(counts, weights, prefix)[:stop]
    win = np.zeros(len(src), np.int64)
    for i, n in enumerate(sizes):
        k = np.flatnonzero(src == i)
        if len(k):
            win[k] = rule.source_windows(len(k), n, 0, 0, i, salt)
    return src, win


def show_mixture(report: Report, mix: Mixture, show: int) -> None:
    """decode for a mixture: its first ``show`` positions of epoch 0 for seed 0, as the Loader
    serves them, each window decoded from its own source (``decode.show_windows``)."""
    from .decode import DECODE, show_packed, show_windows
    from .packed import window_index

    if show <= 0:
        report.add(DECODE, mix.label, Status.SKIP, "--show 0", mixture=mix.label)
        return
    counts = [int(c) for c in mix.rows["count"]]
    wins = [s.windows() for s in mix.sources]
    why = next((f"source {s.entry.name}: {w}" for s, w in zip(mix.sources, wins) if isinstance(w, str)), None)
    if why is None and (len(counts) != len(mix.sources) or min(counts) < 0):
        why = "the rows do not give one count per source (see mixture_counts)"
    if why is None and any(c > 0 and not len(w) for c, w in zip(counts, wins)):
        why = "a source with a count but no windows (see mixture_counts)"
    if why is None and any(s.ds is None or s.ds.first_plan is None for s in mix.sources):
        why = "a source plan was not placed on its token file (see its plan_bounds)"
    if why is not None:
        report.add(DECODE, mix.label, Status.SKIP, f"no position to show: {why}", mixture=mix.label)
        return
    seed = mix.side.params.seed
    try:
        src, win = first_positions(counts, [len(w) for w in wins], show, seed if _is_int(seed, 0, SEED_LIMIT) else None,
                                   [s.entry.weight for s in mix.sources], rule.prefix_rule(mix.side.params.mixture))
    except ConfigError as e:
        report.add(DECODE, mix.label, Status.SKIP, f"no position to show: {e} (see mixture_prefix)", mixture=mix.label)
        return
    problems, per = 0, {}
    for j in range(len(src)):
        s = mix.sources[int(src[j])]
        plan, ds, w = s.ds.first_plan, s.ds, int(win[j])
        part = Report()
        if plan.side.best_fit:
            idx = window_index(plan.rows)
            rows = plan.rows[idx[w] : idx[w + 1]].copy()
            rows["window"] = 0
            show_packed(part, dataclasses.replace(plan, rows=rows), ds.targets, ds.enc, ds.enc_error, 1)
        else:
            show_windows(part, dataclasses.replace(plan, rows=plan.rows[w : w + 1]), ds.targets, ds.scans, ds.enc,
                         ds.enc_error, None, 1)
        problems += sum(c.status != Status.PASS.value for c in part.checks)
        for shown in part.windows:
            shown.file, shown.position, shown.window = f"{s.entry.name}:{shown.file}", j, w
        report.windows += part.windows
        per[s.entry.name] = per.get(s.entry.name, 0) + 1
    n = sum(per.values())
    said = f"the first {n} position(s) of epoch 0 (seed 0): " + ", ".join(f"{k} {v}" for k, v in per.items())
    if problems:
        report.add(DECODE, mix.label, Status.WARN, f"{said}; {problems} of them cannot be decoded with their tokenizer",
                   mixture=mix.label)
    else:
        report.add(DECODE, mix.label, Status.PASS, f"{said}, each decoded with its source's tokenizer", mixture=mix.label,
                   shown=n)
