"""split_leakage names the val documents that make it fail (#33 item 10): their provenance, the
share of their own shingles found in train, an exact copy in train when there is one, and what
to do (``--dedup exact`` for copies, near-duplicate filtering otherwise). After ``encode --dedup
exact`` the same corpus passes. Which documents are copies is known from how the corpus is built
here, not from the code under test."""

from __future__ import annotations

import json

import numpy as np
from click.testing import CliRunner

from winsample.cli import main
from winsample.encode import encode_corpus
from winsample.verify import leakers, verify
from winsample.verify.shingles import shingle_hashes

from ..encode.test_dedup import paragraphs, write_jsonl


def cli(*args):
    return CliRunner().invoke(main, [*map(str, args)])


def leakage(report):
    (c,) = [c for c in report.checks if c.name == "split_leakage"]
    return c


def corpus_with_copies(tmp_path):
    """90 distinct paragraphs in a.jsonl, then b.jsonl repeating 12 of them (lines 1-12 are a.jsonl
    lines 5, 10, …, 60): --split tail puts b.jsonl in val."""
    p = paragraphs(90)
    write_jsonl(tmp_path / "in" / "a.jsonl", p)
    write_jsonl(tmp_path / "in" / "b.jsonl", [p[5 * (j + 1) - 1] for j in range(12)])
    return tmp_path / "in", p


def test_a_failing_leakage_check_names_the_copied_val_documents_and_suggests_dedup(tmp_path):
    src, _ = corpus_with_copies(tmp_path)
    out = tmp_path / "out"
    encode_corpus([str(src)], out, split="tail", val_fraction=0.1, workers=1)
    c = leakage(verify(out))
    assert c.status == "fail"
    worst = c.figures["worst_documents"]
    assert 1 <= len(worst) <= leakers.WORST
    for w in worst:
        assert w["share"] == 1.0 and w["in_train"] == w["shingles"] > 0
        line = int(w["source"]["line"])  # b.jsonl line L repeats a.jsonl line 5L
        assert w["source"]["path"].endswith("b.jsonl")
        assert w["copy_of"]["source"]["path"].endswith("a.jsonl") and w["copy_of"]["source"]["line"] == 5 * line
    assert "--dedup exact" in c.figures["suggestion"]


def test_the_text_report_lists_them_under_the_check_line(tmp_path):
    src, _ = corpus_with_copies(tmp_path)
    out = tmp_path / "out"
    encode_corpus([str(src)], out, split="tail", val_fraction=0.1, workers=1)
    r = cli("verify", out, "-q")
    assert r.exit_code == 1
    lines = r.stdout.splitlines()
    at = next(i for i, x in enumerate(lines) if "split_leakage" in x)
    listed = [x for x in lines[at + 1 :] if x.startswith("    val document ")]
    assert listed and all("b.jsonl:" in x and "100.00% of its" in x and "an exact copy of train document" in x and "a.jsonl:" in x
                          for x in listed)
    assert any(x.startswith("    → ") and "--dedup exact" in x for x in lines)
    r = cli("verify", out, "--json")
    (c,) = [c for c in json.loads(r.stdout)["checks"] if c["name"] == "split_leakage"]
    assert c["worst_documents"][0]["copy_of"] is not None


def test_after_dedup_exact_the_same_corpus_passes(tmp_path):
    src, _ = corpus_with_copies(tmp_path)
    out = tmp_path / "out"
    s = encode_corpus([str(src)], out, split="tail", val_fraction=0.1, workers=1, dedup="exact")
    assert s["duplicates_dropped"] == 12
    c = leakage(verify(out))
    assert c.status == "pass", c.detail
    assert "worst_documents" not in c.figures  # a passing check adds nothing


def test_near_duplicates_are_named_without_suggesting_dedup(tmp_path):
    """Val documents that are copies with one word changed: most shingles in train, no exact copy."""
    p = paragraphs(90)
    near = [p[j].replace(" ", " so ", 1) for j in range(12)]
    write_jsonl(tmp_path / "in" / "a.jsonl", p)
    write_jsonl(tmp_path / "in" / "b.jsonl", near)
    out = tmp_path / "out"
    encode_corpus([str(tmp_path / "in")], out, split="tail", val_fraction=0.1, workers=1)
    c = leakage(verify(out))
    assert c.status == "fail"
    worst = c.figures["worst_documents"]
    assert worst and all(w["copy_of"] is None and w["share"] > 0.5 for w in worst)  # (val's first: a tail, whole in train)
    assert all(w["source"]["path"].endswith("b.jsonl") for w in worst)
    assert "near-duplicates" in c.figures["suggestion"] and "--dedup exact cannot see" in c.figures["suggestion"]
    shares = [w["share"] for w in worst]
    assert shares == sorted(shares, reverse=True)


def test_per_document_shares_count_each_documents_own_shingles(tmp_path):
    """Hand-made ids: val doc 0 is train doc 1 exactly, val doc 1 shares its first 40 tokens of 80."""
    rng = np.random.default_rng(0)
    a, b, c = (rng.integers(0, 50000, n).astype(np.uint16) for n in (70, 90, 80))
    eot = np.array([50256], np.uint16)
    train = np.concatenate([a, eot, b, eot])
    fresh = rng.integers(0, 50000, 40).astype(np.uint16)
    val = np.concatenate([b, eot, a[:40], fresh, eot])

    class T:  # a scan.Target's face: its opened split
        def __init__(self, starts):
            self.src = type("S", (), {"doc_starts": lambda s: np.array(starts, np.int64), "meta": None})()  # no provenance

    train_set = np.sort(shingle_hashes(train, 32))
    worst = leakers.worst_documents(T([0, 71]), T([0, 91]), train, val, train_set, 0)
    by_doc = {w["doc"]: w for w in worst}
    assert by_doc[0]["shingles"] == 91 - 32 + 1 and by_doc[0]["share"] == 1.0  # b + its EOT, wholly inside
    assert by_doc[0]["copy_of"] == {"doc": 1, "source": None}
    assert by_doc[1]["shingles"] == 81 - 32 + 1 and by_doc[1]["in_train"] == 40 - 32 + 1
    assert by_doc[1]["copy_of"] is None



def test_a_file_cut_short_by_a_byte_skips_leakage_with_the_true_reason(tmp_path):
    """New-user trial: with train.bin one byte short, the skip line said "val.bin has 193085 < 32
    tokens", which is false: train.bin's ids could not be read (its size is no whole number of
    them). The line now says so; the file's own size line fails above it."""
    src, _ = corpus_with_copies(tmp_path)
    out = tmp_path / "out"
    encode_corpus([str(src)], out, split="tail", workers=1)
    with open(out / "train.bin", "r+b") as f:
        f.truncate((out / "train.bin").stat().st_size - 1)
    c = leakage(verify(out))
    assert c.status == "skip" and " < 32 tokens" not in c.detail
    assert c.detail.startswith("train.bin not read as tokens (its size is no whole number of <u2 ids")
