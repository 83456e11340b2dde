"""The in-memory call tree: every frame detection found, nested, with self and inclusive costs,
named by symbol. The oracle of the bounded paths (the calling-context sums and the streamed
frames of cputrace.analysis.calls): it holds every frame, so tests compare against it.

A frame is one execution of a function (tables.FRAME_SCHEMA says what its columns mean).
Per function (`functions`), `calls` counts frames and the inclusive costs count a recursive
function's outer frames only, so no instruction is counted twice.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pyarrow as pa

from cputrace.analysis.calls.contexts import context_stacks, distinct_names
from cputrace.analysis.calls.detect import detect
from cputrace.analysis.calls.frames import SPILLED, ended_frames, frame_end_times
from cputrace.analysis.calls.log import NO_SITE, CallLog, Method
from cputrace.analysis.calls.nesting import NESTED, Nesting
from cputrace.analysis.calls.tables import FRAME_SCHEMA, SITES, frame_columns, function_rows, function_table
from cputrace.image import Image, SymbolTable
from cputrace.image.symbols import function_names
from cputrace.store.trace import Trace
from cputrace.store.window import WHOLE_TRACE, Window


@dataclass
class CoreCalls:
    """What detection found on one core: its final log (first and last instruction, count) and
    every call, in the order detection ended them."""

    final: CallLog
    ended: np.ndarray  # frames.SPILLED

    @property
    def cpu(self) -> int:
        return self.final.cpu


class Collector:
    """Follows detection (a detect.Follower), keeping every call it ends."""

    def __init__(self) -> None:
        self.ended: dict[int, list[np.ndarray]] = {}
        self.cores: list[CoreCalls] = []

    def follow(self, log: CallLog) -> None:
        parts = self.ended.setdefault(log.cpu, [])
        if len(log.ends):
            parts.append(ended_frames(log))
        if log.final:
            self.cores.append(CoreCalls(log, np.concatenate([np.zeros(0, SPILLED), *parts])))

    def tree(self, symbols: SymbolTable | None = None) -> CallTree:
        return CallTree.build(self.cores, symbols)


def build_tree(
    trace: Trace, window: Window = WHOLE_TRACE, method: Method = Method.AUTO, image: Image | None = None,
    cpus: list[int] | None = None, symbols: SymbolTable | None = None,
) -> CallTree:  # fmt: skip
    """Detect the calls of the window and keep every frame."""
    collector = Collector()
    for _ in detect(trace, [collector], window, method, image, cpus):
        pass
    return collector.tree(symbols)


def _frame_index_type(n: int) -> type:
    return np.int32 if n < np.iinfo(np.int32).max else np.int64


@dataclass
class CoreFrames:
    """One core's frames in tree order as compact columns.

    `row` is each frame's row in `calls.ended` (-1: the outermost frame); `ends` its exit and
    resume sites (its own, or its parent's when cut there).
    """

    calls: CoreCalls
    first_id: int
    row: np.ndarray
    ends: np.ndarray  # nesting.NESTED: the exit and resume sites
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

    def site(self, name: str) -> np.ndarray:
        """One site ("call", "entry", "exit", "resume") of each frame, as log.SITE records."""
        if name in ("exit", "resume"):
            return self.ends[name]
        sites = np.empty(len(self.row), self.calls.ended.dtype[name])
        sites[1:] = self.calls.ended[name][self.row[1:]]
        sites[0] = NO_SITE if name == "call" else self.calls.final.first
        return sites

    def start(self, clock: str) -> np.ndarray:
        return self.entry_time if clock == "time" else self.index

    def end(self, clock: str) -> np.ndarray:
        return self.start(clock) + (self.time if clock == "time" else self.insns)


def _core_frames(core: CoreCalls, first_id: int) -> tuple[CoreFrames, np.ndarray]:
    """The frames of one core, and the distinct entry addresses their `function` numbers."""
    ended, final = core.ended, core.final
    n = 1 + len(ended)
    index_type = _frame_index_type(n)
    entry_idx = np.empty(n, np.int64)  # in detection order first, then in tree order
    entry_idx[0] = 0
    entry_idx[1:] = ended["entry_idx"]
    end_idx = np.empty(n, np.int64)
    end_idx[0] = final.count
    end_idx[1:] = ended["end_idx"]
    # tree order: entry up, end down; the outermost frame (entry 0, the trace's end) stays first
    order = np.lexsort((-end_idx, entry_idx)).astype(index_type)
    row = order - 1  # rows in calls.ended; -1 for the outermost frame
    frames = np.empty(n, NESTED)
    frames["entry_index"], frames["end_index"] = entry_idx[order], end_idx[order]
    taken = ended[row[1:]]
    frames["entry_time"][0] = final.first["time"]
    frames["entry_time"][1:] = taken["entry"]["time"]
    addresses = np.empty(n, np.int64)
    addresses[0] = final.first["pc"]
    addresses[1:] = taken["entry"]["pc"]
    frames["exit"][0], frames["resume"][0] = final.last, NO_SITE
    frames["exit"][1:], frames["resume"][1:] = taken["exit"], taken["resume"]
    frames["end_time"] = frame_end_times(frames["exit"], frames["resume"])
    encoded = pa.array(addresses.view(np.uint64)).dictionary_encode()  # hashed: no sort per frame
    func = encoded.indices.to_numpy().astype(index_type)
    frames["function"] = func
    closed = Nesting(len(encoded.dictionary)).nest(frames, final=True)
    index = frames["entry_index"].copy()
    entry_time = frames["entry_time"].copy()
    insns = frames["end_index"] - index
    time = frames["end_time"] - entry_time
    insns_self = np.empty(n, np.int64)
    time_self = np.empty(n, np.int64)
    insns_self[closed["id"]] = closed["insns_self"]
    time_self[closed["id"]] = closed["time_self"]
    built = CoreFrames(
        core, first_id, row, frames, frames["parent"].astype(index_type), frames["depth"].copy(), func, index,
        insns, insns_self, entry_time, time, time_self, frames["recursive"].copy(),
    )  # fmt: skip
    return built, encoded.dictionary.to_numpy()


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
            if not core.final.count:
                continue
            frames, distinct = _core_frames(core, first_id)
            first_id += len(frames)
            built.append((frames, distinct))
        methods = {c.cpu: c.final.method for c in cores}
        if not built:
            return cls([], np.zeros(0, np.uint64), [], methods, False)
        addresses = np.unique(np.concatenate([distinct for _, distinct in built]))
        for frames, distinct in built:  # core-local function numbers to the tree's
            frames.function = np.searchsorted(addresses, distinct)[frames.function].astype(frames.row.dtype)
        has_time = all(core.final.has_time for core in cores if core.final.count)
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
            elif core.calls.final.has_time:
                weights = core.time_self
            else:
                continue
            for path, total in context_stacks(core.parent, name_ids[core.function], weights, distinct):
                yield core.cpu, path, total


def _frame_columns(core: CoreFrames, addresses: np.ndarray, names: pa.Array) -> dict[str, pa.Array]:
    ids = np.arange(core.first_id, core.first_id + len(core), dtype=np.int64)
    parent = np.where(core.parent >= 0, core.parent.astype(np.int64) + core.first_id, -1)
    return frame_columns(
        core.cpu, ids, parent, core.depth, addresses[core.function], names.take(pa.array(core.function)),
        {site: core.site(site) for site in SITES}, core.index, core.insns, core.insns_self, core.time,
        core.time_self, core.recursive, core.calls.final.has_time,
    )  # fmt: skip
