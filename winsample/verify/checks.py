"""The modules that hold verify's checks, imported in this order, which is the order their checks
are listed (``CHECK_NAMES``, ``winsample verify --help``, docs/cli.md): each registers its checks
(``registry.check``) when imported. A check added to one of them needs no edit here; only a new
module of checks is named in ``MODULES`` (its checks are listed after those before it)."""

from __future__ import annotations

import importlib

MODULES = ("files", "meta", "plan", "replan", "packed", "leakage", "plan_windows", "mixture", "decode", "recode", "megatron",
           "llmc", "records")

for _name in MODULES:
    importlib.import_module(f"{__package__}.{_name}")
