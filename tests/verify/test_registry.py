"""The registry is the one list of check names: CHECK_NAMES, verify --help, docs/cli.md, the
package docstring and real reports all name the same checks, and every report line uses one."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from winsample import verify
from winsample.cli import main
from winsample.verify import registry

from ..conftest import REPO

PACKAGE = REPO / "winsample" / "verify"


def _listed(help_text: str) -> list[str]:
    """The check names of verify's help: the first word of each line after "Checks"."""
    block = help_text.split("Checks (their names in the report and --json):\n", 1)[1]
    names = []
    for line in block.splitlines():
        m = re.match(r"\s+([a-z_]+)\s{2,}\S", line)
        if not m:
            break
        names.append(m.group(1))
    return names


def test_check_names_come_from_the_registry():
    assert verify.CHECK_NAMES == registry.CHECK_NAMES == tuple(c.name for c in registry.CHECKS)
    assert len(set(verify.CHECK_NAMES)) == len(verify.CHECK_NAMES) == 26
    for c in registry.CHECKS:
        assert c.help and "\n" not in c.help and c.reads, c.name
        assert registry.get(c.name) is c and str(c) == c.name
    with pytest.raises(ValueError, match="twice"):
        registry.define("meta", "again", "nothing")


def test_each_stage_runs_its_checks_in_report_order():
    """Where the registry's order of listing differs from the report's (the golden test records
    it), ``runs_before`` says so; every check either has a stage function or is a group's."""
    assert {s: registry.runs(s) for s in registry.STAGES} == {
        "file": ("dtype_divisible", "min_length", "vocab_range"),
        "dataset": ("llmc_shards", "megatron_index", "meta", "provenance", "split_leakage", "loss_mask"),
        "plan": ("plan_bounds", "plan_params", "alignment", "materialized", "context_length"),
        "mixture": ("mixture_sources", "mixture_counts", "mixture_prefix"),
        "final": ("retokenize", "decode"),
    }
    for c in registry.CHECKS:
        assert (c.stage is None) == (c.run is None), c.name
        assert c.run is None or c.run.spec is c, c.name
    grouped = {c.name for c in registry.CHECKS if c.run is None}
    assert grouped == {"order", "duplicates", "coverage", "llmc_documents", "packing", "segments", "packed_stats"}


def test_help_docs_and_docstring_list_the_registry():
    r = CliRunner().invoke(main, ["verify", "--help"], terminal_width=100)
    assert r.exit_code == 0
    assert _listed(r.stdout) == list(registry.CHECK_NAMES)
    docs = (REPO / "docs" / "cli.md").read_text(encoding="utf-8").split("## winsample verify\n", 1)[1]
    assert _listed(docs) == list(registry.CHECK_NAMES)
    assert f"Check names (stable; scripts match on them; ``registry.py`` is their one list): {registry.doc_list()}." in verify.__doc__


def test_real_reports_name_exactly_the_registered_checks(tmp_path):
    """verify --json over every layout (golden_bytes' commands): together they use every check, and no other name."""
    from ..test_golden_bytes import run_all

    out = run_all(tmp_path)
    seen = set()
    for name, got in out.items():
        if name.startswith("verify_"):
            seen |= {c["name"] for c in json.loads(got["stdout"])["checks"]}
    # a best-fit plan's own checks (the golden record holds none: it predates them)
    data = tmp_path / "data"
    r = CliRunner().invoke(main, ["windows", str(data / "train.bin"), "-T", "128", "--pack", "best-fit", "-o", str(tmp_path / "bf.npy"), "-q"])
    assert r.exit_code == 0, r.stderr
    r = CliRunner().invoke(main, ["verify", str(data), "--plan", str(tmp_path / "bf.npy"), "--json", "-q"])
    packed = {c["name"] for c in json.loads(r.stdout)["checks"]}
    assert {"packing", "segments", "packed_stats"} <= packed
    # a mixture's own checks (#34): of the plan above and the golden record's packed one (T 128 both)
    r = CliRunner().invoke(main, ["mix", f"a=1:{tmp_path / 'bf.npy'}", f"b=2:{tmp_path / 'plans' / 'pack.npy'}", "-o",
                                  str(tmp_path / "mix.npy"), "--windows", "10", "-q"])
    assert r.exit_code == 0, r.stderr
    r = CliRunner().invoke(main, ["verify", str(tmp_path / "mix.npy"), "--json", "-q"])
    mixed = {c["name"] for c in json.loads(r.stdout)["checks"]}
    assert {"mixture_sources", "mixture_counts", "mixture_prefix"} <= mixed
    # a records dataset's own check (#31): prompt/response pairs, gpt2 (offline)
    (tmp_path / "pairs.jsonl").write_text("".join(json.dumps({"q": f"Q{i}?", "a": f" A{i}."}) + "\n" for i in range(40)))
    r = CliRunner().invoke(main, ["encode", str(tmp_path / "pairs.jsonl"), "--prompt-field", "q", "--response-field", "a",
                                  "-o", str(tmp_path / "pairs"), "-q"])
    assert r.exit_code == 0, r.stderr
    r = CliRunner().invoke(main, ["verify", str(tmp_path / "pairs"), "--json", "-q"])
    records = {c["name"] for c in json.loads(r.stdout)["checks"]}
    assert "loss_mask" in records
    # the model's input length given (-T): context_length, which runs only then
    r = CliRunner().invoke(main, ["verify", str(data), "--plan", str(tmp_path / "bf.npy"), "-T", "128", "--json", "-q"])
    sized = {c["name"] for c in json.loads(r.stdout)["checks"]}
    assert "context_length" in sized
    assert seen | packed | mixed | records | sized == set(registry.CHECK_NAMES)


def test_every_report_line_is_added_under_a_registered_check():
    """No report.add(...) in the package names its check with a free string."""
    free = []
    for p in sorted(PACKAGE.glob("*.py")):
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add" \
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "report" and node.args \
                    and isinstance(node.args[0], ast.Constant):
                free.append(f"{p.name}:{node.lineno}")
    assert free == []
    with pytest.raises(TypeError, match="registered"):
        verify.Report().add("meta", "f", "pass", "a free string")


def test_no_module_of_the_package_is_over_800_lines_nor_a_function_over_100():
    for p in sorted(PACKAGE.glob("*.py")):
        text = p.read_text(encoding="utf-8")
        assert text.count("\n") <= 800, p.name
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                assert node.end_lineno - node.lineno + 1 <= 100, f"{p.name}: {node.name}"


def test_private_names_stay_in_their_module():
    """No module of the package reaches into another's private names (``from .x import _y`` or ``x._y``)."""
    for p in sorted(Path(PACKAGE).glob("*.py")):
        tree = ast.parse(p.read_text(encoding="utf-8"))
        modules = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level and not n.module
                   for a in n.names}  # `from . import retokenize`, `from .. import formats`
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                assert not [a.name for a in node.names if a.name.startswith("_") and a.name != "__future__"], p.name
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules:
                assert not node.attr.startswith("_"), f"{p.name}: {node.value.id}.{node.attr}"
