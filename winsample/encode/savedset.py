"""Folders written by Hugging Face ``datasets``' ``save_to_disk``, found by their own files.

A ``Dataset`` folder holds ``state.json`` (its ``_data_files`` list the ``.arrow`` shards, in
order: Arrow IPC streams) beside ``dataset_info.json``; a ``DatasetDict`` folder holds
``dataset_dict.json`` (``{"splits": [...]}``) and one such folder per split. This module only
finds the shards (no pyarrow, no ``datasets``); ``arrow`` reads their rows.

A DatasetDict gives its ``train`` split (or its only split), and says so: the other splits are
held-out data, which a training corpus must not take in by accident; ``DIR/validation`` names
another split's folder.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from ..disk import is_plain_name
from ..errors import ConfigError, DataError, InputError

STATE = "state.json"
DICT = "dataset_dict.json"
SPLIT = "train"  # the split a DatasetDict gives
SPLITS = "splits"  # dataset_dict.json's key (datasets' file; meta.json's "splits" is another thing)


def _read_json(path: Path):
    """The JSON in ``path``, or None when it is not a readable JSON file (then it is not ``datasets``' file)."""
    try:
        return json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError):
        return None


def saved_dataset(folder: Path, arg: str, notice: Callable[[str], None] | None = None) -> list[Path] | None:
    """The ``.arrow`` shards of a ``save_to_disk`` folder in their order (a DatasetDict: of its
    ``train`` split, said through ``notice``); None for any other folder. InputError for a
    shard it names that is missing, DataError for a ``state.json`` it cannot use."""
    listed = _read_json(folder / DICT)
    splits = listed.get(SPLITS) if isinstance(listed, dict) else None
    if isinstance(splits, list) and splits:
        return _one_split(folder, arg, [str(s) for s in splits], notice)
    state = _read_json(folder / STATE)
    if not (isinstance(state, dict) and "_data_files" in state):
        return None
    files = state["_data_files"]
    where = f"{Path(arg) / STATE}"
    if not isinstance(files, list) or not files:
        raise DataError(f"{where}: _data_files is not a list of shards; save the dataset again with save_to_disk")
    out = []
    for k, entry in enumerate(files):
        name = entry.get("filename") if isinstance(entry, dict) else None
        if not is_plain_name(name):  # a name read from a file stays inside its folder
            raise DataError(f"{where}: _data_files[{k}] is not a plain file name: {json.dumps(entry)[:80]}")
        if not (folder / name).is_file():
            raise InputError(f"{Path(arg) / name}: no such file, though {where} lists it (a copy left it out?)")
        out.append(folder / name)
    return out


def _one_split(folder: Path, arg: str, splits: list[str], notice) -> list[Path]:
    """The shards of the DatasetDict's ``train`` split, or its only one; ConfigError otherwise."""
    if SPLIT in splits:
        split = SPLIT
    elif len(splits) == 1:
        split = splits[0]
    else:
        raise ConfigError(f"{arg}: a DatasetDict with no {SPLIT!r} split (splits: {', '.join(splits)}):"
                          f" name the split to encode, e.g. {Path(arg) / splits[0]}")
    if not is_plain_name(split):
        raise DataError(f"{Path(arg) / DICT}: split {json.dumps(split)[:80]} is not a plain folder name")
    got = saved_dataset(folder / split, str(Path(arg) / split))
    if got is None:
        raise InputError(f"{Path(arg) / split}: no {STATE} of a saved split there, though {Path(arg) / DICT} lists it")
    others = [s for s in splits if s != split]
    if notice is not None and others:
        notice(f"{arg}: a DatasetDict: reading its {split!r} split only; name {Path(arg) / others[0]} to encode"
               f" another ({', '.join(others)})")
    elif notice is not None and split != SPLIT:  # held-out data going into training: said, never silent
        notice(f"{arg}: a DatasetDict whose only split is {split!r} (no {SPLIT!r}): reading it")
    return got
