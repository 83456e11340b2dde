"""Writing a store: one Parquet file per table, behind `manifest.json`.

The tables of a store are written into a staging folder and made the store's current version
by one atomic rename when complete (folder.py), so a crash or a bad input never leaves
something that looks like a finished store, nor damages the store being replaced. The
manifest records each file's checksums (checksums.py).

A partitioned store's parts are written the same way (`TableWriter`), each by the worker that
decoded it (`PartWriter`), into the staging folder of the ingest that split the input
(`PartitionedStoreWriter`).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import io
import os
import shutil
import time
import uuid
from pathlib import Path
from typing import IO, Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import StoreError
from ..model import SCHEMAS, TABLES
from .checksums import describe
from .folder import Staging, check_output
from .manifest import PARTITIONED_MODEL, PLAIN_MODEL, part_file, table_file


class TableWriter:
    """Writes the four tables into files of a folder (`names`: each table's path in it);
    `close` gives what the manifest records of each file.

    Rows must come in seq order, table by table (docs/model.md): `write` refuses any that do
    not, as a decoder's bug, so no store is ever written that analyses would misread.
    """

    def __init__(self, folder: Path, names: dict[str, str], label: Path) -> None:
        self.folder = folder
        self.names = names
        self.label = label  # the store, as errors name it
        self._writers: dict[str, pq.ParquetWriter] = {}
        self._rows = dict.fromkeys(TABLES, 0)
        self._last_seq: dict[str, int] = {}
        self.first_seq: dict[str, int] = {}

    @property
    def last_seq(self) -> dict[str, int]:
        """The seq of each table's last row written (tables with rows only)."""
        return dict(self._last_seq)

    def checked(self, table: str, data: pa.Table) -> pa.Table:
        """`data` in the table's stored schema; StoreError if a column every row has has nulls."""
        for name in _REQUIRED[table]:
            if data.column(name).null_count:
                raise StoreError(f"{self.label}: {table}.{name} has nulls; the model never leaves it empty")
        schema = STORED_SCHEMAS[table]
        return data.cast(schema) if data.schema != schema else data

    def write(self, table: str, data: pa.Table) -> None:
        """Append checked rows (see `checked`) to the table, as one row group."""
        if data.num_rows == 0:
            return
        self._check_order(table, data.column("seq").to_numpy())
        writer = self._writers.get(table)
        if writer is None:
            path = self.folder / self.names[table]
            path.parent.mkdir(exist_ok=True)
            writer = pq.ParquetWriter(path, STORED_SCHEMAS[table], **_parquet_options(table))
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
            self.first_seq.setdefault(table, int(seq[0]))
            self._last_seq[table] = int(seq[-1])
            return
        raise out_of_order(self.label, table, self._rows[table] + row, int(seq[row]), before)

    def close(self) -> dict[str, dict[str, Any]]:
        """Finish the files (a table without rows gets an empty one): what the manifest records
        of each (checksums.py), by file name."""
        for writer in self._writers.values():
            writer.close()
        for table in TABLES:
            if table not in self._writers:
                path = self.folder / self.names[table]
                path.parent.mkdir(exist_ok=True)
                path.write_bytes(_empty_file(table))
        return {name: describe(self.folder / name) for name in self.names.values()}

    def abort(self) -> None:
        for writer in self._writers.values():
            with contextlib.suppress(Exception):  # cleaning up after a failure already reported
                writer.close()


def out_of_order(store: Path, table: str, row: int, seq: int, before: int) -> StoreError:
    """The error for a row whose seq goes back: a decoder's bug."""
    order = "increasing" if table == "instructions" else "non-decreasing"
    return StoreError(
        f"{store}: internal error: {table} row {row:,} has seq {seq} after seq {before}; a table's "
        f"seq must be {order} (docs/model.md), so the decoder has a bug: please report it with the input"
    )


class StoreWriter(TableWriter):
    """Writes the tables of one store, a file each; `commit` makes it appear, anything else
    leaves nothing."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        check_output(self.path)
        self._staging = Staging(self.path)
        super().__init__(self._staging.version, {table: table_file(table) for table in TABLES}, self.path)

    def commit(self, manifest: dict[str, Any]) -> Path:
        files = self.close()
        self._staging.commit({"model_version": PLAIN_MODEL, **manifest, "files": files})
        return self.path

    def abort(self) -> None:
        super().abort()
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


PARTS_OPEN = ".parts-open"
"""The file of a partitioned store's staging version that says parts may still be written
into it. Each `PartWriter` holds a shared lock on it while it writes, and stops at its next
write once the file is gone; `PartitionedStoreWriter.abort` removes the file, then takes the
exclusive lock, so it removes the staging folder only once no part is written into it: a
part task still running when its ingest was cancelled or failed (a cluster cannot stop a
running task) never writes into, nor leaves files in, a folder being removed."""

PART_STOP_SECONDS = 60
"""How long an ended ingest waits for its parts to stop writing (a part checks before each
batch and row group it writes, a second or so apart) before it removes their folder anyway:
a worker that shares the file system but not its locks."""


class PartitionedStoreWriter:
    """A partitioned store being made: a staging version whose parts workers write
    (`PartWriter` in `version`, a path they all reach), made the store by `commit`."""

    def __init__(self, path: str | os.PathLike[str], inputs: list[str]) -> None:
        self.path = Path(path)
        check_output(self.path, inputs)
        self._staging = Staging(self.path)
        self.version = self._staging.version
        for table in TABLES:
            (self.version / table).mkdir()
        self._parts_open = open(self.version / PARTS_OPEN, "xb")  # noqa: SIM115 - kept open: `abort` locks it

    def commit(self, manifest: dict[str, Any], files: dict[str, dict[str, Any]]) -> Path:
        """Make the store of `manifest` (which says how many `parts`) and the parts' `files`,
        without the folders of parts whose worker died while writing them (their tasks ran
        again elsewhere)."""
        (self.version / PARTS_OPEN).unlink()
        self._parts_open.close()
        for leftover in self.version.glob(".part-*"):
            shutil.rmtree(leftover, ignore_errors=True)
        self._staging.commit({"model_version": PARTITIONED_MODEL, **manifest, "files": files})
        return self.path

    def abort(self) -> None:
        """Stop the parts still being written, then remove the staging folder (see `PARTS_OPEN`)."""
        try:
            with contextlib.suppress(FileNotFoundError):
                (self.version / PARTS_OPEN).unlink()
            _wait_for_parts(self._parts_open)
        finally:
            self._parts_open.close()
            self._staging.discard()


def _wait_for_parts(parts_open: IO[bytes]) -> None:
    """Wait until no `PartWriter` holds its lock on `parts_open`, `PART_STOP_SECONDS` at most."""
    deadline = time.monotonic() + PART_STOP_SECONDS
    while True:
        try:
            fcntl.flock(parts_open, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() > deadline:
                return
            time.sleep(0.02)
        except OSError:
            return  # without locks, parts cannot be waited for


class PartWriter(TableWriter):
    """Writes part `index` of each table of a partitioned store being made (see
    `PartitionedStoreWriter`), on whichever worker decodes it.

    The files are written in a folder of their own and moved to their places by `close`, one
    rename each: a part written again (its first worker died) replaces a whole part, never
    one half-written. While it writes it holds a shared lock on the version's `PARTS_OPEN`,
    and it stops (StoreError) once that file is gone: its ingest has ended. No folder is made
    above its own, so a part started after its ingest ended fails at once, leaving nothing."""

    def __init__(self, version: str | os.PathLike[str], index: int, label: Path) -> None:
        self.version = Path(version)
        names = {table: part_file(table, index) for table in TABLES}
        super().__init__(self.version / f".part-{index:05d}-{uuid.uuid4().hex[:8]}", names, label)
        self._parts_open = open(self.version / PARTS_OPEN, "rb")  # noqa: SIM115 - kept open: it holds the lock
        with contextlib.suppress(OSError):  # without locks, an ended ingest does not wait for parts
            fcntl.flock(self._parts_open, fcntl.LOCK_SH)
        try:
            self.check_open()
            self.folder.mkdir()
        except BaseException:
            self._parts_open.close()
            raise

    def check_open(self) -> None:
        """StoreError if the ingest has ended (cancelled, or another part failed)."""
        if not os.path.exists(self.version / PARTS_OPEN):
            raise StoreError(f"{self.label}: the ingest ended while part {self.folder.name} was written")

    def write(self, table: str, data: pa.Table) -> None:
        self.check_open()
        super().write(table, data)

    def close(self) -> dict[str, dict[str, Any]]:
        self.check_open()
        files = super().close()
        for name in files:
            os.replace(self.folder / name, self.version / name)
        shutil.rmtree(self.folder, ignore_errors=True)
        self._parts_open.close()
        return files

    def abort(self) -> None:
        super().abort()
        shutil.rmtree(self.folder, ignore_errors=True)
        self._parts_open.close()
