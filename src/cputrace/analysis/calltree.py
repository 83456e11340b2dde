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

This is the whole tree in memory, for the library and as the reference of the bounded
paths: a frame is about 130 bytes of compact columns (tree order) next to detection's own
rows for its entry sites; nothing per frame is a Python object, and the per-frame Arrow
table (`frames`, 25 columns) is built only when asked for. The commands and exports never
hold every frame: what needs no single frame (the flat profile, folded stacks, callgrind)
is summed per calling context while detection runs (callsums.py), and what has a row or an
event per call (`calls --tree`, the frames table, the timelines) streams the frames from a
sorted spill (framestream.py). The table, nesting and stack code here is shared with both.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property

import numba
import numpy as np
import pyarrow as pa

from ..image import SymbolTable
from ..kernels import pairtable
from ..kernels.growth import grown
from .calls import (
    P_END_IDX,
    P_EXIT,
    P_SLOT,
    PC,
    S_CALL,
    S_ENTRY,
    S_ENTRY_IDX,
    SEQ,
    TIME,
    CoreCalls,
    Method,
)
from .nesting import END_SITES, Nesting

_SITES = ("call", "entry", "exit", "resume")
_SITE_FIELDS = ("seq", "time", "pc", "src")
_NO_SITE = np.full(4, -1, np.int64)

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


def _frame_index_type(n: int) -> type:
    return np.int32 if n < np.iinfo(np.int32).max else np.int64


@numba.njit(cache=True, nogil=True)
def sum_by(keys, n_keys, values):
    """values summed per key (0 <= key < n_keys), as int64."""
    sums = np.zeros(n_keys, np.int64)
    for i in range(len(keys)):
        sums[keys[i]] += values[i]
    return sums


@numba.njit(cache=True, nogil=True)
def _contexts(parent, name, start, context, table, counts, context_parent, context_name, used):
    """Each frame's calling context: (its parent's context, its name) numbered on first sight.

    Frames from `start` on; returns where it stopped (len(parent) when done, earlier when an
    array is full).
    """
    for i in range(start, len(parent)):
        if used[0] >= len(context_parent) or pairtable.needs_rehash(table, counts):
            return i
        above = context[parent[i]] if parent[i] >= 0 else -1
        row = pairtable.find(table, above, name[i])
        if row >= 0:
            context[i] = table[row, 2]
            continue
        c = used[0]
        used[0] = c + 1
        pairtable.put(table, counts, above, name[i], c)
        context_parent[c] = above
        context_name[c] = name[i]
        context[i] = c
    return len(parent)


def calling_contexts(parent: np.ndarray, name: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(context of each frame, parent context and name of each context) of frames in tree order."""
    context = np.empty(len(parent), np.int64)
    table, counts = pairtable.new_table()
    context_parent = np.empty(1 << 10, np.int64)
    context_name = np.empty(1 << 10, np.int64)
    used = np.zeros(1, np.int64)
    done = 0
    while True:
        done = _contexts(parent, name, done, context, table, counts, context_parent, context_name, used)
        if done == len(parent):
            break
        if pairtable.needs_rehash(table, counts):
            table, counts = pairtable.rehashed(table, counts)
        if used[0] >= len(context_parent):
            context_parent = grown(context_parent, used[0])
            context_name = grown(context_name, used[0])
    return context, context_parent[: used[0]], context_name[: used[0]]


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
class CoreFrames:
    """One core's frames in tree order as compact columns; their entry sites stay in `calls`' rows.

    `row` is each frame's row in `calls.pairs` (-1: the outermost frame); `end_sites` its exit
    and resume sites (its own, or its parent's when cut there).
    """

    calls: CoreCalls
    first_id: int
    row: np.ndarray
    end_sites: np.ndarray  # (n, 8): exit then resume (seq, time, pc, src)
    parent: np.ndarray  # frame index within the core, -1 for the outermost frame
    depth: np.ndarray  # int32
    function: np.ndarray  # index into CallTree.addresses
    index: np.ndarray  # int64, and the costs below
    insns: np.ndarray
    insns_self: np.ndarray
    entry_time: np.ndarray
    time: np.ndarray
    time_self: np.ndarray
    recursive: np.ndarray  # bool

    def __len__(self) -> int:
        return len(self.row)

    @property
    def cpu(self) -> int:
        return self.calls.cpu

    def site(self, name: str, field: int | None = None) -> np.ndarray:
        """One site ("call", "entry", "exit", "resume") of each frame: (n, 4) seq, time, pc, src, or
        (n,) of one of them (`field`: calls.SEQ, TIME, PC, SRC); -1 where the frame has none."""
        fields = slice(0, 4) if field is None else field
        if name == "exit":
            return self.end_sites[:, 0:4][:, fields]
        if name == "resume":
            return self.end_sites[:, 4:8][:, fields]
        calls = self.calls
        at = S_CALL if name == "call" else S_ENTRY
        sites = np.empty((len(self.row), 4), np.int64)
        sites[1:] = calls.slots[calls.pairs[self.row[1:], P_SLOT], at : at + 4]
        sites[0] = _NO_SITE if name == "call" else calls.first
        return sites[:, fields]

    def start(self, clock: str) -> np.ndarray:
        return self.entry_time if clock == "time" else self.index

    def end(self, clock: str) -> np.ndarray:
        return self.start(clock) + (self.time if clock == "time" else self.insns)


def _core_frames(core: CoreCalls, first_id: int) -> tuple[CoreFrames, np.ndarray]:
    """The frames of one core, and the distinct entry addresses their `function` numbers."""
    slots, pairs = core.slots, core.pairs
    n = 1 + len(pairs)
    index_type = _frame_index_type(n)
    entry_idx = np.empty(n, np.int64)  # in detection order first, then in tree order
    entry_idx[0] = 0
    entry_idx[1:] = slots[pairs[:, P_SLOT], S_ENTRY_IDX]
    end_idx = np.empty(n, np.int64)
    end_idx[0] = core.count
    end_idx[1:] = pairs[:, P_END_IDX]
    # tree order: entry up, end down; the outermost frame (entry 0, the trace's end) stays first
    order = np.lexsort((-end_idx, entry_idx)).astype(index_type)
    entry_idx, end_idx = entry_idx[order], end_idx[order]
    row = order - 1  # rows in calls.pairs; -1 for the outermost frame
    del order
    entry_slot = pairs[row[1:], P_SLOT]
    entry_time = np.empty(n, np.int64)
    entry_time[0] = core.first[TIME]
    entry_time[1:] = slots[entry_slot, S_ENTRY + TIME]
    addresses = np.empty(n, np.int64)
    addresses[0] = core.first[PC]
    addresses[1:] = slots[entry_slot, S_ENTRY + PC]
    del entry_slot
    end_sites = np.empty((n, END_SITES), np.int64)
    end_sites[0, :4] = core.last
    end_sites[0, 4:] = _NO_SITE
    end_sites[1:] = pairs[row[1:], P_EXIT : P_EXIT + END_SITES]
    end_time = frame_end_times(end_sites)
    encoded = pa.array(addresses.view(np.uint64)).dictionary_encode()  # hashed: no sort per frame
    del addresses
    func = encoded.indices.to_numpy().astype(index_type)
    parent, depth, recursive, closed = Nesting(len(encoded.dictionary)).nest(
        entry_idx, end_idx, entry_time, end_time, func, end_sites, final=True
    )
    insns = end_idx - entry_idx
    time = end_time - entry_time
    insns_self = np.empty(n, np.int64)
    time_self = np.empty(n, np.int64)
    insns_self[closed[:, 0]] = closed[:, 1]
    time_self[closed[:, 0]] = closed[:, 2]
    del end_idx, end_time, closed
    frames = CoreFrames(
        core, first_id, row, end_sites, parent.astype(index_type), depth, func, entry_idx, insns, insns_self,
        entry_time, time, time_self, recursive,
    )  # fmt: skip
    return frames, encoded.dictionary.to_numpy()


def frame_end_times(end_sites: np.ndarray) -> np.ndarray:
    """When frames end: their resume site's time, or for a frame that never returned its exit's."""
    returned = end_sites[:, 4 + SEQ] >= 0
    return np.where(returned, end_sites[:, 4 + TIME], end_sites[:, TIME])


@dataclass
class CallTree:
    """The frames of every core and how each core's calls were detected.

    `addresses` are the distinct function entry addresses (sorted) and `names` their names;
    each core's `function` column indexes them.
    """

    cores: list[CoreFrames]
    addresses: np.ndarray
    names: list[str]
    methods: dict[int, Method]
    has_time: bool

    @classmethod
    def build(cls, cores: Sequence[CoreCalls], symbols: SymbolTable | None = None) -> CallTree:
        built = []
        first_id = 0
        for core in cores:
            if not core.count:
                continue
            frames, distinct = _core_frames(core, first_id)
            first_id += len(frames)
            built.append((frames, distinct))
        methods = {c.cpu: c.method for c in cores}
        if not built:
            return cls([], np.zeros(0, np.uint64), [], methods, False)
        addresses = np.unique(np.concatenate([distinct for _, distinct in built]))
        for frames, distinct in built:  # core-local function numbers to the tree's
            frames.function = np.searchsorted(addresses, distinct)[frames.function].astype(frames.row.dtype)
        has_time = all(core.has_time for core in cores if core.count)
        return cls([frames for frames, _ in built], addresses, function_names(addresses, symbols), methods,
                   has_time)  # fmt: skip

    def __len__(self) -> int:
        return sum(len(core) for core in self.cores)

    @cached_property
    def _distinct_names(self) -> tuple[list[str], np.ndarray]:
        return distinct_names(self.names)

    @cached_property
    def frames(self) -> pa.Table:
        """Every frame as a row of FRAME_SCHEMA, built on first use (25 columns per call)."""
        if not self.cores:
            return FRAME_SCHEMA.empty_table()
        names = pa.array(self.names, pa.string())
        parts = [_frame_columns(core, self.addresses, names) for core in self.cores]
        columns = {f.name: pa.chunked_array([p[f.name] for p in parts], f.type) for f in FRAME_SCHEMA}
        return pa.table(columns, schema=FRAME_SCHEMA)

    def functions(self) -> pa.Table:
        """The flat call profile: one row per (core, function), most inclusive instructions first."""
        parts = [
            function_rows(
                core.cpu, core.function, self.addresses, self.names, np.ones(len(core), np.int64), core.insns,
                core.insns_self, core.time, core.time_self, core.recursive,
            )
            for core in self.cores
        ]  # fmt: skip
        return function_table(parts, self.has_time)

    def stacks(self, weight: str = "insns") -> Iterator[tuple[int, list[str], int]]:
        """(cpu, function names from the outermost down, self weight) per distinct call stack.

        `weight` is "insns" or "time"; stacks of zero weight are left out. Summed per calling
        context, so the work past one pass over the frames follows the distinct stacks.
        """
        distinct, name_ids = self._distinct_names
        for core in self.cores:
            if weight == "insns":
                weights = core.insns_self
            elif core.calls.has_time:
                weights = core.time_self
            else:
                continue
            for path, total in context_stacks(core.parent, name_ids[core.function], weights, distinct):
                yield core.cpu, path, total


def function_rows(
    cpu: int, function: np.ndarray, addresses: np.ndarray, names: list[str], calls: np.ndarray,
    insns: np.ndarray, insns_self: np.ndarray, time: np.ndarray, time_self: np.ndarray, recursive: np.ndarray,
) -> pa.Table:  # fmt: skip
    """One core's FUNCTION_SCHEMA rows from rows of frames (or of contexts, `calls` frames each)
    numbered by `function` (into `addresses`); a recursive row's inclusive costs count in its
    outer namesake's."""
    n = len(addresses)
    outer = ~recursive
    counts = sum_by(function, n, calls)
    called = np.flatnonzero(counts)
    sums = {
        "insns_self": insns_self,
        "insns": np.where(outer, insns, 0),
        "time_self": time_self,
        "time": np.where(outer, time, 0),
    }
    columns = {
        "cpu": np.full(len(called), cpu, np.uint16),
        "address": addresses[called],
        "name": pa.array(names, pa.string()).take(called),
        "calls": counts[called],
        **{name: sum_by(function, n, values)[called] for name, values in sums.items()},
    }
    return pa.table(columns, schema=FUNCTION_SCHEMA)


def function_table(parts: list[pa.Table], has_time: bool) -> pa.Table:
    """The cores' function rows together, most inclusive instructions first (time null without time)."""
    if not parts:
        return FUNCTION_SCHEMA.empty_table()
    result = pa.concat_tables(parts)
    if not has_time:
        nulls = pa.nulls(result.num_rows, pa.int64())
        result = result.set_column(6, "time_self", nulls).set_column(7, "time", nulls)
    return result.sort_by([("cpu", "ascending"), ("insns", "descending"), ("address", "ascending")])


def distinct_names(names: list[str]) -> tuple[list[str], np.ndarray]:
    """The distinct names, and per function address the number of its name (shared by namesakes)."""
    distinct, ids = np.unique(np.array(names, dtype=object), return_inverse=True)
    return distinct.tolist(), ids.astype(np.int64).ravel()


def context_stacks(
    parent: np.ndarray, name: np.ndarray, weights: np.ndarray, distinct: list[str]
) -> Iterator[tuple[list[str], int]]:
    """(names from the outermost down, summed weight) per distinct stack of names, of rows (frames or
    contexts) given parents first; stacks of zero weight are left out."""
    context, above, named_as = calling_contexts(parent, name)
    totals = sum_by(context, len(above), weights).tolist()
    paths: list[tuple[str, ...]] = []
    for up, named, total in zip(above.tolist(), named_as.tolist(), totals, strict=True):
        path = (*paths[up], distinct[named]) if up >= 0 else (distinct[named],)
        paths.append(path)
        if total:
            yield list(path), total


def frame_columns(
    cpu: int, ids: np.ndarray, parent: np.ndarray, depth: np.ndarray, function: np.ndarray, names: pa.Array,
    sites: dict[str, np.ndarray], index: np.ndarray, insns: np.ndarray, insns_self: np.ndarray,
    time: np.ndarray, time_self: np.ndarray, recursive: np.ndarray, has_time: bool,
) -> dict[str, pa.Array]:  # fmt: skip
    """FRAME_SCHEMA columns of frames: `parent` ids (-1: none), `function` entry addresses, `sites`
    (n, 4) per site name with -1 where a frame has none."""
    n = len(ids)
    no_time = np.full(n, not has_time)
    columns: dict[str, pa.Array] = {
        "cpu": pa.array(np.full(n, cpu, np.uint16)),
        "id": pa.array(ids.astype(np.int64)),
        "parent": pa.array(parent.astype(np.int64), pa.int64(), mask=parent < 0),
        "depth": pa.array(depth.astype(np.int32)),
        "function": pa.array(function.astype(np.uint64)),
        "name": names,
    }
    for site in _SITES:
        values = sites[site]
        missing = values[:, 0] < 0
        for col, name in enumerate(_SITE_FIELDS):
            type_ = pa.uint64() if name == "pc" else pa.int64()
            data = values[:, col].view(np.uint64) if name == "pc" else values[:, col]
            gone = missing | (no_time if name == "time" else False) | (name == "src") & (values[:, col] < 0)
            columns[f"{site}_{name}"] = pa.array(data, type_, mask=gone)
    columns["index"] = pa.array(index.astype(np.int64))
    columns["insns"] = pa.array(insns.astype(np.int64))
    columns["insns_self"] = pa.array(insns_self.astype(np.int64))
    columns["time"] = pa.array(time, pa.int64(), mask=no_time)
    columns["time_self"] = pa.array(time_self, pa.int64(), mask=no_time)
    columns["recursive"] = pa.array(recursive)
    return columns


def _frame_columns(core: CoreFrames, addresses: np.ndarray, names: pa.Array) -> dict[str, pa.Array]:
    ids = np.arange(core.first_id, core.first_id + len(core), dtype=np.int64)
    parent = np.where(core.parent >= 0, core.parent.astype(np.int64) + core.first_id, -1)
    return frame_columns(
        core.cpu, ids, parent, core.depth, addresses[core.function], names.take(pa.array(core.function)),
        {site: core.site(site) for site in _SITES}, core.index, core.insns, core.insns_self, core.time,
        core.time_self, core.recursive, core.calls.has_time,
    )  # fmt: skip
