"""windows --boundaries paragraph says so when the tokenizer cannot show a paragraph edge (#33 item 9).

A SentencePiece model trained with its defaults (nmt_nfkc normalization) turns every newline into
a space: its ids hold no blank line, so no paragraph edge can ever be found.
"""

import io
import json
from importlib import resources
from pathlib import Path

import numpy as np
import pytest
import sentencepiece as spm
from click.testing import CliRunner

from winsample.cli import main

from ..conftest import CORPUS

MISTRAL_V1 = Path(str(resources.files("mistral_common").joinpath("data/tokenizer.model.v1")))


@pytest.fixture(scope="module")
def newline_dropping_model(tmp_path_factory) -> Path:
    lines = (CORPUS / "hamlet.txt").read_text(encoding="utf-8")[:60_000].splitlines()
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=model, vocab_size=400,
                                   model_type="bpe", minloglevel=2)
    path = tmp_path_factory.mktemp("spm") / "drops-newlines.model"
    path.write_bytes(model.getvalue())
    sp = spm.SentencePieceProcessor(model_file=str(path))
    assert "\n" not in sp.decode(sp.encode("one\n\ntwo"))  # the premise, by the reference library itself
    return path


def encode(tmp_path, *args) -> Path:
    out = tmp_path / "data"
    r = CliRunner().invoke(main, ["encode", str(CORPUS), "-o", str(out), "-q", *map(str, args)])
    assert r.exit_code == 0, r.stderr
    return out


def windows(data: Path, *args):
    return CliRunner().invoke(main, ["windows", str(data / "train.bin"), "-T", "128", "--boundaries", "paragraph",
                                     "-o", str(data / "p.npy"), "-q", *args])


def test_a_tokenizer_that_drops_newlines_gets_one_warning_line_and_the_plan(tmp_path, newline_dropping_model):
    data = encode(tmp_path, "--tokenizer-file", newline_dropping_model)
    r = windows(data)
    assert r.exit_code == 0
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("warning: tokenizer 'drops-newlines' drops newlines")
    assert "--boundaries paragraph" in lines[0]
    assert len(np.load(data / "p.npy")) > 0  # the plan is still written
    j = windows(data, "--json")
    assert json.loads(j.stdout)["warnings"] == [lines[0].removeprefix("warning: ")]


@pytest.mark.parametrize("tok", [None, MISTRAL_V1])
def test_a_tokenizer_that_keeps_newlines_gets_no_warning(tmp_path, tok):
    data = encode(tmp_path, *(["--tokenizer-file", tok] if tok else []))
    r = windows(data)
    assert r.exit_code == 0 and r.stderr == ""
    assert "warnings" not in json.loads(windows(data, "--json").stdout)
