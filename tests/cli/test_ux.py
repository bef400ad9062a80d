"""Terminal manners: verify --plot, environment variables, plurals, clean stdout on errors,
exit codes that survive a closed pipe."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import click
import numpy as np
import pytest
from click.testing import CliRunner

from winsample.cli import load_commands, main

from ..conftest import CORPUS, REPO

WS = str(Path(sys.executable).parent / "winsample")


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    """A small data folder (two plays, tail split) and a T=64 plan over its train.bin."""
    root = tmp_path_factory.mktemp("ux")
    src = root / "corpus"
    src.mkdir()
    for name in ("macbeth.txt", "tempest.txt"):
        shutil.copy(CORPUS / name, src / name)
    r = CliRunner().invoke(main, ["encode", str(src), "-o", str(root / "data"), "--split", "tail", "--workers", "1", "-q"])
    assert r.exit_code == 0, r.stderr
    r = CliRunner().invoke(main, ["windows", str(root / "data/train.bin"), "-T", "64", "-o", str(root / "data/train.plan.npy"), "-q"])
    assert r.exit_code == 0, r.stderr
    return root / "data"


# --- verify --plot ------------------------------------------------------------------------


def test_verify_plot_writes_a_png_that_decodes_and_is_not_blank(data, tmp_path):
    import matplotlib.image

    png = tmp_path / "coverage.png"
    r = CliRunner().invoke(main, ["verify", str(data), "--plan", str(data / "train.plan.npy"), "--show", "0", "--plot", str(png)])
    assert r.exit_code == 0, r.stderr
    assert f"→ {png}" in r.stderr and "coverage.png" not in r.stdout.replace(str(png), "")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    img = matplotlib.image.imread(png)  # RGBA floats in [0, 1]
    assert img.shape[:2] == (900, 1200)
    rgb = img[..., :3].reshape(-1, 3)
    assert (rgb.min(axis=1) < 0.9).mean() > 0.05  # more than 5% of the pixels are not white
    assert len(np.unique((rgb * 255).astype(np.uint8), axis=0)) > 20  # drawn, not one flat fill


def test_verify_plot_without_plan_is_a_usage_error_and_runs_nothing(data, tmp_path):
    png = tmp_path / "c.png"
    r = CliRunner().invoke(main, ["verify", str(data), "--plot", str(png), "--json"])
    assert r.exit_code == 2 and r.stdout == ""
    assert "--plot draws a window plan: add --plan PLAN.npy" in r.stderr
    assert not png.exists()


def test_verify_plot_with_json_adds_the_picture_to_the_one_json_document(data, tmp_path):
    png = tmp_path / "c.png"
    r = CliRunner().invoke(main, ["verify", str(data), "--plan", str(data / "train.plan.npy"), "--show", "0", "--json", "--plot", str(png)])
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["ok"] is True and doc["plot"]["png"] == str(png) and png.exists()
    assert doc["plot"]["windows"] == len(np.load(data / "train.plan.npy"))


def test_verify_plot_of_a_broken_plan_reports_checks_then_the_plot_error_exit_1(data, tmp_path):
    bad = tmp_path / "bad.npy"
    rows = np.load(data / "train.plan.npy")
    rows["start"][0] = -5  # plan_bounds fails, and the picture cannot be drawn
    np.save(bad, rows)
    shutil.copy(data / "train.plan.npy.json", tmp_path / "bad.npy.json")
    png = tmp_path / "c.png"
    r = CliRunner().invoke(main, ["verify", str(data), "--plan", str(bad), "--show", "0", "--plot", str(png)])
    assert r.exit_code == 1
    assert "✗ plan_bounds" in r.stdout and "verify: FAILED" in r.stdout
    assert r.stderr.strip().splitlines()[-1].startswith(f"error: --plot {png}: ")
    assert not png.exists()


# --- environment variables ----------------------------------------------------------------


def auto_envvars() -> set[str]:
    """What click's auto_envvar_prefix makes of every option, computed from the command tree."""
    names = set()
    for cmd_name, cmd in load_commands().items():
        for p in cmd.params:
            if isinstance(p, click.Option) and p.name != "help":
                names.add(f"WINSAMPLE_{cmd_name.upper()}_{p.name.upper()}")
    return names


def test_every_environment_variable_named_in_the_guide_exists():
    text = (REPO / "docs" / "guide.md").read_text(encoding="utf-8")
    named = set(re.findall(r"\bWINSAMPLE_[A-Z_]*[A-Z]\b", text)) - {"WINSAMPLE_DEBUG", "WINSAMPLE_PURE"}
    assert len(named) >= 15
    assert named - auto_envvars() == set()


def test_env_var_sets_windows_stride_and_the_command_line_wins(data, tmp_path):
    out = tmp_path / "p.npy"
    r = CliRunner().invoke(main, ["windows", str(data / "train.bin"), "-T", "64", "-o", str(out), "-q"],
                           env={"WINSAMPLE_WINDOWS_STRIDE": "7"})
    assert r.exit_code == 0, r.stderr
    starts = np.load(out)["start"]
    assert json.loads((tmp_path / "p.npy.json").read_text())["params"]["stride"] == 7
    assert (np.diff(starts[:-1]) == 7).all()  # regular starts; the last one is the aligned tail
    r = CliRunner().invoke(main, ["windows", str(data / "train.bin"), "-T", "64", "--stride", "9", "-o", str(out), "-q"],
                           env={"WINSAMPLE_WINDOWS_STRIDE": "7"})
    assert json.loads((tmp_path / "p.npy.json").read_text())["params"]["stride"] == 9


def test_env_var_bad_value_names_the_option(data, tmp_path):
    r = CliRunner().invoke(main, ["encode", str(CORPUS / "tempest.txt"), "-o", str(tmp_path / "d")],
                           env={"WINSAMPLE_ENCODE_WORKERS": "0"})
    assert r.exit_code == 2 and r.stdout == "" and "'--workers'" in r.stderr
    assert not (tmp_path / "d").exists()


# --- wording and streams ------------------------------------------------------------------


def test_encode_summary_uses_singular_for_one_document(tmp_path):
    r = CliRunner().invoke(main, ["encode", str(CORPUS / "tempest.txt"), "-o", str(tmp_path / "d"), "--split", "tail", "--workers", "1"])
    assert r.exit_code == 0, r.stderr
    assert r.stderr.startswith("encoded 1 document: train ")
    assert "(1 doc)" in r.stderr and "1 docs" not in r.stderr and "1 documents" not in r.stderr


def test_windows_summary_counts_with_plurals(data, tmp_path):
    n = len(np.memmap(data / "train.bin", dtype="<u2", mode="r"))
    # one window over the whole file, no tail left: singular "window", plural "tokens"
    r = CliRunner().invoke(main, ["windows", str(data / "train.bin"), "-T", str(n - 1), "-o", str(tmp_path / "p.npy")])
    assert r.exit_code == 0, r.stderr
    assert r.stderr.startswith(f"1 window of span {n} ") and f"over {n:,} tokens" in r.stderr
    assert "0 tail tokens uncovered" in r.stderr and "(s)" not in r.stderr


def test_verify_quiet_and_passing_prints_nothing(data):
    r = CliRunner().invoke(main, ["verify", str(data), "-q"])
    assert r.exit_code == 0
    assert r.stdout == "" and r.stderr == ""


def test_verify_quiet_and_failing_prints_only_what_failed(data, tmp_path):
    bad = tmp_path / "odd.bin"
    bad.write_bytes((data / "train.bin").read_bytes()[:-1])
    r = CliRunner().invoke(main, ["verify", str(bad), "-q"])
    assert r.exit_code == 1
    lines = r.stdout.splitlines()
    assert lines and all(line.startswith("✗") or line.startswith("!") for line in lines)
    assert any("dtype_divisible" in line for line in lines) and "verify:" not in r.stdout


@pytest.mark.parametrize("args", [
    ["encode", "no/such/dir", "-o", "out", "--json"],
    ["windows", "no/such.bin", "-T", "8", "-o", "p.npy", "--json"],
    ["verify", "no/such/dir", "--json"],
    ["inspect", "no/such.bin", "--json"],
    ["windows", "no/such.bin", "-T", "0", "-o", "p.npy", "--json"],
])
def test_json_errors_print_one_line_on_stderr_and_nothing_on_stdout(args, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 2 and r.stdout == ""
    assert "no/such" in r.stderr or "-T" in r.stderr


def test_verify_keeps_exit_1_when_its_reader_closes_the_pipe(data):
    # -T larger than the file: min_length fails, and the decoded window (the whole file) is far
    # bigger than a pipe buffer, so writing it hits the closed pipe
    p = subprocess.Popen([WS, "verify", str(data / "train.bin"), "-T", "10000000", "--show", "1"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    p.stdout.close()
    assert p.wait(timeout=60) == 1


@pytest.mark.parametrize("fmt", ["txt", "jsonl"])
def test_windows_to_stdout_stops_quietly_when_its_reader_closes_the_pipe(data, fmt):
    # ~56k windows as text: far more than a pipe buffer, so writing hits the closed pipe
    p = subprocess.Popen([WS, "windows", str(data / "train.bin"), "-T", "8", "--stride", "4", "--format", fmt, "-o", "-", "-q"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = p.stdout.readline()
    p.stdout.close()
    assert p.wait(timeout=60) == 0 and first
    assert p.stderr.read() == b""  # no "cannot write: Broken pipe"


@pytest.mark.parametrize("command", [["windows", "-T", "8", "-o", "{tmp}/p.npy"], ["verify"]])
def test_a_text_file_is_not_read_as_tokens(tmp_path, command):
    """A .txt with no meta.json would read as uint16 nonsense that no check can catch: refuse it."""
    txt = tmp_path / "prose.txt"
    txt.write_text("My dog has fleas, and so does the cat.\n" * 20)
    args = [command[0], str(txt), *(a.format(tmp=tmp_path) for a in command[1:])]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 2 and r.stdout == ""
    assert "prose.txt: not a .bin and no meta.json describes it" in r.stderr and "winsample encode" in r.stderr
    assert len(r.stderr.splitlines()) == 1
    assert not (tmp_path / "p.npy").exists()


def test_repeated_T_writes_one_plan_per_scale(data, tmp_path):
    out = tmp_path / "p.npy"
    r = CliRunner().invoke(main, ["windows", str(data / "train.bin"), "-T", "64", "-T", "128", "-o", str(out), "-q"])
    assert r.exit_code == 0
    for T in (64, 128):
        side = json.loads((tmp_path / f"p.T{T}.npy.json").read_text())
        assert side["params"]["T"] == T and side["params"]["span"] == T + 1
    assert not out.exists()


def test_no_bar_to_draw_imports_no_tqdm():
    import subprocess
    import sys

    code = ("import sys\nfrom winsample.cli import common as cli\n"
            "with cli.progress(True, desc='x') as bar:\n    bar.update(5)\n    bar.set_postfix(tokens='1')\n"
            "print('tqdm' in sys.modules, 'importlib.metadata' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "False"]  # neither is imported by a start that draws no bar


def test_a_terminal_gets_a_real_bar(monkeypatch, capsys):
    import sys

    from tqdm import tqdm

    from winsample.cli import common as cli

    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    bar = cli.progress(False, desc="encode", total=10)
    assert isinstance(bar, tqdm) and tqdm.monitor_interval == 0  # no monitor thread (encode forks its workers)
    bar.update(10)
    bar.close()
    assert "encode" in capsys.readouterr().err


@pytest.mark.parametrize("cmd", ["encode", "windows", "verify", "inspect", "chunk"])
def test_an_empty_encoding_is_refused_not_read_as_gpt2(data, tmp_path, cmd):
    # adversarial trial: --encoding "" was read as gpt2, silently
    target = {"encode": CORPUS / "hamlet.txt", "chunk": CORPUS / "hamlet.txt"}.get(cmd, data / "train.bin")
    out = {"encode": ["-o", tmp_path / "o"], "windows": ["-T", "8", "-o", tmp_path / "p.npy"], "chunk": ["-o", tmp_path / "c.jsonl"]}
    r = CliRunner().invoke(main, [cmd, str(target), "--encoding", " ", *map(str, out.get(cmd, []))])
    assert r.exit_code == 2 and r.stdout == ""
    assert "Invalid value for '--encoding': is empty: give a tokenizer's name, or leave the option out" in r.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("debug", [False, True])
def test_a_path_the_system_refuses_is_one_error_line_and_exit_2_not_an_internal_error(data, monkeypatch, debug):
    """New-user trial: a file inside a folder this user may not open (chmod 000, not root) gave
    "internal error: PermissionError …", read as a bug in the tool; and WINSAMPLE_DEBUG=1 turned
    its exit code 2 into 1, the code of data that failed a check."""
    import winsample.inspect

    def refused(path, **kwargs):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(winsample.inspect, "inspect_path", refused)
    if debug:
        monkeypatch.setenv("WINSAMPLE_DEBUG", "1")
    r = CliRunner().invoke(main, ["inspect", str(data / "train.bin")])
    assert (r.exit_code, r.stdout) == (2, "")
    line = f"error: {data / 'train.bin'}: Permission denied (the file, or a folder on its path, does not let this user in)"
    assert r.stderr.splitlines()[-1] == line and "internal error" not in r.stderr
    assert ("Traceback (most recent call last)" in r.stderr) == debug and (len(r.stderr.splitlines()) == 1) != debug
