"""The streaming semantic planner and edge finder give exactly what the whole-file versions give."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from winsample import planning as W
from winsample.errors import DataError
from winsample.planning import boundaries as B
from winsample.tokenizer import Tokenizer, load

from ..conftest import CORPUS
from .test_boundaries import brute_edges, oracle_edges

pytestmark = pytest.mark.usefixtures("kernels")  # every test on the C kernels and on numpy


def reference_plan_semantic(doc_starts, doc_ends, edges, span, stride, offset=0, short="keep", targets=True):
    """The original whole-file planner (all edges of the file in one sorted array), kept as the oracle.

    With ``targets`` (ov = 1) a window needs 2 tokens and the next start is at most e - 1."""
    ov = int(targets)
    ds = np.asarray(doc_starts, np.int64)
    de = np.asarray(doc_ends, np.int64)
    E = np.unique(np.concatenate([np.asarray(edges, np.int64), ds, de]))
    L = de - ds
    O = np.minimum(offset, np.maximum(L - span, 0))
    s = E[np.searchsorted(E, ds + O, "right") - 1]
    pe = ds.copy()
    active = np.flatnonzero(L > 0)
    out_s, out_l, out_d = [], [], []
    small = L[active] <= span
    keep = active[small & ((L[active] == span) | (short == "keep")) & (L[active] > ov)]
    out_s.append(ds[keep]); out_l.append(L[keep]); out_d.append(keep)
    active = active[~small]
    while len(active):
        a = active
        sa, pa, ea = s[a], pe[a], de[a]
        last = ea - sa <= span
        out_s.append(sa[last]); out_l.append(ea[last] - sa[last]); out_d.append(a[last])
        a, sa, pa = a[~last], sa[~last], pa[~last]
        if not len(a):
            break
        lim = sa + span
        e = E[np.searchsorted(E, lim, "right") - 1]
        e = np.where((e <= sa + ov) | (e <= pa), lim, e)
        out_s.append(sa); out_l.append(e - sa); out_d.append(a)
        t = e - (span - stride)
        b = E[np.searchsorted(E, e, "right")]
        lo = np.maximum(sa + 1, b - span)
        i0 = np.searchsorted(E, lo, "left")
        i1 = np.searchsorted(E, e - ov, "right") - 1
        has = i0 <= i1
        j = np.searchsorted(E, t, "left")
        left = E[np.clip(j - 1, i0, np.maximum(i1, i0))]
        right = E[np.clip(j, i0, np.maximum(i1, i0))]
        pick = np.where(np.abs(right - t) < np.abs(left - t), right, left)
        lo_ok = np.where(lo <= e - ov, lo, sa + 1)
        s[a] = np.where(has, pick, np.clip(t, lo_ok, e - ov))
        pe[a] = e
        active = a
    starts = np.concatenate(out_s)
    order = np.argsort(starts, kind="stable")
    return W.make_rows(starts[order], np.concatenate(out_l)[order], np.concatenate(out_d)[order])


def streamed(ds, de, edges, span, S, offset, short, cuts, flush, scalar_below, targets=True, cap=None):
    """Feed ``edges`` in pieces ending at ``cuts`` (token positions), as iter_boundaries would."""
    p = W.SemanticPlanner(ds, de, span, S, offset, short, targets)
    p.FLUSH_EDGES, p.SCALAR_BELOW, p.FAST_CAP = flush, scalar_below, cap
    prev = 0
    for c in sorted(set(cuts)):
        p.feed(edges[(edges > prev) & (edges <= c)], c)
        prev = c
    p.feed(edges[edges > prev], None)
    return p.finish()


# documents from empty to much longer than span, so open documents span many feeds
layouts = st.lists(st.one_of(st.integers(0, 40), st.integers(40, 900)), min_size=1, max_size=8)


@settings(max_examples=200, deadline=None)
@given(lengths=layouts, span=st.integers(2, 60), sdiv=st.integers(1, 5), offset=st.integers(0, 70),
       short=st.sampled_from(W.SHORTS), flush=st.sampled_from([1, 3, 50, 1 << 21]),
       scalar_below=st.sampled_from([0, 2, 24, 10**9]), targets=st.booleans(),
       cap=st.sampled_from([None, 1, 3]), data=st.data())
def test_streaming_planner_equals_whole_file_planner(lengths, span, sdiv, offset, short, flush, scalar_below, targets,
                                                     cap, data):
    S = max(1, span // sdiv)
    docs = np.cumsum([0] + lengths)
    ds, de = docs[:-1], docs[1:]
    n = int(docs[-1])
    density = data.draw(st.sampled_from([0, 2, 10, 60]))
    inner = data.draw(st.sets(st.integers(1, max(1, n - 1)), max_size=n * density // 100)) if n > 1 else set()
    edges = np.array(sorted(inner), np.int64)  # may coincide with document edges
    want = reference_plan_semantic(ds, de, edges, span, S, offset, short, targets)
    assert W.plan_semantic(ds, de, edges, span, S, offset, short, targets).tolist() == want.tolist()
    cuts = data.draw(st.lists(st.integers(0, max(n, 1)), max_size=12))
    got = streamed(ds, de, edges, span, S, offset, short, cuts, flush, scalar_below, targets, cap)
    assert got.tolist() == want.tolist()


@pytest.mark.parametrize("offset", [0, 150_000])  # a large --offset: the first start is far in
def test_one_long_document_fed_in_small_pieces_holds_few_edges(offset):
    rng = np.random.default_rng(0)
    n, span, S = 200_000, 257, 128
    edges = np.unique(rng.integers(1, n, 8_000))
    want = reference_plan_semantic([0], [n], edges, span, S, offset)
    p = W.SemanticPlanner([0], [n], span, S, offset)
    p.FLUSH_EDGES = 100
    most = 0
    for c in range(1000, n + 1000, 1000):
        p.feed(edges[(edges > c - 1000) & (edges <= c)], c)
        most = max(most, p.held_n)
    got = p.finish()
    assert got.tolist() == want.tolist() and len(got) > 300
    # held edges: one flush worth plus what 2 × span and a feed of 1000 tokens can hold, never the file's 8000
    assert most < 100 + 2 * span + 1000


@pytest.fixture(scope="module")
def corpus_ids(ref_gpt2):
    text = (CORPUS / "hamlet.txt").read_text()[:30000] + (CORPUS / "zh_sliding_windows.txt").read_text()
    return np.array(ref_gpt2.encode_ordinary(text), "<u2")


@pytest.fixture(scope="module")
def crlf_corpus_ids(ref_gpt2):
    text = (CORPUS / "hamlet.txt").read_text()[:30000].replace("\n", "\r\n")
    return np.array(ref_gpt2.encode_ordinary(text), "<u2")


@pytest.mark.parametrize("kind", B.KINDS)
def test_iter_boundaries_yields_every_edge_once_in_order(corpus_ids, kind):
    enc = load("gpt2")
    whole = B.find_boundaries(corpus_ids, kind, enc, chunk_tokens=len(corpus_ids) + 1, threads=1)
    got, prev = [], 0
    for known, e in B.iter_boundaries(corpus_ids, kind, enc, chunk_tokens=997, threads=2):
        assert known > prev and ((e > prev) & (e <= known)).all()
        got += e.tolist()
        prev = known
    assert prev == len(corpus_ids) and got == whole.tolist() and len(got) > 30


def test_paragraph_sub_blocks_and_scratch_reuse_give_the_same_edges(corpus_ids, monkeypatch):
    enc = load("gpt2")
    want = B.find_boundaries(corpus_ids, "paragraph", enc, chunk_tokens=len(corpus_ids) + 1, threads=1)
    monkeypatch.setattr(B, "SUB", 101)  # many sub-blocks per chunk, each a different length
    assert B.find_boundaries(corpus_ids, "paragraph", enc, chunk_tokens=5000, threads=2).tolist() == want.tolist()


class TinyEnc(Tokenizer):
    """A made-up byte vocabulary with many newline-ending tokens (GPT-2 has only two that matter)."""

    name = "tiny-test"

    def __init__(self, toks):
        self.toks, self.n_vocab = toks, len(toks)

    def decode_tokens_bytes(self, ids):
        return [self.toks[i] for i in ids]

    def decode_single_token_bytes(self, i):
        return self.toks[i]

    token_bytes = decode_single_token_bytes


TINY = TinyEnc([b"a", b"bc", b".", b"!", b"?", b"\n", b"\n\n", b" \n", b"x\n", b".\n", b"\r\n", b"!\n\n",
                b" ", b"\t", b"\xe3\x80", b"\x82", "。".encode(), b"\n\n\n", b"q.", b"z\n", b" .", b"?\"",
                b"\r", b"\n\r", b"x\n\r", b"\n\r\n", b"\r\n\r\n", b"\r\r", b".\r\n"])
# Few newline ids (the == passes), but every CRLF shape: "\r\n" and "\n\r" tokens, a lone "\r"
SMALL = TinyEnc([b"a", b".", b" ", b"\n", b"\r", b"\r\n", b"\n\r", b"\n\r\n"])


@pytest.mark.parametrize("kind", B.KINDS)
@settings(max_examples=60, deadline=None)
@given(ids=st.lists(st.integers(0, TINY.n_vocab - 1), max_size=300), chunk=st.integers(1, 64))
def test_edges_by_table_gather_match_string_search(kind, ids, chunk):
    arr = np.array(ids, "<u2")
    assert len(B.token_tables(TINY).para_ids) > B.MAX_EQ_IDS  # this vocabulary takes the gather path
    want = oracle_edges(arr, TINY, kind)
    assert B.find_boundaries(arr, kind, TINY, chunk_tokens=chunk, threads=2).tolist() == want


@pytest.mark.parametrize("kind", B.KINDS)
@settings(max_examples=60, deadline=None)
@given(ids=st.lists(st.integers(0, SMALL.n_vocab - 1), max_size=200), chunk=st.integers(1, 16))
def test_edges_by_eq_passes_with_crlf_tokens_match_the_byte_definition(kind, ids, chunk):
    t = B.token_tables(SMALL)
    assert len(t.para_ids) + len(t.cr_ids) + len(t.nlcr_ids) <= B.MAX_EQ_IDS and len(t.crnl_ids) and len(t.nlcr_ids)
    arr = np.array(ids, "<u2")
    assert B.find_boundaries(arr, kind, SMALL, chunk_tokens=chunk, threads=2).tolist() == brute_edges(ids, SMALL, kind)


def test_gpt2_paragraph_edges_by_gather_equal_the_eq_passes(corpus_ids, monkeypatch):
    enc = load("gpt2")
    want = B.find_boundaries(corpus_ids, "paragraph", enc).tolist()
    monkeypatch.setattr(B, "MAX_EQ_IDS", 0)
    assert B.find_boundaries(corpus_ids, "paragraph", enc).tolist() == want


def test_gpt2_crlf_paragraph_edges_by_gather_equal_the_eq_passes(crlf_corpus_ids, monkeypatch):
    enc = load("gpt2")
    want = B.find_boundaries(crlf_corpus_ids, "paragraph", enc, chunk_tokens=999).tolist()
    assert len(want) > 50
    monkeypatch.setattr(B, "MAX_EQ_IDS", 0)
    assert B.find_boundaries(crlf_corpus_ids, "paragraph", enc, chunk_tokens=999).tolist() == want


# SMALL has few newline ids, so the C kernel takes its 64-token SIMD path on chunks of >= 64
# tokens, finishing each chunk's last (len % 64) tokens one by one: chunks of 60..200 cover both.
@pytest.mark.parametrize("kind", B.KINDS)
@pytest.mark.parametrize("dtype", ["<u2", "<u4"])  # uint32 ids take the table loop in C
@settings(max_examples=60, deadline=None)
@given(ids=st.lists(st.integers(0, SMALL.n_vocab - 1), max_size=600), chunk=st.integers(60, 200))
def test_edges_in_long_chunks_match_the_byte_definition(kind, dtype, ids, chunk):
    arr = np.array(ids, dtype)
    assert B.find_boundaries(arr, kind, SMALL, chunk_tokens=chunk, threads=2).tolist() == brute_edges(ids, SMALL, kind)


@pytest.mark.parametrize("dtype", ["<u2", "<u4"])
@pytest.mark.parametrize("where", [0, 1, 63, 64, 200, 999])  # in a 64-token block or in the tail
@pytest.mark.parametrize("kind", B.KINDS)
def test_an_id_outside_the_vocabulary_is_named_with_its_position(dtype, where, kind):
    enc = load("gpt2")
    arr = np.full(1000, 198, dtype)  # newlines: every token a candidate
    arr[where] = enc.n_vocab  # one past the last id
    arr[where + 1 :: 97] = enc.n_vocab + 5  # later bad ids must not be the one named
    with pytest.raises(DataError, match=f"token id {enc.n_vocab} at position {where} is outside"):
        B.find_boundaries(arr, kind, enc, chunk_tokens=512)
