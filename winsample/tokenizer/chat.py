"""Chat templates: a conversation rendered and tokenized as transformers' ``apply_chat_template``
does, with a loss mask per token.

Rendering follows transformers' renderer (``transformers.utils.chat_template_utils``): Jinja2's
``ImmutableSandboxedEnvironment`` with ``trim_blocks`` and ``lstrip_blocks``, the ``loopcontrols``
extension, its ``tojson`` (no HTML escaping, ``ensure_ascii=False``), ``raise_exception``, a
``namespace`` that refuses underscore names, ``dict``, and a ``{% generation %}`` block that records
the characters it renders. The template sees ``messages``, ``tools=None``, ``documents=None``,
``add_generation_prompt=False`` and the tokenizer's special tokens by name (``bos_token``,
``eos_token``, …). A message whose value is None loses that key first, as transformers does.
One difference, for the same bytes on every day: ``strftime_now`` reads a fixed clock (``CLOCK``:
26 Jul 2024, the date Llama 3.2's template itself falls back to, or ``SOURCE_DATE_EPOCH``), so a
template that prints today's date matches transformers' output of that day, not of this one.
A record's ``tools`` list (OpenAI/HF tool schemas) is passed as ``tools``, as
``apply_chat_template(messages, tools=...)`` and TRL's SFT do.

The rendered text is tokenized with special tokens *parsed* (``add_special_tokens=False``, as
``apply_chat_template(tokenize=True)``): the template's ``<|im_start|>`` is one id.

The mask (``loss``): ``assistant`` trains on the tokens of assistant turns. Where the template
marks ``{% generation %}``, those are exactly transformers' ``assistant_masks`` (a token is in
when its characters overlap a generation block). Elsewhere an assistant turn is what rendering
the conversation up to and including it adds to rendering the conversation before it with
``add_generation_prompt=True``, from where the two first differ (its content and the
template's end of turn, not its header; not a think block the generation prompt opens). Where
they differ inside the prompt, the turn starts after its header (found as below), and after
the prompt's rest only when the turn renders all of it: an answer that merely begins like
``<think>\n`` is trained whole (rule 3, ``MASK_RULE``). So a template must render earlier turns the same whatever follows (``prefix-preserving``);
one that does not is refused, naming the turn. A template with no ``add_generation_prompt``
branch has no prompt to tell the header by: the header is then what the turn renders before
its content (found by rendering it again with a marker for the content). ``all`` trains on
every token.
"""

from __future__ import annotations

import datetime
import json
import os
import re
from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError, DataError

# strftime_now's date: SOURCE_DATE_EPOCH (the reproducible-builds convention) if set, else the date
# Llama 3.2's template itself falls back to: a template that prints "today" prints this, always.
CLOCK = (datetime.datetime.fromtimestamp(int(os.environ["SOURCE_DATE_EPOCH"]), datetime.UTC)
         if os.environ.get("SOURCE_DATE_EPOCH", "").isdigit() else datetime.datetime(2024, 7, 26, tzinfo=datetime.UTC))

# ChatML as the Hugging Face docs give it, with the assistant's content and end of turn marked.
CHATML = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' }}"
    "{% if message['role'] == 'assistant' %}{% generation %}{{ message['content'] + '<|im_end|>' }}{% endgeneration %}"
    "{% else %}{{ message['content'] + '<|im_end|>' }}{% endif %}"
    "{{ '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
BUILTIN = {"chatml": CHATML}
_GENERATION = re.compile(r"\{%-?\s*generation\s*-?%\}")


class TemplateRefused(Exception):
    """``raise_exception`` in a template, or a template that cannot render a conversation."""


def _environment():
    try:
        import jinja2
        import jinja2.ext
        from jinja2.sandbox import ImmutableSandboxedEnvironment
    except ImportError:
        raise ConfigError("chat templates need Jinja2: pip install 'winsample[chat]'") from None

    class Generation(jinja2.ext.Extension):
        """``{% generation %}…{% endgeneration %}``: renders its body and records its span."""

        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_track"), [], [], body).set_lineno(lineno)

        def _track(self, caller):
            text = caller()
            blocks = self.environment.tracking
            if blocks is not None:
                start = sum(map(len, blocks["rendered"]))  # the text rendered so far (generate() yields it)
                blocks["pending"].append((start, text))
            return text

    def raise_exception(message):
        raise TemplateRefused(str(message))

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    class Namespace(jinja2.utils.Namespace):
        def __init__(*args, **kwargs):
            self, args = args[0], args[1:]
            attrs = dict(*args, **kwargs)
            for name in attrs:
                Namespace._check(name)
            jinja2.utils.Namespace.__init__(self, attrs)

        def __setitem__(self, name, value):
            Namespace._check(name)
            jinja2.utils.Namespace.__setitem__(self, name, value)

        @staticmethod
        def _check(name):
            if isinstance(name, str) and name.startswith("_"):
                raise jinja2.exceptions.SecurityError(f"a namespace attribute may not start with '_': {name!r}")

    class TemplateDict:  # dict(...) and dict.fromkeys(...) without the class itself (transformers' own)
        def __call__(self, *args, **kwargs):
            return dict(*args, **kwargs)

        def fromkeys(self, *args, **kwargs):
            return dict.fromkeys(*args, **kwargs)

    def strftime_now(fmt):  # a fixed clock: the same records give the same bytes on every day
        return CLOCK.strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[Generation, jinja2.ext.loopcontrols])
    env.tracking = None
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    env.globals["dict"] = TemplateDict()
    env.globals["namespace"] = Namespace
    return env


@dataclass
class Rendered:
    text: str
    spans: list[tuple[int, int]]  # [start, end) characters of assistant text, in order


class ChatTemplate:
    """A chat template (``source``: Jinja text) with the special tokens it sees by name."""

    def __init__(self, source: str, special: dict[str, str], name: str = "template", tool_use: ChatTemplate | None = None):
        self._env = _environment()  # ConfigError without Jinja2 (the chat extra), before it is imported here
        import jinja2

        self.source, self.special, self.name = source, dict(special), name
        self.tool_use = tool_use  # the model's "tool_use" template: what transformers renders a record with tools by
        self.marked = bool(_GENERATION.search(source))
        try:
            self._template = self._env.from_string(source)
        except jinja2.TemplateSyntaxError as e:
            raise ConfigError(f"{name}: not a Jinja template: {e.message} (line {e.lineno})") from None

    @property
    def identity(self) -> str:
        """The text meta.json's ``template_sha256`` hashes: the source, and the tool_use template's when there is one."""
        return self.source if self.tool_use is None else f"{self.source}\n{{# tool_use #}}\n{self.tool_use.source}"

    def for_tools(self, tools) -> ChatTemplate:
        """The template a record renders with: the tool_use one when it has ``tools`` and the model one (transformers' rule)."""
        return self.tool_use if tools is not None and self.tool_use is not None else self

    def render(self, messages: list[dict], add_generation_prompt: bool = False, tools: list | None = None) -> Rendered:
        """The text, and the spans of ``{% generation %}`` blocks (empty without markers)."""
        tracking = {"rendered": [], "pending": []}
        self._env.tracking = tracking
        try:
            for block in self._template.generate(messages=messages, tools=tools, documents=None,
                                                 add_generation_prompt=add_generation_prompt, **self.special):
                tracking["rendered"].append(block)
        except TemplateRefused:
            raise
        except RecursionError:
            raise TemplateRefused(f"{self.name} recursed too deeply on this record") from None
        except Exception as e:  # the template's own code failing on this record (a TypeError, an undefined name)
            raise TemplateRefused(f"{self.name} cannot render this record: {type(e).__name__}: {e}") from None
        finally:
            self._env.tracking = None
        text = "".join(tracking["rendered"])
        spans = [(s, s + len(t)) for s, t in tracking["pending"]]
        return Rendered(text, spans)

    def assistant_spans(self, messages: list[dict], tools: list | None = None, rule: int | None = None) -> Rendered:
        """The conversation's text and its assistant spans by mask rule ``rule`` (None: ``MASK_RULE``,
        the module docstring's; 1: where no generation prompt tells the header, the turn from its
        start; 2: the turn from where it leaves the generation prompt, character by character)."""
        rule = MASK_RULE if rule is None else rule
        whole = self.render(messages, tools=tools)
        if self.marked:
            return whole
        spans = []
        for i, m in enumerate(messages):
            if m.get("role") != "assistant":
                continue
            plain = self.render(messages[:i], tools=tools).text if i else ""
            prompt = self.render(messages[:i], add_generation_prompt=True, tools=tools).text if i else ""
            upto = self.render(messages[: i + 1], tools=tools).text
            if not (upto.startswith(plain) and whole.text.startswith(upto)):
                raise TemplateRefused(
                    f"{self.name} renders message {i} differently once later turns follow (not prefix-preserving):"
                    " give a template with {% generation %} markers (--chat-template FILE), or --loss all"
                )
            # the turn starts where its text leaves the generation prompt (a prompt that opens a
            # think block, DeepSeek-R1's '<｜Assistant｜><think>\n', is the prompt's, not the turn's)
            start = max(len(plain), len(os.path.commonprefix([prompt, upto])))
            if prompt == plain and rule >= 2:  # no generation prompt to tell the header by: where the content begins
                start += self._header_length(messages, i, plain, upto, tools)
            elif rule >= 3 and start < len(prompt):  # the turn leaves the prompt inside it: where exactly
                start = self._prompt_end(messages, i, plain, prompt, upto, tools, start)
            if len(upto) > start:
                spans.append((start, len(upto)))
        return Rendered(whole.text, spans)

    def _prompt_end(self, messages: list[dict], i: int, plain: str, prompt: str, upto: str, tools, shared: int) -> int:
        """Where assistant turn ``i``'s trained text starts when it leaves the generation prompt
        inside it (DeepSeek-R1's ``<｜Assistant｜><think>\n`` against a turn of ``<｜Assistant｜>`` +
        content): after the turn's header. ``shared`` (the characters the turn and the prompt share,
        rule 2's start) would cut a content that merely begins like the prompt's rest (``<thinking …>``
        against ``<think>\n``); it is kept where no header can be found. The rest of the prompt is
        skipped too where the turn renders all of it (a template whose prompt renders earlier turns
        otherwise comes here even then)."""
        header = self._header_length(messages, i, plain, upto, tools)
        if not header or not prompt.startswith(upto[len(plain) : len(plain) + header], len(plain)):
            return shared
        end = len(plain) + header
        rest = prompt[end:]
        return end + len(rest) if rest and upto.startswith(rest, end) else end

    def _header_length(self, messages: list[dict], i: int, plain: str, upto: str, tools) -> int:
        """The characters assistant turn ``i`` renders before its content, for a template with no
        ``add_generation_prompt`` branch: rendered again with ``CONTENT_MARK`` for its content, the
        text before the mark, when the real turn begins with that same text; else 0."""
        if not isinstance(messages[i].get("content"), str):  # tool calls, no content: nothing to find the header by
            return 0
        try:
            probe = self.render([*messages[:i], dict(messages[i], content=CONTENT_MARK)], tools=tools).text
        except TemplateRefused:  # a template that looks at the content itself: the turn from its start, as rule 1
            return 0
        at = probe.find(CONTENT_MARK, len(plain))
        if at < 0 or not probe.startswith(plain):
            return 0
        header = probe[len(plain) : at]
        return len(header) if upto.startswith(header, len(plain)) else 0


MASK_RULE = 3  # the assistant-turn rule encode records (records.RecordRule.mask_rule): 2 finds a header no
# generation prompt tells; 3 leaves out only the whole of what the generation prompt adds after the header
CONTENT_MARK = "winsample0content0mark"  # lowercase letters and digits: a template's trim or escape leaves it whole


def check_messages(messages) -> list[dict]:
    """The messages as the template sees them (keys whose value is None dropped, as transformers
    does); TemplateRefused, saying what is wrong, for anything that is not a conversation."""
    if not isinstance(messages, list):
        raise TemplateRefused(f"messages is {type(messages).__name__}, not a list of {{role, content}} objects")
    if not messages:
        raise TemplateRefused("an empty conversation (no messages)")
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            raise TemplateRefused(f"message {i} is {type(m).__name__}, not an object with role and content")
        role = m.get("role")
        if not isinstance(role, str):
            raise TemplateRefused(f"message {i} has no role")
        content = m.get("content")
        if content is not None and not isinstance(content, str):
            raise TemplateRefused(f"message {i} ({role}): content is {type(content).__name__}, not a string")
        out.append({k: v for k, v in m.items() if v is not None})
    return out


def mask_of(offsets: list[tuple[int, int]], spans: list[tuple[int, int]]) -> np.ndarray:
    """1 for each token whose characters ``[start, end)`` overlap a span, else 0 (transformers'
    rule for ``assistant_masks``: spans and tokens both in order, one pass)."""
    mask = np.zeros(len(offsets), np.uint8)
    k = 0
    for t, (start, end) in enumerate(offsets):
        while k < len(spans) and start >= spans[k][1]:
            k += 1
        if k == len(spans):
            break
        if end > spans[k][0]:
            mask[t] = 1
    return mask


def refused(where: str, e: TemplateRefused) -> DataError:
    return DataError(f"{where}: {e}")


# --- a tokenizer's template, and a conversation's ids and mask ----------------------------------


def template_for(tok, choice: str | None) -> ChatTemplate:
    """The chat template ``--chat-template`` names: None, the tokenizer's own
    (``chat_template.jinja`` beside its tokenizer.json, else tokenizer_config.json's
    ``chat_template``); a built-in name (``chatml``); else a file of Jinja text. ConfigError when
    there is none, or the tokenizer cannot parse the special tokens a template writes."""
    if getattr(tok, "family", None) != "hf" or not hasattr(tok, "encode_with_specials"):
        raise ConfigError(f"{tok.file_label()}: chat templates need a Hugging Face tokenizer.json (--tokenizer-file)")
    special = tok.special_tokens_map()
    if choice is None:
        named = tok.chat_templates()
        if named.get("default") is None:
            raise ConfigError(f"{tok.file_label()}: no chat template (tokenizer_config.json has no chat_template"
                              f"{', only named ones: ' + ', '.join(named) if named else ''}):"
                              f" pass --chat-template FILE or one of {', '.join(BUILTIN)}")
        tool_use = ChatTemplate(named["tool_use"], special, f"{tok.file_label()}'s tool_use chat template") \
            if named.get("tool_use") is not None else None
        return ChatTemplate(named["default"], special, f"{tok.file_label()}'s chat template", tool_use)
    if choice in BUILTIN:
        return ChatTemplate(BUILTIN[choice], special, choice)
    try:
        with open(choice, encoding="utf-8") as f:
            source = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"--chat-template {choice}: cannot read it ({e}); or name one of {', '.join(BUILTIN)}") from None
    return ChatTemplate(source, special, choice)


def encode_conversation(tok, template: ChatTemplate, messages, loss: str = "assistant",
                        tools: list | None = None, mask_rule: int = MASK_RULE) -> tuple[np.ndarray, np.ndarray]:
    """(ids, mask) of one conversation: ids equal to transformers'
    ``apply_chat_template(messages, tools=tools, tokenize=True)``; mask 1 on the tokens ``loss``
    trains on, its assistant turns found by rule ``mask_rule`` (``MASK_RULE``). TemplateRefused
    (the caller names the record) for a conversation the template refuses."""
    messages = check_messages(messages)
    if tools is not None and not isinstance(tools, list):
        raise TemplateRefused(f"tools is {type(tools).__name__}, not a list of tool schemas")
    template = template.for_tools(tools)
    if loss == "all":
        r = template.render(messages, tools=tools)
    else:
        r = template.assistant_spans(messages, tools=tools, rule=mask_rule)
    ids, offsets = tok.encode_with_specials(r.text)
    mask = np.ones(len(ids), np.uint8) if loss == "all" else mask_of(offsets, r.spans)
    return ids, mask
