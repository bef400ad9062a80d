"""Adding a check is one decorated function: registered at the function, it is listed (CHECK_NAMES,
verify --help), runs in its stage, and its lines appear in the report (and --json), with no other
edit; taken out again, it is gone from all of them."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from winsample import verify
from winsample.cli import main
from winsample.verify import registry

from .test_run import make_folder, make_plan


@pytest.fixture
def scratch():
    """``scratch(name, stage)``: register a throwaway check of ``stage`` that adds one pass line
    each time it runs (naming what it was given); unregistered after the test."""
    added = []

    def register(name: str, stage: str):
        @registry.check(name, help=f"a throwaway {stage} check", reads="nothing", stage=stage)
        def probe(report, ctx, *args):
            where = args[0].label if args else ctx.path.name
            report.add(probe.spec, where, verify.Status.PASS, f"{stage} stage ran", stage=stage)

        added.append(name)
        return probe

    yield register
    for name in added:
        registry.unregister(name)


def _help(monkeypatch) -> str:
    """verify --help as a user sees it (the check list is filled from the registry at each display)."""
    r = CliRunner().invoke(main, ["verify", "--help"], terminal_width=100)
    assert r.exit_code == 0
    return r.stdout


def _data(tmp_path):
    ids = np.random.default_rng(1).integers(0, 50257, 3000)
    folder = make_folder(tmp_path / "d", ids, ids[:300])
    plan = make_plan(tmp_path / "p.npy", folder / "train.bin", np.arange(0, 2800, 100), 101, T=100)
    return folder, plan


def test_a_file_check_is_listed_run_for_each_file_and_reported(tmp_path, monkeypatch, scratch):
    folder, plan = _data(tmp_path)
    before = verify.verify(folder, [plan]).to_dict()["checks"]
    scratch("probe_files", "file")
    assert verify.CHECK_NAMES[-1] == registry.CHECK_NAMES[-1] == "probe_files"
    assert "probe_files" in registry.doc_list() and registry.help_lines()[-1].startswith("probe_files")
    assert "  probe_files      a throwaway file check" in _help(monkeypatch)
    checks = verify.verify(folder, [plan]).to_dict()["checks"]
    # one line per token file, right after the file's vocab_range; every other line as before
    probes = [i for i, c in enumerate(checks) if c["name"] == "probe_files"]
    assert [checks[i]["file"] for i in probes] == ["train.bin", "val.bin"]
    assert all(checks[i - 1]["name"] == "vocab_range" and checks[i - 1]["file"] == checks[i]["file"] for i in probes)
    assert [c for c in checks if c["name"] != "probe_files"] == before
    r = CliRunner().invoke(main, ["verify", str(folder), "--plan", str(plan), "--json", "-q"])
    assert [c["stage"] for c in json.loads(r.stdout)["checks"] if c["name"] == "probe_files"] == ["file", "file"]


def test_each_stage_runs_its_checks_where_the_report_expects_them(tmp_path, scratch):
    folder, plan = _data(tmp_path)
    for stage in registry.STAGES:
        scratch(f"probe_{stage}", stage)
    names = [c["name"] for c in verify.verify(folder, [plan]).to_dict()["checks"]]
    assert names.index("probe_dataset") == names.index("split_leakage") + 1  # the dataset stage's last
    assert names.index("probe_plan") == names.index("alignment") + 1  # after the plan's checks (no materialized here)
    assert names[-2:] == ["decode", "probe_final"]  # after everything
    assert names.count("probe_file") == 2


def test_a_check_taken_out_is_gone_everywhere(tmp_path, monkeypatch):
    folder, plan = _data(tmp_path)

    @registry.check("probe_gone", help="gone soon", reads="nothing", stage="dataset")
    def probe(report, ctx):
        report.add(probe.spec, "", verify.Status.WARN, "still here")

    try:
        assert any(c.name == "probe_gone" for c in verify.verify(folder, [plan]).checks)
        assert registry.runs("dataset")[-1] == "probe_gone"
    finally:
        registry.unregister("probe_gone")
    assert "probe_gone" not in registry.runs("dataset")
    assert "probe_gone" not in verify.CHECK_NAMES and "probe_gone" not in _help(monkeypatch)
    assert not any(c.name == "probe_gone" for c in verify.verify(folder, [plan]).checks)
    assert len(verify.CHECK_NAMES) == 26


def test_a_check_must_name_a_known_stage_and_a_unique_name():
    with pytest.raises(ValueError, match="stage"):
        registry.check("probe_bad", help="h", reads="r", stage="later")
    with pytest.raises(ValueError, match="runs_before"):
        registry.check("probe_bad", help="h", reads="r", stage="file", runs_before="decode")
    with pytest.raises(ValueError, match="twice"):
        registry.check("vocab_range", help="h", reads="r", stage="file")(lambda report, ctx, target, scan: None)
    assert registry.CHECK_NAMES.count("vocab_range") == 1 and "probe_bad" not in registry.CHECK_NAMES
