"""Command-line interface: parse options, call one library function, print, pick the exit code.

stdout carries data (``--json``, ``-o -``); stderr carries progress bars, summaries and errors.
Exit codes: 0 success, 1 the data failed a check, 2 the tool could not do the job.
Every ``WinsampleError`` becomes one line on stderr here, in ``WinsampleGroup.invoke``.
"""

from __future__ import annotations

import json
import os
import signal
import sys

import click

from . import __version__
from . import windows as windows_mod
from .errors import Interrupted, WinsampleError


class WinsampleGroup(click.Group):
    """The one place where library errors become messages and exit codes."""

    def invoke(self, ctx: click.Context):
        signal.signal(signal.SIGTERM, _raise_interrupted)
        if hasattr(signal, "SIGHUP") and signal.getsignal(signal.SIGHUP) is signal.SIG_DFL:
            signal.signal(signal.SIGHUP, _raise_interrupted)  # a closed terminal: clean up like SIGTERM
        try:
            return super().invoke(ctx)
        except WinsampleError as e:
            _fail(ctx, f"error: {e}", e.exit_code)
        except KeyboardInterrupt:
            _fail(ctx, f"error: {Interrupted(signal.SIGINT)}", 128 + signal.SIGINT)
        except BrokenPipeError:
            # `winsample … | head` closed stdout: stop quietly, and keep Python from
            # complaining again when it flushes stdout at exit.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            # a command whose verdict is known before it prints (verify) keeps its exit code
            ctx.exit(ctx.meta.get(EXIT_CODE_KEY, 0))
        except click.exceptions.NoArgsIsHelpError:  # a bare command: its help, as click shows it
            raise
        except click.UsageError as e:  # a subcommand's options, an unknown command
            _fail(ctx, _usage_line(e), e.exit_code)
        except (click.exceptions.Exit, click.ClickException, click.exceptions.Abort):
            raise
        except Exception as e:  # a bug: one line, and the traceback only when asked for
            if os.environ.get("WINSAMPLE_DEBUG"):
                raise
            _fail(ctx, f"internal error: {type(e).__name__}: {e} (set WINSAMPLE_DEBUG=1 for a traceback)", 2)

    def make_context(self, info_name, args, parent=None, **extra):
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.exceptions.NoArgsIsHelpError:  # bare `winsample`: the help, as click shows it
            raise
        except click.UsageError as e:  # the group's own options (`winsample --bogus`)
            click.echo(_usage_line(e), err=True)
            raise click.exceptions.Exit(e.exit_code) from None


def _usage_line(e: click.UsageError) -> str:
    """A usage error as one line, like every other error: click's own is three (usage, hint, message)."""
    where = e.ctx.command_path if e.ctx is not None else "winsample"
    return f"error: {e.format_message().rstrip('.')} (see '{where} --help')".replace("\n", " ")


def entry(prog_name: str = "winsample") -> None:
    """The ``winsample`` command: ``main``, and an exit that always happens.

    After a signal (exit 128 + N) a helper thread may still be blocked in a read; Python would
    wait for it at exit, so the process ends with ``os._exit`` instead (output flushed first)."""
    import threading

    try:
        main(prog_name=prog_name)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if code >= 128 and threading.active_count() > 1:
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except Exception:
                    pass
            os._exit(code)
        raise


EXIT_CODE_KEY = "winsample.exit_code"  # ctx.meta: the exit code to keep if stdout closes early


def _raise_interrupted(signum, frame):
    raise Interrupted(signum)


def _fail(ctx: click.Context, message: str, code: int):
    # one line, whatever a file name holds: a newline in a name must not split the error line
    click.echo(message.replace("\r", "\\r").replace("\n", "\\n"), err=True)
    ctx.exit(code)


class _NoBar:
    """What ``progress`` gives with no bar to draw: tqdm's calls, doing nothing (tqdm, and the
    importlib.metadata it imports, cost ~50 ms of a start that draws no bar)."""

    total = None

    def update(self, n=1) -> None:
        pass

    def refresh(self) -> None:
        pass

    def set_postfix(self, **kwargs) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        pass


def progress(quiet: bool, **kwargs):
    """A tqdm bar on stderr, off with -q or when stderr is not a terminal."""
    if quiet or not sys.stderr.isatty():
        return _NoBar()
    from tqdm import tqdm

    # tqdm starts a monitor thread with its first bar; a second thread makes encode's worker
    # pool use forkserver instead of fork (workers then reload the tokenizer).
    tqdm.monitor_interval = 0
    return tqdm(file=sys.stderr, dynamic_ncols=True, **kwargs)


def say(quiet: bool, message: str) -> None:
    """A line for people, on stderr, unless -q."""
    if not quiet:
        click.echo(message, err=True)


def plural(n: int, word: str, many: str | None = None) -> str:
    """'1 document', '2 documents' (``many`` for irregular plurals)."""
    return f"{n:,} {word if n == 1 else many or word + 's'}"


def use_color(stream=None) -> bool:
    """Colour only on a terminal, and never when NO_COLOR is set to anything (no-color.org)."""
    stream = stream or sys.stdout
    return bool(stream.isatty()) and not os.environ.get("NO_COLOR")


def emit_json(obj) -> None:
    """The one JSON document of ``--json``, on stdout."""
    click.echo(json.dumps(obj, indent=2, ensure_ascii=False))


quiet_option = click.option("-q", "--quiet", is_flag=True, help="No progress bar or summary on stderr.")
json_option = click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout.")


@click.group(cls=WinsampleGroup, context_settings={"help_option_names": ["-h", "--help"], "auto_envvar_prefix": "WINSAMPLE"})
@click.version_option(__version__, "--version", prog_name="winsample",
                      message=f"%(prog)s %(version)s (C kernels: {'off' if windows_mod.boundaries.FAST is None else 'on'})")
def main():
    """Turn text into token files, cut them into training windows, and prove both are sound.

    \b
      winsample encode corpus/ -o data/          text → train.bin, val.bin, meta.json
      winsample windows data/train.bin -T 1024 -o train.plan.npy
      winsample verify data/ --plan train.plan.npy
    """


# --- encode -------------------------------------------------------------------------------


@main.command()
@click.argument("inputs", nargs=-1, required=True, metavar="INPUT...")
@click.option("-o", "--out", "out_dir", required=True, type=click.Path(), help="Folder for train.bin, val.bin, meta.json (created if missing).")
@click.option("--encoding", default="gpt2", show_default=True, help="tiktoken encoding name (gpt2 works offline).")
@click.option("--tokenizer-file", type=click.Path(), help="Instead of --encoding: a Hugging Face tokenizer.json (or its folder, with tokenizer_config.json), a SentencePiece model, or a .tiktoken ranks file (optionally .gz); told apart by content.")
@click.option("--pattern", type=click.Choice(["gpt2", "cl100k", "o200k"]), default=None, help="Pre-tokenizer regex for a .tiktoken --tokenizer-file (default gpt2); a tokenizer.json or SentencePiece file has its own.")
@click.option("--val-fraction", type=click.FloatRange(0, 1, max_open=True), default=0.1, show_default=True, help="Share of documents (or tokens, --split tail) for val.bin.")
@click.option("--split", type=click.Choice(["doc", "tail"]), default="doc", show_default=True, help="doc: by a seeded hash of each document's text (a lone text file is refused: one split would be empty); tail: the last tokens.")
@click.option("--seed", type=int, default=1337, show_default=True, help="Seed of the document hash (--split doc).")
@click.option("--workers", type=click.IntRange(min=1), default=None, help="Encoders [default: CPU count]: processes for the reference backend, threads for the fast engine (only as many as the input repays their builds); 1 runs in-process.")
@click.option("--text-field", default="text", show_default=True, help="JSONL field / Parquet column holding the text.")
@click.option("--id-field", default=None, metavar="FIELD", help="JSONL field / Parquet column with each record's id (string or integer), kept in the provenance files.")
@click.option("--format", "fmt", type=click.Choice(["auto", "text", "jsonl"]), default="auto", show_default=True, help="Input format; auto: by file extension (stdin: text).")
@click.option("--no-eot", is_flag=True, help="Do not append the end-of-document id (<|endoftext|>, the tokenizer's EOS) after each document.")
@click.option("--bos", is_flag=True, help="Put the beginning-of-document id (the tokenizer's BOS; <|endoftext|> for tiktoken) before each document.")
@click.option("--dtype", type=click.Choice(["uint16", "uint32"]), default=None, help="Token dtype [default: uint16, uint32 if the vocabulary needs it].")
@click.option("--errors", type=click.Choice(["strict", "replace"]), default="strict", show_default=True, help="Invalid UTF-8: fail, or replace with U+FFFD and count.")
@click.option("--engine", type=click.Choice(["local", "ray"]), default="local", show_default=True, help="local: worker processes here; ray: tasks on a Ray cluster (pip install 'winsample[ray]').")
@click.option("--address", default=None, help="--engine ray: cluster to join (auto, ray://host:10001) [default: start a local one].")
@click.option("--shard-size", default=None, help="--engine ray: input bytes per task, e.g. 256MB, 64KB [default: 256MB].")
@click.option("--merge", is_flag=True, help="--engine ray: concatenate the shards into train.bin / val.bin.")
@click.option("--resume", is_flag=True, help="Continue an interrupted run from OUT_DIR/.partial (same inputs and options); same bytes as a clean run.")
@click.option("--layout", default="nanogpt", show_default=True,
              help="Comma list of layouts to write: nanogpt (train.bin, val.bin), megatron (+ train.idx, val.idx), llmc (llmc/train_000000.bin, … shards).")
@click.option("--shard-tokens", type=click.IntRange(1, 2**31 - 1), default=100_000_000, show_default=True,
              help="--layout llmc: at most this many tokens per shard.")
@click.option("--backend", type=click.Choice(["auto", "fast", "reference"]), default="auto", show_default=True,
              help="Tokenizer engine: fast (gigatoken, pip install 'winsample[fast]'), reference (tiktoken), or auto: fast"
                   " when it loads and passes a built-in self-check against the reference. Same ids either way.")
@quiet_option
@json_option
def encode(inputs, out_dir, encoding, tokenizer_file, pattern, val_fraction, split, seed, workers, text_field, id_field, fmt, no_eot, bos, dtype, errors, engine, address, shard_size, merge, resume, layout, shard_tokens, backend, quiet, as_json):
    """Encode text files, folders or - (stdin) into OUT_DIR/train.bin, val.bin and meta.json.

    \b
      winsample encode corpus/ -o data/
      winsample encode docs.jsonl --text-field body --split tail -o data/ --json
      winsample encode corpus/ -o data/ --tokenizer-file llama3/ --bos
      winsample encode sft.jsonl --id-field id -o data/    # windows trace back to record ids

    Each document's source (input, byte offset, line, --id-field value) is kept in
    OUT_DIR/*.prov.npy: `inspect PLAN --at K` and `windows --format jsonl` show it.
    """
    from . import encode as encode_pkg

    if out_dir == "-":  # "-" is stdout for windows -o and the inputs; a data folder cannot stream
        raise click.UsageError("-o -: encode writes a folder (train.bin, val.bin, meta.json), not stdout;"
                               " give a folder (./- for one named '-')")
    bar = progress(quiet, unit="B", unit_scale=True, unit_divisor=1024, desc="encode")
    tokens = [0]

    def on_progress(nbytes, ntokens, total=None):
        if total is not None:
            bar.total = total
            bar.refresh()
        if nbytes:
            bar.update(nbytes)
        if ntokens:
            tokens[0] += ntokens
            bar.set_postfix(tokens=f"{tokens[0]:,}", refresh=False)

    if engine == "ray":
        if resume:
            raise click.UsageError("--resume applies to --engine local; --engine ray always reuses finished shards")
        if layout.strip().lower() != "nanogpt":
            raise click.UsageError("--layout: --engine ray writes the nanogpt layout only; use --engine local for megatron and llmc")
    else:
        given = [n for n, v in (("--address", address), ("--shard-size", shard_size), ("--merge", merge)) if v]
        if given:
            raise click.UsageError(f"{', '.join(given)} only apply to --engine ray")
    try:
        config = encode_pkg.EncodeConfig(
            tuple(inputs), out_dir, encoding=encoding, tokenizer_file=tokenizer_file, pattern=pattern,
            val_fraction=val_fraction, split=split, seed=seed, workers=workers, text_field=text_field, id_field=id_field,
            fmt=fmt, eot=not no_eot, bos=bos, dtype=dtype, errors=errors, backend=backend, engine=engine, resume=resume,
            layout=layout, shard_tokens=shard_tokens, address=address, merge=merge,
            **({"shard_size": shard_size} if shard_size else {}),
        )
        summary = encode_pkg.run(config, progress=on_progress, notice=lambda line: say(quiet, f"note: {line}"))
    finally:
        bar.close()
    extra = ""
    if summary["skipped_empty"]:  # read but not written: "encoded" counts what is in train and val
        extra += f" ({summary['skipped_empty']} more read: empty, skipped)"
    if summary["replaced_characters"]:
        extra += f", {summary['replaced_characters']} invalid UTF-8 sequences replaced"
    resumed = summary.get("resumed")
    if resumed and resumed.get("discarded"):
        extra += f", nothing resumed ({resumed['discarded']})"
    elif resumed:
        extra += f", resumed after {resumed['inputs']} input(s) ({resumed['tokens']:,} tokens reused)"
    if summary["unsplittable_runs"]:
        extra += f", {summary['unsplittable_runs']} long run(s) without a safe cut encoded whole"
    if summary.get("whole_documents"):
        extra += (f", {plural(summary['whole_documents'], 'long document')} encoded whole"
                  " (the tokenizer has no safe-cut rule: one worker each)")
    say(
        quiet,
        f"encoded {plural(summary['documents'] - summary['skipped_empty'], 'document')}{extra}:"
        f" train {plural(summary['train']['tokens'], 'token')} ({plural(summary['train']['documents'], 'doc')}),"
        f" val {plural(summary['val']['tokens'], 'token')} ({plural(summary['val']['documents'], 'doc')}),"
        f" {summary['mb_per_s']} MB/s → {out_dir}"
        + (f" (layouts: {', '.join(summary['layouts'])})" if summary.get("layouts", ["nanogpt"]) != ["nanogpt"] else ""),
    )
    if as_json:
        emit_json(summary)


# --- windows ------------------------------------------------------------------------------


def _parse_scales(ctx, param, values):
    """-T 512,1024 and -T 512 -T 1024 both mean two scales (in the order given, no repeats)."""
    scales = []
    for value in values:
        try:
            scales += [int(v) for v in str(value).split(",") if v.strip()]
        except ValueError:
            raise click.BadParameter(f"{value!r}: give an integer or a comma list like 512,1024") from None
    if not scales:
        raise click.BadParameter("give at least one value")
    return list(dict.fromkeys(scales))


@main.command()
@click.argument("bin_path", metavar="BIN", type=click.Path(dir_okay=True))
@click.option("-T", "--context", "T", required=True, multiple=True, callback=_parse_scales,
              help="Model input length in tokens; several (-T 512 -T 1024 or 512,1024) write one plan per scale.")
@click.option("--stride", type=int, help="Tokens between window starts, 1 to the span (T + 1, or T with --no-targets) [default: T // 2]; a larger stride would skip tokens and is refused.")
@click.option("--overlap", type=float, help="Overlap rate F in [0, 1): stride = round(span × (1 − F)).")
@click.option("--targets/--no-targets", default=True, show_default=True,
              help="Windows span T+1 tokens (x = w[:T], y = w[1:]) or just T.")
@click.option("--offset", type=int, help="First start (clamped to N − span).")
@click.option("--random-offset", is_flag=True, help="Offset drawn uniformly from [0, stride) per (seed, epoch); --boundaries none|doc only (semantic cuts snap to the same edges).")
@click.option("--seed", type=int, help="Seed for --random-offset and --shuffle.")
@click.option("--epoch", type=int, help="Epoch for --random-offset and --shuffle [default: 0].")
@click.option("--tail", type=click.Choice(windows_mod.TAILS),
              help="Leftover after the last regular window: one window at N − span (align, default), a shorter one (short), or none (drop).")
@click.option("--short", type=click.Choice(windows_mod.SHORTS), default="keep", show_default=True,
              help="A document shorter than the span: one short window, or none.")
@click.option("--boundaries", type=click.Choice(windows_mod.BOUNDARIES), default="none", show_default=True,
              help="Never cross documents (doc); also end/start on paragraph or sentence edges when they fit.")
@click.option("--pack", is_flag=True, help="With --boundaries doc: pack whole short documents into shared windows.")
@click.option("--shuffle", is_flag=True, help="Permute window order by (seed, epoch).")
@click.option("--shards", type=int, help="Split into K plan files, round-robin (PLAN.shard0ofK.npy …).")
@click.option("--materialize", is_flag=True, help="Also write the token windows, (n, span), as PLAN.tokens.npy.")
@click.option("--format", "fmt", type=click.Choice(windows_mod.FORMATS), default="npy", show_default=True,
              help="npy plan + sidecar, txt (start<TAB>length lines) or jsonl.")
@click.option("--decode", is_flag=True, help="With --format jsonl: add each window's text.")
@click.option("-o", "--output", required=True, help="Plan file (PLAN.npy), or - for txt/jsonl on stdout.")
@click.option("--meta", "meta_path", type=click.Path(dir_okay=False),
              help="meta.json describing BIN [default: the one beside it; for llm.c shards, the data folder's above llmc/].")
@click.option("--encoding", help="Tokenizer name when meta.json does not name a usable one [bare .bin: gpt2].")
@quiet_option
@json_option
def windows(bin_path, T, stride, overlap, targets, offset, random_offset, seed, epoch, tail, short, boundaries,
            pack, shuffle, shards, materialize, fmt, decode, output, meta_path, encoding, quiet, as_json):
    """Plan training windows over a token file: integer offsets, exact and reproducible.

    \b
      winsample windows data/train.bin -T 1024 -o train.plan.npy
      winsample windows data/train.bin -T 256 --boundaries paragraph -o plan.npy
      winsample windows data/train.bin -T 8 --stride 4 --format txt -o - | head
    """
    if as_json and output == "-":
        raise click.UsageError("--json and -o - both want stdout: write the plan to a file, or drop --json")
    opts = windows_mod.Options(
        T=T, targets=targets, stride=stride, overlap=overlap, offset=offset, random_offset=random_offset,
        seed=seed, epoch=epoch, tail=tail, short=short, boundaries=boundaries, pack=pack, shuffle=shuffle,
        shards=shards, materialize=materialize, format=fmt, decode=decode, encoding=encoding,
    )
    with progress(quiet, unit="tok", unit_scale=True, desc="scanning") as bar:
        summaries = windows_mod.run(bin_path, output, opts, meta_path, stream=sys.stdout, progress=bar.update)
    if as_json:
        emit_json(summaries[0] if len(summaries) == 1 else {"plans": summaries})
    from .verify import percent

    for s in summaries:
        where = ", ".join(s["files"]) or "stdout"
        say(quiet, f"{plural(s['windows'], 'window')} of span {s['span']} (T {s['T']}, stride {s['stride']},"
                   f" overlap {s['overlap']:.1%}) over {plural(s['tokens'], 'token')}: coverage {percent(s['coverage'])},"
                   f" {_uncovered(s)} → {where}")
        if not s["windows"]:  # written (an empty val split may be meant), but nothing trains on it
            say(quiet, f"note: no window fits in {plural(s['tokens'], 'token')} (span {s['span']}): the plan is empty;"
                       " verify fails its min_length and the Loader refuses it")
        elif s["tokens"] < s["span"]:  # by the contract (--short keep), but rarely meant
            say(quiet, f"note: {plural(s['tokens'], 'token')} < span {s['span']}: no full window, only a short one"
                       " (get_batch draws full windows only; --short drop skips short ones)")


def _uncovered(s: dict) -> str:
    """Where the tokens no window covers are: head (an offset), tail, or both."""
    parts = [plural(s["uncovered_tail"], "tail token")]
    if s.get("uncovered_head"):
        parts.insert(0, plural(s["uncovered_head"], "head token"))
    return " and ".join(parts) + " uncovered"


# --- verify -------------------------------------------------------------------------------

_MARK = {"pass": "✓", "fail": "✗", "warn": "!", "skip": "·"}
_COLOUR = {"pass": "green", "fail": "red", "warn": "yellow", "skip": None}
# The part of a decoded window that the previous window already showed is wrapped in ⟦…⟧
# (visible in logs and pipes too) and, on a colour terminal, also dimmed.
OVERLAP_OPEN, OVERLAP_CLOSE = "⟦", "⟧"


def _verify_text(report, strict: bool, quiet: bool, colour: bool) -> str:
    """The human report: one line per check, then the decoded windows, then a verdict.

    With -q only the checks that did not pass (like ``ruff -q``): nothing at all when all is
    well, and the exit code says the rest."""
    paint = (lambda t, **k: click.style(t, **k)) if colour else (lambda t, **k: t)
    width = max((len(c.file) for c in report.checks), default=0)
    lines = []
    for c in report.checks:
        if quiet and c.status in ("pass", "skip"):
            continue
        mark = paint(_MARK[c.status], fg=_COLOUR[c.status], bold=True) if _COLOUR[c.status] else _MARK[c.status]
        lines.append(f"{mark} {c.name:<15} {c.file:<{width}}  {c.detail}")
    if report.windows and not quiet:
        lines.append("")
        for w in report.windows:
            head = f"── {w.file} [{w.start}, {w.start + w.length}) {w.length} tokens"
            if w.overlap:
                head += f", first {w.overlap} shared with the previous window {OVERLAP_OPEN}…{OVERLAP_CLOSE}"
            if w.source is not None:
                from .provenance import source_text

                head += f" · from {source_text(w.source)}"
            lines.append(paint(head, bold=True))
            rest = w.text[len(w.overlap_text):] if w.text.startswith(w.overlap_text) else w.text
            if w.overlap:
                lines.append(paint(OVERLAP_OPEN + w.overlap_text + OVERLAP_CLOSE, dim=True) + rest)
            else:
                lines.append(w.text)
            if w.shown is not None:
                lines.append(paint(f"… ({w.length - w.shown:,} more tokens not shown)", dim=True))
    n = {s: sum(c.status == s for c in report.checks) for s in _MARK}
    counts = f"{n['pass']} passed, {n['fail']} failed, {n['warn']} warnings, {n['skip']} skipped"
    if report.ok(strict):
        verdict = paint("verify: ok", fg="green", bold=True) + f" ({counts})"
    else:
        why = " (--strict: warnings fail)" if strict and not n["fail"] else ""
        verdict = paint("verify: FAILED", fg="red", bold=True) + f" ({counts}){why}"
    if quiet:
        return "\n".join(lines)
    lines += ["", verdict]
    return "\n".join(lines)


class _VerifyCommand(click.Command):
    """verify's help lists the checks from their registry (``winsample.verify.registry``), read
    only when the help is shown, so that the CLI starts without importing the checks."""

    def format_help_text(self, ctx, formatter):
        from .verify.registry import help_lines

        if self.help and "{checks}" in self.help:
            self.help = self.help.replace("{checks}", "\n    ".join("  " + line for line in help_lines()))
        super().format_help_text(ctx, formatter)


@main.command(cls=_VerifyCommand)
@click.argument("path", type=click.Path(path_type=str))
@click.option("--plan", "plans", multiple=True, type=click.Path(path_type=str), metavar="PLAN.npy",
              help="A window plan to check against its token file (repeatable).")
@click.option("-T", "--context", "T", type=click.IntRange(min=1), default=None,
              help="Model input length: min_length checks N ≥ T + 1. Default: from each plan's sidecar.")
@click.option("--min-coverage", type=click.FloatRange(0, 1), default=0.95, show_default=True,
              help="Least share of tokens inside at least one window.")  # the article's threshold
@click.option("--max-leakage", type=click.FloatRange(0, 1), default=0.01, show_default=True,
              help="Most share of val's 32-token shingles also found in train.")
@click.option("--show", type=click.IntRange(min=0), default=5, show_default=True,
              help="Decode and print this many windows (the article reads five before every run).")
@click.option("--meta", "meta_path", type=click.Path(path_type=str), default=None,
              help="meta.json to use for a single .bin, or for llm.c shards named on their own (default: the one beside"
              " the .bin; the data folder's, above the shards' llmc/ folder).")
@click.option("--encoding", default=None, help="Tokenizer when there is no meta.json (default gpt2).")
@click.option("--retokenize-sample", type=click.IntRange(min=0), default=64, show_default=True,
              help="Documents the retokenize check decodes and encodes again with the reference tokenizer;"
                   " their ids must be its ids. 0 skips the check.")
@click.option("--retokenize-bytes", type=click.IntRange(min=1), default=512_000, show_default=True,
              help="At most this many bytes of the sampled documents' text are encoded again (a longer"
                   " document is checked on a window of it).")
@click.option("--strict", is_flag=True, help="Warnings fail too (exit 1).")
@click.option("--plot", "plot_png", type=click.Path(dir_okay=False, path_type=str), metavar="PNG", default=None,
              help="Also draw the first --plan's coverage picture into PNG (needs winsample[plot]).")
@quiet_option
@json_option
@click.pass_context
def verify(ctx, path, plans, T, min_coverage, max_leakage, show, meta_path, encoding, retokenize_sample, retokenize_bytes, strict, plot_png, quiet, as_json):
    """Check token files and window plans; exit 0 if sound, 1 if a check fails, 2 if it cannot run.

    PATH is a data folder (train.bin, val.bin, meta.json, document indexes) or one .bin.

    \b
    Checks (their names in the report and --json):
    {checks}
    \b
      winsample verify data/ --plan train.plan.npy
      winsample verify data/ --plan train.plan.npy --json -q > verify.json   # in CI
      winsample verify data/ --plan train.plan.npy --plot coverage.png
    """
    from .verify import verify as run_verify

    if plot_png:
        if not plans:
            raise click.UsageError("--plot draws a window plan: add --plan PLAN.npy", ctx=ctx)
        from .plot import require_matplotlib

        require_matplotlib()  # fail before the checks, not after

    with progress(quiet, unit="B", unit_scale=True, desc="verify") as bar:
        report = run_verify(
            path, plans, T=T, min_coverage=min_coverage, max_leakage=max_leakage, show=show,
            meta_path=meta_path, encoding=encoding, progress=bar.update, writes=[plot_png] if plot_png else [],
            retokenize_sample=retokenize_sample,
            retokenize_bytes=retokenize_bytes,
        )
    code = report.exit_code(strict)
    drawn, plot_error = None, None
    if plot_png:
        from .plot import plan_bin, plot_plan

        try:
            with progress(quiet, unit="tok", unit_scale=True, desc="plot") as bar:
                drawn = plot_plan(plot_png, plan_bin(path, plans[0]), plans[0], progress=bar.update)
        except WinsampleError as e:  # the report still prints; a broken plan may not be drawable
            plot_error = e
            code = code or e.exit_code
    ctx.meta[EXIT_CODE_KEY] = code
    if as_json:
        doc = report.to_dict(strict)
        if plot_png:
            doc["plot"] = drawn if drawn else {"png": plot_png, "error": str(plot_error)}
        emit_json(doc)
    else:
        text = _verify_text(report, strict, quiet, use_color())
        if text:
            click.echo(text)
    if plot_error is not None:
        click.echo(f"error: --plot {plot_png}: {plot_error}", err=True)
    elif drawn:
        say(quiet, f"coverage picture of {plans[0]} → {plot_png}")
    if code:
        ctx.exit(code)


# --- inspect ------------------------------------------------------------------------------


_INSPECT_STYLES = {"head": {"bold": True}, "key": {"fg": "cyan"}, "mark": {"dim": True}, "warn": {"fg": "yellow"}}


@main.command("inspect")
@click.argument("path", type=click.Path(path_type=str))
@click.option("--at", "at", type=int, default=0, show_default=True, metavar="I",
              help="First token (of a .bin) or row (of a plan) to show.")
@click.option("--count", "count", type=click.IntRange(min=0), default=32, show_default=True, metavar="K",
              help="How many tokens or plan rows to show.")
@click.option("--meta", "meta_path", type=click.Path(exists=True, dir_okay=False), default=None,
              help="meta.json describing PATH, when it is not beside it.")
@click.option("--encoding", default=None, metavar="NAME",
              help="Tokenizer to decode with, instead of the one meta.json names (gpt2 without meta).")
@json_option
def inspect_cmd(path, at, count, meta_path, encoding, as_json):
    """Show what a token file, data folder or window plan holds; writes nothing.

    \b
    PATH a .bin:    meta summary and tokens [I, I+K) as ids and decoded, │ between tokens
                    (⏎ a newline, ⟨e6 bb⟩ bytes that are not UTF-8 on their own)
    PATH a folder:  meta summary of every split
    PATH a plan:    parameters, counts and windows [I, I+K) (start, length, doc, fresh)

    Checksums are shown as recorded, not recomputed: `winsample verify` checks them.
    """
    from .inspect import AtOutOfRange, inspect_path, render_text

    try:
        report = inspect_path(path, at=at, count=count, meta_path=meta_path, encoding=encoding)
    except AtOutOfRange as e:
        raise click.BadParameter(str(e), param_hint="'--at'") from None
    if as_json:
        emit_json(report)
        return
    color = use_color()
    style = (lambda text, role: click.style(text, **_INSPECT_STYLES[role])) if color else (lambda text, role: text)
    click.echo(render_text(report, style), color=color)
