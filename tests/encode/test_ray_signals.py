"""The driver's cluster and signals (``executors.ray_cluster.on_cluster``), with a stand-in for Ray
whose ``init`` and ``shutdown`` do what Ray's do to signals: its driver handler turns a SIGTERM
into ``sys.exit(15)``, and a signal may land while it shuts down. The real thing, at random
moments of real runs: tests/encode/test_ray_cluster_here.py. A local run's signal after its
commit: the last test."""

from __future__ import annotations

import importlib
import os
import signal
import sys

import pytest

from winsample.encode import encode_corpus
from winsample.encode.config import EncodeConfig
from winsample.encode.executors import pool as pool_mod
from winsample.encode.executors.ray_cluster import on_cluster
from winsample.errors import Interrupted

from ..conftest import CORPUS


def _cli_handler(signum, frame):  # what the CLI installs (cli.main): a signal becomes Interrupted
    raise Interrupted(signum)


class FakeRay:
    """``init`` may install Ray's driver handler and then meet a SIGTERM; ``shutdown`` may meet
    ``signals`` while it runs and always records that it ran to its end."""

    def __init__(self, term_in_init: bool = False, signals_in_shutdown: int = 0, hook: bool = True):
        self.term_in_init, self.signals_in_shutdown, self.hook = term_in_init, signals_in_shutdown, hook
        self.up, self.shutdowns_finished, self.inits_finished = False, 0, 0

    def is_initialized(self) -> bool:
        return self.up

    def init(self, **_kw) -> None:
        self.up = True
        handler = lambda s, f: sys.exit(s)  # noqa: E731 (Ray's driver handler, ray._private.worker)
        if self.hook:  # as Ray's init sets it
            importlib.import_module("ray._private.utils").set_sigterm_handler(handler)
        else:  # a Ray version that sets it another way
            signal.signal(signal.SIGTERM, handler)
        if self.term_in_init:
            os.kill(os.getpid(), signal.SIGTERM)
        self.inits_finished += 1

    def shutdown(self) -> None:
        for _ in range(self.signals_in_shutdown):
            os.kill(os.getpid(), signal.SIGTERM)
        self.up = False
        self.shutdowns_finished += 1


@pytest.fixture
def cli_handlers():
    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    signal.signal(signal.SIGTERM, _cli_handler)
    yield
    for s, h in saved.items():
        signal.signal(s, h)


def config(tmp_path) -> EncodeConfig:
    return EncodeConfig.of([str(CORPUS / "sonnets.txt")], tmp_path / "o")


def test_a_sigterm_while_ray_init_runs_waits_for_the_init_then_stops_the_cluster_and_ends_the_run(tmp_path, cli_handlers):
    """Cut short, Ray's init left its agents running after the run (seen: 40 s and more)."""
    ray = FakeRay(term_in_init=True)
    with pytest.raises(Interrupted) as e:
        on_cluster(ray, config(tmp_path), lambda: pytest.fail("the work must not start"))
    assert e.value.signum == signal.SIGTERM and e.value.exit_code == 143
    assert "nothing was written" in str(e.value)
    assert ray.inits_finished == 1 and ray.shutdowns_finished == 1 and not ray.up
    assert signal.getsignal(signal.SIGTERM) is _cli_handler  # the CLI's handler, not Ray's, afterwards


def test_where_ray_puts_its_own_sigterm_handler_its_exit_still_ends_the_run_as_interrupted(tmp_path, cli_handlers):
    ray = FakeRay(term_in_init=True, hook=False)
    with pytest.raises(Interrupted) as e:
        on_cluster(ray, config(tmp_path), lambda: pytest.fail("the work must not start"))
    assert e.value.signum == signal.SIGTERM and ray.shutdowns_finished == 1
    assert signal.getsignal(signal.SIGTERM) is _cli_handler


def test_after_ray_init_the_clis_handler_is_back(tmp_path, cli_handlers):
    seen = []
    on_cluster(FakeRay(), config(tmp_path), lambda: seen.append(signal.getsignal(signal.SIGTERM)))
    assert seen == [_cli_handler] and signal.getsignal(signal.SIGTERM) is _cli_handler


def test_a_sigterm_while_ray_shuts_down_after_the_work_waits_for_the_shutdown_and_says_the_output_is_whole(
        tmp_path, cli_handlers):
    ray = FakeRay(signals_in_shutdown=1)
    with pytest.raises(Interrupted) as e:
        on_cluster(ray, config(tmp_path), lambda: "done")
    assert ray.shutdowns_finished == 1  # not cut short: cut short, Ray left its processes and crashed at exit
    assert e.value.exit_code == 143
    assert str(e.value) == f"interrupted by SIGTERM; {tmp_path / 'o'} was committed whole before it arrived"
    assert signal.getsignal(signal.SIGTERM) is _cli_handler


def test_a_second_signal_while_ray_shuts_down_ends_the_wait_at_once(tmp_path, cli_handlers):
    ray = FakeRay(signals_in_shutdown=2)
    with pytest.raises(Interrupted):
        on_cluster(ray, config(tmp_path), lambda: "done")
    assert ray.shutdowns_finished == 0  # a shutdown that hung would not hold the process
    assert signal.getsignal(signal.SIGTERM) is _cli_handler


def test_a_signal_while_ray_shuts_down_after_failed_work_keeps_the_works_error(tmp_path, cli_handlers):
    ray = FakeRay(signals_in_shutdown=1)

    def work():
        raise Interrupted(signal.SIGINT)

    with pytest.raises(Interrupted) as e:
        on_cluster(ray, config(tmp_path), work)
    assert e.value.signum == signal.SIGINT and ray.shutdowns_finished == 1


def test_a_signal_after_a_local_run_in_parts_has_committed_says_the_output_is_whole(tmp_path, monkeypatch):
    """The pool is closed after the commit: a signal there must not claim that nothing was written."""
    close = pool_mod.close_pool

    def close_then_signal(pool):
        close(pool)
        raise Interrupted(signal.SIGTERM)  # what the CLI's handler raises

    monkeypatch.setattr(pool_mod, "close_pool", close_then_signal)
    src = tmp_path / "plays.txt"
    src.write_text(CORPUS.joinpath("hamlet.txt").read_text("utf-8") * 3, encoding="utf-8")
    with pytest.raises(Interrupted) as e:
        encode_corpus([str(src)], tmp_path / "o", workers=2, shard_size="64KB", split="tail")
    assert str(e.value) == f"interrupted by SIGTERM; {tmp_path / 'o'} was committed whole before it arrived"
    monkeypatch.setattr(pool_mod, "close_pool", close)
    encode_corpus([str(src)], tmp_path / "one", workers=1, split="tail")
    for name in ("train.bin", "val.bin"):
        assert (tmp_path / "o" / name).read_bytes() == (tmp_path / "one" / name).read_bytes()
