"""`winsample windows --pack best-fit`: a segment plan every token of which is planned once,
its figures, and the options it refuses (stdout and stderr asserted separately)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from winsample import formats
from winsample.cli import main

EOT = 50256


def bare_bin(path, doc_lengths) -> list[tuple[int, int]]:
    """A bare .bin of documents of these lengths, each ending with GPT-2's EOT; their [start, end)."""
    ids, edges, at = [], [], 0
    for n in doc_lengths:
        ids += [7] * (n - 1) + [EOT]
        edges.append((at, at + n))
        at += n
    np.array(ids, "<u2").tofile(path)
    return edges


def run(*args):
    return CliRunner().invoke(main, ["windows", *map(str, args)])


def test_every_document_is_planned_once_in_windows_no_longer_than_the_span(tmp_path):
    lengths = [3, 9, 25, 4, 4, 11, 2, 6, 17, 1, 8]
    docs = bare_bin(tmp_path / "t.bin", lengths)
    r = run(tmp_path / "t.bin", "-T", 9, "--pack", "best-fit", "-o", tmp_path / "p.npy", "--json", "-q")
    assert r.exit_code == 0 and r.stderr == ""
    rows, side = formats.load_plan(tmp_path / "p.npy")
    span = 10
    # the pieces by hand: 25 → [.., +10) [+10, +20) [+20, +25); 11 → 10 + 1; 17 → 10 + 7; every other whole
    want = []
    for d, (a, b) in enumerate(docs):
        want += [(s, min(span, b - s), d) for s in range(a, b, span)]
    got = sorted(zip(rows["start"].tolist(), rows["length"].tolist(), rows["doc"].tolist()))
    assert got == sorted(want)
    totals = np.bincount(rows["window"], weights=rows["length"])
    assert totals.max() <= span and totals.sum() == sum(lengths)
    windows = len(totals)
    summary = json.loads(r.stdout)
    assert summary["windows"] == side.stats.windows == windows
    assert summary["fill"] == pytest.approx(sum(lengths) / (windows * span))
    assert summary["padding_tokens"] == windows * span - sum(lengths)
    assert summary["documents_split"] == 3 and summary["coverage"] == 1.0
    assert side.version == 2 and side.params.pack == "best-fit" and side.params.long == "split"


def test_truncate_and_drop_count_what_they_leave_out(tmp_path):
    bare_bin(tmp_path / "t.bin", [3, 25, 4])
    r = run(tmp_path / "t.bin", "-T", 9, "--pack", "best-fit", "--long", "truncate", "-o", tmp_path / "t.npy", "--json", "-q")
    s = json.loads(r.stdout)
    assert (s["documents_truncated"], s["uncovered_tokens"], s["covered_tokens"]) == (1, 15, 17)
    r = run(tmp_path / "t.bin", "-T", 9, "--pack", "best-fit", "--long", "drop", "-o", tmp_path / "d.npy", "--json", "-q")
    s = json.loads(r.stdout)
    assert (s["documents_dropped"], s["uncovered_tokens"], s["covered_tokens"]) == (1, 25, 7)


def test_the_summary_line_says_fill_and_padding(tmp_path):
    bare_bin(tmp_path / "t.bin", [5, 5, 10])
    r = run(tmp_path / "t.bin", "-T", 9, "--pack", "best-fit", "-o", tmp_path / "p.npy")
    assert r.exit_code == 0 and r.stdout == ""
    # 10 alone fills a window; 5 + 5 the other: 20 tokens in 2 windows of 10
    assert "2 windows of span 10 (T 9, best-fit) hold 3 segments: fill 100.00%, 0 padding tokens" in r.stderr


def test_pack_alone_is_still_greedy(tmp_path):
    bare_bin(tmp_path / "t.bin", [5, 5, 10])
    r = run(tmp_path / "t.bin", "-T", 9, "--boundaries", "doc", "--pack", "-o", tmp_path / "g.npy", "-q")
    assert r.exit_code == 0, r.stderr
    rows, side = formats.load_plan(tmp_path / "g.npy")
    assert side.params.pack is True and side.version == 1 and rows.dtype == formats.PLAN_DTYPE
    assert rows["start"].tolist() == [0, 10]  # greedy: 5 + 5 in file order, then 10


@pytest.mark.parametrize(("extra", "words"), [
    (("--stride", 3), "--stride does not apply"),
    (("--shuffle", "--seed", 1), "--shuffle does not apply"),
    (("--shards", 2), "--shards does not apply"),
    (("--boundaries", "sentence"), "--boundaries sentence does not apply"),
    (("--format", "txt", "-o", "-"), "use --format npy"),
])
def test_options_that_place_regular_windows_are_refused(tmp_path, extra, words):
    bare_bin(tmp_path / "t.bin", [5, 5, 10])
    out = () if "-o" in extra else ("-o", tmp_path / "p.npy")
    r = run(tmp_path / "t.bin", "-T", 9, "--pack", "best-fit", *extra, *out)
    assert r.exit_code == 2 and r.stdout == ""
    assert words in r.stderr and not (tmp_path / "p.npy").exists()


def test_long_without_best_fit_is_refused(tmp_path):
    bare_bin(tmp_path / "t.bin", [5, 5, 10])
    r = run(tmp_path / "t.bin", "-T", 9, "--long", "drop", "-o", tmp_path / "p.npy")
    assert r.exit_code == 2 and "add --pack best-fit" in r.stderr


def test_a_version_1_sidecar_claiming_best_fit_is_refused(tmp_path):
    bare_bin(tmp_path / "t.bin", [5, 5, 10])
    run(tmp_path / "t.bin", "-T", 9, "--pack", "best-fit", "-o", tmp_path / "p.npy", "-q")
    side_path = tmp_path / "p.npy.json"
    side = json.loads(side_path.read_text())
    side["version"] = 1
    side_path.write_text(json.dumps(side))
    with pytest.raises(Exception, match="needs plan version 2"):
        formats.load_plan(tmp_path / "p.npy")



def test_materialize_on_a_full_disk_is_one_line_and_leaves_nothing(tmp_path, monkeypatch):
    # #29 class 5: writing into a mapped sparse file on a full disk was a SIGBUS (exit 135, no message)
    import errno
    import os

    bare_bin(tmp_path / "t.bin", [50] * 40)

    def full(fd, offset, length):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "posix_fallocate", full)
    r = run(tmp_path / "t.bin", "-T", 9, "--materialize", "-o", tmp_path / "p.npy")
    assert r.exit_code == 2 and r.stdout == "" and "no space left on the device" in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.bin"]  # no plan, no staging folder, no temporary file
