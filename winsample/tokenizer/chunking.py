"""Cut long text where the tokenizer's pre-tokenizer splits anyway, so pieces encode exactly.

tiktoken first splits text with a regex (the "pre-tokenizer"), then runs BPE inside each
regex match; BPE never crosses a match boundary. A cut that falls on a boundary every pattern
is certain to produce gives ``encode(a) + encode(b) == encode(a + b)``. Two such cuts, for the
gpt2/r50k, cl100k and o200k patterns:

1. right before a ``\\r`` or ``\\n`` whose previous character is a letter or digit: the token
   holding that letter/digit ends at it (no pattern takes a letter run into line breaks), and
   the line break starts a whitespace token whatever comes before;
2. right before a space that sits between a letter/digit and a letter: the space is the
   optional leading space of the next word (`` ?\\p{L}+`` and its variants).

The obvious "after a blank line" cut is *wrong*: GPT-2 encodes ``"a\\n\\nb"`` as
``[64, 198, 198, 65]`` but ``"a\\n\\n" + "b"`` as ``[64, 628, 65]`` (``\\s+(?!\\S)`` looks ahead).

"Letter" means Unicode category L*, "digit" N*, in Python's tables *and* in Unicode 3.2: a
character that is a letter only in a newer Unicode than the regex engine knows is never used,
so a version skew between Python and tiktoken can only cost a cut, never change an id.

Where text has no safe cut for a long stretch (a pathological run: CJK punctuation, one
enormous "word", whitespace), memory would grow with the run. So a piece that starts at P (a
safe cut, the document's start, or a forced cut) and has no safe cut in (P, P + long_run] is cut
there anyway, at P + long_run characters: a *forced cut*, counted. The positions depend on the
text alone — for each stretch between two consecutive safe cuts s < s' longer than long_run,
the cuts s + long_run, s + 2·long_run, … before s' — because the last safe cut before a long run
is a cut whichever way the text is read (the chunker looks at least every ``target`` chars, and
long_run ≥ 2·target + 2; byte ranges cut at the last safe cut before their target), so every
reader and runner cuts at the same places; the ids there are the pieces' ids, which may differ
from encoding the run whole (the only place they may). A safe cut needs the characters around it,
so the text's last character is never one.
"""

from __future__ import annotations

import re
import unicodedata

# Candidates only; each is confirmed with _is_letter/_is_letter_or_digit. Python's [^\W_] is
# str.isalnum(), a superset-ish of L|N that is fast to search; the confirmation is exact.
# Each branch starts with the cut's own character, so the regex engine skips to the next \r, \n or
# space at C speed before it tries the look-behind (3x the speed of leading with the look-behind).
_CANDIDATE = re.compile(r"[\r\n](?<=[^\W_][\r\n])| (?<=[^\W_] )(?=[^\W\d_])")

_OLD = unicodedata.ucd_3_2_0
_CLASS_CACHE: dict[str, str] = {}


def _major(ch: str) -> str:
    """'L' or 'N' when ``ch`` is a letter / number today and already was in Unicode 3.2, else ''."""
    m = _CLASS_CACHE.get(ch)
    if m is None:
        now = unicodedata.category(ch)[0]
        m = now if now in "LN" and _OLD.category(ch)[0] == now else ""
        if len(_CLASS_CACHE) < 1 << 16:
            _CLASS_CACHE[ch] = m
    return m


def is_safe_cut(text: str, p: int) -> bool:
    """True if cutting ``text`` into ``text[:p]`` and ``text[p:]`` cannot change any token id.

    Needs ``text[p - 1]``, ``text[p]`` and, for a space, ``text[p + 1]``; False at the edges.
    """
    if p <= 0 or p >= len(text):
        return False
    c = text[p]
    if c == "\r" or c == "\n":
        return _major(text[p - 1]) != ""
    if c == " ":
        return p + 1 < len(text) and _major(text[p - 1]) != "" and _major(text[p + 1]) == "L"
    return False


def last_safe_cut(text: str, lo: int, hi: int) -> int | None:
    """The largest safe cut position p with ``lo <= p <= hi`` (chars ``p-1 .. p+1`` must exist), or None.

    Searches backwards in growing windows, so in ordinary text it looks at a few KB only.
    """
    lo = max(lo, 1)
    hi = min(hi, len(text) - 2)  # a space at p needs text[p + 1]
    window = 256  # ordinary text has a cut within a line or two of the end: look there first
    end = hi
    while end >= lo:
        start = max(lo, end - window)
        # The lookbehind needs one char before `start`, the lookahead one after `end`: pos/endpos keep
        # both visible (a match starting at end + 1 is filtered out below).
        found = [m.start() for m in _CANDIDATE.finditer(text, start, end + 2)]
        for p in reversed(found):
            if start <= p <= end and is_safe_cut(text, p):
                return p
        end = start - 1
        window *= 4
    return None


def iter_safe_cuts(text: str, pos: int = 0):
    """Safe cut positions ``>= pos`` in ``text``, in order, found lazily (stop early to pay only
    for the text searched)."""
    return (m.start() for m in _CANDIDATE.finditer(text, pos) if is_safe_cut(text, m.start()))


def safe_cuts(text: str) -> list[int]:
    """Every safe cut position in ``text`` (for tests and tools; O(len) regex scan)."""
    return list(iter_safe_cuts(text))


class TextChunker:
    """Turn a stream of text (any split) into pieces of about ``target`` chars cut at safe points.

    ``feed(text)`` returns the pieces that are complete; ``finish()`` returns the rest. The
    pieces concatenate to the fed text, and each piece boundary is a safe cut, so encoding the
    pieces one by one gives exactly the ids of encoding the whole text — except at forced cuts
    (module docstring): a piece with no safe cut in its first ``long_run`` chars is cut after
    them, counted in ``forced_cuts``. No piece is longer than ``long_run`` chars unless it holds
    a safe cut within them; memory stays bounded by that.
    """

    def __init__(self, target: int = 1 << 20, long_run: int = 4 << 20, cut=None):
        """``cut(text, lo, hi)``: a tokenizer's ``last_safe_cut`` (default: this module's rule)."""
        if long_run < 2 * target + 2:  # so the last safe cut before a long run is always a cut (module docstring)
            raise ValueError(f"long_run {long_run} must be at least 2 × target + 2 ({2 * target + 2})")
        self.cut = cut or last_safe_cut
        self.target = target
        self.long_run = long_run
        self.forced_cuts = 0
        self._parts: list[str] = []
        self._size = 0
        self._clean = 1  # cut positions below this are known not to be safe

    def feed(self, text: str) -> list[str]:
        if len(text) > self.target:  # at most `target` chars at a time: no long run can pass between two looks
            return [p for i in range(0, len(text), self.target) for p in self.feed(text[i : i + self.target])]
        if not text:
            return []
        self._parts.append(text)
        self._size += len(text)
        out: list[str] = []
        while self._size >= self.target:
            buf = "".join(self._parts) if len(self._parts) > 1 else self._parts[0]
            cut = self.cut(buf, self._clean, len(buf))
            later = cut is not None and cut > self.long_run and self.cut(buf, self._clean, self.long_run) is None
            if cut is None or later:
                if len(buf) >= self.long_run + 2:  # no safe cut in (0, long_run] (decided: it needs the next char)
                    out.append(self._take(buf, self.long_run, forced=True, settled=not later))
                    continue
                # Cut positions up to len-2 are settled; the last one waits for the next char.
                self._clean = max(self._clean, len(buf) - 2)
                self._parts = [buf]
                break
            out.append(self._take(buf, cut))
        return out

    def _take(self, buf: str, cut: int, forced: bool = False, settled: bool = True) -> str:
        """``buf[:cut]`` out, the rest kept. ``cut`` is the last safe point in ``buf``, or a forced
        one; ``settled``: no safe cut lies in ``buf`` up to its last two chars (then none in the
        rest either, up to the same place)."""
        self.forced_cuts += forced
        rest = buf[cut:]
        self._clean = max(1, len(buf) - 2 - cut) if settled else 1
        self._parts = [rest] if rest else []
        self._size = len(rest)
        return buf[:cut]

    def finish(self) -> list[str]:
        buf = "".join(self._parts)
        out = []
        while len(buf) > self.long_run and self.cut(buf, self._clean, self.long_run) is None:
            out.append(self._take(buf, self.long_run, forced=True))
            buf = "".join(self._parts)
        self._parts, self._size, self._clean = [], 0, 1
        return out + ([buf] if buf else [])


def last_safe_cut_bytes(window: bytes, base: int = 0) -> int | None:
    """The largest safe cut in a window of a UTF-8 document, as a byte offset (``base`` + index), or None.

    ``window`` is any run of the document's bytes: leading continuation bytes (a character
    cut in two) are skipped, and a cut counts only when the characters it needs (``p - 1``,
    ``p``, ``p + 1``) lie whole inside the window, so it is safe in the whole document. A cut
    sits before an ASCII ``\\r``, ``\\n`` or space, so it is always a character boundary.
    Invalid bytes are kept as lone surrogates (never letters): such a document fails decoding
    anyway, and the cut only has to land on a byte.
    """
    skip = 0
    while skip < min(3, len(window)) and 0x80 <= window[skip] < 0xC0:
        skip += 1
    text = window[skip:].decode("utf-8", "surrogateescape")
    p = last_safe_cut(text, 1, len(text))
    if p is None:
        return None
    return base + skip + len(text[:p].encode("utf-8", "surrogateescape"))
