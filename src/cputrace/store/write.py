"""Writing a store: one Parquet file per table, behind `manifest.json`.

The tables of a store are written into a staging folder and made the store's current version
by one atomic rename when complete (folder.py), so a crash or a bad input never leaves
something that looks like a finished store, nor damages the store being replaced. The
manifest records each file's checksums (checksums.py).
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import StoreError
from ..model import SCHEMAS, TABLES
from .checksums import describe
from .folder import Staging, check_output
from .manifest import PLAIN_MODEL, table_file


class StoreWriter:
    """Writes the tables of one store; `commit` makes it appear, anything else leaves nothing.

    Rows must come in seq order, table by table (docs/model.md): `write` refuses any that do
    not, as a decoder's bug, so no store is ever written that analyses would misread.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        check_output(self.path)
        self._staging = Staging(self.path)
        self._writers: dict[str, pq.ParquetWriter] = {}
        self._rows = dict.fromkeys(TABLES, 0)
        self._last_seq: dict[str, int] = {}

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
        self._check_order(table, data.column("seq").to_numpy())
        writer = self._writers.get(table)
        if writer is None:
            writer = pq.ParquetWriter(
                self._staging.version / table_file(table), STORED_SCHEMAS[table], **_parquet_options(table)
            )
            self._writers[table] = writer
        writer.write_table(data, row_group_size=data.num_rows)
        self._rows[table] += data.num_rows

    def _check_order(self, table: str, seq: np.ndarray) -> None:
        """StoreError naming the first row whose seq goes back (or, for instructions, repeats).

        One vectorised comparison of each row with the one before, on the writing thread: little
        beside what encoding the row group costs there."""
        strict = table == "instructions"
        last = self._last_seq.get(table)
        in_order = seq[1:] > seq[:-1] if strict else seq[1:] >= seq[:-1]
        if last is not None and (seq[0] <= last if strict else seq[0] < last):
            row, before = 0, last
        elif not in_order.all():
            row = int(np.argmin(in_order)) + 1
            before = int(seq[row - 1])
        else:
            self._last_seq[table] = int(seq[-1])
            return
        order = "increasing" if strict else "non-decreasing"
        raise StoreError(
            f"{self.path}: internal error: {table} row {self._rows[table] + row:,} has seq {int(seq[row])} "
            f"after seq {before}; a table's seq must be {order} (docs/model.md), so the decoder has a "
            "bug: please report it with the input"
        )

    def commit(self, manifest: dict[str, Any]) -> Path:
        for writer in self._writers.values():
            writer.close()
        version = self._staging.version
        for table in TABLES:
            if table not in self._writers:
                (version / table_file(table)).write_bytes(_empty_file(table))
        files = {table_file(table): describe(version / table_file(table)) for table in TABLES}
        self._staging.commit({"model_version": PLAIN_MODEL, **manifest, "files": files})
        return self.path

    def abort(self) -> None:
        for writer in self._writers.values():
            with contextlib.suppress(Exception):  # cleaning up after a failure already reported
                writer.close()
        self._staging.discard()


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
# barely change), which compresses better and writes faster than a dictionary.
_SPLIT = ("pc", "addr", "paddr", "cycles")
# Columns with few distinct values: dictionary-encoded. Register and memory values are not:
# their dictionaries overflow and zstd does better on the plain values; nor are opcodes. Nor
# are `cpu` and `flags`, nearly constant: zstd shrinks their plain values as well, without
# hashing every value into a dictionary. Nor is
# `executed`: Parquet keeps booleans as plain bits, and a dictionary asked for is not used.
_REPEATING = frozenset(
    ("size", "isa", "mode", "disasm", "reg", "op", "source", "attrs", "kind", "number", "name")
)
# Columns whose row-group min/max let queries skip data (positions, cores, addresses); the
# others' statistics would cost write time and serve no filter.
_FILTERED = frozenset(("seq", "time", "cpu", "pc", "addr", "src"))


def _parquet_options(table: str) -> dict[str, Any]:
    names = SCHEMAS[table].names
    return {
        # A CRC-32 per page, checked as pages are read through Arrow (checksums.py).
        "write_page_checksum": True,
        "compression": "zstd",
        # Level 1: writing is much of an ingest (docs/benchmarks.md, ETMv3), and level 1 writes
        # faster than the default level 3 for files barely larger.
        "compression_level": 1,
        # Pages end at 1 MiB or with their row group, not also every 20,000 rows (Arrow's
        # default): each page is a zstd call with a context made afresh, which small pages pay
        # for again and again. The files come out smaller too.
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
    (making it was time at the end of every ingest, which the ingest waits for)."""
    sink = io.BytesIO()
    pq.write_table(STORED_SCHEMAS[table].empty_table(), sink, write_page_checksum=True)
    return sink.getvalue()

