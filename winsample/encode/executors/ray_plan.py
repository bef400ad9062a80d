"""``--engine ray``'s plan: inputs in order packed into shards of about ``shard_bytes`` bytes.

A shard is a list of pieces ``(input index, start byte, end byte)``; small files share a shard,
and an uncompressed text or JSONL file that does not fit is cut: text at the first safe cut (the
tokenizer's ``iter_safe_cuts``) at or after the target byte, JSONL after a line end. ``.gz``,
``.zst``, Parquet and Arrow files, and files in UTF-16 or UTF-32 (a byte-order mark says so), are never cut.
"""

from __future__ import annotations

from pathlib import Path

from ... import disk, tokenizer
from ...tokenizer.chunking import iter_safe_cuts
from ..decoding import sniff
from ..inputs import INPUT_FILE

SEARCH_BYTES = 1 << 20  # bytes read per step when looking for a cut point
TAPER = 4  # with taper: the last this many shards' worth of input goes in shards a quarter the size


def _splittable(src) -> bool:
    return src.path is not None and not src.compressed and src.kind in ("text", "jsonl") and not _wide(src.path, src.label)


def _wide(path: Path, label: str | None = None) -> bool:
    """Whether the file starts with a UTF-16 or UTF-32 byte-order mark: its text is in that
    codec, which only a read from its first byte knows, so it stays one piece. InputError if
    it went, or is no longer a regular file, since it was listed (a FIFO must not block here)."""
    try:
        with disk.open_regular(path, INPUT_FILE, label) as f:
            codec, _ = sniff(f.read(4))
    except OSError:  # a read error: the task reading it says what is wrong
        return False
    return codec not in (None, "utf-8")


def _jsonl_cut(path: Path, at: int, size: int) -> int | None:
    """First byte offset >= ``at`` that starts a line (just after a \\n), below ``size``."""
    with disk.open_regular(path, INPUT_FILE) as f:
        pos = at - 1
        while pos < size:
            f.seek(pos)
            block = f.read(SEARCH_BYTES)
            if not block:
                return None
            i = block.find(b"\n")
            if i >= 0:
                cut = pos + i + 1
                return cut if cut < size else None
            pos += len(block)
    return None


def _text_cut(path: Path, at: int, size: int, cuts=iter_safe_cuts) -> int | None:
    """First safe cut (``chunking.is_safe_cut``) at a byte offset >= ``at``, below ``size``.

    Reads ``SEARCH_BYTES`` windows starting a few bytes before ``at``; only the validly decoded
    part of a window is searched, so a cut's neighbouring characters are the ones the whole
    file decodes to (UTF-8 resynchronises at every lead byte). ``cuts``: the tokenizer's
    ``iter_safe_cuts``.
    """
    with disk.open_regular(path, INPUT_FILE) as f:
        while at < size:
            base = max(at - 8, 0)
            f.seek(base)
            block = f.read(SEARCH_BYTES + 16)
            i = 0
            while i < min(4, len(block)) and 0x80 <= block[i] < 0xC0:  # start on a character
                i += 1
            data = block[i:]
            try:
                text, bad = data.decode("utf-8"), None
            except UnicodeDecodeError as e:
                text, bad = data[: e.start].decode("utf-8"), e.start
            first = None
            for p in cuts(text):  # lazily: the first one past `at` is near
                b = base + i + len(text[:p].encode("utf-8"))
                if b >= at:
                    first = b
                    break
            if first is not None:
                return first if first < size else None
            if not block or base + len(block) >= size:
                return None
            valid = len(data) if bad is None else bad
            at = max(at + 1, base + i + valid - 8 if bad is None else base + i + bad + 1)
    return None


def plan_shards(sources, shard_bytes: int, tok: tokenizer.Tokenizer | None = None,
                cuttable=None, taper: bool = False) -> list[list[tuple[int, int, int]]]:
    """Shards as lists of pieces ``(source index, start byte, end byte)``, in input order.

    Greedy and deterministic: pieces join the current shard while it has room; a file that
    does not fit is cut (when it can be) at the first cut point past the room left (text: where
    ``tok`` says cutting is safe; default chunking's rule). ``cuttable(src)``: a further
    condition for cutting a file (asked only of a file that does not fit). ``taper``: the shards
    of the last ``TAPER`` × ``shard_bytes`` of input are a quarter of the size, so that workers
    run out of work at about the same time.
    """
    total = sum(s.size or 0 for s in sources)
    planned = 0

    def room_left() -> int:
        return shard_bytes // 4 if taper and total - planned <= TAPER * shard_bytes else shard_bytes

    cuts = tok.iter_safe_cuts if tok is not None else iter_safe_cuts
    out: list[list[tuple[int, int, int]]] = []
    cur: list[tuple[int, int, int]] = []
    room = room_left()

    def close():
        nonlocal cur, room, planned
        if cur:
            out.append(cur)
            planned += sum(b - a for _, a, b in cur)
        cur, room = [], room_left()

    for i, src in enumerate(sources):
        size = src.size or 0
        if size == 0:
            cur.append((i, 0, 0))
            continue
        pos = 0
        while pos < size:
            if room <= 0:
                close()
            left = size - pos
            if left <= room:
                cur.append((i, pos, size))
                room -= left
                break
            if not _splittable(src) or (cuttable is not None and not cuttable(src)):
                if cur:
                    close()
                    continue
                cur.append((i, pos, size))
                close()
                break
            if src.kind == "jsonl":
                cut = _jsonl_cut(src.path, pos + room, size)
            else:
                cut = _text_cut(src.path, pos + room, size, cuts)
            if cut is None:
                cur.append((i, pos, size))
                close()
                break
            cur.append((i, pos, cut))
            close()
            pos = cut
    close()
    return out


__all__ = ["plan_shards"]
