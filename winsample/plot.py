"""The coverage picture: how a window plan lies over its token file, as one PNG.

Four panels:

1. coverage depth (windows covering each token) along the token axis, downsampled to at most
   ``DEPTH_BINS`` bins (mean depth per bin), with document edges marked;
2. a zoom on the first ``ZOOM_WINDOWS`` windows (smallest starts) drawn as horizontal bars,
   the part already covered by an earlier window (``fresh``) lighter, document edges as lines,
   so overlap and tail alignment are visible; for a best-fit plan (segment rows, several per
   window) its first windows, each its segments side by side inside [0, span), padding grey;
3. the window-length histogram (best-fit: each window's tokens, its segments together);
4. the token-id histogram (counts summed over id ranges, log scale).

Everything per token or per window is numpy over bounded arrays: depth comes from window
starts/ends and cumulative sums at the bin edges (memory O(windows + bins), never O(tokens)),
the token histogram from ``np.bincount`` over bounded chunks of the memmap.

matplotlib is optional (``pip install 'winsample[plot]'``) and imported only when drawing; the
figure is drawn with the Agg canvas directly, so no global pyplot state or backend changes.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from . import disk, formats, tokensrc
from .errors import ConfigError, InputError, WinsampleError

DEPTH_BINS = 4000  # about the pixel width of a wide screen: finer bins would not show
ZOOM_WINDOWS = 12  # enough to see a stride pattern repeat, few enough to read each bar
ID_BINS = 1000  # token-id histogram bars
HIST_CHUNK = 1 << 24  # tokens per np.bincount call: 32-64 MiB of ids, flat memory
FIGSIZE = (12, 9)  # inches
DPI = 100  # → a 1200 x 900 pixel PNG


# --- numbers (no matplotlib) ---------------------------------------------------------------


def bin_edges(tokens_n: int, bins: int = DEPTH_BINS) -> np.ndarray:
    """Integer token offsets ``0 = e0 < e1 < … < eB = tokens_n`` with B <= ``bins``.

    With ``tokens_n <= bins`` every token is its own bin (edges ``0..tokens_n``).
    """
    if tokens_n <= 0:
        return np.zeros(1, dtype=np.int64)
    bins = max(1, min(int(bins), int(tokens_n)))
    return np.unique(np.linspace(0, tokens_n, bins + 1).round().astype(np.int64))


def covered_before(x: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """For each offset in ``x``: the (token, window) pairs with token < x and the token inside
    the window ``[start, end)``, i.e. the sum of per-token depth over ``[0, x)``.

    Equals ``Σ_w clip(x - start_w, 0, len_w)`` = ``Σ_{start<x}(x-start) - Σ_{end<x}(x-end)``;
    evaluated with sorted starts/ends, prefix sums and ``searchsorted``: O((W + len(x)) log W).
    """
    x = np.asarray(x, dtype=np.int64)
    out = np.zeros(x.shape, dtype=np.int64)
    for pts, sign in ((starts, 1), (ends, -1)):
        pts = np.sort(np.asarray(pts, dtype=np.int64))
        csum = np.concatenate([[0], np.cumsum(pts)])
        k = np.searchsorted(pts, x, side="left")  # number of points < x
        out += sign * (k * x - csum[k])
    return out


def coverage_depth(tokens_n: int, starts, lengths, bins: int = DEPTH_BINS) -> tuple[np.ndarray, np.ndarray]:
    """(edges, sums): ``sums[b]`` = Σ over tokens t in ``[edges[b], edges[b+1])`` of the number
    of windows covering t. Mean depth of bin b is ``sums[b] / (edges[b+1] - edges[b])``.

    Windows reaching past ``tokens_n`` count only up to it.
    """
    edges = bin_edges(tokens_n, bins)
    starts = np.asarray(starts, dtype=np.int64)
    ends = starts + np.asarray(lengths, dtype=np.int64)
    c = covered_before(edges, starts, ends)
    return edges, np.diff(c)


def covered_tokens(tokens_n: int, starts, lengths) -> int:
    """Tokens of ``[0, tokens_n)`` inside at least one window (union length), vectorised."""
    starts = np.clip(np.asarray(starts, dtype=np.int64), 0, tokens_n)
    ends = np.clip(starts + np.asarray(lengths, dtype=np.int64), 0, tokens_n)
    if starts.size == 0:
        return 0
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    reach = np.maximum.accumulate(e)  # furthest end of any window starting at or before this one
    prev = np.concatenate([[0], reach[:-1]])
    # each window adds the part of it beyond everything before it
    return int(np.clip(e - np.maximum(s, prev), 0, None).sum())


def token_histogram(
    tokens: np.ndarray, n_vocab: int, chunk: int = HIST_CHUNK, progress: Callable[[int], None] | None = None
) -> np.ndarray:
    """int64 counts of each id over ``tokens`` (e.g. a memmap), ``chunk`` tokens at a time.

    Length is ``n_vocab``, or more if an id >= n_vocab occurs (so nothing is hidden).
    ``progress(n)`` is called with the tokens done after each chunk.
    """
    counts = np.zeros(max(int(n_vocab), 0), dtype=np.int64)
    for _, part in formats.iter_chunks(tokens, chunk):
        c = np.bincount(np.asarray(part), minlength=counts.size)
        if c.size > counts.size:
            counts = np.concatenate([counts, np.zeros(c.size - counts.size, dtype=np.int64)])
        counts += c
        if progress:
            progress(len(part))
    return counts


def first_windows(rows: np.ndarray, k: int = ZOOM_WINDOWS) -> np.ndarray:
    """The ``k`` rows with the smallest starts, in start order (plans may be shuffled)."""
    if len(rows) <= k:
        idx = np.arange(len(rows))
    else:
        idx = np.argpartition(rows["start"], k - 1)[:k]
    sub = rows[idx]
    return sub[np.argsort(sub["start"], kind="stable")]


# --- the picture ---------------------------------------------------------------------------


def require_matplotlib() -> None:
    """ConfigError now, before a long run, if matplotlib is not installed."""
    import importlib.util

    if importlib.util.find_spec("matplotlib") is None:
        raise ConfigError("drawing needs matplotlib: pip install 'winsample[plot]'")


def refuse_mixture(plan_path: str | Path) -> None:
    """InputError when ``plan_path`` is a mixture (``winsample mix``): its rows are its sources,
    not windows of one token file, so there is no one coverage picture (draw a source plan).
    A plan that does not read passes here: verify reports why."""
    try:
        _, side = formats.load_plan(plan_path)
    except WinsampleError:
        return
    if side.mixture:
        names = ", ".join(f"{s.name} ({s.plan})" for s in side.sources)
        raise InputError(f"{plan_path} is a mixture of {len(side.sources)} plans, not windows of one token file: draw one"
                         f" of its sources ({names})")


def plan_bin(path: str | Path | None, plan_path: str | Path) -> Path:
    """The token file a plan describes, as ``winsample verify PATH --plan PLAN`` finds it:
    PATH itself when it is a .bin, else the file the plan's sidecar names (``source.file``)
    inside the data folder PATH (for a split kept in shards, its logical name); with no PATH
    (or PATH the plan itself), where its sidecar says (``tokensrc.plan_tokens``)."""
    if path is None or str(path).endswith((".npy", ".npy.json")):
        _, side = formats.load_plan(plan_path)
        return tokensrc.plan_tokens(plan_path, side.source)
    path = Path(path)
    if not path.is_dir():
        return path
    _, side = formats.load_plan(plan_path)
    name = side.source.file
    if not name:
        raise InputError(f"{formats.plan_sidecar(plan_path)}: sidecar names no source.file; pass the .bin instead of {path}")
    return path / name


def _figure():
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise ConfigError("drawing needs matplotlib: pip install 'winsample[plot]'") from None
    fig = Figure(figsize=FIGSIZE, dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def plot_coverage(
    path_png: str | Path,
    tokens_n: int,
    rows: np.ndarray,
    doc_starts: np.ndarray | None = None,
    token_hist: np.ndarray | None = None,
    title: str | None = None,
    bins: int = DEPTH_BINS,
    span: int | None = None,
) -> dict:
    """Draw the four panels for a plan ``rows`` (PLAN_DTYPE, or a best-fit plan's PACKED_DTYPE
    segments, sorted by window) over ``tokens_n`` tokens into ``path_png`` (1200 x 900 px), written
    atomically.

    ``doc_starts``: token offsets where documents start (edges drawn); ``token_hist``: counts per
    id from ``token_histogram`` (that panel says "not given" without it); ``span``: a best-fit
    plan's window size (default: its largest window). Returns the numbers drawn: bins, windows,
    covered tokens, mean depth.
    """
    fig = _figure()
    rows = np.asarray(rows)
    starts = rows["start"].astype(np.int64)
    lengths = rows["length"].astype(np.int64)
    edges, sums = coverage_depth(tokens_n, starts, lengths, bins)
    covered = covered_tokens(tokens_n, starts, lengths)
    docs = np.asarray(doc_starts, dtype=np.int64) if doc_starts is not None else np.zeros(0, dtype=np.int64)
    packed = "window" in (rows.dtype.names or ())
    if packed:  # each window's tokens: its segments' lengths summed
        totals = np.bincount(rows["window"].astype(np.int64), weights=lengths).astype(np.int64) if len(rows) else lengths

    ax_depth, ax_zoom, ax_len, ax_ids = fig.subplots(2, 2).ravel()
    fig.suptitle(title or "winsample coverage")
    mean_all = _depth_panel(ax_depth, tokens_n, edges, sums, covered, docs)
    if packed:
        _packed_windows_panel(ax_zoom, rows, span or int(totals.max(initial=1)))
    else:
        _first_windows_panel(ax_zoom, rows, docs, tokens_n)
    _lengths_panel(ax_len, totals if packed else lengths)
    _ids_panel(ax_ids, token_hist)

    try:
        with disk.atomic_path(path_png) as tmp:
            fig.savefig(tmp, format="png", dpi=DPI)
    except OSError as e:  # a full disk, a quota, a file-size limit: name the file, and nothing is left behind
        raise InputError(f"cannot write {Path(path_png).name}: {disk.os_error_text(e)}; nothing was written") from None
    return {"png": str(path_png), "bins": int(np.diff(edges).size), "windows": int(len(totals) if packed else len(rows)),
            "tokens": int(tokens_n), "covered_tokens": covered, "mean_depth": mean_all}


def _depth_panel(ax_depth, tokens_n: int, edges: np.ndarray, sums: np.ndarray, covered: int, docs: np.ndarray) -> float:
    """Panel 1: coverage depth along the token axis, document edges as a rug; returns the mean depth."""
    widths = np.diff(edges)
    mean = sums / np.maximum(widths, 1)
    if widths.size:
        ax_depth.stairs(mean, edges, fill=True, color="tab:blue", alpha=0.8, label="mean depth per bin")
        inner = docs[(docs > 0) & (docs < tokens_n)]
        if inner.size:
            # at most one line per bin: with millions of documents the lines would merge anyway
            bin_of = np.searchsorted(edges, inner, side="right") - 1
            _, first = np.unique(bin_of, return_index=True)
            # a rug along the bottom (axes fraction 0..0.08) so the edges never hide the depth
            ax_depth.vlines(inner[first], 0, 0.08, transform=ax_depth.get_xaxis_transform(), colors="tab:red",
                            linewidth=0.8, label=f"document edges ({docs.size} documents)")
        ax_depth.set_xlim(0, tokens_n)
        ax_depth.set_ylim(0, max(float(mean.max()), 1.0) * 1.25)
        ax_depth.legend(loc="upper right", fontsize="small")
    pct = 100.0 * covered / tokens_n if tokens_n else 0.0
    mean_all = float(sums.sum()) / tokens_n if tokens_n else 0.0
    ax_depth.set_title(f"coverage depth: {pct:.1f}% of {tokens_n} tokens covered, mean depth {mean_all:.2f}"
                       f" ({widths.size} bins)", fontsize="medium")
    ax_depth.set_xlabel("token offset")
    ax_depth.set_ylabel("windows covering a token")
    return mean_all


def _first_windows_panel(ax_zoom, rows: np.ndarray, docs: np.ndarray, tokens_n: int) -> None:
    """Panel 2: the first windows as bars, the part already covered lighter."""
    first = first_windows(rows)
    if first.size:
        y = np.arange(first.size)
        s = first["start"].astype(np.int64)
        ln = first["length"].astype(np.int64)
        fr = np.clip(first["fresh"].astype(np.int64), 0, ln)
        ax_zoom.barh(y, fr, left=s, color="tab:orange", alpha=0.45, edgecolor="tab:orange", label="already covered (fresh)")
        ax_zoom.barh(y, ln - fr, left=s + fr, color="tab:blue", edgecolor="black", linewidth=0.5, label="new tokens")
        lo, hi = int(s.min()), int((s + ln).max())
        near = docs[(docs >= lo) & (docs <= hi)]
        ends_here = [e for e in (tokens_n,) if lo <= e <= hi]
        if near.size or ends_here:
            ax_zoom.vlines(np.concatenate([near, ends_here]), -0.5, first.size - 0.5, colors="tab:red",
                           linestyles="dashed", linewidth=1, label="document edge / end of file")
        ax_zoom.set_xlim(lo - 0.02 * (hi - lo + 1), hi + 0.02 * (hi - lo + 1))
        ax_zoom.set_yticks(y, [str(int(d)) for d in first["doc"]], fontsize="x-small")
        ax_zoom.invert_yaxis()
        ax_zoom.legend(loc="upper right", fontsize="small")  # bars run top-left → bottom-right
    ax_zoom.set_title(f"first {first.size} windows (row labels: document)", fontsize="medium")
    ax_zoom.set_xlabel("token offset")


def _packed_windows_panel(ax_zoom, rows: np.ndarray, span: int) -> None:
    """Panel 2 of a best-fit plan: its first windows, each its segments side by side (alternate
    colours, labelled by document), the rest of the span grey."""
    first = rows[rows["window"].astype(np.int64) < ZOOM_WINDOWS]
    w = first["window"].astype(np.int64)
    ln = first["length"].astype(np.int64)
    if len(first):
        col = np.cumsum(ln) - ln
        new = np.flatnonzero(np.r_[True, w[1:] != w[:-1]])  # each window's first segment
        col -= np.repeat(col[new], np.diff(np.r_[new, len(w)]))
        k = np.arange(len(w)) - np.repeat(new, np.diff(np.r_[new, len(w)]))  # segment number inside its window
        ax_zoom.barh(w, ln, left=col, color=np.where(k % 2, "tab:cyan", "tab:blue"), edgecolor="black", linewidth=0.5,
                     label="segments (a document or a piece of one)")
        ends = np.bincount(w, weights=ln).astype(np.int64)
        ids = np.flatnonzero(ends)
        ax_zoom.barh(ids, span - ends[ids], left=ends[ids], color="lightgrey", label="padding")
        for y, c, L, d in zip(w.tolist(), col.tolist(), ln.tolist(), first["doc"].tolist()):
            if L >= span / 12:  # a label only where it fits
                ax_zoom.text(c + L / 2, y, str(d), ha="center", va="center", fontsize="x-small")
        ax_zoom.set_xlim(0, span)
        ax_zoom.set_yticks(ids, [str(i) for i in ids], fontsize="x-small")
        ax_zoom.set_ylim(int(ids.max()) + 2.5, -0.5)  # top to bottom, room for the legend below the last
        ax_zoom.legend(loc="lower right", fontsize="small", ncol=2)
    ax_zoom.set_title(f"first {len(np.unique(w))} best-fit windows (row labels: window; bar labels: document)", fontsize="medium")
    ax_zoom.set_xlabel("token position in the window")


def _lengths_panel(ax_len, lengths: np.ndarray) -> None:
    """Panel 3: a histogram of window lengths (log scale when a few short ones sit beside many)."""
    if lengths.size:
        lo, hi = int(lengths.min()), int(lengths.max())
        nb = min(50, hi - lo + 1)
        counts, ledges = np.histogram(lengths, bins=nb, range=(lo - 0.5, hi + 0.5))
        ax_len.stairs(counts, ledges, fill=True, color="tab:green")
        nz = counts[counts > 0]
        if nz.max() > 100 * nz.min():  # a few short tail windows next to thousands of full ones
            ax_len.set_yscale("log")
    ax_len.set_title(f"window lengths ({lengths.size} windows)", fontsize="medium")
    ax_len.set_xlabel("tokens per window")
    ax_len.set_ylabel("windows")


def _ids_panel(ax_ids, token_hist: np.ndarray | None) -> None:
    """Panel 4: token ids, summed into ID_BINS bars (the panel says "not given" without them)."""
    if token_hist is not None and np.asarray(token_hist).size:
        h = np.asarray(token_hist, dtype=np.int64)
        step = max(1, -(-h.size // ID_BINS))
        starts_id = np.arange(0, h.size, step)
        summed = np.add.reduceat(h, starts_id)
        ax_ids.stairs(summed, np.append(starts_id, h.size), fill=True, color="tab:purple")
        ax_ids.set_yscale("log")
        top = np.argsort(h)[::-1][:3]
        ax_ids.set_title(f"token ids ({int((h > 0).sum())} distinct; most frequent: "
                         + ", ".join(str(int(i)) for i in top) + ")", fontsize="medium")
        ax_ids.set_xlabel(f"token id ({step} ids per bar)")
        ax_ids.set_ylabel("tokens")
    else:
        ax_ids.set_title("token ids (not given)", fontsize="medium")
        ax_ids.set_axis_off()


def plot_plan(png: str | Path, bin_path: str | Path, plan_path: str | Path,
              progress: Callable[[int], None] | None = None) -> dict:
    """Draw the coverage picture of the plan at ``plan_path`` over the token file ``bin_path``
    into ``png``; returns what ``plot_coverage`` returns.

    The token file opens by ``tokensrc.open_source`` (a split kept in shards by its logical name,
    dtype from its meta.json, else the width the plan records, else '<u2'); document starts from its document index when there is
    one; the vocabulary size from the meta or sidecar tokenizer. ``progress(n)`` is called with tokens counted for the token-id
    histogram (the only pass over the .bin).
    """
    bin_path = Path(bin_path)
    refuse_mixture(plan_path)
    rows, side = formats.load_plan(plan_path)
    src = tokensrc.open_planned(bin_path, side.source, strict=False)  # a bare file: the width the plan was made for
    tokens = src.tokens
    n_vocab = src.meta.n_vocab if src.meta is not None else int(side.n_vocab or 0)
    doc_starts = src.doc_starts()
    if len(rows) and int(rows["start"].min()) < 0:
        raise InputError(f"{plan_path}: negative window start {int(rows['start'].min())}; run `winsample verify`")
    hist = token_histogram(tokens, n_vocab, progress=progress)
    title = f"{Path(plan_path).name} over {bin_path.name}"
    if side.best_fit:
        w = rows["window"].astype(np.int64)
        if len(w) and (w[0] != 0 or not np.isin(np.diff(w), (0, 1)).all()):
            raise InputError(f"{plan_path}: segment rows not sorted by window, numbered 0, 1, … without a gap; run `winsample verify`")
        return plot_coverage(png, len(tokens), rows, doc_starts=doc_starts, token_hist=hist, title=title + " (best-fit)",
                             span=side.span)
    return plot_coverage(png, len(tokens), rows, doc_starts=doc_starts, token_hist=hist, title=title)
