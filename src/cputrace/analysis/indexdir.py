"""Derived indexes kept beside a store, built once and found again while the store is unchanged.

An index lives in `STORE/index/NAME-KEY/`, where KEY hashes the index's version and the
store's manifest and table files: re-ingesting the store (or changing the index format)
gives a new key, so a stale index is never read. A directory is built under a temporary
name and renamed into place when complete, so a crash leaves nothing that looks finished.
A store in a read-only place keeps its indexes in the cache directory instead.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path

import xxhash

from ..model import TABLES
from ..store import MANIFEST, table_path
from ..trace import Trace, cache_dir


def store_key(trace: Trace, version: int) -> str:
    """A short hash of the store's content as its files show it, and of the index version."""
    digest = xxhash.xxh3_64()
    digest.update(f"v{version}".encode())
    digest.update((trace.path / MANIFEST).read_bytes())
    for table in TABLES:
        st = os.stat(table_path(trace.path, table))
        digest.update(f"{table}:{st.st_size}:{st.st_mtime_ns}".encode())
    return digest.hexdigest()


def _index_root(trace: Trace) -> Path:
    root = trace.path / "index"
    if os.access(trace.path, os.W_OK):
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
        return final
    root.mkdir(parents=True, exist_ok=True)
    tmp = root / f".{name}.tmp-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        build(tmp)
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
