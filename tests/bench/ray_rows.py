"""Benchmark rows for ``encode --engine ray`` (wired into run.py).

``bench_ray()`` encodes the shipped corpus (repeated to a size) with the Ray engine on a local
2-CPU cluster and with ``--engine local --workers 2``, both writing the same files (``--merge``:
the local runner's parts, each encoded by a Ray task). The bar, Ray ≥ 0.8× the local runner's
throughput, is held on a running cluster (``--address auto``, how Ray is used) at ``big_mb``,
the two runs taken in turn. Each Ray run also pays a fixed ~1 s (``import ray``, joining and
leaving the cluster, each worker loading and checking the tokenizer), reported at ``size_mb``;
a run that starts its own cluster (Ray's boot counted too) is reported beside them.
Rows have the shape of ``row()`` in run.py.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from measure import Run, mb, median_run, run_child
from run import WORK, WS, row, text_file


def _commands(size_mb: int) -> tuple[list[str], list[str]]:
    """(local engine, Ray engine) commands for ``size_mb`` of text; each run writes a fresh folder."""
    src = text_file(size_mb * 10**6)
    out = WORK / "ray-out"
    out.mkdir(parents=True, exist_ok=True)
    local = WS + ["encode", str(src), "-o", str(out / "local"), "--split", "tail", "--workers", "2", "-q"]
    # --merge: the same files as the local engine, so the comparison is like for like; a fresh
    # folder each time, so no shard is reused from the previous repeat.
    ray = ["sh", "-c", f'rm -rf "{out}/ray" && exec "$@"', "sh"] + WS + [
        "encode", str(src), "-o", str(out / "ray"), "--split", "tail", "--engine", "ray", "--workers", "2", "--merge", "-q"]
    return local, ray


def _checksums(folder: Path) -> dict:
    meta = json.loads((folder / "meta.json").read_text())
    return {s: e["checksum"] for s, e in meta["splits"].items()}


def bench_ray(size_mb: int = 100, big_mb: int = 300, repeats: int = 3) -> list[dict]:
    try:
        import ray  # noqa: F401
    except ImportError:
        return [row("encode --engine ray vs --engine local --workers 2", "-", "-", "-", "≥ 0.8×", False,
                    note="ray not installed: pip install 'winsample[ray]'")]
    WORK.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, RAY_AUTH_MODE="disabled")
    small_local, small_ray = _commands(size_mb)
    big_local, big_ray = _commands(big_mb)
    runs = {"local": median_run(small_local, repeats),
            "cold": median_run(small_ray, repeats, env=env)}  # starts and stops its own local cluster each time
    ray_bin = str(Path(sys.executable).parent / "ray")
    taken: dict[str, list] = {"big local": [], "warm": [], "big warm": []}
    for _ in range(repeats):  # in turn: the local runner with no cluster up (its daemons take CPU), then Ray on one
        taken["big local"].append(run_child(big_local))
        subprocess.run([ray_bin, "start", "--head", "--num-cpus=2", "--include-dashboard=false"], env=env,
                       check=True, capture_output=True)
        try:  # a running cluster, as on a real one: --address auto
            taken["warm"].append(run_child(small_ray + ["--address", "auto"], env))
            taken["big warm"].append(run_child(big_ray + ["--address", "auto"], env))
        finally:
            subprocess.run([ray_bin, "stop"], env=env, capture_output=True)
    for key, rs in taken.items():
        runs[key] = Run(statistics.median(r.seconds for r in rs), int(statistics.median(r.peak_rss for r in rs)), rs[-1].out)
    out = WORK / "ray-out"
    same = _checksums(out / "ray") == _checksums(out / "local")  # the last runs: the big ones
    rows = []
    for size, what, key, base, bar in (
            (big_mb, "running 2-CPU cluster, --address auto", "big warm", "big local", 0.8),
            (size_mb, "running 2-CPU cluster, --address auto", "warm", "local", None),
            (size_mb, "own local cluster started per run", "cold", "local", None)):
        r, b = runs[key], runs[base]
        ratio = b.seconds / r.seconds
        same_note = f" (same bytes: {'yes' if same else 'NO'})" if bar else ""
        rows.append(row(f"encode {size} MB: --engine ray ({what}, --merge: 32 MB parts) vs --engine local --workers 2{same_note}",
                        f"{r.seconds:.1f} s", f"{b.seconds:.1f} s", f"{ratio:.2f}×",
                        f"≥ {bar}×, identical" if bar else "report", (ratio >= bar and same) if bar else True,
                        mb(r.peak_rss), mb(b.peak_rss), note="peak RSS: the driver's only"))
    return rows


if __name__ == "__main__":
    for r in bench_ray(*(int(a) for a in sys.argv[1:3])):
        print(r)
