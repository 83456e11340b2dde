"""Callgrind's costs from the per-context call sums: self costs per (core, function, address),
and calls per (caller, call site, callee) with their inclusive costs.

Self costs charge each instruction to the function of the innermost frame it ran in; the
call sums charge them while detection runs (CallSums with `self_costs`), so no frame is
kept. This is what per-instruction annotation in KCachegrind needs; the flat profiles do
without it.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from .callsums import CallSums

COST_SCHEMA = pa.schema(
    [
        ("cpu", pa.uint16()),
        ("function", pa.uint64()),
        ("pc", pa.uint64()),
        ("count", pa.int64()),
        ("time", pa.int64()),
    ]
)

_EDGE_SCHEMA = pa.schema(
    [("cpu", pa.uint16()), ("caller", pa.uint64()), ("site", pa.uint64()), ("callee", pa.uint64()),
     ("calls", pa.int64()), ("insns", pa.int64()), ("time", pa.int64())]
)  # fmt: skip


def self_costs(sums: CallSums) -> pa.Table:
    """Instructions and time per (cpu, function entry address, pc), summed over the window."""
    parts = []
    for cpu in sorted(sums.own):
        functions, pcs, totals = sums.own[cpu]
        columns = {"function": functions, "pc": pcs, "count": totals[:, 0], "time": totals[:, 1]}
        parts.append(pa.table({"cpu": pa.array(np.full(len(pcs), cpu), pa.uint16()), **columns}))
    if not parts:
        return COST_SCHEMA.empty_table()
    merged = pa.concat_tables(parts).select(COST_SCHEMA.names).cast(COST_SCHEMA)
    if not sums.has_time:
        merged = merged.set_column(4, "time", pa.nulls(merged.num_rows, pa.int64()))
    return merged.sort_by([("cpu", "ascending"), ("function", "ascending"), ("pc", "ascending")])


def call_edges(sums: CallSums) -> pa.Table:
    """Per (cpu, caller, call site pc, callee): calls and their inclusive instructions and time, in
    the order each first appears in the call tree (cores one after another)."""
    parts = []
    for cpu, contexts in sums.cores.items():
        called = slice(1, None)  # every context but the outermost frame's
        time = contexts.time[called] if sums.timed[cpu] else np.zeros(len(contexts.time) - 1, np.int64)
        parts.append(
            pa.table(
                {
                    "cpu": pa.array(np.full(len(time), cpu, np.uint16)),
                    "caller": contexts.address[contexts.parent[called]],
                    "site": contexts.site[called],
                    "callee": contexts.address[called],
                    "calls": contexts.calls[called],
                    "insns": contexts.insns[called],
                    "time": time,
                    "first": contexts.first[called],
                }
            )
        )
    if not parts:
        return _EDGE_SCHEMA.empty_table()
    keys = ["cpu", "caller", "site", "callee"]
    edges = pa.concat_tables(parts).group_by(keys, use_threads=False)
    edges = edges.aggregate([("calls", "sum"), ("insns", "sum"), ("time", "sum"), ("first", "min")])
    edges = edges.sort_by([("cpu", "ascending"), ("first_min", "ascending")])
    return edges.rename_columns([name.removesuffix("_sum") for name in edges.column_names]).select(
        _EDGE_SCHEMA.names
    )
