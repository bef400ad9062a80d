"""winsample's ``Tokenizer`` interface: what every family provides (see :mod:`winsample.tokenizer`).

Its own module so that the family modules (``tokenizer_hf``, ``tokenizer_spm``) implement it
without importing ``tokenizer``, which imports them: the import graph stays a tree.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence

import numpy as np

from ..errors import ConfigError
from . import chunking


class Tokenizer:
    """What winsample needs of a tokenizer. A family implements it and adds a branch to
    :func:`from_meta` (and :func:`load` if options name it). An implementation provides:

    - ``family`` (str): written to meta.json as ``tokenizer.family`` by families other than
      tiktoken (an entry without it is tiktoken, as every file before families existed).
    - ``name`` (str): the name meta.json records (``gpt2``, a file's stem, …).
    - ``n_vocab`` (int): ids are ``0 .. n_vocab - 1`` (special tokens included).
    - ``eot`` (int or None): the end-of-document id ``encode`` appends after each document
      (None when the tokenizer has none: a tokenizer.json without tokenizer_config.json).
    - ``bos`` (int or None): the beginning-of-document id ``encode --bos`` puts before each
      document, None when the tokenizer has none.
    - ``can_cut`` (bool): False when the family has no safe-cut rule, so that a long document
      is encoded whole (one task, memory growing with the document) and counted as such.
    - ``encode(text) -> np.ndarray`` (uint32): ids of *ordinary* text; a control-token
      lookalike in the text (``"<|endoftext|>"``) is encoded as the text it is, never as the id.
    - ``token_bytes(id) -> bytes`` (KeyError for an id with no bytes); ``vocab_bytes``,
      ``decode_bytes(ids) -> bytes`` and ``decode`` derive from it (override for speed).
    - ``sha256`` (str): the identity recorded in meta.json (``ranks_sha256`` for tiktoken): the
      sha256 of the vocabulary file as a file, so two tokenizers with equal ids have equal hashes.
    - ``reencodable()``, ``text_of_ids(ids)``: whether verify's retokenize can re-derive a
      document's ids from the text they spell (and why), and that text (defaults: ``exact_decode``).
    - ``describe() -> dict``: the meta.json ``tokenizer`` entry; ``from_meta`` of it (with the
      files it names still readable) loads an equal tokenizer.
    - ``last_safe_cut(text, lo, hi)``, ``iter_safe_cuts(text, pos)`` and
      ``last_safe_cut_bytes(window, base)``: positions where text may be cut so that
      ``encode(a) + encode(b) == encode(a + b)``. The defaults are ``chunking``'s rule for regex
      pre-tokenizers (tiktoken's gpt2/cl100k/o200k patterns); a family whose pre-tokenizer
      differs overrides them (returning None / nothing is always correct: documents are then
      encoded whole).
    - pickling: a worker process (fork, forkserver, a Ray task) gets an equal tokenizer; the
      tiktoken family pickles as its load options, so the ranks are re-read, not sent.
    """

    family: str = "tiktoken"
    name: str
    n_vocab: int
    eot: int | None
    bos: int | None = None
    can_cut: bool = True

    def token_id(self, text: str) -> int | None:
        """The id whose token is exactly ``text`` (a special token's text included), else None."""
        raise NotImplementedError

    def file_label(self) -> str:
        """How messages name this tokenizer: its file, else its name."""
        return str(getattr(self, "path", None) or getattr(self, "_file", None) or self.name)

    def encode(self, text: str) -> np.ndarray:
        raise NotImplementedError

    def decode_bytes(self, ids: Sequence[int]) -> bytes:
        """The ids' bytes joined, from ``vocab_bytes``; ids outside it are dropped."""
        table = self.vocab_bytes()
        n = len(table)
        return b"".join(table[i] for i in map(int, ids) if 0 <= i < n)

    def token_bytes(self, token: int) -> bytes:
        raise NotImplementedError

    @property
    def sha256(self) -> str:
        raise NotImplementedError

    def describe(self) -> dict:
        raise NotImplementedError

    def encode_utf8(self, data: bytes) -> np.ndarray:
        """``encode`` of text given as valid UTF-8 bytes (an engine that reads UTF-8 skips the str)."""
        return self.encode(data.decode("utf-8"))

    def encode_each(self, texts: Sequence[str]) -> list[list[int]]:
        """``encode`` of each text, as lists of ints. A library with a batch call that releases
        the GIL overrides it: the self-check runs it on a thread while the fast engine loads."""
        return [self.encode(t).tolist() for t in texts]

    def encode_many(self, texts: Sequence[str | bytes]) -> tuple[np.ndarray, np.ndarray]:
        """``encode`` of each text (a ``bytes`` entry: valid UTF-8, as ``encode_utf8``), the ids
        concatenated (uint32) and each text's id count (int64)."""
        parts = [self.encode_utf8(t) if isinstance(t, bytes) else self.encode(t) for t in texts]
        lengths = np.fromiter((len(p) for p in parts), dtype=np.int64, count=len(parts))
        return (np.concatenate(parts) if parts else np.zeros(0, np.uint32)), lengths

    def decode(self, ids: Sequence[int]) -> str:
        """The text of ``ids``; bytes that are not UTF-8 (an id sequence cut mid-character) show as U+FFFD."""
        return self.decode_bytes(ids).decode("utf-8", errors="replace")

    def vocab_bytes(self) -> list[bytes]:
        """Bytes of every id ``0 .. n_vocab - 1`` (``b""`` for an id with none)."""
        out = []
        for i in range(self.n_vocab):
            try:
                out.append(self.token_bytes(i))
            except KeyError:
                out.append(b"")
        return out

    def last_safe_cut(self, text: str, lo: int, hi: int) -> int | None:
        return chunking.last_safe_cut(text, lo, hi)

    def iter_safe_cuts(self, text: str, pos: int = 0) -> Iterator[int]:
        return chunking.iter_safe_cuts(text, pos)

    def last_safe_cut_bytes(self, window: bytes, base: int = 0) -> int | None:
        return chunking.last_safe_cut_bytes(window, base)

    # --- backends (``with_backend``) ---

    backend: str = "reference"  # which engine encode() runs: "reference" or "fast"
    exact_decode: bool = True  # decode_bytes(encode(t)) == t's UTF-8 for every text t (verify's retokenize needs it)

    def engine(self) -> str:
        """The library (and version) behind ``encode``, for meta.json's ``backend`` entry."""
        return type(self).__name__

    def fast_engine(self):
        """A ``fastengine.Engine`` that encodes like this tokenizer; ConfigError when there is none."""
        raise ConfigError(f"the fast backend has no engine for the {self.family} family")

    def special_texts(self) -> list[str]:
        """Texts the fast engine's self-check must also see for this tokenizer: its special
        tokens' texts (each must encode as ordinary text), and whatever else the family's
        engine could get wrong (added tokens, the family's own markers), alone and in context."""
        return []

    # --- re-deriving ids from their own text (verify's ``retokenize``) ---------------------------

    def reencodable(self) -> tuple[bool, str]:
        """(True, why) when ``encode(text_of_ids(ids)) == ids`` holds for every document's correct
        ids ``ids = encode(t)``, so that verify's retokenize can re-derive ids from their own text
        without ever failing correct data; (False, why not) otherwise. Default: true exactly when
        the tokens spell the text byte for byte (``exact_decode``)."""
        if self.exact_decode:
            return True, "its tokens spell the text byte for byte"
        return False, "it does not decode exactly (a normalizer changes the text), so its ids cannot be re-derived from their text"

    def text_of_ids(self, ids: Sequence[int]) -> bytes | None:
        """The text (UTF-8 bytes) that ``encode`` must turn back into ``ids``, a whole document's
        ids (when ``reencodable``); None when the ids cannot tell it (an unknown-piece id: its
        text is lost). Default: ``decode_bytes``."""
        return self.decode_bytes(ids)

    def reference(self) -> Tokenizer:
        """The tokenizer whose ids are the truth (itself, unless a fast backend wraps it)."""
        return self

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} n_vocab={self.n_vocab}>"


def texts_in_context(texts) -> list[str]:
    """Each text alone, and once more in one line that holds it between letters, twice in a
    row, and after a line break and a whitespace run: where an engine's matching of added
    tokens can part from the reference's (a self-check's extra texts, see
    ``Tokenizer.special_texts``)."""
    return [x for t in sorted(set(texts)) for x in (t, f"a{t}b {t}{t}\n  {t}")]


def dist_version(dist: str) -> str:
    """The installed version of distribution ``dist``: the ``__version__`` of its module when
    imported (tiktoken, tokenizers and sentencepiece set it; importing importlib.metadata costs
    ~25 ms, in verify's retokenize thread beside the scan), else its metadata ("?" without)."""
    declared = getattr(sys.modules.get(dist), "__version__", None)
    if isinstance(declared, str) and declared:
        return declared
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return "?"


# --- the document end a dataset chose (encode --eot-token) --------------------------------------


def with_eot(tok: Tokenizer, eot: int) -> Tokenizer:
    """``tok`` with ``eot`` as its end-of-document id (``describe()`` records it), everything
    else shared; ``tok`` itself when that is already its id. A copy, not a change: loaded
    tokenizers are cached and shared. It pickles as ``tok``'s recipe plus the choice."""
    if eot == tok.eot:
        return tok
    if not 0 <= eot < tok.n_vocab:
        raise ConfigError(f"{tok.file_label()}: end-of-document id {eot} is not below its vocabulary size {tok.n_vocab}")
    copy = object.__new__(type(tok))
    copy.__dict__.update(tok.__dict__)
    copy.eot = copy.eot_chosen = int(eot)
    return copy


def reduce_keeping_eot(tok: Tokenizer, fn, args: tuple):
    """``__reduce__``'s value for a family whose plain recipe is ``fn(*args)``: the recipe, and
    the chosen end-of-document id when ``with_eot`` gave one."""
    chosen = tok.__dict__.get("eot_chosen")
    return (fn, args) if chosen is None else (_rebuild_with_eot, (fn, args, chosen))


def _rebuild_with_eot(fn, args: tuple, eot: int) -> Tokenizer:
    return with_eot(fn(*args), eot)


def choose_eot(tok: Tokenizer, spec: str | int | None) -> Tokenizer:
    """``encode --eot-token``: ``spec`` is a token's text (one token of the vocabulary, e.g.
    ``<|endoftext|>``) or its id; None keeps the family's default. ConfigError, saying why,
    when ``spec`` names no single token."""
    if spec is None:
        return tok
    text = str(spec).strip()
    if text.isdigit():
        tid = int(text)
        try:
            tok.token_bytes(tid)
        except KeyError:
            raise ConfigError(f"--eot-token {tid}: {tok.file_label()} has no token {tid} (its ids are 0..{tok.n_vocab - 1})") from None
        return with_eot(tok, tid)
    tid = tok.token_id(str(spec))
    if tid is None:
        raise ConfigError(f"--eot-token {str(spec)!r}: not one token of {tok.file_label()} (name a token's exact text, or its id)")
    return with_eot(tok, tid)


# --- the name meta.json records for a tokenizer file ---------------------------------------------

GENERIC_FILE_NAMES = ("tokenizer.json", "tokenizer.model", "spiece.model", "sentencepiece.model")


def model_name(path, config: dict | None = None) -> str:
    """The name meta.json records for the tokenizer the user named by ``path`` (a file or its
    folder): the model's name where the files carry one (``tokenizer_config.json``'s
    ``name_or_path``, a hub id like ``Qwen/Qwen2-0.5B`` kept whole, a local path by its last
    part), else the model's folder for a file of a generic name (``llama3/tokenizer.model`` is
    ``llama3``), else the file's name without its suffixes."""
    from pathlib import Path

    given = (config or {}).get("name_or_path")
    if isinstance(given, str) and given.strip():
        given = given.strip().rstrip("/\\")
        local = given.startswith((".", "/", "~")) or "\\" in given or given.count("/") > 1
        name = given.replace("\\", "/").rsplit("/", 1)[-1] if local else given
        if name:
            return name
    p = Path(path)
    if p.is_dir():
        return p.resolve().name or str(p)
    if p.name in GENERIC_FILE_NAMES and p.resolve().parent.name:
        return p.resolve().parent.name
    return p.name.split(".")[0] or p.name
