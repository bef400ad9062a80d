"""Paragraph/sentence edges from token bytes, checked against string search on the decoded text."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from winsample import disk, formats
from winsample.cli import main
from winsample.planning import boundaries as B
from winsample.tokenizer import load

from ..conftest import CORPUS

EOT = 50256
WS = b" \t\n\r\x0b\x0c"
TERM = rb"(?:[.!?]|\xe3\x80\x82|\xef\xbc\x81|\xef\xbc\x9f)"

pytestmark = pytest.mark.usefixtures("kernels")  # every test on the C kernels and on numpy


@pytest.fixture(scope="module")
def enc():
    return load("gpt2")


def oracle_edges(ids, ref, kind):
    """Edges by string search on the decoded bytes, mapped to tokens by cumulative byte lengths."""
    pieces = [ref.decode_single_token_bytes(int(i)) for i in ids]
    cum = np.cumsum([0] + [len(p) for p in pieces])
    data = b"".join(pieces)
    # byte offsets right after a blank line: "\n\n", or "\n\r\n" (CRLF "\r\n\r\n"); overlapping
    ends = {m.start() + len(m.group(1)) for m in re.finditer(rb"(?=(\n\r?\n))", data)}
    if kind == "sentence":
        ends |= {m.end() for m in re.finditer(rb"\xe3\x80\x82|\xef\xbc\x81|\xef\xbc\x9f", data)}
        ends |= {m.end() for m in re.finditer(rb"[.!?](?=[ \t\n\r\x0b\x0c])", data)}
    edges = {b for b in range(1, len(ids)) if cum[b] in ends}
    if kind == "sentence":  # a terminal and its whitespace inside one token (".\n")
        for b in range(1, len(ids)):
            piece = pieces[b - 1]
            if piece.strip(WS) and re.search(TERM + rb"[ \t\n\r\x0b\x0c]+\Z", data[: cum[b]]):
                edges.add(b)
    return sorted(edges)


def test_blank_line_as_two_tokens_198_198(enc, ref_gpt2):
    ids = ref_gpt2.encode_ordinary("a\n\nb")
    assert ids == [64, 198, 198, 65]
    assert B.find_boundaries(np.array(ids, "<u2"), "paragraph", enc).tolist() == [3]


def test_blank_line_as_one_token_628(enc, ref_gpt2):
    ids = ref_gpt2.encode_ordinary("Hello.\n\n World")
    assert ids[2] == 628  # the space glued to the next word leaves "\n\n" whole
    assert B.find_boundaries(np.array(ids, "<u2"), "paragraph", enc).tolist() == [3]


def test_longer_newline_runs_mix_628_and_198(enc, ref_gpt2):
    ids = ref_gpt2.encode_ordinary("a\n\n\n\nb")
    assert ids == [64, 628, 198, 198, 65]
    # after "\n\n", "\n\n\n" and "\n\n\n\n" the text ends with a blank line
    assert B.find_boundaries(np.array(ids, "<u2"), "paragraph", enc).tolist() == [2, 3, 4]


def test_single_newline_is_not_a_paragraph_edge(enc, ref_gpt2):
    ids = ref_gpt2.encode_ordinary("one\ntwo\nthree")
    assert B.find_boundaries(np.array(ids, "<u2"), "paragraph", enc).tolist() == []


def test_cjk_full_stop_split_across_byte_tokens(enc, ref_gpt2):
    hao = ref_gpt2.encode_ordinary("好")
    stop = [ref_gpt2.encode_single_token(bytes([c])) for c in "。".encode()]  # E3, 80, 82 as three tokens
    ids = hao + stop + hao
    edges = B.find_boundaries(np.array(ids, "<u2"), "sentence", enc).tolist()
    assert edges == [len(hao) + 3]  # after the token holding the last byte, never inside the character
    # and split at a chunk edge in the middle of the character
    assert B.find_boundaries(np.array(ids, "<u2"), "sentence", enc, chunk_tokens=len(hao) + 1).tolist() == edges


def test_ascii_terminal_needs_whitespace_after(enc, ref_gpt2):
    ids = ref_gpt2.encode_ordinary("Pi is 3.14 roughly. Yes")
    edges = B.find_boundaries(np.array(ids, "<u2"), "sentence", enc).tolist()
    text_before = [ref_gpt2.decode(ids[:b]) for b in edges]
    assert text_before == ["Pi is 3.14 roughly."]


def test_terminal_and_newline_in_one_token(enc, ref_gpt2):
    ids = ref_gpt2.encode_ordinary("Stop.\nGo")
    got = B.find_boundaries(np.array(ids, "<u2"), "sentence", enc).tolist()
    assert got == oracle_edges(ids, ref_gpt2, "sentence") and got


@pytest.fixture(scope="module")
def corpus_ids(ref_gpt2):
    text = (CORPUS / "hamlet.txt").read_text()[:40000] + (CORPUS / "zh_sliding_windows.txt").read_text()
    return np.array(ref_gpt2.encode_ordinary(text), "<u2")


@pytest.mark.parametrize("kind", B.KINDS)
def test_edges_match_string_search_on_real_text_across_chunks(enc, ref_gpt2, corpus_ids, kind):
    expected = oracle_edges(corpus_ids, ref_gpt2, kind)
    assert len(expected) > 50
    for chunk in (B.CHUNK_TOKENS, 1000, 7):
        assert B.find_boundaries(corpus_ids, kind, enc, chunk_tokens=chunk).tolist() == expected


def brute_edges(ids, enc, kind):
    """The module doc's definition applied literally, cut by cut, to the bytes before and after it."""
    pieces = [enc.decode_single_token_bytes(int(i)) for i in ids]
    data = b"".join(pieces)
    cum = np.cumsum([0] + [len(p) for p in pieces])
    cjk = tuple(c.encode() for c in "。！？")
    out = []
    for b in range(1, len(ids)):
        s, r, last = data[: cum[b]], data[cum[b] :], pieces[b - 1]
        edge = s.endswith((b"\n\n", b"\n\r\n"))  # a blank line, LF or CRLF
        if kind == "sentence" and not edge:
            core = s.rstrip(WS)
            edge = (s.endswith(cjk) or (s[-1:] in (b".", b"!", b"?") and r[:1] != b"" and r[:1] in WS)
                    or (last.strip(WS) != b"" and core != s and core.endswith((b".", b"!", b"?", *cjk))))
        if edge:
            out.append(b)
    return out


def crlf(text):
    return text.replace("\r\n", "\n").replace("\n", "\r\n")


def test_crlf_blank_line_201_198_201_198(enc, ref_gpt2):
    ids = ref_gpt2.encode_ordinary("a\r\n\r\nb")
    assert ids == [64, 201, 198, 201, 198, 65]  # 201 is b"\r", the only GPT-2 token holding one
    for kind in B.KINDS:
        for chunk in range(1, 7):  # the look-behind (201, 198 before the last 198) cut at every place
            assert B.find_boundaries(np.array(ids, "<u2"), kind, enc, chunk_tokens=chunk).tolist() == [5]


def test_crlf_runs_of_blank_lines_give_an_edge_after_each(enc, ref_gpt2):
    ids = ref_gpt2.encode_ordinary("a\r\n\r\n\r\n\r\nb")
    assert ids == [64] + [201, 198] * 4 + [65]
    # after "\r\n\r\n", "\r\n\r\n\r\n", "\r\n\r\n\r\n\r\n"; a single "\r\n" is no blank line
    assert B.find_boundaries(np.array(ids, "<u2"), "paragraph", enc).tolist() == [5, 7, 9]


def test_lf_then_crlf_blank_line_counts_but_lone_cr_does_not(enc, ref_gpt2):
    mixed = ref_gpt2.encode_ordinary("a\n\r\nb")
    assert mixed == [64, 198, 201, 198, 65]
    assert B.find_boundaries(np.array(mixed, "<u2"), "paragraph", enc).tolist() == [4]
    for text in ("a\r\rb", "a\n\rb", "a\r\n\rb", "a\n\r\rb", "a\r\r\nb", "one\r\ntwo\r\nthree"):
        assert B.find_boundaries(np.array(ref_gpt2.encode_ordinary(text), "<u2"), "paragraph", enc).tolist() == []


@pytest.mark.parametrize("kind", B.KINDS)
def test_lf_cr_lf_split_across_a_chunk_edge_at_every_offset(enc, kind):
    for pre in range(0, 6):
        ids = [64] * pre + [13, 198, 201, 198] + [65] * 3  # "." "\n" "\r" "\n"
        edge = pre + 4  # right after the last "\n"
        want = [edge] if kind == "paragraph" else sorted({pre + 1, edge} - {0})  # "." then "\n": a sentence end
        for chunk in range(1, len(ids) + 1):
            got = B.find_boundaries(np.array(ids, "<u2"), kind, enc, chunk_tokens=chunk, threads=2).tolist()
            assert got == want, (pre, chunk)


@pytest.fixture(scope="module")
def crlf_corpus_ids(ref_gpt2):
    text = (CORPUS / "hamlet.txt").read_text()[:40000] + (CORPUS / "zh_sliding_windows.txt").read_text()
    return np.array(ref_gpt2.encode_ordinary(crlf(text)), "<u2")


@pytest.mark.parametrize("kind", B.KINDS)
def test_crlf_edges_match_string_search_on_real_text_across_chunks(enc, ref_gpt2, crlf_corpus_ids, kind):
    data = ref_gpt2.decode_bytes(crlf_corpus_ids.tolist())
    assert b"\n\n" not in data and data.count(b"\r\n\r\n") > 50  # every blank line is a CRLF one
    expected = oracle_edges(crlf_corpus_ids, ref_gpt2, kind)
    assert len(expected) > 50
    for chunk in (B.CHUNK_TOKENS, 1000, 7, 2):
        assert B.find_boundaries(crlf_corpus_ids, kind, enc, chunk_tokens=chunk).tolist() == expected


def test_crlf_paragraph_edges_are_the_lf_ones_in_text_terms(enc, ref_gpt2):
    """Same text, LF or CRLF: the text before each paragraph edge is the same, newlines aside."""
    text = (CORPUS / "hamlet.txt").read_text()[:20000]
    lf = ref_gpt2.encode_ordinary(text)
    cr = ref_gpt2.encode_ordinary(crlf(text))
    def before(ids, edges):
        return {ref_gpt2.decode(ids[:b]).replace("\r\n", "\n") for b in edges}

    e_lf = before(lf, B.find_boundaries(np.array(lf, "<u2"), "paragraph", enc).tolist())
    e_cr = before(cr, B.find_boundaries(np.array(cr, "<u2"), "paragraph", enc).tolist())
    # LF text can hide a cut inside one "\n\n" token (628); CRLF text has every one of them
    assert len(e_lf) > 50 and e_lf <= e_cr


PIECES = ["a", "b", "Hi", " ", ".", "!", "?", "\n", "\r", "\r\n", "\n\n", "。", "好", "\t", ". ", ".\r\n"]


@pytest.mark.parametrize("kind", B.KINDS)
@settings(max_examples=80, deadline=None)
@given(parts=st.lists(st.sampled_from(PIECES), max_size=60), chunk=st.integers(1, 12))
def test_random_text_edges_match_the_byte_level_definition(ref_gpt2, kind, parts, chunk):
    enc = load("gpt2")
    ids = ref_gpt2.encode_ordinary("".join(parts))
    arr = np.array(ids, "<u2")
    assert B.find_boundaries(arr, kind, enc, chunk_tokens=chunk, threads=2).tolist() == brute_edges(ids, ref_gpt2, kind)


# GPT-2 ids "a" "." " " "\n" "\n\n" "\r", and runs of them (hypothesis rarely strings three
# chosen ids together by itself); 159 222 224 are the three bytes of "。" as single-byte tokens
GPT2_RUNS = [[64], [13], [220], [198], [628], [201], [159], [222], [224], [201, 198], [198, 201, 198],
             [13, 201, 198], [159, 222, 224]]


@pytest.mark.parametrize("kind", B.KINDS)
@settings(max_examples=80, deadline=None)
@given(runs=st.lists(st.sampled_from(GPT2_RUNS), max_size=40), chunk=st.integers(1, 12))
def test_random_token_layouts_match_the_byte_level_definition(ref_gpt2, kind, runs, chunk):
    enc = load("gpt2")
    ids = [i for r in runs for i in r]
    arr = np.array(ids, "<u2")
    assert B.find_boundaries(arr, kind, enc, chunk_tokens=chunk, threads=2).tolist() == brute_edges(ids, ref_gpt2, kind)


def test_windows_on_crlf_paragraphs_end_on_blank_lines(tmp_path, ref_gpt2):
    """The reported case: 12 CRLF paragraphs, `windows -T 64 --boundaries paragraph --format jsonl --decode`."""
    paras = [f"Paragraph {i} says something. " + "It goes on for a while, clause after clause. " * (1 + i % 3)
             for i in range(12)]
    (tmp_path / "in.txt").write_bytes("\r\n\r\n".join(paras).encode() + b"\r\n")
    r = CliRunner().invoke(main, ["encode", str(tmp_path / "in.txt"), "-o", str(tmp_path / "d"), "--val-fraction", "0",
                                  "--workers", "1", "-q"])
    assert r.exit_code == 0, r.stderr
    r = CliRunner().invoke(main, ["windows", str(tmp_path / "d" / "train.bin"), "-T", "64", "--boundaries", "paragraph",
                                  "--format", "jsonl", "--decode", "-o", "-", "-q"])
    assert r.exit_code == 0, r.stderr
    texts = [json.loads(line)["text"] for line in r.stdout.splitlines()]
    assert len(texts) > 3
    for t in texts[:-1]:  # every paragraph fits in 65 tokens, so no window is cut mid-paragraph
        assert t.endswith("\r\n\r\n"), t


def test_doc_starts_from_eot():
    toks = np.array([5, EOT, 6, 7, EOT, EOT, 8], "<u2")
    assert B.doc_starts_from_eot(toks, EOT).tolist() == [0, 2, 5, 6]


def _write_data(tmp_path, ref, texts):
    ids = []
    starts = []
    for t in texts:
        starts.append(len(ids))
        ids += ref.encode_ordinary(t) + [EOT]
    arr = np.array(ids, "<u2")
    arr.tofile(tmp_path / "train.bin")
    formats.write_doc_index(tmp_path / "train.docs.npy", np.array(starts))
    meta = {"format": "winsample", "version": 1, "dtype": "<u2",
            "tokenizer": {"name": "gpt2", "n_vocab": 50257, "eot": EOT},
            "splits": {"train": {"file": "train.bin", "doc_index": "train.docs.npy", "tokens": len(ids),
                                 "bytes": 2 * len(ids), "documents": len(texts), "checksum": disk.checksum_file(tmp_path / "train.bin")}}}
    formats.write_meta(tmp_path / "meta.json", meta)
    return arr, starts


@pytest.mark.parametrize(("kind", "T", "stride"), [("paragraph", 255, 128), ("sentence", 63, 32), ("sentence", 40, 41)])
def test_semantic_windows_on_real_text_end_and_start_on_edges(tmp_path, ref_gpt2, kind, T, stride):
    texts = [(CORPUS / "sonnets.txt").read_text()[:15000], (CORPUS / "zh_sliding_windows.txt").read_text(),
             (CORPUS / "macbeth.txt").read_text()[:12000]]
    arr, starts = _write_data(tmp_path, ref_gpt2, texts)
    r = CliRunner().invoke(main, ["windows", str(tmp_path / "train.bin"), "-T", str(T), "--stride", str(stride),
                                  "--boundaries", kind, "-o", str(tmp_path / "p.npy"), "-q"])
    assert r.exit_code == 0, r.stderr
    rows, side = formats.read_plan(tmp_path / "p.npy")
    span = T + 1
    assert side["stats"]["coverage"] == 1.0 and (rows["length"] <= span).all()
    ends_doc = starts[1:] + [len(arr)]
    on_edge = hard = 0
    for d, (ds, de) in enumerate(zip(starts, ends_doc)):
        # edges found independently: string search on this document's decoded text
        E = set(b + ds for b in oracle_edges(arr[ds:de], ref_gpt2, kind)) | {ds, de}
        r_ = rows[rows["doc"] == d]
        assert r_["start"][0] == ds and r_["start"][-1] + r_["length"][-1] == de
        pe = ds
        for i in range(len(r_) - 1):
            s, e = int(r_["start"][i]), int(r_["start"][i] + r_["length"][i])
            allowed_end = [x for x in E if max(pe, s + 1) < x <= s + span]  # targets: >= 2 tokens
            if allowed_end:
                assert e == max(allowed_end)  # the last edge that fits
                on_edge += 1
            else:
                assert e == s + span
                hard += 1
            nb = min(x for x in E if x > e)
            allowed = [x for x in E if max(s + 1, nb - span) <= x <= e - 1]  # targets: e's token is a y
            ns = int(r_["start"][i + 1])
            assert (ns in allowed) if allowed else True
            assert s < ns <= e - 1  # overlap >= 1: no token skipped as a label
            pe = e
    assert on_edge > hard
