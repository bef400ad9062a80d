"""Text read from data, made safe to print on a terminal (corpus text, file names, meta fields)."""

from __future__ import annotations


def hex_bytes(data: bytes) -> str:
    """``b'\\xe6\\xbb'`` → ``⟨e6 bb⟩``."""
    return "⟨" + " ".join(f"{b:02x}" for b in data) + "⟩"


def terminal_safe(text: str, keep: str = "\n\t") -> str:
    """``text`` with every control character but ``keep`` shown as its hex (``⟨1b⟩``), so text
    read from data (a corpus, a file name, a meta field) can never drive the terminal it is
    printed on: no escape sequence (colours, clearing the screen, OSC 52 clipboard writes), no
    carriage return overwriting a line. C0 and C1 controls and DEL are escaped."""
    if text.isprintable() or not any(_is_control(ch) and ch not in keep for ch in text):
        return text
    return "".join(hex_bytes(ch.encode()) if _is_control(ch) and ch not in keep else ch for ch in text)


def _is_control(ch: str) -> bool:
    o = ord(ch)
    return o < 0x20 or 0x7F <= o <= 0x9F
