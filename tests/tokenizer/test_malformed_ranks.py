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
