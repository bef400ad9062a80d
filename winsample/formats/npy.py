""".npy files read safely (bounded headers, no pickles, the header lock) and document indexes."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from ..disk.atomic import atomic_open
from ..disk.names import open_regular
from ..errors import DataError, InputError

MAX_NPY_HEADER = 10000  # bytes of a .npy header (numpy's own limit; it writes a few hundred)


# --- document index ---------------------------------------------------------------------


def write_doc_index(path: str | Path, starts: np.ndarray) -> None:
    """Write document start offsets (tokens, ascending int64) as a .npy file, atomically."""
    with atomic_open(path) as f:
        np.save(f, np.asarray(starts, dtype="<i8"))


def write_doc_index_stream(path: str | Path, count: int, chunks: Iterable[np.ndarray]) -> None:
    """Like ``write_doc_index`` (same bytes) for ``count`` offsets given in pieces: memory stays flat."""
    with atomic_open(path) as f:
        np.lib.format.write_array_header_1_0(f, {"descr": "<i8", "fortran_order": False, "shape": (count,)})
        written = 0
        for chunk in chunks:
            chunk = np.ascontiguousarray(chunk, dtype="<i8")
            f.write(chunk.data)
            written += chunk.size
        if written != count:
            raise ValueError(f"{path}: wrote {written} document offsets, announced {count}")


# numpy parses a .npy header with ast.literal_eval, which CPython 3.11 cannot run on two threads
# at once ("SystemError: AST constructor recursion depth mismatch", seen in verify: its plan
# thread loads the plan while the main thread loads provenance): every header read takes this.
NPY_HEADER_LOCK = threading.Lock()


def npy_header(f, path: str | Path, what: str) -> tuple[tuple, bool, np.dtype, int]:
    """(shape, fortran_order, dtype, data offset) of an open .npy file, read without trusting it:
    DataError unless the header is a plain (no objects) array whose data fits the file's size."""
    fmt = np.lib.format
    size = os.fstat(f.fileno()).st_size
    try:
        version = fmt.read_magic(f)
        with NPY_HEADER_LOCK:
            if version == (1, 0):
                header = fmt.read_array_header_1_0(f, max_header_size=MAX_NPY_HEADER)
            elif version in ((2, 0), (3, 0)):
                header = fmt.read_array_header_2_0(f, max_header_size=MAX_NPY_HEADER)
            else:
                raise ValueError(f"unknown .npy version {version}")
    except Exception as e:  # numpy parses the header with Python's tokenizer: any of its errors
        raise DataError(f"{path}: not {what}: bad .npy header: {type(e).__name__}: {e}") from None
    shape, fortran, dtype = header
    if dtype.hasobject:
        raise DataError(f"{path}: not {what}: .npy holds Python objects")
    if not all(isinstance(d, int) and d >= 0 for d in shape):
        raise DataError(f"{path}: not {what}: .npy shape {shape}")
    count = 1
    for d in shape:
        count *= d
    offset = f.tell()
    need = count * dtype.itemsize
    if need != size - offset:
        raise DataError(f"{path}: not {what}: the .npy header says {shape} of {dtype} ({need} bytes),"
                        f" the file holds {size - offset} bytes of data")
    return shape, fortran, dtype, offset


def load_npy(path: str | Path, what: str) -> np.ndarray:
    """``np.load`` without pickles, its header checked against the file size first (a header
    claiming 2**40 rows is corrupt, never an allocation): InputError if missing or not a regular
    file, DataError if not a readable .npy."""
    with open_regular(path, what) as f:
        shape, fortran, dtype, _ = npy_header(f, path, what)
        try:
            f.seek(0)
            with NPY_HEADER_LOCK:  # np.load parses the header again
                return np.load(f, allow_pickle=False)
        except OSError as e:
            raise InputError(f"{path}: cannot read: {e.strerror or e}") from None
        except (ValueError, EOFError) as e:
            raise DataError(f"{path}: not {what}: {e}") from None


def read_doc_index(path: str | Path) -> np.ndarray:
    starts = load_npy(path, "a document index")
    if starts.ndim != 1 or starts.dtype.kind not in "iu":
        raise DataError(f"{path}: document index must be a 1-d integer array")
    return starts.astype(np.int64, copy=False)


def load_npy_mmap(path: Path, what: str) -> np.ndarray:
    """A .npy mapped read-only, its header checked against the file size first (``npy_header``):
    a truncated or garbled file is a DataError naming it, never numpy's "Failed to read all data"
    or a tokenizer error. InputError if missing or not a regular file."""
    with open_regular(path, what) as f:
        shape, fortran, dtype, offset = npy_header(f, path, what)
    if 0 in shape:  # numpy cannot map an empty body
        return np.zeros(shape, dtype)
    try:
        return np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=shape, order="F" if fortran else "C")
    except (ValueError, OSError) as e:
        raise DataError(f"{path}: not {what}: {e}") from None
