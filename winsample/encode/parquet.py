"""Parquet inputs: one document per row of the text column (pyarrow, the optional extra)."""

from __future__ import annotations

from collections.abc import Iterator

from . import tables
from .decoding import BadInput, Reading
from .inputs import Source


def parquet_docs(src: Source, field: str, progress, id_field: str | None = None,
                 reading: Reading | None = None) -> Iterator[tuple[str, str, int, object]]:
    """(where, text, 1-based row, id) for each row of a Parquet source (``tables.rows``). Bad
    input (an unreadable file or page, a missing column, a null row) is a BadInput; with
    ``reading.skip`` a null row is left out and counted, and anything else leaves out the rest
    of the file (``tables.skipping``)."""
    yield from tables.skipping(_rows(src, field, progress, id_field, reading), reading)


def _rows(src: Source, field: str, progress, id_field: str | None, reading: Reading | None) -> Iterator[tuple[str, str, int, object]]:
    pa = tables.pyarrow(src.label, "Parquet", "parquet")
    import pyarrow.parquet as pq

    # pyarrow opens by path, blocking on a FIFO: the file is checked first (gone, or a FIFO
    # since it was listed: InputError, exit 2, as for any input)
    src.open().close()
    try:
        pf = pq.ParquetFile(src.path)
    except (OSError, pa.ArrowException) as e:
        raise BadInput(f"{src.label}: not a readable Parquet file: {e}", src) from None
    cols = tables.columns(pa, src, pf.schema_arrow, field, id_field)
    batches = pf.iter_batches(columns=cols.top(), batch_size=tables.ROWS)
    yield from tables.rows(pa, src, "Parquet", batches, cols, field, id_field, reading)
    if progress:
        progress(src.size or 0)
