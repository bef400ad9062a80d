"""``winsample encode``: text → token files, through one ``EncodeConfig``."""

from __future__ import annotations

import click

from ..errors import Interrupted
from ..terminal import terminal_safe
from . import render
from .common import emit_json, json_option, progress, quiet_option, say, tokenizer_options
from .main import main


@main.command()
@click.argument("inputs", nargs=-1, required=True, metavar="INPUT...")
@click.option("-o", "--out", "out_dir", required=True, type=click.Path(), help="Folder for train.bin, val.bin, meta.json (created if missing).")
@tokenizer_options
@click.option("--val-fraction", type=click.FloatRange(0, 1, max_open=True), default=0.1, show_default=True, help="Share of documents (or tokens, --split tail) for val.bin.")
@click.option("--split", type=click.Choice(["doc", "tail"]), default="doc", show_default=True, help="doc: by a seeded hash of each document's text (a lone text file is refused: one split would be empty); tail: the last tokens.")
@click.option("--seed", type=int, default=1337, show_default=True, help="Seed of the document hash (--split doc).")
@click.option("--workers", type=click.IntRange(min=1), default=None, help="Worker processes [default: CPU count], each encoding whole parts of the input (--shard-size); stdin, --dedup or an input of one part run as one stream with N encoders (threads for the fast engine, as many as the input repays); 1 runs in-process.")
@click.option("--text-field", default="text", show_default=True, help="JSONL field / Parquet or Arrow column holding the text (a.b: field b of the object, or struct column, in a).")
@click.option("--id-field", default=None, metavar="FIELD", help="JSONL field / Parquet or Arrow column with each record's id (string or integer), kept in the provenance files.")
@click.option("--format", "fmt", type=click.Choice(["auto", "text", "jsonl"]), default="auto", show_default=True, help="Input format; auto: by file extension (stdin: text).")
@click.option("--no-eot", is_flag=True, help="Do not append the end-of-document id after each document.")
@click.option("--eot-token", default=None, metavar="TEXT|ID", help="The end-of-document token appended after each document, by its text or id [default: <|endoftext|> where the vocabulary has it, else the tokenizer's EOS].")
@click.option("--bos", is_flag=True, help="Put the beginning-of-document id (the tokenizer's BOS; <|endoftext|> for tiktoken) before each document.")
@click.option("--dtype", type=click.Choice(["uint16", "uint32"]), default=None, help="Token dtype [default: uint16, uint32 if the vocabulary needs it].")
@click.option("--errors", type=click.Choice(["strict", "replace"]), default="strict", show_default=True, help="Invalid UTF-8: fail, or replace with U+FFFD and count.")
@click.option("--dedup", type=click.Choice(["exact"]), default=None,
              help="exact: drop a document whose text (xxh3-128 of its UTF-8) an earlier kept one had, in input order, in"
                   " train or val; the first stays, the count is in the summary and meta.json (duplicates_dropped)."
                   " Memory: 16 bytes per kept document. Not with --engine ray.")
@click.option("--input-encoding", default=None, metavar="CODEC",
              help="Codec of text without a byte-order mark (any Python codec: latin-1, cp1252, utf-16-le) [default: utf-8]."
                   " A BOM always wins: UTF-8's is dropped, UTF-16's and UTF-32's decide the codec.")
@click.option("--on-bad-input", type=click.Choice(["fail", "skip"]), default="fail", show_default=True,
              help="A file that cannot be read as text (undecodable, binary) or a malformed JSONL line: fail, listing"
                   " every one (nothing is written), or skip it: counted in meta.json's stats and listed on stderr.")
@click.option("--engine", type=click.Choice(["local", "ray"]), default="local", show_default=True, help="local: worker processes here; ray: tasks on a Ray cluster (pip install 'winsample[ray]').")
@click.option("--address", default=None, help="--engine ray: cluster to join (auto, ray://host:10001) [default: start a local one].")
@click.option("--shard-size", default=None, help="Input bytes per part, e.g. 32MB, 64KB: each of --workers encodes whole parts"
              " [default: 32MB; --engine ray without --merge: 256MB per shard]. The bytes written do not depend on it.")
@click.option("--merge", is_flag=True, help="--engine ray: write train.bin / val.bin as the local engine does (its parts, each"
              " encoded by a Ray task) instead of shards.")
@click.option("--resume", is_flag=True, help="Continue an interrupted run from OUT_DIR/.partial (same inputs, options and backend); same bytes as a clean run."
              " Kept: each finished part (--workers 2 or more), or each finished input file (--workers 1).")
@click.option("--layout", default="nanogpt", show_default=True,
              help="Comma list of layouts to write: nanogpt (train.bin, val.bin), megatron (+ train.idx, val.idx), llmc (llmc/train_000000.bin, … shards).")
@click.option("--shard-tokens", type=click.IntRange(1, 2**31 - 1), default=100_000_000, show_default=True,
              help="--layout llmc: at most this many tokens per shard.")
@click.option("--backend", type=click.Choice(["auto", "fast", "reference"]), default="auto", show_default=True,
              help="Tokenizer engine: fast (gigatoken, pip install 'winsample[fast]'), reference (tiktoken), or auto: fast"
                   " when it loads and passes a built-in self-check against the reference. Same ids either way.")
@click.option("--chat", is_flag=True, help="JSONL records with a conversation (--messages-field) rendered by the model's chat template as transformers' apply_chat_template does; a loss mask per token beside the tokens.")
@click.option("--messages-field", default="messages", show_default=True, help="--chat: the field holding the list of {role, content} messages.")
@click.option("--chat-template", default=None, metavar="FILE|chatml", help="--chat: a Jinja template file, or chatml [default: the tokenizer's own, from tokenizer_config.json or chat_template.jinja].")
@click.option("--prompt-field", default=None, help="JSONL prompt/response pairs: the prompt's field (with --response-field): prompt + response + EOT, or a two-turn chat with --chat.")
@click.option("--response-field", default=None, help="JSONL prompt/response pairs: the response's field.")
@click.option("--loss", type=click.Choice(["assistant", "completion", "all"]), default=None, help="Which tokens train: assistant (chat default: assistant turns), completion (pairs default: response and EOT), all.")
@quiet_option
@json_option
def encode(inputs, out_dir, encoding, tokenizer_file, pattern, val_fraction, split, seed, workers, text_field, id_field, fmt, no_eot, eot_token, bos, dtype, errors, input_encoding, on_bad_input, dedup, engine, address, shard_size, merge, resume, layout, shard_tokens, backend, chat, messages_field, chat_template, prompt_field, response_field, loss, quiet, as_json):
    """Encode text files, folders or - (stdin) into OUT_DIR/train.bin, val.bin and meta.json.

    \b
      winsample encode corpus/ -o data/
      winsample encode docs.jsonl --text-field body --split tail -o data/ --json
      winsample encode corpus/ -o data/ --tokenizer-file llama3/ --bos
      winsample encode sft.jsonl --id-field id -o data/    # windows trace back to record ids
      winsample encode pile/ -o data/                     # .jsonl.zst shards (pip install 'winsample[zstd]')
      winsample encode my_dataset/ -o data/               # a datasets save_to_disk folder (its train split)

    Each document's source (input, byte offset, line, --id-field value) is kept in
    OUT_DIR/*.prov.npy: `inspect PLAN --at K` and `windows --format jsonl` show it.
    """
    from .. import encode as encode_pkg

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
        given = [n for n, v in (("--address", address), ("--merge", merge)) if v]
        if given:
            raise click.UsageError(f"{', '.join(given)} only apply to --engine ray")
    try:
        config = encode_pkg.EncodeConfig(
            tuple(inputs), out_dir, encoding=encoding, tokenizer_file=tokenizer_file, pattern=pattern,
            val_fraction=val_fraction, split=split, seed=seed, workers=workers, text_field=text_field, id_field=id_field,
            fmt=fmt, eot=not no_eot, eot_token=eot_token, bos=bos, dtype=dtype, errors=errors, input_encoding=input_encoding, on_bad_input=on_bad_input, backend=backend, engine=engine, resume=resume,
            layout=layout, shard_tokens=shard_tokens, address=address, merge=merge, chat=chat, messages_field=messages_field,
            chat_template=chat_template, prompt_field=prompt_field, response_field=response_field, loss=loss, dedup=dedup,
            **({"shard_size": shard_size} if shard_size else {}),
        )
        summary = encode_pkg.run(config, progress=on_progress, notice=lambda line: say(quiet, terminal_safe(f"note: {line}")))
    finally:
        bar.close()
    try:
        say(quiet, render.encode_summary(summary, out_dir))
        if summary.get("not_read"):  # input left out is a diagnostic: shown even with -q (like ruff -q)
            click.echo(render.not_read_warning(summary["not_read"]), err=True)
        for line in render.skipped_warning(summary):  # so is bad input skipped (--on-bad-input skip)
            click.echo(terminal_safe(line), err=True)
        if as_json:
            emit_json(summary, wrote=str(out_dir))
    except KeyboardInterrupt as e:  # the set is committed: a signal now cuts only the report short
        raise Interrupted.after_commit(e, str(out_dir)) from None
