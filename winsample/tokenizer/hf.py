"""The Hugging Face ``tokenizer.json`` family, behind winsample's :class:`~winsample.tokenizer.Tokenizer`.

Ids come from the ``tokenizers`` library itself (the reference), called as
``encode(text, add_special_tokens=False)`` with ``encode_special_tokens = True``: a special
token's text inside a document (``<｜end▁of▁sentence｜>``, ``<|endoftext|>``) is encoded as the
text it is. Added tokens the file marks ``"special": false`` (DeepSeek's ``<think>``) are what the
library makes of them: their own ids, as in any use of that tokenizer.

Supported models: ``BPE`` (byte-level, as Llama-3 / Qwen / DeepSeek / GPT-2 ship it, or
SentencePiece-style with ``▁`` and ``<0xNN>`` byte fallback, as Llama-2 / Mistral convert to it)
and ``Unigram``. ``WordPiece`` and ``WordLevel`` (BERT-style encoders) are refused: their tokens
do not concatenate to the text's bytes, which windows' edges and verify's decoding need.

The end-of-document and beginning-of-document ids are ``tokenizer_config.json``'s ``eos_token``
and ``bos_token`` (the file beside ``tokenizer.json``); without that file both are None.

Safe cuts (long documents spread over workers): only where this module can show that the
file's normaliser, pre-tokenizer and added tokens make ``encode(a) + encode(b) == encode(a + b)``
at ``chunking``'s cut points: a byte-level BPE whose pre-tokenizer is one of the regex splits in
:data:`PROVEN_SPLITS` (GPT-2, Llama-3 = cl100k, Qwen2, o200k, DeepSeek-V3), no normaliser or NFC,
and no non-special added token that holds whitespace or strips it. Every other file is encoded
a document at a time, whole (``cut_rule`` is None).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

import numpy as np

from ..errors import ConfigError
from . import chunking
from .base import Tokenizer, dist_version, model_name, reduce_keeping_eot, texts_in_context
from .bpe import ENDOFTEXT, read_ranks_file

SUPPORTED_MODELS = ("BPE", "Unigram")
_MODEL_KEY = re.compile(r'"model"\s*:\s*\{')
CONFIG_JSON = "tokenizer_config.json"

# The regex Split sequences (before a ByteLevel(use_regex=false) step) under which chunking's cut
# rule is proven: each alternation ends a letter/digit run at a following \r, \n or space, starts a
# whitespace/" word" match there, and has no lookbehind (tests/tokenizer/test_families.py checks
# the rule against the library on generated and real text for each).
_CL100K = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
_QWEN2 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
_O200K = "|".join([
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"\p{N}{1,3}",
    r" ?[^\s\p{L}\p{N}]+[\r\n/]*",
    r"\s*[\r\n]+",
    r"\s+(?!\S)",
    r"\s+",
])
_DEEPSEEK_V3 = (
    r"\p{N}{1,3}",
    "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
    # literal CR / LF characters in the classes, as DeepSeek's file has them
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+"
    "| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
)
GPT2_BYTELEVEL = ("<ByteLevel use_regex>",)  # ByteLevel(use_regex=true): the GPT-2 pattern (tiktoken's r50k)
PROVEN_SPLITS = {
    GPT2_BYTELEVEL: "gpt2",
    (_CL100K,): "cl100k (Llama-3)",
    (_QWEN2,): "qwen2",
    (_O200K,): "o200k",
    _DEEPSEEK_V3: "deepseek-v3",
}


def import_tokenizers():
    """The ``tokenizers`` module, or ConfigError saying how to install it."""
    # The library's Rust thread pool is only used by batch calls; switching it off keeps a forked
    # worker from printing its "process just got forked" warning.
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        import tokenizers
    except ImportError:
        raise ConfigError(
            "a Hugging Face tokenizer.json needs the 'tokenizers' package: pip install 'winsample[hf]'"
        ) from None
    return tokenizers


def _bytes_to_unicode() -> dict[str, int]:
    """GPT-2's byte-level alphabet, inverted: the char a ByteLevel token uses → the byte it stands for."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


_BYTE_OF = _bytes_to_unicode()


def _types(node) -> list[dict]:
    """A normaliser / pre-tokenizer / decoder node flattened: Sequence steps in order."""
    if not isinstance(node, dict):
        return []
    for key in ("pretokenizers", "normalizers", "decoders"):
        if node.get("type") == "Sequence" and isinstance(node.get(key), list):
            return [s for n in node[key] for s in _types(n)]
    return [node]


def _token_style(spec: dict) -> str:
    """'bytelevel' (GPT-2's byte alphabet) or 'metaspace' (▁ for a space, <0xNN> byte pieces)."""
    steps = _types(spec.get("pre_tokenizer")) + _types(spec.get("decoder"))
    if any(s.get("type") == "ByteLevel" for s in steps):
        return "bytelevel"
    return "metaspace"


def _proven_split(spec: dict) -> str | None:
    """The name of the PROVEN_SPLITS entry this pre-tokenizer is, or None."""
    steps = _types(spec.get("pre_tokenizer"))
    if not steps or steps[-1].get("type") != "ByteLevel" or steps[-1].get("add_prefix_space"):
        return None
    last = steps[-1]
    if len(steps) == 1:
        return PROVEN_SPLITS.get(GPT2_BYTELEVEL) if last.get("use_regex", True) else None
    if last.get("use_regex", True):
        return None
    regexes = []
    for s in steps[:-1]:
        pat = s.get("pattern")
        if s.get("type") != "Split" or s.get("behavior") != "Isolated" or s.get("invert") or not isinstance(pat, dict):
            return None
        if "Regex" not in pat:
            return None
        regexes.append(pat["Regex"])
    return PROVEN_SPLITS.get(tuple(regexes))


def _cut_rule(spec: dict, model_type: str) -> str | None:
    """Why chunking's cuts are safe for this file (the proven split's name), or None."""
    if model_type != "BPE" or _token_style(spec) != "bytelevel":
        return None
    norm = _types(spec.get("normalizer"))
    if any(n.get("type") != "NFC" for n in norm):  # NFC never composes across a space or line break
        return None
    for a in spec.get("added_tokens") or []:
        if a.get("special"):
            continue  # stays text: encode_special_tokens
        content = a.get("content", "")
        if a.get("lstrip") or a.get("rstrip") or a.get("single_word") or any(c.isspace() for c in content):
            return None  # could match across a cut (a cut sits before whitespace)
    return _proven_split(spec)


# Unicode normal forms: NFx of NFx-normalized text is that text (Unicode's stability guarantee)
IDEMPOTENT_NORMALIZERS = ("NFC", "NFD", "NFKC", "NFKD")


def _reencode_rule(spec: dict, style: str) -> tuple[bool, str]:
    """``Tokenizer.reencodable`` for this file: byte-level tokens spell the *normalized* text, so
    its ids encode back from their decoded text when normalizing is idempotent (none, or one
    Unicode normal form: Qwen2's NFC). A ▁-style file stays unchecked: whether the ▁ before its
    first word is the dummy prefix or the text's own space hangs on Prepend / Metaspace options."""
    if style != "bytelevel":
        return False, ("its pieces mark spaces with \u2581 (SentencePiece-style): whether a document's first \u2581 is"
                       " the tokenizer's prefix or the text's own space depends on normalizer and pre-tokenizer"
                       " options winsample does not model")
    kinds = [str(n.get("type")) for n in _types(spec.get("normalizer"))]
    if not kinds:
        return True, "its byte-level tokens spell the text byte for byte"
    if len(kinds) == 1 and kinds[0] in IDEMPOTENT_NORMALIZERS:
        return True, (f"its byte-level tokens spell the {kinds[0]}-normalized text, and {kinds[0]} leaves"
                      f" normalized text as it is")
    return False, (f"its normalizer ({' + '.join(kinds)}) is not one known to leave its own output unchanged"
                   f" (a single {', '.join(IDEMPOTENT_NORMALIZERS)} is)")


def _token_text(entry) -> str | None:
    """A tokenizer_config.json token entry: a string, or an AddedToken object with ``content``."""
    if isinstance(entry, str):
        return entry
    if isinstance(entry, dict) and isinstance(entry.get("content"), str):
        return entry["content"]
    return None


class HFTokenizer(Tokenizer):
    """A tokenizer.json (and its tokenizer_config.json) behind winsample's interface."""

    family = "hf"

    def __init__(self, path: Path, json_path: Path, data: str, config: dict | None, config_data: bytes | None):
        tokenizers = import_tokenizers()
        self.path = Path(path)  # what the user named: the file, or the folder holding it
        self.json_path = Path(json_path)
        self.name = model_name(self.path, config)
        self.spec_sha256 = hashlib.sha256(data.encode("utf-8")).hexdigest()
        self.config_sha256 = hashlib.sha256(config_data).hexdigest() if config_data is not None else None
        try:
            tok = tokenizers.Tokenizer.from_str(data)
        except BaseException as e:  # the library raises bare Exception, and pyo3 panics are BaseException
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
            raise ConfigError(f"{json_path}: not a tokenizer.json the tokenizers library can load: {_first_line(e)}") from None
        self.model_type = type(tok.model).__name__
        if self.model_type not in SUPPORTED_MODELS:
            raise ConfigError(
                f"{json_path}: a {self.model_type} model, which winsample does not support"
                f" (supported: {', '.join(SUPPORTED_MODELS)} tokenizer.json models)"
            )
        tok.encode_special_tokens = True  # a control token's text inside a document stays text
        self._tok = tok
        self._data = data  # the text the library loaded, for the fast engine (to_str: ~0.2 s more for 4 MB)
        spec = _spec_of(tok)
        n = max([tok.get_vocab_size(with_added_tokens=True)] + [a["id"] + 1 for a in spec["added_tokens"]])
        while tok.id_to_token(n) is not None:  # ids past the count (a vocabulary with holes)
            n += 1
        self.n_vocab = n
        self.cut_rule = _cut_rule(spec, self.model_type)
        self.can_cut = self.cut_rule is not None
        # token bytes rebuild the text exactly only for byte-level files that do not normalise
        self._style = _token_style(spec)
        self.exact_decode = self._style == "bytelevel" and not _types(spec.get("normalizer"))
        self._reencode = _reencode_rule(spec, self._style)
        self._byte_fallback = bool((spec.get("model") or {}).get("byte_fallback"))
        self._added = {
            a["id"]: a["content"] for a in spec.get("added_tokens") or []
            if isinstance(a, dict) and isinstance(a.get("id"), int) and isinstance(a.get("content"), str)
        }
        self._args = (str(path),)
        self._table: list[bytes] | None = None
        self._holes: set[int] = set()
        self.eos_text = self.bos_text = None
        self._config, self._chat_tok = config, None
        self.eot = self.bos = None
        if config is not None:
            self.eos_text, self.eot = self._config_token(config, "eos_token")
            self.bos_text, self.bos = self._config_token(config, "bos_token")
        # documents end with <|endoftext|> where the vocabulary has it: a chat model's eos_token
        # (Qwen's <|im_end|>) ends a turn, not a document (encode --eot-token chooses another)
        doc_end = tok.token_to_id(ENDOFTEXT)
        if doc_end is not None:
            self.eot = doc_end

    def special_tokens_map(self) -> dict[str, str]:
        """The special tokens a chat template sees by name (``bos_token``, ``eos_token``, …), from tokenizer_config.json."""
        config = self._config or {}
        out = {}
        for key in ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"):
            text = _token_text(config.get(key))
            if text is not None:
                out[key] = text
        return out

    def chat_templates(self) -> dict[str, str]:
        """The model's chat templates by name, as transformers loads them: ``chat_template.jinja``
        beside tokenizer.json (its own file since v4.50) as ``default`` and the
        ``additional_chat_templates/NAME.jinja`` beside it, else tokenizer_config.json's
        ``chat_template`` (a string: ``default``; or a list of ``{"name", "template"}``)."""
        folder = self.json_path.parent
        if (folder / "chat_template.jinja").is_file():
            out = {"default": (folder / "chat_template.jinja").read_text(encoding="utf-8")}
            extra = folder / "additional_chat_templates"
            if extra.is_dir():
                out.update((p.stem, p.read_text(encoding="utf-8")) for p in sorted(extra.glob("*.jinja")) if p.stem != "default")
            return out
        t = (self._config or {}).get("chat_template")
        if isinstance(t, list):
            return {x["name"]: x["template"] for x in t
                    if isinstance(x, dict) and isinstance(x.get("name"), str) and isinstance(x.get("template"), str)}
        return {"default": t} if isinstance(t, str) else {}

    def encode_with_specials(self, text: str) -> tuple[np.ndarray, list[tuple[int, int]]]:
        """Ids of rendered chat text with special tokens parsed (``<|im_start|>`` is one id, as
        ``apply_chat_template(tokenize=True)`` gives), and each token's ``[start, end)`` characters."""
        if self._chat_tok is None:
            self._chat_tok = import_tokenizers().Tokenizer.from_str(self._data)  # encode_special_tokens off
        try:
            e = self._chat_tok.encode(text, add_special_tokens=False)
        except TypeError:  # lone surrogates (JSON "\ud800"): U+FFFD, as ``encode`` does (same length: offsets hold)
            e = self._chat_tok.encode(text.encode("utf-16", "surrogatepass").decode("utf-16", "replace"), add_special_tokens=False)
        return np.array(e.ids, dtype=np.uint32), e.offsets

    def _config_token(self, config: dict, key: str) -> tuple[str | None, int | None]:
        text = _token_text(config.get(key))
        if text is None:
            return None, None
        tid = self._tok.token_to_id(text)
        if tid is None:
            raise ConfigError(f"{self.path}: {CONFIG_JSON}'s {key} {text!r} is not a token of its tokenizer.json")
        return text, tid

    # --- encoding ---------------------------------------------------------------------------

    def encode(self, text: str) -> np.ndarray:
        try:
            ids = self._tok.encode(text, add_special_tokens=False).ids
        except TypeError:  # lone surrogates (JSON "\ud800"): U+FFFD, as tiktoken's encode_ordinary does
            text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
            ids = self._tok.encode(text, add_special_tokens=False).ids
        return np.array(ids, dtype=np.uint32)

    def encode_each(self, texts) -> list[list[int]]:
        """``encode`` of each text in one ``encode_batch`` call, which releases the GIL (the same
        ids: the same pipeline, text by text; sequential, see ``import_tokenizers``)."""
        try:
            return [e.ids for e in self._tok.encode_batch(list(texts), add_special_tokens=False)]
        except TypeError:  # a text with lone surrogates: encode's own fallback, text by text
            return super().encode_each(texts)

    def _piece_bytes(self, piece: str) -> bytes:
        if self._style == "bytelevel":
            try:
                return bytes([_BYTE_OF[c] for c in piece])
            except KeyError:  # not in the byte alphabet: the piece's own text
                return piece.encode("utf-8")
        if self._byte_fallback and len(piece) == 6 and piece.startswith("<0x") and piece.endswith(">"):
            try:
                return bytes([int(piece[3:5], 16)])
            except ValueError:
                pass
        return piece.replace("\u2581", " ").encode("utf-8")

    def vocab_bytes(self) -> list[bytes]:
        """Bytes of every id (``b""`` for an id the file does not use); built once."""
        if self._table is None:
            table = [b""] * self.n_vocab
            for piece, i in self._tok.get_vocab(with_added_tokens=False).items():
                table[i] = self._piece_bytes(piece)
            for i, content in self._added.items():  # added tokens are their text, not byte-level
                if 0 <= i < self.n_vocab:
                    table[i] = content.encode("utf-8")
            self._holes = {i for i, b in enumerate(table) if not b}
            self._table = table
        return self._table

    def token_bytes(self, token: int) -> bytes:
        table = self.vocab_bytes()
        if not 0 <= token < len(table) or token in self._holes:
            raise KeyError(token)
        return table[token]

    def reencodable(self) -> tuple[bool, str]:
        return self._reencode

    # --- the fast backend (``tokenizer.with_backend``) -------------------------------------------

    def engine(self) -> str:
        """The reference library and its version (meta.json's ``backend.engine``)."""
        return f"tokenizers {dist_version('tokenizers')}"

    def fast_engine(self):
        """gigatoken on this tokenizer.json as the reference library loaded it (the same text:
        no second read of a file that may have changed), special added tokens encoded as text
        (``fastengine.hf_engine``); ConfigError when gigatoken cannot load it."""
        from . import fastengine

        return fastengine.hf_engine(self._data)

    def special_texts(self) -> list[str]:
        """Every added token's text, alone and in context (the self-check's extra texts):
        special ones must stay text, non-special ones get their ids, as the reference does."""
        return texts_in_context(self._added.values())

    # --- identity ---------------------------------------------------------------------------

    @property
    def sha256(self) -> str:
        return self.spec_sha256

    def describe(self) -> dict:
        return {
            "family": self.family,
            "name": self.name,
            "file": str(self.path),
            "sha256": self.spec_sha256,
            "config_sha256": self.config_sha256,
            "model": self.model_type,
            "n_vocab": self.n_vocab,
            "eot": self.eot,
            "bos": self.bos,
            "cut_rule": self.cut_rule,
        }

    # --- safe cuts --------------------------------------------------------------------------

    def last_safe_cut(self, text: str, lo: int, hi: int) -> int | None:
        return chunking.last_safe_cut(text, lo, hi) if self.cut_rule else None

    def iter_safe_cuts(self, text: str, pos: int = 0):
        return chunking.iter_safe_cuts(text, pos) if self.cut_rule else iter(())

    def last_safe_cut_bytes(self, window: bytes, base: int = 0) -> int | None:
        return chunking.last_safe_cut_bytes(window, base) if self.cut_rule else None

    def token_id(self, text: str) -> int | None:
        return self._tok.token_to_id(text)

    def __reduce__(self):  # a worker reloads the files
        return reduce_keeping_eot(self, reload, (str(self.path), str(self.json_path)))


def _spec_of(tok) -> dict:
    """The parts of the tokenizer.json that decide token bytes and safe cuts, as the library
    parsed them (its own serialisation of each part: no second parse of a many-MB file)."""
    def part(obj):
        return json.loads(obj.__getstate__()) if obj is not None else None

    return {
        "normalizer": part(tok.normalizer),
        "pre_tokenizer": part(tok.pre_tokenizer),
        "decoder": part(tok.decoder),
        "model": {"byte_fallback": bool(getattr(tok.model, "byte_fallback", False))},
        "added_tokens": [
            {"id": i, "content": a.content, "special": a.special, "lstrip": a.lstrip, "rstrip": a.rstrip,
             "single_word": a.single_word}
            for i, a in sorted(tok.get_added_tokens_decoder().items())
        ],
    }


def _first_line(e: BaseException) -> str:
    s = str(e).strip().splitlines()
    return s[0] if s else type(e).__name__


def reload(path: str, json_path: str) -> HFTokenizer:
    """An equal HFTokenizer from the same files (what unpickling in a worker does)."""
    return load(Path(path), Path(json_path), read_ranks_file(json_path))


def load(path: Path, json_path: Path, data: bytes) -> HFTokenizer:
    """An HFTokenizer from ``json_path``'s bytes ``data``; ``path`` is what the user named.
    ``tokenizer_config.json`` beside it gives the eos/bos tokens."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(f"{json_path}: not UTF-8 JSON (byte {e.start})") from None
    if not _MODEL_KEY.search(text):
        try:  # only on this error path: tell a broken file from a JSON of another kind
            json.loads(text)
        except ValueError as e:
            raise ConfigError(f"{json_path}: truncated or malformed JSON ({e})") from None
        except RecursionError:  # Python's parser recurses per level of nesting
            raise ConfigError(f"{json_path}: JSON nested too deeply to read: not a tokenizer.json") from None
        raise ConfigError(f"{json_path}: JSON, but not a Hugging Face tokenizer.json (no \"model\" object)")
    config = config_data = None
    cfg = json_path.parent / CONFIG_JSON
    if cfg.is_file():
        try:
            config_data = cfg.read_bytes()
            config = json.loads(config_data)
        except (OSError, ValueError) as e:
            raise ConfigError(f"{cfg}: not a readable JSON file: {e}") from None
        except RecursionError:
            raise ConfigError(f"{cfg}: JSON nested too deeply to read: not a tokenizer_config.json") from None
        if not isinstance(config, dict):
            raise ConfigError(f"{cfg}: not a tokenizer_config.json (not a JSON object)")
    return HFTokenizer(path, json_path, text, config, config_data)
