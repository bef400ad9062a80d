"""verify's ``retokenize`` check: decode a seeded sample of documents, encode them again with the
*reference* tokenizer, and compare the ids.

It catches what no other check can: ids that are all in range, checksummed and decodable, but
are not the tokenization of their text (a wrong tokenizer, a buggy engine, or a valid but
non-canonical split such as `` th`` + ``e`` for `` the``).

The sample: ``docs`` documents chosen by a seeded generator (default 64), at most ``max_bytes``
of decoded text in all (default 512 kB, shared evenly by the splits: about 0.1 s of tiktoken,
which runs beside verify's scans instead of outlasting them). A document that fits is
re-encoded whole. A longer one is checked on a window of its tokens: the window's text is cut at
its first and last *safe cut* (``Tokenizer.iter_safe_cuts``: a point where the reference's ids
must have a token boundary), and the ids between must be the reference's ids of the text
between. Units are tokens (positions, lengths) unless named bytes.

Which tokenizers it checks is theirs to say (``Tokenizer.reencodable``): those whose correct ids
always encode back from the text ``Tokenizer.text_of_ids`` rebuilds (tiktoken; byte-level
tokenizer.json files with no normalizer or one Unicode normal form, as Qwen2's NFC; SentencePiece
models with a built-in rule); the others are skipped with the tokenizer's reason.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

DEFAULT_DOCS = 64
DEFAULT_BYTES = 512_000  # decoded text re-encoded, over all splits (verify --retokenize-bytes)
MIN_WINDOW_BYTES = 4096  # a window smaller than this is not worth a check
SEED = 0  # the sample is the same on every run: a failure can be reproduced


@dataclass
class Unit:
    """What one split offers the check: its tokens, where its documents start, whether each ends in EOT."""

    label: str  # e.g. "train.bin"
    tokens: np.ndarray  # read-only view (memmap)
    starts: np.ndarray | None  # document start offsets (tokens); None: documents split at EOT ids
    eot_appended: bool
    eot: int | None
    partial_first: bool = False  # --split tail: val's first document is the tail of one cut in two
    partial_last: bool = False  # ... and train's last is its head (no EOT, cut at a token boundary)
    recorded: bool = True  # meta.json names the tokenizer; False: it is assumed, and a difference only warns
    bos_prepended: bool = False  # encode --bos: each document's first id is the BOS, no text


@dataclass
class Outcome:
    label: str
    status: str  # "pass" | "fail" | "skip"
    detail: str
    documents: int = 0  # documents (whole or a window of them) compared
    bytes: int = 0  # decoded bytes re-encoded
    mismatches: int = 0  # documents whose ids differ


def check(tok, units: list[Unit], docs: int = DEFAULT_DOCS, max_bytes: int = DEFAULT_BYTES) -> list[Outcome]:
    """One Outcome per unit. ``tok`` is the reference tokenizer (never a fast backend)."""
    tok = tok.reference()
    if not units:
        return []
    if docs <= 0:
        return [Outcome(u.label, "skip", "--retokenize-sample 0") for u in units]
    ok, why = tok.reencodable()
    if not ok:
        return [Outcome(u.label, "skip", f"the {tok.family} tokenizer {tok.name!r} is not checked: {why}") for u in units]
    lens = np.fromiter(map(len, tok.vocab_bytes()), dtype=np.int64, count=tok.n_vocab)  # bytes per id
    per_docs = max(1, docs // len(units))
    per_bytes = max(MIN_WINDOW_BYTES, max_bytes // len(units))
    return [_check_unit(tok, u, lens, per_docs, per_bytes) for u in units]


def _doc_ranges(u: Unit) -> np.ndarray:
    """(D, 2) [start, end) of each document's text tokens (its EOT left out)."""
    n = len(u.tokens)
    if u.starts is not None:
        starts = np.asarray(u.starts, dtype=np.int64)
        ends = np.append(starts[1:], n)
        if u.eot_appended:
            ends = ends - 1  # the EOT itself is no text; that it is there is checked below
        if u.bos_prepended:
            starts = np.minimum(starts + 1, ends)  # nor is the BOS
        return np.stack([starts, np.maximum(ends, starts)], axis=1)
    if u.eot is None:
        return np.array([[0, n]], dtype=np.int64)
    at = np.flatnonzero(np.asarray(u.tokens) == u.eot)  # a bare .bin: EOT ids separate the documents
    starts = np.concatenate(([0], at + 1))
    ends = np.concatenate((at, [n]))
    keep = ends > starts
    return np.stack([starts[keep], ends[keep]], axis=1)


def _check_unit(tok, u: Unit, lens: np.ndarray, docs: int, max_bytes: int) -> Outcome:
    if len(u.tokens) == 0:
        return Outcome(u.label, "skip", "no tokens")
    ranges = _doc_ranges(u)
    ends_eot = u.starts is not None and u.eot_appended and u.eot is not None and len(u.starts)
    if ends_eot and u.partial_last:
        ranges[-1, 1] = len(u.tokens)  # the head of a cut document: no EOT to leave out
    outcome = _sample(tok, u, ranges, lens, docs, max_bytes)
    if ends_eot:  # after the sample: verify's scan, running beside this, has paged most of the file in by then
        last = np.append(np.asarray(u.starts, dtype=np.int64)[1:], len(u.tokens)) - 1  # each document's last token
        bad = np.flatnonzero(np.asarray(u.tokens)[last] != u.eot)
        if u.partial_last:
            bad = bad[bad != len(last) - 1]
        if len(bad):
            d = int(bad[0])
            return Outcome(u.label, "fail", f"{u.label}: document {d} does not end with the EOT id {u.eot} (token {int(last[d])} is"
                                            f" {int(u.tokens[last[d]])}), though meta.json says EOT is appended")
    return outcome


def _sample(tok, u: Unit, ranges: np.ndarray, lens: np.ndarray, docs: int, max_bytes: int) -> Outcome:
    """The sampled documents of ``ranges`` (D, 2) re-encoded and compared."""
    rng = np.random.default_rng(SEED)
    chosen = np.sort(rng.choice(len(ranges), size=min(docs, len(ranges)), replace=False))
    left = max_bytes
    checked = nbytes = mismatches = 0
    skips = {"cut": 0, "unknown": 0, "unstable": 0}
    first = None
    for d in chosen.tolist():
        if left < MIN_WINDOW_BYTES:
            break
        s, e = (int(x) for x in ranges[d])
        if e <= s:
            continue
        got = _ids_and_text(tok, u, d, s, e, ranges, lens, left, rng)
        if isinstance(got, str) and got in skips:
            skips[got] += 1
            continue
        if isinstance(got, str):  # the ids are not the tokenization of any text, or split where the text must not be
            mismatches += 1
            checked += 1
            first = first or f"{u.label}: document {d} (tokens {s}–{e}): {got}"
            continue
        ids, text_bytes, lo = got
        want = tok.encode(text_bytes.decode("utf-8"))
        same = len(want) == len(ids) and np.array_equal(want, ids)
        if not same and tok.text_of_ids(want.tolist()) != text_bytes:
            # the re-encoded ids spell another text: the normalizer rewrites its own output here
            # (SentencePiece's nmt_nfkc on a ligature before a combining mark), so the ids cannot
            # be judged; correct ids always spell the text they encode back from
            skips["unstable"] += 1
            continue
        checked += 1
        nbytes += len(text_bytes)
        left -= len(text_bytes)
        if not same:
            mismatches += 1
            first = first or f"{u.label}: document {d} (tokens {s}–{e}): {_first_difference(tok, ids, want, lo)}"
    return _outcome(tok, u, checked, nbytes, mismatches, skips, first)


def _ids_and_text(tok, u: Unit, d: int, s: int, e: int, ranges: np.ndarray, lens: np.ndarray, left: int, rng):
    """(ids, the text they must encode back from, position of the first id) for document ``d``
    [s, e): the whole document when it fits in ``left`` bytes, else a window between safe cuts.
    A key of ``_sample``'s skips when it cannot be checked ("cut": no safe cut in reach or ids
    outside the vocabulary, "unknown": an unknown piece), else a str saying why the ids are wrong."""
    partial = (d == 0 and u.partial_first) or (d == len(ranges) - 1 and u.partial_last)
    head = np.asarray(u.tokens[s : min(e, s + 4 * left)])
    if int(head.max()) >= len(lens):
        return "cut"  # ids outside the vocabulary: vocab_range fails on them
    size = int(lens[head].sum()) if e - s <= 4 * left else None  # None: surely too big
    if size is not None and size <= left and not partial:  # a cut document's edge is no safe cut: windows only
        ids = np.asarray(u.tokens[s:e])
        text_bytes, lo = tok.text_of_ids(ids.tolist()), s
        if text_bytes is None:
            return "unknown"  # the text an unknown piece stood for is lost
    else:
        win = _window(tok, u.tokens, s, e, lens, left, rng)  # its ids lie in head: checked above
        if win is None or isinstance(win, str):
            return "cut" if win is None else win
        ids, text_bytes, lo = win
    try:
        text_bytes.decode("utf-8")
    except UnicodeDecodeError as err:
        return f"its ids decode to bytes that are not UTF-8 (byte {err.start}): not the tokenization of any text"
    return ids, text_bytes, lo


def _first_difference(tok, got: np.ndarray, want: np.ndarray, lo: int) -> str:
    n = min(len(want), len(got))
    diff = np.flatnonzero(want[:n] != got[:n])
    k = int(diff[0]) if len(diff) else n
    g = int(got[k]) if k < len(got) else "nothing"
    w = int(want[k]) if k < len(want) else "nothing"
    return (f"token {lo + k} is {g} where the reference {tok.engine()} encodes the same text as {w}"
            f" ({_show(tok, got, k)} vs {_show(tok, want, k)})")


def _outcome(tok, u: Unit, checked: int, nbytes: int, mismatches: int, skips: dict, first: str | None) -> Outcome:
    why = ", ".join(x for x in (
        f"{skips['cut']} without a safe cut in reach" if skips["cut"] else "",
        f"{skips['unknown']} holding the unknown piece, whose text is lost" if skips["unknown"] else "",
        f"{skips['unstable']} whose text the normalizer rewrites again" if skips["unstable"] else "") if x)
    if checked == 0:
        return Outcome(u.label, "skip", f"{u.label}: no sampled document could be re-encoded ({why or '0 sampled'})")
    if mismatches:
        if not u.recorded:
            return Outcome(u.label, "warn", f"{first}; {mismatches} of {checked} sampled document(s) differ (no meta.json: the"
                           f" tokenizer {tok.name!r} is assumed; pass --encoding if the file was written with another)",
                           checked, nbytes, mismatches)
        return Outcome(u.label, "fail", f"{first}; {mismatches} of {checked} sampled document(s) differ", checked, nbytes, mismatches)
    skipped = sum(skips.values())  # sampled beside the ones compared, not the same ones
    part = f"; {skipped} more sampled, not compared: {why}" if skipped else ""
    basis = "" if tok.exact_decode else f" ({tok.reencodable()[1]})"  # a normalizing family: say why re-encoding is sound
    return Outcome(u.label, "pass", f"{checked} sampled document(s), {nbytes:,} bytes of text: the reference {tok.engine()} gives"
                                    f" the same ids{part}{basis}", checked, nbytes, 0)


def _window(tok, tokens: np.ndarray, s: int, e: int, lens: np.ndarray, max_bytes: int, rng):
    """(ids, their text's bytes, position of the first id) for a window of document [s, e) whose
    text lies between two safe cuts; a str when the ids have no boundary at such a cut; None when
    the window holds no two safe cuts."""
    # tokens for about max_bytes (at least 1 byte per token), starting at a seeded position
    avg = max(1.0, float(lens[np.asarray(tokens[s : min(e, s + 4096)])].mean()))
    width = max(16, min(e - s, int(max_bytes / avg)))
    a = s + int(rng.integers(0, max(1, e - s - width + 1)))
    ids = np.asarray(tokens[a : min(e, a + width)])
    offs = np.concatenate(([0], np.cumsum(lens[ids])))
    while len(ids) > 16 and offs[-1] > max_bytes:  # a run of long tokens: shrink to the budget
        ids = ids[: len(ids) * 3 // 4]
        offs = offs[: len(ids) + 1]
    raw = tok.decode_bytes(ids.tolist())
    text = raw.decode("utf-8", "surrogateescape")  # the window may start or end inside a character
    c1 = next(iter(tok.iter_safe_cuts(text, 1)), None)
    c2 = tok.last_safe_cut(text, 1, len(text))
    if c1 is None or c2 is None or c2 <= c1:
        return None
    b1 = len(text[:c1].encode("utf-8", "surrogateescape"))
    b2 = len(text[:c2].encode("utf-8", "surrogateescape"))
    i1, i2 = int(np.searchsorted(offs, b1)), int(np.searchsorted(offs, b2))
    for b, i in ((b1, i1), (b2, i2)):
        if i >= len(offs) or offs[i] != b:
            return (f"the ids have no token boundary at byte {b} of the window at token {a}, where the text must"
                    f" split (a safe cut): not the reference's tokenization (token {a + i - 1} spans it)")
    return ids[i1:i2], raw[b1:b2], a + i1


def _show(tok, ids: np.ndarray, k: int) -> str:
    """The tokens around position k, as text, for the message."""
    part = [int(i) for i in ids[max(0, k - 1) : k + 2]]
    try:
        return repr(b"|".join(tok.token_bytes(i) for i in part).decode("utf-8", "replace"))
    except KeyError:
        return str(part)
