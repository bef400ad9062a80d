import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from winsample import formats
from winsample.cli import common as cli
from winsample.cli import main
from winsample.inspect import inspect_path, render_piece, render_text

from .conftest import FIXTURES

GOLDEN = FIXTURES / "golden_v1"
EOT = 50256


def run(*args, env=None):
    return CliRunner(env=env).invoke(main, ["inspect", *map(str, args)])


def golden_ids(ref, texts):
    return [i for t in texts for i in ref.encode_ordinary(t) + [EOT]]


def snapshot(folder):
    return {p: (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(folder.rglob("*"))}


@pytest.fixture
def golden(tmp_path):
    folder = tmp_path / "data"
    shutil.copytree(GOLDEN, folder)
    return folder


def write_bin(path, ids, dtype="<u2"):
    np.asarray(ids, dtype=dtype).tofile(path)
    return path


# --- token files --------------------------------------------------------------------------


def test_bin_json_shows_ids_and_pieces_from_the_reference_tokenizer(golden, ref_gpt2):
    r = run(golden / "train.bin", "--json")
    assert r.exit_code == 0, r.stderr
    assert r.stderr == ""
    doc = json.loads(r.stdout)  # exactly one JSON document, nothing else
    expected = golden_ids(ref_gpt2, ["Hello world", "滑动窗口。"])
    assert doc["ids"] == expected and doc["tokens"] == 15 and doc["at"] == 0
    assert doc["pieces"][:3] == ["Hello", " world", "<|endoftext|>"]
    assert doc["marked"].startswith("Hello│ world│<|endoftext|>│")
    # 滑 is e6 bb 91 in UTF-8, and GPT-2 splits it into one token per byte
    assert ref_gpt2.decode_single_token_bytes(expected[3]) == b"\xe6"
    assert doc["pieces"][3:6] == ["⟨e6⟩", "⟨bb⟩", "⟨91⟩"]
    assert doc["pieces"][13] == "。"
    assert doc["text"] == "Hello world<|endoftext|>滑动窗口。<|endoftext|>"
    assert doc["dtype"] == "<u2" and doc["split"] == "train" and doc["documents"] == 2
    assert doc["checksum"] == "xxh3_128:732a8d192fc7f0e69fa0c4dd4a0bf9a0"
    assert doc["meta"]["tokenizer"]["name"] == "gpt2" and doc["warnings"] == []


def test_at_2_count_3_shows_tokens_2_to_4(golden, ref_gpt2):
    doc = json.loads(run(golden / "train.bin", "--at", 2, "--count", 3, "--json").stdout)
    expected = golden_ids(ref_gpt2, ["Hello world", "滑动窗口。"])
    assert doc["ids"] == expected[2:5] and doc["at"] == 2
    assert doc["pieces"] == ["<|endoftext|>", "⟨e6⟩", "⟨bb⟩"]


def test_a_count_of_more_than_a_million_is_refused_before_anything_is_read(golden):
    # adversarial trial: --count 10**20 on a 600 MB file grew to 20 GB; inspect is a look, not an export
    r = run(golden / "train.bin", "--count", 10**20)
    assert r.exit_code == 2 and r.stdout == "" and "'--count': 100000000000000000000 is not in the range 0<=x<=1000000" in r.stderr
    assert run(golden / "train.bin", "--count", 10**6, "--json").exit_code == 0


def test_count_past_the_end_is_clipped(golden):
    doc = json.loads(run(golden / "val.bin", "--at", 1, "--count", 100, "--json").stdout)
    assert len(doc["ids"]) == 3 and doc["ids"][-1] == EOT


@pytest.mark.parametrize("at", [15, 99, -1])
def test_at_outside_the_file_is_a_bad_at_value(golden, at):
    r = run(golden / "train.bin", "--at", at)
    assert r.exit_code == 2
    assert "--at" in r.stderr and "[0, 15)" in r.stderr and r.stdout == ""


def test_human_output_marks_boundaries_and_says_checksum_is_as_recorded(golden):
    r = run(golden / "train.bin", "--count", 4)
    assert r.exit_code == 0 and r.stderr == ""
    out = r.stdout
    assert "Hello│ world│<|endoftext|>│⟨e6⟩" in out
    assert "15496" in out and "(as recorded)" in out and "tokens [0, 4) of 15" in out
    assert "\x1b[" not in out  # not a terminal: no colour


def test_newlines_show_as_return_symbol_in_a_bare_bin(tmp_path, ref_gpt2):
    ids = ref_gpt2.encode_ordinary("a\nb\tc")  # a | \n | b | \t | c
    path = write_bin(tmp_path / "bare.bin", ids)
    doc = json.loads(run(path, "--json").stdout)
    assert doc["ids"] == ids and doc["meta"] is None and doc["decoded_with"] == "gpt2"
    assert doc["marked"] == "a│⏎│b│⇥│c"
    assert doc["text"] == "a\nb\tc"
    assert any("no meta.json" in w for w in doc["warnings"])


def test_render_piece_by_hand():
    assert render_piece(b" world") == " world"
    assert render_piece(b"\xe6\xbb") == "⟨e6 bb⟩"
    assert render_piece("。".encode()) == "。"
    assert render_piece(b"\n\n") == "⏎⏎"
    assert render_piece(b"\x00") == "⟨00⟩"


def test_uint32_bin_read_with_dtype_from_meta(tmp_path, ref_gpt2):
    ids = ref_gpt2.encode_ordinary("Hello world") + [EOT]
    write_bin(tmp_path / "train.bin", ids, "<u4")
    meta = json.loads((GOLDEN / "meta.json").read_text())
    meta["dtype"] = "<u4"
    meta["splits"] = {"train": {**meta["splits"]["train"], "tokens": 3, "bytes": 12, "documents": 1}}
    formats.write_meta(tmp_path / "meta.json", meta)
    doc = json.loads(run(tmp_path / "train.bin", "--json").stdout)
    assert doc["dtype"] == "<u4" and doc["ids"] == ids and doc["warnings"] == []


def test_explicit_meta_for_a_bin_elsewhere(golden, tmp_path):
    lone = tmp_path / "elsewhere"
    lone.mkdir()
    shutil.copy(golden / "val.bin", lone / "val.bin")
    doc = json.loads(run(lone / "val.bin", "--meta", golden / "meta.json", "--json").stdout)
    assert doc["split"] == "val" and doc["documents"] == 1
    r = run(lone / "val.bin", "--meta", GOLDEN / "meta.json")
    assert r.exit_code == 0
    shutil.copy(golden / "val.bin", lone / "other.bin")
    r = run(lone / "other.bin", "--meta", golden / "meta.json")
    assert r.exit_code == 2 and "not other.bin" in r.stderr


def test_token_count_differing_from_meta_is_warned(golden):
    with open(golden / "val.bin", "ab") as f:
        f.write(b"\x01\x00")
    doc = json.loads(run(golden / "val.bin", "--json").stdout)
    assert doc["tokens"] == 5 and any("records 4" in w for w in doc["warnings"])


def test_odd_byte_count_is_a_data_error(tmp_path):
    (tmp_path / "odd.bin").write_bytes(b"\x00\x01\x02")
    r = run(tmp_path / "odd.bin")
    assert r.exit_code == 1 and "stray byte" in r.stderr


def test_unknown_encoding_is_a_config_error(golden):
    r = run(golden / "train.bin", "--encoding", "nonesuch")
    assert r.exit_code == 2 and "unknown encoding 'nonesuch'" in r.stderr


def test_ids_beyond_the_vocabulary_show_as_unknown(tmp_path):
    doc = json.loads(run(write_bin(tmp_path / "x.bin", [60000, 15496]), "--json").stdout)
    assert doc["pieces"] == ["⟨id 60000?⟩", "Hello"]


def test_empty_bin(tmp_path):
    doc = json.loads(run(write_bin(tmp_path / "e.bin", []), "--json").stdout)
    assert doc["tokens"] == 0 and doc["ids"] == []


# --- data folder --------------------------------------------------------------------------


def test_data_folder_summarises_every_split(golden):
    r = run(golden, "--json")
    assert r.exit_code == 0
    doc = json.loads(r.stdout)
    assert doc["kind"] == "data" and set(doc["splits"]) == {"train", "val"}
    assert doc["splits"]["train"]["tokens"] == 15 and doc["splits"]["val"]["tokens"] == 4
    assert doc["splits"]["val"]["size_matches"] and doc["checksums"] == "as recorded"
    human = run(golden).stdout
    assert "split train" in human and "split val" in human and "xxh3_128:5264a181523b021e05d804325be0f903" in human
    assert doc["warnings"] == [] and "warning" not in human


def test_a_folder_whose_files_are_not_as_recorded_says_so_in_a_warning_line(golden):
    """train.bin 4 bytes short of meta.json's 30 (15 tokens × 2), val.bin gone: the summary's
    size_matches / present were false with no line a person reads; each now has one."""
    with open(golden / "train.bin", "r+b") as f:
        f.truncate(26)
    (golden / "val.bin").unlink()
    r = run(golden)
    assert r.exit_code == 0  # inspect looks; verify is the check that fails
    assert f"warning: {golden / 'train.bin'}: 26 bytes, meta.json records 30; run `winsample verify`" in r.stdout
    assert f"warning: {golden / 'val.bin'}: missing, meta.json records it" in r.stdout
    assert len(json.loads(run(golden, "--json").stdout)["warnings"]) == 2


def test_a_folder_of_llmc_shards_only_warns_of_no_missing_bin(tmp_path):
    """--layout llmc keeps no train.bin / val.bin: their absence is no finding (verify passes it)."""
    (tmp_path / "t.txt").write_text("Some text to encode, twice over. " * 200)
    enc = CliRunner().invoke(main, ["encode", str(tmp_path / "t.txt"), "--layout", "llmc", "--split", "tail", "-o",
                                    str(tmp_path / "out"), "-q"])
    assert enc.exit_code == 0, enc.stderr
    assert not (tmp_path / "out" / "train.bin").exists()
    assert json.loads(run(tmp_path / "out", "--json").stdout)["warnings"] == []


def test_folder_without_meta_says_how_to_fix(tmp_path):
    r = run(tmp_path)
    assert r.exit_code == 2 and "no meta.json" in r.stderr and "winsample encode" in r.stderr


# --- plans --------------------------------------------------------------------------------


def make_plan(path, n=15, t=4, stride=2):
    starts = np.arange(0, n - t + 1, stride)  # 0 2 4 6 8 10 → 6 windows
    rows = np.zeros(len(starts), dtype=formats.PLAN_DTYPE)
    rows["start"], rows["length"] = starts, t
    rows["doc"] = (starts >= 3).astype(int)
    rows["fresh"] = t - stride
    rows["fresh"][0] = 0
    side = {
        "source": {"path": "data/train.bin", "file": "train.bin", "bytes": 30, "checksum": "xxh3_128:732a", "dtype": "<u2", "tokens": n},
        "params": {"T": t, "stride": stride, "overlap": t - stride, "offset": 0, "seed": 1337, "tail": "drop"},
        "stats": {"windows": len(rows), "coverage": 14 / 15},
        "tokenizer": {"name": "gpt2"},
    }
    formats.write_plan(path, rows, side)
    return rows


def test_plan_shows_parameters_counts_and_first_windows(tmp_path):
    plan = tmp_path / "train.plan.npy"
    make_plan(plan)
    r = run(plan, "--count", 3, "--json")
    assert r.exit_code == 0 and r.stderr == ""
    doc = json.loads(r.stdout)
    assert doc["kind"] == "plan" and doc["params"]["T"] == 4 and doc["params"]["seed"] == 1337
    assert doc["source"]["file"] == "train.bin" and doc["stats"]["windows"] == 6
    # 6 windows of 4 → 24 spanned; the first adds 4 new tokens, each later one 2: 4 + 5*2 = 14
    assert doc["counts"] == {"windows": 6, "length_min": 4, "length_max": 4, "tokens_spanned": 24,
                             "new_tokens": 14, "documents": 2}
    assert doc["windows"] == [
        {"row": 0, "start": 0, "length": 4, "doc": 0, "fresh": 0},
        {"row": 1, "start": 2, "length": 4, "doc": 0, "fresh": 2},
        {"row": 2, "start": 4, "length": 4, "doc": 1, "fresh": 2},
    ]


def test_plan_at_4_and_human_table(tmp_path):
    plan = tmp_path / "p.npy"
    make_plan(plan)
    doc = json.loads(run(plan, "--at", 4, "--json").stdout)
    assert [w["start"] for w in doc["windows"]] == [8, 10]
    out = run(plan).stdout
    assert "windows [0, 6) of 6" in out and "seed" in out and "1337" in out
    assert run(plan, "--at", 6).exit_code == 2


def test_sidecar_path_opens_the_plan(tmp_path):
    plan = tmp_path / "p.npy"
    make_plan(plan)
    doc = json.loads(run(formats.plan_sidecar(plan), "--json").stdout)
    assert doc["kind"] == "plan" and doc["counts"]["windows"] == 6


def test_plan_without_sidecar_is_a_data_error(tmp_path):
    plan = tmp_path / "p.npy"
    make_plan(plan)
    formats.plan_sidecar(plan).unlink()
    r = run(plan)
    assert r.exit_code == 1 and "missing sidecar" in r.stderr


def test_doc_index_is_not_a_plan(golden):
    r = run(golden / "train.docs.npy")
    assert r.exit_code == 1 and "not a window plan" in r.stderr


# --- best-fit plans: windows as their segments -------------------------------------------


def best_fit_plan(tmp_path):
    """The hand-packed plan of tests/verify/test_packed_plans.py (its docstring works it out):
    4 windows of span 8 holding 7 segments, 31 tokens, one document split."""
    from .verify.test_packed_plans import HONEST, packed_plan, train_ids

    write_bin(tmp_path / "train.bin", train_ids())
    return packed_plan(tmp_path / "p.npy", tmp_path / "train.bin", HONEST)


def test_best_fit_plan_shows_fill_padding_segments_and_its_windows_as_segments(tmp_path):
    plan = best_fit_plan(tmp_path)
    r = run(plan, "--count", 2, "--json")
    assert (r.exit_code, r.stderr) == (0, "")
    doc = json.loads(r.stdout)
    assert doc["version"] == 2 and doc["params"]["pack"] == "best-fit"
    # windows hold 8, 8, 8, 7 tokens: 31 of 4 × 8 = 32 places
    assert doc["counts"] == {"windows": 4, "segments": 7, "window_tokens_min": 7, "window_tokens_max": 8, "tokens_planned": 31,
                             "fill": 31 / 32, "padding_tokens": 1, "documents": 6, "documents_split": 1,
                             "documents_truncated": 0, "documents_dropped": 0, "long": "split"}
    assert doc["at"] == 0 and doc["windows"] == [
        {"window": 0, "tokens": 8, "segments": [{"row": 0, "start": 8, "length": 8, "doc": 2}]},
        {"window": 1, "tokens": 8, "segments": [{"row": 1, "start": 19, "length": 2, "doc": 3},
                                                {"row": 2, "start": 21, "length": 6, "doc": 4}]},
    ]
    assert doc["warnings"] == []


def test_best_fit_at_and_count_are_windows_and_the_table_lists_segments(tmp_path):
    plan = best_fit_plan(tmp_path)
    doc = json.loads(run(plan, "--at", 3, "--json").stdout)
    assert [(w["window"], [g["start"] for g in w["segments"]]) for w in doc["windows"]] == [(3, [16, 27])]
    r = run(plan, "--at", 4)  # 4 windows (7 rows): row 4 exists, window 4 does not
    assert r.exit_code == 2 and "outside [0, 4) (4 windows)" in r.stderr
    out = run(plan).stdout.splitlines()
    assert "windows [0, 4) of 4" in out
    at = out.index(f"{'window':>8} {'tokens':>8} {'row':>10} {'start':>14} {'length':>8} {'doc':>10}")
    assert out[at + 2 : at + 4] == [f"{1:>8} {8:>8} {1:>10} {19:>14} {2:>8} {3:>10}", f"{'':>17} {2:>10} {21:>14} {6:>8} {4:>10}"]
    assert any(line.split() == ["fill", str(31 / 32)] for line in out) and any(line.split() == ["padding_tokens", "1"] for line in out)


def test_best_fit_sidecar_disagreeing_with_its_rows_is_warned(tmp_path):
    from .verify.test_run import edit_sidecar

    plan = best_fit_plan(tmp_path)
    edit_sidecar(plan, lambda side: side["stats"].update(fill=1.0, segments=9))
    doc = json.loads(run(plan, "--json").stdout)
    assert doc["counts"]["fill"] == 31 / 32 and len(doc["warnings"]) == 2
    assert "its rows give segments 7 but its sidecar records 9" in doc["warnings"][0]
    assert "its rows give fill 0.96875 but its sidecar records 1.0" in doc["warnings"][1]


def test_best_fit_plan_with_misnumbered_windows_is_one_line_exit_1(tmp_path):
    from .verify.test_packed_plans import HONEST, packed_plan, train_ids

    write_bin(tmp_path / "train.bin", train_ids())
    plan = packed_plan(tmp_path / "p.npy", tmp_path / "train.bin", [(w * 2, s, L, d) for w, s, L, d in HONEST])
    r = run(plan)
    assert r.exit_code == 1 and r.stdout == "" and r.stderr.count("\n") == 1
    assert "numbered 0, 1, … without a gap" in r.stderr


def test_best_fit_segments_name_their_sources_and_offsets_in_their_document(tmp_path):
    from winsample import provenance
    from winsample.encode import encode_corpus

    from .conftest import CORPUS

    data = tmp_path / "data"
    encode_corpus([str(CORPUS / "macbeth.txt"), str(CORPUS / "sonnets.txt")], data, val_fraction=0.0)
    plan = tmp_path / "p.npy"
    r = CliRunner().invoke(main, ["windows", str(data / "train.bin"), "-T", "256", "--pack", "best-fit", "-o", str(plan), "-q"])
    assert r.exit_code == 0, r.stderr
    doc = json.loads(run(plan, "--count", 50, "--json").stdout)
    starts = np.load(data / "train.docs.npy")
    segs = [g for w in doc["windows"] for g in w["segments"]]
    assert len(segs) >= 50
    for g in segs:  # the offset in the document is the segment's start less its document's start
        assert g["doc_offset"] == g["start"] - starts[g["doc"]]
        assert g["source"]["path"] == str(CORPUS / ("macbeth.txt", "sonnets.txt")[g["doc"]])
    assert {g["doc_offset"] % 257 for g in segs} == {0}  # pieces of split documents: every span (257) tokens
    row = provenance.trace_row(plan, 5)
    rows, _ = formats.load_plan(plan)
    assert row == {"row": 5, "start": int(rows["start"][5]), "length": int(rows["length"][5]), "window": int(rows["window"][5]),
                   "doc": int(rows["doc"][5]), "doc_offset": int(rows["start"][5] - starts[rows["doc"][5]]),
                   "source": row["source"]} and "fresh" not in row


# --- mixtures (winsample mix) ----------------------------------------------------------------


def make_mixture(tmp_path, weights=(("web", "0.6"), ("code", "0.3"), ("books", "0.1"))):
    """Three one-document sources of 31, 19 and 13 tokens, planned by hand with T 3 (a window of 4
    tokens every 3: 10, 6 and 4 windows, window w at 3·w), mixed by weight. By hand (as in
    tests/verify/test_mixture_plans.py): web runs out first, an epoch is ⌊10 / 0.6⌋ = 16 windows,
    web 10 and the other 6 split 3 : 1 by largest remainder (4.5, 1.5; the tie to the earlier):
    code 5, books 1."""
    from .verify.test_run import GPT2, make_folder
    from .verify.test_run import make_plan as hand_plan

    for k, (name, n) in enumerate({"web": 31, "code": 19, "books": 13}.items()):
        base = 1000 * (k + 1)
        folder = make_folder(tmp_path / name, list(range(base, base + n)), [base + 500])
        w = (n - 1) // 3
        hand_plan(folder / "train.plan.npy", folder / "train.bin", [3 * i for i in range(w)], [4] * w, T=3, tokenizer=dict(GPT2))
    out = tmp_path / "mix.plan.npy"
    r = CliRunner().invoke(main, ["mix", *(f"{n}={w}:{tmp_path / n / 'train.plan.npy'}" for n, w in weights), "-o", str(out), "-q"])
    assert r.exit_code == 0, r.stderr
    return out


def test_mixture_json_shows_its_sources_rule_and_the_first_positions_the_loader_serves(tmp_path):
    import winsample

    mix = make_mixture(tmp_path)
    r = run(mix, "--json")
    assert r.exit_code == 0 and r.stderr == ""
    doc = json.loads(r.stdout)
    assert (doc["kind"], doc["version"], doc["windows"], doc["rule"]) == ("mixture", 3, 16, {"rule": "first-exhausted", "prefix": "weights"})
    assert doc["rule_words"] == "one pass over the source that runs out first"
    assert [(s["name"], s["weight"], s["plan"], s["windows"], s["count"], s["repeats"], s["tokens"], s["tokens_per_epoch"])
            for s in doc["sources"]] == [
        ("web", "0.6", "web/train.plan.npy", 10, 10, [1, 1], 40, 40),
        ("code", "0.3", "code/train.plan.npy", 6, 5, [0, 1], 24, 20),  # 24 tokens × 5 / 6
        ("books", "0.1", "books/train.plan.npy", 4, 1, [0, 1], 16, 4),  # 16 tokens × 1 / 4
    ]
    assert [s["share"] for s in doc["sources"]] == [10 / 16, 5 / 16, 1 / 16]
    pos = doc["positions"]
    assert [p["position"] for p in pos] == list(range(16)) and doc["warnings"] == []  # --count 32, clipped
    assert all(p["start"] == 3 * p["window"] and p["length"] == 4 for p in pos)  # the hand plans' windows
    assert {n: sum(p["source"] == n for p in pos) for n in ("web", "code", "books")} == {"web": 10, "code": 5, "books": 1}
    loader = winsample.Loader(mix, batch_size=16, seed=0)
    served = [(loader.sources[int(x["source"])], int(x["window"]), int(x["start"]), int(x["length"])) for x in loader.rows(0, 0)]
    assert [(p["source"], p["window"], p["start"], p["length"]) for p in pos] == served


def test_mixture_at_and_count_are_positions_and_the_text_lists_sources_and_positions(tmp_path):
    mix = make_mixture(tmp_path)
    doc = json.loads(run(mix, "--at", 15, "--count", 5, "--json").stdout)
    assert [p["position"] for p in doc["positions"]] == [15] and doc["at"] == 15
    r = run(mix, "--at", 15, "--count", 5)
    assert r.exit_code == 0 and r.stderr == ""
    lines = r.stdout.splitlines()
    assert lines[0] == f"mixture plan {mix}"
    assert "epoch: 16 windows (one pass over the source that runs out first)" in lines
    assert any(line.split()[:6] == ["code", "0.3", "6", "5", "31.25%", "0-1"] and line.split()[-1] == "code/train.plan.npy"
               for line in lines)
    assert "positions [15, 16) of epoch 0 (seed 0), as winsample.Loader serves them" in lines
    assert lines[-1].split()[0] == "15" and lines[-1].split()[-1] == "4"


def test_mixture_at_past_the_epoch_is_a_bad_at_value(tmp_path):
    r = run(make_mixture(tmp_path), "--at", 16)
    assert r.exit_code == 2 and r.stdout == "" and "'--at'" in r.stderr and "outside [0, 16)" in r.stderr


def test_mixture_whose_source_is_gone_still_shows_its_rows_and_warns(tmp_path):
    mix = make_mixture(tmp_path)
    (tmp_path / "books" / "train.plan.npy").unlink()
    r = run(mix, "--json")
    assert r.exit_code == 0 and r.stderr == ""
    doc = json.loads(r.stdout)
    assert [s["count"] for s in doc["sources"]] == [10, 5, 1] and doc["positions"] == []
    assert any(w.startswith("source books: ") for w in doc["warnings"])
    assert any(w.startswith("positions not shown") for w in doc["warnings"])
    assert "warning: source books: " in run(mix).stdout


# --- writes nothing, terminal manners -----------------------------------------------------


def test_inspect_writes_nothing(golden, tmp_path):
    make_plan(golden / "p.npy")
    before = snapshot(golden)
    for args in ([golden / "train.bin"], [golden], [golden / "p.npy"], [golden / "val.bin", "--json"]):
        assert run(*args).exit_code == 0
    assert snapshot(golden) == before


def test_missing_path_is_one_line_exit_2(tmp_path):
    r = run(tmp_path / "nope.bin")
    assert r.exit_code == 2 and r.stderr == f"error: {tmp_path / 'nope.bin'}: no such file or folder\n"


def test_colour_only_on_a_terminal_without_no_color(monkeypatch):
    class Tty:
        def isatty(self):
            return True

    class Pipe:
        def isatty(self):
            return False

    monkeypatch.delenv("NO_COLOR", raising=False)
    assert cli.use_color(Tty()) is True
    assert cli.use_color(Pipe()) is False
    monkeypatch.setenv("NO_COLOR", "1")
    assert cli.use_color(Tty()) is False


def test_render_text_styles_only_through_the_given_style(golden):
    report = inspect_path(golden / "train.bin", count=4)
    plain = render_text(report)
    styled = render_text(report, lambda text, role: f"<{role}>{text}</{role}>")
    assert "<mark>│</mark>" in styled and "<mark>⟨e6⟩</mark>" in styled and "<head>" in styled
    assert "<" not in plain.replace("<|endoftext|>", "").replace("<u2", "")


def test_colour_on_a_pseudo_terminal_and_none_with_no_color(golden):
    """End to end through a real pty: ANSI codes appear on a terminal, never with NO_COLOR."""
    import pty
    outs = {}
    for label, extra in (("tty", {}), ("no_color", {"NO_COLOR": "1"})):
        env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"} | extra
        master, slave = pty.openpty()
        p = subprocess.Popen([sys.executable, "-m", "winsample", "inspect", str(golden / "train.bin"), "--count", "3"],
                             stdout=slave, stderr=subprocess.PIPE, env=env)
        os.close(slave)
        chunks = []
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
        p.wait(timeout=30)
        os.close(master)
        outs[label] = b"".join(chunks).decode()
        assert p.returncode == 0
    assert "\x1b[" in outs["tty"] and "Hello" in outs["tty"]
    assert "\x1b[" not in outs["no_color"] and "Hello│ world│<|endoftext|>" in outs["no_color"]


def test_a_folder_shows_whether_each_document_starts_with_bos_and_which_backend_wrote_it(tmp_path):
    from winsample.encode import encode_corpus

    from .conftest import CORPUS

    for bos in (False, True):
        out = tmp_path / f"bos{bos}"
        encode_corpus([str(CORPUS / "hamlet.txt")], out, bos=bos, backend="reference", split="tail")
        r = CliRunner().invoke(main, ["inspect", str(out), "--json"])
        assert r.exit_code == 0, r.stderr
        meta = json.loads(r.stdout)
        assert meta.get("bos_prepended", False) is bos
        assert meta["backend"]["name"] == "reference"
        text = CliRunner().invoke(main, ["inspect", str(out)]).stdout
        assert ("bos_prepended" in text) is bos and "backend" in text


def test_a_plan_row_outside_its_tokens_is_shown_and_named_not_an_error(tmp_path):
    """An edited row (start -1) of a plan whose data has provenance: inspect shows the plan, that
    row without a source, and one warning naming the plan and the row (verify is what fails it)."""
    (tmp_path / "d.jsonl").write_text("".join(json.dumps({"text": f"document {k} " * 9}) + "\n" for k in range(6)))
    cli_run = CliRunner().invoke
    assert cli_run(main, ["encode", str(tmp_path / "d.jsonl"), "-o", str(tmp_path / "data"), "--val-fraction", "0", "-q"]).exit_code == 0
    plan = tmp_path / "p.npy"
    assert cli_run(main, ["windows", str(tmp_path / "data" / "train.bin"), "-T", "4", "-o", str(plan), "-q"]).exit_code == 0
    rows = np.load(plan)
    rows["start"][2] = -1
    np.save(plan, rows)
    r = run(plan, "--json")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    shown = {w["row"]: w for w in doc["windows"]}
    assert shown[2]["start"] == -1 and "source" not in shown[2] and "source" in shown[1]
    n = doc["source"]["tokens"]
    assert doc["warnings"] == [f"{plan}: row 2 starts at -1, outside its tokens [0, {n}); run `winsample verify`"]
