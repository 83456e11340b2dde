"""Exports of rows: the trace as Tarmac text, and any table (model or analysis) as CSV or Parquet.

Model tables are copied by DuckDB straight from the store's Parquet files to the output, so
memory stays flat whatever the trace size; so are the frames, a row per call, streamed from
their sorted spill. The other analysis tables (functions, addresses, lines, mix, blocks) are
computed first; they are as large as the program, not the trace.
"""

from __future__ import annotations

import contextlib
import json
import os
import re

import duckdb
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from ..analysis.calls.tables import FRAME_SCHEMA
from ..analysis.profile import TABLES as PROFILE_TABLES
from ..analysis.profile import profile
from ..errors import CputraceError
from ..model import SCHEMAS, TABLES
from ..store.batches import read_batches
from ..store.sql import quoted
from .calldata import call_frames
from .registry import ExportRequest
from .tarmac import INSTRUCTION_COLUMNS, TarmacWriter

ANALYSIS_TABLES = ("frames", *PROFILE_TABLES)
_ZSTD = {"compression": "zstd"}
ALL_TABLES = (*TABLES, *ANALYSIS_TABLES)


def write_tarmac_file(request: ExportRequest) -> None:
    """The window as a Fast-Models-style Tarmac trace, written batch by batch: every row in it,
    those that belong to no instruction too (a bus trace's accesses)."""
    with open(request.output, "w", encoding="utf-8", newline="\n") as out:
        writer = TarmacWriter(request.trace, out, request.window)
        for batch in read_batches(request.trace, "instructions", INSTRUCTION_COLUMNS, request.window):
            writer.write(pa.Table.from_batches([batch]))
        writer.finish()


def _table_name(request: ExportRequest) -> str:
    if request.table is None:
        raise CputraceError(f"name the table to export with --table ({', '.join(ALL_TABLES)})")
    if request.table not in ALL_TABLES:
        raise CputraceError(f"no table {request.table!r}; tables are {', '.join(ALL_TABLES)}")
    return request.table


def _analysis_table(request: ExportRequest, name: str) -> pa.Table:
    return profile(request.trace, request.window, request.image, request.method).table(name)


def _copy_model_table(request: ExportRequest, name: str, options: str) -> None:
    """DuckDB COPY from the store's Parquet file: streamed, in seq order."""
    columns = []
    for field in SCHEMAS[name]:
        column = f'"{field.name}"'
        if pa.types.is_binary(field.type) and "csv" in options:
            columns.append(f"lower(hex({column})) AS {column}")
        else:
            columns.append(column)
    source = request.trace.parquet_scan(name)
    query = f"SELECT {', '.join(columns)} FROM {source} WHERE {request.window.sql()}"
    try:
        request.trace.db.execute(f"COPY ({query}) TO {quoted(request.output)} ({options})")
    except duckdb.IOException as exc:
        raise _copy_error(exc, request) from None


def _copy_error(exc: duckdb.IOException, request: ExportRequest) -> Exception:
    """DuckDB's I/O error as an OSError naming the target when it carries an errno (as a JSON
    detail); otherwise its text, with the file written (perhaps a temporary one) named as the target."""
    detail = re.search(r"\{.*\}", str(exc))
    with contextlib.suppress(ValueError, TypeError, KeyError):
        number = int(json.loads(detail.group())["errno"]) if detail else None
        if number:
            return OSError(number, os.strerror(number), str(request.destination))
    return CputraceError(str(exc).replace(str(request.output), str(request.destination)))


def write_csv(request: ExportRequest) -> None:
    name = _table_name(request)
    if name in TABLES:
        _copy_model_table(request, name, "FORMAT csv, HEADER true")
        return
    if name == "frames":
        with call_frames(request) as frames, pacsv.CSVWriter(request.output, FRAME_SCHEMA) as writer:
            for batch in frames.rows():
                writer.write_batch(batch)
        return
    pacsv.write_csv(_analysis_table(request, name), request.output)


def write_parquet(request: ExportRequest) -> None:
    name = _table_name(request)
    if name in TABLES:
        _copy_model_table(request, name, "FORMAT parquet, COMPRESSION zstd")
        return
    if name == "frames":
        with call_frames(request) as frames, pq.ParquetWriter(request.output, FRAME_SCHEMA, **_ZSTD) as out:
            for batch in frames.rows():
                out.write_batch(batch)
        return
    pq.write_table(_analysis_table(request, name), request.output, **_ZSTD)
