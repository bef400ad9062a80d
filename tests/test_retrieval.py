"""Retrieval chunks (retrieval.py, ``winsample chunk``, ``windows --format jsonl --decode``).

Every expectation is checked against the text itself and the reference tokenizer (tiktoken's own
GPT-2, built in conftest): ``text[char_start:char_end] == chunk.text``, ``len(ref.encode(text)) ==
tokens <= T``, the ranges cover the text, and the overlap is as asked. Character offsets of
windows rows are recomputed by brute force: the doc's tokens decoded up to the window, counted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import winsample
from winsample.cli import main
from winsample.errors import ConfigError

from .conftest import CORPUS

TRICKY = ["你好，世界。", "😀", "👩‍👩‍👧", "e\u0301", "\r\n", "\n\n", "\ufeff", " ", "a", "Hello", ". ", "! ", "—", "Ω", "\t",
          "<|endoftext|>", "ﬁ", "١٢٣"]

SAMPLES = {
    "cjk": (CORPUS / "zh_sliding_windows.txt").read_text(encoding="utf-8"),
    "emoji": "Start 😀😀 then 👩‍👩‍👧 family, flags 🇯🇵🇫🇷, and more 😀 text. " * 12,
    "crlf": "Line one.\r\nLine two!\r\n\r\nA new paragraph? Yes.\r\n" * 15,
    "combining": "Cafe\u0301 re\u0301sume\u0301 nai\u0308ve. " * 30,
    "bom": "\ufeffA file that starts with a byte-order mark. And goes on. " * 10,
    "hamlet": (CORPUS / "hamlet.txt").read_text(encoding="utf-8")[:20000],
}


def check(text: str, chunks, ref, T: int) -> None:
    """The contract for every chunk of ``text``: exact text, count by the reference ≤ T, covering."""
    covered = 0
    for k, c in enumerate(chunks):
        assert c.index == k
        assert c.text == text[c.char_start : c.char_end]
        assert c.tokens == len(ref.encode_ordinary(c.text)) <= T
        assert c.char_start <= covered, "a gap before this chunk"
        covered = max(covered, c.char_end)
    assert covered == (0 if text.isspace() else len(text))  # whitespace alone: no chunk, as the empty text


@pytest.mark.parametrize("name", sorted(SAMPLES))
@pytest.mark.parametrize("boundaries", ["none", "paragraph", "sentence"])
def test_every_chunk_is_its_text_slice_within_T_tokens_and_together_they_cover_the_text(ref_gpt2, name, boundaries):
    text = SAMPLES[name]
    chunks = winsample.chunk(text, "gpt2", T=48, overlap=8, boundaries=boundaries)
    assert len(chunks) > 3
    check(text, chunks, ref_gpt2, 48)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(TRICKY), min_size=0, max_size=120).map("".join), st.integers(8, 40), st.data(),
       st.sampled_from(["none", "paragraph", "sentence"]))
def test_any_text_any_limit(ref_gpt2, text, T, data, boundaries):
    overlap = data.draw(st.integers(0, T - 1))
    chunks = winsample.chunk(text, T=T, overlap=overlap, boundaries=boundaries)
    check(text, chunks, ref_gpt2, T)
    check_no_token_skipped(chunks)


def check_no_token_skipped(chunks) -> None:
    """Whatever the boundaries: each window starts after the previous one's start and no later than its end."""
    for a, b in zip(chunks, chunks[1:]):
        assert a.token_start < b.token_start <= a.token_end


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(min_size=1, max_size=400), st.integers(8, 30), st.data())
def test_overlap_is_as_asked_between_windows_that_were_not_cut_short(ref_gpt2, text, T, data):
    text = text.encode("utf-8", "replace").decode("utf-8")  # a lone surrogate has no UTF-8: "?" instead
    overlap = data.draw(st.integers(0, T - 1))
    check_overlap(text, winsample.chunk(text, T=T, overlap=overlap), ref_gpt2, T, overlap)


def check_overlap(text: str, chunks, ref, T: int, overlap: int) -> None:
    """``check``, and the windows of ``boundaries="none"``: an uncut one overlaps the next by exactly
    ``overlap`` tokens; after one cut short the next starts no later than it ended (no token skipped)."""
    check(text, chunks, ref, T)
    check_no_token_skipped(chunks)
    ids = ref.encode_ordinary(text)
    assert chunks[-1].token_end == len(ids) if ids and not text.isspace() else chunks == []  # whitespace alone: none
    for a, b in zip(chunks, chunks[1:]):
        if a.token_end - a.token_start == T:  # a window not cut short (its text within T as planned)
            assert b.token_start == a.token_start + T - overlap  # so it shares exactly `overlap` tokens with the next
            assert a.token_end - b.token_start == overlap
        else:  # cut short (its text re-encoded to more than T): the next starts no later than it ended
            assert b.token_start <= a.token_end


# Found by hypothesis: a window cut short to end *before* an earlier window's end was followed by one
# starting at that earlier end, one token after its own (tokens 5–8, then 9–14). By hand, GPT-2 spells
# "0", ":" with one token each, "Ä" (2 bytes) with two and "𐀀" (4 bytes) with four: a token a byte.
# '0:𐀀0Ä0𐀀' (14 tokens), T 9, overlap 4: [0, 9) is '0:𐀀0Ä', 9 tokens, uncut. The next starts 5 on,
# inside the first 𐀀, so its text widens to it: [5, 14) is '𐀀0Ä0𐀀', 12 tokens; less 3: [5, 11), still
# '𐀀0Ä0𐀀' (token 10 is inside the last 𐀀); less 3: [5, 8), '𐀀0Ä', 7. Cut short, so the next starts at
# its end 8 (not 5 + 5 = 10): [8, 14), 'Ä0𐀀', 7 tokens.
# '0Ä𐀀𐀀\x80𐀀' (17 tokens: "\x80" is 2 bytes), T 8, overlap 5 (stride 3): [0, 8) widens to '0Ä𐀀𐀀', 11
# tokens, so [0, 5), '0Ä𐀀', 7. Then min(0 + 3, 5) = 3: [3, 11) is '𐀀𐀀', 8, uncut. Then 6: [6, 14) widens
# to '𐀀𐀀\x80𐀀', 14, so [6, 8), '𐀀𐀀', 8: cut short below the previous end 11, so the next starts at 8,
# not 9: [8, 16) is '𐀀\x80𐀀', 10; [8, 14) still; [8, 12), '𐀀\x80', 6. Then min(8 + 3, 12) = 11: [11, 17).
@pytest.mark.parametrize(("text", "T", "overlap", "windows"), [
    ("0:𐀀0Ä0𐀀", 9, 4, [(0, 9), (5, 8), (8, 14)]),
    ("0Ä𐀀𐀀\x80𐀀", 8, 5, [(0, 5), (3, 11), (6, 8), (8, 12), (11, 17)]),
])
def test_a_window_cut_short_below_an_earlier_end_is_followed_by_one_from_its_own_end(ref_gpt2, text, T, overlap, windows):
    chunks = winsample.chunk(text, T=T, overlap=overlap)
    check_overlap(text, chunks, ref_gpt2, T, overlap)
    assert [(c.token_start, c.token_end) for c in chunks] == windows


@pytest.mark.parametrize("boundaries", ["paragraph", "sentence"])
def test_with_boundaries_a_window_cut_short_below_an_earlier_end_is_followed_by_one_from_its_own_end(ref_gpt2,
                                                                                                   boundaries):
    # as above, the planner's windows [0, 9) then [5, …) cut to [5, 8): the next planned one started at 9
    text = "0:𐀀0Ä0Ä0𐀀0:"
    chunks = winsample.chunk(text, T=9, overlap=4, boundaries=boundaries)
    check(text, chunks, ref_gpt2, 9)
    assert [(c.token_start, c.token_end) for c in chunks[:2]] == [(0, 9), (5, 8)]
    check_no_token_skipped(chunks)


@pytest.mark.parametrize("boundaries", ["paragraph", "sentence"])
def test_a_break_of_several_newlines_makes_no_chunk_of_whitespace(ref_gpt2, boundaries):
    """New-user trial: "\\n\\n\\n" is two GPT-2 tokens ("\\n\\n", "\\n") with an edge after each, and the
    planner made the one between them a chunk: [122, 123), text "\\n". The window after it takes it
    (the one before is full: 64 tokens [58, 122)), so the chunks still cover the text."""
    text = "Alpha beta gamma. " * 30 + "\n\n\n" + "Delta epsilon zeta. " * 30
    assert ref_gpt2.encode_ordinary(text)[121:123] == [628, 198]  # "\n\n", "\n"
    chunks = winsample.chunk(text, T=64, overlap=8, boundaries=boundaries)
    check(text, chunks, ref_gpt2, 64)
    check_no_token_skipped(chunks)
    assert not any(c.text.isspace() for c in chunks)
    if boundaries == "paragraph":  # edges at 122 and 123: the window [123, …) starts at 122 instead
        assert [c.text for c in chunks if c.token_start == 122][0].startswith("\nDelta")
    import dataclasses  # real code: its blank lines gave two or three such chunks at T 100

    code = open(dataclasses.__file__, encoding="utf-8").read()
    assert not any(c.text.isspace() for c in winsample.chunk(code, T=100, overlap=20, boundaries=boundaries))


@pytest.mark.parametrize("boundaries", ["paragraph", "sentence"])
def test_a_break_at_the_very_end_after_a_full_window_makes_no_chunk_of_whitespace(ref_gpt2, boundaries):
    """Review: the blank window at the end of a text went on as a chunk of its own ("\n") when the
    window before was full. Now the last chunk is a window of T tokens that ends at the end."""
    for text in ("one two three four five six seven\n\n\n", "one two three four five six seven\n\n\n\n\n"):
        ids = ref_gpt2.encode_ordinary(text)
        chunks = winsample.chunk(text, T=8, overlap=0, boundaries=boundaries)
        check(text, chunks, ref_gpt2, 8)
        check_no_token_skipped(chunks)
        assert not any(c.text.isspace() for c in chunks)
        assert (chunks[-1].token_start, chunks[-1].token_end) == (len(ids) - 8, len(ids))  # by hand: 8 = T


def test_by_hand_ten_tokens_window_four_overlap_one():
    # "a a … a": GPT-2 encodes "a" and each " a" as one token, 10 in all; T 8, overlap 1: windows [0, 8)
    # and [7, 10) (7 = 8 − 1), i.e. characters [0, 15) and [13, 19): " a" is 2 characters, token k starts at 2k − 1
    text = "a" + " a" * 9
    chunks = winsample.chunk(text, T=8, overlap=1)
    assert [(c.token_start, c.token_end) for c in chunks] == [(0, 8), (7, 10)]
    assert [(c.char_start, c.char_end) for c in chunks] == [(0, 15), (13, 19)]
    assert chunks[1].text == " a a a"


def test_a_split_character_widens_the_range_and_says_so(ref_gpt2):
    text = "你好，世界。" * 30  # GPT-2 spells several of these characters with two tokens each
    ids = ref_gpt2.encode_ordinary(text)
    chunks = winsample.chunk(text, T=12, overlap=3)  # windows that start 9 tokens on: often inside a character
    check(text, chunks, ref_gpt2, 12)
    assert any(c.split_char for c in chunks)
    for c in chunks:
        spelled = ref_gpt2.decode_bytes(ids[c.token_start : c.token_end])
        # the window's own bytes lie inside the chunk's text, which holds whole characters
        assert spelled.decode("utf-8", "ignore") in c.text
        assert c.split_char == (spelled.decode("utf-8", "replace") != c.text)


def test_empty_text_has_no_chunks_and_bad_arguments_are_refused():
    assert winsample.chunk("") == []
    for kw in ({"T": 4}, {"overlap": 512}, {"overlap": -1}, {"boundaries": "word"}):
        with pytest.raises(ConfigError):
            winsample.chunk("text", **kw)
    with pytest.raises(ConfigError, match="a str"):
        winsample.chunk(b"bytes")


def test_a_tokenizer_whose_tokens_do_not_spell_the_text_is_refused():
    from winsample import tokenizer

    tok = tokenizer.load("gpt2")
    tok.exact_decode = False  # as a SentencePiece model or a normalizing tokenizer.json says
    try:
        with pytest.raises(ConfigError, match="do not spell the text byte for byte"):
            winsample.chunk("text", tok)
    finally:
        tok.exact_decode = True


def test_chunk_records_names_each_chunk_by_its_record():
    got = list(winsample.chunk_records(["one two three", ("doc-7", "four five"), {"id": 3, "text": "six"}], T=8, overlap=0))
    assert [(c.id, c.source) for c in got] == [("0#0", {"record": 0, "id": None}), ("doc-7#0", {"record": 1, "id": "doc-7"}),
                                               ("3#0", {"record": 2, "id": 3})]
    with pytest.raises(ConfigError, match="record 0"):
        list(winsample.chunk_records([42]))


# --- winsample chunk ------------------------------------------------------------------------------


def write_kb(tmp_path):
    recs = [{"id": f"r{k}", "text": t} for k, t in enumerate(SAMPLES.values())]
    path = tmp_path / "kb.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in recs), encoding="utf-8")
    return path, recs


def test_the_cli_writes_the_api_s_chunks(tmp_path, ref_gpt2):
    kb, recs = write_kb(tmp_path)
    out = tmp_path / "chunks.jsonl"
    r = CliRunner().invoke(main, ["chunk", str(kb), "-o", str(out), "-T", "64", "--overlap", "16", "--boundaries",
                                  "sentence", "--id-field", "id"])
    assert r.exit_code == 0 and r.stdout == "" and "chunks of 6 documents" in r.stderr and str(out) in r.stderr
    lines = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert list(lines[0]) == ["id", "text", "char_start", "char_end", "tokens", "source", "token_start", "token_end",
                              "split_char", "index"]
    api = list(winsample.chunk_records([(r["id"], r["text"]) for r in recs], T=64, overlap=16, boundaries="sentence"))
    assert [(x["id"], x["text"], x["char_start"], x["char_end"], x["tokens"]) for x in lines] == \
        [(c.id, c.text, c.char_start, c.char_end, c.tokens) for c in api]
    for x in lines:
        rec = recs[x["source"]["line"] - 1]
        assert x["source"] == {"path": str(kb), "line": recs.index(rec) + 1, "id": rec["id"]}
        assert rec["text"][x["char_start"] : x["char_end"]] == x["text"]
        assert len(ref_gpt2.encode_ordinary(x["text"])) == x["tokens"] <= 64


def test_the_cli_on_text_files_and_stdout_and_json(tmp_path):
    a = tmp_path / "a.txt"
    a.write_text(SAMPLES["crlf"], encoding="utf-8", newline="")
    r = CliRunner().invoke(main, ["chunk", str(a), "-o", "-", "-T", "32", "--overlap", "0", "-q"])
    assert r.exit_code == 0 and r.stderr == ""
    rows = [json.loads(x) for x in r.stdout.splitlines()]
    assert rows[0]["id"] == f"{a}:1#0" and "".join(x["text"] for x in rows) == SAMPLES["crlf"]  # no overlap: a partition
    out = tmp_path / "c.jsonl"
    r = CliRunner().invoke(main, ["chunk", str(a), "-o", str(out), "-T", "32", "--overlap", "0", "--json"])
    doc = json.loads(r.stdout)
    assert r.exit_code == 0 and doc["chunks"] == len(rows) and doc["documents"] == 1 and doc["max_tokens"] <= 32
    r = CliRunner().invoke(main, ["chunk", str(a), "-o", "-", "--json"])
    assert r.exit_code == 2 and r.stdout == "" and "stdout holds the chunks" in r.stderr


def test_bad_input_is_one_line_and_nothing_written(tmp_path):
    kb = tmp_path / "kb.jsonl"
    kb.write_text('{"text": "fine"}\n{"body": "no text field"}\n', encoding="utf-8")
    out = tmp_path / "c.jsonl"
    r = CliRunner().invoke(main, ["chunk", str(kb), "-o", str(out)])
    assert r.exit_code != 0 and r.stdout == "" and r.stderr.count("\n") == 1 and "kb.jsonl" in r.stderr
    assert "line 2" in r.stderr or ":2" in r.stderr
    assert not out.exists()
    r = CliRunner().invoke(main, ["chunk", str(kb), "-o", str(kb)])  # an output never overwrites an input
    assert r.exit_code == 2 and kb.read_text(encoding="utf-8").startswith('{"text": "fine"}')


def test_a_repeated_record_id_is_bad_input_and_nothing_is_written(tmp_path):
    """New-user trial: two records of id "a" both gave chunk id "a#0", and 1 and "1" both "1#0":
    an index keyed on chunk ids keeps one of each, silently."""
    kb = tmp_path / "kb.jsonl"
    kb.write_text('{"id": "a", "text": "first"}\n{"id": "b", "text": "second"}\n{"id": 1, "text": "int"}\n'
                  '{"id": "1", "text": "str"}\n{"id": "a", "text": "again"}\n', encoding="utf-8")
    out = tmp_path / "c.jsonl"
    r = CliRunner().invoke(main, ["chunk", str(kb), "--id-field", "id", "-o", str(out)])
    assert (r.exit_code, r.stdout, r.stderr.count("\n")) == (1, "", 1)
    assert f"{kb}:4: its id is the one {kb}:3 has (2 repeat(s) in all)" in r.stderr and "nothing was written" in r.stderr
    assert not out.exists() and not list(tmp_path.glob(".c.jsonl.*"))
    r = CliRunner().invoke(main, ["chunk", str(kb), "--id-field", "id", "-o", "-"])  # streamed: said after the lines
    assert r.exit_code == 1 and len(r.stdout.splitlines()) == 5  # every record's chunk: said so (it said "before this line")
    assert r.stderr.rstrip().endswith("the chunks of every record, both of that id included, are on standard output"
                                      " (streamed before the ids could be compared)")
    kb.write_text('{"id": "a", "text": "first"}\n{"id": "a1", "text": "second"}\n{"id": 1, "text": "int"}\n', encoding="utf-8")
    r = CliRunner().invoke(main, ["chunk", str(kb), "--id-field", "id", "-o", str(out), "-q"])
    assert r.exit_code == 0 and [json.loads(x)["id"] for x in out.read_text().splitlines()] == ["a#0", "a1#0", "1#0"]


def test_a_killed_runs_temp_file_is_removed_by_the_next_run_and_a_live_ones_kept(tmp_path):
    kb, _ = write_kb(tmp_path)
    out = tmp_path / "c.jsonl"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    left = tmp_path / f".c.jsonl.{int(dead.stdout)}.winsample.tmp"  # what kill -9 leaves: its pid is gone
    live = tmp_path / f".c.jsonl.{os.getppid()}.winsample.tmp"  # another run still writing
    for p in (left, live):
        p.write_text("half a run")
    r = CliRunner().invoke(main, ["chunk", str(kb), "-o", str(out), "-q"])
    assert r.exit_code == 0 and out.exists() and not left.exists() and live.read_text() == "half a run"


def test_a_document_of_whitespace_alone_has_no_chunk_and_is_counted(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.txt").write_text("Some words here.\n", encoding="utf-8")
    (folder / "b.txt").write_text("\n\n \t\n", encoding="utf-8")
    r = CliRunner().invoke(main, ["chunk", str(folder), "-o", "-", "-T", "16"])
    assert r.exit_code == 0 and [json.loads(x)["text"] for x in r.stdout.splitlines()] == ["Some words here.\n"]
    assert "1 chunk of 2 documents, 1 of them blank (no chunk)" in r.stderr
    assert winsample.chunk(" \n\t ") == []


def test_on_bad_input_skip_leaves_out_a_bad_record_and_a_bad_file_and_lists_them(tmp_path):
    """New-user trial: one pretty-printed .json.gz in /usr/share/doc stopped the whole folder, and
    chunk had no --on-bad-input."""
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.jsonl").write_text('{"text": "ok one"}\nnot json\n{"text": "ok two"}\n', encoding="utf-8")
    (folder / "b.txt").write_bytes(b"caf\xe9 undecodable\n")
    (folder / "c.txt").write_text("good text\n", encoding="utf-8")
    out = tmp_path / "c.jsonl"
    r = CliRunner().invoke(main, ["chunk", str(folder), "-o", str(out), "-T", "16", "--on-bad-input", "skip", "-q", "--json"])
    assert r.exit_code == 0, r.stderr
    assert [json.loads(x)["text"] for x in out.read_text().splitlines()] == ["ok one", "ok two", "good text\n"]
    doc = json.loads(r.stdout)
    assert (doc["skipped_inputs"], doc["skipped_records"]) == (1, 1)
    assert [(b["input"], b["line"]) for b in doc["bad_inputs"]] == [(str(folder / "a.jsonl"), 2), (str(folder / "b.txt"), 1)]
    assert r.stderr.splitlines()[0].startswith("warning: bad input skipped (--on-bad-input skip): 1 file and 1 record")
    r = CliRunner().invoke(main, ["chunk", str(folder), "-o", str(tmp_path / "f.jsonl"), "-T", "16"])  # fail: the default
    assert r.exit_code == 1 and "a.jsonl:2: not valid JSON" in r.stderr and not (tmp_path / "f.jsonl").exists()


def test_on_bad_input_skip_leaves_out_a_bad_text_file_longer_than_one_read(tmp_path):
    """Review: a bad text file over 1 MiB (one read) was left in part, and closing it then took the
    unread rest for a change to the file: "the file changed while it was being read", exit 1."""
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.txt").write_bytes(b"caf\xe9 bad\n" + b"hello world\n" * 200_000)  # 2.4 MB
    (folder / "b.txt").write_text("good text\n", encoding="utf-8")
    out = tmp_path / "c.jsonl"
    r = CliRunner().invoke(main, ["chunk", str(folder), "-o", str(out), "--on-bad-input", "skip", "-q", "--json"])
    assert r.exit_code == 0, r.stderr
    assert [json.loads(x)["text"] for x in out.read_text().splitlines()] == ["good text\n"]
    assert [(b["input"], b["line"]) for b in json.loads(r.stdout)["bad_inputs"]] == [(str(folder / "a.txt"), 1)]


def test_an_earlier_runs_chunks_inside_the_folder_chunked_are_left_out_and_replaced(tmp_path):
    """New-user trial: `chunk docs/ -o docs/chunks.jsonl` ran once; the second time the folder walk
    took the first run's chunks.jsonl for an input and refused to write over it."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("Some words here.\n", encoding="utf-8")
    out = docs / "chunks.jsonl"
    for _ in range(2):
        r = CliRunner().invoke(main, ["chunk", str(docs), "-o", str(out), "-T", "16"])
        assert r.exit_code == 0, r.stderr
    assert f"note: {out}: the output of this run, left out of the folder's inputs" in r.stderr
    assert [json.loads(x)["text"] for x in out.read_text().splitlines()] == ["Some words here.\n"]
    r = CliRunner().invoke(main, ["chunk", str(out), "-o", str(out), "-T", "16"])  # named as its own input: refused
    assert r.exit_code == 2 and "is an input of this command" in r.stderr
    r = CliRunner().invoke(main, ["chunk", str(docs), "-o", ""])
    assert r.exit_code == 2 and "-o is empty" in r.stderr


@pytest.mark.parametrize("what", ["data of the user's", "a hard link to an earlier output"])
def test_a_file_inside_the_folder_chunked_that_is_no_earlier_output_is_refused_as_the_output(tmp_path, what):
    """Review: any regular file inside the folder, named as -o, was left out of the inputs and
    written over: a notes.jsonl of the user's was lost. Only this command's own earlier output (its
    first line a chunk, one name) is replaced; anything else is refused, exit 2, and kept."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("Some words here.\n", encoding="utf-8")
    out = docs / "notes.jsonl"
    if what == "data of the user's":
        out.write_text('{"text": "my precious data"}\n', encoding="utf-8")
    else:
        assert CliRunner().invoke(main, ["chunk", str(docs / "a.txt"), "-o", str(out)]).exit_code == 0
        os.link(out, tmp_path / "elsewhere.jsonl")
    before = out.read_bytes()
    r = CliRunner().invoke(main, ["chunk", str(docs), "-o", str(out), "-T", "16"])
    assert r.exit_code == 2 and "is an input of this command" in r.stderr and r.stdout == ""
    assert out.read_bytes() == before


def test_the_chunk_command_runs_as_a_program(tmp_path):
    kb, _ = write_kb(tmp_path)
    p = subprocess.run([sys.executable, "-m", "winsample", "chunk", str(kb), "-o", "-", "-T", "128", "-q"],
                       capture_output=True, text=True, check=True)
    assert p.stderr == "" and all(json.loads(x)["tokens"] <= 128 for x in p.stdout.splitlines())


# --- windows --format jsonl --decode: character offsets and neighbours ------------------------------


@pytest.mark.parametrize("extra", [["--boundaries", "doc"], ["--boundaries", "sentence"], ["--boundaries", "doc", "--shuffle", "--seed", "3"]])
def test_decoded_rows_carry_their_character_range_and_neighbours(tmp_path, ref_gpt2, extra):
    kb, recs = write_kb(tmp_path)
    data = tmp_path / "d"
    r = CliRunner().invoke(main, ["encode", str(kb), "-o", str(data), "--val-fraction", "0", "-q"])
    assert r.exit_code == 0, r.stderr
    r = CliRunner().invoke(main, ["windows", str(data / "train.bin"), "-T", "24", "--format", "jsonl", "--decode",
                                  "-o", "-", "-q", *extra])
    assert r.exit_code == 0, r.stderr
    rows = [json.loads(x) for x in r.stdout.splitlines()]
    tokens = np.fromfile(data / "train.bin", np.uint16).tolist()
    starts = {row["doc"]: row["start"] - row["doc_offset"] for row in rows}
    for i, row in enumerate(rows):
        assert row["window"] == i
        text = recs[row["source"]["line"] - 1]["text"]
        ds, s, e = starts[row["doc"]], row["start"], row["start"] + row["length"]
        before = ref_gpt2.decode_bytes(tokens[ds:s])  # the document's bytes before the window: its lead bytes are characters
        lead = sum(1 for b in before if b & 0xC0 != 0x80)
        body = ref_gpt2.decode_bytes([t for t in tokens[s:e] if t != 50256])
        first_cont = bool(body) and body[0] & 0xC0 == 0x80
        assert row["char_start"] == lead - first_cont
        assert row["char_end"] == lead + sum(1 for b in body if b & 0xC0 != 0x80)
        piece = text[row["char_start"] : row["char_end"]]
        if not row["split_char"]:
            assert piece == row["text"].replace("<|endoftext|>", "")
        else:
            assert body.decode("utf-8", "ignore") in piece
    for i, row in enumerate(rows):  # neighbours: the same document's windows by start
        same = sorted((x["start"], j) for j, x in enumerate(rows) if x["doc"] == row["doc"])
        k = same.index((row["start"], i))
        assert row["prev"] == (same[k - 1][1] if k else None)
        assert row["next"] == (same[k + 1][1] if k + 1 < len(same) else None)


def test_the_same_windows_from_chunk_and_from_windows_rows_have_the_same_character_ranges(tmp_path):
    """windows --no-targets --boundaries sentence over records encoded without EOT plans each record
    as the chunker does (span T, stride T − overlap): where both cut the same tokens, the JSONL rows
    and the API give the same characters."""
    kb, recs = write_kb(tmp_path)
    data = tmp_path / "d"
    assert CliRunner().invoke(main, ["encode", str(kb), "-o", str(data), "--val-fraction", "0", "--no-eot", "-q"]).exit_code == 0
    r = CliRunner().invoke(main, ["windows", str(data / "train.bin"), "-T", "32", "--no-targets", "--stride", "28",
                                  "--boundaries", "sentence", "--format", "jsonl", "--decode", "-o", "-", "-q"])
    assert r.exit_code == 0, r.stderr
    rows = {(x["source"]["line"], x["doc_offset"], x["length"]): (x["char_start"], x["char_end"])
            for x in map(json.loads, r.stdout.splitlines())}
    chunks = list(winsample.chunk_records([r["text"] for r in recs], T=32, overlap=4, boundaries="sentence"))
    same = [c for c in chunks if (c.source["record"] + 1, c.token_start, c.token_end - c.token_start) in rows]
    for c in same:
        assert rows[c.source["record"] + 1, c.token_start, c.token_end - c.token_start] == (c.char_start, c.char_end)
    assert len(same) >= 0.8 * len(chunks) and {c.source["record"] for c in same} == set(range(len(recs)))


def test_invalid_utf8_fails_naming_the_byte_or_is_replaced_with_errors_replace(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"good words \xff and more words\n")
    r = CliRunner().invoke(main, ["chunk", str(bad), "-o", str(tmp_path / "c.jsonl")])
    assert r.exit_code == 1 and r.stderr.count("\n") == 1 and "invalid UTF-8 at byte 11" in r.stderr and "--errors replace" in r.stderr
    assert not (tmp_path / "c.jsonl").exists()
    r = CliRunner().invoke(main, ["chunk", str(bad), "-o", "-", "--errors", "replace", "-q"])
    (row,) = [json.loads(x) for x in r.stdout.splitlines()]
    assert r.exit_code == 0 and row["text"] == "good words \ufffd and more words\n" and row["char_end"] == len(row["text"])


def test_a_record_holding_a_lone_surrogate_is_written_with_json_escapes(tmp_path):
    """A JSONL record may escape a lone surrogate ("\\ud800"): it has no UTF-8, so its chunk's line
    is written with JSON's \\u escapes and reads back to the same text (it was an internal error)."""
    kb = tmp_path / "s.jsonl"
    kb.write_text('{"text": "\\ud800 lone and more words"}\n', encoding="utf-8")
    r = CliRunner().invoke(main, ["chunk", str(kb), "-T", "8", "--overlap", "0", "-o", str(tmp_path / "c.jsonl")])
    assert r.exit_code == 0, r.stderr
    rows = [json.loads(x) for x in (tmp_path / "c.jsonl").read_text(encoding="ascii").splitlines()]
    text = "\ud800 lone and more words"
    assert rows[0]["text"].startswith("\ud800") and "".join(x["text"] for x in rows) == text
    assert all(text[x["char_start"] : x["char_end"]] == x["text"] for x in rows)


def test_rows_of_a_bare_token_file_are_placed_in_their_own_documents(tmp_path, ref_gpt2):
    """Without provenance (a bare .bin) and without --boundaries doc, the documents are still the
    file's own, by EOT: a window across an EOT has no character range, prev/next stay in a document."""
    docs = ["Hello there, first doc.", "Second doc here, a little longer than the first one."]
    ids = [i for d in docs for i in ref_gpt2.encode_ordinary(d) + [50256]]
    np.array(ids, "<u2").tofile(tmp_path / "train.bin")
    r = CliRunner().invoke(main, ["windows", str(tmp_path / "train.bin"), "-T", "5", "--stride", "3", "--format", "jsonl",
                                  "--decode", "-o", "-", "-q"])
    assert r.exit_code == 0, r.stderr
    rows = [json.loads(x) for x in r.stdout.splitlines()]
    first = len(ref_gpt2.encode_ordinary(docs[0])) + 1  # doc 1 starts after doc 0's EOT
    for row in rows:
        s, e = row["start"], row["start"] + row["length"]
        d = 0 if s < first else 1
        ds, de = (0, first) if d == 0 else (first, len(ids))
        if e > de:
            assert row["char_start"] is None and row["char_end"] is None
        else:
            before = ref_gpt2.decode_bytes(ids[ds:s]).decode("utf-8")
            assert row["char_start"] == len(before)
            assert docs[d][row["char_start"] : row["char_end"]] == row["text"].replace("<|endoftext|>", "")
    same = [[i for i, row in enumerate(rows) if (0 if row["start"] < first else 1) == d] for d in (0, 1)]
    for group in same:
        for k, i in enumerate(group):
            assert rows[i]["prev"] == (group[k - 1] if k else None) and rows[i]["next"] == (group[k + 1] if k + 1 < len(group) else None)
    assert any(row["char_start"] is None for row in rows) and any(row["char_start"] is not None for row in rows)


def test_chunks_never_overwrite_a_file_of_a_data_folder(tmp_path):
    src = tmp_path / "a.txt"
    src.write_text(SAMPLES["hamlet"], encoding="utf-8")
    assert CliRunner().invoke(main, ["encode", str(src), "-o", str(tmp_path / "d"), "--split", "tail", "-q"]).exit_code == 0
    for name in ("train.bin", "meta.json", "train.prov.npy", "val.docs.npy"):
        before = (tmp_path / "d" / name).read_bytes()
        r = CliRunner().invoke(main, ["chunk", str(src), "-o", str(tmp_path / "d" / name)])
        assert r.exit_code == 2 and "would destroy it" in r.stderr and (tmp_path / "d" / name).read_bytes() == before
    assert CliRunner().invoke(main, ["chunk", str(src), "-o", str(tmp_path / "d" / "chunks.jsonl"), "-q"]).exit_code == 0


def test_chunk_of_stdin_redirected_from_the_output_file_is_refused_and_the_file_kept(tmp_path):
    # `winsample chunk - -o notes.txt < notes.txt`: standard input is that file, an input like any other
    notes = tmp_path / "notes.txt"
    notes.write_text("the text a user keeps\n" * 50)
    before = notes.read_bytes()
    with open(notes, "rb") as stdin:
        p = subprocess.run([sys.executable, "-m", "winsample", "chunk", "-", "-T", "8", "-o", str(notes)], stdin=stdin,
                           capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.strip() == (f"error: {notes}: is an input of this command or a file of the dataset it reads (the same"
                                " file as standard input); writing it would destroy it: pick another output path")
    assert notes.read_bytes() == before and sorted(q.name for q in tmp_path.iterdir()) == ["notes.txt"]


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_chunk_to_a_full_stdout_is_one_line_exit_2(tmp_path):
    doc = tmp_path / "a.txt"
    doc.write_text("words and more words\n" * 2000)
    with open("/dev/full", "w") as full:
        p = subprocess.run([sys.executable, "-m", "winsample", "chunk", str(doc), "-T", "8", "-o", "-", "-q"], stdout=full,
                           stderr=subprocess.PIPE, text=True, timeout=120)
    assert p.returncode == 2
    assert p.stderr == "error: standard output: cannot write: no space left on the device; free some space and run again\n"


def test_offsets_count_the_text_after_a_byte_order_mark_and_a_folders_other_files_are_named(tmp_path):
    """A new user's trial: a file that starts with a UTF-8 BOM had offsets one character off from
    open(encoding="utf-8"), undocumented (the guide now reads with utf-8-sig, as the offsets
    count); and a .py file in the folder was left out without a word, where encode warns."""
    folder = tmp_path / "kb"
    folder.mkdir()
    body = "Hello world. " * 50
    (folder / "bom.txt").write_text(body, encoding="utf-8-sig")
    (folder / "src.py").write_text("print('left out')\n", encoding="utf-8")
    out = tmp_path / "c.jsonl"
    r = CliRunner().invoke(main, ["chunk", str(folder), "-o", str(out), "-T", "32", "-q"])
    assert r.exit_code == 0 and r.stdout == ""
    assert r.stderr.startswith("warning: 1 file(s) not read (1 .py):") and r.stderr.count("\n") == 1
    text = (folder / "bom.txt").read_text(encoding="utf-8-sig")
    assert text == body and not text.startswith("\ufeff")
    rows = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert len(rows) > 3 and all(text[c["char_start"] : c["char_end"]] == c["text"] for c in rows)
    r = CliRunner().invoke(main, ["chunk", str(folder), "-o", str(out), "-T", "32", "--json"])
    assert json.loads(r.stdout)["not_read"] == {".py": 1}


def test_a_million_space_run_the_tokenizer_cannot_take_is_bad_input_that_skip_leaves_out(tmp_path):
    """Adversarial trial: 'Hello.' + 1,100,000 spaces gave "internal error: ValueError: Regex error
    while tokenizing" (tiktoken's own backtracking limit), even with --on-bad-input skip."""
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.txt").write_text("Hello." + " " * 1_100_000 + "x\n", encoding="utf-8")
    (folder / "b.txt").write_text("fine text here\n", encoding="utf-8")
    r = CliRunner().invoke(main, ["chunk", str(folder), "-T", "64", "-o", str(tmp_path / "c.jsonl")])
    assert (r.exit_code, r.stdout) == (1, "") and r.stderr.count("\n") == 1 and not (tmp_path / "c.jsonl").exists()
    assert r.stderr.startswith(f"error: {folder / 'a.txt'}:1: the tokenizer cannot encode this text whole (")
    r = CliRunner().invoke(main, ["chunk", str(folder), "-T", "64", "-o", str(tmp_path / "c.jsonl"), "--on-bad-input", "skip",
                                  "-q", "--json"])
    assert r.exit_code == 0 and json.loads(r.stdout)["skipped_inputs"] == 1
    assert [json.loads(x)["text"] for x in (tmp_path / "c.jsonl").read_text().splitlines()] == ["fine text here\n"]


def test_a_folder_named_like_the_encoding_where_chunk_runs_is_not_taken_for_a_tokenizer(tmp_path, monkeypatch, ref_gpt2):
    """Adversarial trial: with a folder called gpt2 in the working folder, `chunk` (--encoding gpt2,
    the default) and winsample.chunk(text) read it as a tokenizer folder and stopped."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "gpt2").mkdir()
    (tmp_path / "a.txt").write_text("a b c\n", encoding="utf-8")
    r = CliRunner().invoke(main, ["chunk", "a.txt", "-T", "8", "-o", "-", "-q"])
    assert r.exit_code == 0 and json.loads(r.stdout)["tokens"] == len(ref_gpt2.encode_ordinary("a b c\n"))
    assert [c.tokens for c in winsample.chunk("a b c\n", "gpt2", T=8)] == [len(ref_gpt2.encode_ordinary("a b c\n"))]


def test_chunk_records_refuses_a_repeated_id_before_its_chunks_as_the_command_does(ref_gpt2):
    """Adversarial trial: chunk_records gave "a#0" twice for two records of id "a", "1#0" for 1 and
    "1", and "0#0" for an unnamed first record and a record named "0"; and iterated a str by characters."""
    for recs in ([("a", "x"), ("a", "y")], [(1, "x"), ("1", "y")], ["first", ("0", "second")]):
        got = []
        with pytest.raises(winsample.errors.DataError, match="^record 1: its id '.*' is the one record 0 has"):
            got.extend(c.id for c in winsample.chunk_records(recs, T=8))
        assert len(got) == 1  # the first record's chunk, none of the second's
    with pytest.raises(winsample.errors.ConfigError, match="an iterable of records"):
        list(winsample.chunk_records("abc", T=8))
    assert [c.id for c in winsample.chunk_records(["x", ("b", "y"), {"text": "z", "id": 7}], T=8)] == ["0#0", "b#0", "7#0"]


def test_a_signal_while_chunks_stream_to_stdout_says_they_are_there_not_that_nothing_was_written(tmp_path):
    """Adversarial trial: SIGTERM 25 s into `chunk big.txt -o - > out` said "nothing was written"
    beside 316,794 chunk lines already in out."""
    import signal

    big = tmp_path / "big.txt"
    big.write_text(CORPUS.joinpath("hamlet.txt").read_text("utf-8") * 30, encoding="utf-8")
    p = subprocess.Popen([sys.executable, "-m", "winsample", "chunk", str(big), "-T", "8", "-o", "-"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = p.stdout.readline()  # chunks are on stdout: now the signal
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=120)
    assert json.loads(first)["id"] == f"{big}:1#0"
    if p.returncode == 0:  # it ended first (a fast machine): nothing to say
        return
    assert p.returncode == 143 and err == "error: interrupted by SIGTERM; the chunks printed before it are on standard output\n"


def test_a_compressed_output_name_is_a_usage_error_not_plain_json_under_a_gz_name(tmp_path):
    """Adversarial trial: -o c.jsonl.gz wrote plain JSONL, which chunk then could not read back ("not gzip data")."""
    (tmp_path / "a.txt").write_text("some text\n", encoding="utf-8")
    for name in ("c.jsonl.gz", "c.jsonl.zst"):
        r = CliRunner().invoke(main, ["chunk", str(tmp_path / "a.txt"), "-o", str(tmp_path / name)])
        assert r.exit_code == 2 and "chunk writes plain JSONL, not compressed" in r.stderr and not (tmp_path / name).exists()
