"""cputrace: processor instruction traces from many sources, as one queryable history.

    import cputrace
    t = cputrace.open("run.tarmac")      # ingested once, reused while the input is unchanged
    t.instructions                       # pyarrow.Table (so .to_pandas(), polars.from_arrow)
    t.sql("SELECT reg, count(*) FROM registers GROUP BY reg")
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .errors import CputraceError, StoreError, TraceFormatError
from .ingest import ingest  # eager: the submodule of the same name would shadow a lazy attribute

if TYPE_CHECKING:
    from .opening import open
    from .store.trace import Trace

__version__ = "0.1.0"


_LAZY = {"open": ".opening", "Trace": ".store.trace"}


def __getattr__(name: str) -> Any:
    """`open` and `Trace` import DuckDB on first use: ingesting does not need it."""
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_LAZY[name], __name__), name)


__all__ = ["CputraceError", "StoreError", "Trace", "TraceFormatError", "ingest", "open"]
