"""Data goes to stdout through one function (``cli.common.emit``): a stdout that cannot take it
(a full disk behind ``>``) is one line and exit 2, and says whether the command's outputs are
complete; a closed pipe stays quiet (#29, class 5)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ..conftest import CORPUS

WS = [sys.executable, "-c", "from winsample.cli import entry; entry()"]


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs Linux's /dev/full (a stdout that is always full)")
def test_a_full_stdout_is_one_line_and_says_the_encoded_folder_is_complete(tmp_path):
    with open("/dev/full", "w") as full:
        r = subprocess.run(WS + ["encode", str(CORPUS), "-o", str(tmp_path / "data"), "--json", "-q"], stdout=full,
                           stderr=subprocess.PIPE, text=True, timeout=120)
    assert r.returncode == 2
    assert r.stderr == (f"error: stdout: cannot write: no space left on the device; free some space and run again;"
                        f" {tmp_path / 'data'} was written and is complete\n")
    assert (tmp_path / "data" / "meta.json").exists()  # committed before the report was printed
    with open("/dev/full", "w") as full:
        r = subprocess.run(WS + ["inspect", str(tmp_path / "data")], stdout=full, stderr=subprocess.PIPE, text=True,
                           timeout=120)
    assert r.returncode == 2 and r.stderr == "error: stdout: cannot write: no space left on the device; free some space and run again\n"


def test_a_closed_pipe_stays_quiet(tmp_path):
    subprocess.run(WS + ["encode", str(CORPUS), "-o", str(tmp_path / "data"), "-q"], check=True, timeout=120)
    p = subprocess.Popen(WS + ["inspect", str(tmp_path / "data" / "train.bin"), "--count", "100000"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()  # the reader went away (`| head`)
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) == 0 and err == ""


def test_a_closed_stdin_is_one_line(tmp_path):
    # #29 class 5: `winsample encode - <&-` was an internal AttributeError (Python's sys.stdin is None)
    r = subprocess.run(WS + ["encode", "-", "-o", str(tmp_path / "out"), "--val-fraction", "0", "-q"],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
                       preexec_fn=lambda: os.close(0))
    assert r.returncode == 2 and r.stderr == "error: -: standard input is closed: pipe the text in, or name the files\n"
    assert not (tmp_path / "out").exists()
