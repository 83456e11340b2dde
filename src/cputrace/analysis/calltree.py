"""Call trees: the frames detection found, nested, with self and inclusive costs, named by symbol.

A frame is one execution of a function: the outermost function of each core's trace is one
frame (one call), and every detected call is another. Costs:

- `index`: how many instructions of the core come before the frame's entry (in the window);
- `insns`: instructions from the frame's entry up to (not including) its resume site, or to
  the end of the trace for a frame that never returned; `insns_self` leaves out the frames
  it called.
- `time`: trace time from the entry to the resume site (for a frame that never returned:
  to its last instruction), in the trace's time unit; `time_self` likewise. Null when the
  trace has no time.

Per function (`functions`), `calls` counts frames and the inclusive costs count a recursive
function's outer frames only, so no instruction is counted twice.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numba
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..image import SymbolTable
from .calls import (
    P_END_IDX,
    P_EXIT,
    P_SLOT,
    S_CALL,
    S_ENTRY,
    S_ENTRY_IDX,
    CoreCalls,
    Method,
)

_SITES = ("call", "entry", "exit", "resume")
_SITE_FIELDS = ("seq", "time", "pc", "src")

FRAME_SCHEMA = pa.schema(
    [
        ("cpu", pa.uint16()),
        ("id", pa.int64()),
        ("parent", pa.int64()),
        ("depth", pa.int32()),
        ("function", pa.uint64()),
        ("name", pa.string()),
        *[
            (f"{site}_{name}", pa.uint64() if name == "pc" else pa.int64())
            for site in _SITES
            for name in _SITE_FIELDS
        ],
        ("index", pa.int64()),
        ("insns", pa.int64()),
        ("insns_self", pa.int64()),
        ("time", pa.int64()),
        ("time_self", pa.int64()),
        ("recursive", pa.bool_()),
    ]
)
"""One row per frame, in tree order (each frame before the frames it called), cores one after another."""

FUNCTION_SCHEMA = pa.schema(
    [
        ("cpu", pa.uint16()),
        ("address", pa.uint64()),
        ("name", pa.string()),
        ("calls", pa.int64()),
        ("insns_self", pa.int64()),
        ("insns", pa.int64()),
        ("time_self", pa.int64()),
        ("time", pa.int64()),
    ]
)
"""One row per (core, function entry address): the flat call profile."""


@numba.njit(cache=True, nogil=True)
def _nest(entry_idx, end_idx, entry_time, end_time, ends, func, n_funcs):
    """Parents, depths, self costs and recursion of frames in tree order (entry up, end down).

    A frame that ends after its parent (crossing call/return pairs) is cut at its parent's
    end: `ends` (the exit and resume sites) and times are copied from the parent.
    """
    n = len(entry_idx)
    parent = np.full(n, -1, np.int64)
    depth = np.zeros(n, np.int32)
    insns = end_idx - entry_idx
    time = end_time - entry_time
    insns_self = insns.copy()
    time_self = time.copy()
    recursive = np.zeros(n, np.bool_)
    stack = np.empty(n, np.int64)
    open_frames = np.zeros(n_funcs, np.int64)
    top = 0
    for i in range(n):
        while top > 0 and end_idx[stack[top - 1]] <= entry_idx[i]:
            top -= 1
            open_frames[func[stack[top]]] -= 1
        if top > 0:
            p = stack[top - 1]
            if end_idx[i] > end_idx[p]:
                end_idx[i] = end_idx[p]
                end_time[i] = end_time[p]
                ends[i, :] = ends[p, :]
                insns[i] = end_idx[i] - entry_idx[i]
                time[i] = end_time[i] - entry_time[i]
                insns_self[i] = insns[i]
                time_self[i] = time[i]
            parent[i] = p
            depth[i] = depth[p] + 1
            insns_self[p] -= insns[i]
            time_self[p] -= time[i]
        recursive[i] = open_frames[func[i]] > 0
        open_frames[func[i]] += 1
        stack[top] = i
        top += 1
    return parent, depth, insns, insns_self, time, time_self, recursive


def _null_where(values: np.ndarray, missing: np.ndarray, type_: pa.DataType) -> pa.Array:
    return pa.array(values, type_, mask=missing)


def _core_frames(core: CoreCalls, first_id: int) -> dict[str, pa.Array]:
    """The frames of one core as columns (without names)."""
    slots, pairs = core.slots, core.pairs
    n = 1 + len(pairs)
    entry_idx = np.concatenate([[0], slots[pairs[:, P_SLOT], S_ENTRY_IDX]]).astype(np.int64)
    end_idx = np.concatenate([[core.count], pairs[:, P_END_IDX]]).astype(np.int64)
    none = np.full(4, -1, np.int64)
    call = np.vstack([none, slots[pairs[:, P_SLOT], S_CALL : S_CALL + 4]])
    entry = np.vstack([core.first, slots[pairs[:, P_SLOT], S_ENTRY : S_ENTRY + 4]])
    ends = np.vstack(
        [np.concatenate([core.last, none]), pairs[:, P_EXIT : P_EXIT + 4 + 4].reshape(-1, 8)]
    ).astype(np.int64)
    order = np.lexsort((-end_idx, entry_idx))
    entry_idx, end_idx, call, entry, ends = (
        entry_idx[order],
        end_idx[order],
        call[order],
        entry[order],
        ends[order],
    )
    returned = ends[:, 4] >= 0
    end_time = np.where(returned, ends[:, 5], ends[:, 1])
    functions = entry[:, 2].view(np.uint64)
    encoded = pc.dictionary_encode(pa.array(functions, pa.uint64()))
    func = encoded.indices.to_numpy().astype(np.int64)
    parent, depth, insns, insns_self, time, time_self, recursive = _nest(
        entry_idx, end_idx, entry[:, 1].copy(), end_time, ends, func, len(encoded.dictionary)
    )
    no_time = np.full(n, not core.has_time)
    columns: dict[str, pa.Array] = {
        "cpu": pa.array(np.full(n, core.cpu, np.uint16)),
        "id": pa.array(np.arange(first_id, first_id + n, dtype=np.int64)),
        "parent": _null_where(np.where(parent >= 0, parent + first_id, 0), parent < 0, pa.int64()),
        "depth": pa.array(depth),
        "function": pa.array(functions),
    }
    sites = {"call": call, "entry": entry, "exit": ends[:, :4], "resume": ends[:, 4:]}
    for site, values in sites.items():
        missing = values[:, 0] < 0
        for col, name in enumerate(_SITE_FIELDS):
            type_ = pa.uint64() if name == "pc" else pa.int64()
            data = values[:, col].view(np.uint64) if name == "pc" else values[:, col]
            gone = missing | (no_time if name == "time" else False) | (name == "src") & (values[:, col] < 0)
            columns[f"{site}_{name}"] = _null_where(data, gone, type_)
    columns["index"] = pa.array(entry_idx)
    columns["insns"] = pa.array(insns)
    columns["insns_self"] = pa.array(insns_self)
    columns["time"] = _null_where(time, no_time, pa.int64())
    columns["time_self"] = _null_where(time_self, no_time, pa.int64())
    columns["recursive"] = pa.array(recursive)
    return columns


def function_names(addresses: np.ndarray, symbols: SymbolTable | None) -> list[str]:
    """`symbol` or `symbol+0x10` for each address, `0x8000` where no symbol covers it."""
    fallback = [f"{a:#x}" for a in addresses.tolist()]
    if symbols is None or not len(symbols):
        return fallback
    indices = symbols.lookup_many(addresses)
    names = []
    for address, index, plain in zip(addresses.tolist(), indices.tolist(), fallback, strict=True):
        if index < 0:
            names.append(plain)
            continue
        symbol = symbols.symbols[index]
        offset = address - symbol.address
        names.append(symbol.name if not offset else f"{symbol.name}+{offset:#x}")
    return names


@dataclass
class CallTree:
    """The frames of every core (FRAME_SCHEMA) and how each core's calls were detected."""

    frames: pa.Table
    methods: dict[int, Method]
    has_time: bool

    @classmethod
    def build(cls, cores: Sequence[CoreCalls], symbols: SymbolTable | None = None) -> CallTree:
        parts = []
        first_id = 0
        for core in cores:
            if not core.count:
                continue
            columns = _core_frames(core, first_id)
            first_id += len(columns["id"])
            parts.append(columns)
        if not parts:
            return cls(FRAME_SCHEMA.empty_table(), {c.cpu: c.method for c in cores}, False)
        merged = {name: pa.chunked_array([p[name] for p in parts]) for name in parts[0]}
        functions = merged["function"].to_numpy()
        distinct, inverse = np.unique(functions, return_inverse=True)
        names = np.array(function_names(distinct, symbols), dtype=object)[inverse]
        merged["name"] = pa.chunked_array([pa.array(names, pa.string())])
        frames = pa.table({field.name: merged[field.name] for field in FRAME_SCHEMA}, schema=FRAME_SCHEMA)
        has_time = all(core.has_time for core in cores if core.count)
        return cls(frames, {c.cpu: c.method for c in cores}, has_time)

    def __len__(self) -> int:
        return self.frames.num_rows

    def functions(self) -> pa.Table:
        """The flat call profile: one row per (core, function), most inclusive instructions first."""
        frames = self.frames
        outer = pc.invert(frames.column("recursive"))
        zero = pa.scalar(0, pa.int64())
        table = pa.table(
            {
                "cpu": frames.column("cpu"),
                "address": frames.column("function"),
                "name": frames.column("name"),
                "insns_self": frames.column("insns_self"),
                "insns": pc.if_else(outer, frames.column("insns"), zero),
                "time_self": frames.column("time_self"),
                "time": pc.if_else(outer, frames.column("time"), pa.scalar(0, pa.int64())),
            }
        )
        grouped = table.group_by(["cpu", "address", "name"], use_threads=False).aggregate(
            [
                ("address", "count"),
                ("insns_self", "sum"),
                ("insns", "sum"),
                ("time_self", "sum"),
                ("time", "sum"),
            ]
        )
        result = pa.table(
            {
                "cpu": grouped.column("cpu"),
                "address": grouped.column("address"),
                "name": grouped.column("name"),
                "calls": grouped.column("address_count"),
                "insns_self": grouped.column("insns_self_sum"),
                "insns": grouped.column("insns_sum"),
                "time_self": grouped.column("time_self_sum"),
                "time": grouped.column("time_sum"),
            },
            schema=FUNCTION_SCHEMA,
        )
        if not self.has_time:
            nulls = pa.nulls(result.num_rows, pa.int64())
            result = result.set_column(6, "time_self", nulls).set_column(7, "time", nulls)
        return result.sort_by([("cpu", "ascending"), ("insns", "descending"), ("address", "ascending")])

    def stacks(self, weight: str = "insns") -> Iterator[tuple[int, list[str], int]]:
        """(cpu, function names from the outermost down, self weight) per distinct call stack.

        `weight` is "insns" or "time"; stacks of zero weight are left out.
        """
        column = "insns_self" if weight == "insns" else "time_self"
        frames = self.frames
        parents = frames.column("parent").fill_null(-1).to_numpy()
        first_ids = frames.column("id").to_numpy()
        names = frames.column("name").to_pylist()
        cpus = frames.column("cpu").to_numpy()
        weights = frames.column(column).fill_null(0).to_numpy()
        base = int(first_ids[0]) if len(first_ids) else 0
        path_of: list[tuple[str, ...]] = []
        totals: dict[tuple[int, tuple[str, ...]], int] = {}
        for row, (parent, name) in enumerate(zip(parents.tolist(), names, strict=True)):
            path = (*path_of[parent - base], name) if parent >= 0 else (name,)
            path_of.append(path)
            key = (int(cpus[row]), path)
            totals[key] = totals.get(key, 0) + int(weights[row])
        for (cpu, path), total in totals.items():
            if total:
                yield cpu, list(path), total


@dataclass(frozen=True)
class CoreTimeline:
    """One core's frames on a clock: trace time, or instructions (`insns`) since the window start."""

    cpu: int
    names: list[str]  # per frame of the core, in tree order
    start: np.ndarray  # int64 per frame
    end: np.ndarray  # int64 per frame
    first: int  # where the core's timeline starts (the outermost frame's start)
    last: int
    entry_index: np.ndarray  # instructions of the core before each frame's entry
    end_index: np.ndarray  # ... and before its end
    function: np.ndarray  # uint64 entry address per frame

    def events(self) -> Iterator[tuple[bool, int, int]]:
        """(opens, frame, at) in timeline order, properly nested: each close ends the latest open."""
        stack: list[int] = []
        starts = self.start.tolist()
        ends = self.end.tolist()
        for frame, at in enumerate(starts):
            while stack and ends[stack[-1]] <= at:
                top = stack.pop()
                yield False, top, ends[top]
            yield True, frame, at
            stack.append(frame)
        while stack:
            top = stack.pop()
            yield False, top, ends[top]


def timelines(tree: CallTree, clock: str) -> Iterator[CoreTimeline]:
    """Each core's frames on `clock` ("time" needs a trace with time, "insns" always works)."""
    frames = tree.frames
    cpus = frames.column("cpu").to_numpy()
    if clock == "time":
        start = frames.column("entry_time").to_numpy(zero_copy_only=False)
        end = start + frames.column("time").to_numpy(zero_copy_only=False)
    else:
        start = frames.column("index").to_numpy()
        end = start + frames.column("insns").to_numpy()
    names = frames.column("name").to_pylist()
    index = frames.column("index").to_numpy()
    insns = frames.column("insns").to_numpy()
    function = frames.column("function").to_numpy()
    for cpu in np.unique(cpus).tolist():
        rows = np.flatnonzero(cpus == cpu)
        lo, hi = int(rows[0]), int(rows[-1]) + 1
        yield CoreTimeline(
            cpu, names[lo:hi], start[lo:hi].astype(np.int64), end[lo:hi].astype(np.int64),
            int(start[lo]), int(end[lo:hi].max()), index[lo:hi], index[lo:hi] + insns[lo:hi], function[lo:hi],
        )  # fmt: skip
