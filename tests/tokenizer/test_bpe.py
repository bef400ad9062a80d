import gzip
import hashlib
import socket
import subprocess
import sys

import pytest
import tiktoken

from winsample import tokenizer
from winsample.errors import ConfigError, DataError
from winsample.tokenizer import load_encoding

TEXTS = [
    "hello world",
    "滑动窗口把长文本切成一段一段。最后的起点是五，不是六！",
    "emoji 👩‍👩‍👧‍👦 family, flags 🇯🇵🇫🇷, skin 👍🏽",
    "def f(x):\r\n\treturn x ** 2  # comment\n\n\nclass A: pass\n",
    "combining: e\u0301 a\u0300\u0316 Z\u0351\u036b\u0343",
    "   leading and trailing spaces   \n\n",
    "<|endoftext|> is only text here",
]


def test_hello_world_ids():
    assert load_encoding("gpt2").encode_ordinary("hello world") == [31373, 995]


def test_eot_and_vocab():
    enc = load_encoding("gpt2")
    assert enc.eot_token == 50256
    assert enc.n_vocab == 50257


@pytest.mark.parametrize("text", TEXTS)
def test_same_ids_as_tiktoken_built_from_ranks_file(text, ref_gpt2):
    assert load_encoding("gpt2").encode_ordinary(text) == ref_gpt2.encode_ordinary(text)


@pytest.mark.parametrize("text", TEXTS)
def test_round_trip(text):
    enc = load_encoding("gpt2")
    assert enc.decode(enc.encode_ordinary(text)) == text


def test_endoftext_in_text_is_not_the_control_id():
    ids = load_encoding("gpt2").encode_ordinary("<|endoftext|>")
    assert 50256 not in ids and len(ids) > 1


def test_gpt2_loads_with_network_unplugged(monkeypatch, tmp_path):
    def no_network(*a, **k):
        raise OSError("network is unplugged in this test")

    monkeypatch.setattr(socket, "socket", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "empty-cache"))
    load_encoding.cache_clear()
    try:
        assert load_encoding("gpt2").encode_ordinary("offline") == [2364, 1370]
    finally:
        load_encoding.cache_clear()


def test_bundled_ranks_hash_is_tiktokens_expected_hash():
    assert hashlib.sha256(tokenizer.bundled_gpt2_ranks()).hexdigest() == (
        "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930"
    )


def test_ranks_with_wrong_hash_are_refused():
    data = bytearray(tokenizer.bundled_gpt2_ranks())
    data[10] ^= 1
    with pytest.raises(DataError, match="sha256"):
        tokenizer.gpt2_from_ranks(bytes(data))


def test_ranks_sha256_of_encoding_equals_file_hash(gpt2_ranks_file, ref_gpt2):
    want = hashlib.sha256(gpt2_ranks_file.read_bytes()).hexdigest()
    assert tokenizer.ranks_sha256(ref_gpt2) == want  # computed from the ranks (built by tiktoken)
    assert tokenizer.ranks_sha256(load_encoding("gpt2")) == want  # remembered from the checked file


def test_custom_ranks_file_with_cl100k_pattern(cl100k_ranks_file, ref_cl100k):
    enc = load_encoding("ignored", tokenizer_file=str(cl100k_ranks_file), pattern="cl100k")
    for text in TEXTS:
        assert enc.encode_ordinary(text) == ref_cl100k.encode_ordinary(text)
    assert enc.n_vocab > 65536  # needs uint32 on disk


def test_gzipped_custom_ranks_file(tmp_path, gpt2_ranks_file, ref_gpt2):
    gz = tmp_path / "mine.tiktoken.gz"
    gz.write_bytes(gzip.compress(gpt2_ranks_file.read_bytes()))
    enc = load_encoding(tokenizer_file=str(gz), pattern="gpt2")
    assert enc.encode_ordinary(TEXTS[1]) == ref_gpt2.encode_ordinary(TEXTS[1])
    assert enc.eot_token == 50256  # the id right after the last rank


def test_tiktoken_cache_dir_serves_other_encodings(tmp_path, cl100k_ranks_file, monkeypatch, ref_cl100k):
    # tiktoken names cached files by the sha1 of their URL
    spec_url = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
    key = hashlib.sha1(spec_url.encode()).hexdigest()
    (tmp_path / key).write_bytes(cl100k_ranks_file.read_bytes())
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    load_encoding.cache_clear()
    tiktoken.registry.ENCODINGS.pop("cl100k_base", None)
    try:
        assert load_encoding("cl100k_base").encode_ordinary("hello world") == ref_cl100k.encode_ordinary("hello world")
    finally:
        load_encoding.cache_clear()
        tiktoken.registry.ENCODINGS.pop("cl100k_base", None)


def test_unreachable_encoding_names_cache_dir_and_tokenizer_file(tmp_path, monkeypatch):
    def no_network(*a, **k):
        raise OSError("network is unplugged in this test")

    monkeypatch.setattr(socket, "socket", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    load_encoding.cache_clear()
    tiktoken.registry.ENCODINGS.pop("p50k_base", None)
    with pytest.raises(ConfigError) as e:
        load_encoding("p50k_base")
    assert "TIKTOKEN_CACHE_DIR" in str(e.value) and "--tokenizer-file" in str(e.value)
    load_encoding.cache_clear()


def test_unknown_encoding_name():
    with pytest.raises(ConfigError, match="unknown encoding 'nope'"):
        load_encoding("nope")


# --- winsample's Tokenizer interface ----------------------------------------------------------


def test_tokenizer_interface_of_gpt2_matches_tiktoken(ref_gpt2):
    tok = tokenizer.load("gpt2")
    assert isinstance(tok, tokenizer.Tokenizer)
    assert (tok.name, tok.family, tok.n_vocab, tok.eot, tok.bos) == ("gpt2", "tiktoken", 50257, 50256, 50256)  # --bos: <|endoftext|>
    for text in TEXTS:
        ids = tok.encode(text)
        assert ids.tolist() == ref_gpt2.encode_ordinary(text)
        assert tok.decode(ids.tolist()) == text
        assert b"".join(tok.token_bytes(i) for i in ids.tolist()) == text.encode()
    assert tok.encode("hello world").tolist() == [31373, 995]


def test_control_token_lookalike_stays_text():
    tok = tokenizer.load("gpt2")
    ids = tok.encode("<|endoftext|>").tolist()
    assert tok.eot not in ids and len(ids) > 1
    assert tok.decode(ids) == "<|endoftext|>"


def test_identity_is_the_ranks_files_sha256(gpt2_ranks_file, cl100k_ranks_file):
    assert tokenizer.load("gpt2").sha256 == hashlib.sha256(gpt2_ranks_file.read_bytes()).hexdigest()
    custom = tokenizer.load("x", str(cl100k_ranks_file), "cl100k")
    assert custom.sha256 == hashlib.sha256(cl100k_ranks_file.read_bytes()).hexdigest()


def test_vocab_bytes_lists_every_id():
    tok = tokenizer.load("gpt2")
    vb = tok.vocab_bytes()
    assert len(vb) == 50257 and vb[31373] == b"hello" and vb[50256] == b"<|endoftext|>"


def _tiktokens_bytes(enc, n):
    out = []
    for i in range(n):
        try:
            out.append(enc.decode_single_token_bytes(i))
        except KeyError:  # a hole in the vocabulary
            out.append(b"")
    return out


def test_vocab_bytes_are_tiktokens_own_for_every_id_holes_included(ref_gpt2, ref_cl100k, cl100k_ranks_file):
    assert tokenizer.load("gpt2").vocab_bytes() == _tiktokens_bytes(ref_gpt2, 50257)
    cl = tokenizer.load("cl100k_base", str(cl100k_ranks_file), "cl100k")
    assert cl.vocab_bytes() == _tiktokens_bytes(cl.encoding, cl.n_vocab)
    # tiktoken's own cl100k_base: its ids have holes between the special tokens
    holey = tokenizer.TiktokenTokenizer(ref_cl100k, "cl100k_base", ())
    want = _tiktokens_bytes(ref_cl100k, ref_cl100k.n_vocab)
    assert b"" in want[100256:] and holey.vocab_bytes() == want


def test_describe_and_from_meta_round_trip(gpt2_ranks_file):
    tok = tokenizer.load("gpt2")
    assert tok.describe() == {"name": "gpt2", "ranks_sha256": tokenizer.GPT2_RANKS_SHA256, "n_vocab": 50257, "eot": 50256}
    assert tokenizer.from_meta(tok.describe()) is tok
    custom = tokenizer.load("ignored", str(gpt2_ranks_file), "gpt2")
    entry = custom.describe()
    assert entry["file"] == str(gpt2_ranks_file) and entry["pattern"] == "gpt2" and entry["name"] == "gpt2"
    assert tokenizer.from_meta(entry).encode("hi there").tolist() == tok.encode("hi there").tolist()


def test_meta_tokenizer_file_is_found_beside_the_data(tmp_path, gpt2_ranks_file, monkeypatch):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "mini.tiktoken").write_bytes(gpt2_ranks_file.read_bytes())
    monkeypatch.chdir(tmp_path)  # the recorded relative name does not exist here
    entry = {"name": "mini", "ranks_sha256": tokenizer.GPT2_RANKS_SHA256, "n_vocab": 50257, "eot": 50256,
             "file": "mini.tiktoken", "pattern": "gpt2"}
    tok = tokenizer.resolve(None, entry, tmp_path / "data")
    assert tok.name == "mini" and tok.encode("hello world").tolist() == [31373, 995]


def test_resolve_rule_explicit_then_meta_then_gpt2(cl100k_ranks_file):
    assert tokenizer.resolve().name == "gpt2"
    assert tokenizer.resolve("gpt2", {"name": "nope", "n_vocab": 3}).name == "gpt2"  # explicit wins
    with pytest.raises(ConfigError, match="ranks with sha256"):
        tokenizer.resolve(None, {"name": "gpt2", "ranks_sha256": "0" * 64, "n_vocab": 50257})
    with pytest.raises(ConfigError, match="does not load") as e:
        tokenizer.resolve(None, {"name": "mini", "n_vocab": 5, "file": "/nonexistent/mini.tiktoken"})
    assert "--tokenizer-file" not in str(e.value)


def test_mismatches_name_each_field():
    tok = tokenizer.load("gpt2")
    assert tokenizer.mismatches(tok, tok.describe()) == []
    bad = dict(tok.describe(), n_vocab=7, eot=3)
    assert [m.split()[0] for m in tokenizer.mismatches(tok, bad)] == ["tokenizer.n_vocab", "tokenizer.eot"]


def test_tokenizer_pickles_as_its_load_options(gpt2_ranks_file):
    import pickle

    for tok in (tokenizer.load("gpt2"), tokenizer.load("x", str(gpt2_ranks_file), "gpt2")):
        data = pickle.dumps(tok)
        assert len(data) < 1000  # the options, not the ranks
        assert pickle.loads(data).encode(TEXTS[1]).tolist() == tok.encode(TEXTS[1]).tolist()


def test_safe_cut_rule_keeps_ids_identical(ref_gpt2):
    tok = tokenizer.load("gpt2")
    text = "One sentence here.\nAnother line follows with words and 123 numbers.\n\nA new paragraph."
    cuts = list(tok.iter_safe_cuts(text))
    assert cuts and tok.last_safe_cut(text, 1, len(text)) == cuts[-1]
    whole = ref_gpt2.encode_ordinary(text)
    for p in cuts:
        assert tok.encode(text[:p]).tolist() + tok.encode(text[p:]).tolist() == whole
    b = text.encode()
    assert tok.last_safe_cut_bytes(b) == len(text[: cuts[-1]].encode())


def test_dist_version_agrees_with_the_installed_metadata():
    from importlib.metadata import version

    from winsample.tokenizer.base import dist_version

    assert dist_version("tiktoken") == version("tiktoken") == tiktoken.__version__
    assert dist_version("gigatoken") == version("gigatoken")  # no __version__: the metadata answers
    assert dist_version("no-such-distribution-here") == "?"
    # a module that declares its version is answered without importing importlib.metadata
    code = ("import sys, tiktoken\nfrom winsample.tokenizer.base import dist_version\n"
            "dist_version('tiktoken')\nprint('importlib.metadata' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "False", r.stderr
