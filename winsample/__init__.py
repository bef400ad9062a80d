"""winsample: text → token files → training-window plans → proof that both are sound."""

__version__ = "0.1.0"

# The training-loop API, loaded on first use: `import winsample` (and so the CLI's start, where a
# Ctrl-C must already get one line, not a traceback) stays cheap until a loop asks for it.
_API = ("Batch", "Exposure", "Loader", "Plan", "get_batch", "read_plan")
_RETRIEVAL = ("Chunk", "chunk", "chunk_records")  # retrieval chunks with character offsets

__all__ = [*_API, *_RETRIEVAL, "__version__"]


def __getattr__(name: str):
    if name in _API:
        from . import train

        return getattr(train, name)
    if name in _RETRIEVAL:
        from . import retrieval

        return getattr(retrieval, name)
    import importlib

    try:  # winsample.errors, winsample.formats, …: a package's modules as attributes, as before
        return importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError:
        raise AttributeError(f"module 'winsample' has no attribute {name!r}") from None


def __dir__() -> list[str]:  # dir() and tab completion show the API that loads on first use
    return sorted({*globals(), *__all__})
