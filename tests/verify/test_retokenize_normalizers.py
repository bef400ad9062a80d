"""verify's retokenize on tokenizers that normalize the text (#33 item 4): Qwen2-style byte-level
tokenizer.json files (NFC) and SentencePiece models (identity, NFKC rules, Unigram and BPE).

Correct data must pass (the check runs, and says how many documents it re-encoded); ids that are
not the reference's tokenization of their text must fail; tokenizers whose ids cannot be
re-derived from their text are skipped with their reason. Expected ids always come from the
reference libraries (``tokenizers``, ``sentencepiece``), never from winsample's encoder.
"""

from __future__ import annotations

import io
import json
from importlib import resources
from pathlib import Path

import numpy as np
import pytest
import sentencepiece as spm
import tokenizers
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from winsample import tokenizer
from winsample.cli import main
from winsample.verify import retokenize

from ..conftest import CORPUS
from ..tokenizer.test_families import PROVEN

# Text a normalizer rewrites (NFC: e + U+0301, Å as A + U+030A, Hangul jamo; NFKC: ligatures,
# full-width, circled digits, the ideographic space), a literal ▁, space runs, tabs, line breaks.
DOCS = {
    "a.txt": "Cafe\u0301 and A\u030angstro\u0308m: \u1100\u1161\u11a8 is \uac01. " * 3 + "\nThe end, the end.",
    "b.txt": "\ufb01nance \uff21\uff22\uff23\uff11\uff12 \u2460\u2461 \u3000wide\u3000space and \u00bd of \u2163.",
    "c.txt": "  leading spaces,   runs   of spaces,\ttabs\t\tand\n\n\nbreaks  \n trailing  ",
    "d.txt": "sparklines \u2581\u2582\u2583 \u2581 a\u2581b \u2581\u2581x and the the the theatre",
    "e.txt": (CORPUS / "hamlet.txt").read_text(encoding="utf-8")[:6000],
}
# characters where a re-encoding could part from the first encoding
HAZARDS = list(" \t\n\r\u00a0\u3000\u2581\u0301\u030a\u0308\ufb01\uff21\u2460\u00bd\u1100\u1161\u11a8\uac01e\u00e9AaZ1.,'\x00\x01\u200d")


def cli(*args):
    return CliRunner().invoke(main, [*map(str, args)])


# --- the tokenizers ------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def qwen2_dir(tmp_path_factory) -> Path:
    """A Qwen2-style tokenizer.json: byte-level BPE trained here, Qwen2's pre-tokenizer, normalizer NFC."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=1200, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False,
                                  special_tokens=["<|endoftext|>"])
    tok.train_from_iterator([(CORPUS / "hamlet.txt").read_text(encoding="utf-8")[:40000], *DOCS.values()], trainer)
    spec = json.loads(tok.to_str())
    spec["pre_tokenizer"] = PROVEN["qwen2"]
    spec["normalizer"] = {"type": "NFC"}
    d = tmp_path_factory.mktemp("qwen2")
    (d / "tokenizer.json").write_text(json.dumps(spec), encoding="utf-8")
    (d / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<|endoftext|>"}), encoding="utf-8")
    return d


def train_spm(path: Path, rule: str, model_type: str = "unigram", byte_fallback: bool = True) -> Path:
    """A SentencePiece model trained here by the sentencepiece library on the shipped corpus."""
    buf = io.BytesIO()
    lines = [x for x in (CORPUS / "hamlet.txt").read_text(encoding="utf-8")[:60000].splitlines() if x.strip()]
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=buf, vocab_size=700, model_type=model_type,
                                   normalization_rule_name=rule, byte_fallback=byte_fallback, minloglevel=2)
    path.write_bytes(buf.getvalue())
    return path


@pytest.fixture(scope="session")
def spm_models(tmp_path_factory) -> dict[str, Path]:
    """Mistral's real v1 model (BPE, identity, spaces kept) and Unigram models trained with NFKC rules."""
    d = tmp_path_factory.mktemp("spm")
    return {
        "mistral-v1": Path(str(resources.files("mistral_common").joinpath("data/tokenizer.model.v1"))),
        "unigram-nmt_nfkc": train_spm(d / "u1.model", "nmt_nfkc"),
        "unigram-nfkc_cf": train_spm(d / "u2.model", "nfkc_cf"),
        "bpe-nmt_nfkc": train_spm(d / "b1.model", "nmt_nfkc", "bpe"),
    }


def hf_ref(d: Path):
    t = tokenizers.Tokenizer.from_file(str(d / "tokenizer.json"))
    t.encode_special_tokens = True
    return lambda text: t.encode(text, add_special_tokens=False).ids


def spm_ref(p: Path):
    sp = spm.SentencePieceProcessor(model_file=str(p))
    return lambda text: sp.encode(text)


# --- correct data passes, and the check ran --------------------------------------------------------


def encode_and_verify(tmp_path: Path, tok_path: Path, docs=DOCS, *extra) -> list[dict]:
    src = tmp_path / "in"
    src.mkdir()
    for name, text in docs.items():
        (src / name).write_bytes(text.encode("utf-8"))
    out = tmp_path / "out"
    r = cli("encode", src, "-o", out, "--tokenizer-file", tok_path, "--val-fraction", "0", "--workers", 2, "-q", *extra)
    assert r.exit_code == 0, r.stderr
    r = cli("verify", out, "--json", "-q")
    assert r.exit_code == 0, r.stdout
    return [c for c in json.loads(r.stdout)["checks"] if c["name"] == "retokenize"]


def test_qwen2_style_nfc_tokenizer_json_is_retokenized_not_skipped(tmp_path, qwen2_dir):
    # the NFC normalizer really rewrites this data: a decoded document is not its source text
    assert tokenizer.load_file(str(qwen2_dir)).decode(hf_ref(qwen2_dir)(DOCS["a.txt"])) != DOCS["a.txt"]
    rk = encode_and_verify(tmp_path, qwen2_dir)
    assert [c["status"] for c in rk] == ["pass"], rk
    assert rk[0]["documents"] == len(DOCS) and rk[0]["bytes"] > 6000
    assert "NFC" in rk[0]["detail"]


@pytest.mark.parametrize("which", ["mistral-v1", "unigram-nmt_nfkc", "unigram-nfkc_cf", "bpe-nmt_nfkc"])
def test_sentencepiece_models_are_retokenized_not_skipped(tmp_path, which, spm_models):
    rk = encode_and_verify(tmp_path, spm_models[which])
    assert [c["status"] for c in rk] == ["pass"], rk
    assert rk[0]["documents"] == len(DOCS) and rk[0]["bytes"] > 6000


def test_long_qwen2_documents_are_checked_on_windows(tmp_path, qwen2_dir):
    """A document over the byte budget is checked between safe cuts of its (normalized) text."""
    text = (DOCS["a.txt"] + "\n") * 40 + (CORPUS / "hamlet.txt").read_text(encoding="utf-8")[:60000]
    tok = tokenizer.load_file(str(qwen2_dir))
    ids = np.array(hf_ref(qwen2_dir)(text), dtype=np.uint32)
    unit = retokenize.Unit("train.bin", ids, np.array([0]), False, None)
    o = retokenize.check(tok, [unit], docs=1, max_bytes=20_000)[0]
    assert o.status == "pass" and o.documents == 1 and 4096 <= o.bytes <= 20_000, o


# --- wrong ids fail ---------------------------------------------------------------------------


def split_one_token(ids: list[int], piece_of, id_of) -> tuple[list[int], int]:
    """``ids`` with one token of at least two characters replaced by two that spell the same
    piece (``id_of`` None: not a token), and its position: a valid, non-canonical split."""
    for k, i in enumerate(ids):
        piece = piece_of(i)
        for j in range(1, len(piece)):
            a, b = id_of(piece[:j]), id_of(piece[j:])
            if a is not None and b is not None:
                return ids[:k] + [a, b] + ids[k + 1 :], k
    raise AssertionError("no token splits in two")


def planted_unit(text: str, ref, piece_of, id_of):
    good = list(ref(text))
    bad, k = split_one_token(good, piece_of, id_of)
    assert ref(text) != bad  # the reference library does not encode the text so
    return [retokenize.Unit("train.bin", np.array(x, dtype=np.uint32), np.array([0]), False, None) for x in (good, bad)], k


def test_a_non_canonical_split_fails_retokenize_for_qwen2_style(qwen2_dir):
    raw = tokenizers.Tokenizer.from_file(str(qwen2_dir / "tokenizer.json"))
    units, k = planted_unit(DOCS["a.txt"], hf_ref(qwen2_dir), raw.id_to_token, raw.token_to_id)
    tok = tokenizer.load_file(str(qwen2_dir))
    good, bad = (retokenize.check(tok, [u])[0] for u in units)
    assert good.status == "pass" and good.documents == 1
    assert bad.status == "fail" and bad.mismatches == 1 and f"token {k} is " in bad.detail


@pytest.mark.parametrize("which", ["mistral-v1", "unigram-nmt_nfkc"])
def test_a_non_canonical_split_fails_retokenize_for_sentencepiece(which, spm_models):
    sp = spm.SentencePieceProcessor(model_file=str(spm_models[which]))
    unk = sp.unk_id()

    def id_of(piece):
        i = sp.piece_to_id(piece)
        return None if i == unk or sp.is_control(i) or sp.is_byte(i) else i

    units, k = planted_unit(DOCS["e.txt"], sp.encode, sp.id_to_piece, id_of)
    tok = tokenizer.load_file(str(spm_models[which]))
    good, bad = (retokenize.check(tok, [u])[0] for u in units)
    assert good.status == "pass" and good.documents == 1
    assert bad.status == "fail" and bad.mismatches == 1 and f"token {k} is " in bad.detail


# --- never a false failure: the rebuilt text of correct ids encodes to the same ids ----------


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(HAZARDS), min_size=1, max_size=24).map("".join))
def test_correct_ids_never_fail_retokenize_for_any_checked_family(qwen2_dir, spm_models, text):
    for path, ref in [(qwen2_dir, hf_ref(qwen2_dir))] + [(p, spm_ref(p)) for p in spm_models.values()]:
        ids = ref(text)
        if not ids:
            continue
        unit = retokenize.Unit("train.bin", np.array(ids, dtype=np.uint32), np.array([0]), False, None)
        o = retokenize.check(_loaded(path), [unit])[0]
        assert o.status in ("pass", "skip") and o.mismatches == 0, (path.name, text, o.detail)
        if o.status == "skip":  # only where the normalizer rewrites its own output again
            assert "whose text the normalizer rewrites again" in o.detail, (path.name, text, o.detail)


def test_text_the_normalizer_rewrites_again_is_skipped_not_failed(spm_models):
    """nmt_nfkc maps the ligature ﬁ to "fi" but leaves a following U+0301 apart, which NFKC then
    composes with the i: the rebuilt text encodes to other ids, for a text of its own."""
    path = spm_models["unigram-nmt_nfkc"]
    sp = spm.SentencePieceProcessor(model_file=str(path))
    ids = sp.encode("\ufb01\u0301")
    rebuilt = "".join(sp.id_to_piece(i) for i in ids)
    assert sp.encode("fi\u0301") != ids and rebuilt.startswith("\u2581fi")  # the library's own behaviour
    unit = retokenize.Unit("train.bin", np.array(ids, dtype=np.uint32), np.array([0]), False, None)
    o = retokenize.check(_loaded(path), [unit])[0]
    assert o.status == "skip" and "1 whose text the normalizer rewrites again" in o.detail


_CACHE: dict = {}


def _loaded(path: Path):
    if path not in _CACHE:
        _CACHE[path] = tokenizer.load_file(str(path))
    return _CACHE[path]


def test_a_document_holding_the_unknown_piece_is_skipped_and_counted(tmp_path):
    """Without byte fallback a character no piece holds becomes <unk>: its text is lost, so that
    document cannot be re-encoded; the others still are."""
    model = train_spm(tmp_path / "nofallback.model", "nmt_nfkc", byte_fallback=False)
    sp = spm.SentencePieceProcessor(model_file=str(model))
    docs = ["the king is dead", "a \u4e2d\u6587 word", "long live the king"]
    ids = [sp.encode(t) for t in docs]
    assert sp.unk_id() in ids[1] and all(sp.unk_id() not in x for x in (ids[0], ids[2]))
    starts = np.cumsum([0] + [len(x) for x in ids[:-1]])
    unit = retokenize.Unit("train.bin", np.array(sum(ids, []), dtype=np.uint32), starts, False, None)
    o = retokenize.check(tokenizer.load_file(str(model)), [unit])[0]
    assert o.status == "pass" and o.documents == 2
    # new-user trial: "2 sampled document(s) … skipped: 1 holding …" read as if the same ones were skipped
    assert o.detail.startswith("2 sampled document(s), ") and "; 1 more sampled, not compared: 1 holding the unknown piece" in o.detail


# --- what stays unchecked says why --------------------------------------------------------------


def test_a_sentencepiece_style_tokenizer_json_is_skipped_with_the_reason(tmp_path, qwen2_dir):
    spec = json.loads((qwen2_dir / "tokenizer.json").read_text(encoding="utf-8"))
    spec["pre_tokenizer"] = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": True}
    spec["decoder"] = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": True}
    spec["normalizer"] = None
    (tmp_path / "tokenizer.json").write_text(json.dumps(spec), encoding="utf-8")
    tok = tokenizer.load_file(str(tmp_path / "tokenizer.json"))
    unit = retokenize.Unit("train.bin", np.array([5, 6, 7], dtype=np.uint32), np.array([0]), False, None)
    o = retokenize.check(tok, [unit])[0]
    assert o.status == "skip" and "is not checked" in o.detail and "SentencePiece-style" in o.detail


def test_a_normalizer_not_known_to_be_idempotent_is_skipped_with_the_reason(tmp_path, qwen2_dir):
    spec = json.loads((qwen2_dir / "tokenizer.json").read_text(encoding="utf-8"))
    spec["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Lowercase"}]}
    (tmp_path / "tokenizer.json").write_text(json.dumps(spec), encoding="utf-8")
    tok = tokenizer.load_file(str(tmp_path / "tokenizer.json"))
    ok, why = tok.reencodable()
    assert not ok and "NFC + Lowercase" in why
    unit = retokenize.Unit("train.bin", np.array([5, 6, 7], dtype=np.uint32), np.array([0]), False, None)
    o = retokenize.check(tok, [unit])[0]
    assert o.status == "skip" and "NFC + Lowercase" in o.detail
