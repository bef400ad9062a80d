"""Bench rows for retrieval chunks (#32): winsample's chunker against semchunk and chonkie.

Every side chunks the same documents (the shipped corpus's eight texts, Shakespeare and the Chinese
article, repeated ``copies`` times: one document each) with the same token limit and overlap, and the
same GPT-2 tokenizer (tiktoken's, from the bundled ranks: no network). Each side runs in a process
of its own: it loads its library and tokenizer, chunks one short text to warm up, then times one
pass over all documents (one pass: semchunk memoizes token counts by string, so a second pass
over the same text would be served from its cache); each side runs ``PROCESSES`` times, taken in
turn, and the median counts. Outside the timed part it
counts, for every chunk, whether its text encodes to more than the limit (``encode_ordinary``, the
reference's count) and whether ``document[start:end]`` is its text (its offsets: semchunk's
``offsets=True``, chonkie's ``start_index``/``end_index``, winsample's ``char_start``/``char_end``).
"""

from __future__ import annotations

import json
import statistics
import sys

from measure import run_child  # noqa: E402

T, OVERLAP, PROCESSES = 512, 64, 3

CHILD = r"""
import json, sys, time
from pathlib import Path
side, copies, T, OV = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
docs = [p.read_text(encoding="utf-8") for p in sorted(Path(sys.argv[5]).glob("*.txt"))] * copies  # 1: every document once (semchunk would serve a repeat from its cache)
from winsample import tokenizer
enc = tokenizer.load_encoding("gpt2")
if side.startswith("winsample"):
    from winsample import retrieval
    ch = retrieval.Chunker("gpt2", T, OV, "sentence" if side.endswith("sentence") else "none")
    def run(d):
        return [(c.char_start, c.char_end, c.text) for c in ch(d)]
elif side == "semchunk":
    import semchunk
    sc = semchunk.chunkerify(enc, T)
    def run(d):
        chunks, offs = sc(d, offsets=True, overlap=OV)
        return [(s, e, c) for c, (s, e) in zip(chunks, offs)]
else:
    from chonkie import SentenceChunker, TokenChunker
    kind = SentenceChunker if side == "chonkie-sentence" else TokenChunker
    ck = kind(tokenizer=enc, chunk_size=T, chunk_overlap=OV)
    def run(d):
        return [(c.start_index, c.end_index, c.text) for c in ck.chunk(d)]
run("A short text to warm up. It has two sentences.")
t = time.perf_counter()
out = [run(d) for d in docs]
seconds = time.perf_counter() - t
chunks = sum(len(o) for o in out)
over = sum(len(enc.encode_ordinary(t)) > T for o in out for _, _, t in o)
wrong = sum(d[s:e] != t for d, o in zip(docs, out) for s, e, t in o)
size = sum(len(d.encode("utf-8")) for d in docs)
print(json.dumps({"seconds": seconds, "chunks": chunks, "over": over, "wrong": wrong, "bytes": size,
                  "documents": len(docs)}))
"""

PAIRS = [  # (winsample side, other side): like against like
    ("winsample", "chonkie-token", "chonkie TokenChunker"),
    ("winsample-sentence", "chonkie-sentence", "chonkie SentenceChunker"),
    ("winsample-sentence", "semchunk", "semchunk (offsets=True)"),
]


def bench_chunk(corpus: str, copies: int, row) -> list[dict]:
    sides = {s for a, b, _ in PAIRS for s in (a, b)}
    runs: dict = {side: [] for side in sorted(sides)}
    for _ in range(PROCESSES):
        for side in sorted(sides):
            try:
                runs[side].append(run_child([sys.executable, "-c", CHILD, side, str(copies), str(T), str(OVERLAP), corpus]))
            except Exception as e:  # a library not installed: the row says so
                runs[side] = e
    for side, rs in runs.items():
        if not isinstance(rs, Exception):
            outs = [r.out for r in rs if r.out]
            runs[side] = RuntimeError("printed nothing") if not outs else dict(outs[-1], seconds=statistics.median(o["seconds"] for o in outs))
    rows = []
    for ours_name, theirs_name, label in PAIRS:
        ours, theirs = runs[ours_name], runs[theirs_name]
        if isinstance(ours, Exception) or isinstance(theirs, Exception):
            rows.append(row(f"chunk vs {label}", "-", "-", "-", "≥ 1.0", False, note=f"did not run: {ours!r} {theirs!r}"[:300]))
            continue
        o, t = ours, theirs
        mb = o["bytes"] / 1e6
        mode = "--boundaries sentence" if ours_name.endswith("sentence") else "no boundaries"
        case = (f"chunk {mb:.1f} MB of real text ({o['documents']} documents), T {T}, overlap {OVERLAP}:"
                f" winsample.chunk ({mode}) vs {label} (throughput)")
        r = t["seconds"] / o["seconds"]
        rows.append(row(case, f"{mb / o['seconds']:.1f} MB/s", f"{mb / t['seconds']:.1f} MB/s", f"{r:.2f}", "≥ 1.0", r >= 1.0,
                        note=(f"chunks: {o['chunks']:,} vs {t['chunks']:,}; over {T} tokens by the reference count:"
                              f" {o['over']} vs {t['over']}; offset errors (document[start:end] is not the text):"
                              f" {o['wrong']} vs {t['wrong']}")))
        rows.append(row(f"chunk ({mode}) vs {label}: chunks over the limit and offset errors",
                        f"{o['over']} over, {o['wrong']} wrong", f"{t['over']} over, {t['wrong']} wrong", "",
                        "winsample: 0 and 0", o["over"] == 0 and o["wrong"] == 0))
    return rows


if __name__ == "__main__":
    print(json.dumps(bench_chunk(sys.argv[1], int(sys.argv[2]), lambda *a, **k: (a, k)), default=str, indent=1))
