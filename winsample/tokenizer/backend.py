"""winsample.tokenizer.backend."""

from __future__ import annotations

import threading
from importlib import resources

import numpy as np

from ..errors import ConfigError
from ..terminal import stderr_held
from .base import Tokenizer

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

    def token_id(self, text: str) -> int | None:
        return self._ref.token_id(text)

    def reencodable(self) -> tuple[bool, str]:
        return self._ref.reencodable()

    def text_of_ids(self, ids):
        return self._ref.text_of_ids(ids)

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

    def start_budget(self, processes: int = 1) -> None:
        """Start the run's memory budget with the main thread's engine (a run on this thread);
        ``processes``: the run's processes that each hold one (``fastengine.process_budget``)."""
        from . import fastengine

        fastengine.new_budget([self._engine], fastengine.process_budget(processes))

    def release(self) -> None:
        """Drop the main thread's engine and its cache (built again if this tokenizer encodes)."""
        self._engine.release()

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
        return (fast_checked, (self._ref,))


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
        fast = fast_checked(ref)
    except ConfigError as e:
        if backend == "fast":
            raise
        return ref, {"name": "reference", "engine": ref.engine(), "note": f"--backend auto: using the reference {ref.engine()}: {e}"}
    return fast, {"name": "fast", "engine": fast.engine()}


def _quiet_panics():
    """Standard error held while the fast engine is built and checked: a Rust panic prints its
    own lines there before Python sees it. On success what was held is written out; on failure
    it is dropped (the error says why in one line)."""
    return stderr_held(lambda data, ok: data if ok else b"")


class _Background:
    """``fn(*args)`` on a daemon thread (a signal never waits for it); ``result()`` joins it and
    returns its value or raises its exception."""

    def __init__(self, fn, *args):
        self._out: list = []
        self._thread = threading.Thread(target=self._run, args=(fn, args), name="winsample-self-check", daemon=True)
        self._thread.start()

    def _run(self, fn, args) -> None:
        try:
            self._out.append((True, fn(*args)))
        except BaseException as e:  # handed to result(): a panic included
            self._out.append((False, e))

    def result(self):
        self._thread.join()
        ok, value = self._out[0]
        if not ok:
            raise value
        return value


CHECKED: dict[int, FastTokenizer] = {}  # id(reference) → its checked fast tokenizer (refs are cached by load)


def fast_checked(ref: Tokenizer) -> FastTokenizer:
    """The fast tokenizer for ``ref`` once its engine loads and passes the self-check."""
    if id(ref) in CHECKED and CHECKED[id(ref)].reference() is ref:
        return CHECKED[id(ref)]
    from . import fastengine

    with _quiet_panics():
        try:
            extra = tuple(ref.special_texts())
            # The reference's ids for the check, on a thread while the engine loads (the load holds
            # the GIL; tokenizers' batch call releases it: ~0.12 s of a big tokenizer.json's start-up)
            wanted = _Background(ref.encode_each, fastengine.check_texts(extra))
            fast = FastTokenizer(ref, ref.fast_engine())
            wants = dict(zip(fastengine.check_texts(extra), wanted.result()))
            # A str and UTF-8 bytes through the engine's encode, then all the texts at once through the
            # batch calls the encoder threads make (encode_many): every path is checked.
            problem = fastengine.self_check(wants.__getitem__, fast._engine.encode, extra, utf8=True,
                                            batches=fast._engine.encode_rows)
        except (Exception, KeyboardInterrupt, SystemExit, GeneratorExit):  # errors as they are; a signal ends the run
            raise
        except BaseException as e:  # a Rust panic: pyo3's PanicException is no Exception
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise ConfigError(f"the fast engine cannot take this tokenizer: it panicked ({first})") from None
    if problem is not None:
        raise ConfigError(f"the fast engine disagrees with the reference {ref.engine()} {problem}")
    CHECKED[id(ref)] = fast
    return fast
