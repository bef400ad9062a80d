"""Token sources: open a token file (nanoGPT .bin, Megatron prefix, llm.c shards) as one stream of ids."""

from .open import open_source

__all__ = ["open_source"]
