"""Derived indexes kept beside a store's tables, built once and found again while they are unchanged.

An index lives in `VERSION/index/NAME-KEY/`, in the folder of the store version it was built
from (folder.py): it is read with the tables of that version, and removed with them. KEY
hashes the index's version and the store's manifest and table files, so a stale index is never
read (a changed index format, or a store of model version 1, whose tables are replaced in
place). A directory is built under a temporary name and renamed into place when complete, so
a crash leaves nothing that looks finished; the sizes of its files are recorded in it
(`SIZES`), and an index whose files are not those sizes (truncated, emptied, removed by hand
or by a failing disk) is built again rather than read. A file damaged in place, its size kept,
is found when it is read (`reading_index`): the user is told which and to remove the folder,
rather than every file being hashed on every open. A store in a read-only place keeps its
indexes in the cache directory instead.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import tokenize
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import xxhash

from ..cachedir import cache_dir
from ..errors import StoreError
from ..model import TABLES
from .trace import Trace


def store_key(trace: Trace, version: int) -> str:
    """A short hash of the trace's version of the store as its files show it, and of the
    index version."""
    digest = xxhash.xxh3_64()
    digest.update(f"v{version}".encode())
    digest.update(json.dumps(trace.manifest, sort_keys=True).encode())
    for table in TABLES:
        for path in trace.files(table):
            st = os.stat(path)
            digest.update(f"{path.relative_to(trace.data)}:{st.st_size}:{st.st_mtime_ns}".encode())
    return digest.hexdigest()


def _index_root(trace: Trace) -> Path:
    root = trace.data / "index"
    if os.access(trace.data, os.W_OK):
        return root
    digest = hashlib.sha256(str(trace.path.resolve()).encode()).hexdigest()[:16]
    return cache_dir() / "index" / f"{trace.path.name}-{digest}"


def index_dir(trace: Trace, name: str, version: int, build: Callable[[Path], None]) -> Path:
    """The directory of index `name` for this store, calling `build(tmpdir)` if it is missing.

    Other versions of the same index are removed once the new one is in place.
    """
    root = _index_root(trace)
    final = root / f"{name}-{store_key(trace, version)}"
    if final.is_dir():
        if _whole(final):
            return final
        _discard(final, root / f".{name}.damaged-{uuid.uuid4().hex[:8]}")
    root.mkdir(parents=True, exist_ok=True)
    tmp = root / f".{name}.tmp-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        build(tmp)
        _record_sizes(tmp)
        try:
            os.rename(tmp, final)
        except OSError:
            if not final.is_dir():  # not just another process that finished first
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for old in root.glob(f"{name}-*"):
        if old != final:
            with contextlib.suppress(OSError):
                shutil.rmtree(old)
    return final


SIZES = ".sizes.json"
"""The file of an index folder that records the size of each of its other files."""


def _file_sizes(directory: Path) -> dict[str, int]:
    return {
        str(path.relative_to(directory)): path.stat().st_size
        for path in directory.rglob("*") if path.is_file() and path.name != SIZES
    }  # fmt: skip


def _record_sizes(directory: Path) -> None:
    (directory / SIZES).write_text(json.dumps(_file_sizes(directory), sort_keys=True))


def _whole(directory: Path) -> bool:
    """Whether an index folder holds the files it was built with, of their sizes (a few stats)."""
    try:
        recorded = json.loads((directory / SIZES).read_bytes())
        return isinstance(recorded, dict) and recorded == _file_sizes(directory)
    except (OSError, ValueError):
        return False


def _discard(directory: Path, aside: Path) -> None:
    """Remove a damaged index folder: renamed aside first, so that no reader takes it for whole
    while it goes (one that has opened its files keeps reading them)."""
    try:
        os.rename(directory, aside)
    except FileNotFoundError:  # another process discarded it first
        return
    shutil.rmtree(aside, ignore_errors=True)


def damaged_index(file: Path, problem: str) -> StoreError:
    """A file of an index folder that cannot be read as written: named, with what to do."""
    folder = file if file.is_dir() else file.parent
    return StoreError(f"damaged index: {file}: {problem}; remove {folder} and it is built again")


@contextlib.contextmanager
def reading_index_file(file: Path) -> Iterator[None]:
    """Errors reading `file` of an index folder as a damaged index naming it: its size was
    right (`_whole`), its bytes not (a meta.json of other bytes, a NumPy header, Arrow or
    Parquet data overwritten in place). Kept to the lines that read the file and the fields
    taken from it, so that no error of ours is taken for damage."""
    try:
        yield
    except (OSError, ValueError, KeyError, TypeError, SyntaxError, tokenize.TokenError) as exc:
        problem = f"{type(exc).__name__}: {exc}".splitlines()[0]
        raise damaged_index(file, problem) from None


@contextlib.contextmanager
def reading_index(directory: Path) -> Iterator[None]:
    """DuckDB's errors while queries of ours read the index in `directory` as a damaged index.

    The queries are ours and the store's tables are checked when the store is opened, so such an
    error is an index file whose bytes are not those written (its size kept, which `_whole`
    cannot see): the file DuckDB names, else the first of the folder's Parquet files that does
    not read whole, else the folder. A user's interrupt stays one.
    """
    import duckdb

    try:
        yield
    except duckdb.InterruptException:
        raise
    except duckdb.Error as exc:
        problem = str(exc).splitlines()[0]
        named = re.search(r'"([^"]+)"', problem)
        if named is not None and Path(named[1]).parent == directory:
            raise damaged_index(Path(named[1]), problem) from None
        unreadable = (file for file in sorted(directory.glob("*.parquet")) if not _reads_whole(file))
        raise damaged_index(next(unreadable, directory), problem) from None


def _reads_whole(file: Path) -> bool:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        with pq.ParquetFile(file) as parquet:
            parquet.read()
    except (pa.ArrowException, OSError):
        return False
    return True
