"""A store's manifest.json: read and checked before anything else of the store is trusted.

A manifest that is not what cputrace writes (a JSON list, a field missing or of another type,
a `data` folder outside the store) is a damaged store, reported as such: readers index its
fields freely once it has passed here.

A table is one Parquet file, or in a partitioned store (`parts`: N, model version 3) a folder
of N part files, `TABLE/part-00000.parquet` on, whose rows follow each other in seq order
(batch/partition.py writes them). `table_files` names them; readers go through it and never
need to know which kind of store they read.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from ..errors import StoreError
from ..model import MODEL_VERSION, TABLES

MANIFEST = "manifest.json"

PLAIN_MODEL = 2
"""The model version a store of one file per table is written with (older cputrace reads it)."""
PARTITIONED_MODEL = 3
"""The model version from which a table may be a folder of parts (`parts` in the manifest)."""

FIRST_VERSIONED_MODEL = 2
"""The model version from which tables live in a version folder named by the manifest's `data`
(folder.py); stores of earlier versions keep them beside the manifest."""

VERSION_FOLDER = re.compile(r"v-[0-9a-f]{12}")
_HEX128 = re.compile(r"[0-9a-f]{32}")


def table_file(table: str) -> str:
    return f"{table}.parquet"


def part_file(table: str, index: int) -> str:
    """The file of part `index` of a table, in the version folder."""
    return f"{table}/part-{index:05d}.parquet"


def table_files(manifest: dict[str, Any]) -> dict[str, list[str]]:
    """Each table's files (paths in the version folder), in seq order: one, or its parts."""
    parts = manifest.get("parts")
    if parts:
        return {table: [part_file(table, index) for index in range(parts)] for table in TABLES}
    return {table: [table_file(table)] for table in TABLES}


def held_file(manifest: dict[str, Any]) -> str:
    """The file of a version that readers lock (folder.py): its first instructions file, which
    every version has and which never changes."""
    return table_files(manifest)["instructions"][0]


def load_manifest(store: str | os.PathLike[str]) -> dict[str, Any]:
    """The manifest of `store`, checked field by field (its files are not looked at)."""
    file = Path(store) / MANIFEST
    try:
        text = file.read_bytes()
    except FileNotFoundError:
        raise StoreError(f"{store}: not a cputrace store (no {MANIFEST})") from None
    except OSError as exc:
        raise StoreError(f"{file}: unreadable manifest: {exc.strerror}") from None
    try:
        manifest = json.loads(text)
    except ValueError as exc:
        raise StoreError(f"damaged store: {file}: not JSON ({exc})") from None
    if not isinstance(manifest, dict):
        raise StoreError(f"damaged store: {file}: a JSON object was expected, got {type(manifest).__name__}")
    version = manifest.get("model_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise StoreError(f"damaged store: {file}: no model_version")
    if version < 1:  # versions count from 1: a smaller one is no store cputrace wrote
        raise StoreError(f"damaged store: {file}: model_version {version} is not a model version (1 or more)")
    if version > MODEL_VERSION:
        raise StoreError(
            f"{store}: store uses model version {version}, this cputrace reads up to "
            f"{MODEL_VERSION}; upgrade cputrace or re-ingest the input"
        )
    for name, (check, expected) in _FIELDS.items():
        if name not in manifest:
            raise StoreError(f"damaged store: {file}: no {name!r}")
        if not check(manifest[name]):
            raise StoreError(f"damaged store: {file}: {name!r} is not {expected}")
    if version >= FIRST_VERSIONED_MODEL:
        parts = manifest.get("parts")
        if parts is not None and not (version >= PARTITIONED_MODEL and _is_count(parts) and parts > 0):
            raise StoreError(f"damaged store: {file}: 'parts' is not a number of parts")
        for name, (check, expected) in _VERSIONED_FIELDS.items():
            if not check(manifest.get(name)):
                raise StoreError(f"damaged store: {file}: {name!r} is not {expected}")
        names = {name for files in table_files(manifest).values() for name in files}
        if set(manifest["files"]) != names:
            raise StoreError(f"damaged store: {file}: 'files' is not {_VERSIONED_FIELDS['files'][1]}")
    return manifest


def data_dir(store: str | os.PathLike[str], manifest: dict[str, Any]) -> Path:
    """The folder holding the table files the manifest describes."""
    folder = manifest.get("data")
    return Path(store) / folder if folder is not None else Path(store)


def table_path(store: str | os.PathLike[str], table: str) -> Path:
    """The first file of a table in the store's current version (its only file, unless the
    store is partitioned; an open `Trace` has its own, `Trace.files`, which stay the same
    while the store is re-ingested)."""
    manifest = load_manifest(store)
    return data_dir(store, manifest) / table_files(manifest)[table][0]


def recorded_files(manifest: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Size and hashes of each table file (by file name); empty for stores written before."""
    return manifest.get("files") or {}


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_count(value: Any) -> bool:
    return _is_int(value) and value >= 0


def _optional(check: Any) -> Any:
    return lambda value: value is None or check(value)


def _list_of(check: Any) -> Any:
    return lambda value: isinstance(value, list) and all(check(item) for item in value)


def _dict_of(check: Any) -> Any:
    return lambda value: isinstance(value, dict) and all(check(item) for item in value.values())


CORES = 1 << 16
"""Core numbers a store can hold: its `cpu` columns are uint16."""


def _is_core(value: Any) -> bool:
    return _is_count(value) and value < CORES


def _is_str(value: Any) -> bool:
    return isinstance(value, str)


def _is_counts(value: Any) -> bool:
    return isinstance(value, dict) and all(_is_count(value.get(table)) for table in TABLES)


def _is_time(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and all(_optional(_is_int)(value.get(end)) for end in ("min", "max"))
        and _optional(_is_str)(value.get("unit"))
    )


def _is_input(value: Any) -> bool:
    return isinstance(value, dict) and _is_str(value.get("path")) and _is_count(value.get("size"))


def _is_file_record(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and _is_count(value.get("size"))
        and all(isinstance(value.get(key), str) and _HEX128.fullmatch(value[key]) for key in _HASHES)
    )


def _is_files(value: Any) -> bool:
    return isinstance(value, dict) and all(map(_is_file_record, value.values()))


_HASHES = ("xxh3_128", "footer_xxh3_128")

# The fields readers use, and what each must be.
_FIELDS = {
    "format": (lambda v: _is_str(v) or _list_of(_is_str)(v), "a format name or a list of them"),
    "inputs": (_list_of(_is_input), "a list of inputs with path and size"),
    "counts": (_is_counts, "a row count per table"),
    "time": (_is_time, "an object with integer min and max (or null) and a unit"),
    "cpus": (_list_of(_is_core), f"a list of core numbers from 0 to {CORES - 1}"),
    "isas": (_list_of(_is_str), "a list of names"),
    "modes": (_list_of(_is_str), "a list of names"),
    "event_kinds": (_dict_of(_is_count), "a count per event kind"),
    "warnings": (lambda v: isinstance(v, dict) and _is_count(v.get("count")), "an object with a count"),
}
_VERSIONED_FIELDS = {
    "data": (lambda v: isinstance(v, str) and VERSION_FOLDER.fullmatch(v) is not None, "a folder name"),
    "files": (_is_files, "the size and hashes of every table file"),  # and names them all
}
