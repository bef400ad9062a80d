"""`encode --engine ray` with no --address while a cluster started by `ray start` runs on this
machine (a module of its own: that cluster is started and stopped here, never test_ray's)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from winsample.encode import encode_corpus

from ..conftest import CORPUS


@contextlib.contextmanager
def cluster_here(cpus: int):
    """A cluster `ray start` runs on this machine (its own temp folder), and the environment that finds it."""
    short = Path(tempfile.mkdtemp(prefix="ws-ray-", dir="/tmp"))  # Ray's socket paths must stay short
    env = dict(os.environ, RAY_AUTH_MODE="disabled", RAY_TMPDIR=str(short))
    ray_bin = str(Path(sys.executable).parent / "ray")
    head = subprocess.Popen([ray_bin, "start", "--head", f"--num-cpus={cpus}", "--include-dashboard=false", "--port=0", "--block"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not (short / "ray" / "ray_current_cluster").exists():
            assert time.monotonic() < deadline and head.poll() is None, "ray start did not come up"
            time.sleep(0.2)
        yield env
    finally:  # the cluster's processes are in the session `ray start` leads: all of them go
        os.killpg(head.pid, signal.SIGKILL)
        head.wait(60)
        shutil.rmtree(short, ignore_errors=True)


def encode_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "winsample", "encode", *args]


def test_without_address_a_run_starts_its_own_cluster_beside_a_running_one(tmp_path):
    """Ray joins a cluster that `ray start` runs here when no address is given; a run given no
    --address must start (and stop) its own with --workers CPUs, not fail joining that one with them."""
    with cluster_here(1) as env:
        out = subprocess.run(encode_cmd(str(CORPUS / "sonnets.txt"), "-o", str(tmp_path / "o"), "--engine", "ray",
                                        "--workers", "1", "--merge", "--split", "tail", "--json", "-q"),
                             capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    encode_corpus([str(CORPUS / "sonnets.txt")], tmp_path / "local", workers=1, split="tail")
    for name in ("train.bin", "val.bin"):
        assert (tmp_path / "o" / name).read_bytes() == (tmp_path / "local" / name).read_bytes()
    assert json.loads(out.stdout)["engine"] == "ray"


def test_sigterm_during_a_merge_in_parts_keeps_the_finished_parts_and_the_rerun_reuses_them(tmp_path):
    """Ray's driver puts handlers of its own on SIGTERM (a stack dump, exit 15): the CLI's go back,
    so a terminated run cancels its tasks, keeps its finished parts, says so in one line and exits
    128 + 15; the same command then reuses those parts and writes the local engine's bytes."""
    src = tmp_path / "big.txt"
    src.write_text(CORPUS.joinpath("hamlet.txt").read_text("utf-8") * 150, encoding="utf-8")  # ~27 MB
    args = [str(src), "-o", str(tmp_path / "o"), "--engine", "ray", "--merge", "--address", "auto", "--split", "tail",
            "--shard-size", "64KB"]
    with cluster_here(2) as env:
        run = subprocess.Popen(encode_cmd(*args, "-q"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        parts = tmp_path / "o" / ".partial" / "parts"
        deadline = time.monotonic() + 120
        while len(list(parts.glob("*/done.json"))) < 3:
            assert time.monotonic() < deadline and run.poll() is None, "the run ended before three parts were done"
            time.sleep(0.02)
        run.send_signal(signal.SIGTERM)
        _, err = run.communicate(timeout=120)
        assert run.returncode == 128 + signal.SIGTERM, err
        lines = err.strip().splitlines()
        assert len(lines) == 1 and "interrupted by SIGTERM" in lines[0] and "rerun to continue" in lines[0]
        kept = len(list(parts.glob("*/done.json")))
        again = subprocess.run(encode_cmd(*args, "--json", "-q"), capture_output=True, text=True, env=env, timeout=300)
    assert again.returncode == 0, again.stderr
    summary = json.loads(again.stdout)
    assert summary["shards_reused"] == kept >= 3
    encode_corpus([str(src)], tmp_path / "local", workers=1, split="tail")
    for name in ("train.bin", "val.bin"):
        assert (tmp_path / "o" / name).read_bytes() == (tmp_path / "local" / name).read_bytes()


def _session_alive(sid: int) -> list[str]:
    """The processes still in session ``sid`` (a run started in a session of its own, and what it started)."""
    out = subprocess.run(["ps", "-e", "-o", "sid=,pid=,args="], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if line.split() and line.split()[0] == str(sid)]


def test_a_run_with_a_cluster_of_its_own_is_quiet_and_a_sigterm_at_any_moment_ends_it_in_one_line(tmp_path):
    """Ray's defaults as a user meets them (token authentication unset, a fresh home): with -q a
    run prints nothing. A SIGTERM at any moment (starting the cluster, encoding, committing,
    stopping the cluster) ends the run with exit 143 and one line that tells the truth (nothing
    written, or the output committed whole, as the folder shows), and leaves no Ray process behind.
    Before: Ray's notice on every run; exit 15 without a word, a stack and an abort (134), or a
    crash at exit (139); "nothing was written" beside a committed set."""
    short = Path(tempfile.mkdtemp(prefix="ws-ray-", dir="/tmp"))  # Ray's socket paths must stay short
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(HOME=str(tmp_path / "home"), RAY_TMPDIR=str(short))  # Ray writes ~/.ray/auth_token
    src = tmp_path / "plays.txt"
    src.write_text(CORPUS.joinpath("hamlet.txt").read_text("utf-8") * 20, encoding="utf-8")  # ~3.6 MB
    encode_corpus([str(src)], tmp_path / "local", workers=1, split="tail")
    want = {n: (tmp_path / "local" / n).read_bytes() for n in ("train.bin", "val.bin")}

    def start(out: Path) -> subprocess.Popen:
        return subprocess.Popen(encode_cmd(str(src), "-o", str(out), "--engine", "ray", "--merge", "--workers", "2",
                                           "--split", "tail", "-q"),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)

    runs = []
    try:
        t = time.monotonic()
        whole = start(tmp_path / "whole")
        runs.append(whole)
        out, err = whole.communicate(timeout=300)
        seconds = time.monotonic() - t
        assert (whole.returncode, out, err) == (0, "", "")
        for frac in (0.1, 0.35, 0.6, 0.8, 0.9, 0.97):
            dest = tmp_path / f"at-{frac}"
            run = start(dest)
            runs.append(run)
            time.sleep(frac * seconds)
            run.send_signal(signal.SIGTERM)
            out, err = run.communicate(timeout=120)
            if run.returncode == 0:  # it ended first
                assert (out, err) == ("", "")
            else:
                assert run.returncode == 128 + signal.SIGTERM, (frac, err)
                lines = err.splitlines()
                assert len(lines) == 1 and lines[0].startswith("error: interrupted by SIGTERM; "), (frac, err)
                assert lines[0].endswith(f"{dest} was committed whole before it arrived") == (dest / "meta.json").exists()
            if (dest / "meta.json").exists():
                assert {n: (dest / n).read_bytes() for n in want} == want
            deadline = time.monotonic() + 30
            while _session_alive(run.pid):
                assert time.monotonic() < deadline, (frac, _session_alive(run.pid))
                time.sleep(0.2)
    finally:
        for run in runs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(run.pid, signal.SIGKILL)
        shutil.rmtree(short, ignore_errors=True)
