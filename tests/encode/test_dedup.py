"""``encode --dedup exact`` (#33 item 10): a document whose text an earlier kept document had is
dropped, in input order, in one file, across files and across splits; counted; the same bytes
with 1 or 2 workers and after a resume. Expected ids come from tiktoken on the texts kept by a
plain Python dict, never from winsample's encoder."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from winsample import formats
from winsample.cli import main
from winsample.encode import encode_corpus
from winsample.errors import ConfigError

from ..conftest import CORPUS
from .test_faults import _crash_after_checkpoints, _docs, assert_clean, data_set, small_batches  # noqa: F401

EOT = 50256


def cli(*args):
    return CliRunner().invoke(main, [*map(str, args)])


def paragraphs(n: int, play: str = "hamlet.txt") -> list[str]:
    """``n`` distinct paragraphs of a play, each long enough to hold several 32-token shingles."""
    out, seen = [], set()
    for p in (CORPUS / play).read_text(encoding="utf-8").split("\n\n"):
        p = p.strip()
        if len(p) > 200 and p not in seen:
            seen.add(p)
            out.append(p)
    assert len(out) >= n
    return out[:n]


def write_jsonl(path: Path, texts) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")
    return path


def train_docs(out: Path, split: str = "train") -> list[list[int]]:
    ids = np.fromfile(out / f"{split}.bin", "<u2")
    starts = [*np.load(out / f"{split}.docs.npy").tolist(), len(ids)]
    return [ids[a:b].tolist() for a, b in zip(starts, starts[1:])]


def first_occurrences(texts) -> list[str]:
    return list(dict.fromkeys(texts))


def test_duplicates_in_one_file_are_dropped_and_the_first_stays(tmp_path, ref_gpt2):
    p = paragraphs(6)
    texts = [p[0], p[1], p[0], p[2], p[1], p[1], p[3]]
    src = write_jsonl(tmp_path / "in.jsonl", texts)
    s = encode_corpus([str(src)], tmp_path / "out", val_fraction=0, dedup="exact", workers=1)
    assert train_docs(tmp_path / "out") == [ref_gpt2.encode_ordinary(t) + [EOT] for t in first_occurrences(texts)]
    assert s["duplicates_dropped"] == 3 and s["documents"] == 7
    meta = formats.read_meta(tmp_path / "out" / "meta.json")
    assert meta["stats"]["duplicates_dropped"] == 3 and meta["dedup"] == "exact"


def test_duplicates_across_files_and_input_kinds_are_dropped(tmp_path, ref_gpt2):
    """A JSONL record, a small text file and a large one (read as byte ranges) with one text."""
    p = paragraphs(40)
    big = "\n\n".join(p) + "\n"
    while len(big.encode()) < 70_000:  # a text file over 64 KB is read as byte ranges, hashed as bytes
        big += big
    root = tmp_path / "in"
    write_jsonl(root / "a.jsonl", [p[0], big, p[1]])
    (root / "b.txt").write_text(p[0], encoding="utf-8")  # = a.jsonl line 1
    (root / "c.txt").write_text(big, encoding="utf-8")  # = a.jsonl line 2, through the byte-range path
    (root / "d.txt").write_text(p[2], encoding="utf-8")
    s = encode_corpus([str(root)], tmp_path / "out", val_fraction=0, dedup="exact", workers=2)
    assert s["duplicates_dropped"] == 2
    assert train_docs(tmp_path / "out") == [ref_gpt2.encode_ordinary(t) + [EOT] for t in (p[0], big, p[1], p[2])]


def test_split_doc_puts_equal_texts_in_one_split_and_dedup_keeps_one(tmp_path, ref_gpt2):
    p = paragraphs(60)
    texts = p + p[:30]
    src = write_jsonl(tmp_path / "in.jsonl", texts)
    plain = encode_corpus([str(src)], tmp_path / "plain", val_fraction=0.3, workers=1)
    # without --dedup each copy falls in the split of its first: the split hashes the text
    assert plain["train"]["documents"] + plain["val"]["documents"] == 90
    val_plain = {tuple(d) for d in train_docs(tmp_path / "plain", "val")}
    assert not val_plain & {tuple(d) for d in train_docs(tmp_path / "plain")}
    s = encode_corpus([str(src)], tmp_path / "out", val_fraction=0.3, workers=1, dedup="exact")
    assert s["duplicates_dropped"] == 30
    kept = train_docs(tmp_path / "out") + train_docs(tmp_path / "out", "val")
    assert sorted(kept) == sorted(ref_gpt2.encode_ordinary(t) + [EOT] for t in p)


def test_split_tail_copies_that_would_fall_in_val_are_dropped(tmp_path, ref_gpt2):
    p = paragraphs(60)
    texts = p + p[:20]  # the last 20 repeat the first: --split tail would put them in val
    src = write_jsonl(tmp_path / "in.jsonl", texts)
    plain = encode_corpus([str(src)], tmp_path / "plain", split="tail", val_fraction=0.2, workers=1)
    assert plain["val"]["documents"] >= 15
    s = encode_corpus([str(src)], tmp_path / "out", split="tail", val_fraction=0.2, workers=1, dedup="exact")
    assert s["duplicates_dropped"] == 20
    train = np.fromfile(tmp_path / "out" / "train.bin", "<u2").tolist()
    val = np.fromfile(tmp_path / "out" / "val.bin", "<u2").tolist()
    want = [i for t in p for i in ref_gpt2.encode_ordinary(t) + [EOT]]
    assert train + val == want


@pytest.mark.parametrize("split", ["doc", "tail"])
def test_one_and_two_workers_write_the_same_bytes(tmp_path, split):
    p = paragraphs(80)
    root = tmp_path / "in"
    write_jsonl(root / "a.jsonl", p[:50] + p[10:20])
    write_jsonl(root / "b.jsonl", p[40:80] + p[:5])
    outs = []
    for w in (1, 2):
        out = tmp_path / f"w{w}"
        s = encode_corpus([str(root)], out, split=split, val_fraction=0.2, workers=w, dedup="exact")
        assert s["duplicates_dropped"] == 25
        outs.append(data_set(out))
    assert outs[0] == outs[1]


def test_without_dedup_nothing_is_dropped_and_no_count_is_written(tmp_path):
    p = paragraphs(4)
    src = write_jsonl(tmp_path / "in.jsonl", [p[0], p[0], p[1]])
    s = encode_corpus([str(src)], tmp_path / "out", val_fraction=0, workers=1)
    assert "duplicates_dropped" not in s and s["train"]["documents"] == 3
    meta = formats.read_meta(tmp_path / "out" / "meta.json")
    assert "duplicates_dropped" not in meta["stats"] and "dedup" not in meta


def test_cli_summary_and_json_count_the_drops(tmp_path):
    p = paragraphs(4)
    src = write_jsonl(tmp_path / "in.jsonl", [p[0], p[1], p[0], p[0]])
    r = cli("encode", src, "-o", tmp_path / "out", "--val-fraction", 0, "--dedup", "exact", "--workers", 1)
    assert r.exit_code == 0, r.stderr
    assert "encoded 2 documents, 2 exact duplicates dropped:" in r.stderr and r.stdout == ""
    r = cli("encode", src, "-o", tmp_path / "out2", "--val-fraction", 0, "--dedup", "exact", "--json", "-q")
    assert r.exit_code == 0 and json.loads(r.stdout)["duplicates_dropped"] == 2


def test_dedup_with_the_ray_engine_is_refused_with_one_line(tmp_path):
    with pytest.raises(ConfigError, match="--dedup exact judges documents in input order"):
        encode_corpus([str(CORPUS)], tmp_path / "out", dedup="exact", engine="ray")
    r = cli("encode", CORPUS, "-o", tmp_path / "out", "--dedup", "exact", "--engine", "ray")
    assert r.exit_code == 2 and r.stderr.count("\n") == 1 and "--dedup" in r.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("split", ["doc", "tail"])
def test_resume_with_dedup_equals_an_uninterrupted_run(tmp_path, small_batches, split):  # noqa: F811
    src = _docs(tmp_path / "in")
    for i in range(0, 40, 3):  # every third file repeats an earlier one
        (src / f"d{i:03d}.txt").write_text((src / f"d{i // 2:03d}.txt").read_text() if i else "Document zero.")
    kw = dict(split=split, val_fraction=0.3, seed=5, workers=2, dedup="exact")
    clean = encode_corpus([str(src)], tmp_path / "clean", **kw)
    assert clean["duplicates_dropped"] > 0
    out = tmp_path / "out"
    journal = _crash_after_checkpoints(out, [str(src)], **kw)
    assert 1 <= len(journal["inputs"]) < 40 and journal["params"]["dedup"] == "exact"
    s = encode_corpus([str(src)], out, resume_partial=True, **kw)
    assert s["resumed"]["inputs"] == len(journal["inputs"])
    assert s["duplicates_dropped"] == clean["duplicates_dropped"]
    assert data_set(out) == data_set(tmp_path / "clean")
    assert_clean(out)


def test_resume_without_dedup_discards_a_dedup_checkpoint(tmp_path, small_batches):  # noqa: F811
    src = _docs(tmp_path / "in")
    out = tmp_path / "out"
    _crash_after_checkpoints(out, [str(src)], val_fraction=0.3, workers=1, dedup="exact")
    s = encode_corpus([str(src)], out, resume_partial=True, val_fraction=0.3, workers=1)
    assert s["resumed"]["discarded"] == "options changed since the checkpoint (dedup)"
