"""Tarmac decoding: compiled scan of line chunks on both cores, then in-order assembly.

Chunks of whole lines are scanned in worker threads (the scanner releases the GIL). The main
thread takes the results in input order, parses the lines the scanner left to the full
grammar, carries the state that crosses lines (time and core of continuation lines, the
instruction each record belongs to) and builds Arrow tables.

What crosses lines is a `Carry`, so a byte range of the input (a part of a split input,
split.py) decodes from a given one (`RangeDecode`) and says what its own result depended on
(`RangeFacts`): the parts of an input decode side by side and are checked to join up.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...inputs import InputFile
from ...model import ISA_NAMES, SCHEMAS, Flag, Isa
from ..base import Batch, DecodeContext
from ..linerows import canonical_names, merged, nonempty, numbered, scanned_ahead, strings
from .grammar import LineError, LineStamp, Rows, TarmacLineParser
from .options import BYTE_ORDER, DEFAULT_ISA
from .scan import KIND_LONG, KIND_SLOW, MEM_L, MEM_NS, MEM_T, MEM_X, TIME_UNITS, Scan, scan_chunk
from .stitch import NO_SEQ, assign_seq, fill_forward, update_last_seq
from .timescale import TimeScale

_MEMORY_ATTRS = [
    " ".join(name for bit, name in ((MEM_X, "X"), (MEM_T, "T"), (MEM_L, "L"), (MEM_NS, "NS")) if code & bit)
    or None
    for code in range(16)
]


MAX_CORES = 1 << 16
"""Core numbers are uint16."""


@dataclass
class Carry:
    """State that crosses chunk boundaries: all that decoding the lines after a point takes
    from the lines before it (the line parser's own state never reaches past an instruction
    line, where inputs are split)."""

    seq_base: int = 0
    line: int = 1  # the number of the next chunk's first line
    time: int | None = None
    cpu: int = 0
    last_seq: np.ndarray = field(default_factory=lambda: np.full(MAX_CORES, NO_SEQ, np.int64))
    ahead: dict[str, pa.Table] = field(default_factory=dict)  # rows of instructions still to come
    unit: str | None = None  # the stored time unit, once a line has decided it

    def joins(self, start: Carry, facts: RangeFacts) -> bool:
        """Whether a range decoded from `start` comes out as it would from this carry: the same
        numbering, unit and rows held back, and the same time, core and last instructions
        where the range's lines took them from its start."""
        return (
            (self.seq_base, self.line, self.unit) == (start.seq_base, start.line, start.unit)
            and self.ahead.keys() == start.ahead.keys()
            and all(self.ahead[name].equals(start.ahead[name]) for name in self.ahead)
            and (facts.time_given or self.time == start.time)
            and (facts.cpu_given or self.cpu == start.cpu)
            and all(self.last_seq[cpu] == start.last_seq[cpu] for cpu in facts.carried_cpus)
        )


@dataclass
class RangeFacts:
    """What a range's rows took from the carry it started from, besides numbering and unit."""

    time_given: bool = True  # its first line has a time: no line takes the carried time
    cpu_given: bool = True  # its first line names its core: no line takes the carried core
    carried_cpus: set[int] = field(default_factory=set)  # cores whose records took the carried last_seq
    instructions: bool = False
    flow_line: int | None = None  # the first FD/FI record's line, before any instruction


class TarmacDecoder:
    name = "tarmac"

    def decode(self, source: InputFile, ctx: DecodeContext) -> Iterator[Batch]:
        image = ctx.image
        if image is None:
            whole = RangeDecode(source, ctx, Carry())
            yield from whole.batches()
            note_flow_only(whole.facts, source.path, ctx)
            return
        from .flowonly import BranchFlow  # the walk (capstone, compiled flow) loads only when needed

        flow = BranchFlow(image, ctx)  # a program-flow trace's FD/FI records walk the image
        for batch in RangeDecode(source, ctx, Carry()).batches():
            yield flow.expand(batch)


class RangeDecode:
    """The records of an input, or of a byte range of it, decoded from a carry: `batches`, then
    `end` (the carry after its last line) and `facts` (see RangeFacts).

    The rows held back for instructions still to come are given at the end of the input
    (`final`: a trace cut short); a range before the last keeps them in `end`."""

    def __init__(
        self, source: InputFile, ctx: DecodeContext, start: Carry,
        byte_range: tuple[int, int] | None = None, final: bool = True,
    ) -> None:  # fmt: skip
        self.source = source
        self.byte_range = byte_range
        self.final = final
        big_endian = _big_endian(ctx)
        parser = TarmacLineParser(Isa[ctx.option(DEFAULT_ISA)], big_endian, TimeScale(unit=start.unit))
        self.assembler = _Assembler(source, ctx, parser, big_endian, start)
        self.facts = self.assembler.facts
        self.ctx = ctx

    @property
    def end(self) -> Carry:
        return self.assembler.carry

    def batches(self) -> Iterator[Batch]:
        assembler = self.assembler
        held: Batch | None = None  # each batch waits for the next: a line there may complete it
        for batch in _assembled(self.source, assembler, self.byte_range):
            if held is not None:
                yield assembler.completed(held)
            held = batch
            self._note_flow(batch)
        if held is not None:
            yield held
        rest = assembler.carry.ahead  # rows of instructions that never came (a trace cut short)
        if rest and self.final:
            yield rest
            assembler.carry.ahead = {}
        assembler.carry.unit = assembler.timescale.unit
        self.ctx.notes["time_unit"] = assembler.timescale.unit

    def _note_flow(self, batch: Batch) -> None:
        """Keep the line of the first FD/FI record before any instruction (see note_flow_only)."""
        facts = self.facts
        facts.instructions = facts.instructions or batch["instructions"].num_rows > 0
        if facts.flow_line is None and not facts.instructions and batch["events"].num_rows:
            events = batch["events"]
            flow = pc.and_(
                pc.equal(events.column("kind").cast(pa.string()), "branch"),
                pc.match_substring_regex(events.column("name"), "^F[DI]"),
            )
            lines = events.filter(pc.fill_null(flow, False)).column("src")
            facts.flow_line = lines[0].as_py() if len(lines) else None


def note_flow_only(facts: RangeFacts, path: str, ctx: DecodeContext) -> None:
    """A warning (an error with --strict) if the input is a flow-only trace: FD/FI records and
    no instructions, which only the program image can rebuild."""
    if facts.flow_line is not None and not facts.instructions:
        ctx.doubt(
            path,
            str(facts.flow_line),
            "a flow-only trace (FD/FI records and no instructions): give the program image with "
            "--image PATH to rebuild its instructions; only its branches are kept",
        )


def _assembled(
    source: InputFile, assembler: _Assembler, byte_range: tuple[int, int] | None
) -> Iterator[Batch]:
    """Chunks scanned two at a time on worker threads, assembled in input order."""
    scan = partial(_scan_and_build, max_line=source.max_line)
    for chunk, scanned in scanned_ahead(source.line_chunks(byte_range=byte_range), scan):
        yield assembler.assemble(chunk, scanned)


def _units_of(scan: Scan, has_time: np.ndarray) -> list[int]:
    """The time unit codes the scanner's timed lines use."""
    return (np.flatnonzero(np.bincount(scan.tunit[has_time], minlength=len(TIME_UNITS)))).tolist()


def _with_numbers(events: pa.Table, numbers: list[tuple[int, int | None]]) -> pa.Table:
    """`events` with the exception numbers given for the events of some lines."""
    src = events.column("src").to_numpy()
    at = events.schema.get_field_index("number")
    column = events.column(at).to_pylist()
    for line, number in numbers:
        for row in np.flatnonzero(src == line).tolist():
            column[row] = number
    return events.set_column(at, "number", pa.array(column, pa.int64()))


def _big_endian(ctx: DecodeContext) -> bool:
    """The `byte_order` option: `little` (default) or `big` (MR/MW values big-endian)."""
    return ctx.option(BYTE_ORDER) == "big"


class _Assembler:
    """Turns one scanned chunk into model tables, in input order."""

    def __init__(
        self, source: InputFile, ctx: DecodeContext, parser: TarmacLineParser, big_endian: bool, carry: Carry
    ) -> None:
        self.path = source.path
        self.max_line = source.max_line
        self.big_endian = big_endian
        self.ctx = ctx
        self.parser = parser
        self.timescale = parser.timescale
        self.carry = carry
        self.facts = RangeFacts()
        self._first = True
        self._seen = np.zeros(MAX_CORES, np.bool_)  # cores with an instruction in these lines

    def assemble(self, chunk: memoryview, scanned: _Scanned) -> Batch:
        scan = scanned.scan
        first = self.carry.line
        self.carry.line += scan.n_lines
        fast = {name: numbered(table, first) for name, table in scanned.tables.items()}
        rows = Rows()
        has_time = (scan.tunit > 0) & (scan.kind < KIND_SLOW)  # the slow path reads its own lines' times
        slow_time, late = self._slow_lines(chunk, scan, first, has_time, rows)
        if late:
            kept = np.ones(scan.n_lines, bool)
            kept[late] = has_time[late] = False
            fast = {
                name: table.filter(pa.array(kept[table.column("src").to_numpy() - first]))
                for name, table in fast.items()
            }
        line_time, line_has_time = self._line_times(scan, has_time, slow_time)
        if self._first and scan.n_lines:
            self._first = False
            self.facts.time_given = bool(has_time[0] or 0 in slow_time)
            self.facts.cpu_given = bool(scan.cpu[0] >= 0)
        line_cpu = self._line_cpus(scan.cpu)

        insns = merged(fast["instructions"], rows.instructions.to_table())
        insn_line = insns.column("src").to_numpy() - first
        insn_cpu = line_cpu[insn_line]
        batch: Batch = {}
        batch["instructions"] = self._stamp(
            insns, insn_line, line_time, line_has_time, line_cpu,
            np.arange(self.carry.seq_base, self.carry.seq_base + len(insn_line), dtype=np.int64),
        )  # fmt: skip
        for name, table in (
            ("registers", merged(fast["registers"], rows.registers.to_table())),
            ("memory", merged(self._core_memory(fast["memory"]), rows.memory.to_table())),
            ("events", rows.events.to_table()),  # only the line parser makes events, in order
        ):
            line = table.column("src").to_numpy() - first
            seq = self._seq_of(line, line_cpu[line], insn_line, insn_cpu)
            self._note_carried(line, line_cpu[line], insn_line, insn_cpu)
            batch[name] = self._stamp(table, line, line_time, line_has_time, line_cpu, seq)

        self._seen[insn_cpu] = True
        update_last_seq(insn_cpu, self.carry.seq_base, self.carry.last_seq)
        self.carry.seq_base += len(insn_line)
        for name in ("registers", "memory", "events"):
            batch[name] = self._in_seq_order(name, batch[name], len(insn_line) > 0)
        return batch

    def _note_carried(
        self, line: np.ndarray, cpu: np.ndarray, insn_line: np.ndarray, insn_cpu: np.ndarray
    ) -> None:
        """Note the cores of records that took their seq from the carry's `last_seq`: records of
        a core before its first instruction in these lines."""
        fresh = ~self._seen[cpu]
        if not fresh.any():
            return
        first_line = np.full(MAX_CORES, np.iinfo(np.int64).max, np.int64)
        cores, at = np.unique(insn_cpu, return_index=True)
        first_line[cores] = insn_line[at]
        cpu, line = cpu[fresh], line[fresh]
        self.facts.carried_cpus.update(np.unique(cpu[line < first_line[cpu]]).tolist())

    def _in_seq_order(self, name: str, table: pa.Table, keep_back: bool) -> pa.Table:
        """`table` sorted by seq (then line), the rows of instructions still to come kept back.

        Records of a core before its first instruction belong to the next instruction of
        any core, so on a multi-core trace they can come before rows of lower seq, or belong
        to an instruction of a later chunk: a store's tables are in seq order all the same.
        Only a chunk with instructions keeps rows back (a flow-only trace has none, and its
        records all wait for the instructions the image walk makes of them).
        """
        waiting = self.carry.ahead.pop(name, None)
        if waiting is not None:
            table = pa.concat_tables([waiting, table])
        seq = table.column("seq").to_numpy()
        later = seq >= self.carry.seq_base
        if keep_back and later.any():
            self.carry.ahead[name] = table.filter(pa.array(later))
            table, seq = table.filter(pa.array(~later)), seq[~later]
        if len(seq) > 1 and bool((seq[1:] < seq[:-1]).any()):
            table = table.take(pa.array(np.lexsort((table.column("src").to_numpy(), seq))))
        return table

    def _slow_lines(
        self, chunk: memoryview, scan: Scan, first: int, has_time: np.ndarray, rows: Rows
    ) -> tuple[dict[int, int], list[int]]:
        """Parse the lines the scanner left to the full grammar, in line order, rejecting those
        too long, not UTF-8 or not Tarmac, and the scanner's lines whose time overflows once
        converted (known when the unit is). The times of the lines parsed here, and the
        scanner's lines rejected.

        The first timed line, fast or slow, decides the stored time unit.
        """
        slow_time: dict[int, int] = {}
        first_timed = int(np.argmax(has_time)) if has_time.any() else scan.n_lines
        late: list[int] | None = None  # the scanner's lines whose time overflows, once known
        rejected = 0
        for li in [*np.flatnonzero(scan.kind >= KIND_SLOW).tolist(), scan.n_lines]:
            if self.timescale.unit is None and first_timed < li:
                self.timescale.decide(TIME_UNITS[scan.tunit[first_timed]], False)
            if late is None and self.timescale.unit is not None:
                late = self._late_lines(scan, has_time)
            while late and rejected < len(late) and late[rejected] < li:
                at = late[rejected]
                self._reject(first + at, self._line(chunk, scan, at), self.timescale.out_of_range(None), rows)
                rejected += 1
            if li == scan.n_lines:
                break
            raw = self._line(chunk, scan, li)
            if scan.kind[li] == KIND_LONG:
                self._reject(first + li, raw, f"a line of at most {self.max_line:,} bytes", rows)
                continue
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                self._reject(first + li, raw, "UTF-8 text", rows)
                continue
            try:
                stamp = self.parser.parse(text, first + li, rows)
            except LineError as exc:
                self._reject(first + li, raw, str(exc), rows)
                stamp = exc.stamp or LineStamp()
            if stamp.time is not None:
                slow_time[li] = stamp.time
            if stamp.cpu is not None:
                scan.cpu[li] = stamp.cpu
        return slow_time, late or []

    def _late_lines(self, scan: Scan, has_time: np.ndarray) -> list[int]:
        """The scanner's lines whose time does not fit 64 bits in the stored unit (only a
        unit converted to a finer one can overflow: the scanner reads at most 18 digits)."""
        late = np.zeros(scan.n_lines, bool)
        for code in _units_of(scan, has_time):
            unit = TIME_UNITS[code]
            if self.timescale.factor(unit).numerator > 1:
                late |= has_time & (scan.tunit == code) & (scan.time > self.timescale.limit(unit))
        return np.flatnonzero(late).tolist()

    def _line(self, chunk: memoryview, scan: Scan, li: int) -> bytes:
        """Line `li` of the chunk without its newline (at most its first `max_line` bytes)."""
        start = scan.line_start[li]
        return bytes(chunk[start : min(scan.line_start[li + 1], start + self.max_line)]).rstrip(b"\r\n")

    def _reject(self, lineno: int, raw: bytes, expected: str, rows: Rows) -> None:
        """A line kept as a text event, with a warning (an error with --strict)."""
        text = raw.decode("utf-8", "replace")
        self.ctx.reject(self.path, f"{lineno}", expected, text)
        rows.events.append(kind="text", text=text, src=lineno)

    def completed(self, batch: Batch) -> Batch:
        """The previous chunk's batch, with what lines of the chunk after it added to its rows."""
        numbers = self.parser.take_earlier_numbers()
        if not numbers:
            return batch
        if "events" in self.carry.ahead:
            self.carry.ahead["events"] = _with_numbers(self.carry.ahead["events"], numbers)
        return {**batch, "events": _with_numbers(batch["events"], numbers)}

    def _core_memory(self, table: pa.Table) -> pa.Table:
        """The scanner's MR/MW rows, their printed values read in the trace's byte order."""
        if not self.big_endian or not table.num_rows:
            return table
        size = table.column("size").to_numpy().astype(np.uint64)
        value = table.column("value").to_numpy().byteswap() >> (np.uint64(64) - np.uint64(8) * size)
        return table.set_column(table.schema.get_field_index("value"), "value", pa.array(value, pa.uint64()))

    # -- time and core of every line -------------------------------------------------------

    def _line_times(
        self, scan: Scan, has_time: np.ndarray, slow_time: dict[int, int]
    ) -> tuple[np.ndarray, np.ndarray]:
        """Every line's time in the stored unit (carried on to lines without one), and whether
        it has one."""
        times = scan.time
        for code in _units_of(scan, has_time):
            factor = self.timescale.factor(TIME_UNITS[code])
            if factor != 1:
                sel = has_time & (scan.tunit == code)
                times[sel] = times[sel] * factor.numerator // factor.denominator
        has = has_time
        if slow_time:
            has = has_time.copy()
            idx = np.fromiter(slow_time.keys(), np.int64, len(slow_time))
            times[idx] = np.fromiter(slow_time.values(), np.int64, len(slow_time))
            has[idx] = True
        carry = self.carry.time
        filled, known, last, have = fill_forward(times, has, carry or 0, carry is not None)
        self.carry.time = int(last) if have else None
        return filled, known

    def _line_cpus(self, cpu: np.ndarray) -> np.ndarray:
        if len(cpu) == 0 or cpu.max() < 0:  # no line names its core: all on the current one
            return np.full(len(cpu), self.carry.cpu, np.uint16)
        filled, _, last, _ = fill_forward(cpu, cpu >= 0, self.carry.cpu, True)
        self.carry.cpu = int(last)
        return filled.astype(np.uint16)

    def _seq_of(
        self, line: np.ndarray, cpu: np.ndarray, insn_line: np.ndarray, insn_cpu: np.ndarray
    ) -> np.ndarray:
        """Each record belongs to the last instruction of its core before it, else the next."""
        return assign_seq(line, cpu, insn_line, insn_cpu, self.carry.seq_base, self.carry.last_seq)

    @staticmethod
    def _stamp(
        table: pa.Table,
        line: np.ndarray,
        line_time: np.ndarray,
        line_has_time: np.ndarray,
        line_cpu: np.ndarray,
        seq: np.ndarray,
    ) -> pa.Table:
        time = pa.array(line_time[line], pa.int64(), mask=~line_has_time[line])
        table = table.set_column(table.schema.get_field_index("seq"), "seq", pa.array(seq))
        table = table.set_column(table.schema.get_field_index("time"), "time", time)
        return table.set_column(
            table.schema.get_field_index("cpu"), "cpu", pa.array(line_cpu[line], pa.uint16())
        )


@dataclass
class _Scanned:
    """A chunk's scan and the tables of the lines the scanner understood."""

    scan: Scan
    tables: dict[str, pa.Table]


def _scan_and_build(chunk: memoryview, max_line: int) -> _Scanned:
    """Worker-thread half of decoding: everything that needs no state from earlier chunks.

    The tables' `src` counts lines from 0 in the chunk; the assembler, which knows where the
    chunk starts, numbers them in the input.
    """
    scan = scan_chunk(chunk, max_line)
    return _Scanned(
        scan,
        {
            "instructions": _fast_instructions(scan),
            "registers": _fast_registers(scan),
            "memory": _fast_memory(scan),
        },
    )


def _fast_instructions(scan: Scan) -> pa.Table:
    f = scan.insn
    n = len(f["line"])
    nulls = pa.nulls(n, pa.int64())
    opcode = pa.array(f["opcode"], pa.uint32(), mask=f["failed"])
    flags = np.where(f["failed"], np.uint16(Flag.FETCH_FAILED), np.uint16(0))
    disasm = nonempty(strings(f["dis_off"], f["dis_buf"]))
    fast = pa.Table.from_arrays(
        [
            nulls,
            nulls,
            pa.nulls(n, pa.uint16()),
            pa.array(f["pc"], pa.uint64()),
            opcode,
            pa.array(f["size"], pa.uint8()),
            pa.DictionaryArray.from_arrays(pa.array(f["isa"].astype(np.int32)), ISA_NAMES),
            nonempty(strings(f["mode_off"], f["mode_buf"])).dictionary_encode(),
            pa.array(f["executed"], pa.bool_()),
            nulls,
            pa.array(flags, pa.uint16()),
            disasm,
            pa.array(f["line"], pa.int64()),
        ],
        schema=SCHEMAS["instructions"],
    )
    return fast


def _fast_registers(scan: Scan) -> pa.Table:
    f = scan.reg
    n = len(f["line"])
    names = strings(f["name_off"], f["name_buf"]).dictionary_encode()
    fast = pa.Table.from_arrays(
        [
            pa.nulls(n, pa.int64()),
            pa.nulls(n, pa.int64()),
            pa.nulls(n, pa.uint16()),
            canonical_names(names, f["nbytes"]),
            pa.array(f["nbytes"], pa.uint8()),
            pa.array(f["value"], pa.uint64()),
            pa.nulls(n, pa.binary()),
            pa.nulls(n, pa.binary()),
            pa.array(f["line"], pa.int64()),
        ],
        schema=SCHEMAS["registers"],
    )
    return fast


def _fast_memory(scan: Scan) -> pa.Table:
    f = scan.mem
    n = len(f["line"])
    fast = pa.Table.from_arrays(
        [
            pa.nulls(n, pa.int64()),
            pa.nulls(n, pa.int64()),
            pa.nulls(n, pa.uint16()),
            pa.DictionaryArray.from_arrays(pa.array(f["op"].astype(np.int32)), ["R", "W"]),
            pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int32)), ["core"]),
            pa.array(f["size"], pa.uint8()),
            pa.array(f["addr"], pa.uint64()),
            pa.array(f["paddr"], pa.uint64(), mask=~f["has_paddr"]),
            pa.array(f["value"], pa.uint64()),
            pa.nulls(n, pa.binary()),
            pa.array(_MEMORY_ATTRS, pa.string()).take(pa.array(f["attr"].astype(np.int32))),
            pa.array(f["line"], pa.int64()),
        ],
        schema=SCHEMAS["memory"],
    )
    return fast
