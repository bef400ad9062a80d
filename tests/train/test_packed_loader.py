"""Packed samples: every field of a Loader's Batch against a brute force over token positions.

The brute force rebuilds each row from the plan (a window's range, or a best-fit window's
segments) one token at a time, finds each token's document by the EOT ids of the .bin (encode
appends one after every document; the Loader reads the document index instead), and derives x, y,
the masks, the positions and cu_seqlens with plain Python, never with winsample's arithmetic.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import winsample
from winsample.cli import main
from winsample.planning import boundaries

from ..conftest import CORPUS

EOT = 50256
T = 32


def run(*args):
    r = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return r


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """Many short documents of real text (1 to 60 words each) and a few long ones, encoded."""
    words = (CORPUS / "hamlet.txt").read_text(encoding="utf-8").split()
    rng = random.Random(3)
    root = tmp_path_factory.mktemp("packed")
    with open(root / "docs.jsonl", "w", encoding="utf-8") as f:
        at = 0
        for i in range(220):
            n = rng.randint(1, 60) if i % 25 else rng.randint(80, 200)
            f.write(json.dumps({"text": " ".join(words[at : at + n])}) + "\n")
            at += n
    run("encode", root / "docs.jsonl", "-o", root / "data", "--val-fraction", 0, "-q")
    plans = {
        "best-fit": ("--pack", "best-fit"),
        "best-fit-truncate": ("--pack", "best-fit", "--long", "truncate"),
        "plain": (),
        "doc": ("--boundaries", "doc", "--short", "keep"),
        "greedy": ("--boundaries", "doc", "--pack"),
        "sentence": ("--boundaries", "sentence"),
    }
    for name, opts in plans.items():
        run("windows", root / "data/train.bin", "-T", T, *opts, "-o", root / f"{name}.npy", "-q")
    return root


def doc_of(tokens: np.ndarray) -> np.ndarray:
    """Document number of every token: a document ends with (and includes) its EOT."""
    ends = [i for i, t in enumerate(tokens.tolist()) if t == EOT]
    out, d, k = [], 0, 0
    for i in range(len(tokens)):
        out.append(d)
        if k < len(ends) and ends[k] == i:
            d, k = d + 1, k + 1
    return np.array(out)


def doc_start(docs: np.ndarray) -> dict[int, int]:
    first: dict[int, int] = {}
    for i, d in enumerate(docs.tolist()):
        first.setdefault(d, i)
    return first


def expected(plan, idx, tokens, docs, starts, positions, cross_doc, pad_id, ignore=-1):
    """Brute force of one batch: rows are the windows ``idx`` of ``plan``."""
    B = len(idx)
    X = np.full((B, T), pad_id, np.int64)
    Y = np.full((B, T), ignore, np.int64)
    P = np.zeros((B, T), np.int64)
    S = np.full((B, T), -1, np.int64)
    A = np.zeros((B, T), np.int64)
    runs = []
    for i, k in enumerate(idx.tolist()):
        if plan.best_fit:
            segs = plan.rows[plan.rows["window"] == k]
            pos = [int(s) + j for s, n in zip(segs["start"], segs["length"]) for j in range(int(n))]
            piece = [q for q, n in enumerate(segs["length"]) for _ in range(int(n))]  # a segment per piece
        else:
            r = plan.rows[k]
            pos = list(range(int(r["start"]), int(r["start"]) + int(r["length"])))
            piece = [0] * len(pos)
        seg, run_start = [], []
        for j, p in enumerate(pos):  # a new segment where the document or the piece changes
            new = j == 0 or docs[p] != docs[pos[j - 1]] or piece[j] != piece[j - 1]
            seg.append((seg[-1] + 1 if j else 0) if new else seg[-1])
            run_start.append(j if new else run_start[-1])
        L = len(pos)
        for j in range(min(L - 1, T)):
            X[i, j], Y[i, j], S[i, j], A[i, j] = tokens[pos[j]], tokens[pos[j + 1]], seg[j], 1
            if cross_doc == "mask" and seg[j + 1] != seg[j]:
                Y[i, j] = ignore
            P[i, j] = {"window": j, "doc": j - run_start[j], "source": pos[j] - starts[docs[pos[j]]]}[positions]
        for j in range(min(L - 1, T), T):
            P[i, j] = j if positions == "window" else j - (L - 1)
        b = i * T
        for j in range(T):  # a run starts at each row's start, at a new segment, where padding begins
            if j == 0 or S[i, j] != S[i, j - 1]:
                runs.append(b + j)
    cu = runs + [B * T]
    return X, Y, P, S, A, np.array(cu)


@pytest.fixture(params=["c", "numpy"])
def kernel(request, monkeypatch):
    """Both ways a batch is built: the C pass (_fast.c's rows_packed, rows_xy) and numpy alone."""
    if request.param == "numpy":
        monkeypatch.setattr(boundaries, "FAST", None)
    elif boundaries.FAST is None:
        pytest.fail("the C module is not built: make builds it (setup.py), tests must cover it")
    return request.param


@pytest.mark.parametrize("kind", ["best-fit", "best-fit-truncate", "plain", "doc", "greedy", "sentence"])
@pytest.mark.parametrize(("positions", "cross_doc"), [("doc", "mask"), ("source", "keep"), ("window", "mask"),
                                                      ("window", "keep")])
def test_every_batch_field_matches_the_brute_force(folder, kind, positions, cross_doc, kernel):
    tokens = np.fromfile(folder / "data/train.bin", np.uint16).astype(np.int64)
    docs = doc_of(tokens)
    starts = doc_start(docs)
    L = winsample.Loader(folder / f"{kind}.npy", folder / "data/train.bin", batch_size=5, seed=11, short="pad",
                         positions=positions, cross_doc_labels=cross_doc)
    plan = L.plan(0)
    crossed = 0
    for step in range(len(L)):
        b = L.batch(0, step)
        X, Y, P, S, A, cu = expected(plan, L.row_index(0, step), tokens, docs, starts, positions, cross_doc, L.pad_id)
        x, y = b  # old loops keep working
        assert (x == X).all() and (y == Y).all()
        assert (b.position_ids == P).all() and (b.segments == S).all() and (b.attention_mask == A).all()
        assert b.cu_seqlens.tolist() == cu.tolist() and b.max_seqlen == int(np.diff(cu).max())
        assert b.x.dtype == np.int64 and b.position_ids.dtype == np.int64 and b.segments.dtype == np.int32
        assert b.cu_seqlens.dtype == np.int32
        crossed += int((S.max(axis=1) > 0).sum())
    if kind in ("doc", "sentence"):
        assert crossed == 0  # these plans never cross a document: one segment per row
    else:
        assert crossed > 0  # the plan does put several documents in a row: the check was not vacuous


def test_best_fit_plan_is_padded_by_default_and_fuller_than_greedy(folder):
    best = winsample.Loader(folder / "best-fit.npy", folder / "data/train.bin", batch_size=1, seed=0)
    greedy = winsample.read_plan(folder / "greedy.npy")
    assert best.short is None and len(best) == len(best.plan(0))  # every window served, none dropped
    side = json.loads((folder / "best-fit.npy.json").read_text())
    tokens = int(np.fromfile(folder / "data/train.bin", np.uint16).size)
    assert side["stats"]["covered_tokens"] == tokens  # split: every token planned once
    span = T + 1
    assert side["stats"]["fill"] == pytest.approx(tokens / (side["stats"]["windows"] * span))
    # greedy's windows of whole short documents, plus regular windows over the long ones
    greedy_fill = int(greedy.rows["length"].sum()) / (len(greedy.rows) * span)
    assert side["stats"]["fill"] > greedy_fill


def test_a_greedy_packed_plan_is_padded_by_default_so_its_short_documents_are_served(folder):
    """New-user trial: greedy --pack put nearly every short document in a short window, which the
    Loader's default (short='drop' then) and get_batch left out, silently."""
    plan = winsample.read_plan(folder / "greedy.npy")
    win = plan.windows
    short = int((win["length"] < T + 1).sum())
    assert short >= 40  # 52 windows of whole short documents, packed: the case is not vacuous
    L = winsample.Loader(folder / "greedy.npy", folder / "data/train.bin", batch_size=4, seed=0)
    served = {tuple(r) for s in range(len(L)) for r in L.rows(0, s)[["start", "length"]].tolist()}
    assert len(served) + L.left_out == len(win)  # every window, short ones too, once an epoch (left_out < 4 aside)
    assert sum(1 for _, n in served if n < T + 1) >= short - 3
    b = winsample.get_batch(plan, folder / "data/train.bin", 256, 0)
    assert (b.y == -1).any()  # short windows drawn, padded after their tokens


def test_get_batch_refuses_a_window_over_the_span_as_the_loader_does(folder):
    """A best-fit window whose segments add up past the span (rows edited by hand) stopped get_batch
    with an internal error; it is the Loader's DataError now."""
    plan = winsample.read_plan(folder / "best-fit.npy")
    rows = plan.rows.copy()
    w = rows["window"]
    # the first segment of a window of several moves into the window before it
    k = next(int(i) + 1 for i in np.flatnonzero(w[1:] != w[:-1]) if i + 2 < len(w) and w[i + 2] == w[i + 1])
    rows["window"][k] = w[k - 1]
    assert int(rows["length"][rows["window"] == w[k - 1]].sum()) > T + 1
    edited = winsample.train.Plan(rows, plan.sidecar, None)
    for call in (lambda: winsample.get_batch(edited, folder / "data/train.bin", 4, 0),
                 lambda: winsample.Loader(edited, folder / "data/train.bin", batch_size=4, seed=0).batch(0, 0)):
        with pytest.raises(winsample.errors.DataError, match=r"window lengths must be in \[2, span 33\]"):
            call()


@pytest.mark.parametrize("kind", ["best-fit", "doc", "plain"])
@pytest.mark.parametrize("cross_doc", ["keep", "mask"])
def test_exposure_counts_the_labels_the_batches_train_on(folder, kind, cross_doc, kernel):
    L = winsample.Loader(folder / f"{kind}.npy", folder / "data/train.bin", batch_size=3, seed=5, short="pad",
                         cross_doc_labels=cross_doc)
    trained = sum(int((L.batch(0, s).y != -1).sum()) for s in range(len(L)))
    assert L.exposure(0).trained_tokens == trained


def test_a_batch_is_pure_by_epoch_and_step(folder):
    a = winsample.Loader(folder / "best-fit.npy", folder / "data/train.bin", batch_size=4, seed=2, positions="doc",
                         cross_doc_labels="mask")
    b = winsample.Loader(folder / "best-fit.npy", folder / "data/train.bin", batch_size=4, seed=2, positions="doc",
                         cross_doc_labels="mask")
    b.batch(1, 3)
    for field in ("x", "y", "position_ids", "segments", "cu_seqlens"):
        assert (getattr(a.batch(0, 2), field) == getattr(b.batch(0, 2), field)).all()


@pytest.mark.parametrize(("kw", "words"), [({"positions": "absolute"}, "positions must be one of window, doc, source"),
                                           ({"cross_doc_labels": "drop"}, "cross_doc_labels must be one of keep, mask")])
def test_unknown_choices_are_refused_by_name(folder, kw, words):
    with pytest.raises(winsample.errors.ConfigError, match=words):
        winsample.Loader(folder / "best-fit.npy", folder / "data/train.bin", batch_size=1, seed=0, **kw)


@pytest.mark.parametrize("kind", ["best-fit", "plain", "greedy"])
def test_get_batch_gives_the_same_fields_as_the_brute_force(folder, kind, kernel):
    tokens = np.fromfile(folder / "data/train.bin", np.uint16).astype(np.int64)
    docs = doc_of(tokens)
    plan = winsample.read_plan(folder / f"{kind}.npy")
    b = winsample.get_batch(plan, folder / "data/train.bin", 16, 4, positions="doc", cross_doc_labels="mask")
    # which windows were drawn: get_batch's contract is uniform draws by the seed's generator
    win = plan.windows
    eligible = np.arange(len(win)) if kind in ("best-fit", "greedy") else np.flatnonzero(win["length"] == T + 1)
    pick = eligible[np.random.default_rng(4).integers(0, len(eligible), size=16)]
    X, Y, P, S, A, cu = expected(plan, pick, tokens, docs, doc_start(docs), "doc", "mask", EOT)
    assert (b.x == X).all() and (b.y == Y).all() and (b.position_ids == P).all() and (b.segments == S).all()
    assert b.cu_seqlens.tolist() == cu.tolist()


def test_get_batch_over_a_token_array_finds_documents_by_eot(folder):
    tokens = np.fromfile(folder / "data/train.bin", np.uint16)
    plan = winsample.read_plan(folder / "plain.npy")
    on_path = winsample.get_batch(plan, folder / "data/train.bin", 8, 1, positions="source", cross_doc_labels="mask")
    on_array = winsample.get_batch(plan, tokens, 8, 1, positions="source", cross_doc_labels="mask")
    assert (on_path.y == on_array.y).all() and (on_path.position_ids == on_array.position_ids).all()
    x, y = on_array  # unpacks as the (x, y) tuple it used to be
    assert x.shape == (8, T) and (on_array.y == -1).any()  # windows over the concatenated corpus do cross documents


def test_locate_a_billionth_batch_is_arithmetic_not_a_walk(folder):
    import time

    L = winsample.Loader(folder / "best-fit.npy", folder / "data/train.bin", batch_size=2, seed=0)
    n = len(L)  # every epoch of one plan has the same batches
    t = time.perf_counter()
    assert L.locate(10**9) == (10**9 // n, 10**9 % n)
    assert L.locate(n * 7 + 1) == (7, 1)
    assert time.perf_counter() - t < 5  # was minutes: one epoch planned and ordered per step of the walk


def test_locate_through_a_list_of_plans_cycles_their_counts(folder):
    plans = [folder / "best-fit.npy", folder / "plain.npy"]
    L = winsample.Loader(plans, folder / "data/train.bin", batch_size=2, seed=0, short="pad")
    a, b = L.steps(0), L.steps(1)
    assert a != b  # the two plans have different batch counts
    walk = [(e, s) for e in range(6) for s in range(L.steps(e))]  # the brute force: epochs one after another
    assert [L.locate(k) for k in range(len(walk))] == walk
    assert L.locate(3 * (a + b) + a + 1) == (7, 1)


def test_locate_through_replanned_epochs_is_bounded(folder, monkeypatch):
    run("windows", folder / "data/train.bin", "-T", T, "--random-offset", "--seed", 1, "-o", folder / "ro.npy", "-q")
    L = winsample.Loader(folder / "ro.npy", folder / "data/train.bin", batch_size=2, seed=0)
    walk = [(e, s) for e in range(3) for s in range(L.steps(e))]
    assert [L.locate(k) for k in range(len(walk))] == walk  # counted epoch by epoch: each has its own cut
    monkeypatch.setattr(winsample.train.loader, "MAX_COUNTED_EPOCHS", 3)
    with pytest.raises(winsample.errors.ConfigError, match="lies past 3 epochs"):
        L.locate(len(walk) + 10**6)


def test_a_bin_of_the_right_length_but_other_tokens_is_refused(folder, tmp_path):
    # #29 class 6: the Loader and get_batch compare the sampled checksum the plan records
    other = tmp_path / "train.bin"
    tokens = np.fromfile(folder / "data/train.bin", np.uint16)
    tokens[len(tokens) // 2] ^= 1  # one token, in the first MiB of this small file
    tokens.tofile(other)
    with pytest.raises(winsample.errors.DataError, match="the sampled checksum .* differs"):
        winsample.Loader(folder / "plain.npy", other, batch_size=2, seed=0)
    with pytest.raises(winsample.errors.DataError, match="the sampled checksum .* differs"):
        winsample.get_batch(folder / "plain.npy", other, 2, 0)
    side = json.loads((folder / "plain.npy.json").read_text())
    assert side["source"]["sample"].startswith("xxh3_128-sampled:")
    winsample.Loader(folder / "plain.npy", folder / "data/train.bin", batch_size=2, seed=0)  # the right file passes


@pytest.mark.parametrize("plan", [np.zeros(3, np.int64), 3.5, lambda e: 5])
def test_a_plan_that_is_not_one_is_refused_by_name(folder, plan):
    # #29 class 6: rows loaded with np.load, or a function returning an int, were a bare TypeError
    with pytest.raises(winsample.errors.ConfigError, match="Plan|plan's path"):
        winsample.Loader(plan, folder / "data/train.bin", batch_size=2, seed=0)
