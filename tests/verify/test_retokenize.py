"""verify's retokenize check: ids that are valid, checksummed and decodable but not the reference's
tokenization of their own text fail it, and only it.

The planted data is written by encode itself, with a tokenizer that splits " the" into " th" +
"e": every id is in the vocabulary, the text decodes exactly, meta.json and its checksums are
consistent, yet the ids are not GPT-2's BPE of that text.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from winsample import tokenizer
from winsample.cli import main
from winsample.encode import encode_corpus
from winsample.verify import retokenize, verify

from ..conftest import CORPUS

EOT = 50256


@pytest.fixture(scope="module")
def split_ids(ref_gpt2):
    """(" the", " th", "e") as GPT-2 ids, from tiktoken: " the" is one token, the other two also."""
    the, th, e = (ref_gpt2.encode_ordinary(s) for s in (" the", " th", "e"))
    assert len(the) == len(th) == len(e) == 1
    return the[0], th[0], e[0]


def plant(monkeypatch, split_ids, every=True):
    """Make the reference encode split " the" (every one, or only the first of each text)."""
    the, th, e = split_ids
    real = tokenizer.TiktokenTokenizer.encode

    def encode(self, text):
        ids = real(self, text)
        at = np.flatnonzero(ids == the)
        if not every:
            at = at[:1]
        if len(at) == 0:
            return ids
        out = np.insert(ids, at + 1, e)  # after each chosen " the" goes an "e" ...
        out[at + np.arange(len(at))] = th  # ... and the " the" becomes " th"
        return out

    monkeypatch.setattr(tokenizer.TiktokenTokenizer, "encode", encode)


def checks(report, name):
    return [c for c in report.checks if c.name == name]


def test_a_non_canonical_split_passes_every_check_but_retokenize(tmp_path, monkeypatch, split_ids, ref_gpt2):
    out = tmp_path / "data"
    with monkeypatch.context() as m:
        plant(m, split_ids, every=False)
        encode_corpus([str(CORPUS)], out, workers=1, backend="reference")
    train = np.fromfile(out / "train.bin", "<u2")
    text = ref_gpt2.decode(train.tolist())
    assert ref_gpt2.encode_ordinary(text.split("<|endoftext|>")[0]) != train[: train.tolist().index(EOT)].tolist()

    # without retokenize every check passes: the planted ids are invisible to them
    quiet = verify(out, retokenize_sample=0)
    assert quiet.ok(strict=True), [c for c in quiet.checks if c.status != "pass"]
    assert checks(quiet, "retokenize")[0].status == "skip"

    report = verify(out)
    failed = [c for c in report.checks if c.status == "fail"]
    assert [c.name for c in failed] == ["retokenize"] * len(failed) and failed
    first = failed[0]
    # the split, the document, the first differing token and both ids are named
    assert first.file == "train.bin"
    assert first.detail.startswith("train.bin: document ")
    assert f"is {split_ids[1]} where the reference tiktoken" in first.detail and f"as {split_ids[0]}" in first.detail
    d = int(first.detail.split("document ")[1].split()[0])
    starts = np.load(out / "train.docs.npy")
    pos = int(first.detail.split(": token ")[1].split()[0])
    doc = train[starts[d] : (starts[d + 1] if d + 1 < len(starts) else len(train))]
    assert train[pos] == split_ids[1] and train[pos + 1] == split_ids[2]  # the planted pair, exactly there
    assert ref_gpt2.encode_ordinary(ref_gpt2.decode(doc[:-1].tolist()))[pos - starts[d]] == split_ids[0]


def test_cli_exits_1_and_names_the_split_document_and_token(tmp_path, monkeypatch, split_ids):
    out = tmp_path / "data"
    with monkeypatch.context() as m:
        plant(m, split_ids)
        encode_corpus([str(CORPUS)], out, workers=1, backend="reference")
    r = CliRunner().invoke(main, ["verify", str(out), "-q"])
    assert r.exit_code == 1
    assert "retokenize" in r.stdout and "train.bin: document" in r.stdout and "where the reference" in r.stdout
    r = CliRunner().invoke(main, ["verify", str(out), "-q", "--retokenize-sample", "0"])
    assert r.exit_code == 0, r.stdout
    r = CliRunner().invoke(main, ["verify", str(out), "--json", "-q"])
    rk = [c for c in json.loads(r.stdout)["checks"] if c["name"] == "retokenize"]
    assert {c["file"]: c["status"] for c in rk} == {"train.bin": "fail", "val.bin": "fail"}
    assert all(c["mismatches"] >= 1 for c in rk)


def test_clean_data_passes_for_doc_and_tail_splits(tmp_path):
    for split in ("doc", "tail"):
        out = tmp_path / split
        encode_corpus([str(CORPUS)], out, workers=2, split=split)
        rk = checks(verify(out), "retokenize")
        assert [c.status for c in rk] == ["pass", "pass"], [c.detail for c in rk]
        assert all(c.figures["documents"] >= 1 and c.figures["bytes"] > 0 for c in rk)


def test_long_documents_are_checked_on_windows_between_safe_cuts(tmp_path, monkeypatch, split_ids):
    # one 180 KB document, a budget of 20 KB: only windows of it can be re-encoded
    text = (CORPUS / "hamlet.txt").read_text(encoding="utf-8")
    src = tmp_path / "hamlet.txt"
    src.write_text(text, encoding="utf-8")
    tok = tokenizer.load("gpt2")
    clean, planted = tmp_path / "clean", tmp_path / "planted"
    encode_corpus([str(src)], clean, workers=1, split="tail")
    with monkeypatch.context() as m:
        plant(m, split_ids)
        encode_corpus([str(src)], planted, workers=1, split="tail", backend="reference")

    def run(folder):
        ids = np.fromfile(folder / "train.bin", "<u2")
        unit = retokenize.Unit("train.bin", ids, np.load(folder / "train.docs.npy"), True, EOT, partial_last=True)
        return retokenize.check(tok, [unit], docs=4, max_bytes=20_000)[0]

    ok = run(clean)
    assert ok.status == "pass" and ok.documents == 1 and 4096 <= ok.bytes <= 20_000
    bad = run(planted)
    assert bad.status == "fail" and "train.bin: document 0" in bad.detail


def test_a_bare_bin_splits_documents_at_eot(tmp_path, ref_gpt2, monkeypatch, split_ids):
    texts = [(CORPUS / n).read_text(encoding="utf-8")[:5000] for n in ("sonnets.txt", "tempest.txt")]
    ids = []
    for t in texts:
        ids += ref_gpt2.encode_ordinary(t) + [EOT]
    good = tmp_path / "good.bin"
    np.array(ids, "<u2").tofile(good)
    rk = checks(verify(good), "retokenize")
    assert [c.status for c in rk] == ["pass"] and rk[0].figures["documents"] == 2
    the, th, e = split_ids
    k = ids.index(the)
    bad = tmp_path / "bad.bin"
    np.array(ids[:k] + [th, e] + ids[k + 1 :], "<u2").tofile(bad)
    rk = checks(verify(bad), "retokenize")
    # no meta.json: gpt2 is only assumed, so the difference warns (--strict fails on it)
    assert rk[0].status == "warn" and "document 0 (tokens 0–" in rk[0].detail and f"token {k} is {th}" in rk[0].detail
    assert "no meta.json" in rk[0].detail and not verify(bad).ok(strict=True)


def test_a_document_that_does_not_end_in_eot_fails(tmp_path):
    out = tmp_path / "data"
    encode_corpus([str(CORPUS)], out, workers=1, val_fraction=0)
    tok = tokenizer.load("gpt2")
    ids = np.fromfile(out / "train.bin", "<u2").copy()
    starts = np.load(out / "train.docs.npy")
    ids[starts[2] - 1] = 13  # document 1's EOT becomes "."
    o = retokenize.check(tok, [retokenize.Unit("train.bin", ids, starts, True, EOT)])[0]
    assert o.status == "fail" and o.detail.startswith("train.bin: document 1 does not end with the EOT id 50256")


def test_a_family_whose_decode_is_not_exact_is_skipped_with_the_reason():
    class Normalizing(tokenizer.TiktokenTokenizer):
        family = "sentencepiece"
        exact_decode = False

    base = tokenizer.load("gpt2")
    tok = Normalizing(base.encoding, "spm-like", ("gpt2", None, "gpt2"))
    unit = retokenize.Unit("train.bin", np.array([31373, 995, EOT], "<u2"), np.array([0]), True, EOT)
    o = retokenize.check(tok, [unit])[0]
    assert o.status == "skip" and "does not decode exactly" in o.detail and "'spm-like'" in o.detail


def test_the_sample_is_seeded_and_bounded(tmp_path):
    out = tmp_path / "data"
    encode_corpus([str(CORPUS)], out, workers=1, val_fraction=0)
    tok = tokenizer.load("gpt2")
    ids = np.fromfile(out / "train.bin", "<u2")
    unit = retokenize.Unit("train.bin", ids, np.load(out / "train.docs.npy"), True, EOT)
    a = retokenize.check(tok, [unit], docs=3, max_bytes=50_000)[0]
    b = retokenize.check(tok, [unit], docs=3, max_bytes=50_000)[0]
    assert a == b and a.status == "pass"
    assert a.documents <= 3 and a.bytes <= 50_000


def test_retokenize_bytes_bounds_the_text_encoded_again(tmp_path):
    """The CLI's text budget is shared by the splits: each gets at most half of it (and the
    default, 512 kB, is what the check encodes when nothing is given)."""
    out = tmp_path / "data"
    encode_corpus([str(CORPUS)], out, workers=1)
    r = CliRunner().invoke(main, ["verify", str(out), "--json", "--retokenize-bytes", "10000"])
    assert r.exit_code == 0, r.stderr
    rk = [c for c in json.loads(r.stdout)["checks"] if c["name"] == "retokenize"]
    assert [c["status"] for c in rk] == ["pass", "pass"]
    assert all(0 < c["bytes"] <= 5000 for c in rk), rk
    assert retokenize.DEFAULT_BYTES == 512_000
    r = CliRunner().invoke(main, ["verify", str(out), "--json"])
    rk = [c for c in json.loads(r.stdout)["checks"] if c["name"] == "retokenize"]
    assert sum(c["bytes"] for c in rk) <= 512_000 and all(c["bytes"] > 5000 for c in rk), rk
