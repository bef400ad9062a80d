"""k-token shingle hashes for split_leakage: exact (every shingle) or sampled (content-chosen anchors)."""

from __future__ import annotations

import math

import numpy as np
from numpy.lib.stride_tricks import as_strided

SHINGLE_K = 32  # tokens per shingle: long enough that common phrases do not match by chance
MAX_SHINGLES = 4_000_000  # hashes kept for train + val together (32 MB of uint64); above it, sample
HASH_STEP = 1 << 20  # tokens per hashing step: keeps uint64 temporaries small and in cache

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


def hash_at(tokens: np.ndarray, starts: np.ndarray, k: int) -> np.ndarray:
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


class Shingler:
    """Feeds chunks in file order; carries k-1 tokens so shingles across chunk edges count once."""

    def __init__(self, k: int, bits: int):
        self.k, self.bits = k, bits
        self.carry: np.ndarray | None = None
        self.parts: list[np.ndarray] = []

    def feed(self, chunk: np.ndarray) -> None:
        k = self.k
        for lo in range(0, len(chunk), HASH_STEP):
            t = np.asarray(chunk[lo : lo + HASH_STEP])
            if self.carry is not None and len(self.carry):
                t = np.concatenate([self.carry, t])
            if len(t) >= k:
                if self.bits == 0:
                    self.parts.append(shingle_hashes(t, k))
                else:
                    starts = anchor_starts(t[: len(t) - k + 2], self.bits)
                    if len(starts):
                        self.parts.append(hash_at(t, starts, k))
            self.carry = t[-(k - 1) :].copy() if k > 1 else t[:0]

    def result(self) -> np.ndarray:
        return np.concatenate(self.parts) if self.parts else np.zeros(0, dtype=np.uint64)


def sampling_bits(total_tokens: int, budget: int = MAX_SHINGLES) -> int:
    """Keep 2**-bits of the shingles so that about ``budget`` hashes are kept (0 = all, exact)."""
    if total_tokens <= budget:
        return 0
    return min(31, math.ceil(math.log2(total_tokens / budget)))


def shingles_at(tokens, k: int, bits: int, step: int = HASH_STEP):
    """(hashes, start positions) of the shingles a ``Shingler`` of ``bits`` keeps for ``tokens``
    (the same values: hashing and sampling depend on content alone), a piece at a time: a
    second pass that says where each kept shingle lies."""
    n = len(tokens)
    for lo in range(0, max(n - k + 1, 0), step):
        t = np.asarray(tokens[lo : min(n, lo + step + k - 1)])
        if bits == 0:
            h = shingle_hashes(t, k)
            yield h, lo + np.arange(len(h), dtype=np.int64)
        else:
            starts = anchor_starts(t[: len(t) - k + 2], bits)
            if len(starts):
                yield hash_at(t, starts, k), lo + starts.astype(np.int64)
