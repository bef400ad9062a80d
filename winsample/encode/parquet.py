"""Parquet inputs: one document per row of the text column (pyarrow, the optional extra)."""

from __future__ import annotations

from collections.abc import Iterator

from ..errors import ConfigError
from .decoding import BadInput, Reading
from .inputs import Source


def parquet_docs(src: Source, field: str, progress, id_field: str | None = None,
                 reading: Reading | None = None) -> Iterator[tuple[str, str, int, object]]:
    """(where, text, 1-based row, id) for each row of a Parquet source. Bad input (an unreadable
    file or page, a missing column, a null row) is a BadInput; with ``reading.skip`` a null row
    is left out and counted, and anything else leaves out the rest of the file."""
    skip = reading if reading is not None and reading.skip else None
    try:
        yield from _rows(src, field, progress, id_field, skip)
    except BadInput as e:
        if skip is None:
            raise
        skip.left_out(e)


def _rows(src: Source, field: str, progress, id_field: str | None, skip: Reading | None) -> Iterator[tuple[str, str, int, object]]:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ConfigError(
            f"{src.label}: reading Parquet needs pyarrow: pip install 'winsample[parquet]'"
        ) from None
    try:
        pf = pq.ParquetFile(src.path)
    except (OSError, pa.ArrowException) as e:
        raise BadInput(f"{src.label}: not a readable Parquet file: {e}", src) from None
    names = pf.schema_arrow.names
    if field not in names:
        raise BadInput(f"{src.label}: no column {field!r} (columns: {', '.join(names[:8])}); pick one with --text-field", src)
    typ = pf.schema_arrow.field(field).type
    if not (pa.types.is_string(typ) or pa.types.is_large_string(typ)):
        raise BadInput(f"{src.label}: column {field!r} has type {typ}, not string", src)
    columns = [field]
    if id_field is not None:
        if id_field not in names:
            raise BadInput(f"{src.label}: no column {id_field!r} for --id-field (columns: {', '.join(names[:8])})", src)
        ityp = pf.schema_arrow.field(id_field).type
        if not (pa.types.is_string(ityp) or pa.types.is_large_string(ityp) or pa.types.is_integer(ityp)):
            raise BadInput(f"{src.label}: --id-field column {id_field!r} has type {ityp}, not a string or integer", src)
        if id_field != field:
            columns.append(id_field)
    row = 0
    batches = pf.iter_batches(columns=columns, batch_size=1024)
    while True:
        batch = None
        try:  # a corrupt page, or a string column holding bytes that are not UTF-8
            batch = next(batches, None)
            texts = None if batch is None else batch.column(0).to_pylist()
            ids = None if batch is None or id_field is None else batch.column(len(columns) - 1).to_pylist()
        except (OSError, pa.ArrowException, UnicodeDecodeError, ValueError) as e:
            where = f"row {row} or after"
            if isinstance(e, UnicodeDecodeError) and batch is not None:
                for c in range(len(columns)):
                    col = batch.column(c)
                    for i in range(len(col)):
                        try:
                            col[i].as_py()
                        except UnicodeDecodeError:
                            where = f"row {row + i}: column {columns[c]!r} is not UTF-8"
                            break
                    else:
                        continue
                    break
            raise BadInput(f"{src.label}: {where}: unreadable Parquet data: {e}", src) from None
        if texts is None:
            break
        for text, doc_id in zip(texts, ids if ids is not None else [None] * len(texts)):
            row += 1  # 1-based from here: the row's line in provenance
            null = (f"{src.label}: row {row - 1}: {field!r} is null" if text is None else
                    f"{src.label}: row {row - 1}: --id-field {id_field!r} is null, not a string or integer"
                    if id_field is not None and doc_id is None else None)
            if null is not None:
                bad = BadInput(null, src, None, row, record=True)
                if skip is None:
                    raise bad
                skip.left_out(bad)
                continue
            yield f"{src.label}:row {row - 1}", text, row, doc_id
    if progress:
        progress(src.size or 0)
