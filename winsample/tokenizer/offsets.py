"""Character offsets of token edges: where in a text each token starts, in characters.

For a tokenizer whose tokens spell the text byte for byte (``exact_decode``: tiktoken, byte-level
``tokenizer.json``), the UTF-8 of ``text`` is the concatenation of its tokens' bytes. So the
character index of token edge k (the cut before token k) is the number of UTF-8 *lead* bytes (not
``0b10xxxxxx``) in the tokens before it, and the edge falls inside a character exactly when token
k's first byte is a continuation byte. Both come from per-id tables (a lead-byte count and a
"starts mid-character" flag), gathered and summed with numpy: no decoding, O(tokens).

``CharOffsets.edges(ids)`` returns, for edges 0 … n, ``chars`` (lead bytes before the edge) and
``inside`` (the edge splits a character). A range of tokens [a, b) then covers the characters
``[chars[a] − inside[a], chars[b])``: whole characters, widened where an edge splits one (the
character started before b is included; one split at a is taken from its start).

Ids in ``zero`` (a dataset's EOT, its BOS) count as no characters: they separate documents and
are not part of any document's text.
"""

from __future__ import annotations

import functools

import numpy as np

from ..errors import ConfigError


class CharOffsets:
    """Per-id tables of ``tok`` (a ``Tokenizer``): lead bytes and whether the first byte continues a character."""

    def __init__(self, tok, zero: tuple[int, ...] = ()):
        if not getattr(tok, "exact_decode", True):
            raise ConfigError(f"{tok.name}: its tokens do not spell the text byte for byte (a normalizer or a"
                              " dummy prefix), so no character offsets follow from them; use a byte-level"
                              " tokenizer (gpt2, a tiktoken file, a byte-level tokenizer.json)")
        self.lead, self.cont = _tables(tok)
        if zero:
            self.lead = self.lead.copy()
            self.cont = self.cont.copy()
            z = [i for i in zero if i is not None and 0 <= i < len(self.lead)]
            self.lead[z], self.cont[z] = 0, False

    def edges(self, ids) -> tuple[np.ndarray, np.ndarray]:
        """(chars int64[n + 1], inside bool[n + 1]) for the n + 1 edges of ``ids`` (module docstring)."""
        ids = np.asarray(ids, np.int64)
        chars = np.zeros(len(ids) + 1, np.int64)
        np.cumsum(self.lead[ids], out=chars[1:])
        inside = np.zeros(len(ids) + 1, bool)
        inside[:-1] = self.cont[ids]
        return chars, inside

    def span(self, chars: np.ndarray, inside: np.ndarray, a: int, b: int) -> tuple[int, int, bool]:
        """(char_start, char_end, split) of tokens [a, b): whole characters; ``split`` when an edge cut one."""
        return int(chars[a] - inside[a]), int(chars[b]), bool(inside[a] or inside[b])


@functools.lru_cache(maxsize=8)
def _cached(key, tok) -> tuple[np.ndarray, np.ndarray]:
    vocab = tok.vocab_bytes()
    lead = np.fromiter((sum(1 for c in b if c & 0xC0 != 0x80) for b in vocab), np.int64, len(vocab))
    cont = np.fromiter((bool(b) and b[0] & 0xC0 == 0x80 for b in vocab), bool, len(vocab))
    return lead, cont


def _tables(tok) -> tuple[np.ndarray, np.ndarray]:
    return _cached((type(tok).__name__, tok.name, tok.sha256, tok.n_vocab), tok)


class CharIndex:
    """Characters before any position of a (memmapped) token array, in bounded memory: a running
    total of lead bytes kept every ``STEP`` tokens (built as far as asked), plus at most ``STEP``
    tokens summed per question. ``chars(p) − chars(q)`` is the characters of tokens [q, p)."""

    STEP = 1 << 16

    def __init__(self, tokens, offsets: CharOffsets):
        self.tokens, self.lead, self.cont = tokens, offsets.lead, offsets.cont
        self.marks = [0]  # marks[k]: lead bytes of tokens [0, k·STEP)

    def chars(self, pos: int) -> int:
        k = pos // self.STEP
        while len(self.marks) <= k:
            j = len(self.marks) - 1
            part = np.asarray(self.tokens[j * self.STEP : (j + 1) * self.STEP], np.int64)
            self.marks.append(self.marks[-1] + int(self.lead[part].sum()))
        part = np.asarray(self.tokens[k * self.STEP : pos], np.int64)
        return self.marks[k] + int(self.lead[part].sum())

    def inside(self, pos: int) -> bool:
        """Whether the edge before token ``pos`` falls inside a character (False at the end)."""
        return pos < len(self.tokens) and bool(self.cont[int(self.tokens[pos])])
