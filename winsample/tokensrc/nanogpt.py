"""Opening a split by the one rule: a nanoGPT .bin with or without meta.json, or a sharded split's logical stream."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, DataError, InputError, WinsampleError
from ..formats.dataset import unfinished_commit
from ..formats.meta import Meta, SplitEntry, load_meta
from ..formats.names import META_JSON, SPLITS, bin_name
from ..formats.npy import read_doc_index
from ..formats.schema import is_int
from ..formats.tokens import DEFAULT_DTYPE, dtype_name, normalize_dtype, open_tokens, refuse_unlabelled
from .sharded import stream_of

# --- opening a split: the one rule ---------------------------------------------------------


def find_meta(path: str | Path) -> Path | None:
    """The meta.json of ``path``: inside it when it is a folder, else beside it; None if absent."""
    path = Path(path)
    mp = path / META_JSON if path.is_dir() else path.parent / META_JSON
    # present but not a regular file (a FIFO, a folder): returned, so reading it fails (exit 2)
    # instead of the data being checked as if it had no meta.json
    return mp if os.path.lexists(mp) else None


@dataclass
class OpenSplit:
    """One token stream, opened by ``open_split``: everything a feature needs to read it.

    ``path`` is the name it was opened by (for a sharded split the logical ``data/train.bin``);
    ``n`` tokens of ``dtype`` in ``nbytes`` bytes (``stray``: bytes past the last whole token,
    which make ``tokens`` raise DataError); ``meta``/``name``/``entry``: the meta.json that
    describes it, its split name and entry (None for a bare ``.bin``).
    """

    path: Path
    dtype: str
    n: int
    nbytes: int
    stray: int = 0
    meta: Meta | None = None
    meta_path: Path | None = None
    name: str | None = None
    entry: SplitEntry | None = None
    encoding: str | None = None  # an explicit --encoding: beats meta's tokenizer
    layout: str | None = None  # "llmc" / "megatron": data another tool wrote, opened by layouts.py
    known_starts: np.ndarray | None = field(default=None, repr=False)  # document starts the layout gives
    files: list | None = None  # llm.c: the shard files of the stream
    no_tokenizer: str | None = None  # why no default tokenizer fits (llm.c version 7 shards): --encoding is needed
    _tokens: Any = field(default=None, repr=False)
    _tokenizer: Any = field(default=None, repr=False)

    @property
    def folder(self) -> Path:
        """The data folder: where meta.json's names resolve."""
        return self.meta_path.parent if self.meta_path is not None else self.path.parent

    @property
    def sharded(self) -> bool:
        return self.entry is not None and self.entry.sharded

    @property
    def itemsize(self) -> int:
        return np.dtype(self.dtype).itemsize

    @property
    def tokens(self):
        """A read-only memmap of the file, or the ``ConcatTokens`` of a sharded split."""
        if self._tokens is None:
            if self.sharded:
                self._tokens = stream_of(self.folder, self.entry, self.dtype)
            else:
                self._tokens = open_tokens(self.path, self.dtype)
        return self._tokens

    @property
    def tokenizer_entry(self) -> dict | None:
        """meta.json's tokenizer entry, or None without a meta."""
        return self.meta.tokenizer if self.meta is not None else None

    @property
    def n_vocab(self) -> int:
        """meta's n_vocab; without a meta, the tokenizer's."""
        return self.meta.n_vocab if self.meta is not None else self.tokenizer.n_vocab

    @property
    def eot(self) -> int | None:
        """The end-of-document id: the ``--encoding`` tokenizer's when one is given, else the one
        meta records, else the tokenizer's."""
        if not self.encoding and self.meta is not None and is_int(self.meta.tokenizer.get("eot")):
            return self.meta.tokenizer["eot"]
        return self.tokenizer.eot

    @property
    def tokenizer(self):
        """The tokenizer by ``tokenizer.resolve``'s one rule: ``--encoding``, else meta's (its
        ``file`` found as recorded or in the data folder), else gpt2. ConfigError if it cannot load."""
        if self._tokenizer is None:
            from .. import tokenizer

            if self.no_tokenizer and not self.encoding:
                raise ConfigError(self.no_tokenizer)
            self._tokenizer = tokenizer.resolve(self.encoding, self.tokenizer_entry, self.folder)
        return self._tokenizer

    @property
    def doc_index(self) -> Path | None:
        """The document index file meta names for this (unsharded) split, when it exists."""
        if self.entry is None or self.sharded or not self.entry.doc_index:
            return None
        p = self.folder / self.entry.doc_index
        return p if p.exists() else None

    def doc_starts(self) -> np.ndarray | None:
        """int64 document starts from the index (across shards for a sharded split); None when
        there is none. DataError if they do not begin at 0, increase and stay below N."""
        if self.known_starts is not None:
            return self.known_starts
        if self.sharded:
            return self.tokens.doc_starts() if self.n else np.zeros(0, np.int64)
        p = self.doc_index
        if p is None:
            return None
        starts = read_doc_index(p)
        if self.n and (len(starts) == 0 or starts[0] != 0 or np.any(np.diff(starts) <= 0) or starts[-1] >= self.n):
            raise DataError(f"{p}: document starts must begin at 0, increase strictly and stay below N={self.n}")
        return starts

    @property
    def checksum(self) -> str | None:
        """The checksum meta records for this split (None without one)."""
        return self.entry.checksum if self.entry is not None else None

    def size_problem(self) -> str | None:
        """Why the file does not match its meta entry's size (it changed since encode), or the
        entry its own count of tokens (an edited meta.json), or None."""
        if self.entry is None or self.sharded:
            return None
        if self.entry.bytes != self.nbytes:
            pending = unfinished_commit(Path(self.meta_path).parent)
            return (f"{self.path}: {self.nbytes} bytes, but {self.meta_path} says {self.entry.bytes}: the file"
                    + (" is from another set" + pending if pending else
                       " changed since it was encoded; re-encode it or pass a matching --meta"))
        if self.entry.tokens * self.itemsize != self.entry.bytes:
            return (f"{self.meta_path}: {self.name} records {self.entry.tokens} tokens in {self.entry.bytes} bytes, which hold"
                    f" {self.entry.bytes // self.itemsize} tokens of {dtype_name(self.dtype)}: meta.json does not describe {self.path}"
                    " (edited, or another set's); run `winsample verify`, or re-encode")
        return None


NO_META = "no meta"  # open_split(path, NO_META): a bare token file, whatever lies beside it


def width(declared: str | None, recorded: str | None = None, where: str = "") -> str:
    """The dtype a token file is read as, by the one rule: what its own record says (``recorded``:
    meta.json's dtype, an llm.c header's, a Megatron index's; ``where`` names that record), else
    ``declared`` (``--dtype``: a bare file's width), else nanoGPT's uint16. ConfigError when
    ``declared`` contradicts ``recorded``."""
    if recorded is not None:
        recorded = normalize_dtype(recorded)
        if declared is not None and normalize_dtype(declared) != recorded:
            raise ConfigError(f"--dtype {dtype_name(normalize_dtype(declared))} contradicts {where}, which says"
                              f" {dtype_name(recorded)}: drop --dtype (it is for a file nothing describes)")
        return recorded
    return normalize_dtype(declared) if declared is not None else DEFAULT_DTYPE


def is_logical(path: str | Path, meta: str | Path | None = None) -> bool:
    """True when ``path`` names a split kept in shards (described by ``meta`` or the meta.json
    beside it), which opens by that name though no such file exists. A meta that does not read
    gives False (its error shows where the meta is read)."""
    path = Path(path)
    mp = Path(meta) if meta is not None else path.parent / META_JSON
    try:
        found = load_meta(mp).split_for(path) if mp.is_file() else None
    except WinsampleError:
        return False
    return found is not None and found[1].sharded


def _meta_arg(meta, path: Path) -> tuple[Meta | None, Path | None, bool]:
    """(Meta, its path, given explicitly) from ``open_split``'s ``meta`` argument."""
    if isinstance(meta, str) and meta == NO_META:
        return None, None, False
    if isinstance(meta, Meta):
        return meta, None, True
    if meta is not None:
        mp = Path(meta)
        if not mp.exists():
            raise InputError(f"{mp}: no such meta file")
        return load_meta(mp), mp, True
    mp = path.parent / META_JSON
    if os.path.lexists(mp):  # a FIFO or folder named meta.json fails to load (exit 2): never ignored
        return load_meta(mp), mp, False
    return None, None, False


def open_split(path: str | Path, meta: str | Path | Meta | None = None, encoding: str | None = None,
               *, meta_path: str | Path | None = None, dtype: str | None = None) -> OpenSplit:
    """Open the token stream ``path`` by the one rule every feature uses.

    ``meta``: a meta.json path (or a ``Meta``, with ``meta_path`` its file), else the meta.json
    beside ``path`` if there is one. A meta given explicitly must describe ``path`` (InputError
    otherwise); one found beside it that describes other files is ignored (a bare ``.bin``, read
    as ``DEFAULT_DTYPE``). A split kept in shards opens by its logical name (``data/train.bin``,
    which need not exist). ``encoding``: an explicit tokenizer name for ``.tokenizer``. ``dtype``:
    the width of a bare file (``--dtype``); ConfigError when it contradicts the meta (``width``).

    InputError: no such file, a folder, a split's loss mask (its meta.json names it so), or a non-``.bin`` no
    meta describes (``refuse_unlabelled``);
    DataError: a meta.json that breaks the schema.
    """
    path = Path(path)
    m, mp, explicit = _meta_arg(meta, path)
    if meta_path is not None:
        mp = Path(meta_path)
    found = m.split_for(path) if m is not None else None
    if found is None and explicit:
        files = ", ".join(e.file for e in m.splits.values())
        raise InputError(f"{mp or 'meta'}: describes {files}, not {path.name}; pass the meta.json written with it")
    if found is None and m is not None:
        refuse_loss_mask(m, path, mp)
    if found is None:
        m = mp = None
    name, entry = found if found else (None, None)
    dtype = width(dtype, m.dtype if m is not None else None, f"{mp or 'meta.json'}")
    if entry is not None and entry.sharded:
        return OpenSplit(path, dtype, entry.tokens, entry.bytes, 0, m, mp, name, entry, encoding)
    if not path.exists():
        raise InputError(f"{path}: no such file")
    if path.is_dir():
        raise InputError(f"{path}: is a folder; give a token file such as {path / 'train.bin'}")
    refuse_unlabelled(path, entry is not None)
    try:
        size = path.stat().st_size
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror}") from None
    item = np.dtype(dtype).itemsize
    return OpenSplit(path, dtype, size // item, size, size % item, m, mp, name, entry, encoding)


def refuse_loss_mask(m: Meta, path: Path, meta_path=None) -> None:
    """InputError when ``path`` is a split's loss mask by ``m``, the meta.json beside it (one byte a
    token: read as tokens it would plan, pass or train on nonsense)."""
    owner = next((e.file for e in m.splits.values() if e.mask is not None and e.mask.file == path.name), None)
    if owner is not None:
        raise InputError(f"{path}: is the loss mask of {owner} ({meta_path or 'meta.json'}), one byte a token, not a"
                         f" token file; give {path.with_name(owner)}, whose mask is read beside it")


def open_folder(folder: str | Path, meta: str | Path | Meta | None = None, encoding: str | None = None,
                *, meta_path: str | Path | None = None, dtype: str | None = None) -> list[OpenSplit]:
    """The splits of a data folder: each split meta.json describes (sharded ones included), or,
    without a meta, the ``train.bin`` / ``val.bin`` present (``dtype``: their width, ``--dtype``).
    InputError if there are none."""
    folder = Path(folder)
    if meta is None:
        meta = find_meta(folder)
    if meta is None:
        out = [open_split(folder / bin_name(s), encoding=encoding, dtype=dtype) for s in SPLITS if (folder / bin_name(s)).exists()]
        for o in out:
            o.name = o.path.stem
    else:
        m, mp, _ = _meta_arg(meta, folder / "x")
        mp = Path(meta_path) if meta_path is not None else mp
        out = [open_split(folder / e.file, m, encoding, meta_path=mp, dtype=dtype) for e in m.splits.values()]
    if not out:
        raise InputError(f"{folder}: no train.bin / val.bin and no meta.json: not a data folder")
    return out


# --- nanoGPT's meta.pkl: the vocabulary size its train.py reads -----------------------------

META_PKL = "meta.pkl"
NANOGPT_DEFAULT_VOCAB = 50304  # train.py's model vocab_size when data_dir has no meta.pkl (GPT-2's 50257, padded)


def needs_meta_pkl(n_vocab: int) -> bool:
    """True when nanoGPT's train.py needs ``meta.pkl`` to size its embedding: an id at or past its
    default 50304 would index past it. Not written otherwise: nanoGPT's sample.py, finding a
    meta.pkl, decodes by its ``stoi``/``itos`` character tables, which a BPE vocabulary has not."""
    return n_vocab > NANOGPT_DEFAULT_VOCAB


def write_meta_pkl(path: str | Path, n_vocab: int) -> None:
    """``meta.pkl`` as nanoGPT's train.py reads it (``pickle.load(f)['vocab_size']``): a dict with
    ``vocab_size`` only. Pickle protocol 4, no other objects: the same bytes on every machine."""
    import pickle

    with open(path, "wb") as f:
        f.write(pickle.dumps({"vocab_size": int(n_vocab)}, protocol=4))
