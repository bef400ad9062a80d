"""A records dataset's own checks (``encode --chat`` / ``--prompt-field``): the loss mask beside
each token file, and the retokenize sample done the way those records were encoded.

``loss_mask``: one byte per token of the split (its size), the checksum meta.json records, only
0 and 1, as many 1s as recorded, and, unless the dataset trains on every token (``--loss all``),
at least one trained token in every record (a record with none teaches nothing: a template that
marks no assistant turn, a conversation without one).

The retokenize sample of such a dataset (``sample``): a chat document's text, decoded, encodes
again to its ids with the template's special tokens parsed (``apply_chat_template``'s own
tokenization of its rendered text); a prompt/response pair's prompt (the tokens before the first
trained one) and response (the rest, less the EOT) each encode again to their own ids.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from .. import disk, records
from ..errors import WinsampleError
from ..tokenizer import chat
from . import retokenize as engine
from .registry import check
from .report import Report, Status

CHUNK = 1 << 24  # mask bytes read at a time


@check("loss_mask", help="each split's loss mask: one 0/1 byte per token, its checksum, a trained token in every record (a prompt/response pair: its prompt untrained, then its response)",
       reads="mask files, document indexes, meta.json", stage="dataset")
def loss_mask(report: Report, ctx) -> None:
    if ctx.meta is None or ctx.folder is None:
        return
    for t in ctx.targets:
        entry = ctx.meta.splits.get(t.split) if t.split else None
        if entry is None or entry.mask is None:
            continue
        status, detail = _check_mask(ctx.folder / entry.mask.file, entry, t)
        report.add(LOSS_MASK, entry.mask.file, status, detail)


LOSS_MASK = loss_mask.spec


def _check_mask(path, entry, t) -> tuple[Status, str]:
    m = entry.mask
    try:
        size = path.stat().st_size
    except OSError as e:
        return Status.FAIL, f"{path.name}: cannot read it ({disk.os_error_text(e)}); encode again"
    if size != entry.tokens or m.tokens != entry.tokens:
        return Status.FAIL, f"{path.name} has {size} bytes for the {entry.tokens} tokens of {entry.file} (one byte per token)"
    checksum = disk.checksum_file(path)
    if checksum != m.checksum:
        return Status.FAIL, f"{path.name}: checksum {checksum} is not the recorded {m.checksum} (changed after encode)"
    mask = np.memmap(path, dtype=np.uint8, mode="r") if size else np.zeros(0, np.uint8)
    trained = 0
    for a in range(0, size, CHUNK):
        part = np.asarray(mask[a : a + CHUNK])
        bad = np.flatnonzero(part > 1)
        if len(bad):
            return Status.FAIL, f"{path.name}: byte {a + int(bad[0])} is {int(part[bad[0]])}, not 0 or 1"
        trained += int(np.count_nonzero(part))
    if trained != m.trained:
        return Status.FAIL, f"{path.name}: {trained} trained tokens, not the recorded {m.trained}"
    idle = 0
    if m.loss != "all" and size:
        try:
            starts = t.src.doc_starts() if t.src is not None else None
        except (WinsampleError, OSError):
            starts = None  # the meta check names a broken index
        if starts is not None and len(starts):
            per_doc = np.add.reduceat(mask, np.asarray(starts, np.int64))
            zero = np.flatnonzero(per_doc == 0)
            if len(zero):
                return Status.FAIL, (f"{path.name}: {len(zero)} record(s) train on no token (the first: document {int(zero[0])}):"
                                     " its template marked no assistant turn, or it has none")
            idle = len(starts)
            if m.loss == "completion" and (wrong := _not_prompt_then_response(mask, np.asarray(starts, np.int64))) is not None:
                return Status.FAIL, (f"{path.name}: document {wrong} is not its prompt (untrained) then its response (trained):"
                                     " a trained token comes before an untrained one")
    where = f", every one of {idle} record(s) trains on at least one" if idle else ""
    return Status.PASS, f"{size} tokens, {trained} trained ({m.loss}){where}; checksum agrees"


def _not_prompt_then_response(mask: np.ndarray, starts: np.ndarray) -> int | None:
    """The first document whose mask is not 0…0 1…1 (a prompt/response pair's, whatever its
    records say: a mask edited with its checksum is caught without them), else None."""
    n = len(mask)
    for a in range(0, n - 1, CHUNK):
        part = np.asarray(mask[a : min(n, a + CHUNK + 1)])
        falls = np.flatnonzero((part[:-1] == 1) & (part[1:] == 0)) + a + 1  # a 0 right after a 1
        at = np.searchsorted(starts, falls)
        inside = falls[(at >= len(starts)) | (starts[np.minimum(at, len(starts) - 1)] != falls)]
        if len(inside):
            return int(np.searchsorted(starts, inside[0], "right") - 1)
    return None


class Rerender:
    """A sampled record read again from its input (the provenance's file and byte offset) and
    encoded again by the dataset's own rule (``records.encode_record``, its template checked by
    sha256): its ids *and* its mask must be the ones on disk. ``why``: why it cannot (a dataset
    whose inputs moved, a compressed input, a template that changed), else None."""

    def __init__(self, tok, rule: records.RecordRule | None, tracer, inputs: list | None = None):
        self.tok, self.rule, self.tracer, self.template, self.why = tok, rule, tracer, None, None
        self.inputs = inputs if isinstance(inputs, list) else []  # meta.json's inputs: each one's size as encoded
        if rule is None or tracer is None:
            self.why = "no records rule or provenance recorded"
        elif rule.chat:
            try:
                self.template = chat.template_for(tok, rule.template)
            except WinsampleError as e:
                self.why = f"its chat template does not load now ({e})"
            else:
                if hashlib.sha256(self.template.identity.encode("utf-8")).hexdigest() != rule.template_sha256:
                    self.why = "its chat template changed since encode"

    def __call__(self, d: int):
        """(ids, mask) of document ``d``'s record, or a str saying why it cannot be read again."""
        src = self.tracer.document(d)
        path = Path(str(src.get("path")))
        if not path.is_file() or path.suffix.lower() not in (".jsonl", ".json"):
            return f"{path}: not a plain JSONL file here"
        i = src.get("input")
        recorded = self.inputs[i].get("bytes") if isinstance(i, int) and 0 <= i < len(self.inputs) and isinstance(self.inputs[i], dict) else None
        if recorded != path.stat().st_size:  # only the file that was encoded is read again, never another one
            return f"{path}: not the {recorded}-byte input meta.json records (changed since encode)"
        where = f"{path}:{src['line']}"
        try:
            record = records.read_record(path, src["offset"], where)
            ids, mask, _ = records.encode_record(self.tok, self.template, self.rule, where, record)
        except (OSError, WinsampleError) as e:
            return str(e)
        return ids, mask


def sample(tok, u: engine.Unit, mask: np.ndarray, kind: str, eot_appended: bool, docs: int,
           rerender: Rerender | None = None) -> engine.Outcome:
    """The retokenize outcome of a records file (the module docstring's rule), ``docs`` documents
    sampled with the check's seed; with ``rerender`` each sampled record is also read again from
    its input and its ids and mask compared with the file's."""
    if u.starts is None or not len(u.starts):
        return engine.Outcome(u.label, "skip", "no document index: records are not found by EOT")
    if kind == "chat" and not hasattr(tok, "encode_with_specials"):
        return engine.Outcome(u.label, "skip", f"the {tok.family} tokenizer renders no chat")
    if not tok.exact_decode:
        return engine.Outcome(u.label, "skip", f"the {tok.family} tokenizer {tok.name!r} does not decode exactly")
    n = len(u.tokens)
    ends = np.append(np.asarray(u.starts[1:], np.int64), n)
    rng = np.random.default_rng(engine.SEED)
    picks = np.sort(rng.choice(len(u.starts), size=min(docs, len(u.starts)), replace=False))
    checked = nbytes = bad = reread = 0
    first = unread = ""
    for d in picks.tolist():
        s, e = int(u.starts[d]), int(ends[d])
        ids = np.asarray(u.tokens[s:e], np.int64)
        got = rerender(d) if rerender is not None and rerender.why is None else None
        if isinstance(got, str):
            unread = unread or got  # why this record could not be read again (said in the outcome)
        if isinstance(got, tuple):
            reread += 1
            if not (np.array_equal(np.asarray(got[0], np.int64), ids) and np.array_equal(got[1], np.asarray(mask[s:e]))):
                bad += 1
                first = first or f"document {d} (tokens {s}–{e}): its record, encoded again from its input, gives other ids or another mask (or the input was edited since encode)"
                checked += 1
                continue
        if kind == "chat":
            parts = [ids]
        else:
            k = int(np.argmax(np.asarray(mask[s:e]) > 0)) if np.asarray(mask[s:e]).any() else len(ids)
            body = ids[:-1] if eot_appended and len(ids) else ids
            parts = [body[:k], body[k:]]
        for p in parts:
            text = tok.decode_bytes(p.tolist())
            nbytes += len(text)
            again = tok.encode_with_specials(text.decode("utf-8", "surrogateescape"))[0] if kind == "chat" else tok.encode(text.decode("utf-8", "surrogateescape"))
            if not np.array_equal(np.asarray(again, np.int64), p):
                bad += 1
                first = first or f"document {d} (tokens {s}–{e})"
                break
        checked += 1
    what = "rendered chat text with special tokens parsed" if kind == "chat" else "each prompt and response"
    tail = ""
    if reread:
        tail = f"; {reread} read again from their inputs give the same ids and mask"
    elif rerender is not None:
        tail = f" (records not read again: {rerender.why or unread or 'their inputs are not here'})"
    if bad:
        if "does not encode" not in first and "its record" not in first:
            first += " does not encode again to its ids"
        return engine.Outcome(u.label, "fail", f"{u.label}: {first}; {bad} of {checked} sampled record(s) differ",
                              checked, nbytes, bad)
    return engine.Outcome(u.label, "pass", f"{checked} sampled record(s), {nbytes} bytes: {what} encodes again to the same ids{tail}",
                          checked, nbytes, 0)
