import subprocess
import sys

import pytest
from click.testing import CliRunner

from winsample import __version__
from winsample.cli import load_commands, main


def test_help_lists_the_three_subcommands():
    r = CliRunner().invoke(main, ["--help"])
    assert r.exit_code == 0
    for cmd in ("encode", "windows", "verify"):
        assert f"  {cmd} " in r.stdout


def test_version():
    r = CliRunner().invoke(main, ["--version"])
    assert r.exit_code == 0 and __version__ in r.stdout


def test_every_subcommand_has_help():
    for cmd in load_commands():
        r = CliRunner().invoke(main, [cmd, "--help"])
        assert r.exit_code == 0 and "Usage:" in r.stdout


def test_unknown_command_is_usage_error():
    r = CliRunner().invoke(main, ["frobnicate"])
    assert r.exit_code == 2 and "No such command" in r.stderr


@pytest.mark.parametrize("args, words, where", [
    (["frobnicate"], "No such command 'frobnicate'", "winsample"),
    (["--bogus"], "No such option '--bogus'", "winsample"),
    (["verify", "--bogus", "x"], "No such option '--bogus'", "winsample verify"),
    (["windows", "t.bin", "-T", "abc", "-o", "x.npy"], "'abc'", "winsample windows"),
    (["encode", "a.txt", "-o", "o", "--val-fraction", "1.5"], "1.5 is not in the range", "winsample encode"),
    (["inspect"], "Missing argument 'PATH'", "winsample inspect"),
])
def test_a_usage_error_is_one_line_exit_2_like_every_other_error(args, words, where):
    r = CliRunner().invoke(main, args, prog_name="winsample")
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("error: ") and "Usage:" not in r.stderr
    assert words in r.stderr and r.stderr.endswith(f"(see '{where} --help')\n")


def test_python_dash_m_runs():
    r = subprocess.run([sys.executable, "-m", "winsample", "--version"], capture_output=True, text=True)
    assert r.returncode == 0 and __version__ in r.stdout


def test_encode_dash_o_dash_is_a_usage_error_not_a_folder_named_dash(tmp_path, monkeypatch):
    """``-o -`` means stdout elsewhere (``windows -o -``); encode writes a folder, so it refuses
    (exit 2, nothing written) instead of creating a folder named '-' (it did, exit 0)."""
    (tmp_path / "a.txt").write_text("some text\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(main, ["encode", "a.txt", "-o", "-", "--val-fraction", "0", "-q"])
    assert r.exit_code == 2 and r.stdout == ""
    assert "-o -: encode writes a folder" in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt"]


def test_bare_winsample_shows_its_help_as_click_does_not_as_an_error_line():
    r = CliRunner().invoke(main, [], prog_name="winsample")
    assert "Usage: winsample" in r.output and "Commands:" in r.output and "error:" not in r.output


def test_every_command_takes_q_and_json():
    """-q and --json are documented for every command (inspect refused -q)."""
    for name, cmd in load_commands().items():
        opts = {o for p in cmd.params for o in getattr(p, "opts", [])}
        assert {"-q", "--json"} <= opts, name
