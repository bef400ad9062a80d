"""Text from the data never drives the terminal: corpus text, file names and meta fields that
hold control characters (escape sequences, OSC 52 clipboard writes, a bare CR) are shown as hex."""

from __future__ import annotations

import json

from click.testing import CliRunner

from winsample.cli import main
from winsample.terminal import terminal_safe

HOSTILE = "clear\x1b[2J clip\x1b]52;c;aGk=\x07 back\rC1\x9b31m end"


def test_terminal_safe_shows_every_control_but_newline_and_tab_as_hex():
    assert terminal_safe(HOSTILE + "\nline\ttab") == (
        "clear⟨1b⟩[2J clip⟨1b⟩]52;c;aGk=⟨07⟩ back⟨0d⟩C1⟨c2 9b⟩31m end\nline\ttab")
    assert terminal_safe("plain 文字 ✓") == "plain 文字 ✓"
    assert terminal_safe("a\nb", keep="") == "a⟨0a⟩b"


def _encode(tmp_path):
    (tmp_path / "corpus").mkdir()
    for i in range(6):
        (tmp_path / "corpus" / f"d{i}.txt").write_text(f"document {i}: {HOSTILE}\n" * 40, encoding="utf-8")
    r = CliRunner().invoke(main, ["encode", str(tmp_path / "corpus"), "-o", str(tmp_path / "data"), "-q",
                                  "--val-fraction", "0.5", "--workers", "1"])
    assert r.exit_code == 0, r.stderr
    return tmp_path / "data"


def test_verify_show_prints_the_corpus_without_its_escape_sequences(tmp_path):
    data = _encode(tmp_path)
    r = CliRunner().invoke(main, ["verify", str(data), "--show", "2", "-T", "64"])
    assert "⟨1b⟩[2J" in r.stdout and "⟨1b⟩]52;c;aGk=⟨07⟩" in r.stdout  # shown, as hex
    assert not any(c in r.stdout for c in "\x1b\x07\r\x9b")


def test_an_error_naming_a_hostile_file_name_stays_one_inert_line(tmp_path):
    r = CliRunner().invoke(main, ["verify", str(tmp_path / "no\x1b]52;c;aGk=\x07such")])
    assert r.exit_code == 2 and r.stderr.count("\n") == 1
    assert "⟨1b⟩]52;c;aGk=⟨07⟩" in r.stderr and "\x1b" not in r.stderr and "\x07" not in r.stderr


def test_inspect_shows_a_hostile_meta_field_as_hex(tmp_path):
    data = _encode(tmp_path)
    meta = json.loads((data / "meta.json").read_text())
    meta["tokenizer"]["name"] = "gpt2\x1b[2J"
    (data / "meta.json").write_text(json.dumps(meta))
    r = CliRunner().invoke(main, ["inspect", str(data)])
    assert "name=gpt2⟨1b⟩[2J" in r.stdout and "\x1b" not in r.stdout


def test_encode_warnings_name_hostile_file_names_inertly():
    from winsample.cli import render

    line = render.not_read_warning({".\x1b]52;c;aGk=\x07": 1})
    assert "\x1b" not in line and "\x07" not in line and "⟨1b⟩]52" in line
