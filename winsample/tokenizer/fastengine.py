"""The fast BPE engine (gigatoken) and the built-in self-check that must pass before it is trusted.

Imported only by ``tokenizer.py``, which puts an :class:`Engine` behind winsample's
``Tokenizer`` interface (``tokenizer.with_backend``). ``gigatoken`` is optional: install it
with ``pip install 'winsample[fast]'`` (``make demo``/``make test`` do); without it everything
runs on the reference libraries and ``--backend auto`` says so once on stderr.

Memory: gigatoken caches the ids of every pre-token it has seen, and that cache grows with
the variety of the text (measured: about one byte per byte of unique source code). The built
engines of a run therefore share one budget (``new_budget``): the process may grow by
``CACHE_BUDGET`` beyond its size once its engines are built. Each engine looks at the
process's resident memory after every ``LOOK_BYTES`` of text; over the budget, the engine built longest ago
drops its gigatoken object and builds a fresh one (engines rebuilt one at a time, out of step,
keep the sum of their caches near its mean). Text that repeats its pre-tokens (prose) never
reaches the budget and keeps its engines. Ids never depend on the cache. A build holds the GIL
(measured: 0.08–0.11 s for the gpt2 ranks, 0.54 s for a 4 MB tokenizer.json), so every thread
waits for it: the budget trades memory against those pauses. Where the resident size cannot
be read (no ``/proc``), an engine is rebuilt after every ``BLIND_REBUILD_BYTES`` of text.

Special tokens: the engine is built with *no* special tokens, so ``"<|endoftext|>"`` in a
document is encoded as the text it is (tiktoken's ``encode_ordinary``), never as the id.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import random
import tempfile
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ..errors import ConfigError

ENGINE = "gigatoken"
CACHE_BUDGET = 80 << 20  # resident bytes the engines' caches may add, together, to the process once built
LOOK_BYTES = 16 << 20  # text an engine encodes between two looks at the process's memory (chars)
BLIND_REBUILD_BYTES = 64 << 20  # no resident size to read: text an engine encodes between two rebuilds
PASSES = 2  # looks over the budget an engine lets pass, waiting for an older one to rebuild

try:  # optional: every caller checks version() first
    import gigatoken as _gt  # noqa: F401
    from gigatoken.gigatoken_rs import BPETokenizer as _BPETokenizer
    from gigatoken.gigatoken_rs import BytesSource as _BytesSource
    from gigatoken.gigatoken_rs import PadTruncate as _PadTruncate
    from gigatoken.gigatoken_rs import SentencePieceTokenizer as _SentencePieceTokenizer
except ImportError as e:  # not installed, or a wheel that does not load on this platform
    _BPETokenizer = None
    _NATIVE = ()
    _IMPORT_ERROR = f"{type(e).__name__}: {e}"
else:
    _IMPORT_ERROR = None
    # encode_batch_padded's options for ids as they are: no padding, no truncation, nothing added
    _NO_PADDING = _PadTruncate(0, max_length=None, pad_to_max_length=False, truncate=False, pad_left=False,
                               truncate_left=False, prefix=[], suffix=[])
    _NATIVE = (_BPETokenizer, _SentencePieceTokenizer)

# A padded batch call holds at most PAD_WASTE times its pieces' bytes, plus PAD_SLACK, in its
# matrix (a token is at least a byte, give or take the dummy prefix): pieces of very different
# sizes go to separate calls (encode_many).
PAD_WASTE = 2
PAD_SLACK = 64 << 10


def version() -> str | None:
    """``"gigatoken X.Y.Z"`` when the engine imports, else None (``missing_reason`` says why)."""
    if _BPETokenizer is None:
        return None
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return f"{ENGINE} {dist_version('gigatoken')}"
    except PackageNotFoundError:
        return ENGINE


def missing_reason() -> str:
    return f"{ENGINE} is not installed (pip install 'winsample[fast]')" if _IMPORT_ERROR and "No module" in _IMPORT_ERROR \
        else f"{ENGINE} does not import ({_IMPORT_ERROR})"


class Engine:
    """A fast encoder of ordinary text: ``encode(text) -> np.ndarray`` (uint32).

    ``build()`` makes the underlying gigatoken object, on the first ``encode`` (so a forked
    worker builds its own instead of inheriting the parent's pages) and again when a look
    (after every ``look_bytes`` of text, counted in chars: only a bound is needed) finds the
    process over its budget and this engine the one to rebuild (``Budget``).
    ``release()`` drops it. ``TypeError`` from gigatoken (text with lone surrogates, which no
    UTF-8 engine takes) propagates: the caller falls back to the reference.
    """

    def __init__(self, build: Callable[[], object], look_bytes: int | None = None, budget: Budget | None = None):
        self._build = build
        self.budget = budget if budget is not None else Budget()  # shared with the engines of its run
        self._look_bytes = look_bytes or LOOK_BYTES
        self._obj = None
        self._since = 0  # chars encoded since the last look
        self._since_build = 0  # chars encoded since the build
        self._passes = 0  # looks over the budget let pass in a row
        self._seq = 0  # build order among the engines of its run's budget (Budget)
        self.builds = 0
        self.build_seconds: float | None = None  # what a fresh build took (the last one timed)

    def _ready(self, size: int):
        """The gigatoken object, built on first use and again when a look says so; counts ``size``."""
        if self._obj is not None and self._since >= self._look_bytes:
            self._since = 0
            if self._must_rebuild():
                self.release()
        if self._obj is None:
            before, t = _budget_view(), time.perf_counter()
            self._obj = self._build()
            took = time.perf_counter() - t
            # a first object built ahead (_first_then_fresh) took its time then
            self.build_seconds = max(took, getattr(self._build, "first_seconds", 0.0)) if not self.builds else took
            self.builds += 1
            self._since_build = 0
            self.budget.built(self, first=self.builds == 1, before=before, after=_budget_view())
        self._since += size
        self._since_build += size
        return self._obj

    def _must_rebuild(self) -> bool:
        now = _budget_view()
        if now is None:
            return self._since_build >= BLIND_REBUILD_BYTES
        if not self.budget.over(now):
            self._passes = 0
            return False
        # The engine built longest ago holds the most cache: it rebuilds. One that never looks
        # again (idle, or left over from an earlier run) cannot hold the others up: after PASSES
        # looks over the budget in a row, the looking engine rebuilds itself.
        self._passes += 1
        if self.budget.oldest() is self or self._passes > PASSES:
            self._passes = 0
            return True
        return False

    def encode(self, text: str) -> np.ndarray:
        return self._ready(len(text)).encode(text)

    def encode_many(self, pieces: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
        """Ids of each UTF-8 ``pieces[k]`` concatenated (uint32), and each one's count (int64).

        gigatoken's ``encode_batch_padded`` on this thread (``parallel=False``: never its global
        thread pool), which, unlike ``encode``, releases the GIL: encoder threads run side by side
        in one process. Several pieces share a call (a SentencePiece batch call has a fixed cost,
        ~3 ms), grouped by size so that padding stays bounded (``padded_groups``).
        """
        obj = self._ready(sum(map(len, pieces)))
        if len(pieces) == 1:
            rows, counts = _padded(obj, pieces)
            return rows[0, : counts[0]], np.asarray(counts[:1], np.int64)
        out: list = [None] * len(pieces)
        for group in padded_groups([len(p) for p in pieces]):
            rows, counts = _padded(obj, [pieces[i] for i in group])
            for k, i in enumerate(group):
                out[i] = rows[k, : counts[k]]
        if not out:
            return np.zeros(0, np.uint32), np.zeros(0, np.int64)
        return np.concatenate(out), np.array([len(o) for o in out], np.int64)

    def encode_rows(self, pieces: list[bytes]) -> list[list[np.ndarray]]:
        """Each piece's ids through the batch calls ``encode_many`` makes (the self-check's
        ``batches``): [all pieces in one padded call, ``encode_many``'s grouped calls, one piece
        a call for the first 16]."""
        rows, counts = _padded(self._ready(0), pieces)
        together = [rows[k, : counts[k]] for k in range(len(pieces))]
        ids, lengths = self.encode_many(pieces)
        ends = np.cumsum(lengths)
        grouped = [ids[e - n : e] for e, n in zip(ends.tolist(), lengths.tolist())]
        alone = [self.encode_many([p])[0] for p in pieces[:16]]
        return [together, grouped, alone]

    def fresh(self) -> Engine:
        """An engine with the same recipe and no object yet (one per encoder thread)."""
        engine = Engine(self._build, self._look_bytes, self.budget)
        engine.build_seconds = self.build_seconds
        return engine

    def bytes_per_second(self, sample: bytes) -> float:
        """This engine's speed on ``sample`` (UTF-8 bytes a second, on this thread)."""
        t = time.perf_counter()
        self.encode_many([sample])
        return len(sample) / max(time.perf_counter() - t, 1e-6)

    def release(self) -> None:
        """Drop the gigatoken object and its cache, and hand the freed memory back to the OS."""
        if self._obj is not None:
            self._obj = None
            self._since = 0
            self.budget.dropped(self)
            _trim()

    def __getstate__(self):  # a pickled engine (forkserver, spawn, Ray) starts without the object
        return {**self.__dict__, "_obj": None, "_since": 0, "_since_build": 0, "_passes": 0, "_seq": 0, "builds": 0,
                "budget": None}

    def __setstate__(self, state) -> None:  # a budget of its own where it lands
        self.__dict__.update(state, budget=Budget())


class Budget:
    """The memory budget the built engines of one run share (``new_budget``).

    ``ceiling``: the resident size the process may reach: its size when the budget starts
    (or at the first build) plus ``CACHE_BUDGET``, raised by what each further engine's first
    build adds (an engine's own tables are not cache). A rebuild that leaves the process still
    over the ceiling (memory that is not the engines' grew) raises it to a quarter of the
    budget above that size, so that engines never rebuild at every look.
    """

    def __init__(self, engines=(), cache: int = CACHE_BUDGET):
        self.cache = cache  # bytes the engines' caches may add together (CACHE_BUDGET, or a worker's share)
        self.lock = threading.Lock()
        self.live: weakref.WeakSet = weakref.WeakSet()  # engines that hold a gigatoken object
        self.order = itertools.count(1)
        self.ceiling: int | None = None
        for engine in engines:  # built before this budget started: oldest first
            if engine._obj is not None:
                engine._seq = next(self.order)
                self.live.add(engine)
        now = _budget_view() if self.live else None
        if now is not None:
            self.ceiling = now + cache

    def built(self, engine: Engine, first: bool, before: int | None, after: int | None) -> None:
        with self.lock:
            engine._seq = next(self.order)
            self.live.add(engine)
            if after is None:
                return
            if self.ceiling is None:
                self.ceiling = after + self.cache
            elif first:
                self.ceiling += max(0, after - before) if before is not None else 0
            elif after >= self.ceiling:
                self.ceiling = after + self.cache // 4

    def dropped(self, engine: Engine) -> None:
        with self.lock:
            self.live.discard(engine)

    def over(self, now: int) -> bool:
        with self.lock:
            return self.ceiling is not None and now >= self.ceiling

    def oldest(self) -> Engine | None:
        with self.lock:
            return min(self.live, key=lambda e: e._seq, default=None)


def process_budget(processes: int) -> int:
    """The cache budget of each of ``processes`` processes that encode one run side by side: 1.5 ×
    ``CACHE_BUDGET`` shared among them, never below a quarter of it. Measured on unique text
    with 2 processes (gpt2): 40 MB each encodes ~25 % slower than 80 MB (a rebuilt engine starts
    cold), 60 MB ~5 %; the tree's proportional set size stays near 300 MB."""
    return max(CACHE_BUDGET * 3 // (2 * max(processes, 1)), CACHE_BUDGET // 4)


def new_budget(engines=(), cache: int = CACHE_BUDGET) -> Budget:
    """Start a budget for one run and return it: ``engines`` (oldest first; those built count in
    it at once) and the engines they make (``fresh``) share it, and engines of earlier runs no
    longer do (one left built in a cache never looks again). No budget is global: an engine
    made outside a run has one of its own, shared with its ``fresh`` ones."""
    budget = Budget(engines, cache)
    for engine in engines:
        engine.budget = budget
    return budget


def padded_groups(sizes: list[int]) -> list[list[int]]:
    """The indices of ``sizes`` (bytes) in groups for padded batch calls: by size, a group
    closed before ``count × largest`` would pass ``PAD_WASTE × its bytes + PAD_SLACK``."""
    groups: list[list[int]] = []
    group: list[int] = []
    total = 0
    for i in sorted(range(len(sizes)), key=sizes.__getitem__):
        n = sizes[i]
        if group and (len(group) + 1) * n > PAD_WASTE * (total + n) + PAD_SLACK:
            groups.append(group)
            group, total = [], 0
        group.append(i)
        total += n
    return groups + [group] if group else groups


def _padded(obj, pieces: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """(rows, counts): ``obj.encode_batch_padded`` of ``pieces`` on this thread, no padding asked.
    A gigatoken object gets them as a ``BytesSource``: given a list, gigatoken imports awkward
    (~0.5 s and ~50 MB) only to ask whether it is an awkward array."""
    if isinstance(obj, _NATIVE):
        return obj.encode_batch_padded(_BytesSource([bytes(p) for p in pieces]), _NO_PADDING, parallel=False)
    return obj.encode_batch_padded(pieces, _NO_PADDING, parallel=False)


_held_outside = 0  # bytes this process holds on purpose beside the engines (``hold_outside``)


def hold_outside(nbytes: int) -> None:
    """Count ``nbytes`` (negative: given back) of memory this process holds that is no engine's
    cache (a part's ids waiting for their place in the output): the budget looks past it, so
    that an engine is not rebuilt (its cache lost) for memory it does not hold."""
    global _held_outside
    _held_outside += nbytes


def held_outside() -> int:
    """Bytes this process holds outside its engines' budget now (``hold_outside``'s sum)."""
    return _held_outside


def _budget_view() -> int | None:
    """The resident size the budget compares: ``resident_bytes`` less what is held outside it."""
    now = resident_bytes()
    return None if now is None else now - _held_outside


def resident_bytes() -> int | None:
    """This process's resident memory in bytes (``/proc/self/statm``); None where it cannot be read."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def _trim() -> None:
    """glibc keeps freed memory for reuse; malloc_trim(0) returns it (a no-op elsewhere)."""
    try:
        import ctypes

        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass


@contextlib.contextmanager
def _file_of(data: bytes):
    """A path that reads as ``data``, for gigatoken, which reads ranks from a path only. On Linux
    an anonymous memory file (nothing on disk, so a process killed mid-load leaves nothing
    behind; before, a killed worker left a temp file in /tmp); elsewhere a private temp file,
    removed at once."""
    fd = -1
    if hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # a sandbox may refuse it (seccomp): the temp file then
            fd = os.memfd_create("winsample-ranks", os.MFD_CLOEXEC)
    if fd >= 0:
        try:
            with os.fdopen(fd, "wb", closefd=False) as f:
                f.write(data)
            yield f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
        return
    fd, path = tempfile.mkstemp(suffix=".tiktoken", prefix="winsample-ranks-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        yield path
    finally:
        os.unlink(path)


# gigatoken's names for the pre-tokenizers of tiktoken's patterns (winsample's --pattern names).
SCHEMES = {"gpt2": "gpt2", "cl100k": "gpt4", "o200k": "o200k"}


def tiktoken_engine(ranks_file_bytes: bytes, pattern: str | None, look_bytes: int | None = None) -> Engine:
    """An engine for tiktoken ranks (a ``.tiktoken`` file's bytes) with the pre-tokenizer
    ``pattern`` (a key of ``SCHEMES``; None: the encoding's pattern is none of them).

    ConfigError when gigatoken is missing, has no scheme for ``pattern``, or rejects the ranks.
    """
    if _BPETokenizer is None:
        raise ConfigError(f"the fast backend is not available: {missing_reason()}")
    scheme = SCHEMES.get(pattern)
    if scheme is None:
        raise ConfigError("the fast backend knows the gpt2, cl100k and o200k pre-tokenizers only, not this encoding's")

    def build():
        with _file_of(ranks_file_bytes) as path:
            try:
                return _BPETokenizer.from_tiktoken(path, scheme, None)
            except (ValueError, RuntimeError) as e:
                raise ConfigError(f"the fast backend cannot load these ranks: {e}") from None

    return Engine(build, look_bytes)


# --- the self-check ------------------------------------------------------------------------

# Texts where a BPE engine is most likely to part from its reference: special-token lookalikes,
# whitespace runs (the \s+(?!\S) look-ahead), CJK, emoji sequences, text whose invalid UTF-8
# was replaced by U+FFFD, contractions, digits, combining marks, other scripts, code.
SELF_CHECK_TEXTS = (
    "<|endoftext|>", "a<|endoftext|>b", " <|endoftext|>\n<|endoftext|><|endoftext|>", "<|endoftext|",
    "<|fim_prefix|>x<|fim_middle|>y<|fim_suffix|>", "<|endofprompt|>", "<|im_start|>user\nhi<|im_end|>",
    "<s>", "</s>", "<s> hello </s>", "<unk><pad><mask>", "[CLS] x [SEP]", "<<SYS>>", "▁hello ▁world",
    "a  b   c    d", "a\n\nb", "a\n\n\n\nb", "  \n  \n", "x   \n", "\t\t x", " " * 67, "\n" * 41, "\r\n\r\n\r\n",
    "line\r\nnext\rlast\n", "x \n y", "\u00a0\u2003\u3000 a\u2009b\u202fc", "\u2028\u2029\u0085\x0b\x0c",
    "自然语言处理是人工智能的一个分支。", "日本語のテキストとカタカナ、ひらがな。", "한국어 문장입니다.", "「引用」，（括号）！？",
    "中文English混合123テスト", "😀👍🏽👨‍👩‍👧‍👦🇺🇸🏳️‍🌈1️⃣", "emoji😀inside👍word", "🙂 🙂  🙂",
    b"caf\xc3\xa9 \xff\xfe bad \xc3( \xed\xa0\x80 end".decode("utf-8", "replace"), "\ufffd\ufffd\ufffd x\ufffdy",
    "I'm you're he's they'll we'd I've can't DON'T it'S", "'s'S 't 're 've 'm 'll 'd", "rock'n'roll",
    "1234567890 3.14159 1,000,000 2024-01-01 0x1F", "٣٤٥ ١٢ ۱۲۳ ４５６", "Ⅻ ½ ² 𝟘𝟙",
    "e\u0301 n\u0303 a\u030a\u0320", "Ελληνικά русский עברית العربية ไทย हिन्दी", "ǅ ß İ ﬁ ﬂ",
    "def f(x):\n    return x ** 2  # square\n\n\nclass A:\n\tpass\n", '{"key": [1, 2.5, null], "k2": "v"}',
    "!!!...???---___***", "a" * 3000, "ab" * 1500, "\u0378\U000e0001\U0010fffd\ufeff", "x" * 2 + "\u200b" + "y",
)


def _mixes(seed: int = 15, count: int = 160) -> list[str]:
    """Seeded random concatenations of pieces of the fixed texts (edges between kinds of text)."""
    r = random.Random(seed)
    pieces = [t[i : i + n] for t in SELF_CHECK_TEXTS for i, n in ((0, 7), (3, 11), (len(t) // 2, 5))]
    pieces += [" ", "  ", "\n", "\n\n", "'", "s", "'s", "<|", "|>", "1", "é", "中"]
    return ["".join(r.choice(pieces) for _ in range(r.randint(1, 40))) for _ in range(count)]


def check_texts(extra: tuple[str, ...] = ()) -> tuple[str, ...]:
    """Every text ``self_check`` encodes, in its order: the fixed ones, ``extra``, the mixes."""
    return (*SELF_CHECK_TEXTS, *extra, *_mixes())


def self_check(reference: Callable[[str], object], fast: Callable[[str], object], extra: tuple[str, ...] = (),
               utf8: bool = False, batches: Callable[[list[bytes]], list] | None = None) -> str | None:
    """None when ``fast(text)`` equals ``reference(text)`` for every self-check text (and, with
    ``utf8``, ``fast(text.encode())`` too: the engine is also fed UTF-8 bytes), else the first
    difference in one line (the text, the first differing position and both ids).

    ``batches(pieces)``: the engine's batch calls over the texts' UTF-8 (a list of results, each
    a list of id sequences for the texts in order, all or the first few): every row must be its
    text's ids too. Few calls, because a batch call has a fixed cost (~3 ms for SentencePiece).
    """
    texts = check_texts(extra)
    wants = []
    for text in texts:
        want = _ints(reference(text))
        wants.append(want)
        for given in (text, text.encode("utf-8")) if utf8 else (text,):
            problem = _compare(text, want, fast, given)
            if problem is not None:
                return problem
    if batches is not None:
        try:
            results = batches([t.encode("utf-8") for t in texts])
        except Exception as e:
            return f"its batch call fails: {type(e).__name__}: {e}"
        for rows in results:
            for text, want, row in zip(texts, wants, rows):
                problem = _compare(text, want, lambda _, row=row: row, b"")
                if problem is not None:
                    return problem.replace(" given as UTF-8 bytes", " in a batch call of several texts")
    return None


def _compare(text: str, want: list[int], fast, given) -> str | None:
    how = " given as UTF-8 bytes" if isinstance(given, bytes) else ""
    try:
        got = _ints(fast(given))
    except Exception as e:  # an engine that cannot take the text disagrees with the reference
        return f"it fails on {_show(text)}{how}: {type(e).__name__}: {e}"
    if got != want:
        k = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
        g = f"id {got[k]}" if k < len(got) else f"no id (its ids end after {k})"
        w = f"id {want[k]}" if k < len(want) else f"none (its {k} ids end there)"
        return f"on {_show(text)}{how} it gives {g} at token {k} where the reference gives {w}"
    return None


def _ints(ids) -> list[int]:
    """``ids`` (an array or a sequence) as a list of Python ints (an array's own tolist: C speed)."""
    return ids.tolist() if isinstance(ids, np.ndarray) else [int(i) for i in ids]


def _show(text: str) -> str:
    return repr(text if len(text) <= 40 else text[:37] + "...")


# --- the tokenizer.json and SentencePiece families --------------------------------------------


def _load_hf_json():
    """gigatoken's ``load_hf_json``; ConfigError when gigatoken is missing or has none."""
    if _BPETokenizer is None:
        raise ConfigError(f"the fast backend is not available: {missing_reason()}")
    try:
        from gigatoken.gigatoken_rs import load_hf_json
    except ImportError as e:
        raise ConfigError(f"the fast backend cannot load tokenizer.json files: {e}") from None
    return load_hf_json


def _load(load_hf_json, json_text: str, what: str):
    try:
        return load_hf_json(json_text)
    except BaseException as e:  # gigatoken raises ValueError/RuntimeError, a pyo3 panic is BaseException
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise ConfigError(f"the fast backend cannot load this {what}: {first}") from None


def hf_json_without_specials(json_text: str) -> str:
    """``json_text`` (a tokenizer.json) with its *special* added tokens removed, the others kept.

    The reference encodes a special token's text inside a document as ordinary text
    (``encode_special_tokens = True``), while gigatoken would give it its id; without the
    entry, gigatoken sees ordinary text too. Non-special added tokens (DeepSeek's ``<think>``)
    keep their ids, as the reference gives them.
    """
    import json

    # Only the added_tokens array is parsed and rewritten (a tokenizer.json is mostly its
    # vocabulary and merges: parsing it all costs ~0.4 s for a 130k vocabulary).
    key = '"added_tokens":'
    i = json_text.find(key)
    if i > 0:
        try:  # the key is top-level when the text before it, closed, is a JSON object
            json.loads(json_text[:i] + '"_": 0}')
            start = i + len(key)
            while json_text[start : start + 1].isspace():  # raw_decode takes no leading whitespace
                start += 1
            added, end = json.JSONDecoder().raw_decode(json_text, start)
        except ValueError:
            added = None
        if isinstance(added, list):
            kept = [a for a in added if not (isinstance(a, dict) and a.get("special"))]
            return json_text[: i + len(key)] + json.dumps(kept, ensure_ascii=False) + json_text[end:]
    spec = json.loads(json_text)  # another layout: the whole file
    spec["added_tokens"] = [a for a in spec.get("added_tokens") or [] if not a.get("special")]
    return json.dumps(spec, ensure_ascii=False)


def _first_then_fresh(first, build, seconds: float):
    """A build function whose first call returns ``first`` (already built, in ``seconds``, to
    check that it loads) and every later call a fresh ``build()``."""
    held = [first]

    def once():
        return held.pop() if held else build()

    once.first_seconds = seconds
    return once


def hf_engine(json_text: str, look_bytes: int | None = None) -> Engine:
    """An engine for a Hugging Face tokenizer.json (its text, as the reference library loaded
    it), with special added tokens encoded as text (``hf_json_without_specials``).

    ConfigError when gigatoken is missing or cannot load the file (a model kind it lacks).
    Agreement with the reference is the self-check's to prove, not this function's.
    """
    load_hf_json = _load_hf_json()
    prepared = hf_json_without_specials(json_text)
    t = time.perf_counter()
    first = _load(load_hf_json, prepared, "tokenizer.json")  # fails here, not in a worker's first encode
    return Engine(_first_then_fresh(first, lambda: load_hf_json(prepared), time.perf_counter() - t), look_bytes)


class _DummyPrefix:
    """A gigatoken object whose tokenizer.json has no ``Prepend("▁")`` step, encoding
    ``" " + text`` instead (the space becomes the ``▁``): sentencepiece's dummy prefix put
    before the whole text, once, where gigatoken's Prepend step would put one before each
    piece between user-defined tokens (``"x[REF]y"`` must give ``▁x [REF] y``, not ``▁y``).
    The empty text stays empty, as in sentencepiece. Same ``encode`` / ``encode_batch`` /
    ``encode_batch_padded`` (the latter with no padding asked, as ``_padded`` calls it)."""

    def __init__(self, obj):
        self._obj = obj

    @staticmethod
    def _prefixed(text):
        if not text:
            return text
        return (b" " + text) if isinstance(text, (bytes, bytearray, memoryview)) else " " + text

    def encode(self, text):
        return self._obj.encode(self._prefixed(text))

    def encode_batch(self, texts, **kw):
        return self._obj.encode_batch([self._prefixed(t) for t in texts], **kw)

    def encode_batch_padded(self, texts, options, **kw):  # Engine.encode_many's call (via _padded)
        return _padded(self._obj, [self._prefixed(t) for t in texts])

    def __getattr__(self, name):  # decode, vocab_size, …: the underlying object's (never an encode)
        return getattr(self._obj, name)


def spm_tokenizer_json(model_bytes: bytes) -> tuple[str, bool]:
    """(the tokenizer.json gigatoken loads for a SentencePiece ``.model``, whether the caller
    must put the dummy prefix before the text itself: ``_DummyPrefix``).

    gigatoken's own conversion (``gigatoken.Tokenizer.from_sentencepiece``), then: control
    pieces (``<s>``, ``[INST]``) removed from its added tokens, so that their text in a
    document stays text as sentencepiece keeps it; user-defined pieces kept (sentencepiece
    matches them in the text). A model with user-defined pieces and the dummy prefix gets
    its Prepend step dropped for ``_DummyPrefix``. ConfigError for a model the conversion
    does not take (Unigram, no byte fallback, …).
    """
    import json

    try:
        from gigatoken._load.sentencepiece import sentencepiece_to_tokenizer_json
    except ImportError as e:
        raise ConfigError(f"the fast backend cannot convert SentencePiece models: {e}") from None
    try:
        spec = json.loads(sentencepiece_to_tokenizer_json(model_bytes))
    except (ValueError, KeyError, AssertionError, IndexError, UnicodeDecodeError) as e:
        raise ConfigError(f"the fast backend cannot take this SentencePiece model: {e}") from None
    spec["added_tokens"] = [a for a in spec["added_tokens"] if not a.get("special")]
    steps = spec["normalizer"]["normalizers"]
    prepend = [s for s in steps if s.get("type") == "Prepend"]
    own_prefix = False
    if spec["added_tokens"] and prepend:
        if any(s.get("type") == "Strip" for s in steps):
            # remove_extra_whitespaces would strip the leading space that stands for the prefix
            raise ConfigError("the fast backend cannot take a SentencePiece model with user-defined pieces and"
                              " remove_extra_whitespaces (its dummy prefix would differ from sentencepiece's)")
        spec["normalizer"]["normalizers"] = [s for s in steps if s.get("type") != "Prepend"]
        own_prefix = True
    return json.dumps(spec, ensure_ascii=False), own_prefix


CACHE_ENV = "WINSAMPLE_CACHE_DIR"  # where converted models are kept (default ~/.cache/winsample)


def cache_dir() -> Path:
    """The folder for converted SentencePiece models: ``$WINSAMPLE_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/winsample``, else ``~/.cache/winsample``."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "winsample"


def cached_spm_tokenizer_json(model_bytes: bytes) -> tuple[str, bool]:
    """``spm_tokenizer_json``, kept in ``cache_dir()`` under the model's sha256 and the versions
    of gigatoken and winsample: the conversion runs in Python (~0.5 s for a 32k model), paid
    once per model. A cache that cannot be read or written is passed by (the conversion runs);
    what is read is checked like anything the engine does, by the self-check."""
    import hashlib
    import json

    from .. import __version__

    key = hashlib.sha256(model_bytes).hexdigest()
    path = cache_dir() / f"spm-{key[:32]}.json"
    stamp = {"sha256": key, "engine": version(), "winsample": __version__, "format": SPM_CACHE_FORMAT}
    try:
        if _owned(path):  # another user's entry (a shared cache folder) is never trusted
            held = json.loads(path.read_text(encoding="utf-8"))
            if held.get("stamp") == stamp and isinstance(held.get("tokenizer_json"), str):
                return held["tokenizer_json"], bool(held.get("own_prefix"))
    except (OSError, ValueError, AttributeError):
        pass
    prepared, own_prefix = spm_tokenizer_json(model_bytes)
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".spm-", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump({"stamp": stamp, "own_prefix": own_prefix, "tokenizer_json": prepared}, f, ensure_ascii=False)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except (OSError, ValueError):
        pass  # a read-only or full home, text JSON cannot write: convert again next time
    return prepared, own_prefix


SPM_CACHE_FORMAT = 1  # raise when spm_tokenizer_json's output changes: older entries are converted again


def _owned(path: Path) -> bool:
    """True when ``path`` is a file of this user's that no other user could have written."""
    st = path.stat()
    mine = not hasattr(os, "getuid") or st.st_uid == os.getuid()
    return mine and not st.st_mode & 0o022


def spm_engine(model_bytes: bytes, look_bytes: int | None = None) -> Engine:
    """An engine for a SentencePiece ``.model`` (its bytes, as the reference library loaded
    them): gigatoken on ``spm_tokenizer_json``'s conversion, converted once per model
    (``cached_spm_tokenizer_json``). ConfigError when gigatoken is missing or cannot take the
    model; agreement is the self-check's to prove."""
    load_hf_json = _load_hf_json()
    prepared, own_prefix = cached_spm_tokenizer_json(model_bytes)
    wrap = _DummyPrefix if own_prefix else (lambda obj: obj)
    t = time.perf_counter()
    first = wrap(_load(load_hf_json, prepared, "SentencePiece model"))
    return Engine(_first_then_fresh(first, lambda: wrap(load_hf_json(prepared)), time.perf_counter() - t), look_bytes)
