"""Docs that are generated from the code must match the code."""

from winsample.cli import docgen

from .conftest import REPO


def test_cli_reference_is_current():
    on_disk = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    assert on_disk == docgen.render(), "docs/cli.md is stale: run `make docs`"


def test_cli_reference_covers_every_command():
    text = docgen.render()
    for cmd in ("encode", "windows", "verify"):
        assert f"## winsample {cmd}" in text and f"Usage: winsample {cmd}" in text


def _json_after(doc: str, heading: str) -> dict:
    """The first ```json block after ``heading`` in ``doc``."""
    import json
    import re

    text = doc[doc.index(heading):]
    return json.loads(re.search(r"```json\n(.*?)\n```", text, re.S).group(1))


def test_format_md_examples_are_what_the_demo_commands_write(tmp_path):
    """docs/format.md shows meta.json and a plan sidecar "from a real make demo run": they must be."""
    import json

    from winsample import planning, windows
    from winsample.encode import encode_corpus

    from .conftest import CORPUS

    doc = (REPO / "docs" / "format.md").read_text(encoding="utf-8")
    encode_corpus([str(CORPUS)], tmp_path / "data")
    meta = json.loads((tmp_path / "data" / "meta.json").read_text())
    shown = _json_after(doc, "## meta.json")
    for key in ("format", "version", "dtype", "tokenizer", "eot_appended", "split", "splits", "stats"):
        assert meta[key] == shown[key], key
    assert [i["bytes"] for i in meta["inputs"]] == [i["bytes"] for i in shown["inputs"]]
    windows.run(tmp_path / "data" / "train.bin", str(tmp_path / "p.npy"), planning.Options(T=[256], boundaries="paragraph"))
    side = json.loads((tmp_path / "p.npy.json").read_text())
    shown = _json_after(doc, "## Plan sidecar")
    side["source"]["path"] = shown["source"]["path"]  # where this run put it
    side["output"] = shown["output"]  # and under which name
    side["source"]["from_plan"] = shown["source"]["from_plan"]
    assert side == shown


def test_every_test_file_the_docs_name_exists():
    """README and docs/ point readers at tests by path; a move must take the pointers along."""
    import re

    missing = []
    for doc in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for path in re.findall(r"tests/[\w/]+\.py", doc.read_text(encoding="utf-8")):
            if not (REPO / path).is_file():
                missing.append(f"{doc.name}: {path}")
    assert missing == []


def test_every_field_of_a_mixture_source_is_in_format_md():
    """A mixture sidecar's ``sources[]`` entry: each key the reader knows has a row in format.md's table."""
    from winsample import formats

    doc = (REPO / "docs" / "format.md").read_text(encoding="utf-8")
    assert [k for k in formats.MixtureSource.KEYS if f"| `sources[].{k}` |" not in doc] == []
