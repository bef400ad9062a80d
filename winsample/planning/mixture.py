"""Mixtures: several window plans served by weight, exact in every prefix; pure functions.

For sources with weights w_i (any positive numbers, normalised to sum 1; proportions of *windows*)
and n_i windows:

- **Epoch length** E: given (``windows``), or one pass over source j (``epoch_of``: E = ⌊n_j / w_j⌋),
  or by default one pass over the source that runs out first at its weight (j the first with the
  least n_j / w_j). Rounded down, so the default epoch asks no source for a second pass:
  E·w_i ≤ n_j·w_i/w_j ≤ n_i, so even ⌈E·w_i⌉ ≤ n_i. Arithmetic is exact (fractions), so no
  machine rounds differently.
- **Counts** c_i: each E·w_i rounded down or up, Σ c_i = E: by largest remainder (ties to the
  earlier source), except where no order of those counts could keep every prefix within one window
  of the weights. That happens (9:9:1:1:1 over 8 windows: largest remainder gives 4, 4, 0, 0, 0, but
  after 7 windows each big source may have served only 3, and position 8 cannot take both 4th
  windows), and the test for it is exact (the tail test, below): the sources to round down are
  taken smallest remainder first, each kept down only if the test still passes. Those constraints
  are nested, so this greedy gives the rounding largest remainder would pick among those that pass,
  and one always passes (Tijdeman: some infinite order stays within 1 − 1/(2m−2) of every share).
  With ``epoch_of`` (and the default) source j is rounded up first, which gives it exactly its
  n_j (E·w_j lies in (n_j − 1, n_j]).
  *Tail test*: with w_i = a_i / Q in integers and c_i the floors, a set D of sources rounded down
  admits an order within one window iff for every u = 0 … E − 1,
  #{i ∈ D : u·a_i > c_i·Q} ≤ G(u) = Σ_i ⌈u·a_i / Q⌉ − u (Hall's condition for the positions after
  u, below; the sources counted are those whose share has passed their count before the end).
- **Repeats**: a source asked for c_i > n_i windows walks q = ⌊c_i / n_i⌋ whole seeded
  permutations of its windows, then the first c_i − q·n_i of one more: every window is served
  ⌊c_i / n_i⌋ or ⌈c_i / n_i⌉ times, and no window comes again before every other came once.
- **Order** (``deadline_order``): after every prefix of k windows, each source's count s_i(k) is
  within one window of the *requested* share, |s_i(k) − k·w_i| < 1 for k = 1 … E, and as near as
  any order of these counts can keep it (to 1/1024 of a window; exactly for weights over Q ≤ 1024).
  With w_i = a_i / Q in integers, a band N (|s_i(k)·Q − k·a_i| ≤ N at every k) lets source i's j-th
  window stand at position p only from its release r_ij = ⌈(jQ − N)/a_i⌉ (not ahead of its share)
  to its deadline d_ij = min(⌊((j−1)Q + N)/a_i⌋ + 1, E) (no earlier prefix behind it). Positions
  are filled one by one with the released window of the earliest deadline (ties to the earlier
  source): earliest-deadline-first, which for unit jobs with integer releases and deadlines meets
  every deadline whenever any order does; so a binary search over N finds the least band any order
  meets, and the order EDF gives for it. N = Q − 1 (< 1 window) is always met (Hall's condition:
  for that band the windows whose [r, d] lie inside positions [a, b] number at most ⌊m·w_i⌋ per
  source, m = b − a + 1, since those j lie in [(a−1)·w_i + 1, b·w_i]; Σ ≤ m; inside [1, b] at most
  ⌊b·w_i⌋, Σ ≤ b; inside [u + 1, E] (deadlines end at E) max(0, c_i − ⌈u·w_i⌉), whose sum is
  E − u − G(u) plus one for each source rounded down whose share passed its count: the tail test,
  which the counts pass). Integer arithmetic throughout, in C (``_fast.c``'s ``deadline_order``) and
  in the Python loop, which give the same order. Megatron's largest-error rule can drift past one
  window, and so could an order at the counts' own rates c_i / E when E·w_i is not whole.
- **Plans written before** (their ``params.mixture`` has no ``"prefix": "weights"``) keep the rule
  they were made with, so a resumed run is served the same order: counts with ``epoch_of`` giving
  the other sources the rest by largest remainder of their weights among themselves, and the
  order by Tijdeman's chairman-assignment rule at the counts' rates c_i / E (``interleave``):
  |s_i(k) − k·c_i/E| ≤ 1 − 1/(2m−2) for m sources with c_i > 0.
- **Epochs**: epoch e's permutations come from ``np.random.default_rng([seed, e, 3, i, pass])``
  (the Loader's seed; a mixture made with ``mix --seed S`` appends S), so a new epoch draws new
  permutations; the order depends on the weights and counts only.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ..errors import ConfigError
from . import boundaries as bnd

BAND_STEPS = 1024  # the order's band is searched to 1/1024 of a window (exact for weights over Q ≤ 1024)
MIX_STREAM = 3  # third word of a mixture source's permutation seed: [seed, epoch, 3, source, pass]


def as_fraction(w) -> Fraction:
    """An exact weight: a decimal string as written ("0.6" is 3/5), an int, or a float's exact value."""
    try:
        f = Fraction(w) if not isinstance(w, float) else Fraction(w)
    except (ValueError, TypeError, ZeroDivisionError):
        raise ConfigError(f"weight {w!r} is not a number") from None
    if f <= 0:
        raise ConfigError(f"weight {w!r} must be positive")
    return f


PREFIX_WEIGHTS = "weights"  # params.mixture["prefix"] of a mixture made now: the order keeps each source near w_i·k
PREFIX_COUNTS = "counts"  # a mixture plan without it (made before): the order at its counts' rates c_i / E


def prefix_rule(rule) -> str:
    """Which rule a mixture plan was made with, from its ``params.mixture`` (module docstring)."""
    return PREFIX_WEIGHTS if isinstance(rule, dict) and rule.get("prefix") == PREFIX_WEIGHTS else PREFIX_COUNTS


def unmixable(params) -> str | None:
    """Why a source plan with these params (``PlanParams``) cannot be mixed, else None: a
    ``--random-offset`` plan is re-cut every epoch when the Loader serves it alone, while a
    mixture serves each source's windows as they are (its counts are fixed for every epoch)."""
    if params.random_offset:
        return ("it was planned with --random-offset, which the Loader re-cuts every epoch when it serves the plan"
                " alone, while a mixture serves the windows as they are in every epoch: mix a plan made without it"
                " (--offset sets a fixed first start)")
    return None


def largest_remainder(weights: list[Fraction], total: int) -> list[int]:
    """Integers summing to ``total``, each ⌊w_i × total⌋ or one more (largest remainders first,
    ties to the earlier index), for weights summing to 1 (a plan made before ``"prefix": "weights"``;
    ``rounded_shares`` now)."""
    exact = [w * total for w in weights]
    base = [int(x) for x in exact]  # floor: every x >= 0
    left = total - sum(base)
    for i in sorted(range(len(exact)), key=lambda i: (-(exact[i] - base[i]), i))[:left]:
        base[i] += 1
    return base


def normalised(weights) -> list[Fraction]:
    """The weights as exact fractions summing to 1 (each checked: ``as_fraction``)."""
    w = [as_fraction(x) for x in weights]
    total = sum(w)
    return [x / total for x in w]


def epoch_counts(weights, sizes: list[int], windows: int | None = None, epoch_of: int | None = None,
                 prefix: str = PREFIX_WEIGHTS) -> list[int]:
    """Windows per source in one epoch (module docstring): ``windows`` = E, or one pass over
    source ``epoch_of``, or one pass over the source that runs out first; ``prefix`` the rule
    (``PREFIX_COUNTS`` for a plan made before ``"prefix": "weights"``)."""
    w = normalised(weights)
    if windows is not None:
        if windows < 1:
            raise ConfigError(f"--windows must be at least 1, got {windows}")
        return largest_remainder(w, int(windows)) if prefix == PREFIX_COUNTS else rounded_shares(weights, int(windows))
    if epoch_of is None:
        epoch_of = min(range(len(w)), key=lambda i: (Fraction(sizes[i]) / w[i], i))
    n = sizes[epoch_of]
    if n == 0:
        raise ConfigError(f"source {epoch_of} has no windows: an epoch of it is empty")
    E = Fraction(n) / w[epoch_of]
    E_int = E.numerator // E.denominator  # down: no other source's share passes its n_i (docstring)
    if prefix == PREFIX_WEIGHTS:
        counts = rounded_shares(weights, E_int, first=epoch_of)
        if counts[epoch_of] != n:  # E·w_j is in (n − 1, n], rounded up first: not met in any mix tried
            raise ConfigError(f"one pass over source {epoch_of} ({n} windows) at its weight leaves no order within one"
                              f" window of the weights: give the epoch's length with --windows")
        return counts
    others = [i for i in range(len(w)) if i != epoch_of]
    rest = sum(w[i] for i in others)
    counts = [0] * len(w)
    counts[epoch_of] = n
    if others:
        for i, c in zip(others, largest_remainder([w[i] / rest for i in others], E_int - n)):
            counts[i] = c
    return counts


def rounded_shares(weights, E: int, first: int | None = None) -> list[int]:
    """c_i = ⌊E·w_i⌋ or one more, Σ c_i = E, that some order keeps within one window of the weights
    in every prefix: the largest remainders rounded up (ties to the earlier source; ``first``
    before every other when its share is not whole), except that a source is kept rounded down
    only while the tail test allows (module docstring, Counts)."""
    a, Q = integer_weights(weights)
    base = [E * x // Q for x in a]
    left = E - sum(base)
    frac = [E * x - b * Q for x, b in zip(a, base)]  # Q × the fractional part of E·w_i
    if left == 0:
        return base
    tail = _Tail(a, Q, E, base)
    # Rounded down, in the order largest remainder would leave them down: smallest fraction first,
    # ties to the later source (largest remainder gives ties to the earlier).
    order = sorted((i for i in range(len(a)) if frac[i] > 0), key=lambda i: (frac[i], -i))
    want = len(order) - left
    for forced in ([first] if first is not None and frac[first] > 0 else []) + [None]:
        down: list[int] = []
        for i in order:
            if len(down) == want:
                break
            if i != forced and tail.fits(down + [i]):
                down.append(i)
        if len(down) == want:
            return [b + (f > 0 and i not in down) for i, (b, f) in enumerate(zip(base, frac))]
    raise ConfigError(f"no rounding of the shares {a} / {Q} over {E} windows keeps every prefix within one window")


class _Tail:
    """The tail test of ``rounded_shares``: sources rounded down (set ``down``) leave an order within
    one window of the weights iff, for every prefix u = 0 … E − 1, #{i ∈ down : u·a_i > c_i·Q}
    (those whose share has passed their count) ≤ G(u) = Σ_i ⌈u·a_i / Q⌉ − u."""

    def __init__(self, a: list[int], Q: int, E: int, base: list[int]):
        self.a, self.Q, self.E = a, Q, E
        self.after = [c * Q // x + 1 for x, c in zip(a, base)]  # the first u with u·a_i > c_i·Q

    def fits(self, down: list[int]) -> bool:
        lo = min(self.after[i] for i in down)
        starts = np.sort(np.array([self.after[i] for i in down], np.int64))
        big = self.E * self.Q >= 1 << 62
        for u0 in range(lo, self.E, 1 << 20):
            u = np.arange(u0, min(u0 + (1 << 20), self.E), dtype=np.int64)
            uu = u.astype(object) if big else u
            g = sum(-((-uu * x) // self.Q) for x in self.a) - uu
            behind = np.searchsorted(starts, u, side="right")  # sources with after ≤ u
            if (behind > np.asarray(g, np.int64)).any():
                return False
        return True


def repeats(counts: list[int], sizes: list[int]) -> list[tuple[int, int]]:
    """(fewest, most) times a window of each source is served in an epoch (0, 0 for an unused source)."""
    out = []
    for c, n in zip(counts, sizes):
        if c == 0 or n == 0:
            out.append((0, 0))
        else:
            out.append((c // n, -(-c // n)))
    return out


def integer_weights(weights) -> tuple[list[int], int]:
    """(a, Q): positive integers with a_i / Q the normalised weights exactly, Q = Σ a_i, reduced."""
    w = normalised(weights)
    den = 1
    for x in w:
        den = den * x.denominator // math.gcd(den, x.denominator)
    a = [x.numerator * (den // x.denominator) for x in w]
    g = 0
    for x in a:
        g = math.gcd(g, x)
    a = [x // g for x in a]
    return a, sum(a)


def order(counts: list[int], weights, prefix: str = PREFIX_WEIGHTS) -> np.ndarray:
    """int32 source of each position of an epoch of Σ counts windows, by the plan's rule:
    ``deadline_order`` (``PREFIX_WEIGHTS``) or ``interleave`` (``PREFIX_COUNTS``)."""
    return deadline_order(counts, weights) if prefix == PREFIX_WEIGHTS else interleave(counts)


def deadline_order(counts: list[int], weights) -> np.ndarray:
    """int32 source of each position of an epoch of E = Σ counts windows whose every prefix is as
    near the weights as any order of these counts can be, and within one window (module
    docstring). ``counts`` must be within one of E·w_i each (``epoch_counts``)."""
    c = [int(x) for x in counts]
    E = sum(c)
    if E == 0:
        return np.zeros(0, np.int32)
    a, Q = integer_weights(weights)
    if len(a) != len(c) or min(c) < 0:
        raise ConfigError(f"{len(c)} counts for {len(a)} weights, or a count below 0")
    lo = max(abs(ci * Q - E * ai) for ci, ai in zip(c, a))  # the last prefix, k = E, is the counts themselves
    if lo >= Q:
        raise ConfigError(f"counts {c} are not within one window of the weights {a} / {Q} over {E}")
    out = np.empty(E, np.int32)
    # The least band N any order meets, searched over at most BAND_STEPS + 1 values from lo to
    # Q − 1 (exact when Q ≤ BAND_STEPS, else to 1/BAND_STEPS of a window): EDF meets a band
    # whenever any order does, and Q − 1 (< 1 window) is always met (module docstring).
    step = max(1, -(-(Q - 1 - lo) // BAND_STEPS))

    def band(m: int) -> int:
        return min(lo + m * step, Q - 1)

    m_lo, m_hi = 0, -(-(Q - 1 - lo) // step)
    while m_lo < m_hi:
        mid = (m_lo + m_hi) // 2
        if _band_order(a, Q, c, band(mid), out):
            m_hi = mid
        else:
            m_lo = mid + 1
    if not _band_order(a, Q, c, band(m_lo), out):
        raise ConfigError(f"counts {c} over {E}: no order keeps every prefix within one window of the weights"
                          f" {a} / {Q}")  # not reached: the bound is proved (module docstring)
    return out


def _band_order(a: list[int], Q: int, c: list[int], N: int, out: np.ndarray) -> bool:
    """Fill ``out`` earliest deadline first within band N (|s_i·Q − k·a_i| ≤ N at every prefix);
    False when a deadline is missed (no order keeps that band)."""
    if bnd.FAST is not None and hasattr(bnd.FAST, "deadline_order") and Q < 1 << 62:
        return bnd.FAST.deadline_order(np.asarray(a, np.int64), np.asarray(c, np.int64), Q, N, out) == 0
    E = len(out)
    served = [0] * len(a)
    for t in range(1, E + 1):
        best, best_d = -1, 0
        for i, ai in enumerate(a):
            j = served[i] + 1  # its next window: released at ⌈(jQ − N)/a⌉, due by ⌊((j−1)Q + N)/a⌋ + 1
            if j > c[i] or -(-(j * Q - N) // ai) > t:
                continue
            d = min(((j - 1) * Q + N) // ai + 1, E)
            if best < 0 or d < best_d:
                best, best_d = i, d
        if best < 0 or best_d < t:
            return False
        out[t - 1] = best
        served[best] += 1
    return True


def interleave(counts: list[int]) -> np.ndarray:
    """int32 source of each position of an epoch of Σ counts windows at the counts' own rates
    (Tijdeman's rule; plans made before ``"prefix": "weights"``, module docstring)."""
    c = [int(x) for x in counts]
    E = sum(c)
    if E == 0:
        return np.zeros(0, np.int32)
    live = [i for i, x in enumerate(c) if x > 0]
    if len(live) == 1:
        return np.full(E, live[0], np.int32)
    out = np.empty(E, np.int32)
    if bnd.FAST is not None and hasattr(bnd.FAST, "interleave"):
        bnd.FAST.interleave(np.ascontiguousarray(c, np.int64), out)
        return out
    M = 2 * len(live) - 2  # 1 − σ = 1/M
    s = [0] * len(c)
    for t in range(1, E + 1):
        best = -1
        for i in live:
            # eligible: c_i t / E − s_i ≥ 1/M  ⇔  M (c_i t − s_i E) ≥ E
            if s[i] < c[i] and M * (c[i] * t - s[i] * E) >= E:
                # least (s_i + 1 − 1/M) / c_i  ⇔  (M s_i + M − 1) c_j < (M s_j + M − 1) c_i
                if best < 0 or (M * s[i] + M - 1) * c[best] < (M * s[best] + M - 1) * c[i]:
                    best = i
        out[t - 1] = best
        s[best] += 1
    return out


def source_windows(count: int, n: int, seed: int, epoch: int, source: int, salt: int | None = None) -> np.ndarray:
    """int64 window numbers source ``source`` serves in ``epoch``, in order: whole seeded
    permutations of range(n), then the start of one more (module docstring); ``salt`` (a
    mixture's own ``--seed``) is a last word of the seed when given."""
    out = np.empty(count, np.int64)
    _fill_source(out, n, seed, epoch, source, salt)
    return out


def _fill_source(out: np.ndarray, n: int, seed: int, epoch: int, source: int, salt: int | None,
                 spare: list | None = None) -> None:
    """``source_windows`` written into ``out`` (int64, its count long). Each pass is
    ``default_rng(words).permutation(n)``, drawn as that call draws it (``shuffle`` of arange(n)) but
    in place: a whole pass straight into ``out``, the last partial one in ``spare[0]`` (an int64
    buffer reused across sources, replaced by a bigger one when too short), so no pass is
    allocated, copied to int64 and concatenated again: at 10^8 windows those copies and their
    page faults cost as much as the shuffles."""
    left, k, at = len(out), 0, 0
    if left and n < 1:  # no window to serve again: never loop
        raise ConfigError(f"source {source}: {left} windows asked of a plan with none")
    while left > 0:
        words = [seed, epoch, MIX_STREAM, source, k] + ([salt] if salt is not None else [])
        rng = np.random.default_rng(words)
        if left >= n:
            _shuffled_range(out[at : at + n], rng)
            at, left = at + n, left - n
        else:
            buf = spare[0] if spare and len(spare[0]) >= n else np.empty(n, np.int64)
            if spare is not None:
                spare[:] = [buf]
            _shuffled_range(buf[:n], rng)
            out[at : at + left] = buf[:left]
            left = 0
        k += 1


def _shuffled_range(seg: np.ndarray, rng: np.random.Generator, piece: int = 1 << 20) -> None:
    """``seg[:] = rng.permutation(len(seg))`` without a temporary: arange written piece by piece,
    then ``rng.shuffle`` in place (what ``Generator.permutation(int)`` does, so the same numbers)."""
    for lo in range(0, len(seg), piece):
        hi = min(lo + piece, len(seg))
        seg[lo:hi] = np.arange(lo, hi, dtype=np.int64)
    rng.shuffle(seg)


def mixture_epoch(counts: list[int], sizes: list[int], seed: int, epoch: int, salt: int | None = None,
                  weights=None, prefix: str = PREFIX_WEIGHTS) -> tuple[np.ndarray, np.ndarray]:
    """(source, window) of every position of ``epoch``: int32 and int64 arrays of Σ counts, in
    ``order(counts, weights, prefix)`` (``weights`` may be left out for ``PREFIX_COUNTS``)."""
    seq = order(counts, weights, prefix)
    counts = [int(c) for c in counts]
    offsets = np.cumsum([0] + counts[:-1]).astype(np.int64)
    flat = np.empty(len(seq), np.int64)  # each source's windows in its serving order, source after source
    window = np.empty(len(seq), np.int64)
    spare = [window]  # a partial pass is shuffled in the output's memory before the output is written
    for i, (c, n) in enumerate(zip(counts, sizes)):
        _fill_source(flat[offsets[i] : offsets[i] + c], int(n), seed, epoch, i, salt, spare)
    del spare
    if bnd.FAST is not None and hasattr(bnd.FAST, "gather_by_source") and len(seq):
        bnd.FAST.gather_by_source(seq, flat, offsets, window)
        return seq, window
    for i, c in enumerate(counts):
        if c:
            window[seq == i] = flat[offsets[i] : offsets[i] + c]
    return seq, window
