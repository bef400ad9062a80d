"""Tokenizers: GPT-2 offline from ranks shipped in the package, any tiktoken name, custom ranks.

``load_encoding()`` returns a plain ``tiktoken.Encoding``. ``gpt2`` (the default everywhere)
never touches the network: its BPE ranks ship as ``assets/gpt2.tiktoken.gz`` and their sha256
is checked on every load against tiktoken's own expected hash.
"""

from __future__ import annotations

import base64
import binascii
import functools
import gzip
import hashlib
from importlib import resources
from pathlib import Path

import tiktoken
from tiktoken_ext import openai_public

from .errors import ConfigError, DataError, InputError

DEFAULT_ENCODING = "gpt2"
GPT2_RANKS_SHA256 = "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930"
ENDOFTEXT = "<|endoftext|>"


def _pattern_of(constructor) -> str:
    """The pre-tokenizer regex of a tiktoken_ext constructor, without loading its ranks."""
    real = openai_public.load_tiktoken_bpe
    openai_public.load_tiktoken_bpe = lambda *a, **k: {}
    try:
        return constructor()["pat_str"]
    finally:
        openai_public.load_tiktoken_bpe = real


PATTERNS = {
    "gpt2": openai_public.r50k_pat_str,
    "cl100k": _pattern_of(openai_public.cl100k_base),
    "o200k": _pattern_of(openai_public.o200k_base),
}


def parse_ranks(data: bytes, where: str) -> dict[bytes, int]:
    """Parse a ``.tiktoken`` ranks file: one ``base64(token) rank`` pair per line."""
    ranks = {}
    b64 = binascii.a2b_base64  # the C call under base64.b64decode, without its per-call checks
    try:
        for line in data.splitlines():
            if line:
                token, rank = line.split()
                ranks[b64(token)] = int(rank)
    except (ValueError, binascii.Error):
        raise DataError(f"{where}: not a .tiktoken ranks file (expected 'base64 rank' lines)") from None
    if not ranks:
        raise DataError(f"{where}: empty ranks file")
    return ranks


def _read_ranks_file(path: str | Path) -> bytes:
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{path}: no such tokenizer file") from None
    except OSError as e:
        raise InputError(f"{path}: cannot read tokenizer file: {e.strerror}") from None
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as e:
            raise DataError(f"{path}: broken gzip: {e}") from None
    return data


# sha256 of the ranks of encodings built here from a file whose hash was just checked: id → hex.
_KNOWN_SHA256: dict[int, str] = {}


def ranks_sha256(enc: tiktoken.Encoding) -> str:
    """sha256 of ``enc``'s ranks written as a .tiktoken file — equals the file's own sha256."""
    if id(enc) in _KNOWN_SHA256:  # load_encoding's cache keeps these encodings (and ids) alive
        return _KNOWN_SHA256[id(enc)]
    h = hashlib.sha256()
    for token, rank in sorted(enc._mergeable_ranks.items(), key=lambda kv: kv[1]):
        h.update(base64.b64encode(token) + b" " + str(rank).encode() + b"\n")
    return h.hexdigest()


def _gpt2(ranks_data: bytes, name: str = "gpt2", expected_sha256: str = GPT2_RANKS_SHA256) -> tiktoken.Encoding:
    digest = hashlib.sha256(ranks_data).hexdigest()
    if digest != expected_sha256:
        raise DataError(
            f"bundled GPT-2 ranks have sha256 {digest}, expected {expected_sha256}: the installed"
            " package is damaged; reinstall winsample"
        )
    ranks = parse_ranks(ranks_data, "gpt2 ranks")
    # Built exactly as tiktoken_ext.openai_public.gpt2() builds it.
    enc = tiktoken.Encoding(
        name=name,
        explicit_n_vocab=50257,
        pat_str=openai_public.r50k_pat_str,
        mergeable_ranks=ranks,
        special_tokens={ENDOFTEXT: 50256},
    )
    _KNOWN_SHA256[id(enc)] = digest  # the file's hash is the ranks' hash: no need to recompute it
    return enc


def bundled_gpt2_ranks() -> bytes:
    return gzip.decompress(resources.files("winsample").joinpath("assets/gpt2.tiktoken.gz").read_bytes())


@functools.lru_cache(maxsize=8)
def load_encoding(
    name: str = DEFAULT_ENCODING, tokenizer_file: str | None = None, pattern: str = "gpt2"
) -> tiktoken.Encoding:
    """The encoding called ``name``, or custom ranks from ``tokenizer_file``.

    - ``gpt2`` / ``r50k_base``: from the bundled ranks, offline, hash-checked.
    - other tiktoken names: ``tiktoken.get_encoding`` (needs its cache or the network).
    - ``tokenizer_file``: a ``.tiktoken`` ranks file (optionally gzipped); ``pattern`` picks the
      pre-tokenizer (gpt2, cl100k, o200k); ``<|endoftext|>`` gets the id after the last rank.
    """
    if tokenizer_file is not None:
        if pattern not in PATTERNS:
            raise ConfigError(f"unknown pattern {pattern!r}: choose one of {', '.join(PATTERNS)}")
        ranks = parse_ranks(_read_ranks_file(tokenizer_file), str(tokenizer_file))
        return tiktoken.Encoding(
            name=Path(tokenizer_file).name.split(".")[0],
            pat_str=PATTERNS[pattern],
            mergeable_ranks=ranks,
            special_tokens={ENDOFTEXT: max(ranks.values()) + 1},
        )
    if name in ("gpt2", "r50k_base"):
        return _gpt2(bundled_gpt2_ranks(), name)
    if name not in tiktoken.list_encoding_names():
        known = ", ".join(sorted(tiktoken.list_encoding_names()))
        raise ConfigError(f"unknown encoding {name!r}: choose one of {known}, or pass --tokenizer-file")
    try:
        return tiktoken.get_encoding(name)
    except Exception as e:  # requests/urllib errors, hash mismatches: tiktoken raises many kinds
        raise ConfigError(
            f"cannot load encoding {name!r} ({type(e).__name__}): it needs its ranks file in"
            " TIKTOKEN_CACHE_DIR or network access; or pass --tokenizer-file PATH.tiktoken"
        ) from None


def eot_token(enc: tiktoken.Encoding) -> int:
    """The id appended after each document (``<|endoftext|>``)."""
    return enc.eot_token


def describe(enc: tiktoken.Encoding, name: str | None = None) -> dict:
    """The tokenizer entry of meta.json: name, ranks sha256, n_vocab, eot id."""
    return {
        "name": name or enc.name,
        "ranks_sha256": ranks_sha256(enc),
        "n_vocab": enc.n_vocab,
        "eot": enc.eot_token,
    }
