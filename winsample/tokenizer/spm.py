"""The SentencePiece family (``.model`` protobuf files), behind winsample's :class:`~winsample.tokenizer.Tokenizer`.

Ids come from the ``sentencepiece`` library itself (the reference), called as ``encode(text)``:
no BOS/EOS added by the library (winsample places them), and a control piece's text inside a
document (``<s>``, ``</s>``, ``[INST]``) is encoded as the text it is, as SentencePiece always does.

Supported models: ``BPE`` and ``Unigram`` (Llama-2, Mistral, Gemma, T5-style). ``WORD`` and
``CHAR`` models are refused (rare, and not tested here).

The end-of-document id is the model's ``eos_id``, the beginning-of-document id its ``bos_id``
(None where the model sets them to -1).

Token bytes: a byte piece ``<0x0A>`` is that byte, ``▁`` is a space, a control or unknown piece
is its own text (``<s>``), any other piece is its UTF-8.

Safe cuts: none. SentencePiece adds a dummy prefix ``▁`` to the start of every text it encodes
(``add_dummy_prefix``, true in every current model), so a piece encoded on its own gains a token
the whole document does not have: ``encode("a\\nb") = [▁a, <0x0A>, b]`` but
``encode("\\nb")`` starts ``[▁, <0x0A>, …]``. A SentencePiece document is therefore always encoded
whole, one document per task (the encode summary counts those longer than one piece).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from ..errors import ConfigError
from .base import Tokenizer, dist_version, model_name, reduce_keeping_eot, texts_in_context
from .bpe import ENDOFTEXT, read_ranks_file

MODEL_TYPES = {1: "Unigram", 2: "BPE", 3: "Word", 4: "Char"}
SUPPORTED_MODELS = ("BPE", "Unigram")


def import_sentencepiece():
    """The ``sentencepiece`` module, or ConfigError saying how to install it."""
    try:
        import sentencepiece
    except ImportError:
        raise ConfigError(
            "a SentencePiece model needs the 'sentencepiece' package: pip install 'winsample[sentencepiece]'"
        ) from None
    return sentencepiece


# --- a minimal protobuf reader: enough to recognise a ModelProto and read two of its fields --


def _varint(data: bytes, i: int) -> tuple[int, int]:
    """(value, next index) of the varint at ``data[i]``; ValueError past the end or over 10 bytes."""
    value = shift = 0
    for _ in range(10):
        if i >= len(data):
            raise ValueError("truncated varint")
        b = data[i]
        i += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, i
        shift += 7
    raise ValueError("varint too long")


def _fields(data: bytes):
    """(field number, wire type, value) of each top-level field; ValueError when malformed.

    Length-delimited values are bytes, varints ints, fixed32/64 raw bytes. (Keys and lengths
    under 128, nearly all of a model's, are read inline: a model has ~5 fields per piece.)
    """
    i = 0
    n = len(data)
    while i < n:
        key = data[i]
        if key < 0x80:
            i += 1
        else:
            key, i = _varint(data, i)
        field, wire = key >> 3, key & 7
        if field == 0:
            raise ValueError("field number 0")
        if wire == 2:
            if i < n and data[i] < 0x80:
                length, i = data[i], i + 1
            else:
                length, i = _varint(data, i)
            value, i = data[i : i + length], i + length
        elif wire == 0:
            value, i = _varint(data, i)
        elif wire == 5:
            value, i = data[i : i + 4], i + 4
        elif wire == 1:
            value, i = data[i : i + 8], i + 8
        else:
            raise ValueError(f"wire type {wire}")
        if i > n:
            raise ValueError("truncated field")
        yield field, wire, value


def looks_like_model(data: bytes) -> bool:
    """True when ``data`` starts like a SentencePiece ModelProto: its first field is a piece
    (field 1, a message) whose own first field is the piece's text (field 1, a string)."""
    try:
        field, wire, value = next(_fields(data[:1 << 16]), (0, 0, b""))
        if field != 1 or wire != 2 or not value:
            return False
        f2, w2, _ = next(_fields(value))
        return f2 == 1 and w2 == 2
    except (ValueError, StopIteration):
        return False


def model_info(data: bytes) -> dict:
    """``{"model": "BPE" | "Unigram" | …, "pieces": count}`` read from the ModelProto; ValueError when malformed."""
    pieces, model_type = 0, 1  # TrainerSpec.model_type defaults to UNIGRAM
    for field, wire, value in _fields(data):
        if field == 1 and wire == 2:
            pieces += 1
        elif field == 2 and wire == 2:  # trainer_spec
            for f, w, v in _fields(value):
                if f == 3 and w == 0:
                    model_type = v
    return {"model": MODEL_TYPES.get(model_type, f"type {model_type}"), "pieces": pieces}


def normalizer_info(data: bytes) -> dict:
    """The ModelProto's NormalizerSpec (field 3) as ``{"name", "add_dummy_prefix",
    "remove_extra_whitespaces", "escape_whitespaces"}`` (proto defaults where a field is absent)
    and its TrainerSpec's ``treat_whitespace_as_suffix``; ValueError when malformed."""
    info = {"name": "", "add_dummy_prefix": True, "remove_extra_whitespaces": True, "escape_whitespaces": True,
            "treat_whitespace_as_suffix": False}
    flags = {3: "add_dummy_prefix", 4: "remove_extra_whitespaces", 5: "escape_whitespaces"}
    for field, wire, value in _fields(data):
        if field == 3 and wire == 2:
            for f, w, v in _fields(value):
                if f == 1 and w == 2:
                    info["name"] = v.decode("utf-8", "replace")
                elif f in flags and w == 0:
                    info[flags[f]] = bool(v)
        elif field == 2 and wire == 2:
            for f, w, v in _fields(value):
                if f == 24 and w == 0:
                    info["treat_whitespace_as_suffix"] = bool(v)
    return info


def reencode_rule(info: dict) -> tuple[bool, str]:
    """``Tokenizer.reencodable`` for a model of ``normalizer_info`` ``info``. Its pieces spell the
    normalized text, a space as ``▁``, and the model's ids are a function of that text alone: the
    text rebuilt from correct ids (``▁`` kept as it is, since a space written back would be
    collapsed by remove_extra_whitespaces where a literal ▁ was not; the dummy-prefix ``▁``
    dropped) encodes back to them whenever it normalizes to itself. Where it does not (nmt_nfkc
    leaves ``ﬁ`` + U+0301 as ``fi`` + U+0301, which NFKC composes), the re-encoded ids spell
    another text, and verify skips that document instead of judging it."""
    if info["treat_whitespace_as_suffix"] or not info["escape_whitespaces"]:
        return False, "its whitespace options (treat_whitespace_as_suffix, or escape_whitespaces off) are not modelled"
    name = info["name"] or "unnamed"
    return True, (f"its pieces spell the {name}-normalized text, which encodes back to the same ids where it"
                  f" normalizes to itself (rebuilt with \u2581 kept and the dummy prefix dropped)")


PIECE_NORMAL, PIECE_UNKNOWN, PIECE_CONTROL, PIECE_USER_DEFINED, PIECE_UNUSED, PIECE_BYTE = 1, 2, 3, 4, 5, 6


def piece_types(data: bytes) -> list[tuple[str, int]]:
    """(text, type) of every piece of a ModelProto, in id order (``PIECE_*`` types; a piece
    without a type is normal). ValueError when malformed."""
    out = []
    for field, wire, value in _fields(data):
        if field == 1 and wire == 2:
            text, kind = b"", PIECE_NORMAL
            n = len(value)
            # nearly every piece is: text (field 1, short), score (field 2, fixed32), type (field 3, one byte) if not normal
            if n >= 2 and value[0] == 0x0A and value[1] < 0x80 and n in (value[1] + 7, value[1] + 9):
                e = 2 + value[1]
                if value[e] == 0x15 and (n == e + 5 or (value[e + 5] == 0x18 and value[e + 6] < 0x80)):
                    out.append((value[2:e].decode("utf-8", "replace"), value[e + 6] if n == e + 7 else PIECE_NORMAL))
                    continue
            for f, w, v in _fields(value):
                if f == 1 and w == 2:
                    text = v
                elif f == 3 and w == 0:
                    kind = v
            out.append((text.decode("utf-8", "replace"), kind))
    return out


class SentencePieceTokenizer(Tokenizer):
    """A SentencePiece model file behind winsample's interface."""

    family = "sentencepiece"

    def __init__(self, path: Path, data: bytes):
        spm = import_sentencepiece()
        self.path = Path(path)
        self.name = model_name(self.path)
        self._sha256 = hashlib.sha256(data).hexdigest()
        try:
            info = model_info(data)
        except ValueError as e:
            raise ConfigError(f"{path}: a truncated or malformed SentencePiece model ({e})") from None
        self.model_type = info["model"]
        if info["pieces"] == 0:
            raise ConfigError(f"{path}: a SentencePiece model with no pieces")
        if self.model_type not in SUPPORTED_MODELS:
            raise ConfigError(
                f"{path}: a SentencePiece {self.model_type} model, which winsample does not support"
                f" (supported: {', '.join(SUPPORTED_MODELS)})"
            )
        try:
            sp = spm.SentencePieceProcessor(model_proto=data)
        except (RuntimeError, OSError, ValueError) as e:
            raise ConfigError(f"{path}: not a SentencePiece model the sentencepiece library can load: {_first_line(e)}") from None
        self._sp = sp
        self.n_vocab = sp.get_piece_size()
        self.eot = sp.eos_id() if sp.eos_id() >= 0 else None
        if self.token_id(ENDOFTEXT) is not None:  # documents end with <|endoftext|> where the vocabulary has it (as hf)
            self.eot = self.token_id(ENDOFTEXT)
        self.bos = sp.bos_id() if sp.bos_id() >= 0 else None
        self.cut_rule = None
        self.can_cut = False
        self.exact_decode = False  # the dummy prefix ▁ reads back as a space, a literal ▁ too
        try:
            self._normalizer = normalizer_info(data)
        except ValueError as e:
            raise ConfigError(f"{path}: a truncated or malformed SentencePiece model ({e})") from None
        self._table: list[bytes] | None = None
        self._pieces: list[bytes | None] | None = None  # text_of_ids: each piece as the normalized text holds it
        self._args = (str(path),)

    def encode(self, text: str) -> np.ndarray:
        try:
            ids = self._sp.encode(text)
        except (RuntimeError, TypeError, UnicodeEncodeError):  # lone surrogates: U+FFFD, as tiktoken does
            text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
            ids = self._sp.encode(text)
        return np.array(ids, dtype=np.uint32)

    def _piece_bytes(self, i: int) -> bytes:
        sp = self._sp
        piece = sp.id_to_piece(i)
        if sp.is_byte(i):
            return bytes([int(piece[3:5], 16)])
        if sp.is_control(i) or sp.is_unknown(i):
            return piece.encode("utf-8")
        return piece.replace("\u2581", " ").encode("utf-8")

    def vocab_bytes(self) -> list[bytes]:
        if self._table is None:
            self._table = [self._piece_bytes(i) for i in range(self.n_vocab)]
        return self._table

    def token_bytes(self, token: int) -> bytes:
        if not 0 <= token < self.n_vocab:
            raise KeyError(token)
        return self.vocab_bytes()[token]

    # --- verify's retokenize ------------------------------------------------------------------

    def reencodable(self) -> tuple[bool, str]:
        return reencode_rule(self._normalizer)

    def text_of_ids(self, ids) -> bytes | None:
        """The normalized text the ids spell, ``▁`` kept (not a space) and the dummy-prefix ``▁``
        dropped: what ``encode`` turns back into the same ids. None when an id is the unknown
        piece (the text it stood for is lost) or outside the vocabulary."""
        if self._pieces is None:
            sp = self._sp
            self._pieces = [None if sp.is_unknown(i) else bytes([int(sp.id_to_piece(i)[3:5], 16)]) if sp.is_byte(i)
                            else sp.id_to_piece(i).encode("utf-8") for i in range(self.n_vocab)]
        table, n = self._pieces, self.n_vocab
        parts = [table[i] if 0 <= i < n else None for i in map(int, ids)]
        if any(p is None for p in parts):
            return None
        text = b"".join(parts)
        prefix = "\u2581".encode("utf-8")
        if self._normalizer["add_dummy_prefix"] and text.startswith(prefix):
            text = text[len(prefix):]
        return text

    # --- the fast backend (``tokenizer.with_backend``) -------------------------------------------

    def engine(self) -> str:
        """The reference library and its version (meta.json's ``backend.engine``)."""
        return f"sentencepiece {dist_version('sentencepiece')}"

    def fast_engine(self):
        """gigatoken on this model as the reference library loaded it (its serialised proto),
        converted as ``gigatoken.Tokenizer.from_sentencepiece`` does, control pieces kept as text
        (``fastengine.spm_engine``); ConfigError when gigatoken cannot take the model (Unigram,
        no byte fallback, …)."""
        from . import fastengine

        return fastengine.spm_engine(self._sp.serialized_model_proto())

    def special_texts(self) -> list[str]:
        """The self-check's extra texts for SentencePiece: every control, unknown and
        user-defined piece's text and a sample of byte pieces' (``<0x0A>`` as text), alone and
        in context, and the family's own hazards (the dummy prefix, ``▁``, leading and repeated
        whitespace, characters only byte fallback can encode, text a normaliser rewrites)."""
        types = piece_types(self._sp.serialized_model_proto())
        pieces = [p for p, t in types if t in (PIECE_UNKNOWN, PIECE_CONTROL, PIECE_USER_DEFINED)]
        pieces += [p for p, t in types if t == PIECE_BYTE][::37]
        return texts_in_context(pieces) + list(SPM_SELF_CHECK_TEXTS)

    @property
    def sha256(self) -> str:
        return self._sha256

    def describe(self) -> dict:
        return {
            "family": self.family,
            "name": self.name,
            "file": str(self.path),
            "sha256": self._sha256,
            "model": self.model_type,
            "n_vocab": self.n_vocab,
            "eot": self.eot,
            "bos": self.bos,
            "cut_rule": None,
        }

    def last_safe_cut(self, text: str, lo: int, hi: int) -> int | None:
        return None  # see the module docstring: the dummy prefix

    def iter_safe_cuts(self, text: str, pos: int = 0):
        return iter(())

    def last_safe_cut_bytes(self, window: bytes, base: int = 0) -> int | None:
        return None

    def token_id(self, text: str) -> int | None:
        i = self._sp.piece_to_id(text)  # an unknown piece gives the unk id: only a round trip says
        return i if 0 <= i < self.n_vocab and self._sp.id_to_piece(i) == text else None

    def __reduce__(self):  # a worker reloads the file
        return reduce_keeping_eot(self, reload, (str(self.path),))


# Where a SentencePiece engine may part from sentencepiece: the dummy prefix (texts that start
# with spaces, a ▁, a line break, or are only whitespace), ▁ in the text, whitespace runs,
# characters no piece holds (byte fallback: rare CJK, control characters, emoji, private use),
# and text an NFKC-style normaliser rewrites (ligatures, full-width, circled digits).
SPM_SELF_CHECK_TEXTS = (
    "", " ", "  ", "\n", " \n ", "\t", "a", " a", "  a", "   a  b   ", "a ", "a  ", "\na", "\n\na\n\n",
    "\u2581", "\u2581\u2581", "\u2581a", "a\u2581b", " \u2581 ", "\u2581 \u2581", "x\u2581\u2581\u2581y",
    "\x00", "\x01\x02\x7f", "a\x00b", "\u0000\u001f", "\ue000\uf8ff", "\U000f0000", "\U0001f9ff\U0001fa70",
    "𠀀𪚥𫝆", "龘靐齉", "ꙮ ᚠᛇᚻ ⵣ", "ﬁﬂ ＡＢＣ１２３ ①② ㍿ ℌ", "Ａ　Ｂ", "ｶﾀｶﾅ", "x\u00a0y", "\u3000\u3000a",
    "<0x0A>", "<0x00>", "<unk>", "<s></s><s>", "[INST] hi [/INST]", "<pad>", "<mask>",
)


def reload(path: str) -> SentencePieceTokenizer:
    """An equal SentencePieceTokenizer from the same file (what unpickling in a worker does)."""
    return SentencePieceTokenizer(Path(path), read_ranks_file(path))


def _first_line(e: BaseException) -> str:
    s = str(e).strip().splitlines()
    return s[0] if s else type(e).__name__
