"""``winsample chunk``: text → retrieval chunks (JSONL) with character offsets."""

from __future__ import annotations

import sys

import click

from ..terminal import terminal_safe
from .common import emit_json, json_option, progress, quiet_option, say, tokenizer_options
from .main import main
from .render import chunk_line, not_read_warning, skipped_warning


@main.command("chunk")
@click.argument("inputs", nargs=-1, required=True, metavar="INPUT...")
@click.option("-o", "--output", required=True, help="Chunk JSONL file, or - for stdout.")
@click.option("-T", "--tokens", "T", type=click.IntRange(min=8), default=512, show_default=True,
              help="Token limit: no chunk's text encodes to more tokens.")
@click.option("--overlap", type=click.IntRange(min=0), default=None,
              help="Tokens consecutive chunks share (with --boundaries: the overlap nearest to it that starts on an edge) [default: T/8, 64 for 512].")
@click.option("--boundaries", type=click.Choice(["none", "paragraph", "sentence"]), default="none", show_default=True,
              help="End chunks on paragraph or sentence edges where one is in reach (the planner of windows --boundaries).")
@tokenizer_options
@click.option("--text-field", default="text", show_default=True, help="JSONL field / Parquet or Arrow column holding the text (a.b: field b of the object, or struct column, in a).")
@click.option("--id-field", default=None, metavar="FIELD", help="JSONL field / Parquet or Arrow column with each record's id: chunk ids become ID#K.")
@click.option("--format", "fmt", type=click.Choice(["auto", "text", "jsonl"]), default="auto", show_default=True,
              help="Input format; auto: by file extension (stdin: text).")
@click.option("--errors", type=click.Choice(["strict", "replace"]), default="strict", show_default=True,
              help="Invalid UTF-8: fail, or replace with U+FFFD (offsets then count the replaced text's characters).")
@click.option("--on-bad-input", type=click.Choice(["fail", "skip"]), default="fail", show_default=True,
              help="A file that cannot be read as text or a malformed record: fail (nothing is written), or skip it:"
                   " its document gives no chunk, and it is counted and listed on stderr.")
@quiet_option
@json_option
def chunk_cmd(inputs, output, T, overlap, boundaries, encoding, tokenizer_file, pattern, text_field, id_field, fmt,
              errors, on_bad_input, quiet, as_json):
    """Cut text files, folders, JSONL or - (stdin) into chunks for a retrieval index.

    Each JSONL line is one chunk: id, text, char_start, char_end (its characters in the
    document's text: text == document[char_start:char_end]), tokens (its text's own token
    count, never over -T), source (path, line, id). Chunks are token-exact windows of each
    document, consecutive ones sharing --overlap tokens, and together they cover the document.

    \b
      winsample chunk docs/ -o chunks.jsonl -T 256 --overlap 32 --boundaries sentence
      winsample chunk kb.jsonl --id-field id -o - | head
    """
    from ..retrieval import run

    if not output:
        raise click.UsageError("-o is empty: give the chunk JSONL file's path, or - for stdout")
    if output.endswith((".gz", ".zst")):  # written plain, it would not read back as what its name says
        raise click.UsageError(f"-o {output}: chunk writes plain JSONL, not compressed; name it .jsonl (compress it after)")
    if output == "-" and as_json:
        raise click.UsageError("--json with -o -: stdout holds the chunks; give -o a file for the summary on stdout")
    if overlap is not None and overlap >= T:
        raise click.UsageError(f"--overlap {overlap} must be below -T {T}")
    bar = progress(quiet, unit="B", unit_scale=True, unit_divisor=1024, desc="chunk")
    with bar:
        report = run(list(inputs), output, T, overlap, boundaries, encoding, tokenizer_file, pattern, text_field,
                     id_field, fmt, errors, stream=sys.stdout,
                     progress=bar.update, notice=lambda m: say(quiet, terminal_safe(f"note: {m}")), on_bad_input=on_bad_input)
    if as_json:
        emit_json(report, wrote=None if output == "-" else output)
    else:
        say(quiet, chunk_line(report))
    if report.get("not_read"):  # files a folder held and chunk left: shown even with -q, as encode does
        click.echo(not_read_warning(report["not_read"]), err=True)
    for line in skipped_warning(report, "the summary (--json: bad_inputs)"):  # bad input left out (--on-bad-input skip): shown even with -q
        click.echo(terminal_safe(line), err=True)
