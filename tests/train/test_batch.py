"""read_plan / get_batch: the training-loop API."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

import winsample
from winsample.cli import main
from winsample.errors import ConfigError, DataError


def _plan(tmp_path, n, *args):
    np.arange(n, dtype="<u2").tofile(tmp_path / "a.bin")
    r = CliRunner().invoke(main, ["windows", str(tmp_path / "a.bin"), *map(str, args), "-o", str(tmp_path / "p.npy"), "-q"])
    assert r.exit_code == 0, r.stderr
    return winsample.read_plan(tmp_path / "p.npy"), tmp_path / "a.bin"


def test_n10_t4_every_batch_row_is_an_aligned_xy_pair(tmp_path):
    plan, path = _plan(tmp_path, 10, "-T", 4, "--stride", 1)
    assert (plan.T, plan.span, len(plan)) == (4, 5, 6)
    tokens = np.memmap(path, dtype=np.uint16, mode="r")
    x, y = winsample.get_batch(plan, tokens, 500, np.random.default_rng(0))
    assert x.shape == y.shape == (500, 4) and x.dtype == y.dtype == np.int64
    assert (y == x + 1).all()  # token i is i: y is x shifted by exactly one
    assert set(x[:, 0].tolist()) == {0, 1, 2, 3, 4, 5}  # every legal start drawn, none past N-T-1 = 5


def test_same_rng_seed_same_batch_and_path_accepted(tmp_path):
    plan, path = _plan(tmp_path, 1000, "-T", 16)
    a = winsample.get_batch(plan, path, 8, 3)
    b = winsample.get_batch(plan, np.memmap(path, dtype=np.uint16, mode="r"), 8, np.random.default_rng(3))
    assert (a[0] == b[0]).all() and (a[1] == b[1]).all()


def test_short_windows_are_never_drawn(tmp_path):
    plan, path = _plan(tmp_path, 30, "-T", 7, "--stride", 8, "--tail", "short")
    assert plan.rows["length"].tolist() == [8, 8, 8, 7]  # the short tail [23, 30)
    x, _ = winsample.get_batch(plan, path, 200, 0)
    assert set(x[:, 0].tolist()) == {0, 8, 16}


def test_no_full_window_is_a_data_error(tmp_path):
    plan, path = _plan(tmp_path, 8, "-T", 8)
    with pytest.raises(DataError, match="no full-length window"):
        winsample.get_batch(plan, path, 2, 0)


def test_no_targets_plan_is_refused(tmp_path):
    plan, path = _plan(tmp_path, 100, "-T", 8, "--no-targets")
    with pytest.raises(ConfigError, match="no-targets"):
        winsample.get_batch(plan, path, 2, 0)


def test_get_batch_refuses_tokens_of_another_length(tmp_path):
    """A plan made for 100 tokens used with 60: a clear DataError, not an IndexError."""
    p = tmp_path / "a.bin"
    np.arange(100, dtype="<u2").tofile(p)
    assert CliRunner().invoke(main, ["windows", str(p), "-T", "8", "-o", str(tmp_path / "p.npy"), "-q"]).exit_code == 0
    plan = winsample.read_plan(tmp_path / "p.npy")
    with pytest.raises(DataError, match="made for 100 tokens"):
        winsample.get_batch(plan, np.arange(60, dtype="<u2"), 4, 0)


def test_get_batch_takes_the_plan_as_a_path_like_the_tokens(tmp_path):
    """``get_batch("p.npy", "a.bin", …)``: the plan's path reads as ``read_plan`` reads it, as the
    Loader takes it (it was an AttributeError: 'str' object has no attribute 'targets')."""
    plan, path = _plan(tmp_path, 1000, "-T", 16)
    a = winsample.get_batch(plan, path, 8, 3)
    for given in (str(tmp_path / "p.npy"), tmp_path / "p.npy"):
        b = winsample.get_batch(given, str(path), 8, 3)
        assert (a[0] == b[0]).all() and (a[1] == b[1]).all()


def test_get_batch_given_the_rows_alone_says_to_pass_the_path(tmp_path):
    """``np.load("p.npy")`` is the rows without the sidecar (no T, no targets): a clear error,
    not AttributeError: 'numpy.ndarray' object has no attribute 'targets'."""
    plan, path = _plan(tmp_path, 1000, "-T", 16)
    with pytest.raises(ConfigError, match="not a ndarray: pass the .npy's path"):
        winsample.get_batch(np.load(tmp_path / "p.npy"), path, 8, 3)


@pytest.mark.parametrize("rng", [None, -1, 1.5, "7", True])
def test_get_batch_takes_randomness_only_from_an_explicit_seed(tmp_path, rng):
    # rng=None drew from the OS's entropy: batches no run could repeat
    plan, path = _plan(tmp_path, 100, "-T", 8)
    with pytest.raises(ConfigError, match="rng must be a np.random.Generator or an int seed"):
        winsample.get_batch(plan, path, 2, rng)


@pytest.mark.parametrize("bad", [0, -1, 2.0, "8", True, None, 10**10])
def test_get_batch_and_the_loader_refuse_a_batch_size_that_is_no_size(bad):
    """One ConfigError line before anything is read (10**10 windows would ask for ~74 GiB)."""
    import winsample
    from winsample.errors import ConfigError

    with pytest.raises(ConfigError, match="batch_size must be"):
        winsample.get_batch("no-such-plan.npy", "no-such.bin", bad, 0)
    with pytest.raises(ConfigError, match="batch_size must be"):
        winsample.Loader("no-such-plan.npy", "no-such.bin", bad, 0)


def test_the_api_loaded_on_first_use_is_listed_by_dir_before_it_loads():
    """dir(winsample) and tab completion show Loader, get_batch, chunk, … although `import winsample`
    loads none of them (a fresh interpreter: this one's tests have loaded them already)."""
    import subprocess
    import sys

    code = ("import sys, winsample; names = dir(winsample); "
            "print(sorted(n for n in winsample.__all__ if n not in names), 'winsample.train' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["[]", "False"]
