"""The bytes on disk: file names, dtypes, meta.json, window plans, atomic writes.

This is the only module that knows how winsample's files are laid out. Everything else
reads and writes them through the functions here: ``load_meta`` / ``write_meta`` (meta.json as
a typed ``Meta`` of ``SplitEntry`` / ``ShardEntry``), ``load_plan`` / ``write_plan`` (rows and a
typed ``PlanSidecar``), and ``open_split`` — the one rule by which every command opens a token
stream (its meta, dtype, N, tokens as a memmap or the logical stream of a sharded split,
document starts, tokenizer). The dataclasses are the schema's one home: their ``from_json``
validates every field below, and keeps unknown fields.

A data folder written by ``winsample encode``::

    OUT_DIR/
    ├── train.bin        token ids of the train split, raw, no header
    ├── val.bin          token ids of the val split, raw, no header
    ├── train.docs.npy   int64 [D]: token offset where each train document starts (first is 0)
    ├── val.docs.npy     int64 [D]: the same for val
    ├── train.prov.npy   PROV_DTYPE [D]: where each train document came from (provenance, below)
    ├── train.prov.ids.npy  uint8: the documents' ids (encode --id-field only); val.* the same
    ├── meta.json        written last; describes the files above (schema below)
    ├── .winsample.lock  held (flock) while a run writes here; holds the writer's pid
    └── .partial/        only while a run works, or after one was interrupted: its growing
                         outputs and ``journal.json`` (checkpoints ``encode --resume`` trusts)

A token file (``*.bin``) is N ids back to back, little-endian, no header, no padding::

    byte   0      2      4            2(N-1)      2N
           +------+------+--  ...  --+------+
           | id0  | id1  |           |idN-1 |        dtype '<u2' (uint16): every id < 65536
           +------+------+--  ...  --+------+
                                                    dtype '<u4' (uint32): 4 bytes per id

It opens in nanoGPT unchanged: ``np.memmap("train.bin", dtype=np.uint16, mode="r")``.
N = file size // itemsize; a size that is not a multiple of itemsize is corrupt.

meta.json (``FORMAT_VERSION`` 1)::

    {
      "format": "winsample", "version": 1, "winsample_version": "0.1.0",
      "dtype": "<u2",
      "tokenizer": {"name": "gpt2", "ranks_sha256": "306c…", "n_vocab": 50257, "eot": 50256},
      "eot_appended": true,
      "split": {"method": "doc", "fraction": 0.1, "seed": 1337},
      "splits": {
        "train": {"file": "train.bin", "doc_index": "train.docs.npy", "tokens": 123,
                  "bytes": 246, "documents": 4, "max_token": 50256,
                  "checksum": "xxh3_128:9f…"},
        "val":   {…same keys…}
      },
      "inputs": [{"path": "corpus/a.txt", "bytes": 1234}],
      "stats": {…free-form counts: skipped empty documents, replaced characters…}
    }

Readers accept any file whose ``version`` is <= FORMAT_VERSION; fields are only ever added.

A sharded dataset (``encode --engine ray`` without ``--merge``) keeps its tokens in
``OUT_DIR/shards/`` and its meta.json in OUT_DIR; the split entries describe one *logical*
token stream per split, the concatenation of the split's shard files in order::

    OUT_DIR/
    ├── meta.json                 as above, plus "sharded" and per-split "shards" (below)
    └── shards/
        ├── train-00000.bin       a shard's train ids (--split doc); "all-NNNNN" with --split tail
        ├── train-00000.docs.npy  int64: token offsets (in this file) of documents that START here
        ├── val-00000.bin …
        └── shard-00000.json      written last by the shard's task: its inputs, counts, checksums

    "splits": {"train": {"file": "train.bin", "doc_index": null, "tokens", "bytes", "documents",
                         "max_token", "checksum": "xxh3_128-shards:…",
                         "shards": [{"file": "shards/train-00000.bin", "doc_index": "shards/train-00000.docs.npy",
                                     "tokens", "bytes", "documents", "max_token", "checksum": "xxh3_128:…",
                                     "continues": false}, …]}},
    "sharded": {"layout": "winsample-shards", "version": 1, "count": K, "shard_bytes": 262144,
                "shards": [{"index": 0, "meta": "shards/shard-00000.json",
                            "inputs": [{"path", "start", "end"}]}, …]}

``file`` is the name ``--merge`` gives the split (so ``data/train.bin`` names the logical stream
whether or not it was merged); ``continues`` says the file's first tokens belong to a document
that started in an earlier file of the split (a big text file cut at a safe point). The split's
checksum is ``combine_checksums`` of its shard files (a checksum of their checksums, so no
pass over the whole stream is needed); ``--merge`` writes an ordinary dataset whose split
entries equal those of ``--engine local``.

A window plan (``PLAN.npy``) is a structured numpy array, one row per window, ``PLAN_DTYPE``:
``start`` (int64, token index into the .bin), ``length`` (int32, tokens spanned),
``doc`` (int64, document number), ``fresh`` (int32, leading tokens already covered by an earlier
window of the same document). Rows are sorted by start unless the plan was shuffled. Beside it
``PLAN.npy.json`` (written last) holds::

    {"format": "winsample-plan", "version": 1,
     "source": {"path": "data/train.bin", "file": "train.bin", "bytes": 246, "checksum": "xxh3_128:…",
                "dtype": "<u2", "tokens": 123},
     "params": {"T", "targets", "span", "stride", "overlap" (1 - stride/span), "offset", "random_offset",
                "seed", "epoch", "tail", "short", "boundaries", "pack", "shuffle", "shard", "shards",
                "shard_method"},
     "stats":  {"windows", "coverage" (share of tokens in >= 1 window), "covered_tokens",
                "uncovered_tokens", "uncovered_tail", "uncovered_head", "uncovered_dropped", "documents"},
     "tokenizer": {…the tokenizer entry of meta.json, when known…},
     "materialized": {"file", "shape", "dtype", "pad_id"}   (only with --materialize),
     "rows_checksum": "xxh3_128:…" (of the rows as written: an edited row shows)}

The source checksum is copied from meta.json's split entry when that meta describes the file
(same name and byte size), so planning never reads the tokens; for a bare .bin it is streamed.
One plan per scale: ``PLAN.T512.npy``; shards: ``PLAN.shard0of4.npy`` (round-robin: shard r holds
rows r, r+K, …); materialized windows: ``PLAN.tokens.npy``, (n, span) ids in the .bin's dtype,
short windows padded with ``pad_id`` (their true length is the plan's ``length``).

Checksums are xxh3-128 (``"xxh3_128:<32 hex>"``): it runs at several GB/s, faster than the
disk, where sha256 would be the slowest part of a run.
"""

from .dataset import committed_since, dataset_files, meta_stamp, recover, staging_dir, unfinished_commit
from .meta import (
    FORMAT_NAME,
    FORMAT_VERSION,
    SPLIT_METHODS,
    TOKENIZER_KEYS,
    LossMask,
    Meta,
    ShardEntry,
    SplitEntry,
    check_version,
    load_meta,
    read_meta,
    tokenizer_identity,
    validate_meta,
    write_meta,
)
from .names import (
    META_JSON,
    PARTIAL_DIR,
    PARTIAL_JOURNAL,
    SHARD_FORMAT,
    SHARD_LAYOUT,
    SHARDS_DIR,
    SPLITS,
    bin_name,
    doc_index_name,
    is_shard_name,
    mask_name,
    materialized_path,
    partial_dir,
    plan_family,
    plan_for_scale,
    plan_shard,
    plan_sidecar,
    shard_bin_name,
    shard_doc_index_name,
    shard_meta_name,
    shard_prov_ids_name,
    shard_prov_name,
)
from .npy import (
    MAX_NPY_HEADER,
    NPY_HEADER_LOCK,
    load_npy,
    load_npy_mmap,
    npy_header,
    read_doc_index,
    write_doc_index,
    write_doc_index_stream,
)
from .plan import (
    MIXTURE_DTYPE,
    MIXTURE_VERSION,
    PACKED_DTYPE,
    PACKED_VERSION,
    PLAN_DTYPE,
    PLAN_FORMAT,
    PLAN_VERSION,
    MixtureSource,
    PlanParams,
    PlanSidecar,
    PlanSource,
    PlanStats,
    load_plan,
    plan_owning,
    plan_stage_path,
    plan_staging_dir,
    read_plan,
    read_sidecar,
    recover_plan,
    refuse_plan_files,
    rows_checksum,
    stale_family,
    write_plan,
)
from .provenance import (
    PROV_DTYPE,
    PROV_OFFSET_UNIT,
    PROV_VERSION,
    Provenance,
    ProvenanceWriter,
    decode_id,
    encode_id,
    iter_prov_records,
    prov_entries,
    prov_ids_name,
    prov_meta,
    prov_name,
    prov_segment,
    read_provenance,
    write_provenance,
)
from .schema import (
    META_DTYPES,
    extra_keys,
    get_dtype,
    get_int,
    get_name,
    get_obj,
    get_str,
    is_int,
    load_json,
    read_json,
    schema_error,
)
from .shardmeta import ShardMeta, read_shard_meta, write_shard_meta
from .tokens import (
    DEFAULT_DTYPE,
    DTYPES,
    HIGH_HALF,
    WIDE_MIN,
    WIDE_SAMPLE,
    check_and_cast,
    dtype_for_vocab,
    dtype_max,
    dtype_name,
    iter_chunks,
    normalize_dtype,
    open_tokens,
    refuse_unlabelled,
    release_pages,
    token_count,
    wider_ids_share,
)
