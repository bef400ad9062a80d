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
