"""Inputs real corpora come in: zstd (.zst, .jsonl.zst: the Pile, Dolma, RedPajama), folders written
by Hugging Face ``datasets``' ``save_to_disk`` (Dataset, DatasetDict, shards), bare Arrow files,
nested text fields in Arrow and Parquet columns.

Expected ids come from tiktoken (``ref_gpt2``) on the texts as the test wrote them; expected
shards, rows and offsets from the files themselves, read with ``datasets``' own state.json,
pyarrow and the zstd library, never from winsample's records.
"""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from winsample import formats
from winsample.cli import main

from ..conftest import CORPUS

if sys.version_info >= (3, 14):
    from compression import zstd
else:  # the test extra installs it (as winsample[zstd]): missing, these tests fail, never skip
    from backports import zstd

EOT = 50256


def cli(*args, input=None):
    return CliRunner().invoke(main, ["encode", *map(str, args)], input=input)


def ids_of(out, split="train"):
    meta = formats.read_meta(out / "meta.json")
    return np.fromfile(out / meta["splits"][split]["file"], dtype=meta["dtype"]).tolist()


def ref_stream(ref, texts):
    out = []
    for t in texts:
        out += ref.encode_ordinary(t) + [EOT]
    return out


def sources(out, split="train"):
    """(path, offset, line, id) of each document of ``split``, from the provenance files."""
    meta = json.loads((out / "meta.json").read_text())
    p = formats.read_provenance(out, meta, split)
    return [(s["path"], s["offset"], s["line"], s["id"]) for s in map(p.source, range(len(p)))]


def frames(data: bytes, n: int) -> bytes:
    """``data`` as ``n`` zstd frames one after another (how the Pile and Dolma write their files)."""
    step = -(-len(data) // n)
    return b"".join(zstd.compress(data[i : i + step]) for i in range(0, len(data), step))


@pytest.fixture(scope="module")
def datasets_lib():
    import datasets  # the test extra installs it: real save_to_disk folders
    datasets.disable_progress_bars()
    return datasets


def shard_rows(folder):
    """[(shard path, rows)] of a save_to_disk folder: datasets' state.json, each shard read by pyarrow."""
    import pyarrow as pa

    state = json.loads((folder / "state.json").read_text())
    out = []
    for entry in state["_data_files"]:
        with pa.memory_map(str(folder / entry["filename"])) as f:
            out.append((folder / entry["filename"], pa.ipc.open_stream(f).read_all().num_rows))
    return out


TEXTS = [f"Record {i}: {'滑动窗口 ' if i % 3 == 0 else ''}the quick brown fox {i * 7} times." for i in range(23)]


# --- zstd -----------------------------------------------------------------------------------------


def test_a_zst_text_file_of_several_frames_is_read_whole(tmp_path, ref_gpt2):
    text = (CORPUS / "sonnets.txt").read_text(encoding="utf-8")[:40000]
    packed = frames(text.encode(), 5)
    (tmp_path / "sonnets.txt.zst").write_bytes(packed)
    out = tmp_path / "out"
    r = cli(tmp_path / "sonnets.txt.zst", "-o", out, "--val-fraction", "0", "--workers", "1")
    assert r.exit_code == 0, r.stderr
    assert ids_of(out) == ref_stream(ref_gpt2, [text])  # all five frames, not the first one only
    assert formats.read_meta(out / "meta.json")["inputs"] == [
        {"path": str(tmp_path / "sonnets.txt.zst"), "bytes": len(packed), "decompressed_bytes": len(text.encode())}]


def test_jsonl_zst_records_nested_field_and_offsets_in_the_decompressed_stream(tmp_path, ref_gpt2):
    lines = [json.dumps({"id": f"doc-{i}", "meta": {"body": t}}) for i, t in enumerate(TEXTS)]
    lines.insert(4, "")  # a blank line: skipped, but counted in lines and offsets
    raw = ("\n".join(lines) + "\n").encode()
    (tmp_path / "pile.jsonl.zst").write_bytes(frames(raw, 3))
    out = tmp_path / "out"
    r = cli(tmp_path / "pile.jsonl.zst", "-o", out, "--text-field", "meta.body", "--id-field", "id",
            "--val-fraction", "0", "--workers", "1")
    assert r.exit_code == 0, r.stderr
    assert ids_of(out) == ref_stream(ref_gpt2, TEXTS)
    want, pos = [], 0
    for lineno, line in enumerate(raw.split(b"\n")[:-1], start=1):
        if line:
            want.append((str(tmp_path / "pile.jsonl.zst"), pos, lineno, json.loads(line)["id"]))
        pos += len(line) + 1
    assert sources(out) == want


def test_a_folder_takes_txt_zst_and_jsonl_zst_beside_txt_in_name_order_same_bytes_for_1_and_2_workers(tmp_path, ref_gpt2):
    src = tmp_path / "in"
    (src / "sub").mkdir(parents=True)
    (src / "a.txt").write_text(TEXTS[0], encoding="utf-8")
    (src / "b.txt.zst").write_bytes(frames(TEXTS[1].encode(), 2))
    (src / "sub" / "c.jsonl.zst").write_bytes(zstd.compress(b"".join(json.dumps({"text": t}).encode() + b"\n" for t in TEXTS[2:6])))
    (src / "d.TXT.ZST").write_bytes(zstd.compress(TEXTS[6].encode()))  # suffixes in any case
    (src / "e.csv.zst").write_bytes(zstd.compress(b"not,read"))
    outs = []
    for workers in (1, 2):
        out = tmp_path / f"out{workers}"
        r = cli(src, "-o", out, "--val-fraction", "0.3", "--workers", workers, "--json")
        assert r.exit_code == 0, r.stderr
        assert json.loads(r.stdout)["not_read"] == {".zst": 1}
        outs.append({f.name: f.read_bytes() for f in out.iterdir() if f.name != "meta.json"})
    assert outs[0] == outs[1]
    both = ids_of(tmp_path / "out1") + ids_of(tmp_path / "out1", "val")
    order = [TEXTS[0], TEXTS[1], TEXTS[6], *TEXTS[2:6]]  # a.txt, b.txt.zst, d.TXT.ZST, sub/c.jsonl.zst
    assert sorted(both) == sorted(ref_stream(ref_gpt2, order))
    r = cli(src, "-o", tmp_path / "all", "--val-fraction", "0", "--workers", "1")
    assert r.exit_code == 0 and ids_of(tmp_path / "all") == ref_stream(ref_gpt2, order)


def test_a_zst_input_without_a_decompressor_names_the_extra_and_writes_nothing(tmp_path, monkeypatch):
    (tmp_path / "a.txt.zst").write_bytes(zstd.compress(b"some text"))
    for name in ("compression", "compression.zstd", "backports", "backports.zstd"):
        monkeypatch.setitem(sys.modules, name, None)  # import → ImportError, as when neither is installed
    r = cli(tmp_path / "a.txt.zst", "-o", tmp_path / "out", "--val-fraction", "0", "--workers", "1")
    assert r.exit_code == 2
    assert r.stderr == f"error: {tmp_path / 'a.txt.zst'}: reading .zst needs a zstd decompressor: pip install 'winsample[zstd]'\n"
    assert r.stdout == "" and not (tmp_path / "out").exists()
    # said before any input is read: a.txt's bad byte (read first otherwise, exit 1) is not reached
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.txt").write_bytes(b"bad \xff byte")
    (tmp_path / "in" / "b.txt.zst").write_bytes(zstd.compress(b"some text"))
    r = cli(tmp_path / "in", "-o", tmp_path / "out", "--val-fraction", "0", "--workers", "1")
    assert r.exit_code == 2 and "pip install 'winsample[zstd]'" in r.stderr and "UTF-8" not in r.stderr


@pytest.mark.parametrize("damage", ["truncated", "flipped"])
def test_a_broken_zst_is_one_line_naming_the_file_exit_1_and_nothing_written(tmp_path, damage):
    text = (CORPUS / "hamlet.txt").read_bytes()[:200_000]
    packed = bytearray(frames(text, 4))
    if damage == "truncated":
        packed = packed[: len(packed) * 3 // 4]
    else:
        packed[len(packed) // 2 :: 997] = bytes(b ^ 0x5A for b in packed[len(packed) // 2 :: 997])
    (tmp_path / "h.txt.zst").write_bytes(bytes(packed))
    r = cli(tmp_path / "h.txt.zst", "-o", tmp_path / "out", "--val-fraction", "0", "--workers", "1")
    assert r.exit_code == 1 and r.stdout == ""
    assert r.stderr.startswith(f"error: {tmp_path / 'h.txt.zst'}: broken zstd data near compressed byte ")
    assert r.stderr.count("\n") == 1
    assert not (tmp_path / "out").exists()
    # the byte it names lies in the file, past the intact first frames
    near = int(r.stderr.split("near compressed byte ")[1].split(" ")[0].replace(",", ""))
    assert len(zstd.compress(text[: len(text) // 4])) // 2 < near <= len(packed)


@pytest.mark.parametrize("name", ["plain.txt.zst", "plain.txt.gz"])
def test_a_file_named_compressed_that_is_not_says_so_at_byte_0(tmp_path, name):
    """Plain text named .zst or .gz: the fault is its first bytes (the reader's position, past
    what it read ahead, is not where the fault is)."""
    (tmp_path / name).write_text("plain text, never compressed\n")
    r = cli(tmp_path / name, "-o", tmp_path / "out", "--val-fraction", "0", "--workers", "1")
    codec = "zstd" if name.endswith(".zst") else "gzip"
    assert r.exit_code == 1 and r.stdout == "" and r.stderr.count("\n") == 1
    assert r.stderr.startswith(f"error: {tmp_path / name}: not {codec} data: its first bytes are not {codec}'s magic number")
    assert not (tmp_path / "out").exists()


def test_an_empty_gzip_member_then_junk_is_trailing_garbage_not_a_plain_file(tmp_path):
    """Nothing decompressed, but the file does start with gzip's magic number: the junk after the
    member is the fault (the first bytes are read, not guessed from the error)."""
    import gzip

    (tmp_path / "e.txt.gz").write_bytes(gzip.compress(b"") + b"junk")
    r = cli(tmp_path / "e.txt.gz", "-o", tmp_path / "out", "--val-fraction", "0", "--workers", "1")
    assert r.exit_code == 1 and "broken gzip data near compressed byte" in r.stderr
    assert "bytes follow the last gzip member (trailing garbage)" in r.stderr and "not gzip data" not in r.stderr


def test_dolma_style_json_gz_and_json_zst_are_jsonl_and_a_folder_takes_them_but_not_plain_json(tmp_path, ref_gpt2):
    import gzip

    docs = tmp_path / "dolma" / "documents"
    docs.mkdir(parents=True)
    recs = [{"id": f"d{i}", "text": t, "source": "web", "metadata": {"url": f"https://x/{i}"}} for i, t in enumerate(TEXTS[:8])]
    jsonl = [(json.dumps(r) + "\n").encode() for r in recs]
    (docs / "part-0000.json.gz").write_bytes(gzip.compress(b"".join(jsonl[:5])))
    (docs / "part-0001.json.zst").write_bytes(zstd.compress(b"".join(jsonl[5:])))
    (tmp_path / "dolma" / "manifest.json").write_text(json.dumps({"text": "not a corpus file"}))
    r = cli(tmp_path / "dolma", "-o", tmp_path / "out", "--id-field", "id", "--val-fraction", "0", "--workers", "1", "--json")
    assert r.exit_code == 0, r.stderr
    assert ids_of(tmp_path / "out") == ref_stream(ref_gpt2, TEXTS[:8])
    assert [s[3] for s in sources(tmp_path / "out")] == [r["id"] for r in recs]
    assert json.loads(r.stdout)["not_read"] == {".json": 1}


# --- datasets' save_to_disk folders and Arrow files --------------------------------------------


def test_a_saved_dataset_of_3_shards_reads_its_rows_in_order_same_bytes_for_1_and_2_workers(tmp_path, ref_gpt2, datasets_lib):
    folder = tmp_path / "ds"
    datasets_lib.Dataset.from_dict({"text": TEXTS, "n": list(range(len(TEXTS)))}).save_to_disk(str(folder), num_shards=3)
    shards = shard_rows(folder)
    assert len(shards) == 3
    outs = []
    for workers in (1, 2):
        out = tmp_path / f"out{workers}"
        r = cli(folder, "-o", out, "--val-fraction", "0", "--workers", workers, "--id-field", "n")
        assert r.exit_code == 0, r.stderr
        outs.append({f.name: f.read_bytes() for f in out.iterdir() if f.name != "meta.json"})
    assert outs[0] == outs[1]
    out = tmp_path / "out1"
    assert ids_of(out) == ref_stream(ref_gpt2, TEXTS)
    assert [e["path"] for e in formats.read_meta(out / "meta.json")["inputs"]] == [str(p) for p, _ in shards]
    want = [(str(p), 0, row + 1) for p, n in shards for row in range(n)]  # each shard's rows, 1-based
    assert [s[:3] for s in sources(out)] == want
    assert [s[3] for s in sources(out)] == list(range(len(TEXTS)))


def test_a_dataset_dict_reads_train_and_says_so_and_a_split_folder_reads_that_split(tmp_path, ref_gpt2, datasets_lib):
    ds = datasets_lib.Dataset.from_dict
    dd = datasets_lib.DatasetDict({"train": ds({"text": TEXTS[:15]}), "test": ds({"text": TEXTS[15:]})})
    dd.save_to_disk(str(tmp_path / "dd"))
    r = cli(tmp_path / "dd", "-o", tmp_path / "out", "--val-fraction", "0", "--workers", "1")
    assert r.exit_code == 0, r.stderr
    assert ids_of(tmp_path / "out") == ref_stream(ref_gpt2, TEXTS[:15])
    assert f"note: {tmp_path / 'dd'}: a DatasetDict: reading its 'train' split only; name {tmp_path / 'dd' / 'test'}" in r.stderr
    r = cli(tmp_path / "dd" / "test", "-o", tmp_path / "test", "--val-fraction", "0", "--workers", "1")
    assert r.exit_code == 0, r.stderr
    assert ids_of(tmp_path / "test") == ref_stream(ref_gpt2, TEXTS[15:])


def test_a_dataset_dict_without_train_is_refused_naming_its_splits(tmp_path, datasets_lib):
    ds = datasets_lib.Dataset.from_dict
    datasets_lib.DatasetDict({"validation": ds({"text": ["a"]}), "test": ds({"text": ["b"]})}).save_to_disk(str(tmp_path / "dd"))
    r = cli(tmp_path / "dd", "-o", tmp_path / "out", "--val-fraction", "0", "--workers", "1")
    assert r.exit_code == 2 and not (tmp_path / "out").exists()
    assert r.stderr == (f"error: {tmp_path / 'dd'}: a DatasetDict with no 'train' split (splits: validation, test):"
                        f" name the split to encode, e.g. {tmp_path / 'dd' / 'validation'}\n")


def test_a_nested_text_field_of_a_saved_dataset_and_of_parquet_is_read(tmp_path, ref_gpt2, datasets_lib):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = {"meta": [{"body": t, "lang": "en"} for t in TEXTS], "id": [f"r{i}" for i in range(len(TEXTS))]}
    datasets_lib.Dataset.from_dict(rows).save_to_disk(str(tmp_path / "ds"), num_shards=2)
    pq.write_table(pa.table(rows), tmp_path / "t.parquet")
    for src in (tmp_path / "ds", tmp_path / "t.parquet"):
        out = tmp_path / f"out-{src.name}"
        r = cli(src, "-o", out, "--text-field", "meta.body", "--id-field", "id", "--val-fraction", "0", "--workers", "1")
        assert r.exit_code == 0, r.stderr
        assert ids_of(out) == ref_stream(ref_gpt2, TEXTS)
        assert [s[3] for s in sources(out)] == rows["id"]
    r = cli(tmp_path / "ds", "-o", tmp_path / "bad", "--text-field", "meta.title", "--workers", "1")
    assert r.exit_code == 1 and "no column 'meta.title' (columns: meta, id)" in r.stderr


def test_a_null_struct_gives_a_null_text_field_not_its_stale_child(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    meta = pa.StructArray.from_arrays([pa.array(["kept", "hidden"])], names=["body"], mask=pa.array([False, True]))
    pq.write_table(pa.table({"meta": meta}), tmp_path / "t.parquet")
    r = cli(tmp_path / "t.parquet", "-o", tmp_path / "out", "--text-field", "meta.body", "--workers", "1")
    assert r.exit_code == 1 and r.stderr == f"error: {tmp_path / 't.parquet'}: row 1: 'meta.body' is null\n"


@pytest.mark.parametrize("layout", ["stream", "file"])
def test_a_bare_arrow_file_is_read_as_records(tmp_path, ref_gpt2, layout):
    import pyarrow as pa

    table = pa.table({"text": TEXTS, "k": list(range(len(TEXTS)))})
    path = tmp_path / "cache-train-00000-of-00001.arrow"
    with pa.OSFile(str(path), "wb") as f:
        writer = pa.ipc.new_stream(f, table.schema) if layout == "stream" else pa.ipc.new_file(f, table.schema)
        with writer:
            for batch in table.to_batches(max_chunksize=5):  # several batches, as datasets writes them
                writer.write_batch(batch)
    out = tmp_path / "out"
    r = cli(path, "-o", out, "--id-field", "k", "--val-fraction", "0", "--workers", "1")
    assert r.exit_code == 0, r.stderr
    assert ids_of(out) == ref_stream(ref_gpt2, TEXTS)
    assert sources(out) == [(str(path), 0, i + 1, i) for i in range(len(TEXTS))]


def test_a_truncated_arrow_file_is_bad_data_naming_the_file(tmp_path, datasets_lib):
    datasets_lib.Dataset.from_dict({"text": TEXTS * 50}).save_to_disk(str(tmp_path / "ds"))
    (shard, _), = shard_rows(tmp_path / "ds")
    data = shard.read_bytes()
    shard.write_bytes(data[: len(data) // 2])
    r = cli(tmp_path / "ds", "-o", tmp_path / "out", "--workers", "1")
    assert r.exit_code == 1 and not (tmp_path / "out").exists()
    assert r.stderr.startswith(f"error: {shard}: row ") and "unreadable Arrow data" in r.stderr and r.stderr.count("\n") == 1


def test_a_cache_folder_of_arrow_shards_says_to_name_the_split_files(tmp_path, datasets_lib):
    datasets_lib.Dataset.from_dict({"text": TEXTS}).save_to_disk(str(tmp_path / "ds"))
    (tmp_path / "ds" / "state.json").unlink()  # a hub cache: shards and dataset_info.json, no state.json
    r = cli(tmp_path / "ds", "-o", tmp_path / "out", "--workers", "1")
    assert r.exit_code == 2
    assert "it holds .arrow files, which a folder walk leaves (a cache mixes splits): name the ones to encode, e.g. " in r.stderr
    assert str(tmp_path / "ds" / "*train*.arrow") in r.stderr


def test_a_saved_dataset_naming_a_missing_shard_is_refused(tmp_path, datasets_lib):
    datasets_lib.Dataset.from_dict({"text": TEXTS}).save_to_disk(str(tmp_path / "ds"), num_shards=2)
    (shard, _), _second = shard_rows(tmp_path / "ds")
    shard.unlink()
    r = cli(tmp_path / "ds", "-o", tmp_path / "out", "--workers", "1")
    assert r.exit_code == 2 and r.stderr.startswith(f"error: {shard}: no such file, though {tmp_path / 'ds' / 'state.json'} lists it")


def test_an_arrow_input_without_pyarrow_names_the_extra(tmp_path, monkeypatch):
    (tmp_path / "t.arrow").write_bytes(b"ARROW1")
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    r = cli(tmp_path / "t.arrow", "-o", tmp_path / "out", "--workers", "1")
    assert r.exit_code == 2 and r.stderr == f"error: {tmp_path / 't.arrow'}: reading Arrow files needs pyarrow: pip install 'winsample[arrow]'\n"


def test_a_zst_of_512_mib_is_read_in_bounded_memory(tmp_path):
    """Streamed: the reader holds a piece at a time, never the file (512 MiB of text, 16 frames)."""
    import subprocess

    src = tmp_path / "big.txt.zst"
    line = b"the same line of plain text, again and again\n"
    block = line * ((32 << 20) // len(line))
    with open(src, "wb") as f:
        for _ in range(16):
            f.write(zstd.compress(block))
    run = ("import sys\n"
           "from winsample.encode import inputs\n"
           "src = inputs.resolve_inputs([sys.argv[1]])\n"
           "n = sum(len(t) for _, doc in inputs.iter_documents(src) for t in doc)\n"
           "peak = next(x for x in open('/proc/self/status') if x.startswith('VmHWM'))\n"
           "print(n, src[0].decompressed, peak.split()[1])\n")
    r = subprocess.run([sys.executable, "-c", run, str(src)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    chars, decompressed, peak_kb = map(int, r.stdout.split())
    assert chars == decompressed == 16 * len(block)  # ASCII: one character per byte, every frame
    assert peak_kb < 150_000, f"peak RSS {peak_kb} kB for {decompressed >> 20} MiB of text"


def test_a_datasetdict_whose_only_split_is_not_train_says_which_it_reads(tmp_path):
    import datasets
    from click.testing import CliRunner

    from winsample.cli import main

    datasets.disable_progress_bars()
    datasets.DatasetDict({"validation": datasets.Dataset.from_dict({"text": ["held out one", "held out two"]})}).save_to_disk(
        str(tmp_path / "onlyval"))
    r = CliRunner().invoke(main, ["encode", str(tmp_path / "onlyval"), "-o", str(tmp_path / "out"), "--val-fraction", "0"])
    assert r.exit_code == 0, r.stderr
    assert "only split is 'validation'" in r.stderr
