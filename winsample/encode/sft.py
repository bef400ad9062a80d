"""``encode --chat`` and ``encode --prompt-field/--response-field``: records → tokens and a loss mask.

A record is one document, never cut: a conversation is rendered with the model's chat template
and tokenized as transformers' ``apply_chat_template(tokenize=True)`` does (``tokenizer.chat``;
no EOT appended: the template closes each turn); a prompt/response pair is
``encode(prompt) + encode(response) + [EOT]``, or, with ``--chat`` too, the two-turn
conversation ``[user: prompt, assistant: response]``. Beside each split's ``.bin`` goes its loss
mask (``formats.mask_name``: one byte per token, 1 where the label is trained on), described
in meta.json's ``splits.<name>.mask``. ``loss``: ``assistant`` (chat's default), ``completion``
(pairs' default: the response and its EOT), ``all``.

A record's split is the run's ``--split doc`` rule over its rendered text (prompt and response
for a pair): the same records give the same bytes whatever the worker count. Records are read
in input order from JSONL; workers render and tokenize in order-preserving batches.
"""

from __future__ import annotations

import dataclasses
import hashlib
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from .. import disk, formats, records, tokenizer, tokensrc
from ..errors import ConfigError, DataError
from ..tokenizer import chat
from . import decoding, dedup, inputs, pipeline
from .config import EncodeConfig, RunSpec
from .executors import pool as pool_mod
from .executors.finish import write_layouts
from .pipeline import DocRule, SplitWriter, write_index

BATCH = 256  # records per task sent to a worker


class Recipe:
    """How one record becomes (ids, mask, split): picklable, so each worker rebuilds the template."""

    def __init__(self, tok, config: EncodeConfig, spec: RunSpec):
        self.tok, self.dtype = tok, spec.dtype
        self.rule = records.RecordRule(
            chat=config.chat, loss=config.loss or ("assistant" if config.chat else "completion"),
            messages_field=config.messages_field, prompt_field=config.prompt_field, response_field=config.response_field,
            eot=spec.eot_id if config.eot and not config.chat else None, template=config.chat_template,
            mask_rule=chat.MASK_RULE)
        self.split_rule = DocRule(config.split, config.val_fraction, config.seed, False, None, spec.dtype)  # the split rule only
        self._template = None

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k != "_template"}

    def __setstate__(self, state):
        self.__dict__.update(state, _template=None)

    @property
    def template(self) -> chat.ChatTemplate | None:
        if self._template is None and self.rule.chat:
            self._template = chat.template_for(self.tok, self.rule.template)
        return self._template

    def recorded(self) -> records.RecordRule:
        """The rule as meta.json records it (the template's sha256 with it)."""
        sha = hashlib.sha256(self.template.identity.encode("utf-8")).hexdigest() if self.rule.chat else None
        return dataclasses.replace(self.rule, template_sha256=sha)

    def encode(self, where: str, record: dict) -> tuple[np.ndarray, np.ndarray, bool, int]:
        """(ids cast to the run's dtype, mask, goes to val, ``--dedup`` hash of the record) of one
        record; DataError naming ``where`` (a record with nothing to train on is one: it teaches nothing)."""
        ids, mask, key = records.encode_record(self.tok, self.template, self.rule, where, record)
        if len(ids) and not mask.any():
            raise DataError(f"{where}: no token to train on (--loss {self.rule.loss}): "
                            + ("no assistant turn the template renders" if self.rule.chat else "an empty response and no EOT"))
        ids = formats.check_and_cast(ids, self.dtype, self.tok.n_vocab, where)
        return ids, mask, self.split_rule.hashing and self.split_rule.val_of_text(key), dedup.digest_of_text(key)

    def batch(self, items: list[tuple[str, dict]]) -> list:
        """Each record's ``encode``, or the DataError's message for a record that is no usable one
        (the run decides: skip it, or find every such record before it fails)."""
        out = []
        for where, record in items:
            try:
                out.append(self.encode(where, record))
            except DataError as e:
                out.append(str(e))
        return out


def check(config: EncodeConfig) -> None:
    """ConfigError for options a records run cannot use."""
    if config.split != "doc":
        raise ConfigError("--split tail would cut a record in two: records go whole to train or val (--split doc)")
    if config.resume:
        raise ConfigError("--resume does not apply to --chat / --prompt-field runs yet: run it again without --resume")
    if config.engine != "local":
        raise ConfigError("--chat / --prompt-field runs on --engine local")
    if config.bos:
        raise ConfigError("--bos with records: a chat template writes its own BOS where the model wants one; drop --bos")
    if config.chat and not config.eot:  # it changed nothing, silently
        raise ConfigError("--no-eot with --chat: a conversation ends as its template ends it, and no EOT is appended; drop --no-eot")
    if config.text_field != "text":
        raise ConfigError("--text-field names plain documents' field; records are read with --messages-field (--chat)"
                          " or --prompt-field/--response-field")
    if config.chat and config.loss not in (None, "assistant", "all"):
        raise ConfigError(f"--loss {config.loss} applies to prompt/response pairs without --chat; a chat trains on assistant or all")
    if not config.chat and config.loss not in (None, "completion", "all"):
        raise ConfigError(f"--loss {config.loss} applies to --chat; prompt/response pairs train on completion or all")


def run(config: EncodeConfig, progress=None, notice=None) -> dict:
    """Encode the records of ``config.inputs`` (JSONL) into OUT_DIR with loss masks; the summary."""
    t0 = time.perf_counter()
    check(config)
    tok = tokenizer.choose_eot(tokenizer.load(config.encoding, config.tokenizer_file, config.pattern or "gpt2"), config.eot_token)
    dtype = pipeline.resolve_dtype(tok, config.dtype)
    chosen = tokensrc.check_layouts(config.layout, dtype, tok.n_vocab, config.shard_tokens, tok.eot)
    if not config.chat:
        pipeline.check_edges(tok, config.eot, False)
    if config.chat:  # a conversation ends as its template ends it: nothing appended (the EOT only separates llm.c's documents)
        config = dataclasses.replace(config, eot=False, eot_token=None)
    spec = RunSpec(config, dtype, tok.eot, None)
    recipe = Recipe(tok, config, spec)
    recipe.template  # noqa: B018 (a template that does not load fails here, before anything is read)
    sources = inputs.resolve_inputs(list(config.inputs), config.fmt, notice)  # a .txt is refused by name (_records)
    out_dir = pipeline.check_out_dir(config.out_dir, sources, config.tokenizer_file)
    with disk.locked(out_dir):
        work = formats.partial_dir(out_dir)
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        try:
            stage = formats.staging_dir(out_dir)
            meta, stats = _write(recipe, config, spec, sources, work, stage, out_dir, chosen, progress)
        except BaseException:
            formats.recover(out_dir)
            raise
        finally:
            shutil.rmtree(work, ignore_errors=True)
    extra = {"encoding": tok.name, "dtype": dtype, "layouts": list(chosen), "workers": config.workers or 1,
             "loss": recipe.rule.loss, "trained_tokens": {s: meta.splits[s].mask.trained for s in formats.SPLITS}}
    return pipeline.summary(out_dir, meta, stats, sources, time.perf_counter() - t0, extra)


class _MaskWriter:
    def __init__(self, stage: Path, split: str):
        self.path = stage / formats.mask_name(split)
        self.f = open(self.path, "wb")
        self.hasher = disk.new_hasher()
        self.tokens = self.trained = 0

    def write(self, mask: np.ndarray) -> None:
        data = mask.astype(np.uint8).tobytes()
        with disk.naming(self.path):
            self.f.write(data)
        self.hasher.update(data)
        self.tokens += len(mask)
        self.trained += int(mask.sum())

    def close(self) -> None:
        with disk.naming(self.path):
            self.f.close()


def _records(sources, progress, id_field: str | None, reading) -> Iterator[tuple[str, dict, inputs.Origin]]:
    for i, src in enumerate(sources):
        if src.kind != "jsonl":
            raise ConfigError(f"{src.label}: --chat / --prompt-field read JSONL records (one object per line);"
                              " name the .jsonl files (or --format jsonl)")
        reader = inputs.Reader(src, progress)
        try:
            for where, record, offset, line, doc_id in inputs.jsonl_docs(reader, reading.errors, None, id_field, reading=reading):
                yield where, record, inputs.Origin(i, offset, line, doc_id)
        except BaseException:  # a signal, an error, a reader that stopped early: not "the file changed" (read in part)
            reader.abort()
            raise
        reader.close()


_WORKER: dict = {}  # in a worker process: the run's recipe


def _worker_init(recipe: Recipe) -> None:
    pool_mod.worker_started()
    _WORKER["recipe"] = recipe


def _worker_batch(items: list[tuple[str, dict]]) -> list:
    return _WORKER["recipe"].batch(items)


def _encoded(recipe: Recipe, records, workers: int):
    """(where, origin, (ids, mask, val)) in input order, encoded by ``workers`` processes."""
    def batches():
        batch = []
        for item in records:
            batch.append(item)
            if len(batch) == BATCH:
                yield batch
                batch = []
        if batch:
            yield batch

    if workers <= 1:
        for b in batches():
            yield from zip(b, recipe.batch([(w, r) for w, r, _ in b]))
        return
    # the recipe (its tokenizer reloaded from its files) goes to each worker once, not with every batch
    pool = pool_mod.make_forkserver_pool(workers, _worker_init, recipe)
    failed = True
    try:
        pending = []
        for b in batches():
            pending.append((b, pool.apply_async(_worker_batch, ([(w, r) for w, r, _ in b],))))
            while len(pending) > 2 * workers:
                b0, fut = pending.pop(0)
                yield from zip(b0, pool_mod.pool_get(pool, fut))  # a worker that dies fails the run
        for b0, fut in pending:
            yield from zip(b0, pool_mod.pool_get(pool, fut))
        failed = False
    finally:  # an error, a signal or a reader that stops early: the workers killed and reaped, no wait
        pool_mod.close_pool(pool, failed)


def _write(recipe: Recipe, config: EncodeConfig, spec: RunSpec, sources, work: Path, stage: Path, out_dir: Path,
           chosen, progress) -> tuple[formats.Meta, dict]:
    writers = {s: SplitWriter(work, s, spec.dtype) for s in formats.SPLITS}
    masks = {s: _MaskWriter(work, s) for s in formats.SPLITS}
    stats = pipeline.new_stats(config.dedup is not None)
    seen = dedup.Seen(work) if config.dedup is not None else None  # --dedup exact: a record seen before is dropped
    read = (lambda n: progress(n, 0)) if progress else None
    # bad lines are always set aside while reading: with --on-bad-input fail every one is found, then the run fails
    reading = decoding.Reading(config.errors, config.input_encoding, True, hint=True)
    skip = config.on_bad_input == "skip"
    bad: list[str] = []
    for (_where, _record, origin), got in _encoded(recipe, _records(sources, read, config.id_field, reading), config.workers or 1):
        if isinstance(got, str):  # a record that is no usable one (its message names file and line): counted as skipped, not read
            reading.left_out(decoding.BadInput(got, sources[origin.input], origin.offset, origin.line, record=True))
            continue
        stats["documents"] += 1
        ids, mask, val, digest = got
        if reading.bad and not skip:  # the run is failing: it only looks for the other bad records
            continue
        if not len(ids):
            stats["documents_skipped_empty"] += 1
            continue
        if seen is not None and not seen.add(digest):
            stats[pipeline.DEDUP_STAT] += 1
            continue
        s = "val" if val else "train"
        w = writers[s]
        w.start_doc()
        w.add_origin(origin)
        w.write(ids)
        masks[s].write(mask)
        if progress:
            progress(0, len(ids))
    if seen is not None:
        seen.close()
    order = {s.label: i for i, s in enumerate(sources)}  # in input order, whichever step found them
    reading.bad.sort(key=lambda b: (order.get(b["input"], len(order)), b["line"] or 0))
    bad = [b["error"] for b in reading.bad]
    total = reading.skipped_inputs + reading.skipped_records
    if total and not skip:
        raise decoding.many_bad(bad, total) if total > 1 else DataError(bad[0])
    decoding.add_counts(stats, {}, reading)
    prov = {}
    for s in formats.SPLITS:
        writers[s].close()
        masks[s].close()
        write_index(work, writers[s].starts_path, work / formats.doc_index_name(s), writers[s].documents)
        p = writers[s].prov
        with disk.naming(work / formats.prov_name(s)):
            prov[s] = formats.write_provenance(work, s, [formats.prov_segment(p.rec_path, p.ids_path)], config.id_field)
    try:
        pipeline.check_outcome(sources, stats, writers["train"].tokens, writers["val"].tokens, config.val_fraction, False)
    except ConfigError as e:  # its hint names --split tail, which would cut a record: records have their own
        raise ConfigError(str(e).split(": a single or few documents want")[0]
                          + ": records go whole to train or val: use more records, or --val-fraction 0") from None
    splits = {s: pipeline.split_entry(s, writers[s]) for s in formats.SPLITS}
    for s in formats.SPLITS:
        m = masks[s]
        splits[s].mask = formats.LossMask(file=formats.mask_name(s), tokens=m.tokens, trained=m.trained,
                                          checksum=disk.format_checksum(m.hasher), loss=recipe.rule.loss)
    meta = pipeline.build_meta(sources, recipe.tok.describe(), spec, splits, stats, provenance=prov)
    meta.extra["records"] = recipe.recorded().to_json()
    names, remove = write_layouts(work, out_dir, meta, chosen, spec)
    if config.id_field is None:  # an earlier run's record ids: not this set's
        remove += [formats.prov_ids_name(s) for s in formats.SPLITS if (out_dir / formats.prov_ids_name(s)).is_file()]
    names += [formats.mask_name(s) for s in formats.SPLITS] + [formats.prov_name(s) for s in formats.SPLITS]
    names += [formats.prov_ids_name(s) for s in formats.SPLITS] if config.id_field is not None else []
    pipeline.commit_set(work, stage, out_dir, names, meta, remove)
    return meta, stats
