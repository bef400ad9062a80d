"""Benchmark rows for encode with no serial stage (wired into run.py as group ``parts``).

Every worker runs the whole pipeline on its own parts of the input and the coordinator only
plans and merges (``encode/executors/shards.py``). The rows, side by side in one run:

- ``--workers 2`` vs ``--workers 1`` on unique text as many files, as one large file and as
  JSONL documents (bar 1.3×), the same bytes each time, with the whole process tree's peak RSS;
- the coordinator's own CPU per MB of input: its main thread's ``time.thread_time()`` (and the
  whole coordinator process's, its helper threads included), as the slope between two input
  sizes so that start-up cancels (bar 1.0 ms/MB), with the throughput Amdahl's law projects on
  16 and 64 cores from it and the parallel CPU per MB (a ``--workers 1`` run's, less the serial part);
- start-up: ``winsample --version`` and ``encode`` of a 1 kB file.

Rows have the shape of ``row()`` in run.py.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from fast_rows import family_tokenizers, jsonl_documents, unique_text
from measure import interleaved_runs, mb, run_child, run_tree
from run import WORK, WS, row

# The coordinator's CPU, measured in the process that runs the CLI: its main thread's and its own
# (all its threads; children are the workers, not counted). Printed as the last JSON line.
TIMED_CLI = """
import json, resource, sys, time
from winsample.cli import main
try:
    main(sys.argv[1:], prog_name="winsample", standalone_mode=False)
finally:
    u = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({"main_thread_cpu": time.thread_time(), "process_cpu": u.ru_utime + u.ru_stime}))
"""


def many_files(src: Path, file_bytes: int = 10_000) -> tuple[Path, int]:
    """``src`` cut into files of about ``file_bytes`` (at a line's end) in a folder beside it."""
    folder = src.with_name(src.stem + "-files")
    count_path = folder.with_suffix(".count")
    if folder.is_dir() and count_path.exists():
        return folder, int(count_path.read_text())
    folder.mkdir(exist_ok=True)
    n = 0
    with open(src, "rb") as f:
        buf = b""
        while True:
            data = f.read(1 << 20)
            buf += data
            while len(buf) >= file_bytes or (not data and buf):
                cut = buf.find(b"\n", file_bytes) + 1 if data else len(buf)
                if cut <= 0:
                    break
                (folder / f"{n // 1000:03d}").mkdir(exist_ok=True)
                (folder / f"{n // 1000:03d}" / f"f{n:06d}.txt").write_bytes(buf[:cut])
                buf, n = buf[cut:], n + 1
            if not data:
                break
    count_path.write_text(str(n))
    return folder, n


def _checksums(folder: Path) -> dict:
    meta = json.loads((folder / "meta.json").read_text())
    return {s: e["checksum"] for s, e in meta["splits"].items()}


def _speed_rows(size_mb: int, repeats: int) -> list[dict]:
    src, files = unique_text(size_mb * 10**6)
    folder, n_files = many_files(src)
    jsonl, docs = jsonl_documents(src, 4 << 10, 64 << 10)
    kinds = {f"unique text as {n_files:,} files ({size_mb} MB)": (folder, []),
             f"unique text as one file ({size_mb} MB, --split tail)": (src, ["--split", "tail"]),
             f"unique text as JSONL ({docs:,} documents, {jsonl.stat().st_size // 10**6} MB)": (jsonl, [])}
    rows = []
    for label, (inp, extra) in kinds.items():
        out = WORK / f"parts-{label.split()[3]}"
        out.mkdir(parents=True, exist_ok=True)
        runs = interleaved_runs({w: WS + ["encode", str(inp), "-o", str(out / f"w{w}"), "-q", "--workers", str(w), *extra]
                                 for w in ("1", "2")}, repeats, runner=run_tree)
        same = _checksums(out / "w1") == _checksums(out / "w2")
        a1, a2 = runs["1"], runs["2"]
        nbytes = size_mb * 10**6 if inp.is_dir() else inp.stat().st_size
        rows.append(row(f"encode {label}: --workers 2 vs --workers 1 (same bytes: {'yes' if same else 'NO'})",
                        f"{nbytes / a2.seconds / 1e6:.0f} MB/s", f"{nbytes / a1.seconds / 1e6:.0f} MB/s",
                        f"{a1.seconds / a2.seconds:.2f}×", "≥ 1.3×, identical", same and a1.seconds / a2.seconds >= 1.3,
                        mb(a2.peak_rss), mb(a1.peak_rss), note="peak RSS: the whole tree's, coordinator and workers summed"
                        " (pages the forked workers share counted in each; the memory row above measures the tree's own)"))
    # the tokenizer.json family where its fixed cost is amortised: the families group's 83 MB rows are
    # half start-up (reference and engine loaded, self-check: ~1 s, serial whatever the worker count)
    tok = family_tokenizers()["DeepSeek tokenizer.json"]
    out = WORK / "parts-deepseek"
    out.mkdir(parents=True, exist_ok=True)
    runs = interleaved_runs({w: WS + ["encode", str(jsonl), "-o", str(out / f"w{w}"), "-q", "--workers", str(w),
                                      "--tokenizer-file", str(tok)] for w in ("1", "2")}, repeats, runner=run_tree)
    same = _checksums(out / "w1") == _checksums(out / "w2")
    a1, a2 = runs["1"], runs["2"]
    nbytes = jsonl.stat().st_size
    rows.append(row(f"encode unique text as JSONL ({docs:,} documents, {nbytes // 10**6} MB) with DeepSeek's tokenizer.json:"
                    f" --workers 2 vs --workers 1 (same bytes: {'yes' if same else 'NO'})",
                    f"{nbytes / a2.seconds / 1e6:.0f} MB/s", f"{nbytes / a1.seconds / 1e6:.0f} MB/s",
                    f"{a1.seconds / a2.seconds:.2f}×", "≥ 1.3×, identical", same and a1.seconds / a2.seconds >= 1.3,
                    mb(a2.peak_rss), mb(a1.peak_rss), note="peak RSS: the whole tree's, coordinator and workers summed"))
    return rows


def _cpu(inp: Path, workers: int, out: Path, repeats: int) -> dict:
    """Median main-thread and process CPU seconds of ``encode inp --workers N``."""
    got = []
    for _ in range(repeats):
        r = run_child([sys.executable, "-c", TIMED_CLI, "encode", str(inp), "-o", str(out), "-q", "--split", "tail",
                       "--workers", str(workers)])
        got.append(r.out)
    return {k: statistics.median(g[k] for g in got) for k in ("main_thread_cpu", "process_cpu")}


def _coordinator_rows(small_mb: int, size_mb: int, repeats: int) -> list[dict]:
    out = WORK / "parts-cpu"
    out.mkdir(parents=True, exist_ok=True)
    small, big = unique_text(small_mb * 10**6)[0], unique_text(size_mb * 10**6)[0]
    delta = (big.stat().st_size - small.stat().st_size) / 1e6
    c2 = {n: _cpu(p, 2, out / "w2", repeats) for n, p in (("small", small), ("big", big))}
    c1 = {n: _cpu(p, 1, out / "w1", repeats) for n, p in (("small", small), ("big", big))}
    serial = (c2["big"]["main_thread_cpu"] - c2["small"]["main_thread_cpu"]) / delta * 1e3  # ms per MB
    process = (c2["big"]["process_cpu"] - c2["small"]["process_cpu"]) / delta * 1e3
    work = (c1["big"]["process_cpu"] - c1["small"]["process_cpu"]) / delta * 1e3  # one process does it all
    parallel = max(work - serial, 0.0)

    def projected(n: int) -> float:
        return 1e3 / (serial + parallel / n)

    return [
        row(f"encode --workers 2, unique text: the coordinator's main-thread CPU per MB of input (slope {small_mb} → {size_mb} MB)",
            f"{serial:.2f} ms/MB", f"{work:.1f} ms/MB (all the work, --workers 1)", f"{serial / work:.3f}", "≤ 1.0 ms/MB",
            serial <= 1.0, note=f"the whole coordinator process (its helper threads too): {process:.2f} ms/MB"),
        row("encode: throughput Amdahl's law projects from the two figures above (serial = the coordinator's main thread)",
            f"16 cores: {projected(16):,.0f} MB/s; 64 cores: {projected(64):,.0f} MB/s", f"1 core: {1e3 / work:.0f} MB/s",
            f"{projected(16) * work / 1e3:.1f}× / {projected(64) * work / 1e3:.1f}×", "report", True),
    ]


def _startup_rows(repeats: int) -> list[dict]:
    tiny = WORK / "one-kB.txt"
    tiny.write_text(("A small file of text. " * 50)[:1000], encoding="utf-8")
    version = statistics.median(run_child(WS + ["--version"]).seconds for _ in range(max(repeats, 5)))
    enc = statistics.median(run_child(WS + ["encode", str(tiny), "-o", str(WORK / "one-kB"), "-q", "--split", "tail"]).seconds
                            for _ in range(max(repeats, 5)))
    bare = statistics.median(run_child([sys.executable, "-c", "pass"]).seconds for _ in range(max(repeats, 5)))
    return [row("start-up: winsample --version (commands load only when run)", f"{version * 1e3:.0f} ms",
                f"{bare * 1e3:.0f} ms (python -c pass)", f"{version / bare:.1f}", "report", True),
            row("start-up: winsample encode of a 1 kB file (tokenizer load and self-check included)", f"{enc * 1e3:.0f} ms",
                f"{bare * 1e3:.0f} ms (python -c pass)", f"{enc / bare:.1f}", "report", True)]


def bench_parts(small_mb: int = 100, size_mb: int = 400, repeats: int = 3) -> list[dict]:
    return _speed_rows(size_mb, repeats) + _coordinator_rows(small_mb, size_mb, repeats) + _startup_rows(repeats)


if __name__ == "__main__":
    for r in bench_parts(*(int(a) for a in sys.argv[1:3])):
        print(r)
