"""The Python face of a store: `cputrace.open(path)` -> tables as Arrow, and SQL over them."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.dataset
import pyarrow.parquet as pq

from .errors import StoreError, UsageError
from .ingest import ProgressHook, default_store_path, ingest, store_is_current
from .manifest import load_manifest, table_file
from .model import TABLES
from .storecheck import check_on_opening, file_problem
from .storedir import Pin, collect, is_store, pin

_SQL_QUOTED = re.compile(r"('(?:[^']|'')*'|\"(?:[^\"]|\"\")*\")")
_HEX_LITERAL = re.compile(r"\b0[xX]([0-9a-fA-F]+)\b")


def decimal_hex_literals(query: str) -> str:
    """Rewrite `0x8000` as `32768` outside quotes: addresses are hex, DuckDB's SQL is not."""
    parts = _SQL_QUOTED.split(query)
    for i in range(0, len(parts), 2):
        parts[i] = _HEX_LITERAL.sub(lambda m: str(int(m.group(1), 16)), parts[i])
    return "".join(parts)


def cache_dir() -> Path:
    base = os.environ.get("CPUTRACE_CACHE") or os.environ.get("XDG_CACHE_HOME")
    return Path(base) / "cputrace" if base else Path.home() / ".cache" / "cputrace"


def cached_store_path(input_path: str | os.PathLike[str]) -> Path:
    """Where the store of a raw input lives: next to it if writable, else in the cache dir."""
    beside = default_store_path([input_path])
    if os.access(beside.parent, os.W_OK):
        return beside
    digest = hashlib.sha256(str(Path(input_path).resolve()).encode()).hexdigest()[:16]
    return cache_dir() / f"{Path(input_path).name}-{digest}.ctrace"


class Trace:
    """An ingested execution history: four tables that join on `seq`.

    A Trace reads one version of its store for its whole life: the store can be re-ingested
    meanwhile, and the version this Trace holds stays until it is closed (storedir.py). Its
    files are checked against the checksums written with them (storecheck.py): sizes and
    Parquet footers on opening, and each file's whole hash before it is first read. A file
    found damaged raises StoreError ("damaged store: FILE: ...").

    `untrusted=True` is for SQL that comes from someone else (a service, a browser): `sql`
    then runs one SELECT statement only, in a DuckDB connection that can read the four tables
    and nothing else: no file or network access (`enable_external_access`), no extension
    installed or loaded, and its configuration locked (`lock_configuration`).
    """

    def __init__(self, store: str | os.PathLike[str], *, untrusted: bool = False) -> None:
        self.path = Path(store)
        self.untrusted = untrusted
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
        self._hashed: set[str] = set()
        self._tables: dict[str, pa.Table] = {}
        self._db: duckdb.DuckDBPyConnection | None = None

    def __repr__(self) -> str:
        return f"<Trace {self.path} {self.manifest['counts']['instructions']} instructions>"

    def file(self, table: str) -> Path:
        """The table's file, its whole hash checked (once per Trace: the file of a version
        never changes), for any reader: DuckDB's `read_parquet`, Arrow, other tools."""
        path = self._file(table)
        if table not in self._hashed:
            problem = file_problem(self.data, self.manifest, table, whole=True)
            if problem is not None:
                raise self.damaged(table, problem)
            self._hashed.add(table)
        return path

    def parquet_file(self, table: str) -> pq.ParquetFile:
        """The table's file (see `file`) opened for reading through Arrow, which also checks
        each page's CRC as it reads it (errors: `damaged`)."""
        path = self.file(table)
        try:
            return pq.ParquetFile(path, page_checksum_verification=True)
        except (OSError, pa.ArrowException) as exc:
            raise self.damaged(table, exc) from None

    def damaged(self, table: str, problem: BaseException | str) -> StoreError:
        """The error to raise when reading the table's file failed (`problem`: the exception,
        or what `storecheck` found, which names the file)."""
        if not self.data.is_dir():
            return self._removed()
        if isinstance(problem, str):
            return StoreError(f"damaged store: {problem}")
        return StoreError(f"damaged store: {self.data / table_file(table)}: {problem}")

    def _removed(self) -> StoreError:
        """The version's folder is gone: removed by hand (no ingest removes a held version)."""
        return StoreError(f"{self.path}: the store's files were removed while it was open ({self.data})")

    def _file(self, table: str) -> Path:
        if table not in TABLES:
            raise KeyError(f"no table {table!r}; tables are {', '.join(TABLES)}")
        if self._pin is None:
            raise StoreError(f"{self.path}: this Trace is closed")
        return self.data / table_file(table)

    def table(self, name: str) -> pa.Table:
        """A whole table as Arrow (read on first use; `sql` is better for slices of big ones)."""
        if name not in self._tables:
            file = self.parquet_file(name)
            try:
                self._tables[name] = file.read()
            except (OSError, pa.ArrowException) as exc:
                raise self.damaged(name, exc) from None
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
            self._db = self._untrusted_db() if self.untrusted else self._trusted_db()
        return self._db

    def _trusted_db(self) -> duckdb.DuckDBPyConnection:
        db = duckdb.connect()
        for name in TABLES:
            file = str(self.file(name)).replace("'", "''")
            db.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet('{file}')")
        return db

    def _untrusted_db(self) -> duckdb.DuckDBPyConnection:
        """Tables given to DuckDB as Arrow datasets: with external access off, DuckDB opens
        no file at all (allowing it the table files would let `COPY ... TO` overwrite them)."""
        no_extensions = {"autoinstall_known_extensions": False, "autoload_known_extensions": False}
        db = duckdb.connect(config=no_extensions)
        for name in TABLES:
            db.register(name, pyarrow.dataset.dataset(self.file(name), format="parquet"))
        db.execute("SET enable_external_access = false")
        db.execute("SET lock_configuration = true")
        return db

    def sql(self, query: str, params: list[Any] | None = None) -> pa.Table:
        """Run SQL over the tables `instructions`, `registers`, `memory`, `events`."""
        query = decimal_hex_literals(query)
        if self.untrusted:
            statements = duckdb.extract_statements(query)
            if len(statements) != 1 or statements[0].type != duckdb.StatementType.SELECT:
                raise UsageError("untrusted SQL must be one SELECT statement")
        try:
            return self.db.sql(query, params=params).to_arrow_table()
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


def sql_condition(text: str) -> str:
    """One SQL expression, checked to be nothing more, ready to follow WHERE.

    For filter options (`--where`): their text is pasted into a query, so text that closed
    the condition could append anything (`1=1; COPY ... TO ...`). DuckDB's parser checks that
    the text is a single expression; it is then put in parentheses on lines of its own (a
    trailing `--` comment cannot reach past them), and the query made is checked to be one
    statement. Hex literals are rewritten as in `Trace.sql`.
    """
    condition = decimal_hex_literals(text)
    try:
        duckdb.SQLExpression(condition)
        statements = duckdb.extract_statements(f"SELECT * FROM instructions WHERE (\n{condition}\n)")
    except duckdb.Error as exc:
        raise UsageError(f"not an SQL expression: {text!r}: {str(exc).splitlines()[0]}") from None
    if len(statements) != 1:
        raise UsageError(f"not one SQL expression: {text!r}")
    return f"(\n{condition}\n)"


def open(
    path: str | os.PathLike[str],
    *,
    untrusted: bool = False,
    format: str | None = None,
    strict: bool = False,
    options: dict[str, Any] | None = None,
    images: Sequence[str | os.PathLike[str]] = (),
    progress: ProgressHook | None = None,
) -> Trace:
    """Open a store, or a raw input (ingested once into a cached store and reused after).

    `untrusted=True`: SQL from someone else is run safely (see `Trace`)."""
    if is_store(path):
        return Trace(path, untrusted=untrusted)
    store = cached_store_path(path)
    if not store_is_current(store, [path]):
        ingest([path], store, format=format, strict=strict, options=options, images=images, progress=progress)
    return Trace(store, untrusted=untrusted)
