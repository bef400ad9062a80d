"""Document, paragraph and sentence edges found in a token stream, through token bytes.

An *edge* (boundary) ``b`` is a token index: the cut falls between token ``b - 1`` and token ``b``
(so ``b`` is a valid window end, exclusive, and a valid window start). Let ``s`` be the bytes of the
tokens before ``b`` (``Tokenizer.token_bytes`` of each, concatenated) and ``r`` the bytes
from ``b`` on. Then ``b`` is

- a **paragraph** edge when ``s`` ends with a blank line: ``b"\\n\\n"``, or ``b"\\n\\r\\n"`` (the end
  of CRLF text's ``b"\\r\\n\\r\\n"``, or an LF line then a CRLF one) — whether that is one token
  (GPT-2 628) or several (198 198; CRLF is 201 198 201 198 in GPT-2, 201 being ``\\r``) or any
  other split. A lone ``\\r`` (old Mac line end) ends no line;
- a **sentence** edge when it is a paragraph edge, or ``s`` ends with a CJK terminal ``。！？``
  (whole UTF-8 sequence, which may be split across tokens; no space needed after it, Chinese and
  Japanese use none), or ``s`` ends with ``.`` ``!`` ``?`` and ``r`` starts with ASCII whitespace
  (or is empty), or the last token holds a terminal followed by whitespace (e.g. one ``".\\n"``
  token, where no cut exists between the two).

Everything is computed from per-id lookup tables (built once from the tokenizer) over bounded
chunks of the memmap, vectorised with numpy; two tokens of look-behind and one of look-ahead
carry across chunk edges. A cheap pre-filter picks candidate tokens first (equality tests when
the candidate ids are few, as for GPT-2 paragraphs: only 198 and 628 end with a newline and
only 201 holds a ``\\r``; one table gather otherwise), and only candidates get the exact byte test.
When the optional C module ``_fast`` is built (``FAST``), it does the same per chunk in one
pass without the GIL (tests run every edge test on both paths).
"""

from __future__ import annotations

import functools
import os
import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from .. import formats
from ..errors import DataError

# Tokens per chunk: ~2 MB of uint16 keeps the working arrays in cache, which is what makes the
# pass fast; memory stays flat whatever the file size.
CHUNK_TOKENS = 1 << 20
AHEAD_TOKENS = 16 << 20  # tokens scanned ahead of the consumer (iter_boundaries)

WS = frozenset(b" \t\n\r\x0b\x0c")
ASCII_TERMINALS = frozenset(b".!?")
CJK_TERMINALS = tuple(c.encode() for c in "。！？")  # E3 80 82, EF BC 81, EF BC 9F
_CJK_VALUES = np.array([int.from_bytes(c, "big") for c in CJK_TERMINALS], dtype=np.int64)
# Few enough candidate ids → test them with ==, which streams ~3x faster than a table gather.
MAX_EQ_IDS = 6

KINDS = ("paragraph", "sentence")


def load_fast():
    """The C kernels (``_fast.c``), or None: not built (no C compiler at install) or
    ``WINSAMPLE_PURE=1``. Both paths give the same edges and plans; numpy is just slower."""
    if os.environ.get("WINSAMPLE_PURE", "").strip().lower() not in ("", "0", "false", "no", "off"):
        return None
    try:
        from .. import _fast
    except ImportError:
        return None
    return _fast


FAST = load_fast()


def sorted_unique(x: np.ndarray) -> np.ndarray:
    """``np.unique`` of an already sorted array (np.unique's first call imports numpy.ma: ~20 ms)."""
    return x[np.concatenate([[True], x[1:] != x[:-1]])] if len(x) else x


def _union(para: np.ndarray, more: np.ndarray) -> np.ndarray:
    """Sorted edges in either array (paragraph edges are sentence edges too)."""
    both = np.concatenate([para, more])
    both.sort()
    return sorted_unique(both)


@dataclass(frozen=True)
class Tables:
    """Per-token-id facts about its bytes (arrays indexed by id, length n)."""

    last3: np.ndarray  # int64: last up-to-3 bytes, big-endian packed
    len3: np.ndarray  # int64: min(len, 3)
    core3: np.ndarray  # int64: last up-to-3 bytes after stripping trailing whitespace
    corelen3: np.ndarray  # int64: min(len(stripped), 3)
    ws_start: np.ndarray  # bool: first byte is whitespace
    ws_end_core: np.ndarray  # bool: has trailing whitespace and some non-whitespace byte
    ascii_term: np.ndarray  # bool [256]: byte is . ! ?
    para_ids: np.ndarray  # ids whose last byte is '\n' (the only ones that can end a blank line)
    sent_ids: np.ndarray  # ids that can end a sentence edge
    para_mask: np.ndarray  # uint8 [65536 or n]: 1 for para_ids
    sent_mask: np.ndarray
    nl_ids: np.ndarray  # ids whose bytes are exactly b"\n"
    dbl_ids: np.ndarray  # ids whose bytes end with a whole blank line, b"\n\n" or b"\n\r\n"
    para_code: np.ndarray  # uint8 [65536 or n]: bits PC_* below (0 for the sentinel row)
    para_rest: np.ndarray  # para_ids that are neither nl_ids nor dbl_ids (end with one \n after other bytes)
    sent_core_ids: np.ndarray  # sent_ids that are not all whitespace: the only ones needing the byte test
    sent_core_mask: np.ndarray  # uint8 [65536 or n]: 1 for sent_core_ids
    cr_ids: np.ndarray  # ids whose bytes are exactly b"\r" (GPT-2: 201)
    crnl_ids: np.ndarray  # ids whose bytes are exactly b"\r\n" (none in GPT-2)
    nlcr_ids: np.ndarray  # ids whose bytes end with b"\n\r" (none in GPT-2)
    sent_info: np.ndarray  # uint64 [n]: last3, len3, core3, corelen3, ws_start, ws_end_core packed for _fast.c


# para_code bits: what one token's bytes say about a blank line ending at or after it
PC_NL_END, PC_DBL, PC_NL, PC_CR, PC_CRNL, PC_NLCR = 1, 2, 4, 8, 16, 32  # ends \n, ends a blank line, ==\n, ==\r, ==\r\n, ends \n\r


def _pack(b: bytes) -> int:
    return int.from_bytes(b[-3:], "big")


@functools.lru_cache(maxsize=8)
def _tables_for(key, enc, full: bool = True) -> Tables:
    n = enc.n_vocab + 1  # the last row is a sentinel: 'no token', zero bytes
    toks = list(enc.vocab_bytes()) + [b""]  # enc: a tokenizer.Tokenizer
    size = max(n, 1 << 16)
    para = [i for i, b in enumerate(toks) if b[-1:] == b"\n"]
    nl = [i for i in para if toks[i] == b"\n"]
    dbl = [i for i in para if toks[i].endswith((b"\n\n", b"\n\r\n"))]
    crnl = [i for i in para if toks[i] == b"\r\n"]
    cr = [i for i, b in enumerate(toks) if b == b"\r"]
    nlcr = [i for i, b in enumerate(toks) if b.endswith(b"\n\r")]
    para_mask = np.zeros(size, np.uint8)
    para_mask[para] = 1
    para_code = np.zeros(size, np.uint8)
    for ids, bit in ((para, PC_NL_END), (dbl, PC_DBL), (nl, PC_NL), (cr, PC_CR), (crnl, PC_CRNL), (nlcr, PC_NLCR)):
        para_code[ids] |= bit
    para_rest = np.array(sorted(set(para) - set(nl) - set(dbl)), np.int64)
    crlf = [np.array(x, np.int64) for x in (cr, crnl, nlcr)]
    if not full:  # paragraphs need only the newline ids: skip the byte tables (~half the time)
        z, zi, zb, zm = np.zeros(n, np.int64), np.zeros(0, np.int64), np.zeros(n, bool), np.zeros(size, np.uint8)
        return Tables(z, z, z, z, zb, zb, np.zeros(256, bool), np.array(para, np.int64), zi, para_mask, zm,
                      np.array(nl, np.int64), np.array(dbl, np.int64), para_code, para_rest, zi, zm, *crlf,
                      np.zeros(n, np.uint64))
    wsb = bytes(WS)
    cores = [b.rstrip(wsb) for b in toks]
    # list comprehensions + one array each: ~10x faster than filling arrays id by id
    last3 = np.array([_pack(b) for b in toks], np.int64)
    len3 = np.minimum(np.array([len(b) for b in toks], np.int64), 3)
    core3 = np.array([_pack(c) for c in cores], np.int64)
    corelens = np.array([len(c) for c in cores], np.int64)
    corelen3 = np.minimum(corelens, 3)
    lens = np.array([len(b) for b in toks], np.int64)
    ws_start = np.array([bool(b) and b[0] in WS for b in toks], bool)
    ws_end_core = (corelens > 0) & (corelens < lens)
    enders = ASCII_TERMINALS | {c[-1] for c in CJK_TERMINALS}
    sent = sorted(para + [i for i, (b, c) in enumerate(zip(toks, cores)) if b[-1:] != b"\n" and c and c[-1] in enders])
    sent_mask = np.zeros(size, np.uint8)
    sent_mask[sent] = 1
    ascii_term = np.zeros(256, bool)
    ascii_term[list(ASCII_TERMINALS)] = True
    # An all-whitespace token ends no sentence by its bytes (no terminal, no CJK stop): it can
    # only end a blank line, which the paragraph pass finds. So only these need the byte test.
    sent_core = [i for i in sent if cores[i]]
    sent_core_mask = np.zeros(size, np.uint8)
    sent_core_mask[sent_core] = 1
    # the bit layout _fast.c's sentence_edges reads (LAST3 … WS_END_CORE there)
    sent_info = (last3 | len3 << 24 | core3 << 26 | corelen3 << 50 | ws_start.astype(np.int64) << 52
                 | ws_end_core.astype(np.int64) << 53).astype(np.uint64)
    return Tables(last3, len3, core3, corelen3, ws_start, ws_end_core, ascii_term,
                  np.array(para, np.int64), np.array(sent, np.int64), para_mask, sent_mask,
                  np.array(nl, np.int64), np.array(dbl, np.int64), para_code,
                  para_rest, np.array(sent_core, np.int64), sent_core_mask, *crlf, sent_info)


def edges_lost(enc, kind: str) -> str | None:
    """Why ``enc`` cannot show ``kind``'s edges in its tokens, or None when it can: a tokenizer
    whose normalizer turns newlines into spaces (many SentencePiece models) leaves no blank line
    in the ids, so no paragraph edge is ever found and windows cut where the span ends."""
    if kind != "paragraph":
        return None  # sentence edges end at terminals too (. ! ? 。), which every tokenizer keeps
    if b"\n\n" in enc.decode_bytes(enc.encode("one\n\ntwo")):
        return None
    return (f"tokenizer {enc.name!r} drops newlines (a blank line does not survive encoding): the tokens hold no"
            " paragraph edge, so --boundaries paragraph cuts only where the span ends; --boundaries sentence"
            " or doc keeps edges it can see")


def token_tables(enc, kind: str = "sentence") -> Tables:
    """Lookup tables for ``enc`` (cached; ~50 ms for GPT-2's 50257 ids). ``kind="paragraph"``
    fills only the newline fields (the byte tables stay zero), in about half the time."""
    return _tables_for((enc.name, enc.n_vocab), enc, kind != "paragraph")


def _eq_any(chunk: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Boolean mask of ``chunk`` ∈ ``ids``, by one ``==`` pass per id (ids are few)."""
    if len(ids) == 0:
        return np.zeros(len(chunk), bool)
    hit = chunk == int(ids[0])  # a Python int keeps the compare in uint16; np.int64 would upcast
    for i in ids[1:]:
        hit |= chunk == int(i)
    return hit


def _candidates(chunk: np.ndarray, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
    if len(ids) <= MAX_EQ_IDS:
        return np.flatnonzero(_eq_any(chunk, ids))
    return np.flatnonzero(np.take(mask, np.asarray(chunk), mode="clip"))


SUB = 1 << 18  # tokens per paragraph sub-block: its bool scratch (3 × 256 KB; 4 for CRLF) stays in L2
_scratch = threading.local()


def _bools(m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Four reusable bool buffers of at least ``m`` items for this thread (no page faults per chunk)."""
    bufs = getattr(_scratch, "bufs", None)
    if bufs is None or len(bufs[0]) < m:
        bufs = _scratch.bufs = tuple(np.empty(max(m, SUB), bool) for _ in range(4))
    return bufs[0][:m], bufs[1][:m], bufs[2][:m], bufs[3][:m]


def _paragraph_edges(chunk: np.ndarray, t: Tables, back: tuple[int, int]) -> np.ndarray:
    """Sorted chunk positions i with a paragraph edge right after token i.

    The stream before a cut ends with a blank line (``\\n\\n`` or ``\\n\\r\\n``) exactly when the
    last token ends with one; or is exactly ``\\n`` right after a stream ending with ``\\n`` or
    ``\\n\\r`` (the latter: a token ending ``\\n\\r``, or a lone ``\\r`` token after one ending
    ``\\n``); or is exactly ``\\r\\n`` right after one ending with ``\\n`` (tokens are never empty).
    So a few id sets decide it, without the byte-level work sentences need; when they are few
    (GPT-2: 198 is ``\\n``, 628 is ``\\n\\n``, 201 is ``\\r``) each id is one ``==`` pass, which
    streams several times faster than a table gather. ``back`` is the two ids before the chunk
    (the table's sentinel id where there are none). Works in cache-sized sub-blocks with
    per-thread scratch buffers.
    """
    out = []
    for lo in range(0, len(chunk), SUB):  # SUB >= 2: a later block's look-behind is in the chunk
        bb = back if lo == 0 else (int(chunk[lo - 2]), int(chunk[lo - 1]))
        out.append(_paragraph_block(chunk[lo : lo + SUB], t, bb) + lo)
    return np.concatenate(out) if len(out) > 1 else (out[0] if out else np.zeros(0, np.int64))


def _paragraph_block(chunk: np.ndarray, t: Tables, back: tuple[int, int]) -> np.ndarray:
    m = len(chunk)
    c2, c1 = int(t.para_code[back[0]]), int(t.para_code[back[1]])
    if len(t.para_ids) + len(t.cr_ids) + len(t.nlcr_ids) > MAX_EQ_IDS:
        return _paragraph_block_gather(chunk, t, c2, c1)
    single, dbl, hit, spare = _bools(m)
    cr = None  # mask of lone "\r" tokens, kept only when the block has one (LF text has none)
    if len(t.cr_ids):
        _eq_any_into(chunk, t.cr_ids, hit)
        if hit[:-1].any():  # a "\r" in the last token only matters to the next block
            cr, hit = hit, spare  # the 4th buffer is touched only for CRLF text: LF keeps 3 in cache
    nlcr_at = _positions(chunk[:-1], t.nlcr_ids, hit)  # tokens ending "\n\r" (none in GPT-2)
    crnl_at = _positions(chunk, t.crnl_ids, hit)  # tokens that are exactly "\r\n" (none in GPT-2)
    _eq_any_into(chunk, t.nl_ids, single)
    _eq_any_into(chunk, t.dbl_ids, dbl)
    # hit[i] = 'the stream before token i ends with \n' (token i-1 in single | dbl | rest)
    np.logical_or(single[:-1], dbl[:-1], out=hit[1:])
    if len(t.para_rest):
        hit[1:] |= _eq_any(chunk[:-1], t.para_rest)
    hit[0] = bool(c1 & PC_NL_END)
    crnl_edges = crnl_at[hit[crnl_at]]  # "…\n" "\r\n"
    # widen hit[i] to 'ends with \n or \n\r': "…\n" "\r", "…\n\r", and both across the block start
    if cr is not None:
        np.logical_and(cr[:-1], hit[:-1], out=cr[:-1])
        hit[1:] |= cr[:-1]
    hit[nlcr_at + 1] = True
    if (c1 & PC_CR and c2 & PC_NL_END) or c1 & PC_NLCR:
        hit[0] = True
    hit &= single  # "\n" after either
    hit |= dbl  # a token ending with a blank line of its own
    hit[crnl_edges] = True
    return np.flatnonzero(hit)


def _paragraph_block_gather(chunk: np.ndarray, t: Tables, c2: int, c1: int) -> np.ndarray:
    """``_paragraph_block`` by one ``para_code`` gather, for vocabularies with many newline ids."""
    code = np.empty(len(chunk) + 2, np.uint8)  # index j: token j - 2 of the block
    code[0], code[1] = c2, c1
    np.take(t.para_code, chunk, mode="clip", out=code[2:])
    cur, p1, p2 = code[2:], code[1:-1], code[:-2]
    after_nl = (p1 & PC_NL_END) != 0
    after_nlcr = ((p1 & PC_NLCR) != 0) | (((p1 & PC_CR) != 0) & ((p2 & PC_NL_END) != 0))
    hit = ((cur & PC_NL) != 0) & (after_nl | after_nlcr)
    hit |= ((cur & PC_CRNL) != 0) & after_nl
    hit |= (cur & PC_DBL) != 0
    return np.flatnonzero(hit)


def _positions(chunk: np.ndarray, ids: np.ndarray, scratch: np.ndarray) -> np.ndarray:
    """Positions of ``chunk`` ∈ ``ids`` (few ids, usually absent), using ``scratch`` as the mask."""
    if len(ids) == 0 or len(chunk) == 0:
        return np.zeros(0, np.int64)
    mask = _eq_any_into(chunk, ids, scratch[: len(chunk)])
    return np.flatnonzero(mask) if mask.any() else np.zeros(0, np.int64)


def _eq_any_into(chunk: np.ndarray, ids: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``out`` = mask of ``chunk`` ∈ ``ids`` (few ids), one ``==`` pass per id, no allocation."""
    if len(ids) == 0:
        out[:] = False
        return out
    np.equal(chunk, int(ids[0]), out=out)  # a Python int keeps the compare in uint16
    for i in ids[1:]:
        out |= chunk == int(i)
    return out


def iter_boundaries(tokens: np.ndarray, kind: str, enc, chunk_tokens: int = CHUNK_TOKENS, progress=None,
                    threads: int | None = None):
    """Yield ``(known, edges)`` in file order: ``edges`` (sorted int64) are the ``kind`` edges
    ``b`` with ``prev_known < b <= known`` and ``b < N``; after a yield every edge ``<= known``
    has been yielded. Streams ``tokens`` in ``chunk_tokens`` pieces (see ``find_boundaries``).
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}")
    t = token_tables(enc, kind)
    threads = threads or min(4, os.cpu_count() or 1)
    # Chunks in flight: enough that the threads keep scanning while the consumer plans a batch,
    # few enough that their edges stay small (worst case, every token an edge: AHEAD_TOKENS × 8 B).
    ahead = max(2 * threads, min(64, AHEAD_TOKENS // max(chunk_tokens, 1)))
    pending = deque()
    with ThreadPoolExecutor(threads) as pool:
        for lo in range(0, len(tokens), chunk_tokens):
            hi = min(lo + chunk_tokens, len(tokens))
            pending.append((hi, pool.submit(_chunk_edges, tokens, lo, hi, kind, t)))
            while len(pending) > ahead:
                yield _collect(pending.popleft(), progress)
        while pending:
            yield _collect(pending.popleft(), progress)


def _collect(item, progress):
    hi, fut = item
    edges, m = fut.result()
    if progress:
        progress(m)
    return hi, edges


def find_boundaries(tokens: np.ndarray, kind: str, enc, chunk_tokens: int = CHUNK_TOKENS, progress=None,
                    threads: int | None = None) -> np.ndarray:
    """Sorted int64 token indices ``b`` (0 < b < N) that are ``kind`` edges (see module doc).

    ``tokens`` is any 1-d id array (a memmap is read in ``chunk_tokens`` pieces);
    ``progress(ntokens)`` is called per chunk. DataError if an id is outside the vocabulary.
    Chunks are independent (each reads its own look-behind and look-ahead), so ``threads``
    (default: up to 4, the CPU count) work on them at once: numpy releases the GIL in its loops.
    At most ~AHEAD_TOKENS tokens are in flight, and results come back in order. Holds every edge
    of the file: planners use ``iter_boundaries`` to stay in bounded memory.
    """
    if 0 < len(tokens) <= chunk_tokens and kind in KINDS:  # one chunk (a record, a string): no thread pool to start
        edges, m = _chunk_edges(tokens, 0, len(tokens), kind, token_tables(enc, kind))
        if progress:
            progress(m)
        return np.asarray(edges, np.int64)
    out = [e for _, e in iter_boundaries(tokens, kind, enc, chunk_tokens, progress, threads)]
    return np.concatenate(out).astype(np.int64) if out else np.zeros(0, np.int64)


def _chunk_edges(tokens: np.ndarray, lo: int, hi: int, kind: str, t: Tables) -> tuple[np.ndarray, int]:
    """(edges b with lo < b <= hi and b < N, tokens examined) for the chunk tokens[lo:hi]."""
    n = len(tokens)
    none = len(t.last3) - 1  # the sentinel id: 'no token' before the file start, zero bytes
    chunk = np.asarray(tokens[lo:hi])
    m = len(chunk)
    carry = np.array([none, none], np.int64)  # the two tokens before the chunk (read from tokens)
    back = np.asarray(tokens[max(lo - 2, 0) : lo], np.int64)
    carry[2 - len(back) :] = back
    fast = (FAST is not None and chunk.dtype.kind == "u" and chunk.itemsize in (2, 4) and chunk.dtype.isnative
            and chunk.flags.c_contiguous and chunk.flags.aligned)  # what _fast.c reads; else numpy
    if fast:  # one C pass: the range check and the paragraph test together, without the GIL
        para = np.empty(m, np.int64)
        count, bad = FAST.paragraph_edges(chunk, chunk.itemsize, t.para_code, none,
                                          int(t.para_code[carry[0]]), int(t.para_code[carry[1]]), para)
        para = para[:count]
    else:
        bad = int(np.flatnonzero(chunk >= none)[0]) if m and int(chunk.max()) >= none else -1
        para = _paragraph_edges(chunk, t, (int(carry[0]), int(carry[1]))) if bad < 0 else None
    if bad >= 0:
        raise DataError(f"token id {int(chunk[bad])} at position {lo + bad} is outside the tokenizer's {none} ids")
    para = lo + para[lo + para < n - 1] + 1
    if kind == "paragraph":
        return para, m
    # sentence edges = paragraph edges ∪ edges after a token that is not all whitespace
    if fast:
        pos = np.empty(m, np.int64)
        nxt = int(tokens[lo + m]) if lo + m < n else none  # one token of look-ahead past the chunk
        count = FAST.sentence_edges(chunk, chunk.itemsize, t.sent_core_mask, t.sent_info, t.ascii_term.view(np.uint8),
                                    tuple(int(v) for v in _CJK_VALUES), none, int(carry[0]), int(carry[1]), nxt,
                                    max(0, min(m, n - 1 - lo)), pos)
        return _union(para, lo + pos[:count] + 1), m
    c = _candidates(chunk, t.sent_core_ids, t.sent_core_mask)
    c = c[lo + c < n - 1]  # an edge at N is the file end, not an inner edge
    if not len(c):
        return para, m
    cur = chunk[c].astype(np.int64)
    p1, p2 = _before(chunk, c - 1, carry), _before(chunk, c - 2, carry)
    v = _tail3(t, p2, p1, t.last3[cur], t.len3[cur])
    edge = ((v & 0xFFFF) == 0x0A0A) | (v == 0x0A0D0A) | _is_cjk(v)  # a blank line: \n\n or \n\r\n
    nxt = chunk[np.minimum(c + 1, m - 1)].astype(np.int64)
    if c[-1] == m - 1:  # one token of look-ahead past the chunk
        nxt[-1] = int(tokens[lo + m])
    edge |= t.ascii_term[v & 0xFF] & t.ws_start[nxt]
    core = t.ws_end_core[cur]
    vc = _tail3(t, p2[core], p1[core], t.core3[cur[core]], t.corelen3[cur[core]])
    edge[core] |= t.ascii_term[vc & 0xFF] | _is_cjk(vc)
    return _union(para, lo + c[edge] + 1), m


def _before(chunk: np.ndarray, idx: np.ndarray, carry: np.ndarray) -> np.ndarray:
    """Ids at chunk positions ``idx`` (-1 and -2 reach into ``carry``, the previous chunk's last two)."""
    out = chunk[np.maximum(idx, 0)].astype(np.int64)
    neg = idx < 0
    out[neg] = carry[2 + idx[neg]]
    return out


def _is_cjk(v: np.ndarray) -> np.ndarray:
    return (v == _CJK_VALUES[0]) | (v == _CJK_VALUES[1]) | (v == _CJK_VALUES[2])


def _tail3(t: Tables, prev2, prev1, cur_val, cur_len):
    """The last 3 bytes (packed) of the stream ending with ``cur_val`` (``cur_len`` bytes) after
    tokens prev1 and prev2. Tokens have >= 1 byte, so three always supply three; shifts are
    capped at 32 bits (what is shifted that far is masked off) so int64 never overflows."""
    v = cur_val | (t.last3[prev1] << np.minimum(8 * cur_len, 32))
    v |= t.last3[prev2] << np.minimum(8 * (cur_len + t.len3[prev1]), 32)
    return v & 0xFFFFFF


def find_token(tokens: np.ndarray, token_id: int, chunk_tokens: int = 4 * CHUNK_TOKENS, progress=None) -> np.ndarray:
    """Sorted int64 positions of ``token_id`` (e.g. the EOT id), by a chunked ``==`` scan."""
    out = []
    for lo, chunk in formats.iter_chunks(tokens, chunk_tokens):
        out.append(np.flatnonzero(chunk == token_id) + lo)
        if progress:
            progress(len(chunk))
    return np.concatenate(out).astype(np.int64) if out else np.zeros(0, np.int64)


def doc_starts_from_eot(tokens: np.ndarray, eot: int, progress=None) -> np.ndarray:
    """Document start offsets when each document ends with ``eot`` (the EOT belongs to its document)."""
    n = len(tokens)
    if n == 0:
        return np.zeros(0, np.int64)
    ends = find_token(tokens, eot, progress=progress) + 1
    return np.concatenate([[0], ends[ends < n]]).astype(np.int64)
