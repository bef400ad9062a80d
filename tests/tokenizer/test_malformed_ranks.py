"""A malformed ranks file is one line naming what is wrong, before tiktoken's or gigatoken's Rust
sees it (a duplicated rank made tiktoken panic with a 215-line traceback; a rank of 10**20 was
an internal OverflowError) (#29, class 5)."""

from __future__ import annotations

import base64

import pytest
from click.testing import CliRunner

from winsample.cli import main


def ranks_file(path, extra: list[tuple[bytes, int]]):
    lines = [f"{base64.b64encode(bytes([i])).decode()} {i}" for i in range(256)]
    lines += [f"{base64.b64encode(tok).decode()} {rank}" for tok, rank in extra]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize(("extra", "words"), [
    ([(b"ab", 5)], "rank 5 is given to two tokens: not a ranks file"),
    ([(b"ab", 10**20)], f"rank {10**20} is outside [0, 2147483647]: not a ranks file"),
    ([(b"ab", -3)], "rank -3 is outside [0, 2147483647]: not a ranks file"),
    ([(b"ab", 300), (b"ab", 301)], "a token appears on 1 more line(s) than once: not a ranks file"),
])
def test_a_malformed_ranks_file_is_one_line_and_exit_2(tmp_path, extra, words):
    f = ranks_file(tmp_path / "bad.tiktoken", extra)
    (tmp_path / "c.txt").write_text("hello world\n")
    r = CliRunner().invoke(main, ["encode", str(tmp_path / "c.txt"), "--tokenizer-file", str(f), "-o", str(tmp_path / "out")])
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr == f"error: {f}: {words}\n"
    assert not (tmp_path / "out").exists()


def test_a_tokenizer_the_fast_engine_panics_on_falls_back_in_one_line_or_is_refused(tmp_path, gpt2_ranks_file, ref_gpt2):
    """GPT-2's ranks plus 20,000 tokens no merge can build: tiktoken takes them, gigatoken's Rust
    asserts (a PanicException, which is no Exception, and a panic message on stderr). --backend
    auto uses the reference and says why in one line; --backend fast is one line, exit 2; the
    Rust lines never reach the terminal."""
    lines = gpt2_ranks_file.read_bytes().splitlines()
    extra = [base64.b64encode(f"tok{i}xyz".encode()) + b" " + str(len(lines) + i).encode() for i in range(20_000)]
    f = tmp_path / "extra.tiktoken"
    f.write_bytes(b"\n".join(lines + extra) + b"\n")
    text = "Hello world, this is winsample.\n" * 50
    (tmp_path / "c.txt").write_text(text)
    import subprocess
    import sys

    import numpy as np

    run = [sys.executable, "-m", "winsample", "encode", str(tmp_path / "c.txt"), "--tokenizer-file", str(f),
           "--val-fraction", "0", "--workers", "1"]
    r = subprocess.run([*run, "-o", str(tmp_path / "auto")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    note = [x for x in r.stderr.splitlines() if "fast engine" in x]
    assert len(note) == 1 and "using the reference" in note[0] and "panicked" in note[0]
    assert "panicked at" not in r.stderr and "RUST_BACKTRACE" not in r.stderr
    got = np.fromfile(tmp_path / "auto" / "train.bin", np.uint32).tolist()  # 70,256 ids: uint32
    assert got == ref_gpt2.encode_ordinary(text) + [len(lines) + 20_000]  # GPT-2's ids (no extra token matches), then its EOT: the next id
    r = subprocess.run([*run, "--backend", "fast", "-o", str(tmp_path / "fast")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr == "error: the fast engine cannot take this tokenizer: it panicked (assertion `left == right` failed)\n"
    assert not (tmp_path / "fast").exists()


@pytest.mark.parametrize("spec", ['{"model": ' + "[" * 100_000 + "]" * 100_000 + "}",
                                  '{"model": {"type": "BPE", "vocab": ' + "[" * 100_000 + "]" * 100_000 + "}}"],
                         ids=["deep-top", "deep-model"])
def test_a_tokenizer_json_nested_past_any_parser_is_one_line(tmp_path, spec):
    f = tmp_path / "tokenizer.json"
    f.write_text(spec)
    (tmp_path / "c.txt").write_text("hello world\n")
    r = CliRunner().invoke(main, ["encode", str(tmp_path / "c.txt"), "--tokenizer-file", str(f), "-o", str(tmp_path / "out")])
    assert r.exit_code == 2 and r.stdout == "" and r.stderr.count("\n") == 1 and str(f) in r.stderr
    assert "internal error" not in r.stderr and ("nested too deeply" in r.stderr or "recursion limit" in r.stderr)
    assert not (tmp_path / "out").exists()
