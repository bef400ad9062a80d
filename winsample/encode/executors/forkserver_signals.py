"""Imported once by the forkserver process that starts encode's workers where fork cannot (its preload).

A signal sent to the whole process group (a closed terminal's SIGHUP, a service manager's
SIGTERM) ended the server too, and the pool, asking it for a worker in place of one the same
signal ended, printed a ConnectionRefusedError traceback. The server holds both (blocked, not
ignored: a worker it forks inherits the mask, and a SIGTERM sent to that worker before its own
handlers are set waits for them instead of being lost, as ``Pool.terminate()`` needs). It ends
with the main process, when the main process's end of its pipe closes."""

import signal

if hasattr(signal, "pthread_sigmask"):
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGHUP})
