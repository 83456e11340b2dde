"""Registers at a point, from the browse index: analysis/state.py's answer, by lookups.

The index holds, every `checkpoint` seqs, each core's last write per (register, byte mask)
before it; the registers after instruction `seq` are the snapshot at or before it and the
core's writes since, replayed as state.py's `merge_registers` does.
"""

from __future__ import annotations

import numpy as np
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
    last = _last_per_register(pa.concat_tables([part.select(_COLUMNS) for part in parts]))
    rows = [(cpu, r["reg"], r["mask"], r["size"], r["value"], r["wide"], r["seq"]) for r in last.to_pylist()]
    return merge_registers(rows, index.widths)


def _last_per_register(rows: pa.Table) -> pa.Table:
    """The last row (in table order) of each (register, byte mask)."""
    numbered = rows.append_column("row", pa.array(np.arange(rows.num_rows)))
    last = numbered.group_by(["reg", "mask"], use_threads=False).aggregate([("row", "max")])
    return rows.take(np.sort(last.column("row_max").to_numpy()))
