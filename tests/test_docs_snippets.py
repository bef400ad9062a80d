"""The code in README.md, docs/format.md and docs/guide.md runs, so the docs cannot rot.

A fenced block preceded by the line ``<!-- test -->`` is run, in document order, in a fresh
folder that holds ``corpus/`` (a copy of the bundled corpus): ```sh blocks with bash -e (the
venv's ``winsample`` first on PATH), ```python blocks each in a fresh namespace (so every
snippet stands on its own), ```make blocks written to ``./Makefile`` for later sh blocks. Blocks marked ``<!-- not tested: … -->`` (they need torch, a CI
runner, a shell profile) are only compiled when they are Python; README's nanoGPT ``get_batch``
is run by tests/train/test_loader_torch.py inside a nanoGPT-style loop.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import CORPUS, REPO

DOCS = ("README.md", "docs/format.md", "docs/guide.md")  # paths from the repository root
FENCE = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)


def blocks(doc: str) -> list[tuple[str, int, str, str]]:
    """(marker, line, language, code) for every fenced block; marker is 'test', 'not tested' or ''."""
    text = (REPO / doc).read_text(encoding="utf-8")
    out = []
    for m in FENCE.finditer(text):
        before = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1].strip()
        marker = "test" if before == "<!-- test -->" else "not tested" if before.startswith("<!-- not tested") else ""
        out.append((marker, text.count("\n", 0, m.start()) + 1, m.group(1), m.group(2)))
    return out


def shown_outputs(doc: str) -> dict[int, tuple[int, str]]:
    """{line of a tested ```sh block: (line, text) of the ```text block right after it}: the
    output the doc shows for that block (only blank lines between the two)."""
    text = (REPO / doc).read_text(encoding="utf-8")
    found = list(FENCE.finditer(text))
    out = {}
    for a, b in zip(found, found[1:]):
        before = text[: a.start()].rstrip("\n").rsplit("\n", 1)[-1].strip()
        if a.group(1) == "sh" and before == "<!-- test -->" and b.group(1) == "text" and not text[a.end() : b.start()].strip():
            out[text.count("\n", 0, a.start()) + 1] = (text.count("\n", 0, b.start()) + 1, b.group(2))
    return out


SPEED = re.compile(r"[0-9.]+ MB/s")  # a throughput differs from run to run


def check_shown(printed: str, shown: str, where: str) -> None:
    """The shown output is what the block printed (stdout, then stderr, as a terminal shows a
    block's summary lines): its lines, as a run of the real lines, trailing spaces and speeds
    aside. The doc may show only part of a long output."""
    def lines(t: str) -> list[str]:
        return [SPEED.sub("# MB/s", line.rstrip()) for line in t.rstrip("\n").split("\n")]

    want, got = lines(shown), lines(printed)
    if not any(got[i : i + len(want)] == want for i in range(len(got) - len(want) + 1)):
        raise AssertionError(f"{where}: the ```text block after it is not what it prints\n--- shown\n{shown}--- printed\n{printed[-3000:]}")


def run_block(lang: str, code: str, where: str, cwd: Path, shown: str | None = None) -> None:
    if lang == "sh":
        env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", NO_COLOR="1")
        r = subprocess.run(["bash", "-e", "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, f"{where} exited {r.returncode}\n--- stdout\n{r.stdout[-3000:]}\n--- stderr\n{r.stderr[-3000:]}"
        if shown is not None:
            check_shown(r.stdout + r.stderr, shown, where)
    elif lang == "python":
        old = os.getcwd()
        os.chdir(cwd)
        try:
            exec(compile(code, where, "exec"), {"__name__": "__docs__"})
        finally:
            os.chdir(old)
    elif lang == "make":  # a Makefile example: written to ./Makefile for the ```sh blocks after it
        (cwd / "Makefile").write_text(code, encoding="utf-8")
    else:
        raise AssertionError(f"{where}: cannot run a ```{lang} block; mark it <!-- not tested: why -->")


def copy_corpus(dest: Path, src: Path = CORPUS) -> None:
    """The bundled corpus, copied with fresh modification times.

    Not ``copytree``'s default ``copy2``: that keeps the checkout's mtimes, and the guide's
    Makefile block (``data/meta.json: $(wildcard corpus/*.txt)``, then ``make -q … && echo``,
    whose status is the block's) then depends on the checkout: in a fresh clone on a machine
    whose clock steps back after the checkout (an NTP sync on a new CI runner), the corpus is
    newer than the meta.json encoded from it, make rebuilds, and ``make -q`` says "not up to
    date", failing the block (the flaky ``test_marked_blocks_run_in_order[guide.md]``)."""
    shutil.copytree(src, dest, copy_function=shutil.copy)


@pytest.mark.parametrize("doc", DOCS)
def test_marked_blocks_run_in_order(doc, tmp_path):
    copy_corpus(tmp_path / "corpus")
    tested = [b for b in blocks(doc) if b[0] == "test"]
    assert len(tested) >= 5, f"{doc}: expected runnable examples marked <!-- test -->"
    shown = shown_outputs(doc)
    for _, line, lang, code in tested:
        run_block(lang, code, f"{doc}:{line}", tmp_path, shown.get(line, (0, None))[1])


@pytest.mark.parametrize("doc", DOCS)
def test_python_blocks_not_run_still_compile(doc):
    for marker, line, lang, code in blocks(doc):
        if lang == "python" and marker != "test":
            compile(code, f"{doc}:{line}", "exec")


@pytest.mark.parametrize("doc", DOCS)
def test_every_python_and_sh_block_is_marked(doc):
    # an unmarked block would silently escape testing
    for marker, line, lang, _ in blocks(doc):
        if lang in ("python", "sh"):
            assert marker, f"{doc}:{line}: mark the ```{lang} block <!-- test --> or <!-- not tested: why -->"


def test_the_corpus_copy_is_newer_than_the_checkout(tmp_path):
    """The cause of the guide's flake: a copy that kept the checkout's mtimes (see copy_corpus)."""
    import time

    far_future = time.time() + 3600
    src = tmp_path / "src"
    shutil.copytree(CORPUS, src)
    for p in src.iterdir():
        os.utime(p, (far_future, far_future))  # a checkout "newer" than anything the test writes
    before = time.time()
    copy_corpus(tmp_path / "corpus", src)
    assert all(before - 1 <= p.stat().st_mtime <= time.time() + 1 for p in (tmp_path / "corpus").iterdir())


def test_a_shown_output_must_be_a_run_of_what_the_block_printed():
    check_shown("encoded 8 documents, 1.83 MB/s\nline two\nline three  \n", "line two\nline three\n", "x")
    check_shown("encoded 8 documents, 9.99 MB/s\n", "encoded 8 documents, 1.83 MB/s\n", "x")  # speeds vary
    for wrong in ("line three\nline two\n", "line two\nline 3\n", "encoded 9 documents, 1.83 MB/s\n"):
        with pytest.raises(AssertionError, match="is not what it prints"):
            check_shown("encoded 8 documents, 1.83 MB/s\nline two\nline three\n", wrong, "x")
    assert shown_outputs("docs/guide.md"), "the guide shows outputs: they must be checked"
