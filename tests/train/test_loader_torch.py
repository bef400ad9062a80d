"""The Loader with real torch: README's nanoGPT get_batch in a nanoGPT-style loop, a padded batch
through ``view(-1)`` and ``cross_entropy(ignore_index=-1)``.

The loop below mirrors nanoGPT's train.py: ``X, Y = get_batch('train')`` once before the loop and
after each forward, ``estimate_loss()`` under ``torch.no_grad()`` calling ``get_batch`` for both
splits, model.py's loss ``F.cross_entropy(logits.view(-1, V), targets.view(-1), ignore_index=-1)``.
"""

from __future__ import annotations

import os
import re
import shutil

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import winsample

from ..conftest import CORPUS, REPO
from ..test_docs_snippets import blocks, run_block

VOCAB = 50304  # nanoGPT's padded GPT-2 vocabulary
torch.set_num_threads(1)  # CI has 2 cores for everything
HEAD = 1024  # the tiny model predicts ids modulo this: 50304 logits per token would take minutes on 2 cores


def readme_get_batch() -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    api = text[text.index("## Python API") :]
    return re.search(r"```python\n(.*?def get_batch.*?)```", api, re.S).group(1)


@pytest.fixture(scope="module")
def readme_data(tmp_path_factory):
    """The data folder and plans made by the README's own commands, in order."""
    d = tmp_path_factory.mktemp("readme")
    shutil.copytree(CORPUS, d / "corpus")
    for marker, line, lang, code in blocks("README.md"):
        if marker == "test" and lang == "sh":
            run_block(lang, code, f"README.md:{line}", d)
    assert (d / "data" / "train.plan.npy").exists() and (d / "data" / "val.plan.npy").exists()
    return d / "data"


class TinyGPT(torch.nn.Module):
    """A bigram model with model.py's loss line (targets folded to HEAD classes, -1 kept): enough
    to see training move the loss, cheap enough for CI."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(VOCAB, 16)
        self.head = torch.nn.Linear(16, HEAD)

    def forward(self, idx, targets):
        logits = self.head(self.emb(idx))
        targets = torch.where(targets == -1, targets, targets % HEAD)
        return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)


def train(data_dir, iters, eval_interval=None, iter_num=0, gradient_accumulation_steps=2, ddp_rank=None, ddp_world_size=1):
    """nanoGPT's loop around README's get_batch; returns (X of every training micro step, losses)."""
    torch.manual_seed(0)
    model = TinyGPT()
    opt = torch.optim.Adam(model.parameters(), lr=1e-1)
    g = dict(os=os, np=np, torch=torch, data_dir=str(data_dir), batch_size=2, block_size=256, device="cpu",
             device_type="cpu", ddp=ddp_rank is not None, ddp_rank=ddp_rank, ddp_world_size=ddp_world_size,
             gradient_accumulation_steps=gradient_accumulation_steps, eval_iters=3, iter_num=iter_num)
    exec(compile(readme_get_batch(), "README.md get_batch", "exec"), g)
    get_batch = g["get_batch"]

    @torch.no_grad()
    def estimate_loss():
        model.eval()
        out = {}
        for split in ("train", "val"):
            out[split] = float(np.mean([model(*get_batch(split))[1].item() for _ in range(g["eval_iters"])]))
        model.train()
        return out

    seen, losses, evals = [], [], []
    X, Y = get_batch("train")
    for it in range(iter_num, iter_num + iters):
        g["iter_num"] = it
        if eval_interval and it % eval_interval == 0:
            evals.append(estimate_loss())
        for _ in range(gradient_accumulation_steps):
            seen.append(X.clone())
            _, loss = model(X, Y)
            X, Y = get_batch("train")  # prefetch, as train.py does
            (loss / gradient_accumulation_steps).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
    return seen, losses, evals


def test_readme_get_batch_trains_a_model_on_cpu(readme_data):
    seen, losses, evals = train(readme_data, 12, eval_interval=4)
    assert all(x.shape == (2, 256) and x.dtype == torch.int64 for x in seen)
    assert np.mean(losses[-3:]) < losses[0] - 0.5  # it learns (ln 1024 = 6.9 at the start)
    assert len(evals) == 3 and evals[-1]["val"] < evals[0]["val"]


def test_evaluating_more_often_does_not_change_the_training_batches(readme_data):
    a, _, _ = train(readme_data, 6)
    b, _, _ = train(readme_data, 6, eval_interval=1)
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))


def test_a_run_resumed_at_iter_num_sees_the_batches_the_first_run_saw(readme_data):
    full, _, _ = train(readme_data, 6, eval_interval=2)
    resumed, _, _ = train(readme_data, 3, iter_num=3)  # train.py restores iter_num from the checkpoint
    assert all(torch.equal(x, y) for x, y in zip(full[6:], resumed, strict=True))


def test_ddp_ranks_share_out_the_windows_of_each_step(readme_data):
    ranks = [train(readme_data, 3, gradient_accumulation_steps=1, ddp_rank=r, ddp_world_size=2)[0] for r in (0, 1)]
    starts = set()
    for x0, x1 in zip(*ranks, strict=True):
        assert not torch.equal(x0, x1)  # each rank its own windows
        starts |= {tuple(r[:8].tolist()) for r in torch.cat([x0, x1])}
    assert len(starts) == 3 * 2 * 2  # 12 distinct windows in 3 steps × 2 ranks × batch 2


def test_padded_batch_views_flat_and_cross_entropy_ignores_the_padding(readme_data):
    loader = winsample.Loader(readme_data / "train.plan.npy", readme_data / "train.bin", 8, 1337, short="pad")
    step = next(s for s in range(len(loader)) if (loader.rows(0, s)["length"] < 257).any())
    x, y = (torch.from_numpy(a) for a in loader.batch(0, step))
    assert (y == -1).any() and (x == 50256).any()
    flat_y = y.view(-1)  # what the README's old get_batch crashed on: needs a contiguous tensor
    flat_y = torch.where(flat_y == -1, flat_y, flat_y % HEAD)  # HEAD classes keep the logits small
    torch.manual_seed(0)
    logits = torch.randn(x.numel(), HEAD)
    loss = F.cross_entropy(logits, flat_y, ignore_index=-1)
    keep = flat_y != -1
    manual = -torch.log_softmax(logits[keep], -1)[torch.arange(int(keep.sum())), flat_y[keep]].mean()
    assert torch.allclose(loss, manual)
    assert int(keep.sum()) == int((loader.rows(0, step)["length"] - 1).sum())  # every (x, y) pair, no padding


def test_the_old_non_contiguous_slices_are_what_broke_view(readme_data):
    """Why get_batch copies: a column slice of a (B, T+1) array is not contiguous, and torch's view refuses it."""
    w = np.arange(2 * 5, dtype=np.int64).reshape(2, 5)
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        torch.from_numpy(w[:, 1:]).view(-1)
    plan = winsample.read_plan(readme_data / "train.plan.npy")
    x, y = winsample.get_batch(plan, readme_data / "train.bin", 4, 0)
    assert torch.from_numpy(y).view(-1).shape == (4 * 256,)


def test_the_source_documents_randint_claims():
    """randint(N - T) gives the starts 0..N-T-1 (N = 10, T = 4: last start 5); N = T has none."""
    torch.manual_seed(0)
    ix = torch.randint(10 - 4, (10_000,))
    assert set(ix.tolist()) == set(range(6))
    with pytest.raises(RuntimeError):
        torch.randint(8 - 8, (2,))


def test_nanogpts_own_get_batch_lets_evaluation_move_training(readme_data):
    """The source document's claim, checked: train.py's get_batch draws from torch's global
    generator, so an estimate_loss in between changes the next training batch (the Loader's
    README get_batch does not: test_evaluating_more_often_does_not_change_the_training_batches)."""
    data = np.memmap(readme_data / "train.bin", dtype=np.uint16, mode="r")

    def get_batch(block_size=256, batch_size=2):  # train.py's lines
        ix = torch.randint(len(data) - block_size, (batch_size,))
        return torch.stack([torch.from_numpy((data[i : i + block_size]).astype(np.int64)) for i in ix])

    torch.manual_seed(1337)
    plain = [get_batch() for _ in range(2)]
    torch.manual_seed(1337)
    first = get_batch()
    get_batch()  # one evaluation batch
    assert torch.equal(first, plain[0]) and not torch.equal(get_batch(), plain[1])


def test_nine_tokens_window_eight_has_one_start_eight_have_none(tmp_path):
    """The chapter's exercise: N = 9, T = 8 → start 0 only; N = 8 → no (x, y) window."""
    from click.testing import CliRunner

    from winsample.cli import main

    for n, want in ((9, "0\t9\n"), (8, "")):
        np.arange(n, dtype="<u2").tofile(tmp_path / "a.bin")
        r = CliRunner().invoke(main, ["windows", str(tmp_path / "a.bin"), "-T", "8", "--tail", "drop", "--short", "drop",
                                      "--format", "txt", "-o", "-", "-q"])
        assert r.exit_code == 0 and r.stdout == want, r.stderr
