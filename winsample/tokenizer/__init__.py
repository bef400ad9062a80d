"""Tokenizers: winsample's own ``Tokenizer`` interface, and the tiktoken family behind it.

Every part of winsample that needs a tokenizer (encode, the chunker, windows' semantic edges,
verify, inspect) holds a :class:`Tokenizer`, never a library's own object. Load one with
:func:`load` (from options: ``--encoding`` / ``--tokenizer-file`` / ``--pattern``),
:func:`from_meta` (from meta.json's ``tokenizer`` entry, including its ``file``), or
:func:`resolve` (the one rule every reader uses: an explicit ``--encoding`` first, then the
tokenizer meta.json names, then gpt2 for a bare nanoGPT ``.bin``).

The tiktoken family (:class:`TiktokenTokenizer`): ``gpt2`` (the default everywhere) never
touches the network: its BPE ranks ship as ``assets/gpt2.tiktoken.gz`` and their sha256 is
checked on every load against tiktoken's own expected hash; other tiktoken names load through
tiktoken's cache; ``--tokenizer-file`` reads a ``.tiktoken`` ranks file. ``load_encoding()``
still returns the plain ``tiktoken.Encoding`` for tests and benchmarks that want the raw object.

``--tokenizer-file PATH`` is told apart by content, never by name (:func:`load_file`): a
``.tiktoken`` ranks file (this module), a Hugging Face ``tokenizer.json`` or a folder holding one
(``tokenizer.hf``, ids from the ``tokenizers`` library), or a SentencePiece model
(``tokenizer.spm``, ids from the ``sentencepiece`` library). Those two modules are imported by
this one only, and only when such a file is loaded; their libraries are the optional extras
``winsample[hf]`` and ``winsample[sentencepiece]``.

This module alone knows tokenizer families; it imports nothing of winsample but ``errors`` and
``chunking`` (the safe-cut rule of regex pre-tokenizers).
"""

from .backend import BACKENDS, CHECKED, FastTokenizer, fast_checked, with_backend
from .base import Tokenizer, choose_eot, dist_version, texts_in_context, with_eot
from .bpe import (
    DEFAULT_ENCODING,
    ENDOFTEXT,
    FAMILIES,
    GPT2_RANKS_SHA256,
    PATTERNS,
    TiktokenTokenizer,
    bundled_gpt2_ranks,
    check_byte_coverage,
    describe,
    eot_token,
    gpt2_from_ranks,
    load_encoding,
    parse_ranks,
    pattern_of,
    ranks_file_bytes,
    ranks_sha256,
    read_ranks_file,
)
from .chunking import TextChunker, is_safe_cut, iter_safe_cuts, last_safe_cut, last_safe_cut_bytes, safe_cuts
from .load import (
    HF_CONFIG,
    HF_JSON,
    RANKS_LINE,
    SPM_NAMES,
    file_key,
    from_meta,
    load,
    load_file,
    load_file_keyed,
    mismatches,
    resolve,
    sniff,
    tokenizer_path,
)
