"""llm.c's headed shards: the writer beside the reader, shard groups, and the meta.json that owns them."""

from __future__ import annotations

import glob as globlib
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import disk, formats
from ..errors import DataError, InputError, WinsampleError
from .layouts import LLMC, layout_splits
from .megatron import INDEX_STEP

# --- llm.c / modded-nanogpt ---------------------------------------------------------------------


@dataclass(frozen=True)
class LlmcFormat:
    """One llm.c shard format (``dev/data/data_common.py`` ``HEADERS_INFO``): the header's magic
    and version, the ids' dtype, and llm.c's name for it (``write_datafile``'s ``model_desc``)."""

    magic: int
    version: int
    dtype: str
    model: str

    @property
    def itemsize(self) -> int:
        return np.dtype(self.dtype).itemsize

    @property
    def ids(self) -> str:
        return "uint16" if self.itemsize == 2 else "uint32"


LLMC_V1 = LlmcFormat(20240520, 1, "<u2", "gpt-2")  # llm.c's C trainer, modded-nanogpt
LLMC_V7 = LlmcFormat(20240801, 7, "<u4", "llama-3")  # llm.c's train_llama3.py
LLMC_FORMATS = {f.magic: f for f in (LLMC_V1, LLMC_V7)}
LLMC_MAGIC, LLMC_VERSION, LLMC_DTYPE = LLMC_V1.magic, LLMC_V1.version, LLMC_V1.dtype  # version 1: uint16 vocabularies
LLMC_HEADER_INTS = 256
LLMC_HEADER_BYTES = 4 * LLMC_HEADER_INTS
LLMC_DIR = "llmc"
DEFAULT_SHARD_TOKENS = 100_000_000  # llm.c's fineweb.py shard size
_NAME_RE = re.compile(r"^(?P<stem>.*?)[_-]?(?P<num>\d+)\.bin$")
# llm.c's version 7 is its Llama 3 format; winsample cannot guess that tokenizer (nor read it offline)
NEEDS_ENCODING = ("llm.c version 7 shards hold uint32 ids (llm.c writes them for Llama 3) and no meta.json"
                  " names their tokenizer: pass --encoding NAME, or --encoding PATH of the model's tokenizer file or folder")


def llmc_format_for(dtype: str) -> LlmcFormat:
    """The shard format that holds ids of ``dtype``: version 1 for uint16, version 7 for uint32."""
    return LLMC_V1 if np.dtype(dtype).itemsize == 2 else LLMC_V7


def llmc_shard_name(split: str, index: int) -> str:
    """A shard's path relative to OUT_DIR: ``llmc/train_000000.bin``."""
    return f"{LLMC_DIR}/{split}_{index:06d}.bin"


def llmc_header(count: int, fmt: LlmcFormat = LLMC_V1) -> bytes:
    """The 1024-byte header ``write_datafile`` writes: int32 [magic, version, count, 0, …]."""
    h = np.zeros(LLMC_HEADER_INTS, "<i4")
    h[0], h[1], h[2] = fmt.magic, fmt.version, count
    return h.tobytes()


@dataclass
class LlmcShard:
    """One shard's header, checked: its ``count`` ids of ``fmt``."""

    path: Path
    count: int
    fmt: LlmcFormat = LLMC_V1


def read_llmc_header(path: str | Path) -> LlmcShard:
    """The header of llm.c shard ``path`` after checking it and the file's size, as llm.c's
    readers do (magic, the version that magic goes with, count = the ids after the header).

    DataError naming the file: shorter than the header, a magic that is not llm.c's, a version
    other than its magic's, a negative count, or a size other than 1024 + itemsize × count bytes.
    """
    path = Path(path)
    try:
        size = disk.require_regular(path, "an llm.c shard").st_size
        with disk.open_regular(path, "an llm.c shard") as f:
            head = f.read(LLMC_HEADER_BYTES)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror}") from None
    if len(head) < LLMC_HEADER_BYTES:
        raise DataError(f"{path}: {size} bytes, shorter than an llm.c shard header ({LLMC_HEADER_BYTES} bytes)")
    magic, version, count = np.frombuffer(head, "<i4", 3).tolist()
    fmt = LLMC_FORMATS.get(magic)
    if fmt is None:
        known = " or ".join(f"{f.magic} (version {f.version}, {f.ids} ids)" for f in LLMC_FORMATS.values())
        raise DataError(f"{path}: not an llm.c shard: header magic {magic}, expected {known}")
    if version != fmt.version:
        raise DataError(f"{path}: llm.c shard version {version} with magic {magic}, expected {fmt.version} ({fmt.ids} ids)")
    if count < 0:
        raise DataError(f"{path}: header token count {count} is negative")
    want = LLMC_HEADER_BYTES + fmt.itemsize * count
    if size != want:
        raise DataError(
            f"{path}: {size} bytes, but its version {version} header counts {count} {fmt.ids} ids: {want} bytes expected"
            f" ({'truncated' if size < want else 'trailing bytes'})"
        )
    return LlmcShard(path, count, fmt)


def read_llmc_stream(files: list[Path]) -> tuple[list[int], LlmcFormat]:
    """(each shard's count, their one format) of a shard stream; DataError naming the first shard
    that fails ``read_llmc_header`` or whose format is not the first shard's (one stream, one dtype)."""
    heads = [read_llmc_header(f) for f in files]
    fmt = heads[0].fmt if heads else LLMC_V1
    for h in heads:
        if h.fmt != fmt:
            raise DataError(f"{h.path}: an llm.c version {h.fmt.version} shard ({h.fmt.ids} ids) in a stream of version"
                            f" {fmt.version} shards ({fmt.ids}, {heads[0].path.name}): one stream holds one format")
    return [h.count for h in heads], fmt


def is_llmc_shard(path: str | Path) -> bool:
    """True when ``path`` is a file whose first four bytes are an llm.c magic (its version and size
    are ``read_llmc_header``'s to check: a shard of a wrong version is refused, not read as ids)."""
    try:
        with disk.open_regular(path) as f:  # a FIFO is not a shard, and must not block
            head = f.read(8)
    except (OSError, WinsampleError):
        return False
    return len(head) == 8 and int(np.frombuffer(head, "<i4", 1)[0]) in LLMC_FORMATS


def _doc_ends_in(doc_starts: np.ndarray, n: int, lo: int, hi: int) -> np.ndarray:
    """Exclusive ends ``e`` of the documents with ``lo < e <= hi`` (a document ends where the next
    starts, the last at ``n``); ``doc_starts`` strictly increasing from 0."""
    a = int(np.searchsorted(doc_starts, lo + 1, "left"))
    b = int(np.searchsorted(doc_starts, hi, "right"))
    ends = np.asarray(doc_starts[a:b]).astype(np.int64)
    if len(doc_starts) and lo < n <= hi:
        ends = np.append(ends, n)
    return ends


def llmc_count(tokens: np.ndarray, doc_starts: np.ndarray, eot: int, eot_appended: bool) -> tuple[int, int]:
    """(ids in the llm.c stream of a split, trailing EOTs it leaves out).

    Each document ``[s, e)`` of the .bin becomes EOT + its ids, less a trailing EOT (the one
    encode appended). Only the id just before each document end is read.
    """
    n, d = len(tokens), len(doc_starts)
    dropped = 0
    if eot_appended:
        for lo in range(0, n, INDEX_STEP * 64):
            last = _doc_ends_in(doc_starts, n, lo, min(n, lo + INDEX_STEP * 64)) - 1
            if len(last):
                dropped += int(np.count_nonzero(np.asarray(tokens[last]) == eot))
                formats.release_pages(tokens, lo, min(n, lo + INDEX_STEP * 64))
    return n + d - dropped, dropped


def _llmc_edits(tokens: np.ndarray, doc_starts: np.ndarray, eot: int, eot_appended: bool, chunk_tokens: int):
    """For each piece ``[lo, hi)`` of a split: (lo, its ids, where an EOT goes in before a document,
    which appended EOTs are left out): the one rule ``llmc_stream`` and ``llmc_mask_stream`` apply."""
    n = len(tokens)
    for lo in range(0, n, chunk_tokens):
        hi = min(n, lo + chunk_tokens)
        chunk = np.asarray(tokens[lo:hi])
        a, b = int(np.searchsorted(doc_starts, lo, "left")), int(np.searchsorted(doc_starts, hi, "left"))
        at = np.asarray(doc_starts[a:b]).astype(np.int64) - lo  # documents starting in [lo, hi)
        drop = np.zeros(0, np.int64)
        if eot_appended:
            last = _doc_ends_in(doc_starts, n, lo, hi) - 1 - lo
            drop = last[chunk[last] == eot]
        yield lo, chunk, at, drop
        formats.release_pages(tokens, lo, hi)  # a mapped .bin: its read pages leave the resident set piece by piece


def _edited(piece: np.ndarray, at: np.ndarray, inserted, drop: np.ndarray) -> np.ndarray:
    """``piece`` with ``inserted`` put in before positions ``at`` and positions ``drop`` left out."""
    # Inside a long document nothing starts or ends: the piece as it is (no copy).
    out = np.insert(piece, at, inserted) if len(at) else piece
    if len(drop):
        keep = np.ones(len(piece), bool)
        keep[drop] = False
        out = out[np.insert(keep, at, True)]
    return out


def llmc_stream(tokens: np.ndarray, doc_starts: np.ndarray, eot: int, eot_appended: bool,
                chunk_tokens: int = 1 << 20) -> Iterator[np.ndarray]:
    """The llm.c ids of a split, in pieces: an EOT before each document, its appended EOT left out."""
    eot_arr = np.array(eot, dtype=tokens.dtype)
    for _, chunk, at, drop in _llmc_edits(tokens, doc_starts, eot, eot_appended, chunk_tokens):
        yield _edited(chunk, at, eot_arr, drop)


def llmc_mask_name(split: str, index: int) -> str:
    """A shard's loss mask, relative to OUT_DIR: ``llmc/train_000000.mask`` (one byte per id of
    ``llmc/train_000000.bin``, no header; not ``.bin``: a folder's shards are its ``*.bin``)."""
    return f"{LLMC_DIR}/{split}_{index:06d}.mask"


def llmc_mask_stream(tokens: np.ndarray, mask: np.ndarray, doc_starts: np.ndarray, eot: int, eot_appended: bool,
                     chunk_tokens: int = 1 << 20) -> Iterator[np.ndarray]:
    """The loss mask of ``llmc_stream``'s ids, piece for piece: the EOT put before a document is
    the label of the document before it, so it carries the mask of the EOT that document ended
    with when that one was left out, else 0 (the first document's, a chat's)."""
    for lo, chunk, at, drop in _llmc_edits(tokens, doc_starts, eot, eot_appended, chunk_tokens):
        vals = np.zeros(len(at), np.uint8)
        prev = at + lo - 1  # the token before each document: the EOT its predecessor ended with, if any
        has = prev >= 0
        if eot_appended and has.any():
            p = prev[has]
            vals[has] = np.where(np.asarray(tokens[p]) == eot, np.asarray(mask[p], np.uint8), 0)
        yield _edited(np.asarray(mask[lo : lo + len(chunk)], np.uint8), at, vals, drop)
        formats.release_pages(mask, lo, lo + len(chunk))


def write_llmc_masks(folder: str | Path, split: str, pieces: Iterator[np.ndarray], shards: list[dict]) -> list[str]:
    """Write each shard's loss mask (``llmc_mask_name``) from ``llmc_mask_stream``'s pieces, cut at
    the shards' own sizes; each shard entry gains ``mask`` and ``mask_checksum``. The names written."""
    folder, names, k, f, left = Path(folder), [], 0, None, 0
    for piece in pieces:
        piece = np.ascontiguousarray(piece, np.uint8)
        while piece.size:
            if f is None:
                name = llmc_mask_name(split, k)
                f, hasher, left = open(folder / name, "wb"), disk.new_hasher(), shards[k]["tokens"]
            part, piece = piece[:left], piece[left:]
            f.write(part)
            hasher.update(part)
            left -= len(part)
            if left == 0:
                f.close()
                f = None
                shards[k].update(mask=name, mask_checksum=disk.format_checksum(hasher))
                names.append(name)
                k += 1
    if f is not None or k != len(shards):
        raise DataError(f"{folder / LLMC_DIR}: the loss mask of {split} does not fill its shards (a mask shorter than its tokens)")
    return names


class _ShardWriter:
    """Writes one split's llm.c ids into shards of at most ``shard_tokens``, header first."""

    def __init__(self, folder: Path, split: str, total: int, shard_tokens: int, fmt: LlmcFormat = LLMC_V1):
        self.folder, self.split, self.total, self.fmt = folder, split, total, fmt
        # k = ceil(total / shard_tokens) shards of near-equal size (they differ by at most one id):
        # never a small remainder shard, which llm.c's loader would refuse (it asserts every
        # shard holds at least B*T*processes + 1 tokens).
        self.k = -(-total // shard_tokens)
        self.entries: list[dict] = []
        self.f = None
        self.left = 0  # ids still to write into the open shard
        self.written = 0

    def _open(self) -> None:
        i = len(self.entries)
        count = self.total // self.k + (1 if i < self.total % self.k else 0)
        name = llmc_shard_name(self.split, i)
        path = self.folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        self.f = open(path, "wb")
        self.hasher = disk.new_hasher()
        head = llmc_header(count, self.fmt)
        self.f.write(head)
        self.hasher.update(head)
        self.left = count
        self.entries.append({"file": name, "tokens": count, "bytes": LLMC_HEADER_BYTES + self.fmt.itemsize * count})

    def _close(self) -> None:
        self.f.close()
        self.f = None
        self.entries[-1]["checksum"] = disk.format_checksum(self.hasher)

    def write(self, ids: np.ndarray) -> None:
        ids = np.ascontiguousarray(ids, dtype=self.fmt.dtype)
        while ids.size:
            if self.f is None:
                self._open()
            part, ids = ids[: self.left], ids[self.left :]
            self.f.write(part)  # the array's own bytes (contiguous, little-endian): no copy
            self.hasher.update(part)
            self.left -= part.size
            self.written += part.size
            if self.left == 0:
                self._close()

    def finish(self) -> list[dict]:
        if self.f is not None:
            self._close()
        if self.written != self.total:
            raise RuntimeError(f"llm.c shards of {self.split}: wrote {self.written} ids, counted {self.total}")
        return self.entries


def write_llmc_split(folder: str | Path, split: str, tokens: np.ndarray, doc_starts: np.ndarray, eot: int,
                     eot_appended: bool, shard_tokens: int = DEFAULT_SHARD_TOKENS) -> dict:
    """Write ``folder/llmc/<split>_NNNNNN.bin`` from a split's .bin ids and document starts.

    One streaming pass over ``tokens`` (and a gather of the ids before each document end,
    to count the shards' sizes before their headers are written). uint16 ids are written as
    version 1 shards, uint32 ids as version 7 (``llmc_format_for``). Returns the layout entry
    of the split: tokens, documents, shards [{file, tokens, bytes, checksum}].
    """
    total, _ = llmc_count(tokens, doc_starts, eot, eot_appended)
    w = _ShardWriter(Path(folder), split, total, shard_tokens, llmc_format_for(tokens.dtype))
    for piece in llmc_stream(tokens, doc_starts, eot, eot_appended):
        w.write(piece)
    return {"tokens": total, "documents": len(doc_starts), "shards": w.finish()}


def llmc_shard_files(spec: str | Path) -> list[Path]:
    """The shard files an llm.c dataset path names: one file, a folder (its ``*.bin``), or a glob;
    sorted by name (shard order). InputError when it names none."""
    s = str(spec)
    if disk.is_glob(s) and not Path(s).exists():
        files = sorted(Path(p) for p in globlib.glob(s) if Path(p).is_file())
        if not files:
            raise InputError(f"{s}: the pattern matches no file")
        return files
    p = Path(s)
    if p.is_dir():
        files = sorted(q for q in p.glob("*.bin") if q.is_file())
        if not files:
            raise InputError(f"{p}: no .bin shard in this folder")
        return files
    if not p.exists():
        raise InputError(f"{p}: no such file or folder")
    return [p]


def group_shards(files: list[Path]) -> dict[str, list[Path]]:
    """Shards grouped by name without their number (``fineweb_train_000001.bin`` → ``fineweb_train``),
    each group in name order: one token stream per group (a split)."""
    groups: dict[str, list[Path]] = {}
    for f in files:
        m = _NAME_RE.match(f.name)
        key = m.group("stem") if m and m.group("stem") else f.stem
        groups.setdefault(key, []).append(f)
    return {k: sorted(v) for k, v in sorted(groups.items())}


def missing_shards(files: list[Path]) -> list[str]:
    """Names of the shards missing between the lowest and highest number of one group (llm.c's
    fineweb starts train at 000001: the first number is not assumed to be 0)."""
    nums = {}
    for f in files:
        m = _NAME_RE.match(f.name)
        if m:
            nums[int(m.group("num"))] = (f.name, m)
    if len(nums) < 2:
        return []
    name, m = nums[min(nums)]
    width = len(m.group("num"))
    head = name[: m.start("num")]
    return [f"{head}{k:0{width}d}.bin" for k in range(min(nums), max(nums) + 1) if k not in nums]


def shard_entry_problems(split: str, entry: dict) -> list[str]:
    """The shard names meta.json lists for ``split`` must be exactly those encode writes
    (``llmc/<split>_000000.bin``, …): a name read from metadata never leads out of the folder."""
    if split not in formats.SPLITS:
        return [f"layouts.llmc.splits names {split!r}, not train or val"]
    shards = entry.get("shards") if isinstance(entry, dict) else None
    if not isinstance(shards, list):
        return [f"layouts.llmc.splits.{split}.shards is not a list"]
    out = []
    for i, sh in enumerate(shards):
        want = llmc_shard_name(split, i)
        if not isinstance(sh, dict) or sh.get("file") != want:
            got = sh.get("file") if isinstance(sh, dict) else sh
            out.append(f"layouts.llmc.splits.{split}.shards[{i}].file is {got!r}, expected {want!r}")
    return out


def llmc_groups(p: Path, s: str) -> dict[str, list[Path]] | None:
    """The shard groups ``p`` names (a shard, a folder of them, a glob), or None."""
    try:
        if not p.exists() and disk.is_glob(s):
            return group_shards(llmc_shard_files(s))
        if p.is_file() and is_llmc_shard(p):
            return {p.stem: [p]}
        if p.is_dir():
            files = sorted(p.glob("*.bin"))
            return group_shards(files) if files and any(is_llmc_shard(f) for f in files) else None
    except InputError:
        return None
    return None


@dataclass
class LlmcGroup:
    """What the owning meta.json says of one group of shards: its split, the split's entry (the
    group compared with it when it is all the split's shards), and the split's shards the group
    lacks (``missing``: names as meta.json lists them)."""

    split: str
    entry: dict
    missing: list[str]

    @property
    def partial(self) -> bool:
        return bool(self.missing)

    def compared(self) -> dict:
        """The entry to check the group's shards against: the split's, or, for a part of it, one
        of just the group's shards (no document count: meta.json records none for a part)."""
        if not self.partial:
            return self.entry
        mine = [sh for sh in self.entry["shards"] if sh["file"] not in self.missing]
        return {"shards": mine, "tokens": sum(sh["tokens"] for sh in mine)}


@dataclass
class LlmcOwner:
    """The winsample data folder's meta.json that lists some llm.c shards (``llmc_owner``):
    ``groups`` it lists, by group name; ``problem``: why it could not be used (a meta.json that
    does not read, shard entries that are not encode's), the meta then None."""

    meta_file: Path
    meta: formats.Meta | None
    groups: dict[str, LlmcGroup]
    problem: str | None = None


def _owner_file(files: list[Path], meta_path=None) -> Path | None:
    """``meta_path``, else the meta.json above the shards' ``llmc/`` folder (by the folder's
    absolute name, then its real one: ``verify .`` inside it, a link to it), when it exists."""
    if meta_path is not None:
        return Path(meta_path)
    for parent in (Path(os.path.abspath(files[0])).parent, _real(files[0]).parent):
        if parent.name == LLMC_DIR and (parent.parent / formats.META_JSON).is_file():
            return parent.parent / formats.META_JSON
    return None


def _real(p: Path) -> Path:
    try:
        return p.resolve()
    except (OSError, RuntimeError):  # a link loop
        return Path(os.path.abspath(p))


def _llmc_entries(meta: formats.Meta) -> tuple[dict[str, dict], str | None]:
    """({split: entry} of meta's layouts.llmc whose shards are encode's names with integer token
    counts, the first problem found or None). A meta.json with no llm.c layout lists none: no problem."""
    desc = meta.to_json().get("layouts")
    if desc is None or (isinstance(desc, dict) and LLMC not in desc):
        return {}, None
    splits = layout_splits({"layouts": desc}, LLMC)
    if splits is None:
        return {}, "meta.json: layouts.llmc.splits is not an object of split entries"
    good, problem = {}, None
    for split, entry in splits.items():
        problems = shard_entry_problems(split, entry)
        if not problems and not all(isinstance(sh.get("tokens"), int) and not isinstance(sh.get("tokens"), bool) for sh in entry["shards"]):
            problems = [f"layouts.llmc.splits.{split}.shards: a token count that is not an integer"]
        if problems:
            problem = problem or f"meta.json: {problems[0]}"
        else:
            good[split] = entry
    return good, problem


def llmc_owner(groups: dict[str, list[Path]], meta_path=None) -> LlmcOwner | None:
    """The meta.json that lists ``groups``' shards under layouts.llmc: ``meta_path``, else the one
    above their ``llmc/`` folder (``encode --layout llmc`` writes them there). None when there is
    none, or it lists none of them. One that does not read, or whose shard entries are not the
    names encode writes, is returned with its ``problem`` (a name read from metadata is only ever
    compared with the files given, never opened)."""
    files = [f for fs in groups.values() for f in fs]
    meta_file = _owner_file(files, meta_path) if files else None
    if meta_file is None or not meta_file.is_file():
        return None
    try:
        meta = formats.load_meta(meta_file)
    except WinsampleError as e:
        return LlmcOwner(meta_file, None, {}, f"{meta_file}: {e}")
    splits, problem = _llmc_entries(meta)
    listed: dict[Path, tuple[str, str]] = {}  # real path -> (split, the name meta.json lists)
    for split, entry in splits.items():
        for sh in entry["shards"]:
            listed[_real(meta_file.parent / sh["file"])] = (split, sh["file"])
    found = {}
    for name, fs in groups.items():
        got = [listed.get(_real(f)) for f in fs]
        if not got or None in got or len({split for split, _ in got}) != 1:
            continue
        split = got[0][0]
        have = {n for _, n in got}
        found[name] = LlmcGroup(split, splits[split], [sh["file"] for sh in splits[split]["shards"] if sh["file"] not in have])
    if not found and problem is None:
        return None
    return LlmcOwner(meta_file, meta, found, f"{meta_file}: {problem.removeprefix('meta.json: ')}" if problem else None)


def stale_llmc(out_dir: Path, keep: set[str]) -> list[str]:
    """Names (relative to OUT_DIR) of llm.c shards (and their masks) in ``OUT_DIR/llmc`` that ``keep`` does not list."""
    d = out_dir / LLMC_DIR
    if not d.is_dir():
        return []
    return sorted(f"{LLMC_DIR}/{n}" for n in os.listdir(d) if n.endswith((".bin", ".mask")) and f"{LLMC_DIR}/{n}" not in keep)


def llmc_stream_checksum(files: list[Path], progress=None) -> str:
    """The checksum of an llm.c shard stream: ``combine_checksums`` of each shard file's own
    (header included), as meta.json records each shard's."""
    return disk.combine_checksums((Path(f).stat().st_size, disk.checksum_file(f, progress)) for f in files)
