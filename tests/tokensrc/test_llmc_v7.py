"""llm.c's version 7 shards (its Llama 3 format: magic 20240801, uint32 ids), read and written.

Expectations come from llm.c itself, never from winsample: the fixture shard was written by
llm.c's ``write_datafile(..., "llama-3")`` (tests/fixtures/llmc_v7/README.md), the reader below
is ``train_llama3.py``'s ``_load_data_shard``, and ``write_datafile`` is copied verbatim from
``dev/data/data_common.py`` (karpathy/llm.c f1e2ace) to say what encode's shards must be byte
for byte. Token ids come from tiktoken (``ref_cl100k``, ``ref_gpt2``).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import winsample
from winsample import tokensrc
from winsample.cli import main
from winsample.windows import write

from ..conftest import CORPUS, FIXTURES

SHARD = FIXTURES / "llmc_v7" / "sonnets_train_000000.bin"
CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"

# --- llm.c dev/data/data_common.py, verbatim ---------------------------------------------------

HEADERS_INFO = {
    "gpt-2": {
        "magic": 20240520,
        "version": 1,
        "token_dtype": np.uint16,
    },
    "llama-3": {
        "magic": 20240801,
        "version": 7,
        "token_dtype": np.uint32,
    },
}

def write_datafile(filename, toks, model_desc="gpt-2"):
    """
    Saves token data as a .bin file, for reading in C.
    - First comes a header with 256 int32s
    - The tokens follow, each as uint16 (gpt-2) or uint32 (llama)
    """
    assert len(toks) < 2**31, "token count too large" # ~2.1B tokens
    assert model_desc in ["gpt-2", "llama-3"], f"unknown model descriptor {model_desc}"
    info = HEADERS_INFO[model_desc]
    # construct the header
    header = np.zeros(256, dtype=np.int32) # header is always 256 int32 values
    header[0] = info["magic"]
    header[1] = info["version"]
    header[2] = len(toks) # number of tokens after the 256*4 bytes of header
    # construct the data (numpy array of tokens)
    toks_np = np.array(toks, dtype=info["token_dtype"])
    # write to file
    num_bytes = (256 * 4) + (len(toks) * toks_np.itemsize)
    print(f"writing {len(toks):,} tokens to {filename} ({num_bytes:,} bytes) in the {model_desc} format")
    with open(filename, "wb") as f:
        f.write(header.tobytes())
        f.write(toks_np.tobytes())

# --- llm.c train_llama3.py ---------------------------------------------------------------------


def _load_data_shard(filename):
    with open(filename, "rb") as f:
        # first read the header, which is 256 int32 integers (4 bytes each)
        header = np.frombuffer(f.read(256*4), dtype=np.int32)
        assert header[0] == 20240801, "magic number mismatch in the data .bin file"
        assert header[1] == 7, "unsupported version"
        ntok = header[2] # number of tokens (claimed)
        # the rest of it are tokens, stored as uint16
        tokens = np.frombuffer(f.read(), dtype=np.uint32)
    assert len(tokens) == ntok, "number of tokens read does not match header?"
    return tokens


# --- helpers ------------------------------------------------------------------------------------


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def sonnet_paragraphs(k: int = 6) -> list[str]:
    text = (CORPUS / "sonnets.txt").read_text(encoding="utf-8")
    return [d.strip() for d in text.split("\n\n") if d.strip()][:k]


def llmc_stream(ref, docs: list[str], eot: int) -> list[int]:
    """llm.c's fineweb.py: [eot] + the document's ids, for each document."""
    out: list[int] = []
    for d in docs:
        out += [eot] + ref.encode_ordinary(d)
    return out


@pytest.fixture
def cl100k_cache(cl100k_ranks_file, tmp_path, monkeypatch):
    """``--encoding cl100k_base`` offline: the ranks where tiktoken's own cache looks for them."""
    cache = tmp_path / "tiktoken-cache"
    cache.mkdir()
    shutil.copyfile(cl100k_ranks_file, cache / hashlib.sha1(CL100K_URL.encode()).hexdigest())
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(cache))
    return cache


@pytest.fixture
def shard_ids() -> np.ndarray:
    return _load_data_shard(SHARD).astype(np.int64)


# --- the fixture is what its README says ---------------------------------------------------------


def test_fixture_is_llmc_write_datafile_of_cl100k_sonnets(tmp_path, ref_cl100k, shard_ids):
    toks = llmc_stream(ref_cl100k, sonnet_paragraphs(), ref_cl100k.eot_token)
    assert shard_ids.tolist() == toks
    assert (shard_ids > 65535).sum() >= 10  # ids a uint16 shard could not hold
    write_datafile(tmp_path / "again.bin", toks, "llama-3")
    assert (tmp_path / "again.bin").read_bytes() == SHARD.read_bytes()


# --- reading version 7 --------------------------------------------------------------------------


def test_windows_plans_a_version_7_shard_over_its_uint32_ids(tmp_path, shard_ids):
    plan = tmp_path / "p.npy"
    r = run("windows", SHARD, "-T", "32", "-o", plan, "-q")
    assert r.exit_code == 0, r.output
    rows = np.load(plan)
    side = json.loads((tmp_path / "p.npy.json").read_text())
    assert side["source"]["tokens"] == len(shard_ids) == 330  # the 1 KiB header is not tokens
    assert side["source"]["dtype"] == "<u4"
    assert int((rows["start"] + rows["length"]).max()) == len(shard_ids)
    want_x = {tuple(shard_ids[s : s + 32].tolist()): shard_ids[s + 1 : s + 33].tolist() for s in rows["start"].tolist()}
    loader = winsample.Loader(plan, SHARD, batch_size=4, seed=0)
    served = []
    for x, y in loader.epoch(0):
        for xr, yr in zip(x.tolist(), y.tolist()):
            assert tuple(xr) in want_x and want_x[tuple(xr)] == yr  # y: x moved by one id of the same stream
            served.append(xr)
    assert max(max(r) for r in served) > 65535
    x, _ = winsample.get_batch(plan, SHARD, 8, 0)[:2]
    assert {tuple(r) for r in x.tolist()} <= set(want_x)


def test_windows_doc_boundaries_start_each_document_at_its_eot(tmp_path, cl100k_cache, shard_ids):
    plan = tmp_path / "p.npy"
    r = run("windows", SHARD, "-T", "32", "--boundaries", "doc", "--encoding", "cl100k_base", "-o", plan, "-q")
    assert r.exit_code == 0, r.output
    rows = np.load(plan)
    eots = np.flatnonzero(shard_ids == 100257)
    firsts = rows["start"][np.r_[True, rows["doc"][1:] != rows["doc"][:-1]]]
    assert firsts.tolist() == eots.tolist() and len(eots) == 6
    r = run("verify", "--plan", plan, "--show", "0", "--encoding", "cl100k_base", "--json")
    assert r.exit_code == 0, r.output
    assert {c["name"] for c in json.loads(r.stdout)["checks"] if c["status"] == "pass"} >= {"plan_params", "alignment", "llmc_shards"}


def test_verify_a_folder_of_version_7_shards(tmp_path, cl100k_cache, shard_ids):
    folder = tmp_path / "shards"
    folder.mkdir()
    shutil.copy(SHARD, folder)
    for target in (folder, folder / SHARD.name):
        r = run("verify", target, "--encoding", "cl100k_base", "--show", "0", "--json")
        assert r.exit_code == 0, r.output
        checks = {c["name"]: c for c in json.loads(r.stdout)["checks"]}
        assert checks["llmc_shards"]["status"] == "pass" and "version 7" in checks["llmc_shards"]["detail"]
        assert checks["llmc_shards"]["tokens"] == len(shard_ids)
        assert checks["vocab_range"]["max_id"] == int(shard_ids.max())
        assert checks["llmc_documents"]["documents"] == 6


def test_verify_version_7_without_a_tokenizer_asks_for_one(tmp_path):
    r = run("verify", SHARD.parent)
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and "version 7" in r.stderr and "--encoding" in r.stderr


def test_inspect_a_version_7_shard(cl100k_cache, shard_ids, ref_cl100k):
    r = run("inspect", SHARD, "--at", "1", "--count", "40", "--json")
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)
    assert rep["tokens"] == 330 and rep["dtype"] == "<u4" and rep["header"] == {"magic": 20240801, "version": 7}
    assert rep["ids"] == shard_ids[1:41].tolist() and rep["decoded_with"] is None
    assert any("--encoding" in w for w in rep["warnings"])
    r = run("inspect", SHARD, "--count", "40", "--encoding", "cl100k_base", "--json")
    rep = json.loads(r.stdout)
    assert r.exit_code == 0 and rep["text"] == ref_cl100k.decode(shard_ids[:40].tolist())


# --- headers llm.c would refuse -----------------------------------------------------------------


def _copy_with(tmp_path: Path, offset: int, value: int) -> Path:
    bad = tmp_path / "bad" / SHARD.name
    bad.parent.mkdir()
    raw = bytearray(SHARD.read_bytes())
    raw[offset : offset + 4] = struct.pack("<i", value)
    bad.write_bytes(bytes(raw))
    return bad


@pytest.mark.parametrize("offset, value, words", [
    (4, 1, "version 1 with magic 20240801, expected 7"),  # train_llama3.py: "unsupported version"
    (8, 331, "counts 331 uint32 ids"),  # "number of tokens read does not match header?"
    (8, 329, "trailing bytes"),
])
def test_a_header_llmc_refuses_is_one_line_naming_the_shard(tmp_path, cl100k_cache, offset, value, words):
    bad = _copy_with(tmp_path, offset, value)
    plan = tmp_path / "p.npy"
    r = run("windows", bad, "-T", "8", "-o", plan)
    assert r.exit_code == 1 and r.stdout == "" and not plan.exists()
    assert r.stderr.count("\n") == 1 and str(bad) in r.stderr and words in r.stderr
    r = run("verify", bad, "--encoding", "cl100k_base", "--show", "0", "--json")
    assert r.exit_code == 1
    fails = [c for c in json.loads(r.stdout)["checks"] if c["status"] == "fail"]
    assert [c["name"] for c in fails] == ["llmc_shards"] and words in fails[0]["detail"]


def test_a_version_1_shard_among_version_7_ones_is_refused(tmp_path, shard_ids):
    folder = tmp_path / "mixed"
    folder.mkdir()
    shutil.copy(SHARD, folder / "s_000000.bin")
    write_datafile(folder / "s_000001.bin", [1, 2, 3], "gpt-2")
    r = run("windows", folder, "-T", "8", "-o", tmp_path / "p.npy")
    assert r.exit_code == 1 and "s_000001.bin" in r.stderr and "one format" in r.stderr
    assert r.stderr.count("\n") == 1


# --- writing version 7 ----------------------------------------------------------------------


def _encode_llmc(tmp_path, docs: list[str], *extra) -> Path:
    src = tmp_path / "docs.jsonl"
    src.write_text("".join(json.dumps({"text": t}) + "\n" for t in docs))
    out = tmp_path / "out"
    r = run("encode", src, "-o", out, "--layout", "nanogpt,llmc", "--val-fraction", "0", "-q", *extra)
    assert r.exit_code == 0, r.output
    return out


@pytest.mark.parametrize("shard_tokens", [None, 100])
def test_encode_llmc_with_a_vocabulary_over_65536_writes_llmcs_version_7_bytes(tmp_path, cl100k_ranks_file, ref_cl100k,
                                                                                 shard_tokens):
    docs = sonnet_paragraphs(12)
    extra = ("--shard-tokens", shard_tokens) if shard_tokens else ()
    out = _encode_llmc(tmp_path, docs, "--tokenizer-file", cl100k_ranks_file, "--pattern", "cl100k", *extra)
    eot = max(ref_cl100k._mergeable_ranks.values()) + 1  # --tokenizer-file: <|endoftext|> follows the last rank
    stream = llmc_stream(ref_cl100k, docs, eot)
    assert max(stream) > 65535
    files = sorted((out / "llmc").glob("train_*.bin"))
    # k = ceil(n / shard_tokens) shards of near-equal size, as layouts.py documents
    k = -(-len(stream) // shard_tokens) if shard_tokens else 1
    sizes = [len(stream) // k + (1 if i < len(stream) % k else 0) for i in range(k)]
    assert len(files) == k
    at = 0
    for f, n in zip(files, sizes):
        write_datafile(tmp_path / "want.bin", stream[at : at + n], "llama-3")
        assert f.read_bytes() == (tmp_path / "want.bin").read_bytes(), f.name
        assert _load_data_shard(f).tolist() == stream[at : at + n]
        at += n
    desc = json.loads((out / "meta.json").read_text())["layouts"]["llmc"]
    assert (desc["magic"], desc["version"]) == (20240801, 7)
    for target in (f"{out}/llmc/train_*.bin", files[0]):  # the shards, compared with the meta.json that lists them
        r = run("verify", target, "--show", "0", "--json")
        assert r.exit_code == 0, r.output
        assert any(c["name"] == "llmc_shards" and c["status"] == "pass" for c in json.loads(r.stdout)["checks"])


def test_encode_llmc_with_gpt2_still_writes_version_1(tmp_path, ref_gpt2):
    docs = sonnet_paragraphs(4)
    out = _encode_llmc(tmp_path, docs)
    stream = llmc_stream(ref_gpt2, docs, ref_gpt2.eot_token)
    write_datafile(tmp_path / "want.bin", stream, "gpt-2")
    assert (out / "llmc" / "train_000000.bin").read_bytes() == (tmp_path / "want.bin").read_bytes()
    desc = json.loads((out / "meta.json").read_text())["layouts"]["llmc"]
    assert (desc["magic"], desc["version"]) == (20240520, 1)


def test_verify_fails_shards_whose_version_is_not_meta_jsons_dtype(tmp_path, ref_gpt2):
    out = _encode_llmc(tmp_path, sonnet_paragraphs(4))
    f = out / "llmc" / "train_000000.bin"
    ids = np.frombuffer(f.read_bytes()[1024:], "<u2").tolist()
    write_datafile(f, ids, "llama-3")  # the same ids, as a version 7 shard
    r = run("verify", out, "--show", "0", "--json")
    assert r.exit_code == 1
    fails = [c for c in json.loads(r.stdout)["checks"] if c["status"] == "fail" and c["name"] == "llmc_shards"]
    assert fails and any("meta.json's dtype is <u2" in p for c in fails for p in c.get("problems", [c["detail"]]))


def test_windows_has_no_uint32_hint_for_llmc_shards(shard_ids):
    src = tokensrc.open_source(SHARD)
    assert write.wide_ids_hint(src, None) is None and src.dtype == "<u4"
