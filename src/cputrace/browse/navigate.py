"""Moves through a trace: the next or previous visit of a pc, exception or trace gap, or
instruction meeting an SQL condition.

Visits and marks are lookups in the browse index. A search runs the condition in DuckDB over
the store's `instructions`, in a connection that can read the four tables and nothing else
(store/sql.py's untrusted mode: the condition is someone's typing, and under `--serve`
someone else's), over windows of seqs growing from the cursor, so a near match is found
without reading the whole trace.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import BrowseError
from ..model import TABLES
from ..store.sql import check_untrusted, sql_condition, untrusted_connection
from ..store.trace import Trace
from .index import MARK_KINDS, BrowseIndex

if TYPE_CHECKING:
    import duckdb

_FIRST_WINDOW = 1 << 14
"""Seqs the first window of a search covers; each next one is eight times as long."""


class Navigator:
    """Next and previous visits, marks and search matches on one core."""

    def __init__(self, trace: Trace, index: BrowseIndex) -> None:
        self.trace = trace
        self.index = index
        self._db: duckdb.DuckDBPyConnection | None = None

    def visit(self, cpu: int, pc: int, seq: int, forward: bool) -> int | None:
        """The seq of core `cpu`'s next (or previous) instruction at `pc` after (before) `seq`."""
        visits = self.index.visits
        row = visits.upper_bound((cpu, pc, seq)) if forward else visits.lower_bound((cpu, pc, seq)) - 1
        if not 0 <= row < visits.num_rows:
            return None
        found_cpu, found_pc, found_seq = visits.key_of(row)
        return found_seq if (found_cpu, found_pc) == (cpu, pc) else None

    def mark(
        self, cpu: int, seq: int, forward: bool, kinds: tuple[str, ...] = MARK_KINDS
    ) -> tuple[int, str] | None:
        """(seq, kind) of core `cpu`'s next (or previous) event of one of `kinds` (exception,
        trace_gap) after (before) instruction `seq`."""
        unknown = set(kinds) - set(MARK_KINDS)
        if unknown:
            raise BrowseError(f"cannot jump to {', '.join(sorted(unknown))}: only to {', '.join(MARK_KINDS)}")
        marks = self.index.marks
        row = marks.upper_bound((cpu, seq)) if forward else marks.lower_bound((cpu, seq)) - 1
        step = 1 if forward else -1
        while 0 <= row < marks.num_rows:
            found = marks.row(row)
            if found["cpu"] != cpu:
                return None
            if found["kind"] in kinds:
                return int(found["seq"]), found["kind"]
            row += step
        return None

    def search(self, condition: str, cpu: int, seq: int, forward: bool, first: int, last: int) -> int | None:
        """The seq of core `cpu`'s next (or previous) instruction after (before) `seq` for which
        `condition`, an SQL expression over the columns of `instructions`, holds; `first` and
        `last` bound the core's seqs. UsageError (a CputraceError) for text that is not one
        expression, BrowseError for one DuckDB cannot run."""
        checked = sql_condition(condition)
        width = _FIRST_WINDOW
        low, high = (seq + 1, seq + width) if forward else (seq - width, seq - 1)
        while (low <= last) if forward else (high >= first):
            query = (
                f"SELECT {'min' if forward else 'max'}(seq) FROM instructions "
                f"WHERE cpu = {int(cpu)} AND seq BETWEEN {int(low)} AND {int(high)} AND {checked}"
            )
            found = self._run(query, condition)
            if found is not None:
                return found
            width *= 8
            low, high = (high + 1, high + width) if forward else (low - width, low - 1)
        return None

    def _run(self, query: str, condition: str) -> int | None:
        import duckdb  # here: browsing without a search does without it (the store permitting)

        check_untrusted(query)
        if self._db is None:
            self._db = untrusted_connection({name: self.trace.file(name) for name in TABLES})
        try:
            row = self._db.execute(query).fetchone()
        except duckdb.Error as exc:
            raise BrowseError(f"search {condition!r}: {str(exc).splitlines()[0]}") from None
        return None if row is None or row[0] is None else int(row[0])

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
