"""The driver's Ray cluster: imported, joined (or started for one run) and left, with the
CLI's signal handling kept throughout (``on_cluster``). Ray is imported only here, inside
functions: ``import winsample`` never loads it."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading

from ...errors import ConfigError, Interrupted
from ...terminal import stderr_held
from ..config import EncodeConfig

INSTALL_HINT = "pip install 'winsample[ray]'"
LEVEL_NOTICE = b"Set ray log level from environment variable RAY_BACKEND_LOG_LEVEL"


def import_ray():
    """The ray module, or ConfigError naming the extra to install.

    Ray's failure-signal handler (C++, installed as ``ray.init`` connects, and reset to the
    default action by ``ray.shutdown``) takes SIGTERM too: a signal in that window printed a stack
    and aborted, and after the run the CLI's handler was gone. It is off unless the environment
    asks for it (``RAY_DISABLE_FAILURE_SIGNAL_HANDLER=0``); Ray reads the variable on import.
    The driver's own C++ log lines (an error line when a cancelled task's failure reaches it) went
    to stderr beside the run's one line: only fatal ones do, unless RAY_BACKEND_LOG_LEVEL says
    otherwise (Ray's notice that it read the variable is dropped: ``_without_level_notice``). A
    cluster of our own inherits it: its session logs hold fatal lines only (docs/scale-out.md)."""
    os.environ.setdefault("RAY_DISABLE_FAILURE_SIGNAL_HANDLER", "1")
    os.environ.setdefault("RAY_BACKEND_LOG_LEVEL", "fatal")  # the driver's C++ errors (a cancelled task's) are not the run's line
    try:
        import ray
    except ImportError:
        raise ConfigError(f"--engine ray needs Ray, which is not installed: {INSTALL_HINT}") from None
    return ray


def on_cluster(ray, config: EncodeConfig, work, commits: bool = True):
    """``work()`` on the cluster at ``config.address``, or on a local one started (and stopped) for it.

    ``commits``: ``work`` commits the output (a signal after it says the output is whole);
    otherwise the caller commits after this returns.

    Signals (SIGTERM, SIGINT, SIGHUP, where the caller handles them, as the CLI does) are held
    while a cluster of our own starts and while any cluster is left, then raised as
    ``Interrupted``: cut short, either left Ray's processes running (its agents outlived the run)
    and the driver crashing at exit. A second signal ends the wait at once, so a start or a
    shutdown that hangs still ends. Joining a cluster at ``--address`` starts no process: a
    signal there ends the run at once."""
    if ray.is_initialized():  # a cluster the caller joined: theirs to leave
        return work()
    handlers = _python_handlers()
    left = done = False
    try:
        with _held(handlers if not config.address else {}) as held, _ray_leaves_sigterm_alone(handlers):
            try:
                with _without_level_notice():
                    if config.address:
                        ray.init(address=config.address, log_to_driver=False, logging_level=logging.WARNING)
                    else:
                        # address "local": a cluster of its own even where one runs here already (that one is --address auto's)
                        _quiet_token_notice()
                        ray.init(address="local", num_cpus=config.workers or os.cpu_count() or 1, include_dashboard=False,
                                 log_to_driver=False, logging_level=logging.WARNING)
            except Exception:
                if held:  # the signal held is why the run ends, not what the init met after it
                    raise Interrupted(held[0]) from None
                raise
        _restore(handlers)  # Ray's driver handlers, where it could set them, give way to the caller's
        if held:
            raise Interrupted(held[0])
        result = work()
        done = left = True  # left: a second signal during the shutdown ends the run without another
        signum = _shutdown(ray, handlers)
        if signum is not None:
            raise Interrupted(signum, committed=str(config.out_dir) if commits else None)
        return result
    except (SystemExit, KeyboardInterrupt) as e:
        # Ray's own handler (sys.exit(15)) where it could not be kept off, or a signal outside the held parts
        if not left:
            _shutdown(ray, handlers)
        if isinstance(e, SystemExit):
            if e.code != signal.SIGTERM:
                raise
            raise Interrupted(signal.SIGTERM) from None
        if done and commits:
            raise Interrupted.after_commit(e, str(config.out_dir)) from None
        raise
    except BaseException:
        if not left:
            _shutdown(ray, handlers)
        raise


def _shutdown(ray, handlers: dict) -> int | None:
    """``ray.shutdown()`` with the signals of ``handlers`` held; returns the first one held (None: none came)."""
    with _held(handlers) as held:
        ray.shutdown()
    return held[0] if held else None


@contextlib.contextmanager
def _held(handlers: dict):
    """The signals of ``handlers`` held while the body runs: the first is recorded in the list
    yielded, a second raises ``Interrupted`` at once. The handlers are back afterwards."""
    held: list[int] = []

    def hold(signum, frame):
        if held:
            raise Interrupted(signum)
        held.append(signum)

    for signum in handlers:
        signal.signal(signum, hold)
    try:
        yield held
    finally:
        _restore(handlers)


@contextlib.contextmanager
def _ray_leaves_sigterm_alone(handlers: dict):
    """Ray's init puts a SIGTERM handler of its own (``sys.exit(15)``) in place of the caller's, as
    it starts: kept off while it runs (the CLI's handler is put back after it anyway). Where a Ray
    version has no such hook, its handler stays, and ``on_cluster`` takes the ``SystemExit``."""
    try:
        import importlib

        utils = importlib.import_module("ray._private.utils")
    except ImportError:
        utils = None
    setter = getattr(utils, "set_sigterm_handler", None)
    if setter is None or not handlers:  # no handler of the caller's to keep (not the main thread: no patch)
        yield
        return
    utils.set_sigterm_handler = lambda handler: None
    try:
        yield
    finally:
        utils.set_sigterm_handler = setter


def _without_level_notice():
    """Standard error held while ``ray.init`` runs, then written out less the line Ray's C++
    logging prints when it reads RAY_BACKEND_LOG_LEVEL (``import_ray`` sets it)."""
    return stderr_held(lambda data, ok: b"".join(line for line in data.splitlines(keepends=True) if LEVEL_NOTICE not in line))


def _quiet_token_notice() -> None:
    """Drop Ray's notice that a new local cluster uses token authentication (Ray's default, kept):
    it would be printed on every run of a cluster of our own. Its warning that a cluster runs
    *without* authentication still shows."""
    logging.getLogger("ray._private.authentication.authentication_token_setup").addFilter(_not_token_enabled)


def _not_token_enabled(record: logging.LogRecord) -> bool:
    return not str(record.msg).startswith("Token authentication is enabled for this Ray cluster")


def _restore(handlers: dict) -> None:
    for signum, handler in handlers.items():
        signal.signal(signum, handler)


def _python_handlers() -> dict:
    """The Python handlers of SIGTERM, SIGINT and SIGHUP (this thread the main one), to put back."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    sigs = [signal.SIGTERM, signal.SIGINT] + ([signal.SIGHUP] if hasattr(signal, "SIGHUP") else [])
    return {s: h for s in sigs if callable(h := signal.getsignal(s))}
