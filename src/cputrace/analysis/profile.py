"""Flat profiles: by function (calls), by source line, by address; instruction mix; hot blocks.

One streaming pass over the instructions aggregates each chunk with Arrow's hash group-by
and merges the partial results, so memory follows the number of distinct addresses, not the
trace length. An instruction's time is the time until the core's next instruction (the
last instruction of a core gets 0), so the times of a core add up to its traced time span.

A (dynamic) basic block starts at the first instruction, after every control transfer,
and after every branch instruction, taken or not; it is named by its first address.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numba
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..image import Image
from ..image.symbols import function_names
from ..isa.factcodes import FactCodes
from ..isa.insn import F_BRANCH, F_CALL, F_LOAD, F_RETURN, F_STORE
from ..store.chunks import Durations, Instructions
from ..store.trace import Trace
from ..store.window import WHOLE_TRACE, Window
from .calls.contexts import CallSumsCollector
from .calls.detect import detect
from .calls.log import Method
from .sums import KeyedSums

HEAT_TIME_BINS = 400


_PREVIOUS = np.dtype([("seen", np.bool_), ("pc", np.int64), ("size", np.int64), ("branch", np.bool_),
                      ("block", np.int64)])
"""The last row of a core's previous chunk, which the next chunk's first block depends on."""


@numba.njit(cache=True, nogil=True)
def _blocks(pc, size, branch, previous):
    """Per row: whether it starts a basic block, and the first address of its block.

    `previous` (a `_PREVIOUS` record array of one) describes the row before the first one, and
    is updated to the last.
    """
    n = len(pc)
    starts = np.zeros(n, np.bool_)
    block = np.empty(n, np.int64)
    last = previous[0]
    for i in range(n):
        here = np.int64(pc[i])
        if not last.seen or last.branch or ((here ^ (last.pc + last.size)) & ~np.int64(1)) != 0:
            starts[i] = True
            last.block = here
        block[i] = last.block
        last.seen, last.pc, last.size, last.branch = True, here, np.int64(size[i]), branch[i]
    return starts, block


_BY_INSTRUCTION_KEYS = ["cpu", "pc", "insn"]


@dataclass
class Profile:
    """The tables of a profile (Arrow) and, when asked for, the heat map behind the plot."""

    functions: pa.Table  # calls.tables.FUNCTION_SCHEMA
    addresses: pa.Table  # cpu, pc, name, count, failed, time
    lines: pa.Table  # cpu, file, line, count, time
    mix: pa.Table  # cpu, instructions, executed, condition_failed, loads, stores, branches, calls, returns
    blocks: pa.Table  # cpu, start, name, executions, insns, time
    has_time: bool
    heat: HeatMap | None = None

    def table(self, name: str) -> pa.Table:
        return getattr(self, name)


TABLES = ("functions", "lines", "addresses", "mix", "blocks")

_ADDED: dict[str, tuple[list[str], list[str]]] = {
    "functions": (["cpu", "address", "name"], ["calls", "insns_self", "insns", "time_self", "time"]),
    "lines": (["cpu", "file", "line"], ["count", "time"]),
    "addresses": (["cpu", "pc", "name"], ["count", "failed", "time"]),
    "mix": (["cpu"], ["instructions", "executed", "condition_failed", "loads", "stores", "branches", "calls",
                      "returns", "unknown"]),
    "blocks": (["cpu", "start", "name"], ["executions", "insns", "time"]),
}  # fmt: skip
"""Each table's key columns and the columns that add up across profiles (`added`)."""

_ORDER = {
    "functions": [("cpu", "ascending"), ("insns", "descending"), ("address", "ascending")],
    "lines": [("cpu", "ascending"), ("count", "descending"), ("file", "ascending"), ("line", "ascending")],
    "addresses": [("cpu", "ascending"), ("count", "descending"), ("pc", "ascending")],
    "mix": [("cpu", "ascending")],
    "blocks": [("cpu", "ascending"), ("insns", "descending"), ("start", "ascending")],
}
"""The order of each table's rows: hottest first per core."""


@dataclass
class HeatMap:
    """Instructions per (time bin, address) from the profile pass: execution over time."""

    axis: str  # "time" or "seq"
    lo: int
    hi: int
    bins: int
    cells: pa.Table  # bin, pc, count

    def bin_of(self, values: np.ndarray) -> np.ndarray:
        span = max(self.hi - self.lo, 1)
        return np.minimum((values - self.lo) * self.bins // span, self.bins - 1).astype(np.int32)


def summed(table: pa.Table, keys: list[str], sums: list[str]) -> pa.Table:
    """Rows grouped by `keys` with the `sums` columns added up, columns keeping their names."""
    result = table.group_by(keys, use_threads=False).aggregate([(s, "sum") for s in sums])
    return result.rename_columns([name.removesuffix("_sum") for name in result.column_names])


_INSN_SCHEMA = pa.schema(
    [
        ("cpu", pa.uint16()),
        ("pc", pa.uint64()),
        ("insn", pa.uint64()),
        ("count", pa.int64()),
        ("failed", pa.int64()),
        ("time", pa.int64()),
    ]
)
_BLOCK_SCHEMA = pa.schema(
    [("cpu", pa.uint16()), ("start", pa.uint64()), ("executions", pa.int64()), ("insns", pa.int64()),
     ("time", pa.int64())]
)  # fmt: skip
_HEAT_SCHEMA = pa.schema([("bin", pa.int32()), ("pc", pa.uint64()), ("count", pa.int64())])


def _insn_keys(chunk: Instructions) -> np.ndarray:
    """opcode, size and ISA of each row as one integer (all the instruction facts depend on)."""
    opcode = np.where(chunk.has_opcode, chunk.opcode.astype(np.uint64), np.uint64(0xFFFFFFFF) << np.uint64(8))
    return (
        opcode
        | (chunk.size.astype(np.uint64) << np.uint64(32))
        | ((chunk.isa.astype(np.int64) & 0xFF).astype(np.uint64) << np.uint64(40))
        | (chunk.has_opcode.astype(np.uint64) << np.uint64(48))
    )


def _table(schema: pa.Schema, columns: dict[str, np.ndarray]) -> pa.Table:
    return pa.table({f.name: pa.array(columns[f.name]).cast(f.type) for f in schema}, schema=schema)


class _ProfilePass:
    def __init__(self, image: Image | None, heat: HeatMap | None) -> None:
        self.codes = FactCodes(image)
        self.insns: dict[int, KeyedSums] = {}  # per core: (pc, insn) -> count, failed, time
        self.blocks: dict[int, KeyedSums] = {}  # per core: (start, 0) -> executions, insns, time
        self.heat_cells = KeyedSums(1) if heat is not None else None  # (bin, pc) -> count
        self.heat = heat
        self.previous: dict[int, np.ndarray] = {}  # per core: a _PREVIOUS record
        self.has_time = True

    def feed(self, chunk: Instructions) -> None:
        cpu = chunk.cpu
        previous = self.previous.setdefault(cpu, np.zeros(1, _PREVIOUS))
        self.has_time &= chunk.has_time
        codes = self.codes.codes(chunk.opcode, chunk.has_opcode, chunk.size, chunk.isa, chunk.pc)
        starts, block = _blocks(chunk.pc, chunk.size, (codes & F_BRANCH) != 0, previous)
        ones = np.ones(len(chunk), np.int64)
        failed = (~chunk.executed).astype(np.int64)
        by_insn = self.insns.setdefault(cpu, KeyedSums(3))
        by_insn.add(chunk.pc, _insn_keys(chunk), np.column_stack([ones, failed, chunk.duration]))
        by_block = self.blocks.setdefault(cpu, KeyedSums(3))
        by_block.add(block, np.zeros(len(chunk), np.int64), np.column_stack([starts, ones, chunk.duration]))
        if self.heat_cells is not None and self.heat is not None:
            axis = chunk.time if self.heat.axis == "time" else chunk.seq
            self.heat_cells.add(self.heat.bin_of(axis).astype(np.int64), chunk.pc, ones[:, None])

    def finish(self) -> tuple[pa.Table, pa.Table, pa.Table | None]:
        insns, blocks = [], []
        for cpu in sorted(self.insns):
            pcs, keys, sums = self.insns[cpu].result()
            columns = {"pc": pcs.view(np.uint64), "insn": keys.view(np.uint64), "count": sums[:, 0],
                       "failed": sums[:, 1], "time": sums[:, 2]}  # fmt: skip
            insns.append(_table(_INSN_SCHEMA, {"cpu": np.full(len(pcs), cpu), **columns}))
            starts, _, sums = self.blocks[cpu].result()
            columns = {"start": starts.view(np.uint64), "executions": sums[:, 0], "insns": sums[:, 1],
                       "time": sums[:, 2]}  # fmt: skip
            blocks.append(_table(_BLOCK_SCHEMA, {"cpu": np.full(len(starts), cpu), **columns}))
        heat = None
        if self.heat_cells is not None:
            bins, pcs, sums = self.heat_cells.result()
            heat = _table(_HEAT_SCHEMA, {"bin": bins, "pc": pcs.view(np.uint64), "count": sums[:, 0]})
        by_insn = pa.concat_tables(insns) if insns else _INSN_SCHEMA.empty_table()
        by_block = pa.concat_tables(blocks) if blocks else _BLOCK_SCHEMA.empty_table()
        return by_insn, by_block, heat


def _mix(by_insn: pa.Table) -> pa.Table:
    """Instruction classes per core, from the distinct (opcode, size, ISA) rows."""
    keys = by_insn.column("insn").to_numpy()
    has_opcode = (keys >> np.uint64(48)) & np.uint64(1) == 1
    codes = FactCodes().codes(
        (keys & np.uint64(0xFFFFFFFF)).astype(np.uint32),
        has_opcode,
        ((keys >> np.uint64(32)) & np.uint64(0xFF)).astype(np.uint8),
        ((keys >> np.uint64(40)) & np.uint64(0xFF)).astype(np.int16),
        by_insn.column("pc").to_numpy(),
    )
    count = by_insn.column("count").to_numpy()
    failed = by_insn.column("failed").to_numpy()
    executed = count - failed
    table = pa.table(
        {
            "cpu": by_insn.column("cpu"),
            "instructions": count,
            "executed": executed,
            "condition_failed": failed,
            "loads": np.where(codes & F_LOAD, executed, 0),
            "stores": np.where(codes & F_STORE, executed, 0),
            "branches": np.where(codes & F_BRANCH, executed, 0),
            "calls": np.where(codes & F_CALL, executed, 0),
            "returns": np.where(codes & F_RETURN, executed, 0),
            "unknown": np.where(has_opcode, 0, count),
        }
    )
    sums = [name for name in table.column_names if name != "cpu"]
    return summed(table, ["cpu"], sums).select(table.column_names).sort_by(_ORDER["mix"])


def _named(table: pa.Table, column: str, image: Image | None) -> pa.Table:
    addresses = table.column(column).to_numpy()
    names = function_names(addresses, image.symbols if image is not None else None)
    return table.append_column("name", pa.array(names, pa.string()))


def _lines(by_address: pa.Table, image: Image | None) -> pa.Table:
    schema = pa.schema(
        [("cpu", pa.uint16()), ("file", pa.string()), ("line", pa.int32()), ("count", pa.int64()),
         ("time", pa.int64())]
    )  # fmt: skip
    if image is None or not by_address.num_rows:
        return schema.empty_table()
    files, lines = image.lines.lines_for_many(by_address.column("pc").to_numpy())
    known = files >= 0
    if not known.any():
        return schema.empty_table()
    names = np.array(image.lines.files, dtype=object)
    table = pa.table(
        {
            "cpu": by_address.column("cpu").filter(known),
            "file": pa.array(names[files[known]], pa.string()),
            "line": pa.array(lines[known], pa.int32()),
            "count": by_address.column("count").filter(known),
            "time": by_address.column("time").filter(known),
        }
    )
    result = summed(table, ["cpu", "file", "line"], ["count", "time"]).select(schema.names)
    return result.cast(schema).sort_by(_ORDER["lines"])


def _null_time(table: pa.Table, has_time: bool) -> pa.Table:
    """The table with its time columns null when the trace has no time."""
    if has_time:
        return table
    for name in ("time", "time_self"):
        if name in table.column_names:
            index = table.column_names.index(name)
            table = table.set_column(index, name, pa.nulls(table.num_rows, pa.int64()))
    return table


def heat_axes(trace: Trace, window: Window) -> HeatMap:
    """The time (or seq, without time) range of the window, binned for the heat map."""
    row = trace.sql(
        f"SELECT min(time) AS tlo, max(time) AS thi, count(time) AS timed, count(*) AS n, "
        f"min(seq) AS slo, max(seq) AS shi FROM instructions WHERE {window.sql()}"
    ).to_pylist()[0]
    if row["n"] and row["timed"] == row["n"]:
        return HeatMap("time", row["tlo"], row["thi"] + 1, HEAT_TIME_BINS, _HEAT_SCHEMA.empty_table())
    lo = row["slo"] or 0
    hi = (row["shi"] or 0) + 1
    return HeatMap("seq", lo, hi, HEAT_TIME_BINS, _HEAT_SCHEMA.empty_table())


def profile(
    trace: Trace,
    window: Window = WHOLE_TRACE,
    image: Image | None = None,
    method: Method = Method.AUTO,
    heat: bool = False,
) -> Profile:
    """Profile the window of the trace in one pass, call detection included."""
    calls = CallSumsCollector()
    heat_map = heat_axes(trace, window) if heat else None
    state = _ProfilePass(image, heat_map)
    durations = Durations()
    for step in detect(trace, [calls], window, method, image):
        for chunk in step.chunks.values():
            ready = durations.push(chunk)
            if ready is not None:
                state.feed(ready)
    for chunk in durations.flush():
        state.feed(chunk)
    sums = calls.finish(image)
    by_insn, by_block, cells = state.finish()
    if heat_map is not None and cells is not None:
        heat_map.cells = cells
    by_address = summed(by_insn, ["cpu", "pc"], ["count", "failed", "time"])
    by_address = _named(by_address.select(["cpu", "pc", "count", "failed", "time"]), "pc", image)
    by_address = by_address.select(["cpu", "pc", "name", "count", "failed", "time"])
    blocks = _named(by_block, "start", image).select(["cpu", "start", "name", "executions", "insns", "time"])
    has_time = state.has_time and bool(by_insn.num_rows)
    return Profile(
        functions=sums.functions(),
        addresses=_null_time(by_address.sort_by(_ORDER["addresses"]), has_time),
        lines=_null_time(_lines(by_address, image), has_time),
        mix=_mix(by_insn),
        blocks=_null_time(blocks.sort_by(_ORDER["blocks"]), has_time),
        has_time=has_time,
        heat=heat_map,
    )


def added(profiles: Iterable[Profile]) -> Profile:
    """Profiles of several traces as one: each table's rows of the same key (a function, line,
    address, core's mix, block) added up, in the order `profile` gives. Time stays only where
    every trace has it."""
    profiles = list(profiles)
    if not profiles:
        raise ValueError("no profiles to add")
    has_time = all(p.has_time for p in profiles)
    tables = {}
    for name in TABLES:
        keys, sums = _ADDED[name]
        parts = [p.table(name) for p in profiles]
        schema = parts[0].schema
        together = pa.concat_tables(parts, promote_options="permissive")
        table = summed(together, keys, sums).select(schema.names).cast(schema)
        tables[name] = _null_time(table.sort_by(_ORDER[name]), has_time)
    return Profile(**tables, has_time=has_time)


def share(values: pa.Array, total: int) -> pa.Array:
    """Percentages of `total`, one decimal."""
    if not total:
        return pa.nulls(len(values), pa.float64())
    return pc.round(pc.multiply(pc.cast(values, pa.float64()), 100.0 / total), 1)
