"""The shape of the package: packages per concern, dependencies pointing one way, one home each.

- Each package (``winsample/<name>/``) or top-level module is one node of the import graph (every
  import, top-level or inside a function). The graph has no cycle, and every node imports only
  nodes of a lower layer (``LAYERS``, bottom first; docs/architecture.md draws the same picture
  and a test holds the two together).
- No module but ``formats/`` decodes winsample's metadata: ``json.load`` appears only in
  ``formats/``, ``disk/`` (its own commit mark), ``encode/`` and ``records`` (the user's JSONL; encode's checkpoint
  journal) and ``tokenizer/`` (a tokenizer.json); no module calls the dict readers
  ``formats.read_meta`` / ``read_plan`` / ``validate_meta``; and only ``formats/``, ``tokenizer/``
  and ``tokensrc/`` (meta's ``layouts`` entries) look up a key only meta.json or a sidecar has.
- No module reads a private name of another, every ``module.NAME`` read exists, and every
  command opens tokens with ``tokensrc.open_source``.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "winsample"
MODULES = {p.stem: [p] for p in PACKAGE.glob("*.py")}  # a module, or a package: one node, all its files
MODULES.update({d.name: sorted(d.rglob("*.py")) for d in PACKAGE.iterdir() if (d / "__init__.py").exists()})
JSON_READERS = {"formats", "encode", "tokenizer", "disk", "records"}  # records: the user's JSONL, read again by verify
# keys only meta.json / a sidecar has ("shards" is left out: tokensrc/llmc.py's entries use it too)
SCHEMA_KEYS = {"splits", "sharded", "doc_index", "ranks_sha256", "materialized", "eot_appended", "n_vocab",
               "plan_stats", "continues"}
SCHEMA_OWNERS = {"formats", "tokenizer", "tokensrc"}  # formats: the schema; tokenizer, tokensrc: their own entries in it
LAYERS = [  # bottom first: a node imports only nodes of lower layers
    {"errors", "terminal"},
    {"disk", "tokenizer"},  # files on disk; tokenizer families (neither knows winsample's formats)
    {"formats", "records"},  # the schema and file names; JSONL records' fields, ids and masks
    {"tokensrc"},  # opening token sources (each layout's reader beside its writer)
    {"planning", "provenance"},  # window planning (pure); where documents came from
    {"train"},  # the Loader and get_batch
    {"encode", "windows", "mixing", "verify", "inspect", "plot"},  # the commands' libraries
    {"retrieval"},  # retrieval chunks: encode's input readers, the tokenizer and the planner
    {"cli", "__init__"},  # the command line; the package's public API
    {"__main__"},
]


def tree(name: str) -> ast.Module:
    return ast.Module(body=[n for p in MODULES[name] for n in ast.parse(p.read_text(encoding="utf-8")).body],
                      type_ignores=[])


def _absolute(path: Path, node: ast.ImportFrom) -> list[str]:
    """The winsample.* modules an ImportFrom in ``path`` names, as dotted paths below winsample."""
    here = list(path.relative_to(PACKAGE).with_suffix("").parts)[:-1]  # the importing file's package
    base = here[: len(here) - (node.level - 1)] if node.level > 1 else here
    if node.module:
        return [".".join(base + node.module.split("."))]
    return [".".join(base + [a.name]) for a in node.names]


def imports(name: str) -> set[str]:
    """winsample modules ``name`` imports, anywhere in its code (``from . import x``, ``from .x import y``)."""
    out = set()
    for path in MODULES[name]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level:
                out |= {m.split(".")[0] for m in _absolute(path, node) if m}
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


def test_every_node_imports_only_lower_layers():
    layer = {n: k for k, names in enumerate(LAYERS) for n in names}
    assert set(layer) == set(MODULES) - {"_fast"}, set(MODULES) ^ set(layer)  # every package has its layer
    wrong = {n: sorted(m for m in imports(n) if layer[m] >= layer[n]) for n in layer}
    assert {n: w for n, w in wrong.items() if w} == {}


def test_docs_architecture_names_every_package_in_its_layer():
    """docs/architecture.md's table lists each package or top-level module once, in LAYERS' order."""
    import re

    doc = (PACKAGE.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| *(\d+) *\| *`([\w_]+)(?:/|\.py)` *\|", doc, re.M)
    named = {name: int(k) for k, name in rows}
    assert len(rows) == len(named)  # each once
    assert named == {n: k for k, names in enumerate(LAYERS) for n in names if n not in ("__init__", "__main__")}


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


def _aliases(tree_: ast.AST, path: Path) -> dict:
    """Local names bound to winsample modules by ``from . import x`` / ``from winsample import x as y``:
    {name: the module}. (``from winsample.cli import main`` binds the group, not the module cli.main.)"""
    import importlib
    import inspect as pyinspect

    out = {}
    # a test's imports inside a function may share a name with another function's local: its top level only
    nodes = ast.walk(tree_) if path.is_relative_to(PACKAGE) else tree_.body
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("winsample")):
            if node.level and not path.is_relative_to(PACKAGE):  # a test's own helpers
                continue
            if node.level:
                base = _absolute(path, node)[0] if node.module else ".".join(
                    list(path.relative_to(PACKAGE).with_suffix("").parts)[:-1][: None if node.level == 1 else 1 - node.level])
            else:
                base = node.module[len("winsample"):].lstrip(".")
            try:
                parent = importlib.import_module(".".join(p for p in ("winsample", base) if p))
            except ImportError:
                continue
            for a in node.names:
                obj = getattr(parent, a.name, None)
                if obj is None:
                    try:
                        obj = importlib.import_module(f"{parent.__name__}.{a.name}")
                    except ImportError:
                        continue
                if pyinspect.ismodule(obj):
                    out[a.asname or a.name] = obj
    return out


def test_every_module_attribute_a_module_uses_exists():
    """``formats.X``, ``disk.X``, ``tokenizer.X``…: each name a module (or a test) reads off a winsample
    module is there (a package's ``__init__`` re-exports what its callers use). Catches a name left
    behind by a move, which only fails when that line runs (an error path, often)."""
    missing = []
    for path in sorted(PACKAGE.rglob("*.py")) + sorted(PACKAGE.parent.joinpath("tests").rglob("*.py")):
        t = ast.parse(path.read_text(encoding="utf-8"))
        aliases = _aliases(t, path)
        for n in ast.walk(t):
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in aliases:
                mod = aliases[n.value.id]
                if not hasattr(mod, n.attr) and isinstance(n.ctx, ast.Load):
                    missing.append(f"{path.relative_to(PACKAGE.parent)}:{n.lineno} {n.value.id}.{n.attr}")
    assert missing == []


COMMANDS = {"windows", "verify", "inspect", "encode", "cli", "plot"}  # the modules behind a CLI command


def test_train_and_planning_import_no_command_module():
    """The training loop (train/) and the planning it re-plans with depend on formats and token
    sources, never on a command: the Loader opens tokens with tokensrc, re-plans with planning."""
    assert {"planning", "train", "tokensrc", "windows"} <= set(MODULES)  # the packages are seen
    assert "tokensrc" in imports("train") and "planning" in imports("train")  # the parser sees package imports
    for low in ("train", "planning", "tokensrc"):
        assert not imports(low) & COMMANDS, (low, imports(low) & COMMANDS)


def test_no_module_reaches_into_anothers_private_names():
    """``from .x import _name`` / ``x._name`` where x is a winsample module, in the library and in
    the tests: what modules share is public. (multiprocessing's own privates, which the encoder
    pool must touch to stop a pool whose worker died, are not winsample's.)"""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")) + sorted(PACKAGE.parent.joinpath("tests").rglob("*.py")):
        t = ast.parse(path.read_text(encoding="utf-8"))
        aliases = _aliases(t, path)
        for node in ast.walk(t):
            if isinstance(node, ast.ImportFrom) and (node.level and path.is_relative_to(PACKAGE)
                                                     or (node.module or "").startswith("winsample")):
                found += [f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {a.name}" for a in node.names
                          if a.name.startswith("_") and a.name not in ("_fast", "__version__")]
            elif isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__") \
                    and isinstance(node.value, ast.Name) and node.value.id in aliases:
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {node.value.id}.{node.attr}")
    assert found == [], found
def test_every_command_opens_tokens_by_one_function():
    """windows, verify, inspect, plot, provenance, the Loader and get_batch open a token file with
    ``tokensrc.open_source`` (a folder's splits with ``open_folder``, which opens each the same
    way; a plan's token file with ``open_planned``, which is ``open_source`` at the width the plan
    records); nothing outside tokensrc/ calls the nanoGPT reader ``open_split`` itself."""
    callers = {}
    for name in MODULES:
        for n in ast.walk(tree(name)):
            if isinstance(n, ast.Call):
                f = n.func
                called = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
                if called in ("open_split", "open_source", "open_planned"):
                    callers.setdefault("open_source" if called == "open_planned" else called, set()).add(name)
    assert callers["open_split"] <= {"tokensrc"}, callers["open_split"]
    assert {"planning", "verify", "inspect", "plot", "provenance", "train"} <= callers["open_source"]


def test_small_rooms():
    """No module of winsample/ over 800 lines, no function over 100 (the C module aside)."""
    big_modules, big_functions = [], []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if len(text.splitlines()) > 800:
            big_modules.append(f"{path.relative_to(PACKAGE)}: {len(text.splitlines())} lines")
        for n in ast.walk(ast.parse(text)):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.end_lineno - n.lineno + 1 > 100:
                big_functions.append(f"{path.relative_to(PACKAGE)}:{n.lineno} {n.name}: {n.end_lineno - n.lineno + 1} lines")
    assert big_modules == [] and big_functions == []
