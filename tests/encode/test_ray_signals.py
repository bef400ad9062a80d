"""The driver's cluster and signals (``executors.ray_cluster.on_cluster``), with a stand-in for Ray
whose ``init`` and ``shutdown`` do what Ray's do to signals: its driver handler turns a SIGTERM
into ``sys.exit(15)``, and a signal may land while it shuts down. The real thing, at random
moments of real runs: tests/encode/test_ray_cluster_here.py. A local run's signal after its
commit: the last test."""

from __future__ import annotations

import importlib
import os
import shutil
import signal
import sys
from pathlib import Path

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

    def __init__(self, term_in_init: bool = False, signals_in_shutdown: int = 0, hook: bool = True,
                 init_fails: Exception | None = None):
        self.term_in_init, self.signals_in_shutdown, self.hook = term_in_init, signals_in_shutdown, hook
        self.init_fails = init_fails
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
        if self.init_fails is not None:  # after minutes of retries, say
            raise self.init_fails
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


def test_a_signal_held_while_ray_init_runs_ends_the_run_even_if_the_init_then_fails(tmp_path, cli_handlers):
    ray = FakeRay(term_in_init=True, init_fails=ConnectionError("could not connect"))
    with pytest.raises(Interrupted) as e:
        on_cluster(ray, config(tmp_path), lambda: pytest.fail("the work must not start"))
    assert e.value.signum == signal.SIGTERM and ray.shutdowns_finished == 1


def test_a_signal_while_joining_a_cluster_at_an_address_ends_the_run_at_once(tmp_path, cli_handlers):
    """Joining starts no process that could outlive the run: nothing to wait for."""
    ray = FakeRay(term_in_init=True)
    cfg = EncodeConfig.of([str(CORPUS / "sonnets.txt")], tmp_path / "o", engine="ray", address="auto")
    with pytest.raises(Interrupted) as e:
        on_cluster(ray, cfg, lambda: pytest.fail("the work must not start"))
    assert e.value.signum == signal.SIGTERM and ray.inits_finished == 0 and ray.shutdowns_finished == 1
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


def test_a_signal_while_ray_shuts_down_before_the_caller_commits_says_nothing_was_written(tmp_path, cli_handlers):
    """The shard path commits after the cluster is left (``commits=False``)."""
    ray = FakeRay(signals_in_shutdown=1)
    with pytest.raises(Interrupted) as e:
        on_cluster(ray, config(tmp_path), lambda: "shards done", commits=False)
    assert str(e.value) == "interrupted by SIGTERM; nothing was written" and ray.shutdowns_finished == 1


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


@pytest.mark.parametrize("where", ["closing the pool", "moving the set in", "removing .partial"])
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_after_a_local_run_in_parts_has_committed_says_the_output_is_whole(tmp_path, monkeypatch, where, signum):
    """After the COMMIT mark, a signal must not claim that nothing was written: closing the pool,
    the moves of the committed set (finished by recovery), removing a big .partial. Ctrl-C is a
    bare KeyboardInterrupt (the CLI handles SIGINT as Python does), SIGTERM the CLI's Interrupted."""
    from winsample.disk import staging

    def stop():
        raise Interrupted(signum) if signum == signal.SIGTERM else KeyboardInterrupt

    if where == "closing the pool":
        close = pool_mod.close_pool
        monkeypatch.setattr(pool_mod, "close_pool", lambda pool, failed=False: (close(pool, failed), stop()))
    elif where == "moving the set in":  # the COMMIT mark written, nothing moved yet: recovery moves it all
        roll_forward, stopped = staging.roll_forward, []

        def stop_first(*a, **k):
            if not stopped:
                stopped.append(1)
                stop()
            return roll_forward(*a, **k)

        monkeypatch.setattr(staging, "roll_forward", stop_first)
    else:  # the committed set in place, the old .partial being removed
        rmtree = shutil.rmtree

        def rmtree_then_stop(p, *a, **k):
            rmtree(p, *a, **k)
            if Path(p).name == ".partial" and (tmp_path / "o" / "meta.json").exists():
                stop()

        monkeypatch.setattr(shutil, "rmtree", rmtree_then_stop)
    src = tmp_path / "plays.txt"
    src.write_text(CORPUS.joinpath("hamlet.txt").read_text("utf-8") * 3, encoding="utf-8")
    with pytest.raises(KeyboardInterrupt) as e:
        encode_corpus([str(src)], tmp_path / "o", workers=2, shard_size="64KB", split="tail")
    name = "SIGTERM" if signum == signal.SIGTERM else "SIGINT"
    assert str(e.value) == f"interrupted by {name}; {tmp_path / 'o'} was committed whole before it arrived"
    assert e.value.exit_code == 128 + signum
    monkeypatch.undo()
    encode_corpus([str(src)], tmp_path / "one", workers=1, split="tail")
    for name in ("train.bin", "val.bin", "meta.json"):
        assert (tmp_path / "o" / name).read_bytes() == (tmp_path / "one" / name).read_bytes()
    assert sorted(p.name for p in (tmp_path / "o").iterdir()) == sorted(p.name for p in (tmp_path / "one").iterdir())


@pytest.mark.parametrize("committed", [True, False])
def test_an_earlier_runs_shards_go_when_a_merge_in_parts_was_committed_before_a_signal(tmp_path, monkeypatch, committed):
    """The new merged set's meta.json no longer names them; before the commit they stay (still the set)."""
    from types import SimpleNamespace

    from winsample import formats
    from winsample.encode.executors import local, ray_parts

    out = tmp_path / "o"
    (out / formats.SHARDS_DIR).mkdir(parents=True)

    def run_prepared(setup, pool, progress=None):
        raise Interrupted(signal.SIGTERM, committed=str(out) if committed else None)

    monkeypatch.setattr(local, "run_prepared", run_prepared)
    ray = SimpleNamespace(cluster_resources=lambda: {"CPU": 2})
    with pytest.raises(Interrupted):
        ray_parts.run_parts_on_ray(ray, SimpleNamespace(out_dir=out, workers=2), None)
    assert (out / formats.SHARDS_DIR).exists() == (not committed)
