"""Checks of token files and window plans: ``verify(path, ...) -> Report``.

The library never prints. Every problem in the data becomes a ``Check`` with status ``fail``
(or ``warn``); only a run that cannot happen at all (PATH missing, a file unreadable or not a
file, a --plan or --meta that does not exist) raises ``InputError`` (exit 2).

Check names (stable; scripts match on them): dtype_divisible, min_length, vocab_range, meta,
provenance, plan_bounds, order, duplicates, coverage, split_leakage, alignment, materialized, decode, retokenize
(``retokenize.py``: a seeded sample of documents re-encoded with the reference tokenizer).

Each token file is read once, in pieces over a read-only memmap (shared with the checks that
read it later, so no page is faulted in twice): that one pass computes the max id, the
out-of-range count and first position, the xxh3-128 checksum and (for a train/val pair) the
k-token shingle hashes used by split_leakage. A plan's own figures (bounds, order, coverage)
come from one pass over its rows in blocks, on a helper thread during the scans.
Units: positions, starts and lengths are in tokens; ends are exclusive.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from numpy.lib.stride_tricks import as_strided

from . import formats, layouts, retokenize, tokenizer
from .planning.boundaries import sorted_unique
from .errors import DataError, InputError, WinsampleError

CHECK_NAMES = (
    "dtype_divisible",
    "min_length",
    "vocab_range",
    "meta",
    "provenance",
    "plan_bounds",
    "order",
    "duplicates",
    "coverage",
    "split_leakage",
    "alignment",
    "materialized",
    "decode",
    "retokenize",
    "megatron_index",
    "llmc_shards",
    "llmc_documents",
)

DEFAULT_MIN_COVERAGE = 0.95  # the source article's threshold for "the corpus is actually seen"
DEFAULT_MAX_LEAKAGE = 0.01  # 1% of val shingles also in train: above that val loss is optimistic
DEFAULT_SHOW = 5  # the article's habit: read five windows before every training run
SHINGLE_K = 32  # tokens per shingle: long enough that common phrases do not match by chance
MAX_SHINGLES = 4_000_000  # hashes kept for train + val together (32 MB of uint64); above it, sample
ALIGN_SAMPLE = 256  # windows checked by `alignment` (all of them when the plan is smaller)
ALIGN_CELLS = 1 << 18  # ids of sampled windows `alignment` stacks at once (~2 MB of int64 per array)
NO_PLAN_WINDOW = 64  # tokens per decoded window when there is neither a plan nor -T
_SUB = 1 << 20  # tokens per hashing step: keeps uint64 temporaries small and in cache

Progress = Callable[[int], None]


# --- report ------------------------------------------------------------------------------


@dataclass
class Check:
    """One line of the report. ``figures`` are extra JSON keys (plain ints/floats/strings)."""

    name: str
    file: str
    status: str  # "pass" | "fail" | "warn" | "skip"
    detail: str
    figures: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"name": self.name, "file": self.file, "status": self.status, "detail": self.detail, **self.figures}


@dataclass
class Window:
    """A decoded window: ``overlap`` leading tokens are shared with the previous window shown."""

    file: str
    start: int
    length: int
    text: str
    overlap: int = 0
    overlap_text: str = ""
    source: dict | None = None  # where the document the window starts in came from (provenance)
    shown: int | None = None  # tokens decoded into ``text``: the first SHOW_TOKENS of a longer window

    def to_dict(self) -> dict:
        out = {"file": self.file, "start": self.start, "length": self.length, "text": self.text, "overlap": self.overlap,
               "shown_tokens": self.length if self.shown is None else self.shown}
        if self.source is not None:
            out["source"] = self.source
        return out


@dataclass
class Report:
    checks: list[Check] = field(default_factory=list)
    windows: list[Window] = field(default_factory=list)

    def add(self, name: str, file: str, status: str, detail: str, **figures) -> Check:
        c = Check(name, file, status, detail, {k: _plain(v) for k, v in figures.items()})
        self.checks.append(c)
        return c

    def failures(self, strict: bool = False) -> list[Check]:
        bad = ("fail", "warn") if strict else ("fail",)
        return [c for c in self.checks if c.status in bad]

    def ok(self, strict: bool = False) -> bool:
        return not self.failures(strict)

    def to_dict(self, strict: bool = False) -> dict:
        return {
            "ok": self.ok(strict),
            "checks": [c.to_dict() for c in self.checks],
            "windows": [w.to_dict() for w in self.windows],
        }


def percent(share: float, digits: int = 2) -> str:
    """``share`` as a percentage that reads 100% (or 0%) only when it is exactly that:
    0.99999 is "99.99%", not the "100.00%" plain rounding gives beside uncovered tokens."""
    text = f"{share:.{digits}%}"
    step = 10.0 ** -(digits + 2)
    if share < 1 and text == f"{1:.{digits}%}":
        return f"{1 - step:.{digits}%}"
    if share > 0 and text == f"{0:.{digits}%}":
        return f"{step:.{digits}%}"
    return text


def _plain(v):
    """numpy scalars → Python numbers, so the report serialises to JSON as is."""
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return v


# --- one pass over a token file -----------------------------------------------------------


@dataclass
class FileScan:
    """What one streaming pass learned about a token file."""

    path: Path
    label: str  # name shown in the report
    dtype: str
    size: int  # bytes
    n: int  # whole tokens (size // itemsize)
    stray: int  # bytes left over after the last whole token
    checksum: str
    max_id: int | None = None  # None for an empty or unreadable-as-tokens file
    bad_count: int = 0  # ids >= n_vocab
    first_bad: int | None = None  # position (tokens) of the first id >= n_vocab
    first_bad_id: int | None = None
    shingles: np.ndarray | None = None  # sampled k-shingle hashes (uint64), in file order
    offset: int = 0  # bytes before the first id (an llm.c shard's header); size and n count after it
    _map: np.ndarray | None = field(default=None, repr=False, compare=False)

    def tokens(self) -> np.ndarray:
        """Read-only view of the whole tokens (the stray tail bytes, if any, left out).

        One mapping per scan, reused: pages the scan faulted in need no new faults later."""
        if self.n == 0:
            return np.zeros(0, dtype=self.dtype)
        if self._map is None:
            self._map = np.memmap(self.path, dtype=self.dtype, mode="r", offset=self.offset, shape=(self.n,))
        return self._map


def _require_file(path: Path) -> None:
    if not path.exists():
        raise InputError(f"{path}: no such file")
    if not path.is_file():
        raise InputError(f"{path}: not a regular file")


def scan_file(
    path: str | Path,
    dtype: str,
    n_vocab: int,
    *,
    label: str | None = None,
    shingle_bits: int | None = None,
    progress: Progress | None = None,
    offset: int = 0,
    tokens: np.ndarray | None = None,
) -> FileScan:
    """One pass over ``path``: range figures, checksum and (if ``shingle_bits`` is set) shingles.

    ``tokens``: a read-only map of the same ids that other checks already read (the dataset's
    ``OpenSplit.tokens``): the scan pages it in, so they fault no page twice.

    InputError if the file is missing, not a file or unreadable. A size that is not a multiple
    of the item size is recorded (``stray``) and only the checksum is computed.
    """
    path = Path(path)
    _require_file(path)
    try:
        size = path.stat().st_size - offset
        with open(path, "rb") as f:
            head = f.read(offset)
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror}") from None
    item = np.dtype(dtype).itemsize
    scan = FileScan(path, label or path.name, dtype, size, size // item, size % item, "", offset=offset)
    if scan.stray:
        scan.checksum = formats.checksum_file(path, progress)
        return scan
    if tokens is not None and len(tokens) == scan.n and tokens.dtype == np.dtype(dtype):
        scan._map = tokens
    tokens = scan.tokens()
    hasher = formats.new_hasher()
    hasher.update(head)  # the checksum is the whole file's (an llm.c shard: header included)
    shingler = _Shingler(SHINGLE_K, shingle_bits) if shingle_bits is not None else None
    chunk_tokens = formats.CHUNK_BYTES // item
    ranges = _RangeScan(n_vocab, shingler)
    try:
        if shingler is None:
            # One thread: each piece is hashed, then scanned for the range figures while it is
            # still in this core's cache. A second thread would fault the same pages in beside
            # this one (the two contend) and spend about as much CPU again: CPU that the plan
            # checks and retokenize, which verify runs beside the scan, need more.
            for lo, chunk in formats.iter_chunks(tokens, SCAN_PIECE // item):
                hasher.update(chunk)
                ranges.feed(lo, chunk)
                if progress:
                    progress(chunk.nbytes)
        else:
            # Shingles cost more than the hash: a helper thread takes the range figures and
            # shingles, chunk by chunk in file order, while this thread hashes the same chunk
            # (xxhash and numpy release the GIL). At most _AHEAD chunks are queued (memmap
            # views: no copies).
            pending: deque = deque()
            with ThreadPoolExecutor(1) as pool:
                for lo, chunk in formats.iter_chunks(tokens, chunk_tokens):
                    pending.append(pool.submit(ranges.feed, lo, chunk))
                    hasher.update(chunk)
                    while len(pending) > _AHEAD:
                        pending.popleft().result()
                    if progress:
                        progress(chunk.nbytes)
                while pending:
                    pending.popleft().result()
    except OSError as e:  # e.g. an I/O error while paging the memmap in
        raise InputError(f"{path}: cannot read: {e}") from None
    scan.bad_count, scan.first_bad, scan.first_bad_id = ranges.bad_count, ranges.first_bad, ranges.first_bad_id
    max_id = ranges.max_id
    scan.checksum = formats.format_checksum(hasher)
    scan.max_id = max_id if max_id >= 0 else None
    if shingler is not None:
        scan.shingles = shingler.result()
    return scan


_AHEAD = 2  # chunks the range/shingle thread may lag behind the hashing thread
SCAN_PIECE = 4 << 20  # bytes hashed then range-scanned at a time without shingles: stays in cache


class _RangeScan:
    """Max id, out-of-range count and first position, and shingles, fed chunks in file order."""

    def __init__(self, n_vocab: int, shingler: _Shingler | None):
        self.n_vocab, self.shingler = n_vocab, shingler
        self.max_id = -1
        self.bad_count = 0
        self.first_bad: int | None = None
        self.first_bad_id: int | None = None

    def feed(self, lo: int, chunk: np.ndarray) -> None:
        m = int(chunk.max())
        if m >= self.n_vocab:  # rare: only then pay for the mask
            bad = chunk >= self.n_vocab
            if self.first_bad is None:
                i = int(np.argmax(bad))
                self.first_bad, self.first_bad_id = lo + i, int(chunk[i])
            self.bad_count += int(np.count_nonzero(bad))
        self.max_id = max(self.max_id, m)
        if self.shingler is not None:
            self.shingler.feed(chunk)


# --- shingles -----------------------------------------------------------------------------

_B = np.uint64(0x100000001B3)  # odd base of the polynomial hash (mod 2^64)
_M1 = np.uint64(0xBF58476D1CE4E5B9)  # splitmix64 finaliser constants
_M2 = np.uint64(0x94D049BB133111EB)


def _mix_values(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser of id + 1: per-token 64-bit values with no structure left in the ids."""
    x = x.astype(np.uint64) + np.uint64(1)
    x ^= x >> np.uint64(30)
    x *= _M1
    x ^= x >> np.uint64(27)
    x *= _M2
    x ^= x >> np.uint64(31)
    return x


_MIX16: np.ndarray | None = None  # _mix_values of every uint16 id: one gather instead of 7 passes


def _mix(t: np.ndarray) -> np.ndarray:
    global _MIX16
    if t.dtype.itemsize == 2:
        if _MIX16 is None:
            _MIX16 = _mix_values(np.arange(1 << 16))
        return _MIX16[t]
    return _mix_values(t)


def _pow_table(k: int) -> np.ndarray:
    """_B ** (k-1-j) mod 2^64 for j in 0..k-1."""
    p = np.ones(k, dtype=np.uint64)
    for j in range(k - 2, -1, -1):
        p[j] = p[j + 1] * _B
    return p


def shingle_hashes(tokens: np.ndarray, k: int = SHINGLE_K) -> np.ndarray:
    """Hash of every k-token shingle of ``tokens`` (len - k + 1 values, uint64).

    H[i] = sum_j mix(t[i+j]) * B^(k-1-j) mod 2^64, built by doubling (k a power of two):
    widths 1 → 2 → 4 … → k, each step one multiply and one add over the array.
    """
    assert k & (k - 1) == 0
    h = _mix(tokens)
    w = 1
    with np.errstate(over="ignore"):
        while w < k:
            if len(h) <= w:
                return np.zeros(0, dtype=np.uint64)
            h = h[:-w] * (_B ** np.uint64(w)) + h[w:]
            w *= 2
    return h


def _hash_at(tokens: np.ndarray, starts: np.ndarray, k: int) -> np.ndarray:
    """A 64-bit hash of each k-token shingle beginning at ``starts`` (sampled mode).

    Reads each shingle's k * itemsize bytes as 64-bit words (one strided gather, no per-token
    work), mixes each word and combines them polynomially. Not the same values as
    ``shingle_hashes``: one run uses one mode for both files, so only equality matters.
    """
    tokens = np.ascontiguousarray(tokens)
    width = k * tokens.dtype.itemsize  # bytes per shingle; a multiple of 8 for k = 32
    rows = as_strided(tokens.view(np.uint8), shape=(len(tokens) - k + 1, width), strides=(tokens.dtype.itemsize, 1))
    g = rows[starts].view("<u8")
    with np.errstate(over="ignore"):
        g = g * _M1
        g ^= g >> np.uint64(29)
        g *= _M2
        return (g * _pow_table(g.shape[1])).sum(axis=1, dtype=np.uint64)


_WIDE = {2: ("<u4", 0x9E3779B1), 4: ("<u8", 0x9E3779B97F4A7C15)}  # Fibonacci-hashing multipliers


def anchor_starts(tokens: np.ndarray, bits: int) -> np.ndarray:
    """Sorted positions i < len-1 whose shingle is kept when sampling 2**-bits of them.

    Kept when a multiplicative hash of the pair (t[i], t[i+1]) has its top ``bits`` bits zero.
    The pair is read as one double-width integer straight from the buffer (even and odd
    positions as two views), so this costs one multiply and one compare per position. It
    depends only on content, so train and val keep the same shingles (consistent sampling).
    """
    tokens = np.ascontiguousarray(tokens)
    wide, mult = _WIDE[tokens.dtype.itemsize]
    nbits = 8 * np.dtype(wide).itemsize
    wt = np.dtype(wide).type
    limit = wt(1 << (nbits - bits))
    out = []
    for off in (0, 1):
        m = (len(tokens) - off) // 2
        if m <= 0:
            continue
        pairs = tokens[off : off + 2 * m].view(wide)
        with np.errstate(over="ignore"):
            keep = pairs * wt(mult) < limit
        out.append(np.flatnonzero(keep) * 2 + off)
    return np.sort(np.concatenate(out)) if out else np.zeros(0, dtype=np.int64)


class _Shingler:
    """Feeds chunks in file order; carries k-1 tokens so shingles across chunk edges count once."""

    def __init__(self, k: int, bits: int):
        self.k, self.bits = k, bits
        self.carry: np.ndarray | None = None
        self.parts: list[np.ndarray] = []

    def feed(self, chunk: np.ndarray) -> None:
        k = self.k
        for lo in range(0, len(chunk), _SUB):
            t = np.asarray(chunk[lo : lo + _SUB])
            if self.carry is not None and len(self.carry):
                t = np.concatenate([self.carry, t])
            if len(t) >= k:
                if self.bits == 0:
                    self.parts.append(shingle_hashes(t, k))
                else:
                    starts = anchor_starts(t[: len(t) - k + 2], self.bits)
                    if len(starts):
                        self.parts.append(_hash_at(t, starts, k))
            self.carry = t[-(k - 1) :].copy() if k > 1 else t[:0]

    def result(self) -> np.ndarray:
        return np.concatenate(self.parts) if self.parts else np.zeros(0, dtype=np.uint64)


def sampling_bits(total_tokens: int, budget: int = MAX_SHINGLES) -> int:
    """Keep 2**-bits of the shingles so that about ``budget`` hashes are kept (0 = all, exact)."""
    if total_tokens <= budget:
        return 0
    return min(31, math.ceil(math.log2(total_tokens / budget)))


# --- the checks ------------------------------------------------------------------------------


@dataclass
class _Target:
    """A token file to check: its split name (when known), meta entry and how it opened."""

    path: Path
    label: str
    split: str | None = None
    entry: formats.SplitEntry | None = None
    src: formats.OpenSplit | None = None


def verify(
    path: str | Path,
    plans: Sequence[str | Path] = (),
    *,
    T: int | None = None,
    min_coverage: float = DEFAULT_MIN_COVERAGE,
    max_leakage: float = DEFAULT_MAX_LEAKAGE,
    show: int = DEFAULT_SHOW,
    meta_path: str | Path | None = None,
    encoding: str | None = None,
    max_shingles: int = MAX_SHINGLES,
    progress: Progress | None = None,
    writes: Sequence[str | Path] = (),
    retokenize_sample: int = retokenize.DEFAULT_DOCS,
    retokenize_bytes: int = retokenize.DEFAULT_BYTES,
) -> Report:
    """Run every check that applies to ``path`` (a data folder or one .bin) and ``plans``.

    ``T``: model input length for min_length (tokens). ``encoding``: tokenizer for vocab_range
    and decode when no meta.json says otherwise (default gpt2). ``retokenize_sample``: documents
    the retokenize check re-encodes with the reference (0: skip it), at most ``retokenize_bytes`` of their text. Returns a Report; raises
    InputError only when something named cannot be read at all.
    """
    foreign = layouts.foreign_layout(path, meta_path)
    path = Path(path)
    if not path.exists() and foreign is None and not formats.is_logical(path, meta_path):
        raise InputError(f"{path}: no such file or folder")
    if writes:  # --plot PNG: never one of the files checked
        ins = formats.dataset_files(path, meta_path)
        for p in plans:
            ins += [Path(p), formats.plan_sidecar(p), formats.materialized_path(p)]
        formats.refuse_overwrite(writes, ins)
    if T is not None and T < 1:
        raise InputError(f"-T {T}: the window length must be at least 1 token")
    for name, v in (("--min-coverage", min_coverage), ("--max-leakage", max_leakage)):
        if not 0 <= v <= 1:  # NaN too: it would make the check pass whatever the data
            raise InputError(f"{name} {v}: must be a share in [0, 1]")
    for p in plans:
        if not Path(p).exists():
            raise InputError(f"{p}: no such plan file")
    report = Report()
    if foreign is not None and foreign[0] == layouts.LLMC:
        return _verify_llmc(report, path, foreign[1], plans, T, show, encoding, progress, meta_path)
    megatron_idx = None
    if foreign is not None:  # a Megatron prefix: its .bin is the token file, its .idx says the dtype
        try:
            megatron_idx = layouts.read_megatron_index(Path(f"{foreign[1]}.idx"))
        except DataError as e:
            report.add("megatron_index", f"{foreign[1]}.idx", "fail", str(e))
            return report
        path = Path(f"{foreign[1]}.bin")
    folder = path if path.is_dir() else None

    # meta.json: where it is, whether it reads
    meta, meta_file, meta_error = None, None, None
    if meta_path is not None:
        meta_file = Path(meta_path)
        if not meta_file.exists():
            raise InputError(f"{meta_file}: no such meta file")
    else:
        meta_file = formats.find_meta(path)
    if meta_file is not None:
        try:
            meta = formats.load_meta(meta_file)
        except DataError as e:  # not JSON, newer version, schema broken: a failing `meta` check
            meta_error = str(e)

    # which token files: each opened by formats' one rule (a sharded split by its logical name)
    targets: list[_Target] = []
    meta_json = meta.to_json() if meta is not None else None  # layouts.py reads its own entries from it
    written = layouts.written(meta_json)
    if folder is not None:
        if meta is not None:
            if layouts.NANOGPT in written or layouts.MEGATRON in written:  # else no .bin is kept
                for src in formats.open_folder(folder, meta, meta_path=meta_file):
                    targets.append(_Target(src.path, src.entry.file, src.name, src.entry, src))
        else:
            for split in formats.SPLITS:
                p = folder / formats.bin_name(split)
                if p.exists():
                    targets.append(_Target(p, p.name, split, None, formats.open_split(p, formats.NO_META)))
        if not targets and not (meta is not None and layouts.LLMC in written):
            raise InputError(f"{folder}: no train.bin / val.bin and no meta.json: not a data folder")
    else:
        found = meta.split_for(path) if meta is not None else None
        if meta is not None and found is None:
            if meta_path is not None:
                meta_error = f"{meta_file}: describes {', '.join(e.file for e in meta.splits.values())}, not {path.name}"
            else:
                meta_file = None  # a meta.json beside the file that is about other files: not ours
            meta = None
        src = formats.open_split(path, meta if meta is not None else formats.NO_META, meta_path=meta_file)
        targets.append(_Target(path, path.name, src.name, src.entry, src))

    dtype = meta.dtype if meta is not None else formats.DEFAULT_DTYPE
    if meta is None and megatron_idx is not None:
        dtype = layouts.megatron_token_dtype(megatron_idx)

    # tokenizer: meta's, else --encoding, else gpt2
    enc, enc_error, ranks_sha = None, None, None
    if meta is not None:
        tok = meta.tokenizer
        n_vocab = meta.n_vocab
        enc, enc_error = _load_meta_tokenizer(tok, meta_file)
        if enc is not None:  # hashing the ranks (pure Python, ~50 ms) overlaps the file scan
            sha_pool = ThreadPoolExecutor(1)
            ranks_sha = sha_pool.submit(lambda: enc.sha256)
            sha_pool.shutdown(wait=False)
    else:
        try:
            enc = tokenizer.resolve(encoding)
        except WinsampleError as e:
            raise InputError(str(e)) from None
        n_vocab = enc.n_vocab

    # one pass per file
    split_names = {t.split for t in targets}
    leak = folder is not None and {"train", "val"} <= split_names
    sizes = {}
    for t in targets:
        if t.src.sharded:  # a split kept in shard files: meta's count will do
            sizes[t.path] = t.entry.tokens
            continue
        _require_file(t.path)
        sizes[t.path] = t.path.stat().st_size // np.dtype(dtype).itemsize
    # retokenize reads its sample and re-encodes it (tiktoken releases the GIL) during the scans
    retok = _start_retokenize(targets, sizes, meta, folder, dtype, enc, enc_error, retokenize_sample, retokenize_bytes)
    bits = sampling_bits(sum(sizes.values()), max_shingles) if leak else None
    # the plans' own work (read, coverage union) needs no token: a helper thread does it during the scans
    plan_pool = ThreadPoolExecutor(1)
    prepared = {Path(p): plan_pool.submit(_prepare_plan, Path(p), path, folder, sizes) for p in plans}
    plan_pool.shutdown(wait=False)
    scans: dict[Path, FileScan] = {}
    for t in targets:
        want = bits if leak and t.split in ("train", "val") else None
        if t.src.sharded:
            scans[t.path] = scan_logical(t.src, n_vocab, label=t.label, shingle_bits=want, progress=progress)
            continue
        shared = t.src.tokens if t.src is not None and t.src.layout is None and not t.src.stray else None
        scans[t.path] = scan_file(t.path, dtype, n_vocab, label=t.label, shingle_bits=want, progress=progress, tokens=shared)

    # per file
    for t in targets:
        if t.path not in sizes:  # an llm.c stream: checked below
            continue
        s = scans[t.path]
        _check_dtype(report, s, guessed=meta is None)
        if s.n == 0 and not s.stray and t.entry is not None and t.entry.tokens == 0 and meta.fraction_of(t.split) == 0:
            report.add("min_length", s.label, "skip", f"empty by design: meta.json's split fraction for {t.split} is 0", tokens=0)
        else:
            _check_min_length_file(report, s, T)
        _check_vocab(report, s, n_vocab)

    # the foreign layouts meta.json lists: llm.c shard streams join the token files checked
    if meta is not None and folder is not None and layouts.LLMC in written:
        eot = meta.tokenizer.get("eot", getattr(enc, "eot", None))
        llmc_splits = layouts.layout_splits(meta_json, layouts.LLMC)
        if llmc_splits is None:
            report.add("llmc_shards", formats.META_JSON, "fail", "meta.json: layouts.llmc.splits is not an object of split entries")
        for split, entry in (llmc_splits or {}).items():
            files = [folder / sh["file"] for sh in entry["shards"]] if _llmc_names_ok(report, split, entry) else None
            if files is None:
                continue
            label = f"{layouts.LLMC_DIR}/{split}_*.bin"
            scan, problems = _scan_llmc(files, n_vocab, label, progress)
            _check_llmc(report, label, scan, problems, eot, entry)
            if scan is not None:
                _check_min_length_file(report, scan, T)
                _check_vocab(report, scan, n_vocab)
                if not targets:
                    key = Path(label)
                    scans[key] = scan
                    targets.append(_Target(key, label, split))
    elif meta is None and folder is None and megatron_idx is not None:
        _check_megatron(report, megatron_idx, path)
    if meta is not None and folder is not None and layouts.MEGATRON in written:
        want_code = layouts.MEGATRON_CODES.get(dtype)
        mg_splits = layouts.layout_splits(meta_json, layouts.MEGATRON)
        if mg_splits is None:
            report.add("megatron_index", formats.META_JSON, "fail", "meta.json: layouts.megatron.splits is not an object of split entries")
        for split, entry in (mg_splits or {}).items():
            if split not in formats.SPLITS:
                report.add("megatron_index", formats.META_JSON, "fail", f"meta.json: layouts.megatron.splits names {split!r}, not train or val")
                continue
            idx_path = folder / layouts.megatron_index_name(split)
            try:
                idx = layouts.read_megatron_index(idx_path)
            except WinsampleError as e:
                report.add("megatron_index", idx_path.name, "fail", str(e))
                continue
            starts = None
            di = meta.splits[split].doc_index if split in meta.splits else None
            if di and (folder / di).is_file():
                try:
                    starts = formats.read_doc_index(folder / di)
                except WinsampleError:
                    starts = None  # the meta check names a broken doc index
            _check_megatron(report, idx, folder / formats.bin_name(split), starts, entry, want_code)

    # meta
    if meta_error is not None:
        report.add("meta", str(meta_file.name if folder else meta_file), "fail", meta_error)
    elif meta is not None:
        _check_meta(report, meta, meta_file, [t for t in targets if t.path in sizes], scans, enc, enc_error, ranks_sha)
    elif megatron_idx is not None:
        report.add("meta", path.name, "skip", f"no meta.json: a Megatron prefix, read as {dtype} (dtype code {megatron_idx.dtype_code}),"
                   f" n_vocab {n_vocab} ({enc.name}); no checksums or tokenizer record to compare")
    elif folder is not None:
        report.add("meta", formats.META_JSON, "warn", f"{folder}: no meta.json: read as {dtype}, n_vocab {n_vocab} ({enc.name})")
    else:
        report.add("meta", path.name, "skip", f"no meta.json beside {path.name}: read as {dtype}, n_vocab {n_vocab} ({enc.name})")

    # provenance: where each document came from (datasets written before it have none)
    if meta is not None and meta_error is None:
        _check_provenance(report, meta, meta_file, targets)

    # split leakage
    if leak:
        by_split = {t.split: scans[t.path] for t in targets}
        _check_leakage(report, by_split["train"], by_split["val"], bits, max_leakage)

    # plans
    first_plan = None
    for p in plans:
        got = _check_plan(report, Path(p), path, folder, scans, targets, T, min_coverage, prepared.get(Path(p)))
        if got is not None and first_plan is None:
            first_plan = got

    _finish_retokenize(report, retok)
    # decode
    _decode(report, first_plan, targets, scans, enc, enc_error, T, show)
    return report


def _start_retokenize(targets, sizes, meta, folder, dtype, enc, enc_error, docs: int, max_bytes: int = retokenize.DEFAULT_BYTES):
    """A future of the retokenize outcomes (``retokenize.check``) for the whole-token files of
    ``targets``, or a (status, detail) pair when the check cannot run at all."""
    if enc is None:
        return ("skip", f"the tokenizer does not load: {enc_error}")
    units = []
    tail = meta is not None and (meta.split or {}).get("method") == "tail"
    eot_appended = bool(meta.eot_appended) if meta is not None and meta.eot_appended is not None else meta is not None
    for t in targets:
        src = t.src
        if t.path not in sizes or src is None or src.sharded or src.layout is not None:
            continue  # llm.c streams and shard sets are not sampled (yet)
        if src.stray or src.n == 0:
            continue  # dtype_divisible / min_length say why
        try:
            starts = src.doc_starts()
        except (WinsampleError, OSError):
            starts = None  # the meta check names a broken index; documents then split at EOT
        units.append(retokenize.Unit(t.label, src.tokens, starts, eot_appended and starts is not None, enc.eot,
                                     partial_first=tail and t.split == "val", partial_last=tail and t.split == "train",
                                     recorded=meta is not None,
                                     bos_prepended=bool(meta is not None and meta.extra.get("bos_prepended"))))
    if not units:
        return None
    pool = ThreadPoolExecutor(1)
    fut = pool.submit(retokenize.check, enc, units, docs, max_bytes)
    pool.shutdown(wait=False)
    return fut


def _finish_retokenize(report: Report, retok) -> None:
    if retok is None:
        return
    if isinstance(retok, tuple):
        report.add("retokenize", "", *retok)
        return
    for o in retok.result():
        report.add("retokenize", o.label, o.status, o.detail, documents=o.documents, bytes=o.bytes, mismatches=o.mismatches)


# --- foreign layouts ---------------------------------------------------------------------


def _scan_llmc(files: list[Path], n_vocab: int, label: str, progress=None) -> tuple[FileScan | None, list[str]]:
    """One pass over an llm.c shard stream: (its FileScan, whose tokens() is the stream; header problems).

    The scan's checksum combines the shard files' own (header included); None when a header fails."""
    problems, counts = [], []
    for f in files:
        try:
            counts.append(layouts.read_llmc_header(f))
        except DataError as e:
            problems.append(str(e))
    if problems:
        return None, problems
    parts, total, bad, max_id, first_bad, first_bad_id = [], 0, 0, None, None, None
    shard_scans = []
    for f, c in zip(files, counts):
        sc = scan_file(f, layouts.LLMC_DTYPE, n_vocab, label=f.name, progress=progress, offset=layouts.LLMC_HEADER_BYTES)
        shard_scans.append(sc)
        parts.append((sc.size + layouts.LLMC_HEADER_BYTES, sc.checksum))
        if sc.bad_count and first_bad is None:
            first_bad, first_bad_id = total + sc.first_bad, sc.first_bad_id
        bad += sc.bad_count
        if sc.max_id is not None:
            max_id = sc.max_id if max_id is None else max(max_id, sc.max_id)
        total += sc.n
    stream = formats.ConcatTokens(files, counts, layouts.LLMC_DTYPE, header_bytes=layouts.LLMC_HEADER_BYTES)
    scan = FileScan(Path(label), label, layouts.LLMC_DTYPE, total * 2, total, 0, formats.combine_checksums(parts),
                    max_id, bad, first_bad, first_bad_id)
    scan.tokens = lambda: stream
    scan.shard_scans = shard_scans
    return scan, problems


def _llmc_names_ok(report: Report, split: str, entry: dict) -> bool:
    """meta.json's shard names must be the ones encode writes (never a path out of the folder)."""
    problems = layouts.shard_entry_problems(split, entry)
    if problems:
        report.add("llmc_shards", f"{layouts.LLMC_DIR}/{split}_*.bin", "fail", "; ".join(problems))
    return not problems


def _eot_figures(tokens, eot: int) -> tuple[int, int | None]:
    """(how many ids are the EOT, the first id) of a stream, in bounded pieces."""
    count = 0
    for _lo, chunk in formats.iter_chunks(tokens, formats.CHUNK_BYTES // 2):
        count += int(np.count_nonzero(np.asarray(chunk) == eot))
    return count, (int(tokens[0]) if len(tokens) else None)


def _check_llmc(report: Report, label: str, scan: FileScan | None, problems: list[str], eot: int | None, entry: dict | None = None,
                part: bool = False) -> None:
    """llmc_shards (headers, sizes; with meta.json: names, counts, checksums) and llmc_documents.
    ``part``: the shards are a part of a split (``entry`` lists just them, with no document count)."""
    if scan is None:
        report.add("llmc_shards", label, "fail", f"{len(problems)} bad shard(s): " + "; ".join(problems), problems=problems)
        return
    k = len(scan.shard_scans)
    if entry is not None:
        listed = entry.get("shards", [])
        bad = []
        if len(listed) != k:
            bad.append(f"meta.json lists {len(listed)} shards, {k} found")
        for sh, sc in zip(listed, scan.shard_scans):
            if sh.get("tokens") != sc.n:
                bad.append(f"{sh['file']}: header counts {sc.n} tokens, meta.json says {sh.get('tokens')}")
            full = sc.size + layouts.LLMC_HEADER_BYTES
            if sh.get("bytes") != full:
                bad.append(f"{sh['file']}: {full} bytes, meta.json says {sh.get('bytes')}")
            if sh.get("checksum") != sc.checksum:
                bad.append(f"{sh['file']}: hashes to {sc.checksum}, meta.json says {sh.get('checksum')}")
        if entry.get("tokens") != scan.n:
            bad.append(f"the shards hold {scan.n} tokens, meta.json says {entry.get('tokens')}")
        if bad:
            report.add("llmc_shards", label, "fail", f"{len(bad)} disagreement(s) with meta.json: " + "; ".join(bad), problems=bad)
            return
    report.add(
        "llmc_shards", label, "pass",
        f"{k} shard(s), {scan.n} tokens: headers (magic {layouts.LLMC_MAGIC}, version {layouts.LLMC_VERSION}, count) and sizes (1024 + 2 × count) agree"
        + (", checksums as meta.json records" if entry is not None else "; no meta.json: no checksums to compare"),
        shards=k, tokens=scan.n,
    )
    if eot is None:
        report.add("llmc_documents", label, "skip", "the tokenizer has no <|endoftext|>: document starts cannot be found")
        return
    count, first = _eot_figures(scan.tokens(), eot)
    if scan.n == 0:
        report.add("llmc_documents", label, "pass", "no tokens, no documents", documents=0)
    elif entry is not None and not part:
        want = entry.get("documents")
        if first != eot or count != want:
            why = f"the first id is {first}, not the EOT {eot}" if first != eot else f"{count} EOT ids for {want} documents"
            report.add("llmc_documents", label, "fail", f"every document must start with <|endoftext|> ({eot}) and no EOT stand elsewhere: {why}",
                       documents=want, eots=count)
        else:
            report.add("llmc_documents", label, "pass", f"each of the {want} documents starts with EOT {eot}, and no EOT stands elsewhere", documents=want)
    elif first != eot and part:  # a later shard of a split: encode cuts shards by count, not at documents
        report.add("llmc_documents", label, "skip", f"a part of a split that starts inside a document (shards are cut by"
                   f" token count): {count} EOT ids in it, the split's document count is checked on all its shards", eots=count)
    elif first != eot:
        report.add("llmc_documents", label, "warn",
                   f"the first id is {first}, not the EOT {eot}: the stream does not start at a document start (modded-nanogpt aligns sequences to EOT);"
                   f" {count} EOT ids further on", eots=count)
    else:
        why = "a part of a split: meta.json records no count for it" if part else "no meta.json"
        report.add("llmc_documents", label, "pass", f"{count} documents, each starting with EOT {eot} ({why}: the count is not compared)", documents=count)


def _check_megatron(report: Report, idx: layouts.MegatronIndex, bin_path: Path, doc_starts=None, entry: dict | None = None, want_code=None) -> None:
    """megatron_index: the .idx against its .bin (and, from meta.json, the documents and checksum)."""
    label = idx.path.name
    if not bin_path.is_file():
        report.add("megatron_index", label, "fail", f"{bin_path.name}, the data file of {label}, is missing")
        return
    problems = layouts.megatron_problems(idx, bin_path.stat().st_size, doc_starts)
    if want_code is not None and idx.dtype_code != want_code:
        problems.append(f"{label}: dtype code {idx.dtype_code}, the .bin's dtype needs {want_code}")
    if entry is not None:
        got = formats.checksum_file(idx.path)
        if entry.get("checksum") != got:
            problems.append(f"{label}: hashes to {got}, meta.json says {entry.get('checksum')}")
    if problems:
        report.add("megatron_index", label, "fail", f"{len(problems)} problem(s): " + "; ".join(problems), problems=problems)
    else:
        n = bin_path.stat().st_size // idx.itemsize
        report.add(
            "megatron_index", label, "pass",
            f"{idx.sequences} sequences, {idx.documents} documents, dtype code {idx.dtype_code}: lengths sum to N = {n},"
            " pointers contiguous, document indices 0 … S" + (", one sequence per document of meta.json" if doc_starts is not None else ""),
            sequences=idx.sequences, documents=idx.documents,
        )


def _verify_llmc(report: Report, path: Path, groups: dict, plans, T, show, encoding, progress, meta_path=None) -> Report:
    """verify of llm.c shards named on their own: each group of shards is one stream. Shards
    a winsample data folder wrote (its meta.json above their ``llmc/`` folder, or ``--meta``,
    lists them: ``layouts.llmc_owner``) are compared with what it records, read with its
    tokenizer: a folder or glob must hold all of a split's shards, one shard file is compared
    alone. Others are read as uint16 with ``encoding`` (default gpt2)."""
    owner = layouts.llmc_owner(groups, meta_path)
    if owner is not None and owner.problem is not None:
        report.add("meta", str(owner.meta_file), "fail", f"{owner.problem}: the shards cannot be compared with what it records")
        if owner.meta is None or not owner.groups:
            return report
    enc = None
    if owner is not None:
        enc, err = _load_meta_tokenizer(owner.meta.tokenizer, owner.meta_file)
        if enc is None:
            report.add("meta", str(owner.meta_file), "fail", f"{owner.meta_file}: its tokenizer does not load: {err}")
            return report
        n_vocab = owner.meta.n_vocab
        eot = owner.meta.tokenizer.get("eot", getattr(enc, "eot", None))
    else:
        try:
            enc = tokenizer.load(encoding or tokenizer.DEFAULT_ENCODING)
        except WinsampleError as e:
            raise InputError(str(e)) from None
        n_vocab = enc.n_vocab
        eot = getattr(enc, "eot", None)
    one_file = path.is_file()
    targets, scans = [], {}
    for name, files in groups.items():
        label = files[0].name if len(files) == 1 else f"{name}_*.bin ({len(files)} shards)"
        group = owner.groups.get(name) if owner is not None else None
        if group is not None and group.partial and not one_file:  # a shard lost from the folder, or left out of the glob
            report.add("llmc_shards", label, "fail", f"{owner.meta_file} lists {len(group.entry['shards'])} {group.split} shard(s);"
                       f" {len(group.missing)} not here: {', '.join(group.missing[:5])}{', …' if len(group.missing) > 5 else ''}",
                       missing=group.missing)
            continue
        scan, problems = _scan_llmc(files, n_vocab, label, progress)
        _check_llmc(report, label, scan, problems, eot, group.compared() if group is not None else None,
                    part=group is not None and group.partial)
        gone = layouts.missing_shards(files)
        if gone and group is None:  # no meta.json to say how many there were: a gap in the numbers is the only sign
            report.add("llmc_shards", label, "warn", f"{len(gone)} shard number(s) missing between the first and the last:"
                       f" {', '.join(gone[:5])}{', …' if len(gone) > 5 else ''} (a shard lost, or left out of the glob)",
                       missing=gone)
        if scan is not None:
            _check_min_length_file(report, scan, T)
            _check_vocab(report, scan, n_vocab)
            key = path if len(groups) == 1 else Path(label)
            scans[key] = scan
            targets.append(_Target(key, label))
    if owner is None:
        report.add("meta", str(path), "skip",
                   f"no meta.json: llm.c shards read as uint16, n_vocab {n_vocab} ({enc.name}): headers, sizes, vocabulary and EOT"
                   " document starts checked; no checksums, document counts or split leakage to compare")
    elif owner.problem is None:
        unlisted = [n for n in groups if n not in owner.groups]
        report.add("meta", str(owner.meta_file), "warn" if unlisted else "pass",
                   f"{owner.meta_file} lists these shards (layouts.llmc): their sizes, counts and checksums are compared with it"
                   f" (llmc_shards), read with its tokenizer ({enc.name}, n_vocab {n_vocab}); split leakage: `winsample verify"
                   f" {owner.meta_file.parent}`" + (f"; not listed there, so not compared: {', '.join(unlisted)}" if unlisted else ""))
    first_plan = None
    for p in plans:
        got = _check_plan(report, Path(p), path, None, scans, targets, T, DEFAULT_MIN_COVERAGE)
        if got is not None and first_plan is None:
            first_plan = got
    _decode(report, first_plan, targets, scans, enc, None, T, show)
    return report


def _load_meta_tokenizer(tok: dict, meta_file: Path | None):  # tok: meta's tokenizer entry
    """(encoding, None) or (None, error text) for meta's tokenizer entry."""
    try:
        return tokenizer.from_meta(tok, meta_file.parent if meta_file is not None else None), None
    except WinsampleError as e:
        return None, str(e)


def scan_logical(src: formats.OpenSplit, n_vocab: int, *, label: str, shingle_bits=None, progress=None) -> FileScan:
    """The one pass over a sharded split: each shard scanned, the results combined.

    Returns a ``FileScan`` of the logical stream (size, tokens, combined checksum, max id,
    out-of-range count and first position, shingles) whose ``tokens()`` is the stream, and whose
    ``shard_problems`` lists shards that disagree with their own meta entries.
    """
    stream = src.tokens
    dtype, entry = src.dtype, src.entry
    parts, problems, shingles = [], [], []
    total = stray = bad = 0
    max_id = first_bad = first_bad_id = None
    for j, sh in enumerate(entry.shards):
        s = scan_file(stream.paths[j], dtype, n_vocab, label=sh.file, shingle_bits=shingle_bits, progress=progress)
        parts.append((s.size, s.checksum))
        if s.checksum != sh.checksum:
            problems.append(f"{sh.file} hashes to {s.checksum}, meta.json says {sh.checksum}")
        if s.max_id is not None and sh.max_token is not None and s.max_id != sh.max_token:
            problems.append(f"{sh.file}: largest id {s.max_id}, meta.json says {sh.max_token}")
        stray += s.stray
        if s.bad_count and first_bad is None:
            first_bad, first_bad_id = total + s.first_bad, s.first_bad_id
        bad += s.bad_count
        if s.max_id is not None:
            max_id = s.max_id if max_id is None else max(max_id, s.max_id)
        if s.shingles is not None:
            shingles.append(s.shingles)  # shingles across a shard edge are left out: a sample anyway
        total += s.n
    size = total * src.itemsize + stray
    scan = FileScan(src.path, label, dtype, size, total, stray, formats.combine_checksums(parts),
                    max_id, bad, first_bad, first_bad_id,
                    np.concatenate(shingles) if shingle_bits is not None and shingles else
                    (np.zeros(0, np.uint64) if shingle_bits is not None else None))
    scan.tokens = lambda: stream  # the logical stream instead of one memmap
    scan.shard_problems = problems
    return scan


def _shard_doc_problems(scan: FileScan, entry: formats.SplitEntry, where: str) -> list[str]:
    """The document-index check for a sharded split: counts and order, across shards."""
    out = list(getattr(scan, "shard_problems", []))
    try:
        starts = scan.tokens().doc_starts()
    except WinsampleError as e:
        return out + [f"{where}: {e}"]
    if len(starts) != entry.documents:
        out.append(f"{where}.documents {entry.documents} but the shard indexes list {len(starts)}")
    if len(starts) and (starts[0] != 0 or np.any(np.diff(starts) <= 0) or starts[-1] >= max(scan.n, 1)):
        out.append(f"{where}: document starts across shards must begin at 0, increase, and stay below N = {scan.n}")
    return out


WIDE_SAMPLE = 1 << 20  # tokens looked at to tell uint32 ids read as uint16
WIDE_MIN = 64  # fewer tokens than this: too few to tell


def wider_ids_share(tokens: np.ndarray) -> float | None:
    """For a file read as uint16 without meta.json: the share of its odd uint16 halves that are
    0 when its even halves mostly are not (uint32 ids < 65536 read as uint16 look like
    ``id, 0, id, 0``: plausible ids, every second one GPT-2's "!"). None when it does not look so."""
    t = np.asarray(tokens[: min(len(tokens), WIDE_SAMPLE)])
    if len(t) < WIDE_MIN or t.dtype.itemsize != 2:
        return None
    odd, even = float(np.mean(t[1::2] == 0)), float(np.mean(t[0::2] == 0))
    return odd if odd >= 0.9 and even <= 0.5 else None


def _check_dtype(report: Report, s: FileScan, guessed: bool = False) -> None:
    item = np.dtype(s.dtype).itemsize
    share = wider_ids_share(s.tokens()) if guessed and not s.stray and s.n else None
    if share is not None:
        report.add(
            "dtype_divisible", s.label, "fail",
            f"read as {s.dtype} (no meta.json), but {share:.0%} of its odd uint16 halves are 0: these look like uint32"
            " ids read as uint16; pass --meta with dtype uint32 (or re-encode, which writes meta.json)",
            bytes=s.size, itemsize=item, stray_bytes=0, tokens=s.n, zero_high_halves=share,
        )
        return
    if s.stray:
        report.add(
            "dtype_divisible", s.label, "fail",
            f"{s.size} bytes is not a multiple of {item} ({s.dtype}): {s.stray} stray byte(s) at the end;"
            " the file is truncated or was written with another dtype",
            bytes=s.size, itemsize=item, stray_bytes=s.stray,
        )
    else:
        report.add(
            "dtype_divisible", s.label, "pass", f"{s.size} bytes = {s.n} tokens × {item} ({s.dtype})",
            bytes=s.size, itemsize=item, stray_bytes=0, tokens=s.n,
        )


def _check_min_length_file(report: Report, s: FileScan, T: int | None) -> None:
    if T is not None:
        status = "pass" if s.n >= T + 1 else "fail"
        rel = "≥" if status == "pass" else "<"
        report.add(
            "min_length", s.label, status,
            f"N = {s.n} {rel} T + 1 = {T + 1}" + ("" if status == "pass" else ": not one (x, y) pair of length T fits"),
            tokens=s.n, required=T + 1,
        )
    elif s.n == 0 and not s.stray:
        report.add("min_length", s.label, "fail", "empty file: 0 tokens, not one (x, y) pair fits", tokens=0, required=2)
    else:
        report.add("min_length", s.label, "skip", f"N = {s.n}; pass -T (or --plan) to check N ≥ T + 1", tokens=s.n)


def _check_vocab(report: Report, s: FileScan, n_vocab: int) -> None:
    if s.stray:
        report.add("vocab_range", s.label, "skip", "not readable as whole tokens (see dtype_divisible)")
    elif s.n == 0:
        report.add("vocab_range", s.label, "pass", "empty file: no ids", n_vocab=n_vocab, max_id=None, out_of_range=0)
    elif s.bad_count:
        report.add(
            "vocab_range", s.label, "fail",
            f"{s.bad_count} id(s) ≥ n_vocab {n_vocab}, max id {s.max_id}; first: id {s.first_bad_id} at token {s.first_bad}",
            n_vocab=n_vocab, max_id=s.max_id, out_of_range=s.bad_count, first_position=s.first_bad,
        )
    else:
        report.add(
            "vocab_range", s.label, "pass", f"max id {s.max_id} < n_vocab {n_vocab}",
            n_vocab=n_vocab, max_id=s.max_id, out_of_range=0,
        )


def _check_meta(report, meta, meta_file, targets, scans, enc, enc_error, ranks_sha=None) -> None:
    problems: list[str] = []
    item = meta.itemsize
    for t in targets:
        e, s = t.entry, scans[t.path]
        if e is None:
            continue
        where = f"splits.{t.split}"
        if e.bytes != s.size:
            problems.append(f"{where}.bytes {e.bytes} but {t.label} has {s.size}")
        if e.tokens != s.n or e.tokens * item != s.size:
            problems.append(f"{where}.tokens {e.tokens} but {t.label} holds {s.n} (+{s.stray} stray bytes)")
        if e.checksum != s.checksum:
            problems.append(f"{where}.checksum {e.checksum} but {t.label} hashes to {s.checksum}")
        mt = e.max_token
        if mt is not None and s.max_id is not None and not s.stray and mt != s.max_id:
            problems.append(f"{where}.max_token {mt} but the largest id in {t.label} is {s.max_id}")
        if s.max_id is not None and s.max_id > formats.dtype_max(meta.dtype):
            problems.append(f"dtype {meta.dtype} cannot hold id {s.max_id}")
        if e.sharded:
            problems += _shard_doc_problems(s, e, where)
            continue
        if e.has_doc_index and e.doc_index is None:
            problems.append(f"{where}.doc_index is None, not a file name")
            continue
        di = e.doc_index or formats.doc_index_name(t.split)  # v1 files written before doc_index: the default name
        problems += _doc_index_problems(meta_file.parent / di, e, s, where)
    tok = meta.tokenizer
    if enc_error is not None:
        problems.append(f"tokenizer {meta.tokenizer_name!r} does not load: {enc_error}")
    elif enc is not None:
        if ranks_sha is not None:
            ranks_sha.result()  # the hash was computed in the background; mismatches reads it
        problems += tokenizer.mismatches(enc, tok)
    label = meta_file.name if not targets or meta_file.parent == targets[0].path.parent else str(meta_file)
    if problems:
        report.add("meta", label, "fail", f"{len(problems)} disagreement(s): " + "; ".join(problems), problems=problems)
    else:
        what = (f"tokens, bytes, documents, checksums and tokenizer {meta.tokenizer_name!r} agree with the files" if targets
                else f"tokenizer {meta.tokenizer_name!r} agrees; no .bin in this layout: the splits are checked through their llm.c shards")
        report.add("meta", label, "pass", what)


def _check_provenance(report: Report, meta: formats.Meta, meta_file: Path, targets) -> None:
    """One ``provenance`` line per split: its records against the document index and inputs."""
    from .provenance import split_problems

    if not isinstance(meta.extra.get("provenance"), dict):
        report.add("provenance", meta_file.name, "skip", "no provenance recorded (a dataset written before winsample kept it)")
        return
    for t in targets:
        if t.entry is None:
            continue
        label = formats.prov_name(t.split)
        docs = t.entry.documents
        problems = split_problems(meta_file.parent, meta, t.split, docs)
        if problems:
            report.add("provenance", label, "fail", f"{len(problems)} problem(s): " + "; ".join(problems), problems=problems)
        else:
            report.add("provenance", label, "pass", f"{docs} record(s), one per document of {t.label}: inputs, offsets, lines and ids sound",
                       records=docs)


def _doc_index_problems(p: Path, e: formats.SplitEntry, s: FileScan, where: str) -> list[str]:
    if not p.exists():
        return [f"{where}: document index {p.name} is missing"]
    try:
        starts = formats.read_doc_index(p)
    except WinsampleError as err:
        return [f"{where}: {err}"]
    out = []
    if len(starts) != e.documents:
        out.append(f"{where}.documents {e.documents} but {p.name} lists {len(starts)}")
    if len(starts):
        if starts[0] != 0 or np.any(np.diff(starts) <= 0) or starts[-1] >= max(s.n, 1):
            out.append(f"{p.name}: document starts must begin at 0, increase, and stay below N = {s.n}")
    return out


def _check_leakage(report: Report, train: FileScan, val: FileScan, bits: int, max_leakage: float) -> None:
    label = f"{val.label} vs {train.label}"
    rate = 2.0**-bits
    if train.checksum == val.checksum:
        report.add(
            "split_leakage", label, "fail",
            f"{val.label} is byte-identical to {train.label} (checksum {val.checksum}): val measures nothing",
            share=1.0, sample_rate=rate,
        )
        return
    if train.shingles is None or val.shingles is None or val.n < SHINGLE_K:
        report.add("split_leakage", label, "skip", f"{val.label} has {val.n} < {SHINGLE_K} tokens: no {SHINGLE_K}-token shingle")
        return
    if len(val.shingles) == 0:
        report.add("split_leakage", label, "warn", f"no val shingle fell in the sample (rate 1/{2**bits}); share unknown", sample_rate=rate)
        return
    train_set = np.sort(train.shingles)  # sort + binary search: faster than np.unique/np.isin here
    if len(train_set):
        at = np.searchsorted(train_set, val.shingles).clip(max=len(train_set) - 1)
        found = int(np.count_nonzero(train_set[at] == val.shingles))
    else:
        found = 0
    share = found / len(val.shingles)
    n_train = int(np.count_nonzero(np.diff(train_set))) + 1 if len(train_set) else 0
    how = "exact" if bits == 0 else f"sampled 1/{2**bits}"
    status = "pass" if share <= max_leakage else "fail"
    rel = "≤" if status == "pass" else ">"
    report.add(
        "split_leakage", label, status,
        f"{share:.2%} of {val.label}'s {SHINGLE_K}-token shingles are also in {train.label} ({rel} {max_leakage:.2%}; {how},"
        f" {len(val.shingles)} val / {n_train} train hashes)",
        share=share, max_leakage=max_leakage, k=SHINGLE_K, sample_rate=rate,
        val_shingles=len(val.shingles), train_shingles=n_train,
    )


# --- plans -------------------------------------------------------------------------------


@dataclass
class _Plan:
    label: str
    rows: np.ndarray
    side: formats.PlanSidecar
    scan: FileScan


def _int(d: dict, *keys):
    v = d
    for k in keys:
        if not isinstance(v, dict):
            return None
        v = v.get(k)
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _plan_file(side: formats.PlanSidecar, path: Path, folder) -> Path | None:
    """The token file a plan applies to: PATH itself, or the sidecar's source.file in the folder."""
    if folder is None:
        return path
    if side.source.file:
        return folder / side.source.file
    return None


@dataclass
class _Prepared:
    """What a plan gives without its token file: rows, sidecar, and its figures for N tokens."""

    rows: np.ndarray
    side: formats.PlanSidecar
    n: int | None = None
    figures: PlanFigures | None = None
    rows_checksum: str | None = None  # of the rows as read


def _prepare_plan(plan_path: Path, path: Path, folder, sizes: dict) -> _Prepared | DataError:
    try:
        rows, side = formats.load_plan(plan_path)
    except DataError as e:
        return e
    prep = _Prepared(rows, side, rows_checksum=formats.rows_checksum(rows) if side.rows_checksum else None)
    fp = _plan_file(side, path, folder)
    n = sizes.get(fp) if fp is not None else None
    if n is not None:
        prep.n, prep.figures = n, plan_figures(rows, n, _int(side.params, "span"))
    return prep


PLAN_BLOCK = 1 << 14  # plan rows per step of plan_figures: its ~10 work arrays stay in cache


@dataclass
class PlanFigures:
    """What the plan checks need from the rows and N alone. Rows are plan row indexes."""

    bad: int = 0  # rows out of bounds: start < 0, length < 1, start + length > N, length > span
    first_bad: int | None = None
    decreases: int = 0  # rows whose start is below the previous row's
    first_decrease: int | None = None
    increasing: bool = True  # starts strictly increase, so no two rows are the same window
    docs: int | None = None  # distinct values of the doc column; None: the column is not sorted
    coverage: dict | None = None  # _CoverageRun's figures; None: rows not in start order


class _Work:
    """Work arrays of one block, allocated once: a fresh temporary per step would cost a page
    fault per 4 kB each time (the allocator hands big blocks back to the system when freed)."""

    def __init__(self, m: int):
        self.i = [np.empty(m, np.int64) for _ in range(10)]
        self.b = [np.empty(m, bool) for _ in range(2)]

    def take(self, k: int):
        return [a[:k] for a in self.i], [a[:k] for a in self.b]


def _count_first(mask: np.ndarray, at: int) -> tuple[int, int | None]:
    """(true entries, index of the first plus ``at``, or None)."""
    k = int(np.count_nonzero(mask))
    return k, (at + int(np.argmax(mask)) if k else None)


def plan_figures(rows: np.ndarray, n: int, span: int | None, block: int = PLAN_BLOCK) -> PlanFigures:
    """One pass over ``rows`` in blocks of ``block`` rows, memory flat in the plan's size.
    Coverage is found here only for rows in start order (what ``windows`` writes without
    --shuffle); else ``coverage`` is None."""
    f = PlanFigures()
    cov = _CoverageRun(n)
    work = _Work(min(block, len(rows)))
    prev_start = prev_doc = None
    docs, docs_sorted = 0, True
    for lo in range(0, len(rows), block):
        r = rows[lo : lo + block]
        (start, length, end, tmp, *cov_work), (bad, flag) = work.take(len(r))  # cov_work: 6 arrays
        start[...] = r["start"]
        length[...] = r["length"]
        np.less(start, 0, out=bad)
        bad |= np.less(length, 1, out=flag)
        bad |= np.greater(start, np.subtract(n, length, out=tmp), out=flag)  # not end > n: start + length can wrap int64
        if span is not None:
            bad |= np.greater(length, span, out=flag)
        k, first = _count_first(bad, lo)
        f.bad += k
        f.first_bad = f.first_bad if f.first_bad is not None else first
        # each row against the one before it (the plan's first row has none)
        edge = prev_start is not None and int(start[0]) < prev_start
        k, first = _count_first(np.less(start[1:], start[:-1], out=flag[1:]), lo + 1)
        if f.first_decrease is None:
            f.first_decrease = lo if edge else first
        f.decreases += k + edge
        f.increasing = f.increasing and (prev_start is None or int(start[0]) > prev_start) and bool(
            np.greater(start[1:], start[:-1], out=flag[1:]).all())
        prev_start = int(start[-1])
        if f.decreases == 0:
            cov.feed(start, np.add(start, length, out=end), cov_work)
        if docs_sorted:
            doc = r["doc"]
            if (prev_doc is not None and int(doc[0]) < prev_doc) or np.less(doc[1:], doc[:-1], out=flag[1:]).any():
                docs_sorted = False
            else:
                docs += int(np.count_nonzero(np.not_equal(doc[1:], doc[:-1], out=flag[1:]))) + (prev_doc != int(doc[0]))
                prev_doc = int(doc[-1])
    f.docs = docs if docs_sorted else None
    f.coverage = cov.result() if f.decreases == 0 else None
    return f


class _CoverageRun:
    """The union of windows [start, end) clipped to [0, n), fed in start order a block at a time:
    covered tokens, largest gap, tail, head, segments (maximal covered runs), window_tokens (each
    window's tokens, counted once per window) and covered_shifted (the union of [start + 1, end):
    the tokens that are some window's target). Window i adds max(0, end_i - max(start_i, reach))
    new tokens, reach being how far the windows before it cover."""

    def __init__(self, n: int):
        self.n = n
        self.reach = 0  # how far the windows so far cover (exclusive end)
        self.head: int | None = None  # first covered token
        self.covered = self.shifted = self.window_tokens = self.segments = 0
        self.best_gap, self.gap_start = None, 0

    def feed(self, start: np.ndarray, end: np.ndarray, work: list[np.ndarray]) -> None:
        """``start``/``end``: int64, end exclusive, read only; ``work``: 6 scratch arrays of their length."""
        n = self.n
        s, e, s1, before, reach, new = work
        np.clip(start, 0, n, out=s)
        np.clip(end, 0, n, out=e)
        np.clip(np.add(start, 1, out=s1), 0, n, out=s1)
        self.window_tokens += int(np.subtract(e, s, out=new).sum())
        keep = e > s
        if not keep.all():  # empty windows (past N, or length < 1) add nothing
            s, e, s1 = s[keep], e[keep], s1[keep]
            before, reach, new = before[: len(s)], reach[: len(s)], new[: len(s)]
        if not len(s):
            return
        np.maximum.accumulate(e, out=reach)
        np.maximum(reach, self.reach, out=reach)
        before[0] = self.reach  # before[i]: how far the windows before i reach
        before[1:] = reach[:-1]
        # window i adds max(0, e_i - max(s_i, before_i)) new tokens
        self.covered += int(np.maximum(np.subtract(e, np.maximum(s, before, out=new), out=new), 0, out=new).sum())
        self.shifted += int(np.maximum(np.subtract(e, np.maximum(s1, before, out=s1), out=s1), 0, out=s1).sum())
        gaps = np.subtract(s, before, out=new)  # uncovered tokens right before each window (if > 0)
        first = 0
        if self.head is None:
            self.head, first = int(s[0]), 1  # the first window's gap is the head, not between segments
        self.segments += int(np.count_nonzero(gaps[first:] > 0))
        i = int(np.argmax(gaps))
        if self.best_gap is None or gaps[i] > self.best_gap:  # the first largest, as np.argmax over all
            self.best_gap, self.gap_start = int(gaps[i]), int(before[i])
        self.reach = int(reach[-1])

    def result(self) -> dict:
        n = self.n
        if self.head is None:
            return {"covered": 0, "gap_start": 0, "gap_length": n, "tail": n, "head": n, "segments": 0,
                    "window_tokens": self.window_tokens, "covered_shifted": 0}
        tail = n - self.reach
        gap_start, gap_len = self.gap_start, max(self.best_gap, 0)
        if tail > gap_len:
            gap_start, gap_len = self.reach, tail
        return {"covered": self.covered, "gap_start": gap_start, "gap_length": gap_len, "tail": tail, "head": self.head,
                "segments": 1 + self.segments, "window_tokens": self.window_tokens, "covered_shifted": self.shifted}


def _check_plan(report, plan_path: Path, path: Path, folder, scans, targets, T, min_coverage, prepared=None) -> _Plan | None:
    label = plan_path.name
    got = prepared.result() if prepared is not None else None
    if got is None:
        try:
            got = _Prepared(*formats.load_plan(plan_path))
        except DataError as e:
            got = e
    if isinstance(got, DataError):
        report.add("plan_bounds", label, "fail", str(got))
        return None
    rows, side = got.rows, got.side
    src, params = side.source, side.params
    src_file = src.file
    # which token file the plan applies to
    file_path = _plan_file(side, path, folder)
    if file_path is None:
        report.add("plan_bounds", label, "fail", f"{formats.plan_sidecar(plan_path)}: sidecar names no source.file")
        return None
    scan = scans.get(file_path)
    if scan is None:
        report.add("plan_bounds", label, "fail", f"plan is for {src_file!r}, which is not in {folder}")
        return None
    if scan.stray:
        report.add("plan_bounds", label, "skip", f"{scan.label} is not whole tokens (see dtype_divisible)")
        return None
    n = scan.n
    span = _int(params, "span")
    pT = _int(params, "T")
    targets_flag = params.get("targets", True)

    # plan_bounds
    problems = []
    if src.bytes != scan.size or src.checksum != scan.checksum:
        recorded = next((t.entry.checksum for t in targets if t.path == file_path and t.entry is not None), None)
        if src.bytes == scan.size and src.checksum == recorded:  # windows copied meta.json's checksum, which is wrong
            problems.append(f"the sidecar's checksum {src.checksum} is the one meta.json records for {scan.label}, and the"
                            f" file's is {scan.checksum}: meta.json is wrong or the file changed since (see the meta check)")
        else:
            problems.append(
                f"made for another file: sidecar says {src_file!r} of {src.bytes} bytes, {src.checksum};"
                f" {scan.label} has {scan.size} bytes, {scan.checksum}"
            )
    if src.dtype is not None and _same_dtype(src.dtype, scan.dtype) is False:
        problems.append(f"sidecar dtype {src.dtype!r} but {scan.label} is read as {scan.dtype}")
    if span is None or span < 1:
        problems.append(f"sidecar params.span is {params.get('span')!r}, not a positive integer")
    problems += _param_problems(params, side, rows, span, pT, targets_flag)
    nwin = _int(side.stats, "windows")
    if nwin is not None and nwin != len(rows):
        problems.append(f"sidecar stats.windows {nwin} but the plan has {len(rows)} rows")
    if side.rows_checksum is not None:
        have = got.rows_checksum or formats.rows_checksum(rows)
        if have != side.rows_checksum:
            problems.append(f"the rows are not the ones windows wrote: the sidecar's rows_checksum is {side.rows_checksum},"
                            f" the rows' {have} (a row was edited, added, removed or reordered)")
    fig = got.figures if got.figures is not None and got.n == n else plan_figures(rows, n, span)
    nbad = fig.bad
    if nbad:
        i = fig.first_bad
        si, li = int(rows["start"][i]), int(rows["length"][i])
        why = []
        if si < 0:
            why.append("start < 0")
        if li < 1:
            why.append("length < 1")
        if si + li > n:
            why.append(f"end {si + li} > N = {n}")
        if span is not None and li > span:
            why.append(f"length > span {span}")
        problems.append(f"{nbad} window(s) out of bounds; first: row {i} [{si}, {si + li}) ({', '.join(why)})")
    figs = {"windows": len(rows), "tokens": n, "span": span, "bad_windows": nbad}
    if problems:
        report.add("plan_bounds", label, "fail", "; ".join(problems), **figs)
    else:
        unsummed = "" if side.rows_checksum else " (no rows_checksum: written before winsample kept one, so edited rows would not show)"
        report.add("plan_bounds", label, "pass", f"{len(rows)} windows inside [0, {n}), lengths ≤ span {span}; made for"
                   f" {scan.label}{unsummed}", **figs)

    # min_length: N ≥ span (T + 1 with targets, T without)
    if span is not None:
        status = "pass" if n >= span else "fail"
        what = f"T + 1 = {span}" if targets_flag else f"span = {span} (no targets)"
        report.add("min_length", label, status, f"N = {n} {'≥' if status == 'pass' else '<'} {what}", tokens=n, required=span)

    # order
    if params.get("shuffle"):
        _check_shuffle(report, label, rows, params)
    elif fig.decreases:
        i = fig.first_decrease
        report.add(
            "order", label, "fail",
            f"{fig.decreases} place(s) where start decreases; first: row {i} starts at {int(rows['start'][i])} after"
            f" {int(rows['start'][i - 1])} (and the sidecar does not say shuffle)",
            decreases=fig.decreases, first_row=i,
        )
    else:
        report.add("order", label, "pass", "starts never decrease")

    # duplicates
    start = end = None  # whole-plan columns: only for plans out of start order or with repeats
    if len(rows) > 1 and not fig.increasing:
        start = rows["start"].astype(np.int64)
        length = rows["length"].astype(np.int64)
        end = start + length
        o = np.lexsort((length, start))
        same = (np.diff(start[o]) == 0) & (np.diff(length[o]) == 0)
        dups = int(np.count_nonzero(same))
    else:
        dups = 0  # strictly increasing starts: none repeats
    if dups:
        j = int(o[int(np.argmax(same)) + 1])
        report.add(
            "duplicates", label, "fail",
            f"{dups} duplicate window(s); e.g. row {j} repeats [{start[j]}, {end[j]})", duplicates=dups,
        )
    else:
        report.add("duplicates", label, "pass", "no two windows are identical", duplicates=0)

    # With targets a window's first token is input only: the first token of each covered run and
    # of each document can never be a y; more such tokens mean stride > T skipped labels.
    docs = 0
    if targets_flag and len(rows):
        docs = fig.docs if fig.docs is not None else len(sorted_unique(np.sort(rows["doc"])))
    c = fig.coverage
    if c is None and n:  # rows out of start order: the whole-plan path sorts them
        if start is None:
            start = rows["start"].astype(np.int64)
            end = start + rows["length"].astype(np.int64)
        c = _coverage_in_order(start, end, n)
    _check_coverage(report, label, len(rows), n, side, min_coverage, c, docs)
    plan = _Plan(label, rows, side, scan)
    _check_alignment(report, plan, pT, span, targets_flag)
    _check_materialized(report, plan_path, label, rows, side, scan, span)
    return plan


def _shard_problem(params: dict, side, nrows: int) -> str | None:
    """Why a sidecar's claim to be one rank's shard does not hold (None: it does). A shard's
    coverage is not checked alone, so the claim must be consistent: shard r of K of a plan of W
    rows (``plan_stats.windows``) holds exactly the rows r, r + K, …"""
    k, r = params.get("shards"), params.get("shard")
    if k is None:
        return None if r is None else f"params.shard is {r!r} but params.shards is null"
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        return f"params.shards is {k!r}, not a positive integer"
    if k == 1:
        return None if r in (None, 0) else f"params.shard {r!r} of 1"
    if not isinstance(r, int) or isinstance(r, bool) or not 0 <= r < k:
        return f"params.shard is {r!r}, not in [0, {k})"
    whole = _int(side.plan_stats or {}, "windows")
    if whole is None or whole < 0:
        return f"a shard of {k} without plan_stats.windows (the whole plan's count)"
    expect = len(range(r, whole, k))
    if nrows != expect:
        return f"shard {r} of {k} of a {whole}-window plan holds {expect} rows, this one {nrows}"
    return None


def _param_problems(params: dict, side, rows, span, T, targets_flag) -> list[str]:
    """Sidecar parameters that do not fit each other or the rows: a sidecar may not switch a
    check off by claiming what is not so (no targets, a shard, a shuffle)."""
    out = []
    if not isinstance(targets_flag, bool):
        out.append(f"params.targets is {targets_flag!r}, not true/false")
    elif T is not None and span is not None and span != T + int(targets_flag):
        out.append(f"params.span {span} but T {T} with targets {str(targets_flag).lower()} spans {T + int(targets_flag)}")
    elif T is None and params.get("T") is not None:
        out.append(f"params.T is {params.get('T')!r}, not an integer")
    why = _shard_problem(params, side, len(rows))
    if why:
        out.append(why)
    sh = params.get("shuffle")
    if sh is not None and not isinstance(sh, bool):
        out.append(f"params.shuffle is {sh!r}, not true/false")
    return out


def _check_shuffle(report, label, rows, params) -> None:
    """A shuffled plan must be the seed's permutation of its rows in start order (what
    ``windows --shuffle`` writes), so a sidecar saying ``shuffle`` cannot hide rows out of order."""
    from .planning import shuffle_rows

    seed, epoch, k = params.get("seed"), params.get("epoch"), params.get("shards")
    ok_int = lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0  # noqa: E731
    if not ok_int(seed) or not ok_int(epoch):
        report.add("order", label, "fail", f"params.shuffle without a usable seed/epoch ({seed!r}, {epoch!r}): cannot tell a shuffle from disorder")
        return
    if isinstance(k, int) and k > 1:
        report.add("order", label, "skip", f"one of {k} shards of a shuffled plan: its order is checked with the others' rows")
        return
    o = np.lexsort((rows["length"], rows["start"]))
    if np.array_equal(shuffle_rows(rows[o], seed, epoch), rows):
        report.add("order", label, "pass", f"rows are the (seed {seed}, epoch {epoch}) permutation of the start order")
    else:
        report.add("order", label, "fail", f"params.shuffle, but the rows are not the (seed {seed}, epoch {epoch}) permutation"
                   " of the plan in start order: the plan was reordered or edited")


MATERIALIZED_CELLS = 1 << 22  # ids of PLAN.tokens.npy compared per step: ~32 MB of int64 indexes


def _check_materialized(report, plan_path: Path, label, rows, side, scan, span) -> None:
    """PLAN.tokens.npy, when the sidecar names it or it lies beside the plan, must hold exactly
    the plan's windows: shape (rows, span), the token file's dtype, row i = tokens[start:start +
    length] then ``pad_id``. A training run reading it never sees the .bin, so nothing else
    would notice it belongs to another plan (two runs racing) or was edited."""
    mat = side.materialized
    path = formats.materialized_path(plan_path)
    if mat is None and not path.exists():
        return
    name = mat.get("file") if isinstance(mat, dict) else None
    if mat is not None and (not isinstance(mat, dict) or name != path.name):
        report.add("materialized", label, "fail", f"sidecar materialized is {mat!r}: expected an object naming {path.name!r}")
        return
    if mat is None:
        report.add("materialized", path.name, "fail", f"{path.name} lies beside the plan but its sidecar does not describe it")
        return
    pad = mat.get("pad_id")
    if span is None or not isinstance(pad, int) or isinstance(pad, bool):
        report.add("materialized", path.name, "fail", f"sidecar materialized.pad_id {pad!r} / params.span {span!r}: cannot check it")
        return
    try:
        with formats.open_regular(path, "materialized windows (.npy)") as f:
            shape, fortran, dtype, offset = formats.npy_header(f, path, "materialized windows (.npy)")
    except formats.WinsampleError as e:
        report.add("materialized", path.name, "fail", str(e))
        return
    want = (len(rows), span)
    if tuple(shape) != want or fortran or np.dtype(dtype) != np.dtype(scan.dtype) or mat.get("shape") != list(want):
        report.add("materialized", path.name, "fail", f"shape {tuple(shape)} of {dtype}{' (Fortran order)' if fortran else ''},"
                   f" sidecar says {mat.get('shape')!r}; the plan needs {want} of {np.dtype(scan.dtype)}")
        return
    if not len(rows) or not span:
        report.add("materialized", path.name, "pass", "empty, as the plan")
        return
    arr = np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=want)
    tokens = scan.tokens()
    n = len(tokens)
    step_rows = max(1, MATERIALIZED_CELLS // span)
    step_cols = min(span, MATERIALIZED_CELLS)
    differs = np.zeros(len(rows), bool)
    for lo in range(0, len(rows), step_rows):
        r = rows[lo : lo + step_rows]
        for c0 in range(0, span, step_cols):
            cols = np.arange(c0, min(span, c0 + step_cols), dtype=np.int64)
            idx = np.clip(r["start"].astype(np.int64)[:, None] + cols, 0, max(n - 1, 0))
            expect = np.asarray(tokens[idx]) if n else np.zeros(idx.shape, dtype)
            expect = np.where(cols < r["length"].astype(np.int64)[:, None], expect, pad)
            differs[lo : lo + len(r)] |= np.any(np.asarray(arr[lo : lo + len(r), c0 : c0 + len(cols)]) != expect, axis=1)
    bad = int(np.count_nonzero(differs))
    first = int(np.argmax(differs)) if bad else None
    del arr
    if bad:
        report.add("materialized", path.name, "fail", f"{bad} of {len(rows)} rows differ from the plan's windows of {scan.label};"
                   f" first: row {first} (start {int(rows['start'][first])}): it belongs to another plan or was edited",
                   rows=len(rows), differing=bad)
    else:
        report.add("materialized", path.name, "pass", f"{len(rows)} rows equal the plan's windows of {scan.label} (pad {pad})",
                   rows=len(rows), differing=0)


def _same_dtype(a, b) -> bool | None:
    try:
        return formats.normalize_dtype(a) == formats.normalize_dtype(b)
    except (WinsampleError, TypeError):
        return False


def coverage_stats(start: np.ndarray, end: np.ndarray, n: int) -> dict:
    """Union of windows [start, end) clipped to [0, n): covered tokens, largest gap, tail/head,
    segments and window_tokens (``_coverage_in_order`` without ``covered_shifted``)."""
    c = _coverage_in_order(start, end, n)
    del c["covered_shifted"]
    return c


def _coverage_in_order(start: np.ndarray, end: np.ndarray, n: int) -> dict:
    """``_CoverageRun``'s figures of windows in any order: sorted by start (stable) unless they
    already are, then fed in blocks."""
    start = np.asarray(start, dtype=np.int64)
    end = np.asarray(end, dtype=np.int64)
    if not (start[1:] >= start[:-1]).all():  # plans are usually in start order already: skip the sort
        o = np.argsort(start, kind="stable")
        start, end = start[o], end[o]
    run = _CoverageRun(n)
    work = _Work(min(PLAN_BLOCK, len(start)))
    for lo in range(0, len(start), PLAN_BLOCK):
        ints, _ = work.take(len(start[lo : lo + PLAN_BLOCK]))
        run.feed(start[lo : lo + PLAN_BLOCK], end[lo : lo + PLAN_BLOCK], ints[:6])
    return run.result()


def _check_coverage(report, label, nrows: int, n, side, min_coverage, c: dict | None, target_docs: int = 0) -> None:
    """``nrows``: the plan's rows; ``c``: their ``coverage_stats`` (with ``covered_shifted`` when ``target_docs``);
    ``target_docs`` > 0 for a targets plan: the number of documents it has windows in."""
    if n == 0:
        report.add("coverage", label, "skip", "empty file: nothing to cover")
        return
    k = _int(side.params, "shards")
    if k is not None and k > 1 and _shard_problem(side.params, side, nrows) is None:
        # one rank's share of a sharded plan covers about 1/K by design (the claim is checked)
        report.add("coverage", label, "skip", f"shard of a plan split over {k} ranks: alone it covers {c['covered'] / n:.2%}"
                   f" of {n} tokens; check the unsharded plan for coverage", covered_tokens=c["covered"], shards=k)
        return
    total_len = c["window_tokens"]
    share = c["covered"] / n
    overlap = 1 - c["covered"] / total_len if total_len else 0.0
    depth = total_len / n
    figs = dict(
        coverage=share, min_coverage=min_coverage, covered_tokens=c["covered"], uncovered_tokens=n - c["covered"],
        largest_gap_start=c["gap_start"], largest_gap_length=c["gap_length"], uncovered_tail=c["tail"],
        uncovered_head=c["head"], overlap_ratio=overlap, windows_per_token=depth,
    )
    detail = (
        f"{percent(share)} of {n} tokens in ≥1 window ({'≥' if share >= min_coverage else '<'} {min_coverage:.0%});"
        f" largest gap {c['gap_length']} at {c['gap_start']}, tail {c['tail']} uncovered;"
        f" overlap {overlap:.1%}, {depth:.2f} windows per token"
    )
    if share < min_coverage:
        report.add("coverage", label, "fail", detail, **figs)
        return
    if target_docs:
        never = c["covered"] - c["covered_shifted"]  # in a window, never a y
        bound = c.get("segments", 1) + target_docs - 1
        figs["never_target_tokens"] = never
        if never > bound:
            report.add("coverage", label, "warn", detail + f"; but {never} tokens inside windows are never a target"
                       f" (at most {bound} must be: the first of each covered run and document): a window's first"
                       " token is input only, so a window that starts where the previous one ends skips that label;"
                       " start each window at or before the previous end − 1 (stride ≤ T)", **figs)
            return
    said = _int(side.stats, "covered_tokens")
    if said is not None and said != c["covered"]:
        report.add("coverage", label, "warn", detail + f"; but the sidecar claims {said} covered tokens", **figs)
        return
    report.add("coverage", label, "pass", detail, **figs)


def training_pair(tokens: np.ndarray, s: int, T: int) -> tuple[np.ndarray, np.ndarray]:
    """(x, y) as nanoGPT's get_batch builds them: tokens[s:s+T] and tokens[s+1:s+1+T], as int64."""
    return tokens[s : s + T].astype(np.int64), tokens[s + 1 : s + 1 + T].astype(np.int64)


def _check_alignment(report, plan: _Plan, T: int | None, span: int | None, targets_flag) -> None:
    label = plan.label
    if not targets_flag:
        report.add("alignment", label, "skip", "a --no-targets plan has no (x, y) pairs")
        return
    if T is None or span is None:
        report.add("alignment", label, "fail", "sidecar lacks params.T / params.span: cannot tell the (x, y) layout")
        return
    if span != T + 1:
        report.add("alignment", label, "fail", f"targets plan with T = {T} must span T + 1 = {T + 1} tokens; sidecar says span {span}")
        return
    rows = plan.rows
    if len(rows) == 0:
        report.add("alignment", label, "skip", "empty plan")
        return
    tiny = np.flatnonzero(rows["length"] < 2)  # every row, not a sample: one comparison
    if len(tiny):
        r = int(tiny[0])
        report.add("alignment", label, "fail", f"{len(tiny)} window(s) shorter than 2 tokens hold no (x, y) pair;"
                   f" first: row {r} at start {int(rows['start'][r])}, length {int(rows['length'][r])}",
                   checked=len(rows), misaligned=len(tiny))
        return
    tokens = np.asarray(plan.scan.tokens())  # a plain view: no memmap wrapping per slice
    n = len(tokens)
    pick = sorted_unique(np.linspace(0, len(rows) - 1, min(len(rows), ALIGN_SAMPLE)).round().astype(np.int64))
    why: dict[int, tuple[int, str]] = {}  # sampled row -> (start, what is wrong)
    starts = rows["start"][pick].astype(np.int64)
    lengths = rows["length"][pick].astype(np.int64)
    full = (lengths >= T + 1) & (starts >= 0) & (starts <= n - T - 1)
    group = max(1, ALIGN_CELLS // T)  # windows per step: at most ALIGN_CELLS ids held at once
    rows_full, starts_full = pick[full], starts[full]
    for g in range(0, len(starts_full), group):  # the usual window, a batch at a time, stacked as get_batch stacks them
        fs = starts_full[g : g + group]
        x = np.stack([tokens[s : s + T] for s in fs.tolist()]).astype(np.int64)
        y = np.stack([tokens[s + 1 : s + 1 + T] for s in fs.tolist()]).astype(np.int64)
        # independent index arithmetic: position of x[j] is s + j, of y[j] is s + j + 1
        idx = fs[:, None] + np.arange(T, dtype=np.int64)
        ok = (x == np.take(tokens, idx)).all(1) & (y == np.take(tokens, idx + 1)).all(1) & (x[:, 1:] == y[:, :-1]).all(1)
        for r, s in zip(rows_full[g : g + group][~ok].tolist(), fs[~ok].tolist()):
            why[r] = (s, "y is not x shifted by one token")
    for r in pick[~full].tolist():  # short windows and windows past the end: one at a time
        s, L = int(rows["start"][r]), int(rows["length"][r])
        Tw = T if L >= T + 1 else L - 1  # a short window trains on L - 1 pairs
        if s < 0 or Tw < 1:
            why[r] = (s, f"start {s} / length {L} gives no (x, y) pair")
            continue
        x, y = training_pair(tokens, s, Tw)
        if len(x) != Tw or len(y) != Tw:
            why[r] = (s, f"x has {len(x)} tokens, y has {len(y)}, T = {Tw} (last legal start is N - T - 1 = {n - Tw - 1})")
            continue
        idx = s + np.arange(Tw, dtype=np.int64)
        if not (np.array_equal(x, np.take(tokens, idx)) and np.array_equal(y, np.take(tokens, idx + 1)) and np.array_equal(x[1:], y[:-1])):
            why[r] = (s, "y is not x shifted by one token")
    bad = [(r, *why[r]) for r in sorted(why)]
    if bad:
        r, s, why = bad[0]
        report.add(
            "alignment", label, "fail", f"{len(bad)} of {len(pick)} sampled window(s) misaligned; first: row {r} at start {s}: {why}",
            checked=len(pick), misaligned=len(bad),
        )
    elif n < T + 1:  # only short windows: each is aligned, but no full (B, T) batch exists
        report.add(
            "alignment", label, "warn",
            f"{len(pick)} short window(s) aligned (y = x shifted by one), but N = {n} < T + 1 = {T + 1}:"
            f" no full window of T = {T}; get_batch has nothing to draw",
            checked=len(pick), misaligned=0,
        )
    else:
        report.add(
            "alignment", label, "pass",
            f"{len(pick)} of {len(rows)} windows {'(an even sample) ' if len(pick) < len(rows) else ''}checked:"
            f" x = tokens[s:s+{T}], y = tokens[s+1:s+{T + 1}] (last legal start {n - T - 1})",
            checked=len(pick), misaligned=0,
        )


# --- decode ------------------------------------------------------------------------------


SHOW_TOKENS = 512  # tokens of each shown window that are decoded for the report


def _decode(report, plan: _Plan | None, targets, scans, enc, enc_error, T, show) -> None:
    if show <= 0:
        report.add("decode", "", "skip", "--show 0")
        return
    if plan is not None:
        scan = plan.scan
        starts = plan.rows["start"][:show].astype(np.int64)
        lengths = plan.rows["length"][:show].astype(np.int64)
        label = f"{plan.label} → {scan.label}"
    else:
        scan = next((scans[t.path] for t in targets if not scans[t.path].stray), None)
        if scan is None:
            report.add("decode", "", "skip", "no file readable as whole tokens")
            return
        w = T or NO_PLAN_WINDOW
        starts = np.arange(0, min(scan.n, w * show), w, dtype=np.int64)
        lengths = np.minimum(w, scan.n - starts)
        label = scan.label
    if enc is None:
        report.add("decode", label, "warn", f"cannot decode: {enc_error}")
        return
    tokens = scan.tokens()
    n = len(tokens)
    problems = 0
    prev_s = prev_e = None
    tracer = _tracer_of(scan, targets)
    for s, L in zip(starts.tolist(), lengths.tolist()):
        # A person reads the first SHOW_TOKENS of each window: a long-context T must not print the file.
        s0, end = max(s, 0), min(s + L, n)
        e0 = min(end, s0 + SHOW_TOKENS)
        ids = tokens[s0:e0].tolist() if e0 > s0 else []
        ov = 0
        if prev_e is not None and prev_s <= s0 < prev_e:
            ov = min(prev_e, end) - s0
        try:
            text = _text(enc, ids)
            otext = _text(enc, ids[:ov])
        except Exception as e:  # ids outside the vocabulary: tiktoken raises
            text, otext, problems = f"<cannot decode: {type(e).__name__}>", "", problems + 1
        source = tracer.document(int(tracer.doc_at(s0))) if tracer is not None and s0 < n else None
        report.windows.append(Window(scan.label, s, L, text, ov, otext, source, e0 - s0 if e0 < end else None))
        prev_s, prev_e = s0, end
    shown = len(report.windows)
    if problems:
        report.add("decode", label, "warn", f"{problems} of {shown} window(s) hold ids the tokenizer cannot decode")
    else:
        report.add("decode", label, "pass", f"{shown} window(s) decoded with {enc.name}", shown=shown)


def _tracer_of(scan, targets):
    """The provenance tracer of the file ``scan`` read, or None (none recorded, or unsound:
    the ``provenance`` check reports that)."""
    from .provenance import open_tracer

    for t in targets:
        if t.label == scan.label and t.entry is not None:
            try:
                return open_tracer(t.path)
            except WinsampleError:
                return None
    return None


def _text(enc, ids: list[int]) -> str:
    return enc.decode(ids)
