"""Signals end the process with one line and 128 + N, wherever they land (#29, class 4)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from winsample.errors import Interrupted, WinsampleError
from winsample.tokenizer import fastengine

from ..conftest import CORPUS

# a Ctrl-C delivered at an exact point of the CLI's start: when numpy is first imported, which
# happens while winsample's command modules load (the first ~0.3 s of a run)
EARLY_SIGINT = textwrap.dedent("""
    import builtins, os, signal, sys
    real_import = builtins.__import__
    def hook(name, *args, **kwargs):
        if name == "numpy" and "numpy" not in sys.modules:
            builtins.__import__ = real_import
            os.kill(os.getpid(), signal.SIGINT)
        return real_import(name, *args, **kwargs)
    builtins.__import__ = hook
    sys.argv = ["winsample", "encode", sys.argv[1], "-o", sys.argv[2], "-q"]
    from winsample.cli import entry
    entry()
""")


def test_ctrl_c_while_the_cli_is_still_loading_is_one_line_and_exit_130(tmp_path):
    r = subprocess.run([sys.executable, "-c", EARLY_SIGINT, str(CORPUS), str(tmp_path / "out")],
                       capture_output=True, text=True, timeout=60,
                       preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert r.returncode == 130, r.stderr
    assert r.stderr == "error: interrupted by SIGINT; nothing was written\n" and r.stdout == ""
    assert not (tmp_path / "out").exists()


def test_an_interrupt_is_no_exception_a_fallback_could_swallow():
    # every `except Exception` (fallbacks, retries, "show it anyway") lets a signal through
    assert not issubclass(Interrupted, Exception) and not issubclass(Interrupted, WinsampleError)
    assert issubclass(Interrupted, KeyboardInterrupt)


def test_sigterm_in_the_fast_engines_self_check_ends_the_run_instead_of_a_fallback():
    def engine(text):
        raise Interrupted(signal.SIGTERM)  # what the SIGTERM handler raises, wherever it lands

    # an engine that fails is "not the reference" (a fallback); a signal inside it is not a failure
    with pytest.raises(Interrupted) as e:
        fastengine.self_check(lambda t: [1], engine, utf8=True)
    assert e.value.exit_code == 143

    def batch_engine(texts):
        raise Interrupted(signal.SIGHUP)

    with pytest.raises(Interrupted):
        fastengine.self_check(lambda t: [1], lambda t: [1], batches=batch_engine)


def sighup_as(disposition):
    """A child's SIGHUP set to ``disposition`` before it runs: a suite started under ``nohup``
    passes SIG_IGN on, and winsample then ignores SIGHUP on purpose (the next test)."""
    return lambda: signal.signal(signal.SIGHUP, disposition)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_and_sighup_during_encode_exit_128_plus_n(tmp_path, sig):
    r = _encode_signalled(tmp_path, sig, signal.SIG_DFL)
    assert r.returncode == 128 + sig, r.stderr
    assert r.stderr.strip().endswith(f"interrupted by {signal.Signals(sig).name}; nothing was written")
    assert "Traceback" not in r.stderr and not (tmp_path / "out" / "meta.json").exists()


def test_under_nohup_sighup_is_ignored_and_the_encode_finishes(tmp_path):
    """``nohup winsample encode …``: SIGHUP ignored when the run starts stays ignored (a closed
    terminal must not end a run its user detached), so the data set is written, exit 0."""
    r = _encode_signalled(tmp_path, signal.SIGHUP, signal.SIG_IGN)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out" / "meta.json").exists()


def _encode_signalled(tmp_path, sig, sighup):
    """encode of the corpus in a child whose SIGHUP starts as ``sighup``, sent ``sig`` inside the self-check."""
    script = textwrap.dedent(f"""
        import os, signal, sys
        from winsample.tokenizer import fastengine
        real = fastengine.self_check
        def check(*args, **kwargs):
            os.kill(os.getpid(), {int(sig)})  # lands inside the self-check
            return real(*args, **kwargs)
        fastengine.self_check = check
        sys.argv = ["winsample", "encode", sys.argv[1], "-o", sys.argv[2], "-q", "--backend", "fast"]
        from winsample.cli import entry
        entry()
    """)
    env = dict(os.environ, WINSAMPLE_CACHE_DIR=str(tmp_path / "cache"))  # a cache folder of its own: nothing of other runs
    return subprocess.run([sys.executable, "-c", script, str(CORPUS), str(tmp_path / "out")], capture_output=True,
                          text=True, timeout=120, env=env, preexec_fn=sighup_as(sighup))


# a run whose exit handlers take a while (one registered by the script, as a library may do):
# it writes a mark when they begin, the test signals it there
LATE_SIGNAL = textwrap.dedent("""
    import atexit, pathlib, sys, time
    mark, seconds = pathlib.Path(sys.argv[3]), float(sys.argv[4])
    def slow_cleanup():
        mark.write_text("begun")
        time.sleep(seconds)
        mark.write_text("done")
    atexit.register(slow_cleanup)
    sys.argv = ["winsample", "encode", sys.argv[1], "-o", sys.argv[2], "--workers", "1", "--split", "tail", "-q"]
    from winsample.cli import entry
    entry()
""")


def _signal_at_exit(tmp_path, seconds: float, signals: int) -> tuple[subprocess.CompletedProcess, float]:
    import time

    mark = tmp_path / "mark"
    run = subprocess.Popen([sys.executable, "-c", LATE_SIGNAL, str(CORPUS / "sonnets.txt"), str(tmp_path / "out"),
                            str(mark), str(seconds)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not mark.exists():
        assert time.monotonic() < deadline and run.poll() is None, run.communicate()
        time.sleep(0.01)
    sent = time.monotonic()
    for _ in range(signals):
        run.send_signal(signal.SIGTERM)
        time.sleep(0.2)
    out, err = run.communicate(timeout=60)
    return subprocess.CompletedProcess(run.args, run.returncode, out, err), time.monotonic() - sent


def test_a_sigterm_after_the_command_finished_lets_the_exit_handlers_end_and_keeps_its_exit_code(tmp_path):
    """The run is done (its set committed) when the exit handlers run: a signal then is no failure.
    Before: Python's finalization put the default action back, and a signal in the teardown after
    it killed a finished run without a word (-15); one inside an exit handler printed a traceback."""
    r, _ = _signal_at_exit(tmp_path, 1.0, signals=1)
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")
    assert (tmp_path / "mark").read_text() == "done" and (tmp_path / "out" / "meta.json").exists()


def test_a_second_sigterm_while_the_exit_handlers_run_ends_the_process_at_once(tmp_path):
    r, seconds = _signal_at_exit(tmp_path, 60.0, signals=2)
    assert r.returncode == 128 + signal.SIGTERM and seconds < 30
    assert (tmp_path / "mark").read_text() == "begun"


def test_a_signal_while_encode_prints_its_report_says_the_set_was_committed_whole(tmp_path):
    script = textwrap.dedent("""
        import os, signal, sys
        from winsample.cli import render
        real = render.encode_summary
        def summary(*args, **kwargs):
            os.kill(os.getpid(), signal.SIGTERM)  # lands while the report is being made, after the commit
            return real(*args, **kwargs)
        render.encode_summary = summary
        sys.argv = ["winsample", "encode", sys.argv[1], "-o", sys.argv[2], "--workers", "1", "--split", "tail"]
        from winsample.cli import entry
        entry()
    """)
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-c", script, str(CORPUS / "sonnets.txt"), str(out)], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 143 and r.stdout == ""
    assert r.stderr.splitlines()[-1] == f"error: interrupted by SIGTERM; {out} was committed whole before it arrived"
    assert (out / "meta.json").exists()


def test_a_signal_after_the_engine_committed_is_reported_as_after_the_commit(tmp_path, monkeypatch):
    """Whichever step of an engine a signal cuts short after meta.json went in (the summary here),
    ``encode.run`` says the set was committed whole; before it, nothing was written."""
    from winsample import encode
    from winsample.encode import pipeline

    def summary(*args, **kwargs):
        raise Interrupted(signal.SIGTERM)  # what the CLI's handler raises where the signal lands

    monkeypatch.setattr(pipeline, "summary", summary)
    config = encode.EncodeConfig((str(CORPUS / "sonnets.txt"),), tmp_path / "out", workers=1, split="tail")
    with pytest.raises(Interrupted) as e:
        encode.run(config)
    assert e.value.committed == str(tmp_path / "out") and (tmp_path / "out" / "meta.json").exists()
    assert str(e.value).endswith("committed whole before it arrived")
    with pytest.raises(Interrupted) as e:  # the same set again: meta.json replaced by the new commit
        encode.run(config)
    assert e.value.committed == str(tmp_path / "out")


def test_a_signal_before_the_commit_is_not_taken_for_one_after_it_when_an_earlier_commit_was_finished(tmp_path, monkeypatch):
    """A run first finishes the moves of an earlier run killed mid-commit (``formats.recover``):
    that brings in another meta.json, written before this run began. A signal before this run's
    own commit still says nothing was written (found by a review: it said "committed whole")."""
    import json
    import os
    import shutil

    from winsample import encode
    from winsample.encode.executors import local

    out = tmp_path / "out"
    config = encode.EncodeConfig((str(CORPUS / "sonnets.txt"),), out, workers=1, split="tail")
    encode.run(config)
    stage = out / ".winsample-staging"  # what a run killed after writing its COMMIT mark leaves
    stage.mkdir()
    names = sorted(p.name for p in out.iterdir() if p.is_file() and p.suffix in (".bin", ".npy")) + ["meta.json"]
    for name in names:
        shutil.copy(out / name, stage / name)
        os.utime(stage / name, (1e9, 1e9))  # written by that run, long before this one
    (stage / "COMMIT").write_text(json.dumps(names))

    def stage_set(*args, **kwargs):
        raise Interrupted(signal.SIGTERM)  # lands in this run, before its commit

    monkeypatch.setattr(local, "_stage", stage_set)
    with pytest.raises(Interrupted) as e:
        encode.run(config)
    assert e.value.committed is None and str(e.value) == "interrupted by SIGTERM; nothing was written"
    assert not stage.exists() and (out / "meta.json").stat().st_mtime == 1e9  # the earlier set, moved in whole


def test_the_cli_ends_though_a_library_left_a_thread_pool_running(tmp_path):
    """A thread pool nobody shut down ends at exit as Python ends it (its idle workers are told
    to stop): found by a review, where the CLI's own exit joined them and waited forever."""
    script = textwrap.dedent("""
        import sys
        from concurrent.futures import ThreadPoolExecutor
        POOL = ThreadPoolExecutor(1)
        POOL.submit(print, "task ran", file=sys.stderr).result()
        sys.argv = ["winsample", "--version"]
        from winsample.cli import entry
        entry()
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert (r.returncode, r.stderr) == (0, "task ran\n") and r.stdout.startswith("winsample ")
