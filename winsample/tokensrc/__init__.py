"""Token sources: open a token file (nanoGPT .bin, a sharded split, a Megatron prefix, llm.c shards)
as one stream of ids, by one rule (``open_source``); each layout's reader sits beside its writer.
"""

from .kinds import foreign_layout, check_layouts
from .layouts import NANOGPT, MEGATRON, LLMC, LAYOUTS, DEFAULT_LAYOUTS, written, parse_layouts, eot_positions, layout_splits
from .llmc import LLMC_MAGIC, LLMC_VERSION, LLMC_HEADER_INTS, LLMC_HEADER_BYTES, LLMC_DTYPE, LLMC_DIR, DEFAULT_SHARD_TOKENS, llmc_shard_name, llmc_header, read_llmc_header, is_llmc_shard, llmc_tokens, llmc_count, llmc_stream, write_llmc_split, LlmcShard, llmc_shard_files, group_shards, missing_shards, split_of_group, llmc_doc_problems, shard_entry_problems, llmc_groups, LlmcGroup, LlmcOwner, llmc_owner, stale_llmc, llmc_stream_checksum
from .megatron import MEGATRON_MAGIC, MEGATRON_VERSION, MEGATRON_HEADER, MEGATRON_CODES, MEGATRON_DTYPES, MEGATRON_TOKEN_DTYPES, INT32_MAX, INDEX_STEP, megatron_index_name, write_megatron_index, MegatronIndex, read_megatron_index, megatron_problems, megatron_doc_starts, megatron_token_dtype, megatron_prefix
from .nanogpt import find_meta, OpenSplit, NO_META, is_logical, open_split, open_folder
from .open import open_source, foreign_source
from .sharded import ConcatTokens, stream_of
