"""The schema's field readers: every JSON field winsample reads is typed and range-checked here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..disk.names import is_plain_name, read_small_text
from ..errors import DataError, json_place
from .names import SHARDS_DIR, is_shard_name

# --- meta.json: the schema's one home ------------------------------------------------------
#
# Meta, SplitEntry, ShardEntry and PlanSidecar (below) are the schema of meta.json and of a plan's
# sidecar: ``from_json`` validates every field it knows (types, ranges, names that must stay
# inside their folder) and keeps unknown fields in ``extra`` (readers ignore them, writers keep
# them); ``to_json`` gives back the dict, keys in the order encode writes them.

META_DTYPES = ("<u2", "<u4")  # the only dtype strings meta.json and sidecars may hold


def schema_error(where: str, msg: str):
    raise DataError(f"{where}: {msg}")


def is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def get_int(obj: dict, key: str, where: str, path: str, *, lo: int | None = 0, hi: int | None = None,
             required: bool = True, nullable: bool = False):
    """``obj[key]`` checked to be an int in ``[lo, hi]`` (None allowed when ``nullable``)."""
    if key not in obj:
        if required:
            schema_error(where, f"{path}.{key} is missing")
        return None
    v = obj[key]
    if v is None and nullable:
        return None
    if not is_int(v):
        schema_error(where, f"{path}.{key} is {v!r}, not an integer")
    if lo is not None and v < lo:
        schema_error(where, f"{path}.{key} is {v}, below {lo}")
    if hi is not None and v > hi:
        schema_error(where, f"{path}.{key} is {v}, above {hi}")
    return v


def get_str(obj: dict, key: str, where: str, path: str, *, required: bool = True, nullable: bool = False):
    name = f"{path}.{key}" if path else key
    if key not in obj:
        if required:
            schema_error(where, f"{name} is missing")
        return None
    v = obj[key]
    if v is None and nullable:
        return None
    if not isinstance(v, str):
        schema_error(where, f"{name} is {v!r}, not a string")
    return v


def get_obj(obj: dict, key: str, where: str, path: str, *, required: bool = False) -> dict | None:
    if key not in obj or (obj[key] is None and not required):
        if required:
            schema_error(where, f"{path + '.' if path else ''}{key} is missing")
        return None
    v = obj[key]
    if not isinstance(v, dict):
        schema_error(where, f"{path + '.' if path else ''}{key} is not a JSON object")
    return v


def get_name(obj: dict, key: str, where: str, path: str, *, shard: bool = False, required: bool = True,
              nullable: bool = False):
    v = get_str(obj, key, where, path, required=required, nullable=nullable)
    if v is not None and not (is_shard_name(v) if shard else is_plain_name(v)):
        want = f"'{SHARDS_DIR}/<name>'" if shard else "a plain file name inside the folder"
        schema_error(where, f"{path}.{key} {v!r} is not {want}")
    return v


def get_dtype(obj: dict, key: str, where: str, path: str, *, required: bool = True):
    v = obj.get(key)
    if key not in obj and not required:
        return None
    if v not in META_DTYPES:
        schema_error(where, f"{(path + '.') if path else ''}{key} {v!r} is not one of {', '.join(META_DTYPES)}"
             f" (unsupported dtype)")
    return v


def extra_keys(obj: dict, known) -> dict:
    return {k: v for k, v in obj.items() if k not in known}


def load_json(path: str | Path, what: str) -> Any:
    """Parsed JSON of a metadata file: InputError if it cannot be read (exit 2, like a token
    file), DataError naming the line and column if it is not JSON (too deep, a number of
    thousands of digits: the same)."""
    text = read_small_text(path, what)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise DataError(f"{path}: not valid JSON: {json_place(e, line=True)}") from None
    except RecursionError:
        raise DataError(f"{path}: JSON nested too deeply to read: not {what}") from None
    except ValueError as e:  # e.g. an integer of more than 4300 digits
        raise DataError(f"{path}: not readable JSON: {str(e).split('; use sys.')[0]}") from None



def read_json(path: Path, what: str) -> Any:
    return load_json(path, what)
