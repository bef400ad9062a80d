"""Docs that are generated from the code must match the code."""

from winsample import _docgen

from .conftest import REPO


def test_cli_reference_is_current():
    on_disk = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    assert on_disk == _docgen.render(), "docs/cli.md is stale: run `make docs`"


def test_cli_reference_covers_every_command():
    text = _docgen.render()
    for cmd in ("encode", "windows", "verify"):
        assert f"## winsample {cmd}" in text and f"Usage: winsample {cmd}" in text
