"""Token sources: open a token file (nanoGPT .bin, a sharded split, a Megatron prefix, llm.c shards)
as one stream of ids, by one rule (``open_source``); each layout's reader sits beside its writer.
"""

from .kinds import check_layouts, foreign_layout
from .layouts import DEFAULT_LAYOUTS, LAYOUTS, LLMC, MEGATRON, NANOGPT, eot_positions, layout_splits, parse_layouts, written
from .llmc import (
    DEFAULT_SHARD_TOKENS,
    LLMC_DIR,
    LLMC_DTYPE,
    LLMC_HEADER_BYTES,
    LLMC_HEADER_INTS,
    LLMC_MAGIC,
    LLMC_V1,
    LLMC_V7,
    LLMC_VERSION,
    NEEDS_ENCODING,
    LlmcFormat,
    LlmcGroup,
    LlmcOwner,
    LlmcShard,
    group_shards,
    is_llmc_shard,
    llmc_count,
    llmc_format_for,
    llmc_groups,
    llmc_header,
    llmc_mask_name,
    llmc_mask_stream,
    llmc_owner,
    llmc_shard_files,
    llmc_shard_name,
    llmc_stream,
    llmc_stream_checksum,
    missing_shards,
    read_llmc_header,
    read_llmc_stream,
    shard_entry_problems,
    stale_llmc,
    write_llmc_masks,
    write_llmc_split,
)
from .megatron import (
    INDEX_STEP,
    INT32_MAX,
    MEGATRON_CODES,
    MEGATRON_DTYPES,
    MEGATRON_HEADER,
    MEGATRON_MAGIC,
    MEGATRON_TOKEN_DTYPES,
    MEGATRON_VERSION,
    MegatronIndex,
    megatron_doc_starts,
    megatron_index_name,
    megatron_prefix,
    megatron_problems,
    megatron_token_dtype,
    read_megatron_index,
    write_megatron_index,
)
from .nanogpt import (
    META_PKL,
    NO_META,
    OpenSplit,
    find_meta,
    is_logical,
    needs_meta_pkl,
    open_folder,
    open_split,
    width,
    write_meta_pkl,
)
from .open import MIXTURE_HINT, foreign_source, open_planned, open_source, plan_inputs, plan_tokens
from .sharded import ConcatTokens, stream_of
