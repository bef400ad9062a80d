"""What verify learned about the dataset before the checks report on it: where meta.json is and
whether it reads, which token files to check, the tokenizer, each file's scan, and the work
started on helper threads. It is the ``ctx`` every check's function takes (``registry.py``)."""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path

from .. import formats, tokensrc
from .options import VerifyOptions
from .scan import FileScan, Target


@dataclass
class Dataset:
    """A data folder or one token file (or a Megatron prefix) being verified."""

    path: Path  # as named (a Megatron prefix: its .bin)
    folder: Path | None  # ``path`` when it is a folder
    megatron_idx: tokensrc.MegatronIndex | None = None  # a Megatron prefix named on its own
    meta: formats.Meta | None = None
    meta_file: Path | None = None
    meta_error: str | None = None  # meta.json is there but does not read (or is about other files)
    meta_json: dict | None = None  # meta.json as a dict, for the entries tokensrc.py reads itself
    written: tuple[str, ...] = ()  # the layouts meta.json says were written
    targets: list[Target] = field(default_factory=list)
    dtype: str = formats.DEFAULT_DTYPE
    enc: object = None  # the tokenizer, None when it does not load (``enc_error`` says why)
    enc_error: str | None = None
    ranks_sha: Future | None = None  # the tokenizer's sha256, hashed beside the scans
    n_vocab: int = 0
    sizes: dict[Path, int] = field(default_factory=dict)  # tokens of each whole-token target
    scans: dict[Path, FileScan] = field(default_factory=dict)
    opts: VerifyOptions = field(default_factory=VerifyOptions)
    shingle_bits: int | None = None  # set when train and val are compared (split_leakage)
    prepared: dict[Path, Future] = field(default_factory=dict)  # each plan, read on a helper thread
    retokenize: object = None  # the retokenize sample's future (or why it cannot run): ``recode.py``
    first_plan: object = None  # the first plan placed on its token file (``plan.Plan``, a ``mixture.Mixture``): decode shows it
