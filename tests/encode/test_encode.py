"""winsample encode: bytes, meta.json, splits, parallel determinism, atomic commits.

Expected ids always come from tiktoken directly (ref_gpt2 / ref_cl100k), document by document.
"""

from __future__ import annotations

import fcntl
import gzip
import json
import math
import os

import numpy as np
import pytest
import xxhash
from click.testing import CliRunner

from winsample import disk, formats
from winsample.cli import main
from winsample.encode import encode_corpus, pipeline
from winsample.encode.executors import checkpoint
from winsample.encode.executors import local as encode_mod
from winsample.errors import ConfigError, InputError

from ..conftest import CORPUS

EOT = 50256

DOCS = {
    "a.txt": "Hello world.\nThis is a document.\n",
    "b.txt": "Second document, with <|endoftext|> written in it as plain text.",
    "c/d.md": "Nested\r\nCRLF lines\r\n\r\nand a blank one. 滑动窗口。 👨\u200d👩\u200d👧",
    "c/e.txt": "Zoe\u0308 cafe\u0301 — 12345 'tis don't",
}


def write_tree(root, docs=DOCS):
    for name, text in docs.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(text.encode("utf-8"))
    return root


def ref_stream(ref, texts, eot=True):
    out = []
    for t in texts:
        out += ref.encode_ordinary(t) + ([EOT] if eot else [])
    return out


def cli(args, input=None):
    return CliRunner().invoke(main, ["encode", *map(str, args)], input=input)


def read_split(out, split):
    meta = formats.read_meta(out / "meta.json")
    entry = meta["splits"][split]
    ids = np.fromfile(out / entry["file"], dtype=meta["dtype"])
    starts = formats.read_doc_index(out / entry["doc_index"])
    return meta, entry, ids, starts


def docs_of(ids, starts):
    bounds = [*map(int, starts), len(ids)]
    return [ids[a:b].tolist() for a, b in zip(bounds, bounds[1:])]


def snapshot(folder):
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


# --- bytes ----------------------------------------------------------------------------------


def test_val_fraction_0_train_bin_is_tiktoken_concatenation(tmp_path, ref_gpt2):
    src = write_tree(tmp_path / "in")
    out = tmp_path / "out"
    r = cli([src, "-o", out, "--val-fraction", "0", "--workers", "1"])
    assert r.exit_code == 0, r.stderr
    texts = [DOCS[k] for k in sorted(DOCS, key=lambda k: tuple(k.split("/")))]
    expected = ref_stream(ref_gpt2, texts)
    assert (out / "train.bin").read_bytes() == np.array(expected, "<u2").tobytes()
    assert (out / "val.bin").read_bytes() == b""
    assert "<|endoftext|>" in DOCS["b.txt"] and expected.count(EOT) == len(DOCS)  # text, not a control id


def test_shipped_corpus_matches_tiktoken_with_two_workers(tmp_path, ref_gpt2):
    out = tmp_path / "out"
    s = encode_corpus([str(CORPUS)], out, val_fraction=0, workers=2)
    files = sorted(p for p in CORPUS.iterdir() if p.suffix in (".txt", ".md"))
    expected = ref_stream(ref_gpt2, [p.read_text(encoding="utf-8") for p in files])
    assert np.fromfile(out / "train.bin", "<u2").tolist() == expected
    assert s["train"] == {"tokens": len(expected), "documents": len(files)}


def test_no_eot_writes_only_document_ids_and_index_keeps_edges(tmp_path, ref_gpt2):
    src = write_tree(tmp_path / "in")
    out = tmp_path / "out"
    assert cli([src, "-o", out, "--val-fraction", "0", "--no-eot", "--workers", "1"]).exit_code == 0
    texts = [DOCS[k] for k in sorted(DOCS, key=lambda k: tuple(k.split("/")))]
    meta, entry, ids, starts = read_split(out, "train")
    assert ids.tolist() == ref_stream(ref_gpt2, texts, eot=False)
    assert docs_of(ids, starts) == [ref_gpt2.encode_ordinary(t) for t in texts]
    assert meta["eot_appended"] is False


def test_meta_json_describes_the_files(tmp_path, ref_gpt2):
    src = write_tree(tmp_path / "in")
    out = tmp_path / "out"
    assert cli([src, "-o", out, "--val-fraction", "0.5", "--seed", "7", "--workers", "1"]).exit_code == 0
    meta = formats.validate_meta(json.loads((out / "meta.json").read_text()))
    assert meta["dtype"] == "<u2" and meta["tokenizer"]["name"] == "gpt2"
    assert meta["tokenizer"]["eot"] == EOT and meta["tokenizer"]["n_vocab"] == 50257
    assert meta["split"] == {"method": "doc", "fraction": 0.5, "seed": 7}
    assert meta["inputs"] == [
        {"path": str(src / k), "bytes": len(DOCS[k].encode())} for k in sorted(DOCS, key=lambda k: tuple(k.split("/")))
    ]
    for split in ("train", "val"):
        _, entry, ids, starts = read_split(out, split)
        raw = (out / entry["file"]).read_bytes()
        assert entry["bytes"] == len(raw) == 2 * entry["tokens"] == 2 * len(ids)
        assert entry["checksum"] == "xxh3_128:" + xxhash.xxh3_128(raw).hexdigest()
        assert entry["documents"] == len(starts) and (entry["tokens"] == 0 or starts[0] == 0)
        assert entry["max_token"] == (int(ids.max()) if len(ids) else None)
    assert not any(k in json.dumps(meta) for k in ("time", "date"))


def test_same_input_gives_same_bytes_meta_included(tmp_path):
    src = write_tree(tmp_path / "in")
    a, b = tmp_path / "a", tmp_path / "b"
    encode_corpus([str(src)], a, val_fraction=0.5, seed=7, workers=1)
    encode_corpus([str(src)], b, val_fraction=0.5, seed=7, workers=1)
    assert snapshot(a) == snapshot(b)


def test_nanogpt_reads_train_bin_with_plain_memmap(tmp_path, ref_gpt2):
    src = write_tree(tmp_path / "in")
    out = tmp_path / "out"
    encode_corpus([str(src)], out, val_fraction=0, workers=1)
    data = np.memmap(out / "train.bin", dtype=np.uint16, mode="r")  # nanoGPT train.py, verbatim
    assert data[: len(ref_gpt2.encode_ordinary(DOCS["a.txt"]))].tolist() == ref_gpt2.encode_ordinary(DOCS["a.txt"])


def test_empty_and_whitespace_documents_are_skipped_and_counted(tmp_path, ref_gpt2):
    src = write_tree(tmp_path / "in", {"1.txt": "real text", "2.txt": "", "3.txt": " \n\t\r\n ", "4.txt": "more"})
    out = tmp_path / "out"
    r = cli([src, "-o", out, "--val-fraction", "0", "--workers", "1", "--json"])
    assert r.exit_code == 0
    s = json.loads(r.stdout)
    assert s["skipped_empty"] == 2 and s["train"]["documents"] == 2
    assert np.fromfile(out / "train.bin", "<u2").tolist() == ref_stream(ref_gpt2, ["real text", "more"])
    assert r.stderr.startswith("encoded 2 documents (2 more read: empty, skipped): train ")  # 2 written, 4 read


# --- splits -----------------------------------------------------------------------------------


def _many_docs(n, start=0):
    return {f"doc{i:04d}.txt": f"Document number {i} talks about topic {i * 7919 % 101}.\n" for i in range(start, start + n)}


def _texts_by_side(out, ref):
    sides = {}
    for split in ("train", "val"):
        _, _, ids, starts = read_split(out, split)
        sides[split] = [ref.decode(d[:-1]) for d in docs_of(ids, starts)]  # drop the EOT
    return sides


def test_doc_split_follows_documented_hash_and_is_stable_when_documents_are_added(tmp_path, ref_gpt2):
    docs = _many_docs(60)
    docs["dup1.txt"] = docs["dup2.txt"] = "An identical document.\n"
    src = write_tree(tmp_path / "in", docs)
    encode_corpus([str(src)], tmp_path / "o1", val_fraction=0.25, seed=3, workers=1)
    before = _texts_by_side(tmp_path / "o1", ref_gpt2)
    # The documented rule, computed here independently.
    for text in docs.values():
        h = xxhash.xxh3_64_intdigest(b"3\0" + text.encode())
        side = "val" if h < int(0.25 * 2**64) else "train"
        assert text in before[side]
    assert sorted(before["train"] + before["val"]) == sorted(docs.values())  # nothing lost or doubled
    dup = "An identical document.\n"
    assert before["train"].count(dup) in (0, 2) and before["val"].count(dup) in (0, 2)
    assert 5 < len(before["val"]) < 30

    write_tree(src, _many_docs(40, start=1000))
    encode_corpus([str(src)], tmp_path / "o2", val_fraction=0.25, seed=3, workers=1)
    after = _texts_by_side(tmp_path / "o2", ref_gpt2)
    for side in ("train", "val"):
        assert set(before[side]) <= set(after[side])


def test_tail_split_puts_last_floor_fraction_of_tokens_in_val(tmp_path, ref_gpt2):
    docs = _many_docs(10)
    src = write_tree(tmp_path / "in", docs)
    out = tmp_path / "out"
    r = cli([src, "-o", out, "--split", "tail", "--val-fraction", "0.15", "--workers", "1", "--json"])
    assert r.exit_code == 0, r.stderr
    stream = ref_stream(ref_gpt2, [docs[k] for k in sorted(docs)])
    n_val = math.floor(len(stream) * 0.15)
    _, tentry, train, tstarts = read_split(out, "train")
    _, ventry, val, vstarts = read_split(out, "val")
    assert train.tolist() == stream[: len(stream) - n_val] and val.tolist() == stream[len(stream) - n_val :]
    # Document starts: every original start, split at the cut; val starts with the tail piece.
    all_starts = np.cumsum([0] + [len(ref_gpt2.encode_ordinary(docs[k])) + 1 for k in sorted(docs)])[:-1]
    cut = len(stream) - n_val
    assert tstarts.tolist() == [s for s in all_starts if s < cut]
    expected_v = [s - cut for s in all_starts if s >= cut]
    if cut not in all_starts:
        expected_v = [0] + expected_v
    assert vstarts.tolist() == expected_v
    s = json.loads(r.stdout)
    assert s["val"] == {"tokens": n_val, "documents": len(expected_v)}
    assert tentry["checksum"] == disk.checksum_file(out / "train.bin")
    assert ventry["checksum"] == disk.checksum_file(out / "val.bin")


def test_tail_split_checksums_right_when_cut_is_past_snapshots(tmp_path, monkeypatch, ref_gpt2):
    monkeypatch.setattr(pipeline, "SNAPSHOT_BYTES", 64)  # many snapshots, pruned as the stream grows
    monkeypatch.setattr(encode_mod, "TASK_CHARS", 200)
    docs = _many_docs(80)
    src = write_tree(tmp_path / "in", docs)
    out = tmp_path / "out"
    encode_corpus([str(src)], out, split="tail", val_fraction=0.3, workers=1)
    for split in ("train", "val"):
        _, entry, ids, _ = read_split(out, split)
        assert entry["checksum"] == disk.checksum_file(out / entry["file"])
        assert entry["max_token"] == int(ids.max())


def test_single_document_doc_split_fails_with_tail_hint(tmp_path):
    (tmp_path / "one.txt").write_text("just one document here")
    r = cli([tmp_path / "one.txt", "-o", tmp_path / "out", "--workers", "1"])
    assert r.exit_code == 2 and "--split tail" in r.stderr
    assert not (tmp_path / "out" / "train.bin").exists()


# --- parallel, big documents, memory --------------------------------------------------------------


def test_worker_count_does_not_change_any_byte(tmp_path, monkeypatch):
    monkeypatch.setattr(encode_mod, "PIECE_CHARS", 3000)  # big documents cut into many pieces
    monkeypatch.setattr(encode_mod, "TASK_CHARS", 5000)
    src = write_tree(tmp_path / "in", _many_docs(30))
    (src / "big.txt").write_text((CORPUS / "hamlet.txt").read_text(encoding="utf-8"))
    one, two = tmp_path / "w1", tmp_path / "w2"
    encode_corpus([str(src)], one, val_fraction=0.2, workers=1)
    encode_corpus([str(src)], two, val_fraction=0.2, workers=2)
    assert snapshot(one) == snapshot(two)


def test_big_document_cut_and_spilled_still_matches_tiktoken(tmp_path, monkeypatch, ref_gpt2):
    monkeypatch.setattr(encode_mod, "PIECE_CHARS", 2000)
    monkeypatch.setattr(encode_mod, "HOLD_BYTES", 4000)  # held ids go to the spill file
    text = "".join((CORPUS / n).read_text(encoding="utf-8") for n in ("macbeth.txt", "zh_sliding_windows.txt"))
    (tmp_path / "big.txt").write_text(text, encoding="utf-8")
    (tmp_path / "small.txt").write_text("a small one", encoding="utf-8")
    out = tmp_path / "out"
    # A seed that sends the big document to val and the small one to train, by the documented rule.
    seed = next(s for s in range(100) if [xxhash.xxh3_64_intdigest(f"{s}\0".encode() + t.encode()) < 2**63 for t in (text, "a small one")] == [True, False])
    encode_corpus([str(tmp_path / "big.txt"), str(tmp_path / "small.txt")], out, val_fraction=0.5, seed=seed, workers=2)
    got = {}
    for split in ("train", "val"):
        _, _, ids, starts = read_split(out, split)
        for d in docs_of(ids, starts):
            got[ref_gpt2.decode(d[:-1])] = d
    assert got[text] == ref_gpt2.encode_ordinary(text) + [EOT]
    assert got["a small one"] == ref_gpt2.encode_ordinary("a small one") + [EOT]


def test_run_without_safe_cut_is_cut_by_force_and_reported(tmp_path, monkeypatch, ref_gpt2):
    monkeypatch.setattr(encode_mod, "PIECE_CHARS", 500)
    monkeypatch.setattr(encode_mod, "LONG_RUN_CHARS", 2000)
    text = "intro words\n" + "。，！" * 3000 + "\nend"
    (tmp_path / "p.txt").write_text(text, encoding="utf-8")
    out = tmp_path / "out"
    r = cli([tmp_path / "p.txt", "-o", out, "--val-fraction", "0", "--workers", "1", "--json"])
    assert r.exit_code == 0
    assert json.loads(r.stdout)["forced_cuts"] == 4  # 9000 chars after the line break at 11: cuts at 2011, 4011, 6011, 8011
    assert "4 forced cuts in text with no safe cut for 4 Mi characters" in r.stderr  # LONG_RUN_CHARS in words (patched here)
    cuts = [0, 2011, 4011, 6011, 8011, len(text)]
    assert np.fromfile(out / "train.bin", "<u2").tolist() == \
        [i for a, b in zip(cuts, cuts[1:]) for i in ref_gpt2.encode_ordinary(text[a:b])] + [EOT]


@pytest.mark.slow
def test_peak_memory_does_not_grow_with_input_size(tmp_path):
    import subprocess
    import sys

    play = (CORPUS / "hamlet.txt").read_text(encoding="utf-8")
    # Small buffers so that both sizes are well past every fixed-size buffer (the plateau).
    script = (
        "import sys; from winsample.disk import checksums as f; from winsample.encode import pipeline as p; from winsample.encode.executors import local as e;"
        "f.CHUNK_BYTES = 1 << 20; p.SNAPSHOT_BYTES = 2 << 20; e.HOLD_BYTES = 2 << 20;"
        "e.encode_corpus(sys.argv[1:3], sys.argv[3], val_fraction=0.5, seed=int(sys.argv[4]), workers=1);"
        # VmHWM is this process's own peak; ru_maxrss would also count the forking parent.
        "print([l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM')][0])"
    )
    small = tmp_path / "small.txt"
    small.write_text("a small document for the other split")

    def to_val(seed, text):  # the documented doc-split rule
        return xxhash.xxh3_64_intdigest(f"{seed}\0".encode() + text.encode()) < 2**63

    peaks = []
    for mb in (4, 24):
        big = play * (mb * 1_000_000 // len(play))
        p = tmp_path / f"{mb}.txt"
        p.write_text(big, encoding="utf-8")
        # The big document goes to val: its ids are held (and spilled) until its end.
        seed = next(s for s in range(100) if to_val(s, big) and not to_val(s, small.read_text()))
        del big
        r = subprocess.run([sys.executable, "-c", script, p, small, tmp_path / f"o{mb}", str(seed)], capture_output=True, text=True, check=True)
        peaks.append(int(r.stdout) / 1024)  # kB → MiB
    # 6x the input; nanoGPT's pattern would add ~14 bytes of RSS per input byte (~280 MB here).
    assert peaks[1] < peaks[0] * 1.2, peaks


# --- encodings and dtypes ---------------------------------------------------------------------------


def test_cl100k_from_tokenizer_file_writes_uint32(tmp_path, cl100k_ranks_file, ref_cl100k):
    src = write_tree(tmp_path / "in")
    out = tmp_path / "out"
    r = cli([src, "-o", out, "--tokenizer-file", cl100k_ranks_file, "--pattern", "cl100k", "--val-fraction", "0", "--workers", "2"])
    assert r.exit_code == 0, r.stderr
    meta = formats.read_meta(out / "meta.json")
    eot = max(ref_cl100k._mergeable_ranks.values()) + 1  # tokenizer.load_encoding: the id after the last rank
    assert meta["dtype"] == "<u4" and meta["tokenizer"]["eot"] == eot
    assert meta["tokenizer"]["file"] == str(cl100k_ranks_file) and meta["tokenizer"]["pattern"] == "cl100k"
    texts = [DOCS[k] for k in sorted(DOCS, key=lambda k: tuple(k.split("/")))]
    expected = [i for t in texts for i in ref_cl100k.encode_ordinary(t) + [eot]]
    assert np.fromfile(out / "train.bin", "<u4").tolist() == expected
    assert (out / "train.bin").stat().st_size == 4 * len(expected)


def test_uint16_refused_for_vocab_over_65536(tmp_path, cl100k_ranks_file):
    src = write_tree(tmp_path / "in")
    r = cli([src, "-o", tmp_path / "out", "--tokenizer-file", cl100k_ranks_file, "--pattern", "cl100k", "--dtype", "uint16"])
    assert r.exit_code == 2
    assert "cl100k_base" in r.stderr and "--dtype uint32" in r.stderr
    assert not (tmp_path / "out").exists()


def test_uint32_on_request_for_gpt2(tmp_path, ref_gpt2):
    src = write_tree(tmp_path / "in", {"a.txt": "hi there"})
    out = tmp_path / "out"
    assert cli([src, "-o", out, "--dtype", "uint32", "--val-fraction", "0", "--workers", "1"]).exit_code == 0
    assert np.fromfile(out / "train.bin", "<u4").tolist() == ref_gpt2.encode_ordinary("hi there") + [EOT]


# --- other inputs ---------------------------------------------------------------------------------


def test_jsonl_gz_text_gz_and_folder_order(tmp_path, ref_gpt2):
    src = tmp_path / "in"
    src.mkdir()
    lines = [{"body": "first line doc"}, {"body": "second \u00e9 doc", "x": 1}]
    with gzip.open(src / "b.jsonl.gz", "wt", encoding="utf-8") as f:
        f.write("\n".join(json.dumps(o) for o in lines) + "\n\n")
    (src / "a.txt.gz").write_bytes(gzip.compress(b"gzipped text"))
    (src / "c.csv").write_text("not, encoded")  # other extensions are skipped
    (src / "sub").mkdir()
    (src / "sub" / "z.text").write_text("deep text")
    out = tmp_path / "out"
    r = cli([src, "-o", out, "--text-field", "body", "--val-fraction", "0", "--workers", "1"])
    assert r.exit_code == 0, r.stderr
    texts = ["gzipped text", "first line doc", "second \u00e9 doc", "deep text"]
    assert np.fromfile(out / "train.bin", "<u2").tolist() == ref_stream(ref_gpt2, texts)


def test_arguments_keep_their_order(tmp_path, ref_gpt2):
    src = write_tree(tmp_path / "in", {"x.txt": "zzz last name first", "y.txt": "aaa"})
    out = tmp_path / "out"
    assert cli([src / "y.txt", src / "x.txt", "-o", out, "--val-fraction", "0", "--workers", "1"]).exit_code == 0
    assert np.fromfile(out / "train.bin", "<u2").tolist() == ref_stream(ref_gpt2, ["aaa", "zzz last name first"])


def test_stdin_text_and_stdin_jsonl(tmp_path, ref_gpt2):
    out = tmp_path / "out"
    r = cli(["-", "-o", out, "--val-fraction", "0", "--workers", "1"], input="piped text\nover lines\n")
    assert r.exit_code == 0, r.stderr
    assert np.fromfile(out / "train.bin", "<u2").tolist() == ref_stream(ref_gpt2, ["piped text\nover lines\n"])
    assert formats.read_meta(out / "meta.json")["inputs"] == [{"path": "-", "bytes": 22}]
    r = cli(["-", "-o", out, "--format", "jsonl", "--val-fraction", "0", "--workers", "1"], input='{"text": "one"}\n{"text": "two"}\n')
    assert r.exit_code == 0, r.stderr
    assert np.fromfile(out / "train.bin", "<u2").tolist() == ref_stream(ref_gpt2, ["one", "two"])


def test_parquet_column(tmp_path, ref_gpt2):
    import pyarrow as pa  # the test extra installs it: a missing pyarrow fails, never skips
    import pyarrow.parquet as pq

    texts = ["parquet row one", "row two 滑动"]
    pq.write_table(pa.table({"content": texts, "n": [1, 2]}), tmp_path / "t.parquet")
    out = tmp_path / "out"
    r = cli([tmp_path / "t.parquet", "-o", out, "--text-field", "content", "--val-fraction", "0", "--workers", "1"])
    assert r.exit_code == 0, r.stderr
    assert np.fromfile(out / "train.bin", "<u2").tolist() == ref_stream(ref_gpt2, texts)
    r = cli([tmp_path / "t.parquet", "-o", out, "--val-fraction", "0", "--workers", "1"])
    assert r.exit_code == 1 and "no column 'text'" in r.stderr


def test_a_dictionary_encoded_parquet_text_column_reads_as_its_strings(tmp_path, ref_gpt2):
    """New-user trial: a text column written dictionary-encoded (``pa.array(texts).dictionary_encode()``,
    a writer's choice for repeated values) was refused as "type dictionary<values=string, …>, not
    string". Its rows are the strings: the ids are tiktoken's, as for the plain column; so is an
    id column written the same way."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    texts = ["parquet row one", "row two 滑动", "parquet row one"]
    pq.write_table(pa.table({"text": pa.array(texts).dictionary_encode(), "id": pa.array(["a", "b", "c"]).dictionary_encode()}),
                   tmp_path / "d.parquet")
    out = tmp_path / "out"
    r = cli([tmp_path / "d.parquet", "-o", out, "--id-field", "id", "--val-fraction", "0", "--workers", "1"])
    assert r.exit_code == 0, r.stderr
    assert np.fromfile(out / "train.bin", "<u2").tolist() == ref_stream(ref_gpt2, texts)


def test_big_jsonl_document_is_cut_and_still_exact(tmp_path, monkeypatch, ref_gpt2):
    monkeypatch.setattr(encode_mod, "PIECE_CHARS", 1000)
    text = (CORPUS / "sonnets.txt").read_text(encoding="utf-8")[:30000]
    (tmp_path / "d.jsonl").write_text(json.dumps({"text": text}) + "\n" + json.dumps({"text": "small"}) + "\n")
    seen = []
    real = encode_mod.encode_texts
    monkeypatch.setattr(encode_mod, "encode_texts", lambda *a: seen.append(len(a[2])) or real(*a))
    out = tmp_path / "out"
    encode_corpus([str(tmp_path / "d.jsonl")], out, val_fraction=0, workers=1)
    assert np.fromfile(out / "train.bin", "<u2").tolist() == ref_stream(ref_gpt2, [text, "small"])
    assert sum(seen) > 20  # sent as many pieces, not one 30 KB string


def test_inputs_with_no_text_at_all_exit_1(tmp_path):
    write_tree(tmp_path / "in", {"a.txt": "", "b.txt": "  \n"})
    r = cli([tmp_path / "in", "-o", tmp_path / "out", "--workers", "1"])
    assert r.exit_code == 1 and "no document has any text" in r.stderr
    assert not (tmp_path / "out" / "meta.json").exists()


def test_inputs_whose_records_were_all_skipped_as_bad_say_so(tmp_path):
    (tmp_path / "a.jsonl").write_text('{"title": 1}\n{"body": 2}\n')
    r = cli([tmp_path / "a.jsonl", "-o", tmp_path / "out", "--split", "tail", "--on-bad-input", "skip"])
    assert r.exit_code == 1 and r.stdout == ""
    a = tmp_path / "a.jsonl"
    assert r.stderr.splitlines()[-1] == (f"error: {a}: no document has any text (2 records skipped as bad input, the first:"
                                         f" {a}:1: no field 'text' (fields: title); pick one with --text-field (a.b for a"
                                         " field inside an object)); nothing to encode")


def test_an_empty_jsonl_file_says_it_holds_no_document(tmp_path):
    (tmp_path / "empty.jsonl").write_bytes(b"")
    r = cli([tmp_path / "empty.jsonl", "-o", tmp_path / "out", "--split", "tail"])
    assert r.exit_code == 1 and r.stdout == ""
    assert r.stderr == (f"error: {tmp_path / 'empty.jsonl'}: no document has any text (the input holds no document at all);"
                        " nothing to encode\n")
    assert not (tmp_path / "out").exists()


def test_parquet_without_pyarrow_names_the_extra(tmp_path, monkeypatch):
    import sys

    (tmp_path / "t.parquet").write_bytes(b"PAR1")
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow → ImportError
    r = cli([tmp_path / "t.parquet", "-o", tmp_path / "out", "--workers", "1"])
    assert r.exit_code == 2 and "pip install 'winsample[parquet]'" in r.stderr


def test_errors_replace_continues_and_counts(tmp_path, ref_gpt2):
    (tmp_path / "bad.txt").write_bytes(b"good \xff\xfe bytes \xc3")
    out = tmp_path / "out"
    r = cli([tmp_path / "bad.txt", "-o", out, "--errors", "replace", "--val-fraction", "0", "--workers", "1", "--json"])
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["replaced_characters"] == 3
    text = b"good \xff\xfe bytes \xc3".decode("utf-8", "replace")
    assert np.fromfile(out / "train.bin", "<u2").tolist() == ref_stream(ref_gpt2, [text])


# --- bad inputs: exit code, one line naming file and position, previous set intact ---------------------


@pytest.fixture
def previous_set(tmp_path):
    out = tmp_path / "out"
    encode_corpus([str(write_tree(tmp_path / "good"))], out, val_fraction=0.5, seed=7, workers=1)
    return out, snapshot(out)


def assert_untouched(out, before):
    assert snapshot(out) == before
    assert not (out / disk.STAGING_DIR).exists()
    assert not list(out.glob("*.tmp"))


BIG_PREFIX = "ok text line\n" * 100_000  # 1.3 MB: the bad byte lies in the second read chunk


@pytest.mark.parametrize(
    ("name", "content", "code", "needles"),
    [
        ("bad.txt", b"caf\xc3\n\nline three \xff", 1, ["bad.txt", "invalid UTF-8", "byte 3", "line 1", "--errors replace"]),
        ("late.txt", BIG_PREFIX.encode() + b"x\xe9y", 1, ["late.txt", f"byte {len(BIG_PREFIX) + 1}", f"line {100_001}"]),
        ("bin.txt", b"text then \x00 NUL", 1, ["bin.txt", "binary file", "byte 10"]),
        ("j.jsonl", b'{"text": "ok"}\n{"text": oops}\n', 1, ["j.jsonl:2", "not valid JSON"]),
        ("j.jsonl", b'{"text": "ok"}\n\n{"body": "x"}\n', 1, ["j.jsonl:3", "no field 'text'", "--text-field"]),
        ("j.jsonl", b'{"text": 42}\n', 1, ["j.jsonl:1", "'text' is int, not a string"]),
        ("j.jsonl", b'{"text": "a"}\n{"text": "\xff"}\n', 1, ["j.jsonl", "invalid UTF-8", "byte 24", "line 2"]),
    ],
)
def test_bad_data_exit_1_one_line_nothing_written(tmp_path, previous_set, name, content, code, needles):
    out, before = previous_set
    (tmp_path / name).write_bytes(content)
    r = cli([tmp_path / name, "-o", out, "--split", "tail", "--workers", "1"])
    assert r.exit_code == code, r.stderr
    line = r.stderr.strip()
    assert "\n" not in line and line.startswith("error: ")
    for n in needles:
        assert n in line, (n, line)
    assert r.stdout == ""
    assert_untouched(out, before)


def test_missing_path_exit_2(tmp_path, previous_set):
    out, before = previous_set
    r = cli([tmp_path / "nope.txt", "-o", out])
    assert r.exit_code == 2 and "nope.txt: no such file" in r.stderr
    assert_untouched(out, before)


def test_folder_without_matching_files_exit_2(tmp_path, previous_set):
    out, before = previous_set
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "data.csv").write_text("a,b")
    r = cli([tmp_path / "empty", "-o", out])
    assert r.exit_code == 2 and "empty: folder has no" in r.stderr
    assert_untouched(out, before)


def test_unknown_encoding_exit_2(tmp_path, previous_set):
    out, before = previous_set
    r = cli([tmp_path / "good", "-o", out, "--encoding", "nope_base"])
    assert r.exit_code == 2 and "unknown encoding 'nope_base'" in r.stderr
    assert_untouched(out, before)


def test_output_path_that_is_a_file_exit_2(tmp_path):
    write_tree(tmp_path / "in")
    (tmp_path / "taken").write_text("I am a file")
    r = cli([tmp_path / "in", "-o", tmp_path / "taken"])
    assert r.exit_code == 2 and "taken: output path is a file" in r.stderr
    assert (tmp_path / "taken").read_text() == "I am a file"


def test_an_output_path_under_a_file_or_a_work_folder_name_taken_by_a_file_says_what_is_in_the_way(tmp_path):
    """Both said only "File exists": -o ok.txt/sub, and a plain file named OUT/.partial."""
    write_tree(tmp_path / "in")
    (tmp_path / "ok.txt").write_text("a file")
    r = cli([tmp_path / "in", "-o", tmp_path / "ok.txt" / "sub", "--val-fraction", "0"])
    assert r.exit_code == 2
    assert r.stderr.strip().endswith(f"cannot create output folder: {tmp_path / 'ok.txt'} exists and is not a folder")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / ".partial").write_text("mine")
    r = cli([tmp_path / "in", "-o", tmp_path / "out", "--val-fraction", "0"])
    assert r.exit_code == 2
    assert r.stderr.strip().endswith(f"{tmp_path / 'out' / '.partial'} already exists and is in the way: move it away and run again")
    assert (tmp_path / "out" / ".partial").read_text() == "mine"


def test_an_output_name_that_is_a_link_is_refused_before_anything_is_encoded(tmp_path):
    """OUT/meta.json a link: the commit would replace the link (the Ray runner found it only after
    the whole run); refused first, exit 2, nothing written."""
    write_tree(tmp_path / "in")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "meta.json").symlink_to(tmp_path / "elsewhere.json")
    r = cli([tmp_path / "in", "-o", tmp_path / "out"])
    assert r.exit_code == 2 and "meta.json: cannot write: it is a symbolic link" in r.stderr
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["meta.json"]


def test_output_path_that_is_a_fifo_or_a_dangling_link_says_what_it_is(tmp_path):
    write_tree(tmp_path / "in")
    os.mkfifo(tmp_path / "fifo")
    r = cli([tmp_path / "in", "-o", tmp_path / "fifo"])
    assert r.exit_code == 2 and r.stderr.strip().endswith("fifo: output path is not a folder (a FIFO, socket or device); pick another -o")
    (tmp_path / "dangling").symlink_to(tmp_path / "gone")
    r = cli([tmp_path / "in", "-o", tmp_path / "dangling"])
    assert r.exit_code == 2 and f"dangling: output path is a symbolic link to {tmp_path / 'gone'}, which does not exist" in r.stderr
    assert not (tmp_path / "gone").exists()
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    r = cli([tmp_path / "in", "-o", tmp_path / "loop"])
    assert r.exit_code == 2 and "loop: output path is a symbolic link to" in r.stderr and "leads back to itself" in r.stderr


@pytest.mark.parametrize("name", ["train.prov.npy", "val.prov.npy", "train.prov.ids.npy", "val.prov.ids.npy",
                                  "train.mask.bin", "val.mask.bin", "meta.pkl", "train.idx"])
def test_an_input_named_like_any_file_of_a_set_inside_out_is_refused_and_kept(tmp_path, name):
    """encode's outputs are not only the token files: provenance, its ids, loss masks, meta.pkl and
    the other layouts' files are written, replaced or removed too (an input o/train.prov.npy was
    overwritten, o/train.mask.bin deleted, exit 0)."""
    (tmp_path / "o").mkdir()
    victim = tmp_path / "o" / name
    victim.write_text("the user's own text\n")
    (tmp_path / "a.txt").write_text("a document\n")
    r = cli([tmp_path / "a.txt", victim, "--format", "text", "--val-fraction", "0", "-o", tmp_path / "o"])
    assert r.exit_code == 2 and r.stderr.count("\n") == 1 and name in r.stderr
    assert victim.read_text() == "the user's own text\n"
    assert sorted(p.name for p in (tmp_path / "o").iterdir()) == [name]


@pytest.mark.parametrize("name", ["train.idx", "val.idx", "meta.pkl", "train.mask.bin", "val.prov.ids.npy",
                                  "llmc/fineweb_train_000001.bin", "llmc/my_eval.bin"])
def test_a_file_of_a_sets_name_no_earlier_set_wrote_is_refused_not_removed(tmp_path, name):
    """A first encode into a folder removed every llmc/*.bin, the .idx files, a mask and meta.pkl
    that winsample never wrote, silently (exit 0). A run removes or replaces only what an earlier
    set's meta.json names; any other file under one of those names is refused before reading."""
    write_tree(tmp_path / "in")
    out = tmp_path / "o"
    (out / "llmc").mkdir(parents=True)
    (out / "llmc" / "notes.txt").write_text("kept\n")
    (out / name).write_text("another tool's file\n")
    r = cli([tmp_path / "in", "-o", out])
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr.strip() == (f"error: {out / name}: this run would replace or remove it, and no earlier winsample set"
                                f" wrote it ({out} has no meta.json): move it away, or pick another -o")
    assert (out / name).read_text() == "another tool's file\n" and (out / "llmc" / "notes.txt").exists()
    assert not (out / "meta.json").exists()


def test_a_later_run_removes_the_earlier_sets_other_layouts_it_named(tmp_path):
    """What an earlier set's meta.json names is still replaced or removed: a Megatron + llm.c set,
    then a nanoGPT one into the same folder, leaves no .idx and no shard."""
    write_tree(tmp_path / "in")
    out = tmp_path / "o"
    assert cli([tmp_path / "in", "-o", out, "--layout", "nanogpt,megatron,llmc", "--val-fraction", "0"]).exit_code == 0
    assert (out / "train.idx").exists() and any((out / "llmc").iterdir())
    r = cli([tmp_path / "in", "-o", out, "--val-fraction", "0"])
    assert r.exit_code == 0, r.stderr
    assert not (out / "train.idx").exists() and not (out / "val.idx").exists() and not (out / "llmc").exists()


def test_second_writer_fails_fast_while_first_holds_lock(tmp_path, previous_set):
    out, before = previous_set
    fd = os.open(out / disk.LOCK_NAME, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.ftruncate(fd, 0)
    os.pwrite(fd, b"4242\n", 0)
    try:
        r = cli([tmp_path / "good", "-o", out, "--workers", "1"])
    finally:
        os.close(fd)
    assert r.exit_code == 2 and "being written by another winsample (pid 4242)" in r.stderr
    assert snapshot(out) == {**before, disk.LOCK_NAME: b"4242\n"}


def test_file_changing_while_read_is_refused(tmp_path, previous_set):
    out, before = previous_set
    victim = tmp_path / "grow.txt"
    victim.write_text(BIG_PREFIX * 2)
    calls = []

    def grow(nbytes, ntokens, total=None):
        if nbytes and not calls:
            calls.append(1)
            with open(victim, "a") as f:
                f.write("appended while winsample reads\n")

    with pytest.raises(Exception) as e:
        encode_corpus([str(victim)], out, split="tail", workers=1, progress=grow)
    assert e.value.exit_code == 1 and "grow.txt: the file changed while it was being read" in str(e.value)
    assert_untouched(out, before)


def test_a_file_edited_in_place_at_the_same_size_while_read_says_so(tmp_path, previous_set):
    """Its size did not change, only its content and time: "(N bytes before, N after)" read as if
    nothing had changed."""
    out, before = previous_set
    victim = tmp_path / "edit.txt"
    victim.write_text(BIG_PREFIX * 2)
    size = victim.stat().st_size
    calls = []

    def edit(nbytes, ntokens, total=None):
        if nbytes and not calls:
            calls.append(1)
            with open(victim, "r+b") as f:
                f.write(b"X")
            os.utime(victim, ns=(victim.stat().st_atime_ns, victim.stat().st_mtime_ns + 10**9))

    with pytest.raises(Exception) as e:
        encode_corpus([str(victim)], out, split="tail", workers=1, progress=edit)
    assert e.value.exit_code == 1
    assert str(e.value) == (f"{victim}: the file changed while it was being read (still {size} bytes, but written to"
                            " meanwhile); encode a stable copy")
    assert_untouched(out, before)


@pytest.mark.parametrize("exc", [KeyboardInterrupt, lambda: __import__("winsample").errors.Interrupted(15)])
def test_interrupt_mid_run_keeps_previous_set(tmp_path, previous_set, exc):
    out, before = previous_set
    big = tmp_path / "big.txt"
    big.write_text(BIG_PREFIX * 3)

    def stop(nbytes, ntokens, total=None):
        if ntokens:
            raise exc()

    with pytest.raises((KeyboardInterrupt, Exception)):
        encode_corpus([str(big)], out, split="tail", workers=2, progress=stop)
    assert_untouched(out, before)


def test_sigterm_from_outside_exits_143_and_keeps_previous_set(tmp_path, previous_set):
    import signal
    import subprocess
    import sys
    import time

    out, before = previous_set
    p = subprocess.Popen(
        [sys.executable, "-m", "winsample", "encode", "-", "-o", str(out), "--workers", "1", "--split", "tail"],
        stdin=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    p.stdin.write(b"some text that will never finish\n" * 1000)
    p.stdin.flush()
    deadline = time.time() + 20
    while not (out / disk.STAGING_DIR).exists() and time.time() < deadline:
        time.sleep(0.05)
    assert (out / disk.STAGING_DIR).exists()  # it is mid-run, blocked on stdin
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=20)
    assert p.returncode == 143 and b"SIGTERM" in err
    snap = snapshot(out)
    assert snap.pop(disk.LOCK_NAME) and snap == {k: v for k, v in before.items() if k != disk.LOCK_NAME}
    assert not (out / disk.STAGING_DIR).exists()


def test_library_rejects_bad_options_before_touching_disk(tmp_path):
    with pytest.raises(ConfigError):
        encode_corpus([str(CORPUS)], tmp_path / "o", val_fraction=1.0)
    with pytest.raises(ConfigError):
        encode_corpus([str(CORPUS)], tmp_path / "o", split="random")
    with pytest.raises(InputError):
        encode_corpus([], tmp_path / "o")
    for seed in (True, 1.5, "7"):
        with pytest.raises(ConfigError, match="--seed must be an integer"):
            encode_corpus([str(CORPUS)], tmp_path / "o", seed=seed)
    assert not (tmp_path / "o").exists()


def test_any_integer_seed_is_the_split_hashs_prefix_numpy_ints_included(tmp_path):
    """-1 and 2**70 stay accepted (datasets made with them must rebuild); np.int64(5) is 5."""
    docs = write_tree(tmp_path / "in", _many_docs(30))
    metas = {}
    for seed in (-1, 1 << 70, 5, np.int64(5)):
        out = tmp_path / f"o{len(metas)}"
        encode_corpus([str(docs)], out, seed=seed, workers=1)
        meta = json.loads((out / "meta.json").read_text())
        assert meta["split"]["seed"] == int(seed)
        metas[len(metas)] = (out / "val.bin").read_bytes()
    assert metas[2] == metas[3]  # np.int64(5) splits as 5


def test_json_summary_on_stdout_and_summary_line_on_stderr(tmp_path):
    src = write_tree(tmp_path / "in", _many_docs(20))
    r = cli([src, "-o", tmp_path / "out", "--workers", "1", "--val-fraction", "0.3", "--json"])
    assert r.exit_code == 0
    s = json.loads(r.stdout)
    assert s["train"]["documents"] + s["val"]["documents"] == 20 and s["val"]["documents"] > 0
    assert r.stderr.startswith("encoded 20 documents") and "MB/s" in r.stderr
    r = cli([src, "-o", tmp_path / "out", "--workers", "1", "--val-fraction", "0.3", "-q"])
    assert r.exit_code == 0 and r.stderr == "" and r.stdout == ""


# --- a split that must leave train or val empty -----------------------------------------------------


def test_one_text_file_with_split_doc_is_refused_before_it_is_read(tmp_path):
    src = tmp_path / "book.txt"
    src.write_bytes(b"a whole book, then \x00 a NUL that reading it would report")  # exit 1 if it were read
    r = cli([src, "-o", tmp_path / "out"])
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and "book.txt: one text input is one document" in r.stderr and "--split tail" in r.stderr
    assert not (tmp_path / "out").exists()
    src.write_text("a whole book.\n" * 50)
    for extra in (["--split", "tail"], ["--val-fraction", "0"]):  # the two ways out it names
        r = cli([src, "-o", tmp_path / "out", *extra])
        assert r.exit_code == 0, r.stderr


def test_two_text_files_are_not_refused_before_reading(tmp_path):
    write_tree(tmp_path / "in", {f"{i}.txt": f"document {i} " * 20 for i in range(40)})
    r = cli([tmp_path / "in", "-o", tmp_path / "out", "--workers", "1"])
    assert r.exit_code == 0, r.stderr  # 40 documents: the split sends some to val (hash of each text)


def test_one_jsonl_document_fails_after_reading_with_the_split_named(tmp_path):
    src = tmp_path / "one.jsonl"
    src.write_text('{"text": "the only document"}\n')
    r = cli([src, "-o", tmp_path / "out", "--workers", "1"])
    assert r.exit_code == 2 and r.stderr.count("\n") == 1
    assert "the split leaves" in r.stderr and "(1 document(s), --val-fraction 0.1)" in r.stderr
    assert not (tmp_path / "out").exists()


# --- a failed run into a new folder leaves no folder behind ----------------------------------------

# (file name, content, extra options, exit code). Each fails for a reason stated beside it.
FAILING_RUNS = {
    # "hi" is 1 token + EOT = 2 tokens; --split tail gives val floor(2 × 0.1) = 0 of them.
    "empty-val-split": ("one.txt", b"hi", ["--split", "tail", "--val-fraction", "0.1"], 2),
    # one text file is one document: --val-fraction 0, or --split doc would refuse it before reading
    "binary-file": ("bin.txt", b"text then \x00 NUL", ["--val-fraction", "0"], 1),
    "invalid-utf8": ("bad.txt", b"caf\xc3\n", ["--val-fraction", "0"], 1),
    "bad-jsonl-line": ("j.jsonl", b'{"text": "ok"}\n{"text": oops}\n', [], 1),
    "missing-input": (None, None, [], 2),
}


def _failing_run(tmp_path, case, out):
    name, content, extra, code = FAILING_RUNS[case]
    src = tmp_path / (name or "nope.txt")
    if content is not None:
        src.write_bytes(content)
    r = cli([src, "-o", out, "--workers", "1", *extra])
    assert r.exit_code == code, r.stderr
    assert r.stderr.startswith("error: ") and r.stderr.count("\n") == 1


@pytest.mark.parametrize("case", sorted(FAILING_RUNS))
def test_failed_run_into_a_new_folder_leaves_no_folder(tmp_path, case):
    out = tmp_path / "out" / "sub"  # neither exists yet
    _failing_run(tmp_path, case, out)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("case", sorted(FAILING_RUNS))
def test_failed_run_into_an_existing_folder_keeps_the_previous_set(tmp_path, previous_set, case):
    out, before = previous_set
    _failing_run(tmp_path, case, out)
    assert_untouched(out, before)
    assert not (out / formats.PARTIAL_DIR).exists()


def test_failed_run_removes_only_the_folders_it_created(tmp_path):
    (tmp_path / "mine").mkdir()  # existed before, empty: must survive
    out = tmp_path / "mine" / "a" / "b"
    _failing_run(tmp_path, "binary-file", out)
    assert (tmp_path / "mine").is_dir() and list((tmp_path / "mine").iterdir()) == []


def test_failed_run_keeps_a_new_folder_someone_put_a_file_in(tmp_path):
    out = tmp_path / "out"

    def drop_a_file(nbytes, ntokens, total=None):
        (out / "notes.txt").write_text("mine")

    (tmp_path / "bin.txt").write_bytes(b"text then \x00 NUL")
    with pytest.raises(Exception) as e:
        encode_corpus([str(tmp_path / "bin.txt")], out, workers=1, progress=drop_a_file, val_fraction=0)
    assert e.value.exit_code == 1
    assert (out / "notes.txt").read_text() == "mine"  # never rmtree'd; the folder stays with it


def test_interrupt_with_a_checkpoint_keeps_the_new_folder_and_partial(tmp_path, monkeypatch):
    from winsample.encode import resume
    from winsample.errors import Interrupted

    monkeypatch.setattr(resume, "CHECKPOINT_SECONDS", 0)  # a checkpoint at every input's end
    monkeypatch.setattr(checkpoint, "CHECKPOINT_IN_BACKGROUND", False)  # ... recorded before the run goes on
    src = write_tree(tmp_path / "in", _many_docs(30))
    out = tmp_path / "out" / "sub"
    journal = out / formats.PARTIAL_DIR / formats.PARTIAL_JOURNAL

    def stop(nbytes, ntokens, total=None):
        if journal.exists():
            raise KeyboardInterrupt

    with pytest.raises(Interrupted) as e:
        encode_corpus([str(src)], out, workers=1, progress=stop)
    assert e.value.exit_code == 130 and "--resume" in str(e.value)
    assert journal.is_file()  # kept for --resume, and with it the folder
    s = encode_corpus([str(src)], out, workers=1, resume_partial=True)
    assert s["resumed"]["inputs"] >= 1


def test_write_backs_inside_long_inputs_never_cost_an_inputs_checkpoint(tmp_path, monkeypatch):
    from winsample.encode import resume

    monkeypatch.setattr(resume, "CHECKPOINT_SECONDS", 0)  # a checkpoint due at every input's end
    monkeypatch.setattr(encode_mod, "WRITE_BACK_SECONDS", 0)  # and a write-back after every batch
    monkeypatch.setattr(encode_mod, "TASK_CHARS", 3000)  # each input spans several batches
    recorded, real = [], resume.write_journal
    monkeypatch.setattr(resume, "write_journal", lambda work, params, sources, done, *a: (recorded.append(done),
                                                                                            real(work, params, sources, done, *a)))
    docs = {f"d{i:02d}.txt": f"Input {i} has many words in it. " * 400 for i in range(12)}
    src = write_tree(tmp_path / "in", docs)
    encode_corpus([str(src)], tmp_path / "out", workers=1, split="tail")
    assert recorded == list(range(1, 13))  # every input's end recorded, in order, in the background


def test_a_checkpoint_that_cannot_be_synced_in_the_background_fails_the_run_naming_the_file(tmp_path, monkeypatch):
    import errno

    from winsample.encode import resume
    from winsample.errors import InputError

    monkeypatch.setattr(resume, "CHECKPOINT_SECONDS", 0)
    real_fsync, synced = os.fsync, []

    def fsync(fd):
        name = os.readlink(f"/proc/self/fd/{fd}")
        synced.append(name)
        if name.endswith("train.bin"):
            raise OSError(errno.EIO, "Input/output error")
        return real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    src = write_tree(tmp_path / "in", _many_docs(30))
    with pytest.raises(InputError, match=r"Input/output error while writing train\.bin"):
        encode_corpus([str(src)], tmp_path / "out", workers=1)
    assert any(n.endswith("train.bin") for n in synced)  # a checkpoint did try to sync it
    assert not (tmp_path / "out").exists()  # nothing half-written is left


def test_interrupt_before_any_checkpoint_leaves_no_new_folder(tmp_path):
    big = tmp_path / "big.txt"
    big.write_text(BIG_PREFIX * 3)  # one input: no checkpoint before its end
    out = tmp_path / "out" / "sub"

    def stop(nbytes, ntokens, total=None):
        if ntokens:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        encode_corpus([str(big)], out, split="tail", workers=1, progress=stop)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("folder_too", [False, True])
def test_lock_file_removed_between_open_and_flock_is_taken_again(tmp_path, monkeypatch, folder_too):
    # A failing run that made the folder removes its lock (and the folder) just as this run
    # opened the lock file: this run must not count a lock on the orphaned file as the lock.
    out = tmp_path / "new"
    real_flock, calls = fcntl.flock, []

    def flock(fd, op):
        if not calls:
            calls.append(1)
            os.unlink(out / disk.LOCK_NAME)
            if folder_too:
                os.rmdir(out)
        return real_flock(fd, op)

    monkeypatch.setattr(fcntl, "flock", flock)
    with pytest.raises(ConfigError):
        with disk.locked(out):
            monkeypatch.setattr(fcntl, "flock", real_flock)
            probe = os.open(out / disk.LOCK_NAME, os.O_RDWR)
            try:
                with pytest.raises(BlockingIOError):  # the file at the path is the one we hold
                    fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
            finally:
                os.close(probe)
            assert (out / disk.LOCK_NAME).read_text() == f"{os.getpid()}\n"
            raise ConfigError("fail after locking")
    assert calls == [1] and not out.exists()  # made by this run (again): removed on failure


def test_the_cli_forks_its_workers_so_they_inherit_the_loaded_tokenizer(tmp_path):
    """A second thread at pool creation (tqdm's monitor, started even by a disabled bar) makes
    encode fall back to forkserver, whose workers must import and load everything again."""
    import subprocess
    import sys

    code = (
        "import threading, winsample.encode.executors.local as e\n"
        "seen = []\n"
        "from winsample.encode.executors import pool as p\nmake = p.make_pool\n"
        "p.make_pool = lambda *a: (seen.append(threading.active_count()), make(*a))[1]\n"
        "from winsample.cli import main\n"
        "try:\n"
        f"    main(['encode', {str(CORPUS)!r}, '-o', {str(tmp_path / 'd')!r}, '--workers', '2', '-q'])\n"
        "except SystemExit as x:\n"
        "    assert not x.code, x.code\n"
        "print(seen)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[1]"  # the pool was made once, with only the main thread: fork


# --- inputs: each read once, and what a folder leaves out is said --------------------------------


@pytest.mark.parametrize("args", [["a.txt", "a.txt"], ["in", "in"], ["in", "in/a.txt"], ["in/a.txt", "./in/a.txt"]],
                         ids=["file-twice", "folder-twice", "file-inside-named-folder", "one-file-two-spellings"])
def test_a_file_reached_twice_under_one_name_is_refused_before_anything_is_read(tmp_path, monkeypatch, args):
    write_tree(tmp_path / "in", {"a.txt": "first document", "b.txt": "second document"})
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.txt").write_text("first document")
    r = cli([*args, "-o", "out", "--val-fraction", "0"])
    assert r.exit_code == 2 and r.stdout == "" and r.stderr.count("\n") == 1
    assert "given twice" in r.stderr and "encoded twice" in r.stderr
    assert not (tmp_path / "out").exists()


def test_links_inside_one_folder_are_read_once_with_a_note(tmp_path, ref_gpt2):
    # a real tree (/usr/share/doc) holds links to its own files; the folder was named once
    write_tree(tmp_path / "in", {"a.txt": "first document", "b.txt": "second document"})
    os.symlink("a.txt", tmp_path / "in" / "c.txt")
    os.link(tmp_path / "in" / "b.txt", tmp_path / "in" / "d.txt")
    r = cli([tmp_path / "in", "-o", tmp_path / "out", "--val-fraction", "0"])
    assert r.exit_code == 0, r.stderr
    assert r.stdout == ""
    note = [line for line in r.stderr.splitlines() if "through links" in line]
    assert len(note) == 1 and "2 file(s)" in note[0] and "c.txt is " in note[0] and note[0].endswith("a.txt and 1 more")
    _, _, ids, starts = read_split(tmp_path / "out", "train")
    assert len(starts) == 2  # a.txt and b.txt, once each, in name order
    assert ids.tolist() == ref_stream(ref_gpt2, ["first document", "second document"])


def test_named_links_to_a_file_already_given_are_read_once_with_a_note(tmp_path, monkeypatch, ref_gpt2):
    """New-user trial: `/usr/share/common-licenses/*` names GFDL, a symbolic link to GFDL-1.3, and
    the run was refused ("given twice"); a folder walk reads such links once. A hard link too."""
    write_tree(tmp_path / "in", {"a.txt": "first document", "b.txt": "second document"})
    os.symlink("a.txt", tmp_path / "in" / "c.txt")
    os.link(tmp_path / "in" / "b.txt", tmp_path / "in" / "d.txt")
    monkeypatch.chdir(tmp_path)
    r = cli(["in/a.txt", "in/b.txt", "in/c.txt", "in/d.txt", "-o", "out", "--val-fraction", "0"])  # what in/* gives
    assert r.exit_code == 0 and r.stdout == "", r.stderr
    notes = [line for line in r.stderr.splitlines() if line.startswith("note:")]
    assert notes == ["note: in/c.txt: the file in/a.txt already gave (a link to it), read once",
                     "note: in/d.txt: the file in/b.txt already gave (a link to it), read once"]
    _, _, ids, starts = read_split(tmp_path / "out", "train")
    assert len(starts) == 2 and ids.tolist() == ref_stream(ref_gpt2, ["first document", "second document"])


def test_two_different_files_with_the_same_text_are_both_encoded(tmp_path):
    write_tree(tmp_path / "in", {"a.txt": "same words", "b.txt": "same words"})
    r = cli([tmp_path / "in", "-o", tmp_path / "out", "--val-fraction", "0", "--json"])
    assert r.exit_code == 0 and json.loads(r.stdout)["train"]["documents"] == 2  # content is not identity


def test_a_folder_says_how_many_files_it_does_not_read_even_with_q_and_in_json(tmp_path):
    """#29 class 7: hidden files and folders and symlinked folders were skipped without a word,
    -q hid the note, and --json had no field for it."""
    write_tree(tmp_path / "in", {"a.txt": "read", "b.rst": "not read", "c.rst": "nor this", "d": "no suffix",
                                 ".hidden.txt": "hidden", ".git/x.txt": "in a hidden folder"})
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "e.txt").write_text("behind a link")
    (tmp_path / "in" / "linked").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    r = cli([tmp_path / "in", "-o", tmp_path / "out", "--val-fraction", "0"])
    assert r.exit_code == 0
    warn = [line for line in r.stderr.splitlines() if line.startswith("warning:")]
    assert len(warn) == 1 and warn[0].startswith(
        "warning: 6 file(s) not read (2 .rst, 2 hidden (a name starting with .), 1 symlinked folder (not followed), 1 without")
    r = cli([tmp_path / "in", "-o", tmp_path / "out2", "--val-fraction", "0", "-q", "--json"])
    assert r.exit_code == 0 and r.stderr.startswith("warning: 6 file(s) not read") and r.stderr.count("\n") == 1
    assert json.loads(r.stdout)["not_read"] == {".rst": 2, "hidden (a name starting with .)": 2, "without a suffix": 1,
                                                "symlinked folder (not followed)": 1}
    assert json.loads(r.stdout)["documents"] == 1


def test_gzip_with_trailing_garbage_after_a_whole_member_says_so(tmp_path):
    # #29 class 10: it said "near byte 0" after a full member
    import gzip

    (tmp_path / "a.txt.gz").write_bytes(gzip.compress(b"some text\n" * 100) + b"GARBAGE!!")
    r = cli([tmp_path / "a.txt.gz", "-o", tmp_path / "out", "--val-fraction", "0"])
    assert r.exit_code == 1 and r.stdout == "" and r.stderr.count("\n") == 1
    assert "bytes follow the last gzip member (trailing garbage)" in r.stderr and "near compressed byte" in r.stderr


def test_a_proc_file_is_named_as_one_not_as_a_file_that_changed(tmp_path):
    # #29 class 10: "/proc/self/status: the file changed while it was being read (0 bytes before, 0 after)"
    r = cli(["/proc/self/status", "-o", tmp_path / "out", "--val-fraction", "0"])
    assert r.exit_code == 1 and "the system reports its size as 0 bytes" in r.stderr and "/proc or /sys" in r.stderr


def test_a_truncated_gzip_is_refused_naming_about_where_its_data_ends(tmp_path):
    # the error's position was the start of the failing 1 MB read (byte 0 for a small file)
    import gzip
    import re
    import zlib

    text = "".join(f"line {i} of a long enough text to span several reads\n" for i in range(8000)).encode()
    packed = gzip.compress(text)
    (tmp_path / "a.txt.gz").write_bytes(packed[: len(packed) // 2])
    d = zlib.decompressobj(wbits=31)  # what the half file holds, decompressed independently
    whole = len(d.decompress(packed[: len(packed) // 2]))
    r = cli([tmp_path / "a.txt.gz", "-o", tmp_path / "out", "--val-fraction", "0"])
    assert r.exit_code == 1 and r.stdout == "" and r.stderr.count("\n") == 1
    m = re.search(r"broken gzip data near compressed byte ([\d,]+) \(([\d,]+) bytes decompressed before it\)", r.stderr)
    raw_at, at = (int(g.replace(",", "")) for g in m.groups())
    assert whole - (64 << 10) <= at <= whole and at > 0
    assert 0 < raw_at <= len(packed) // 2  # where in the compressed file: inside what is there
    assert not (tmp_path / "out").exists()


def test_a_bad_jsonl_line_is_named_with_its_column_in_a_whole_sentence(tmp_path):
    # Python's message for an open string ends in "starting at": the place must follow it
    (tmp_path / "a.jsonl").write_text('{"text": "ok"}\n{"text": "no end\n{"text": oops}\n', encoding="utf-8")
    r = cli([tmp_path / "a.jsonl", "-o", tmp_path / "out", "--val-fraction", "0"])
    assert r.exit_code == 1 and r.stdout == ""
    # both bad lines are listed (--on-bad-input fail reads on), each in its own whole sentence
    assert r.stderr == (f"bad input: {tmp_path / 'a.jsonl'}:2: not valid JSON: Unterminated string starting at column 10\n"
                        f"bad input: {tmp_path / 'a.jsonl'}:3: not valid JSON: Expecting value at column 10\n"
                        "error: 2 bad inputs (listed above): fix them, or pass --on-bad-input skip to leave them out and list them\n")


def test_a_planted_lock_symlink_is_refused_and_its_target_untouched(tmp_path):
    """The lock file is opened without following links: encode never truncates a link's target."""
    target = tmp_path / "precious.txt"
    target.write_text("keep me")
    out = tmp_path / "out"
    out.mkdir()
    (out / ".winsample.lock").symlink_to(target)
    write_tree(tmp_path / "in")
    r = cli([tmp_path / "in", "-o", out, "--val-fraction", "0"])
    assert r.exit_code == 2 and "is a symbolic link, not winsample's lock file" in r.stderr
    assert target.read_text() == "keep me"


def test_a_gzip_of_128_mib_of_one_letter_encodes_in_bounded_memory(tmp_path):
    """#29 class 3: text with no safe cut at all (one letter, 128 MiB, a 300 KB gzip) grew memory
    with the run and ran for minutes. Cut by force every 4 Mi characters, the run's peak RSS stays
    far below its size's worth (it was 1.8 GB for 64 MiB), and the summary counts the cuts."""
    import subprocess
    import sys

    src = tmp_path / "a.txt.gz"
    with gzip.open(src, "wb", compresslevel=1) as f:
        for _ in range(128):
            f.write(b"a" * (1 << 20))
    # The peak is the process's own VmHWM, read as it exits: ru_maxrss would carry this test
    # process's peak across fork/exec into the child's figure. --workers 1: all in one process.
    run = ("import atexit, runpy, sys\n"
           "atexit.register(lambda: sys.stderr.write(next(x for x in open('/proc/self/status') if x.startswith('VmHWM'))))\n"
           "sys.argv = ['winsample'] + sys.argv[1:]\n"
           "runpy.run_module('winsample', run_name='__main__')\n")
    r = subprocess.run([sys.executable, "-c", run, "encode", str(src), "-o", str(tmp_path / "out"), "--val-fraction", "0",
                        "--workers", "1", "--json", "-q"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["forced_cuts"] == 31  # 128 Mi chars: 32 pieces of 4 Mi
    peak_kb = int(r.stderr.split("VmHWM:")[1].split()[0])
    assert peak_kb < 900_000, f"peak RSS {peak_kb} kB"  # ~400 MB here; 1.8 GB for half the input before
    assert (tmp_path / "out" / "train.bin").stat().st_size // 2 == 32 * 1_048_576 + 1  # 'aaaa' is one token: 2^20 per piece, + EOT


def test_a_nested_text_field_and_id_field_are_named_with_dots(tmp_path, ref_gpt2):
    """#33 item 12: records such as Dolma's keep the text or the id inside an object."""
    recs = [{"meta": {"body": "First body text.", "src": {"id": "x-1"}}, "text": "not this"},
            {"meta": {"body": "Second one."}, "meta.body": "a key with the dot wins", "id2": 7}]
    src = tmp_path / "n.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
    r = cli([src, "-o", tmp_path / "out", "--text-field", "meta.body", "--val-fraction", "0", "-q"])
    assert r.exit_code == 0, r.stderr
    got = np.fromfile(tmp_path / "out" / "train.bin", "<u2").tolist()
    assert got == ref_gpt2.encode_ordinary("First body text.") + [EOT] + ref_gpt2.encode_ordinary("a key with the dot wins") + [EOT]
    bad = tmp_path / "b.jsonl"
    bad.write_text(json.dumps({"meta": {"title": "no body"}}) + "\n", encoding="utf-8")
    r = cli([bad, "-o", tmp_path / "out2", "--text-field", "meta.body"])
    assert r.exit_code == 1 and r.stderr == f"error: {bad}:1: no field 'meta.body' (fields: meta); pick one with --text-field (a.b for a field inside an object)\n"
    r = cli([src, "-o", tmp_path / "out3", "--text-field", "meta.body", "--id-field", "meta.src.id", "--val-fraction", "0"])
    assert r.exit_code == 1 and f"{src}:2: no field 'meta.src.id' for --id-field" in r.stderr
