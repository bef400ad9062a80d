"""Arrow IPC inputs (``*.arrow``): the shards ``datasets`` writes with ``save_to_disk`` and keeps
in its cache, both Arrow *stream* files, or Arrow *file* format (``ARROW1``); one document per
row of the text column (``tables.rows``), read through a memory map batch by batch."""

from __future__ import annotations

from collections.abc import Iterator

from ..errors import DataError
from . import tables
from .inputs import Source

FILE_MAGIC = b"ARROW1"  # the random-access file format starts so; a stream starts with a message


def arrow_docs(src: Source, field: str, progress, id_field: str | None = None) -> Iterator[tuple[str, str, int, object]]:
    """(where, text, 1-based row, id) for each row of an Arrow IPC source."""
    pa = tables.pyarrow(src.label, "Arrow files", "arrow")
    try:
        mapped = pa.memory_map(str(src.path))
    except (OSError, pa.ArrowException) as e:
        raise DataError(f"{src.label}: not a readable Arrow file: {e}") from None
    try:
        try:
            if mapped.read(len(FILE_MAGIC)) == FILE_MAGIC:
                mapped.seek(0)
                reader = pa.ipc.open_file(mapped)
                schema = reader.schema
                batches = (reader.get_batch(i) for i in range(reader.num_record_batches))
            else:
                mapped.seek(0)
                reader = pa.ipc.open_stream(mapped)
                schema = reader.schema
                batches = iter(reader)
        except (OSError, pa.ArrowException) as e:
            raise DataError(f"{src.label}: not a readable Arrow file: {e}") from None
        cols = tables.columns(pa, src.label, schema, field, id_field)
        yield from tables.rows(pa, src.label, "Arrow", batches, cols, field, id_field)
    finally:
        mapped.close()
    if progress:
        progress(src.size or 0)
