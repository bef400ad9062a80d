"""A tokenizer file is read only up to a bound (#29, class 3): a huge or sparse file, or a gzip
bomb, is refused with one line instead of being read (or unpacked) whole."""

from __future__ import annotations

import resource
import subprocess
import sys
import zlib

import pytest

from winsample.errors import ConfigError
from winsample.tokenizer import bpe


def test_a_sparse_600_mib_tokenizer_json_is_refused_without_reading_it(tmp_path):
    big = tmp_path / "tokenizer.json"
    with open(big, "wb") as f:
        f.truncate(600 << 20)  # sparse: no disk used
    corpus = tmp_path / "c.txt"
    corpus.write_text("hello\n")
    code = ("import atexit, sys\nfrom winsample.cli import entry\n"
            "sys.argv = ['winsample', 'encode', sys.argv[1], '--tokenizer-file', sys.argv[2], '-o', sys.argv[3], '-q']\n"
            "def peak():\n"
            "    hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM')][0].split()[1]\n"
            "    print(hwm, file=sys.stderr)\n"
            "atexit.register(peak)\n"  # entry never returns: it ends the process after the exit handlers
            "entry()")  # this process's peak (ru_maxrss would carry the forking parent's)
    r = subprocess.run([sys.executable, "-c", code, str(corpus), str(big), str(tmp_path / "out")],
                       capture_output=True, text=True, timeout=120)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and lines[0] == f"error: {big}: larger than 256 MiB: not a tokenizer file (real ones are tens of MB)"
    assert int(lines[-1]) < 400_000  # KiB: refused by its size, never read (a 3 GB file took 3.2 GB)


def test_a_gzip_bomb_is_refused_after_unpacking_at_most_the_bound(tmp_path):
    bomb = tmp_path / "ranks.tiktoken"
    c = zlib.compressobj(1, zlib.DEFLATED, 31)  # gzip, written in chunks: 600 MiB of zeros in ~600 KB
    with open(bomb, "wb") as f:
        chunk = bytes(16 << 20)
        for _ in range(600 >> 4):
            f.write(c.compress(chunk))
        f.write(c.flush())
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(ConfigError, match="larger than 256 MiB unpacked"):
        bpe.read_ranks_file(bomb)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 400_000  # KiB: the 256 MiB bound and a step


def test_a_truncated_gzip_is_broken_gzip(tmp_path):
    p = tmp_path / "r.tiktoken.gz"
    p.write_bytes(zlib.compress(b"YQ== 0\n" * 1000, wbits=31)[:-12])
    with pytest.raises(ConfigError, match="broken gzip"):
        bpe.read_ranks_file(p)


def test_a_two_member_gzip_reads_as_both(tmp_path):
    p = tmp_path / "r.tiktoken.gz"
    p.write_bytes(zlib.compress(b"YQ== 0\n", wbits=31) + zlib.compress(b"Yg== 1\n", wbits=31))
    assert bpe.read_ranks_file(p) == b"YQ== 0\nYg== 1\n"
