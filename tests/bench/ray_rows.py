"""Benchmark rows for ``encode --engine ray`` (wired into run.py by its owner).

``bench_ray()`` encodes ~50 MB of the shipped corpus with the Ray engine on a local 2-CPU
cluster (started by the command itself, so cluster start-up is counted) and with
``--engine local --workers 2``; the bar is Ray ≥ 0.8× the local pool's throughput.
Rows have the shape of ``row()`` in run.py.
"""

from __future__ import annotations

import os
import sys

from measure import mb, median_run
from run import REPEATS, WORK, WS, row, text_file


def bench_ray(size_mb: int = 50, shard_size: str = "16MB") -> list[dict]:
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
    local = median_run(WS + ["encode", str(src), "-o", str(out / "local"), "--split", "tail", "--workers", "2", "-q"], REPEATS)
    # --merge: the same files as the local engine, so the comparison is like for like; a fresh
    # folder each time, so no shard is reused from the previous repeat.
    ours = median_run(["sh", "-c", f'rm -rf "{out}/ray" && exec "$@"', "sh"] + WS + [
        "encode", str(src), "-o", str(out / "ray"), "--split", "tail", "--engine", "ray", "--workers", "2",
        "--shard-size", shard_size, "--merge", "-q"], REPEATS, env=env)
    ratio = local.seconds / ours.seconds
    return [row(f"encode {size_mb} MB: --engine ray (local 2-CPU cluster, {shard_size} shards, --merge) vs --engine local --workers 2",
                f"{ours.seconds:.1f} s", f"{local.seconds:.1f} s", f"{ratio:.2f}×", "≥ 0.8×", ratio >= 0.8,
                mb(ours.peak_rss), mb(local.peak_rss),
                note="includes Ray cluster start (~3 s); peak RSS is the driver's only")]


if __name__ == "__main__":
    for r in bench_ray(int(sys.argv[1]) if len(sys.argv) > 1 else 50):
        print(r)
