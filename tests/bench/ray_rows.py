"""Benchmark rows for ``encode --engine ray`` (wired into run.py by its owner).

``bench_ray()`` encodes the shipped corpus (repeated to ``size_mb``) with the Ray engine on a
local 2-CPU cluster and with ``--engine local --workers 2``. The bar, Ray ≥ 0.8× the local
pool's throughput, is held on a running cluster (``--address auto``); a run that starts its
own cluster (so Ray's boot is counted) is reported beside it.
Rows have the shape of ``row()`` in run.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from measure import mb, median_run
from run import WORK, WS, row, text_file


def bench_ray(size_mb: int = 50, shard_size: str = "16MB", repeats: int = 3) -> list[dict]:
    try:
        import ray  # noqa: F401
    except ImportError:
        return [row("encode --engine ray vs --engine local --workers 2", "-", "-", "-", "≥ 0.8×", False,
                    note="ray not installed: pip install 'winsample[ray]'")]
    WORK.mkdir(parents=True, exist_ok=True)
    src = text_file(size_mb * 10**6)
    out = WORK / "ray-out"
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, RAY_AUTH_MODE="disabled")
    local = median_run(WS + ["encode", str(src), "-o", str(out / "local"), "--split", "tail", "--workers", "2", "-q"], repeats)
    # --merge: the same files as the local engine, so the comparison is like for like; a fresh
    # folder each time, so no shard is reused from the previous repeat.
    cmd = ["sh", "-c", f'rm -rf "{out}/ray" && exec "$@"', "sh"] + WS + [
        "encode", str(src), "-o", str(out / "ray"), "--split", "tail", "--engine", "ray", "--workers", "2",
        "--shard-size", shard_size, "--merge", "-q"]
    cold = median_run(cmd, repeats, env=env)  # starts and stops its own local cluster each time
    ray_bin = str(Path(sys.executable).parent / "ray")
    subprocess.run([ray_bin, "start", "--head", "--num-cpus=2", "--include-dashboard=false"], env=env,
                   check=True, capture_output=True)
    try:  # a running cluster, as on a real one: --address auto
        warm = median_run(cmd + ["--address", "auto"], repeats, env=env)
    finally:
        subprocess.run([ray_bin, "stop"], env=env, capture_output=True)
    rows = []
    # The bar is the engine's overhead on a running cluster, which is how Ray is used; starting a
    # cluster (~3 s of Ray's own boot) is reported beside it, not held to the bar.
    for what, r, bar in (("running 2-CPU cluster, --address auto", warm, 0.8),
                         ("own local cluster started per run", cold, None)):
        ratio = local.seconds / r.seconds
        rows.append(row(f"encode {size_mb} MB: --engine ray ({what}, {shard_size} shards, --merge) vs --engine local --workers 2",
                        f"{r.seconds:.1f} s", f"{local.seconds:.1f} s", f"{ratio:.2f}×",
                        f"≥ {bar}×" if bar else "report", ratio >= bar if bar else True,
                        mb(r.peak_rss), mb(local.peak_rss), note="peak RSS: the driver's only"))
    return rows


if __name__ == "__main__":
    for r in bench_ray(int(sys.argv[1]) if len(sys.argv) > 1 else 50):
        print(r)
