"""encode --eot-token: which token ends a document, and the default per family (#33 item 7).

A chat model's eos_token ends a *turn* (Qwen's ``<|im_end|>``); pretraining documents end with
``<|endoftext|>`` where the vocabulary has one. The tokenizer here is Qwen-instruct's shape, built
with the ``tokenizers`` library: a byte-level BPE with ``<|endoftext|>``, ``<|im_start|>`` and
``<|im_end|>`` added, and a tokenizer_config.json whose eos_token is ``<|im_end|>``.
"""

import json
import pickle
from pathlib import Path

import numpy as np
import pytest
import tokenizers
from click.testing import CliRunner
from tokenizers import decoders, models, pre_tokenizers, trainers

from winsample import tokenizer
from winsample.cli import main

from ..conftest import CORPUS

DOCS = ["The first document.\n", "A second one, longer than the first.\n", "Third: ümlauts and 中文.\n"]
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


@pytest.fixture(scope="module")
def chat_model(tmp_path_factory) -> Path:
    """A folder holding a Qwen-instruct-shaped tokenizer.json and tokenizer_config.json."""
    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=SPECIALS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train([str(CORPUS / "sonnets.txt")], trainer)
    d = tmp_path_factory.mktemp("chat_model")
    tok.save(str(d / "tokenizer.json"))
    (d / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<|im_end|>", "name_or_path": "acme/chat-0.1B"}))
    return d


@pytest.fixture
def docs_jsonl(tmp_path) -> Path:
    p = tmp_path / "docs.jsonl"
    p.write_text("".join(json.dumps({"text": t}) + "\n" for t in DOCS))
    return p


def encode(*args):
    return CliRunner().invoke(main, ["encode", *map(str, args), "--val-fraction", "0", "-q"])


def ids_of(folder: Path, dtype=np.uint16) -> list[int]:
    return np.fromfile(folder / "train.bin", dtype=dtype).tolist()


def expected(encode_text, eot: int) -> list[int]:
    out = []
    for t in DOCS:
        out += list(encode_text(t)) + [eot]
    return out


def test_a_chat_models_documents_end_with_endoftext_not_its_eos_token(tmp_path, chat_model, docs_jsonl):
    ref = tokenizers.Tokenizer.from_file(str(chat_model / "tokenizer.json"))
    r = encode(docs_jsonl, "--tokenizer-file", chat_model, "-o", tmp_path / "out")
    assert r.exit_code == 0, r.stderr
    endoftext = ref.token_to_id("<|endoftext|>")
    assert endoftext != ref.token_to_id("<|im_end|>")
    assert ids_of(tmp_path / "out") == expected(lambda t: ref.encode(t, add_special_tokens=False).ids, endoftext)
    entry = json.loads((tmp_path / "out" / "meta.json").read_text())["tokenizer"]
    assert entry["eot"] == endoftext
    assert entry["name"] == "acme/chat-0.1B"  # the model's name from tokenizer_config.json, not the folder's


def test_eot_token_by_text_chooses_the_chat_token(tmp_path, chat_model, docs_jsonl):
    ref = tokenizers.Tokenizer.from_file(str(chat_model / "tokenizer.json"))
    im_end = ref.token_to_id("<|im_end|>")
    r = encode(docs_jsonl, "--tokenizer-file", chat_model, "--eot-token", "<|im_end|>", "-o", tmp_path / "out")
    assert r.exit_code == 0, r.stderr
    assert ids_of(tmp_path / "out") == expected(lambda t: ref.encode(t, add_special_tokens=False).ids, im_end)
    # the dataset's own choice is what readers load: verify (retokenize included) passes
    v = CliRunner().invoke(main, ["verify", str(tmp_path / "out"), "--json"])
    assert v.exit_code == 0, v.stdout
    checks = {(c["name"], c["status"]) for c in json.loads(v.stdout)["checks"]}
    assert ("retokenize", "pass") in checks and ("meta", "pass") in checks


def test_eot_token_by_id_with_tiktoken(tmp_path, docs_jsonl):
    gpt2 = tokenizer.load_encoding("gpt2")  # tiktoken's own Encoding (the bundled ranks: offline)
    newline = 198
    assert gpt2.decode_single_token_bytes(newline) == b"\n"  # by hand: id 198 is "\n" in GPT-2's vocabulary
    r = encode(docs_jsonl, "--eot-token", newline, "-o", tmp_path / "out")
    assert r.exit_code == 0, r.stderr
    assert ids_of(tmp_path / "out") == expected(gpt2.encode_ordinary, newline)
    v = CliRunner().invoke(main, ["verify", str(tmp_path / "out")])
    assert v.exit_code == 0, v.stdout


@pytest.mark.parametrize("choice, words", [
    ("hello world", "not one token of"),
    ("50257", "has no token 50257"),
])
def test_an_eot_token_that_is_not_one_token_is_refused_with_one_line(tmp_path, docs_jsonl, choice, words):
    r = encode(docs_jsonl, "--eot-token", choice, "-o", tmp_path / "out")
    assert r.exit_code == 2
    assert words in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_eot_token_with_no_eot_is_refused(tmp_path, docs_jsonl):
    r = encode(docs_jsonl, "--eot-token", "<|endoftext|>", "--no-eot", "-o", tmp_path / "out")
    assert r.exit_code == 2 and "--no-eot" in r.stderr


def test_a_chosen_eot_survives_pickling_into_a_worker(chat_model):
    tok = tokenizer.choose_eot(tokenizer.load_file(str(chat_model)), "<|im_end|>")
    back = pickle.loads(pickle.dumps(tok))
    assert back.eot == tok.eot == back.token_id("<|im_end|>")
    assert back.describe()["eot"] == tok.eot
    assert tokenizer.load_file(str(chat_model)).eot == back.token_id("<|endoftext|>")  # the cached one is untouched


def test_a_dataset_made_with_the_eos_token_still_reads_with_its_own_eot(tmp_path, chat_model, docs_jsonl):
    """A meta.json written before the default changed (eot = <|im_end|>) loads with that eot."""
    r = encode(docs_jsonl, "--tokenizer-file", chat_model, "--eot-token", "<|im_end|>", "-o", tmp_path / "out")
    assert r.exit_code == 0, r.stderr
    entry = json.loads((tmp_path / "out" / "meta.json").read_text())["tokenizer"]
    tok = tokenizer.from_meta(entry, tmp_path / "out")
    assert tok.eot == tok.token_id("<|im_end|>")
    assert tokenizer.mismatches(tok, entry) == []
