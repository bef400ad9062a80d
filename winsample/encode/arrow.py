"""Arrow IPC inputs (``*.arrow``): the shards ``datasets`` writes with ``save_to_disk`` and keeps
in its cache, both Arrow *stream* files, or Arrow *file* format (``ARROW1``); one document per
row of the text column (``tables.rows``), read through a memory map batch by batch."""

from __future__ import annotations

from collections.abc import Iterator

from . import tables
from .decoding import BadInput, Reading
from .inputs import Source

FILE_MAGIC = b"ARROW1"  # the random-access file format starts so; a stream starts with a message


def arrow_docs(src: Source, field: str, progress, id_field: str | None = None,
               reading: Reading | None = None) -> Iterator[tuple[str, str, int, object]]:
    """(where, text, 1-based row, id) for each row of an Arrow IPC source; bad input as for Parquet
    (``parquet.parquet_docs``)."""
    yield from tables.skipping(_rows(src, field, progress, id_field, reading), reading)


def _rows(src: Source, field: str, progress, id_field: str | None, reading) -> Iterator[tuple[str, str, int, object]]:
    pa = tables.pyarrow(src.label, "Arrow files", "arrow")
    src.open().close()  # as parquet._rows: never a FIFO's blocking open
    try:
        mapped = pa.memory_map(str(src.path))
    except (OSError, pa.ArrowException) as e:
        raise BadInput(f"{src.label}: not a readable Arrow file: {e}", src) from None
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
            raise BadInput(f"{src.label}: not a readable Arrow file: {e}", src) from None
        cols = tables.columns(pa, src, schema, field, id_field)
        yield from tables.rows(pa, src, "Arrow", batches, cols, field, id_field, reading)
    finally:
        mapped.close()
    if progress:
        progress(src.size or 0)
