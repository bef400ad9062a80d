"""The shape of the package: dependencies point one way, and the schema has one home.

- The import graph of ``winsample/`` (every import, top-level or inside a function) has no cycle.
- No module but ``formats.py`` decodes meta.json, a plan sidecar or a shard meta: ``json.load``
  appears only in ``formats.py`` and the ``encode`` package (``encode/inputs.py``: the user's JSONL
  documents; ``encode/resume.py``: encode's own checkpoint journal); no module calls the dict readers ``formats.read_meta`` /
  ``read_plan`` / ``validate_meta`` (they stay for tests and scripts); and no module but
  ``formats.py``, ``tokenizer.py`` (the tokenizer entry's own fields) and ``layouts.py`` looks up a key only
  meta.json or a sidecar has (``layouts.py`` owns meta's ``layouts`` entries).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "winsample"
# A subpackage (``encode/``) is one node: its modules' imports are its imports.
MODULES = {p.stem: [p] for p in PACKAGE.glob("*.py")} | {
    p.parent.name: sorted(p.parent.rglob("*.py")) for p in PACKAGE.glob("*/__init__.py")}
JSON_READERS = {"formats", "encode", "tokenizer_hf", "fastengine"}  # tokenizer_hf: a tokenizer.json / tokenizer_config.json, not winsample metadata; fastengine: the tokenizer.json it hands gigatoken
# keys only meta.json / a sidecar has ("shards" is left out: layouts.py's llm.c entries use it too)
SCHEMA_KEYS = {"splits", "sharded", "doc_index", "ranks_sha256", "materialized", "eot_appended", "n_vocab",
               "plan_stats", "continues"}
SCHEMA_OWNERS = {"formats", "tokenizer", "layouts"}  # formats: the schema; tokenizer, layouts: their own entries in it


def trees(name: str):
    """(path, parsed module) of each file of node ``name`` (a module, or every file of a subpackage)."""
    for path in MODULES[name]:
        yield path, ast.parse(path.read_text(encoding="utf-8"))


def tree(name: str) -> ast.Module:
    """The files of node ``name`` as one module (their statements in order)."""
    return ast.Module(body=[s for _, t in trees(name) for s in t.body], type_ignores=[])


def imports(name: str) -> set[str]:
    """winsample modules ``name`` imports, anywhere in its code (``from . import x``, ``from .x import y``,
    and from inside a subpackage ``from .. import x``, ``from ...x import y``)."""
    out = set()
    for path, t in trees(name):
        inside = path.relative_to(PACKAGE).parts[:-1]  # the subpackages the file is in
        for node in ast.walk(t):
            if isinstance(node, ast.ImportFrom) and node.level >= 1:
                base = inside[: len(inside) - (node.level - 1)]
                if base:  # within a subpackage: that node
                    out.add(base[0])
                elif node.module:
                    out.add(node.module.split(".")[0])
                else:
                    out |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("winsample."):
                out.add(node.module.split(".")[1])
    return {m for m in out if m in MODULES and m != name}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str):
        state[n] = 1
        stack.append(n)
        for m in sorted(graph[n]):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state and (c := visit(m)):
                return c
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state and (c := visit(n)):
            return c
    return None


def test_find_cycle_finds_one():  # the checker itself, on a graph with a known cycle
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_import_graph_has_no_cycle():
    graph = {m: imports(m) for m in MODULES}
    assert graph["verify"] and "formats" in graph["verify"]  # the parser sees imports
    assert find_cycle(graph) is None


def test_formats_and_tokenizer_sit_below_the_features():
    features = {"cli", "encode", "windows", "verify", "inspect", "plot", "batch"}
    for low in ("formats", "tokenizer", "errors", "chunking"):
        assert not imports(low) & features, low
    assert imports("errors") == set()
    families = {"tokenizer_base", "tokenizer_hf", "tokenizer_spm"}  # the Tokenizer interface and its families
    assert imports("tokenizer") <= {"errors", "chunking", "fastengine"} | families  # fastengine: the fast backend's engine
    assert imports("fastengine") <= {"errors"}  # it knows gigatoken, not winsample's tokenizers
    for f in families:  # fastengine: each family's fast_engine() builds its engine there (fastengine imports errors only)
        assert imports(f) <= {"errors", "chunking", "tokenizer_base", "fastengine"}, f


def _calls(node: ast.AST):
    for n in ast.walk(node):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
            yield n


def test_only_formats_decodes_metadata_json():
    for name in MODULES:
        for call in _calls(tree(name)):
            f = call.func
            if f.attr in ("load", "loads") and isinstance(f.value, ast.Name) and f.value.id == "json":
                assert name in JSON_READERS, f"{name}.py:{call.lineno} decodes JSON"
            if f.attr in ("read_meta", "read_plan", "validate_meta") and isinstance(f.value, ast.Name) and f.value.id == "formats":
                raise AssertionError(f"{name}.py:{call.lineno} reads metadata as a dict (use formats.load_meta / load_plan)")


def test_no_feature_looks_up_schema_keys():
    found = []
    for name in MODULES:
        if name in SCHEMA_OWNERS:
            continue
        for n in ast.walk(tree(name)):
            key = None
            if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Load) and isinstance(n.slice, ast.Constant):
                if not (isinstance(n.value, ast.Name) and n.value.id in ("report", "r")):  # inspect's own report dict
                    key = n.slice.value
            elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "get" and n.args \
                    and isinstance(n.args[0], ast.Constant):
                key = n.args[0].value
            if key in SCHEMA_KEYS:
                found.append(f"{name}.py:{n.lineno} [{key!r}]")
    assert found == [], found
