"""cputrace: processor instruction traces from many sources, as one queryable history.

    import cputrace
    t = cputrace.open("run.tarmac")      # ingested once, reused while the input is unchanged
    t.instructions                       # pyarrow.Table (so .to_pandas(), polars.from_arrow)
    t.sql("SELECT reg, count(*) FROM registers GROUP BY reg")
"""

from .errors import CputraceError, StoreError, TraceFormatError
from .ingest import ingest
from .trace import Trace, open

__version__ = "0.1.0"

__all__ = ["CputraceError", "StoreError", "Trace", "TraceFormatError", "ingest", "open"]
