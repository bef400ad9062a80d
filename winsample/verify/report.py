"""verify's report: ``Check`` lines, decoded ``Window`` s, and the ``Report`` that owns the exit status."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

import numpy as np

from .registry import CheckSpec


class Status(str, Enum):
    """A check's outcome; its value is the string the report shows and serialises."""

    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"


@dataclass
class Check:
    """One line of the report. ``figures`` are extra JSON keys (plain ints/floats/strings)."""

    name: str
    file: str
    status: str  # "pass" | "fail" | "warn" | "skip" (a Status's value)
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
    window: int | None = None  # a best-fit plan's window number (its tokens are ``segments`` side by side)
    segments: list[dict] | None = None  # best-fit: start, length, doc, text, shown_tokens (and source) of each
    position: int | None = None  # a mixture's: the position of epoch 0 it is served at (``window``: its source's window)

    def to_dict(self) -> dict:
        out = {"file": self.file, "start": self.start, "length": self.length, "text": self.text, "overlap": self.overlap,
               "shown_tokens": self.length if self.shown is None else self.shown}
        if self.source is not None:
            out["source"] = self.source
        if self.position is not None:
            out.update(position=self.position, window=self.window)
        if self.segments is not None:
            out.update(window=self.window, segments=self.segments)
        return out


@dataclass
class Report:
    checks: list[Check] = field(default_factory=list)
    windows: list[Window] = field(default_factory=list)

    def add(self, check: CheckSpec, file: str, status: Status | str, detail: str, **figures) -> Check:
        """Append one line. ``check``: a registered check (``registry``); ``status``: a Status or its value."""
        if not isinstance(check, CheckSpec):
            raise TypeError(f"report.add takes a registered CheckSpec, not {check!r}")
        c = Check(check.name, file, Status(status).value, detail, {k: plain(v) for k, v in figures.items()})
        self.checks.append(c)
        return c

    def failures(self, strict: bool = False) -> list[Check]:
        bad = (Status.FAIL.value, Status.WARN.value) if strict else (Status.FAIL.value,)
        return [c for c in self.checks if c.status in bad]

    def ok(self, strict: bool = False) -> bool:
        return not self.failures(strict)

    def exit_code(self, strict: bool = False) -> int:
        """The command's exit status for this report: 0 sound, 1 a check failed (or warned, with ``strict``)."""
        return 0 if self.ok(strict) else 1

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


def plain(v):
    """numpy scalars → Python numbers, so the report serialises to JSON as is."""
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    return v
