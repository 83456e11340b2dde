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
it is unknown. A trace that also has instruction records is passed through (numbered on after
what was walked before the first of them).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...flow.ops import EXCEPTION_NO_VECTOR, GAP_TEXT, NO_TIME, GapReason, Op, OpBuffer, Ops
from ...flow.program import Program
from ...flow.walker import Walker
from ...image import Image
from ...model import SCHEMAS, Isa
from ..base import Batch, DecodeContext, arm_vector_base
from .options import VBAR

# A32/T32 exception numbers (Fast Models event table) -> vector offset, and whether an
# instruction the walk can find (SVC, UDF, BKPT for a prefetch abort) raised it.
_RESET = 1
_A32_VECTORS = {1: (0x00, False), 2: (0x04, True), 3: (0x08, True), 4: (0x0C, True), 5: (0x10, False),
                7: (0x18, False), 8: (0x1C, False), 0xE: (0x10, False)}  # fmt: skip
_A64_FIRST = 0x80  # A64 events: 0x80 + vector offset / 0x80 (CURRENT_SP0_SYNC = 0x80, ...)
_A64_VECTORS = 16  # the entries of an A64 vector table, 0x80 bytes apart
_VBAR_ALIGNMENT = 0x800
_ISA_CODES = {"A32": Isa.A32, "T32": Isa.T32, "A64": Isa.A64, "T32EE": Isa.T32EE}
_ISA_NAMES = pa.array(list(_ISA_CODES))
_ISA_BY_NAME = np.array([*_ISA_CODES.values(), 255], np.uint8)  # by index in _ISA_NAMES; last: none
_INTERRUPTED = (
    "an exception interrupted the program between branches: the instructions since the last "
    "branch target are not in the trace"
)


class BranchFlow:
    """Expands the FD/FI records of a flow-only Tarmac trace into instruction rows.

    Rows come in one seq order over all cores, the order of the records in the input: the
    instructions a record implies (the run up to an FD/FI record's branch, up to an `E`
    record's SVC) are numbered at that record, and every record, and every `trace_gap` of the
    walk, belongs to the last instruction numbered before it (of any core: a core's
    instructions since its last branch are known only at its next record), the first before
    any. Each batch walks each core's records in one go, numbering them from 0, then moves
    them into place.
    """

    def __init__(self, image: Image, ctx: DecodeContext) -> None:
        self.image = image
        self.program = Program(image)
        self.vector_base = arm_vector_base(ctx.options)
        self.vbar = ctx.option(VBAR)
        if self.vbar is not None and self.vbar % _VBAR_ALIGNMENT:
            raise VBAR.error(f"{self.vbar:#x}", "a 2 KiB-aligned address (VBAR bits 10:0 are 0)")
        self.walkers: dict[int, Walker] = {}
        self.seq = 0  # the seq the next instruction of any core gets
        self.passed: int | None = None  # once a batch had instruction records: their seq offset

    def expand(self, batch: Batch) -> Batch:
        """The batch with its FD/FI records walked into instructions, in seq order.

        A trace with instruction records of its own is passed through, numbered on after
        what was walked before the first of them."""
        if self.passed is not None or batch["instructions"].num_rows:
            if self.passed is None:
                self.passed = self.seq
            return _shifted(batch, self.passed)
        ops, op_cpu, op_tick = self._ops(batch["events"])
        first_seq = self.seq
        walked, gaps, op_first, op_end = self._walk(ops, op_cpu, op_tick, first_seq)
        self.seq = first_seq + walked.num_rows
        gaps = pa.concat_tables([gaps, self._exception_gaps(ops, op_cpu, op_first)])
        gaps = _with_seq(gaps, np.maximum(gaps.column("seq").to_numpy() - 1, 0))  # the last one before
        result = dict(batch, instructions=walked)
        ends = np.concatenate(([first_seq], op_end))  # before the first op (or with none): first_seq
        for name in ("registers", "memory", "events"):
            line = batch[name].column("src").to_numpy()
            after = ends[np.searchsorted(ops.src, line, side="right")]  # the last op at or before each
            result[name] = _with_seq(batch[name], np.maximum(after - 1, 0))
        result["events"] = _merged(result["events"], gaps)
        return result

    def _walk(
        self, ops: Ops, op_cpu: np.ndarray, op_tick: np.ndarray, first_seq: int
    ) -> tuple[pa.Table, pa.Table, np.ndarray, np.ndarray]:
        """The instructions and trace gaps of the batch's ops in seq order, numbered from
        `first_seq`, and each op's first seq and end (its instructions' range).

        Each core's walker numbers its instructions from 0; an op's instructions then move
        up by the instructions of the other cores' ops before it."""
        op_first = np.zeros(len(ops), np.int64)
        op_end = np.zeros(len(ops), np.int64)
        walks = []
        for cpu in np.unique(op_cpu).tolist():
            mine = np.flatnonzero(op_cpu == cpu)
            own = ops.select(mine)
            walker = self._walker(cpu, own, op_tick[mine])
            walker.next_seq = 0
            # Tarmac records never cancel an instruction, so the row the walk holds back
            # for that is handed over at once: the batch has all of its core's rows.
            batches = [*walker.run(own), *walker.finish()]
            op_first[mine], op_end[mine] = walker.op_first, walker.op_end
            walks.append((mine, own.src, batches))
        count = op_end - op_first
        op_end = first_seq + np.cumsum(count)
        move = op_end - count - op_first  # from each op's own numbering to the batch's
        op_first = op_end - count
        instructions, gaps = [], []
        for mine, src, batches in walks:
            own = _concat("instructions", [b["instructions"] for b in batches])
            seq = own.column("seq").to_numpy() + np.repeat(move[mine], count[mine])
            instructions.append(_with_seq(own, seq))
            found = _concat("events", [b["events"] for b in batches])  # less `vector`: see _exception_gaps
            found = found.filter(pc.not_equal(found.column("number"), int(GapReason.VECTOR)))
            at = np.maximum(np.searchsorted(src, found.column("src").to_numpy(), side="right") - 1, 0)
            gaps.append(_with_seq(found, found.column("seq").to_numpy() + move[mine][at]))
        walked = _concat("instructions", instructions)
        if len(walks) > 1:
            order = np.empty(walked.num_rows, np.int64)
            order[walked.column("seq").to_numpy() - first_seq] = np.arange(walked.num_rows)
            walked = walked.take(order)
        return walked, _concat("events", gaps), op_first, op_end

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
        start.add(Op.SYNC, address=entry & ~1 if isa is Isa.T32 else entry, isa=isa)
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
        named = pc.index_in(pc.utf8_slice_codeunits(rows.column("name"), 3), value_set=_ISA_NAMES)
        isa = _ISA_BY_NAME[pc.fill_null(named, len(_ISA_NAMES)).to_numpy()]
        address = rows.column("value").to_numpy(zero_copy_only=False).astype(np.uint64)
        if n and (isa == 255).any():  # no ISA letter: the target keeps the source's ISA
            isa[isa == 255] = Isa.A64 if self.image.symbols.state_at(int(address[0])) is Isa.A64 else Isa.A32
        fd = Ops.of(
            np.full(n, Op.BRANCH, np.uint8),
            address=address,
            target=rows.column("value1").to_numpy(zero_copy_only=False).astype(np.uint64),
            isa=isa,
            time=_int64(rows.column("time")),
            src=rows.column("src").to_numpy().astype(np.int64),
        )
        ticks = pc.fill_null(rows.column("number"), -1).to_numpy().astype(np.int64)
        cpu = rows.column("cpu").to_numpy().astype(np.int64)
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
                buffer.add(Op.SYNC, address=row["value"], isa=isa, time=row["time"], src=row["src"])
                cpus.append(row["cpu"])
                continue
            vector, isa, synchronous = self._vector(number)
            if row["value1"] is not None:  # a producer that prints the vector (cputrace record)
                vector = row["value1"]
            if synchronous:
                buffer.add(Op.TRAP, time=row["time"], src=row["src"])
                cpus.append(row["cpu"])
            flags = 0 if vector is not None else EXCEPTION_NO_VECTOR
            buffer.add(
                Op.EXCEPTION, address=vector or 0, flags=flags, isa=isa, time=row["time"], src=row["src"]
            )
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

    def _exception_gaps(self, ops: Ops, op_cpu: np.ndarray, op_first: np.ndarray) -> pa.Table:
        """A trace_gap event for each exception no instruction of the walk raised
        (`interrupted`) and for each whose vector is unknown (`vector`), at the exception's
        record, with the seq of the next instruction (as the walk gives its gaps).

        The walk itself reports an unknown vector only when its core's next record needs a
        position, which can be a batch later: its `vector` gaps are left out for these."""
        exception = ops.kind == Op.EXCEPTION
        trapped = np.zeros(len(ops), bool)
        trapped[1:] = ops.kind[:-1] == Op.TRAP
        interrupted = np.flatnonzero(exception & ~trapped)
        lost = np.flatnonzero(exception & (ops.flags & EXCEPTION_NO_VECTOR != 0))
        at = np.concatenate([interrupted, lost])
        count, kinds = len(at), len(interrupted)
        reason = np.concatenate([np.zeros(kinds, np.int64), np.full(len(lost), int(GapReason.VECTOR))])
        texts = [_INTERRUPTED] * kinds + [GAP_TEXT[GapReason.VECTOR]] * len(lost)
        return pa.Table.from_pydict(
            {
                "seq": pa.array(op_first[at]),
                "time": pa.array(ops.time[at], mask=ops.time[at] == NO_TIME),
                "cpu": pa.array(op_cpu[at].astype(np.uint16)),
                "kind": pa.array(["trace_gap"] * count, pa.string()).dictionary_encode(),
                "number": pa.array(reason, mask=reason == 0),
                "name": pa.array(["interrupted"] * kinds + ["vector"] * len(lost), pa.string()),
                "value": pa.nulls(count, pa.uint64()),
                "value1": pa.nulls(count, pa.uint64()),
                "text": pa.array(texts, pa.string()),
                "src": pa.array(ops.src[at]),
            },
            schema=SCHEMAS["events"],
        )


def _with_seq(table: pa.Table, seq: np.ndarray) -> pa.Table:
    return table.set_column(table.schema.get_field_index("seq"), "seq", pa.array(seq, pa.int64()))


def _shifted(batch: Batch, offset: int) -> Batch:
    """`batch` with every row's seq moved up by `offset`."""
    if not offset:
        return batch
    return {name: _with_seq(table, table.column("seq").to_numpy() + offset) for name, table in batch.items()}


def _merged(records: pa.Table, gaps: pa.Table) -> pa.Table:
    """Records and trace gaps in one order of seq, then line, a gap before the records of its
    seq and line (what the walk lost ran before them).

    The records are in line order with their seq non-decreasing (each belongs to the last
    instruction before it), so a gap goes after those of a lower seq or an earlier line."""
    if not gaps.num_rows:
        return records
    gap_seq, gap_src = gaps.column("seq").to_numpy(), gaps.column("src").to_numpy()
    order = np.lexsort((gap_src, gap_seq))
    gaps, gap_seq, gap_src = gaps.take(order), gap_seq[order], gap_src[order]
    seq, src = records.column("seq").to_numpy(), records.column("src").to_numpy()
    lo, hi = np.searchsorted(seq, gap_seq, side="left"), np.searchsorted(seq, gap_seq, side="right")
    at = np.clip(np.searchsorted(src, gap_src, side="left"), lo, hi)
    rows = np.insert(np.arange(records.num_rows), at, records.num_rows + np.arange(gaps.num_rows))
    return pa.concat_tables([records, gaps.cast(records.schema)]).take(rows)


def _int64(column: pa.ChunkedArray) -> np.ndarray:
    return pc.fill_null(column, NO_TIME).to_numpy().astype(np.int64)


def _concat(table: str, tables: list[pa.Table]) -> pa.Table:
    return pa.concat_tables(tables) if tables else SCHEMAS[table].empty_table()
