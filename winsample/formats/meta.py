"""meta.json: the typed schema (Meta, SplitEntry, ShardEntry) and its reader and writer."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..disk.atomic import write_json_atomic
from .names import META_JSON, SPLITS, bin_name, mask_name
from .schema import extra_keys, get_dtype, get_int, get_name, get_str, is_int, read_json, schema_error

FORMAT_NAME = "winsample"
FORMAT_VERSION = 1


_ENTRY_KEYS = ("file", "doc_index", "tokens", "bytes", "documents", "max_token", "checksum")


@dataclass
class ShardEntry:
    """One shard file of a sharded split (``splits.<name>.shards[i]``); names are ``shards/<plain>``."""

    file: str
    doc_index: str | None
    tokens: int
    bytes: int
    documents: int
    max_token: int | None
    checksum: str
    continues: bool = False  # its first tokens belong to a document started in an earlier shard
    extra: dict = field(default_factory=dict)

    KEYS = _ENTRY_KEYS + ("continues",)

    @classmethod
    def from_json(cls, obj: Any, where: str, path: str) -> ShardEntry:
        if not isinstance(obj, dict):
            schema_error(where, f"{path} is not a JSON object")
        cont = obj.get("continues", False)
        if not isinstance(cont, bool):
            schema_error(where, f"{path}.continues is {cont!r}, not true or false")
        return cls(
            file=get_name(obj, "file", where, path, shard=True),
            doc_index=get_name(obj, "doc_index", where, path, shard=True, required=False, nullable=True),
            tokens=get_int(obj, "tokens", where, path), bytes=get_int(obj, "bytes", where, path),
            documents=get_int(obj, "documents", where, path),
            max_token=get_int(obj, "max_token", where, path, required=False, nullable=True),
            checksum=get_str(obj, "checksum", where, path), continues=cont, extra=extra_keys(obj, cls.KEYS),
        )

    def to_json(self) -> dict:
        return {"file": self.file, "doc_index": self.doc_index, "tokens": self.tokens, "bytes": self.bytes,
                "documents": self.documents, "max_token": self.max_token, "checksum": self.checksum,
                "continues": self.continues, **self.extra}


@dataclass
class LossMask:
    """``splits.<name>.mask``: the split's loss mask file (``mask_name``): one uint8 per token of
    the split, 1 where a label is trained on (its token is in an assistant turn or a completion),
    else 0; ``trained`` counts the 1s; ``checksum`` is the file's (``disk.checksum_file``)."""

    file: str
    tokens: int
    trained: int
    checksum: str
    loss: str  # what is trained on: assistant, completion or all

    KEYS = ("file", "tokens", "trained", "checksum", "loss")

    @classmethod
    def from_json(cls, obj: Any, where: str, path: str) -> LossMask:
        if not isinstance(obj, dict):
            schema_error(where, f"{path} is not an object")
        return cls(file=get_name(obj, "file", where, path), tokens=get_int(obj, "tokens", where, path),
                   trained=get_int(obj, "trained", where, path), checksum=get_str(obj, "checksum", where, path),
                   loss=get_str(obj, "loss", where, path))

    def to_json(self) -> dict:
        return {"file": self.file, "tokens": self.tokens, "trained": self.trained, "checksum": self.checksum, "loss": self.loss}


@dataclass
class SplitEntry:
    """``splits.<name>`` of meta.json: one split's token file (or logical stream of shards).

    ``file`` and ``doc_index`` are plain names inside the data folder (``doc_index`` None: no
    index recorded, or a sharded split whose shards carry theirs); ``tokens``, ``bytes``,
    ``documents`` are counts; ``max_token`` the largest id (None for an empty split).
    """

    file: str
    tokens: int
    bytes: int
    documents: int
    checksum: str
    doc_index: str | None = None
    max_token: int | None = None
    shards: list[ShardEntry] | None = None  # a sharded split: its files, in stream order
    mask: LossMask | None = None  # a chat or prompt/response dataset: which labels are trained on
    extra: dict = field(default_factory=dict)
    has_doc_index: bool = field(default=True, repr=False, compare=False)  # False: the key was absent

    KEYS = _ENTRY_KEYS + ("shards", "mask")

    @property
    def sharded(self) -> bool:
        return self.shards is not None

    def files(self, folder: str | Path) -> list[tuple[Path, int]]:
        """(path, recorded bytes) of the token files holding this split: its shards, or its file."""
        folder = Path(folder)
        if self.shards is not None:
            return [(folder / e.file, e.bytes) for e in self.shards]
        return [(folder / self.file, self.bytes)]

    @classmethod
    def from_json(cls, obj: Any, where: str, path: str) -> SplitEntry:
        if not isinstance(obj, dict):
            schema_error(where, f"{path} is not an object")
        shards = None
        if "shards" in obj and obj["shards"] is not None:
            if not isinstance(obj["shards"], list):
                schema_error(where, f"{path}.shards is not a list")
            shards = [ShardEntry.from_json(e, where, f"{path}.shards[{i}]") for i, e in enumerate(obj["shards"])]
        return cls(
            file=get_name(obj, "file", where, path),
            tokens=get_int(obj, "tokens", where, path), bytes=get_int(obj, "bytes", where, path),
            documents=get_int(obj, "documents", where, path), checksum=get_str(obj, "checksum", where, path),
            doc_index=get_name(obj, "doc_index", where, path, required=False, nullable=True),
            max_token=get_int(obj, "max_token", where, path, required=False, nullable=True),
            shards=shards, extra=extra_keys(obj, cls.KEYS), has_doc_index="doc_index" in obj,
            mask=LossMask.from_json(obj["mask"], where, f"{path}.mask") if obj.get("mask") is not None else None,
        )

    def to_json(self) -> dict:
        out = {"file": self.file}
        if self.has_doc_index or self.doc_index is not None:
            out["doc_index"] = self.doc_index
        out.update(tokens=self.tokens, bytes=self.bytes, documents=self.documents, max_token=self.max_token,
                   checksum=self.checksum)
        if self.shards is not None:
            out["shards"] = [e.to_json() for e in self.shards]
        if self.mask is not None:
            out["mask"] = self.mask.to_json()
        out.update(self.extra)
        return out


_META_KEYS = ("format", "version", "winsample_version", "dtype", "tokenizer", "eot_appended", "split", "splits",
              "inputs", "stats", "sharded")


def _check_tokenizer(tok: Any, where: str) -> dict:
    """meta's ``tokenizer`` entry: an object with n_vocab (≥ 1), eot in [0, n_vocab), string name,
    ranks_sha256, file, pattern, family when present. Its other fields are the family's own."""
    if not isinstance(tok, dict):
        schema_error(where, "missing tokenizer.n_vocab (tokenizer is not an object)")
    if not is_int(tok.get("n_vocab")):
        schema_error(where, f"missing tokenizer.n_vocab (or not an integer: {tok.get('n_vocab')!r})")
    n = get_int(tok, "n_vocab", where, "tokenizer", lo=1)
    get_int(tok, "eot", where, "tokenizer", lo=0, hi=n - 1, required=False, nullable=True)  # null: none (--no-eot)
    get_int(tok, "bos", where, "tokenizer", lo=0, hi=n - 1, required=False, nullable=True)
    for key in ("name", "ranks_sha256", "file", "pattern", "family"):
        get_str(tok, key, where, "tokenizer", required=False)
    return tok


# the fields of a tokenizer entry that say which ids it gives (a file's path, a library's version
# left out): two token files whose entries agree on these hold ids that mean the same tokens
TOKENIZER_KEYS = ("name", "family", "ranks_sha256", "sha256", "spec_sha256", "config_sha256", "model_sha256", "n_vocab", "eot")


def tokenizer_identity(entry: dict | None) -> dict:
    """The ``TOKENIZER_KEYS`` of a tokenizer entry (meta.json's, or a plan sidecar's copy of it)
    that it has, in that order: what ``mix`` and ``verify`` compare across a mixture's sources.
    A tokenizer file (``sha256``: tokenizer.json, SentencePiece) is its hashes, not its name: the
    name recorded for the same files changed once (the model's name, not the folder's)."""
    if not isinstance(entry, dict):
        return {}
    named = "sha256" not in entry
    return {k: entry[k] for k in TOKENIZER_KEYS if k in entry and (named or k != "name")}


def _check_split_rule(rule: Any, where: str) -> dict | None:
    if rule is None:
        return None
    if not isinstance(rule, dict):
        schema_error(where, "split is not a JSON object")
    method = get_str(rule, "method", where, "split", required=False)
    if method is not None and method not in SPLIT_METHODS:  # verify's retokenize reads it: tail cuts a document
        schema_error(where, f"split.method is {method!r}, not one of {', '.join(SPLIT_METHODS)}")
    f = rule.get("fraction")
    if "fraction" in rule and (not isinstance(f, (int, float)) or isinstance(f, bool) or not 0 <= f <= 1):
        schema_error(where, f"split.fraction is {f!r}, not a number in [0, 1]")
    get_int(rule, "seed", where, "split", lo=None, required=False)
    return rule


def _check_sharded(sh: Any, where: str) -> dict | None:
    if sh is None:
        return None
    if not isinstance(sh, dict):
        schema_error(where, "sharded is not a JSON object")
    get_int(sh, "version", where, "sharded", lo=1, required=False)
    get_int(sh, "count", where, "sharded", required=False)
    if "shards" in sh:
        if not isinstance(sh["shards"], list):
            schema_error(where, "sharded.shards is not a list")
        for i, e in enumerate(sh["shards"]):
            if not isinstance(e, dict):
                schema_error(where, f"sharded.shards[{i}] is not a JSON object")
            get_int(e, "index", where, f"sharded.shards[{i}]", required=False)
            get_name(e, "meta", where, f"sharded.shards[{i}]", shard=True, required=False)
    return sh


SPLIT_METHODS = ("doc", "tail")  # how encode assigned documents to train and val (encode.config's choices)
def check_version(obj: dict, where: str, newest: int, what: str) -> int:
    v = obj.get("version")
    if not is_int(v):
        schema_error(where, f"missing integer 'version' (got {v!r})")
    if v > newest:
        schema_error(where, f"{what} version {v} is newer than this winsample reads ({newest}); upgrade winsample")
    if v < 1:
        schema_error(where, f"{what} version {v} is not a version (1..{newest})")
    return v


@dataclass
class Meta:
    """meta.json: one data folder's description (the schema in this module's docstring).

    ``dtype`` is ``'<u2'`` or ``'<u4'``; ``tokenizer`` the tokenizer entry (its family's fields,
    see ``tokenizer.Tokenizer.describe``); ``splits`` maps split names to entries; ``split`` is the
    rule encode used (method, fraction, seed); ``inputs``, ``stats`` and ``sharded`` are kept as read.
    """

    dtype: str
    tokenizer: dict
    splits: dict[str, SplitEntry]
    version: int = FORMAT_VERSION
    winsample_version: str | None = None
    eot_appended: bool | None = None
    split: dict | None = None
    inputs: list | None = None
    stats: dict | None = None
    sharded: dict | None = None
    extra: dict = field(default_factory=dict)

    @property
    def itemsize(self) -> int:
        return np.dtype(self.dtype).itemsize

    @property
    def n_vocab(self) -> int:
        return int(self.tokenizer["n_vocab"])

    @property
    def tokenizer_name(self) -> str | None:
        return self.tokenizer.get("name")

    def split_for(self, file: str | Path) -> tuple[str, SplitEntry] | None:
        """(name, entry) of the split whose ``file`` is named like ``file``'s last part, or None."""
        name = Path(file).name
        for split, e in self.splits.items():
            if e.file == name:
                return split, e
        return None

    def fraction_of(self, split: str | None) -> float | None:
        """The share of tokens encode meant ``split`` to get (val: the fraction; train: 1 − it)."""
        f = (self.split or {}).get("fraction")
        if not isinstance(f, (int, float)) or isinstance(f, bool) or split not in ("train", "val"):
            return None
        return f if split == "val" else 1 - f

    @classmethod
    def from_json(cls, obj: Any, where: str = META_JSON, folder: str | Path | None = None) -> Meta:
        """Validate and type ``obj``; DataError naming ``where`` and the field if anything is off.

        With ``folder`` (the data folder), a split file there (``train.bin``, ``val.bin``) that no
        entry describes fails too: a meta entry removed is never read as "no such split".
        """
        if not isinstance(obj, dict):
            schema_error(where, "not a JSON object")
        if obj.get("format") != FORMAT_NAME:
            schema_error(where, f"format is {obj.get('format')!r}, expected {FORMAT_NAME!r}")
        version = check_version(obj, where, FORMAT_VERSION, "format")
        dtype = get_dtype(obj, "dtype", where, "")
        tok = _check_tokenizer(obj.get("tokenizer"), where)
        splits = obj.get("splits")
        if not isinstance(splits, dict) or not splits:
            schema_error(where, "missing 'splits'")
        entries = {name: SplitEntry.from_json(e, where, f"splits.{name}") for name, e in splits.items()}
        eot = obj.get("eot_appended")
        if eot is not None and not isinstance(eot, bool):
            schema_error(where, f"eot_appended is {eot!r}, not true or false")
        for key, typ in (("inputs", list), ("stats", dict)):
            if obj.get(key) is not None and not isinstance(obj[key], typ):
                schema_error(where, f"{key} is not a JSON {'list' if typ is list else 'object'}")
        meta = cls(
            dtype=dtype, tokenizer=tok, splits=entries, version=version,
            winsample_version=get_str(obj, "winsample_version", where, "meta", required=False, nullable=True),
            eot_appended=eot, split=_check_split_rule(obj.get("split"), where), inputs=obj.get("inputs"),
            stats=obj.get("stats"), sharded=_check_sharded(obj.get("sharded"), where), extra=extra_keys(obj, _META_KEYS),
        )
        if folder is not None:
            meta.check_folder(folder, where)
        return meta

    def check_folder(self, folder: str | Path, where: str = META_JSON) -> None:
        """DataError if a split's token file or loss mask lies in ``folder`` but no entry describes it."""
        described = {e.file for e in self.splits.values()}
        masks = {e.mask.file for e in self.splits.values() if e.mask is not None}
        for split in SPLITS:
            name = bin_name(split)
            if name not in described and (Path(folder) / name).exists():
                schema_error(where, f"{name} is in {folder} but splits.{split} does not describe it"
                     " (its entry was removed?); re-encode, or restore the entry")
            # a loss mask no entry records would be read as none: every label trained, prompts too
            if mask_name(split) not in masks and (Path(folder) / mask_name(split)).exists():
                schema_error(where, f"{mask_name(split)} is in {folder} but splits.{split} records no loss mask"
                     " (its mask entry was removed?); re-encode, or restore the entry")

    def to_json(self) -> dict:
        out: dict = {"format": FORMAT_NAME, "version": self.version}
        if self.winsample_version is not None:
            out["winsample_version"] = self.winsample_version
        out.update(dtype=self.dtype, tokenizer=self.tokenizer)
        if self.eot_appended is not None:
            out["eot_appended"] = self.eot_appended
        if self.split is not None:
            out["split"] = self.split
        out["splits"] = {name: e.to_json() for name, e in self.splits.items()}
        for key in ("inputs", "stats", "sharded"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        out.update(self.extra)
        return out


def validate_meta(meta: Any, where: str = META_JSON) -> dict:
    """Return ``meta`` if it follows the schema (``Meta.from_json``), else raise DataError saying what's off."""
    Meta.from_json(meta, where)
    return meta


def load_meta(path: str | Path) -> Meta:
    """Read meta.json as a ``Meta``; DataError if it is not JSON or breaks the schema
    (including a split file in its folder that no entry describes), InputError if missing."""
    path = Path(path)
    return Meta.from_json(read_json(path, "meta"), str(path), path.parent)


def read_meta(path: str | Path) -> dict:
    """``load_meta``, as the plain dict (for code not yet on the dataclasses)."""
    path = Path(path)
    obj = read_json(path, "meta")
    Meta.from_json(obj, str(path), path.parent)
    return obj


def write_meta(path: str | Path, meta: Meta | dict) -> None:
    """Write meta.json atomically (a dict is validated first, and written as given)."""
    if isinstance(meta, Meta):
        obj = meta.to_json()
        Meta.from_json(obj, str(path))
    else:
        obj = validate_meta(meta, str(path))
    write_json_atomic(path, obj)

