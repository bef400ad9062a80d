"""verify's overlapped work (plans prepared during the scan, range figures on a helper thread)
gives the same report as doing each step in turn."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from winsample import disk, formats, verify
from winsample.errors import DataError
from winsample.verify import plan_windows, run
from winsample.verify import scan as scan_mod

from .test_run import make_folder, make_plan, write_bin


def _prepared_nothing(plan_path, path, folder, sizes, encoding=None):
    """Stand-in for prepare_plan that only reads: check_plan must then compute everything itself."""
    try:
        return verify.Prepared(*formats.load_plan(plan_path))
    except DataError as e:
        return e


@pytest.mark.parametrize("layout", ["sorted", "shuffled", "duplicates", "out_of_bounds", "gapped"])
def test_report_is_the_same_with_and_without_plans_prepared_during_the_scan(tmp_path, monkeypatch, layout):
    rng = np.random.default_rng(7)
    ids = rng.integers(0, 50257, 5000)
    folder = make_folder(tmp_path / "d", ids, ids[:400])
    starts = {"sorted": np.arange(0, 4900, 50), "shuffled": rng.permutation(np.arange(0, 4900, 50)),
              "duplicates": np.r_[np.arange(0, 2000, 50), [100, 100]], "out_of_bounds": np.r_[0, 4990, 100],
              "gapped": np.arange(0, 4900, 300)}[layout]
    plan = make_plan(tmp_path / "p.npy", folder / "train.bin", starts, 101, T=100, shuffle=layout == "shuffled")
    monkeypatch.setattr(disk.checksums, "CHUNK_BYTES", 2 * 333)  # many chunks: the helper thread lags and catches up
    overlapped = verify.verify(folder, [plan]).to_dict()
    monkeypatch.setattr(run, "prepare_plan", _prepared_nothing)
    monkeypatch.setattr(scan_mod, "AHEAD", 0)
    serial = verify.verify(folder, [plan]).to_dict()
    assert overlapped == serial
    names = {c["name"]: c["status"] for c in serial["checks"] if c["file"] == "p.npy"}
    want_dup = "fail" if layout == "duplicates" else "pass"
    assert names["duplicates"] == want_dup and (names["plan_bounds"] == "fail") == (layout == "out_of_bounds")


@settings(max_examples=100, deadline=None)
@given(n=st.integers(1, 300), wins=st.lists(st.tuples(st.integers(-20, 320), st.integers(0, 60)), max_size=40))
def test_coverage_of_start_ordered_windows_skips_the_sort_with_the_same_figures(n, wins):
    start = np.array(sorted(s for s, _ in wins), dtype=np.int64)
    end = start + np.array([w for _, w in sorted(wins)], dtype=np.int64)
    got = verify.coverage_stats(start, end, n)
    perm = np.random.default_rng(len(wins)).permutation(len(start))
    assert got == verify.coverage_stats(start[perm], end[perm], n)  # the shuffled input takes the sort
    mask = np.zeros(n, bool)
    for s, e in zip(start, end):
        mask[max(s, 0) : max(min(e, n), 0)] = True
    assert got["covered"] == int(mask.sum())


@pytest.mark.parametrize("shingles", [None, 0])
def test_ids_out_of_range_found_in_file_order_across_pieces(tmp_path, monkeypatch, shingles):
    """Without shingles one thread hashes and scans SCAN_PIECE pieces; with them a helper thread
    scans CHUNK_BYTES chunks: both find the first bad id and count every one."""
    ids = np.zeros(3000, dtype=np.int64)
    ids[[1500, 2999]] = 60000
    write_bin(tmp_path / "x.bin", ids)
    monkeypatch.setattr(disk.checksums, "CHUNK_BYTES", 2 * 100)
    monkeypatch.setattr(scan_mod, "SCAN_PIECE", 2 * 100)
    scan = verify.scan_file(tmp_path / "x.bin", "<u2", 50257, shingle_bits=shingles)
    assert (scan.first_bad, scan.first_bad_id, scan.bad_count, scan.max_id) == (1500, 60000, 2, 60000)
    assert scan.checksum == disk.checksum_file(tmp_path / "x.bin")


def test_alignment_gives_the_same_report_one_window_at_a_time(tmp_path, monkeypatch):
    ids = np.random.default_rng(3).integers(0, 50257, 6000)
    folder = make_folder(tmp_path / "d", ids, ids[:500])
    plan = make_plan(tmp_path / "p.npy", folder / "train.bin", np.r_[np.arange(0, 5800, 37), 5950], 101, T=100)
    batched = verify.verify(folder, [plan]).to_dict()
    monkeypatch.setattr(plan_windows, "ALIGN_CELLS", 1)  # one window per step
    assert verify.verify(folder, [plan]).to_dict() == batched
    align = [c for c in batched["checks"] if c["name"] == "alignment"][0]
    assert align["status"] == "fail" and "row 157 at start 5950" in align["detail"]  # the window past N - T - 1
