"""``verify(path, plans, ...) -> Report``: find what to check, scan each token file once, then
run the registry's stages in order: ``file`` (each token file), ``dataset``, ``plan`` (each
plan), ``final``. Which checks a stage holds, and in which order, is the registry's
(``registry.py``): nothing here names a check but the ones that stop a run before the stages.

The plans' own figures (bounds, order, coverage) and the retokenize sample are computed on helper
threads while the token files are scanned.
"""

from __future__ import annotations

import dataclasses
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from .. import disk, formats, tokenizer, tokensrc
from ..errors import DataError, InputError, WinsampleError
from . import recode
from .context import Dataset
from .decode import DECODE
from .figures import Prepared, prepare_plan
from .llmc import verify_llmc
from .megatron import MEGATRON_INDEX
from .meta import META, load_meta_tokenizer
from .options import VerifyOptions
from .plan import PLAN_BOUNDS, check_plans, load_plan_once
from .registry import run_stage
from .report import Report, Status
from .scan import Target, require_file, scan_file, scan_logical
from .shingles import sampling_bits


def verify(path: str | Path | None, plans=(), options: VerifyOptions | None = None, **kwargs) -> Report:
    """Run every check that applies to ``path`` (a data folder, one .bin, or a plan) and ``plans``.

    ``path`` a plan (``*.npy``) or None: the plans alone, each against the token file its sidecar
    names (``verify_plans``). Options come as a ``VerifyOptions`` or as its fields by keyword
    (``T=``, ``min_coverage=``, ``retokenize_sample=``, …). Returns a Report; raises InputError
    only when something named cannot be read at all.
    """
    opts = options if options is not None else VerifyOptions()
    opts = dataclasses.replace(opts, plans=tuple(plans) or tuple(opts.plans), **kwargs)
    return verify_with(path, opts)


def verify_with(path: str | Path | None, opts: VerifyOptions) -> Report:
    """``verify`` with its options as one object."""
    if path is None or is_plan_path(path):
        return verify_plans(path, opts)
    return check_dataset(path, opts)[0]


def is_plan_path(path: str | Path) -> bool:
    """A plan named where a data folder or token file is expected: ``PLAN.npy`` (or its sidecar)."""
    return str(path).endswith((".npy", ".npy.json"))


def plan_of(path: str | Path) -> Path:
    """The plan ``PLAN.npy`` that ``path`` (the plan or its sidecar) names."""
    return Path(str(path)[: -len(".json")] if str(path).endswith(".npy.json") else path)


def check_dataset(path: str | Path, opts: VerifyOptions) -> tuple[Report, Dataset | None]:
    """Every check of the data folder or token file ``path`` and of ``opts.plans`` on it; the
    report, and the ``Dataset`` its checks read (None for llm.c shards named on their own, or a
    Megatron index that does not read)."""
    foreign = tokensrc.foreign_layout(path, opts.meta_path)
    path = Path(path)
    _check_inputs(path, opts, foreign)
    report = Report()
    if foreign is not None and foreign[0] == tokensrc.LLMC:
        return verify_llmc(report, path, foreign[1], opts), None
    megatron_idx = None
    if foreign is not None:  # a Megatron prefix: its .bin is the token file, its .idx says the dtype
        try:
            megatron_idx = tokensrc.read_megatron_index(Path(f"{foreign[1]}.idx"))
        except DataError as e:
            report.add(MEGATRON_INDEX, f"{foreign[1]}.idx", Status.FAIL, str(e))
            return report, None
        path = Path(f"{foreign[1]}.bin")
    ds = Dataset(path, path if path.is_dir() else None, megatron_idx, opts=opts)
    _open_meta(ds, opts.meta_path)
    if ds.meta_error is not None:  # meta.json does not read: its dtype and tokenizer unknown, any other check would guess them
        report.add(META, ds.meta_file.name if ds.folder else str(ds.meta_file), Status.FAIL,
                   f"{ds.meta_error}; the other checks need its dtype and tokenizer: not run")
        return report, None
    _find_targets(ds, opts.meta_path)
    _load_tokenizer(ds, opts.encoding)
    _run_checks(report, ds, opts)
    return report, ds


def verify_plans(path: str | Path | None, opts: VerifyOptions) -> Report:
    """The plans alone (``path``, a plan, then ``opts.plans``), each against the token file its
    sidecar names (``tokensrc.plan_tokens``): a window plan as ``verify TOKENS --plan PLAN``
    checks it (the plans of one token file in one run), a mixture by ``mixture.check_mixture``.
    Only the first plan's windows are decoded (a mixture's: its first positions)."""
    from .mixture import check_mixture, show_mixture

    plans = ([plan_of(path)] if path is not None else []) + [Path(p) for p in opts.plans]
    if not plans:
        raise InputError("nothing to verify: name a data folder, a token file or a plan (--plan PLAN.npy)")
    opts = dataclasses.replace(opts, plans=tuple(plans))
    _check_inputs(None, opts, None)
    report, jobs, groups = Report(), [], {}
    for p in plans:  # each plan read once, then placed: a mixture, a token file's group, or why neither
        got = load_plan_once(p)
        if isinstance(got, DataError):
            jobs.append((p, str(got)))
        elif got.side.mixture:
            jobs.append((p, got))
        else:
            try:
                tokens = tokensrc.plan_tokens(p, got.side.source)
            except DataError as e:
                jobs.append((p, str(e)))
                continue
            key = tokens.resolve()
            if key not in groups:
                groups[key] = (tokens, [])
                jobs.append((p, key))
            groups[key][1].append(p)
    for p, job in jobs:
        if isinstance(job, str):
            report.add(PLAN_BOUNDS, p.name, Status.FAIL, job)
        elif isinstance(job, Prepared):
            mix = check_mixture(report, opts, p, job)
            if p == plans[0]:
                show_mixture(report, mix, opts.show)
        else:
            tokens, group = groups[job]
            first = plans[0] in group
            dtype = opts.dtype or _planned_width(tokens, load_plan_once(group[0]))
            sub, _ = check_dataset(tokens, dataclasses.replace(opts, plans=tuple(group), show=opts.show if first else 0,
                                                               meta_path=None, writes=(), dtype=dtype))
            report.checks += [c for c in sub.checks if first or c.name != DECODE.name]
            report.windows += sub.windows
    return report


def _planned_width(tokens: Path, got) -> str | None:
    """The width a plan's sidecar records for its token file when nothing else says one and it is
    not the default (a bare file planned with ``--dtype uint32``: ``tokensrc.open_planned``), else
    None: a bare file planned as uint16 is still checked for uint32 ids read as uint16."""
    if isinstance(got, DataError):
        return None
    try:
        src = tokensrc.open_planned(tokens, got.side.source, strict=False)
    except WinsampleError:
        return None  # the checks say why it does not open
    bare = src.entry is None and src.layout is None
    return src.dtype if bare and src.dtype != formats.DEFAULT_DTYPE else None


def _check_inputs(path: Path | None, opts: VerifyOptions, foreign) -> None:
    """InputError (exit 2) for a run that cannot happen: PATH or a plan missing, a bad option value."""
    if path is not None and not path.exists() and foreign is None and not tokensrc.is_logical(path, opts.meta_path):
        raise InputError(f"{path}: no such file or folder")
    if opts.writes:  # --plot PNG: never one of the files checked
        ins = formats.dataset_files(path, opts.meta_path) if path is not None else []
        for p in opts.plans:  # with no PATH too: the dataset each plan's sidecar names
            ins += tokensrc.plan_inputs(p)
        disk.refuse_overwrite(opts.writes, ins)
    if opts.T is not None and opts.T < 1:
        raise InputError(f"-T {opts.T}: the window length must be at least 1 token")
    for name, v in (("--min-coverage", opts.min_coverage), ("--max-leakage", opts.max_leakage)):
        if not 0 <= v <= 1:  # NaN too: it would make the check pass whatever the data
            raise InputError(f"{name} {v}: must be a share in [0, 1]")
    for p in opts.plans:
        if not Path(p).exists():
            raise InputError(f"{p}: no such plan file")


def _open_meta(ds: Dataset, meta_path) -> None:
    """meta.json: where it is, whether it reads (a failing ``meta`` check when not)."""
    if meta_path is not None:
        ds.meta_file = Path(meta_path)
        if not ds.meta_file.exists():
            raise InputError(f"{ds.meta_file}: no such meta file")
    else:
        ds.meta_file = tokensrc.find_meta(ds.path)
    if ds.meta_file is not None:
        try:
            ds.meta = formats.load_meta(ds.meta_file)
        except DataError as e:  # not JSON, newer version, schema broken: a failing `meta` check
            ds.meta_error = str(e)
    ds.meta_json = ds.meta.to_json() if ds.meta is not None else None  # tokensrc.py reads its own entries from it
    ds.written = tokensrc.written(ds.meta_json)


def _find_targets(ds: Dataset, meta_path) -> None:
    """Which token files: each opened by formats' one rule (a sharded split by its logical name)."""
    meta, folder = ds.meta, ds.folder
    if folder is not None:
        if meta is not None:
            if tokensrc.NANOGPT in ds.written or tokensrc.MEGATRON in ds.written:  # else no .bin is kept
                for src in tokensrc.open_folder(folder, meta, meta_path=ds.meta_file, dtype=ds.opts.dtype):
                    ds.targets.append(Target(src.path, src.entry.file, src.name, src.entry, src))
        else:
            for split in formats.SPLITS:
                p = folder / formats.bin_name(split)
                if p.exists():
                    ds.targets.append(Target(p, p.name, split, None, tokensrc.open_source(p, tokensrc.NO_META, strict=False,
                                                                                          dtype=ds.opts.dtype)))
        if not ds.targets and not (meta is not None and tokensrc.LLMC in ds.written):
            raise InputError(f"{folder}: no train.bin / val.bin and no meta.json: not a data folder")
    else:
        path = ds.path
        found = meta.split_for(path) if meta is not None else None
        if meta is not None and found is None:
            tokensrc.refuse_loss_mask(meta, path, ds.meta_file)
            if meta_path is not None:
                ds.meta_error = f"{ds.meta_file}: describes {', '.join(e.file for e in meta.splits.values())}, not {path.name}"
            else:
                ds.meta_file = None  # a meta.json beside the file that is about other files: not ours
            ds.meta = meta = None
        src = tokensrc.open_source(path, meta if meta is not None else tokensrc.NO_META, strict=False, meta_path=ds.meta_file,
                                   dtype=ds.opts.dtype if ds.megatron_idx is None else None)
        ds.targets.append(Target(path, path.name, src.name, src.entry, src))
    if meta is None and ds.megatron_idx is not None:
        ds.dtype = tokensrc.width(ds.opts.dtype, tokensrc.megatron_token_dtype(ds.megatron_idx), str(ds.megatron_idx.path))
    else:
        ds.dtype = tokensrc.width(ds.opts.dtype, meta.dtype if meta is not None else None, str(ds.meta_file))


def _load_tokenizer(ds: Dataset, encoding: str | None) -> None:
    """meta's tokenizer (its failure to load is a meta problem), else --encoding, else gpt2."""
    if ds.meta is not None:
        ds.n_vocab = ds.meta.n_vocab
        ds.enc, ds.enc_error = load_meta_tokenizer(ds.meta.tokenizer, ds.meta_file)
        if ds.enc is not None:  # hashing the ranks (pure Python, ~50 ms) overlaps the file scan
            enc = ds.enc
            sha_pool = ThreadPoolExecutor(1)
            ds.ranks_sha = sha_pool.submit(lambda: enc.sha256)
            sha_pool.shutdown(wait=False)
        return
    try:
        ds.enc = tokenizer.resolve(encoding)
    except WinsampleError as e:
        raise InputError(str(e)) from None
    ds.n_vocab = ds.enc.n_vocab


def _run_checks(report: Report, ds: Dataset, opts: VerifyOptions) -> None:
    """Scan the files (plans and retokenize on helper threads meanwhile), then each stage's checks in report order."""
    leak = ds.folder is not None and {"train", "val"} <= {t.split for t in ds.targets}
    for t in ds.targets:
        if t.src.sharded:  # a split kept in shard files: meta's count will do
            ds.sizes[t.path] = t.entry.tokens
            continue
        require_file(t.path)
        ds.sizes[t.path] = t.path.stat().st_size // np.dtype(ds.dtype).itemsize
    # retokenize reads its sample and re-encodes it (tiktoken releases the GIL) during the scans
    recode.start(ds)
    ds.shingle_bits = sampling_bits(sum(ds.sizes.values()), opts.max_shingles) if leak else None
    # the plans' own work (read, coverage union) needs no token: a helper thread does it during the scans
    plan_pool = ThreadPoolExecutor(1)
    ds.prepared = {Path(p): plan_pool.submit(prepare_plan, Path(p), ds.path, ds.folder, ds.sizes, opts.encoding)
                   for p in opts.plans}
    plan_pool.shutdown(wait=False)
    _scan_targets(ds, ds.shingle_bits, opts.progress)
    for t in [t for t in ds.targets if t.path in ds.sizes]:  # not the llm.c streams the dataset stage adds
        run_stage("file", report, ds, t, ds.scans[t.path])
    run_stage("dataset", report, ds)
    check_plans(report, ds)
    run_stage("final", report, ds)


def _scan_targets(ds: Dataset, bits: int | None, progress) -> None:
    """One pass per token file; train and val also keep shingles when ``bits`` is set (split_leakage)."""
    for t in ds.targets:
        want = bits if bits is not None and t.split in ("train", "val") else None
        if t.src.sharded:
            ds.scans[t.path] = scan_logical(t.src, ds.n_vocab, label=t.label, shingle_bits=want, progress=progress)
            continue
        shared = t.src.tokens if t.src is not None and t.src.layout is None and not t.src.stray else None
        ds.scans[t.path] = scan_file(t.path, ds.dtype, ds.n_vocab, label=t.label, shingle_bits=want, progress=progress,
                                     tokens=shared)
