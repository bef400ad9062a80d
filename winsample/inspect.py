"""A quick look at winsample's files without writing anything: ``winsample inspect PATH``.

``inspect_path`` returns a plain dict (JSON-ready) describing one of:

- a token file (``*.bin``): its meta.json summary and the ids ``[at, at+count)`` (token indices,
  end exclusive), each decoded on its own so token boundaries show;
- a data folder: the meta.json summary of every split;
- a window plan (``*.npy`` with its ``.npy.json`` sidecar): parameters, counts and the rows
  ``[at, at+count)`` in file order; when its data has provenance, each row also names the
  document it starts in (``doc``), its token offset there (``doc_offset``) and that document's
  ``source`` (input path, line, byte offset, id), shown as ``path:line id=…``; a best-fit
  packed plan: its packing figures and windows ``[at, at+count)``, each as its segments;
- a mixture (``winsample mix``): its sources, the epoch, and positions ``[at, at+count)`` of
  epoch 0 as ``winsample.Loader`` serves them with seed 0.

``render_text`` turns that dict into the lines people read. Neither prints; nothing re-hashes
a file (checksums are shown as recorded in meta.json / the sidecar).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from . import formats, provenance, tokenizer, tokensrc
from .errors import ConfigError, DataError, InputError, WinsampleError
from .terminal import hex_bytes, terminal_safe

DEFAULT_COUNT = 32  # tokens (or plan rows) shown: about one line of prose
BOUNDARY = "│"  # drawn between two tokens' decoded pieces
NEWLINE = "⏎"
_SHOWN_CONTROLS = {"\n": NEWLINE, "\r": "␍", "\t": "⇥"}


class AtOutOfRange(InputError):
    """``--at`` lies outside the file or plan; the CLI shows it as a bad ``--at`` value."""


# --- rendering one token -----------------------------------------------------------------


def render_piece(data: bytes) -> str:
    """One token's bytes as a visible string.

    Valid UTF-8 shows as text, with newline/CR/tab as ⏎ ␍ ⇥ and other control characters as
    hex; bytes that are not valid UTF-8 on their own (part of a multi-token character) show as
    hex, e.g. ``⟨e6 bb⟩``.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return hex_bytes(data)
    out = []
    for ch in text:
        if ch in _SHOWN_CONTROLS:
            out.append(_SHOWN_CONTROLS[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(hex_bytes(ch.encode()))
        else:
            out.append(ch)
    return "".join(out)


def token_bytes(enc, ids: list[int]) -> list[bytes | None]:
    """Each id's bytes, None for an id the tokenizer does not know.

    A Python loop, but only over the few ids a person asked to see (``--count``).
    """
    out = []
    for i in ids:
        try:
            out.append(enc.token_bytes(i))
        except KeyError:
            out.append(None)
    return out


def decode_pieces(enc, ids: list[int]) -> list[str]:
    """``render_piece`` of each id; an id the tokenizer does not know shows as ``⟨id N?⟩``."""
    return [f"⟨id {i}?⟩" if b is None else render_piece(b) for i, b in zip(ids, token_bytes(enc, ids))]


def _decode_text(enc, ids: list[int]) -> str:
    """The ids as one text; bytes split across the span's ends show as U+FFFD."""
    return b"".join(b for b in token_bytes(enc, ids) if b is not None).decode("utf-8", errors="replace")


# --- what a path is ----------------------------------------------------------------------


def kind_of(path: Path) -> str:
    """'data' (a folder or its meta.json), 'plan' (a .npy or its .npy.json sidecar) or 'tokens'."""
    if path.is_dir() or path.name == formats.META_JSON:
        return "data"
    if path.name.endswith(".npy") or path.name.endswith(".npy.json"):
        return "plan"
    return "tokens"


def inspect_path(
    path: str | Path,
    at: int = 0,
    count: int = DEFAULT_COUNT,
    meta_path: str | Path | None = None,
    encoding: str | None = None,
    dtype: str | None = None,
) -> dict:
    """Describe ``path`` (token file, data folder or plan) as a JSON-ready dict.

    ``at``/``count``: the token indices (for a .bin) or plan rows (for a plan) shown,
    ``[at, at+count)``, clipped at the end; AtOutOfRange if ``at`` is not in ``[0, N)``
    (``at`` 0 is allowed for an empty file). ``meta_path``: meta.json to use instead of the
    one beside a .bin. ``encoding``: tokenizer for decoding, instead of the one meta names.
    ``dtype``: a bare token file's width (``--dtype``; ConfigError against a record that says otherwise).
    A split kept in shards (``encode --engine ray`` without ``--merge``) is inspected by its
    logical name, ``data/train.bin``.
    """
    if count < 0:
        raise InputError(f"count {count} is negative")
    foreign = tokensrc.foreign_layout(path, meta_path)
    if foreign is not None:
        return inspect_foreign(str(path), *foreign, at, count, encoding, meta_path, dtype)
    path = Path(path)
    kind = kind_of(path)
    src = None
    if not path.exists():
        if kind != "tokens":
            raise InputError(f"{path}: no such file or folder")
        try:
            src = tokensrc.open_source(path, meta_path, encoding, strict=False, dtype=dtype)
        except InputError:
            raise InputError(f"{path}: no such file or folder") from None
    if kind == "data":
        return inspect_data(path.parent if path.name == formats.META_JSON and path.is_file() else path)
    if kind == "plan":
        if path.name.endswith(".npy.json"):
            path = path.with_name(path.name[: -len(".json")])
        return inspect_plan(path, at, count)
    return inspect_tokens(path, at, count, meta_path, encoding, src, dtype)


def _check_at(at: int, n: int, what: str, where: Path) -> None:
    if at < 0 or (at >= n and not (at == 0 and n == 0)):
        raise AtOutOfRange(f"{where}: position {at} is outside [0, {n}) ({n} {what})")


def _split_summary(folder: Path, entry: formats.SplitEntry) -> dict:
    """A split's meta entry plus whether its file (every shard file, for a sharded split) is
    there with the recorded size (one stat each)."""
    out = entry.to_json()
    files = entry.files(folder)
    out["present"] = all(p.is_file() for p, _ in files)
    out["size_matches"] = out["present"] and all(p.stat().st_size == size for p, size in files)
    return out


def _meta_summary(meta: formats.Meta) -> dict:
    out = {"winsample_version": meta.winsample_version, "version": meta.version, "dtype": meta.dtype,
           "tokenizer": meta.tokenizer, "eot_appended": meta.eot_appended, "split": meta.split}
    out = {k: v for k, v in out.items() if v is not None}
    if meta.extra.get("bos_prepended"):  # encode --bos: each document's first id is the BOS (verify and windows count it)
        out["bos_prepended"] = True
    if meta.extra.get("backend"):
        out["backend"] = meta.extra["backend"]
    out["inputs"] = len(meta.inputs or [])
    out["layouts"] = list(tokensrc.written(meta.to_json()))
    prov = formats.prov_entries(meta)
    if prov is not None:  # records per split and the id field (none before provenance existed)
        out["provenance"] = {"id_field": prov[0], **{k: v.get("documents") for k, v in prov[1].items()}}
    return out


def inspect_data(folder: Path) -> dict:
    """The meta.json summary of a data folder, one entry per split."""
    meta_file = folder / formats.META_JSON
    if pending := formats.unfinished_commit(folder):
        raise DataError(f"{folder}: its set is not whole{pending}")
    if not meta_file.is_file():
        raise InputError(f"{folder}: no {formats.META_JSON} here; pass a .bin file or a folder written by `winsample encode`")
    meta = formats.load_meta(meta_file)
    splits = {name: _split_summary(folder, s) for name, s in meta.splits.items()}
    warnings = []
    kept = {tokensrc.NANOGPT, tokensrc.MEGATRON} & set(tokensrc.written(meta.to_json()))  # else no .bin is kept (llm.c shards only)
    for s in meta.splits.values() if kept else ():  # what the summary's present / size_matches say, in a line a person sees
        for p, size in s.files(folder):
            if not p.is_file():
                warnings.append(f"{p}: missing, meta.json records it; run `winsample verify`")
            elif p.stat().st_size != size:
                warnings.append(f"{p}: {p.stat().st_size:,} bytes, meta.json records {size:,}; run `winsample verify`")
    return {
        "kind": "data",
        "path": str(folder),
        "meta": str(meta_file),
        **_meta_summary(meta),
        "checksums": "as recorded",
        "splits": splits,
        "warnings": warnings,
    }


def inspect_tokens(
    path: Path, at: int, count: int, meta_path: str | Path | None = None, encoding: str | None = None,
    src: tokensrc.OpenSplit | None = None, dtype: str | None = None,
) -> dict:
    """Meta summary of a token file and its ids ``[at, at+count)`` decoded one by one (``dtype``:
    a bare file's width, ``--dtype``; without it, a warning when its ids look like uint32 ones)."""
    warnings: list[str] = []
    if src is None:
        src = tokensrc.open_source(path, meta_path, encoding, strict=False, dtype=dtype)
    if src.meta is None and meta_path is None and (guess := tokensrc.find_meta(path)) is not None:
        warnings.append(f"{guess} does not describe {path.name}; reading it as {src.dtype}")
    tokens = src.tokens
    n = len(tokens)
    _check_at(at, n, "tokens", path)
    ids = np.asarray(tokens[at : at + count]).astype(np.int64).tolist()

    result: dict = {"kind": "tokens", "path": str(path), "dtype": src.dtype, "tokens": n}
    if src.meta is not None:
        entry = src.entry.to_json()
        result["split"] = src.name
        result.update({k: entry[k] for k in ("documents", "max_token", "checksum") if k in entry})
        result["checksum_note"] = "as recorded in meta.json, not recomputed"
        result["meta"] = {"path": str(src.meta_path), **_meta_summary(src.meta)}
        if src.entry.tokens != n:
            warnings.append(f"{path}: holds {n} tokens but meta.json records {src.entry.tokens}; run `winsample verify`")
    else:
        result["meta"] = None
        if meta_path is None and not warnings:
            warnings.append(f"no {formats.META_JSON} beside {path.name}: read as {src.dtype}")
        share = formats.wider_ids_share(tokens) if dtype is None and not src.stray else None
        if share is not None:
            warnings.append(f"{share:.0%} of its odd uint16 halves are near zero, as uint32 ids read as uint16 are:"
                            " if it holds uint32 ids, pass --dtype uint32")

    enc = _tokenizer_for(src, warnings)
    result["decoded_with"] = enc.name if enc is not None else None
    result["at"] = at
    result["ids"] = ids
    trained = _trained(src, at, len(ids))
    if trained is not None:  # a records dataset: which of these ids are trained labels
        result["trained"] = trained
    if enc is not None:
        pieces = decode_pieces(enc, ids)
        result["pieces"] = pieces
        result["marked"] = BOUNDARY.join(pieces)
        result["text"] = _decode_text(enc, ids)
        if trained is not None:
            runs = [0, *[k for k in range(1, len(ids)) if trained[k] != trained[k - 1]], len(ids)]
            result["trained_text"] = "".join(
                f"«{_decode_text(enc, ids[a:b])}»" if trained[a] else _decode_text(enc, ids[a:b]) for a, b in zip(runs, runs[1:]))
    result["warnings"] = warnings
    return result


def _trained(src: tokensrc.OpenSplit, at: int, count: int) -> list[int] | None:
    """The loss mask's 0/1 of tokens ``[at, at + count)`` (``encode --chat`` / ``--prompt-field``), or None."""
    mask = src.entry.mask if src.entry is not None else None
    if mask is None:
        return None
    try:
        with open(src.path.parent / mask.file, "rb") as f:
            f.seek(at)
            return list(f.read(count))
    except OSError:
        return None


def inspect_foreign(path: str, layout: str, what, at: int, count: int, encoding: str | None,
                    meta_path: str | Path | None = None, declared: str | None = None) -> dict:
    """Ids ``[at, at+count)`` of llm.c shards (the first group of ``what``) or a Megatron prefix,
    with what their headers / index say; nothing is compared. Shards a winsample data folder's
    meta.json lists (``tokensrc.llmc_owner``) are decoded with its tokenizer."""
    warnings: list[str] = []
    owner = tokensrc.llmc_owner(what, meta_path) if layout == tokensrc.LLMC else None
    if owner is not None and owner.problem is not None:
        warnings.append(f"{owner.problem}; decoded as if there were none")
        owner = None if owner.meta is None else owner
    if layout == tokensrc.MEGATRON:
        idx = tokensrc.read_megatron_index(f"{what}.idx")
        dtype = tokensrc.megatron_token_dtype(idx)
        tokens = formats.open_tokens(f"{what}.bin", dtype)
        extra = {"index": str(idx.path), "dtype_code": idx.dtype_code, "sequences": idx.sequences, "documents": idx.documents}
        tokensrc.width(declared, dtype, f"{idx.path}")
    else:
        if len(what) > 1:
            warnings.append(f"{len(what)} groups of shards ({', '.join(what)}): showing {next(iter(what))}")
        files = next(iter(what.values()))
        counts, fmt = tokensrc.read_llmc_stream(files)
        tokens = tokensrc.ConcatTokens(files, counts, fmt.dtype, header_bytes=tokensrc.LLMC_HEADER_BYTES)
        dtype = tokensrc.width(declared, fmt.dtype, f"{files[0]}'s llm.c header")
        extra = {"shards": [{"file": str(f), "tokens": c} for f, c in zip(files, counts)],
                 "header": {"magic": fmt.magic, "version": fmt.version}}
    n = len(tokens)
    _check_at(at, n, "tokens", Path(path))
    ids = np.asarray(tokens[at : at + count]).astype(np.int64).tolist()
    if owner is not None:
        warnings.append(f"{owner.meta_file} lists these shards: `winsample verify {path}` compares their checksums with it")
        enc = tokenizer.from_meta(owner.meta.tokenizer, owner.meta_file.parent) if encoding is None else tokenizer.resolve(encoding)
    else:
        warnings.append(f"no {formats.META_JSON}: a {layout} layout read as {dtype}; checksums are not recorded anywhere (run `winsample verify`)")
        enc = None
        if encoding is None and layout == tokensrc.LLMC and dtype == tokensrc.LLMC_V7.dtype:
            warnings.append(f"cannot decode: {tokensrc.NEEDS_ENCODING}; showing ids only")
        else:
            enc = tokenizer.resolve(encoding)  # no meta.json: --encoding, else gpt2
    result: dict = {"kind": "tokens", "layout": layout, "path": path, "dtype": dtype, "tokens": n, **extra, "meta": None}
    if owner is not None:
        result["listed_in"] = str(owner.meta_file)  # the data folder's meta.json (its checksums: verify)
    result.update(decoded_with=enc.name if enc is not None else None, at=at, ids=ids)
    if enc is not None:
        pieces = decode_pieces(enc, ids)
        result.update(pieces=pieces, marked=BOUNDARY.join(pieces), text=_decode_text(enc, ids))
    result["warnings"] = warnings
    return result


def _tokenizer_for(src: tokensrc.OpenSplit, warnings: list[str]):
    """``src.tokenizer`` (the one rule), or None. An explicit ``--encoding`` must load; the one
    meta names may not (a tokenizer file that moved, ranks that differ), in which case only ids
    are shown, with a warning."""
    if src.encoding is not None:
        return src.tokenizer
    try:
        return src.tokenizer
    except ConfigError as e:
        warnings.append(f"cannot decode: {e}; showing ids only")
        return None


def inspect_plan(path: Path, at: int, count: int) -> dict:
    """Parameters, source, stats and counts of a window plan, and its rows ``[at, at+count)``
    (a best-fit plan: its windows ``[at, at+count)``, each as its segments: ``inspect_packed``)."""
    rows, side = formats.load_plan(path)
    if side.mixture:
        return inspect_mixture(path, rows, side, at, count)
    if side.best_fit:
        return inspect_packed(path, rows, side, at, count)
    n = len(rows)
    _check_at(at, n, "windows", path)
    warnings = []
    lengths = rows["length"].astype(np.int64)
    counts = {
        "windows": n,
        "length_min": int(lengths.min()) if n else 0,
        "length_max": int(lengths.max()) if n else 0,
        "tokens_spanned": int(lengths.sum()),
        # fresh = leading tokens an earlier window already covered, so length - fresh is new
        "new_tokens": int((lengths - rows["fresh"]).sum()),
        "documents": int(np.unique(rows["doc"]).size),
    }
    exposure = {}
    span, tokens_n = side.span, side.source.tokens
    if side.params.targets and span is not None and tokens_n is not None and n:
        from .train import label_counts  # every window once, as winsample.Loader serves an epoch

        for short, served in (("pad", rows), ("drop", rows[rows["length"] == span])):
            exposure[short] = label_counts(rows, served, tokens_n)
    recorded = side.windows
    if recorded is not None and recorded != n:
        warnings.append(f"{path}: holds {n} windows but its sidecar records {recorded}; run `winsample verify`")
    shown = rows[at : at + count]
    windows = [
        {"row": at + k, "start": int(r["start"]), "length": int(r["length"]), "doc": int(r["doc"]), "fresh": int(r["fresh"])}
        for k, r in enumerate(shown)
    ]
    _trace(path, side, windows, warnings)
    return {**_plan_head(path, side), "counts": counts, "exposure": exposure, "at": at, "windows": windows, "warnings": warnings}


def _trace(path: Path, side: formats.PlanSidecar, rows: list[dict], warnings: list[str]) -> None:
    """Each shown row (a window or a segment) gets the document it starts in, its offset there and
    that document's source, when the plan's data has provenance."""
    try:
        tracer = provenance.plan_tracer(path, side)
    except WinsampleError as e:  # the data changed or its provenance is broken: show the plan anyway
        tracer = None
        warnings.append(f"no sources shown: {e}")
    if tracer is not None:
        for w in rows:  # "doc" becomes the document the window starts in, as windows --format jsonl says
            if not 0 <= w["start"] < tracer.n:  # an edited or broken row (a window's, or a segment's): shown, and named
                warnings.append(f"{path}: row {w['row']} starts at {w['start']}, outside its tokens [0, {tracer.n});"
                                " run `winsample verify`")
                continue
            w.update(tracer.window(w["start"]))


def _plan_head(path: Path, side: formats.PlanSidecar) -> dict:
    return {"kind": "plan", "path": str(path), "sidecar": str(formats.plan_sidecar(path)), "format": formats.PLAN_FORMAT,
            "version": side.version, "source": side.source.to_json(), "params": side.params.to_json(),
            "stats": side.stats.to_json(), "tokenizer": side.tokenizer or {}}


PACKED_FIGURES = ("windows", "segments", "fill", "padding_tokens")  # counted from the rows, compared with the sidecar


def inspect_packed(path: Path, rows: np.ndarray, side: formats.PlanSidecar, at: int, count: int) -> dict:
    """A best-fit plan: its packing figures (windows, segments, fill and padding counted from the
    rows; documents split/truncated/dropped as the sidecar records) and windows ``[at, at+count)``,
    each its segments (row, start, length, doc) side by side."""
    from .train import Plan  # the window view of segment rows (DataError when the windows are misnumbered)

    first = Plan(rows, side, path).segment_index
    W, span = len(first) - 1, side.span
    _check_at(at, W, "windows", path)
    lengths = rows["length"].astype(np.int64)
    totals = np.add.reduceat(lengths, first[:-1]) if W else np.zeros(0, np.int64)
    planned = int(lengths.sum())
    stats = side.stats
    counts = {
        "windows": W, "segments": len(rows),
        "window_tokens_min": int(totals.min()) if W else 0, "window_tokens_max": int(totals.max()) if W else 0,
        "tokens_planned": planned, "fill": planned / (W * span) if W and span else 0.0,
        "padding_tokens": W * span - planned if span else 0, "documents": int(np.unique(rows["doc"]).size),
        "documents_split": stats.documents_split, "documents_truncated": stats.documents_truncated,
        "documents_dropped": stats.documents_dropped, "long": side.params.long,
    }
    warnings = [f"{path}: its rows give {k} {counts[k]!r} but its sidecar records {getattr(stats, k)!r}; run `winsample verify`"
                for k in PACKED_FIGURES if getattr(stats, k) is not None and getattr(stats, k) != counts[k]
                and not (k == "fill" and abs(stats.fill - counts[k]) < 1e-12)]
    windows, segs = [], []
    for i in range(at, min(at + count, W)):
        part = [{"row": r, "start": int(rows["start"][r]), "length": int(rows["length"][r]), "doc": int(rows["doc"][r])}
                for r in range(int(first[i]), int(first[i + 1]))]
        windows.append({"window": i, "tokens": int(totals[i]), "segments": part})
        segs += part
    _trace(path, side, segs, warnings)
    return {**_plan_head(path, side), "counts": counts, "at": at, "windows": windows, "warnings": warnings}


RULE_WORDS = {"windows": "--windows {windows}", "epoch-of": "--epoch-of {source}: one pass over it",
              "first-exhausted": "one pass over the source that runs out first"}


def inspect_mixture(path: Path, rows: np.ndarray, side: formats.PlanSidecar, at: int, count: int) -> dict:
    """A mixture (``winsample mix``): its epoch rule and windows per epoch; each source's name,
    weight, plan, windows, count per epoch, share, repeats and tokens (one pass over its plan, and
    about what an epoch serves: tokens × count / windows); and positions ``[at, at+count)`` of
    epoch 0 as the Loader serves them with seed 0 (source, its window, that window's start and
    length), from ``planning.mixture``. Source plans that do not read, or changed since the
    mixture was made, are named in ``warnings`` (``verify`` checks them)."""
    from .planning import mixture
    from .train import Plan

    names, counts = [s.name for s in side.sources], [int(c) for c in rows["count"]]
    E = sum(counts)
    _check_at(at, E, "positions an epoch", path)
    warnings, plans = [], []
    if len(rows) != len(side.sources):
        warnings.append(f"{path}: {len(rows)} rows for {len(side.sources)} sources; run `winsample verify`")
    for s, r in zip(side.sources, rows):
        try:
            plan = Plan(*formats.load_plan(path.parent / s.plan), path.parent / s.plan)
            if plan.sidecar.mixture:
                raise DataError(f"{s.plan} is a mixture itself")
            plans.append(plan.windows)
        except WinsampleError as e:
            warnings.append(f"source {s.name}: {e}")
            plans.append(None)
            continue
        if s.rows_checksum and plan.sidecar.rows_checksum != s.rows_checksum:
            warnings.append(f"source {s.name} ({s.plan}) changed since the mixture was made; run `winsample verify`")
        elif len(plan.windows) != int(r["windows"]):
            warnings.append(f"source {s.name} has {len(plan.windows)} windows, the mixture records {int(r['windows'])}")
    sources = []
    for s, r, c in zip(side.sources, rows, counts):
        n, tokens = int(r["windows"]), int(r["tokens"])
        sources.append({"name": s.name, "weight": s.weight, "plan": s.plan, "windows": n, "count": c,
                        "share": c / E if E else 0.0, "repeats": [c // n, -(-c // n)] if n > 0 else [0, 0],
                        "tokens": tokens, "tokens_per_epoch": round(tokens * c / n) if n > 0 else 0})
    positions = []
    if at < E and len(rows) == len(side.sources) and all(p is not None and (len(p) or c == 0) for p, c in zip(plans, counts)) \
            and min(counts) >= 0:
        seed = side.params.seed
        salt = seed if isinstance(seed, int) and not isinstance(seed, bool) and seed >= 0 else None
        try:
            order = mixture.order(counts, [s.weight for s in side.sources], mixture.prefix_rule(side.params.mixture))
        except WinsampleError as e:  # weights or counts no mix writes (verify names them)
            order = np.zeros(0, np.int32)
            warnings.append(f"positions not shown: {e}")
        src = order[: at + count]  # mixture_epoch's first positions: each source's windows
        win = np.zeros(len(src), np.int64)  # drawn only as far as needed (a prefix of its sequence)
        for i, p in enumerate(plans):
            k = np.flatnonzero(src == i)
            if len(k):
                win[k] = mixture.source_windows(len(k), len(p), 0, 0, i, salt)
        for j in range(at, len(src)):
            i, w = int(src[j]), int(win[j])
            positions.append({"position": j, "source": names[i], "window": w, "start": int(plans[i]["start"][w]),
                              "length": int(plans[i]["length"][w])})
    elif at < E:
        warnings.append("positions not shown: every source plan must read (with windows, if it has a count), one row per source")
    rule = side.params.mixture
    words = RULE_WORDS.get(rule.get("rule"), "") if isinstance(rule, dict) else ""
    try:
        words = words.format(**rule) if words else f"params.mixture {rule!r}"
    except (KeyError, IndexError):
        words = f"params.mixture {rule!r}"
    return {"kind": "mixture", "path": str(path), "sidecar": str(formats.plan_sidecar(path)), "format": formats.PLAN_FORMAT,
            "version": side.version, "params": side.params.to_json(), "stats": side.stats.to_json(),
            "tokenizer": side.tokenizer or {}, "rule": rule, "rule_words": words, "windows": E, "sources": sources,
            "seed": 0, "epoch": 0, "at": at, "positions": positions, "warnings": warnings}


# --- text for people -----------------------------------------------------------------------


def _plain(text: str, role: str) -> str:
    return text


def render_text(report: dict, style: Callable[[str, str], str] = _plain) -> str:
    """The lines ``winsample inspect`` prints for ``report`` (from ``inspect_path``).

    ``style(text, role)`` may colour a piece; roles: 'head' (section titles), 'key' (field
    names), 'mark' (token boundaries and hex escapes), 'warn'. The default adds nothing.
    """
    kind = report["kind"]
    if kind == "data":
        lines = [style(f"data folder {report['path']}", "head")]
        lines += _meta_lines(report, style)
        for name, s in report["splits"].items():
            lines.append(style(f"split {name}", "head"))
            lines += _kv_lines(s, style, indent=2)
        lines.append(f"(checksums {report['checksums']}, not recomputed)")
    elif kind == "tokens":
        lines = _token_lines(report, style)
    elif kind == "mixture":
        lines = _mixture_lines(report, style)
    else:
        lines = _plan_lines(report, style)
    lines += [style(f"warning: {w}", "warn") for w in report.get("warnings", [])]
    return "\n".join(lines)


def _fmt(v) -> str:
    if isinstance(v, dict):
        return ", ".join(f"{k}={_fmt(x)}" for k, x in v.items())
    if isinstance(v, bool) or v is None:
        return str(v).lower() if isinstance(v, bool) else "-"
    if isinstance(v, list) and all(isinstance(x, str) for x in v):
        return terminal_safe(", ".join(v))
    return terminal_safe(str(v))  # no thousands separators: seeds and offsets are copied back into commands


def _kv_lines(d: dict, style, indent: int = 0) -> list[str]:
    width = max((len(k) for k in d), default=0)
    return [" " * indent + style(f"{k:<{width}}", "key") + "  " + _fmt(v) for k, v in d.items()]


def _meta_lines(report: dict, style) -> list[str]:
    keys = ("meta", "winsample_version", "version", "dtype", "tokenizer", "backend", "eot_appended", "bos_prepended", "split",
            "inputs", "layouts", "provenance")
    return _kv_lines({k: report[k] for k in keys if k in report}, style)


def _token_lines(r: dict, style) -> list[str]:
    lines = [style(f"token file {r['path']}", "head")]
    info = {"tokens": r["tokens"], "dtype": r["dtype"]}
    for k in ("split", "documents", "max_token"):
        if k in r:
            info[k] = r[k]
    if "checksum" in r:
        info["checksum"] = f"{r['checksum']} (as recorded)"
    lines += _kv_lines(info, style)
    if r.get("meta"):
        lines.append(style("meta.json", "head"))
        lines += _kv_lines({k: v for k, v in r["meta"].items() if k != "dtype"}, style, indent=2)
    end = r["at"] + len(r["ids"])
    lines.append(style(f"tokens [{r['at']}, {end}) of {r['tokens']}", "head"))
    per_line = 10
    for k in range(0, len(r["ids"]), per_line):
        chunk = r["ids"][k : k + per_line]
        lines.append(f"{r['at'] + k:>10}:  " + " ".join(f"{i:>6}" for i in chunk))
    if "pieces" in r:
        lines.append(style(f"decoded ({r['decoded_with']}, {BOUNDARY} between tokens)", "head"))
        mark = style(BOUNDARY, "mark")
        lines.append("  " + mark.join(_style_hex(p, style) for p in r["pieces"]))
    if "trained_text" in r:
        lines.append(style("trained on (the loss mask: « » around the labels the model learns)", "head"))
        lines.append("  " + render_piece(r["trained_text"].encode("utf-8", "surrogateescape")))
    return lines


def _style_hex(piece: str, style) -> str:
    if "⟨" not in piece:
        return piece
    out, rest = [], piece
    while "⟨" in rest:
        pre, _, tail = rest.partition("⟨")
        inner, _, rest = tail.partition("⟩")
        out += [pre, style(f"⟨{inner}⟩", "mark")]
    return "".join(out) + rest


def _packed_window_lines(r: dict, style) -> list[str]:
    """A best-fit plan's windows: one line per segment, the window and its tokens on its first."""
    traced = any("source" in g for w in r["windows"] for g in w["segments"])
    lines = [style(f"{'window':>8} {'tokens':>8} {'row':>10} {'start':>14} {'length':>8} {'doc':>10}"
                   + ("  source" if traced else ""), "key")]
    for w in r["windows"]:
        for k, g in enumerate(w["segments"]):
            head = f"{w['window']:>8} {w['tokens']:>8}" if k == 0 else " " * 17
            line = f"{head} {g['row']:>10} {g['start']:>14} {g['length']:>8} {g['doc']:>10}"
            if "source" in g:
                line += "  " + terminal_safe(provenance.source_text(g["source"]), keep="")  # a row is one line
            lines.append(line)
    return lines


def _mixture_lines(r: dict, style) -> list[str]:
    """A mixture: its head, each source on a line, and the positions shown."""
    lines = [style(f"mixture plan {r['path']}", "head")]
    lines += _kv_lines({"sidecar": r["sidecar"], "version": r["version"]}, style)
    for title in ("params", "stats", "tokenizer"):
        if r.get(title):
            lines.append(style(title, "head"))
            lines += _kv_lines(r[title], style, indent=2)
    lines.append(style(f"epoch: {r['windows']} windows ({r['rule_words']})", "head"))
    width = max([len(terminal_safe(s["name"], keep="")) for s in r["sources"]] + [6])
    lines.append(style(f"  {'source':<{width}} {'weight':>8} {'windows':>10} {'count':>10} {'share':>8} {'repeats':>8}"
                       f" {'tokens/epoch':>13}  plan", "key"))
    for s in r["sources"]:
        lo, hi = s["repeats"]
        lines.append(f"  {terminal_safe(s['name'], keep=''):<{width}} {_fmt(s['weight']):>8} {s['windows']:>10} {s['count']:>10}"
                     f" {s['share']:>8.2%} {(str(hi) if lo == hi else f'{lo}-{hi}'):>8} {'~' + str(s['tokens_per_epoch']):>13}"
                     f"  {_fmt(s['plan'])}")
    end = r["at"] + len(r["positions"])
    lines.append(style(f"positions [{r['at']}, {end}) of epoch {r['epoch']} (seed {r['seed']}), as winsample.Loader serves them", "head"))
    if r["positions"]:
        lines.append(style(f"{'position':>10} {'source':<{width}} {'window':>10} {'start':>14} {'length':>8}", "key"))
    for p in r["positions"]:
        lines.append(f"{p['position']:>10} {terminal_safe(p['source'], keep=''):<{width}} {p['window']:>10} {p['start']:>14} {p['length']:>8}")
    return lines


def _plan_lines(r: dict, style) -> list[str]:
    lines = [style(f"window plan {r['path']}", "head")]
    lines += _kv_lines({"sidecar": r["sidecar"], "version": r["version"]}, style)
    for title in ("source", "params", "stats", "tokenizer", "counts"):
        if r.get(title):
            lines.append(style(title, "head"))
            lines += _kv_lines(r[title], style, indent=2)
    if r.get("exposure"):  # one epoch of winsample.Loader, every window once
        lines.append(style("exposure per epoch (winsample.Loader, every window once)", "head"))
        lines += _kv_lines({f"short={k}": f"{f['trained_tokens']:,} labels; each targetable token a label min {f['targets_min']}"
                            f" / mean {f['targets_mean']:.3f} / max {f['targets_max']} times, {f['untrained']:,} never;"
                            f" {f['untargetable']:,} tokens of the file are no window's label"
                            for k, f in r["exposure"].items()}, style, indent=2)
    end = r["at"] + len(r["windows"])
    lines.append(style(f"windows [{r['at']}, {end}) of {r['counts']['windows']}", "head"))
    if "segments" in r["counts"]:  # a best-fit plan: each window its segments side by side
        return lines + _packed_window_lines(r, style)
    traced = any("source" in w for w in r["windows"])
    header = f"{'row':>10} {'start':>14} {'length':>8} {'doc':>10} {'fresh':>8}" + ("  source" if traced else "")
    lines.append(style(header, "key"))
    for w in r["windows"]:
        line = f"{w['row']:>10} {w['start']:>14} {w['length']:>8} {w['doc']:>10} {w['fresh']:>8}"
        if "source" in w:
            line += "  " + terminal_safe(provenance.source_text(w["source"]), keep="")  # a row is one line, whatever a name holds
        lines.append(line)
    return lines
