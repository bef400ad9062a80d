"""Plain-text files sent to workers as byte ranges (encode's fast path): ids, hashes, errors
and counts equal what reading the decoded text gives, derived here from tiktoken and by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
import xxhash

from winsample import formats
from winsample.encode import encode_corpus, textfile
from winsample.encode import inputs as sources
from winsample.encode.executors import local as encode_mod
from winsample.errors import DataError
from winsample.tokenizer.chunking import is_safe_cut, last_safe_cut_bytes

from ..conftest import CORPUS

EOT = 50256
# Multi-byte text around the cuts: CJK, combining marks, emoji ZWJ, CRLF, long space runs.
MIXED = "".join((CORPUS / n).read_text(encoding="utf-8") for n in ("macbeth.txt", "zh_sliding_windows.txt")) + (
    "Zoe\u0308 cafe\u0301\r\n\r\n👨\u200d👩\u200d👧 family  \t   spaces\n" * 200
)


@pytest.fixture
def tiny_ranges(monkeypatch):
    """Ranges of ~3 KB from files of 4 KB up: every corpus file is cut inside many times."""
    monkeypatch.setattr(encode_mod, "PIECE_BYTES", 3000)
    monkeypatch.setattr(encode_mod, "TASK_CHARS", 5000)
    monkeypatch.setattr(encode_mod, "RANGE_MIN_BYTES", 4096)
    monkeypatch.setattr(textfile, "CUT_WINDOW", 512)
    monkeypatch.setattr(textfile, "HEAD_BYTES", 1024)


@pytest.fixture
def faults(monkeypatch):
    """The RangeFaults the main process turned into errors (proves the ranged path ran)."""
    seen = []
    real = encode_mod.range_error

    def spy(src, kind, size):
        seen.append(kind)
        return real(src, kind, size)

    monkeypatch.setattr(encode_mod, "range_error", spy)
    return seen


def _split_docs(out, split):
    meta = formats.read_meta(out / "meta.json")
    ids = np.fromfile(out / formats.bin_name(split), dtype=meta["dtype"]).tolist()
    starts = formats.read_doc_index(out / formats.doc_index_name(split)).tolist()
    return [ids[a:b] for a, b in zip(starts, starts[1:] + [len(ids)])], meta


def test_byte_ranges_are_cut_inside_documents_at_safe_points(tmp_path, monkeypatch):
    monkeypatch.setattr(textfile, "CUT_WINDOW", 512)
    path = tmp_path / "m.txt"
    path.write_text(MIXED, encoding="utf-8")
    raw = path.read_bytes()
    src = sources.resolve_inputs([str(path)])[0]
    tf = textfile.TextFile.open(src, 0, "strict", 4096)
    specs = list(tf.ranges(3000))
    tf.close()
    assert len(specs) > len(raw) // 3100
    assert specs[0][2] == 0 and specs[-1][3] == len(raw)
    assert all(a[3] == b[2] for a, b in zip(specs, specs[1:]))
    assert tf.forced_cuts == 0 and all(s[3] - s[2] <= 3008 for s in specs)
    for s in specs[:-1]:  # each cut: a char boundary where the whole text may be cut safely
        chars = len(raw[: s[3]].decode("utf-8"))
        assert is_safe_cut(MIXED, chars)


def test_window_cut_skips_a_split_character_and_maps_to_bytes():
    window = "滑b\nc".encode()[2:]  # starts inside 滑: two continuation bytes, then "b\nc"
    assert last_safe_cut_bytes(window, 100) == 100 + 1 + 1  # before "\n": skip 1 byte, "b" is 1 byte
    assert last_safe_cut_bytes(b"a b"[:2]) is None  # the letter after the space is not in the window


@pytest.mark.parametrize("split", ["doc", "tail"])
@pytest.mark.parametrize("workers", [1, 2])
def test_byte_ranges_give_whole_document_tiktoken_ids(tmp_path, tiny_ranges, ref_gpt2, split, workers):
    names = ["hamlet.txt", "sonnets.txt", "zh_sliding_windows.txt"]
    texts = [(CORPUS / n).read_text(encoding="utf-8") for n in names] + [MIXED]
    inputs = [str(CORPUS / n) for n in names]
    (tmp_path / "mixed.txt").write_text(MIXED, encoding="utf-8")
    inputs.append(str(tmp_path / "mixed.txt"))
    out = tmp_path / "out"
    s = encode_corpus(inputs, out, split=split, val_fraction=0.5, seed=3, workers=workers)
    expect = [ref_gpt2.encode_ordinary(t) + [EOT] for t in texts]
    train, meta = _split_docs(out, "train")
    val, _ = _split_docs(out, "val")
    assert s["forced_cuts"] == 0
    if split == "doc":  # each document whole on the side its documented hash picks
        threshold = 2**63
        want_val = [xxhash.xxh3_64_intdigest(b"3\0" + t.encode()) < threshold for t in texts]
        assert val == [e for e, v in zip(expect, want_val) if v]
        assert train == [e for e, v in zip(expect, want_val) if not v]
    else:  # one stream, cut at N - floor(N / 2)
        stream = [i for e in expect for i in e]
        cut = len(stream) - math.floor(len(stream) * 0.5)
        assert [i for d in train for i in d] == stream[:cut]
        assert [i for d in val for i in d] == stream[cut:]
    assert [i["bytes"] for i in meta["inputs"]] == [len(t.encode()) for t in texts]


def test_byte_ranges_and_decoded_path_write_identical_sets(tmp_path, monkeypatch):
    (tmp_path / "mixed.txt").write_text(MIXED, encoding="utf-8")
    inputs = [str(CORPUS / "macbeth.txt"), str(tmp_path / "mixed.txt")]
    encode_corpus(inputs, tmp_path / "ranges", val_fraction=0.5, seed=1, workers=2)
    monkeypatch.setattr(encode_mod, "RANGE_MIN_BYTES", 1 << 62)  # every file decoded in the main process
    encode_corpus(inputs, tmp_path / "decoded", val_fraction=0.5, seed=1, workers=2)
    for name in ("train.bin", "val.bin", "train.docs.npy", "val.docs.npy", "meta.json"):
        assert (tmp_path / "ranges" / name).read_bytes() == (tmp_path / "decoded" / name).read_bytes(), name


@pytest.mark.parametrize("workers", [1, 2])
def test_invalid_utf8_deep_in_a_ranged_file_names_byte_and_line(tmp_path, tiny_ranges, faults, workers):
    good = "Plain line of text number one.\n" * 1000  # 31 bytes a line
    bad = tmp_path / "bad.txt"
    bad.write_bytes(good.encode() + b"caf\xc3(x\n" + good.encode())
    with pytest.raises(DataError) as e:
        encode_corpus([str(bad)], tmp_path / "out", split="tail", workers=workers)
    # 31000 good bytes, then "caf": the bad byte is at 31003, on line 1001.
    assert str(e.value).startswith(f"{bad}: invalid UTF-8 at byte 31003 (line 1001): invalid continuation byte (bytes c3 28 78 0a)")
    assert not (tmp_path / "out").exists()
    assert faults == ["bytes"]


def test_nul_deep_in_a_ranged_file_names_its_byte(tmp_path, tiny_ranges, faults):
    bad = tmp_path / "bin.txt"
    bad.write_bytes(b"words and words\n" * 2000 + b"\0tail")  # 16 bytes a line
    with pytest.raises(DataError) as e:
        encode_corpus([str(bad)], tmp_path / "out", split="tail", workers=2)
    assert f"{bad}: binary file (NUL byte at byte 32000)" in str(e.value)
    assert faults == ["bytes"]


def forced_positions(text: str, long_run: int) -> list[int]:
    """The forced-cut rule by brute force (tokenizer/chunking.py): in each stretch between
    consecutive safe cuts s < s' longer than long_run, s + long_run, s + 2·long_run, … before s'."""
    safe = [0] + [p for p in range(1, len(text) - 1) if is_safe_cut(text, p)] + [len(text)]
    return [q for s, t in zip(safe, safe[1:]) if t - s > long_run for q in range(s + long_run, t, long_run)]


def test_a_run_without_a_safe_cut_is_cut_by_force_at_the_same_characters_on_every_path(tmp_path, tiny_ranges,
                                                                                         monkeypatch, ref_gpt2):
    """A plain file read as byte ranges, its gzip read as decoded text, the same text as one JSONL
    record, on 1 and 2 workers: the same ids, cut by force exactly where the rule says (memory
    stays bounded by the run's cap, #29 class 3), and the ids elsewhere tiktoken's of the whole."""
    import gzip
    import json

    monkeypatch.setattr(encode_mod, "PIECE_CHARS", 500)
    monkeypatch.setattr(encode_mod, "LONG_RUN_CHARS", 2000)
    text = "intro words\n" * 100 + "。，！" * 3000 + "\nend words\n" * 100 + "z" * 4500 + " last words"
    want_cuts = forced_positions(text, 2000)
    assert len(want_cuts) == 4 + 2  # the 9000-char punctuation stretch: 4 cuts; the 4500 z's: 2
    bounds = [0] + want_cuts + [len(text)]
    want = [i for a, b in zip(bounds, bounds[1:]) for i in ref_gpt2.encode_ordinary(text[a:b])] + [EOT]
    assert want != ref_gpt2.encode_ordinary(text) + [EOT]  # the forced cuts do change ids here
    (tmp_path / "p.txt").write_text(text, encoding="utf-8")
    with gzip.open(tmp_path / "p.txt.gz", "wt", encoding="utf-8") as f:
        f.write(text)
    (tmp_path / "p.jsonl").write_text(json.dumps({"text": text}) + "\n", encoding="utf-8")
    for name in ("p.txt", "p.txt.gz", "p.jsonl"):
        for workers in (1, 2):
            out = tmp_path / f"out-{name}-{workers}"
            s = encode_corpus([str(tmp_path / name)], out, val_fraction=0, workers=workers)
            assert s["forced_cuts"] == len(want_cuts), (name, workers)
            assert np.fromfile(out / "train.bin", "<u2").tolist() == want, (name, workers)


def test_bad_bytes_in_an_earlier_ranged_file_are_reported_before_a_later_files_error(tmp_path, tiny_ranges, faults):
    first = tmp_path / "a.txt"
    first.write_bytes(b"words and words\n" * 2000 + b"\xff end\n")  # bad byte at 32000, line 2001
    second = tmp_path / "b.txt"
    second.write_bytes(b"small \0 binary")  # below RANGE_MIN_BYTES: read in the main process
    with pytest.raises(DataError) as e:
        encode_corpus([str(first), str(second)], tmp_path / "out", split="tail", workers=2)
    # both are bad: both listed (--on-bad-input fail reads on), the earlier file's first
    assert str(e.value).startswith("2 bad inputs")
    assert e.value.details[0].startswith(f"bad input: {first}: invalid UTF-8 at byte 32000 (line 2001)")
    assert e.value.details[1].startswith(f"bad input: {second}: binary file (NUL byte at byte 6)")


@pytest.mark.parametrize("extra", [-1, 0, 1, 2, 3])
def test_byte_ranges_and_the_chunker_cut_a_run_at_the_end_of_a_file_alike(tmp_path, extra):
    """A file that ends inside a stretch with no safe cut of long_run + extra characters: the last
    forced cut is made by both paths when a character follows it, by neither otherwise (the review
    found the byte path counting bytes there, so a run of long_run + 1 chars lost its cut)."""
    from winsample.tokenizer.chunking import TextChunker

    L = 2000
    text = "hello world" + "?" * (L + extra - 5)  # a safe cut at 5 (" world"), then L + extra + 1 chars without one
    c = TextChunker(500, L)
    pieces = c.feed(text) + c.finish()
    ends = [sum(map(len, pieces[: k + 1])) for k in range(len(pieces))]
    path = tmp_path / "t.txt"
    path.write_text(text, encoding="utf-8")
    tf = textfile.TextFile.open(sources.resolve_inputs([str(path)])[0], 0, "strict", 1, None, L)
    assert [r[3] for r in tf.ranges(500)] == ends and tf.forced_cuts == c.forced_cuts == (1 if extra >= 0 else 0)
    tf.close()


def test_a_range_the_worker_could_not_open_names_why_when_the_file_opens_again(tmp_path):
    """A passing open failure in a worker (too many open files): `cannot read: why`, exit 2, not
    "the file changed (N bytes before, N after)" as if it had changed."""
    from winsample.encode.ranges import RangeFault, range_error, read_text_range
    from winsample.errors import InputError

    path = tmp_path / "t.txt"
    path.write_text("some text\n" * 100)
    src = sources.resolve_inputs([str(path)])[0]
    e = range_error(src, "unreadable", src.size, "Too many open files")
    assert isinstance(e, InputError) and e.exit_code == 2 and str(e) == f"{path}: cannot read: Too many open files"
    path.unlink()
    with pytest.raises(RangeFault) as fault:
        read_text_range(0, str(path), 0, 10, src.size, src.mtime_ns)
    assert fault.value.args == (0, "unreadable", src.size, "No such file or directory")
    with pytest.raises(InputError, match=f"^{path}: no such file$"):
        range_error(src, *fault.value.args[1:])
