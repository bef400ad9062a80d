"""Records: a JSONL object's fields, and how a conversation or a prompt/response pair becomes
ids and a loss mask (``encode --chat`` / ``--prompt-field``; ``verify`` re-derives a sample).

``field_value`` reads a field by name, or down a dotted path of nested objects (``meta.body``).
``RecordRule`` is what a records run decided (its ``to_json`` is meta.json's ``records`` entry);
``encode_record`` applies it to one record: a conversation through its chat template
(``tokenizer.chat``), a pair as ``encode(prompt) + encode(response) + [EOT]``, or with ``chat``
the two-turn conversation ``[user: prompt, assistant: response]``.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

import numpy as np

from .errors import DataError
from .tokenizer import chat

MISSING = object()  # what field_value returns for a field the record does not have


def field_value(obj: dict, field: str):
    """``obj[field]``; else, for a dotted name (``meta.body``), the value down that path of nested
    objects (a key that holds the dot itself wins); ``MISSING`` when there is none."""
    if field in obj:
        return obj[field]
    value = obj
    for part in field.split("."):
        if not isinstance(value, dict) or part not in value:
            return MISSING
        value = value[part]
    return value


def read_record(path, offset: int, where: str) -> dict:
    """The JSONL record on the line starting at byte ``offset`` of ``path`` (an input read again:
    ``verify``); DataError naming ``where`` when that line is no JSON object (the file changed)."""
    with open(path, "rb") as f:
        f.seek(offset)
        line = f.readline()
    try:
        obj = json.loads(line.decode("utf-8-sig" if offset == 0 else "utf-8"))
    except (ValueError, RecursionError):
        obj = None
    if not isinstance(obj, dict):
        raise DataError(f"{where}: no JSON object on that line now (the file changed since encode)")
    return obj


@dataclass(frozen=True)
class RecordRule:
    """How a records run turns a JSONL object into ids and a mask. ``loss``: ``assistant``,
    ``completion`` or ``all``; ``eot``: the id after a pair (None: none); ``template``: the
    ``--chat-template`` choice (None: the tokenizer's own), ``template_sha256`` its text's;
    ``mask_rule``: which rule found the assistant turns (``chat.MASK_RULE``; 1 before rule 2)."""

    chat: bool
    loss: str
    messages_field: str = "messages"
    prompt_field: str | None = None
    response_field: str | None = None
    eot: int | None = None
    template: str | None = None
    template_sha256: str | None = None
    mask_rule: int = 1  # chat.MASK_RULE when encoded; absent (1): a dataset encoded before the header rule, read by its own

    @property
    def kind(self) -> str:
        return "chat" if self.chat else "pairs"

    def to_json(self) -> dict:
        return {"kind": self.kind, **asdict(self)}

    @classmethod
    def from_json(cls, entry: dict) -> RecordRule | None:
        """The rule a meta.json ``records`` entry holds; None when it is not one this winsample reads."""
        try:
            return cls(**{k: entry[k] for k in cls.__dataclass_fields__ if k in entry})
        except TypeError:
            return None


def _text(where: str, record: dict, field: str) -> str:
    value = field_value(record, field)
    if value is MISSING:
        raise DataError(f"{where}: no field {field!r} (fields: {', '.join(list(record)[:5]) or 'none'})")
    if not isinstance(value, str):
        raise DataError(f"{where}: field {field!r} is {'null' if value is None else type(value).__name__}, not a string")
    return value


def messages_of(rule: RecordRule, where: str, record: dict):
    """The conversation ``record`` holds (a pair: the two turns); DataError naming ``where``."""
    if rule.prompt_field is None:
        value = field_value(record, rule.messages_field)
        if value is MISSING:
            raise DataError(f"{where}: no field {rule.messages_field!r} (fields: {', '.join(list(record)[:5]) or 'none'});"
                            " name the conversation's field with --messages-field")
        return value
    prompt, response = (_text(where, record, f) for f in (rule.prompt_field, rule.response_field))
    return [{"role": "user", "content": prompt}, {"role": "assistant", "content": response}]


def encode_record(tok, template: chat.ChatTemplate | None, rule: RecordRule, where: str,
                  record: dict) -> tuple[np.ndarray, np.ndarray, str]:
    """(uint32 ids, uint8 mask, the text the split is decided by) of one record; DataError naming
    ``where`` for a record that is none (a missing field, a template's refusal)."""
    if rule.chat:
        messages = messages_of(rule, where, record)
        tools = record.get("tools") if rule.prompt_field is None else None  # a conversation's tool schemas
        try:
            ids, mask = chat.encode_conversation(tok, template, messages, rule.loss, tools, rule.mask_rule)
        except chat.TemplateRefused as e:
            raise chat.refused(where, e) from None
        key = json.dumps([messages, tools] if tools is not None else messages, ensure_ascii=False, sort_keys=True)
        return ids, mask, key
    prompt, response = (_text(where, record, f) for f in (rule.prompt_field, rule.response_field))
    p, r = tok.encode(prompt), tok.encode(response)
    ids = np.concatenate([p, r, np.array([] if rule.eot is None else [rule.eot], np.uint32)]).astype(np.uint32)
    mask = np.ones(len(ids), np.uint8)
    if rule.loss != "all":
        mask[: len(p)] = 0
    return ids, mask, prompt + "\0" + response
