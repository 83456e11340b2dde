"""Registers at a point, from the browse index: analysis/state.py's answer, by lookups.

The index holds, every `checkpoint` seqs, each core's last write per (register, byte mask)
before it; the registers after instruction `seq` are the snapshot at or before it and the
core's writes since, replayed as state.py's `merge_registers` does.
"""

from __future__ import annotations

import pyarrow as pa

from ..analysis.state import RegisterValue, merge_registers
from .index import BrowseIndex

_COLUMNS = ("reg", "mask", "size", "value", "wide", "seq")


def registers_at(index: BrowseIndex, cpu: int, seq: int) -> list[RegisterValue]:
    """Every register core `cpu` has written up to and including instruction `seq` (>= 0)."""
    checkpoint = (seq + 1) // index.checkpoint
    parts = [index.tables["registers"].between((cpu, checkpoint * index.checkpoint), (cpu, seq))]
    if checkpoint >= 1:
        parts.insert(0, index.snapshots.between((cpu, checkpoint), (cpu, checkpoint)))
    rows = _last_per_register(pa.concat_tables([part.select(_COLUMNS) for part in parts]))
    return merge_registers([(cpu, *row) for row in rows], index.widths)


def _last_per_register(rows: pa.Table) -> list[tuple]:
    """The last row (in table order) of each (register, byte mask), as tuples of `_COLUMNS`, in
    table order. In Python: a `group_by` would import pyarrow's query engine (acero and
    pyarrow.compute, a tenth of a second of the first screen) for a few hundred rows."""
    keys = zip(rows.column("reg").to_pylist(), rows.column("mask").to_pylist(), strict=True)
    last = sorted({key: row for row, key in enumerate(keys)}.values())
    columns = [rows.column(name) for name in _COLUMNS]
    return [tuple(column[row].as_py() for column in columns) for row in last]
