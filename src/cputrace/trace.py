"""The Python face of a store: `cputrace.open(path)` -> tables as Arrow, and SQL over them."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from .ingest import ProgressHook, default_store_path, ingest, store_is_current
from .model import TABLES
from .store import is_store, read_manifest, table_path

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
    """An ingested execution history: four tables that join on `seq`."""

    def __init__(self, store: str | os.PathLike[str]) -> None:
        self.path = Path(store)
        self.manifest: dict[str, Any] = read_manifest(self.path)
        self._tables: dict[str, pa.Table] = {}
        self._db: duckdb.DuckDBPyConnection | None = None

    def __repr__(self) -> str:
        counts = self.manifest.get("counts", {})
        return f"<Trace {self.path} {counts.get('instructions', 0)} instructions>"

    def table(self, name: str) -> pa.Table:
        """A whole table as Arrow (read on first use; `sql` is better for slices of big ones)."""
        if name not in TABLES:
            raise KeyError(f"no table {name!r}; tables are {', '.join(TABLES)}")
        if name not in self._tables:
            self._tables[name] = pq.read_table(table_path(self.path, name))
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
        """A DuckDB connection in which the four tables are views."""
        if self._db is None:
            self._db = duckdb.connect()
            for name in TABLES:
                file = str(table_path(self.path, name)).replace("'", "''")
                self._db.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet('{file}')")
        return self._db

    def sql(self, query: str, params: list[Any] | None = None) -> pa.Table:
        """Run SQL over the tables `instructions`, `registers`, `memory`, `events`."""
        return self.db.sql(decimal_hex_literals(query), params=params).to_arrow_table()

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def __enter__(self) -> Trace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open(
    path: str | os.PathLike[str],
    *,
    format: str | None = None,
    strict: bool = False,
    options: dict[str, Any] | None = None,
    progress: ProgressHook | None = None,
) -> Trace:
    """Open a store, or a raw input (ingested once into a cached store and reused after)."""
    if is_store(path):
        return Trace(path)
    store = cached_store_path(path)
    if not store_is_current(store, [path]):
        ingest([path], store, format=format, strict=strict, options=options, progress=progress)
    return Trace(store)
