"""`cputrace.open`: a store, or a raw input ingested once into a store and reused after."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .cachedir import cache_dir
from .store.folder import STORE_SUFFIX, is_store
from .store.trace import Trace

if TYPE_CHECKING:
    from .ingest import ProgressHook

# The ingest module (and pyarrow.compute, which it imports) is imported only for a raw input:
# opening a store, the common case, does without it.


def cached_store_path(input_path: str | os.PathLike[str]) -> Path:
    """Where the store of a raw input lives: next to it if writable, else in the cache dir."""
    from .ingest import default_store_path

    beside = default_store_path([input_path])
    if os.access(beside.parent, os.W_OK):
        return beside
    digest = hashlib.sha256(str(Path(input_path).resolve()).encode()).hexdigest()[:16]
    return cache_dir() / f"{Path(input_path).name}-{digest}{STORE_SUFFIX}"


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
    from .ingest import ingest, store_is_current

    store = cached_store_path(path)
    if not store_is_current(store, [path]):
        ingest([path], store, format=format, strict=strict, options=options, images=images, progress=progress)
    return Trace(store, untrusted=untrusted)
