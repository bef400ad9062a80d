"""``winsample windows``: plan a token file and write the plans (.npy + sidecar, txt, jsonl).

Every check happens before anything is written; .npy plans of one run are staged and moved into
place as one set. The planning itself is ``winsample.planning``.
"""

from __future__ import annotations

import dataclasses
import json
import os
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import numpy as np

from .. import disk, formats, provenance, tokensrc
from ..errors import ConfigError, DataError, InputError
from ..planning import Options, build_plans, check_options, documents, load_tokenizer, shard_rows, shard_stats
from ..tokenizer.offsets import CharIndex, CharOffsets

PACKING_FIGURES = ("segments", "fill", "padding_tokens", "documents_split", "documents_truncated", "documents_dropped")
MATERIALIZE_ROWS = 4096  # rows gathered per batch when materializing: memory ~ rows × span × 8 B


def output_paths(out: str, T: int, multi: bool, shards: int | None) -> list[Path]:
    base = formats.plan_for_scale(out, T) if multi else Path(out)
    if not shards:
        return [base]
    return [formats.plan_shard(base, r, shards) for r in range(shards)]


def check_writable(path: Path) -> None:
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        why = "is not a folder" if folder.exists() else "does not exist"
        raise InputError(f"{path}: cannot write: {folder} {why}")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(f"{path}: cannot write: folder {folder} is not writable")
    disk.check_replaceable(path)


def source_entry(src: tokensrc.OpenSplit, progress=None) -> formats.PlanSource:
    """The sidecar's ``source``: checksum from meta.json when it describes the file, else streamed."""
    if src.files is not None:  # llm.c shards: the checksum verify computes for the stream
        checksum = tokensrc.llmc_stream_checksum(src.files, progress)
    else:
        checksum = src.checksum if src.entry is not None else disk.checksum_file(src.path, progress)
    one_file = src.files is None and not src.sharded and src.path.is_file()  # a .bin (or a Megatron prefix's)
    return formats.PlanSource(path=str(src.path), file=src.path.name, bytes=src.nbytes, checksum=checksum,
                              dtype=src.dtype, tokens=src.n, sample=disk.sample_checksum(src.path) if one_file else None)


def materialize(path: Path, rows: np.ndarray, tokens, span: int, pad_id: int, dtype: str) -> None:
    """(n, span) token windows as .npy at ``path``, short windows padded with ``pad_id``; atomic."""
    from numpy.lib.format import open_memmap

    with disk.atomic_path(path) as tmp:
        arr = open_memmap(tmp, mode="w+", dtype=np.dtype(dtype), shape=(len(rows), span))
        if hasattr(os, "posix_fallocate") and arr.nbytes:
            # claim the disk space now: writing into a mapped sparse file on a full disk is a SIGBUS, not an error
            with open(tmp, "r+b") as f:
                os.posix_fallocate(f.fileno(), 0, os.fstat(f.fileno()).st_size)
        cols = np.arange(span, dtype=np.int64)
        n = len(tokens)
        for lo in range(0, len(rows), MATERIALIZE_ROWS):
            r = rows[lo : lo + MATERIALIZE_ROWS]
            idx = r["start"][:, None] + cols
            w = np.asarray(tokens[np.minimum(idx, max(n - 1, 0))]) if n else np.zeros(idx.shape, dtype)
            w = np.where(cols < r["length"][:, None], w, pad_id)
            arr[lo : lo + len(r)] = w
        arr.flush()
        del arr


def implied_boundaries(bin_path, meta_path=None, encoding=None, dtype=None) -> str:
    """``--boundaries`` when it is not given: ``doc`` for a token file with a loss mask (its
    documents are records: a conversation, a prompt and its response), else ``none``."""
    try:
        src = tokensrc.open_source(bin_path, meta_path, encoding, dtype=dtype)
    except (ConfigError, DataError, InputError):
        return "none"  # the planner opens it again and says what is wrong
    return "doc" if src.entry is not None and src.entry.mask is not None else "none"


def run(bin_path, out: str, o: Options, meta_path=None, stream=None, progress=None) -> list[dict]:
    """Plan ``bin_path`` and write the result; returns one summary dict per plan file set.

    ``out`` is the plan path (``-`` with ``stream``, a text stream, for txt/jsonl).
    Every check happens before anything is written.
    """
    if o.boundaries is None:  # not given: greedy packing places whole documents; records (a loss mask beside the tokens) are never cut
        implied = "doc" if o.pack in (True, "greedy") else implied_boundaries(bin_path, meta_path, o.encoding, o.dtype)
        o = dataclasses.replace(o, boundaries=implied)
    check_options(o)
    multi = len(o.T) > 1
    if not out:
        raise ConfigError("-o is empty: give the plan's file name, or - for --format txt|jsonl on stdout")
    if out == "-":
        if o.format == "npy":
            raise ConfigError("-o - streams text: use --format txt or jsonl, or give a file name for .npy")
    else:
        if out.endswith(("/", os.sep)):
            raise ConfigError(f"-o {out}: names a folder; give the plan's file name, e.g. {out}train.plan.npy")
        disk.refuse_overwrite(written_paths(out, o), formats.dataset_files(bin_path, meta_path))
        formats.refuse_plan_files(written_paths(out, o))  # another plan's sidecar or windows
        stage = formats.plan_stage_path(out)  # removed whole before and after the run: an input there would go with it
        inside = disk.first_inside(stage, [p for p in (bin_path, meta_path) if p and str(p) != "-"])
        if inside is not None:
            raise ConfigError(f"{inside}: is inside {stage}, which this run writes and removes; move it out, or pick another -o")
        suffix = Path(out).suffix.lower()
        text_name = suffix in (".txt", ".tsv", ".jsonl", ".json")
        if (o.format == "npy" and text_name) or (o.format != "npy" and suffix == ".npy"):
            raise ConfigError(f"-o {out} with --format {o.format}: the name says {suffix[1:]}, the contents would be"
                              f" {o.format}; name it {Path(out).stem}.{'npy' if o.format == 'npy' else o.format} or pick the other --format")
        for p in written_paths(out, o):  # the sidecars and materialized windows too: each is renamed into place
            check_writable(p)
    return _plan_and_write(bin_path, out, o, meta_path, stream, progress, multi)


def written_paths(out: str, o: Options) -> list[Path]:
    """Every file a run with ``-o out`` writes: plans, their sidecars and materialized windows."""
    if o.format != "npy":
        return [Path(out)]
    paths = []
    for T in o.T:
        for p in output_paths(out, T, len(o.T) > 1, o.shards):
            paths += [p, formats.plan_sidecar(p)] + ([formats.materialized_path(p)] if o.materialize else [])
    return paths


def wide_ids_hint(src: tokensrc.OpenSplit, declared: str | None) -> float | None:
    """``formats.wider_ids_share`` of a bare file read as uint16 because nothing said otherwise
    (no meta.json, no header, no ``--dtype``): its ids look like uint32 ones. None otherwise."""
    if declared is not None or src.entry is not None or src.layout is not None or src.itemsize != 2:
        return None
    return formats.wider_ids_share(src.tokens)


def _plan_and_write(bin_path, out: str, o: Options, meta_path, stream, progress, multi: bool) -> list[dict]:
    plans = build_plans(bin_path, o, meta_path, progress)
    # still read as uint16 (nanoGPT's convention, the same plan as before), but said: the plan is of a wrong reading
    share = wide_ids_hint(plans[0]["src"], o.dtype) if plans else None
    summaries: list[dict] = []
    # .npy plans: every file of this run is written into a staging folder beside the plan and
    # moved into place as one set (sidecars last), so a crash leaves the old set or the new one.
    # Writers into one folder take turns (disk.locked_folder): two runs writing one plan at
    # once each leave a complete set, never the plan of one with the tokens of the other.
    with disk.locked_folder(Path(out).parent) if o.format == "npy" else nullcontext():
        _write_all(plans, out, o, multi, stream, summaries)
    if share is not None:
        for s in summaries:
            s["looks_uint32"] = {"file": str(plans[0]["src"].path), "zero_high_halves": share}
    return summaries


def _write_all(plans, out: str, o: Options, multi: bool, stream, summaries: list) -> None:
    stage = None
    names: list[str] = []
    try:
        try:
            stage = formats.plan_staging_dir(out) if o.format == "npy" else None  # in the try: see encode
        except OSError as e:  # e.g. a folder that lists as writable but is not (/proc)
            raise InputError(f"{out}: cannot write beside it: {e.strerror or e}") from None
        try:
            _write_plans(plans, out, o, multi, stream, stage, names, summaries)
            if stage is not None:
                names.sort(key=lambda n: n.endswith(".json"))  # sidecars last: a plan is current only with its sidecar
                # files an older run with this -o wrote (another -T, --shards, --materialize) go with
                # the same commit: a set is never mixed with an older one's files; plans of other runs stay
                stale, older = formats.stale_family(out, set(names))  # older: plans of before `output` was recorded, said, not removed
                disk.commit_staged(stage, Path(out).parent, names, remove=stale)
                if older and summaries:
                    summaries[-1].setdefault("warnings", []).append(
                        f"{len(older)} file(s) beside {out} are named like this plan's other -T, --shards or --materialize files"
                        f" but record no run (written before winsample recorded it): {', '.join(older[:4])}"
                        f"{', …' if len(older) > 4 else ''}; left in place: remove them if they are an older set of this plan")
        except BrokenPipeError:  # `-o - | head` closed stdout: the CLI stops quietly, as after any command
            raise
        except OSError as e:  # a full disk, a quota: name the file and say what happened
            where = e.filename or out
            raise InputError(f"{where}: cannot write: {disk.os_error_text(e)}; nothing was written") from None
    except BaseException:
        if o.format == "npy":
            formats.recover_plan(out)  # no COMMIT mark yet: drops the staging folder
        raise


def _write_plans(plans, out: str, o: Options, multi: bool, stream, stage, names: list, summaries: list) -> None:
    for plan in plans:
        rows, params, stats, src = plan["rows"], plan["params"], plan["stats"], plan["src"]
        summary = {"windows": stats["windows"], "span": params["span"], "coverage": stats["coverage"],
                   "uncovered_tail": stats["uncovered_tail"], "T": params["T"], "stride": params["stride"],
                   "overlap": params["overlap"], "offset": params["offset"], "tokens": src.n,
                   "covered_tokens": stats["covered_tokens"], "uncovered_tokens": stats["uncovered_tokens"],
                   "uncovered_head": stats["uncovered_head"], "uncovered_dropped": stats["uncovered_dropped"], "files": []}
        if "window" not in (rows.dtype.names or ()):  # window rows (not best-fit segments): how many are short
            short = rows["length"] < params["span"]
            summary["short_windows"] = int(np.count_nonzero(short))
            summary["short_tokens"] = int(rows["length"][short].sum(dtype=np.int64))
        if params.get("pack") is True:  # greedy packing (best-fit's figures are added below)
            summary["pack"] = "greedy"
        if params["boundaries"] == "doc" and "fill" not in stats:  # the documents cut: those longer than the span
            lengths = np.asarray(plan["doc_ends"], np.int64) - np.asarray(plan["doc_starts"], np.int64)
            summary["long_documents"] = int(np.count_nonzero(lengths > params["span"]))
        if plan.get("warnings"):
            summary["warnings"] = list(plan["warnings"])
        if "fill" in stats:  # a best-fit plan: how full its windows are, what --long did
            summary.update({k: stats[k] for k in PACKING_FIGURES}, uncovered_dropped=stats["uncovered_dropped"],
                           long=params["long"])
        if o.format != "npy":
            _write_text(out, rows, o, plan, stream)
            summary["files"] = [] if out == "-" else [out]
            summaries.append(summary)
            continue
        source = source_entry(src)
        paths = output_paths(out, plan["T"], multi, o.shards)
        parts = shard_rows(rows, o.shards) if o.shards else [rows]
        pad_id = None
        # a bare file's ids are the tokenizer --encoding named: recorded, so mix can tell them from another's
        tok_entry = src.tokenizer_entry or (src.tokenizer.describe() if o.encoding else None)
        if o.materialize:
            enc = plan["enc"]
            pad_id = enc.eot if enc else src.eot
        for r, (p, part) in enumerate(zip(paths, parts)):
            side_params = dict(params, shard=r if o.shards else None)
            here = os.path.relpath(os.path.realpath(source.path), os.path.realpath(p.parent))  # found again when both move together
            side = formats.PlanSidecar(source=dataclasses.replace(source, from_plan=here), params=side_params, stats=stats,
                                       tokenizer=tok_entry or None, output=Path(out).name)
            if o.shards:  # a shard's stats describe its own rows; the whole plan's go to plan_stats
                side.stats = formats.PlanStats(shard_stats(part, src.n, plan["doc_starts"], plan["doc_ends"]))
                side.plan_stats = formats.PlanStats(stats)
            if o.materialize:
                mp = formats.materialized_path(p)
                with disk.naming(mp):
                    materialize(stage / mp.name, part, plan["tokens"], params["span"], pad_id, src.dtype)
                side.materialized = {"file": mp.name, "shape": [int(len(part)), params["span"]],
                                     "dtype": src.dtype, "pad_id": int(pad_id)}
                summary["files"].append(str(mp))
                names.append(mp.name)
            with disk.naming(p):
                formats.write_plan(stage / p.name, part, side)
            names += [p.name, formats.plan_sidecar(p).name]
            summary["files"].append(str(p))
        summaries.append(summary)


def _write_text(out: str, rows: np.ndarray, o: Options, plan: dict, stream) -> None:
    def lines():
        if o.format == "txt":
            for lo in range(0, len(rows), 65536):  # rows formatted in batches, not one by one
                r = rows[lo : lo + 65536]
                yield "".join(f"{s}\t{n}\n" for s, n in zip(r["start"].tolist(), r["length"].tolist()))
            return
        enc = None
        # With provenance, "doc" is the document the window starts in (a window planned across
        # documents included) and "source" where that document came from.
        tracer = provenance.tracer_for(plan["src"], plan.get("meta_path"))
        if o.decode:
            enc = plan["enc"] or load_tokenizer(plan["src"], "--decode")
            where = _Where(rows, plan, tracer, enc)
        for lo in range(0, len(rows), 65536):
            batch = rows[lo : lo + 65536]
            docs = tracer.doc_at(batch["start"]).tolist() if tracer is not None and len(batch) else None
            for k, row in enumerate(batch):
                i = lo + k
                start = int(row["start"])
                obj: dict[str, Any] = {"start": start, "length": int(row["length"]), "doc": int(row["doc"])}
                if docs is not None:
                    obj["doc"] = docs[k]
                    obj["doc_offset"] = start - int(tracer.starts[docs[k]])  # tokens into the document
                obj["fresh"] = int(row["fresh"])
                if docs is not None:
                    obj["source"] = tracer.document(docs[k])
                if enc is not None:
                    s = obj["start"]
                    ids = np.asarray(plan["tokens"][s : s + obj["length"]])
                    if len(ids) and int(ids.max()) >= enc.n_vocab:  # tiktoken raises KeyError on them
                        j = int(np.argmax(ids >= enc.n_vocab))
                        raise DataError(f"{plan['src'].path}: token {s + j}: id {int(ids[j])} is not in the tokenizer"
                                        f" ({enc.name}, n_vocab {enc.n_vocab}); cannot --decode window {i}")
                    obj["text"] = enc.decode(ids.tolist())
                    obj.update(where.row(i, start, obj["length"]))
                yield json.dumps(obj, ensure_ascii=False) + "\n"

    if out == "-":
        for chunk in lines():
            stream.write(chunk)
    else:
        with disk.naming(out), disk.atomic_open(out, "w") as f:
            for chunk in lines():
                f.write(chunk)


class _Where:
    """A decoded row's place in its document's text (``--decode``): ``window`` (its row number),
    ``char_start``/``char_end`` (characters into the document's text, end exclusive, whole
    characters; null for a window that runs past its document's end), ``split_char`` (a window
    edge falls inside a character, so the range was widened to it) and ``prev``/``next`` (the row
    numbers of the windows before and after it in the same document, by start; null at the ends).
    The document separator (EOT, BOS) is no character of any document."""

    def __init__(self, rows: np.ndarray, plan: dict, tracer, enc):
        n = int(plan["src"].n)
        if tracer is not None:
            self.docs = tracer.doc_at(rows["start"]).astype(np.int64) if len(rows) else np.zeros(0, np.int64)
            self.ds = np.asarray(tracer.starts, np.int64)
            self.de = np.append(self.ds[1:], n)
        else:  # the documents by the file's own edges (its doc index, else EOT), whatever the plan's boundaries
            try:
                self.ds, self.de = (np.asarray(x, np.int64) for x in documents(plan["src"], "doc", plan["tokens"]))
            except ConfigError:  # no document edges to find (no index, no EOT): the file is one document
                self.ds, self.de = np.zeros(1, np.int64), np.full(1, n, np.int64)
            self.docs = np.searchsorted(self.ds, rows["start"], "right").astype(np.int64) - 1
        order = np.lexsort((rows["start"], self.docs))
        same = self.docs[order[1:]] == self.docs[order[:-1]]
        self.prev = np.full(len(rows), -1, np.int64)
        self.next = np.full(len(rows), -1, np.int64)
        self.prev[order[1:][same]] = order[:-1][same]
        self.next[order[:-1][same]] = order[1:][same]
        try:
            self.index = CharIndex(plan["tokens"], CharOffsets(enc, zero=(enc.eot, enc.bos)))
        except ConfigError:  # a tokenizer whose tokens do not spell the text: no character offsets
            self.index = None

    def row(self, i: int, start: int, length: int) -> dict:
        out: dict[str, Any] = {"window": i}
        d, end = int(self.docs[i]), start + length
        ok = self.index is not None and 0 <= d < len(self.ds) and self.ds[d] <= start and end <= self.de[d]
        if ok:
            base = self.index.chars(int(self.ds[d]))
            a_in, b_in = self.index.inside(start), self.index.inside(end) and end < self.de[d]
            out["char_start"] = self.index.chars(start) - base - a_in
            out["char_end"] = self.index.chars(end) - base
            out["split_char"] = bool(a_in or b_in)
        else:
            out["char_start"] = out["char_end"] = out["split_char"] = None
        out["prev"] = int(self.prev[i]) if self.prev[i] >= 0 else None
        out["next"] = int(self.next[i]) if self.next[i] >= 0 else None
        return out
