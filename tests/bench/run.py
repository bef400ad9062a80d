"""`make bench`: winsample against the baselines users know, side by side in one run.

Prints one Markdown table and writes it, with the machine and date, to docs/performance.md.
Each figure is the median of REPEATS runs, each run in a fresh child process (peak RSS from
its rusage). Ratios, not absolute times, are the point: shared 2-core machines drift.
All files are read warm from the page cache, by winsample and baseline alike.

    python tests/bench/run.py [--quick] [--only windows,packing,mixture,...] [--out docs/performance.md]
"""

from __future__ import annotations

import argparse
import datetime
import fnmatch
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO))

from measure import interleaved_runs, machine, mb, median_run  # noqa: E402

WORK = REPO / "build" / "bench"
REPEATS = 3
WS = [sys.executable, "-m", "winsample"]


# --- inputs ---------------------------------------------------------------------------------


def corpus_text() -> str:
    return "\n\n".join(p.read_text(encoding="utf-8") for p in sorted((REPO / "winsample" / "corpus").glob("*.txt")))


def text_file(size: int) -> Path:
    """The shipped corpus repeated to ``size`` bytes, as one file (like nanoGPT's input.txt).

    Written piece by piece: this process must stay small (see ``main``)."""
    path = WORK / f"text-{size // 10**6}MB.txt"
    if not path.exists() or abs(path.stat().st_size - size) > 4:
        unit = corpus_text().encode("utf-8")
        with open(path, "wb") as f:
            left = size
            while left > 0:
                piece = unit[:left]
                if len(piece) < len(unit):  # cut the last piece back to a UTF-8 character boundary
                    piece = piece.decode("utf-8", errors="ignore").encode("utf-8")
                f.write(piece)
                left -= len(unit)
    return path


def token_file(n_bytes: int) -> Path:
    """A data folder whose train.bin holds real corpus tokens repeated to ``n_bytes``.

    Made in a child process, so this one never imports numpy or holds big arrays (see ``main``)."""
    folder = WORK / f"tokens-{n_bytes // 10**6}MB"
    if not (folder / "meta.json").exists():
        subprocess.run([sys.executable, __file__, "--make-tokens", str(n_bytes)], check=True)
    return folder / "train.bin"


def _make_token_file(n_bytes: int) -> None:
    folder = WORK / f"tokens-{n_bytes // 10**6}MB"
    bin_path = folder / "train.bin"
    import numpy as np

    from winsample import disk, formats, tokenizer

    enc = tokenizer.load_encoding("gpt2")
    docs = [enc.encode_ordinary(p.read_text(encoding="utf-8")) + [enc.eot_token]
            for p in sorted((REPO / "winsample" / "corpus").glob("*.txt"))]
    unit = np.concatenate([np.array(d, dtype="<u2") for d in docs])
    doc_lens = np.array([len(d) for d in docs])
    reps = n_bytes // unit.nbytes + 1
    n = n_bytes // 2
    folder.mkdir(parents=True, exist_ok=True)
    h = disk.new_hasher()
    with open(bin_path, "wb") as f:
        written = 0
        while written < n:
            piece = unit[: n - written]
            f.write(piece.tobytes())
            h.update(piece.tobytes())
            written += len(piece)
    starts = (np.arange(reps)[:, None] * len(unit) + np.concatenate([[0], np.cumsum(doc_lens)[:-1]])[None, :]).ravel()
    starts = starts[starts < n]
    np.save(folder / "train.docs.npy", starts.astype("<i8"))
    meta = {
        "format": "winsample", "version": 1, "winsample_version": "bench", "dtype": "<u2",
        "tokenizer": tokenizer.describe(enc, "gpt2"), "eot_appended": True,
        "split": {"method": "tail", "fraction": 0.0, "seed": 0},
        "splits": {"train": {"file": "train.bin", "doc_index": "train.docs.npy", "tokens": n, "bytes": 2 * n,
                             "documents": int(len(starts)), "max_token": int(unit.max()),
                             "checksum": disk.format_checksum(h)}},
        "inputs": [], "stats": {},
    }
    formats.write_meta(folder / "meta.json", meta)


def paragraphs() -> list[str]:
    """The shipped corpus cut into paragraphs (at blank lines; blank ones left out), file by file."""
    import re

    out = []
    for p in sorted((REPO / "winsample" / "corpus").glob("*.txt")):
        out += [q.strip("\n") for q in re.split(r"\n[ \t]*\n", p.read_text(encoding="utf-8")) if q.strip()]
    return out


def _paragraph_folder(n_docs: int, group: int) -> Path:
    return WORK / (f"paragraphs-{n_docs}" if group == 1 else f"paragraphs-{n_docs}x{group}")


def paragraph_tokens(n_docs: int, group: int = 1) -> Path:
    """A data folder whose train.bin holds ``n_docs`` documents of real text, many and short: the
    corpus's paragraphs, each tokenized (gpt2) with an EOT after it, cycled in order to ``n_docs``;
    its document index (train.docs.npy) starts a document at every paragraph. With ``group`` > 1
    a document is ``group`` consecutive paragraphs (joined by a blank line, tokenized as one text).

    Made in a child process, so this one never imports numpy or holds big arrays (see ``main``)."""
    folder = _paragraph_folder(n_docs, group)
    if not (folder / "meta.json").exists():
        subprocess.run([sys.executable, __file__, "--make-paragraphs", str(n_docs), "--group", str(group)], check=True)
    return folder / "train.bin"


def _make_paragraph_tokens(n_docs: int, group: int) -> None:
    import numpy as np

    from winsample import disk, formats, tokenizer

    folder = _paragraph_folder(n_docs, group)
    enc = tokenizer.load_encoding("gpt2")
    texts = paragraphs()
    texts = ["\n\n".join(texts[i : i + group]) for i in range(0, len(texts), group)]
    docs = [np.array(enc.encode_ordinary(t) + [enc.eot_token], dtype="<u2") for t in texts]
    unit = np.concatenate(docs)
    lens = np.resize(np.array([len(d) for d in docs], np.int64), n_docs)  # cycled: doc k is text k mod len(texts)
    n = int(lens.sum())
    starts = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype("<i8")
    folder.mkdir(parents=True, exist_ok=True)
    h = disk.new_hasher()
    with open(folder / "train.bin", "wb") as f:
        written = 0
        while written < n:
            piece = unit[: n - written].tobytes()
            f.write(piece)
            h.update(piece)
            written += len(piece) // 2
    np.save(folder / "train.docs.npy", starts)
    meta = {
        "format": "winsample", "version": 1, "winsample_version": "bench", "dtype": "<u2",
        "tokenizer": tokenizer.describe(enc, "gpt2"), "eot_appended": True,
        "split": {"method": "tail", "fraction": 0.0, "seed": 0},
        "splits": {"train": {"file": "train.bin", "doc_index": "train.docs.npy", "tokens": n, "bytes": 2 * n,
                             "documents": n_docs, "max_token": int(unit.max()),
                             "checksum": disk.format_checksum(h)}},
        "inputs": [], "stats": {},
    }
    formats.write_meta(folder / "meta.json", meta)


# --- children: each prints one JSON line -----------------------------------------------------

PREPARE_PY = """
import sys, numpy as np
from winsample.tokenizer import load_encoding   # tiktoken's gpt2, offline
src, out = sys.argv[1], sys.argv[2]
with open(src, 'r', encoding='utf-8') as f:
    data = f.read()
n = len(data)
train_data, val_data = data[:int(n*0.9)], data[int(n*0.9):]
enc = load_encoding('gpt2')
train_ids = enc.encode_ordinary(train_data)
val_ids = enc.encode_ordinary(val_data)
np.array(train_ids, dtype=np.uint16).tofile(out + '/train.bin')
np.array(val_ids, dtype=np.uint16).tofile(out + '/val.bin')
"""

ENCODE_ONLY = """
import json, sys, time
from winsample.tokenizer import load_encoding
text = open(sys.argv[1], encoding='utf-8').read()
enc = load_encoding('gpt2')
t = time.perf_counter(); enc.encode_ordinary(text); t = time.perf_counter() - t
print(json.dumps({"seconds": t}))
"""

NP_MAX_FLOOR = """
import json, sys, time, numpy as np
path = sys.argv[1]
t = time.perf_counter()
mm = np.memmap(path, dtype='<u2', mode='r')
m = 0
for lo in range(0, len(mm), 1 << 23):
    m = max(m, int(mm[lo:lo + (1 << 23)].max()))
t = time.perf_counter() - t
print(json.dumps({"seconds": t}))
"""


# --- rows -----------------------------------------------------------------------------------


def row(case, ours, base, ratio, bar, ok, rss_ours=None, rss_base=None, note=""):
    return {"case": case, "winsample": ours, "baseline": base, "ratio": ratio, "bar": bar,
            "meets_bar": ok, "rss_winsample": rss_ours, "rss_baseline": rss_base, "note": note}


def bench_encode(size_mb: int, big_mb: int) -> list[dict]:
    rows = []
    src = text_file(size_mb * 10**6)
    out = WORK / "enc-out"
    out.mkdir(parents=True, exist_ok=True)
    runs = interleaved_runs({
        "base": [sys.executable, "-c", PREPARE_PY, str(src), str(out)],
        "single": [sys.executable, "-c", ENCODE_ONLY, str(src)],
        **{w: WS + ["encode", str(src), "-o", str(out / f"w{w}"), "--split", "tail", "--workers", str(w), "-q",
                    "--backend", "reference"]  # these rows measure the pipeline around tiktoken; fast_rows the fast engine
           for w in (1, 2)}}, REPEATS)
    base, single, ours = runs["base"], runs["single"], {w: runs[w] for w in (1, 2)}
    speed = base.seconds / ours[2].seconds
    rss = base.peak_rss / ours[2].peak_rss
    rows.append(row(f"encode {size_mb} MB, --backend reference --workers 2 vs nanoGPT prepare.py pattern (speed)",
                    f"{ours[2].seconds:.1f} s", f"{base.seconds:.1f} s", f"{speed:.2f}×", "≥ 1.7×", speed >= 1.7,
                    mb(ours[2].peak_rss), mb(base.peak_rss)))
    rows.append(row(f"encode {size_mb} MB, --backend reference --workers 2 vs nanoGPT prepare.py pattern (peak RSS)",
                    mb(ours[2].peak_rss), mb(base.peak_rss), f"{rss:.1f}× lower", "≥ 5× lower", rss >= 5))
    single_tp = src.stat().st_size / single.seconds
    for w in (1, 2):
        tp = src.stat().st_size / ours[w].seconds
        r = tp / (w * single_tp)
        rows.append(row(f"encode scaling, --backend reference --workers {w} vs {w} × single-process encode_ordinary",
                        f"{tp / 1e6:.1f} MB/s", f"{w} × {single_tp / 1e6:.1f} MB/s", f"{r:.2f}", "≥ 0.85", r >= 0.85,
                        mb(ours[w].peak_rss), mb(single.peak_rss)))
    big = text_file(big_mb * 10**6)
    ours_big = median_run(WS + ["encode", str(big), "-o", str(out / "big"), "--split", "tail", "--workers", "2", "-q",
                                "--backend", "reference"],
                          1 if big_mb > 200 else REPEATS)
    growth = ours_big.peak_rss / ours[2].peak_rss
    rows.append(row(f"encode --backend reference peak RSS, {big_mb} MB vs {size_mb} MB input",
                    mb(ours_big.peak_rss), mb(ours[2].peak_rss), f"{growth:.2f}", "≤ 1.20", growth <= 1.2))
    return rows


def bench_layouts(size_mb: int) -> list[dict]:
    """What --layout megatron,llmc adds to an encode: the .idx from the document starts, the llm.c
    shards from one more pass over the split files (not the text)."""
    src = text_file(size_mb * 10**6)
    out = WORK / "layout-out"
    out.mkdir(parents=True, exist_ok=True)
    enc = ["encode", str(src), "--split", "tail", "--workers", "2", "-q"]
    runs = interleaved_runs({
        "nanogpt": WS + enc + ["-o", str(out / "n")],
        "all": WS + enc + ["-o", str(out / "a"), "--layout", "nanogpt,megatron,llmc"]}, REPEATS)
    base, ours = runs["nanogpt"], runs["all"]
    t, m = ours.seconds / base.seconds, ours.peak_rss / base.peak_rss
    return [
        row(f"encode {size_mb} MB --layout nanogpt,megatron,llmc vs --layout nanogpt (time)",
            f"{ours.seconds:.1f} s", f"{base.seconds:.1f} s", f"{t:.2f}", "≤ 1.15", t <= 1.15,
            mb(ours.peak_rss), mb(base.peak_rss)),
        row(f"encode {size_mb} MB --layout nanogpt,megatron,llmc vs --layout nanogpt (peak RSS)",
            mb(ours.peak_rss), mb(base.peak_rss), f"{m:.2f}", "≤ 1.20", m <= 1.2),
    ]


PLAIN_OURS = """
import json, sys, time
from winsample import planning
n = int(sys.argv[1])
t = time.perf_counter()
rows = planning.plan_regular([0], [n], span=1025, stride=512)
planning.fill_fresh(rows)
stats = planning.plan_stats(rows, n, [0], [n])
t = time.perf_counter() - t
print(json.dumps({"seconds": t, "windows": len(rows)}))
"""

PLAIN_ARTICLE = """
import json, sys, time
sys.path.insert(0, sys.argv[2])
from article_sampler import SlidingWindowSampler
ids = list(range(int(sys.argv[1])))
t = time.perf_counter()
k = sum(1 for _ in SlidingWindowSampler(ids, window_size=1025, stride=512))
t = time.perf_counter() - t
print(json.dumps({"seconds": t, "windows": k}))
"""

SEMANTIC_OURS = """
import json, sys, time
from winsample import planning
from winsample.tokenizer import load_encoding
load_encoding('gpt2')  # tokenizer load is start-up, not streaming
o = planning.Options(T=[1024], boundaries=sys.argv[2])
t = time.perf_counter()
plans = planning.build_plans(sys.argv[1], o)
t = time.perf_counter() - t
print(json.dumps({"seconds": t, "windows": int(plans[0]['stats']['windows'])}))
"""


def bench_windows(n_bytes: int, plain_tokens: int) -> list[dict]:
    rows = []
    ours = median_run([sys.executable, "-c", PLAIN_OURS, str(plain_tokens)], REPEATS)
    article_n = 2_000_000
    base = median_run([sys.executable, "-c", PLAIN_ARTICLE, str(article_n), str(HERE)], REPEATS)
    per_ours = ours.seconds / ours.out["windows"]
    per_base = base.seconds / base.out["windows"]
    rows.append(row(f"windows plain, per-window cost ({plain_tokens:.0e} tokens) vs the article's Python"
                    f" generator ({article_n:.0e} tokens)",
                    f"{per_ours * 1e9:.0f} ns", f"{per_base * 1e9:.0f} ns", f"{per_base / per_ours:,.0f}×",
                    "report", True, mb(ours.peak_rss), mb(base.peak_rss)))
    rows.append(row(f"windows plain, absolute time for {plain_tokens:.0e} tokens (T=1024, S=512)",
                    f"{ours.seconds:.3f} s", "", "", "well under 1 s", ours.seconds < 1.0, mb(ours.peak_rss)))
    bin_path = token_file(n_bytes)
    floor = median_run([sys.executable, "-c", NP_MAX_FLOOR, str(bin_path)], REPEATS)
    pure = dict(os.environ, WINSAMPLE_PURE="1")  # the numpy paths, as without the C module
    for kind, bar, env, how in (("paragraph", 0.25, None, ""), ("sentence", None, None, ""),
                                ("paragraph", None, pure, " (numpy paths, WINSAMPLE_PURE=1)")):
        ours = median_run([sys.executable, "-c", SEMANTIC_OURS, str(bin_path), kind], REPEATS, env=env)
        r = floor.seconds / ours.seconds
        rows.append(row(f"windows --boundaries {kind}{how}, {n_bytes // 10**6} MB .bin vs chunked np.max",
                        f"{n_bytes / ours.seconds / 1e9:.2f} GB/s", f"{n_bytes / floor.seconds / 1e9:.2f} GB/s",
                        f"{r:.2f}", f"≥ {bar}" if bar else "report", r >= bar if bar else True,
                        mb(ours.peak_rss), mb(floor.peak_rss)))
        if bar:  # the article's generator places no semantic edges at all: a floor for per-window cost
            per = ours.seconds / ours.out["windows"]
            rows.append(row(f"windows --boundaries {kind}, per-window cost (reading and scanning the .bin"
                            " included) vs the article's Python generator",
                            f"{per * 1e9:.0f} ns", f"{per_base * 1e9:.0f} ns", f"{per_base / per:,.1f}×", "report",
                            True, mb(ours.peak_rss), mb(base.peak_rss)))
    return rows


PACK_OURS = """
import json, sys, time, numpy as np
from winsample import planning
folder, span, how = sys.argv[1], int(sys.argv[2]), sys.argv[3]
starts = np.load(folder + '/train.docs.npy')
ends = np.append(starts[1:], len(np.memmap(folder + '/train.bin', dtype='<u2', mode='r')))
t = time.perf_counter()
if how == 'best-fit':  # what windows --pack best-fit plans, its stats aside
    rows, counts = planning.plan_best_fit(starts, ends, span)
    windows = int(rows['window'][-1]) + 1
else:  # greedy: windows --boundaries doc --pack
    rows = planning.plan_packed(starts, ends, span, stride=span - 1)
    windows = len(rows)
t = time.perf_counter() - t
print(json.dumps({"seconds": t, "windows": windows, "tokens": int(rows['length'].sum(dtype=np.int64)),
                  "longest": int((ends - starts).max())}))
"""

# TRL's packing as SFTTrainer runs it (packing=True, packing_strategy="bfd"): pack_dataset over a
# datasets.Dataset with an input_ids column (list<int32>, as a tokenizer's map writes it), built
# from the same documents' tokens before the clock starts. "default": datasets' map batches of
# 1,000 examples, each packed on its own; "whole": map_kwargs={"batch_size": None}, one batch.
TRL_BFD = """
import json, os, sys, time, numpy as np
os.environ['HF_DATASETS_DISABLE_PROGRESS_BARS'] = '1'
import datasets, pyarrow as pa, pyarrow.compute as pc
from datasets.table import InMemoryTable
from trl.data_utils import pack_dataset
folder, seq, batches = sys.argv[1], int(sys.argv[2]), sys.argv[3]
starts = np.load(folder + '/train.docs.npy')
tokens = np.memmap(folder + '/train.bin', dtype='<u2', mode='r')
offsets = pa.array(np.append(starts, len(tokens)).astype(np.int32))
col = pa.ListArray.from_arrays(offsets, pa.array(np.asarray(tokens, dtype=np.int32)))
ds = datasets.Dataset(InMemoryTable(pa.table({'input_ids': col})))
kw = {} if batches == 'default' else {'map_kwargs': {'batch_size': None}}
t = time.perf_counter()
packed = pack_dataset(ds, seq, strategy='bfd', **kw)
t = time.perf_counter() - t
lens = pc.list_value_length(packed.data.column('input_ids')).to_numpy()
print(json.dumps({"seconds": t, "windows": len(packed), "tokens": int(lens.sum()), "longest_row": int(lens.max())}))
"""


def bench_packing(n_docs: int, T: int = 2048) -> list[dict]:
    """Best-fit packing (planning.plan_best_fit) against greedy packing (planning.plan_packed, what
    windows --boundaries doc --pack plans) and TRL's pack_dataset(strategy="bfd"), over the same
    documents: ``paragraph_tokens(n_docs)``. All three pack rows of span = T + 1 tokens (TRL's
    seq_length = T + 1: a row of T + 1 tokens gives T (x, y) pairs, as a winsample window does);
    fill = packed tokens / (rows × span)."""
    from importlib.util import find_spec  # not importing trl here keeps this process small

    if find_spec("trl") is None or find_spec("datasets") is None:
        return [row(f"best-fit packing, {n_docs:,} documents, T={T}, vs TRL pack_dataset(strategy='bfd')", "-", "-", "-",
                    "≥ 5×", False, note="trl not installed: pip install 'winsample[test]'")]
    folder = paragraph_tokens(n_docs).parent
    span = T + 1
    hf = dict(os.environ, HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1", TRANSFORMERS_NO_ADVISORY_WARNINGS="1")
    runs = interleaved_runs({
        "ours": [sys.executable, "-c", PACK_OURS, str(folder), str(span), "best-fit"],
        "greedy": [sys.executable, "-c", PACK_OURS, str(folder), str(span), "greedy"],
        "trl": [sys.executable, "-c", TRL_BFD, str(folder), str(span), "default"],
        "trl_whole": [sys.executable, "-c", TRL_BFD, str(folder), str(span), "whole"]}, REPEATS, env=hf)
    ours, greedy, trl, whole = runs["ours"], runs["greedy"], runs["trl"], runs["trl_whole"]
    cli = median_run(WS + ["windows", str(folder / "train.bin"), "-T", str(T), "--pack", "best-fit",
                           "-o", str(WORK / "packing.plan.npy"), "-q"], REPEATS)
    longest = ours.out["longest"]
    assert longest <= span, "every document must fit a window: the three packers then pack the same pieces"
    tokens = ours.out["tokens"]
    assert greedy.out["tokens"] == tokens and trl.out["tokens"] == tokens and whole.out["tokens"] == tokens, \
        (tokens, greedy.out, trl.out, whole.out)

    def fill(r):
        return r.out["tokens"] / (r.out["windows"] * span)

    f_ours, f_greedy, f_trl, f_whole = fill(ours), fill(greedy), fill(trl), fill(whole)
    case = f"best-fit packing, {n_docs:,} documents (paragraphs of real text), T={T}"
    docs = (f"{n_docs:,} documents: the shipped corpus's {tokens / n_docs:.0f}-token paragraphs on average (gpt2,"
            f" + EOT; longest {longest}), cycled in order; {tokens:,} tokens, rows of span {span}")
    wins = (f"windows: best-fit {ours.out['windows']:,}, greedy {greedy.out['windows']:,}, TRL bfd"
            f" {trl.out['windows']:,} (map batches of 1,000) / {whole.out['windows']:,} (one batch)")
    speed, speed_whole = trl.seconds / ours.seconds, whole.seconds / ours.seconds
    best_trl = max(f_trl, f_whole)
    return [
        row(f"{case}: planning.plan_best_fit vs TRL pack_dataset(strategy='bfd') as SFTTrainer calls it (time)",
            f"{ours.seconds:.2f} s", f"{trl.seconds:.2f} s", f"{speed:,.1f}×", "≥ 5×", speed >= 5,
            mb(ours.peak_rss), mb(trl.peak_rss),
            note=f"{docs}. `windows --pack best-fit` whole command (start-up, stats, writing the plan):"
                 f" {cli.seconds:.2f} s"),
        row(f"{case}: planning.plan_best_fit vs TRL pack_dataset(strategy='bfd', map_kwargs={{'batch_size': None}})"
            " (time; one bin set over all documents, as ours)",
            f"{ours.seconds:.2f} s", f"{whole.seconds:.2f} s", f"{speed_whole:,.1f}×", "≥ 5×", speed_whole >= 5,
            mb(ours.peak_rss), mb(whole.peak_rss)),
        row(f"{case}: fill vs greedy --pack (planning.plan_packed, documents in file order)",
            f"{f_ours:.4f}", f"{f_greedy:.4f}", f"{f_ours / f_greedy:.3f}", "≥ 1, fill ≥ 0.99",
            f_ours >= f_greedy and f_ours >= 0.99, note=wins),
        row(f"{case}: fill vs TRL bfd (the better of its two calls above)",
            f"{f_ours:.4f}", f"{best_trl:.4f} (default {f_trl:.4f}, one batch {f_whole:.4f})",
            f"{f_ours / best_trl:.4f}", "≥ 1, fill ≥ 0.99", f_ours >= best_trl and f_ours >= 0.99),
    ]


LOADER_OURS = """
import json, sys, time
import winsample
lo = winsample.Loader(sys.argv[2], sys.argv[1], batch_size=8, seed=1337, short="pad")
n = int(sys.argv[3])
t = time.perf_counter()
for k in range(n):
    x, y = lo.batch(*lo.locate(k))
t = time.perf_counter() - t
print(json.dumps({"seconds": t, "batches": n}))
"""

NANOGPT_GET_BATCH = """
import json, sys, time
import numpy as np
rng, n, T, B = np.random.default_rng(1337), int(sys.argv[2]), 1024, 8
t = time.perf_counter()
for _ in range(n):  # train.py's get_batch, torch.stack and torch.from_numpy replaced by numpy's
    data = np.memmap(sys.argv[1], dtype=np.uint16, mode="r")
    ix = rng.integers(len(data) - T, size=B)
    x = np.stack([data[i : i + T].astype(np.int64) for i in ix])
    y = np.stack([data[i + 1 : i + 1 + T].astype(np.int64) for i in ix])
t = time.perf_counter() - t
print(json.dumps({"seconds": t, "batches": n}))
"""


def bench_loader(n_bytes: int, batches: int = 5000) -> list[dict]:
    """Loader.batch (B = 8, T = 1024, from a memmap, in its epoch order) against nanoGPT's get_batch."""
    bin_path = token_file(n_bytes)
    plan = WORK / "loader.plan.npy"
    median_run(WS + ["windows", str(bin_path), "-T", "1024", "-o", str(plan), "-q"], 1)
    ours = median_run([sys.executable, "-c", LOADER_OURS, str(bin_path), str(plan), str(batches)], REPEATS)
    base = median_run([sys.executable, "-c", NANOGPT_GET_BATCH, str(bin_path), str(batches)], REPEATS)
    r = base.seconds / ours.seconds
    return [row(f"Loader.batch (8 × 1024, every window once per epoch) vs nanoGPT's get_batch (random starts), {n_bytes // 10**6} MB .bin",
                f"{batches / ours.seconds:,.0f} batches/s", f"{batches / base.seconds:,.0f} batches/s", f"{r:.2f}",
                "≥ 0.8", r >= 0.8, mb(ours.peak_rss), mb(base.peak_rss))]


LOADER_PACKED = """
import json, sys, time
import winsample
plan, bin_path, n, kind = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
if kind == 'packed':  # a best-fit plan's windows, positions restarting per document, cross-document labels masked
    lo = winsample.Loader(plan, bin_path, batch_size=8, seed=0, positions='doc', cross_doc_labels='mask')
else:  # plain (x, y): the default Loader (over the same best-fit plan, or over regular windows)
    lo = winsample.Loader(plan, bin_path, batch_size=8, seed=0)
t = time.perf_counter()
for k in range(n):
    b = lo.batch(*lo.locate(k))
    x, y = b
    if kind == 'packed':
        b.position_ids  # computed when first read: read, as a packed model's forward does
t = time.perf_counter() - t
p = lo.plan(0)
print(json.dumps({"seconds": t, "batches": n, "epochs": lo.locate(n - 1)[0] + 1,
                  "segments_per_window": len(p.rows) / len(p.windows)}))
"""


def bench_packed_loader(n_docs: int, group: int = 1, batches: int = 5000, T: int = 2048) -> list[dict]:
    """Loader.batch over a best-fit plan with positions="doc" and cross_doc_labels="mask" (position_ids
    read) against plain (x, y) batches of the same plan (what the packed fields cost: the bar), and,
    for scale, against plain (x, y) over a regular plan of the same T on the same .bin:
    ``paragraph_tokens(n_docs, group)``."""
    bin_path = paragraph_tokens(n_docs, group)
    meta = json.loads((bin_path.parent / "meta.json").read_text())["splits"]["train"]
    packed, plain = WORK / f"packed-loader-{group}.plan.npy", WORK / f"plain-loader-{group}.plan.npy"
    median_run(WS + ["windows", str(bin_path), "-T", str(T), "--pack", "best-fit", "-o", str(packed), "-q"], 1)
    median_run(WS + ["windows", str(bin_path), "-T", str(T), "-o", str(plain), "-q"], 1)
    runs = interleaved_runs({
        "ours": [sys.executable, "-c", LOADER_PACKED, str(packed), str(bin_path), str(batches), "packed"],
        "same": [sys.executable, "-c", LOADER_PACKED, str(packed), str(bin_path), str(batches), "plain"],
        "base": [sys.executable, "-c", LOADER_PACKED, str(plain), str(bin_path), str(batches), "plain"]}, REPEATS)
    ours, same, base = runs["ours"], runs["same"], runs["base"]
    docs = (f"{n_docs:,} paragraphs" if group == 1 else f"{n_docs:,} documents of {group} paragraphs") + \
        f" ({meta['tokens'] / n_docs:,.0f} tokens on average, {ours.out['segments_per_window']:.1f} segments a window)"
    size = f"{bin_path.stat().st_size // 10**6} MB .bin"
    r1, r2 = same.seconds / ours.seconds, base.seconds / ours.seconds
    return [row(f"Loader.batch (8 × {T}) over a best-fit plan: positions='doc', cross_doc_labels='mask' (position_ids read)"
                f" vs plain (x, y) of the same plan, {docs}, {size}",
                f"{batches / ours.seconds:,.0f} batches/s", f"{batches / same.seconds:,.0f} batches/s", f"{r1:.2f}",
                "≥ 0.7", r1 >= 0.7, mb(ours.peak_rss), mb(same.peak_rss),
                note=f"{batches:,} batches in epoch order on each side ({ours.out['epochs']} epochs)"),
            row(f"(for scale) the same packed batches vs plain (x, y) over a regular plan of the same .bin, {docs}",
                f"{batches / ours.seconds:,.0f} batches/s", f"{batches / base.seconds:,.0f} batches/s", f"{r2:.2f}",
                "none: other windows", True, mb(ours.peak_rss), mb(base.peak_rss),
                note="a best-fit window is its documents side by side from all over the .bin, a regular one a"
                     " contiguous range: the reads differ, not only the fields")]


MIX_EPOCH_OURS = """
import json, sys, time
from winsample.planning import mixture
E, sizes, weights = int(sys.argv[1]), [int(x) for x in sys.argv[2].split(',')], sys.argv[3].split(',')
t = time.perf_counter()
counts = mixture.epoch_counts(weights, sizes, windows=E)
src, win = mixture.mixture_epoch(counts, sizes, 0, 0, weights=weights)
t = time.perf_counter() - t
n = len(src)
del src, win
t_order = time.perf_counter(); mixture.deadline_order(counts, weights); t_order = time.perf_counter() - t_order
print(json.dumps({"seconds": t, "order": t_order, "counts": counts, "windows": n}))
"""

# What megatron-core builds for the same blend, timed the same way: BlendedDataset's
# build_blending_indices (size given, float64 weights), then for each source the shuffle index its
# GPTDataset draws (gpt_dataset._build_shuffle_index: RandomState(seed).shuffle of arange over
# ceil(count / windows) epochs of its samples, uint32). The C++ helpers are loaded from their file:
# importing megatron.core would import torch (~300 MB) into the measured process.
MIX_EPOCH_MEGATRON = """
import importlib.util, json, os, sys, time
import numpy
where = os.path.join(importlib.util.find_spec('megatron').submodule_search_locations[0], 'core', 'datasets')
so = next(f for f in os.listdir(where) if f.startswith('helpers_cpp') and f.endswith('.so'))
spec = importlib.util.spec_from_file_location('helpers_cpp', os.path.join(where, so))
helpers = importlib.util.module_from_spec(spec)
spec.loader.exec_module(helpers)
E, sizes = int(sys.argv[1]), [int(x) for x in sys.argv[2].split(',')]
w = numpy.array([float(x) for x in sys.argv[3].split(',')], dtype=numpy.float64)
w /= w.sum()
t = time.perf_counter()
dataset_index = numpy.zeros(E, dtype=numpy.int16)
dataset_sample_index = numpy.zeros(E, dtype=numpy.int64)
helpers.build_blending_indices(dataset_index, dataset_sample_index, w, len(w), E, False)
t_order = time.perf_counter() - t
counts = numpy.bincount(dataset_index, minlength=len(w)).tolist()
shuffles = []
for i, (c, n) in enumerate(zip(counts, sizes)):
    total = -(-c // n) * n  # GPTDataset: enough epochs of the source's samples for c of them
    dtype_ = numpy.uint32 if total < numpy.iinfo(numpy.uint32).max - 1 else numpy.int64
    s = numpy.arange(start=0, stop=total, step=1, dtype=dtype_)
    numpy.random.RandomState(1234 + i).shuffle(s)
    shuffles.append(s)
t = time.perf_counter() - t
print(json.dumps({"seconds": t, "order": t_order, "counts": counts, "windows": E}))
"""

MIX_WEIGHTS = ("0.6", "0.3", "0.1")
MIX_SHARES = (0.7, 0.35, 0.05)  # each source's windows, as a share of the epoch: the third is served twice
MIX_BAR_SECONDS = 30  # per 10^8 windows: the "seconds" (not minutes); Megatron's blend and shuffles take as long


def bench_mixture_epoch(E: int) -> list[dict]:
    """One epoch of a 3-source mixture of E windows (weights 0.6/0.3/0.1; sources of 0.7E, 0.35E
    and 0.05E windows, so the third repeats twice and the others are served in part):
    planning.mixture.mixture_epoch against what megatron-core builds for the same blend."""
    from importlib.util import find_spec

    sizes = [round(s * E) for s in MIX_SHARES]
    case = (f"mixture epoch, 3 sources, {E:,} windows (weights {'/'.join(MIX_WEIGHTS)} of"
            f" {'/'.join(f'{n:,}' for n in sizes)} windows)")
    args = [str(E), ",".join(map(str, sizes)), ",".join(MIX_WEIGHTS)]
    cmds = {"ours": [sys.executable, "-c", MIX_EPOCH_OURS, *args]}
    if find_spec("megatron") is not None:
        cmds["base"] = [sys.executable, "-c", MIX_EPOCH_MEGATRON, *args]
    runs = interleaved_runs(cmds, REPEATS)
    ours = runs["ours"]
    bar_s = MIX_BAR_SECONDS * E / 1e8
    rows = []
    if "base" in runs:
        base = runs["base"]
        assert base.out["counts"] == ours.out["counts"], (base.out, ours.out)  # the same windows from each source
        r = base.seconds / ours.seconds
        rows.append(row(f"{case}: planning.mixture.mixture_epoch vs megatron-core build_blending_indices + GPTDataset's"
                        " shuffle index per source (time)",
                        f"{ours.seconds:.2f} s", f"{base.seconds:.2f} s", f"{r:.2f}", "≥ 0.7", r >= 0.7,
                        mb(ours.peak_rss), mb(base.peak_rss),
                        note=f"the order alone: deadline_order {ours.out['order']:.2f} s, build_blending_indices"
                             f" {base.out['order']:.2f} s; the rest is each source's permutations"
                             f" ({sum(-(-c // n) * n for c, n in zip(ours.out['counts'], sizes)):,} numbers shuffled"
                             " on each side)"))
    else:
        rows.append(row(f"{case}: vs megatron-core", "-", "-", "-", "≥ 0.7", False,
                        note="megatron-core not installed: pip install megatron-core"))
    rows.append(row(f"{case}: planning.mixture.mixture_epoch, absolute time",
                    f"{ours.seconds:.2f} s", "", "", f"≤ {MIX_BAR_SECONDS:g} s per 10^8 windows ({bar_s:.3g} s)",
                    ours.seconds <= bar_s, mb(ours.peak_rss)))
    return rows


LOADER_MIX = """
import json, sys, time
import winsample
from winsample.train import read_plan
plan, n = sys.argv[1], int(sys.argv[2])
t = time.perf_counter()
lo = winsample.Loader(plan, batch_size=8, seed=0)  # tokens_path left out: each plan names its own
t_open = time.perf_counter() - t
t = time.perf_counter()
for k in range(n):
    x, y = lo.batch(*lo.locate(k))
t = time.perf_counter() - t
rows = read_plan(plan).rows if lo.sources else None  # a mixture's rows: each source's windows and count an epoch
print(json.dumps({"seconds": t, "open": t_open, "batches": n, "epochs": lo.locate(n - 1)[0] + 1, "per_epoch": len(lo),
                  "sources": [[name, int(r["windows"]), int(r["count"])] for name, r in zip(lo.sources, rows)] if rows is not None else []}))
"""


def bench_mixture_loader(n_bytes: int, n_docs: int, batches: int = 5000, T: int = 1024) -> list[dict]:
    """Loader.batch (B = 8, T = 1024, in epoch order) over a mixture of three plans against the
    same Loader over the first of them alone. The sources are the bench's token files: web =
    ``token_file(n_bytes)``, paragraphs = ``paragraph_tokens(n_docs)``, books =
    ``paragraph_tokens(n_docs // 25, 25)`` (documents of 25 paragraphs), each planned by
    ``windows -T 1024``, mixed 0.6/0.3/0.1 (an epoch: one pass over the source that runs out first)."""
    bins = {"web": token_file(n_bytes), "paragraphs": paragraph_tokens(n_docs),
            "books": paragraph_tokens(n_docs // 25, group=25)}
    plans = {name: WORK / f"mix-{name}.plan.npy" for name in bins}
    for name, b in bins.items():
        median_run(WS + ["windows", str(b), "-T", str(T), "-o", str(plans[name]), "-q"], 1)
    mix = WORK / "mix.plan.npy"
    median_run(WS + ["mix", *(f"{name}={w}:{plans[name]}" for name, w in zip(bins, MIX_WEIGHTS)),
                     "-o", str(mix), "-q"], 1)
    runs = interleaved_runs({
        "ours": [sys.executable, "-c", LOADER_MIX, str(mix), str(batches)],
        "base": [sys.executable, "-c", LOADER_MIX, str(plans["web"]), str(batches)]}, REPEATS)
    ours, base = runs["ours"], runs["base"]
    r = base.seconds / ours.seconds
    sources = "; ".join(f"{name} {c:,} of {w:,} windows" for name, w, c in ours.out["sources"])
    return [row(f"Loader.batch (8 × {T}) over a mixture of three plans (web/paragraphs/books 0.6/0.3/0.1) vs"
                " over the web plan alone",
                f"{batches / ours.seconds:,.0f} batches/s", f"{batches / base.seconds:,.0f} batches/s", f"{r:.2f}",
                "≥ 0.8", r >= 0.8, mb(ours.peak_rss), mb(base.peak_rss),
                note=f"{batches:,} batches in epoch order on each side (mixture: {ours.out['per_epoch']:,} an epoch,"
                     f" {ours.out['epochs']} epoch(s); web alone: {base.out['per_epoch']:,} an epoch,"
                     f" {base.out['epochs']} epoch(s)); opening the Loader (the first epoch drawn):"
                     f" {ours.out['open']:.2f} s and {base.out['open']:.2f} s; an epoch serves {sources}")]


def bench_verify(n_bytes: int) -> list[dict]:
    bin_path = token_file(n_bytes)
    plan = WORK / "verify.plan.npy"
    median_run(WS + ["windows", str(bin_path), "-T", "1024", "-o", str(plan), "-q"], 1)
    floor = median_run([sys.executable, "-c", NP_MAX_FLOOR, str(bin_path)], REPEATS)
    code = ("import json, sys, time\nfrom winsample.verify import verify\n"
            "from winsample.tokenizer import load_encoding\nload_encoding('gpt2')\n"
            "t = time.perf_counter(); r = verify(sys.argv[1], [sys.argv[2]], show=5)\n"
            "t = time.perf_counter() - t\nassert r.ok(False), r.to_dict(False)\n"
            "print(json.dumps({'seconds': t}))")
    ours = median_run([sys.executable, "-c", code, str(bin_path), str(plan)], REPEATS)
    r = floor.seconds / ours.seconds
    return [row(f"verify {n_bytes // 10**6} MB .bin + plan vs read + chunked np.max",
                f"{n_bytes / ours.seconds / 1e9:.2f} GB/s", f"{n_bytes / floor.seconds / 1e9:.2f} GB/s",
                f"{r:.2f}", "≥ 0.5", r >= 0.5, mb(ours.peak_rss), mb(floor.peak_rss))]


# --- report ---------------------------------------------------------------------------------


def table(rows: list[dict]) -> str:
    lines = ["| case | winsample | baseline | ratio | bar | meets bar | peak RSS winsample | peak RSS baseline |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ok = "yes" if r["meets_bar"] else "**NO**"
        lines.append(f"| {r['case']} | {r['winsample']} | {r['baseline']} | {r['ratio']} | {r['bar']} | {ok} "
                     f"| {r['rss_winsample'] or ''} | {r['rss_baseline'] or ''} |")
    return "\n".join(lines)


PACKING_PROSE = (
    "Best-fit packing rows (`bench_packing`): the documents are the shipped corpus's paragraphs (cut at blank"
    ' lines), each tokenized with gpt2 plus an EOT (44 tokens on average, the longest 699), cycled in order '
    'to 1,000,000 documents (44 M tokens). All three packers get the same document lengths and pack rows of '
    "span T + 1 = 2049 tokens (TRL's seq_length is 2049 too: a row of T + 1 tokens gives T (x, y) pairs, as a"
    ' winsample window does); no document is longer than the span, so none is split or truncated by any of '
    "them. Ours is `planning.plan_best_fit` (what `windows --pack best-fit` plans; the whole command's time "
    "is in the row's note), greedy is `planning.plan_packed` (what `windows --boundaries doc --pack` plans, "
    'documents in file order), TRL\'s is `trl.data_utils.pack_dataset(dataset, 2049, strategy="bfd")` over a '
    '`datasets.Dataset` of `input_ids` (list<int32>, built before the clock starts): as SFTTrainer calls it, '
    "where datasets' `map` hands it batches of 1,000 examples, each packed on its own (which costs it fill), "
    'and with `map_kwargs={"batch_size": None}`, one batch, the same best-fit-decreasing rule as ours over '
    'all the documents (so the same number of windows). Each packer is timed around its one call, in a '
    "process of its own (start-up, imports and reading the documents not timed). TRL's time is mostly its "
    'Python loop over the sequences and a segment tree; it also copies the tokens into packed rows, which '
    'winsample leaves to the Loader. Fill = packed tokens / (rows × 2049). The packed Loader rows '
    '(`bench_packed_loader`) time `Loader.batch` (B = 8, T = 2048, seed 0, 5,000 batches in epoch order, '
    'timed around the loop) with positions="doc" and cross_doc_labels="mask" over the best-fit plan, '
    "`position_ids` read, against the default Loader's plain (x, y) over the same plan (the bar: what the "
    "packed fields cost) and, for scale, over the regular plan `windows -T 2048` makes of the same .bin (a "
    "best-fit batch reads ~46 segments a window from all over the file, a regular one 8 contiguous ranges): "
    'once over the paragraphs (~46 segments in a window) and once over documents of '
    "25 consecutive paragraphs (~1,100 tokens, about OpenWebText's average of 9.0 B tokens in 8.0 M "
    'documents; ~2 segments in a window).'
)


MIXTURE_PROSE = (
    "Mixture rows (`bench_mixture_epoch`, `bench_mixture_loader`): one epoch of a mixture of three sources,"
    " weights 0.6/0.3/0.1, 10^8 windows in all, whose plans hold 70, 35 and 5 million windows (the first two"
    " served in part, the third twice over). Ours is `planning.mixture.mixture_epoch` after `epoch_counts`: what"
    " the Loader draws when it first reaches an epoch (the order of sources, exact in every prefix, and each"
    " source's seeded permutations, placed in it). The baseline is what megatron-core builds for the same blend:"
    " `helpers_cpp.build_blending_indices` as `BlendedDataset` calls it (float64 weights, its size given) and, per"
    " source, the shuffle index its `GPTDataset` draws (`_build_shuffle_index`: `RandomState.shuffle` of an"
    " `arange` over as many epochs of the source's samples as the blend takes from it, uint32): 115 million"
    " numbers shuffled on each side, the same counts from each source (checked). Left out of the baseline, in its"
    " favour: GPTDataset's document index (a shuffle of its documents) and sample index (`build_sample_idx`),"
    " which winsample's `windows` plan does once; the cache files Megatron writes; importing megatron.core"
    " (torch: its C++ helpers are loaded from their .so). Megatron builds its indices once per training run and"
    " reads them back from its cache; winsample draws each epoch's order in memory and writes nothing (a mixture"
    " plan is a few hundred bytes), so this is per-epoch cost against once-per-run cost. Each side is timed"
    " around its calls in a process of its own, peak RSS that process's. The time bar, ≥ 0.7 of Megatron's"
    " speed: the shuffles, alike on both sides, are most of either time; ours adds the exact order (earliest"
    " deadline first in integers, a few passes of a binary search for the least band, against one float greedy"
    " pass) and places each source's windows in it. The absolute bar,"
    " ≤ 30 s per 10^8 windows, reads the issue's \"seconds\" as not minutes: most of either side's time is the"
    " per-source shuffles (~115 M random swaps, each a cache miss), which a cheaper permutation would cut but"
    " only by changing the documented draws. The mixture Loader row times `Loader.batch` (B = 8,"
    " T = 1024, seed 0, 5,000 batches in epoch order through `locate`, timed around the loop) over"
    " `winsample mix web=0.6:… paragraphs=0.3:… books=0.1:…`, the three plans `windows -T 1024` makes of the"
    " bench's token files (the .bin of the windows rows, and the paragraphs and 25-paragraph documents of the"
    " packed rows; an epoch is one pass over the source that runs out first), against the same call over the"
    " web plan alone; neither side passes `tokens_path` (each plan finds its own). Opening the Loader, which"
    " draws the first epoch, is not timed: its time is in the row's note."
)


CHUNK_PROSE = (
    "Chunk rows (`tests/bench/chunk_rows.py`): retrieval chunks of the same documents (the shipped corpus's eight"
    " texts, each once: one document each) with the same limit (512 GPT-2 tokens), overlap (64) and tokenizer"
    " (tiktoken's GPT-2 from the bundled ranks), each side in a process of its own, warmed up on a short text, the"
    " median of three timed passes over every document. winsample without boundaries is compared with chonkie's"
    " TokenChunker (fixed token windows), with `--boundaries sentence` against chonkie's SentenceChunker and semchunk"
    " (which split on sentences and other separators). Each chunk is then checked outside the timed part: is its text"
    " over the limit by the reference's own count of that text (`encode_ordinary`), and is `document[start:end]` its"
    " text by the offsets the library gives. (The chunk and mixture rows of this page were measured by"
    " `--only chunk` and `--only mixture` runs after the full run, on the same machine.)"
)


PARTS_PROSE = (
    "Encode in parts (`tests/bench/parts_rows.py`, and the fast and families groups' `--workers 2` rows): the"
    " input is planned as parts of about `--shard-size` (32 MB; the last 128 MB in 8 MB parts, so the workers"
    " end together): whole files, byte ranges of a large text file cut at the tokenizer's safe points, line"
    " ranges of a JSONL file. N forked workers each run the whole pipeline on one part at a time (read,"
    " decode, cut, encode, cast, split, hash, write). A worker holds its part's ids until the coordinator"
    " publishes the part's place (as soon as every part before it is known) and writes them there itself; a"
    " part that ends first writes a file of its own, copied into place in the kernel. The coordinator plans,"
    " publishes places, joins the parts' document starts and provenance, hashes each output once over mapped"
    " pages and commits. Each row runs `--workers 1` and `--workers 2` in turns and compares the checksums."
    " The coordinator's CPU is its main thread's `time.thread_time()`, printed by a wrapper around the CLI,"
    " for a 100 MB and a 400 MB file; the slope cancels start-up. The projection splits a `--workers 1` run's"
    " CPU per MB into that serial part and the rest, spread over n cores: an upper bound, since it assumes the"
    " workers scale as CPU-bound work does, while on this VM two processes of the bare library run only"
    " 1.35–1.5× one (the fast group's ceiling rows). No accelerator machine was lent to this session, so the"
    " curve for 1, 2, 4, 8 and 16 workers on 16 cores is not measured here. Timed runs sample only RSS (summed"
    " over the tree; pages the forked workers share count in each); the memory row samples the proportional"
    " set size in runs of its own, because reading smaps_rollup every 10 ms costs a 2 s encode ~0.6 s of CPU."
)


CHAT_PROSE = (
    "Chat rows (`tests/bench/chat_rows.py`): `encode --chat` of JSONL conversations (a system turn and one to"
    " three question/answer pairs each, the answers the corpus's paragraphs) against the loop most SFT scripts"
    " run: transformers' `apply_chat_template(..., return_assistant_tokens_mask=True)` per record, ids and masks"
    " gathered and written with `tofile`. Both use DeepSeek-V3's real tokenizer.json and TRL's DeepSeek-V3"
    " training template ({% generation %}), so the rows also check that ids and masks are the same bytes."
    " Whole commands are timed (imports and tokenizer loading included); winsample writes its meta.json,"
    " document index, provenance and checksums besides. (Measured by `--only chat` after the full run, on the"
    " same machine.)"
)


def notes(rows: list[dict]) -> str:
    """The rows' notes (what a row measured on, figures beside its own), one line each."""
    lines = [f"- {r['case']}: {r['note']}" for r in rows if r.get("note")]
    return ("Notes:\n\n" + "\n".join(lines) + "\n") if lines else ""


# What we know about each row that can miss its bar (printed only when it does): a key is the start
# of the rows' case, ``*`` standing for any text (a count that differs from machine to machine).
WHY = {
    "verify ": 'the checksum (xxh3-128, sequential) and the range scan run on one thread, each 4 MB piece hashed and'
    " then scanned while in cache (~0.3 s for 1 GB with its page faults, beside the other core's work). "
    "On the other core: the plan's figures (976k windows: bounds, order, coverage, in blocks of 16k rows,"
    ' ~0.1 s) and retokenize (512 kB of sampled documents decoded and encoded again by tiktoken, ~5 MB/s '
    'here: ~0.1 s alone, ~0.2 s of CPU beside the scan). Both cores are then busy for about the whole '
    'call (~0.6 s of CPU for ~0.36–0.42 s of wall time), then the 1 GB map is unmapped (~0.055 s) inside '
    "verify's call (the floor's own map is unmapped after its timer stops). It read 0.33–0.38 in five full runs "
    'and 0.23 in one of 2026-12-05, where verify itself ran as fast as before (4.5 GB/s against 4.4) and the floor faster (20.0 GB/s). Measured and not adopted: prefaulting the map on a helper thread (madvise MADV_POPULATE_READ '
    'ahead of the scan) halves the scan alone (0.30 → 0.17 s) but not verify, whose two cores are already'
    ' busy (0.36–0.49 s against 0.36–0.46); an instant plan_figures would save 0.01–0.03 s; reading with '
    'pread instead of the map runs at 1.3 GB/s here. The issue sets this bar for a machine whose np.max '
    'reads 16 GB/s; here the floor (the baseline column) read 8.8–20.0 GB/s in the last five full runs. Since #29, plan_params also re-plans the plan from its sidecar (to catch an '
    'edited parameter): ~0.05 s for these 976k windows, on the plan thread beside the scans (0.24 when it ran after them).',
    "encode 100 MB --layout": "the llm.c shards come from a second pass over the split's token file (uint16, in"
    " 1M-token pieces, each passed on as it is when no document starts or ends in it) and the .idx from the"
    " document starts. Measured by hand on this machine (2026-12-05, 100 MB of prose, --workers 2): the pass takes"
    " ~0.03 s and fsyncing the shards (the same bytes again) ~0.03 s, against ~0.7 s for the whole encode (1.06–1.09"
    " in six interleaved pairs; 1.06 in `--only layouts` run right after this full run, whose 1.18 came while the"
    " disk was still writing back the gigabytes the groups before it wrote, which the shards' fsync waits behind). The pass drops each piece's mapped pages once it is written: it used to keep the"
    " whole split mapped, and those pages (a file's, counted in the resident size) made the coordinator the tree's"
    " peak, 128 MB against 104 MB for --layout nanogpt (1.24, over the bar).",
    "encode scaling, --backend reference --workers 2": "the row sits near its bar: the main process still finds cut points,"
    " receives the ids and writes and hashes the output (~0.6 s of CPU per 100 MB, against ~7.3 s in the"
    " workers), and on two cores that competes with the workers; other load on the machine tips it under.",
    "windows --boundaries paragraph": "the scan and the placement run in the optional C module"
    " winsample._fast (SSE2 == tests, 64 tokens a step, on two threads); the floor is np.max over warm pages"
    " (the baseline column), which read 12.8–21.3 GB/s in the last five full runs on this VM (the scan itself 3.5–3.8 GB/s). Without the C module (no C compiler at"
    " install, or WINSAMPLE_PURE=1) the numpy paths run at about 0.06 of the floor. Check"
    " `python -c 'import winsample._fast'`.",
    "unique text: the whole tree's peak memory": "the tree is a coordinator and two forked workers (a run in"
    " parts), each worker's engine cache with a budget of 60 MiB (fastengine.process_budget: 1.5 × the 80 MiB of"
    " one process, shared), and each worker holding up to 32 MiB of a part's ids until it learns the part's"
    " place. Over 100 MB of unique text (50 MB a worker) the caches are still filling; over 400 MB they reach"
    " their budget, so the peak grows from ~200 to ~270–290 MB. Past that it is bounded by design, not by the"
    " corpus: each worker's resident size is kept under a ceiling (its size at the fork + 60 MiB: an engine over"
    " it is rebuilt at its next look, every 16 MiB of text) plus the ids of a part it holds (≤ 32 MiB), and a run's"
    " peak is where these meet. The row after this one measures that on words the engine has never seen (the"
    " 400 MB, then five copies with its letters rotated: they fill a cache about three times as fast as real"
    " text): 286–353 MB at 2.4 GB across runs, 297–336 MB at 1.2 GB, so bounded, but at or over the 300 MB bar"
    " on such text; an instrumented run showed no ceiling rising. Tried on it and not adopted (2026-12-05; runs"
    " differ by ±25 MB): a look every 4 MiB, holding 8 MiB of a part's ids, a ceiling that follows what a rebuild"
    " leaves (60 MiB above it instead of 74): none moved the peak beyond that noise, and the last cost --workers 2"
    " 5 %. At the peak"
    " (2026-12-05, proportional set size by process): 100 MB: coordinator 43 MB, workers 70 and 71 MB, the"
    " gpt2 engine's ~27 MB of tables still shared by the two workers; 400 MB: workers 112 and 128 MB, each"
    " rebuilt engine's tables its own and each cache at its budget. Measured and not adopted: a budget of"
    " 30 MiB a worker (202 → 245 MB, 1.21; 400 MB in 2.33–2.44 s against 2.17–2.22 s, which takes --workers 2"
    " below 1.3× --workers 1; 20 MiB is flatter and slower still); holding 8 MiB of a part's ids instead of"
    " 32 (no change); renewing workers instead of rebuilding engines (a worker past its budget ends after its"
    " part and a fresh one is forked from the coordinator, which keeps the proven engine, so its tables stay"
    " shared): worse on both counts, 199 → 267 MB and 2.37–2.47 s (a fresh fork copies the pages it"
    " touches and starts cold). gigatoken 0.10 offers no control of its cache (no size, no clear). Speed was"
    " kept; the peak stays under 300 MB. Upstream gigatoken has since merged a bounded cache that is wiped in"
    " place (set_max_cache_bytes, commit 9e9271b, 2026-07-26), in no official release yet; the registry's"
    " gigatoken-cachefix 0.10.1 is a third party's build of it that installs over gigatoken's own files. Not"
    " adopted: its Python files match upstream's fac0114 (line endings aside), but its 13 MB native module cannot"
    " be checked against the source here (the crates registry, needed to build it, is out of reach). Once an"
    " official release has it, each worker can set its budget there instead of rebuilding its engine.",
    "unique text (* files) 400 MB: fast backend --workers 2 vs --workers 1": "the fast group's own row reads"
    " 1.26–1.42× run by run against its 1.3 bar, and the same command in the parts group (one file, --split tail)"
    " 1.29–1.40×; the bare library's own two processes read 1.35–1.5× one on this VM (the ceiling rows beside it)."
    " What separates the two: each of two workers has a cache budget of 60 MiB, one process 80 MiB"
    " (fastengine.process_budget), so over unique text --workers 2 rebuilds its engines more often (~5 % of its"
    " time, measured); giving each worker 80 MiB takes the tree's peak over 300 MB. Earlier full runs read 1.26×"
    " and 1.29×; by hand after the first, the same two commands three times each in turns: 2.71 s against 1.91 s,"
    " 1.42×.",
    "encode unique text as one file": "the same command as the fast group's unique-text row above (see there): 1.29–1.40×"
    " run by run on this VM against the 1.3 bar; the many-files and JSONL rows of the same text read 1.35–1.54×.",
    "English prose (the plays, repeated) 400 MB: fast backend --workers 2 vs --workers 1": "the plays repeat their"
    " words, so each worker process builds the same cache of them that one engine builds once: the bare library's own"
    " two processes read 1.43–1.47× one thread here (the ceiling row beside it), and this row 1.21–1.30× run by run."
    " On 2026-12-05, by hand right after a full run (1.24×), three times each in turns: 1.60 s against 1.23 s, 1.30×."
    " Threads would share one cache, but they leave the reading, cutting and writing on one interpreter's lock, the"
    " serial stage this design removed (#36). In absolute terms the row is 290–297 MB/s, against 179 MB/s before the"
    " runs in parts.",
    "DeepSeek tokenizer.json": "row 4 (tests/bench/fast_rows.py bench_families) on 82–83 MB: about 0.9 s of"
    " each run is serial whatever the worker count (interpreter start and imports, ~0.2 s; the reference"
    " tokenizers loaded, ~0.24 s; gigatoken's load of the 4 MB tokenizer.json, ~0.32 s, holding the GIL;"
    " the engine's side of the self-check, ~0.12 s; the reference's side, ~0.12 s, runs in one batch call"
    " on a thread during gigatoken's load since 2026-12-05, which took ~0.15 s off every run, --workers 1"
    " and 2 alike), against ~0.7 s of encoding for --workers 1 and ~0.45 s for --workers 2 (each of two"
    " processes ~90 MB/s, then ~0.1 s of merging): Amdahl's law caps two workers at ~1.2× here, and at"
    " 1.3× only with less than ~0.35 s of serial start-up, under what loading the two tokenizers alone takes."
    " Each worker keeps the engine the self-check proved (no second load); on 416 MB of the same kind of"
    " text, the parts group's row, --workers 2 runs ~1.5× --workers 1.",
    "Mistral v1 SentencePiece": "row 4 (its speed against --backend reference read 6.0× and 5.9× in the last two full runs, at the 6× bar): gigatoken's SentencePiece engine merges across whole documents (a SentencePiece document has "
    'no safe cut, so it is encoded whole). Through the batch call the threads use it encodes ~20–23 MB/s '
    'per core on this unique text (its GIL-holding encode ~24 MB/s), each call with a fixed ~2.7 ms, '
    "against sentencepiece's ~2–2.5 MB/s per core in --backend reference's worker processes. It is the "
    "fastest engine measured for this model: on the same 300 documents, all four giving sentencepiece's "
    'ids, fastokens 10.6 MB/s, kitoken 5.8 MB/s, tokie 3.1 MB/s (the tokenizer.json form), gigatoken 21 '
    'MB/s. Its threads each on a glibc arena gain 1.8–2x bare, and --workers 2 gains 1.35–1.52x over '
    '--workers 1 (start-up not shared: loading, converting and self-checking the model, ~0.5 s, and the '
    'JSONL parsed on the main thread, ~0.3 s of CPU). The rows read 5.5–5.8x (unique text) and 5.8–6.6x '
    '(the plays) run by run against the 6x bar; cutting documents at the spaces this vocabulary never '
    'merges across is exact but no faster (13–24 MB/s for 64 B to 64 kB pieces against 22 MB/s whole). '
    "The model's conversion (~0.5 s in Python) is kept in the cache folder after the first run.",
    "Loader.batch (8 × 2048) over a best-fit plan": 'the packed fields come from the same C pass that copies the'
    ' segments (_fast.c rows_packed: x, y, position_ids, segment numbers and the cross-document mask at once), so'
    ' they cost next to nothing over plain (x, y) of the same plan; what remains is reading a best-fit window\'s'
    ' segments from all over the .bin (see the row "for scale").',
    "mixture epoch, 3 sources": "at 10^8 windows (70/35/5 million in the sources' plans) most of the time is the"
    " sources' permutations, on both sides alike: Fisher–Yates over 115 million numbers, each step a cache miss"
    " (numpy's Generator.shuffle, in place; 5–6 s for the 70-million-window source here) and fresh memory's page"
    " faults (~2.4 s for 800 MB on this VM); then the order of sources (C, earliest deadline first, once per step"
    " of a binary search for the least band: four passes over the epoch for these weights, ~4 s, against 1.2–2 s"
    " for Megatron's float build_blending_indices, which keeps no band) and placing each source's windows (~1 s). Megatron's side took"
    " 11.9–19.8 s in four runs on this shared 2-core VM, ours 13.2–17.7 s in three, then 16.0 s against 15.3 s once the order kept the least band (#34) (19 s before its permutations were shuffled in place instead of allocated,"
    " copied to int64 and concatenated twice). Reaching a few seconds needs a cheaper permutation than"
    " default_rng(words).permutation(n) (a cache-blocked shuffle, or a computed bijection served window by"
    " window), which changes the documented draws: not made here.",
    "Loader.batch (8 × 1024) over a mixture": "a mixture's batch reads from up to three token files: one C call"
    " (_fast.c rows_xy_multi, a tuple of token buffers and a source number per run) writes all its rows, as"
    " rows_xy does for one plan; what remains is the per-batch Python around it (each row's source and window"
    " looked up, the source numbers cast), a few µs against a whole plain batch's ~20 µs. Before that call:"
    " ~29 µs against ~21 µs (0.70–0.73, rows grouped by source and one call per source); the first cut, a"
    " sub-batch per source stacked: 0.39.",
    "encode 2000 MB: --engine ray": "--merge runs the local runner's parts as Ray tasks (the same pipeline,"
    " ids written into place), so what remains beside the local runner is Ray's fixed cost: `import ray`"
    " (~0.35 s), joining and leaving the cluster (~0.3 s), each worker unpickling and self-checking the"
    " tokenizer, and on this 2-core VM Ray's own daemons (raylet, GCS) sharing the two cores with the tasks."
    " Before this stop each task wrote a shard and --merge copied them after the last task: 0.5×.",
}


def why_missed(missed: list[str]) -> str:
    lines = []
    for key, text in WHY.items():
        hits = [m for m in missed if fnmatch.fnmatchcase(m, key + "*")]
        if hits:  # a key with a wildcard is shown as the row it matched
            lines.append(f"- {hits[0] if '*' in key else key}: {text}")
    return ("Why:\n\n" + "\n".join(lines) + "\n") if lines else ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="small sizes, one repeat: checks the harness runs")
    ap.add_argument("--out", default=str(REPO / "docs" / "performance.md"))
    ap.add_argument("--only", default="encode,fast,families,parts,layouts,windows,packing,verify,loader,packed_loader,mixture,chunk,chat,ray", help="comma list of groups to run")
    ap.add_argument("--make-tokens", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--make-paragraphs", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--group", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--render", action="store_true", help="write the report again from the last run's figures (build/bench/results.json)")
    args = ap.parse_args()
    if args.make_tokens:
        return _make_token_file(args.make_tokens)
    if args.make_paragraphs:
        return _make_paragraph_tokens(args.make_paragraphs, args.group)
    if args.render:
        last = json.load(open(WORK / "results.json"))
        return report(last["rows"], last["seconds"], last["date"], last["quick"], args.out, last.get("note"))
    # This process stays small (stdlib only, no big buffers): Linux carries a process's peak RSS
    # across fork/exec into the child's ru_maxrss, so a big parent would inflate every child's figure.
    global REPEATS
    WORK.mkdir(parents=True, exist_ok=True)
    # Timed commands start as an installed package does: from cached bytecode. An editable
    # checkout under PYTHONDONTWRITEBYTECODE=1 would otherwise compile winsample on every start.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    import compileall

    compileall.compile_dir(str(REPO / "winsample"), quiet=1)
    if args.quick:
        REPEATS = 1
        sizes = dict(enc=5, big=20, tokens=50 * 10**6, plain=10**7, docs=10**5, mix=10**6, chunk=1, chat=300, ray=(5, 15), fast=(5, 20), families=dict(unique=2, prose=2), parts=(5, 20))
    else:
        sizes = dict(enc=100, big=400, tokens=10**9, plain=10**9, docs=10**6, mix=10**8, chunk=1, chat=20000, ray=(100, 2000), fast=(100, 400), families=dict(unique=80, prose=80), parts=(100, 400))
    rows = []
    t0 = time.time()
    for name, fn in (("encode", lambda: bench_encode(sizes["enc"], sizes["big"])),
                     ("fast", lambda: __import__("fast_rows").bench_fast(*sizes["fast"], repeats=REPEATS)),
                     ("families", lambda: __import__("fast_rows").bench_families(sizes["families"], repeats=REPEATS)),
                     ("parts", lambda: __import__("parts_rows").bench_parts(*sizes["parts"], repeats=REPEATS)),
                     ("layouts", lambda: bench_layouts(sizes["big"] // 4)),
                     ("windows", lambda: bench_windows(sizes["tokens"], sizes["plain"])),
                     ("packing", lambda: bench_packing(sizes["docs"])),
                     ("verify", lambda: bench_verify(sizes["tokens"])),
                     ("loader", lambda: bench_loader(sizes["tokens"])),
                     ("packed_loader", lambda: bench_packed_loader(sizes["docs"])  # many short documents
                      + bench_packed_loader(sizes["docs"] // 25, group=25)),  # ~1,100 tokens: web text's size
                     ("mixture", lambda: bench_mixture_epoch(sizes["mix"])
                      + bench_mixture_loader(sizes["tokens"], sizes["docs"])),
                     ("chunk", lambda: __import__("chunk_rows").bench_chunk(str(REPO / "winsample" / "corpus"), sizes["chunk"], row)),
                     ("chat", lambda: __import__("chat_rows").bench_chat(WORK, sizes["chat"], REPEATS, row)),
                     ("ray", lambda: __import__("ray_rows").bench_ray(*sizes["ray"], repeats=REPEATS))):
        if name not in args.only.split(","):
            continue
        print(f"[bench] {name} …", file=sys.stderr, flush=True)
        rows += fn()
    report(rows, time.time() - t0, datetime.date.today().isoformat(), args.quick, args.out)


def report(rows: list[dict], seconds: float, date: str, quick: bool, out: str, note: str | None = None) -> None:
    """Write docs/performance.md from the rows of one run (and keep them in results.json);
    ``note``: where the rows came from, when not all from that one run (results.json's ``note``)."""
    text = table(rows)
    print(text)
    m = machine()
    missed = [r["case"] for r in rows if not r["meets_bar"]]
    doc = [
        "# Performance\n",
        f"Measured by `make bench` on {date} in {seconds:.0f} s{' (--quick sizes)' if quick else ''}.\n"
        + (f"\n{note}\n" if note else ""),
        f"Machine: {m['cores']} cores, {m['cpu']}; Python {m['python']}, numpy {m['numpy']},"
        f" tiktoken {m['tiktoken']}; {m['platform']}.\n",
        "Each figure is the median of "
        f"{REPEATS} runs, each in a fresh process (the encode rows' commands take turns, so drift"
        " during the bench moves them alike); peak RSS is that process's `ru_maxrss`. Files are"
        " read warm from the page cache by both sides. Ratios compare winsample with the baseline"
        " measured in the same run. The peak RSS of the windows and verify rows counts the 1 GB"
        " .bin's pages mapped by `np.memmap` (shared, reclaimable page cache, as the np.max floor"
        " shows); what the process itself allocates is the difference.\n",
        text + "\n",
        notes(rows),
        ("Every row meets its bar.\n" if not missed else
         "Rows that miss their bar: " + "; ".join(missed) + ".\n\n" + why_missed(missed)),
        "Baselines: nanoGPT's `data/*/prepare.py` pattern (read the whole file, `encode_ordinary`,"
        " `np.array(ids, dtype=np.uint16).tofile`); single-process `encode_ordinary` over the same"
        " text (encoding time only); the source article's plain-Python `SlidingWindowSampler`;"
        " a chunked `np.max` pass over the same memmap as the floor for reading a token file;"
        " for the fast backend rows (`tests/bench/fast_rows.py`), `--backend reference` (tiktoken; for the"
        " DeepSeek tokenizer.json and Mistral SentencePiece rows, tokenizers and sentencepiece) and the bare"
        " fast library by hand (gigatoken: read the file, `encode`, `tofile`, in one process; for the JSONL"
        " rows, `encode` of each document), and the same library on 1 and on 2 threads, and in 2 forked processes,"
        " over the file's 1 MiB pieces, one tokenizer each, its encoding alone timed from a barrier passed once"
        " every tokenizer is built (the machine's own ceiling for two encoders). The other rows time"
        " whole commands (interpreter start and tokenizer loading included, on both sides) and their peak RSS"
        " is the whole process tree's, parent and workers summed.\n",
        PACKING_PROSE + "\n",
        MIXTURE_PROSE + "\n",
        CHUNK_PROSE + "\n",
        CHAT_PROSE + "\n",
        PARTS_PROSE + "\n",
    ]
    Path(out).write_text("\n".join(doc), encoding="utf-8")
    json.dump({"rows": rows, "seconds": seconds, "date": date, "quick": quick, "note": note}, open(WORK / "results.json", "w"),
              indent=2)
    print(f"\nwritten to {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
