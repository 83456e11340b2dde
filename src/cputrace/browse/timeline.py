"""The timeline strip: instructions per (stretch of the trace, band of code addresses), per core.

What `profile --plot`'s heat map shows (analysis/profile.py's HeatMap, plot.py), made small
enough to keep: the trace's time (or seq, when some instruction has no time) in `BINS`
stretches, its distinct pcs in `BANDS` bands of equal counts in address order. The browse
index holds the sums (index.py builds them with `timeline_query`); a strip of any smaller
size is summed from them, and named by the image's functions where a band starts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

BINS = 1024
BANDS = 64


@dataclass(frozen=True, slots=True)
class Axis:
    """What the strip's columns cut: "time" or "seq", over [lo, hi)."""

    name: str
    lo: int
    hi: int

    def bin_of(self, value: int) -> int:
        span = max(self.hi - self.lo, 1)
        return int(min(max((value - self.lo) * BINS // span, 0), BINS - 1))

    def start_of(self, bin: int) -> int:
        """The first time (or seq) of stretch `bin`."""
        span = max(self.hi - self.lo, 1)
        return self.lo + -(-bin * span // BINS)


@dataclass(frozen=True, slots=True)
class Band:
    """Code addresses [lo, hi] (the pcs executed in it); `name` the function at lo, with an image."""

    lo: int
    hi: int
    name: str | None


@dataclass(frozen=True, slots=True)
class Strip:
    """Instructions of one core per (band, column): `counts[row, column]`, rows from low
    addresses up; column c covers stretches [c * BINS // columns, (c + 1) * BINS // columns)."""

    cpu: int
    axis: Axis
    bands: tuple[Band, ...]
    counts: np.ndarray  # int64, (len(bands), columns)

    @property
    def columns(self) -> int:
        return self.counts.shape[1]

    def column_of(self, value: int) -> int:
        """The column holding a time (or seq)."""
        return self.axis.bin_of(value) * self.columns // BINS

    def start_of(self, column: int) -> int:
        """The first time (or seq) of a column."""
        return self.axis.start_of(-(-column * BINS // self.columns))


def axis_query() -> str:
    """(axis, lo, hi): time when every instruction has one, else seq. Reads `instructions`."""
    return """
        SELECT CASE WHEN count(time) = count(*) THEN 'time' ELSE 'seq' END,
               CASE WHEN count(time) = count(*) THEN min(time) ELSE min(seq) END,
               CASE WHEN count(time) = count(*) THEN max(time) ELSE max(seq) END + 1
        FROM instructions
    """


def band_query() -> str:
    """(band, lo, hi) of the distinct pcs cut into at most BANDS bands of equal counts, the
    bands numbered from 0 in address order. Reads `instructions`."""
    return f"""
        SELECT (dense_rank() OVER (ORDER BY cut) - 1)::INTEGER AS band, lo, hi FROM (
            SELECT cut, min(pc) AS lo, max(pc) AS hi FROM (
                SELECT pc, (row_number() OVER (ORDER BY pc) - 1) * {BANDS} // count(*) OVER () AS cut
                FROM (SELECT DISTINCT pc FROM instructions)
            ) GROUP BY cut
        ) ORDER BY band
    """


def timeline_query(axis: Axis, bands: pa.Table) -> tuple[str, dict]:
    """(cpu, bin, band, count) for every core, as a query and its parameters; `bands` is
    registered as the view `bands` by the caller."""
    column = "time" if axis.name == "time" else "seq"
    span = max(axis.hi - axis.lo, 1)
    query = f"""
        SELECT i.cpu, least((i.{column} - $lo) * {BINS} // $span, {BINS - 1})::INTEGER AS bin,
               b.band::INTEGER AS band, count(*) AS count
        FROM instructions i ASOF JOIN bands b ON i.pc >= b.lo
        GROUP BY ALL ORDER BY ALL
    """
    return query, {"lo": axis.lo, "span": span}


def strip_of(cpu: int, axis: Axis, bands: list[Band], cells: pa.Table, columns: int, rows: int) -> Strip:
    """Core `cpu`'s strip of `columns` x `rows` (at most BINS x the bands) from the cells."""
    columns = max(1, min(columns, BINS))
    rows = max(1, min(rows, len(bands) or 1))
    counts = np.zeros((rows, columns), np.int64)
    mine = cells.column("cpu").to_numpy() == cpu  # NumPy: pyarrow.compute is not imported to browse
    bins = cells.column("bin").to_numpy()[mine].astype(np.int64)
    band = cells.column("band").to_numpy()[mine].astype(np.int64)
    count = cells.column("count").to_numpy()[mine]
    np.add.at(counts, (band * rows // max(len(bands), 1), bins * columns // BINS), count)
    merged = []
    for row in range(rows):
        members = [b for i, b in enumerate(bands) if i * rows // len(bands) == row]
        merged.append(Band(members[0].lo, members[-1].hi, members[0].name) if members else Band(0, 0, None))
    return Strip(cpu, axis, tuple(merged), counts)
