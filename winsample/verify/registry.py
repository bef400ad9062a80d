"""The checks verify runs: each one's stable name, a one-line help text and what it reads.

This is the one list of check names: ``CHECK_NAMES``, ``winsample verify --help`` (and so
docs/cli.md) and the package docstring are generated from it, and the report's lines are added
under these objects (``report.add(PLAN_BOUNDS, ...)``), never under a free string. Adding a check:
declare it here, in the order the list is shown, and add its lines where it reads its inputs.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CheckSpec:
    """A registered check. ``name`` is stable: scripts match on it in the JSON report."""

    name: str
    help: str  # one line, for --help and the docs
    reads: str  # what it reads

    def __str__(self) -> str:
        return self.name


_REGISTRY: dict[str, CheckSpec] = {}


def define(name: str, help: str, reads: str) -> CheckSpec:
    """Register a check; its position in ``CHECK_NAMES`` is the order of the calls."""
    if name in _REGISTRY:
        raise ValueError(f"check {name!r} is registered twice")
    spec = CheckSpec(name, help, reads)
    _REGISTRY[name] = spec
    return spec


DTYPE_DIVISIBLE = define("dtype_divisible", "the size is whole tokens of the dtype (and no uint32 ids read as uint16)",
                         "token files")
MIN_LENGTH = define("min_length", "N ≥ T + 1: at least one (x, y) pair of length T fits", "token files, plans' sidecars")
VOCAB_RANGE = define("vocab_range", "every id is below the tokenizer's n_vocab", "token files, tokenizer")
META = define("meta", "meta.json's sizes, counts, checksums, doc indexes, tokenizer match the files",
              "meta.json, token files, document indexes, tokenizer")
PROVENANCE = define("provenance", "each document's source record (input, offset, line, id) is sound",
                    "meta.json, provenance records, document indexes")
PLAN_BOUNDS = define("plan_bounds", "windows lie inside the token file, which is the one the sidecar names",
                     "plans, sidecars, token files")
ORDER = define("order", "starts never decrease, or the rows are the sidecar's seeded shuffle", "plans, sidecars")
DUPLICATES = define("duplicates", "no two windows of a plan are identical", "plans")
COVERAGE = define("coverage", "share of tokens inside at least one window ≥ --min-coverage", "plans, sidecars")
SPLIT_LEAKAGE = define("split_leakage", "share of val's 32-token shingles also in train ≤ --max-leakage", "train and val token files")
ALIGNMENT = define("alignment", "y is x shifted by one token in a sample of windows", "plans, token files")
MATERIALIZED = define("materialized", "a plan's PLAN.tokens.npy holds exactly its windows", "plans, materialized windows")
DECODE = define("decode", "the first --show windows decode with the tokenizer", "plans or token files, tokenizer")
RETOKENIZE = define("retokenize", "a seeded sample of documents encodes again to the same ids", "token files, document indexes, tokenizer")
MEGATRON_INDEX = define("megatron_index", "a Megatron .idx agrees with its .bin (and meta.json)", "Megatron .idx/.bin, meta.json")
LLMC_SHARDS = define("llmc_shards", "llm.c shard headers, sizes (and meta.json's names, counts, checksums) agree",
                     "llm.c shards, meta.json")
LLMC_DOCUMENTS = define("llmc_documents", "each llm.c document starts with <|endoftext|>, and no EOT stands elsewhere",
                        "llm.c shards, tokenizer")

CHECKS: tuple[CheckSpec, ...] = tuple(_REGISTRY.values())
CHECK_NAMES: tuple[str, ...] = tuple(c.name for c in CHECKS)


def get(name: str) -> CheckSpec:
    """The registered check called ``name`` (KeyError if none)."""
    return _REGISTRY[name]


def help_lines(width: int = 17) -> list[str]:
    """One line per check, ``name  help``: the list ``winsample verify --help`` shows."""
    return [f"{c.name:<{width}}{c.help}" for c in CHECKS]


def doc_list() -> str:
    """The check names as the package docstring lists them."""
    return ", ".join(CHECK_NAMES)
