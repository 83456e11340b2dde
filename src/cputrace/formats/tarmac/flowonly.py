"""Program-flow Tarmac traces (FD/FI records only): the instructions come from the image.

Such a trace names every taken branch (source, target, ISA after it) and its tick, the
instruction's number in the run. With a program image, each record becomes a BRANCH op:
the walk runs in sequence from the last target to the source and takes the branch.
Exceptions (`E` records) become TRAP and EXCEPTION ops: SWI, undefined-instruction and
prefetch-abort (BKPT) exceptions come from an instruction the walk finds; the vector is the
record's second value when it has one (as `cputrace record` writes), else it comes from the
event number and the `vector_base`/`high_vectors` options (A32/T32, default 0) or `vbar` (A64, unknown
without it). A Reset record with an address starts the walk there.
Interrupts and aborts happen between branches at a point the trace does not give: a
`trace_gap` event says so.

The walk starts at the image's entry point when that reaches the first branch after exactly
the first tick's number of instructions; otherwise at the first branch, and what ran before
it is unknown. A trace that also has instruction records is passed through untouched.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import pairwise

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...flow import EXCEPTION_NO_VECTOR, NO_TIME, Op, OpBuffer, Ops, Program, Walker
from ...image import Image
from ...model import SCHEMAS, Isa
from ..base import Batch, DecodeContext, arm_vector_base, option_error, option_number

# A32/T32 exception numbers (Fast Models event table) -> vector offset, and whether an
# instruction the walk can find (SVC, UDF, BKPT for a prefetch abort) raised it.
_RESET = 1
_A32_VECTORS = {1: (0x00, False), 2: (0x04, True), 3: (0x08, True), 4: (0x0C, True), 5: (0x10, False),
                7: (0x18, False), 8: (0x1C, False), 0xE: (0x10, False)}  # fmt: skip
_A64_FIRST = 0x80  # A64 events: 0x80 + vector offset / 0x80 (CURRENT_SP0_SYNC = 0x80, ...)
_A64_VECTORS = 16  # the entries of an A64 vector table, 0x80 bytes apart
_VBAR_ALIGNMENT = 0x800
_ISA_CODES = {"A32": Isa.A32, "T32": Isa.T32, "A64": Isa.A64, "T32EE": Isa.T32EE}
_INTERRUPTED = (
    "an exception interrupted the program between branches: the instructions since the last "
    "branch target are not in the trace"
)


class BranchFlow:
    """Expands the FD/FI records of a flow-only Tarmac trace into instruction rows."""

    def __init__(self, image: Image, ctx: DecodeContext) -> None:
        self.image = image
        self.program = Program(image)
        self.vector_base = arm_vector_base(ctx.options)
        self.vbar = option_number(ctx.options, "vbar", bits=64)
        if self.vbar is not None and self.vbar % _VBAR_ALIGNMENT:
            raise option_error("vbar", ctx.options["vbar"], "a 2 KiB-aligned address (VBAR bits 10:0 are 0)")
        self.walkers: dict[int, Walker] = {}
        self.seq = 0  # the seq the next instruction of any core gets
        self.has_instructions = False

    def expand(self, batch: Batch) -> Batch:
        """The batch with its FD/FI records walked into instructions (or as it was)."""
        if self.has_instructions or batch["instructions"].num_rows:
            self.has_instructions = True
            return batch
        events = batch["events"]
        ops, op_cpu, op_tick = self._ops(events)
        if not len(ops):
            return batch
        first_seq = self.seq
        op_first = np.zeros(len(ops), np.int64)
        op_end = np.zeros(len(ops), np.int64)
        out: list[Batch] = []
        for start, stop in _runs(op_cpu):
            run = ops.select(slice(start, stop))
            walker = self._walker(int(op_cpu[start]), run, op_tick[start:stop])
            walker.next_seq = self.seq
            out += walker.run(run)
            op_first[start:stop], op_end[start:stop] = walker.op_first, walker.op_end
            self.seq = walker.next_seq
        result = dict(batch)
        for name in ("registers", "memory", "events"):
            result[name] = _reseq(batch[name], ops.src, op_cpu, op_end, first_seq)
        result["events"] = pa.concat_tables(
            [result["events"], self._interruptions(ops, op_cpu, op_first), *(b["events"] for b in out)]
        )
        result["instructions"] = _concat("instructions", [b["instructions"] for b in out])
        return result

    def finish(self) -> Iterator[Batch]:
        for walker in self.walkers.values():
            yield from walker.finish()

    def _walker(self, cpu: int, ops: Ops, ticks: np.ndarray) -> Walker:
        walker = self.walkers.get(cpu)
        if walker is None:
            walker = self.walkers[cpu] = Walker(self.program, cpu=cpu)
            start = self._start(ops, ticks)
            if start is not None:
                list(walker.run(start))
        return walker

    def _start(self, ops: Ops, ticks: np.ndarray) -> Ops | None:
        """SYNC at the entry point, if walking from there meets the first branch at its tick."""
        entry = self.image.entry
        branches = np.flatnonzero(ops.kind == Op.BRANCH)
        if entry is None or not len(branches):
            return None
        first = int(branches[0])
        isa = self.image.symbols.state_at(entry)
        if isa is None:
            isa = Isa.T32 if entry & 1 else Isa(int(ops.isa[first]))
        start = OpBuffer()
        start.add(Op.SYNC, entry & ~1 if isa is Isa.T32 else entry, 0, isa)
        sync = start.take()
        probe = Walker(self.program)
        batches = [*probe.run(Ops.concat(sync, ops.select(slice(first, first + 1)))), *probe.finish()]
        gaps = sum(b["events"].num_rows for b in batches)
        if gaps or (ticks[first] > 0 and probe.next_seq != ticks[first]):
            return None
        return sync

    def _ops(self, events: pa.Table) -> tuple[Ops, np.ndarray, np.ndarray]:
        """FD/FI and exception records as ops in line order, with each op's core and tick (or -1)."""
        kind = events.column("kind").cast(pa.string())
        name = events.column("name")
        branch = pc.and_(pc.equal(kind, "branch"), pc.match_substring_regex(name, "^F[DI]"))
        rows = events.filter(pc.fill_null(branch, False))
        n = rows.num_rows
        isa_names = pc.utf8_slice_codeunits(rows.column("name"), 3).to_pylist()
        isa = np.array([_ISA_CODES.get(x or "", 255) for x in isa_names], np.uint8)
        fd = Ops(
            kind=np.full(n, Op.BRANCH, np.uint8),
            a=rows.column("value").to_numpy(zero_copy_only=False).astype(np.uint64),
            b=rows.column("value1").to_numpy(zero_copy_only=False).astype(np.uint64),
            isa=isa,
            cycles=np.full(n, NO_TIME, np.int64),
            time=_int64(rows.column("time")),
            src=rows.column("src").to_numpy().astype(np.int64),
        )
        ticks = pc.fill_null(rows.column("number"), -1).to_numpy().astype(np.int64)
        cpu = rows.column("cpu").to_numpy().astype(np.int64)
        if n and (isa == 255).any():  # no ISA letter: the target keeps the source's ISA
            isa[isa == 255] = Isa.A64 if self.image.symbols.state_at(int(fd.a[0])) is Isa.A64 else Isa.A32
        exc, exc_cpu = self._exception_ops(events)
        ops = Ops.concat(fd, exc)
        cpus = np.concatenate([cpu, exc_cpu])
        order = np.argsort(ops.src, kind="stable")
        ticks = np.concatenate([ticks, np.full(len(exc), -1, np.int64)])
        return ops.select(order), cpus[order], ticks[order]

    def _exception_ops(self, events: pa.Table) -> tuple[Ops, np.ndarray]:
        """TRAP/EXCEPTION ops for the `E` exception records (a few: built one by one)."""
        kind = events.column("kind").cast(pa.string())
        rows = events.filter(pc.fill_null(pc.equal(kind, "exception"), False)).to_pylist()
        buffer, cpus = OpBuffer(), []
        for row in rows:
            number = row["number"]
            if number is None:
                continue
            if number == _RESET and row["value"] is not None:  # execution starts at the value
                isa = self.image.symbols.state_at(row["value"]) or Isa.A32
                buffer.add(Op.SYNC, row["value"], 0, isa, time=row["time"], src=row["src"])
                cpus.append(row["cpu"])
                continue
            vector, isa, synchronous = self._vector(number)
            if row["value1"] is not None:  # a producer that prints the vector (cputrace record)
                vector = row["value1"]
            if synchronous:
                buffer.add(Op.TRAP, time=row["time"], src=row["src"])
                cpus.append(row["cpu"])
            flags = 0 if vector is not None else EXCEPTION_NO_VECTOR
            buffer.add(Op.EXCEPTION, vector or 0, flags, isa, time=row["time"], src=row["src"])
            cpus.append(row["cpu"])
        return buffer.take(), np.array(cpus, np.int64)

    def _vector(self, number: int) -> tuple[int | None, Isa, bool]:
        """Where exception `number` enters, in which ISA, and whether an instruction raised it."""
        if _A64_FIRST <= number < _A64_FIRST + _A64_VECTORS:
            offset = (number - _A64_FIRST) * 0x80
            vector = None if self.vbar is None else self.vbar + offset
            return vector, Isa.A64, offset % 0x200 == 0
        offset, synchronous = _A32_VECTORS.get(number, (None, False))
        vector = None if offset is None else self.vector_base + offset
        return vector, Isa.A32, synchronous

    def _interruptions(self, ops: Ops, op_cpu: np.ndarray, op_first: np.ndarray) -> pa.Table:
        """A trace_gap event for each exception no instruction of the walk raised."""
        exceptions = np.flatnonzero(ops.kind == Op.EXCEPTION)
        trapped = np.zeros(len(ops), bool)
        trapped[1:] = ops.kind[:-1] == Op.TRAP
        lone = exceptions[~trapped[exceptions]]
        count = len(lone)
        return pa.Table.from_pydict(
            {
                "seq": pa.array(op_first[lone]),
                "time": pa.array(ops.time[lone], mask=ops.time[lone] == NO_TIME),
                "cpu": pa.array(op_cpu[lone].astype(np.uint16)),
                "kind": pa.array(["trace_gap"] * count, pa.string()).dictionary_encode(),
                "number": pa.nulls(count, pa.int64()),
                "name": pa.array(["interrupted"] * count, pa.string()),
                "value": pa.nulls(count, pa.uint64()),
                "value1": pa.nulls(count, pa.uint64()),
                "text": pa.array([_INTERRUPTED] * count, pa.string()),
                "src": pa.array(ops.src[lone]),
            },
            schema=SCHEMAS["events"],
        )


def _runs(cpu: np.ndarray) -> Iterator[tuple[int, int]]:
    """(start, stop) of each run of consecutive ops on the same core."""
    yield from pairwise([0, *(np.flatnonzero(np.diff(cpu)) + 1).tolist(), len(cpu)])


def _reseq(
    table: pa.Table, op_src: np.ndarray, op_cpu: np.ndarray, op_end: np.ndarray, first: int
) -> pa.Table:
    """Give each record the seq of the last instruction its core ran by its line."""
    if not table.num_rows:
        return table
    line = table.column("src").to_numpy(zero_copy_only=False)
    cpu = table.column("cpu").to_numpy(zero_copy_only=False).astype(np.int64)
    seq = np.full(table.num_rows, max(first - 1, 0), np.int64)
    for core in np.unique(cpu).tolist():
        mine = np.flatnonzero(op_cpu == core)
        rows = cpu == core
        j = np.searchsorted(op_src[mine], line[rows], side="right") - 1
        last = np.where(j >= 0, op_end[mine][np.maximum(j, 0)] - 1, first - 1)
        seq[rows] = np.maximum(last, 0)
    return table.set_column(table.schema.get_field_index("seq"), "seq", pa.array(seq))


def _int64(column: pa.ChunkedArray) -> np.ndarray:
    return pc.fill_null(column, NO_TIME).to_numpy().astype(np.int64)


def _concat(table: str, tables: list[pa.Table]) -> pa.Table:
    return pa.concat_tables(tables) if tables else SCHEMAS[table].empty_table()

