"""Under a memory limit (``ulimit -v``) every command ends in one line, never a hang or a
traceback (#29, class 5): numpy's OpenBLAS spins forever below ~100 MiB of address space, the
fast engine's Rust aborts below ~190 MiB, so a limit under ``MIN_ADDRESS_SPACE`` is refused at
the start; above it, what runs out of memory (a thread that cannot start, a library that cannot
be mapped, a MemoryError) is one line and exit 2."""

from __future__ import annotations

import resource
import subprocess
import sys

import pytest
from click.testing import CliRunner

from winsample.cli import early, main

from ..conftest import CORPUS


@pytest.mark.parametrize("mib", [64, 100, 200])
def test_a_limit_too_small_to_load_the_libraries_is_refused_at_once(tmp_path, mib):
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (mib << 20, resource.RLIM_INFINITY))

    r = subprocess.run([sys.executable, "-m", "winsample", "encode", str(CORPUS / "sonnets.txt"), "-o", str(tmp_path / "o"),
                        "--val-fraction", "0"], capture_output=True, text=True, preexec_fn=limit, timeout=60)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == (f"error: the address-space limit (ulimit -v) is {mib} MiB; winsample needs at least"
                        f" {early.MIN_ADDRESS_SPACE >> 20} MiB to load its libraries\n")
    assert not (tmp_path / "o").exists()


def test_what_runs_out_of_memory_is_told_apart_from_a_bug():
    assert early.out_of_memory(MemoryError()).startswith("error: out of memory (MemoryError: no details)")
    assert "can't start new thread" in early.out_of_memory(RuntimeError("can't start new thread"))
    assert early.out_of_memory(ImportError("x.so: failed to map segment from shared object")) is not None
    assert early.out_of_memory(OSError(12, "Cannot allocate memory")) is not None
    assert early.out_of_memory(RuntimeError("something else")) is None
    assert early.out_of_memory(ValueError("failed to map segment")) is None


def test_a_thread_that_cannot_start_is_one_line_and_exit_2(tmp_path, monkeypatch):
    from winsample.encode.executors import local

    def no_thread(*a, **k):
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(local, "run_local", no_thread)
    from winsample import encode

    monkeypatch.setattr(encode, "run_local", no_thread)
    r = CliRunner().invoke(main, ["encode", str(CORPUS / "sonnets.txt"), "-o", str(tmp_path / "o"), "--val-fraction", "0"])
    assert r.exit_code == 2 and r.stdout == "" and r.stderr.count("\n") == 1
    assert r.stderr.startswith("error: out of memory (RuntimeError: can't start new thread)")
