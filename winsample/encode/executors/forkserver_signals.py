"""Imported once by the forkserver process that starts encode's workers where fork cannot (its preload).

A signal sent to the whole process group (a closed terminal's SIGHUP, a service manager's
SIGTERM) ended the server too, and the pool, asking it for a worker in place of one the same
signal ended, printed a ConnectionRefusedError traceback. The server ignores both; it ends with
the main process, when its end of the server's pipe closes. Workers set their own handlers
(``pool.worker_started``)."""

import signal

signal.signal(signal.SIGTERM, signal.SIG_IGN)
if hasattr(signal, "SIGHUP"):
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
