"""Mixtures (planning/mixture.py): epoch length, counts, repeats and the order, against brute force.

Every expectation is recomputed here from the contract with exact fractions (the epoch rule,
largest remainder, whole seeded permutations, the prefix bound), never with the module's own
helpers; the order is checked on the sequence it produces, prefix by prefix, and its band against
the least band any order can keep, found by a minimax search over every path of counts. Every
property runs on the C kernels (``deadline_order``, ``interleave``, ``gather_by_source``) and on the
Python loop.
"""

from __future__ import annotations

import itertools
import json
import math
import tempfile
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from winsample import formats, planning, read_plan
from winsample.cli import main
from winsample.errors import ConfigError
from winsample.planning import boundaries as bnd
from winsample.planning import mixture

pytestmark = pytest.mark.usefixtures("kernels")  # every test on the C kernels and on the Python loop

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                            HealthCheck.function_scoped_fixture])


# -- brute force, from the contract --

def shares(weights) -> list[Fraction]:
    w = [Fraction(x) for x in weights]  # "0.6" is exactly 3/5
    return [x / sum(w) for x in w]


def brute_largest_remainder(w: list[Fraction], total: int) -> list[int]:
    """Each quota w_i·total rounded down, then one more for the `left` largest fractional parts
    (ties: earlier source first), found by scanning the quotas, not by sorting."""
    quota = [x * total for x in w]
    out = [q.numerator // q.denominator for q in quota]
    for _ in range(total - sum(out)):
        frac = [q - o if o == q.numerator // q.denominator else Fraction(-1) for q, o in zip(quota, out)]
        i = frac.index(max(frac))  # first of the largest
        out[i] += 1
    return out


def brute_epoch(weights, sizes, windows=None, epoch_of=None) -> tuple[int, int | None]:
    """(E, j): E given, else one pass over source j (epoch_of, else the first with the least
    n_j / w_j), E = n_j / w_j rounded down."""
    w = shares(weights)
    if windows is not None:
        return windows, None
    if epoch_of is None:
        ratios = [Fraction(n) / x for n, x in zip(sizes, w)]
        epoch_of = ratios.index(min(ratios))
    return math.floor(Fraction(sizes[epoch_of]) / w[epoch_of]), epoch_of


def brute_remainders(weights, E: int, first: int | None) -> list[int]:
    """Every quota E·w_i rounded down and the windows left to the largest fractional parts (ties:
    earlier source), source ``first``'s first when its quota is not whole."""
    w = shares(weights)
    if first is None:
        return brute_largest_remainder(w, E)
    epoch_of = first
    quota = [x * E for x in w]
    out = [math.floor(q) for q in quota]
    left = E - sum(out)
    if left and quota[epoch_of] != out[epoch_of]:
        out[epoch_of] += 1
        left -= 1
    for _ in range(left):  # as brute_largest_remainder: each quota rounded up at most once
        frac = [q - o if o == math.floor(q) else Fraction(-1) for q, o in zip(quota, out)]
        out[frac.index(max(frac))] += 1
    return out


def brute_counts_before(weights, sizes, windows=None, epoch_of=None) -> list[int]:
    """A mixture made before ``"prefix": "weights"``: with one pass over source j, j gets n_j and
    the others share E − n_j by their weights among themselves."""
    w = shares(weights)
    if windows is not None:
        return brute_largest_remainder(w, windows)
    if epoch_of is None:
        ratios = [Fraction(n) / x for n, x in zip(sizes, w)]
        epoch_of = ratios.index(min(ratios))
    E = math.floor(Fraction(sizes[epoch_of]) / w[epoch_of])
    others = [i for i in range(len(w)) if i != epoch_of]
    rest = brute_largest_remainder([w[i] / sum(w[i] for i in others) for i in others], E - sizes[epoch_of]) if others else []
    out = [0] * len(w)
    out[epoch_of] = sizes[epoch_of]
    for i, c in zip(others, rest):
        out[i] = c
    return out


def prefix_counts(order: np.ndarray, m: int) -> np.ndarray:
    """(len(order), m) int64: s_i after each prefix of k = 1, 2, … windows."""
    onehot = np.zeros((len(order), m), np.int64)
    onehot[np.arange(len(order)), order] = 1
    return np.cumsum(onehot, axis=0)


def check_prefix_bound(order: np.ndarray, counts: list[int]) -> None:
    """|s_i − k·c_i/E| ≤ 1 − 1/(2m − 2) after every prefix, exactly: |s_i·E − k·c_i|·(2m − 2) ≤ E·(2m − 3)."""
    E, m = sum(counts), sum(1 for c in counts if c > 0)
    assert len(order) == E
    s = prefix_counts(order, len(counts))
    assert np.bincount(order, minlength=len(counts)).tolist() == counts  # the order serves exactly the counts
    if m < 2:
        return
    k = np.arange(1, E + 1, dtype=object)[:, None]
    gap = np.abs(s.astype(object) * E - k * np.array(counts, dtype=object))
    worst = int(gap.max())
    assert worst * (2 * m - 2) <= E * (2 * m - 3), f"a prefix is {Fraction(worst, E)} windows off, bound {1 - Fraction(1, 2 * m - 2)}"


def integer_weights(weights) -> tuple[list[int], int]:
    """w_i = a_i / Q in integers."""
    w = shares(weights)
    Q = math.lcm(*[x.denominator for x in w])
    return [int(x * Q) for x in w], Q


def weights_band(order: np.ndarray, counts: list[int], weights) -> Fraction:
    """The largest |s_i(k) − k·w_i| over every prefix k = 1 … E, exactly; the order serves exactly the counts."""
    assert len(order) == sum(counts)
    assert np.bincount(order, minlength=len(counts)).tolist() == counts
    a, Q = integer_weights(weights)
    s = prefix_counts(order, len(counts)).astype(object)
    k = np.arange(1, len(order) + 1, dtype=object)[:, None]
    return Fraction(int(np.abs(s * Q - k * np.array(a, dtype=object)).max()), Q) if len(order) else Fraction(0)


def least_band(counts: list[int], weights) -> Fraction:
    """The least max |s_i(k) − k·w_i| any order of these counts can keep: a minimax search over every
    lattice path from 0 to the counts (best[s] = max(dev(s), min over its predecessors))."""
    a, Q = integer_weights(weights)
    best: dict[tuple, int] = {tuple([0] * len(counts)): 0}
    for k in range(1, sum(counts) + 1):
        nxt = {}
        for s, b in best.items():
            for i in range(len(counts)):
                if s[i] < counts[i]:
                    t = s[:i] + (s[i] + 1,) + s[i + 1 :]
                    dev = max(abs(t[j] * Q - k * a[j]) for j in range(len(counts)))
                    v = max(b, dev)
                    if v < nxt.get(t, 1 << 62):
                        nxt[t] = v
        best = nxt
    return Fraction(best[tuple(counts)], Q)


def source_sequences(src: np.ndarray, win: np.ndarray, m: int) -> list[np.ndarray]:
    return [win[src == i] for i in range(m)]


def expected_windows(count: int, n: int, seed: int, epoch: int, source: int, salt=None) -> list[int]:
    """Whole permutations default_rng([seed, epoch, 3, source, pass] (+ [salt])).permutation(n), cut to count."""
    out, k = [], 0
    while len(out) < count:
        words = [seed, epoch, 3, source, k] + ([salt] if salt is not None else [])
        out += np.random.default_rng(words).permutation(n).tolist()
        k += 1
    return out[:count]


# -- strategies --

DECIMALS = st.sampled_from(["0.6", "0.3", "0.1", "0.05", "0.25", "0.125", "1", "2", "3", "0.7", "0.45", "1.5", "0.333"])


@st.composite
def mixes(draw, max_sources=5, max_size=60):
    m = draw(st.integers(1, max_sources))
    weights = [draw(st.one_of(DECIMALS, st.integers(1, 40).map(str))) for _ in range(m)]
    sizes = [draw(st.integers(1, max_size)) for _ in range(m)]
    rule = draw(st.sampled_from(["default", "windows", "epoch_of"]))
    windows = draw(st.integers(1, 400)) if rule == "windows" else None
    epoch_of = draw(st.integers(0, m - 1)) if rule == "epoch_of" else None
    return weights, sizes, windows, epoch_of


# -- counts --

@SETTINGS
@given(mixes())
def test_counts_are_the_epoch_rule_then_largest_remainder_unless_no_order_could_keep_it(mix):
    weights, sizes, windows, epoch_of = mix
    got = mixture.epoch_counts(weights, sizes, windows, epoch_of)
    E, j = brute_epoch(weights, sizes, windows, epoch_of)
    assert sum(got) == E
    for c, x in zip(got, shares(weights)):
        assert c in (math.floor(x * E), math.ceil(x * E))  # a rounding of its share
    if j is not None:
        assert got[j] == sizes[j]  # one pass over it
    remainders = brute_remainders(weights, E, j)
    if got != remainders:  # only where no order of the largest remainders keeps every prefix within one window
        with pytest.raises(ConfigError):
            mixture.deadline_order(remainders, weights)
    assert weights_band(mixture.deadline_order(got, weights), got, weights) < 1
    before = mixture.epoch_counts(weights, sizes, windows, epoch_of, prefix=mixture.PREFIX_COUNTS)
    assert before == brute_counts_before(weights, sizes, windows, epoch_of)


def brute_rounding(weights, E: int, first: int | None) -> list[int]:
    """The counts by brute force: of every rounding (each ⌊E·w_i⌋ or ⌈E·w_i⌉, Σ = E) that some order
    keeps within one window in every prefix (``least_band`` < 1), the one largest remainder leans to:
    the sources left down taken by smallest fraction first (ties: later source), i.e. the down set
    whose membership along that order is lexicographically greatest; ``first`` rounded up if any
    such rounding has it up."""
    w = shares(weights)
    quota = [x * E for x in w]
    floors = [math.floor(q) for q in quota]
    can = [i for i, q in enumerate(quota) if q != math.floor(q)]
    left = E - sum(floors)
    prio = sorted(can, key=lambda i: (quota[i] - floors[i], -i))
    rounds = []
    for ups in itertools.combinations(can, left):
        c = [f + (i in ups) for i, f in enumerate(floors)]
        if least_band(c, weights) < 1:
            rounds.append((first in ups, tuple(k not in ups for k in prio), c))
    return max(rounds)[2]


def test_the_rounding_is_the_brute_forces_on_every_small_mix():
    cases = [(list(map(str, ints)), E) for m in (2, 3, 4) for ints in itertools.product((1, 2, 3, 5), repeat=m)
             if list(ints) == sorted(ints, reverse=True) for E in range(1, 10)]
    cases += [(["9", "9", "1", "1", "1"], E) for E in range(1, 12)] + [(["6", "6", "1", "1"], E) for E in range(1, 14)]
    changed = 0
    for w, E in cases:
        for first in [None] + list(range(len(w))):
            got = mixture.rounded_shares(w, E, first)
            assert got == brute_rounding(w, E, first), (w, E, first)
            changed += got != brute_remainders(w, E, first)
    assert changed >= 1  # the brute force met a mix whose largest remainders no order keeps within one window


def test_largest_remainder_gives_way_where_no_order_could_keep_it():
    # 9:9:1:1:1 over 8 windows: quotas 3.43, 3.43, 0.38, 0.38, 0.38; largest remainder: 4, 4, 0, 0, 0.
    # After 7 windows each big source's share is 7·9/21 = 3 exactly, so each has served at most 3
    # (4 would be a whole window ahead): both 4th windows would need position 8. So one big source
    # stays at 3 (the tie to the earlier: the second gives way) and the next remainder, the first
    # small source's 0.38, is rounded up instead.
    assert mixture.rounded_shares(["9", "9", "1", "1", "1"], 8) == [4, 3, 1, 0, 0]
    with pytest.raises(ConfigError, match="within one window"):
        mixture.deadline_order([4, 4, 0, 0, 0], ["9", "9", "1", "1", "1"])
    assert least_band([4, 4, 0, 0, 0], ["9", "9", "1", "1", "1"]) >= 1 > least_band([4, 3, 1, 0, 0], ["9", "9", "1", "1", "1"])


def test_the_guides_example_of_largest_remainder_giving_way_is_one_mix_accepts(tmp_path):
    """The guide's example was 9:9:1:1:1 over 8 windows, which leaves two sources no window, so mix
    refuses it (a new user's trial). 6:6:1:1:1 over 21: quotas 8.4, 8.4, 1.4, 1.4, 1.4; largest
    remainder (ties to the earlier source) gives 9, 9, 1, 1, 1, which no order keeps within one window."""
    w = ["6", "6", "1", "1", "1"]
    assert least_band([9, 9, 1, 1, 1], w) >= 1 > least_band([9, 8, 2, 1, 1], w)
    assert mixture.rounded_shares(w, 21) == [9, 8, 2, 1, 1]
    plans = [plan_file(tmp_path, name, 30) for name in "abcde"]
    r, doc = mix(tmp_path, *[f"{n}={x}:{p}" for n, x, p in zip("abcde", w, plans)], "--windows", "21", "-o", tmp_path / "m.npy")
    assert r.exit_code == 0, r.stderr
    assert [s["count"] for s in doc["sources"]] == [9, 8, 2, 1, 1]


@SETTINGS
@given(mixes())
def test_the_default_epoch_is_one_pass_over_the_source_that_runs_out_first_and_repeats_nothing(mix):
    weights, sizes, _, _ = mix
    got = mixture.epoch_counts(weights, sizes)
    w = shares(weights)
    ratios = [Fraction(n) / x for n, x in zip(sizes, w)]
    first = ratios.index(min(ratios))
    assert got[first] == sizes[first]  # exactly one pass over it
    assert all(c <= n for c, n in zip(got, sizes)), "no source is asked for more windows than its plan has"
    assert mixture.repeats(got, sizes) == [(c // n, -(-c // n)) if c else (0, 0) for c, n in zip(got, sizes)]


@SETTINGS
@given(mixes(), st.data())
def test_epoch_of_gives_that_source_exactly_one_pass(mix, data):
    weights, sizes, _, _ = mix
    j = data.draw(st.integers(0, len(sizes) - 1))
    got = mixture.epoch_counts(weights, sizes, epoch_of=j)
    assert got[j] == sizes[j]
    assert sum(got) == math.floor(Fraction(sizes[j]) / shares(weights)[j])


def test_hand_examples():
    sizes = [1000, 1000, 1000]
    w = ["0.6", "0.3", "0.1"]
    # default: web runs out first (1000 / 0.6 = 1666.67 → E = 1666, rounded down); web 1000, the
    # other 666 split 3:1 → 499.5 and 166.5 → 499 and 166, the one left to code (a tie: earlier)
    assert mixture.epoch_counts(w, sizes) == [1000, 500, 166]
    # --epoch-of code: 1000 / 0.3 → E = 3333; code 1000, the other 2333 split 6:1 → 1999.71, 333.29
    assert mixture.epoch_counts(w, sizes, epoch_of=1) == [2000, 1000, 333]
    assert mixture.repeats([2000, 1000, 333], sizes) == [(2, 2), (1, 1), (0, 1)]
    # --windows: largest remainder of 0.6·10, 0.3·10, 0.1·10; of 7: 4.2, 2.1, 0.7 → 4, 2, 0 + 1 to books
    assert mixture.epoch_counts(w, sizes, windows=10) == [6, 3, 1]
    assert mixture.epoch_counts(w, sizes, windows=7) == [4, 2, 1]
    # ties go to the earlier source: 1:1:1 over 4 windows → 1.33 each, the one left to the first
    assert mixture.epoch_counts(["1", "1", "1"], sizes, windows=4) == [2, 1, 1]
    # weights are exact decimals, not floats: 0.1 + 0.2 is 0.3 (a float sum would tip this tie)
    assert mixture.epoch_counts(["0.1", "0.2", "0.3"], sizes, windows=3) == [1, 1, 1]
    assert mixture.epoch_counts(["0.3", "0.1", "0.2"], sizes, windows=12) == [6, 2, 4]


def test_one_pass_over_a_source_rounds_it_up_first_then_the_largest_remainders():
    # 2:9:0.6:15 (Σ 26.6) over 1, 4, 1, 5 windows: n/w = 13.3, 11.8, 44.3, 8.87 → the last runs out
    # first, E = 8; quotas 0.60, 2.71, 0.18, 4.51 → floors 0, 2, 0, 4 and 2 left: the last first
    # (one pass: 5), then the largest fraction (2.71 → 3)
    assert mixture.epoch_counts(["2", "9", "0.6", "15"], [1, 4, 1, 5]) == [0, 3, 0, 5]
    # a plan made before kept the others' split of the rest, 3 by 2:9:0.6 → 0.52, 2.33, 0.16 → 1, 2, 0
    assert mixture.epoch_counts(["2", "9", "0.6", "15"], [1, 4, 1, 5], prefix=mixture.PREFIX_COUNTS) == [1, 2, 0, 5]


def test_two_sources_that_run_out_together_both_get_one_pass_and_no_more():
    # 2:0.1:2:0.1 over 6, 1, 6, 1 windows: web and code both last 12.6 windows of the epoch. Rounded
    # up to 13 (as the first cut did), the 7 windows after web's 6 went 0.32 / 6.36 / 0.32 by
    # largest remainder, i.e. 7 to code: one of its 6 windows twice in a one-pass epoch.
    counts = mixture.epoch_counts(["2", "0.1", "2", "0.1"], [6, 1, 6, 1])
    assert counts == [6, 0, 6, 0]
    assert mixture.repeats(counts, [6, 1, 6, 1]) == [(1, 1), (0, 0), (1, 1), (0, 0)]


def test_weights_that_are_no_positive_number_are_refused():
    for bad in ("0", "-1", "abc", "1/0"):
        with pytest.raises(ConfigError):
            mixture.epoch_counts([bad, "1"], [10, 10])
    with pytest.raises(ConfigError):
        mixture.epoch_counts(["1", "1"], [10, 10], windows=0)


# -- repeats and the windows each source serves --

@SETTINGS
@given(mixes(max_size=12), st.integers(0, 2**32), st.integers(0, 5), st.one_of(st.none(), st.integers(0, 2**40)))
def test_each_window_is_served_floor_or_ceil_times_and_never_again_before_every_other_came_once(mix, seed, epoch, salt):
    weights, sizes, windows, epoch_of = mix
    counts = mixture.epoch_counts(weights, sizes, windows, epoch_of)
    src, win = mixture.mixture_epoch(counts, sizes, seed, epoch, salt, weights)
    assert src.dtype == np.int32 and win.dtype == np.int64 and len(src) == len(win) == sum(counts)
    for i, (c, n, seq) in enumerate(zip(counts, sizes, source_sequences(src, win, len(sizes)))):
        assert len(seq) == c
        times = np.bincount(seq, minlength=n)
        assert len(times) == n  # every window number is one of the source's
        if c:
            assert {int(times.min()), int(times.max())} <= {c // n, -(-c // n)}
        # walking the source's windows in the order served: the counts never differ by more than one
        seen = np.zeros(n, np.int64)
        for v in seq.tolist():
            assert seen[v] == seen.min(), f"source {i}: window {v} came again before every other came once"
            seen[v] += 1
        # and they are whole seeded permutations, then the start of one more
        assert seq.tolist() == expected_windows(c, n, seed, epoch, i, salt)
        assert mixture.repeats(counts, sizes)[i] == ((c // n, -(-c // n)) if c else (0, 0))


def test_a_repeated_source_walks_whole_permutations():
    # 0.5/0.5 over 20 windows: the 3-window source serves 10, i.e. three whole permutations and one more window
    counts = mixture.epoch_counts(["0.5", "0.5"], [10, 3], windows=20)
    assert counts == [10, 10]
    src, win = mixture.mixture_epoch(counts, [10, 3], seed=5, epoch=0, weights=["0.5", "0.5"])
    seq = win[src == 1].tolist()
    assert [sorted(seq[k : k + 3]) for k in (0, 3, 6)] == [[0, 1, 2]] * 3
    assert sorted(np.bincount(seq).tolist()) == [3, 3, 4]


def test_a_new_epoch_draws_new_permutations_and_the_same_order():
    counts, sizes, w = [300, 200, 100], [400, 300, 100], ["3", "2", "1"]
    a_src, a_win = mixture.mixture_epoch(counts, sizes, seed=1, epoch=0, weights=w)
    b_src, b_win = mixture.mixture_epoch(counts, sizes, seed=1, epoch=1, weights=w)
    c_src, c_win = mixture.mixture_epoch(counts, sizes, seed=2, epoch=0, weights=w)
    s_src, s_win = mixture.mixture_epoch(counts, sizes, seed=1, epoch=0, salt=9, weights=w)
    assert np.array_equal(a_src, b_src) and np.array_equal(a_src, c_src) and np.array_equal(a_src, s_src)
    for other in (b_win, c_win, s_win):
        assert not np.array_equal(a_win, other)
    again = mixture.mixture_epoch(counts, sizes, seed=1, epoch=0, weights=w)
    assert np.array_equal(again[0], a_src) and np.array_equal(again[1], a_win)  # pure


# -- the order: exact in every prefix --

@SETTINGS
@given(mixes(max_sources=6, max_size=80))
def test_every_prefix_is_within_one_window_of_the_requested_weights(mix):
    weights, sizes, windows, epoch_of = mix
    counts = mixture.epoch_counts(weights, sizes, windows, epoch_of)
    assert weights_band(mixture.deadline_order(counts, weights), counts, weights) < 1


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(["1", "2", "3", "5", "0.6", "0.3", "0.1", "0.25", "7"]), min_size=2, max_size=3),
       st.integers(1, 24))
def test_the_order_keeps_the_least_band_any_order_of_the_counts_can_keep(weights, E):
    counts = mixture.epoch_counts(weights, [10**6] * len(weights), windows=E)
    _, Q = integer_weights(weights)
    assert Q <= mixture.BAND_STEPS  # the search is exact here
    assert weights_band(mixture.deadline_order(counts, weights), counts, weights) == least_band(counts, weights)


def test_counts_off_by_a_window_or_more_are_refused():
    with pytest.raises(ConfigError, match="not within one window"):
        mixture.deadline_order([8, 2], ["0.5", "0.5"])  # 8 of 10 at one half: three windows off at the end


def test_the_order_by_hand():
    # equal weights: round robin, ties to the earlier source (any first window is 2/3 off the others)
    assert mixture.deadline_order([2, 2, 2], ["1", "1", "1"]).tolist() == [0, 1, 2, 0, 1, 2]
    # 3:1 (Q = 4): the least band is ½ (after 2 windows, 2:0 and 1:1 are both ½ off); within it, web's
    # first window is due at once, books' released at 2; web's second is due at 3 with books: tie → web
    assert mixture.deadline_order([3, 1], ["3", "1"]).tolist() == [0, 0, 1, 0]
    assert mixture.epoch_counts(["1", "100", "1"], [9] * 3, windows=5) == [0, 5, 0]  # 0.05, 4.9, 0.05
    assert mixture.deadline_order([0, 5, 0], ["1", "100", "1"]).tolist() == [1] * 5  # one live source
    assert mixture.deadline_order([0, 0], ["1", "1"]).tolist() == []
    # 0.6/0.3/0.1 over 10: books once, mid-epoch; the least band, 0.6 (after one window, 1:0:0 or 0:1:0)
    order = mixture.deadline_order([6, 3, 1], ["0.6", "0.3", "0.1"])
    assert weights_band(order, [6, 3, 1], ["0.6", "0.3", "0.1"]) == Fraction(3, 5) == least_band([6, 3, 1], ["0.6", "0.3", "0.1"])
    assert order.tolist().count(2) == 1 and order.tolist().index(2) in range(2, 8)


def test_a_long_skewed_epoch_stays_within_one_window():
    w = ["0.999001", "0.0007", "0.000299"]
    counts = mixture.epoch_counts(w, [10**7] * 3, windows=1_000_000)
    assert counts == [999_001, 700, 299]
    assert weights_band(mixture.deadline_order(counts, w), counts, w) < 1


# -- plans made before "prefix": "weights": Tijdeman's rule at the counts' rates --

@SETTINGS
@given(st.lists(st.integers(0, 60), min_size=1, max_size=7))
def test_a_plan_made_before_keeps_every_prefix_within_one_minus_one_over_2m_minus_2_of_its_counts_rates(counts):
    check_prefix_bound(mixture.interleave(counts), counts)


def test_a_plan_made_before_keeps_its_order_by_hand():
    assert mixture.interleave([2, 2, 2]).tolist() == [0, 1, 2, 0, 1, 2]
    # 3:1 with m = 2 (bound ½): t=1 only web is due (2·(3·1 − 0) ≥ 4); t=2 both are, tie → web;
    # t=3 web is ahead (2·(9 − 8) < 4), books due; t=4 web
    assert mixture.interleave([3, 1]).tolist() == [0, 0, 1, 0]
    assert mixture.interleave([0, 5, 0]).tolist() == [1] * 5  # one live source
    assert mixture.interleave([0, 0]).tolist() == []
    src, _ = mixture.mixture_epoch([6, 3, 1], [6, 3, 1], 0, 0, prefix=mixture.PREFIX_COUNTS)
    assert np.array_equal(src, mixture.interleave([6, 3, 1]))


# -- the C kernel and the Python loop --

@settings(max_examples=80, deadline=None)
@given(st.lists(st.one_of(DECIMALS, st.integers(1, 40).map(str)), min_size=1, max_size=8), st.integers(1, 1500),
       st.integers(0, 2**32), st.integers(0, 4), st.one_of(st.none(), st.integers(0, 2**40)))
def test_the_c_kernel_and_the_python_loop_give_the_same_epoch(weights, E, seed, epoch, salt):
    from winsample import _fast  # the C module itself, whichever way the fixture set FAST

    assert all(hasattr(_fast, k) for k in ("deadline_order", "interleave", "gather_by_source")), \
        "winsample._fast is built without the mixture kernels: run `pip install -e .`"
    counts = mixture.epoch_counts(weights, [10**6] * len(weights), windows=E)
    sizes = [max(1, c // 3 + 1) for c in counts]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(bnd, "FAST", _fast)
        fast = (mixture.interleave(counts), *mixture.mixture_epoch(counts, sizes, seed, epoch, salt, weights))
        mp.setattr(bnd, "FAST", None)
        slow = (mixture.interleave(counts), *mixture.mixture_epoch(counts, sizes, seed, epoch, salt, weights))
    for a, b in zip(fast, slow):
        assert a.dtype == b.dtype and np.array_equal(a, b)


# -- winsample mix: --windows, --epoch-of, --seed --

_TMP = tempfile.TemporaryDirectory(prefix="mix-plans-")


def plan_file(folder: Path, name: str, n_windows: int, span: int = 9) -> Path:
    """A window plan of ``n_windows`` regular windows (no token file needed to mix it)."""
    starts = np.arange(n_windows, dtype=np.int64) * span
    rows = planning.make_rows(starts, np.full(n_windows, span, np.int64), np.zeros(n_windows, np.int64))
    path = folder / f"{name}.plan.npy"
    formats.write_plan(path, rows, {"params": {"T": span - 1, "span": span, "targets": True},
                                    "source": {"tokens": int(n_windows * span), "dtype": "<u2"}})
    return path


def mix(folder: Path, *args):
    r = CliRunner().invoke(main, ["mix", *[str(a) for a in args], "--json", "-q"])
    return r, (json.loads(r.stdout) if r.exit_code == 0 else None)


@pytest.fixture
def three(tmp_path):
    return [plan_file(tmp_path, n, k) for n, k in (("web", 1000), ("code", 1000), ("books", 1000))]


def test_mix_over_an_older_pair_whose_sidecar_is_a_link_writes_neither(tmp_path, three):
    """The rows and the sidecar are checked before either is written: a refused sidecar (a link,
    which writing it whole would replace) never leaves new rows beside the old sidecar."""
    web, code, _ = three
    out = tmp_path / "m.plan.npy"
    assert mix(tmp_path, f"web=1:{web}", f"code=1:{code}", "-o", out)[0].exit_code == 0
    before = out.read_bytes()
    real = tmp_path / "elsewhere.json"
    real.write_bytes(formats.plan_sidecar(out).read_bytes())
    formats.plan_sidecar(out).unlink()
    formats.plan_sidecar(out).symlink_to(real)
    r, _ = mix(tmp_path, f"web=2:{web}", f"code=1:{code}", "-o", out)
    assert r.exit_code == 2 and "m.plan.npy.json: cannot write: it is a symbolic link" in r.stderr
    assert out.read_bytes() == before and formats.plan_sidecar(out).is_symlink()


def test_mix_default_windows_and_epoch_of_write_those_counts(tmp_path, three):
    web, code, books = three
    srcs = [f"web=0.6:{web}", f"code=0.3:{code}", f"books=0.1:{books}"]
    for extra, want, rule in (([], [1000, 500, 166], {"rule": "first-exhausted", "prefix": "weights"}),
                              (["--windows", "10"], [6, 3, 1], {"rule": "windows", "windows": 10, "prefix": "weights"}),
                              (["--epoch-of", "code"], [2000, 1000, 333], {"rule": "epoch-of", "source": "code", "prefix": "weights"})):
        out = tmp_path / f"mix{len(extra)}{rule['rule']}.plan.npy"
        r, rep = mix(tmp_path, *srcs, "-o", out, *extra)
        assert r.exit_code == 0, r.output
        assert [s["count"] for s in rep["sources"]] == want and rep["windows"] == sum(want)
        plan = read_plan(out)
        rows, side = plan.rows, plan.sidecar
        assert rows["count"].tolist() == want and rows["windows"].tolist() == [1000, 1000, 1000]
        raw = json.loads(Path(formats.plan_sidecar(out)).read_text())
        assert raw["params"]["mixture"] == rule and raw["params"]["seed"] is None
        assert [s.name for s in side.sources] == ["web", "code", "books"]
        assert [s.weight for s in side.sources] == ["0.6", "0.3", "0.1"]  # kept as written
    r, rep = mix(tmp_path, *srcs, "-o", tmp_path / "seeded.plan.npy", "--seed", "77")
    assert r.exit_code == 0 and json.loads(Path(formats.plan_sidecar(tmp_path / "seeded.plan.npy")).read_text())["params"]["seed"] == 77


def test_mix_refuses_windows_with_epoch_of_and_an_unknown_epoch_of_source(tmp_path, three):
    web, code, _ = three
    srcs = [f"web=0.6:{web}", f"code=0.3:{code}"]
    r, _ = mix(tmp_path, *srcs, "-o", tmp_path / "m.plan.npy", "--windows", "5", "--epoch-of", "web")
    assert r.exit_code == 2 and "--windows and --epoch-of" in r.stderr
    r, _ = mix(tmp_path, *srcs, "-o", tmp_path / "m.plan.npy", "--epoch-of", "books")
    assert r.exit_code == 2 and "books" in r.stderr and "web, code" in r.stderr
    assert not (tmp_path / "m.plan.npy").exists()


def test_mix_never_writes_over_another_plans_materialized_windows(tmp_path, three):
    """`-o books.plan.tokens.npy` put a mixture where plan books.plan.npy (no source of it) has
    its windows served from."""
    web, code, books = three
    victim = formats.materialized_path(books)
    victim.write_bytes(b"the windows of books")
    r, _ = mix(tmp_path, f"web=1:{web}", f"code=1:{code}", "-o", victim)
    assert r.exit_code == 2 and f"is the materialized windows of the plan {books}" in r.stderr
    assert victim.read_bytes() == b"the windows of books" and not formats.plan_sidecar(victim).exists()
