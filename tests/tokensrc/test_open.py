"""tokensrc.open_split: one way to open a token stream, one tokenizer rule, for every command.

The reported case: a dataset encoded with `--tokenizer-file mini.tiktoken` decoded in `verify`
but `windows --boundaries paragraph` exited 2 ("tokenizer 'mini' … not known") and `inspect`
suggested a `--tokenizer-file` option it does not have.
"""

import json

import numpy as np
import pytest
from click.testing import CliRunner

from winsample import formats, tokensrc
from winsample.cli import main
from winsample.errors import InputError

from ..conftest import FIXTURES

GOLDEN = FIXTURES / "golden_v1"
TEXT = "First paragraph, one sentence.\n\nSecond paragraph here. It has two sentences.\n\nThird one.\n"
CORPUS = TEXT + "".join(f"\nParagraph {i} counts {i * 7} apples. Then {i * 13} pears follow.\n" for i in range(200))


def cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture
def mini(tmp_path, gpt2_ranks_file, monkeypatch):
    """A data folder encoded with --tokenizer-file mini.tiktoken (GPT-2's ranks under another name),
    given relative to the working folder as a user types it."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mini.tiktoken").write_bytes(gpt2_ranks_file.read_bytes())
    (tmp_path / "in.txt").write_text(CORPUS)
    r = cli("encode", "in.txt", "-o", "data", "--tokenizer-file", "mini.tiktoken", "--split", "tail",
            "--val-fraction", "0.2", "--workers", "1", "-q")
    assert r.exit_code == 0, r.stderr
    meta = json.loads((tmp_path / "data" / "meta.json").read_text())
    assert meta["tokenizer"]["name"] == "mini" and meta["tokenizer"]["file"] == "mini.tiktoken"
    return tmp_path / "data"


def test_windows_paragraph_boundaries_on_a_tokenizer_file_dataset(mini, ref_gpt2):
    r = cli("windows", mini / "train.bin", "-T", "64", "--boundaries", "paragraph", "-o", mini / "p.npy", "-q")
    assert r.exit_code == 0, r.stderr
    rows, side = formats.load_plan(mini / "p.npy")
    tokens = np.fromfile(mini / "train.bin", "<u2")
    # a window cut short before the file's end stops right after a blank line (GPT-2 decodes it)
    ends = [int(s + n) for s, n in zip(rows["start"], rows["length"]) if s + n < len(tokens) and n < side.span]
    assert ends and all(ref_gpt2.decode(tokens[:e].tolist()).endswith("\n\n") for e in ends)


def test_inspect_decodes_a_tokenizer_file_dataset(mini, ref_gpt2):
    r = cli("inspect", mini / "train.bin", "--count", "8", "--json")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["decoded_with"] == "mini" and doc["warnings"] == []
    assert doc["text"] == ref_gpt2.decode(ref_gpt2.encode_ordinary(TEXT)[:8])


def test_verify_passes_a_tokenizer_file_dataset(mini):
    r = cli("verify", mini, "--json", "-q")
    assert r.exit_code == 0, r.stdout
    meta = next(c for c in json.loads(r.stdout)["checks"] if c["name"] == "meta")
    assert meta["status"] == "pass" and "'mini'" in meta["detail"]


def test_tokenizer_file_moved_into_the_data_folder_is_still_found(mini, tmp_path, monkeypatch):
    (tmp_path / "mini.tiktoken").rename(mini / "mini.tiktoken")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    r = cli("windows", mini / "train.bin", "-T", "16", "--boundaries", "sentence", "-o", mini / "p.npy", "-q")
    assert r.exit_code == 0, r.stderr


def test_a_missing_tokenizer_file_names_encoding_never_tokenizer_file(mini, tmp_path):
    (tmp_path / "mini.tiktoken").unlink()
    r = cli("windows", mini / "train.bin", "-T", "16", "--boundaries", "paragraph", "-o", mini / "p.npy")
    assert r.exit_code == 2 and "--encoding" in r.stderr and "--tokenizer-file" not in r.stderr
    r = cli("inspect", mini / "train.bin", "--json")
    assert r.exit_code == 0
    doc = json.loads(r.stdout)
    assert "pieces" not in doc and any("cannot decode" in w and "--tokenizer-file" not in w for w in doc["warnings"])
    r = cli("inspect", mini / "train.bin", "--encoding", "gpt2", "--json")  # an explicit tokenizer still decodes
    assert r.exit_code == 0 and json.loads(r.stdout)["decoded_with"] == "gpt2"


def test_open_split_of_golden_split(ref_gpt2):
    src = tokensrc.open_split(GOLDEN / "val.bin")
    assert (src.name, src.dtype, src.n, src.nbytes, src.stray) == ("val", "<u2", 4, 8, 0)
    assert src.tokens.tolist() == ref_gpt2.encode_ordinary("The end.") + [50256]
    assert src.doc_starts().tolist() == [0] and src.eot == 50256 and src.tokenizer.name == "gpt2"
    assert src.checksum == src.meta.splits["val"].checksum and src.size_problem() is None


def test_open_split_of_bare_bin_and_refusals(tmp_path):
    b = tmp_path / "x.bin"
    np.arange(7, dtype="<u2").tofile(b)
    src = tokensrc.open_split(b)
    assert src.meta is None and src.n == 7 and src.doc_starts() is None and src.tokenizer.name == "gpt2"
    with pytest.raises(InputError, match="describes train.bin, val.bin, not x.bin"):
        tokensrc.open_split(b, GOLDEN / "meta.json")
    with pytest.raises(InputError, match="no such file"):
        tokensrc.open_split(tmp_path / "nope.bin")
    (tmp_path / "t.txt").write_text("hello")
    with pytest.raises(InputError, match="not a .bin"):
        tokensrc.open_split(tmp_path / "t.txt")
    assert [s.name for s in tokensrc.open_folder(GOLDEN)] == ["train", "val"]


def test_a_stream_of_many_files_read_on_threads_while_maps_are_dropped_gives_every_id(tmp_path, monkeypatch):
    """8 threads slice a ConcatTokens of 300 files with room for 16 maps (planning.boundaries scans
    one stream on several threads): every slice equals the same slice of the concatenation,
    nothing raises, and no more than 16 files stay mapped."""
    import sys
    import threading

    from winsample.tokensrc import sharded

    monkeypatch.setattr(sharded, "OPEN_MAPS", 16)
    rng = np.random.default_rng(5)
    counts = rng.integers(0, 40, 300).tolist()
    whole = np.arange(sum(counts), dtype="<u2")
    paths, at = [], 0
    for k, c in enumerate(counts):
        p = tmp_path / f"s{k:03d}.bin"
        whole[at : at + c].tofile(p)
        paths.append(p)
        at += c
    stream = sharded.ConcatTokens(paths, counts, "<u2")
    errors = []

    def reader(seed):
        r = np.random.default_rng(seed)
        try:
            for _ in range(200):
                lo = int(r.integers(0, len(whole)))
                hi = min(len(whole), lo + int(r.integers(1, 200)))
                assert np.array_equal(stream[lo:hi], whole[lo:hi])
        except BaseException as e:  # noqa: BLE001 - the thread's failure is the test's
            errors.append(e)

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible: races show
    try:
        threads = [threading.Thread(target=reader, args=(s,)) for s in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    assert errors == []
    assert len(stream._maps) <= 16


def test_a_stream_of_files_pickles_as_its_file_list_and_reads_the_same_ids(tmp_path):
    import pickle

    from winsample.tokensrc import sharded

    for k in range(3):
        np.arange(k * 10, k * 10 + 10, dtype="<u2").tofile(tmp_path / f"s{k}.bin")
    stream = sharded.ConcatTokens([tmp_path / f"s{k}.bin" for k in range(3)], [10, 10, 10], "<u2")
    assert stream[5:25].tolist() == list(range(5, 25))  # maps are open now
    again = pickle.loads(pickle.dumps(stream))
    assert again[0:30].tolist() == list(range(30))
