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


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_and_sighup_during_encode_exit_128_plus_n(tmp_path, sig):
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
    r = subprocess.run([sys.executable, "-c", script, str(CORPUS), str(tmp_path / "out")], capture_output=True,
                       text=True, timeout=120, env=env)
    assert r.returncode == 128 + sig, r.stderr
    assert r.stderr.strip().endswith(f"interrupted by {signal.Signals(sig).name}; nothing was written")
    assert "Traceback" not in r.stderr and not (tmp_path / "out" / "meta.json").exists()
