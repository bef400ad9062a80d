"""planning.mixture.mixture_epoch against its documented rule, drawn here by brute force.

Source i serves whole ``np.random.default_rng([seed, epoch, 3, i, pass] (+ [salt])).permutation(n_i)``
passes, then the start of one more; position t takes the next window of source ``order(counts, weights)[t]``.
The implementation shuffles in place into shared buffers; this file draws every pass on its own.
"""

from __future__ import annotations

import numpy as np
import pytest

from winsample.planning import boundaries as bnd
from winsample.planning import mixture


def reference(counts, weights, sizes, seed, epoch, salt):
    order = mixture.order(counts, weights)
    window = np.zeros(len(order), np.int64)
    for i, (c, n) in enumerate(zip(counts, sizes)):
        draws, k = [], 0
        while sum(len(d) for d in draws) < c:
            words = [seed, epoch, 3, i, k] + ([salt] if salt is not None else [])
            draws.append(np.random.default_rng(words).permutation(n))
            k += 1
        mine = np.concatenate(draws)[:c] if draws else np.zeros(0, np.int64)
        window[np.flatnonzero(order == i)] = mine
    return order, window


CASES = [  # counts, weights (the counts are their shares), sizes, seed, epoch, salt
    ([6, 3, 1], None, [7, 4, 1], 0, 0, None),          # one source in part, one twice over, one 1-window source
    ([60, 30, 10], None, [70, 35, 5], 5, 2, 123),      # the bench's shape, salted
    ([0, 9, 4], ["1", "90", "40"], [3, 2, 9], 1, 1, None),  # an unused source (0.1 of a window); passes, then part of one
    ([13], None, [5], 2, 3, None),                     # one source
    ([500, 1], None, [2_000_000, 1], 4, 0, 7),         # a partial pass longer than the epoch (its own buffer), arange
    ([3_000_000], None, [2_500_000], 1, 1, None),      # written in 2^20 pieces; one pass whole, then part of another
]


@pytest.mark.parametrize("kernels", ["c", "numpy"])
@pytest.mark.parametrize("counts,weights,sizes,seed,epoch,salt", CASES)
def test_mixture_epoch_is_the_documented_draws(monkeypatch, kernels, counts, weights, sizes, seed, epoch, salt):
    weights = weights or [str(c) for c in counts]
    assert mixture.epoch_counts(weights, [10**7] * len(counts), windows=sum(counts)) == counts
    if kernels == "numpy":
        monkeypatch.setattr(bnd, "FAST", None)
    elif bnd.FAST is None:
        pytest.skip("C module not built")
    order, window = mixture.mixture_epoch(counts, sizes, seed, epoch, salt, weights)
    ref_order, ref_window = reference(counts, weights, sizes, seed, epoch, salt)
    assert order.dtype == np.int32 and window.dtype == np.int64
    assert np.array_equal(order, ref_order) and np.array_equal(window, ref_window)
    for i, (c, n) in enumerate(zip(counts, sizes)):
        assert np.array_equal(mixture.source_windows(c, n, seed, epoch, i, salt), window[order == i])

