"""A plan sidecar's params and stats are typed (PlanParams, PlanStats) and still write back
the bytes they were read from."""

from __future__ import annotations

import json

import numpy as np
import pytest

from winsample import formats


def test_params_read_as_attributes_and_write_back_key_for_key(tmp_path):
    params = {"span": 5, "T": 4, "zz_future": [1, 2], "shuffle": True, "seed": 3, "epoch": 0}  # not windows' order
    side = formats.PlanSidecar(source=formats.PlanSource(file="train.bin", tokens=15), params=params,
                               stats={"windows": 2, "coverage": 0.5})
    formats.write_plan(tmp_path / "p.npy", np.zeros(2, formats.PLAN_DTYPE), side)
    raw = json.loads((tmp_path / "p.npy.json").read_text())
    assert list(raw["params"]) == list(params) and raw["params"]["zz_future"] == [1, 2]  # order and unknown keys kept
    _, back = formats.load_plan(tmp_path / "p.npy")
    p = back.params
    assert (p.T, p.span, p.shuffle, p.seed, p.epoch) == (4, 5, True, 3, 0)
    assert p.extra == {"zz_future": [1, 2]} and "stride" not in p
    assert back.stats.windows == 2 and back.stats.coverage == 0.5 and back.stats.documents is None
    assert back.to_json()["params"] == params


def test_a_key_an_older_plan_lacks_reads_its_default():
    p = formats.PlanParams({"T": 8, "span": 9})
    assert p.targets is True and p.random_offset is False and p.pack is False and p.shuffle is False
    assert p.boundaries is None and p.to_json() == {"T": 8, "span": 9}  # defaults are not written


def test_a_value_as_written_is_kept_for_verify_to_judge():
    p = formats.PlanParams({"targets": "yes", "shards": -1})
    assert p.targets == "yes" and p.shards == -1  # verify's plan_bounds reports these; reading does not hide them


def test_params_are_read_only_and_replace_makes_a_copy():
    p = formats.PlanParams({"T": 8, "shard": None})
    with pytest.raises(AttributeError):
        p.T = 9
    q = p.replace(shard=1, extra_key=True)
    assert (p.shard, q.shard, q.T) == (None, 1, 8) and list(q.to_json()) == ["T", "shard", "extra_key"]
    assert q == formats.PlanParams({"T": 8, "shard": 1, "extra_key": True}) and q != p
