"""The Python face of a store: one version of it held open, its tables as Arrow, and SQL over them."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import StoreError, UsageError
from ..model import TABLES
from .checksums import check_on_opening, file_problem
from .folder import Pin, check_store_path, collect, pin
from .manifest import load_manifest, table_files
from .sql import (
    check_untrusted,
    connect,
    create_parquet_view,
    decimal_hex_literals,
    parquet_scan,
    untrusted_connection,
)

if TYPE_CHECKING:
    import duckdb


class Trace:
    """An ingested execution history: four tables that join on `seq`.

    A table is one Parquet file, or a folder of parts in a partitioned store: `files`,
    `parquet_files`, `table`, `sql` and the readers of batches.py read either alike.

    A Trace reads one version of its store for its whole life: the store can be re-ingested
    meanwhile, and the version this Trace holds stays until it is closed (folder.py). Its
    files are checked against the checksums written with them (checksums.py): sizes and
    Parquet footers on opening, and each file's whole hash before it is first read. A file
    found damaged raises StoreError ("damaged store: FILE: ...").

    `untrusted=True` is for SQL that comes from someone else (a service, a browser): `sql`
    then runs one SELECT statement only, in a DuckDB connection that can read the four tables
    and nothing else (sql.py).
    """

    def __init__(self, store: str | os.PathLike[str], *, untrusted: bool = False) -> None:
        self.path = Path(store)
        self.untrusted = untrusted
        check_store_path(self.path)
        held = pin(self.path)
        try:
            check_on_opening(held.data, held.manifest)
        except StoreError:
            held.release()
            raise
        self._pin: Pin | None = held
        self.manifest: dict[str, Any] = held.manifest
        self.data = held.data
        """The folder of the version this Trace reads."""
        self._files = table_files(held.manifest)
        self._hashed: set[str] = set()
        self._tables: dict[str, pa.Table] = {}
        self._db: duckdb.DuckDBPyConnection | None = None

    def __repr__(self) -> str:
        return f"<Trace {self.path} {self.manifest['counts']['instructions']} instructions>"

    @property
    def input_paths(self) -> list[Path]:
        """The input files the store was ingested from (as the manifest names them): what a
        command writing an output file from this trace must never replace."""
        return [Path(source["path"]) for source in self.manifest.get("inputs", [])]

    def files(self, table: str) -> list[Path]:
        """The table's files in seq order (one, or its parts), each one's whole hash checked
        (once per Trace: the files of a version never change), for any reader: DuckDB's
        `read_parquet`, Arrow, other tools."""
        self._check_open(table)
        paths = []
        for name in self._files[table]:
            if name not in self._hashed:
                problem = file_problem(self.data, self.manifest, name, whole=True)
                if problem is not None:
                    raise self.damaged(name, problem)
                self._hashed.add(name)
            paths.append(self.data / name)
        return paths

    def file(self, table: str) -> Path:
        """The table's file, or the folder of its parts in a partitioned store (what an Arrow
        dataset reads whole); its files checked as `files` checks them."""
        paths = self.files(table)
        return paths[0] if len(paths) == 1 else paths[0].parent

    def parquet_scan(self, table: str) -> str:
        """SQL reading the table's rows from its files (`read_parquet(...)`), in seq order."""
        return parquet_scan(self.files(table))

    def parquet_files(self, table: str) -> Iterator[tuple[str, pq.ParquetFile]]:
        """The table's files (see `files`) opened for reading through Arrow, in seq order, each
        with its name for `damaged`; Arrow also checks each page's CRC as it reads it."""
        for path in self.files(table):
            name = str(path.relative_to(self.data))
            try:
                yield name, pq.ParquetFile(path, page_checksum_verification=True)
            except (OSError, pa.ArrowException) as exc:
                raise self.damaged(name, exc) from None

    def damaged(self, name: str, problem: BaseException | str) -> StoreError:
        """The error to raise when reading a table file failed (`name`: the file in the version
        folder; `problem`: the exception, or what `checksums` found, which names the file)."""
        if not self.data.is_dir():
            return self._removed()
        if isinstance(problem, str):
            return StoreError(f"damaged store: {problem}")
        return StoreError(f"damaged store: {self.data / name}: {problem}")

    def _removed(self) -> StoreError:
        """The version's folder is gone: removed by hand (no ingest removes a held version)."""
        return StoreError(f"{self.path}: the store's files were removed while it was open ({self.data})")

    def _check_open(self, table: str) -> None:
        if table not in TABLES:
            raise KeyError(f"no table {table!r}; tables are {', '.join(TABLES)}")
        if self._pin is None:
            raise StoreError(f"{self.path}: this Trace is closed")

    def table(self, name: str) -> pa.Table:
        """A whole table as Arrow (read on first use; `sql` is better for slices of big ones)."""
        if name not in self._tables:
            parts = []
            for file_name, file in self.parquet_files(name):
                try:
                    parts.append(file.read())
                except (OSError, pa.ArrowException) as exc:
                    raise self.damaged(file_name, exc) from None
            self._tables[name] = parts[0] if len(parts) == 1 else pa.concat_tables(parts)
        return self._tables[name]

    @property
    def instructions(self) -> pa.Table:
        return self.table("instructions")

    @property
    def registers(self) -> pa.Table:
        return self.table("registers")

    @property
    def memory(self) -> pa.Table:
        return self.table("memory")

    @property
    def events(self) -> pa.Table:
        return self.table("events")

    @property
    def db(self) -> duckdb.DuckDBPyConnection:
        """A DuckDB connection in which the four tables are views (see `untrusted`)."""
        if self._db is None:
            if self.untrusted:
                self._db = untrusted_connection({name: self.files(name) for name in TABLES})
            else:
                self._db = connect()
                self.add_views(self._db)
        return self._db

    def add_views(self, db: duckdb.DuckDBPyConnection, tables: Sequence[str] = TABLES) -> None:
        """The tables as views of their files in another DuckDB connection (an index's, say)."""
        for name in tables:
            create_parquet_view(db, name, self.files(name))

    def sql(self, query: str, params: list[Any] | None = None) -> pa.Table:
        """Run SQL over the tables `instructions`, `registers`, `memory`, `events`."""
        query = decimal_hex_literals(query)
        if self.untrusted:
            check_untrusted(query)
        import duckdb  # loaded by `db` already

        try:
            result = self.db.sql(query, params=params)
            if result is None:  # nothing to run: empty, blanks or comments only
                raise UsageError(f"no SQL statement in {query!r}: give one, e.g. SELECT * FROM instructions")
            return result.to_arrow_table()  # the query runs here
        except duckdb.IOException:
            if not self.data.is_dir():
                raise self._removed() from None
            raise

    def close(self) -> None:
        """Close the connection and let the version go (removed if the store has a newer one)."""
        if self._db is not None:
            self._db.close()
            self._db = None
        if self._pin is not None:
            self._pin.release()
            self._pin = None
            with contextlib.suppress(StoreError, OSError):  # tidying up: best effort
                if load_manifest(self.path).get("data") != self.manifest.get("data"):
                    collect(self.path)

    def __enter__(self) -> Trace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
