"""One entry point that opens a token source for planning or training, whatever its layout.

``open_source(path, meta=None, encoding=None)`` is ``nanogpt.open_split`` for a nanoGPT .bin
(with its meta.json, or a bare .bin), and builds the same ``OpenSplit`` for a Megatron
prefix / .bin / .idx and for llm.c shards (``kinds.foreign_layout``). It is refused before
anything is planned when it cannot be read as whole tokens: a size that is not whole tokens
(InputError: exit 2, nothing written), a file that changed since its meta.json was written
(DataError).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .. import disk, formats
from ..errors import DataError, InputError, WinsampleError
from ..formats.tokens import normalize_dtype
from . import kinds, llmc, megatron
from .layouts import MEGATRON
from .nanogpt import NO_META, OpenSplit, open_split, width
from .sharded import ConcatTokens


def open_source(path, meta=None, encoding=None, *, strict: bool = True, meta_path=None, dtype: str | None = None) -> OpenSplit:
    """The one rule that opens a token source: ``nanogpt.open_split`` of ``path`` (``meta``, a
    meta.json path or a ``Meta`` with ``meta_path`` its file, or the sibling meta.json), or the
    OpenSplit of a Megatron prefix or llm.c shards (sniffed by ``kinds.foreign_layout`` unless
    ``meta`` is already decided: a ``Meta``, or ``NO_META`` for a bare file whatever lies beside it).

    ``strict``: InputError / DataError when it cannot be planned (stray bytes, a file that changed
    since meta.json). ``strict=False`` opens it anyway, for the commands that report such a file
    (verify, inspect, the plot) rather than refuse it. ``dtype``: the width of a bare file
    (``--dtype``); ConfigError when it contradicts its meta.json, llm.c header or Megatron index."""
    here = Path(path).parent
    for folder in (here, here.parent) if here.name == llmc.LLMC_DIR else (here,):  # a data folder, or the one above its llmc/
        if pending := formats.unfinished_commit(folder):  # its files are the old set's and the new one's, some missing
            raise DataError(f"{path}: its folder's set is not whole{pending}")
    sniff = meta is None or (isinstance(meta, (str, Path)) and str(meta) != NO_META)  # a Meta, NO_META: decided
    foreign = kinds.foreign_layout(path, meta) if sniff else None
    if foreign is not None:
        src = foreign_source(Path(path), *foreign, encoding, meta)
        record = f"{src.files[0]}'s llm.c header" if src.files else f"{foreign[1]}.idx"
        width(dtype, src.dtype, record)
        return src
    src = open_split(path, meta, encoding, meta_path=meta_path, dtype=dtype)
    if not strict:
        return src
    if src.stray:
        item = src.itemsize
        raise InputError(
            f"{src.path}: {src.nbytes} bytes is not a multiple of {item} (dtype {src.dtype}):"
            f" {src.stray} stray byte(s); the file is truncated or has the wrong dtype"
        )
    if (problem := src.size_problem()) is not None:
        raise DataError(problem)
    return src


def foreign_source(path: Path, layout: str, what, encoding=None, meta_path=None) -> OpenSplit:
    """The OpenSplit of llm.c shards (``what``: {group: files}) or a Megatron prefix (``what``: prefix).
    Shards a data folder's meta.json lists (``llmc.llmc_owner``) take its tokenizer, unless
    ``encoding`` names one."""
    if layout == MEGATRON:
        return _megatron_source(what, encoding, layout)
    if len(what) != 1:
        folder = path.parent if disk.is_glob(path) else path  # a glob: its folder
        raise InputError(f"{path}: holds {len(what)} groups of llm.c shards ({', '.join(what)}); plan one at a time,"
                         f" e.g. {folder}/{next(iter(what))}_*.bin")
    files = next(iter(what.values()))
    counts, fmt = llmc.read_llmc_stream(files)
    stream = ConcatTokens(files, counts, fmt.dtype, header_bytes=llmc.LLMC_HEADER_BYTES)
    owner = llmc.llmc_owner(what, meta_path) if encoding is None else None
    tok = None
    if owner is not None and owner.meta is not None:
        from .. import tokenizer

        tok = tokenizer.from_meta(owner.meta.tokenizer, owner.meta_file.parent)
    unknown = llmc.NEEDS_ENCODING if tok is None and encoding is None and fmt == llmc.LLMC_V7 else None
    return OpenSplit(path, fmt.dtype, len(stream), stream.nbytes, encoding=encoding, layout=layout,
                     files=files, no_tokenizer=unknown, _tokens=stream, _tokenizer=tok)


def _megatron_source(prefix, encoding, layout: str) -> OpenSplit:
    idx = megatron.read_megatron_index(f"{prefix}.idx")
    bin_path = Path(f"{prefix}.bin")
    dtype = megatron.megatron_token_dtype(idx)
    nbytes = bin_path.stat().st_size
    problems = megatron.megatron_problems(idx, nbytes)
    if problems:
        raise DataError(f"{idx.path}: " + "; ".join(problems) + "; run winsample verify")
    starts = megatron.megatron_doc_starts(idx)
    n = nbytes // np.dtype(dtype).itemsize
    if n and (len(starts) == 0 or starts[0] != 0):  # ids before the first document: a piece of its own
        starts = np.concatenate([[0], starts]).astype(np.int64)
    return OpenSplit(bin_path, dtype, n, nbytes, encoding=encoding, layout=layout, known_starts=starts)


def open_planned(path, source, *, strict: bool = True) -> OpenSplit:
    """``open_source`` of a plan's token file: a bare one (no meta.json, no header or index of its
    own) read at the width the plan was made for, its sidecar's ``source.dtype`` (``windows
    --dtype uint32``); any other by its own record, as always (the plan checks compare the two)."""
    src = open_source(path, strict=strict)
    want = getattr(source, "dtype", None)
    if want and src.entry is None and src.layout is None and normalize_dtype(want) != src.dtype:
        src = open_source(path, NO_META, strict=strict, dtype=want)
    return src


PLAN_HINT = "name the token file (winsample verify DATA --plan PLAN; tokens_path= in Python)"
MIXTURE_HINT = "run where the mixture's source plans were made, or make them again beside their token files"


def _globbed(p: Path) -> bool:
    """True when ``p`` is a glob (``windows 'data/llmc/train_*.bin'``) that names at least one file."""
    import glob

    return disk.is_glob(p) and any(Path(q).is_file() for q in glob.iglob(str(p)))


def plan_tokens(plan_path, source, hint: str = PLAN_HINT) -> Path:
    """The token file a plan was made for, found from its sidecar's ``source`` (a
    ``formats.PlanSource``): ``source.path`` as given to ``windows`` (relative to where it ran),
    else that path from the plan's folder, else ``source.file`` beside the plan. A candidate counts only when its size is
    ``source.bytes`` and, where a meta.json describes it, its recorded checksum is
    ``source.checksum`` (no token is read); DataError naming what was tried otherwise, and ``hint``
    (or, where a file of the plan's size could not be opened as planned, the reason it could not;
    where a file lies where the sidecar says but its size or checksum is not the plan's, how it changed)."""
    plan_path = Path(plan_path)
    tried = []
    refused = None  # why a file of the plan's size could not be opened
    changed = None  # a file where the sidecar says, but not the one planned: how it differs
    given = Path(source.path) if source.path else None
    beside = plan_path.parent / given if given is not None and not given.is_absolute() else None  # windows run where the plan lies
    from_plan = plan_path.parent / source.from_plan if source.from_plan else None  # from any working folder
    # a relative source.path names a file of wherever this runs: the plan's own record of where its file lay goes first
    first = (from_plan, source.path) if given is not None and not given.is_absolute() else (source.path, from_plan)
    # where the sidecar says it is (beside the plan: only a guess, unless the plan is older than from_plan)
    recorded = {str(c) for c in first if c} | ({str(plan_path.parent / source.file)} if source.file and not source.from_plan else set())
    for cand in (*first, beside, plan_path.parent / source.file if source.file else None):
        if not cand or str(cand) in tried:
            continue
        tried.append(str(cand))
        p = Path(cand)
        here = str(cand) in recorded
        if not p.exists() and not (p.parent / f"{p.name}.idx").exists() and not _globbed(p):
            continue
        try:
            src = open_source(p)
        except (DataError, InputError) as e:
            # the plan's own file by its size, which cannot be read as planned (as a DataError: the data's
            # fault, so verify reports it for this plan and goes on to the others): that is the news; a
            # loss mask an older winsample planned as tokens is refused so (InputError), and said so
            if source.bytes is not None and p.is_file():
                if p.stat().st_size == source.bytes:
                    refused = refused or (e if isinstance(e, DataError) else DataError(str(e)))
                elif here and isinstance(e, DataError):
                    changed = changed or f"{p} is {p.stat().st_size:,} bytes, the plan was made for {source.bytes:,}"
            continue
        if source.bytes is not None and src.nbytes != source.bytes:
            if here:
                changed = changed or f"{p} is {src.nbytes:,} bytes, the plan was made for {source.bytes:,}"
            continue
        checksum = src.entry.checksum if src.entry is not None else None
        if checksum and source.checksum and checksum != source.checksum:
            if here:
                changed = changed or f"{p} has checksum {checksum}, the plan was made for {source.checksum}"
            continue
        return p
    if refused is not None:
        raise refused
    if changed is not None:  # the file is where the sidecar says: it is the file that changed, not its place
        raise DataError(f"{plan_path}: its token file changed since it was planned ({changed}): plan it again"
                        " (winsample windows), or put back the file it was made for")
    raise DataError(f"{plan_path}: its token file is not where its sidecar says (tried {', '.join(tried) or 'nothing'},"
                    f" {source.bytes} bytes{', ' + source.checksum if source.checksum else ''}): {hint}")


def plan_inputs(plan_path, _sources: bool = True) -> list[Path]:
    """Every file a plan stands for, which no output may replace: the plan, its sidecar and
    materialized windows, and the files of the dataset its token file belongs to
    (``formats.dataset_files``, the token file found as ``plan_tokens`` finds it); a mixture's,
    those of each of its source plans (one level: mix refuses a mixture as a source). What cannot
    be read or found is left out: never raises."""
    p = Path(plan_path)
    files = [p, formats.plan_sidecar(p), formats.materialized_path(p)]
    try:
        side = formats.read_sidecar(p)
        if not side.mixture:
            files += formats.dataset_files(plan_tokens(p, side.source))
        elif _sources:
            for src in side.sources or []:
                files += plan_inputs(p.parent / src.plan, _sources=False)
    except (WinsampleError, OSError, ValueError, RecursionError):
        pass
    return files
