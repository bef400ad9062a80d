"""Same bytes: a fixed set of commands writes exactly what it wrote before the package move.

``tests/fixtures/golden_bytes.json`` was recorded by running this file as a script
(``python tests/test_golden_bytes.py``) on the code *before* winsample was cut into packages
(issue #28). For every command it holds the exit code, stdout, and every file the command wrote
(sha256 and size; JSON files also whole, so a difference reads as a diff). The test runs the same
commands on today's code and compares. Re-record only for a change that is meant to change bytes,
and say so in the commit. The last three commands (best-fit packed plans, #30) were added later:
their bytes are pinned from the release that brought them. Re-recorded since, on purpose: verify's
reports gained the ``plan_params`` check (a plan's rows re-planned from its sidecar) and a Megatron
prefix named alone has its ``.idx`` checked (#29, class 2); plan sidecars gained ``source.sample``
(a sampled checksum the Loader compares, #29 class 6); ``windows --format jsonl --decode`` rows
gained ``window``, ``char_start``, ``char_end``, ``split_char``, ``prev`` and ``next`` (#32, after
``text``; the fields before it unchanged); encode's ``unsplittable_runs`` count (meta.json's stats,
the summary) is ``forced_cuts`` (#29 class 3: such runs are now cut, not encoded whole);
``windows --json`` reports gained ``uncovered_dropped`` (tokens in documents no window reaches,
after ``uncovered_head``) and, for a greedy-packed plan, ``pack`` (after ``files``); plan sidecars
written by ``windows`` gained ``output`` (the -o name, last: which run's set a file belongs to)
and ``source.from_plan`` (the token file's path from the plan's folder, last in ``source``; also
in ``inspect``'s report of a plan); ``windows --json`` reports of window plans gained ``short_windows``
(after ``files``, before ``pack``) and then ``short_tokens`` (the tokens the short windows hold, after it);
verify's ``min_length`` line of a token file checked with plans and no ``-T`` says a plan's T is
checked on the plan's own line (it said "pass -T (or --plan)" with the plan passed);
``windows --json`` reports of plans that keep to documents (``--boundaries doc``, greedy packing)
gained ``long_documents`` (how many are longer than the span, last); ``inspect --json`` of a data
folder gained ``warnings`` (last: a file missing or not the size meta.json records);
every other byte is unchanged.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

REPO = Path(__file__).resolve().parent.parent
GOLDEN = REPO / "tests" / "fixtures" / "golden_bytes.json"
CORPUS = REPO / "winsample" / "corpus"

# (name, argv): run in order in one folder, relative paths only (meta.json records them)
TIMING = re.compile(r'"(seconds|mb_per_s|encoders)": [0-9.e+-]+')

COMMANDS = [
    ("encode_text", "encode corpus -o data --workers 1 --val-fraction 0.3 --layout nanogpt,megatron,llmc --shard-tokens 40000 --json -q"),
    ("encode_jsonl", "encode docs.jsonl -o jdata --id-field id --val-fraction 0.25 --workers 2 --json -q"),
    ("encode_tail", "encode corpus/sonnets.txt -o tdata --split tail --bos --dtype uint32 --workers 1 --json -q"),
    ("windows_regular", "windows data/train.bin -T 256 -o plans/reg.npy --json -q"),
    ("windows_paragraph", "windows data/train.bin -T 256 --boundaries paragraph -o plans/para.npy --json -q"),
    ("windows_sentence", "windows data/val.bin -T 64 --boundaries sentence --short drop -o plans/sent.npy --json -q"),
    ("windows_pack", "windows data/train.bin -T 128 --boundaries doc --pack --shuffle --seed 3 -o plans/pack.npy --json -q"),
    ("windows_multi", "windows data/train.bin -T 64,128 --random-offset --seed 5 --epoch 2 --shards 2 --materialize "
                      "-o plans/multi.npy --json -q"),
    ("windows_overlap", "windows tdata/train.bin -T 100 --overlap 0.25 --tail short --no-targets --offset 7 "
                        "-o plans/tail.npy --json -q"),
    ("windows_txt", "windows data/train.bin -T 100 --stride 37 --format txt -o - -q"),
    ("windows_jsonl", "windows jdata/train.bin -T 32 --boundaries doc --format jsonl --decode -o - -q"),
    ("windows_megatron", "windows data/train -T 128 -o plans/meg.npy --json -q"),
    ("windows_llmc", "windows data/llmc/train_000001.bin -T 128 -o plans/llmc.npy --json -q"),
    ("verify_data", "verify data --plan plans/reg.npy --plan plans/para.npy --show 2 --json -q"),
    ("verify_pack", "verify data --plan plans/pack.npy --plan plans/multi.T64.shard1of2.npy --json -q"),
    ("verify_jdata", "verify jdata --json -q"),
    ("verify_tdata", "verify tdata --plan plans/tail.npy --json -q"),
    ("verify_llmc", "verify data/llmc --json -q"),
    ("verify_megatron", "verify data/train.idx --json -q"),
    ("inspect_bin", "inspect data/train.bin --at 100 --count 8 --json"),
    ("inspect_plan", "inspect plans/pack.npy --count 4 --json"),
    ("inspect_data", "inspect jdata --json"),
    ("windows_bestfit", "windows jdata/train.bin -T 24 --pack best-fit -o plans/bestfit.npy --json -q"),
    ("verify_bestfit", "verify jdata --plan plans/bestfit.npy --json -q"),
    ("inspect_bestfit", "inspect plans/bestfit.npy --count 3 --json"),
]


def make_inputs(root: Path) -> None:
    """The bundled corpus as text files, and a JSONL of the sonnets' stanzas with ids."""
    (root / "corpus").mkdir()
    (root / "plans").mkdir()
    for p in sorted(CORPUS.glob("*.txt")):
        shutil.copyfile(p, root / "corpus" / p.name)
    stanzas = [s for s in (CORPUS / "sonnets.txt").read_text(encoding="utf-8").split("\n\n") if s.strip()]
    with open(root / "docs.jsonl", "w", encoding="utf-8") as f:
        for i, s in enumerate(stanzas[:300]):
            f.write(json.dumps({"id": f"s{i:03d}" if i % 3 else i, "text": s}) + "\n")


def _files(root: Path) -> dict[str, Path]:
    return {p.relative_to(root).as_posix(): p for p in sorted(root.rglob("*")) if p.is_file()}


def run_all(root: Path) -> dict:
    """Run COMMANDS in ``root``; for each: exit code, stdout, and the files it added or changed."""
    from winsample.cli import main

    make_inputs(root)
    out = {}
    cwd = os.getcwd()
    os.chdir(root)
    try:
        for name, argv in COMMANDS:
            before = {k: p.stat().st_mtime_ns for k, p in _files(root).items()}
            result = CliRunner().invoke(main, argv.split(), catch_exceptions=False)
            written = {}
            for rel, p in _files(root).items():
                if before.get(rel) == p.stat().st_mtime_ns or rel.startswith(("corpus/", "docs.jsonl")) \
                        or rel.endswith(".winsample.lock"):  # holds the writer's pid: not an output
                    continue
                data = p.read_bytes()
                entry = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
                if rel.endswith(".json"):
                    entry["json"] = json.loads(data)
                written[rel] = entry
            stdout = result.stdout.replace(str(root.resolve()), "<ROOT>").replace(str(root), "<ROOT>")
            stdout = TIMING.sub(r'"\1": null', stdout)  # the clock (and threads picked by it) may differ
            if len(stdout) > 20000:  # long rows: their hash and their start
                stdout = {"sha256": hashlib.sha256(stdout.encode()).hexdigest(), "head": stdout[:2000]}
            out[name] = {"argv": argv, "exit": result.exit_code, "stdout": stdout, "files": written}
            if result.exit_code:  # not compared (human text); says why when a command fails
                out[name]["stderr"] = result.stderr
    finally:
        os.chdir(cwd)
    return out


@pytest.mark.slow
def test_every_output_byte_is_what_it_was_before_the_package_move(tmp_path):
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    now = run_all(tmp_path)
    assert list(now) == list(golden)
    for name in golden:
        g, n = golden[name], now[name]
        assert n["exit"] == g["exit"], (name, n.get("stderr"))
        assert n["stdout"] == g["stdout"], name
        assert sorted(n["files"]) == sorted(g["files"]), name
        for rel in g["files"]:
            assert n["files"][rel].get("json") == g["files"][rel].get("json"), (name, rel)
            assert n["files"][rel] == g["files"][rel], (name, rel)


def test_the_golden_record_covers_every_kind_of_output():
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    written = {rel for g in golden.values() for rel in g["files"]}
    for suffix in (".bin", ".idx", ".docs.npy", ".prov.npy", ".prov.ids.npy", "meta.json", ".npy.json",
                   ".tokens.npy", "train_000001.bin"):
        assert any(r.endswith(suffix) for r in written), suffix
    assert all(g["exit"] == 0 for g in golden.values()), {k: g["exit"] for k, g in golden.items()}
    assert all(g["stdout"] for g in golden.values())  # every command printed its JSON report or rows


if __name__ == "__main__":  # record (only before a change that is meant to keep every byte)
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        record = run_all(Path(d))
    GOLDEN.write_text(json.dumps(record, indent=1, sort_keys=False, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"recorded {len(record)} commands into {GOLDEN}", file=sys.stderr)
