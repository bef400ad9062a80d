"""Provenance: every document (and so every window) traces back to its input, byte offset, line and id.

Expectations are derived from the input bytes themselves (split on b"\\n", gzip.decompress,
json.loads), never from winsample's own records.
"""

from __future__ import annotations

import gzip
import json
import random

import numpy as np
import pytest
from click.testing import CliRunner

from winsample import formats, provenance
from winsample.cli import main
from winsample.encode import encode_corpus
from winsample.errors import DataError

from .conftest import FIXTURES

EOT_TEXT = "<|endoftext|>"


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def records_of(data: bytes) -> list[tuple[int, int, dict]]:
    """(byte offset, 1-based line, object) of each non-blank line: the expectation, by hand."""
    out, pos = [], 0
    for lineno, raw in enumerate(data.split(b"\n"), start=1):
        if raw.strip():
            out.append((pos, lineno, json.loads(raw)))
        pos += len(raw) + 1
    return out


def sft_corpus(path, n=60, seed=0, crlf=True):
    """An SFT / retrieval style JSONL: ids (strings and integers), blank records, CRLF lines."""
    rng = random.Random(seed)
    lines = []
    for i in range(n):
        if rng.random() < 0.15:
            lines.append("   " if rng.random() < 0.5 else "")  # a blank record
        q = " ".join(rng.choice(["how", "do", "I", "cut", "windows", "from", "tokens", "why", "stride"]) for _ in range(rng.randint(3, 30)))
        rec = {"id": f"q-{i}" if i % 3 else i, "text": f"Question {i}: {q}? Answer: use stride {i}.", "meta": {"lang": "en"}}
        lines.append(json.dumps(rec))
    sep = "\r\n" if crlf else "\n"
    path.write_bytes((sep.join(lines) + sep).encode())
    return path


def load(out, split="train"):
    meta = json.loads((out / "meta.json").read_text())
    return formats.read_provenance(out, meta, split), meta


def all_sources(out):
    got = []
    for s in formats.SPLITS:
        p, _ = load(out, s)
        got += [p.source(d) for d in range(len(p))]
    return got


def test_jsonl_records_name_their_byte_offset_line_and_id_with_blank_and_crlf_lines(tmp_path):
    src = sft_corpus(tmp_path / "sft.jsonl")
    r = run("encode", src, "-o", tmp_path / "out", "--id-field", "id", "--workers", "1", "-q")
    assert r.exit_code == 0, r.stderr
    want = records_of(src.read_bytes())
    got = sorted(all_sources(tmp_path / "out"), key=lambda s: s["offset"])
    assert [(s["offset"], s["line"], s["id"]) for s in got] == [(o, ln, obj["id"]) for o, ln, obj in want]
    assert {s["path"] for s in got} == {str(src)} and {s["input"] for s in got} == {0}
    # some blank lines come before later records: the lines are not just 1..n
    assert [s["line"] for s in got] != list(range(1, len(got) + 1))
    # integer ids stay integers, string ids strings
    assert any(isinstance(s["id"], int) for s in got) and any(isinstance(s["id"], str) for s in got)


def test_each_split_lists_one_record_per_document_in_document_order(tmp_path):
    src = sft_corpus(tmp_path / "sft.jsonl", n=80)
    encode_corpus([str(src)], tmp_path / "out", workers=1, id_field="id", val_fraction=0.3)
    for s in formats.SPLITS:
        p, meta = load(tmp_path / "out", s)
        starts = formats.read_doc_index(tmp_path / "out" / formats.doc_index_name(s))
        assert len(p) == len(starts) == meta["splits"][s]["documents"] > 0
        offsets = [p.source(d)["offset"] for d in range(len(p))]
        assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)


def test_record_at_the_offset_is_the_document_with_that_id(tmp_path):
    src = sft_corpus(tmp_path / "sft.jsonl")
    encode_corpus([str(src)], tmp_path / "out", workers=1, id_field="id")
    data = src.read_bytes()
    for s in all_sources(tmp_path / "out"):
        line = data[s["offset"] :].split(b"\n", 1)[0]
        assert json.loads(line)["id"] == s["id"]
        assert data[: s["offset"]].count(b"\n") + 1 == s["line"]


@pytest.mark.parametrize("value, kind", [("null", "null"), ("[1, 2]", "list"), ('{"a": 1}', "dict"), ("true", "bool"), ("1.5", "float")])
def test_non_scalar_id_is_bad_input_naming_file_and_line(tmp_path, value, kind):
    src = tmp_path / "bad.jsonl"
    src.write_text('{"id": "a", "text": "fine"}\n\n{"id": ' + value + ', "text": "the bad one"}\n')
    r = run("encode", src, "-o", tmp_path / "out", "--id-field", "id", "--workers", "1")
    assert r.exit_code == 1
    assert r.stdout == ""
    assert r.stderr.strip().splitlines() == [f"error: {src}:3: --id-field 'id' is {kind}, not a string or integer"]
    assert not (tmp_path / "out").exists()


def test_missing_id_is_bad_input_naming_file_and_line(tmp_path):
    src = tmp_path / "bad.jsonl"
    src.write_text('{"id": 1, "text": "x"}\r\n{"text": "no id", "key": 2}\r\n')
    r = run("encode", src, "-o", tmp_path / "out", "--id-field", "id", "--workers", "1")
    assert r.exit_code == 1
    assert f"{src}:2: no field 'id' for --id-field (fields: text, key)" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_without_id_field_records_have_no_id_and_no_ids_file(tmp_path):
    src = sft_corpus(tmp_path / "sft.jsonl")
    encode_corpus([str(src)], tmp_path / "out", workers=1)
    p, meta = load(tmp_path / "out")
    assert meta["provenance"]["id_field"] is None and p.ids is None
    assert "id" not in p.source(0)
    assert not (tmp_path / "out" / formats.prov_ids_name("train")).exists()


def test_text_files_are_line_1_offset_0_of_their_input_even_when_cut_into_byte_ranges(tmp_path):
    (tmp_path / "c").mkdir()
    small = tmp_path / "c" / "a.txt"
    small.write_text("A small file.\nTwo lines.\n")
    big = tmp_path / "c" / "b.txt"  # > RANGE_MIN_BYTES: sent to workers as byte ranges
    big.write_text("Paragraph of a long text file.\n\n" * 8000)
    (tmp_path / "c" / "d.jsonl").write_text('{"id": "x", "text": "a record"}\n')
    r = run("encode", tmp_path / "c", "-o", tmp_path / "out", "--id-field", "id", "--workers", "2", "--val-fraction", "0", "-q")
    assert r.exit_code == 0, r.stderr
    got = all_sources(tmp_path / "out")
    meta = json.loads((tmp_path / "out" / "meta.json").read_text())
    paths = [e["path"] for e in meta["inputs"]]
    assert [(s["path"], s["input"], s["offset"], s["line"], s.get("id")) for s in got] == [
        (str(small), paths.index(str(small)), 0, 1, None),
        (str(big), paths.index(str(big)), 0, 1, None),
        (str(tmp_path / "c" / "d.jsonl"), 2, 0, 1, "x"),
    ]


def test_jsonl_gz_offsets_are_in_the_decompressed_stream(tmp_path):
    plain = sft_corpus(tmp_path / "sft.jsonl", n=50, seed=3)
    gz = tmp_path / "sft.jsonl.gz"
    gz.write_bytes(gzip.compress(plain.read_bytes()))
    encode_corpus([str(gz)], tmp_path / "out", workers=1, id_field="id")
    data = gzip.decompress(gz.read_bytes())
    got = all_sources(tmp_path / "out")
    assert sorted((s["offset"], s["line"], s["id"]) for s in got) == [(o, ln, obj["id"]) for o, ln, obj in records_of(data)]
    meta = json.loads((tmp_path / "out" / "meta.json").read_text())
    assert meta["inputs"] == [{"path": str(gz), "bytes": gz.stat().st_size, "decompressed_bytes": len(data)}]
    assert max(s["offset"] for s in got) > gz.stat().st_size  # beyond the compressed size: verify must not object
    r = run("verify", tmp_path / "out", "--show", "0", "--max-leakage", "1", "--json", "-q")
    checks = [c for c in json.loads(r.stdout)["checks"] if c["name"] == "provenance"]
    assert [c["status"] for c in checks] == ["pass", "pass"], checks


def test_worker_counts_give_identical_provenance_bytes(tmp_path):
    src = sft_corpus(tmp_path / "sft.jsonl", n=300, seed=5)
    big = tmp_path / "long.txt"
    big.write_text("A long plain file. " * 20000)
    for w in (1, 3):
        r = run("encode", src, big, "-o", tmp_path / f"w{w}", "--id-field", "id", "--workers", w, "-q")
        assert r.exit_code == 0, r.stderr
    for s in formats.SPLITS:
        for name in (formats.prov_name(s), formats.prov_ids_name(s)):
            assert (tmp_path / "w1" / name).read_bytes() == (tmp_path / "w3" / name).read_bytes(), name


def test_tail_split_val_starts_with_the_document_the_cut_fell_inside(tmp_path):
    src = sft_corpus(tmp_path / "sft.jsonl", n=40, seed=9)
    encode_corpus([str(src)], tmp_path / "out", workers=1, id_field="id", split="tail", val_fraction=0.25)
    train, _ = load(tmp_path / "out", "train")
    val, _ = load(tmp_path / "out", "val")
    want = [obj["id"] for _, _, obj in records_of(src.read_bytes())]
    t_ids = [train.source(d)["id"] for d in range(len(train))]
    v_ids = [val.source(d)["id"] for d in range(len(val))]
    assert t_ids == want[: len(t_ids)]
    # the cut lies inside a document: val's first document is its tail piece, same record
    vstarts = formats.read_doc_index(tmp_path / "out" / "val.docs.npy")
    assert len(v_ids) == len(vstarts)
    if len(t_ids) + len(v_ids) == len(want) + 1:
        assert v_ids[0] == t_ids[-1] and v_ids[1:] == want[len(t_ids) :]
    else:
        assert v_ids == want[len(t_ids) :]


def windows_jsonl(out, *extra):
    r = run("windows", out / "train.bin", "-T", 16, "--format", "jsonl", "--decode", "-o", "-", "-q", *extra)
    assert r.exit_code == 0, r.stderr
    return [json.loads(line) for line in r.stdout.splitlines()]


def test_sampled_windows_text_is_found_in_the_named_records_text(tmp_path):
    src = sft_corpus(tmp_path / "sft.jsonl", n=120, seed=11, crlf=False)
    encode_corpus([str(src)], tmp_path / "out", workers=1, id_field="id")
    by_id = {obj["id"]: obj["text"] for _, _, obj in records_of(src.read_bytes())}
    rows = windows_jsonl(tmp_path / "out", "--boundaries", "doc")
    assert all(set(r) == {"start", "length", "doc", "doc_offset", "fresh", "source", "text", "window", "char_start", "char_end",
                          "split_char", "prev", "next"} for r in rows)
    for r in random.Random(0).sample(rows, 40):
        text = r["text"].removesuffix(EOT_TEXT)
        assert EOT_TEXT not in text and text in by_id[r["source"]["id"]], r


def test_a_rows_character_range_is_its_text_less_the_separator_it_ends_with(tmp_path):
    # docs/format.md's promise, row by row: document[char_start:char_end] is text, less a trailing <|endoftext|>
    src = sft_corpus(tmp_path / "sft.jsonl", n=60, seed=13, crlf=False)
    encode_corpus([str(src)], tmp_path / "out", workers=1, id_field="id")
    by_id = {obj["id"]: obj["text"] for _, _, obj in records_of(src.read_bytes())}
    rows = [r for r in windows_jsonl(tmp_path / "out", "--boundaries", "doc") if not r["split_char"]]
    ends = [r for r in rows if r["text"].endswith(EOT_TEXT)]
    assert rows and ends  # some windows end their document with its separator
    for r in rows:
        assert by_id[r["source"]["id"]][r["char_start"] : r["char_end"]] == r["text"].removesuffix(EOT_TEXT), r


def test_windows_crossing_documents_name_the_document_they_start_in(tmp_path):
    src = sft_corpus(tmp_path / "sft.jsonl", n=120, seed=12, crlf=False)
    encode_corpus([str(src)], tmp_path / "out", workers=1, id_field="id")
    by_id = {obj["id"]: obj["text"] for _, _, obj in records_of(src.read_bytes())}
    starts = formats.read_doc_index(tmp_path / "out" / "train.docs.npy")
    rows = windows_jsonl(tmp_path / "out")  # --boundaries none: windows cross documents
    crossing = [r for r in rows if EOT_TEXT in r["text"].removesuffix(EOT_TEXT)]
    assert crossing
    for r in rows:
        d = int(np.searchsorted(starts, r["start"], "right")) - 1  # the document holding the first token
        assert (r["doc"], r["doc_offset"]) == (d, r["start"] - int(starts[d]))
        head, crosses, _ = r["text"].partition(EOT_TEXT)  # the part before the document's EOT
        record = by_id[r["source"]["id"]]
        assert record.endswith(head) if crosses else head in record, r


def test_bare_bin_rows_are_unchanged_without_provenance(tmp_path, ref_gpt2):
    ids = ref_gpt2.encode_ordinary("Hello world, this is a test.")
    np.array(ids, "<u2").tofile(tmp_path / "a.bin")
    r = run("windows", tmp_path / "a.bin", "-T", len(ids) - 1, "--format", "jsonl", "-o", "-")
    assert [json.loads(line) for line in r.stdout.splitlines()] == [{"start": 0, "length": len(ids), "doc": 0, "fresh": 0}]


def test_inspect_plan_shows_each_windows_source_as_path_line_and_id(tmp_path):
    src = sft_corpus(tmp_path / "sft.jsonl", n=60, seed=13)
    encode_corpus([str(src)], tmp_path / "out", workers=1, id_field="id")
    plan = tmp_path / "train.plan.npy"
    assert run("windows", tmp_path / "out" / "train.bin", "-T", 16, "-o", plan, "-q").exit_code == 0
    rows, _ = formats.read_plan(plan)
    starts = formats.read_doc_index(tmp_path / "out" / "train.docs.npy")
    prov, _ = load(tmp_path / "out")
    r = run("inspect", plan, "--at", 5, "--count", 3)
    assert r.exit_code == 0, r.stderr
    lines = r.stdout.splitlines()
    for k in range(5, 8):
        d = int(np.searchsorted(starts, rows["start"][k], "right")) - 1
        s = prov.source(d)
        line = next(x for x in lines if x.split() and x.split()[0] == str(k))
        assert line.endswith(f"  {src}:{s['line']} id={s['id']}"), line
        # the line named holds the record with that id
        assert json.loads(src.read_bytes().split(b"\n")[s["line"] - 1])["id"] == s["id"]
    js = json.loads(run("inspect", plan, "--at", 5, "--count", 1, "--json").stdout)
    assert js["windows"][0]["source"]["id"] == prov.source(int(np.searchsorted(starts, rows["start"][5], "right")) - 1)["id"]


def test_a_source_named_with_a_line_break_keeps_each_inspect_row_on_one_line(tmp_path):
    """A new user's trial: an input file named 'new\\nline.txt' split its rows over two lines."""
    folder = tmp_path / "sp ace"
    folder.mkdir()
    (folder / "new\nline.txt").write_text("Some words of a document. " * 400, encoding="utf-8")
    encode_corpus([str(folder)], tmp_path / "out", workers=1, split="tail")
    plan = tmp_path / "p.npy"
    assert run("windows", tmp_path / "out" / "train.bin", "-T", 64, "-o", plan, "-q").exit_code == 0
    r = run("inspect", plan, "--at", 3, "--count", 2)
    assert r.exit_code == 0, r.stderr
    rows = [x for x in r.stdout.splitlines() if x.split() and x.split()[0] in ("3", "4")]
    assert len(rows) == 2 and all(x.endswith(f"  {folder}/new⟨0a⟩line.txt:1") for x in rows), r.stdout


def test_python_api_traces_a_document_a_position_and_a_plan_row(tmp_path):
    src = sft_corpus(tmp_path / "sft.jsonl", n=60, seed=14)
    out = tmp_path / "out"
    encode_corpus([str(src)], out, workers=1, id_field="id", val_fraction=0)
    want = records_of(src.read_bytes())
    t = provenance.open_tracer(out / "train.bin")
    assert t.documents == len(want)
    assert provenance.trace_document(out / "train.bin", 4) == {"path": str(src), "line": want[4][1], "offset": want[4][0], "input": 0, "id": want[4][2]["id"]}
    starts = formats.read_doc_index(out / "train.docs.npy")
    assert t.doc_at([0, int(starts[3]), int(starts[3]) + 1, int(starts[4]) - 1]).tolist() == [0, 3, 3, 3]
    plan = tmp_path / "p.npy"
    assert run("windows", out / "train.bin", "-T", 32, "-o", plan, "-q").exit_code == 0
    rows, _ = formats.read_plan(plan)
    got = provenance.trace_row(plan, 7)
    d = int(np.searchsorted(starts, rows["start"][7], "right")) - 1
    assert got["start"] == int(rows["start"][7]) and got["doc"] == d and got["source"]["id"] == want[d][2]["id"]
    assert got["doc_offset"] == int(rows["start"][7]) - int(starts[d])
    rows["start"][7] = -1  # an edited row: the error names the plan and the row
    np.save(plan, rows)
    with pytest.raises(DataError, match=r"p\.npy: row 7 starts at -1, outside its tokens \[0, "):
        provenance.trace_row(plan, 7)


def test_api_says_so_when_a_dataset_has_no_provenance(tmp_path):
    assert provenance.open_tracer(FIXTURES / "golden_v1" / "train.bin") is None
    with pytest.raises(Exception, match="no provenance"):
        provenance.trace_document(FIXTURES / "golden_v1" / "train.bin", 0)


def test_verify_passes_fresh_provenance_and_skips_the_golden_v1_fixture(tmp_path):
    src = sft_corpus(tmp_path / "sft.jsonl", n=60, seed=15)
    encode_corpus([str(src)], tmp_path / "out", workers=1, id_field="id")
    r = run("verify", tmp_path / "out", "--show", "0", "--json", "-q", "--max-leakage", "1")
    checks = [c for c in json.loads(r.stdout)["checks"] if c["name"] == "provenance"]
    assert [c["status"] for c in checks] == ["pass", "pass"] and r.exit_code == 0
    g = run("verify", FIXTURES / "golden_v1", "--show", "0", "--json")
    assert g.exit_code == 0
    assert [c["status"] for c in json.loads(g.stdout)["checks"] if c["name"] == "provenance"] == ["skip"]


def _tamper(out, split, fn):
    p = out / formats.prov_name(split)
    arr = np.load(p)
    arr = fn(arr)
    with open(p, "wb") as f:
        np.save(f, arr)


@pytest.mark.parametrize("how, words", [
    ("offset_past_size", "byte offset outside their input's recorded size"),
    ("input_out_of_range", "name an input outside meta.json's 1 inputs"),
    ("one_record_dropped", "records, but the split has"),
    ("order_swapped", "do not come after the one before"),
    ("line_zero", "line below 1"),
])
def test_verify_fails_a_provenance_file_that_disagrees_with_the_data(tmp_path, how, words):
    src = sft_corpus(tmp_path / "sft.jsonl", n=60, seed=16)
    out = tmp_path / "out"
    encode_corpus([str(src)], out, workers=1, id_field="id")

    def edit(a):
        a = a.copy()
        if how == "offset_past_size":
            a["offset"][-1] = src.stat().st_size
        elif how == "input_out_of_range":
            a["input"][2] = 1
        elif how == "one_record_dropped":
            a = a[:-1]
        elif how == "order_swapped":
            a[[1, 2]] = a[[2, 1]]
        elif how == "line_zero":
            a["line"][0] = 0
        return a

    _tamper(out, "train", edit)
    r = run("verify", out, "--show", "0", "--json", "-q", "--max-leakage", "1")
    assert r.exit_code == 1
    fails = [c for c in json.loads(r.stdout)["checks"] if c["status"] == "fail"]
    assert [c["name"] for c in fails] == ["provenance"] and fails[0]["file"] == "train.prov.npy"
    assert words in fails[0]["detail"]


def test_parquet_rows_are_their_1_based_row_with_the_id_column(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    texts = [f"Row number {i} of a parquet file." for i in range(7)]
    pq.write_table(pa.table({"text": texts, "rid": [100 + i for i in range(7)]}), tmp_path / "t.parquet")
    encode_corpus([str(tmp_path / "t.parquet")], tmp_path / "out", workers=1, id_field="rid", val_fraction=0)
    p, _ = load(tmp_path / "out")
    assert [(s["line"], s["offset"], s["id"]) for s in map(p.source, range(len(p)))] == [(i + 1, 0, 100 + i) for i in range(7)]
    pq.write_table(pa.table({"text": texts, "rid": [0.5] * 7}), tmp_path / "f.parquet")
    r = run("encode", tmp_path / "f.parquet", "-o", tmp_path / "bad", "--id-field", "rid", "--workers", "1")
    assert r.exit_code == 1 and "--id-field column 'rid' has type double, not a string or integer" in r.stderr


def test_stdin_jsonl_records_offsets_in_the_stream(tmp_path):
    data = b'{"id": "a", "text": "one"}\n\n{"id": "b", "text": "two"}\n'
    r = CliRunner().invoke(main, ["encode", "-", "--format", "jsonl", "--id-field", "id", "-o", str(tmp_path / "out"),
                                  "--val-fraction", "0", "--workers", "1", "-q"], input=data)
    assert r.exit_code == 0, r.stderr
    p, meta = load(tmp_path / "out")
    assert meta["inputs"] == [{"path": "-", "bytes": len(data)}]
    assert [(s["path"], s["offset"], s["line"], s["id"]) for s in map(p.source, range(len(p)))] == [("-", 0, 1, "a"), ("-", 28, 3, "b")]


def test_verify_names_the_source_of_each_decoded_window(tmp_path):
    src = sft_corpus(tmp_path / "sft.jsonl", n=30, seed=17, crlf=False)
    out = tmp_path / "out"
    encode_corpus([str(src)], out, workers=1, id_field="id", val_fraction=0)
    plan = tmp_path / "p.npy"
    assert run("windows", out / "train.bin", "-T", 16, "--boundaries", "doc", "-o", plan, "-q").exit_code == 0
    first = records_of(src.read_bytes())[0]
    r = run("verify", out, "--plan", plan, "--show", "2")
    heads = [line for line in r.stdout.splitlines() if line.startswith("── ")]
    assert len(heads) == 2 and all(h.endswith(f" · from {src}:{first[1]} id={first[2]['id']}") for h in heads), heads
    js = json.loads(run("verify", out, "--plan", plan, "--show", "1", "--json").stdout)
    assert js["windows"][0]["source"] == {"path": str(src), "line": first[1], "offset": first[0], "input": 0, "id": first[2]["id"]}
    text = js["windows"][0]["text"]
    assert text in first[2]["text"] + EOT_TEXT


@pytest.mark.parametrize("damage", ["truncated", "garbled header"])
def test_a_damaged_provenance_file_is_one_line_naming_it_in_verify_and_windows(tmp_path, damage):
    sft_corpus(tmp_path / "sft.jsonl")
    out = tmp_path / "data"
    run("encode", tmp_path / "sft.jsonl", "-o", out, "--id-field", "id", "-q")
    prov = out / "train.prov.npy"
    data = bytearray(prov.read_bytes())
    if damage == "truncated":
        data = data[: len(data) // 2]
    else:
        data[20:40] = b"\0" * 20  # inside the header's dict: numpy's tokenizer raised TokenError
    prov.write_bytes(bytes(data))
    r = CliRunner().invoke(main, ["windows", str(out / "train.bin"), "-T", "32", "--format", "jsonl", "-o", "-"])
    assert r.exit_code == 1 and r.stderr.startswith(f"error: {prov}: not a provenance file") and "internal" not in r.stderr
    r = CliRunner().invoke(main, ["verify", str(out), "--json"])
    report = json.loads(r.stdout)
    assert r.exit_code == 1 and "internal" not in r.stderr
    bad = [c for c in report["checks"] if c["status"] == "fail"]
    assert [c["name"] for c in bad] == ["provenance"] and "not a provenance file" in json.dumps(bad)


def test_seeded_random_edits_of_provenance_never_crash_and_never_pass_verify(tmp_path):
    """The mutation fuzz of #29, on provenance: bytes of train.prov.npy or its ids file flipped (in
    the header or the records), the file cut short or grown, an id replaced by deeply nested JSON.
    verify always fails (meta.json holds both files' checksums) and names no internal error;
    inspect and windows --format jsonl, which read the records and ids, end with one line or succeed."""
    sft_corpus(tmp_path / "sft.jsonl", n=40, seed=3)
    out = tmp_path / "data"
    assert run("encode", tmp_path / "sft.jsonl", "-o", out, "--id-field", "id", "--val-fraction", "0", "-q").exit_code == 0
    plan = tmp_path / "p.npy"
    assert run("windows", out / "train.bin", "-T", 16, "--boundaries", "doc", "-o", plan, "-q").exit_code == 0
    files = [out / "train.prov.npy", out / "train.prov.ids.npy"]
    honest = {p: p.read_bytes() for p in files}
    rng = np.random.default_rng(29)
    for trial in range(40):
        for p, data in honest.items():
            p.write_bytes(data)
        p = files[int(rng.integers(2))]
        data = bytearray(honest[p])
        kind = int(rng.integers(5))
        if kind == 0:  # a byte in the header
            i = int(rng.integers(10, 128))
            data[i] ^= 1 + int(rng.integers(255))
        elif kind == 1:  # a byte of the records / ids
            i = int(rng.integers(128, len(data)))
            data[i] ^= 1 + int(rng.integers(255))
        elif kind == 2:
            data = data[: int(rng.integers(1, len(data)))]
        elif kind == 3:
            data += bytes(rng.integers(0, 256, int(rng.integers(1, 64)), dtype=np.uint8))
        else:  # ids: the first id's bytes replaced by JSON nested past any parser's depth, same length kept
            data[128:] = (b"[" * (len(data) - 128))
        p.write_bytes(bytes(data))
        r = CliRunner().invoke(main, ["verify", str(out), "--json", "--retokenize-sample=0"])
        assert r.exit_code == 1 and "internal error" not in r.stderr, (trial, kind, p.name, r.stderr)
        for args in (["inspect", str(plan), "--at", "3", "--count", "4", "--json"],
                     ["windows", str(out / "train.bin"), "-T", "16", "--format", "jsonl", "-o", "-", "-q"]):
            r = CliRunner().invoke(main, args)
            assert r.exit_code in (0, 1, 2) and "internal error" not in r.stderr, (trial, kind, p.name, args[0], r.stderr)
            assert r.exception is None or isinstance(r.exception, SystemExit), (trial, kind, args[0], r.exception)
