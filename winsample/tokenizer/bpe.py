"""winsample.tokenizer.bpe."""

from __future__ import annotations

import base64
import binascii
import functools
import gzip
import hashlib
import os
import stat
import zlib
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

import numpy as np
import tiktoken
from tiktoken_ext import openai_public

from ..errors import ConfigError, DataError, InputError
from .base import Tokenizer, dist_version, reduce_keeping_eot

DEFAULT_ENCODING = "gpt2"
FAMILIES = ("tiktoken", "hf", "sentencepiece")  # meta.json's tokenizer.family (absent: tiktoken)
GPT2_RANKS_SHA256 = "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930"
ENDOFTEXT = "<|endoftext|>"


def pattern_of(constructor) -> str:
    """The pre-tokenizer regex of a tiktoken_ext constructor, without loading its ranks."""
    real = openai_public.load_tiktoken_bpe
    openai_public.load_tiktoken_bpe = lambda *a, **k: {}
    try:
        return constructor()["pat_str"]
    finally:
        openai_public.load_tiktoken_bpe = real


PATTERNS = {
    "gpt2": openai_public.r50k_pat_str,
    "cl100k": pattern_of(openai_public.cl100k_base),
    "o200k": pattern_of(openai_public.o200k_base),
}


MAX_RANK = (1 << 31) - 1  # token ids are stored as uint32 at most; tiktoken's Rank is a u32


def parse_ranks(data: bytes, where: str) -> dict[bytes, int]:
    """Parse a ``.tiktoken`` ranks file: one ``base64(token) rank`` pair per line."""
    ranks = {}
    b64 = binascii.a2b_base64  # the C call under base64.b64decode, without its per-call checks
    lines = 0
    try:
        for line in data.splitlines():
            if line:
                token, rank = line.split()
                ranks[b64(token)] = int(rank)
                lines += 1
    except (ValueError, binascii.Error):
        raise ConfigError(f"{where}: not a .tiktoken ranks file (expected 'base64 rank' lines)") from None
    if not ranks:
        raise ConfigError(f"{where}: empty ranks file")
    # what tiktoken's and gigatoken's Rust would otherwise panic or overflow on, said in one line
    if lines != len(ranks):
        raise ConfigError(f"{where}: a token appears on {lines - len(ranks)} more line(s) than once: not a ranks file")
    values = list(ranks.values())
    lo, hi = min(values), max(values)
    if lo < 0 or hi > MAX_RANK:
        raise ConfigError(f"{where}: rank {lo if lo < 0 else hi} is outside [0, {MAX_RANK}]: not a ranks file")
    if len(set(values)) != len(values):
        seen: set[int] = set()
        dup = next(v for v in ranks.values() if v in seen or seen.add(v))
        raise ConfigError(f"{where}: rank {dup} is given to two tokens: not a ranks file")
    return ranks


MAX_TOKENIZER_BYTES = 256 << 20  # the largest real vocabularies are tens of MB; a file past this is not one
_GUNZIP_STEP = 16 << 20  # unpacked per step: a gzip bomb costs at most the bound plus this


def read_ranks_file(path: str | Path) -> bytes:
    """The bytes of a tokenizer file (gunzipped when it is gzip), at most MAX_TOKENIZER_BYTES
    read or unpacked: a huge (or sparse) file or a gzip bomb is refused, not read whole.
    InputError when it cannot be read, ConfigError when it is too large or broken gzip."""
    path = Path(path)
    try:
        # O_NONBLOCK and a regular-file check before reading: a FIFO or device must not block
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise InputError(f"{path}: not a regular file; expected a tokenizer file")
            if st.st_size > MAX_TOKENIZER_BYTES:  # before reading a byte (a sparse file reads as zeros)
                raise ConfigError(f"{path}: larger than {MAX_TOKENIZER_BYTES >> 20} MiB: not a tokenizer file (real ones are tens of MB)")
            os.set_blocking(fd, True)
            with os.fdopen(fd, "rb") as f:
                fd = None
                data = f.read(MAX_TOKENIZER_BYTES + 1)
        finally:
            if fd is not None:
                os.close(fd)
    except FileNotFoundError:
        raise InputError(f"{path}: no such tokenizer file") from None
    except OSError as e:
        raise InputError(f"{path}: cannot read tokenizer file: {e.strerror}") from None
    too_big = f"{path}: larger than {MAX_TOKENIZER_BYTES >> 20} MiB{{}}: not a tokenizer file (real ones are tens of MB)"
    if len(data) > MAX_TOKENIZER_BYTES:
        raise ConfigError(too_big.format(""))
    if data[:2] == b"\x1f\x8b":
        out, rest = [], data
        size = 0
        try:
            while rest:  # each gzip member, unpacked a step at a time up to the limit
                d = zlib.decompressobj(wbits=31)
                while rest and not d.eof:
                    out.append(d.decompress(rest, _GUNZIP_STEP))
                    size += len(out[-1])
                    if size > MAX_TOKENIZER_BYTES:
                        raise ConfigError(too_big.format(" unpacked"))
                    rest = d.unconsumed_tail
                    if not out[-1] and rest:  # no progress with input left: cannot happen with zlib, but never spin
                        raise ConfigError(f"{path}: broken gzip: no progress")
                if not d.eof:
                    raise ConfigError(f"{path}: broken gzip: the stream ends before its end marker")
                rest = d.unused_data
        except zlib.error as e:
            raise ConfigError(f"{path}: broken gzip: {e}") from None
        data = b"".join(out)
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


def ranks_file_bytes(enc: tiktoken.Encoding) -> bytes:
    """``enc``'s ranks written as a .tiktoken file (what ``ranks_sha256`` hashes)."""
    b64 = base64.b64encode
    return b"".join(b64(t) + b" %d\n" % r for t, r in sorted(enc._mergeable_ranks.items(), key=lambda kv: kv[1]))


def gpt2_from_ranks(ranks_data: bytes, name: str = "gpt2", expected_sha256: str = GPT2_RANKS_SHA256) -> tiktoken.Encoding:
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
        ranks = parse_ranks(read_ranks_file(tokenizer_file), str(tokenizer_file))
        check_byte_coverage(ranks, str(tokenizer_file))
        return tiktoken.Encoding(
            name=Path(tokenizer_file).name.split(".")[0],
            pat_str=PATTERNS[pattern],
            mergeable_ranks=ranks,
            special_tokens={ENDOFTEXT: max(ranks.values()) + 1},
        )
    if name in ("gpt2", "r50k_base"):
        return gpt2_from_ranks(bundled_gpt2_ranks(), name)
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


# --- the interface ------------------------------------------------------------------------


class TiktokenTokenizer(Tokenizer):
    """A ``tiktoken.Encoding`` behind the interface; ``encoding`` is the raw object."""

    family = "tiktoken"

    def __init__(self, encoding: tiktoken.Encoding, name: str, options: tuple, file: str | None = None, pattern: str | None = None):
        self.encoding = encoding
        self.name = name
        self.n_vocab = encoding.n_vocab
        self.eot = encoding.eot_token
        self.bos = encoding.eot_token  # <|endoftext|> marks document starts too (llm.c, modded-nanogpt)
        self._options = options  # load()'s arguments: what a pickled copy reloads from
        self._file, self._pattern = file, pattern

    def encode(self, text: str) -> np.ndarray:
        try:
            # encode with no special tokens allowed == encode_ordinary, minus the list copy.
            return self.encoding.encode_to_numpy(text, allowed_special=set(), disallowed_special=())
        except UnicodeEncodeError:  # lone surrogates: tiktoken's own fallback in encode_ordinary
            return np.asarray(self.encoding.encode_ordinary(text), dtype=np.uint32)

    def decode_bytes(self, ids: Sequence[int]) -> bytes:
        return self.encoding.decode_bytes(ids)

    def token_bytes(self, token: int) -> bytes:
        return self.encoding.decode_single_token_bytes(token)

    def vocab_bytes(self) -> list[bytes]:
        """Built once per tokenizer, from the ranks tiktoken decodes with (~5 ms for GPT-2's
        50,257 ids; asking tiktoken for each takes ~0.07 s); the list is shared: do not change it."""
        if getattr(self, "_vocab", None) is None:
            enc = self.encoding
            table: list = [None] * self.n_vocab
            for token, rank in enc._mergeable_ranks.items():
                if rank < len(table):
                    table[rank] = token
            for text, rank in enc._special_tokens.items():
                if rank < len(table) and table[rank] is None:  # tiktoken decodes a shared id as the ranks' bytes
                    table[rank] = text.encode("utf-8")
            for i in (i for i, b in enumerate(table) if b is None):  # holes: as tiktoken answers them
                try:
                    table[i] = self.token_bytes(i)
                except KeyError:
                    table[i] = b""
            self._vocab = table
        return self._vocab

    @functools.cached_property
    def sha256(self) -> str:
        return ranks_sha256(self.encoding)

    def describe(self) -> dict:
        entry = {"name": self.name, "ranks_sha256": self.sha256, "n_vocab": self.n_vocab, "eot": self.eot}
        if self._file is not None:
            entry.update(file=self._file, pattern=self._pattern)
        return entry

    def engine(self) -> str:
        return f"tiktoken {dist_version('tiktoken')}"

    def fast_engine(self):
        from . import fastengine

        pattern = {v: k for k, v in PATTERNS.items()}.get(self.encoding._pat_str)
        name, file, _ = self._options
        if file is None and name in ("gpt2", "r50k_base"):
            data = bundled_gpt2_ranks()  # the bytes whose sha256 was checked when this tokenizer loaded
        else:  # the ranks as loaded (a file re-read now could have changed meanwhile)
            data = ranks_file_bytes(self.encoding)
        return fastengine.tiktoken_engine(data, pattern)

    def special_texts(self) -> list[str]:
        return sorted(self.encoding._special_tokens)

    def token_id(self, text: str) -> int | None:
        try:
            return self.encoding.encode_single_token(text)  # special tokens included
        except KeyError:
            return None

    def __reduce__(self):
        from .load import load  # load imports this module

        return reduce_keeping_eot(self, load, self._options)


def check_byte_coverage(ranks: dict[bytes, int], where: str) -> None:
    """ConfigError unless every one of the 256 single bytes has a rank: tiktoken's BPE starts
    from single bytes and panics (in Rust, in a worker: a hang) on text holding a missing one."""
    missing = [b for b in range(256) if bytes([b]) not in ranks]
    if missing:
        shown = ", ".join(f"0x{b:02x}" for b in missing[:4]) + (", …" if len(missing) > 4 else "")
        raise ConfigError(
            f"{where}: the ranks cover {256 - len(missing)} of the 256 single bytes (missing {shown}):"
            " not a complete byte-level BPE vocabulary, tiktoken cannot encode text holding those bytes"
        )


# --- compatibility: the tiktoken-level helpers tests and benchmarks use -----------------------


def eot_token(enc) -> int:
    """The id appended after each document (``<|endoftext|>``)."""
    return enc.eot if isinstance(enc, Tokenizer) else enc.eot_token


def describe(enc, name: str | None = None) -> dict:
    """The tokenizer entry of meta.json: name, ranks sha256, n_vocab, eot."""
    if isinstance(enc, Tokenizer):
        return enc.describe()
    return {"name": name or enc.name, "ranks_sha256": ranks_sha256(enc), "n_vocab": enc.n_vocab, "eot": enc.eot_token}
