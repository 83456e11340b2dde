"""SQL over a store's tables in DuckDB, and the checks on SQL text given by someone else.

Addresses are written in hex and DuckDB's SQL has no hex literals, so every query and filter
condition has its `0x...` literals rewritten as decimal outside quotes first.

A trusted connection reads the table files by path, as views over `read_parquet` (of the
table's one file, or of its parts in order). An
untrusted one (`Trace(untrusted=True)`: SQL from a service or a browser) runs one SELECT
statement only, can read the four tables and nothing else: no file or network access
(`enable_external_access`), no extension installed or loaded, and its configuration locked
(`lock_configuration`).

DuckDB is imported when a connection or a check first needs it: a store opened for its tables
alone (the browser's first screen) does without it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import UsageError

if TYPE_CHECKING:
    import duckdb

_SQL_QUOTED = re.compile(r"('(?:[^']|'')*'|\"(?:[^\"]|\"\")*\")")
_HEX_LITERAL = re.compile(r"\b0[xX]([0-9a-fA-F]+)\b")


def decimal_hex_literals(query: str) -> str:
    """Rewrite `0x8000` as `32768` outside quotes: addresses are hex, DuckDB's SQL is not."""
    parts = _SQL_QUOTED.split(query)
    for i in range(0, len(parts), 2):
        parts[i] = _HEX_LITERAL.sub(lambda m: str(int(m.group(1), 16)), parts[i])
    return "".join(parts)


def quoted(text: str | os.PathLike[str]) -> str:
    """`text` (a file's path, say) as an SQL string literal."""
    return "'" + str(text).replace("'", "''") + "'"


def connect(config: Mapping[str, Any] | None = None) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection (with these settings) that writes nothing to the terminal. DuckDB
    draws a progress bar on standard output for any query past two seconds, even when that
    output is a pipe or a file, where it would corrupt a command's csv or json."""
    import duckdb

    db = duckdb.connect(config=dict(config or {}))
    db.execute("SET enable_progress_bar = false")
    return db


def parquet_scan(paths: Sequence[Path]) -> str:
    """SQL reading the Parquet files at `paths` one after the other, rows in file order."""
    if len(paths) == 1:
        return f"read_parquet({quoted(paths[0])})"
    return f"read_parquet([{', '.join(quoted(path) for path in paths)}])"


def create_parquet_view(db: duckdb.DuckDBPyConnection, view: str, paths: Sequence[Path]) -> None:
    """A view named `view` of the Parquet files at `paths` (a table's file, or its parts)."""
    db.execute(f"CREATE VIEW {view} AS SELECT * FROM {parquet_scan(paths)}")


def untrusted_connection(files: Mapping[str, Path | Sequence[Path]]) -> duckdb.DuckDBPyConnection:
    """A connection in which each of `files` (table name: its file, folder of parts or list of
    files) is a table and nothing else can be read. The tables are given to DuckDB as Arrow
    datasets: with external access off, DuckDB opens no file at all (allowing it the table
    files would let `COPY ... TO` overwrite them)."""
    import pyarrow.dataset  # here: opening a store for anything else need not load it

    no_extensions = {"autoinstall_known_extensions": False, "autoload_known_extensions": False}
    db = connect(no_extensions)
    for name, file in files.items():
        source = [str(path) for path in file] if isinstance(file, Sequence) else str(file)
        db.register(name, pyarrow.dataset.dataset(source, format="parquet"))
    db.execute("SET enable_external_access = false")
    db.execute("SET lock_configuration = true")
    return db


def check_untrusted(query: str) -> None:
    """UsageError unless `query` is one SELECT statement."""
    import duckdb

    statements = duckdb.extract_statements(query)
    if len(statements) != 1 or statements[0].type != duckdb.StatementType.SELECT:
        raise UsageError("untrusted SQL must be one SELECT statement")


def sql_condition(text: str) -> str:
    """One SQL expression, checked to be nothing more, ready to follow WHERE.

    For filter options (`--where`): their text is pasted into a query, so text that closed
    the condition could append anything (`1=1; COPY ... TO ...`). DuckDB's parser checks that
    the text is a single expression; it is then put in parentheses on lines of its own (a
    trailing `--` comment cannot reach past them), and the query made is checked to be one
    statement. Hex literals are rewritten as in `Trace.sql`.
    """
    import duckdb

    condition = decimal_hex_literals(text)
    try:
        duckdb.SQLExpression(condition)
        statements = duckdb.extract_statements(f"SELECT * FROM instructions WHERE (\n{condition}\n)")
    except duckdb.Error as exc:
        raise UsageError(f"not an SQL expression: {text!r}: {str(exc).splitlines()[0]}") from None
    if len(statements) != 1:
        raise UsageError(f"not one SQL expression: {text!r}")
    return f"(\n{condition}\n)"
