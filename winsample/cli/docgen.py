"""Generate docs/cli.md from the live ``--help`` of every command (``make docs``).

tests/test_docs.py fails when the checked-in file differs from what this prints, so the CLI
reference cannot drift from the code.
"""

from __future__ import annotations

import sys

import click

from .main import main

WIDTH = 100  # fixed, so the output does not depend on the terminal that runs it


def _context(command: click.Command, name: str, parent: click.Context | None = None) -> click.Context:
    settings = {} if parent else dict(main.context_settings)
    return click.Context(command, info_name=name, parent=parent, terminal_width=WIDTH, max_content_width=WIDTH, **settings)


def render() -> str:
    parts = [
        "# CLI reference\n",
        "Generated from the code by `make docs` (`python -m winsample.cli.docgen docs/cli.md`);",
        "a test fails when this file is stale.\n",
        "## winsample\n",
    ]
    root = _context(main, "winsample")
    parts.append("```\n" + root.get_help() + "\n```\n")
    for name in main.list_commands(root):
        parts.append(f"## winsample {name}\n")
        parts.append("```\n" + _context(main.get_command(root, name), name, root).get_help() + "\n```\n")
    return "\n".join(parts)


if __name__ == "__main__":
    text = render()
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
