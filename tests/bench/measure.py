"""Measuring helpers for the benchmarks: child processes, peak RSS, medians, the report table.

Every measured case runs in a fresh child process so its peak RSS (``ru_maxrss`` from
``os.wait4``) is its own. A child prints one JSON line on stdout; when it times its own work it
puts ``seconds`` there, otherwise the parent's wall clock is used.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass


@dataclass
class Run:
    seconds: float
    peak_rss: int  # bytes
    out: dict
    peak_pss: int = 0  # bytes: run_tree's peak of the tree's summed proportional set size (0: not measured)


def run_child(argv: list[str], env: dict | None = None) -> Run:
    """Run ``argv``; return its time, peak RSS and the JSON it printed last (if any)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    out = proc.stdout.read()
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"{argv} exited {proc.returncode}: {err.decode(errors='replace')[-2000:]}")
    parsed = _last_json(out)
    return Run(parsed.get("seconds", wall), usage.ru_maxrss * 1024, parsed)


def _last_json(out: bytes) -> dict:
    """The last JSON line a child printed ({} if none)."""
    for line in reversed(out.decode().splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                pass
    return {}


def _tree(pid: int) -> list[int]:
    """``pid`` and all its descendants (Linux /proc; just ``pid`` elsewhere)."""
    out, i = [pid], 0
    while i < len(out):
        p = out[i]
        i += 1
        try:
            for t in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{t}/children") as f:
                    out += [int(x) for x in f.read().split()]
        except OSError:
            pass
    return out


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _pss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def run_tree(argv: list[str], env: dict | None = None, every: float = 0.01, pss: bool = False) -> Run:
    """``run_child``, with ``peak_rss`` the peak of the RSS *summed* over the process and all its
    descendants (sampled every ``every`` s from /proc; shared pages count in each process), and
    with ``pss`` ``peak_pss`` the peak of their summed proportional set size (a page k processes
    share counts 1/k in each: the tree's own memory, what a forked worker shares counted once).
    Only memory rows ask for it: reading smaps_rollup walks every page table of the process and
    takes its memory lock (~0.6 s of CPU and stalled page faults in a 2 s encode, measured), so
    a timed run never samples it. Its
    output goes to files, read at the end: a pipe nobody drains could stall the child. A child
    that prints JSON with ``seconds`` (a bare-library script timing its own work) is timed by it,
    as in ``run_child``; winsample's commands here run with ``-q`` and print none."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=err, env=env)
        peak = peak_pss = 0
        while proc.poll() is None:
            tree = _tree(proc.pid)
            peak = max(peak, sum(_rss(p) for p in tree))
            if pss:
                peak_pss = max(peak_pss, sum(_pss(p) for p in tree))
            time.sleep(every)
        wall = time.perf_counter() - t0
        out.seek(0)
        err.seek(0)
        printed, errors = out.read(), err.read()
    if proc.returncode != 0:
        raise RuntimeError(f"{argv} exited {proc.returncode}: {errors.decode(errors='replace')[-2000:]}")
    parsed = _last_json(printed)
    return Run(parsed.get("seconds", wall), peak, parsed, peak_pss)


def median_run(argv: list[str], repeats: int, env: dict | None = None) -> Run:
    runs = [run_child(argv, env) for _ in range(repeats)]
    t = statistics.median(r.seconds for r in runs)
    rss = statistics.median(r.peak_rss for r in runs)
    return Run(t, int(rss), runs[-1].out)


def interleaved_runs(cmds: dict[str, list[str]], repeats: int, env: dict | None = None, runner=None) -> dict[str, Run]:
    """``median_run`` of each command, their runs taken in turn (A B C A B C …), so a machine that
    speeds up or slows down during the bench moves every compared figure alike. ``runner``:
    ``run_child`` (default) or ``run_tree``."""
    runner = runner or run_child
    runs: dict[str, list[Run]] = {name: [] for name in cmds}
    for _ in range(repeats):
        for name, argv in cmds.items():
            runs[name].append(runner(argv, env))
    return {name: Run(statistics.median(r.seconds for r in rs), int(statistics.median(r.peak_rss for r in rs)), rs[-1].out,
                      int(statistics.median(r.peak_pss for r in rs)))
            for name, rs in runs.items()}


def python_child(code: str, *args: str) -> list[str]:
    return [sys.executable, "-c", code, *args]


def mb(n: float) -> str:
    return f"{n / 1e6:,.0f} MB"


def machine() -> dict:
    from importlib.metadata import version  # not importing numpy here keeps this process small

    cpu = platform.processor() or "unknown"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cores": os.cpu_count(),
        "cpu": cpu,
        "python": platform.python_version(),
        "numpy": version("numpy"),
        "tiktoken": version("tiktoken"),
        "platform": platform.platform(),
    }
