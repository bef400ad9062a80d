"""Parquet inputs: one document per row of the text column (pyarrow, the optional extra)."""

from __future__ import annotations

from collections.abc import Iterator

from ..errors import DataError
from . import tables
from .inputs import Source


def parquet_docs(src: Source, field: str, progress, id_field: str | None = None) -> Iterator[tuple[str, str, int, object]]:
    """(where, text, 1-based row, id) for each row of a Parquet source (``tables.rows``)."""
    pa = tables.pyarrow(src.label, "Parquet", "parquet")
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(src.path)
    except (OSError, pa.ArrowException) as e:
        raise DataError(f"{src.label}: not a readable Parquet file: {e}") from None
    cols = tables.columns(pa, src.label, pf.schema_arrow, field, id_field)
    batches = pf.iter_batches(columns=cols.top(), batch_size=tables.ROWS)
    yield from tables.rows(pa, src.label, "Parquet", batches, cols, field, id_field)
    if progress:
        progress(src.size or 0)
