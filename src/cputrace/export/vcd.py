"""A trace as a VCD waveform: per core the pc, the function, every register, and the memory bus.

pyvcd declares the variables and writes the header. The value changes, millions of them,
are written by a compiled formatter, a chunk of instructions at a time, so memory stays
bounded and the export runs at disk speed rather than at one Python call per change.

Time is the trace's time when it never goes backwards (and each core's instructions have
distinct times); otherwise, or with clock "insns", one step per instruction (seq). A
register write with a byte mask (only some bytes written) shows as `x`, as VCD holds whole
values; so do values the trace does not know.

An instruction that makes several memory accesses (LDM/STM, LDP/STP, a bus burst) would put
them all on the bus signals at one time, where a waveform viewer shows only the last. So
when some instruction makes more than one, time is subdivided: the timescale becomes 10 or
100... times finer (K steps per trace time unit or instruction, K the smallest power of ten
at least the most accesses of one instruction), each instruction starts at K times its
time, and its accesses follow one step apart, in trace order, on the one set of bus
signals, as a bus shows its beats. Times read in GTKWave stay the trace's; the header
comment says K.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import TYPE_CHECKING, BinaryIO

import numba
import numpy as np
import pyarrow as pa
from vcd import VCDWriter

from ..errors import CputraceError
from ..image import Image
from ..model import MEMORY_OPS
from ..store.batches import SeqFollower, read_batches
from ..store.columns import dictionary_codes, valid_of
from ..store.window import WHOLE_TRACE, Window
from ..timeunits import SECOND_EXPONENTS, is_real
from .arrowbytes import bytes_and_offsets

if TYPE_CHECKING:
    from ..store.trace import Trace
    from .registry import ExportRequest

VECTOR, STRING, UNKNOWN = 0, 1, 2
_CHUNK = 1 << 18


@numba.njit(cache=True, nogil=True)
def _render(ts, kind, ident, offset, length, values, idents, ident_offset, out, last_ts):
    """VCD value-change lines for events sorted by time; returns (bytes written, last time)."""
    p = 0
    for e in range(len(ts)):
        if ts[e] != last_ts:
            out[p] = 35  # '#'
            p += 1
            digits = 1
            t = ts[e] // 10
            while t:
                digits += 1
                t //= 10
            t = ts[e]
            for d in range(digits - 1, -1, -1):
                out[p + d] = 48 + t % 10
                t //= 10
            p += digits
            out[p] = 10
            p += 1
            last_ts = ts[e]
        start, n = offset[e], length[e]
        if kind[e] == 1:  # string: s<bytes>
            out[p] = 115
            p += 1
            for i in range(n):
                out[p] = values[start + i]
                p += 1
        elif kind[e] == 2:  # unknown vector
            out[p] = 98
            out[p + 1] = 120
            p += 2
        else:  # vector from little-endian bytes, without leading zeros
            out[p] = 98
            p += 1
            top = n - 1
            while top > 0 and values[start + top] == 0:
                top -= 1
            byte = values[start + top]
            bit = 7
            while bit > 0 and not (byte >> bit) & 1:
                bit -= 1
            for i in range(top, -1, -1):
                byte = values[start + i]
                for b in range(bit if i == top else 7, -1, -1):
                    out[p] = 48 + ((byte >> b) & 1)
                    p += 1
        out[p] = 32
        p += 1
        for i in range(ident_offset[ident[e]], ident_offset[ident[e] + 1]):
            out[p] = idents[i]
            p += 1
        out[p] = 10
        p += 1
    return p, last_ts


@dataclass
class _Events:
    """Value changes of one chunk, as parallel arrays (values point into a shared byte buffer)."""

    ts: list[np.ndarray]
    order: list[np.ndarray]  # seq * 4 + position, so changes keep trace order at one time
    rank: list[np.ndarray]  # the record within its seq and position (a memory access's fields)
    kind: list[np.ndarray]
    ident: list[np.ndarray]
    offset: list[np.ndarray]
    length: list[np.ndarray]
    buffers: list[np.ndarray]
    used: int = 0

    @classmethod
    def empty(cls) -> _Events:
        return cls([], [], [], [], [], [], [], [])

    def bytes(self, data: np.ndarray) -> int:
        """Append bytes to the value buffer; returns where they start."""
        start = self.used
        self.buffers.append(data.astype(np.uint8, copy=False))
        self.used += len(data)
        return start

    def add(self, ts, order, kind, ident, offset, length, rank=0) -> None:
        n = len(ts)
        for target, value, dtype in (
            (self.ts, ts, np.int64), (self.order, order, np.int64), (self.rank, rank, np.int64),
            (self.kind, kind, np.int8),
            (self.ident, ident, np.int32), (self.offset, offset, np.int64), (self.length, length, np.int64),
        ):  # fmt: skip
            target.append(np.broadcast_to(np.asarray(value, dtype), n))

    def render(self, idents: np.ndarray, ident_offset: np.ndarray, last_ts: int) -> tuple[bytes, int]:
        if not self.ts:
            return b"", last_ts
        # another core's instruction at the time the previous chunk ended may come before that
        # chunk's last memory access steps: it moves up to them, as VCD time never goes back
        ts, order = np.maximum(np.concatenate(self.ts), last_ts), np.concatenate(self.order)
        sort = np.lexsort((np.concatenate(self.rank), order, ts))
        kind, length = np.concatenate(self.kind)[sort], np.concatenate(self.length)[sort]
        values = np.concatenate(self.buffers) if self.buffers else np.zeros(0, np.uint8)
        size = int(np.sum(np.where(kind == VECTOR, 8 * length, length))) + len(ts) * (
            24 + int(np.max(np.diff(ident_offset)))
        )
        out = np.empty(size, np.uint8)
        n, last = _render(
            ts[sort], kind, np.concatenate(self.ident)[sort], np.concatenate(self.offset)[sort], length,
            values, idents, ident_offset, out, last_ts,
        )  # fmt: skip
        return out[:n].tobytes(), int(last)


def _uses_time(trace: Trace, window: Window) -> bool:
    """Whether trace time can be the VCD time: present, never decreasing, distinct per core."""
    last: dict[int, int] = {}
    previous = None
    for batch in read_batches(trace, "instructions", ("time", "cpu"), window):
        time = batch.column("time")
        if time.null_count:
            return False
        t = time.to_numpy()
        cpu = batch.column("cpu").to_numpy()
        if previous is not None and len(t) and t[0] < previous:
            return False
        if np.any(np.diff(t) < 0):
            return False
        for c in np.unique(cpu).tolist():
            mine = t[cpu == c]
            if (c in last and mine[0] <= last[c]) or np.any(np.diff(mine) == 0):
                return False
            last[c] = int(mine[-1])
        if len(t):
            previous = int(t[-1])
    return True


class _Variables:
    """The VCD variables, by core: pc, function, registers, memory address/data/operation."""

    def __init__(self, trace: Trace, window: Window, image: Image | None, timescale: str, comment: str):
        self.header = io.StringIO()
        writer = VCDWriter(self.header, timescale=timescale, date=None, comment=comment, init_timestamp=0)
        where = window.sql()
        cpus = trace.sql(  # a core may have register or memory records and no instructions
            f"SELECT cpu FROM instructions WHERE {where} UNION SELECT cpu FROM registers WHERE {where} "
            f"UNION SELECT cpu FROM memory WHERE {where} ORDER BY cpu"
        )
        registers = trace.sql(
            f"SELECT cpu, reg::VARCHAR AS reg, max(size) AS size FROM registers WHERE {where} "
            "GROUP BY ALL ORDER BY cpu, reg"
        ).to_pylist()
        widest = trace.sql(f"SELECT max(size) AS s FROM memory WHERE {where}").column("s")[0].as_py() or 8
        cpu_list = cpus.column("cpu").to_pylist()
        slots = max(cpu_list, default=0) + 1
        self.pc = np.full(slots, -1, np.int32)
        self.function = np.full(slots, -1, np.int32)
        self.memory = np.full((3, slots), -1, np.int32)  # address, data, operation
        self.register_names = sorted({row["reg"] for row in registers})
        self.register = np.full((slots, max(len(self.register_names), 1)), -1, np.int32)
        code = {name: i for i, name in enumerate(self.register_names)}
        variables = []

        def add(scope: str, name: str, var_type: str, size: int | None = None) -> int:
            variables.append(writer.register_var(scope, name, var_type, size=size))
            return len(variables) - 1

        for cpu in cpu_list:
            scope = f"cpu{cpu}"
            self.pc[cpu] = add(scope, "pc", "wire", 64)
            if image is not None:
                self.function[cpu] = add(scope, "function", "string")
            self.memory[:, cpu] = (
                add(f"{scope}.bus", "addr", "wire", 64),
                add(f"{scope}.bus", "data", "wire", 8 * widest),
                add(f"{scope}.bus", "op", "string"),
            )
        for row in registers:
            cpu, name = row["cpu"], row["reg"]
            self.register[cpu, code[name]] = add(f"cpu{cpu}.regs", name, "wire", 8 * row["size"])
        writer.flush()
        names = [v.ident.encode() for v in variables]
        self.idents = np.frombuffer(b"".join(names), np.uint8)
        self.ident_offset = np.concatenate([[0], np.cumsum([len(n) for n in names])]).astype(np.int64)


def _accesses_per_instruction(trace: Trace, window: Window) -> int:
    """The most memory accesses one instruction of the window makes."""
    most = trace.sql(
        f"SELECT max(n) AS n FROM (SELECT count(*) AS n FROM memory WHERE {window.sql()} GROUP BY seq)"
    )
    return most.column("n")[0].as_py() or 0


def _steps(accesses: int) -> int:
    """Time steps per instruction time: the smallest power of ten at least `accesses`."""
    steps = 1
    while steps < accesses:
        steps *= 10
    return steps


def _finer(timescale: str, steps: int) -> str:
    """`timescale` divided by `steps` (a power of ten), e.g. "1 ns" / 10 = "100 ps"."""
    magnitude, unit = timescale.split()
    exponent = SECOND_EXPONENTS[unit] + len(magnitude) - 1 - (len(str(steps)) - 1)
    if exponent < SECOND_EXPONENTS["fs"]:
        raise CputraceError(
            f"{timescale} / {steps} is finer than VCD's 1 fs; use --clock insns to show every memory access"
        )
    unit_exponent = 3 * (exponent // 3)
    name = next(n for n, e in SECOND_EXPONENTS.items() if e == unit_exponent)
    return f"{10 ** (exponent - unit_exponent)} {name}"


def write_vcd_stream(
    trace: Trace,
    out: BinaryIO,
    window: Window = WHOLE_TRACE,
    image: Image | None = None,
    clock: str | None = None,
) -> None:
    """Write the window of the trace to `out` as VCD."""
    if clock not in (None, "time", "insns"):
        raise CputraceError(f"unknown clock {clock!r}; use time or insns")
    timed = clock != "insns" and _uses_time(trace, window)
    if clock == "time" and not timed:
        raise CputraceError(
            f"{trace.path}: trace time is missing, goes backwards or repeats within a core; use --clock insns"
        )
    unit = (trace.manifest.get("time") or {}).get("unit") or ""
    if timed:
        timescale = f"1 {unit}" if is_real(unit) else "1 ns"
        comment = "cputrace: trace time" if is_real(unit) else f"cputrace: time in {unit}"
    else:
        timescale, comment = "1 ns", "cputrace: one time step per instruction (seq)"
    steps = _steps(_accesses_per_instruction(trace, window))
    if steps > 1:
        per = f"{unit} of time" if timed else "instruction"
        timescale = _finer(timescale, steps)
        comment += f"; {steps} steps per {per}, an instruction's memory accesses one step apart"
    variables = _Variables(trace, window, image, timescale, comment)
    out.write(variables.header.getvalue().encode())
    names = [s.name for s in image.symbols] if image is not None else []
    function_names = np.frombuffer("".join([*names, "?"]).encode(), np.uint8)
    function_offset = np.concatenate([[0], np.cumsum([len(n.encode()) for n in [*names, "?"]])]).astype(
        np.int64
    )
    ops = np.frombuffer(b"".join(op.encode() for op in MEMORY_OPS), np.uint8)
    registers = SeqFollower(
        read_batches(trace, "registers", ("cpu", "reg", "size", "value", "wide", "mask"), window)
    )
    memory = SeqFollower(
        read_batches(trace, "memory", ("cpu", "op", "size", "addr", "value", "wide"), window)
    )
    last_function: dict[int, int] = {}
    last_ts = 0  # the header ends at #0
    for batch in read_batches(trace, "instructions", ("cpu", "pc", "time"), window, _CHUNK):
        seq = batch.column("seq").to_numpy()
        cpu = batch.column("cpu").to_numpy()
        pc = batch.column("pc").to_numpy().astype(np.uint64)
        ts = (batch.column("time").to_numpy() if timed else seq) * steps
        events = _Events.empty()
        base = events.bytes(pc.view(np.uint8))
        events.add(ts, seq * 4, VECTOR, variables.pc[cpu], base + 8 * np.arange(len(pc)), 8)
        if image is not None:
            _function_events(
                events, image, seq, ts, cpu, pc, variables, last_function, function_names, function_offset
            )
        regs = registers.upto(int(seq[-1]))
        if regs is not None:
            _register_events(events, regs, seq, ts, variables)
        mem = memory.upto(int(seq[-1]))
        if mem is not None:
            _memory_events(events, mem, seq, ts, variables, ops)
        text, last_ts = events.render(variables.idents, variables.ident_offset, last_ts)
        out.write(text)


def _times_of(rows_seq: np.ndarray, seq: np.ndarray, ts: np.ndarray) -> np.ndarray:
    return ts[np.minimum(np.searchsorted(seq, rows_seq), len(seq) - 1)]


def _function_events(events, image, seq, ts, cpu, pc, variables, last_function, names, name_offset) -> None:
    index = image.symbols.lookup_many(pc).astype(np.int64)
    index = np.where(index < 0, len(name_offset) - 2, index)  # "?"
    for c in np.unique(cpu).tolist():
        rows = np.flatnonzero(cpu == c)
        mine = index[rows]
        previous = np.r_[last_function.get(c, -1), mine[:-1]]
        changed = rows[mine != previous]
        last_function[c] = int(mine[-1])
        if len(changed):
            base = events.bytes(names)
            chosen = index[changed]
            events.add(
                ts[changed], seq[changed] * 4 + 1, STRING, int(variables.function[c]),
                base + name_offset[chosen], name_offset[chosen + 1] - name_offset[chosen],
            )  # fmt: skip


def _vector_values(events: _Events, table: pa.Table, count_size: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(offset, length) of each row's value bytes: `value` (first `size` bytes) or `wide`."""
    narrow = table.column("value").fill_null(0).to_numpy().astype(np.uint64)
    base = events.bytes(narrow.view(np.uint8))
    offset = base + 8 * np.arange(table.num_rows)
    length = np.minimum(count_size, 8)
    is_wide = valid_of(table.column("wide"))
    if is_wide.any():
        wide_data, wide_offset = bytes_and_offsets(table.column("wide"))
        wide_base = events.bytes(wide_data)
        offset = np.where(is_wide, wide_base + wide_offset[:-1], offset)
        length = np.where(is_wide, np.diff(wide_offset), length)
    return offset, length


def _register_events(events: _Events, regs: pa.Table, seq, ts, variables: _Variables) -> None:
    rseq = regs.column("seq").to_numpy()
    cpu = regs.column("cpu").to_numpy().astype(np.int64)
    code = {name: i for i, name in enumerate(variables.register_names)}
    names = np.concatenate([dictionary_codes(c, code.__getitem__, -1) for c in regs.column("reg").chunks])
    offset, length = _vector_values(events, regs, regs.column("size").to_numpy().astype(np.int64))
    whole = (valid_of(regs.column("value")) | valid_of(regs.column("wide"))) & ~valid_of(regs.column("mask"))
    kind = np.where(whole, VECTOR, UNKNOWN)
    events.add(_times_of(rseq, seq, ts), rseq * 4 + 2, kind, variables.register[cpu, names], offset, length)


def _memory_events(events: _Events, mem: pa.Table, seq, ts, variables: _Variables, ops: np.ndarray) -> None:
    mseq = mem.column("seq").to_numpy()
    cpu = mem.column("cpu").to_numpy().astype(np.int64)
    rank = np.arange(len(mseq))
    when = _times_of(mseq, seq, ts) + rank - np.searchsorted(mseq, mseq)  # one step per access of a seq
    order = mseq * 4 + 3
    addr = mem.column("addr").to_numpy().astype(np.uint64)
    base = events.bytes(addr.view(np.uint8))
    events.add(when, order, VECTOR, variables.memory[0, cpu], base + 8 * rank, 8, rank)
    offset, length = _vector_values(events, mem, mem.column("size").to_numpy().astype(np.int64))
    known = valid_of(mem.column("value")) | valid_of(mem.column("wide"))
    events.add(when, order, np.where(known, VECTOR, UNKNOWN), variables.memory[1, cpu], offset, length, rank)
    op = np.concatenate([dictionary_codes(c, MEMORY_OPS.index, 0) for c in mem.column("op").chunks])
    base = events.bytes(ops)
    events.add(when, order, STRING, variables.memory[2, cpu], base + op.astype(np.int64), 1, rank)


def write_vcd(request: ExportRequest) -> None:
    """The `vcd` exporter: --image adds each core's current function."""
    with open(request.output, "wb") as out:
        write_vcd_stream(request.trace, out, request.window, request.image, request.clock)
