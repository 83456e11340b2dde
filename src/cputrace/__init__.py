"""cputrace: processor instruction traces from many sources, as one queryable history.

    import cputrace
    t = cputrace.open("run.tarmac")      # ingested once, reused while the input is unchanged
    t.instructions                       # pyarrow.Table (so .to_pandas(), polars.from_arrow)
    t.sql("SELECT reg, count(*) FROM registers GROUP BY reg")
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import CputraceError, StoreError, TraceFormatError
from .ingest import ingest  # eager: the submodule of the same name would shadow a lazy attribute

if TYPE_CHECKING:
    from .trace import Trace, open

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    """`open` and `Trace` import DuckDB on first use: ingesting does not need it."""
    if name not in ("open", "Trace"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from . import trace

    return getattr(trace, name)


__all__ = ["CputraceError", "StoreError", "Trace", "TraceFormatError", "ingest", "open"]
