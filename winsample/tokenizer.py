"""Tokenizers: winsample's own ``Tokenizer`` interface, and the tiktoken family behind it.

Every part of winsample that needs a tokenizer (encode, the chunker, windows' semantic edges,
verify, inspect) holds a :class:`Tokenizer`, never a library's own object. Load one with
:func:`load` (from options: ``--encoding`` / ``--tokenizer-file`` / ``--pattern``),
:func:`from_meta` (from meta.json's ``tokenizer`` entry, including its ``file``), or
:func:`resolve` (the one rule every reader uses: an explicit ``--encoding`` first, then the
tokenizer meta.json names, then gpt2 for a bare nanoGPT ``.bin``).

The tiktoken family (:class:`TiktokenTokenizer`): ``gpt2`` (the default everywhere) never
touches the network: its BPE ranks ship as ``assets/gpt2.tiktoken.gz`` and their sha256 is
checked on every load against tiktoken's own expected hash; other tiktoken names load through
tiktoken's cache; ``--tokenizer-file`` reads a ``.tiktoken`` ranks file. ``load_encoding()``
still returns the plain ``tiktoken.Encoding`` for tests and benchmarks that want the raw object.

``--tokenizer-file PATH`` is told apart by content, never by name (:func:`load_file`): a
``.tiktoken`` ranks file (this module), a Hugging Face ``tokenizer.json`` or a folder holding one
(``tokenizer_hf``, ids from the ``tokenizers`` library), or a SentencePiece model
(``tokenizer_spm``, ids from the ``sentencepiece`` library). Those two modules are imported by
this one only, and only when such a file is loaded; their libraries are the optional extras
``winsample[hf]`` and ``winsample[sentencepiece]``.

This module alone knows tokenizer families; it imports nothing of winsample but ``errors`` and
``chunking`` (the safe-cut rule of regex pre-tokenizers).
"""

from __future__ import annotations

import base64
import binascii
import functools
import gzip
import hashlib
import os
import re
import stat
import threading
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path

import numpy as np
import tiktoken
from tiktoken_ext import openai_public

from . import chunking
from .errors import ConfigError, DataError, InputError, WinsampleError
from .tokenizer_base import Tokenizer, dist_version  # the interface (its own module, so the family modules need not import this one)

DEFAULT_ENCODING = "gpt2"
FAMILIES = ("tiktoken", "hf", "sentencepiece")  # meta.json's tokenizer.family (absent: tiktoken)
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
        raise ConfigError(f"{where}: not a .tiktoken ranks file (expected 'base64 rank' lines)") from None
    if not ranks:
        raise ConfigError(f"{where}: empty ranks file")
    return ranks


def _read_ranks_file(path: str | Path) -> bytes:
    path = Path(path)
    try:
        # O_NONBLOCK and a regular-file check before reading: a FIFO or device must not block
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise InputError(f"{path}: not a regular file; expected a tokenizer file")
            os.set_blocking(fd, True)
            with os.fdopen(fd, "rb") as f:
                fd = None
                data = f.read()
        finally:
            if fd is not None:
                os.close(fd)
    except FileNotFoundError:
        raise InputError(f"{path}: no such tokenizer file") from None
    except OSError as e:
        raise InputError(f"{path}: cannot read tokenizer file: {e.strerror}") from None
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as e:
            raise ConfigError(f"{path}: broken gzip: {e}") from None
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
        check_byte_coverage(ranks, str(tokenizer_file))
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

    def __reduce__(self):
        return (load, self._options)


@functools.lru_cache(maxsize=8)
def load(name: str = DEFAULT_ENCODING, tokenizer_file: str | None = None, pattern: str = "gpt2") -> Tokenizer:
    """The tokenizer the encode options name: ``--encoding NAME``, or ``--tokenizer-file`` with
    ``--pattern`` (``load_encoding`` says which). ``describe()`` records ``tokenizer_file`` as given."""
    if tokenizer_file is not None:
        return load_file(str(tokenizer_file), pattern)
    return TiktokenTokenizer(load_encoding(name), name, (name, None, pattern))


def tokenizer_path(file: str, folder: str | Path | None) -> Path:
    """Where meta's ``tokenizer.file`` is: as recorded (absolute, or relative to the working
    folder encode ran in) if it exists there, else relative to the data folder ``folder``."""
    f = Path(file)
    if not f.is_absolute() and not f.exists() and folder is not None:
        f = Path(folder) / f
    return f


def from_meta(entry: Mapping, folder: str | Path | None = None) -> Tokenizer:
    """The tokenizer a meta.json ``tokenizer`` entry describes (``folder``: the data folder, for
    a relative ``file``). ConfigError / InputError / DataError when it cannot be loaded. The
    loaded tokenizer's identity is not compared with the entry's: ``matches`` does that."""
    family = entry.get("family", "tiktoken")
    if family not in FAMILIES:
        raise ConfigError(f"tokenizer family {family!r} is not known to this winsample")
    file = entry.get("file")
    if family != "tiktoken":
        if not file:
            raise ConfigError(f"meta.json's {family} tokenizer names no file")
        tok = load_file(str(tokenizer_path(file, folder)))
        if tok.family != family:
            raise ConfigError(f"{file}: a {tok.family} tokenizer now, not the {family} one meta.json recorded")
        return tok
    if file:
        return load(entry.get("name", ""), str(tokenizer_path(file, folder)), entry.get("pattern") or "gpt2")
    name = entry.get("name") or DEFAULT_ENCODING
    try:
        return load(name)
    except ConfigError as e:  # load's hint names encode's options; a reader has none of them
        raise ConfigError(str(e).split("; or pass --tokenizer-file")[0].split(", or pass --tokenizer-file")[0]) from None


def mismatches(tok: Tokenizer, entry: Mapping) -> list[str]:
    """How ``tok`` disagrees with a meta.json ``tokenizer`` entry (identity, n_vocab, eot); [] when it agrees."""
    name = entry.get("name")
    out = []
    if tok.family != "tiktoken":  # tokenizer.json / SentencePiece: the file's sha256 (and its config's)
        for key, have in (("sha256", tok.sha256), ("config_sha256", getattr(tok, "config_sha256", None))):
            if key in entry and entry[key] != have:
                out.append(f"tokenizer.{key} {entry[key]} but {tok.file_label()} now has sha256 {have}")
        for key, have in (("n_vocab", tok.n_vocab), ("eot", tok.eot), ("bos", tok.bos)):
            if key in entry and entry[key] != have:
                out.append(f"tokenizer.{key} {entry[key]} but {tok.file_label()} has {have}")
        return out
    if entry.get("ranks_sha256") != tok.sha256:
        out.append(f"tokenizer.ranks_sha256 {entry.get('ranks_sha256')} but {name!r} loads ranks with sha256 {tok.sha256}")
    if entry.get("n_vocab") != tok.n_vocab:
        out.append(f"tokenizer.n_vocab {entry.get('n_vocab')} but {name!r} has {tok.n_vocab}")
    if "eot" in entry and entry["eot"] != tok.eot:
        out.append(f"tokenizer.eot {entry['eot']} but {name!r} has {tok.eot}")
    return out


def resolve(encoding: str | None = None, entry: Mapping | None = None, folder: str | Path | None = None) -> Tokenizer:
    """The one rule: ``encoding`` (an explicit ``--encoding``) if given, else the tokenizer
    meta.json's ``entry`` describes (``from_meta``; its identity must match the entry), else
    gpt2 (nanoGPT's ``.bin`` files are GPT-2). ConfigError when it cannot be loaded."""
    if encoding:
        return load(encoding)
    if entry is None:
        return load(DEFAULT_ENCODING)
    try:
        tok = from_meta(entry, folder)
    except WinsampleError as e:
        raise ConfigError(f"tokenizer {entry.get('name')!r} from meta.json does not load: {e}; pass --encoding NAME") from None
    if entry.get("family", "tiktoken") != "tiktoken" and entry.get("sha256") != tok.sha256:
        raise ConfigError(
            f"tokenizer {entry.get('name')!r} from meta.json: {tok.file_label()} now has sha256 {tok.sha256[:12]}…,"
            f" not the recorded {str(entry.get('sha256'))[:12]}…; pass --encoding NAME"
        )
    if entry.get("ranks_sha256") and entry["ranks_sha256"] != tok.sha256:
        raise ConfigError(
            f"tokenizer {entry.get('name')!r} from meta.json loads ranks with sha256 {tok.sha256[:12]}…, not the"
            f" recorded {str(entry['ranks_sha256'])[:12]}…; pass --encoding NAME"
        )
    return tok


# --- backends: the reference library, or the fast engine once it proves it agrees -------------

BACKENDS = ("auto", "fast", "reference")


class FastTokenizer(Tokenizer):
    """``ref`` with ``encode`` run by the fast engine; everything else (identity, decoding,
    safe cuts, meta entry) is ``ref``'s. Text the engine cannot take (lone surrogates) is
    encoded by ``ref``. Pickles as ``ref`` plus the engine's recipe, not its caches."""

    backend = "fast"

    def __init__(self, ref: Tokenizer, engine):
        self._ref, self._engine = ref, engine
        self.family, self.name, self.n_vocab, self.eot, self.bos = ref.family, ref.name, ref.n_vocab, ref.eot, ref.bos
        self.exact_decode = ref.exact_decode
        self._local = threading.local()  # encode_many: one engine per thread (a gigatoken object is not shared)
        self._main = threading.get_ident()
        self._spare: list = []  # hand_over(): an engine an encoder thread takes before building its own
        self.can_cut = ref.can_cut  # SentencePiece and unproven tokenizer.json files: documents encoded whole

    def file_label(self) -> str:
        return self._ref.file_label()

    def encode(self, text: str) -> np.ndarray:
        try:
            return self._engine.encode(text)
        except TypeError:  # a str with lone surrogates: not UTF-8, the engine cannot see it
            return self._ref.encode(text)

    def encode_utf8(self, data: bytes) -> np.ndarray:
        return self._engine.encode(data)  # valid UTF-8 has no surrogates: no fallback needed

    def encode_many(self, texts):
        """The base contract, in one engine call that releases the GIL (encoder threads, see
        ``encode``'s thread runner); a str with lone surrogates goes to the reference alone."""
        try:
            pieces = [t if isinstance(t, bytes) else t.encode("utf-8") for t in texts]
        except UnicodeEncodeError:
            return super().encode_many(texts)
        return self._thread_engine().encode_many(pieces)

    def _thread_engine(self):
        if threading.get_ident() == self._main:
            return self._engine
        engine = getattr(self._local, "engine", None)
        if engine is None:
            try:  # the engine the main thread built and checked, when handed over (list.pop is atomic)
                engine = self._spare.pop()
            except IndexError:
                engine = self._engine.fresh()
            self._local.engine = engine
        return engine

    def engine_costs(self) -> tuple[float, float]:
        """(seconds a fresh engine takes to build, UTF-8 bytes a second it encodes on one
        thread), from the main thread's engine: its build, and the fastest of its encodes of
        three bundled plays (after a fourth, so that common words are cached, as in a run)."""
        plays = resources.files("winsample").joinpath("corpus")
        warm, *samples = (plays.joinpath(f"{name}.txt").read_bytes() for name in ("macbeth", "hamlet", "tempest", "julius_caesar"))
        self._engine.encode_many([warm])
        speed = max(self._engine.bytes_per_second(sample) for sample in samples)
        return self._engine.build_seconds or 0.0, speed

    def hand_over(self) -> None:
        """Give the main thread's engine (built for the self-check) to the first encoder thread
        that needs one, instead of building it again there (a big tokenizer.json: ~0.7 s), and
        start the run's memory budget with it (``fastengine.new_budget``)."""
        from . import fastengine

        self._spare[:] = [self._engine]  # one: an engine an earlier run did not take is not kept
        fastengine.new_budget(self._spare)
        self._engine = self._engine.fresh()

    def start_budget(self) -> None:
        """Start the run's memory budget with the main thread's engine (a run on this thread)."""
        from . import fastengine

        fastengine.new_budget([self._engine])

    def engine(self) -> str:
        from . import fastengine

        return fastengine.version() or fastengine.ENGINE

    def reference(self) -> Tokenizer:
        return self._ref

    def decode_bytes(self, ids):
        return self._ref.decode_bytes(ids)

    def decode(self, ids):
        return self._ref.decode(ids)

    def token_bytes(self, token):
        return self._ref.token_bytes(token)

    def vocab_bytes(self):
        return self._ref.vocab_bytes()

    @property
    def sha256(self) -> str:
        return self._ref.sha256

    def describe(self) -> dict:
        return self._ref.describe()

    def special_texts(self):
        return self._ref.special_texts()

    def last_safe_cut(self, text, lo, hi):
        return self._ref.last_safe_cut(text, lo, hi)

    def iter_safe_cuts(self, text, pos=0):
        return self._ref.iter_safe_cuts(text, pos)

    def last_safe_cut_bytes(self, window, base=0):
        return self._ref.last_safe_cut_bytes(window, base)

    def __reduce__(self):  # a worker (forkserver, spawn, Ray) rebuilds the engine and checks it again
        return (_fast_checked, (self._ref,))


def with_backend(tok: Tokenizer, backend: str = "auto") -> tuple[Tokenizer, dict]:
    """``tok`` set to encode with ``backend``; returns (tokenizer, meta.json's ``backend`` entry).

    - ``reference``: ``tok`` itself (tiktoken, tokenizers, sentencepiece).
    - ``fast``: the fast engine; ConfigError when it is not installed, cannot load this
      tokenizer, or disagrees with the reference on the built-in self-check (wrong ids are
      never written, even when asked for).
    - ``auto``: fast when it loads *and* passes the self-check, else the reference; the entry's
      ``note`` then says why in one line (for stderr).

    The entry: ``{"name": "fast"|"reference", "engine": "<library> <version>"}`` (+ ``note``).
    """
    if backend not in BACKENDS:
        raise ConfigError(f"unknown backend {backend!r}: choose one of {', '.join(BACKENDS)}")
    ref = tok.reference()
    if backend == "reference":
        return ref, {"name": "reference", "engine": ref.engine()}
    try:
        fast = _fast_checked(ref)
    except ConfigError as e:
        if backend == "fast":
            raise
        return ref, {"name": "reference", "engine": ref.engine(), "note": f"--backend auto: using the reference {ref.engine()}: {e}"}
    return fast, {"name": "fast", "engine": fast.engine()}


_CHECKED: dict[int, FastTokenizer] = {}  # id(reference) → its checked fast tokenizer (refs are cached by load)


def _fast_checked(ref: Tokenizer) -> FastTokenizer:
    """The fast tokenizer for ``ref`` once its engine loads and passes the self-check."""
    if id(ref) in _CHECKED and _CHECKED[id(ref)].reference() is ref:
        return _CHECKED[id(ref)]
    from . import fastengine

    fast = FastTokenizer(ref, ref.fast_engine())
    # A str and UTF-8 bytes through the engine's encode, then all the texts at once through the
    # batch calls the encoder threads make (encode_many): every path is checked.
    problem = fastengine.self_check(ref.encode, fast._engine.encode, tuple(ref.special_texts()), utf8=True,
                                    batches=fast._engine.encode_rows)
    if problem is not None:
        raise ConfigError(f"the fast engine disagrees with the reference {ref.engine()} {problem}")
    _CHECKED[id(ref)] = fast
    return fast

# --- tokenizer files: the family is told by content, never by name ----------------------------

HF_JSON = "tokenizer.json"
HF_CONFIG = "tokenizer_config.json"  # beside it: eos_token, bos_token
SPM_NAMES = ("tokenizer.model", "spiece.model", "sentencepiece.model")
_RANKS_LINE = re.compile(rb"[A-Za-z0-9+/]+={0,2} [0-9]+")


def sniff(data: bytes) -> str:
    """The family a tokenizer file's bytes are: 'hf' (JSON), 'sentencepiece' (a ModelProto),
    'tiktoken' (``base64 rank`` lines), or '' (none of them)."""
    from . import tokenizer_spm

    head = data[:4096].lstrip(b"\xef\xbb\xbf \t\r\n")
    if head[:1] in (b"{", b"["):
        return "hf"
    first = head.split(b"\n", 1)[0].rstrip(b"\r")
    if _RANKS_LINE.fullmatch(first):
        return "tiktoken"
    if tokenizer_spm.looks_like_model(data):
        return "sentencepiece"
    return ""


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


def load_file(path: str, pattern: str = "gpt2") -> Tokenizer:
    """The tokenizer in file or folder ``path``, its family told by content, not by name:

    - a folder: its ``tokenizer.json`` (with ``tokenizer_config.json`` for EOS/BOS), else its
      SentencePiece ``tokenizer.model``;
    - a JSON file: a Hugging Face ``tokenizer.json`` (``tokenizer_hf``);
    - a protobuf ModelProto: a SentencePiece model (``tokenizer_spm``);
    - ``base64 rank`` lines (optionally gzipped): a ``.tiktoken`` ranks file, ``pattern`` its
      pre-tokenizer.

    ConfigError (exit 2) for a file that is none of them, truncated or malformed, or of a kind
    winsample does not support; InputError when it cannot be read. Loaded once per process
    while the files stay as they are (a changed file is read again).
    """
    return _load_file(str(path), pattern, _file_key(Path(path)))


def _file_key(p: Path) -> tuple:
    """What says a tokenizer file (or folder's files) is unchanged: size, mtime, inode of each."""
    files = [p / n for n in (HF_JSON, HF_CONFIG, *SPM_NAMES)] if p.is_dir() else [p]
    key = []
    for f in files:
        try:
            st = f.stat()
            key.append((f.name, st.st_size, st.st_mtime_ns, st.st_ino))
        except OSError:
            key.append((f.name, None))
    return tuple(key)


@functools.lru_cache(maxsize=16)
def _load_file(path: str, pattern: str, key: tuple) -> Tokenizer:
    p = Path(path)
    json_path = p
    if p.is_dir():
        candidates = [p / HF_JSON] + [p / n for n in SPM_NAMES]
        found = next((c for c in candidates if c.is_file()), None)
        if found is None:
            raise InputError(f"{p}: a folder without {HF_JSON} or tokenizer.model: point --tokenizer-file at the tokenizer file")
        json_path = found
    data = _read_ranks_file(json_path)  # reads, gunzips; InputError when unreadable
    kind = sniff(data)
    if kind == "hf":
        from . import tokenizer_hf

        return tokenizer_hf.load(p, json_path, data)
    if kind == "sentencepiece":
        from . import tokenizer_spm

        return tokenizer_spm.SentencePieceTokenizer(p if not p.is_dir() else json_path, data)
    if kind == "tiktoken":
        enc = load_encoding(DEFAULT_ENCODING, str(p), pattern)
        return TiktokenTokenizer(enc, enc.name, (DEFAULT_ENCODING, str(p), pattern), str(p), pattern)
    raise ConfigError(
        f"{json_path}: not a tokenizer file: neither a Hugging Face tokenizer.json, a SentencePiece"
        " model nor a .tiktoken ranks file"
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
