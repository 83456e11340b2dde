"""A seq range of a trace: what `--since`/`--until` (or an export's range) leaves to read.

Readers skip the row groups outside a window using the Parquet statistics of `seq`
(batches.py), and cut the rows of the groups it meets at its ends.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .trace import Trace


@dataclass(frozen=True, slots=True)
class Window:
    """The instructions with `start <= seq < stop` (None: from the first / to the last)."""

    start: int | None = None
    stop: int | None = None

    def sql(self, column: str = "seq") -> str:
        """The window as an SQL condition (TRUE for the whole trace)."""
        parts = []
        if self.start is not None:
            parts.append(f"{column} >= {int(self.start)}")
        if self.stop is not None:
            parts.append(f"{column} < {int(self.stop)}")
        return " AND ".join(parts) or "TRUE"

    def bounds(self, seq: np.ndarray) -> tuple[int, int]:
        """The index range of sorted `seq` inside the window."""
        lo = 0 if self.start is None else int(np.searchsorted(seq, self.start, side="left"))
        hi = len(seq) if self.stop is None else int(np.searchsorted(seq, self.stop, side="left"))
        return lo, hi


WHOLE_TRACE = Window()


def time_window(trace: Trace, since: int | None, until: int | None) -> Window:
    """The seq window of the instructions with `since <= time <= until`."""
    if since is None and until is None:
        return Window()
    conditions = [f"time >= {int(since)}" if since is not None else "TRUE"]
    conditions.append(f"time <= {int(until)}" if until is not None else "TRUE")
    row = trace.sql(
        f"SELECT min(seq) AS lo, max(seq) AS hi FROM instructions WHERE {' AND '.join(conditions)}"
    )
    lo, hi = row.column("lo")[0].as_py(), row.column("hi")[0].as_py()
    if lo is None:
        return Window(0, 0)
    return Window(lo, hi + 1)
