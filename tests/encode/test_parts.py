"""A run in parts (--workers N): every worker runs the whole pipeline on its own parts of the
input, the coordinator only plans and merges. The promise under test: the bytes written are the
single stream's (--workers 1) whatever the worker count, the part size, the input kind, the layout
and crashes in between."""

from __future__ import annotations

import gzip
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from winsample.encode import encode_corpus
from winsample.encode.executors import shards
from winsample.errors import ConfigError, InputError, Interrupted, WinsampleError
from winsample.tokenizer import fastengine

from ..conftest import CORPUS
from .test_faults import _crash_after_checkpoints, small_batches  # noqa: F401 (a fixture)

SMALL_PARTS = "16KB"  # parts this small cut the test inputs into many


def corpus_text() -> str:
    return "".join(p.read_text(encoding="utf-8") for p in sorted(CORPUS.iterdir()) if p.suffix == ".txt")


def files_of(out: Path) -> dict[str, bytes]:
    """Every file a run left in OUT_DIR, by relative name (the lock file's pid aside)."""
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file() and p.name != ".winsample.lock"}


def encoded(tmp_path: Path, inputs: list, workers: int, **options) -> tuple[dict, dict]:
    out = tmp_path / f"out-{workers}-{len(list(tmp_path.iterdir()))}"
    summary = encode_corpus([str(i) for i in inputs], out, workers=workers, shard_size=SMALL_PARTS, **options)
    return files_of(out), summary


# --- the input kinds -----------------------------------------------------------------------------


def _text_folder(root: Path, text: str) -> list[Path]:
    """Text files of every size: empty, whitespace only, small, large (cut in parts), a BOM, UTF-16."""
    d = root / "texts"
    d.mkdir()
    rng = random.Random(3)
    sizes = [0, 5, 300, 5_000, 70_000, 150_000, 20, 90_000]
    for k, n in enumerate(sizes):
        a = rng.randrange(len(text) - n - 1)
        (d / f"t{k:02d}.txt").write_text(text[a : a + n], encoding="utf-8")
    (d / "t90-blank.txt").write_text("  \n\t\n", encoding="utf-8")
    (d / "t91-bom.txt").write_bytes(b"\xef\xbb\xbf" + text[:40_000].encode())
    (d / "t92-utf16.txt").write_bytes("\ufeff".encode("utf-16-le") + text[:30_000].encode("utf-16-le"))
    return [d]


def _jsonl(root: Path, text: str, name: str = "docs.jsonl", bad: bool = False) -> Path:
    """Records of every size (empty text, blank lines, one record larger than a part), with ids."""
    rng = random.Random(5)
    lines = []
    for k in range(400):
        n = 60_000 if k == 200 else rng.choice([0, 10, 200, 2_000])
        a = rng.randrange(len(text) - n - 1)
        lines.append(json.dumps({"text": text[a : a + n], "id": f"doc-{k}"}))
        if k % 50 == 7:
            lines.append("")
    if bad:
        lines[30] = '{"text": broken'
        lines[350] = '{"no_text": 1}'
    path = root / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _inputs(kind: str, root: Path, text: str) -> tuple[list, dict]:
    """(inputs, encode options) of each input kind."""
    if kind == "text files":
        return _text_folder(root, text), {}
    if kind == "one large text file, tail":
        (root / "big.txt").write_text(text[:400_000], encoding="utf-8")
        return [root / "big.txt"], {"split": "tail"}
    if kind == "one large text file, no val":
        (root / "big.txt").write_text(text[:300_000], encoding="utf-8")
        return [root / "big.txt"], {"val_fraction": 0.0}
    if kind == "jsonl with ids":
        return [_jsonl(root, text)], {"id_field": "id"}
    if kind == "jsonl, tail, bos, no eot":
        return [_jsonl(root, text)], {"split": "tail", "bos": True, "eot": False, "tokenizer_file": None}
    if kind == "jsonl.gz and text":
        gz = root / "docs.jsonl.gz"
        gz.write_bytes(gzip.compress(_jsonl(root, text).read_bytes(), mtime=0))
        (root / "docs.jsonl").unlink()
        (root / "after.txt").write_text(text[:50_000], encoding="utf-8")
        return [gz, root / "after.txt"], {}
    if kind == "parquet":
        pa = pytest.importorskip("pyarrow")
        import pyarrow.parquet as pq

        rows = [json.loads(line) for line in _jsonl(root, text).read_text().splitlines() if line]
        pq.write_table(pa.table({"text": [r["text"] for r in rows]}), root / "a.parquet", row_group_size=50)
        (root / "b.txt").write_text(text[:60_000], encoding="utf-8")
        return [root / "a.parquet", root / "b.txt"], {}
    if kind == "bad input skipped":
        (root / "bad.txt").write_bytes(text[:50_000].encode() + b"\xff\xfe" + text[:30_000].encode())
        return [_jsonl(root, text, bad=True), root / "bad.txt", *_text_folder(root, text)], {"on_bad_input": "skip"}
    if kind == "megatron and llm.c layouts":
        return [_jsonl(root, text), *_text_folder(root, text)], {"layout": "nanogpt,megatron,llmc", "shard_tokens": 20_000}
    raise AssertionError(kind)


KINDS = ["text files", "one large text file, tail", "one large text file, no val", "jsonl with ids",
         "jsonl, tail, bos, no eot", "jsonl.gz and text", "parquet", "bad input skipped", "megatron and llm.c layouts"]


@pytest.mark.parametrize("kind", KINDS)
def test_every_worker_count_writes_the_single_streams_bytes(tmp_path, kind):
    ins, opts = _inputs(kind, tmp_path, corpus_text())
    opts = {k: v for k, v in opts.items() if v is not None}
    want, single = encoded(tmp_path, ins, 1, **opts)
    assert "parts" not in single  # one worker: one stream
    for workers in (2, 3, 7):
        got, summary = encoded(tmp_path, ins, workers, **opts)
        assert summary["parts"] >= 2, summary  # the input really went in parts
        assert sorted(got) == sorted(want)
        for name in want:
            assert got[name] == want[name], (kind, workers, name)


def test_a_text_file_is_cut_only_at_safe_points_and_its_parts_make_one_document(tmp_path, ref_gpt2):
    text = corpus_text()[:200_000]
    (tmp_path / "one.txt").write_text(text, encoding="utf-8")
    plan = _plan_of([tmp_path / "one.txt"], split="tail")
    spans = [s for part in plan for s in part]
    assert len(spans) >= 10 and spans[0].start == 0 and spans[-1].end == len(text.encode())
    assert all(a.end == b.start for a, b in zip(spans, spans[1:]))  # contiguous, nothing read twice
    data = text.encode()
    for s in spans[1:]:  # each cut: tiktoken's ids of the two sides are its ids of the whole around it
        left, right = data[: s.start].decode()[-2000:], data[s.start :].decode()[:2000]
        assert ref_gpt2.encode_ordinary(left) + ref_gpt2.encode_ordinary(right) == ref_gpt2.encode_ordinary(left + right)
    _, summary = encoded(tmp_path, [tmp_path / "one.txt"], 2, split="tail")
    assert summary["documents"] == 1 and summary["train"]["documents"] == 1


def _plan_of(inputs, **options):
    from winsample import tokenizer
    from winsample.encode import inputs as inputs_mod
    from winsample.encode.executors import local

    sources = inputs_mod.resolve_inputs([str(i) for i in inputs])
    early = options.get("split") == "tail" or options.get("val_fraction") == 0
    return shards.plan_parts(sources, 16 << 10, tokenizer.load("gpt2"), early, local.RANGE_MIN_BYTES, "strict", None)


def test_a_text_file_whose_split_needs_its_whole_text_is_not_cut(tmp_path):
    (tmp_path / "big.txt").write_text(corpus_text()[:200_000], encoding="utf-8")
    (tmp_path / "small.txt").write_text("a small one", encoding="utf-8")
    plan = _plan_of([tmp_path / "big.txt", tmp_path / "small.txt"])  # --split doc: the hash of all its text decides
    assert all(s.whole for part in plan for s in part)


def test_the_plan_does_not_depend_on_the_worker_count_and_tapers_at_the_end(tmp_path):
    (tmp_path / "big.jsonl").write_text("".join(json.dumps({"text": f"record {k} " * 20}) + "\n" for k in range(20_000)))
    plan = _plan_of([tmp_path / "big.jsonl"])
    sizes = [sum(s.end - s.start for s in part) for part in plan]
    size = (tmp_path / "big.jsonl").stat().st_size
    assert sum(sizes) == size
    # 16 KB parts, then the last 4 × 16 KB in parts of a quarter of that (each cut after a line end)
    assert max(sizes[:-20]) < 16_384 + 500 and max(sizes[-12:]) < 4_096 + 500 < min(sizes[:-20])


# --- hypothesis: cut points, documents across part edges, empty parts, a document larger than a part


@st.composite
def corpora(draw):
    text = corpus_text()
    n_docs = draw(st.integers(1, 30))
    docs = []
    for _ in range(n_docs):
        a = draw(st.integers(0, len(text) - 1))
        n = draw(st.sampled_from([0, 1, 50, 900, 6_000, 40_000]))
        docs.append(text[a : a + n])
    return docs, draw(st.sampled_from(["1KB", "3KB", "8KB", "20KB"])), draw(st.sampled_from([2, 3])), draw(st.booleans())


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(case=corpora())
def test_any_part_size_gives_the_same_bytes(tmp_path_factory, case):
    docs, part_size, workers, tail = case
    root = tmp_path_factory.mktemp("hyp")
    jsonl = root / "docs.jsonl"
    jsonl.write_text("".join(json.dumps({"text": d}) + "\n" for d in docs), encoding="utf-8")
    (root / "whole.txt").write_text("".join(docs) or "x", encoding="utf-8")
    ins = [str(jsonl), str(root / "whole.txt")]
    opts = {"split": "tail", "val_fraction": 0.2} if tail else {"val_fraction": 0.3}
    want = files_of_run(root / "one", ins, 1, part_size, **opts)
    got = files_of_run(root / "many", ins, workers, part_size, **opts)
    assert got == want


def files_of_run(out, ins, workers, part_size, **opts):
    try:
        encode_corpus(ins, out, workers=workers, shard_size=part_size, **opts)
    except Exception as e:  # the same error either way (an empty split, no text)
        return type(e).__name__, str(e)
    return files_of(out)


# --- errors --------------------------------------------------------------------------------------


def test_bad_input_in_several_parts_is_listed_whole_and_in_order_whatever_finishes_first(tmp_path):
    text = corpus_text()
    bad = _jsonl(tmp_path, text, bad=True)
    errors = {}
    for workers in (1, 2, 3):
        with pytest.raises(Exception) as e:
            encode_corpus([str(bad)], tmp_path / f"o{workers}", workers=workers, shard_size=SMALL_PARTS)
        errors[workers] = (type(e.value).__name__, str(e.value), getattr(e.value, "details", None))
        assert not (tmp_path / f"o{workers}").exists()  # nothing half-written
    assert errors[1] == errors[2] == errors[3]
    assert errors[2][2] is not None and len(errors[2][2]) == 2 and ":31:" in errors[2][2][0] and ":351:" in errors[2][2][1]  # lines[i] is line i + 1


# --- where a part's ids go: straight into the output, or its own file copied into place ---------


def _count_places(monkeypatch) -> dict:
    seen = {"placed": 0, "copied": 0}
    add = shards.Merger.add

    def counting(self, part):
        for s in part.streams.values():
            if s.tokens:
                seen["placed" if s.placed_at is not None else "copied"] += 1
        return add(self, part)

    monkeypatch.setattr(shards.Merger, "add", counting)
    return seen


@pytest.mark.parametrize("place_known", [True, False])
def test_ids_written_in_place_and_ids_copied_into_place_give_the_same_bytes(tmp_path, monkeypatch, place_known):
    text = corpus_text()
    inputs = [_jsonl(tmp_path, text), *_text_folder(tmp_path, text)]
    want, _ = encoded(tmp_path, inputs, 1, split="tail")
    if not place_known:  # the coordinator never tells a place: every part's own file is copied by the merge
        monkeypatch.setattr(shards.Places, "publish", lambda self, k, offsets: None)
    seen = _count_places(monkeypatch)
    got, _ = encoded(tmp_path, inputs, 2, split="tail")
    assert got == want
    if place_known:  # part 0's place is known from the start, and most others' before they end
        assert seen["placed"] > 0
    else:
        assert seen["placed"] == 0 and seen["copied"] > 0


def test_parts_that_run_past_the_write_back_interval_write_the_single_streams_bytes(tmp_path, monkeypatch):
    from winsample.encode.executors import local

    text = corpus_text()
    inputs = [_jsonl(tmp_path, text)]
    want, _ = encoded(tmp_path, inputs, 1)
    monkeypatch.setattr(local, "WRITE_BACK_SECONDS", 0.0)  # a long part: a write-back is due at every batch
    got, _ = encoded(tmp_path, inputs, 2)
    assert got == want


def test_resume_reuses_parts_written_in_place_and_encodes_again_one_whose_bytes_changed(tmp_path, monkeypatch):
    text = corpus_text()
    src = _jsonl(tmp_path, text)
    want, _ = encoded(tmp_path, [src], 1)
    out = tmp_path / "out"
    finish = shards.Merger.finish

    def interrupted(self, *args, **kwargs):  # every part done, then the run stops before the merge ends
        raise Interrupted(signal.SIGTERM)

    monkeypatch.setattr(shards.Merger, "finish", interrupted)
    with pytest.raises(Interrupted):
        encode_corpus([str(src)], out, workers=2, shard_size=SMALL_PARTS)
    monkeypatch.setattr(shards.Merger, "finish", finish)
    partial = next(p for p in out.iterdir() if p.is_dir())
    dones = [json.loads(p.read_text()) for p in sorted((partial / "parts").glob("*/done.json"))]
    placed = [(n, s) for d in dones for n, s in d["streams"].items() if s["placed_at"] is not None and s["tokens"]]
    assert len(dones) > 3 and len(placed) >= 2
    name, s = placed[1]  # one byte of a part written in place changed: that part alone is encoded again
    with open(partial / f"{name}.bin", "r+b") as f:
        f.seek(s["placed_at"] + 1)
        b = f.read(1)
        f.seek(s["placed_at"] + 1)
        f.write(bytes([b[0] ^ 1]))
    summary = encode_corpus([str(src)], out, workers=2, shard_size=SMALL_PARTS, resume_partial=True)
    assert summary["resumed"] == {"parts": len(dones) - 1, "of": len(dones)}
    assert files_of(out) == want


def _stopped_before_the_merge(monkeypatch, src, out) -> None:
    """A run of ``src`` in parts into ``out`` that a SIGTERM stops once every part is done, before the merge ends."""
    finish = shards.Merger.finish
    monkeypatch.setattr(shards.Merger, "finish", lambda self, *a, **k: (_ for _ in ()).throw(Interrupted(signal.SIGTERM)))
    with pytest.raises(Interrupted):
        encode_corpus([str(src)], out, workers=2, shard_size=SMALL_PARTS)
    monkeypatch.setattr(shards.Merger, "finish", finish)


@pytest.mark.parametrize("again", [1, 3])
def test_resume_with_another_worker_count_one_included_reuses_the_parts(tmp_path, monkeypatch, again):
    """The parts depend on --shard-size, not --workers: a run in parts resumed with --workers 1
    said "nothing resumed (no checkpoint …)" with every finished part still there."""
    src = _jsonl(tmp_path, corpus_text())
    want, _ = encoded(tmp_path, [src], 1)
    out = tmp_path / "out"
    _stopped_before_the_merge(monkeypatch, src, out)
    parts = len(list((out / ".partial" / "parts").glob("*/done.json")))
    assert parts > 3
    summary = encode_corpus([str(src)], out, workers=again, shard_size=SMALL_PARTS, resume_partial=True)
    assert summary["resumed"] == {"parts": parts, "of": parts}
    assert files_of(out) == want


def test_a_link_planted_for_the_output_of_a_resumed_run_is_never_written_through(tmp_path, monkeypatch):
    src = _jsonl(tmp_path, corpus_text())
    out = tmp_path / "out"
    monkeypatch.setattr(shards.Merger, "finish", lambda self, *a, **k: (_ for _ in ()).throw(Interrupted(signal.SIGTERM)))
    with pytest.raises(Interrupted):
        encode_corpus([str(src)], out, workers=2, shard_size=SMALL_PARTS)
    monkeypatch.undo()
    staged = next(p for p in out.iterdir() if p.is_dir()) / "train.bin"
    outside = tmp_path / "outside.bin"
    outside.write_bytes(staged.read_bytes())  # the parts' bytes, so the parts written in place still check
    staged.unlink()
    staged.symlink_to(outside)
    before = outside.read_bytes()
    with pytest.raises(InputError, match="train.bin"):  # one line naming the file, exit 2
        encode_corpus([str(src)], out, workers=2, shard_size=SMALL_PARTS, resume_partial=True)
    assert outside.read_bytes() == before


# --- kill -9, then --resume ----------------------------------------------------------------------


def _cli(*args) -> list[str]:
    return [sys.executable, "-m", "winsample", *map(str, args)]


def test_kill_9_at_random_moments_then_resume_gives_the_uninterrupted_bytes(tmp_path):
    text = corpus_text()
    src = tmp_path / "in"
    src.mkdir()
    for k in range(8):  # ~6 MB: a run of a few seconds with the reference backend
        (src / f"f{k}.txt").write_text(text[k * 1000 :] + text[: k * 1000], encoding="utf-8")
    (src / "big.jsonl").write_text("".join(json.dumps({"text": text[a : a + 3000]}) + "\n" for a in range(0, 600_000, 997)))
    args = [src, "--workers", 2, "--shard-size", "128KB", "--backend", "reference", "-q", "--val-fraction", "0.2"]
    t0 = time.monotonic()
    subprocess.run(_cli("encode", *args, "-o", tmp_path / "clean"), check=True)
    seconds = time.monotonic() - t0
    want = files_of(tmp_path / "clean")
    rng = random.Random(11)
    reused = 0
    for k in range(6):
        out = tmp_path / f"out{k}"
        p = subprocess.Popen(_cli("encode", *args, "-o", out), start_new_session=True)
        time.sleep(rng.uniform(0.3, 0.9) * seconds)
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        again = [3 if a == 2 else a for a in args] if k % 2 else args  # the plan does not depend on --workers
        r = subprocess.run(_cli("encode", *again, "-o", out, "--resume", "--json"), check=True, capture_output=True)
        resumed = json.loads(r.stdout)["resumed"]
        reused += bool(resumed and resumed.get("parts"))
        assert files_of(out) == want, k
    assert reused >= 3  # the kills landed mid-run, and finished parts were used again


def test_resume_encodes_again_an_input_rewritten_at_the_same_size_with_its_mtime_put_back(tmp_path, monkeypatch):
    """A new user's trial: an input edited in place and given its old mtime back (cp -p, rsync -a,
    touch -r do so) kept its finished parts: the resumed set held the old text's ids."""
    src = _jsonl(tmp_path, corpus_text())
    out = tmp_path / "out"
    _stopped_before_the_merge(monkeypatch, src, out)
    st = src.stat()
    data = src.read_bytes()
    at = data.index(b"the")
    src.write_bytes(data[:at] + b"THE" + data[at + 3 :])  # same size, other text
    os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert (src.stat().st_size, src.stat().st_mtime_ns) == (st.st_size, st.st_mtime_ns)
    summary = encode_corpus([str(src)], out, workers=2, shard_size=SMALL_PARTS, resume_partial=True)
    assert not summary["resumed"] or summary["resumed"]["parts"] == 0
    want, _ = encoded(tmp_path, [src], 1)
    assert files_of(out) == want


def test_a_partial_of_other_options_is_not_reused(tmp_path):
    (tmp_path / "a.jsonl").write_text("".join(json.dumps({"text": f"row {k} " * 30}) + "\n" for k in range(3000)))
    out = tmp_path / "out"
    encode_corpus([str(tmp_path / "a.jsonl")], out, workers=2, shard_size=SMALL_PARTS, seed=1)
    first = files_of(out)
    s = encode_corpus([str(tmp_path / "a.jsonl")], out, workers=2, shard_size=SMALL_PARTS, seed=2, resume_partial=True)
    assert s["resumed"] is None or s["resumed"]["parts"] == 0
    assert files_of(out)["meta.json"] != first["meta.json"]


def test_resume_after_a_finished_run_says_there_was_no_checkpoint(tmp_path):
    """A finished run leaves no .partial: --resume then says so, as a one-stream run does, and
    says 'no part … was complete' only where an interrupted run's parts were found and none fits."""
    (tmp_path / "a.jsonl").write_text("".join(json.dumps({"text": f"row {k} " * 30}) + "\n" for k in range(3000)))
    out = tmp_path / "out"
    encode_corpus([str(tmp_path / "a.jsonl")], out, workers=2, shard_size=SMALL_PARTS)
    s = encode_corpus([str(tmp_path / "a.jsonl")], out, workers=2, shard_size=SMALL_PARTS, resume_partial=True)
    assert s["resumed"] == {"parts": 0, "discarded": f"no checkpoint in {out / '.partial'}"}
    one = encode_corpus([str(tmp_path / "a.jsonl")], tmp_path / "one", workers=1, resume_partial=True)
    assert one["resumed"]["discarded"] == f"no checkpoint in {tmp_path / 'one' / '.partial'}"
    unfinished = shards.part_dir(out / ".partial", 0)  # an interrupted run's part, never finished
    unfinished.mkdir(parents=True)
    (unfinished / "train.bin").write_bytes(b"\0\0")
    s = encode_corpus([str(tmp_path / "a.jsonl")], out, workers=2, shard_size=SMALL_PARTS, resume_partial=True)
    assert s["resumed"]["discarded"] == "no part of an earlier run with these inputs and options was complete"


def test_parts_written_by_the_reference_backend_are_not_resumed_by_the_fast_one(tmp_path, monkeypatch):
    """meta.json names the backend that wrote the ids: a --resume under another backend encodes
    every part again (same bytes: the fast engine proved it agrees), and says none was reused."""
    src = _jsonl(tmp_path, corpus_text())
    out = tmp_path / "out"
    finish = shards.Merger.finish
    monkeypatch.setattr(shards.Merger, "finish", lambda self, *a, **k: (_ for _ in ()).throw(Interrupted(signal.SIGTERM)))
    with pytest.raises(Interrupted):
        encode_corpus([str(src)], out, workers=2, shard_size=SMALL_PARTS, backend="reference")
    monkeypatch.setattr(shards.Merger, "finish", finish)
    assert shards.any_done(out / ".partial")
    s = encode_corpus([str(src)], out, workers=2, shard_size=SMALL_PARTS, resume_partial=True)
    assert s["backend"] == "fast" and s["resumed"]["parts"] == 0
    assert json.loads((out / "meta.json").read_text())["backend"]["name"] == "fast"
    s = encode_corpus([str(src)], tmp_path / "again", workers=2, shard_size=SMALL_PARTS, backend="reference")
    assert files_of(out)["train.bin"] == files_of(tmp_path / "again")["train.bin"]


def test_resume_in_parts_refuses_to_drop_a_one_stream_runs_checkpoint(tmp_path, small_batches):
    """A --workers 1 run interrupted after some inputs leaves a journal; --resume with --workers 2
    cannot continue it, and says how to, instead of deleting it as 'no checkpoint'."""
    src = tmp_path / "in"
    src.mkdir()
    for k in range(40):
        (src / f"d{k:02d}.txt").write_text(f"file {k} " * 2000)
    out = tmp_path / "out"
    _crash_after_checkpoints(out, [str(src)], after=3, workers=1)
    journal = out / ".partial" / "journal.json"
    assert journal.is_file()
    before = journal.read_bytes()
    with pytest.raises(ConfigError, match="resume it with --workers 1 --resume"):
        encode_corpus([str(src)], out, workers=2, shard_size=SMALL_PARTS, resume_partial=True)
    assert journal.read_bytes() == before
    s = encode_corpus([str(src)], out, workers=1, resume_partial=True)
    assert s["resumed"] and s["resumed"].get("inputs", 0) > 0


def test_a_part_record_naming_a_file_outside_its_folder_is_not_reused(tmp_path):
    folder = shards.part_dir(tmp_path, 0)
    folder.mkdir(parents=True)
    outside = tmp_path.parent / "outside.bin"
    outside.write_bytes(b"\0\0")
    stream = {"name": "train", "tokens": 1, "documents": 0, "max_token": 0, "checksum": "x", "records": 0, "id_bytes": 0,
              "file": f"../../../{outside.name}", "placed_at": None, "starts": "s", "prov": "p", "prov_ids": "i", "sums": {}}
    (folder / shards.DONE).write_text(json.dumps({"format": shards.DONE_FORMAT, "version": 1, "key": {"run": "k"}, "stats": {},
                                                  "lines": {}, "input_bytes": 0, "decompressed": {}, "streams": {"train": stream}}))
    with pytest.raises(ValueError, match="file name"):  # refused before any path is built from it
        shards.Stream.from_json(folder, stream, 2)
    assert shards.read_done(folder, {"run": "k"}, 0, 2) is None
    stream["file"] = "train.bin"  # the same record naming a file of its own folder is taken
    assert shards.Stream.from_json(folder, stream, 2).path == folder / "train.bin"


def test_a_part_whose_run_has_ended_writes_nothing_into_the_next_runs_output(tmp_path):
    """Each run maps a places table of its own: a worker still holding an earlier run's table (a
    task that outlived its run) is refused before it writes into the output or spills a file."""
    names = ["train"]
    out = tmp_path / "train.bin"
    out.write_bytes(b"\0" * 64)
    held = fastengine.held_outside()
    first = shards.Places(tmp_path / "places.bin", names, parts=2)
    first.publish(0, {"train": 0})
    late = shards.Places(tmp_path / "places.bin", names)  # a worker of the first run
    placed = shards.PlacedFile(tmp_path / "own.bin", out, late, 0, "train", 1 << 20)
    shards.Places(tmp_path / "places.bin", names, parts=2)  # the next run's table, same folder
    with pytest.raises(WinsampleError, match="run it belongs to has ended"):
        placed.write(b"\1" * 8)
    placed.close()  # closing what was refused writes nothing either
    assert out.read_bytes() == b"\0" * 64 and not (tmp_path / "own.bin").exists()
    assert fastengine.held_outside() == held  # the refused ids no longer count as held
    ok = shards.PlacedFile(tmp_path / "own2.bin", out, shards.Places(tmp_path / "places.bin", names), 1, "train", 1 << 20)
    ok.write(b"\1" * 8)  # a worker of the current run, its place not yet known: held, then its own file
    ok.close()
    assert (tmp_path / "own2.bin").read_bytes() == b"\1" * 8
