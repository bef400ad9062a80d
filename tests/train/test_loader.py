"""winsample.Loader: every window once per epoch across ranks, pure by (epoch, step), padded short windows.

Expectations are brute force over the plan rows and token positions (token i of the test files
is i, so a batch shows which positions it read), never the loader's own arithmetic.
"""

from __future__ import annotations

import pickle
import random
import re
import tempfile
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import winsample
from winsample import formats, planning
from winsample.cli import main
from winsample.errors import ConfigError, DataError
from winsample.train import StepOutOfRange

_TMP = tempfile.TemporaryDirectory(prefix="loader-plans-")  # removed when the test process ends
PAD = 1_000_000  # x padding in these tests: no position of a test file is this large


def make_plan(starts, lengths, span, n, docs=None) -> winsample.Plan:
    """A plan file with these windows (fresh filled in), read back as training code reads it."""
    rows = planning.make_rows(np.asarray(starts, np.int64), np.asarray(lengths, np.int64),
                             np.zeros(len(starts), np.int64) if docs is None else np.asarray(docs, np.int64))
    side = {"params": {"T": span - 1, "span": span, "targets": True}, "source": {"tokens": n, "dtype": "<u4"}}
    path = Path(tempfile.mkdtemp(dir=_TMP.name)) / "p.npy"
    formats.write_plan(path, rows, side)
    return winsample.read_plan(path)


@st.composite
def plans(draw):
    """A plan as windows writes them: sorted distinct starts, lengths in [2, span], inside N."""
    span = draw(st.integers(2, 12))
    n = draw(st.integers(span, 300))
    starts = sorted(draw(st.sets(st.integers(0, n - 2), min_size=1, max_size=60)))
    lengths = [draw(st.integers(2, min(span, n - s))) for s in starts]
    full = draw(st.booleans())  # most windows full, as in a plain plan
    if full:
        lengths = [min(span, n - s) if i % 3 else L for i, (s, L) in enumerate(zip(starts, lengths))]
    return make_plan(starts, lengths, span, n), n


def loaders(plan, n, batch_size, world_size, seed=7, **kw):
    tokens = np.arange(n, dtype=np.uint32)
    return [winsample.Loader(plan, tokens, batch_size, seed, r, world_size, pad_id=PAD, **kw) for r in range(world_size)]


def eligible(plan, short):
    rows = plan.rows
    return np.flatnonzero(rows["length"] == plan.span) if short == "drop" else np.arange(len(rows))


def fits(plan, short, batch_size, world_size):
    return len(eligible(plan, short)) >= batch_size * world_size


SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(plans(), st.integers(1, 5), st.integers(1, 4), st.sampled_from(["drop", "pad"]), st.integers(0, 3))
def test_every_eligible_window_once_per_epoch_across_ranks_with_equal_batch_counts(pn, b, w, short, epoch):
    plan, n = pn
    assume(fits(plan, short, b, w))
    ls = loaders(plan, n, b, w, short=short)
    counts = {len(lo) for lo in ls} | {lo.steps(epoch) for lo in ls}
    assert len(counts) == 1  # every rank the same number of batches
    served = np.concatenate([lo.row_index(epoch, s) for lo in ls for s in range(lo.steps(epoch))])
    want = eligible(plan, short)
    assert len(served) == len(np.unique(served))  # never twice
    assert set(served.tolist()) <= set(want.tolist())
    left = len(want) - len(served)
    assert 0 <= left <= w * b - 1 and left == ls[0].left_out_of(epoch) == (ls[0].left_out if epoch == 0 else left)
    assert len(served) == len(ls[0]) * w * b


@SETTINGS
@given(plans(), st.integers(1, 5), st.integers(1, 3), st.sampled_from(["drop", "pad"]), st.integers(-100, 5))
def test_padding_and_alignment_against_the_tokens(pn, b, w, short, ignore):
    plan, n = pn
    assume(fits(plan, short, b, w))
    for lo in loaders(plan, n, b, w, short=short, ignore_index=ignore):
        for step in range(min(len(lo), 4)):
            x, y = lo.batch(0, step)
            assert x.dtype == y.dtype == np.int64 and x.shape == y.shape == (b, plan.T)
            assert x.flags.c_contiguous and y.flags.c_contiguous
            for i, (s, L, _, _) in enumerate(lo.rows(0, step).tolist()):
                assert x[i, : L - 1].tolist() == list(range(s, s + L - 1))  # token i is i
                assert y[i, : L - 1].tolist() == list(range(s + 1, s + L))
                assert (x[i, L - 1 :] == PAD).all() and (y[i, L - 1 :] == ignore).all()
                if short == "drop":
                    assert L == plan.span


@SETTINGS
@given(plans(), st.integers(1, 4), st.integers(1, 3))
def test_fresh_masks_exactly_the_labels_an_earlier_window_already_has(pn, b, w):
    plan, n = pn
    assume(fits(plan, "pad", b, w))
    rows = plan.rows.tolist()
    for lo in loaders(plan, n, b, w, short="pad", labels="fresh"):
        for step in range(len(lo)):
            _, y = lo.batch(0, step)
            for i, (s, L, _, _) in enumerate(lo.rows(0, step).tolist()):
                for j in range(plan.T):
                    p = s + j + 1  # the token y[i, j] predicts
                    earlier = any(s2 < s and s2 + 1 <= p < s2 + L2 for s2, L2, _, _ in rows)
                    want = -1 if (j >= L - 1 or earlier) else p
                    assert y[i, j] == want, (s, L, j)


@SETTINGS
@given(plans(), st.integers(1, 4), st.integers(1, 3), st.sampled_from(["drop", "pad"]), st.sampled_from(["all", "fresh"]),
       st.integers(0, 2))
def test_exposure_figures_against_a_per_token_count(pn, b, w, short, labels, epoch):
    plan, n = pn
    assume(fits(plan, short, b, w))
    ls = loaders(plan, n, b, w, short=short, labels=labels)
    count = np.zeros(n, np.int64)
    for lo in ls:
        for step in range(lo.steps(epoch)):
            _, y = lo.batch(epoch, step)
            np.add.at(count, y[y != -1], 1)  # y holds the positions it predicts
    targetable = np.zeros(n, bool)
    for s, L, _, _ in plan.rows.tolist():
        targetable[s + 1 : s + L] = True
    e = ls[0].exposure(epoch)
    assert e.trained_tokens == count.sum() and e.targetable == targetable.sum() and e.untargetable == n - targetable.sum()
    assert e.targets_min == count[targetable].min() and e.targets_max == count.max()
    assert e.untrained == (count[targetable] == 0).sum()
    assert e.targets_mean == pytest.approx(count.sum() / targetable.sum())
    assert (e.batches, e.served, e.left_out) == (len(ls[0]) if epoch == 0 else ls[0].steps(epoch), e.batches * w * b, e.windows - e.served)


@SETTINGS
@given(plans(), st.integers(1, 4), st.integers(1, 3), st.data())
def test_batches_are_pure_and_resume_from_any_step(pn, b, w, data):
    plan, n = pn
    assume(fits(plan, "pad", b, w))
    rank = data.draw(st.integers(0, w - 1))
    a = winsample.Loader(plan, np.arange(n, dtype=np.uint32), b, 3, rank, w, short="pad", pad_id=PAD)
    epoch = data.draw(st.integers(0, 3))
    full = list(a.epoch(epoch))
    assert len(full) == a.steps(epoch)
    start = data.draw(st.integers(0, len(full)))
    state_np, state_py = np.random.get_state(), random.getstate()
    a.batch(epoch + 1, 0)  # other epochs in between (evaluation, say) change nothing
    # a new process resuming at (epoch, start): a fresh Loader, pickled as a DataLoader worker gets it
    fresh = pickle.loads(pickle.dumps(winsample.Loader(plan, np.arange(n, dtype=np.uint32), b, 3, rank, w, short="pad", pad_id=PAD)))
    for (x1, y1), (x2, y2) in zip(full[start:], fresh.epoch(epoch, start=start), strict=True):
        assert (x1 == x2).all() and (y1 == y2).all()
    x, y = a.batch(epoch, max(start - 1, 0))
    assert (x == full[max(start - 1, 0)][0]).all()
    assert np.all(np.random.get_state()[1] == state_np[1]) and random.getstate() == state_py  # no global RNG touched


def test_order_depends_on_seed_and_epoch_and_is_a_permutation():
    plan = make_plan(range(0, 2000, 10), [11] * 200, 11, 2100)
    a = winsample.Loader(plan, np.arange(2100, dtype=np.uint32), 4, 1, pad_id=PAD)
    b = winsample.Loader(plan, np.arange(2100, dtype=np.uint32), 4, 2, pad_id=PAD)
    order = lambda lo, e: np.concatenate([lo.row_index(e, s) for s in range(len(lo))])  # noqa: E731
    assert sorted(order(a, 0).tolist()) == list(range(200))
    assert (order(a, 0) != order(a, 1)).any() and (order(a, 0) != order(b, 0)).any()
    assert (order(a, 1) == order(winsample.Loader(plan, np.arange(2100, dtype=np.uint32), 4, 1, pad_id=PAD), 1)).all()


def test_locate_walks_epochs_one_after_another():
    plan = make_plan(range(0, 100, 10), [11] * 10, 11, 120)
    lo = winsample.Loader(plan, np.arange(120, dtype=np.uint32), 3, 0, pad_id=PAD)
    assert (len(lo), lo.left_out) == (3, 1)
    assert [lo.locate(k) for k in range(7)] == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2), (2, 0)]


def test_a_list_or_a_callable_gives_each_epoch_its_plan():
    p0 = make_plan([0, 20, 40], [11] * 3, 11, 60)
    p1 = make_plan([5, 25, 45], [11] * 3, 11, 60)
    tokens = np.arange(60, dtype=np.uint32)
    for source in ([p0, p1], lambda e: (p0, p1)[e % 2]):
        lo = winsample.Loader(source, tokens, 1, 0, pad_id=PAD)
        firsts = lambda e, lo=lo: sorted(lo.batch(e, s)[0][0, 0] for s in range(3))  # noqa: E731
        assert firsts(0) == [0, 20, 40] and firsts(1) == [5, 25, 45] and firsts(2) == [0, 20, 40]


def _cli(*args):
    r = CliRunner().invoke(main, list(map(str, args)))
    assert r.exit_code == 0, r.stderr
    return r


@pytest.fixture(scope="module")
def data(tmp_path_factory, corpus_dir=None):
    from ..conftest import CORPUS

    d = tmp_path_factory.mktemp("loader")
    _cli("encode", CORPUS, "-o", d / "data", "-q")
    return d / "data"


def test_a_random_offset_plan_is_replanned_every_epoch_as_windows_would(data, tmp_path):
    base = tmp_path / "e0.npy"
    _cli("windows", data / "train.bin", "-T", 64, "--boundaries", "doc", "--random-offset", "--seed", 5, "-o", base, "-q")
    lo = winsample.Loader(base, data / "train.bin", 4, 1)
    for epoch in (0, 1, 2):
        out = tmp_path / f"e{epoch}.cli.npy"
        _cli("windows", data / "train.bin", "-T", 64, "--boundaries", "doc", "--random-offset", "--seed", 5, "--epoch", epoch, "-o", out, "-q")
        assert (lo.plan(epoch).rows == winsample.read_plan(out).rows).all()
    shared = set(lo.plan(0).rows["start"].tolist()) & set(lo.plan(1).rows["start"].tolist())
    assert len(shared) < len(lo.plan(1)) // 2  # the cuts move (only document starts and aligned tails stay)


def test_paragraph_plan_pad_loses_no_data_drop_loses_most(data, tmp_path):
    """The demo's plan: short='pad' trains on every token a window has as a label, drop on a quarter."""
    p = tmp_path / "para.npy"
    _cli("windows", data / "train.bin", "-T", 256, "--boundaries", "paragraph", "-o", p, "-q")
    plan = winsample.read_plan(p)
    full = int((plan.rows["length"] == plan.span).sum())
    assert full < len(plan) // 4
    pad = winsample.Loader(p, data / "train.bin", 1, 0, short="pad").exposure(0)
    drop = winsample.Loader(p, data / "train.bin", 1, 0, short="drop").exposure(0)
    assert pad.untrained == 0 and pad.targets_min >= 1 and pad.left_out == 0 and pad.served == len(plan)
    assert drop.served == full and drop.trained_tokens == full * 256 and drop.untrained > drop.targetable // 2


def test_padding_is_the_tokenizers_eot_from_the_plan(data, tmp_path):
    p = tmp_path / "para.npy"
    _cli("windows", data / "train.bin", "-T", 256, "--boundaries", "paragraph", "-o", p, "-q")
    lo = winsample.Loader(p, data / "train.bin", 8, 0, short="pad", ignore_index=-100)
    assert lo.pad_id == 50256  # gpt2's <|endoftext|>
    x, y = lo.batch(0, 0)
    L = lo.rows(0, 0)["length"]
    i = int(np.argmin(L))
    assert L[i] < 257 and (x[i, L[i] - 1 :] == 50256).all() and (y[i, L[i] - 1 :] == -100).all()


def test_errors_are_clear(data, tmp_path):
    tokens = np.arange(100, dtype=np.uint32)
    plan = make_plan([0, 50], [11, 11], 11, 100)
    with pytest.raises(DataError, match="fewer than world_size × batch_size = 4"):
        winsample.Loader(plan, tokens, 2, 0, 0, 2, pad_id=PAD)
    lo = winsample.Loader(plan, tokens, 1, 0, pad_id=PAD)
    with pytest.raises(StepOutOfRange, match=r"outside \[0, 2\)"):
        lo.batch(0, 2)
    with pytest.raises(IndexError):
        lo.batch(0, -1)
    with pytest.raises(StepOutOfRange, match=r"start 3 is outside \[0, 2\]"):
        lo.epoch(0, start=3)
    assert list(lo.epoch(0, start=2)) == []
    with pytest.raises(DataError, match="made for 100 tokens"):
        winsample.Loader(plan, tokens[:60], 1, 0, pad_id=PAD)
    with pytest.raises(ConfigError, match="rank"):
        winsample.Loader(plan, tokens, 1, 0, 2, 2, pad_id=PAD)
    with pytest.raises(ConfigError, match="short"):
        winsample.Loader(plan, tokens, 1, 0, short="keep", pad_id=PAD)
    _cli("windows", data / "train.bin", "-T", 64, "--no-targets", "-o", tmp_path / "nt.npy", "-q")
    with pytest.raises(ConfigError, match="no-targets"):
        winsample.Loader(tmp_path / "nt.npy", data / "train.bin", 1, 0)
    _cli("windows", data / "train.bin", "-T", 64, "--shards", 2, "-o", tmp_path / "s.npy", "-q")
    with pytest.raises(ConfigError, match="whole plan"):
        winsample.Loader(tmp_path / "s.shard0of2.npy", data / "train.bin", 1, 0, 0, 2)
    _cli("windows", data / "val.bin", "-T", 64, "-o", tmp_path / "v.npy", "-q")
    with pytest.raises(DataError, match="pass the .bin the plan was made for"):
        winsample.Loader(tmp_path / "v.npy", data / "train.bin", 1, 0)


@pytest.mark.parametrize("mode", ["paragraph", "sentence"])
def test_windows_refuses_random_offset_with_semantic_edges(data, tmp_path, mode):
    out = tmp_path / "p.npy"
    r = CliRunner().invoke(main, ["windows", str(data / "train.bin"), "-T", "256", "--boundaries", mode,
                                  "--random-offset", "--seed", "1", "-o", str(out)])
    assert r.exit_code == 2 and r.stdout == ""
    assert f"--random-offset does not move the cuts of --boundaries {mode}" in r.stderr and "Loader" in r.stderr
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_semantic_cuts_do_not_move_with_the_offset_which_is_why_it_is_refused(data):
    """The planner itself: two offsets give windows that are nearly all the same (the refusal's reason)."""
    from winsample.planning import boundaries as bnd
    from winsample.tokenizer import load

    tokens = np.fromfile(data / "train.bin", dtype="<u2")
    ds = np.load(data / "train.docs.npy")
    de = np.append(ds[1:], len(tokens))
    edges = np.concatenate([f for _, f in bnd.iter_boundaries(tokens, "paragraph", load("gpt2"))])
    a, b = (planning.plan_semantic(ds, de, edges, 257, 128, offset) for offset in (0, 69))
    shared = len(set(a["start"].tolist()) & set(b["start"].tolist()))
    assert shared > 0.99 * len(a)


def test_a_bare_bin_pads_with_gpt2s_eot(tmp_path):
    """37 tokens, T 7, stride 8, --tail short: [0,8) [8,16) [16,24) [24,32) and the tail [31,37)."""
    np.arange(37, dtype="<u2").tofile(tmp_path / "a.bin")
    _cli("windows", tmp_path / "a.bin", "-T", 7, "--stride", 8, "--tail", "short", "-o", tmp_path / "p.npy", "-q")
    lo = winsample.Loader(tmp_path / "p.npy", tmp_path / "a.bin", 5, 0, short="pad")
    assert lo.pad_id == 50256 and len(lo) == 1 and lo.left_out == 0
    x, y = lo.batch(0, 0)
    i = lo.rows(0, 0)["start"].tolist().index(31)
    assert x[i].tolist() == [31, 32, 33, 34, 35, 50256, 50256] and y[i].tolist() == [32, 33, 34, 35, 36, -1, -1]


def test_get_batch_returns_contiguous_arrays(data, tmp_path):
    _cli("windows", data / "train.bin", "-T", 32, "-o", tmp_path / "p.npy", "-q")
    x, y = winsample.get_batch(winsample.read_plan(tmp_path / "p.npy"), data / "train.bin", 4, 0)
    assert x.flags.c_contiguous and y.flags.c_contiguous and (x[:, 1:] == y[:, :-1]).all()


def test_inspect_of_a_plan_reports_one_epochs_exposure(tmp_path):
    """N = 30, T = 7, stride 8, --tail short: windows [0,8) [8,16) [16,24) [23,30) (span 8).

    Labels: 1..7, 9..15, 17..23, 24..29: 27 with every window (each token once, 0/8/16 never
    a label), 21 with the full windows only (24..29 untrained)."""
    np.arange(30, dtype="<u2").tofile(tmp_path / "a.bin")
    _cli("windows", tmp_path / "a.bin", "-T", 7, "--stride", 8, "--tail", "short", "-o", tmp_path / "p.npy", "-q")
    r = CliRunner().invoke(main, ["inspect", str(tmp_path / "p.npy"), "--json"])
    assert r.exit_code == 0, r.stderr
    import json

    e = json.loads(r.stdout)["exposure"]
    assert (e["pad"]["trained_tokens"], e["pad"]["targetable"], e["pad"]["untargetable"]) == (27, 27, 3)
    assert (e["pad"]["targets_min"], e["pad"]["targets_max"], e["pad"]["untrained"]) == (1, 1, 0)
    assert (e["drop"]["trained_tokens"], e["drop"]["untrained"], e["drop"]["targets_min"]) == (21, 6, 0)
    text = CliRunner().invoke(main, ["inspect", str(tmp_path / "p.npy")]).stdout
    assert "short=drop  21 labels; each targetable token a label min 0 / mean 0.778 / max 1 times, 6 never" in text
    assert "6 never; 3 tokens of the file are no window's label" in text  # 0, 8 and 16: each a window's first token


def test_a_plan_with_no_windows_is_refused_saying_so_not_suggesting_pad(tmp_path):
    from winsample.cli import main
    from winsample.errors import DataError

    empty, p = tmp_path / "empty.bin", tmp_path / "tiny.bin"
    empty.write_bytes(b"")  # an empty split (encode --val-fraction 0 leaves val.bin so)
    np.arange(3, dtype="<u2").tofile(p)  # shorter than one window of T = 8: one short window
    r = CliRunner().invoke(main, ["windows", str(empty), "-T", "8", "-o", str(tmp_path / "p.npy"), "-q"])
    assert r.exit_code == 0 and len(np.load(tmp_path / "p.npy")) == 0
    with pytest.raises(DataError, match="no windows at all") as e:
        winsample.Loader(tmp_path / "p.npy", empty, 4, seed=1)
    assert "short='pad'" not in str(e.value)
    # one short window only: then pad would serve it, and the message says so
    assert CliRunner().invoke(main, ["windows", str(p), "-T", "8", "-o", str(tmp_path / "q.npy"), "-q"]).exit_code == 0
    with pytest.raises(DataError, match=r"short='pad' also serves the 1 shorter window\(s\)"):
        winsample.Loader(tmp_path / "q.npy", p, 4, seed=1)


@pytest.mark.parametrize("bad", [-5, 2**32, 2**70, 1.5, "0"])
def test_a_pad_id_that_is_no_token_id_is_refused_up_front(bad):
    """pad_id=-5 used to be accepted, and 2**70 to overflow only at batch()."""
    plan = make_plan([0, 20, 40], [11] * 3, 11, 60)
    with pytest.raises(ConfigError, match="pad_id must be"):
        winsample.Loader(plan, np.arange(60, dtype=np.uint32), 1, 0, pad_id=bad)


@pytest.mark.parametrize("edit, words", [
    (lambda s: s["params"].update(T=32), "params.span 65 but T 32 with targets true spans 33"),
    (lambda s: s["params"].update(T=128), "params.span 65 but T 128 with targets true spans 129"),
    (lambda s: s["tokenizer"].update(eot=-7), "tokenizer.eot is -7, below 0"),
    (lambda s: s["tokenizer"].update(eot=70000), "tokenizer.eot is 70000, above 50256"),
    (lambda s: s["tokenizer"].update(eot=10**30), "tokenizer.eot is 1000000000000000000000000000000, above 50256"),
    (lambda s: s["params"].update(seed="x"), "params.seed is 'x', not an integer"),
    (lambda s: s["params"].update(seed=None), "params.random_offset is true but params.seed is missing"),
])
def test_a_sidecar_edited_out_of_shape_is_refused_by_the_loader_naming_the_field(data, tmp_path, edit, words):
    """Adversarial trial: the Loader served truncated (T 32) or half-padding (T 128) batches, padded
    with ids outside the vocabulary (eot -7, 70000), or raised bare errors (OverflowError, ValueError)."""
    import json

    p = tmp_path / "p.npy"
    _cli("windows", data / "train.bin", "-T", 64, "--random-offset", "--seed", 3, "-o", p, "-q")
    side = json.loads((tmp_path / "p.npy.json").read_text())
    edit(side)
    (tmp_path / "p.npy.json").write_text(json.dumps(side))
    with pytest.raises(DataError, match=re.escape(words)):
        winsample.Loader(p, batch_size=2, seed=0)


def test_a_plan_whose_rows_were_edited_by_hand_is_refused_by_the_loader(data, tmp_path):
    # adversarial trial: only verify compared rows_checksum; the Loader served start + 1
    p = tmp_path / "p.npy"
    _cli("windows", data / "train.bin", "-T", 64, "-o", p, "-q")
    rows = np.load(p)
    rows["start"][3] += 1
    np.save(p, rows)
    with pytest.raises(DataError, match=re.escape("its rows are not the ones its sidecar records (rows_checksum)")):
        winsample.Loader(p, batch_size=2, seed=0)
    with pytest.raises(DataError, match=re.escape("its rows are not the ones its sidecar records")):
        winsample.get_batch(p, data / "train.bin", 2, 0)


def test_a_sidecar_with_a_negative_seed_and_no_randomness_still_reads(data, tmp_path):
    # review: plans once written with a negative --seed that nothing draws from must keep loading
    import json

    p = tmp_path / "p.npy"
    _cli("windows", data / "train.bin", "-T", 64, "-o", p, "-q")
    side = json.loads((tmp_path / "p.npy.json").read_text())
    side["params"]["seed"] = -3
    (tmp_path / "p.npy.json").write_text(json.dumps(side))
    assert winsample.Loader(p, batch_size=2, seed=0).batch(0, 0).x.shape == (2, 64)
