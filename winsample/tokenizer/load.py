"""winsample.tokenizer.load."""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from pathlib import Path

from ..errors import ConfigError, InputError, WinsampleError
from .base import Tokenizer, with_eot
from .bpe import DEFAULT_ENCODING, FAMILIES, TiktokenTokenizer, load_encoding, read_ranks_file


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
    tok = _from_meta(entry, folder)
    eot = entry.get("eot")  # the dataset's own document end (encode --eot-token, or the default it was made with)
    return with_eot(tok, eot) if isinstance(eot, int) and 0 <= eot < tok.n_vocab else tok


def _from_meta(entry: Mapping, folder: str | Path | None) -> Tokenizer:
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
    """The one rule: ``encoding`` (an explicit ``--encoding``: a tiktoken name, or a tokenizer
    file or folder as ``load_file`` reads) if given, else the tokenizer
    meta.json's ``entry`` describes (``from_meta``; its identity must match the entry), else
    gpt2 (nanoGPT's ``.bin`` files are GPT-2). ConfigError when it cannot be loaded."""
    if encoding:
        try:
            return load(encoding)
        except ConfigError as e:
            if not Path(encoding).exists():  # a tokenizer file or folder named in its place (llm.c shards of Llama 3)
                raise ConfigError(str(e).replace("or pass --tokenizer-file", "or name a tokenizer file or folder")) from None
        return load_file(encoding)
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

# --- tokenizer files: the family is told by content, never by name ----------------------------

HF_JSON = "tokenizer.json"
HF_CONFIG = "tokenizer_config.json"  # beside it: eos_token, bos_token
SPM_NAMES = ("tokenizer.model", "spiece.model", "sentencepiece.model")
RANKS_LINE = re.compile(rb"[A-Za-z0-9+/]+={0,2} [0-9]+")


def sniff(data: bytes) -> str:
    """The family a tokenizer file's bytes are: 'hf' (JSON), 'sentencepiece' (a ModelProto),
    'tiktoken' (``base64 rank`` lines), or '' (none of them)."""
    from . import spm as tokenizer_spm

    head = data[:4096].lstrip(b"\xef\xbb\xbf \t\r\n")
    if head[:1] in (b"{", b"["):
        return "hf"
    first = head.split(b"\n", 1)[0].rstrip(b"\r")
    if RANKS_LINE.fullmatch(first):
        return "tiktoken"
    if tokenizer_spm.looks_like_model(data):
        return "sentencepiece"
    return ""


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
    return load_file_keyed(str(path), pattern, file_key(Path(path)))


def file_key(p: Path) -> tuple:
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
def load_file_keyed(path: str, pattern: str, key: tuple) -> Tokenizer:
    p = Path(path)
    json_path = p
    if p.is_dir():
        candidates = [p / HF_JSON] + [p / n for n in SPM_NAMES]
        found = next((c for c in candidates if c.is_file()), None)
        if found is None:
            raise InputError(f"{p}: a folder without {HF_JSON} or tokenizer.model: point --tokenizer-file at the tokenizer file")
        json_path = found
    data = read_ranks_file(json_path)  # reads, gunzips; InputError when unreadable
    kind = sniff(data)
    if kind == "hf":
        from . import hf as tokenizer_hf

        return tokenizer_hf.load(p, json_path, data)
    if kind == "sentencepiece":
        from . import spm as tokenizer_spm

        return tokenizer_spm.SentencePieceTokenizer(p if not p.is_dir() else json_path, data)
    if kind == "tiktoken":
        enc = load_encoding(DEFAULT_ENCODING, str(p), pattern)
        return TiktokenTokenizer(enc, enc.name, (DEFAULT_ENCODING, str(p), pattern), str(p), pattern)
    raise ConfigError(
        f"{json_path}: not a tokenizer file: neither a Hugging Face tokenizer.json, a SentencePiece"
        " model nor a .tiktoken ranks file"
    )
