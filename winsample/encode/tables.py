"""Rows of a table file as documents: the column lookup, the type checks and the row loop that
Parquet (``parquet``) and Arrow IPC (``arrow``) inputs share (pyarrow, an optional extra).

A column is named as a JSONL field is (``records.field_value``): the column of that exact name,
else, for ``meta.body``, field ``body`` of the struct column ``meta`` (a null struct gives null).
Each row is one document; its where is ``FILE:row N`` (0-based) and its origin line the 1-based row.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

from ..errors import ConfigError
from .decoding import BadInput, Reading

ROWS = 1024  # rows turned into Python strings at a time: memory stays flat whatever a batch holds


def pyarrow(label: str, what: str, extra: str):
    """The pyarrow module; ConfigError naming the extra when it is not installed."""
    try:
        import pyarrow as pa
    except ImportError:
        raise ConfigError(f"{label}: reading {what} needs pyarrow: pip install 'winsample[{extra}]'") from None
    return pa


class Columns(NamedTuple):
    """Where the text (and the id) lie: each a path of names, the top-level column first."""

    text: tuple[str, ...]
    id: tuple[str, ...] | None

    def top(self) -> list[str]:
        """The top-level columns to read, each once."""
        return list(dict.fromkeys(p[0] for p in (self.text, self.id) if p is not None))


def _find(schema, name: str):
    """(path, type) of column ``name`` (or of the struct field it names with dots); None if none."""
    if schema.get_field_index(name) >= 0:
        return (name,), schema.field(name).type
    parts = name.split(".")
    if len(parts) < 2 or schema.get_field_index(parts[0]) < 0:
        return None
    typ = schema.field(parts[0]).type
    for part in parts[1:]:
        k = typ.get_field_index(part) if hasattr(typ, "get_field_index") and typ.num_fields else -1
        if k < 0:
            return None
        typ = typ.field(k).type
    return tuple(parts), typ


def _is_text(pa, typ) -> bool:
    """A column of strings: plain, large, view, or dictionary-encoded (a writer's choice for repeated
    values; its rows read back as the strings)."""
    if pa.types.is_dictionary(typ):
        return _is_text(pa, typ.value_type)
    view = getattr(pa.types, "is_string_view", None)  # pyarrow >= 16
    return pa.types.is_string(typ) or pa.types.is_large_string(typ) or (view is not None and view(typ))


def columns(pa, src, schema, field: str, id_field: str | None) -> Columns:
    """The text (and id) columns of a table with ``schema``; BadInput for one missing or of another type."""
    label = src.label
    names = ", ".join(schema.names[:8])
    found = _find(schema, field)
    if found is None:
        raise BadInput(f"{label}: no column {field!r} (columns: {names}); pick one with --text-field"
                       " (a.b for field b of struct column a)", src)
    path, typ = found
    if not _is_text(pa, typ):
        raise BadInput(f"{label}: column {field!r} has type {typ}, not string", src)
    id_path = None
    if id_field is not None:
        found = _find(schema, id_field)
        if found is None:
            raise BadInput(f"{label}: no column {id_field!r} for --id-field (columns: {names})", src)
        id_path, ityp = found
        if not (_is_text(pa, ityp) or pa.types.is_integer(ityp)):
            raise BadInput(f"{label}: --id-field column {id_field!r} has type {ityp}, not a string or integer", src)
    return Columns(path, id_path)


def _pick(pa, batch, path: tuple[str, ...]):
    """The array at ``path`` in ``batch`` (a struct's field is null where the struct is)."""
    import pyarrow.compute as pc

    arr = batch.column(path[0])
    for part in path[1:]:
        arr = pc.struct_field(arr, [part])
    return arr


def _bad_row(arrays: list, names: list[str], row: int) -> str | None:
    """Where the first value that is not UTF-8 lies in ``arrays`` (rows from ``row``)."""
    for arr, name in zip(arrays, names):
        for i in range(len(arr)):
            try:
                arr[i].as_py()
            except UnicodeDecodeError:
                return f"row {row + i}: column {name!r} is not UTF-8"
    return None


def rows(pa, src, kind: str, batches: Iterator, cols: Columns, field: str,
         id_field: str | None, reading: Reading | None = None) -> Iterator[tuple[str, str, int, object]]:
    """(where, text, 1-based row, id) for each row of ``batches`` (record batches of ``cols.top()``).
    A batch that cannot be read (a corrupt page, a string that is not UTF-8) or a null is a
    BadInput; with ``reading.skip`` a null row is left out and counted, and the rows go on."""
    label = src.label
    skip = reading if reading is not None and reading.skip else None
    row = 0
    names = [field] + ([id_field] if id_field is not None else [])
    while True:
        arrays: list = []
        try:
            batch = next(batches, None)
            if batch is None:
                return
            for off in range(0, batch.num_rows, ROWS):
                part = batch.slice(off, ROWS)
                arrays = [_pick(pa, part, cols.text)] + ([_pick(pa, part, cols.id)] if cols.id is not None else [])
                texts = arrays[0].to_pylist()
                ids = arrays[1].to_pylist() if cols.id is not None else [None] * len(texts)
                for text, doc_id in zip(texts, ids):
                    null = (f"{label}: row {row}: {field!r} is null" if text is None else
                            f"{label}: row {row}: --id-field {id_field!r} is null, not a string or integer"
                            if id_field is not None and doc_id is None else None)
                    row += 1
                    if null is not None:
                        bad = BadInput(null, src, None, row, record=True)
                        if skip is None:
                            raise bad
                        skip.left_out(bad)
                        continue
                    yield f"{label}:row {row - 1}", text, row, doc_id
                arrays = []
        except (OSError, pa.ArrowException, UnicodeDecodeError, ValueError) as e:
            where = (_bad_row(arrays, names, row) if isinstance(e, UnicodeDecodeError) else None) or f"row {row} or after"
            raise BadInput(f"{label}: {where}: unreadable {kind} data: {e}", src) from None


def skipping(docs: Iterator, reading: Reading | None) -> Iterator:
    """``docs``, and with ``reading.skip`` a BadInput that ends them is counted (the rest of the
    file left out) instead of raised."""
    try:
        yield from docs
    except BadInput as e:
        if reading is None or not reading.skip:
            raise
        reading.left_out(e)
