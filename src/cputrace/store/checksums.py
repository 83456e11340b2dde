"""Checksums of a store's table files: written at commit, checked on open and by `verify`.

- The manifest records each table file's size, the XXH3-128 hash of its bytes and that of its
  Parquet footer (the metadata: schema, row group offsets and the statistics queries use to
  skip data). Opening a store checks sizes and footers: a few small reads.
- A table file is hashed whole before it is first read (`Trace.file`, once per file and open
  store: a version's files never change), and `cputrace verify` hashes them all. Hashing
  runs at several GB/s, a fraction of what reading the file costs.
- Every Parquet data page also carries a CRC-32 (`write_page_checksum`), checked by Arrow as
  it reads pages (`Trace.parquet_file`) and by other Parquet tools that check them. Page CRCs
  alone are not enough: they leave out the page headers, and DuckDB does not check them.

A file is hashed from its bytes on disk after it is written, never from what was meant to be
written, so a write that went wrong is caught too.
"""

from __future__ import annotations

import os
import struct
import threading
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import xxhash

from ..errors import StoreError
from .manifest import data_dir, load_manifest, recorded_files, table_files

_PARQUET_MAGIC = b"PAR1"
_TAIL = 8  # footer length (uint32, little-endian) and the magic


def file_xxh3_128(path: str | os.PathLike[str], stop: threading.Event | None = None) -> str | None:
    """XXH3-128 of a file's bytes, read in large blocks (faster than the disk); None if `stop`
    is set before the end (a job that needs it no more)."""
    digest = xxhash.xxh3_128()
    block = bytearray(1 << 22)
    view = memoryview(block)
    with open(path, "rb", buffering=0) as f:
        while n := f.readinto(block):
            if stop is not None and stop.is_set():
                return None
            digest.update(view[:n])
    return digest.hexdigest()


def footer_xxh3_128(path: str | os.PathLike[str]) -> str | None:
    """XXH3-128 of a Parquet file's footer (None if the file does not end like Parquet)."""
    with open(path, "rb") as f:
        size = f.seek(0, os.SEEK_END)
        if size < 2 * _TAIL:
            return None
        f.seek(size - _TAIL)
        tail = f.read(_TAIL)
        (length,) = struct.unpack("<I", tail[:4])
        if tail[4:] != _PARQUET_MAGIC or length > size - _TAIL - len(_PARQUET_MAGIC):
            return None
        f.seek(size - _TAIL - length)
        return xxhash.xxh3_128(f.read(length) + tail).hexdigest()


def describe(path: Path) -> dict[str, Any]:
    """What the manifest records of a table file just written."""
    return {
        "size": path.stat().st_size,
        "xxh3_128": file_xxh3_128(path),
        "footer_xxh3_128": footer_xxh3_128(path),
    }


def file_problem(data: Path, manifest: dict[str, Any], name: str, *, whole: bool) -> str | None:
    """What is wrong with the table file `name` (a path in the version folder, as
    `manifest.table_files` gives it), as `FILE: what` (None if nothing is): missing, another
    size, another footer, and with `whole`, other bytes anywhere."""
    path = data / name
    record = recorded_files(manifest).get(name)
    try:
        size = path.stat().st_size
        if record is None:
            return None
        if size != record["size"]:
            return f"{path}: {size:,} bytes, the manifest says {record['size']:,}"
        if footer_xxh3_128(path) != record["footer_xxh3_128"]:
            return f"{path}: its Parquet footer differs from the one written (checksum mismatch)"
        if whole and file_xxh3_128(path) != record["xxh3_128"]:
            return f"{path}: its content differs from what was written (checksum mismatch)"
    except FileNotFoundError:
        return f"{path}: missing"
    except OSError as exc:
        return f"{path}: unreadable: {exc.strerror}"
    return None


def check_on_opening(data: Path, manifest: dict[str, Any]) -> None:
    """StoreError for the first table file missing, or of another size or footer than the
    manifest records, or a table of another row count than the manifest's: the checks cheap
    enough for every opening of a store."""
    for table, files in table_files(manifest).items():
        for name in files:
            problem = file_problem(data, manifest, name, whole=False)
            if problem is not None:
                raise StoreError(f"damaged store: {problem}")
        problem = count_problem(data, manifest, table)
        if problem is not None:
            raise StoreError(f"damaged store: {problem}")


def count_problem(data: Path, manifest: dict[str, Any], table: str) -> str | None:
    """Another row count in the table's Parquet footers than the manifest's: the footers'
    checksums do not cover the manifest itself, whose counts commands trust (the state index
    is sized by them). Reads the footers only."""
    rows = 0
    path = data
    try:
        for name in table_files(manifest)[table]:
            path = data / name
            rows += pq.read_metadata(path).num_rows
    except (OSError, pa.ArrowException) as exc:
        return f"{path}: {exc}"
    return _rows_problem(path, rows, manifest["counts"][table])


def _rows_problem(path: Path, rows: int, expected: int) -> str | None:
    return f"{path}: {rows:,} rows, the manifest says {expected:,}" if rows != expected else None


def read_manifest(store: str | os.PathLike[str]) -> dict[str, Any]:
    """The manifest of a store, refusing stores this code cannot read correctly: another
    model version, a damaged manifest, or a table file missing or not of its recorded size
    or footer."""
    manifest = load_manifest(store)
    check_on_opening(data_dir(store, manifest), manifest)
    return manifest


def decode_problem(data: Path, manifest: dict[str, Any], table: str) -> str | None:
    """What reading every page of a table's files finds wrong (a store written without hashes):
    undecodable pages, failed page CRCs (where written), or another row count than the
    manifest's. Memory stays bounded: the files are read a row group at a time."""
    rows = 0
    path = data
    try:
        for name in table_files(manifest)[table]:
            path = data / name
            file = pq.ParquetFile(path, page_checksum_verification=True)
            for group in range(file.metadata.num_row_groups):
                rows += file.read_row_group(group).num_rows
    except (OSError, pa.ArrowException) as exc:
        return f"{path}: {exc}"
    return _rows_problem(path, rows, manifest["counts"][table])


def store_problems(data: Path, manifest: dict[str, Any]) -> list[str]:
    """Everything `verify` finds wrong with the table files, one `FILE: what` each."""
    problems = []
    hashed = bool(recorded_files(manifest))
    for table, files in table_files(manifest).items():
        found = [problem for name in files if (problem := file_problem(data, manifest, name, whole=hashed))]
        if not found:
            check = decode_problem if not hashed else count_problem
            found = [problem] if (problem := check(data, manifest, table)) else []
        problems += found
    return problems
