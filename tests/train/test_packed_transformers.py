"""Packed batches in a real client: a tiny random transformers causal LM (CPU, float32).

The data is real text with many short documents: the bundled corpus' paragraphs, one JSONL record
each, encoded by ``winsample encode`` and planned by ``winsample windows`` (best-fit packing, or
plain windows that cross documents). The proof is the model's own: every document segment of a
packed row has, inside the row, the logits it has when run alone, and the packed loss is the
per-document losses' token-weighted mean. Last, a Batch crosses from a torch DataLoader worker whole.

Expectations never come from the code under test: documents are the runs the ``<|endoftext|>``
ids of the .bin end (a plain loop), a row's pieces are the plan file's rows (``np.load``) cut at
those documents, and logits and losses are the model's on each piece alone.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from click.testing import CliRunner

import winsample
from winsample.cli import main

from ..conftest import CORPUS

torch.set_num_threads(1)  # CI has 2 cores for everything
T = 64  # a short context, so that one row holds several paragraphs
EOT = 50256  # GPT-2's <|endoftext|>, the id encode puts after every document
IGNORE = -1
TOL = 1e-4


def cli(*args):
    r = CliRunner().invoke(main, [str(a) for a in args])
    assert r.exit_code == 0, r.output
    return r


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """data/train.bin of many short documents (a paragraph of the corpus each), a best-fit plan
    and a plain one over it."""
    d = tmp_path_factory.mktemp("packed")
    paragraphs = [p for f in sorted(CORPUS.glob("*.txt")) for p in f.read_text(encoding="utf-8").split("\n\n") if p.strip()]
    with open(d / "paragraphs.jsonl", "w", encoding="utf-8") as out:
        for p in paragraphs[::4]:  # ~1,200 documents of 1 to ~80 tokens, from every file: 4 to a row, some split
            if len(p) <= 300:
                out.write(json.dumps({"text": p}) + "\n")
    cli("encode", d / "paragraphs.jsonl", "-o", d / "data", "--workers", "1", "-q")
    cli("windows", d / "data" / "train.bin", "-T", T, "--pack", "best-fit", "-o", d / "packed.npy", "-q")
    cli("windows", d / "data" / "train.bin", "-T", T, "--boundaries", "none", "-o", d / "plain.npy", "-q")
    return d


def tokens_of(data) -> np.ndarray:
    meta = json.loads((data / "data" / "meta.json").read_text())
    assert meta["tokenizer"]["eot"] == EOT
    return np.fromfile(data / "data" / "train.bin", dtype=np.uint16).astype(np.int64)


def doc_starts(tokens: np.ndarray) -> list[int]:
    """Where each document begins: 0 and every token after an <|endoftext|>, by a plain loop."""
    return [0] + [i + 1 for i, t in enumerate(tokens.tolist()) if t == EOT and i + 1 < len(tokens)]


def cut_at_documents(start: int, length: int, starts: list[int]) -> list[tuple[int, int]]:
    """[start, start + length) of the .bin as (start, length) pieces, one per document it touches."""
    cuts = [start] + [s for s in starts if start < s < start + length] + [start + length]
    return [(a, b - a) for a, b in zip(cuts, cuts[1:])]


def best_fit_pieces(data, window: int, starts: list[int]) -> list[tuple[int, int]]:
    """The segments of best-fit window ``window``, from the plan file itself; each must lie in one document."""
    rows = np.load(data / "packed.npy")
    segs = [(int(r["start"]), int(r["length"])) for r in rows if int(r["window"]) == window]
    for s, n in segs:
        assert cut_at_documents(s, n, starts) == [(s, n)], f"segment {(s, n)} of window {window} crosses a document"
    return segs


def plain_pieces(data, window: int, starts: list[int]) -> list[tuple[int, int]]:
    r = np.load(data / "plain.npy")[window]
    return cut_at_documents(int(r["start"]), int(r["length"]), starts)


class Row:
    """What one row of a batch must be, from its pieces (runs of the .bin, one document each),
    laid side by side: ``w`` their tokens, x = w[:-1] padded to T."""

    def __init__(self, pieces: list[tuple[int, int]], tokens: np.ndarray):
        self.pieces, self.tokens = pieces, tokens
        self.w = np.concatenate([tokens[s : s + n] for s, n in pieces])
        self.inputs = len(self.w) - 1  # x columns holding a token
        self.cols = []  # per piece: its input columns [c, c + m), m ≥ 1 (a last piece of one token has none)
        c = 0
        for _, n in pieces:
            m = min(c + n, self.inputs) - c
            if m > 0:
                self.cols.append(range(c, c + m))
            c += n

    def segments(self) -> list[int]:
        out = [-1] * T
        for k, cols in enumerate(self.cols):
            for j in cols:
                out[j] = k
        return out

    def positions(self) -> list[int]:
        """positions="doc": 0, 1, … from each piece's first column; padding counts from 0 too."""
        out = list(range(T))
        for cols in self.cols:
            for j in cols:
                out[j] = j - cols[0]
        for j in range(self.inputs, T):
            out[j] = j - self.inputs
        return out

    def runs(self) -> list[int]:
        """Lengths of the row's runs in x: each piece's inputs, then the padding."""
        return [len(cols) for cols in self.cols] + ([T - self.inputs] if self.inputs < T else [])


def tiny_llama(attn="sdpa", vocab=50257):
    """A randomly initialised Llama: 2 layers, hidden size 32, GPT-2's vocabulary; no download.

    ``use_cache=False``: with a cache (LlamaConfig's default, in train mode too) transformers does
    not look for packed sequences in position_ids, and documents would see each other."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, max_position_embeddings=2 * T, use_cache=False, attn_implementation=attn)
    return LlamaForCausalLM(cfg).eval()


def tiny_gpt2():
    """A random GPT-2 (learned absolute positions): its logits depend on position_ids themselves,
    where RoPE's depend only on differences of positions."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=50257, n_embd=32, n_layer=2, n_head=4, n_positions=2 * T, use_cache=False,
                     attn_implementation="sdpa")
    return GPT2LMHeadModel(cfg).eval()


def batch_and_rows(data, plan: str, steps=(0, 1), batch_size=8, **kw):
    """[(Batch, [Row per line])] for the given steps of epoch 0, positions="doc"."""
    tokens = tokens_of(data)
    starts = doc_starts(tokens)
    pieces = best_fit_pieces if plan == "packed.npy" else plain_pieces
    loader = winsample.Loader(data / plan, data / "data" / "train.bin", batch_size=batch_size, seed=0, positions="doc", **kw)
    out = []
    for step in steps:
        b = loader.batch(0, step)
        rows = [Row(pieces(data, int(k), starts), tokens) for k in loader.row_index(0, step)]
        for i, row in enumerate(rows):  # the batch holds the tokens the plan says, in order
            assert b.x[i, : row.inputs].tolist() == row.w[:-1].tolist()
        out.append((b, rows))
    several = sum(len(r.cols) >= 2 for _, rows in out for r in rows)
    assert several >= batch_size, f"only {several} rows of {plan} hold two documents or more: the test would prove little"
    return out


def alone(model, tokens: np.ndarray, **kw) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=torch.from_numpy(np.asarray(tokens, np.int64))[None], **kw).logits[0]


def max_gap_to_alone(model, b, rows, packed: torch.Tensor) -> float:
    """Largest |logit difference| between each piece inside its row and the piece run alone."""
    gap = 0.0
    for i, row in enumerate(rows):
        for cols in row.cols:
            solo = alone(model, b.x[i, cols.start : cols.stop])
            gap = max(gap, (packed[i, cols.start : cols.stop] - solo).abs().max().item())
    return gap


def block_diagonal_mask(segments: np.ndarray) -> torch.Tensor:
    """(B, 1, T, T) additive mask: query j sees key k ≤ j of its own segment (padding: its own run)."""
    seg = torch.from_numpy(segments)
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    allowed = (seg[:, :, None] == seg[:, None, :]) & causal
    return torch.zeros(allowed.shape, dtype=torch.float32).masked_fill(~allowed, torch.finfo(torch.float32).min)[:, None]


# -- best-fit rows --


def test_packed_row_logits_equal_each_document_alone(data):
    """position_ids restart at every document, attention_mask=None: transformers masks attention
    per document by itself, and each document's logits are its own."""
    model = tiny_llama()
    for b, rows in batch_and_rows(data, "packed.npy"):
        assert b.position_ids.tolist() == [r.positions() for r in rows]
        with torch.no_grad():
            packed = model(input_ids=torch.from_numpy(b.x), position_ids=torch.from_numpy(b.position_ids)).logits
        assert max_gap_to_alone(model, b, rows, packed) <= TOL


def test_without_restarting_positions_documents_see_each_other(data):
    """The counter-proof: positions="window" gives transformers no document starts, so a packed
    row is one causal sequence and a later document's logits change."""
    model = tiny_llama()
    for b, rows in batch_and_rows(data, "packed.npy"):
        window = np.broadcast_to(np.arange(T), b.x.shape).copy()
        with torch.no_grad():
            packed = model(input_ids=torch.from_numpy(b.x), position_ids=torch.from_numpy(window)).logits
        assert max_gap_to_alone(model, b, rows, packed) > 1e-2


@pytest.mark.parametrize("make", [tiny_llama, tiny_gpt2], ids=["llama-rope", "gpt2-absolute"])
def test_block_diagonal_mask_from_segments_gives_each_document_alone(data, make):
    """An explicit 4-D mask built from b.segments, with b.position_ids. On GPT-2 (absolute
    positions) the logits also prove the positions: each document counts from 0."""
    model = make()
    for b, rows in batch_and_rows(data, "packed.npy"):
        assert b.segments.tolist() == [r.segments() for r in rows]
        with torch.no_grad():
            packed = model(input_ids=torch.from_numpy(b.x), position_ids=torch.from_numpy(b.position_ids),
                           attention_mask=block_diagonal_mask(b.segments)).logits
        assert max_gap_to_alone(model, b, rows, packed) <= TOL


def runs_of(segments: np.ndarray) -> list[int]:
    """Lengths of the runs of equal (row, segment) in the flattened batch, by a plain loop."""
    lengths, prev = [], None
    for i, row in enumerate(segments.tolist()):
        for s in row:
            if (i, s) == prev:
                lengths[-1] += 1
            else:
                lengths.append(1)
                prev = (i, s)
    return lengths


def test_cu_seqlens_are_the_segment_lengths_of_the_flattened_batch(data):
    for b, rows in batch_and_rows(data, "packed.npy"):
        want = [n for r in rows for n in r.runs()]
        assert runs_of(b.segments) == want  # the segments' runs are the plan's pieces (and padding)
        cu = [0]
        for n in want:
            cu.append(cu[-1] + n)
        assert b.cu_seqlens.dtype == np.int32 and b.cu_seqlens.tolist() == cu
        assert b.max_seqlen == max(want)
        assert b.attention_mask.tolist() == [[1] * r.inputs + [0] * (T - r.inputs) for r in rows]


def test_cu_seqlens_are_what_transformers_derives_for_flash_attention(data):
    """transformers' flash-attention path cuts x.reshape(-1) where position_ids restart: the same starts."""
    from transformers.modeling_flash_attention_utils import prepare_fa_kwargs_from_position_ids

    for b, _ in batch_and_rows(data, "packed.npy"):
        (cu_q, cu_k), (max_q, _) = prepare_fa_kwargs_from_position_ids(torch.from_numpy(b.position_ids).reshape(1, -1))
        assert cu_q.tolist() == b.cu_seqlens.tolist() and int(max_q) == b.max_seqlen


def varlen_reference(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """flash_attn_varlen_func's contract on CPU: (1, H, N, D) cut at cu_seq_lens_q, each run causal alone."""
    cu = kwargs["cu_seq_lens_q"].tolist()
    assert attention_mask is None and query.shape[0] == 1
    out = torch.empty_like(query)
    for a, z in zip(cu, cu[1:]):
        out[:, :, a:z] = F.scaled_dot_product_attention(query[:, :, a:z], key[:, :, a:z], value[:, :, a:z],
                                                        is_causal=True, scale=scaling, enable_gqa=True)
    return out.transpose(1, 2).contiguous(), None


def test_the_flattened_batch_cut_at_cu_seqlens_gives_each_document_alone(data):
    """x.reshape(-1) with cu_seqlens and max_seqlen, as a varlen kernel takes them, through the
    model's own attention hook: every document's logits are its own."""
    from transformers import AttentionInterface

    AttentionInterface.register("winsample_varlen_reference", varlen_reference)
    model = tiny_llama(attn="winsample_varlen_reference")
    for b, rows in batch_and_rows(data, "packed.npy"):
        cu = torch.from_numpy(b.cu_seqlens)
        with torch.no_grad():
            flat = model(input_ids=torch.from_numpy(b.x).reshape(1, -1), position_ids=torch.from_numpy(b.position_ids).reshape(1, -1),
                         cu_seq_lens_q=cu, cu_seq_lens_k=cu, max_length_q=b.max_seqlen, max_length_k=b.max_seqlen).logits
        assert max_gap_to_alone(tiny_llama(), b, rows, flat.reshape(len(rows), T, -1)) <= TOL


def test_masked_cross_document_loss_is_the_token_weighted_mean_of_each_documents_loss(data):
    """cross_doc_labels="mask": the batch's mean cross-entropy over labels that are not -1 equals
    Σ (each document's summed loss alone) / Σ (its next-token labels), labels within the document."""
    model = tiny_llama()
    for b, rows in batch_and_rows(data, "packed.npy", cross_doc_labels="mask"):
        with torch.no_grad():
            logits = model(input_ids=torch.from_numpy(b.x), position_ids=torch.from_numpy(b.position_ids)).logits
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), torch.from_numpy(b.y).reshape(-1), ignore_index=IGNORE)
        total, labels = 0.0, 0
        for row in rows:
            for s, n in row.pieces:
                doc = row.tokens[s : s + n]
                if n < 2:
                    continue
                solo = alone(model, doc[:-1])
                total += F.cross_entropy(solo, torch.from_numpy(doc[1:]), reduction="sum").item()
                labels += n - 1
        assert int((b.y != IGNORE).sum()) == labels
        assert loss.item() == pytest.approx(total / labels, rel=1e-5)


def test_kept_cross_document_labels_train_the_next_documents_first_token(data):
    """cross_doc_labels="keep" (the default): one more label per document start inside a row."""
    for (b, rows), (m, _) in zip(batch_and_rows(data, "packed.npy"), batch_and_rows(data, "packed.npy", cross_doc_labels="mask")):
        cuts = sum(len(r.pieces) - 1 for r in rows)
        assert int((b.y != IGNORE).sum()) - int((m.y != IGNORE).sum()) == cuts
        assert (b.x == m.x).all()


# -- plain windows over the concatenated documents --


def test_plain_windows_crossing_documents_get_their_segments_from_the_document_index(data):
    """A --boundaries none plan: windows start mid-document and run into the next ones; the
    segments come from the .bin's documents, and each piece's logits are its own."""
    model = tiny_llama()
    for b, rows in batch_and_rows(data, "plain.npy", steps=(0, 1, 2)):
        assert b.segments.tolist() == [r.segments() for r in rows]
        assert b.position_ids.tolist() == [r.positions() for r in rows]
        assert runs_of(b.segments) == [n for r in rows for n in r.runs()]
        with torch.no_grad():
            packed = model(input_ids=torch.from_numpy(b.x), position_ids=torch.from_numpy(b.position_ids)).logits
        assert max_gap_to_alone(model, b, rows, packed) <= TOL


# -- across processes: torch's DataLoader workers --


class EpochBatches(torch.utils.data.Dataset):
    """Item i: the whole Batch of step i of epoch 0 (the guide's DataLoader pattern, returning the Batch)."""

    def __init__(self, loader):
        self.loader = loader

    def __len__(self):
        return 3

    def __getitem__(self, i):
        return self.loader.batch(0, i)


@pytest.mark.parametrize("plan, options", [("plain.npy", {}), ("plain.npy", {"positions": "doc"}), ("packed.npy", {"cross_doc_labels": "mask"})])
def test_a_batch_comes_back_whole_from_a_dataloader_worker(data, plan, options):
    """A worker pickles each Batch to the training process, which then reads its packed fields:
    with the Loader's defaults a regular plan's segments are found only when first read."""
    from torch.utils.data import DataLoader

    loader = winsample.Loader(data / plan, data / "data" / "train.bin", batch_size=8, seed=0, **options)
    got = list(DataLoader(EpochBatches(loader), batch_size=None, num_workers=1, timeout=60))  # a lost item fails, not hangs
    assert len(got) == 3
    for step, b in enumerate(got):
        want = loader.batch(0, step)
        assert (b.segments.max(axis=1) >= 1).any()  # documents meet inside some row
        for field in ("x", "y", "position_ids", "segments", "attention_mask", "cu_seqlens"):
            assert np.array_equal(getattr(b, field), getattr(want, field)), field
        assert b.max_seqlen == want.max_seqlen
