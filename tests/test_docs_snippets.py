"""The code in README.md, docs/format.md and docs/guide.md runs, so the docs cannot rot.

A fenced block preceded by the line ``<!-- test -->`` is run, in document order, in a fresh
folder that holds ``corpus/`` (a copy of the bundled corpus): ```sh blocks with bash -e (the
venv's ``winsample`` first on PATH), ```python blocks each in a fresh namespace (so every
snippet stands on its own), ```make blocks written to ``./Makefile`` for later sh blocks. Blocks marked ``<!-- not tested: … -->`` (they need torch, a CI
runner, a shell profile) are only compiled when they are Python; README's nanoGPT ``get_batch``
is run by tests/test_loader_torch.py inside a nanoGPT-style loop.
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


def run_block(lang: str, code: str, where: str, cwd: Path) -> None:
    if lang == "sh":
        env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", NO_COLOR="1")
        r = subprocess.run(["bash", "-e", "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, f"{where} exited {r.returncode}\n--- stdout\n{r.stdout[-3000:]}\n--- stderr\n{r.stderr[-3000:]}"
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
    for _, line, lang, code in tested:
        run_block(lang, code, f"{doc}:{line}", tmp_path)


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
