"""cputrace: processor instruction traces from many sources, as one queryable history.

    import cputrace
    t = cputrace.open("run.tarmac")      # ingested once, reused while the input is unchanged
    t.instructions                       # pyarrow.Table (so .to_pandas(), polars.from_arrow)
    t.sql("SELECT reg, count(*) FROM registers GROUP BY reg")

Importing the package, or any of its modules, loads only what that module needs: `ingest`,
`open` and `Trace` import PyArrow, Parquet and DuckDB on first use.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

from .compiledcache import use_own_cache
from .errors import CputraceError, StoreError, TraceFormatError

if TYPE_CHECKING:
    from .ingest import ingest
    from .opening import open
    from .store.trace import Trace

__version__ = "0.1.0"

use_own_cache()  # before any module of the package compiles or loads compiled code

_LAZY = {"ingest": "ingest", "open": "opening", "Trace": "store.trace"}
"""Top-level names imported on first use, by the module that defines them."""


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    globals()[name] = value
    return value


class _Package(types.ModuleType):
    """The package keeps `cputrace.ingest` the function: importing the submodule of that name
    would otherwise replace it with the module (which stays `sys.modules["cputrace.ingest"]`)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if not (name in _LAZY and isinstance(value, types.ModuleType)):
            super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package

__all__ = ["CputraceError", "StoreError", "Trace", "TraceFormatError", "ingest", "open"]
