"""llm.c shard streams: llmc_shards (headers, sizes, meta.json's record) and llmc_documents
(each document starts with EOT), for shards named on their own or listed by a data folder."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from .. import disk, formats, tokenizer, tokensrc
from ..errors import DataError, InputError, WinsampleError
from .context import Dataset
from .files import MIN_LENGTH, check_min_length, check_vocab
from .meta import META, load_meta_tokenizer
from .options import DEFAULT_MIN_COVERAGE
from .plan import check_plans
from .registry import check, define, run_stage
from .report import Report, Status
from .scan import FileScan, Target, scan_file


@check("llmc_shards", help="llm.c shard headers, sizes (and meta.json's names, counts, checksums) agree",
       reads="llm.c shards, meta.json", stage="dataset", runs_before="megatron_index")
def llmc_shards(report: Report, ctx) -> None:
    """The llm.c shard streams a data folder's meta.json lists: llmc_shards, llmc_documents, and
    each stream's min_length and vocab_range (shards named on their own: ``verify_llmc``)."""
    if ctx.meta is not None and ctx.folder is not None and tokensrc.LLMC in ctx.written:
        check_listed_llmc(report, ctx, ctx.opts.T, ctx.opts.progress)
    elif ctx.meta is not None and ctx.folder is not None and (ctx.folder / tokensrc.LLMC_DIR).is_dir():
        # shards in the data folder that meta.json does not describe: refused, never skipped
        stray = sorted(p.name for p in (ctx.folder / tokensrc.LLMC_DIR).glob("*.bin"))
        if stray:
            report.add(LLMC_SHARDS, f"{tokensrc.LLMC_DIR}/", Status.FAIL,
                       f"{len(stray)} llm.c shard file(s) ({', '.join(stray[:3])}{', …' if len(stray) > 3 else ''}) that"
                       f" meta.json does not describe (no layouts.llmc): verify {tokensrc.LLMC_DIR}/ on its own, or encode again")


LLMC_SHARDS = llmc_shards.spec
LLMC_DOCUMENTS = define("llmc_documents", "each llm.c document starts with <|endoftext|>, and no EOT stands elsewhere",
                        "llm.c shards, tokenizer")


def scan_llmc(files: list[Path], n_vocab: int, label: str, progress=None) -> tuple[FileScan | None, list[str]]:
    """One pass over an llm.c shard stream: (its FileScan, whose tokens() is the stream; header problems).

    The scan's checksum combines the shard files' own (header included); None when a header fails."""
    problems, heads = [], []
    for f in files:
        try:
            heads.append(tokensrc.read_llmc_header(f))
        except DataError as e:
            problems.append(str(e))
    if not problems:  # one stream, one format
        try:
            tokensrc.read_llmc_stream(files)
        except DataError as e:
            problems.append(str(e))
    if problems:
        return None, problems
    fmt = heads[0].fmt if heads else tokensrc.LLMC_V1
    parts, total, bad, max_id, first_bad, first_bad_id = [], 0, 0, None, None, None
    shard_scans = []
    for f in files:
        sc = scan_file(f, fmt.dtype, n_vocab, label=f.name, progress=progress, offset=tokensrc.LLMC_HEADER_BYTES)
        sc.release()  # a thousand shards must not hold a thousand open files
        shard_scans.append(sc)
        parts.append((sc.size + tokensrc.LLMC_HEADER_BYTES, sc.checksum))
        if sc.bad_count and first_bad is None:
            first_bad, first_bad_id = total + sc.first_bad, sc.first_bad_id
        bad += sc.bad_count
        if sc.max_id is not None:
            max_id = sc.max_id if max_id is None else max(max_id, sc.max_id)
        total += sc.n
    stream = tokensrc.ConcatTokens(files, [h.count for h in heads], fmt.dtype, header_bytes=tokensrc.LLMC_HEADER_BYTES)
    scan = FileScan(Path(label), label, fmt.dtype, total * fmt.itemsize, total, 0, disk.combine_checksums(parts),
                    max_id, bad, first_bad, first_bad_id)
    scan.tokens = lambda: stream
    scan.shard_scans = shard_scans
    scan.llmc_format = fmt
    return scan, problems


def _llmc_names_ok(report: Report, split: str, entry: dict) -> bool:
    """meta.json's shard names must be the ones encode writes (never a path out of the folder)."""
    problems = tokensrc.shard_entry_problems(split, entry)
    if problems:
        report.add(LLMC_SHARDS, f"{tokensrc.LLMC_DIR}/{split}_*.bin", Status.FAIL, "; ".join(problems))
    return not problems


def _eot_figures(tokens, eot: int) -> tuple[int, int | None]:
    """(how many ids are the EOT, the first id) of a stream, in bounded pieces."""
    count = 0
    for _lo, chunk in formats.iter_chunks(tokens, disk.checksums.CHUNK_BYTES // 2):
        count += int(np.count_nonzero(np.asarray(chunk) == eot))
    return count, (int(tokens[0]) if len(tokens) else None)


def check_llmc(report: Report, label: str, scan: FileScan | None, problems: list[str], eot: int | None, entry: dict | None = None,
                part: bool = False, dtype: str | None = None, chat: bool = False) -> None:
    """llmc_shards (headers, sizes; with meta.json: names, counts, checksums, and ``dtype``, its
    ids' width, the one the shards' version holds) and llmc_documents.
    ``part``: the shards are a part of a split (``entry`` lists just them, with no document count).
    ``chat``: conversations (``encode --chat``), whose template may write the EOT inside them."""
    if scan is None:
        report.add(LLMC_SHARDS, label, Status.FAIL, f"{len(problems)} bad shard(s): " + "; ".join(problems), problems=problems)
        return
    k = len(scan.shard_scans)
    if entry is not None:
        listed = entry.get("shards", [])
        bad = []
        if len(listed) != k:
            bad.append(f"meta.json lists {len(listed)} shards, {k} found")
        for sh, sc in zip(listed, scan.shard_scans):
            if sh.get("tokens") != sc.n:
                bad.append(f"{sh['file']}: header counts {sc.n} tokens, meta.json says {sh.get('tokens')}")
            full = sc.size + tokensrc.LLMC_HEADER_BYTES
            if sh.get("bytes") != full:
                bad.append(f"{sh['file']}: {full} bytes, meta.json says {sh.get('bytes')}")
            if sh.get("checksum") != sc.checksum:
                bad.append(f"{sh['file']}: hashes to {sc.checksum}, meta.json says {sh.get('checksum')}")
        if entry.get("tokens") != scan.n:
            bad.append(f"the shards hold {scan.n} tokens, meta.json says {entry.get('tokens')}")
        if dtype is not None and k and formats.normalize_dtype(dtype) != scan.llmc_format.dtype:  # no shard, no version
            fmt = scan.llmc_format
            bad.append(f"version {fmt.version} shards hold {fmt.ids} ids, meta.json's dtype is {dtype}")
        if bad:
            report.add(LLMC_SHARDS, label, Status.FAIL, f"{len(bad)} disagreement(s) with meta.json: " + "; ".join(bad), problems=bad)
            return
    fmt = scan.llmc_format
    report.add(
        LLMC_SHARDS, label, Status.PASS,
        f"{k} shard(s), {scan.n} tokens: headers (magic {fmt.magic}, version {fmt.version}, count) and sizes"
        f" (1024 + {fmt.itemsize} × count) agree"
        + (", checksums as meta.json records" if entry is not None else "; no meta.json: no checksums to compare"),
        shards=k, tokens=scan.n,
    )
    if eot is None:
        report.add(LLMC_DOCUMENTS, label, Status.SKIP, "the tokenizer has no <|endoftext|>: document starts cannot be found")
        return
    count, first = _eot_figures(scan.tokens(), eot)
    if scan.n == 0:
        report.add(LLMC_DOCUMENTS, label, Status.PASS, "no tokens, no documents", documents=0)
    elif entry is not None and not part:
        want = entry.get("documents")
        if chat and first == eot and isinstance(want, int) and count > want:  # DeepSeek's and Llama 3's turns end with it
            report.add(LLMC_DOCUMENTS, label, Status.PASS, f"the stream starts with EOT {eot}; {count} EOT ids for {want}"
                       " conversations: the chat template writes it inside them too (the end of a turn), so the"
                       " documents are not counted by it", documents=want, eots=count)
        elif first != eot or count != want:
            why = f"the first id is {first}, not the EOT {eot}" if first != eot else f"{count} EOT ids for {want} documents"
            report.add(LLMC_DOCUMENTS, label, Status.FAIL, f"every document must start with <|endoftext|> ({eot}) and no EOT stand elsewhere: {why}",
                       documents=want, eots=count)
        else:
            report.add(LLMC_DOCUMENTS, label, Status.PASS, f"each of the {want} documents starts with EOT {eot}, and no EOT stands elsewhere", documents=want)
    elif first != eot and part:  # a later shard of a split: encode cuts shards by count, not at documents
        report.add(LLMC_DOCUMENTS, label, Status.SKIP, f"a part of a split that starts inside a document (shards are cut by"
                   f" token count): {count} EOT ids in it, the split's document count is checked on all its shards", eots=count)
    elif first != eot:
        report.add(LLMC_DOCUMENTS, label, Status.WARN,
                   f"the first id is {first}, not the EOT {eot}: the stream does not start at a document start (modded-nanogpt aligns sequences to EOT);"
                   f" {count} EOT ids further on", eots=count)
    else:
        why = "a part of a split: meta.json records no count for it" if part else "no meta.json"
        report.add(LLMC_DOCUMENTS, label, Status.PASS, f"{count} documents, each starting with EOT {eot} ({why}: the count is not compared)", documents=count)


def check_listed_llmc(report: Report, ds, T: int | None, progress=None) -> None:
    """The llm.c shard streams a data folder's meta.json lists (``ds``: a ``context.Dataset``):
    they join the token files checked (the first one stands in for them when no .bin is kept)."""
    eot = ds.meta.tokenizer.get("eot", getattr(ds.enc, "eot", None))
    llmc_splits = tokensrc.layout_splits(ds.meta_json, tokensrc.LLMC)
    if llmc_splits is None:
        report.add(LLMC_SHARDS, formats.META_JSON, Status.FAIL, "meta.json: layouts.llmc.splits is not an object of split entries")
    for split, entry in (llmc_splits or {}).items():
        files = [ds.folder / sh["file"] for sh in entry["shards"]] if _llmc_names_ok(report, split, entry) else None
        if files is None:
            continue
        label = f"{tokensrc.LLMC_DIR}/{split}_*.bin"
        scan, problems = scan_llmc(files, ds.n_vocab, label, progress)
        check_llmc(report, label, scan, problems, eot, entry, dtype=ds.meta.dtype, chat=_chat(ds.meta))
        if scan is not None:
            _check_length(report, label, scan, T, ds.meta, split, entry, ds.opts.plans or ds.prepared)
            check_vocab(report, scan, ds.n_vocab)
            if not ds.targets:
                key = Path(label)
                ds.scans[key] = scan
                ds.targets.append(Target(key, label, split))


def _chat(meta) -> bool:
    """The data folder holds conversations (``encode --chat``)."""
    return (meta.extra.get("records") or {}).get("kind") == "chat"


def _check_length(report: Report, label: str, scan: FileScan, T: int | None, meta, split: str, entry: dict,
                  plans=()) -> None:
    """min_length, skipped for a split empty by design (its fraction 0), as min_length says of the .bin."""
    if scan.n == 0 and entry.get("tokens") == 0 and meta.fraction_of(split) == 0:
        report.add(MIN_LENGTH, label, Status.SKIP, f"empty by design: meta.json's split fraction for {split} is 0", tokens=0)
    else:
        check_min_length(report, scan, T, planned=bool(plans))


def verify_llmc(report: Report, path: Path, groups: dict, opts) -> Report:
    """verify of llm.c shards named on their own: each group of shards is one stream. Shards
    a winsample data folder wrote (its meta.json above their ``llmc/`` folder, or ``--meta``,
    lists them: ``layouts.llmc_owner``) are compared with what it records, read with its
    tokenizer: a folder or glob must hold all of a split's shards, one shard file is compared
    alone. Others are read as their headers say (version 1: uint16, version 7: uint32) with
    ``encoding`` (default gpt2 for version 1; version 7 needs it: InputError). ``opts``: VerifyOptions."""
    owner = tokensrc.llmc_owner(groups, opts.meta_path)
    fmt = _stream_format(groups)
    if fmt is not None:  # the header says the width: a --dtype that contradicts it is refused
        tokensrc.width(opts.dtype, fmt.dtype, f"{path}'s llm.c header")
    if owner is None and opts.encoding is None and fmt == tokensrc.LLMC_V7:
        raise InputError(f"{path}: {tokensrc.NEEDS_ENCODING}")
    if owner is not None and owner.problem is not None:
        report.add(META, str(owner.meta_file), Status.FAIL, f"{owner.problem}: the shards cannot be compared with what it records")
        if owner.meta is None or not owner.groups:
            return report
    got = _llmc_tokenizer(report, owner, opts.encoding)
    if got is None:
        return report
    enc, n_vocab, eot = got
    targets, scans = [], {}
    for name, files in groups.items():
        _check_group(report, path, groups, name, files, owner, n_vocab, eot, opts, targets, scans)
    _report_owner(report, path, groups, owner, enc, n_vocab, fmt)
    ctx = Dataset(path, None, targets=targets, enc=enc, n_vocab=n_vocab, scans=scans,
                  opts=dataclasses.replace(opts, min_coverage=DEFAULT_MIN_COVERAGE))  # not --min-coverage (as before)
    check_plans(report, ctx)
    run_stage("final", report, ctx)
    return report


def _stream_format(groups: dict) -> tokensrc.LlmcFormat | None:
    """The format of the first shard whose header reads (the checks report the others)."""
    for files in groups.values():
        for f in files:
            try:
                return tokensrc.read_llmc_header(f).fmt
            except WinsampleError:
                continue
    return None


def _llmc_tokenizer(report: Report, owner, encoding: str | None):
    """(tokenizer, n_vocab, eot) the shards are read with: their meta.json's, else ``encoding``;
    None after a failing meta line when meta.json's does not load."""
    if owner is not None:
        enc, err = load_meta_tokenizer(owner.meta.tokenizer, owner.meta_file)
        if enc is None:
            report.add(META, str(owner.meta_file), Status.FAIL, f"{owner.meta_file}: its tokenizer does not load: {err}")
            return None
        return enc, owner.meta.n_vocab, owner.meta.tokenizer.get("eot", getattr(enc, "eot", None))
    try:
        enc = tokenizer.resolve(encoding)  # a name, or a tokenizer file or folder; none: gpt2
    except WinsampleError as e:
        raise InputError(str(e)) from None
    return enc, enc.n_vocab, getattr(enc, "eot", None)


def _check_group(report: Report, path: Path, groups: dict, name: str, files: list[Path], owner, n_vocab: int, eot,
                 opts, targets: list, scans: dict) -> None:
    """One group of shards named on their own: its llm.c checks, then min_length and vocab_range."""
    label = files[0].name if len(files) == 1 else f"{name}_*.bin ({len(files)} shards)"
    group = owner.groups.get(name) if owner is not None else None
    if group is not None and group.partial and not path.is_file():  # a shard lost from the folder, or left out of the glob
        report.add(LLMC_SHARDS, label, Status.FAIL, f"{owner.meta_file} lists {len(group.entry['shards'])} {group.split} shard(s);"
                   f" {len(group.missing)} not here: {', '.join(group.missing[:5])}{', …' if len(group.missing) > 5 else ''}",
                   missing=group.missing)
        return
    scan, problems = scan_llmc(files, n_vocab, label, opts.progress)
    check_llmc(report, label, scan, problems, eot, group.compared() if group is not None else None,
               part=group is not None and group.partial, dtype=owner.meta.dtype if group is not None else None,
               chat=group is not None and _chat(owner.meta))
    gone = tokensrc.missing_shards(files)
    if gone and group is None:  # no meta.json to say how many there were: a gap in the numbers is the only sign
        report.add(LLMC_SHARDS, label, Status.WARN, f"{len(gone)} shard number(s) missing between the first and the last:"
                   f" {', '.join(gone[:5])}{', …' if len(gone) > 5 else ''} (a shard lost, or left out of the glob)",
                   missing=gone)
    if scan is not None:
        check_min_length(report, scan, opts.T, planned=bool(opts.plans))
        check_vocab(report, scan, n_vocab)
        # several groups (a folder of train and val shards): each stream as a path that opens it alone,
        # whose name is the one a plan records (``windows 'llmc/train_*.bin'``: ``train_*.bin``)
        key = path if len(groups) == 1 else files[0] if len(files) == 1 else files[0].parent / f"{name}_*.bin"
        scans[key] = scan
        targets.append(Target(key, label))


def _report_owner(report: Report, path: Path, groups: dict, owner, enc, n_vocab: int, fmt=None) -> None:
    """The meta line of shards named on their own: no meta.json, or the one that lists them."""
    if owner is None:
        report.add(META, str(path), Status.SKIP,
                   f"no meta.json: llm.c shards read as {(fmt or tokensrc.LLMC_V1).ids}, n_vocab {n_vocab} ({enc.name}): headers, sizes, vocabulary and EOT"
                   " document starts checked; no checksums, document counts or split leakage to compare")
    elif owner.problem is None:
        unlisted = [n for n in groups if n not in owner.groups]
        report.add(META, str(owner.meta_file), Status.WARN if unlisted else Status.PASS,
                   f"{owner.meta_file} lists these shards (layouts.llmc): their sizes, counts and checksums are compared with it"
                   f" (llmc_shards), read with its tokenizer ({enc.name}, n_vocab {n_vocab}); split leakage: `winsample verify"
                   f" {owner.meta_file.parent}`" + (f"; not listed there, so not compared: {', '.join(unlisted)}" if unlisted else ""))
