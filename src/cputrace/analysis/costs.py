"""Self costs per (core, function, address): each instruction charged to the frame it ran in.

A second pass over the instructions, after call detection: frames are spans of seq on their
core (entry up to the resume site, or to the end), so a sweep with a stack of open frames
finds each instruction's innermost frame. This is what per-instruction annotation in
KCachegrind needs; the flat profiles do without it.
"""

from __future__ import annotations

import numba
import numpy as np
import pyarrow as pa

from ..trace import Trace
from .calls import PC, SEQ
from .calltree import CallTree, CoreFrames
from .profile import summed
from .stream import WHOLE_TRACE, Window, iter_timed
from .sums import KeyedSums

_NEVER = np.iinfo(np.int64).max

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


@numba.njit(cache=True, nogil=True)
def _innermost(seq, entry, end, state, stack):
    """Index (into the core's frames) of the innermost frame of each instruction.

    `state` carries [next frame to open, stack depth] between chunks.
    """
    out = np.empty(len(seq), np.int64)
    following, top = state[0], state[1]
    for i in range(len(seq)):
        s = seq[i]
        while following < len(entry) and entry[following] <= s:
            while top > 0 and end[stack[top - 1]] <= entry[following]:
                top -= 1
            stack[top] = following
            top += 1
            following += 1
        while top > 1 and end[stack[top - 1]] <= s:
            top -= 1
        out[i] = stack[top - 1] if top > 0 else -1
    state[0], state[1] = following, top
    return out


class _CoreFrames:
    def __init__(self, frames: CoreFrames, addresses: np.ndarray) -> None:
        self.entry = frames.site("entry", SEQ)
        resume = frames.site("resume", SEQ)
        self.end = np.where(resume >= 0, resume, _NEVER)
        self.function = addresses[frames.function]
        self.state = np.zeros(2, np.int64)
        self.stack = np.zeros(max(len(self.entry), 1), np.int64)


def self_costs(trace: Trace, tree: CallTree, window: Window = WHOLE_TRACE) -> pa.Table:
    """Instructions and time per (cpu, function entry address, pc), summed over the window."""
    cores = {frames.cpu: _CoreFrames(frames, tree.addresses) for frames in tree.cores}
    sums: dict[int, KeyedSums] = {}  # per core: (function, pc) -> count, time
    for chunk in iter_timed(trace, window):
        core = cores.get(chunk.cpu)
        if core is None:
            continue
        frame = _innermost(chunk.seq, core.entry, core.end, core.state, core.stack)
        function = core.function[np.maximum(frame, 0)]
        costs = np.column_stack([np.ones(len(chunk), np.int64), chunk.duration])
        sums.setdefault(chunk.cpu, KeyedSums(2)).add(function, chunk.pc, costs)
    parts = []
    for cpu in sorted(sums):
        functions, pcs, totals = sums[cpu].result()
        columns = {"function": functions.view(np.uint64), "pc": pcs.view(np.uint64), "count": totals[:, 0],
                   "time": totals[:, 1]}  # fmt: skip
        parts.append(pa.table({"cpu": pa.array(np.full(len(pcs), cpu), pa.uint16()), **columns}))
    if not parts:
        return COST_SCHEMA.empty_table()
    merged = pa.concat_tables(parts)
    merged = merged.select(COST_SCHEMA.names).cast(COST_SCHEMA)
    if not tree.has_time:
        merged = merged.set_column(4, "time", pa.nulls(merged.num_rows, pa.int64()))
    return merged.sort_by([("cpu", "ascending"), ("function", "ascending"), ("pc", "ascending")])


def call_edges(tree: CallTree) -> pa.Table:
    """Per (cpu, caller, call site pc, callee): calls and their inclusive instructions and time."""
    parts = []
    for frames in tree.cores:
        called = slice(1, None)  # every frame but the outermost was called
        function = tree.addresses[frames.function]
        time = frames.time[called] if frames.calls.has_time else np.zeros(len(frames) - 1, np.int64)
        parts.append(
            pa.table(
                {
                    "cpu": pa.array(np.full(len(frames) - 1, frames.cpu, np.uint16)),
                    "caller": function[frames.parent[called]],
                    "site": frames.site("call", PC)[called].view(np.uint64),
                    "callee": function[called],
                    "calls": np.ones(len(frames) - 1, np.int64),
                    "insns": frames.insns[called],
                    "time": time,
                }
            )
        )
    if not parts:
        return _EDGE_SCHEMA.empty_table()
    return summed(pa.concat_tables(parts), ["cpu", "caller", "site", "callee"], ["calls", "insns", "time"])
