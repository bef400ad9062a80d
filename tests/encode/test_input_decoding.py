"""encode's text input: byte-order marks, --input-encoding, and --on-bad-input (fail lists every
bad file and JSONL line; skip leaves them out, counted and named). Expected ids come from
tiktoken directly, on the text as Python decodes it."""

from __future__ import annotations

import json

import numpy as np
import pytest

from winsample import formats
from winsample.encode import encode_corpus
from winsample.encode.executors import checkpoint
from winsample.encode.executors import local as encode_mod

from .test_encode import EOT, cli, snapshot

TEXT = "Hello world. Café au lait — naïve 滑动窗口 👨\u200d👩\u200d👧 and 🎉.\nSecond line, more words.\n"
BIG = TEXT * 15000  # ~1.4 MB as UTF-8: more than one 1 MiB read in every codec, with the pieces cut inside it


def ids_of(out, split="train"):
    meta = formats.read_meta(out / "meta.json")
    return np.fromfile(out / meta["splits"][split]["file"], dtype=meta["dtype"]).tolist()


def ref_ids(ref, texts):
    out = []
    for t in texts:
        out += ref.encode_ordinary(t) + [EOT]
    return out


def stats_of(out):
    return json.loads((out / "meta.json").read_text())["stats"]


# --- byte-order marks ----------------------------------------------------------------------


@pytest.mark.parametrize("text", [TEXT, BIG], ids=["small", "big"])
@pytest.mark.parametrize("workers", [1, 2])
def test_a_utf8_bom_is_dropped_and_counted(tmp_path, ref_gpt2, text, workers):
    (tmp_path / "bom.txt").write_bytes(b"\xef\xbb\xbf" + text.encode())
    out = tmp_path / "out"
    s = encode_corpus([str(tmp_path / "bom.txt")], out, split="tail", val_fraction=0, workers=workers)
    assert ids_of(out) == ref_ids(ref_gpt2, [text])  # not ref(BOM + text): the mark is not text
    assert s["boms_stripped"] == 1 and stats_of(out)["boms_stripped"] == 1


def test_without_a_bom_meta_json_and_the_summary_gain_no_key(tmp_path):
    (tmp_path / "a.txt").write_text(TEXT, encoding="utf-8")
    s = encode_corpus([str(tmp_path / "a.txt")], tmp_path / "out", split="tail", val_fraction=0, workers=1)
    keys = {"boms_stripped", "skipped_inputs", "skipped_records", "bad_inputs"}
    assert not keys & set(s) and not keys & set(stats_of(tmp_path / "out"))


@pytest.mark.parametrize("codec", ["utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"])
@pytest.mark.parametrize("text", [TEXT, BIG], ids=["small", "big"])
def test_utf16_and_utf32_files_with_a_bom_give_the_ids_of_their_text(tmp_path, ref_gpt2, codec, text):
    bom = {"utf-16-le": b"\xff\xfe", "utf-16-be": b"\xfe\xff", "utf-32-le": b"\xff\xfe\x00\x00", "utf-32-be": b"\x00\x00\xfe\xff"}
    (tmp_path / "wide.txt").write_bytes(bom[codec] + text.encode(codec))
    out = tmp_path / "out"
    s = encode_corpus([str(tmp_path / "wide.txt")], out, split="tail", val_fraction=0, workers=2)
    assert ids_of(out) == ref_ids(ref_gpt2, [text])
    assert s["boms_stripped"] == 1


def test_errors_replace_in_a_utf16_file_replaces_and_counts_like_python(tmp_path, ref_gpt2):
    raw = "x ".encode("utf-16-le") + b"\x00\xd8" + " after a lone surrogate".encode("utf-16-le")
    (tmp_path / "a.txt").write_bytes(b"\xff\xfe" + raw)
    out = tmp_path / "out"
    s = encode_corpus([str(tmp_path / "a.txt")], out, split="tail", val_fraction=0, workers=1, errors="replace")
    want = raw.decode("utf-16-le", "replace")  # Python's own replace handler
    assert ids_of(out) == ref_ids(ref_gpt2, [want]) and s["replaced_characters"] == want.count("\ufffd") == 1
    r = cli([tmp_path / "a.txt", "-o", tmp_path / "strict", "--split", "tail"])
    assert r.exit_code == 1 and f"{tmp_path / 'a.txt'}: invalid UTF-16-LE at byte 6 (line 1)" in r.stderr


def test_a_utf16_jsonl_with_a_bom_gives_its_records_and_their_byte_offsets(tmp_path, ref_gpt2):
    lines = [json.dumps({"text": t}, ensure_ascii=False) for t in ("first 🎉", "second, café", "third")]
    raw = b"\xff\xfe" + "\n".join(lines).encode("utf-16-le") + "\n".encode("utf-16-le")
    (tmp_path / "d.jsonl").write_bytes(raw)
    out = tmp_path / "out"
    encode_corpus([str(tmp_path / "d.jsonl")], out, val_fraction=0, workers=1)
    assert ids_of(out) == ref_ids(ref_gpt2, ["first 🎉", "second, café", "third"])
    meta = formats.read_meta(out / "meta.json")
    prov = formats.read_provenance(out, meta, "train")
    offsets = [prov.source(d)["offset"] for d in range(3)]
    # each record's first byte in the file: after the BOM and the lines before it, newlines included
    want = [2 + sum(len((ln + "\n").encode("utf-16-le")) for ln in lines[:k]) for k in range(3)]
    assert offsets == want and [prov.source(d)["line"] for d in range(3)] == [1, 2, 3]


def test_a_jsonl_with_a_utf8_bom_reads_its_first_record(tmp_path, ref_gpt2):
    (tmp_path / "d.jsonl").write_bytes(b'\xef\xbb\xbf{"text": "one"}\n{"text": "two"}\n')
    out = tmp_path / "out"
    s = encode_corpus([str(tmp_path / "d.jsonl")], out, val_fraction=0, workers=1)
    assert ids_of(out) == ref_ids(ref_gpt2, ["one", "two"]) and s["boms_stripped"] == 1


# --- --input-encoding ------------------------------------------------------------------------


def test_a_latin1_file_is_decoded_with_input_encoding(tmp_path, ref_gpt2):
    text = "Debian changelog: Ren\xe9 Engelhard <r\xe9n\xe9@d.org>  \xa9 1999, gr\xfc\xdfe\n" * 50
    (tmp_path / "changelog").write_bytes(text.encode("latin-1"))
    r = cli([tmp_path / "changelog", "-o", tmp_path / "bad", "--split", "tail"])
    assert r.exit_code == 1 and r.stdout == "" and r.stderr.count("\n") == 1
    assert f"invalid UTF-8 at byte {text.index(chr(0xe9))} (line 1)" in r.stderr and "--input-encoding" in r.stderr
    r = cli([tmp_path / "changelog", "-o", tmp_path / "out", "--split", "tail", "--val-fraction", "0",
             "--input-encoding", "latin-1", "--workers", "2", "-q"])
    assert r.exit_code == 0, r.stderr
    assert ids_of(tmp_path / "out") == ref_ids(ref_gpt2, [text])


def test_cp1252_input_encoding_decodes_jsonl_records(tmp_path, ref_gpt2):
    texts = ["curly \u201cquotes\u201d \u2014 dash", "euro \u20ac 5"]
    raw = b"".join((json.dumps({"text": t}, ensure_ascii=False) + "\n").encode("cp1252") for t in texts)
    (tmp_path / "d.jsonl").write_bytes(raw)
    out = tmp_path / "out"
    encode_corpus([str(tmp_path / "d.jsonl")], out, val_fraction=0, workers=1, input_encoding="cp1252")
    assert ids_of(out) == ref_ids(ref_gpt2, texts)


def test_an_unknown_input_encoding_is_one_line_and_exit_2_before_anything_is_written(tmp_path):
    (tmp_path / "a.txt").write_text(TEXT)
    r = cli([tmp_path / "a.txt", "-o", tmp_path / "out", "--input-encoding", "latin-99"])
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr == "error: unknown --input-encoding 'latin-99': give a Python codec name such as latin-1, cp1252 or utf-16\n"
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("order", ["le", "be"])
def test_utf16_without_a_bom_is_refused_with_a_hint_that_then_works(tmp_path, ref_gpt2, order):
    codec = f"utf-16-{order}"
    (tmp_path / "a.txt").write_bytes(TEXT.encode(codec))
    r = cli([tmp_path / "a.txt", "-o", tmp_path / "out", "--split", "tail"])
    assert r.exit_code == 1 and r.stdout == "" and r.stderr.count("\n") == 1
    assert "binary file (NUL byte at byte" in r.stderr
    assert f"it looks like UTF-16-{order.upper()} without a byte-order mark" in r.stderr
    assert r.stderr.rstrip().endswith(f"--input-encoding {codec}")
    r = cli([tmp_path / "a.txt", "-o", tmp_path / "out", "--split", "tail", "--val-fraction", "0", "--input-encoding", codec])
    assert r.exit_code == 0, r.stderr
    assert ids_of(tmp_path / "out") == ref_ids(ref_gpt2, [TEXT])


def test_a_binary_file_gets_no_utf16_hint(tmp_path):
    (tmp_path / "a.txt").write_bytes(bytes(range(256)) * 8)
    r = cli([tmp_path / "a.txt", "-o", tmp_path / "out", "--split", "tail"])
    assert r.exit_code == 1 and "binary file (NUL byte at byte 0)" in r.stderr and "UTF-16" not in r.stderr


# --- --on-bad-input ----------------------------------------------------------------------------

GOOD = {"a.txt": "The first good file.\n", "c.txt": "The second good file, between bad ones.\n", "e.txt": "The last one.\n"}
BAD = {"b.txt": b"bad \xff byte\n", "d.txt": b"nul \x00 here\n", "f.txt": "utf-16 without a mark\n".encode("utf-16-le")}


def bad_folder(root):
    root.mkdir()
    for name, text in GOOD.items():
        (root / name).write_text(text, encoding="utf-8")
    for name, raw in BAD.items():
        (root / name).write_bytes(raw)
    return root


def test_a_folder_with_three_bad_files_lists_all_three_in_one_run(tmp_path):
    src = bad_folder(tmp_path / "in")
    r = cli([src, "-o", tmp_path / "out"])
    assert r.exit_code == 1 and r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 4
    assert lines[0].startswith(f"bad input: {src / 'b.txt'}: invalid UTF-8 at byte 4 (line 1)")
    assert lines[1].startswith(f"bad input: {src / 'd.txt'}: binary file (NUL byte at byte 4)")
    assert lines[2].startswith(f"bad input: {src / 'f.txt'}: binary file (NUL byte at byte 1)")
    assert lines[3] == "error: 3 bad inputs (listed above): fix them, or pass --on-bad-input skip to leave them out and list them"
    assert not (tmp_path / "out").exists()  # nothing written


def test_skip_leaves_bad_files_out_and_counts_and_names_them(tmp_path, ref_gpt2):
    src = bad_folder(tmp_path / "in")
    out = tmp_path / "out"
    r = cli([src, "-o", out, "--on-bad-input", "skip", "--val-fraction", "0", "--json", "-q"])
    assert r.exit_code == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary["skipped_inputs"] == 3 and "skipped_records" not in summary and summary["documents"] == 3
    assert ids_of(out) == ref_ids(ref_gpt2, [GOOD[n] for n in sorted(GOOD)])
    bad = stats_of(out)["bad_inputs"]
    assert [(b["input"], b["byte"]) for b in bad] == [(str(src / "b.txt"), 4), (str(src / "d.txt"), 4), (str(src / "f.txt"), 1)]
    assert bad == summary["bad_inputs"] and stats_of(out)["skipped_inputs"] == 3
    err = r.stderr.splitlines()  # shown even with -q: input left out is a diagnostic
    assert err[0].startswith("warning: bad input skipped (--on-bad-input skip): 3 files")
    assert [e.split(":")[1].strip() for e in err[1:]] == [str(src / n) for n in ("b.txt", "d.txt", "f.txt")]


JSONL = b'{"text": "one"}\n{"text": "two", oops}\n\n{"text": "four"}\n{"body": "no text"}\n{"text": "six"}\n'


def test_a_malformed_jsonl_line_in_the_middle_fails_naming_file_and_line(tmp_path):
    (tmp_path / "d.jsonl").write_bytes(JSONL)
    r = cli([tmp_path / "d.jsonl", "-o", tmp_path / "out", "--val-fraction", "0"])
    assert r.exit_code == 1 and r.stdout == ""
    lines = r.stderr.splitlines()
    assert lines[0] == f"bad input: {tmp_path / 'd.jsonl'}:2: not valid JSON: Expecting property name enclosed in double quotes at column 17"
    assert lines[1].startswith(f"bad input: {tmp_path / 'd.jsonl'}:5: no field 'text'")
    assert lines[2].startswith("error: 2 bad inputs") and len(lines) == 3
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("workers", [1, 2])
def test_skip_leaves_malformed_jsonl_lines_out_and_encodes_the_others(tmp_path, ref_gpt2, workers):
    (tmp_path / "d.jsonl").write_bytes(JSONL)
    out = tmp_path / "out"
    s = encode_corpus([str(tmp_path / "d.jsonl")], out, val_fraction=0, workers=workers, on_bad_input="skip")
    assert ids_of(out) == ref_ids(ref_gpt2, ["one", "four", "six"])
    assert s["skipped_records"] == 2 and "skipped_inputs" not in s
    assert [(b["line"], b["byte"]) for b in s["bad_inputs"]] == [(2, JSONL.index(b"{\"text\": \"two\"")), (5, JSONL.index(b"{\"body\""))]
    meta = formats.read_meta(out / "meta.json")
    prov = formats.read_provenance(out, meta, "train")
    assert [prov.source(d)["line"] for d in range(3)] == [1, 4, 6]  # the records kept keep their own lines


def test_skip_leaves_null_parquet_rows_out_and_fail_lists_them(tmp_path, ref_gpt2):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"text": ["one", None, "three", None, "five"]}), tmp_path / "d.parquet")
    r = cli([tmp_path / "d.parquet", "-o", tmp_path / "bad", "--val-fraction", "0"])
    assert r.exit_code == 1 and r.stderr.splitlines()[:2] == [
        f"bad input: {tmp_path / 'd.parquet'}: row 1: 'text' is null", f"bad input: {tmp_path / 'd.parquet'}: row 3: 'text' is null"]
    out = tmp_path / "out"
    s = encode_corpus([str(tmp_path / "d.parquet")], out, val_fraction=0, workers=1, on_bad_input="skip")
    assert ids_of(out) == ref_ids(ref_gpt2, ["one", "three", "five"]) and s["skipped_records"] == 2
    prov = formats.read_provenance(out, formats.read_meta(out / "meta.json"), "train")
    assert [prov.source(d)["line"] for d in range(3)] == [1, 3, 5]  # 1-based rows, as before
    # messages index rows from 0 (as pyarrow and pandas do), meta.json's bad_inputs keep the 1-based line
    assert [(b["line"], b["error"].split(": ")[1]) for b in s["bad_inputs"]] == [(2, "row 1"), (4, "row 3")]
    r = cli([tmp_path / "d.parquet", "-o", tmp_path / "skipped", "--val-fraction", "0", "--on-bad-input", "skip"])
    assert r.exit_code == 0 and r.stderr.splitlines()[1] == ("warning: bad input skipped (--on-bad-input skip): 2 records;"
                                                             " each below, all counted in meta.json's stats")


def test_skip_keeps_the_records_before_broken_gzip_data_and_leaves_out_the_rest(tmp_path, ref_gpt2):
    import gzip

    texts = [f"record {i} with some words in it" for i in range(100000)]  # MiBs: reads before the break succeed
    packed = gzip.compress("".join(json.dumps({"text": t}) + "\n" for t in texts).encode())
    (tmp_path / "d.jsonl.gz").write_bytes(packed[: len(packed) // 2])  # cut in the middle
    out = tmp_path / "out"
    s = encode_corpus([str(tmp_path / "d.jsonl.gz")], out, val_fraction=0, workers=1, on_bad_input="skip")
    kept = s["documents"]
    assert s["skipped_inputs"] == 1 and 0 < kept < len(texts)
    assert "broken gzip data" in s["bad_inputs"][0]["error"]
    assert ids_of(out) == ref_ids(ref_gpt2, texts[:kept])  # the records before the break, in order


def test_the_ray_engine_refuses_the_local_decoding_options(tmp_path):
    from winsample.encode.config import EncodeConfig
    from winsample.errors import ConfigError

    for opts in ({"on_bad_input": "skip"}, {"input_encoding": "latin-1"}):
        with pytest.raises(ConfigError, match="apply to --engine local"):
            EncodeConfig(("a",), tmp_path, engine="ray", **opts)


def test_more_than_twenty_bad_lines_lists_the_first_twenty_and_counts_all(tmp_path):
    (tmp_path / "d.jsonl").write_bytes(b'{"text": "ok"}\n' + b"not json\n" * 25)
    r = cli([tmp_path / "d.jsonl", "-o", tmp_path / "out", "--val-fraction", "0"])
    lines = r.stderr.splitlines()
    assert r.exit_code == 1 and len(lines) == 21
    assert lines[19].startswith(f"bad input: {tmp_path / 'd.jsonl'}:21:")
    assert lines[20].startswith("error: 25 bad inputs (the first 20 listed above)")


def test_a_bad_file_given_alone_keeps_its_one_line_error(tmp_path):
    (tmp_path / "a.txt").write_bytes(b"bad \xff byte\n")
    r = cli([tmp_path / "a.txt", "-o", tmp_path / "out", "--split", "tail"])
    assert r.exit_code == 1 and r.stderr.count("\n") == 1 and r.stderr.startswith(f"error: {tmp_path / 'a.txt'}: invalid UTF-8")


def test_skip_with_every_input_bad_says_there_is_nothing_to_encode(tmp_path):
    (tmp_path / "a.txt").write_bytes(b"bad \xff byte\n")
    r = cli([tmp_path / "a.txt", "-o", tmp_path / "out", "--split", "tail", "--on-bad-input", "skip"])
    assert r.exit_code == 1 and "no document has any text" in r.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("workers", ["1", "2"])
def test_skip_with_every_record_bad_names_the_first_reason_in_its_one_line(tmp_path, workers):
    # the records have text: what is wrong is the --id-field, and the error must say so
    src = tmp_path / "five.jsonl"
    src.write_text("".join(json.dumps({"body": f"text {i}", "id": i}) + "\n" for i in range(5)))
    r = cli([src, "--text-field", "body", "--id-field", "nope", "-o", tmp_path / "out", "--val-fraction", "0",
             "--on-bad-input", "skip", "--workers", workers])
    assert r.exit_code == 1 and r.stderr.count("\n") == 1, r.stderr
    assert "(5 records skipped as bad input, the first: " in r.stderr
    assert f"{src}:1: no field 'nope' for --id-field" in r.stderr
    assert not (tmp_path / "out").exists()


def test_skip_cannot_leave_out_bad_text_on_stdin_and_says_so(tmp_path):
    (tmp_path / "a.txt").write_text("a good file\n")
    r = cli(["-", tmp_path / "a.txt", "-o", tmp_path / "out", "--on-bad-input", "skip", "--val-fraction", "0"],
            input=b"bad \xff text")
    assert r.exit_code == 1 and r.stderr.count("\n") == 1
    assert r.stderr.startswith("error: -: invalid UTF-8 at byte 4") and "cannot leave it out: save it to a file" in r.stderr
    assert not (tmp_path / "out").exists()


# --- same bytes: workers, --resume -------------------------------------------------------------


def mixed_folder(root):
    """Good, BOM'd, UTF-16 and bad files, and a JSONL with bad lines, big enough for byte ranges."""
    bad_folder(root)
    (root / "g_bom.txt").write_bytes(b"\xef\xbb\xbf" + (TEXT * 40).encode())
    (root / "h_wide.txt").write_bytes(b"\xfe\xff" + (TEXT * 40).encode("utf-16-be"))
    (root / "i_big.txt").write_text(TEXT * 200, encoding="utf-8")
    (root / "j.jsonl").write_bytes(JSONL * 30)
    return root


@pytest.fixture
def small_ranges(monkeypatch):
    monkeypatch.setattr(encode_mod, "PIECE_BYTES", 3000)
    monkeypatch.setattr(encode_mod, "TASK_CHARS", 5000)
    monkeypatch.setattr(encode_mod, "RANGE_MIN_BYTES", 4096)


def test_one_and_two_workers_write_the_same_bytes(tmp_path, small_ranges):
    src = mixed_folder(tmp_path / "in")
    outs = []
    for workers in (1, 2):
        out = tmp_path / f"out{workers}"
        s = encode_corpus([str(src)], out, workers=workers, on_bad_input="skip", val_fraction=0.3)
        assert (s["skipped_inputs"], s["skipped_records"], s["boms_stripped"]) == (3, 60, 2)
        outs.append(snapshot(out))
    meta = [json.loads(o.pop("meta.json")) for o in outs]
    for m in meta:
        m.pop("backend", None)  # says how many encoders ran
    assert outs[0] == outs[1] and meta[0] == meta[1]


def test_resume_after_an_interrupt_writes_the_same_bytes(tmp_path, small_ranges, monkeypatch):
    from winsample.encode import resume
    from winsample.errors import Interrupted

    src = mixed_folder(tmp_path / "in")
    clean = tmp_path / "clean"
    encode_corpus([str(src)], clean, workers=1, on_bad_input="skip", val_fraction=0.3)
    monkeypatch.setattr(resume, "CHECKPOINT_SECONDS", 0)  # a checkpoint at every input's end
    monkeypatch.setattr(checkpoint, "CHECKPOINT_IN_BACKGROUND", False)
    out = tmp_path / "out"
    journal = out / formats.PARTIAL_DIR / formats.PARTIAL_JOURNAL

    def stop(nbytes, ntokens, total=None):
        # after the bad files' checkpoints (the 6th input, f.txt, is bad: 3 skipped by then)
        if journal.exists() and len(json.loads(journal.read_text())["inputs"]) >= 7:
            raise KeyboardInterrupt

    with pytest.raises(Interrupted):
        encode_corpus([str(src)], out, workers=1, on_bad_input="skip", val_fraction=0.3, progress=stop)
    assert json.loads(journal.read_text())["stats"]["skipped_inputs"] == 3
    s = encode_corpus([str(src)], out, workers=1, on_bad_input="skip", val_fraction=0.3, resume_partial=True)
    assert s["resumed"]["inputs"] >= 7
    assert snapshot(out) == snapshot(clean)


def test_a_checkpoints_options_name_the_decoding_only_when_not_the_default(tmp_path):
    from winsample.encode.config import EncodeConfig, RunSpec

    base = RunSpec(EncodeConfig(("a",), tmp_path), "uint16", EOT, None).options()
    skip = RunSpec(EncodeConfig(("a",), tmp_path, on_bad_input="skip"), "uint16", EOT, None).options()
    latin = RunSpec(EncodeConfig(("a",), tmp_path, input_encoding="Latin-1"), "uint16", EOT, None).options()
    assert "on_bad_input" not in base and "input_encoding" not in base  # old checkpoints stay comparable
    assert skip["on_bad_input"] == "skip" and latin["input_encoding"] == "iso8859-1"  # --resume compares them


@pytest.mark.parametrize("codec", ["gz", "zst"])
def test_skip_keeps_every_whole_record_before_a_break_in_compressed_data(tmp_path, codec):
    """A .jsonl.gz / .jsonl.zst cut in the middle: --on-bad-input skip keeps every complete line
    the decompressor gives before the break (counted by zlib / zstd themselves), and the file is
    counted as skipped from there."""
    import gzip
    import zlib

    rows = [json.dumps({"text": f"record {i} " + "word " * (i % 37)}) for i in range(6000)]
    raw = ("\n".join(rows) + "\n").encode()
    if codec == "gz":
        data = gzip.compress(raw)
        cut = data[: len(data) // 2]
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        before = d.decompress(cut)
    else:
        try:
            from compression import zstd
        except ImportError:
            from backports import zstd
        data = zstd.compress(raw)
        cut = data[: len(data) // 2]
        before = zstd.ZstdDecompressor().decompress(cut)
    path = tmp_path / f"t.jsonl.{codec}"
    path.write_bytes(cut)
    whole_lines = before.count(b"\n")
    assert 0 < whole_lines < len(rows)
    out = tmp_path / "out"
    r = cli([path, "-o", out, "--val-fraction", "0", "--on-bad-input", "skip", "--json", "-q"])
    assert r.exit_code == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary["documents"] == whole_lines and summary["skipped_inputs"] == 1


def test_encode_of_stdin_redirected_from_a_file_of_the_output_folder_is_refused(tmp_path):
    # `winsample encode - -o d < d/val.bin` would replace the text it is reading with token ids
    import subprocess
    import sys

    out = tmp_path / "d"
    out.mkdir()
    text = out / "val.bin"
    text.write_text("a text file that happens to be named val.bin\n" * 100)
    before = text.read_bytes()
    with open(text, "rb") as stdin:
        p = subprocess.run([sys.executable, "-m", "winsample", "encode", "-", "-o", str(out), "--split", "tail"], stdin=stdin,
                           capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and p.stdout == "" and p.stderr.count("\n") == 1
    assert p.stderr.startswith(f"error: {text}: is an input of this command") and "(the same file as standard input)" in p.stderr
    assert text.read_bytes() == before and sorted(q.name for q in out.iterdir()) == ["val.bin"]
