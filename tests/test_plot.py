import sys

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from winsample import disk, formats, plot
from winsample.cli import main
from winsample.errors import ConfigError, InputError

from .conftest import CORPUS, FIXTURES

GOLDEN = FIXTURES / "golden_v1"


def brute_depth(n, starts, lengths):
    """Per-token depth by walking every window (fine for small n)."""
    depth = np.zeros(n, dtype=np.int64)
    for s, ln in zip(starts, lengths):
        depth[max(s, 0) : min(s + ln, n)] += 1
    return depth


def plan_rows(starts, lengths, docs=None, fresh=None):
    rows = np.zeros(len(starts), dtype=formats.PLAN_DTYPE)
    rows["start"], rows["length"] = starts, lengths
    rows["doc"] = 0 if docs is None else docs
    rows["fresh"] = 0 if fresh is None else fresh
    return rows


def sliding_rows(n, t, stride):
    starts = np.arange(0, n - t + 1, stride)
    fresh = np.full(len(starts), t - stride)
    fresh[0] = 0
    return plan_rows(starts, np.full(len(starts), t), fresh=fresh)


def test_10_tokens_windows_0_4_and_2_6_depth_by_hand():
    # windows [0,4) and [2,6) over 10 tokens: depth 1 1 2 2 1 1 0 0 0 0
    edges, sums = plot.coverage_depth(10, [0, 2], [4, 4], bins=100)
    assert edges.tolist() == list(range(11))
    assert sums.tolist() == [1, 1, 2, 2, 1, 1, 0, 0, 0, 0]
    edges, sums = plot.coverage_depth(10, [0, 2], [4, 4], bins=2)
    assert edges.tolist() == [0, 5, 10] and sums.tolist() == [7, 1]


def test_downsampled_depth_equals_brute_force_sum_within_each_bin():
    rng = np.random.default_rng(7)
    n = 5003
    starts = rng.integers(0, n, 400)
    lengths = rng.integers(1, 300, 400)  # some run past the end: counted up to n only
    depth = brute_depth(n, starts, lengths)
    edges, sums = plot.coverage_depth(n, starts, lengths, bins=97)
    assert len(edges) == 98 and edges[0] == 0 and edges[-1] == n and np.all(np.diff(edges) > 0)
    assert sums.tolist() == [int(depth[a:b].sum()) for a, b in zip(edges[:-1], edges[1:])]
    assert plot.covered_tokens(n, starts, lengths) == int((depth > 0).sum())


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 400),
    wins=st.lists(st.tuples(st.integers(0, 450), st.integers(0, 120)), max_size=30),
    bins=st.integers(1, 500),
)
def test_depth_and_union_match_brute_force(n, wins, bins):
    starts = [w[0] for w in wins]
    lengths = [w[1] for w in wins]
    depth = brute_depth(n, starts, lengths)
    edges, sums = plot.coverage_depth(n, starts, lengths, bins=bins)
    assert len(edges) - 1 == min(bins, n)
    assert sums.tolist() == [int(depth[a:b].sum()) for a, b in zip(edges[:-1], edges[1:])]
    assert plot.covered_tokens(n, starts, lengths) == int((depth > 0).sum())


def test_depth_bins_are_bounded_for_a_billion_tokens():
    # 10^9 tokens, 2 million windows: only starts/ends and 4001 edges are ever held
    n = 10**9
    rows = sliding_rows(n, 1024, 500)
    edges, sums = plot.coverage_depth(n, rows["start"], rows["length"])
    assert len(edges) == plot.DEPTH_BINS + 1
    assert int(sums.sum()) == int(rows["length"].astype(np.int64).sum())


def test_token_histogram_in_chunks_equals_counting_by_hand():
    ids = np.array([5, 1, 5, 0, 9, 5, 1], dtype="<u2")
    h = plot.token_histogram(ids, n_vocab=10, chunk=3)
    assert h.tolist() == [1, 2, 0, 0, 0, 3, 0, 0, 0, 1]
    seen = []
    plot.token_histogram(ids, 10, chunk=3, progress=seen.append)
    assert seen == [3, 3, 1]


def test_token_histogram_keeps_ids_beyond_vocab_visible():
    h = plot.token_histogram(np.array([1, 12], dtype="<u2"), n_vocab=4, chunk=1)
    assert len(h) == 13 and h[12] == 1 and h.sum() == 2


def test_first_windows_are_the_smallest_starts_even_when_shuffled():
    rows = sliding_rows(1000, 10, 5)
    shuffled = rows[np.random.default_rng(1).permutation(len(rows))]
    first = plot.first_windows(shuffled, 12)
    assert first["start"].tolist() == list(range(0, 60, 5))


def _read_png(path):
    import matplotlib.image

    return matplotlib.image.imread(path)


def assert_real_picture(path):
    img = _read_png(path)
    assert img.shape[:2] == (plot.FIGSIZE[1] * plot.DPI, plot.FIGSIZE[0] * plot.DPI)  # 900 x 1200
    rgb = img[..., :3]
    assert float(rgb.std()) > 0.05, "picture is (nearly) blank"
    colours = np.unique((rgb.reshape(-1, 3) * 255).round().astype(np.uint8), axis=0)
    assert len(colours) > 20, f"only {len(colours)} colours"


def test_png_exists_decodes_has_1200x900_pixels_and_is_not_blank(tmp_path):
    n = 20_000
    rng = np.random.default_rng(3)
    tokens = rng.integers(0, 50257, n).astype("<u2")
    docs = np.array([0, 3000, 7001, 15000])
    rows = sliding_rows(n, 512, 384)
    out = tmp_path / "coverage.png"
    info = plot.plot_coverage(out, n, rows, doc_starts=docs, token_hist=plot.token_histogram(tokens, 50257), title="t")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert_real_picture(out)
    assert not disk.tmp_path(out).exists()
    assert info["windows"] == len(rows) and info["bins"] == 4000
    # 51 windows of 512 stepping 384 end at 19712: tokens [0, 19712) covered
    assert len(rows) == 51 and info["covered_tokens"] == 50 * 384 + 512


def test_panels_have_colour_of_each_kind(tmp_path):
    rows = sliding_rows(5000, 256, 128)
    out = tmp_path / "c.png"
    plot.plot_coverage(out, 5000, rows, doc_starts=[0, 1000], token_hist=np.arange(100))
    rgb = (_read_png(out)[..., :3] * 255).round().astype(int)
    # matplotlib's tab:blue (31,119,180) bars/depth, tab:green (44,160,44) lengths, tab:purple (148,103,189) ids
    for colour in ((31, 119, 180), (44, 160, 44), (148, 103, 189)):
        near = np.abs(rgb - np.array(colour)).sum(axis=-1) < 30
        assert near.sum() > 500, f"no {colour} area"


def test_plot_of_an_empty_plan_still_draws(tmp_path):
    out = tmp_path / "e.png"
    plot.plot_coverage(out, 100, plan_rows([], []))
    assert _read_png(out).shape[:2] == (900, 1200)


def test_failed_draw_leaves_no_file(tmp_path, monkeypatch):
    from matplotlib.figure import Figure

    out = tmp_path / "c.png"
    out.write_bytes(b"old")

    def boom(self, *a, **k):
        open(a[0], "wb").write(b"half")
        raise OSError("disk full")

    monkeypatch.setattr(Figure, "savefig", boom)
    with pytest.raises(InputError, match="cannot write c.png: .*nothing was written"):
        plot.plot_coverage(out, 100, sliding_rows(100, 10, 5))
    assert out.read_bytes() == b"old" and not disk.tmp_path(out).exists()


def test_missing_matplotlib_names_the_extra(tmp_path, monkeypatch):
    for mod in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, mod)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib → ImportError
    with pytest.raises(ConfigError, match=r"pip install 'winsample\[plot\]'"):
        plot.plot_coverage(tmp_path / "c.png", 10, sliding_rows(10, 5, 5))
    assert not (tmp_path / "c.png").exists()


def test_plot_plan_over_golden_train_bin(tmp_path, monkeypatch):
    # windows of 4 tokens, stride 2, over the 15 golden train tokens (documents at 0 and 3)
    rows = plan_rows([0, 2, 4, 6, 8, 10, 11], [4, 4, 4, 4, 4, 4, 4], docs=[0, 0, 1, 1, 1, 1, 1])
    plan = tmp_path / "train.plan.npy"
    formats.write_plan(plan, rows, {"source": {"file": "train.bin", "dtype": "<u2", "tokens": 15}, "params": {}, "stats": {}})
    seen = {}
    real = plot.plot_coverage

    def spy(*a, **k):
        seen.update(k, tokens_n=a[1])
        return real(*a, **k)

    monkeypatch.setattr(plot, "plot_coverage", spy)
    out = tmp_path / "coverage.png"
    counted = []
    info = plot.plot_plan(out, GOLDEN / "train.bin", plan, progress=counted.append)
    assert_real_picture(out)
    assert seen["tokens_n"] == 15 and list(seen["doc_starts"]) == [0, 3]
    hist = seen["token_hist"]
    assert len(hist) == 50257 and hist[50256] == 2 and hist[15496] == 1 and hist.sum() == 15
    assert sum(counted) == 15
    # windows cover [0, 15): 7 windows x 4 = 28 token-window pairs
    assert info["covered_tokens"] == 15 and info["mean_depth"] == pytest.approx(28 / 15)


def test_plot_on_a_full_disk_is_one_line_exit_2_and_leaves_nothing(tmp_path):
    """verify --plot where the disk (here a file-size limit) cannot take the PNG: one line naming
    the file, exit 2, no PNG and no temporary file left (#29, class 5)."""
    import resource
    import signal
    import subprocess
    import sys

    from winsample.encode import encode_corpus

    src = tmp_path / "s.txt"
    src.write_text((CORPUS / "sonnets.txt").read_text(encoding="utf-8"), encoding="utf-8")
    encode_corpus([str(src)], tmp_path / "d", split="tail", val_fraction=0.1, workers=1)
    assert CliRunner().invoke(main, ["windows", str(tmp_path / "d" / "train.bin"), "-T", "64", "-o", str(tmp_path / "p.npy"),
                                     "-q"]).exit_code == 0
    (tmp_path / "pics").mkdir()

    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (2000, 2000))

    r = subprocess.run([sys.executable, "-m", "winsample", "verify", str(tmp_path / "d"), "--plan", str(tmp_path / "p.npy"),
                        "--plot", str(tmp_path / "pics" / "c.png"), "-q"], capture_output=True, text=True,
                       preexec_fn=limit, timeout=120)
    assert r.returncode == 2
    assert r.stderr.endswith(f"error: --plot {tmp_path / 'pics' / 'c.png'}: cannot write c.png: file too large (a file-size"
                             " limit was reached); free some space and run again; nothing was written\n")
    assert list((tmp_path / "pics").iterdir()) == []
