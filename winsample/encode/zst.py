"""Zstandard inputs (``*.zst``: the Pile, Dolma, RedPajama): a streaming reader, like ``.gz``.

Python 3.14 has the decompressor (``compression.zstd``); before it, the ``zstd`` extra installs
its backport (``backports.zstd``), the same API. A file of several frames (the Pile and Dolma
write such files) reads whole, frame after frame; a truncated or corrupt stream raises an error
of ``ERRORS`` or ``EOFError``.
"""

from __future__ import annotations

from ..errors import ConfigError

WINDOW_LOG_MAX = 31  # accept frames made with `zstd --long=31` (2 GiB window); the default stops at 2^27


def module(label: str):
    """The zstd module (``compression.zstd`` or its backport); ConfigError naming the extra without one."""
    try:
        from compression import zstd  # Python >= 3.14
    except ImportError:
        try:
            from backports import zstd
        except ImportError:
            raise ConfigError(f"{label}: reading .zst needs a zstd decompressor: pip install 'winsample[zstd]'") from None
    return zstd


def open_zst(raw, label: str):
    """A readable binary stream of the decompressed bytes of the open file ``raw``, and the
    exceptions (besides ``OSError``, ``EOFError``) its reads raise on bad data."""
    zstd = module(label)
    options = {zstd.DecompressionParameter.window_log_max: WINDOW_LOG_MAX}
    return zstd.ZstdFile(raw, "rb", options=options), (zstd.ZstdError,)
