"""`winsample verify` on mixture plans (`winsample mix`, issue #34).

Three data folders are built here from made-up ids, each one document, with plans written by hand
(T = 3, span 4, a window every 3 tokens, so every token but the first is some window's label):

    source  N (tokens)  windows (starts 0, 3, …)  tokens the windows span
    web     31          10                        40
    code    19           6                        24
    books   13           4                        16

``mix web=0.6 code=0.3 books=0.1`` (one pass over the source that runs out first), by hand: web
runs out first (10 / 0.6 = 16.7 against 6 / 0.3 = 20 and 4 / 0.1 = 40), so an epoch is
round(50 / 3) = 17 windows: web its 10, and the other 7 shared 0.3 : 0.1 = 3 : 1, i.e. 5.25 and
1.75: floors 5 and 1, and the one left goes to the larger remainder (books, 0.75): counts 10, 5, 2.

Tampered mixtures are made by editing the files as a person or a script would; each fails with
exit 1, naming its check. Figures are by that hand arithmetic or brute force over the order the
Loader serves, never taken from the code under test.
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import winsample
from winsample import formats, provenance
from winsample.cli import main
from winsample.errors import DataError, InputError

from ..conftest import CL100K_SHA256, GPT2_SHA256
from .test_run import GPT2, NO_RETOKENIZE, edit_sidecar, make_folder, make_plan, one

T = 3
SIZES = {"web": 31, "code": 19, "books": 13}  # tokens; windows at 0, 3, …: (N − 1) / 3 of them
WINDOWS = {"web": 10, "code": 6, "books": 4}
COUNTS = {"web": 10, "code": 5, "books": 1}  # E = ⌊10 / 0.6⌋ = 16; the other 6 by 0.3 : 0.1 → 4.5, 1.5 → 5, 1 (tie: the earlier)
E = 16
MIX_CHECKS = ("mixture_sources", "mixture_counts", "mixture_prefix")


def source_plan(folder: Path, windows: int, **extra) -> Path:
    starts = [3 * i for i in range(windows)]
    return make_plan(folder / "train.plan.npy", folder / "train.bin", starts, [T + 1] * windows, T=T,
                     tokenizer=dict(GPT2), **extra)


@pytest.fixture
def mix(tmp_path) -> Path:
    """Three sources and their mixture, tmp_path/mix.plan.npy (the sources named relative to it)."""
    for k, (name, n) in enumerate(SIZES.items()):
        base = 1000 * (k + 1)
        folder = make_folder(tmp_path / name, list(range(base, base + n)), list(range(base + 500, base + 505)))
        source_plan(folder, WINDOWS[name])
    out = tmp_path / "mix.plan.npy"
    r = CliRunner().invoke(main, ["mix", *(f"{name}={w}:{tmp_path / name / 'train.plan.npy'}"
                                           for name, w in (("web", "0.6"), ("code", "0.3"), ("books", "0.1"))), "-o", str(out), "-q"])
    assert r.exit_code == 0, r.stderr
    return out


def verify(*args) -> tuple[int, dict, str]:
    r = CliRunner().invoke(main, ["verify", *map(str, args), NO_RETOKENIZE, "--json"])
    return r.exit_code, json.loads(r.stdout) if r.stdout else {}, r.stderr


def failing(doc: dict) -> dict[tuple[str, str], str]:
    return {(c["name"], c["file"]): c["detail"] for c in doc["checks"] if c["status"] == "fail"}


# --- an honest mixture ------------------------------------------------------------------------------


def test_an_honest_mixture_passes_every_check_of_it_and_of_each_source(mix):
    code, doc, err = verify(mix)
    assert (code, err) == (0, "")
    assert {c["status"] for c in doc["checks"]} <= {"pass", "skip"}
    for name in SIZES:  # each source's line, then its own plan's checks against its own token file
        src = one(doc, "mixture_sources", f"{name}:train.plan.npy")
        assert (src["status"], src["mixture"], src["source"], src["plan"]) == ("pass", "mix.plan.npy", name, f"{name}/train.plan.npy")
        bounds = one(doc, "plan_bounds", f"{name}:train.plan.npy")
        assert bounds["status"] == "pass" and bounds["windows"] == WINDOWS[name] and bounds["tokens"] == SIZES[name]
        assert one(doc, "coverage", f"{name}:train.plan.npy")["covered_tokens"] == SIZES[name]
        assert one(doc, "vocab_range", f"{name}:train.bin")["status"] == "pass"
        assert one(doc, "meta", f"{name}:meta.json")["status"] == "pass"
    counts = one(doc, "mixture_counts", "mix.plan.npy")
    assert counts["status"] == "pass" and counts["counts"] == list(COUNTS.values()) and counts["windows"] == E
    assert one(doc, "mixture_prefix", "mix.plan.npy")["status"] == "pass"


def test_the_prefix_figure_is_the_brute_force_deviation_of_the_order_the_loader_serves(mix):
    import winsample

    loader = winsample.Loader(mix, batch_size=E, seed=0)
    served = [loader.sources[s] for s in loader.rows(0, 0)["source"].tolist()]
    assert {n: served.count(n) for n in SIZES} == COUNTS
    weight = {"web": Fraction("0.6"), "code": Fraction("0.3"), "books": Fraction("0.1")}  # as mixed
    worst, seen = Fraction(0), dict.fromkeys(SIZES, 0)
    for k, name in enumerate(served, 1):
        seen[name] += 1
        worst = max([worst] + [abs(seen[n] - k * weight[n]) for n in SIZES])
    assert worst < 1
    _, doc, _ = verify(mix)
    assert one(doc, "mixture_prefix")["max_deviation"] == pytest.approx(float(worst), abs=1e-12)


def test_decode_shows_the_first_positions_the_loader_serves_each_from_its_source(mix):
    import winsample

    _, doc, _ = verify(mix, "--show", 4)
    rows = winsample.Loader(mix, batch_size=4, seed=0).rows(0, 0)
    names = list(SIZES)
    want = [(j, f"{names[int(r['source'])]}:train.bin", int(r["window"]), int(r["start"]), int(r["length"]))
            for j, r in enumerate(rows)]
    assert [(w["position"], w["file"], w["window"], w["start"], w["length"]) for w in doc["windows"]] == want
    dec = one(doc, "decode", "mix.plan.npy")
    assert dec["status"] == "pass" and dec["shown"] == 4


def test_a_mixture_named_alone_with_plan_or_beside_a_data_folder_gets_the_same_mixture_lines(mix, tmp_path):
    _, alone, _ = verify(mix)
    code, by_plan, err = verify("--plan", mix)
    assert (code, err) == (0, "") and by_plan == alone
    code, beside, err = verify(tmp_path / "web", "--plan", mix)
    assert (code, err) == (0, "")
    assert [c for c in beside["checks"] if "mixture" in c] == alone["checks"]  # decode too: the first plan's
    assert one(beside, "vocab_range", "train.bin")["status"] == "pass"  # the folder's own lines, as ever


def test_the_human_report_marks_each_source_and_shows_positions(mix):
    r = CliRunner().invoke(main, ["verify", str(mix), NO_RETOKENIZE, "--show", "1"])
    assert r.exit_code == 0 and r.stderr == ""
    lines = r.stdout.splitlines()
    assert any(line.startswith("✓ mixture_sources books:train.plan.npy") for line in lines)
    assert any(line.startswith("✓ mixture_counts  mix.plan.npy") and "16 windows an epoch" in line for line in lines)
    assert any(line.startswith("── position 0: ") for line in lines)
    assert lines[-1].startswith("verify: ok")


def test_a_best_fit_source_counts_its_windows_not_its_segments(tmp_path):
    folder = make_folder(tmp_path / "web", list(range(1000, 1031)), [])
    bf = tmp_path / "bf.npy"
    r = CliRunner().invoke(main, ["windows", str(folder / "train.bin"), "-T", T, "--pack", "best-fit", "-o", str(bf), "-q"])
    assert r.exit_code == 0, r.stderr
    code_folder = make_folder(tmp_path / "code", list(range(2000, 2019)), [])
    source_plan(code_folder, 6)
    r = CliRunner().invoke(main, ["mix", f"bf=1:{bf}", f"code=1:{code_folder / 'train.plan.npy'}", "--windows", "6",
                                  "-o", str(tmp_path / "m.npy"), "-q"])
    assert r.exit_code == 0, r.stderr
    rows, _ = formats.load_plan(bf)
    code, doc, err = verify(tmp_path / "m.npy", "--show", 6)
    assert (code, err) == (0, ""), failing(doc)
    counts = one(doc, "mixture_counts")
    assert counts["counts"] == [3, 3]  # 6 windows, weights 1 : 1
    assert f"of {len(np.unique(rows['window'])):,}" in counts["detail"]  # windows, by brute force over the segment rows
    assert one(doc, "packing", "bf:bf.npy")["status"] == "pass"
    assert sum(w.get("segments") is not None for w in doc["windows"]) == 3  # bf's three positions, as segments


# --- tampered mixtures: each fails, naming its check ------------------------------------------------


def test_a_source_re_planned_since_the_mix_fails_mixture_sources(mix, tmp_path):
    plan = tmp_path / "code" / "train.plan.npy"
    for p in (plan, formats.plan_sidecar(plan)):
        p.unlink()
    r = CliRunner().invoke(main, ["windows", str(tmp_path / "code" / "train.bin"), "-T", T, "--stride", 2, "-o", str(plan), "-q"])
    assert r.exit_code == 0, r.stderr
    n = len(np.load(plan))  # a sound plan of its own, with its own rows_checksum
    assert n != WINDOWS["code"]
    code, doc, err = verify(mix)
    assert (code, err) == (1, "")
    bad = failing(doc)
    assert "re-planned or edited since the mixture was made" in bad["mixture_sources", "code:train.plan.npy"]
    assert f"row code: windows 6, but its plan has {n}" in bad["mixture_counts", "mix.plan.npy"]
    assert one(doc, "plan_bounds", "code:train.plan.npy")["status"] == "pass"  # a sound plan, just not the one mixed
    assert set(bad) == {("mixture_sources", "code:train.plan.npy"), ("mixture_counts", "mix.plan.npy")}


def test_a_random_offset_source_mixed_before_mix_refused_it_fails_mixture_sources_and_the_loader(tmp_path, monkeypatch):
    """The Loader re-cuts a --random-offset plan every epoch when it serves it alone; a mixture
    served its epoch-0 windows in every epoch, silently. mix refuses such a source now
    (tests/planning/test_mixture.py); one mixed before is failed here and refused by the Loader."""
    from winsample.planning import mixture as rule

    for k, (name, n) in enumerate((("web", 40), ("code", 40))):
        make_folder(tmp_path / name, list(range(1000 * (k + 1), 1000 * (k + 1) + n)), [])
    args = ["-T", T, "--stride", 3, "-q"]
    assert CliRunner().invoke(main, ["windows", str(tmp_path / "web" / "train.bin"), *args, "-o", str(tmp_path / "web.npy")]).exit_code == 0
    r = CliRunner().invoke(main, ["windows", str(tmp_path / "code" / "train.bin"), *args, "--random-offset", "--seed", 1,
                                  "-o", str(tmp_path / "code.npy")])
    assert r.exit_code == 0, r.stderr
    srcs = [f"web=1:{tmp_path / 'web.npy'}", f"code=1:{tmp_path / 'code.npy'}"]
    r = CliRunner().invoke(main, ["mix", *srcs, "-o", str(tmp_path / "m.npy"), "-q"])
    assert r.exit_code == 2 and r.stderr.count("\n") == 1 and "source code" in r.stderr and "--random-offset" in r.stderr
    assert not (tmp_path / "m.npy").exists()
    monkeypatch.setattr(rule, "unmixable", lambda params: None)  # as mix was before
    assert CliRunner().invoke(main, ["mix", *srcs, "-o", str(tmp_path / "m.npy"), "-q"]).exit_code == 0
    monkeypatch.undo()
    code, doc, _ = verify(tmp_path / "m.npy")
    assert code == 1 and "planned with --random-offset" in failing(doc)["mixture_sources", "code:code.npy"]
    with pytest.raises(DataError, match="source code .*planned with --random-offset, which the Loader re-cuts every epoch"):
        winsample.Loader(tmp_path / "m.npy", batch_size=1, seed=0)


def test_a_source_plan_whose_rows_were_edited_in_place_fails_mixture_sources_and_its_plan_bounds(mix, tmp_path):
    plan = tmp_path / "books" / "train.plan.npy"
    rows = np.load(plan)
    rows["start"][1] = 4  # still inside the file and in order: only the checksums tell
    np.save(plan, rows)
    code, doc, _ = verify(mix)
    bad = failing(doc)
    assert code == 1 and "its rows were edited since the mixture was made" in bad["mixture_sources", "books:train.plan.npy"]
    assert "the rows are not the ones windows wrote" in bad["plan_bounds", "books:train.plan.npy"]


def test_a_deleted_source_plan_fails_mixture_sources_and_the_others_are_still_checked(mix, tmp_path):
    """Exit 1, not 2: the mixture names a file that is not there, which is a finding about the
    mixture (as a plan made for a missing token file fails plan_bounds); the other sources are
    still verified, and no line says what cannot be known."""
    (tmp_path / "code" / "train.plan.npy").unlink()
    code, doc, err = verify(mix)
    assert (code, err) == (1, "")
    bad = failing(doc)
    assert "code/train.plan.npy: no such plan" in bad["mixture_sources", "code:train.plan.npy"]
    assert set(bad) == {("mixture_sources", "code:train.plan.npy")}
    assert one(doc, "plan_bounds", "web:train.plan.npy")["status"] == "pass"
    assert not [c for c in doc["checks"] if c["file"].startswith("code:") and c["name"] != "mixture_sources"]
    assert one(doc, "mixture_counts")["status"] == "pass"  # the rows still agree with each other
    assert one(doc, "decode")["status"] == "skip"


def test_a_source_that_is_no_plan_fails_mixture_sources_without_a_traceback(mix, tmp_path):
    (tmp_path / "books" / "train.plan.npy").write_bytes(b"not a plan")
    code, doc, err = verify(mix)
    assert (code, err) == (1, "")
    assert "books:train.plan.npy" in {f for _, f in failing(doc)}


def test_a_count_edited_by_hand_fails_mixture_counts(mix):
    rows = np.load(mix)
    rows["count"][0] = 11
    np.save(mix, rows)  # the sidecar's rows_checksum now disagrees too
    code, doc, err = verify(mix)
    assert (code, err) == (1, "")
    detail = failing(doc)["mixture_counts", "mix.plan.npy"]
    assert "the rows are not the ones mix wrote" in detail
    assert "counts web 11, code 5, books 1, but weights 0.6, 0.3, 0.1 over windows 10, 6, 4" in detail
    assert detail.endswith("give web 10, code 5, books 1")


def test_a_count_rewritten_with_a_fresh_checksum_still_fails_mixture_counts(mix):
    rows, side = formats.load_plan(mix)
    rows["count"][1] = 6
    formats.write_plan(mix, rows, side)  # rows_checksum recomputed: only the arithmetic tells
    code, doc, _ = verify(mix)
    detail = failing(doc)["mixture_counts", "mix.plan.npy"]
    assert code == 1 and "rows are not the ones" not in detail
    assert "counts web 10, code 6, books 1" in detail and "give web 10, code 5, books 1" in detail
    assert "stats.windows" not in detail  # 16, what the recorded weights give


def test_a_weight_edited_in_the_sidecar_fails_mixture_counts(mix):
    """web 0.5 instead of 0.6, by hand: weights 5/9, 3/9, 1/9; web and code run out together
    (10 / (5/9) = 6 / (3/9) = 18), the earlier wins: E = 18, web 10, and 8 shared 3 : 1 → 6, 2."""
    edit_sidecar(mix, lambda side: side["sources"][0].update(weight="0.5"))
    code, doc, _ = verify(mix)
    detail = failing(doc)["mixture_counts", "mix.plan.npy"]
    assert code == 1 and "give web 10, code 6, books 2" in detail and "stats.windows is 16, the counts give 18" in detail


def test_stats_windows_edited_fails_mixture_counts(mix):
    edit_sidecar(mix, lambda side: side["stats"].update(windows=18))
    code, doc, _ = verify(mix)
    assert code == 1 and failing(doc) == {("mixture_counts", "mix.plan.npy"): "stats.windows is 18, the counts give 16"}


def test_the_epoch_rule_edited_fails_mixture_counts(mix):
    """--windows 20 by hand: 12, 6, 2."""
    edit_sidecar(mix, lambda side: side["params"].update(mixture={"rule": "windows", "windows": 20}))
    _, doc, _ = verify(mix)
    assert "by --windows 20 give web 12, code 6, books 2" in failing(doc)["mixture_counts", "mix.plan.npy"]


def test_max_repeats_edited_below_what_the_counts_need_fails_mixture_counts(tmp_path, mix):
    """--windows 40 by hand: 24, 12, 4; web's 24 of its 10 windows serve some window 3 times."""
    out = tmp_path / "m40.npy"
    r = CliRunner().invoke(main, ["mix", *(f"{n}={w}:{tmp_path / n / 'train.plan.npy'}" for n, w in
                                           (("web", "0.6"), ("code", "0.3"), ("books", "0.1"))),
                                  "--windows", "40", "--max-repeats", "3", "-o", str(out), "-q"])
    assert r.exit_code == 0, r.stderr
    code, doc, _ = verify(out)
    assert code == 0 and one(doc, "mixture_counts")["counts"] == [24, 12, 4]
    assert "web 24 of 10 (60.00%; each window 2–3×)" in one(doc, "mixture_counts")["detail"]
    edit_sidecar(out, lambda side: side["params"].update(max_repeats=2))
    code, doc, _ = verify(out)
    assert code == 1
    assert failing(doc) == {("mixture_counts", "m40.npy"): "web: 24 windows an epoch of its 10 serve some window 3 times,"
                                                           " over max_repeats 2"}


def test_a_source_of_another_tokenizer_put_in_its_place_fails_mixture_sources(mix, tmp_path, cl100k_ranks_file):
    text = tmp_path / "other.txt"
    text.write_text("The same words, another vocabulary: each id means another token here.\n", encoding="utf-8")
    r = CliRunner().invoke(main, ["encode", str(text), "-o", str(tmp_path / "other"), "--val-fraction", "0", "-q",
                                  "--tokenizer-file", str(cl100k_ranks_file), "--pattern", "cl100k"])
    assert r.exit_code == 0, r.stderr
    plan = tmp_path / "code" / "train.plan.npy"
    for p in (plan, formats.plan_sidecar(plan)):
        p.unlink()
    r = CliRunner().invoke(main, ["windows", str(tmp_path / "other" / "train.bin"), "-T", T, "-o", str(plan), "-q"])
    assert r.exit_code == 0, r.stderr
    code, doc, err = verify(mix)
    assert (code, err) == (1, "")
    detail = failing(doc)["mixture_sources", "code:train.plan.npy"]
    assert f"tokenized with cl100k_base (ranks_sha256 {CL100K_SHA256}" in detail
    assert f"the mixture with gpt2 (ranks_sha256 {GPT2_SHA256}" in detail and "must mean the same tokens" in detail
    assert one(doc, "plan_bounds", "code:train.plan.npy")["status"] == "pass"  # sound against its own token file


def test_a_source_of_another_T_fails_mixture_sources(mix, tmp_path):
    folder = tmp_path / "books"
    make_plan(folder / "train.plan.npy", folder / "train.bin", [0, 4, 8], [5, 5, 5], T=4, tokenizer=dict(GPT2))
    code, doc, _ = verify(mix)
    detail = failing(doc)["mixture_sources", "books:train.plan.npy"]
    assert code == 1 and "its params.T is 4, the mixture's 3" in detail and "its params.span is 5, the mixture's 4" in detail


def test_an_order_that_drifts_past_one_window_fails_mixture_prefix(mix, monkeypatch):
    """With every web window first, by hand: after k = 3, web was served 3 times and its share is
    3·0.6 = 1.8: 1.2 windows off (k = 1, 2: 0.4 and 0.8, inside)."""
    from winsample.planning import mixture

    monkeypatch.setattr(mixture, "order", lambda counts, weights, prefix: np.repeat(np.arange(len(counts), dtype=np.int32),
                                                                                  counts))
    code, doc, _ = verify(mix)
    line = one(doc, "mixture_prefix")
    assert code == 1 and line["status"] == "fail" and line["prefix"] == 3
    assert line["detail"] == "after 3 of 16 windows source web was served 3 times, its share is 1.800: one window or more off"


def test_prefix_bound_by_brute_force_on_random_orders():
    from winsample.verify.mixture import prefix_bound

    rng = np.random.default_rng(5)
    for _ in range(200):
        counts = rng.integers(0, 6, size=rng.integers(1, 4)).tolist()
        order = rng.permutation(np.repeat(np.arange(len(counts)), counts))
        n = sum(counts)
        worst = max((abs(int((order[:k] == i).sum()) * n - k * c) for k in range(1, n + 1) for i, c in enumerate(counts)),
                    default=0)
        first = next(((k, i) for k in range(1, n + 1) for i, c in enumerate(counts)
                      if abs(int((order[:k] == i).sum()) * n - k * c) >= n), None)
        got_worst, got_first = prefix_bound(order, counts, counts, n, block=4)  # blocks smaller than the order
        assert got_worst == worst or got_first is not None
        assert (got_first[:2] if got_first else None) == first


# --- what cannot be verified, and the other readers of plans -----------------------------------------


def test_no_path_and_no_plan_exits_2_with_one_line():
    r = CliRunner().invoke(main, ["verify"])
    assert r.exit_code == 2 and r.stdout == "" and r.stderr.count("\n") == 1 and "name a data folder" in r.stderr


def test_a_missing_mixture_exits_2(tmp_path):
    r = CliRunner().invoke(main, ["verify", str(tmp_path / "mix.plan.npy")])
    assert r.exit_code == 2 and r.stdout == "" and r.stderr == f"error: {tmp_path / 'mix.plan.npy'}: no such plan file\n"


def test_plot_refuses_a_mixture_before_the_checks(mix, tmp_path):
    png = tmp_path / "c.png"
    r = CliRunner().invoke(main, ["verify", str(mix), "--plot", str(png)])
    assert r.exit_code == 2 and r.stdout == "" and not png.exists()
    assert r.stderr.count("\n") == 1 and "is a mixture of 3 plans" in r.stderr and "web (web/train.plan.npy)" in r.stderr


def test_trace_row_refuses_a_mixture(mix):
    with pytest.raises(InputError, match="is a mixture"):
        provenance.trace_row(mix, 0)


def test_seeded_random_edits_never_crash_and_never_pass_when_what_is_served_changes(mix, tmp_path):
    """Rows, stats.windows and a recorded source checksum edited: always exit 1. Junk in the
    parameters: never a crash (an internal error would say so on stderr), whatever it decides."""
    rng = np.random.default_rng(34)
    npy, side_path = mix.read_bytes(), formats.plan_sidecar(mix).read_bytes()
    junk = [None, "x", -1, 0, 1 << 70, [], {}, True, 1.5, {"rule": "windows", "windows": 0}, {"rule": "epoch-of"}]
    for _ in range(40):
        mix.write_bytes(npy)
        formats.plan_sidecar(mix).write_bytes(side_path)
        kind = rng.integers(4)
        if kind == 0:
            rows = np.load(mix)
            field, i = ("windows", "count", "tokens")[rng.integers(3)], int(rng.integers(3))
            rows[field][i] += int(rng.choice([-1, 1, 1 << 40, -(1 << 40)]))
            np.save(mix, rows)
        elif kind == 1:
            edit_sidecar(mix, lambda s: s["stats"].update(windows=int(rng.choice([0, 15, 17, 1 << 40]))))  # E is 16
        elif kind == 2:
            i = int(rng.integers(3))
            edit_sidecar(mix, lambda s, i=i: s["sources"][i].update(rows_checksum="xxh3_128:" + "0" * 32))
        else:
            key, value = ("T", "targets", "span", "mixture", "max_repeats", "seed")[rng.integers(6)], junk[rng.integers(len(junk))]
            edit_sidecar(mix, lambda s, key=key, value=value: s["params"].update({key: value}))
        r = CliRunner().invoke(main, ["verify", str(mix), NO_RETOKENIZE, "--show", "1", "--json"])
        assert "internal error" not in r.stderr and r.exit_code in (0, 1, 2), (kind, r.stderr)
        assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
        if kind < 3:
            assert r.exit_code == 1, (kind, r.stdout[-2000:])


def test_a_source_re_made_over_other_tokens_of_the_same_length_fails_mixture_sources_and_the_loader(mix, tmp_path):
    # regular windows over two files of one length have the same rows: the token file's checksum tells them apart
    folder = tmp_path / "code"
    n = len(np.fromfile(folder / "train.bin", np.uint16))
    for p in folder.iterdir():
        p.unlink()
    make_folder(folder, list(range(7000, 7000 + SIZES["code"])), list(range(7500, 7505)))  # other ids, same length
    source_plan(folder, WINDOWS["code"])
    assert len(np.fromfile(folder / "train.bin", np.uint16)) == n
    code, doc, err = verify(mix)
    assert (code, err) == (1, "")
    assert "made over other tokens since the mixture was made" in failing(doc)["mixture_sources", "code:train.plan.npy"]
    with pytest.raises(DataError, match="was made over other tokens since the mixture was made"):
        winsample.Loader(mix, batch_size=1, seed=0)
