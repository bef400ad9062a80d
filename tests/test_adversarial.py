"""Adversarial inputs: each kind below is built here and its documented outcome asserted.

An outcome is the exit code, a fragment of the one error line (or verify's report) naming the
file and position, and what is written: for a success, train.bin equals tiktoken's ids of the
texts listed (computed here with ``ref_gpt2``); for a failure, nothing at all. The table in
docs/reliability.md lists every kind id; ``test_reliability_doc_matches_the_suite`` checks it.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import pytest
from click.testing import CliRunner

from winsample import formats
from winsample.cli import main
from winsample.encode import encode_corpus

from . import test_faults
from .conftest import CORPUS, REPO

EOT = 50256
MIB = 1 << 20  # sources.READ_BYTES: one read


@dataclass
class Kind:
    id: str
    make: Callable[[Path], list]  # builds the input under tmp, returns argv after `winsample`
    code: int
    needles: tuple = ()  # in the error line (encode, windows) or the report (verify)
    texts: Callable[[Path], list] | None = None  # success: train.bin == tiktoken of these, EOT after each
    isolate: bool = False  # run as a subprocess with a timeout (could hang if the guard broke)
    extra: Callable | None = field(default=None, repr=False)  # (tmp, result) → more assertions


def enc(*inputs, more=()):
    """argv of encode into tmp/out, everything in train.bin (val fraction 0), one worker."""
    return lambda tmp: ["encode", *[i(tmp) if callable(i) else tmp / i for i in inputs], "-o", tmp / "out",
                        "--val-fraction", "0", "--workers", "1", *more]


def file(name: str, data: bytes | str):
    def make(tmp):
        p = tmp / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data.encode() if isinstance(data, str) else data)
        return p
    return make


def folder(name: str, **files):
    def make(tmp):
        for n, data in files.items():
            file(f"{name}/{n}", data)(tmp)
        return tmp / name
    return make


def words(nbytes: int) -> str:
    """nbytes of ASCII prose-like text without a newline."""
    base = "the quick brown fox jumps over the lazy dog 12345 "
    return (base * (nbytes // len(base) + 1))[:nbytes]


def jl(**obj) -> str:
    return json.dumps(obj) + "\n"


# --- data folders for verify / windows kinds ---------------------------------------------------------


def data_folder(tmp) -> Path:
    src = tmp / "docs"
    src.mkdir(exist_ok=True)
    play = (CORPUS / "hamlet.txt").read_text(encoding="utf-8")
    for i in range(8):  # distinct text: a sound folder passes every verify check (see the test below)
        (src / f"{i}.txt").write_text(play[i * 3000 : (i + 1) * 3000])
    out = tmp / "data"
    encode_corpus([str(src)], out, split="tail", val_fraction=0.2, workers=1)
    return out


def with_plan(tmp, edit: Callable[[Path], None]) -> list:
    data = data_folder(tmp)
    r = CliRunner().invoke(main, ["windows", str(data / "train.bin"), "-T", "64", "-o", str(tmp / "plan.npy"), "-q"])
    assert r.exit_code == 0, r.stderr
    edit(tmp / "plan.npy")
    return ["verify", data, "--plan", tmp / "plan.npy", "--show", "0"]


def bad_bin(tmp, data: bytes, cmd: str) -> list:
    p = tmp / "bad.bin"
    p.write_bytes(data)
    if cmd == "verify":
        return ["verify", p, "--show", "0"]
    return ["windows", p, "-T", "4", "-o", tmp / "p.npy"]


def plan_fields(fields):
    def edit(p):
        plan = np.load(p)
        np.save(p, np.zeros(len(plan), dtype=fields))
    return edit


def side_edit(fn):
    def edit(p):
        side = json.loads(formats.plan_sidecar(p).read_text())
        fn(side)
        formats.plan_sidecar(p).write_text(json.dumps(side))
    return edit


def fifo(name):
    def make(tmp):
        p = tmp / name
        p.parent.mkdir(parents=True, exist_ok=True)
        os.mkfifo(p)
        return p
    return make


def symlink(name, target):
    def make(tmp):
        p = tmp / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.symlink_to(target)
        return p
    return make


def both(*makers):
    """Run several builders; the last one's path is the input."""
    def make(tmp):
        for m in makers:
            last = m(tmp)
        return last
    return make


NON_UTF8 = os.fsdecode(b"caf\xe9 \xff.txt")  # a name that is not UTF-8: Python surrogate-escapes it
BOUNDARY_OK = words(MIB - 1) + "€ and on"  # the 3 bytes of € straddle the first 1 MiB read
BOUNDARY_BAD = words(MIB - 1).encode() + b"\xe2\x82X more"  # € cut short across the read boundary
LONG_LINE = words(3 * MIB)  # 3 reads, 3 pieces: the paths a 50 MB line takes
LINE_50MB = words(50 * 10**6)  # the sizes, once each: a plain line and a JSONL record
LINE_100MB = words(100 * 10**6 - 13)  # + '{"text": ""}\n' = 100 MB of JSONL line
DEEP = '{"text": "deep", "n": ' + "[" * 100_000 + "]" * 100_000 + "}\n"


def _meta_paths(tmp, r):
    return [i["path"] for i in formats.read_meta(tmp / "out" / "meta.json")["inputs"]]


KINDS = [
    # --- text bytes ---
    Kind("utf8-char-across-read-boundary", enc(file("a.txt", BOUNDARY_OK)), 0, texts=lambda t: [BOUNDARY_OK]),
    Kind("invalid-utf8-across-read-boundary", enc(file("a.txt", BOUNDARY_BAD)), 1,
         ("a.txt: invalid UTF-8 at byte 1048575 (line 1)", "--errors replace")),
    Kind("truncated-utf8-at-eof", enc(file("a.txt", b"ends in \xe2\x82")), 1, ("a.txt: invalid UTF-8 at byte 8",)),
    Kind("overlong-encoding", enc(file("a.txt", b"slash \xc0\xaf here")), 1, ("a.txt: invalid UTF-8 at byte 6", "c0 af")),
    Kind("invalid-utf8-replaced", enc(file("a.txt", b"x \xc0\xaf y"), more=["--errors", "replace"]), 0,
         texts=lambda t: ["x \ufffd\ufffd y"]),
    Kind("bom-kept-as-text", enc(file("a.txt", b"\xef\xbb\xbfHello")), 0, texts=lambda t: ["\ufeffHello"]),
    Kind("crlf-and-lone-cr", enc(file("a.txt", b"one\r\ntwo\rthree\n")), 0, texts=lambda t: ["one\r\ntwo\rthree\n"]),
    Kind("nul-byte", enc(file("a.txt", b"text\x00more")), 1, ("a.txt: binary file (NUL byte at byte 4)",)),
    Kind("long-line", enc(file("a.txt", LONG_LINE)), 0, texts=lambda t: [LONG_LINE]),
    Kind("line-of-50-mb", enc(file("a.txt", LINE_50MB), more=["--workers", "2"]), 0, texts=lambda t: [LINE_50MB]),
    Kind("empty-file-skipped", enc(folder("in", **{"a.txt": "real", "b.txt": ""})), 0, texts=lambda t: ["real"]),
    Kind("whitespace-only-file-skipped", enc(folder("in", **{"a.txt": "real", "b.txt": " \t \u3000 "})), 0,
         texts=lambda t: ["real"]),
    Kind("only-newlines-file-skipped", enc(folder("in", **{"a.txt": "\n" * 1000, "b.txt": "real"})), 0,
         texts=lambda t: ["real"]),
    Kind("no-text-at-all", enc(folder("in", **{"a.txt": "", "b.txt": "\n\n"})), 1, ("no document has any text",)),
    Kind("endoftext-literal", enc(file("a.txt", "before <|endoftext|> after")), 0,
         texts=lambda t: ["before <|endoftext|> after"]),
    # --- JSONL ---
    Kind("jsonl-long-line", enc(file("a.jsonl", jl(text=LONG_LINE))), 0, texts=lambda t: [LONG_LINE]),
    Kind("jsonl-line-of-100-mb", enc(file("a.jsonl", jl(text=LINE_100MB)), more=["--workers", "2"]), 0,
         texts=lambda t: [LINE_100MB]),
    Kind("jsonl-lone-surrogate-escape", enc(file("a.jsonl", '{"text": "a\\ud800b"}\n')), 0,
         texts=lambda t: ["a\ud800b"]),  # tiktoken's encode_ordinary turns it into U+FFFD
    Kind("jsonl-escaped-nul-is-text", enc(file("a.jsonl", '{"text": "a\\u0000b"}\n')), 0, texts=lambda t: ["a\x00b"]),
    Kind("jsonl-field-number", enc(file("a.jsonl", jl(text="ok") + jl(text=3.5))), 1, ("a.jsonl:2: field 'text' is float",)),
    Kind("jsonl-field-null", enc(file("a.jsonl", jl(text=None))), 1, ("a.jsonl:1: field 'text' is null, not a string",)),
    Kind("jsonl-field-list", enc(file("a.jsonl", jl(text=["a"]))), 1, ("a.jsonl:1: field 'text' is list",)),
    Kind("jsonl-duplicate-keys-last-wins", enc(file("a.jsonl", '{"text": "first", "text": "second"}\n')), 0,
         texts=lambda t: ["second"]),
    Kind("jsonl-deeply-nested", enc(file("a.jsonl", jl(text="ok") + DEEP)), 1, ("a.jsonl:2: JSON nested too deeply",)),
    Kind("jsonl-line-not-object", enc(file("a.jsonl", "[1, 2]\n")), 1, ("a.jsonl:1: a JSONL line must be an object",)),
    Kind("jsonl-empty-string-skipped", enc(file("a.jsonl", jl(text="") + jl(text="kept"))), 0, texts=lambda t: ["kept"]),
    # --- compressed ---
    Kind("gzip-truncated", enc(file("a.txt.gz", gzip.compress(words(50_000).encode())[:-30])), 1,
         ("a.txt.gz: broken gzip data",)),
    Kind("gz-not-gzip", enc(file("a.jsonl.gz", jl(text="plain"))), 1, ("a.jsonl.gz: broken gzip data", "Not a gzipped file")),
    # --- files and folders ---
    Kind("symlink-loop-folder-not-followed", enc(both(folder("in", **{"a.txt": "once"}), symlink("in/sub/up", ".."))), 0,
         texts=lambda t: ["once"]),
    Kind("symlink-loop-file", enc(both(folder("in", **{"a.txt": "x"}), symlink("in/loop.txt", "loop.txt"), lambda t: t / "in")), 2,
         ("loop.txt: cannot read: Too many levels of symbolic links",)),
    Kind("fifo-argument", enc(fifo("pipe.txt")), 2, ("pipe.txt: not a regular file or folder",), isolate=True),
    Kind("fifo-in-folder", enc(both(folder("in", **{"a.txt": "x"}), fifo("in/pipe.txt"), lambda t: t / "in")), 2,
         ("pipe.txt: not a regular file (a FIFO",), isolate=True),
    Kind("name-with-spaces", enc(file("my file .txt", "spaced")), 0, texts=lambda t: ["spaced"],
         extra=lambda t, r: _meta_paths(t, r) == [str(t / "my file .txt")]),
    Kind("name-not-utf8", enc(file(NON_UTF8, "named oddly")), 0, texts=lambda t: ["named oddly"],
         extra=lambda t, r: _meta_paths(t, r) == [str(t).replace("\\", "\\\\") + "/caf\\xe9 \\xff.txt"]),
    Kind("name-not-utf8-bad-content", enc(file(NON_UTF8, b"\xff")), 1, ("caf", ".txt: invalid UTF-8 at byte 0")),
    # --- token files and plans ---
    Kind("bin-1-byte-verify", lambda t: bad_bin(t, b"\x01", "verify"), 1, ("dtype_divisible", "bad.bin", "1 stray byte")),
    Kind("bin-1-byte-windows", lambda t: bad_bin(t, b"\x01", "windows"), 2, ("bad.bin: 1 bytes is not a multiple of 2",)),
    Kind("bin-all-65535", lambda t: bad_bin(t, b"\xff\xff" * 5000, "verify"), 1, ("vocab_range", "65535")),
    Kind("plan-wrong-dtype", lambda t: with_plan(t, plan_fields([(n, "<f8") for n in formats.PLAN_DTYPE.names])), 1,
         ("plan.npy", "has dtype float64, expected an integer")),
    Kind("plan-wrong-fields", lambda t: with_plan(t, plan_fields([("start", "<i8"), ("length", "<i4")])), 1,
         ("plan.npy", "not a window plan: fields")),
    Kind("sidecar-lies-about-checksum", lambda t: with_plan(t, side_edit(lambda s: s["source"].update(checksum="xxh3_128:" + "0" * 32))), 1,
         ("plan_bounds", "plan.npy", "made for another file", "xxh3_128:000000")),
    Kind("sidecar-lies-about-size", lambda t: with_plan(t, side_edit(lambda s: s["source"].update(bytes=s["source"]["bytes"] + 2))), 1,
         ("plan_bounds", "plan.npy", "made for another file")),
    Kind("meta-json-not-json", lambda t: (data_folder(t) / "meta.json").write_text("{oops") and ["verify", t / "data", "--show", "0"], 1,
         ("meta.json", "not valid JSON")),
]


def _run(argv, isolate):
    if isolate:
        r = subprocess.run([sys.executable, "-m", "winsample", *map(os.fsencode, map(str, argv))],
                           capture_output=True, timeout=30)  # a hang fails here, never blocks the suite
        return r.returncode, r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")
    r = CliRunner().invoke(main, [str(a) for a in argv])
    if r.exception and not isinstance(r.exception, SystemExit):
        raise r.exception
    return r.exit_code, r.stdout, r.stderr


@pytest.mark.parametrize("kind", KINDS, ids=[k.id for k in KINDS])
def test_adversarial_input_has_its_documented_outcome(tmp_path, kind, ref_gpt2):
    argv = kind.make(tmp_path)
    code, out, err = _run(argv, kind.isolate)
    assert code == kind.code, (out, err)
    if argv[0] == "verify":
        report = out
        for n in kind.needles:
            assert n in report, (n, report)
        assert "verify: FAILED" in report
        return
    if kind.code:
        line = err.strip()
        assert "\n" not in line and line.startswith("error: "), err
        for n in kind.needles:
            assert n in line, (n, line)
        if argv[0] == "encode":  # nothing written
            written = tmp_path / "out"
            assert not written.exists() or (test_faults.data_set(written) == {} and test_faults.leftovers(written) == [])
        return
    got = np.fromfile(tmp_path / "out" / "train.bin", "<u2").tolist()
    expected = []
    for t in kind.texts(tmp_path):
        expected += ref_gpt2.encode_ordinary(t) + [EOT]
    assert got == expected
    assert got.count(EOT) == len(kind.texts(tmp_path))  # no text ever became the control id
    if kind.extra:
        assert kind.extra(tmp_path, (code, out, err))


def test_the_unedited_data_folder_and_plan_pass_verify(tmp_path):
    """The control for the verify kinds: they fail because of the edit, not the folder."""
    code, out, _ = _run(with_plan(tmp_path, lambda p: None), False)
    assert code == 0 and "verify: ok" in out, out


def test_there_are_at_least_30_kinds():
    assert len(KINDS) >= 30 and len({k.id for k in KINDS}) == len(KINDS)


def test_reliability_doc_matches_the_suite():
    """docs/reliability.md lists every kind and quotes the counts the tests enforce."""
    doc = (REPO / "docs" / "reliability.md").read_text(encoding="utf-8")
    listed = re.findall(r"^\| `([a-z0-9-]+)` \|", doc, flags=re.M)
    assert sorted(listed) == sorted(k.id for k in KINDS)
    assert f"{len(KINDS)} kinds of bad input" in doc
    assert f"{test_faults.KILLS} `kill -9`" in doc and f"{test_faults.MATERIALIZE_KILLS} `kill -9`" in doc
    assert "outputs lost: 0" in doc
