"""verify's report: percent, statuses, the exit status."""

from __future__ import annotations

import pytest

from winsample import verify


@pytest.mark.parametrize(("share", "shown"), [(1.0, "100.00%"), (1 - 1e-7, "99.99%"), (0.99994, "99.99%"), (0.5, "50.00%"),
                                              (1e-7, "0.01%"), (0.0, "0.00%"), (0.123456, "12.35%")])
def test_percent_reads_100_or_0_only_when_exactly_so(share, shown):
    assert verify.percent(share) == shown


def test_status_values_are_the_report_strings_and_the_report_owns_the_exit_status():
    assert [s.value for s in verify.Status] == ["pass", "warn", "fail", "skip"]
    r = verify.Report()
    c = r.add(verify.registry.get("meta"), "meta.json", verify.Status.WARN, "no meta.json")
    assert c.status == "warn" and type(c.status) is str and c.to_dict()["status"] == "warn"
    assert r.ok() and r.exit_code() == 0 and r.exit_code(strict=True) == 1
    r.add(verify.registry.get("decode"), "", "fail", "a value works too")
    assert r.exit_code() == 1 and [c.name for c in r.failures()] == ["decode"]
    with pytest.raises(ValueError):
        r.add(verify.registry.get("decode"), "", "passed", "not a status")


def test_options_are_one_frozen_object_and_verify_takes_them_either_way(tmp_path):
    import dataclasses

    opts = verify.VerifyOptions(T=8, show=0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.T = 9
    with pytest.raises(TypeError):
        verify.verify(tmp_path, no_such_option=1)
