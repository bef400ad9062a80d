"""A mixture plan made before ``params.mixture.prefix`` keeps the rule it was made with.

``tests/fixtures/mixture_v3_before`` was written by winsample bdfbce8 (three tiny gpt2 datasets,
``mix web=0.5 code=0.5 books=0.2 --seed 7``), with ``served.json``: the (source, window) of every
position that release's Loader served for ``batch_size=4, seed=3`` in epochs 0 and 1. Its
counts are the old rule's (code runs out first at 77 / (5/12) = 184.8 → E = 184; code 77, and
the rest, 107, split 5:2 → 76.43, 30.57 → 76, 31), where the rule now gives 77, 77, 30.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
from click.testing import CliRunner

import winsample
from winsample.cli import main
from winsample.planning import mixture

BEFORE = Path(__file__).resolve().parents[1] / "fixtures" / "mixture_v3_before"


def copy(tmp_path: Path) -> Path:
    shutil.copytree(BEFORE, tmp_path / "m")
    return tmp_path / "m" / "mix.plan.npy"


def test_the_loader_serves_a_mixture_made_before_exactly_as_that_release_did(tmp_path):
    mix = copy(tmp_path)
    served = json.loads((BEFORE / "served.json").read_text())
    lo = winsample.Loader(str(mix), batch_size=4, seed=3)
    for e in (0, 1):
        rows = [lo.rows(e, s) for s in range(lo.steps(e))]
        assert np.concatenate([r["source"] for r in rows]).tolist() == served[f"epoch{e}"]["source"]
        assert np.concatenate([r["window"] for r in rows]).tolist() == served[f"epoch{e}"]["window"]


def test_its_counts_are_the_old_rule_and_differ_from_the_rule_now(tmp_path):
    rows = np.load(BEFORE / "mix.plan.npy")
    sizes = rows["windows"].tolist()
    assert sizes == [128, 77, 32] and rows["count"].tolist() == [76, 77, 31]  # module docstring, by hand
    w = ["0.5", "0.5", "0.2"]
    assert mixture.epoch_counts(w, sizes, prefix=mixture.PREFIX_COUNTS) == [76, 77, 31]
    assert mixture.epoch_counts(w, sizes) == [77, 77, 30]  # 76.67, 76.67 (rounded up), 30.67: largest remainder
    served = json.loads((BEFORE / "served.json").read_text())["epoch0"]["source"]
    assert served[:184] == mixture.interleave([76, 77, 31]).tolist()  # Tijdeman's rule at the counts' rates


def test_verify_passes_it_and_inspect_shows_it(tmp_path):
    mix = copy(tmp_path)
    r = CliRunner().invoke(main, ["verify", str(mix), "--retokenize-sample", "0", "--json"])
    doc = json.loads(r.stdout)
    assert r.exit_code == 0, [c for c in doc["checks"] if c["status"] != "pass"]
    prefix = next(c for c in doc["checks"] if c["name"] == "mixture_prefix")
    assert prefix["status"] == "pass" and "counts' rate" in prefix["detail"]
    r = CliRunner().invoke(main, ["inspect", str(mix), "--json", "--count", "3"])
    got = json.loads(r.stdout)
    assert r.exit_code == 0 and got["rule"] == {"rule": "first-exhausted"}
    assert [p["source"] for p in got["positions"]] == [["web", "code", "books"][i] for i in mixture.interleave([76, 77, 31])[:3]]


def test_a_prefix_rule_mix_never_wrote_fails_mixture_counts(tmp_path):
    mix = copy(tmp_path)
    side = json.loads((mix.parent / "mix.plan.npy.json").read_text())
    side["params"]["mixture"]["prefix"] = "tokens"
    (mix.parent / "mix.plan.npy.json").write_text(json.dumps(side))
    r = CliRunner().invoke(main, ["verify", str(mix), "--retokenize-sample", "0", "--json"])
    doc = json.loads(r.stdout)
    bad = next(c for c in doc["checks"] if c["name"] == "mixture_counts")
    assert r.exit_code == 1 and bad["status"] == "fail" and "params.mixture.prefix is 'tokens'" in bad["detail"]
