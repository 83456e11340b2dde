"""Call costs summed per calling context while detection runs: what the flat call profile, folded
stacks and callgrind need, in memory that follows the distinct contexts and the undecided
potential calls, never the number of calls.

The sums are those of the call tree without its frames: per context, the calls, inclusive
instructions and time, and first entry of the frames that ran in it (the compiled trie of
trie.py, folded from detection's logs). A frame's self cost is its inclusive cost less its
children's, so per context `self = inclusive - inclusive of the child contexts`, computed at
the end. With `self_costs`, each instruction is also charged to the function it ran in
(per-instruction annotation in KCachegrind); the flat profiles do without it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numba
import numpy as np
import pyarrow as pa

from ...image import Image
from ...image.symbols import function_names
from ...kernels import pairtable
from ...kernels.growth import grown
from ...store.trace import Trace
from ...store.window import WHOLE_TRACE, Window
from .detect import detect
from .log import CallLog, Method
from .tables import COST_SCHEMA, EDGE_SCHEMA, function_rows, function_table, sum_by
from .trie import (
    ACC,
    COUNTERS,
    EDGE,
    MERGE,
    NODE,
    OPEN_CALL,
    OWN,
    SPARE,
    Charges,
    Fold,
    Opened,
    Trie,
    charge,
    fold_log,
    preorder,
)

_NO_INSTRUCTIONS = np.zeros(0, np.int64)


class _CoreSums:
    """One core's trie, open calls and self costs, fed each log of its detection."""

    def __init__(self, charging: bool) -> None:
        self.charging = charging
        rows = 1 << 10
        self.nodes = np.zeros(rows, NODE)
        self.work = np.zeros(rows, MERGE)
        self.children, self.child_counts = pairtable.new_table()
        self.edges, self.edge_counts = pairtable.new_table()
        self.edge_rows = np.zeros(rows, EDGE)
        self.chain = np.zeros(rows, np.int64)
        self.info = np.zeros(rows, OPEN_CALL)
        self.acc = np.zeros(rows, ACC)
        self.acc_table, self.acc_counts = pairtable.new_table()
        self.own, self.own_counts = pairtable.new_table()
        self.own_sums = np.zeros(rows, OWN)
        self.counters = np.zeros(1, COUNTERS)
        cs = self.counters[0]
        for counter in ("free", "acc_free", "root", "prev_node"):
            cs[counter] = -1

    def _trie(self) -> Trie:
        tables = (self.children, self.child_counts, self.edges, self.edge_counts)
        return Trie(self.nodes, *tables, self.edge_rows, self.work)

    def _charges(self) -> Charges:
        return Charges(self.acc, self.acc_table, self.acc_counts, self.own, self.own_counts, self.own_sums)

    def follow(self, log: CallLog) -> None:
        """Fold a log (and its chunk's instructions, when charging self costs)."""
        self._renumber(log.kept)
        self.info = grown(self.info, len(log.calls) - 1)
        cs = self.counters[0]
        if not log.final:
            if self.charging:
                self._fold(log, log.pc, log.time, log.count)
            else:
                self._fold(log, _NO_INSTRUCTIONS, _NO_INSTRUCTIONS, log.count)
            return
        if cs["prev_node"] >= 0:  # the core's last instruction takes no time
            charge(self._trie(), self._charges(), cs, cs["prev_node"], cs["prev_pc"], 1, 0)
            cs["prev_node"] = -1
        self._fold(log, _NO_INSTRUCTIONS, _NO_INSTRUCTIONS, log.count + 1)
        self._finish(log)

    def _fold(self, log: CallLog, pc: np.ndarray, time: np.ndarray, stop: int) -> None:
        fold = Fold(log.events, log.calls, log.ends, pc, time, log.has_time, log.start, stop,
                    int(log.first["pc"]), log.by_registers)  # fmt: skip
        while not fold_log(fold, self._trie(), self._charges(), Opened(self.chain, self.info), self.counters):
            self._make_room()
        self.counters[0]["event"] = 0

    def _make_room(self) -> None:
        cs = self.counters[0]
        live = int(cs["live_nodes"]) + 2
        self.nodes = grown(self.nodes, int(cs["nodes"]) + 2)
        if live >= len(self.work) or len(self.work) < len(self.nodes):
            self.work = np.zeros(len(self.nodes), MERGE)
        self.edge_rows = grown(self.edge_rows, int(cs["edges"]) + 2)
        self.chain = grown(self.chain, int(cs["depth"]) + 2)
        self.acc = grown(self.acc, int(cs["acc"]) + SPARE)
        accs = int(cs["live_acc"]) + SPARE
        self.own_sums = grown(self.own_sums, int(cs["own"]) + accs)
        self.children, self.child_counts = pairtable.rehashed(self.children, self.child_counts, live)
        self.edges, self.edge_counts = pairtable.rehashed(self.edges, self.edge_counts, 2)
        self.acc_table, self.acc_counts = pairtable.rehashed(self.acc_table, self.acc_counts, accs)
        self.own, self.own_counts = pairtable.rehashed(self.own, self.own_counts, accs)

    def _renumber(self, kept: np.ndarray) -> None:
        """Follow the detector's renumbering of its CALL rows: the open calls' rows, and the chain
        of open calls with the decided ones dropped."""
        cs = self.counters[0]
        depth = int(cs["depth"])
        chain = self.chain[:depth][self.info[self.chain[:depth]]["node"] >= 0]
        renumber = np.full(max(len(self.info), 1), -1, np.int64)
        renumber[kept] = np.arange(len(kept))
        self.info[: len(kept)] = self.info[kept]
        self.chain[: len(chain)] = renumber[chain]
        cs["depth"] = len(chain)

    def _finish(self, log: CallLog) -> None:
        """The outermost frame: the whole of the core's trace."""
        root = self.nodes[self.counters[0]["root"]]
        root["calls"] += 1
        root["insns"] += log.count
        root["time"] += log.last["time"] - log.first["time"]
        root["first"] = 0

    def contexts(self) -> Contexts:
        """The calling contexts, parents first."""
        cs = self.counters[0]
        nodes = self.nodes[: cs["nodes"]]
        live = nodes["parent"] != -2
        address = np.zeros(len(nodes), np.int64)
        address[live] = self.edge_rows["function"][nodes["edge"][live]]
        distinct, function = np.unique(address, return_inverse=True)
        order, parent, recursive = preorder(nodes, int(cs["root"]), function.ravel(), len(distinct))
        taken = nodes[order]
        return Contexts(
            parent=parent,
            address=address[order].view(np.uint64),
            site=self.edge_rows["site"][taken["edge"]].view(np.uint64),
            calls=taken["calls"],
            insns=taken["insns"],
            time=taken["time"],
            first=taken["first"],
            recursive=recursive,
        )

    def self_costs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(function, pc, OWN sums) of each instruction address run, per function it ran in."""
        live = pairtable.live_rows(self.own)
        return live[:, 0].view(np.uint64), live[:, 1].view(np.uint64), self.own_sums[live[:, 2]]


@numba.njit(cache=True, nogil=True)
def _contexts(parent, name, start, context, table, counts, context_parent, context_name, used):
    """Each row's calling context: (its parent's context, its name) numbered on first sight.

    Rows from `start` on; returns where it stopped (len(parent) when done, earlier when an
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
    """(context of each row, parent context and name of each context) of rows given parents first."""
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


@dataclass
class Contexts:
    """One core's calling contexts (parents first): where each was called from and its frames' sums."""

    parent: np.ndarray  # position of the parent context, -1 for the outermost frame's
    address: np.ndarray  # uint64: the function's entry address
    site: np.ndarray  # uint64: the call site (all ones for the outermost frame)
    calls: np.ndarray
    insns: np.ndarray  # inclusive, and time below
    time: np.ndarray
    first: np.ndarray  # the first frame's entry index: the order frames first appear in the call tree
    recursive: np.ndarray  # the function is also an ancestor's: its inclusive costs are counted there

    def children_sum(self, values: np.ndarray) -> np.ndarray:
        return sum_by(np.maximum(self.parent, 0), len(values), np.where(self.parent >= 0, values, 0))


@dataclass
class CallSums:
    """Per-context call sums of every core: what the flat profile, folded stacks and callgrind need.

    `addresses` are the distinct function entry addresses (sorted) and `names` their names.
    """

    cores: dict[int, Contexts]
    own: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]  # self costs per (function, pc), if charged
    timed: dict[int, bool]
    methods: dict[int, Method]
    addresses: np.ndarray
    names: list[str]
    has_time: bool

    @classmethod
    def for_trace(
        cls,
        trace: Trace,
        window: Window = WHOLE_TRACE,
        method: Method = Method.AUTO,
        image: Image | None = None,
        cpus: list[int] | None = None,
        self_costs: bool = False,
    ) -> CallSums:
        """Detect the calls of the window and sum them, in one pass; `self_costs` also charges each
        instruction to the function it ran in."""
        collector = CallSumsCollector(self_costs)
        for _ in detect(trace, [collector], window, method, image, cpus):
            pass
        return collector.finish(image)

    def functions(self) -> pa.Table:
        """The flat call profile (FUNCTION_SCHEMA)."""
        parts = []
        for cpu, contexts in self.cores.items():
            function = np.searchsorted(self.addresses, contexts.address)
            time_self = contexts.time - contexts.children_sum(contexts.time)
            insns_self = contexts.insns - contexts.children_sum(contexts.insns)
            parts.append(function_rows(
                cpu, function, self.addresses, self.names, contexts.calls, contexts.insns, insns_self,
                contexts.time, time_self, contexts.recursive,
            ))  # fmt: skip
        return function_table(parts, self.has_time)

    def stacks(self, weight: str = "insns") -> Iterator[tuple[int, list[str], int]]:
        """(cpu, function names from the outermost down, self weight) per distinct call stack.

        `weight` is "insns" or "time"; stacks of zero weight are left out.
        """
        distinct, name_ids = distinct_names(self.names)
        for cpu, contexts in self.cores.items():
            if weight == "insns":
                values = contexts.insns
            elif self.timed[cpu]:
                values = contexts.time
            else:
                continue
            weights = values - contexts.children_sum(values)
            names = name_ids[np.searchsorted(self.addresses, contexts.address)]
            for path, total in context_stacks(contexts.parent, names, weights, distinct):
                yield cpu, path, total

    def self_costs(self) -> pa.Table:
        """Instructions and time per (cpu, function entry address, pc), summed over the window
        (COST_SCHEMA; when summed with `self_costs`)."""
        parts = []
        for cpu in sorted(self.own):
            functions, pcs, totals = self.own[cpu]
            columns = {"function": functions, "pc": pcs, "count": totals["count"], "time": totals["time"]}
            parts.append(pa.table({"cpu": pa.array(np.full(len(pcs), cpu), pa.uint16()), **columns}))
        if not parts:
            return COST_SCHEMA.empty_table()
        merged = pa.concat_tables(parts).select(COST_SCHEMA.names).cast(COST_SCHEMA)
        if not self.has_time:
            merged = merged.set_column(4, "time", pa.nulls(merged.num_rows, pa.int64()))
        return merged.sort_by([("cpu", "ascending"), ("function", "ascending"), ("pc", "ascending")])

    def call_edges(self) -> pa.Table:
        """Per (cpu, caller, call site pc, callee): calls and their inclusive instructions and time
        (EDGE_SCHEMA), in the order each first appears in the call tree, cores one after another."""
        parts = []
        for cpu, contexts in self.cores.items():
            called = slice(1, None)  # every context but the outermost frame's
            time = contexts.time[called] if self.timed[cpu] else np.zeros(len(contexts.time) - 1, np.int64)
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
            return EDGE_SCHEMA.empty_table()
        keys = ["cpu", "caller", "site", "callee"]
        edges = pa.concat_tables(parts).group_by(keys, use_threads=False)
        edges = edges.aggregate([("calls", "sum"), ("insns", "sum"), ("time", "sum"), ("first", "min")])
        edges = edges.sort_by([("cpu", "ascending"), ("first_min", "ascending")])
        return edges.rename_columns([name.removesuffix("_sum") for name in edges.column_names]).select(
            EDGE_SCHEMA.names
        )


class CallSumsCollector:
    """Follows call detection (a detect.Follower) and sums its calls per core."""

    def __init__(self, self_costs: bool = False) -> None:
        self.charging = self_costs
        self.cores: dict[int, _CoreSums] = {}
        self.methods: dict[int, Method] = {}
        self.finals: dict[int, CallLog] = {}

    def follow(self, log: CallLog) -> None:
        self.methods[log.cpu] = log.method
        core = self.cores.get(log.cpu)
        if core is None:
            core = self.cores[log.cpu] = _CoreSums(self.charging)
        core.follow(log)
        if log.final:
            self.finals[log.cpu] = log

    def finish(self, image: Image | None) -> CallSums:
        contexts, own, timed = {}, {}, {}
        for cpu in sorted(self.finals):
            log = self.finals[cpu]
            if not log.count:
                continue
            core = self.cores[cpu]
            contexts[cpu] = core.contexts()
            own[cpu] = core.self_costs()
            timed[cpu] = log.has_time
        if not contexts:
            return CallSums({}, {}, {}, self.methods, np.zeros(0, np.uint64), [], False)
        addresses = np.unique(np.concatenate([c.address for c in contexts.values()]))
        symbols = image.symbols if image is not None else None
        return CallSums(contexts, own, timed, self.methods, addresses, function_names(addresses, symbols),
                        all(timed.values()))  # fmt: skip
