"""`winsample windows`: pinned cases (hand arithmetic), invariants (hypothesis vs brute force), CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from winsample import formats, planning
from winsample.cli import main

from ..bench.article_sampler import SlidingWindowSampler


def bin_file(path, n, dtype="<u2"):
    """A bare .bin whose token at position i is i % 50000 (so a window's content names its place)."""
    (np.arange(n) % 50000).astype(dtype).tofile(path)
    return path


def run_cli(*args):
    return CliRunner().invoke(main, ["windows", *map(str, args)])


def plan_of(path):
    rows, side = formats.read_plan(path)
    return rows, side


# --- pinned cases ---------------------------------------------------------------------------


def test_10000_tokens_512_256_gives_38_full_windows_and_drop_leaves_16(tmp_path):
    b = bin_file(tmp_path / "a.bin", 10000)
    r = run_cli(b, "-T", 512, "--no-targets", "--stride", 256, "--tail", "drop", "-o", tmp_path / "p.npy", "-q")
    assert r.exit_code == 0, r.stderr
    rows, side = plan_of(tmp_path / "p.npy")
    # (10000 - 512) // 256 + 1 = 37 + 1 = 38; last start 37 * 256 = 9472; 9472 + 512 = 9984 → 16 left
    assert len(rows) == 38
    assert rows["start"].tolist() == [256 * i for i in range(38)]
    assert rows["start"][-1] == 9472
    assert set(rows["length"].tolist()) == {512}
    assert side["stats"]["uncovered_tail"] == 16
    assert side["stats"]["uncovered_tokens"] == 16
    assert side["stats"]["covered_tokens"] == 9984


def test_10000_tokens_512_256_align_adds_exactly_one_window_at_9488(tmp_path):
    b = bin_file(tmp_path / "a.bin", 10000)
    r = run_cli(b, "-T", 512, "--no-targets", "--stride", 256, "-o", tmp_path / "p.npy", "-q")
    assert r.exit_code == 0, r.stderr
    rows, side = plan_of(tmp_path / "p.npy")
    assert len(rows) == 39
    assert rows["start"][-2:].tolist() == [9472, 9488]  # 10000 - 512 = 9488
    assert rows["fresh"][-1] == 9472 + 512 - 9488  # 496 tokens already seen, 16 new
    assert side["stats"]["coverage"] == 1.0 and side["stats"]["uncovered_tail"] == 0


def test_article_sampler_agrees_on_the_regular_starts_of_the_pinned_case():
    sampler = SlidingWindowSampler(list(range(10000)), window_size=512, stride=256)
    starts = [s for s, _ in sampler]
    rows = planning.plan_regular([0], [10000], 512, 256, tail="drop")
    assert rows["start"].tolist() == starts[:38]  # the 39th it yields is its tail window, 9488 as ours
    assert starts[38] == 9488


def test_n10_t4_stride1_starts_0_to_5_and_every_xy_pair_aligned(tmp_path):
    b = bin_file(tmp_path / "a.bin", 10)
    r = run_cli(b, "-T", 4, "--stride", 1, "-o", tmp_path / "p.npy", "-q")
    assert r.exit_code == 0, r.stderr
    rows, side = plan_of(tmp_path / "p.npy")
    assert rows["start"].tolist() == [0, 1, 2, 3, 4, 5]  # last legal start N - T - 1 = 5
    assert set(rows["length"].tolist()) == {5}
    tokens = np.fromfile(b, "<u2").astype(np.int64)
    for s in rows["start"]:
        w = tokens[s : s + 5]
        x, y = w[:4], w[1:]
        assert x.tolist() == list(range(s, s + 4))
        assert y.tolist() == list(range(s + 1, s + 5))  # the next token, never the same one


def test_n9_t8_exactly_one_window(tmp_path):
    b = bin_file(tmp_path / "a.bin", 9)
    assert run_cli(b, "-T", 8, "-o", tmp_path / "p.npy", "-q").exit_code == 0
    rows, _ = plan_of(tmp_path / "p.npy")
    assert rows["start"].tolist() == [0] and rows["length"].tolist() == [9]


def test_a_file_shorter_than_span_gets_a_short_window_and_a_note_on_stderr(tmp_path):
    b = bin_file(tmp_path / "a.bin", 100)
    r = run_cli(b, "-T", 1000, "-o", tmp_path / "p.npy")
    assert r.exit_code == 0 and r.stdout == ""
    assert "note: 100 tokens < span 1001: no full window, only a short one" in r.stderr
    rows, _ = plan_of(tmp_path / "p.npy")
    assert rows["start"].tolist() == [0] and rows["length"].tolist() == [100]
    assert "note:" not in run_cli(b, "-T", 99, "-o", tmp_path / "q.npy").stderr  # span 100 = N: one full window


def test_n8_t8_has_no_full_window(tmp_path):
    b = bin_file(tmp_path / "a.bin", 8)
    assert run_cli(b, "-T", 8, "-o", tmp_path / "keep.npy", "-q").exit_code == 0
    rows, side = plan_of(tmp_path / "keep.npy")
    assert rows["length"].tolist() == [8]  # the one short window [0, 8): 8 < span 9
    assert run_cli(b, "-T", 8, "--short", "drop", "-o", tmp_path / "drop.npy", "-q").exit_code == 0
    rows, side = plan_of(tmp_path / "drop.npy")
    assert len(rows) == 0 and side["stats"]["uncovered_tokens"] == 8


def test_the_summary_names_the_tokens_short_drop_leaves_out(tmp_path):
    """807 tokens, T 1000 (span 1001), --short drop: no window; the line and --json say all 807
    are in a document no window reaches, not only "0 tail tokens uncovered"."""
    b = bin_file(tmp_path / "a.bin", 807)
    r = run_cli(b, "-T", 1000, "--short", "drop", "-o", tmp_path / "p.npy")
    assert r.exit_code == 0 and r.stdout == ""
    assert "0 tail tokens uncovered, and 807 tokens in documents no window reaches" in r.stderr
    r = run_cli(b, "-T", 1000, "--short", "drop", "-o", tmp_path / "p.npy", "--json")
    assert json.loads(r.stdout)["uncovered_dropped"] == 807


def test_short_drop_over_documents_counts_the_tokens_of_each_short_one(tmp_path):
    """Documents of 6 and of 201 tokens (gpt2: "word" then " word"s, and the EOT), T 100: the
    summary's dropped tokens are the short documents' tokens, counted here from the EOT ids."""
    src = tmp_path / "d.jsonl"
    src.write_text("".join(json.dumps({"text": "word" + " word" * (4 if i % 3 else 199)}) + "\n" for i in range(30)))
    r = CliRunner().invoke(main, ["encode", str(src), "-o", str(tmp_path / "out"), "-q", "--val-fraction", "0"])
    assert r.exit_code == 0, r.stderr
    ids = np.fromfile(tmp_path / "out" / "train.bin", np.uint16)
    ends = np.flatnonzero(ids == 50256) + 1
    lengths = np.diff(np.concatenate([[0], ends]))
    assert sorted(set(lengths.tolist())) == [6, 201]  # as the comment says
    short = int(lengths[lengths < 101].sum())
    r = run_cli(tmp_path / "out" / "train.bin", "-T", 100, "--boundaries", "doc", "--short", "drop", "-o",
                tmp_path / "p.npy", "--json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["uncovered_dropped"] == short == 20 * 6
    assert f"and {short} tokens in documents no window reaches" in r.stderr


def test_overlap_half_at_span_512_is_stride_256():
    assert planning.resolve_stride(512, 512, overlap=0.5) == 256  # round(512 * 0.5)
    assert planning.resolve_stride(512, 511, overlap=0.5) == 256  # T=511 with targets: span 512


def test_stride_equal_to_span_has_no_overlap_and_no_gap():
    rows = planning.plan_regular([0], [4096], 512, 512, tail="drop")
    assert rows["start"].tolist() == list(range(0, 4096, 512))
    assert (rows["fresh"] == 0).all()
    ends = rows["start"] + rows["length"]
    assert (rows["start"][1:] == ends[:-1]).all()


def test_default_stride_is_half_of_T():
    assert planning.resolve_stride(1025, 1024) == 512


def test_aligned_tail_is_never_a_duplicate():
    # (N - span - O) = 1000 - 100 - 0 = 900 is a multiple of S = 50: last regular window ends at N
    rows = planning.plan_regular([0], [1000], 100, 50)
    assert rows["start"][-1] == 900 and len(rows) == 19
    assert len(set(rows["start"].tolist())) == len(rows)
    # the article's sampler yields 900 twice here: the bug the plan must not copy
    assert [s for s, _ in SlidingWindowSampler(list(range(1000)), 100, 50)][-2:] == [900, 900]


def test_tail_short_without_targets_emits_the_leftover():
    rows = planning.plan_regular([0], [1000], 300, 300, tail="short", targets=False)
    assert list(zip(rows["start"].tolist(), rows["length"].tolist())) == [(0, 300), (300, 300), (600, 300), (900, 100)]


def test_tail_short_with_targets_starts_one_before_the_last_end():
    # regular windows end at 300, 600, 900; the leftover [900, 1000) is taken from 899, so token 900,
    # the first of the leftover, is a target (y of the window starting at 899)
    rows = planning.plan_regular([0], [1000], 300, 300, tail="short")
    assert list(zip(rows["start"].tolist(), rows["length"].tolist())) == [(0, 300), (300, 300), (600, 300), (899, 101)]
    assert rows["fresh"][-1] == 1


def test_tail_short_one_token_leftover_becomes_a_two_token_window():
    # span 300 stride 300 over 901 tokens: last regular end 900, one token left over
    rows = planning.plan_regular([0], [901], 300, 300, tail="short")
    assert rows["start"][-1] == 899 and rows["length"][-1] == 2  # one (x, y) pair: x = 899, y = 900
    rows = planning.plan_regular([0], [901], 300, 300, tail="short", targets=False)
    assert rows["start"][-1] == 900 and rows["length"][-1] == 1  # without targets a 1-token window is fine


def test_one_token_document_gets_no_window_with_targets():
    # docs [0, 5) [5, 6) [6, 10), span 5: the middle document is one token, no (x, y) pair
    ds, de = [0, 5, 6], [5, 6, 10]
    rows = planning.plan_regular(ds, de, 5, 2)
    assert list(zip(rows["start"].tolist(), rows["length"].tolist(), rows["doc"].tolist())) == [(0, 5, 0), (6, 4, 2)]
    stats = planning.plan_stats(rows, 10, ds, de)
    assert stats["uncovered_dropped"] == 1 and stats["uncovered_tokens"] == 1
    assert planning.plan_regular(ds, de, 5, 2, targets=False)["length"].tolist() == [5, 1, 4]
    # packed, span 5: [0,5) and [5,10) each fill a window; the last document, one token, is left alone
    ds2, de2 = [0, 5, 10], [5, 10, 11]
    packed = planning.plan_packed(ds2, de2, 5, 2)
    assert list(zip(packed["start"].tolist(), packed["length"].tolist())) == [(0, 5), (5, 5)]
    assert planning.plan_packed(ds2, de2, 5, 2, targets=False)["length"].tolist() == [5, 5, 1]


def test_offset_is_clamped_to_n_minus_span():
    rows = planning.plan_regular([0], [1000], 100, 50, offset=5000)
    assert rows["start"].tolist() == [900]  # min(5000, 1000 - 100)


def test_offset_leaves_head_uncovered_and_counts_it():
    rows = planning.plan_regular([0], [1000], 100, 50, offset=30)
    assert rows["start"][0] == 30
    stats = planning.plan_stats(rows, 1000, [0], [1000])
    assert stats["uncovered_head"] == 30 and stats["uncovered_tail"] == 0 and stats["covered_tokens"] == 970


def test_empty_bin_gives_empty_plan(tmp_path):
    b = tmp_path / "e.bin"
    b.write_bytes(b"")
    r = run_cli(b, "-T", 8, "-o", tmp_path / "p.npy", "--json")
    assert r.exit_code == 0, r.stderr
    rows, side = plan_of(tmp_path / "p.npy")
    assert len(rows) == 0 and json.loads(r.stdout)["windows"] == 0
    r = run_cli(b, "-T", 8, "-o", tmp_path / "p.npy")
    assert r.exit_code == 0 and "note: no window fits in 0 tokens (span 9): the plan is empty" in r.stderr


def test_random_offset_same_seed_epoch_same_plan_other_epoch_other_offset(tmp_path):
    b = bin_file(tmp_path / "a.bin", 5000)
    offs = []
    for epoch in range(12):
        out = tmp_path / f"p{epoch}.npy"
        assert run_cli(b, "-T", 100, "--stride", 64, "--random-offset", "--seed", 7, "--epoch", epoch, "-o", out, "-q").exit_code == 0
        rows, side = plan_of(out)
        assert 0 <= side["params"]["offset"] < 64 and rows["start"][0] == side["params"]["offset"]
        offs.append(side["params"]["offset"])
    again = tmp_path / "again.npy"
    run_cli(b, "-T", 100, "--stride", 64, "--random-offset", "--seed", 7, "--epoch", 3, "-o", again, "-q")
    assert (tmp_path / "p3.npy").read_bytes() == again.read_bytes()
    assert len(set(offs)) > 1  # 12 epochs drawing from 64 values: all equal has probability 64**-11


def test_random_offset_is_shared_by_every_document():
    off = planning.draw_offset(1, 2, 40)
    rows = planning.plan_regular([0, 500, 1200], [500, 1200, 2000], 100, 40, offset=off)
    firsts = [rows["start"][rows["doc"] == d][0] - s for d, s in enumerate([0, 500, 1200])]
    assert firsts == [off] * 3


# --- invariants over random layouts, checked against brute-force per-token coverage ----------


def brute_coverage(rows, n):
    cov = np.zeros(n, np.int64)
    fresh = []
    for s, l in zip(rows["start"].tolist(), rows["length"].tolist()):
        fresh.append(int(np.argmin(np.r_[cov[s : s + l] > 0, False])))  # leading covered tokens
        cov[s : s + l] += 1
    return cov, fresh


def brute_targets(rows, n):
    """Per token: how many windows have it as a label y (every token of a window but its first)."""
    ycov = np.zeros(n, np.int64)
    for s, l in zip(rows["start"].tolist(), rows["length"].tolist()):
        ycov[s + 1 : s + l] += 1
    return ycov


def check_invariants(rows, ds, de, span, targets=False, labels=None):
    """``targets``: every window holds an (x, y) pair (length >= 2). ``labels`` (default: targets):
    consecutive windows of a document overlap by >= 1 token and every token of a document's covered
    range but its first is some window's target (brute force)."""
    labels = targets if labels is None else labels
    n = int(de[-1]) if len(de) else 0
    assert (rows["length"] <= span).all() and (rows["length"] >= (2 if targets else 1)).all()
    assert len({(int(s), int(l)) for s, l in zip(rows["start"], rows["length"])}) == len(rows)
    ycov = brute_targets(rows, n)
    for d in np.unique(rows["doc"]):
        r = rows[rows["doc"] == d]
        assert (np.diff(r["start"]) > 0).all()
        ends = r["start"] + r["length"]
        assert (r["start"][1:] <= ends[:-1] - (1 if labels else 0)).all()  # no gap (with labels: overlap >= 1)
        assert r["start"][0] >= ds[d] and ends[-1] <= de[d]
        if labels:
            a, b = int(r["start"][0]), int(ends.max())
            assert (ycov[a + 1 : b] > 0).all()  # no token of the covered range skipped as a label
    cov, fresh = brute_coverage(rows, n)
    assert rows["fresh"].tolist() == fresh
    return cov


layouts = st.lists(st.integers(0, 300), min_size=1, max_size=6)


@settings(max_examples=150, deadline=None)
@given(lengths=layouts, T=st.integers(1, 80), targets=st.booleans(), sdiv=st.integers(1, 8),
       offset=st.integers(0, 120), tail=st.sampled_from(planning.TAILS), short=st.sampled_from(planning.SHORTS))
def test_regular_plan_invariants(lengths, T, targets, sdiv, offset, tail, short):
    span = T + targets
    S = max(1, span // sdiv)
    edges = np.cumsum([0] + lengths)
    ds, de = edges[:-1], edges[1:]
    rows = planning.plan_regular(ds, de, span, S, offset, tail, short, targets)
    # stride = span (no overlap) is the user's choice: each join then skips one label
    cov = check_invariants(rows, ds, de, span, targets, labels=targets and S < span)
    stats = planning.plan_stats(rows, int(edges[-1]), ds, de)
    assert stats["covered_tokens"] == int((cov > 0).sum())
    for d, (a, b) in enumerate(zip(ds, de)):
        L = b - a
        c = cov[a:b] > 0
        if L >= span:
            O = min(offset, L - span)
            regular = rows["start"][rows["doc"] == d][: (L - span - O) // S + 1] - a
            # the article's sampler, as an independent oracle for the regular starts
            assert regular.tolist() == [s for s, _ in SlidingWindowSampler(list(range(L)), span, S, offset, True)]
            assert not c[:O].any() and c[O:].any()
            if tail != "drop":
                assert c[O:].all()  # only the head before the offset is left out
            else:
                last_end = O + ((L - span - O) // S) * S + span
                assert c[O:last_end].all() and not c[last_end:].any()
        elif L:
            kept = short == "keep" and L >= 1 + targets  # with targets a 1-token document holds no (x, y) pair
            assert c.all() == kept and c.any() == kept
    if tail != "drop" and offset == 0 and short == "keep" and not (targets and 1 in lengths):
        assert stats["coverage"] == 1.0


@settings(max_examples=150, deadline=None)
@given(lengths=layouts, span=st.integers(2, 60), sdiv=st.integers(1, 5), offset=st.integers(0, 50),
       short=st.sampled_from(planning.SHORTS), targets=st.booleans(), data=st.data())
@pytest.mark.usefixtures("kernels")  # on the C kernels and on numpy
def test_semantic_plan_invariants_and_edges(lengths, span, sdiv, offset, short, targets, data):
    S = max(1, span // sdiv)
    docs = np.cumsum([0] + lengths)
    ds, de = docs[:-1], docs[1:]
    n = int(docs[-1])
    inner = data.draw(st.sets(st.integers(1, max(1, n - 1)), max_size=max(0, n // 3))) if n > 1 else set()
    edges = np.array(sorted(inner - set(docs.tolist())), np.int64)
    rows = planning.plan_semantic(ds, de, edges, span, S, offset, short, targets)
    cov = check_invariants(rows, ds, de, span, targets)  # with targets even at S = span: overlap >= 1
    ov = int(targets)
    E = set(edges.tolist()) | set(docs.tolist())
    for d, (a, b) in enumerate(zip(ds, de)):
        r = rows[rows["doc"] == d]
        L = b - a
        if L == 0 or (L < span and short == "drop") or L <= ov:
            assert len(r) == 0
            continue
        assert (cov[a:b] > 0)[r["start"][0] - a :].all()  # nothing after the first start is missed
        assert r["start"][-1] + r["length"][-1] == b  # the last window reaches the document end
        first_target = a + min(offset, max(L - span, 0))
        assert r["start"][0] == max(e for e in E if a <= e <= first_target)
        pe = a
        for i in range(len(r) - 1):
            s, e = int(r["start"][i]), int(r["start"][i] + r["length"][i])
            allowed_end = [x for x in E if max(pe, s + ov) < x <= s + span]  # >= 1 + ov tokens
            assert e == (max(allowed_end) if allowed_end else s + span)
            nb = min(x for x in E if x > e)
            allowed = [x for x in E if max(s + 1, nb - span) <= x <= e - ov]  # with targets: e's token is a y
            ns, t = int(r["start"][i + 1]), e - (span - S)
            if allowed:
                assert ns in allowed and abs(ns - t) == min(abs(x - t) for x in allowed)
                assert ns == min(x for x in allowed if abs(x - t) == abs(ns - t))  # ties to the earlier
            else:  # the regular position, raised so the window can reach nb when it can
                lo = max(s + 1, nb - span)
                assert ns == min(max(t, lo if lo <= e - ov else s + 1), e - ov)
            pe = e


# --- bad input: one line, exit 2, nothing written ----------------------------------------------


@pytest.mark.parametrize("args", [
    ["-T", "0"],
    ["-T", "8", "--stride", "0"],
    ["-T", "8", "--overlap", "1.0"],
    ["-T", "8", "--overlap", "-0.1"],
    ["-T", "8", "--offset", "3", "--random-offset", "--seed", "1"],
    ["-T", "8", "--random-offset"],
    ["-T", "8", "--stride", "20"],
    ["-T", "8", "--pack", "--boundaries", "none"],  # greedy packing places whole documents
    ["-T", "8", "--epoch", "3"],  # --epoch without --random-offset or --shuffle would change nothing
    ["-T", "abc"],
    ["-T", "10,,20"],  # an empty item is a typo, not nothing
])
def test_bad_options_exit_2_and_write_nothing(tmp_path, args):
    b = bin_file(tmp_path / "a.bin", 100)
    before = sorted(p.name for p in tmp_path.iterdir())
    r = run_cli(b, *args, "-o", tmp_path / "p.npy")
    assert r.exit_code == 2, r.stderr
    assert r.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_odd_byte_size_exits_2_naming_stray_bytes(tmp_path):
    b = tmp_path / "odd.bin"
    b.write_bytes(b"\x00" * 7)
    r = run_cli(b, "-T", 2, "-o", tmp_path / "p.npy")
    assert r.exit_code == 2 and "stray byte" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "p.npy").exists()


def test_unwritable_output_exits_2(tmp_path):
    b = bin_file(tmp_path / "a.bin", 100)
    r = run_cli(b, "-T", 8, "-o", tmp_path / "missing" / "p.npy")
    assert r.exit_code == 2 and "does not exist" in r.stderr
    # a file where the folder should be (chmod cannot make a folder unwritable for root)
    r = run_cli(b, "-T", 8, "-o", b / "p.npy")
    assert r.exit_code == 2 and "cannot write" in r.stderr and "a.bin is not a folder" in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.bin"]


def test_output_that_is_a_device_or_fifo_or_ends_in_a_slash_is_refused_and_left_alone(tmp_path):
    b = bin_file(tmp_path / "a.bin", 100)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)  # like /dev/null: renaming a plan over it would replace it with a plain file
    r = run_cli(b, "-T", 8, "-o", fifo)
    assert r.exit_code == 2 and "not a regular file" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert fifo.is_fifo()
    r = run_cli(b, "-T", 8, "-o", f"{tmp_path / 'plans'}/")
    assert r.exit_code == 2 and "names a folder" in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.bin", "pipe"]


@pytest.mark.usefixtures("kernels")  # on the C kernels and on numpy
@pytest.mark.parametrize("kind", ["paragraph", "sentence"])
def test_an_id_outside_the_vocabulary_fails_naming_file_and_position(tmp_path, kind):
    ids = np.full(5000, 198, "<u2")  # GPT-2 "\n": paragraph edges everywhere
    ids[4321] = 50257  # one past GPT-2's last id
    b = tmp_path / "bad.bin"
    ids.tofile(b)
    r = run_cli(b, "-T", 16, "--boundaries", kind, "-o", tmp_path / "p.npy")
    assert r.exit_code == 1 and r.stdout == ""
    assert r.stderr.strip().splitlines() == [f"error: {b}: token id 50257 at position 4321 is outside the tokenizer's 50257 ids"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.bin"]


@pytest.mark.parametrize("value, on", [("", True), ("0", True), ("false", True), ("OFF", True), ("1", False), ("yes", False)])
def test_winsample_pure_turns_the_c_module_off_only_when_set_to_a_true_value(monkeypatch, value, on):
    from winsample.planning import boundaries as B

    monkeypatch.setenv("WINSAMPLE_PURE", value)
    assert (B.load_fast() is not None) == on
    # A fresh process, as a user runs it: what --version reports is what its runs use.
    r = subprocess.run([sys.executable, "-m", "winsample", "--version"], capture_output=True, text=True,
                       env=dict(os.environ, WINSAMPLE_PURE=value))
    assert r.returncode == 0 and r.stderr == ""
    assert r.stdout.strip().endswith("(C kernels: on)" if on else "(C kernels: off)")


def test_semantic_boundaries_with_unknown_tokenizer_names_meta_and_encoding(tmp_path):
    b = bin_file(tmp_path / "train.bin", 100)
    meta = {"format": "winsample", "version": 1, "dtype": "<u2",
            "tokenizer": {"name": "my-custom-bpe", "n_vocab": 50257, "eot": 50256},
            "splits": {"train": {"file": "train.bin", "tokens": 100, "bytes": 200, "documents": 1, "checksum": "xxh3_128:0"}}}
    formats.write_meta(tmp_path / "meta.json", meta)
    r = run_cli(b, "-T", 8, "--boundaries", "paragraph", "-o", tmp_path / "p.npy")
    assert r.exit_code == 2 and "--encoding" in r.stderr and "--meta" in r.stderr
    assert not (tmp_path / "p.npy").exists()


# --- sidecar, output formats, multi-scale, shards, shuffle, materialize, pack ---------------------


def test_sidecar_names_source_and_checksum_from_bytes(tmp_path):
    b = bin_file(tmp_path / "a.bin", 1000)
    assert run_cli(b, "-T", 100, "-o", tmp_path / "p.npy", "-q").exit_code == 0
    _, side = plan_of(tmp_path / "p.npy")
    import xxhash

    data = b.read_bytes()
    # the sample by hand: size (8 bytes LE), the first MiB (all 2000 bytes), 16 blocks from
    # size·i // 17 to the end (each < 64 KiB here), the last MiB (all of it again)
    sample = xxhash.xxh3_128((2000).to_bytes(8, "little") + data + b"".join(data[2000 * i // 17 :] for i in range(1, 17)) + data)
    assert side["source"] == {"path": str(b), "file": "a.bin", "bytes": 2000,
                              "checksum": "xxh3_128:" + xxhash.xxh3_128(data).hexdigest(),
                              "dtype": "<u2", "tokens": 1000, "sample": "xxh3_128-sampled:" + sample.hexdigest(),
                              "from_plan": "a.bin"}  # the plan lies beside it
    p = side["params"]
    assert (p["T"], p["span"], p["stride"], p["targets"], p["tail"], p["boundaries"]) == (100, 101, 50, True, "align", "none")
    assert p["overlap"] == pytest.approx(1 - 50 / 101)


def test_plain_mode_takes_checksum_from_meta_without_reading_tokens(tmp_path):
    b = bin_file(tmp_path / "train.bin", 1000)
    meta = {"format": "winsample", "version": 1, "dtype": "<u2",
            "tokenizer": {"name": "gpt2", "n_vocab": 50257, "eot": 50256},
            "splits": {"train": {"file": "train.bin", "tokens": 1000, "bytes": 2000, "documents": 1,
                                 "checksum": "xxh3_128:from-meta"}}}
    formats.write_meta(tmp_path / "meta.json", meta)
    assert run_cli(b, "-T", 100, "-o", tmp_path / "p.npy", "-q").exit_code == 0
    _, side = plan_of(tmp_path / "p.npy")
    assert side["source"]["checksum"] == "xxh3_128:from-meta" and side["tokenizer"]["name"] == "gpt2"


def test_txt_to_stdout_streams_start_tab_length(tmp_path):
    b = bin_file(tmp_path / "a.bin", 20)
    r = run_cli(b, "-T", 8, "--no-targets", "--stride", 4, "--format", "txt", "-o", "-")
    assert r.exit_code == 0
    # starts 0, 4, 8, 12 (12 + 8 = 20 ends exactly at N: no tail window)
    assert r.stdout == "0\t8\n4\t8\n8\t8\n12\t8\n"
    assert r.stderr.startswith("4 windows of span 8")  # the summary goes to stderr
    r = run_cli(b, "-T", 8, "--format", "txt", "-o", "-", "--json")
    assert r.exit_code == 2 and r.stdout == "" and "--json and -o - both want stdout" in r.stderr


def test_json_summary_on_stdout(tmp_path):
    b = bin_file(tmp_path / "a.bin", 10000)
    r = run_cli(b, "-T", 512, "--no-targets", "--stride", 256, "--tail", "drop", "-o", tmp_path / "p.npy", "--json")
    s = json.loads(r.stdout)
    assert (s["windows"], s["span"], s["uncovered_tail"]) == (38, 512, 16)
    assert s["coverage"] == pytest.approx(9984 / 10000)
    assert "38 windows" in r.stderr


def test_multi_scale_writes_one_plan_per_T(tmp_path):
    b = bin_file(tmp_path / "a.bin", 5000)
    assert run_cli(b, "-T", "64,128", "-o", tmp_path / "p.npy", "-q").exit_code == 0
    for T in (64, 128):
        rows, side = plan_of(tmp_path / f"p.T{T}.npy")
        assert side["params"]["T"] == T and set(rows["length"].tolist()) == {T + 1}
    assert not (tmp_path / "p.npy").exists()


def test_shards_are_round_robin_and_partition_the_plan(tmp_path):
    b = bin_file(tmp_path / "a.bin", 3000)
    assert run_cli(b, "-T", 64, "-o", tmp_path / "full.npy", "-q").exit_code == 0
    assert run_cli(b, "-T", 64, "--shards", 3, "-o", tmp_path / "p.npy", "-q").exit_code == 0
    full, _ = plan_of(tmp_path / "full.npy")
    for r in range(3):
        rows, side = plan_of(tmp_path / f"p.shard{r}of3.npy")
        assert side["params"]["shard"] == r and side["params"]["shards"] == 3
        assert rows.tolist() == full[r::3].tolist()


def test_shuffle_is_a_seeded_permutation(tmp_path):
    b = bin_file(tmp_path / "a.bin", 3000)
    run_cli(b, "-T", 32, "-o", tmp_path / "s.npy", "-q")
    for name, epoch in (("a", 0), ("b", 0), ("c", 1)):
        assert run_cli(b, "-T", 32, "--shuffle", "--seed", 5, "--epoch", epoch, "-o", tmp_path / f"{name}.npy", "-q").exit_code == 0
    s, _ = plan_of(tmp_path / "s.npy")
    a, _ = plan_of(tmp_path / "a.npy")
    c, _ = plan_of(tmp_path / "c.npy")
    assert sorted(a.tolist()) == sorted(s.tolist()) and a.tolist() != s.tolist()
    assert (tmp_path / "a.npy").read_bytes() == (tmp_path / "b.npy").read_bytes()
    assert a.tolist() != c.tolist()


def test_materialize_writes_windows_padded_with_eot(tmp_path):
    b = bin_file(tmp_path / "a.bin", 30)
    assert run_cli(b, "-T", 7, "--stride", 8, "--tail", "short", "--materialize", "-o", tmp_path / "p.npy", "-q").exit_code == 0
    rows, side = plan_of(tmp_path / "p.npy")
    arr = np.load(tmp_path / "p.tokens.npy")
    assert arr.shape == (4, 8) and side["materialized"]["pad_id"] == 50256
    # windows [0,8) [8,16) [16,24) and the leftover [24,30), taken from 23 (so 24 is a target): 7 tokens + one EOT
    assert arr[3].tolist() == [23, 24, 25, 26, 27, 28, 29, 50256]
    assert arr[1].tolist() == list(range(8, 16)) and rows["length"].tolist() == [8, 8, 8, 7]


def test_doc_boundaries_from_eot_never_cross_documents(tmp_path):
    toks = np.array([1, 2, 3, 50256, 4, 5, 6, 7, 8, 9, 50256, 10, 11], "<u2")
    toks.tofile(tmp_path / "a.bin")
    assert run_cli(tmp_path / "a.bin", "-T", 3, "--stride", 2, "--boundaries", "doc", "-o", tmp_path / "p.npy", "-q").exit_code == 0
    rows, side = plan_of(tmp_path / "p.npy")
    # docs [0,4) [4,11) [11,13), span 4, stride 2: doc0 → 0; doc1 → 4, 6, then align 7; doc2 short → 11 (len 2)
    assert list(zip(rows["start"].tolist(), rows["length"].tolist(), rows["doc"].tolist())) == [
        (0, 4, 0), (4, 4, 1), (6, 4, 1), (7, 4, 1), (11, 2, 2)]
    assert side["stats"]["documents"] == 3


def test_two_eots_in_a_row_give_a_one_token_document_without_a_window(tmp_path):
    toks = np.array([1, 2, 50256, 50256, 3, 4, 5, 50256], "<u2")
    toks.tofile(tmp_path / "a.bin")
    r = run_cli(tmp_path / "a.bin", "-T", 8, "--boundaries", "doc", "-o", tmp_path / "p.npy", "-q")
    assert r.exit_code == 0, r.stderr
    rows, side = plan_of(tmp_path / "p.npy")
    # documents [0,3) [3,4) [4,8), all shorter than span 9: kept whole, but [3,4) is one token, no (x, y)
    assert list(zip(rows["start"].tolist(), rows["length"].tolist(), rows["doc"].tolist())) == [(0, 3, 0), (4, 4, 2)]
    assert side["stats"]["uncovered_dropped"] == 1 and side["stats"]["covered_tokens"] == 7
    r = run_cli(tmp_path / "a.bin", "-T", 8, "--boundaries", "doc", "--pack", "-o", tmp_path / "k.npy", "-q")
    rows, _ = plan_of(tmp_path / "k.npy")
    assert rows["length"].min() >= 2  # packed: the 1-token document rides along with its neighbours


def test_pack_puts_whole_short_documents_together(tmp_path):
    toks = np.array([1, 50256, 2, 3, 50256, 4, 5, 6, 50256, 7, 50256], "<u2")
    toks.tofile(tmp_path / "a.bin")
    assert run_cli(tmp_path / "a.bin", "-T", 5, "--boundaries", "doc", "--pack", "-o", tmp_path / "p.npy", "-q").exit_code == 0
    rows, _ = plan_of(tmp_path / "p.npy")
    # docs of 2, 3, 4, 2 tokens into span 6: [2+3] [4+2]
    assert list(zip(rows["start"].tolist(), rows["length"].tolist(), rows["doc"].tolist())) == [(0, 5, 0), (5, 6, 2)]


def test_pack_alone_packs_along_document_edges_as_with_boundaries_doc(tmp_path):
    """--pack (greedy) implies --boundaries doc, as --pack best-fit needs none given: the same
    rows as the two written out, the sidecar saying doc, and the line saying it is packed."""
    toks = np.array([1, 50256, 2, 3, 50256, 4, 5, 6, 50256, 7, 50256], "<u2")
    toks.tofile(tmp_path / "a.bin")
    alone = run_cli(tmp_path / "a.bin", "-T", 5, "--pack", "-o", tmp_path / "p.npy")
    assert alone.exit_code == 0, alone.stderr
    assert "(T 5, greedy packing, no document longer than the span)" in alone.stderr  # 2, 3, 4, 2 tokens ≤ span 6
    both = run_cli(tmp_path / "a.bin", "-T", 5, "--boundaries", "doc", "--pack", "-o", tmp_path / "q.npy", "-q")
    assert both.exit_code == 0, both.stderr
    (rows, side), (rows_doc, _) = plan_of(tmp_path / "p.npy"), plan_of(tmp_path / "q.npy")
    assert rows.tolist() == rows_doc.tolist()
    assert list(zip(rows["start"].tolist(), rows["length"].tolist())) == [(0, 5), (5, 6)]  # [2+3] [4+2], by hand
    assert side["params"]["boundaries"] == "doc"


def test_jsonl_decode_adds_text(tmp_path, ref_gpt2):
    ids = ref_gpt2.encode_ordinary("Hello world, this is a test.")
    np.array(ids, "<u2").tofile(tmp_path / "a.bin")
    r = run_cli(tmp_path / "a.bin", "-T", len(ids) - 1, "--format", "jsonl", "--decode", "-o", "-")
    assert r.exit_code == 0, r.stderr
    objs = [json.loads(line) for line in r.stdout.splitlines()]
    assert objs == [{"start": 0, "length": len(ids), "doc": 0, "fresh": 0, "text": "Hello world, this is a test.",
                     "window": 0, "char_start": 0, "char_end": 28, "split_char": False, "prev": None, "next": None}]


def test_plain_plan_over_a_billion_tokens_is_arithmetic():
    # Planning takes only document edges, never the tokens; its speed is make bench's to report.
    # By hand: full windows start at 512k for k = 0 .. (10**9 - 1025) // 512 = 1953122, the last
    # ending at 1953122 * 512 + 1025 = 999999489; the 511 tokens after it get one right-aligned
    # window at 10**9 - 1025 = 999998975.
    rows = planning.plan_regular([0], [10**9], 1025, 512)
    stats = planning.plan_stats(rows, 10**9, [0], [10**9])
    assert len(rows) == 1953124 and stats["coverage"] == 1.0
    assert rows["start"][-2] == 999998464 and rows["start"][-1] == 999998975
    assert np.all(rows["length"] == 1025)


# --- regressions: with targets no token inside a covered run is skipped as a label -------------


def semantic_both_paths(ds, de, edges, span, S, targets=True):
    """plan_semantic by its scalar path and by numpy rounds; both must agree."""
    out = []
    for scalar_below in (10**9, 0):
        p = planning.SemanticPlanner(ds, de, span, S, 0, "keep", targets)
        p.SCALAR_BELOW = scalar_below
        p.feed(np.asarray(edges, np.int64), None)
        out.append(list(zip(p.finish()["start"].tolist(), p.finish()["length"].tolist())))
    assert out[0] == out[1]
    return out[0]


@pytest.mark.usefixtures("kernels")  # on the C kernels and on numpy
def test_semantic_next_start_is_at_most_previous_end_minus_one_with_targets():
    # one document [0, 20), span 5, stride 5, edges 5, 10, 15. From s = 0 the end is edge 5 and the
    # regular next start would be 5 itself, whose token would then never be a y. With targets the next
    # start is in [max(1, 10 - 5), 5 - 1] = [5, 4] (no edge): clip(5, 1, 4) = 4. From 4 (prev end 5):
    # no edge in (5, 9] → hard end 9; next start: edge 5 in [5, 8]. From 5: end 10, next clip(10, 6, 9) = 9;
    # from 9: hard end 14, next edge 10; from 10: end 15, next clip(15, 11, 14) = 14; from 14: hard end
    # 19, next edge 15; from 15: 20 - 15 <= 5, the last window [15, 20).
    got = semantic_both_paths([0], [20], [5, 10, 15], 5, 5)
    assert got == [(0, 5), (4, 5), (5, 5), (9, 5), (10, 5), (14, 5), (15, 5)]
    # without targets the next start may be the previous end: windows on the paragraph grid
    assert semantic_both_paths([0], [20], [5, 10, 15], 5, 5, targets=False) == [(0, 5), (5, 5), (10, 5), (15, 5)]


@pytest.mark.usefixtures("kernels")  # on the C kernels and on numpy
def test_semantic_window_is_never_one_token_with_targets():
    # one document [0, 30), span 10, stride 5, one edge at 1: the last edge in (0, 10] is 1, which
    # would make [0, 1), no (x, y) pair. With targets the end must be > s + 1: hard cut at 10; next
    # starts clip(e - 5, s + 1, e - 1) = 5, 10, 15, 20 (no edge in range); [20, 30) is the last.
    got = semantic_both_paths([0], [30], [1], 10, 5)
    assert got == [(0, 10), (5, 10), (10, 10), (15, 10), (20, 10)]
    assert semantic_both_paths([0], [30], [1], 10, 5, targets=False)[0] == (0, 1)  # allowed without targets


@pytest.mark.usefixtures("kernels")  # on the C kernels and on numpy
def test_semantic_one_token_document_gets_no_window_with_targets():
    rows = planning.plan_semantic([0, 1, 4], [1, 4, 9], [], 5, 2)
    assert list(zip(rows["start"].tolist(), rows["length"].tolist())) == [(1, 3), (4, 5)]
    assert planning.plan_semantic([0, 1, 4], [1, 4, 9], [], 5, 2, targets=False)["length"].tolist() == [1, 3, 5]


def corpus_data(tmp_path_factory) -> Path:
    """The shipped corpus encoded once per session (default options)."""
    data = tmp_path_factory.getbasetemp() / "corpus_data"
    if not (data / "train.bin").exists():
        from ..conftest import CORPUS

        r = CliRunner().invoke(main, ["encode", str(CORPUS), "-o", str(data), "-q"])
        assert r.exit_code == 0, r.stderr
    return data


@pytest.mark.parametrize("args", [["-T", "256", "--boundaries", "paragraph"], ["-T", "64", "--boundaries", "paragraph"],
                                  ["-T", "33", "--stride", "33", "--boundaries", "sentence"],
                                  ["-T", "8", "--boundaries", "sentence"]])
def test_semantic_plans_of_the_shipped_corpus_skip_no_label(tmp_path_factory, args):
    data = corpus_data(tmp_path_factory)
    out = tmp_path_factory.mktemp("plan") / "p.npy"
    assert run_cli(data / "train.bin", *args, "-o", out, "-q").exit_code == 0
    rows, side = plan_of(out)
    n = side["source"]["tokens"]
    ds = np.asarray(formats.read_doc_index(data / "train.docs.npy"), np.int64)
    assert len(ds) > 1 and side["stats"]["documents"] == len(ds)
    check_invariants(rows, ds, np.append(ds[1:], n), side["params"]["span"], targets=True)


@pytest.mark.parametrize("kind", ["paragraph", "sentence"])
def test_winsample_pure_gives_the_same_plan_bytes_as_the_c_module(tmp_path_factory, tmp_path, kind):
    data = corpus_data(tmp_path_factory)
    plans = {}
    for pure in ("0", "1"):
        env = dict(os.environ, WINSAMPLE_PURE=pure)
        probe = subprocess.run([sys.executable, "-c", "from winsample.planning import boundaries as b; print(b.FAST is None)"],
                               env=env, capture_output=True, text=True, check=True)
        assert probe.stdout.strip() == {"0": "False", "1": "True"}[pure]  # the C module is built, and the switch works
        out = tmp_path / f"pure{pure}.npy"
        r = subprocess.run([sys.executable, "-m", "winsample", "windows", str(data / "train.bin"), "-T", "64",
                            "--boundaries", kind, "-o", str(out), "-q"], env=env, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        plans[pure] = out.read_bytes()
    assert plans["0"] == plans["1"] and len(np.load(tmp_path / "pure0.npy")) > 1000


def test_each_shard_sidecar_counts_its_own_windows_and_coverage(tmp_path):
    b = bin_file(tmp_path / "a.bin", 3000)
    assert run_cli(b, "-T", 64, "-o", tmp_path / "full.npy", "-q").exit_code == 0
    assert run_cli(b, "-T", 64, "--shards", 3, "-o", tmp_path / "p.npy", "-q").exit_code == 0
    full, fside = plan_of(tmp_path / "full.npy")
    total = 0
    for r in range(3):
        rows, side = plan_of(tmp_path / f"p.shard{r}of3.npy")
        cov, _ = brute_coverage(rows[np.argsort(rows["start"])], 3000)
        assert side["stats"]["windows"] == len(rows)
        assert side["stats"]["covered_tokens"] == int((cov > 0).sum()) < 3000  # a third of the windows
        assert side["stats"]["uncovered_tokens"] == 3000 - int((cov > 0).sum())
        assert side["plan_stats"] == fside["stats"]
        total += side["stats"]["windows"]
    assert total == len(full) == fside["stats"]["windows"]


@pytest.mark.parametrize(("fmt", "name"), [("txt", "p.npy"), ("jsonl", "p.npy"), ("npy", "p.txt"), ("npy", "p.jsonl"),
                                           ("npy", "p.json")])
def test_a_plan_name_that_says_another_format_is_refused(tmp_path, fmt, name):
    """--format txt into p.npy wrote text that verify, inspect and the Loader then failed to read as .npy."""
    b = bin_file(tmp_path / "a.bin", 1000)
    r = run_cli(b, "-T", 8, "--format", fmt, "-o", tmp_path / name)
    assert r.exit_code == 2 and r.stderr.count("\n") == 1 and f"with --format {fmt}" in r.stderr
    assert not (tmp_path / name).exists()


@pytest.mark.parametrize(("name", "args"), [("p.npy.json", ("--format", "jsonl")), ("p.tokens.npy", ()),
                                           ("p.tokens.npy", ("--materialize",))])
def test_another_plans_sidecar_or_windows_is_never_written_over(tmp_path, name, args):
    """A new user's trial: `-o p.npy.json` wrote over plan p.npy's sidecar (p.npy then unreadable) and
    `-o p.tokens.npy` over its materialized windows (verify: another plan's shape), both exit 0."""
    b = bin_file(tmp_path / "a.bin", 3000)
    assert run_cli(b, "-T", 64, "--materialize", "-o", tmp_path / "p.npy", "-q").exit_code == 0
    before = {f.name: f.read_bytes() for f in tmp_path.iterdir()}
    r = run_cli(b, "-T", 32, *args, "-o", tmp_path / name, "-q")
    what = "sidecar" if name.endswith(".json") else "materialized windows"
    assert (r.exit_code, r.stdout) == (2, "")
    assert r.stderr == f"error: -o {tmp_path / name}: is the {what} of the plan {tmp_path / 'p.npy'}; writing it would break that plan: pick another output path\n"
    assert {f.name: f.read_bytes() for f in tmp_path.iterdir()} == before


@pytest.mark.parametrize(("name", "args", "what"), [("pl.tokens", (), "materialized windows"),
                                                   ("pl.json", ("--format", "jsonl"), "sidecar")])
def test_the_files_of_a_plan_named_without_npy_are_never_written_over(tmp_path, name, args, what):
    """A review: `-o pl` writes pl.json and pl.tokens, which the first fix (by .npy names) missed."""
    b = bin_file(tmp_path / "a.bin", 3000)
    assert run_cli(b, "-T", 64, "--materialize", "-o", tmp_path / "pl", "-q").exit_code == 0
    before = {f.name: f.read_bytes() for f in tmp_path.iterdir()}
    r = run_cli(b, "-T", 32, *args, "-o", tmp_path / name, "-q")
    assert r.exit_code == 2 and f"is the {what} of the plan {tmp_path / 'pl'}" in r.stderr
    assert {f.name: f.read_bytes() for f in tmp_path.iterdir()} == before


def test_a_plan_is_never_written_over_by_another_plans_materialized_windows(tmp_path):
    b = bin_file(tmp_path / "a.bin", 3000)
    assert run_cli(b, "-T", 64, "-o", tmp_path / "q.tokens.npy", "-q").exit_code == 0  # a plan of its own
    before = (tmp_path / "q.tokens.npy").read_bytes()
    r = run_cli(b, "-T", 32, "--materialize", "-o", tmp_path / "q.npy", "-q")  # would write q.tokens.npy
    assert r.exit_code == 2 and f"{tmp_path / 'q.tokens.npy'}: is a plan" in r.stderr
    assert (tmp_path / "q.tokens.npy").read_bytes() == before and not (tmp_path / "q.npy").exists()


def test_replanning_the_same_name_with_its_materialized_windows_is_no_refusal(tmp_path):
    b = bin_file(tmp_path / "a.bin", 3000)
    for T in ("64", "32", "32,48", "32,48"):
        r = run_cli(b, "-T", T, "--materialize", "--shards", 2, "-o", tmp_path / "r.npy", "-q")
        assert r.exit_code == 0, r.stderr


def test_a_plan_named_like_a_sidecar_or_windows_of_no_plan_is_written(tmp_path):
    b = bin_file(tmp_path / "a.bin", 3000)
    assert run_cli(b, "-T", 32, "-o", tmp_path / "q.tokens.npy", "-q").exit_code == 0  # there is no q.npy
    assert formats.load_plan(tmp_path / "q.tokens.npy")[1].T == 32


def test_a_new_plan_set_replaces_every_file_an_older_run_wrote_under_its_name(tmp_path):
    """#29 class 8: re-planning to the same -o left PLAN.tokens.npy, per-scale and per-shard
    files of the older set beside the new one (verify then failed a plan just written)."""
    bin_file(tmp_path / "t.bin", 5000)
    out = tmp_path / "p.npy"
    keep = tmp_path / "p.extra.npy"  # a user's file that only looks alike: not this plan's name
    keep.write_bytes(b"mine")
    first = CliRunner().invoke(main, ["windows", str(tmp_path / "t.bin"), "-T", "64,128", "--shards", "2",
                                      "--materialize", "-o", str(out), "-q"])
    assert first.exit_code == 0, first.stderr
    assert len(formats.plan_family(out)) == 2 * 2 * 3  # 2 scales × 2 shards × (plan, sidecar, tokens)
    again = CliRunner().invoke(main, ["windows", str(tmp_path / "t.bin"), "-T", "64", "-o", str(out), "-q"])
    assert again.exit_code == 0, again.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.extra.npy", "p.npy", "p.npy.json", "t.bin"]
    assert keep.read_bytes() == b"mine"


def test_plans_of_other_runs_whose_names_look_like_the_family_are_kept(tmp_path):
    """Adversarial trial: ``-o plans/train.npy`` deleted the user's own ``-o plans/train.T256.npy``
    and ``-o plans/train.shard0of2.npy`` (and their sidecars). Only files a run with this same
    -o wrote (their sidecar's ``output``) are an older set; a plan with no ``output`` recorded
    (written before it was) stays too."""
    bin_file(tmp_path / "t.bin", 5000)
    wrote = lambda out, *a: CliRunner().invoke(main, ["windows", str(tmp_path / "t.bin"), *a, "-o", str(tmp_path / out), "-q"])  # noqa: E731
    assert wrote("train.T256.npy", "-T", "256").exit_code == 0
    assert wrote("train.shard0of2.npy", "-T", "64").exit_code == 0
    old = tmp_path / "train.T32.npy.json"  # an older winsample's multi-scale file: no output recorded
    assert wrote("train.T32.npy", "-T", "32").exit_code == 0
    side = json.loads(old.read_text())
    del side["output"]
    old.write_text(json.dumps(side))
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert json.loads((tmp_path / "train.T256.npy.json").read_text())["output"] == "train.T256.npy"
    assert wrote("train.npy", "-T", "512").exit_code == 0
    after = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert set(after) == set(before) | {"train.npy", "train.npy.json"}
    assert all(after[n] == b for n, b in before.items())


def test_plan_family_is_exact_names_only(tmp_path):
    """A name that only ends like the plan's (a trailing newline, another stem) is not the plan's."""
    for name in ("p.npy", "p.npy.json", "p.T64.shard1of2.tokens.npy", "p.npy\n", "xp.npy", "p.npy.bak"):
        (tmp_path / name).write_bytes(b"")
    assert [q.name for q in formats.plan_family(tmp_path / "p.npy")] == ["p.T64.shard1of2.tokens.npy", "p.npy", "p.npy.json"]


def test_ten_thousand_scales_are_refused_before_anything_is_read(tmp_path):
    scales = ",".join(str(t) for t in range(2, 10_002))
    r = run_cli(tmp_path / "missing.bin", "-T", scales, "-o", tmp_path / "p.npy")
    assert r.exit_code == 2 and "10,000 scales in one run; at most 256" in r.stderr


def test_a_plan_mostly_of_short_windows_says_the_loader_leaves_them_out(tmp_path):
    """New-user trial: chat records under T, planned by default (per document), gave 43 short
    windows of 58, and the Loader (short='drop' by default) trained on 1 conversation of 44, silently."""
    src = tmp_path / "pairs.jsonl"
    src.write_text("".join(json.dumps({"prompt": f"Question {i}?", "response": f"Answer {i}."}) + "\n" for i in range(30)))
    assert CliRunner().invoke(main, ["encode", str(src), "--prompt-field", "prompt", "--response-field", "response", "-o",
                                     str(tmp_path / "sft"), "--val-fraction", "0", "-q"]).exit_code == 0
    r = run_cli(tmp_path / "sft" / "train.bin", "-T", 64, "-o", tmp_path / "p.npy")
    assert r.exit_code == 0
    rows = np.load(tmp_path / "p.npy")
    short = int((rows["length"] < 65).sum())
    assert short == len(rows) == 30  # one window per record, each a record of a few tokens
    held = int(rows["length"].sum())  # every token is in a short window: the whole file
    assert held == len(np.fromfile(tmp_path / "sft" / "train.bin", np.uint16))
    assert r.stderr.splitlines()[1] == (f"note: {short} of the {short} windows are shorter than the span (ended by the end of"
                                        f" a document or of the file), holding {held:,} tokens (100.0% of the file, a token"
                                        " counted once per window):"
                                        " winsample.Loader leaves short windows out unless short='pad', and get_batch draws"
                                        " full windows only; pad them (short='pad'), or pack them into full windows (--pack best-fit)")
    assert json.loads(run_cli(tmp_path / "sft" / "train.bin", "-T", 64, "-o", tmp_path / "p.npy", "--json").stdout)["short_windows"] == 30
    full = run_cli(tmp_path / "sft" / "train.bin", "-T", 4, "-o", tmp_path / "q.npy")  # windows shorter than the records: no note
    assert full.exit_code == 0 and "note:" not in full.stderr


def test_a_few_short_windows_holding_a_hundredth_of_the_tokens_get_the_note_and_greedy_packing_none(tmp_path):
    """New-user trial: 1,199 short man pages sat in short windows, under a quarter of the windows,
    and nothing said the Loader's default would leave their 500k tokens out."""
    ids = np.array(([7] * 639 + [50256]) * 100 + ([9] * 19 + [50256]) * 40, np.uint16)  # 100 long documents, 40 short
    ids.tofile(tmp_path / "t.bin")
    r = run_cli(tmp_path / "t.bin", "-T", 63, "--boundaries", "doc", "-o", tmp_path / "p.npy")
    rows = np.load(tmp_path / "p.npy")
    short = rows[rows["length"] < 64]
    assert r.exit_code == 0 and len(short) == 40 and len(short) * 4 < len(rows)  # fewer than a quarter of the windows
    assert int(short["length"].sum()) == 40 * 20  # 800 of 64,800 tokens: 1.23%
    assert "are shorter than the span (ended by the end of a document), holding 800 tokens (1.2% of the" \
           " file, a token counted once per window): winsample.Loader leaves short windows out unless short='pad'" in r.stderr
    greedy = run_cli(tmp_path / "t.bin", "-T", 63, "--boundaries", "doc", "--pack", "-o", tmp_path / "g.npy")
    assert greedy.exit_code == 0 and (np.load(tmp_path / "g.npy")["length"] < 64).any()  # three short ones a window
    assert "note:" not in greedy.stderr  # a packed plan's short windows are served padded by default


@pytest.mark.parametrize("boundaries", ["none", "paragraph"])
def test_the_short_window_note_names_the_edge_that_ended_them(tmp_path, boundaries):
    """New-user trial: with --boundaries none the one short window (the tail, --tail short) was said
    to be "ended by a document, paragraph or sentence edge"; it ends at the end of the file. By
    hand: 10,000 tokens, span 513, stride 256, offset 100: full windows start at 100 + 256k while
    start + 513 ≤ 10,000, so k = 0 … 36 (37 of them, the last [9316, 9829)); the short one takes
    the leftover from one token before that end (the guide): [9828, 10,000), 172 tokens."""
    np.arange(10_000, dtype=np.uint16).tofile(tmp_path / "t.bin")
    if boundaries == "none":
        r = run_cli(tmp_path / "t.bin", "-T", 512, "--stride", 256, "--offset", 100, "--tail", "short",
                    "--boundaries", "none", "-o", tmp_path / "p.npy")
        rows = np.load(tmp_path / "p.npy")
        assert r.exit_code == 0 and list(rows["start"][-2:]) == [9316, 9828] and list(rows["length"][-2:]) == [513, 172]
        assert "1 of the 38 windows is shorter than the span (ended by the end of the file), holding 172 tokens" in r.stderr
    else:
        text = "".join(f"Para {i} " + "word " * (3 + i % 5) + "\n\n" for i in range(400))
        CliRunner().invoke(main, ["encode", "-", "-o", str(tmp_path / "d"), "--val-fraction", "0", "-q"], input=text)
        r = run_cli(tmp_path / "d" / "train.bin", "-T", 64, "--boundaries", "paragraph", "-o", tmp_path / "p.npy")
        assert r.exit_code == 0 and "shorter than the span (ended by a paragraph edge)" in r.stderr


def test_files_named_like_the_family_that_record_no_run_are_kept_and_named_in_a_warning(tmp_path):
    # review: plans written before sidecars recorded `output` cannot be told from the user's own; kept, and said
    bin_file(tmp_path / "t.bin", 5000)
    r = run_cli(tmp_path / "t.bin", "-T", "32,64", "-o", tmp_path / "p.npy", "-q")
    assert r.exit_code == 0
    for name in ("p.T32.npy.json", "p.T64.npy.json"):  # as an older winsample wrote them
        side = json.loads((tmp_path / name).read_text())
        del side["output"]
        (tmp_path / name).write_text(json.dumps(side))
    r = run_cli(tmp_path / "t.bin", "-T", "128", "-o", tmp_path / "p.npy", "-q")
    assert r.exit_code == 0 and r.stdout == ""
    assert r.stderr == (f"warning: 4 file(s) beside {tmp_path / 'p.npy'} are named like this plan's other -T, --shards or"
                        " --materialize files but record no run (written before winsample recorded it): p.T32.npy,"
                        " p.T32.npy.json, p.T64.npy, p.T64.npy.json; left in place: remove them if they are an older set of this plan\n")
    assert sorted(q.name for q in tmp_path.glob("p.*")) == ["p.T32.npy", "p.T32.npy.json", "p.T64.npy", "p.T64.npy.json",
                                                           "p.npy", "p.npy.json"]


def test_a_meta_json_whose_token_count_is_not_its_bytes_is_refused_as_verify_fails_it(tmp_path):
    """A new user's trial: with splits.val.tokens edited (bytes and the file still agree), inspect
    warned and verify failed `meta`, but windows planned without a word."""
    import winsample
    from winsample.errors import DataError

    from ..conftest import CORPUS

    data = tmp_path / "data"
    assert CliRunner().invoke(main, ["encode", str(CORPUS), "-o", str(data), "-q"]).exit_code == 0
    assert run_cli(data / "val.bin", "-T", 64, "-o", tmp_path / "before.npy", "-q").exit_code == 0  # made while it was whole
    meta = json.loads((data / "meta.json").read_text())
    real = meta["splits"]["val"]["tokens"]
    assert meta["splits"]["val"]["bytes"] == 2 * real
    meta["splits"]["val"]["tokens"] = real - 600
    (data / "meta.json").write_text(json.dumps(meta))
    r = run_cli(data / "val.bin", "-T", 64, "-o", tmp_path / "p.npy")
    assert (r.exit_code, r.stdout) == (1, "") and not (tmp_path / "p.npy").exists()
    assert r.stderr == (f"error: {data / 'meta.json'}: val records {real - 600} tokens in {2 * real} bytes, which hold {real}"
                        f" tokens of uint16: meta.json does not describe {data / 'val.bin'} (edited, or another set's);"
                        " run `winsample verify`, or re-encode\n")
    assert run_cli(data / "train.bin", "-T", 64, "-o", tmp_path / "t.npy", "-q").exit_code == 0  # train's entry is whole
    with pytest.raises(DataError, match="val records"):  # nor is a plan made before the edit served from it
        winsample.Loader(str(tmp_path / "before.npy"), batch_size=2, seed=0).batch(0)


@pytest.mark.parametrize("extra", [["--pack"], ["--boundaries", "doc"]])
def test_the_summary_counts_the_documents_longer_than_the_span_and_only_then_gives_the_stride(tmp_path, extra):
    """Documents of 2, 9, 4 and 12 tokens (EOT included), span 6: by hand the 9 and the 12 are
    longer than the span, so they alone are windowed at the stride (the default, T // 2 = 2: overlap
    1 - 2/6); the line and --json say 2."""
    lengths = [2, 9, 4, 12]
    toks = np.concatenate([np.append(np.arange(1, n, dtype="<u2"), 50256) for n in lengths]).astype("<u2")
    toks.tofile(tmp_path / "a.bin")
    r = run_cli(tmp_path / "a.bin", "-T", 5, *extra, "-o", tmp_path / "p.npy")
    assert r.exit_code == 0, r.stderr
    assert "2 documents longer than the span, windowed at stride 2, overlap 66.7%)" in r.stderr
    j = run_cli(tmp_path / "a.bin", "-T", 5, *extra, "-o", tmp_path / "q.npy", "--json")
    assert json.loads(j.stdout)["long_documents"] == 2
