"""Stores: a directory `NAME.ctrace/` with one Parquet file per table and `manifest.json`.

A store is written into a temporary sibling directory and renamed into place only when
complete, so a crash or a bad input never leaves something that looks like a finished store.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from .errors import StoreError
from .model import MODEL_VERSION, SCHEMAS, TABLES

MANIFEST = "manifest.json"
STORE_SUFFIX = ".ctrace"


def is_store(path: str | os.PathLike[str]) -> bool:
    return (Path(path) / MANIFEST).is_file()


class StoreWriter:
    """Writes the tables of one store; `commit` makes it appear, anything else leaves nothing."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.tmp = self.path.with_name(f"{self.path.name}.tmp-{uuid.uuid4().hex[:8]}")
        self._writers: dict[str, pq.ParquetWriter] = {}
        self.tmp.mkdir(parents=True)

    def checked(self, table: str, data: pa.Table) -> pa.Table:
        """`data` in the table's stored schema; StoreError if a column every row has has nulls."""
        for name in _REQUIRED[table]:
            if data.column(name).null_count:
                raise StoreError(f"{self.path}: {table}.{name} has nulls; the model never leaves it empty")
        schema = STORED_SCHEMAS[table]
        return data.cast(schema) if data.schema != schema else data

    def write(self, table: str, data: pa.Table) -> None:
        """Append checked rows (see `checked`) to the table, as one row group."""
        if data.num_rows == 0:
            return
        writer = self._writers.get(table)
        if writer is None:
            writer = pq.ParquetWriter(
                self.tmp / f"{table}.parquet", STORED_SCHEMAS[table], **_parquet_options(table)
            )
            self._writers[table] = writer
        writer.write_table(data, row_group_size=data.num_rows)

    def commit(self, manifest: dict[str, Any]) -> Path:
        for writer in self._writers.values():
            writer.close()
        for table in TABLES:
            if table not in self._writers:
                (self.tmp / f"{table}.parquet").write_bytes(_empty_file(table))
        body = {"model_version": MODEL_VERSION, **manifest}
        (self.tmp / MANIFEST).write_text(json.dumps(body, indent=2, default=str) + "\n")
        old = None
        if self.path.exists():
            old = self.path.with_name(f"{self.path.name}.old-{uuid.uuid4().hex[:8]}")
            os.rename(self.path, old)
        os.rename(self.tmp, self.path)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        return self.path

    def abort(self) -> None:
        for writer in self._writers.values():
            with contextlib.suppress(Exception):  # cleaning up after a failure already reported
                writer.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


# Columns every row has (docs/model.md): stored as required, which spares Parquet writing and
# reading their definition levels (a third of the write time of a column).
_REQUIRED = {
    "instructions": ("seq", "cpu", "pc", "size", "isa", "flags", "src"),
    "registers": ("seq", "cpu", "reg", "src"),
    "memory": ("seq", "cpu", "src"),
    "events": ("seq", "cpu", "kind", "src"),
}
STORED_SCHEMAS = {
    table: pa.schema([f.with_nullable(f.name not in _REQUIRED[table]) for f in schema])
    for table, schema in SCHEMAS.items()
}
"""The tables' schemas as stored: the model's, with the columns every row has not nullable."""

# Columns that grow with every row: delta-encoded, never dictionary-encoded (that costs time
# and space on unique values).
_MONOTONIC = ("seq", "time", "src")
# Addresses and cycle counts: their bytes split into streams (the high bytes of an address
# barely change), which compresses better and writes three times faster than a dictionary.
_SPLIT = ("pc", "addr", "paddr", "cycles")
# Columns with few distinct values: dictionary-encoded. Register and memory values are not:
# their dictionaries overflow and zstd does better on the plain values; nor are opcodes. Nor
# are `cpu` and `flags`, nearly constant: zstd shrinks their plain values as well, and hashing
# each value into a dictionary took a tenth of an instruction table's write time. Nor is
# `executed`: Parquet keeps booleans as plain bits, and a dictionary asked for is not used.
_REPEATING = frozenset(
    ("size", "isa", "mode", "disasm", "reg", "op", "source", "attrs", "kind", "number", "name")
)
# Columns whose row-group min/max let queries skip data (positions, cores, addresses); the
# others' statistics cost a third of the write time and serve no filter.
_FILTERED = frozenset(("seq", "time", "cpu", "pc", "addr", "src"))


def _parquet_options(table: str) -> dict[str, Any]:
    names = SCHEMAS[table].names
    return {
        "compression": "zstd",
        # Level 1: an ETMv3 trace's instruction rows write 10-15 % faster than at the default
        # level 3, in files 2 % larger. Writing is half of what ingesting such a trace costs.
        "compression_level": 1,
        # Pages end at 1 MiB or with their row group, not also every 20,000 rows (Arrow's
        # default): each page is a zstd call with a context made afresh, and small pages spent a
        # quarter of the write time making them. The files come out smaller too.
        "max_rows_per_page": 1 << 30,
        "use_dictionary": [n for n in names if n in _REPEATING],
        "column_encoding": {
            **{n: "DELTA_BINARY_PACKED" for n in _MONOTONIC if n in names},
            **{n: "BYTE_STREAM_SPLIT" for n in _SPLIT if n in names},
        },
        "write_statistics": [n for n in names if n in _FILTERED],
    }


@functools.cache
def _empty_file(table: str) -> bytes:
    """A Parquet file of the table with no rows: made once, as it is the same for every store
    (making it took a millisecond of each ingest's end, waited for)."""
    sink = io.BytesIO()
    pq.write_table(STORED_SCHEMAS[table].empty_table(), sink)
    return sink.getvalue()


def read_manifest(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The manifest of a store, refusing stores this code cannot read correctly."""
    file = Path(path) / MANIFEST
    try:
        manifest = json.loads(file.read_text())
    except FileNotFoundError:
        raise StoreError(f"{path}: not a cputrace store (no {MANIFEST})") from None
    except (OSError, ValueError) as exc:
        raise StoreError(f"{file}: unreadable manifest: {exc}") from None
    version = manifest.get("model_version")
    if not isinstance(version, int):
        raise StoreError(f"{file}: manifest has no model_version")
    if version > MODEL_VERSION:
        raise StoreError(
            f"{path}: store uses model version {version}, this cputrace reads up to "
            f"{MODEL_VERSION}; upgrade cputrace or re-ingest the input"
        )
    for table in TABLES:
        if not (Path(path) / f"{table}.parquet").is_file():
            raise StoreError(f"{path}: damaged store, {table}.parquet is missing")
    return manifest


def table_path(store: str | os.PathLike[str], table: str) -> Path:
    return Path(store) / f"{table}.parquet"
