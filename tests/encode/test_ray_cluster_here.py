"""`encode --engine ray` with no --address while a cluster started by `ray start` runs on this
machine (a module of its own: that cluster is started and stopped here, never test_ray's)."""

from __future__ import annotations

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


def test_without_address_a_run_starts_its_own_cluster_beside_a_running_one(tmp_path):
    """Ray joins a cluster that `ray start` runs here when no address is given; a run given no
    --address must start (and stop) its own with --workers CPUs, not fail joining that one with them."""
    short = Path(tempfile.mkdtemp(prefix="ws-ray-", dir="/tmp"))  # Ray's socket paths must stay short
    env = dict(os.environ, RAY_AUTH_MODE="disabled", RAY_TMPDIR=str(short))
    ray_bin = str(Path(sys.executable).parent / "ray")
    head = subprocess.Popen([ray_bin, "start", "--head", "--num-cpus=1", "--include-dashboard=false", "--port=0", "--block"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not (short / "ray" / "ray_current_cluster").exists():
            assert time.monotonic() < deadline and head.poll() is None, "ray start did not come up"
            time.sleep(0.2)
        out = subprocess.run([sys.executable, "-m", "winsample", "encode", str(CORPUS / "sonnets.txt"), "-o", str(tmp_path / "o"),
                              "--engine", "ray", "--workers", "1", "--merge", "--split", "tail", "--json", "-q"],
                             capture_output=True, text=True, env=env, timeout=300)
    finally:  # the cluster's processes are in the session `ray start` leads: all of them go
        os.killpg(head.pid, signal.SIGKILL)
        head.wait(60)
        shutil.rmtree(short, ignore_errors=True)
    assert out.returncode == 0, out.stderr
    encode_corpus([str(CORPUS / "sonnets.txt")], tmp_path / "local", workers=1, split="tail")
    for name in ("train.bin", "val.bin"):
        assert (tmp_path / "o" / name).read_bytes() == (tmp_path / "local" / name).read_bytes()
    assert json.loads(out.stdout)["engine"] == "ray"
