"""`winsample verify --plan` on best-fit packed plans (segment rows, issue #30).

The token file is built here from letters whose GPT-2 ids are known by hand (byte b is id b − 33
for the printable ASCII bytes), six documents, each ending with the EOT:

    doc  text           tokens  [start, end)
    0    abcd⏎           5      [0, 5)
    1    ef⏎             3      [5, 8)
    2    ghijklmnop⏎    11      [8, 19)     longer than the span 8 (T = 7)
    3    q⏎              2      [19, 21)
    4    rstuv⏎          6      [21, 27)
    5    wxy⏎            4      [27, 31)

(⏎ the EOT). With --long split document 2 is two pieces, [8, 16) and [16, 19). The honest plan
below is best-fit decreasing worked by hand (pieces by decreasing length, each into the open
window with the least room that holds it): 8 → window 0; 6 → window 1 (room 2); 5 → window 2
(room 3); 4 → window 3 (room 4); 3 (doc 1) → window 2 (room 0); 3 (doc 2's rest) → window 3
(room 1); 2 → window 1 (room 0). Its stats are counted by hand: 4 windows × 8 = 32 places for 31
tokens (fill 31/32, 1 padding token), 7 segments, one document split. Tampered plans are written
with ``formats.write_plan`` (a fresh rows_checksum), so the check that catches each is the one
about its content, not plan_bounds' checksum.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from winsample import formats
from winsample.cli import main

from .test_run import NO_RETOKENIZE, edit_sidecar, make_folder, one, write_bin, xxh

EOT = 50256
TEXTS = ["abcd", "ef", "ghijklmnop", "q", "rstuv", "wxy"]
T, SPAN = 7, 8
STARTS = [0, 5, 8, 19, 21, 27]
N = 31
HONEST = [  # (window, start, length, doc), by window then start
    (0, 8, 8, 2),
    (1, 19, 2, 3), (1, 21, 6, 4),
    (2, 0, 5, 0), (2, 5, 3, 1),
    (3, 16, 3, 2), (3, 27, 4, 5),
]
HONEST_STATS = {
    "windows": 4, "coverage": 1.0, "covered_tokens": 31, "uncovered_tokens": 0, "uncovered_tail": 0, "uncovered_head": 0,
    "uncovered_dropped": 0, "segments": 7, "fill": 31 / 32, "padding_tokens": 1, "documents_split": 1,
    "documents_truncated": 0, "documents_dropped": 0, "documents": 6,
}


def ids(text: str) -> list[int]:
    return [ord(c) - 33 for c in text]  # GPT-2's byte-level ids of printable ASCII


def train_ids(texts=TEXTS) -> list[int]:
    return [i for t in texts for i in ids(t) + [EOT]]


@pytest.fixture
def data(tmp_path) -> Path:
    train = train_ids()
    assert len(train) == N and [i for i, t in enumerate(train) if t == EOT] == [4, 7, 18, 20, 26, 30]
    return make_folder(tmp_path / "data", train, ids("val") + [EOT], docs={"train": STARTS, "val": [0]})


def packed_plan(path: Path, bin_path: Path, segs, *, long="split", stats=None, targets=True, **params) -> Path:
    """A best-fit plan written by hand: these segment rows, a sidecar naming ``bin_path``."""
    rows = np.array(segs, dtype=formats.PACKED_DTYPE)
    data = bin_path.read_bytes()
    span = T + 1 if targets else T
    side = {
        "source": {"path": str(bin_path), "file": bin_path.name, "bytes": len(data), "checksum": xxh(data), "dtype": "<u2",
                   "tokens": len(data) // 2},
        "params": {"T": T, "targets": targets, "span": span, "stride": span, "overlap": 0.0, "offset": None,
                   "random_offset": False, "seed": None, "epoch": None, "tail": None, "short": "keep", "boundaries": "doc",
                   "pack": "best-fit", "shuffle": False, "shard": None, "shards": None, "shard_method": None, "long": long,
                   **params},
        "stats": dict(HONEST_STATS if stats is None else stats),
    }
    formats.write_plan(path, rows, side)
    return path


def verify(*args) -> tuple[int, dict, str]:
    r = CliRunner().invoke(main, ["verify", *map(str, args), NO_RETOKENIZE, "--json"])
    return r.exit_code, json.loads(r.stdout), r.stderr


def statuses(doc: dict, file: str = "p.npy") -> dict[str, str]:
    return {c["name"]: c["status"] for c in doc["checks"] if c["file"] == file}


# --- an honest plan ---------------------------------------------------------------------------


def test_an_honest_best_fit_plan_passes_every_plan_check(data, ref_gpt2):
    assert ref_gpt2.decode(train_ids()) == "".join(t + "<|endoftext|>" for t in TEXTS)  # the ids are what we say
    plan = packed_plan(data / "p.npy", data / "train.bin", HONEST)
    code, doc, err = verify(data, "--plan", plan)
    assert (code, err) == (0, "")
    assert statuses(doc) == {name: "pass" for name in ("plan_bounds", "plan_params", "min_length", "order", "duplicates", "coverage",
                                                         "packing", "segments", "packed_stats", "alignment")}
    assert one(doc, "packing", "p.npy")["windows"] == 4 and one(doc, "packing", "p.npy")["fill"] == 31 / 32
    assert one(doc, "packed_stats", "p.npy")["padding_tokens"] == 1
    assert one(doc, "coverage", "p.npy")["covered_tokens"] == 31
    # every window sampled (4 < 256); windows 1, 2, 3 hold two segments each: 3 labels cross an edge
    assert (one(doc, "alignment", "p.npy")["checked"], one(doc, "alignment", "p.npy")["crossing_labels"]) == (4, 3)


@pytest.mark.parametrize("long", ["split", "truncate", "drop"])
def test_what_windows_writes_passes_verify_for_each_long_mode(data, long):
    plan = data / "p.npy"
    r = CliRunner().invoke(main, ["windows", str(data / "train.bin"), "-T", T, "--pack", "best-fit", "--long", long, "-o", str(plan), "-q"])
    assert r.exit_code == 0, r.stderr
    code, doc, err = verify(data, "--plan", plan, "--min-coverage", 0.6)  # truncate plans 28 of 31 tokens, drop 20
    assert (code, err) == (0, ""), doc["checks"]
    assert set(statuses(doc).values()) == {"pass"}
    stats = json.loads(formats.plan_sidecar(plan).read_text())["stats"]
    # document 2 (11 tokens) is the one longer than the span: all its tokens, the first 8, or none
    planned, counted = {"split": (31, "documents_split"), "truncate": (28, "documents_truncated"),
                        "drop": (20, "documents_dropped")}[long]
    assert stats["covered_tokens"] == planned and stats[counted] == 1


def test_a_plan_of_another_file_fails_plan_bounds_and_compares_no_figures_of_this_ones(data, tmp_path):
    """New-user trial: checked against another data folder, packed_stats compared the plan's
    figures with that file's documents and printed a negative count (uncovered_tail -942528)."""
    other = make_folder(tmp_path / "other", train_ids(TEXTS * 40), ids("val") + [EOT])
    plan = tmp_path / "other.npy"
    r = CliRunner().invoke(main, ["windows", str(other / "train.bin"), "-T", T, "--pack", "best-fit", "-o", str(plan), "-q"])
    assert r.exit_code == 0, r.stderr
    code, doc, _ = verify(data, "--plan", plan)
    st = statuses(doc, "other.npy")
    assert code == 1 and st["plan_bounds"] == "fail" and "made for another file" in one(doc, "plan_bounds", "other.npy")["detail"]
    assert (st["packed_stats"], st["segments"]) == ("skip", "skip")
    assert "made for another file (see plan_bounds)" in one(doc, "packed_stats", "other.npy")["detail"]
    assert not any(ch.isdigit() and "-" + ch in c["detail"] for c in doc["checks"] for ch in "123456789")  # no negative figure


def test_a_bare_bin_finds_its_documents_at_the_eot_ids(tmp_path):
    p = tmp_path / "train.bin"
    write_bin(p, train_ids())  # no meta.json, no document index: documents end at EOT ids
    packed_plan(tmp_path / "p.npy", p, HONEST)
    code, doc, err = verify(p, "--plan", tmp_path / "p.npy")
    assert (code, err) == (0, "") and one(doc, "segments", "p.npy")["documents"] == 6


def test_a_one_token_piece_left_out_because_every_window_is_full_passes(tmp_path):
    """Documents of 8, 8 and 1 tokens, span 8: the 1-token document would be a window of one token,
    which holds no (x, y) pair, so windows leaves it out (uncovered_dropped 1)."""
    p = tmp_path / "train.bin"
    write_bin(p, train_ids(["abcdefg", "hijklmn", ""]))  # 8, 8, 1 tokens
    r = CliRunner().invoke(main, ["windows", str(p), "-T", T, "--pack", "best-fit", "-o", str(tmp_path / "p.npy"), "-q"])
    assert r.exit_code == 0, r.stderr
    rows, _ = formats.load_plan(tmp_path / "p.npy")
    assert sorted(rows["start"].tolist()) == [0, 8] and 16 not in rows["start"]
    code, doc, err = verify(p, "--plan", tmp_path / "p.npy", "--min-coverage", 0.9)  # 15 of 16 tokens planned
    assert (code, err) == (0, ""), doc["checks"]
    assert "1 token left out" in one(doc, "segments", "p.npy")["detail"]
    assert one(doc, "packed_stats", "p.npy")["status"] == "pass"


def test_a_one_token_document_left_out_while_a_window_has_room_fails_segments(tmp_path):
    p = tmp_path / "train.bin"
    write_bin(p, train_ids(["abcdef", "hijklmn", ""]))  # 7, 8, 1 tokens: window 0 keeps a free place
    stats = dict(HONEST_STATS, windows=2, covered_tokens=15, uncovered_tokens=1, uncovered_dropped=1, coverage=15 / 16,
                 segments=2, fill=15 / 16, padding_tokens=1, documents_split=0, documents=3)
    packed_plan(tmp_path / "p.npy", p, [(0, 0, 7, 0), (1, 7, 8, 1)], stats=stats)
    code, doc, _ = verify(p, "--plan", tmp_path / "p.npy")
    seg = one(doc, "segments", "p.npy")
    assert code == 1 and seg["status"] == "fail" and "document 2 [15, 16): 0 of 1 planned" in seg["detail"]
    assert one(doc, "packed_stats", "p.npy")["status"] == "pass"  # the stats say what the rows are


def test_a_file_shorter_than_the_span_warns_min_length_but_passes(data):
    plan = data / "p.npy"
    r = CliRunner().invoke(main, ["windows", str(data / "train.bin"), "-T", 63, "--pack", "best-fit", "-o", str(plan), "-q"])
    assert r.exit_code == 0, r.stderr
    code, doc, _ = verify(data, "--plan", plan)
    ml = one(doc, "min_length", "p.npy")
    assert code == 0 and ml["status"] == "warn" and "N = 31 < T + 1 = 64" in ml["detail"]
    assert one(doc, "packing", "p.npy")["windows"] == 1  # every document fits one window of 64


def test_a_best_fit_plan_over_an_empty_file_fails_min_length(tmp_path):
    p = tmp_path / "train.bin"
    write_bin(p, [])
    stats = dict(HONEST_STATS, windows=0, covered_tokens=0, segments=0, fill=0.0, padding_tokens=0, documents_split=0, documents=0)
    packed_plan(tmp_path / "p.npy", p, [], stats=stats)
    code, doc, err = verify(p, "--plan", tmp_path / "p.npy")
    assert (code, err) == (1, "")
    assert "N = 0 < T + 1 = 8: not one window of 2 token(s) fits" in failing(doc, "min_length")["detail"]
    assert {n: s for n, s in statuses(doc).items() if s != "pass"} == {"min_length": "fail", "coverage": "skip", "alignment": "skip"}


def test_a_broken_document_index_skips_segments_and_still_compares_the_row_figures(data):
    formats.write_doc_index(data / "train.docs.npy", np.array([0, 8, 5, 19, 21, 27], dtype=np.int64))  # not increasing
    plan = packed_plan(data / "p.npy", data / "train.bin", HONEST)
    code, doc, _ = verify(data, "--plan", plan)
    assert code == 1 and one(doc, "meta")["status"] == "fail"  # the meta check names the index
    seg, st = one(doc, "segments", "p.npy"), one(doc, "packed_stats", "p.npy")
    assert seg["status"] == "skip" and "cannot find the documents" in seg["detail"] and "train.docs.npy" in seg["detail"]
    assert st["status"] == "skip" and "the document counts are not compared" in st["detail"]
    edit_sidecar(plan, lambda side: side["stats"].update(padding_tokens=5))
    code, doc, _ = verify(data, "--plan", plan)
    assert "stats.padding_tokens 5, the rows give 1" in failing(doc, "packed_stats")["detail"]


# --- tampered plans: each fails, naming its check ---------------------------------------------


def tampered(data: Path, segs, **kw) -> tuple[int, dict, str]:
    plan = packed_plan(data / "p.npy", data / "train.bin", segs, **kw)
    return verify(data, "--plan", plan)


def failing(doc: dict, name: str) -> dict:
    c = one(doc, name, "p.npy")
    assert c["status"] == "fail", c
    return c


def test_segment_off_a_document_edge_fails_segments(data):
    segs = [s if s != (2, 5, 3, 1) else (2, 6, 2, 1) for s in HONEST]  # one token into document 1
    code, doc, err = tampered(data, segs)
    assert (code, err) == (1, "")
    c = failing(doc, "segments")
    assert "row 4 [6, 8): starts 1 token into document 1 [5, 8), not at its start" in c["detail"]
    assert one(doc, "plan_bounds", "p.npy")["status"] == "pass"


def test_a_piece_starting_inside_a_split_document_fails_segments(data):
    segs = [s if s != (3, 16, 3, 2) else (3, 15, 4, 2) for s in HONEST]  # the rest of doc 2 taken one token early
    code, doc, _ = tampered(data, segs)
    assert code == 1
    assert ("row 5 [15, 19): starts 7 tokens into document 2 [8, 19): pieces of a split document start every 8 tokens"
            in failing(doc, "segments")["detail"])
    assert "row 5 [15, 19) overlaps row 0 [8, 16)" in failing(doc, "duplicates")["detail"]


def test_a_document_planned_twice_fails_duplicates(data):
    code, doc, err = tampered(data, HONEST + [(4, 27, 4, 5)], stats=dict(HONEST_STATS, windows=5, segments=8))
    assert (code, err) == (1, "")
    assert "row 7 repeats row 6 [27, 31) (document 5 planned twice)" in failing(doc, "duplicates")["detail"]
    assert one(doc, "packing", "p.npy")["status"] == "pass"


def test_a_missing_piece_fails_segments(data):
    segs = [s for s in HONEST if s != (3, 16, 3, 2)]  # document 2's second piece
    code, doc, _ = tampered(data, segs)
    assert code == 1
    assert "1 piece(s) of 1 document(s) not planned; first: document 2 [8, 19): 1 of 2 planned" in failing(doc, "segments")["detail"]


def test_a_window_over_the_span_fails_packing(data):
    segs = [(0, 8, 8, 2), (1, 19, 2, 3), (1, 21, 6, 4), (2, 0, 5, 0), (2, 5, 3, 1), (2, 27, 4, 5), (3, 16, 3, 2)]
    code, doc, _ = tampered(data, segs)  # window 2: 5 + 3 + 4 = 12 tokens > 8
    assert code == 1
    assert "1 window(s) hold more than the span 8; first: window 2, 12 tokens" in failing(doc, "packing")["detail"]


def test_window_numbers_with_a_gap_fail_packing(data):
    segs = [(w if w < 3 else 4, s, L, d) for w, s, L, d in HONEST]
    code, doc, _ = tampered(data, segs)
    assert code == 1
    assert "no window numbered 3 between windows 2 and 4" in failing(doc, "packing")["detail"]
    assert one(doc, "decode")["status"] == "skip"  # no window view to show


def test_window_numbers_not_from_zero_fail_packing(data):
    segs = [(w + 1, s, L, d) for w, s, L, d in HONEST]
    code, doc, _ = tampered(data, segs)
    assert code == 1 and "window numbers start at 1, not 0" in failing(doc, "packing")["detail"]


def test_a_window_of_one_token_fails_packing(data):
    # document 1 [5, 8) cut to its EOT alone in its own window: off its edge, and a window without an (x, y) pair
    segs = [(0, 8, 8, 2), (1, 19, 2, 3), (1, 21, 6, 4), (2, 0, 5, 0), (3, 16, 3, 2), (3, 27, 4, 5), (4, 7, 1, 1)]
    code, doc, _ = tampered(data, segs)
    assert code == 1
    assert "1 window(s) hold fewer than 2: no (x, y) pair; first: window 4, 1 tokens" in failing(doc, "packing")["detail"]


def test_rows_out_of_window_order_fail_order(data):
    segs = list(HONEST)
    segs[1], segs[2] = segs[2], segs[1]  # window 1: start 21 before start 19
    code, doc, _ = tampered(data, segs)
    assert code == 1
    assert "first: row 2 (window 1, start 19) after row 1 (window 1, start 21)" in failing(doc, "order")["detail"]


def test_a_segment_past_the_end_fails_plan_bounds(data):
    segs = [s if s != (3, 27, 4, 5) else (3, 27, 5, 5) for s in HONEST]
    code, doc, _ = tampered(data, segs)
    assert code == 1
    assert "first: row 6 [27, 32) (end 32 > N = 31)" in failing(doc, "plan_bounds")["detail"]


def test_a_wrong_doc_column_fails_segments(data):
    segs = [s if s != (2, 0, 5, 0) else (2, 0, 5, 3) for s in HONEST]
    code, doc, _ = tampered(data, segs)
    assert code == 1 and "its doc column says 3, but it lies in document 0" in failing(doc, "segments")["detail"]


@pytest.mark.parametrize("key, value", [("fill", 1.0), ("padding_tokens", 0), ("segments", 4), ("windows", 3),
                                        ("documents_split", 0), ("documents_dropped", 1), ("uncovered_dropped", 3),
                                        ("documents", 7), ("fill", "0.97")])
def test_stats_edited_fail_packed_stats(data, key, value):
    plan = packed_plan(data / "p.npy", data / "train.bin", HONEST)
    edit_sidecar(plan, lambda side: side["stats"].update({key: value}))
    code, doc, err = verify(data, "--plan", plan)
    assert (code, err) == (1, "")
    c = failing(doc, "packed_stats")
    assert f"stats.{key} {value!r}, the rows give {HONEST_STATS[key]!r}" in c["detail"]
    assert one(doc, "plan_bounds", "p.npy")["status"] == "pass"  # the rows are untouched


def test_a_stat_removed_fails_packed_stats(data):
    plan = packed_plan(data / "p.npy", data / "train.bin", HONEST)
    edit_sidecar(plan, lambda side: side["stats"].pop("padding_tokens"))
    code, doc, _ = verify(data, "--plan", plan)
    assert code == 1 and "stats.padding_tokens None, the rows give 1" in failing(doc, "packed_stats")["detail"]


def test_a_sidecar_saying_truncate_over_split_rows_fails_segments(data):
    code, doc, _ = tampered(data, HONEST, long="truncate", stats=dict(HONEST_STATS, documents_split=0, documents_truncated=1))
    assert code == 1
    assert "row 5 [16, 19): starts 8 tokens into document 2 [8, 19), not at its start" in failing(doc, "segments")["detail"]


def test_drop_mode_with_the_long_document_planned_fails_segments(data):
    code, doc, _ = tampered(data, HONEST, long="drop", stats=dict(HONEST_STATS, documents_split=0, documents_dropped=1))
    assert code == 1
    assert "document 2 [8, 19) is longer than the span 8: --long drop leaves it out" in failing(doc, "segments")["detail"]


@pytest.mark.parametrize("param, value, words", [("shuffle", True, "never shuffled"), ("long", "halve", "params.long is 'halve'"),
                                                 ("shards", 2, "a best-fit plan is one file"), ("offset", 3, "has no offset")])
def test_sidecar_params_a_best_fit_plan_cannot_have_fail_plan_bounds(data, param, value, words):
    plan = packed_plan(data / "p.npy", data / "train.bin", HONEST)
    edit_sidecar(plan, lambda side: side["params"].update({param: value}))
    code, doc, _ = verify(data, "--plan", plan)
    assert code == 1 and words in failing(doc, "plan_bounds")["detail"]


def test_materialized_windows_beside_a_best_fit_plan_fail_materialized(data):
    plan = packed_plan(data / "p.npy", data / "train.bin", HONEST)
    np.save(data / "p.tokens.npy", np.zeros((7, SPAN), "<u2"))  # as many rows as segments: still not this plan's
    code, doc, _ = verify(data, "--plan", plan)
    assert code == 1
    c = one(doc, "materialized", "p.tokens.npy")
    assert c["status"] == "fail" and "a best-fit plan has no materialized windows" in c["detail"]


# --- decode: a window is its segments side by side --------------------------------------------


def test_show_decodes_each_window_as_its_segments_marking_where_they_meet(data):
    plan = packed_plan(data / "p.npy", data / "train.bin", HONEST)
    r = CliRunner().invoke(main, ["verify", str(data), "--plan", str(plan), NO_RETOKENIZE, "--show", "2"])
    assert r.exit_code == 0 and r.stderr == ""
    lines = r.stdout.splitlines()
    at = lines.index("── train.bin window 1: 8 tokens in 2 segments")
    assert lines[at + 1] == "⟪doc 3 [19, 21)⟫q<|endoftext|>⟪doc 4 [21, 27)⟫rstuv<|endoftext|>"
    assert "── train.bin window 0: 8 tokens in 1 segment" in lines
    assert "window 2" not in r.stdout  # --show 2
    code, doc, _ = verify(data, "--plan", plan, "--show", "2")
    w = doc["windows"][1]
    assert (w["window"], w["start"], w["length"], w["text"]) == (1, 19, 8, "q<|endoftext|>rstuv<|endoftext|>")
    assert [(g["start"], g["length"], g["doc"], g["text"]) for g in w["segments"]] == [
        (19, 2, 3, "q<|endoftext|>"), (21, 6, 4, "rstuv<|endoftext|>")]


def test_plot_draws_a_best_fit_plan(data, tmp_path):
    pytest.importorskip("matplotlib")
    plan = packed_plan(data / "p.npy", data / "train.bin", HONEST)
    png = tmp_path / "c.png"
    code, doc, err = verify(data, "--plan", plan, "--plot", png)
    assert (code, err) == (0, f"coverage picture of {plan} → {png}\n")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (doc["plot"]["windows"], doc["plot"]["covered_tokens"], doc["plot"]["mean_depth"]) == (4, 31, 1.0)


def test_plot_refuses_misnumbered_windows_in_one_line(data, tmp_path):
    pytest.importorskip("matplotlib")
    segs = [(w if w < 3 else 4, s, L, d) for w, s, L, d in HONEST]
    plan = packed_plan(data / "p.npy", data / "train.bin", segs)
    r = CliRunner().invoke(main, ["verify", str(data), "--plan", str(plan), NO_RETOKENIZE, "--plot", str(tmp_path / "c.png"), "-q"])
    assert r.exit_code == 1  # packing failed; the picture is refused on stderr, one line
    assert r.stderr.count("\n") == 1 and "numbered 0, 1, … without a gap" in r.stderr
    assert not (tmp_path / "c.png").exists()


# --- fuzz: never a crash, never a changed plan passing ------------------------------------------

ODD_CELLS = [-(2**62), -(2**31), -1, 0, 1, 2, 3, 7, 8, 9, 16, 30, 31, 32, 2**31 - 1, 2**40]
ODD_VALUES = [None, True, False, 0, 1, -1, 2, 7, 8, 2**31, 2**63, -(2**63), 0.5, 1e308, "", "x", "split", [], {}]


def test_random_edits_never_crash_and_changed_rows_never_pass(data):
    """Seeded random edits of the honest plan's rows (a cell, a row dropped, repeated or moved) and
    sidecar (a stats or params value): verify ends with exit 0 or 1 and one report, never an
    internal error; rows that differ from the honest ones, or stats that say another figure, fail."""
    rng = np.random.default_rng(30)
    limits = {"window": (-(2**62), 2**62), "start": (-(2**62), 2**62), "length": (-(2**31), 2**31 - 1), "doc": (-(2**62), 2**62)}
    for k in range(120):
        segs, edit = [list(s) for s in HONEST], None
        kind = int(rng.integers(0, 6))
        if kind == 0:
            r, c = int(rng.integers(0, len(segs))), int(rng.integers(0, 4))
            lo, hi = limits[formats.PACKED_DTYPE.names[c]]
            segs[r][c] = int(np.clip(ODD_CELLS[int(rng.integers(0, len(ODD_CELLS)))], lo, hi))
        elif kind == 1:
            del segs[int(rng.integers(0, len(segs)))]
        elif kind == 2:
            r = int(rng.integers(0, len(segs)))
            segs.insert(int(rng.integers(0, len(segs) + 1)), list(segs[r]))
        elif kind == 3:
            a, b = rng.integers(0, len(segs), 2)
            segs[a], segs[b] = segs[b], segs[a]
        else:
            part = "stats" if kind == 4 else "params"
            keys = list(HONEST_STATS) if part == "stats" else ["T", "span", "targets", "long", "shuffle", "shards", "offset", "pack"]
            edit = (part, keys[int(rng.integers(0, len(keys)))], ODD_VALUES[int(rng.integers(0, len(ODD_VALUES)))])
        plan = packed_plan(data / "p.npy", data / "train.bin", [tuple(s) for s in segs])
        if edit is not None:
            edit_sidecar(plan, lambda side, e=edit: side[e[0]].update({e[1]: e[2]}))
        r = CliRunner().invoke(main, ["verify", str(data), "--plan", str(plan), NO_RETOKENIZE, "--json", "-q"])
        where = (k, segs, edit, r.stderr[-500:])
        assert r.exit_code in (0, 1) and r.stderr == "" and "internal error" not in r.stdout, where
        doc = json.loads(r.stdout)
        changed_rows = [tuple(s) for s in segs] != HONEST
        changed_stats = edit is not None and edit[0] == "stats" and not (
            edit[2] == HONEST_STATS[edit[1]] and not isinstance(edit[2], bool))
        if changed_rows or changed_stats:
            assert r.exit_code == 1, (where, [c for c in doc["checks"] if c["status"] != "pass"])
