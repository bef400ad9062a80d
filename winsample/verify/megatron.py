"""The ``megatron_index`` check: a Megatron .idx against its .bin (and meta.json's record)."""

from __future__ import annotations

from pathlib import Path

from .. import disk, formats, tokensrc
from ..errors import WinsampleError
from .registry import check
from .report import Report, Status


@check("megatron_index", help="a Megatron .idx agrees with its .bin (and meta.json)", reads="Megatron .idx/.bin, meta.json",
       stage="dataset", runs_before="meta")
def megatron_index(report: Report, ctx) -> None:
    """The .idx of a Megatron prefix named on its own, the .idx files a data folder's meta.json
    lists, and every other .idx of a split that sits in the data folder (listed or not, and when
    one split's file is named alone): what belongs to the dataset is checked, never skipped."""
    if ctx.meta is None and ctx.folder is None and ctx.megatron_idx is not None:
        check_megatron(report, ctx.megatron_idx, ctx.path)
    if ctx.meta is None:
        return
    listed = tokensrc.MEGATRON in ctx.written
    if ctx.folder is not None and listed:
        check_listed_megatron(report, ctx)
        return
    folder = ctx.folder if ctx.folder is not None else ctx.path.parent
    splits = formats.SPLITS if ctx.folder is not None else [t.split for t in ctx.targets if t.split in formats.SPLITS]
    entries = (tokensrc.layout_splits(ctx.meta_json, tokensrc.MEGATRON) or {}) if listed else {}
    for split in splits:
        idx_path = folder / tokensrc.megatron_index_name(split)
        if not idx_path.is_file():
            continue
        try:
            idx = tokensrc.read_megatron_index(idx_path)
        except WinsampleError as e:
            report.add(MEGATRON_INDEX, idx_path.name, Status.FAIL, str(e))
            continue
        check_megatron(report, idx, folder / formats.bin_name(split), _doc_starts(ctx, split, folder),
                       entries.get(split), tokensrc.MEGATRON_CODES.get(ctx.dtype))


MEGATRON_INDEX = megatron_index.spec


def check_megatron(report: Report, idx: tokensrc.MegatronIndex, bin_path: Path, doc_starts=None, entry: dict | None = None, want_code=None) -> None:
    """megatron_index: the .idx against its .bin (and, from meta.json, the documents and checksum)."""
    label = idx.path.name
    if not bin_path.is_file():
        report.add(MEGATRON_INDEX, label, Status.FAIL, f"{bin_path.name}, the data file of {label}, is missing")
        return
    problems = tokensrc.megatron_problems(idx, bin_path.stat().st_size, doc_starts)
    if want_code is not None and idx.dtype_code != want_code:
        problems.append(f"{label}: dtype code {idx.dtype_code}, the .bin's dtype needs {want_code}")
    if entry is not None:
        got = disk.checksum_file(idx.path)
        if entry.get("checksum") != got:
            problems.append(f"{label}: hashes to {got}, meta.json says {entry.get('checksum')}")
    if problems:
        report.add(MEGATRON_INDEX, label, Status.FAIL, f"{len(problems)} problem(s): " + "; ".join(problems), problems=problems)
    else:
        n = bin_path.stat().st_size // idx.itemsize
        report.add(
            MEGATRON_INDEX, label, Status.PASS,
            f"{idx.sequences} sequences, {idx.documents} documents, dtype code {idx.dtype_code}: lengths sum to N = {n},"
            " pointers contiguous, document indices 0 … S" + (", one sequence per document of meta.json" if doc_starts is not None else ""),
            sequences=idx.sequences, documents=idx.documents,
        )


def check_listed_megatron(report: Report, ds) -> None:
    """The Megatron .idx files a data folder's meta.json lists (``ds``: a ``context.Dataset``)."""
    want_code = tokensrc.MEGATRON_CODES.get(ds.dtype)
    mg_splits = tokensrc.layout_splits(ds.meta_json, tokensrc.MEGATRON)
    if mg_splits is None:
        report.add(MEGATRON_INDEX, formats.META_JSON, Status.FAIL, "meta.json: layouts.megatron.splits is not an object of split entries")
    for split, entry in (mg_splits or {}).items():
        if split not in formats.SPLITS:
            report.add(MEGATRON_INDEX, formats.META_JSON, Status.FAIL, f"meta.json: layouts.megatron.splits names {split!r}, not train or val")
            continue
        idx_path = ds.folder / tokensrc.megatron_index_name(split)
        try:
            idx = tokensrc.read_megatron_index(idx_path)
        except WinsampleError as e:
            report.add(MEGATRON_INDEX, idx_path.name, Status.FAIL, str(e))
            continue
        check_megatron(report, idx, ds.folder / formats.bin_name(split), _doc_starts(ds, split, ds.folder), entry, want_code)


def _doc_starts(ds, split: str, folder: Path):
    """The split's document starts from its doc index, or None (none, or broken: the meta check names it)."""
    di = ds.meta.splits[split].doc_index if split in ds.meta.splits else None
    if di and (folder / di).is_file():
        try:
            return formats.read_doc_index(folder / di)
        except WinsampleError:
            return None
    return None
