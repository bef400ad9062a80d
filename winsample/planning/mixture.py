"""Mixtures: several window plans served by weight, exact in every prefix; pure functions.

For sources with weights w_i (any positive numbers; proportions of *windows*) and n_i windows:

- **Epoch length** E: given (``windows``), or one pass over source j (``epoch_of``: E = ⌊n_j / w_j⌋),
  or by default one pass over the source that runs out first at its weight (j the first with the
  least n_j / w_j). Rounded down, so the default epoch asks no source for a second pass: every
  other source's share (E − n_j)·w_i/(1 − w_j) ≤ n_j·w_i/w_j ≤ n_i. Arithmetic is exact
  (fractions), so no machine rounds differently.
- **Counts** c_i: w_i × E (weights normalised) rounded by largest remainder (ties to the earlier
  source), Σ c_i = E; with ``epoch_of`` that source gets exactly its n_j.
- **Repeats**: a source asked for c_i > n_i windows walks q = ⌊c_i / n_i⌋ whole seeded
  permutations of its windows, then the first c_i − q·n_i of one more: every window is served
  ⌊c_i / n_i⌋ or ⌈c_i / n_i⌉ times, and no window comes again before every other came once.
- **Order** (``interleave``): Tijdeman's chairman-assignment rule with the epoch's own rates
  c_i / E. At position t (1-based), among the sources with c_i·t/E − s_i ≥ 1/(2m−2) (m sources
  with c_i > 0, s_i served so far), the one with the least (s_i + 1 − 1/(2m−2))·E / c_i (ties to
  the earlier source). After every prefix of k windows, |s_i − k·c_i/E| ≤ 1 − 1/(2m−2) < 1:
  each source's count is within one window of its share, so a run stopped early saw the mix.
  (Megatron's largest-error rule can drift past 1.) Integer arithmetic throughout; the C
  kernel (``_fast.c``'s ``interleave``) and the Python loop give the same order.
- **Epochs**: epoch e's permutations come from ``np.random.default_rng([seed, e, 3, i, pass])``
  (the Loader's seed; a mixture made with ``mix --seed S`` appends S), so a new epoch draws new
  permutations; the interleave depends on the counts only.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..errors import ConfigError
from . import boundaries as bnd

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


def largest_remainder(weights: list[Fraction], total: int) -> list[int]:
    """Integers summing to ``total``, each ⌊w_i × total⌋ or one more (largest remainders first,
    ties to the earlier index), for weights summing to 1."""
    exact = [w * total for w in weights]
    base = [int(x) for x in exact]  # floor: every x >= 0
    left = total - sum(base)
    for i in sorted(range(len(exact)), key=lambda i: (-(exact[i] - base[i]), i))[:left]:
        base[i] += 1
    return base


def epoch_counts(weights, sizes: list[int], windows: int | None = None, epoch_of: int | None = None) -> list[int]:
    """Windows per source in one epoch (module docstring): ``windows`` = E, or one pass over
    source ``epoch_of``, or one pass over the source that runs out first."""
    w = [as_fraction(x) for x in weights]
    total = sum(w)
    w = [x / total for x in w]
    if windows is not None:
        if windows < 1:
            raise ConfigError(f"--windows must be at least 1, got {windows}")
        return largest_remainder(w, int(windows))
    if epoch_of is None:
        epoch_of = min(range(len(w)), key=lambda i: (Fraction(sizes[i]) / w[i], i))
    n = sizes[epoch_of]
    if n == 0:
        raise ConfigError(f"source {epoch_of} has no windows: an epoch of it is empty")
    E = Fraction(n) / w[epoch_of]
    E_int = E.numerator // E.denominator  # down: no other source's share passes its n_i (docstring)
    others = [i for i in range(len(w)) if i != epoch_of]
    rest = sum(w[i] for i in others)
    counts = [0] * len(w)
    counts[epoch_of] = n
    if others:
        for i, c in zip(others, largest_remainder([w[i] / rest for i in others], E_int - n)):
            counts[i] = c
    return counts


def repeats(counts: list[int], sizes: list[int]) -> list[tuple[int, int]]:
    """(fewest, most) times a window of each source is served in an epoch (0, 0 for an unused source)."""
    out = []
    for c, n in zip(counts, sizes):
        if c == 0 or n == 0:
            out.append((0, 0))
        else:
            out.append((c // n, -(-c // n)))
    return out


def interleave(counts: list[int]) -> np.ndarray:
    """int32 source of each position of an epoch of Σ counts windows (Tijdeman's rule, module docstring)."""
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


def mixture_epoch(counts: list[int], sizes: list[int], seed: int, epoch: int,
                  salt: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(source, window) of every position of ``epoch``: int32 and int64 arrays of Σ counts."""
    order = interleave(counts)
    counts = [int(c) for c in counts]
    offsets = np.cumsum([0] + counts[:-1]).astype(np.int64)
    flat = np.empty(len(order), np.int64)  # each source's windows in its serving order, source after source
    window = np.empty(len(order), np.int64)
    spare = [window]  # a partial pass is shuffled in the output's memory before the output is written
    for i, (c, n) in enumerate(zip(counts, sizes)):
        _fill_source(flat[offsets[i] : offsets[i] + c], int(n), seed, epoch, i, salt, spare)
    del spare
    if bnd.FAST is not None and hasattr(bnd.FAST, "gather_by_source") and len(order):
        bnd.FAST.gather_by_source(order, flat, offsets, window)
        return order, window
    for i, c in enumerate(counts):
        if c:
            window[order == i] = flat[offsets[i] : offsets[i] + c]
    return order, window
