"""A table of a store read in seq order in bounded record batches, and another table's rows
kept in step with them.

Analyses and exports that go through a whole trace never hold it whole: they read
`CHUNK_ROWS` rows at a time, restricted to a `Window`, from the version of the store their
`Trace` holds, with each page's CRC checked; rows out of seq order are refused.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import StoreError
from .trace import Trace
from .window import WHOLE_TRACE, Window

CHUNK_ROWS = 1 << 19
"""Instructions per chunk: large enough that per-chunk overhead vanishes, small enough to bound memory."""


def _row_groups(file: pq.ParquetFile, window: Window) -> list[int]:
    """Row groups whose seq range meets the window (all of them when statistics are missing)."""
    seq_column = file.schema_arrow.get_field_index("seq")
    groups = []
    for index in range(file.metadata.num_row_groups):
        stats = file.metadata.row_group(index).column(seq_column).statistics
        if stats is not None and stats.has_min_max:
            if window.start is not None and stats.max < window.start:
                continue
            if window.stop is not None and stats.min >= window.stop:
                continue
        groups.append(index)
    return groups


_instructions_read: ContextVar[Callable[[int], None] | None] = ContextVar("instructions_read", default=None)


@contextlib.contextmanager
def reading_progress(hook: Callable[[int], None]) -> Iterator[None]:
    """Call `hook(rows)` for every batch of instructions `read_batches` yields inside the block,
    whichever analysis or export reads them (the command line's progress bar)."""
    token = _instructions_read.set(hook)
    try:
        yield
    finally:
        _instructions_read.reset(token)


def read_batches(
    trace: Trace, table: str, columns: Sequence[str], window: Window = WHOLE_TRACE, rows: int = CHUNK_ROWS
) -> Iterator[pa.RecordBatch]:
    """Record batches of `table` (seq order, as stored: its file, or its parts one after the
    other) restricted to the window, read from the trace's version of the store with page CRCs
    checked (a damaged file: StoreError)."""
    progress = _instructions_read.get() if table == "instructions" else None
    wanted = list(dict.fromkeys(["seq", *columns]))
    last = None
    for name, file in trace.parquet_files(table):
        batches = file.iter_batches(batch_size=rows, row_groups=_row_groups(file, window), columns=wanted)
        while True:
            try:
                batch = next(batches, None)
            except (OSError, pa.ArrowException) as exc:
                raise trace.damaged(name, exc) from None
            if batch is None:
                break
            seq = batch.column("seq").to_numpy()
            if len(seq) and ((last is not None and seq[0] < last) or np.any(seq[1:] < seq[:-1])):
                raise StoreError(f"{trace.path}: {table} is not in seq order; re-ingest the input")
            if len(seq):
                last = seq[-1]
            lo, hi = window.bounds(seq)
            if lo < hi:
                if progress is not None:
                    progress(hi - lo)
                yield batch.slice(lo, hi - lo)
            if window.stop is not None and len(seq) and seq[-1] >= window.stop:
                return


class SeqFollower:
    """Rows of another table, handed out up to a seq as the instruction chunks advance."""

    def __init__(self, batches: Iterator[pa.RecordBatch]) -> None:
        self._batches = batches
        self._pending: list[pa.RecordBatch] = []
        self._done = False

    def upto(self, last_seq: int) -> pa.Table | None:
        """Every row not yet handed out with seq <= last_seq (None if there are none)."""
        taken: list[pa.RecordBatch] = []
        while True:
            if not self._pending:
                if self._done:
                    break
                batch = next(self._batches, None)
                if batch is None:
                    self._done = True
                    break
                self._pending.append(batch)
            batch = self._pending[0]
            seq = batch.column("seq").to_numpy()
            cut = int(np.searchsorted(seq, last_seq, side="right"))
            if cut < len(seq):
                taken.append(batch.slice(0, cut))
                self._pending[0] = batch.slice(cut)
                break
            taken.append(batch)
            self._pending.pop(0)
        taken = [b for b in taken if b.num_rows]
        return pa.Table.from_batches(taken) if taken else None
