"""Writing a store back out as a Fast-Models-style Tarmac trace.

Every table's rows for the selected instructions are written in their input order (`seq`,
then `src`), so ingesting the output gives the same instructions, register writes, memory
accesses and events. This is what lets Tarmac tools read traces from any input format.

Every line is in a form that cputrace's Tarmac reader accepts with `--strict` and that Arm's
Tarmac Trace Utilities parse without a warning. What Tarmac cannot say is written in the
nearest such form (docs/formats.md, "Tarmac export"):
- events of other formats, and Tarmac records those tools do not know (FD/FI, system
  operations, unparsed lines): exceptions as `E <address> [<value1>] <number> <name>`, flow
  records as `BR (<target>) <ISA>`, everything else as `E DebugEvent_<kind>.<name> <value>
  <text>`, which the tools show as text;
- an unknown condition outcome (executed null) as `IT`: Tarmac has no third state;
- an access whose data is unknown as an `LD`/`ST` diagram with `##` bytes; bus accesses as
  core ones (`M...`): the tools know no bus records;
- a fetch that failed as `ES (address:--------)`, the only form with no opcode;
- a row without time after a line with one (Tarmac lines without a time take the previous
  line's) with its core's last time, or before that its core's first: each core's times stay
  in order when read back.

Records are formatted by compiled loops straight into a byte buffer, a batch of
instructions (and their records) at a time: per row only numbers and copied bytes. What
depends on a few distinct values (the ISA letter and mode, a memory access's record word
from its op, source, size and attributes, a register's name, an event's label) is formatted
once per distinct value by the record functions below, which also serve the other writers.
"""

from __future__ import annotations

import re
from itertools import pairwise
from typing import TYPE_CHECKING, TextIO

import numba
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..store.columns import numpy_of, valid_of
from .arrowbytes import bytes_and_offsets

if TYPE_CHECKING:
    from ..store.trace import Trace
    from ..store.window import Window

ISA_LETTER = {"A32": "A", "T32": "T", "A64": "O", "T32EE": "X"}
INSTRUCTION_COLUMNS = (
    "seq",
    "time",
    "cpu",
    "pc",
    "opcode",
    "size",
    "isa",
    "mode",
    "executed",
    "disasm",
    "src",
)
"""What the writer reads of the instructions."""
_QUERY = 1 << 19  # instructions whose records are read in one query
_BATCH = 1 << 16  # instructions rendered at a time
_TARMAC_UNITS = {"cycles": "cyc"}  # units of other formats, as Tarmac spells them
_HEX_DIGITS = np.frombuffer(b"0123456789abcdef", np.uint8)
_INSTRUCTION, _MEMORY, _REGISTER, _EVENT = 0, 1, 2, 3  # order of records at one (seq, src)
_LINE_ROOM = 200  # bytes a record needs besides its variable-length fields (time, unit, numbers...)
_DIAGRAM_ROOM = 120  # bytes of an LD/ST diagram line besides its unit and trailing attributes
_LOWEST_SEQ = -(1 << 63)

# Event lines (`event_record`): the record as read, or one made from the event's columns.
_VERBATIM, _EXCEPTION, _BRANCH, _DEBUG, _EXC = 0, 1, 2, 3, 4
_QUIET_RECORDS = frozenset(
    {"E", "EXC", "ES", "IT", "IS", "IF", "CADI", "P", "CACHE", "TTW", "BR", "INFO_EXCEPTION_REASON",
     "SIGNAL", "Tarmac"}
)  # fmt: skip
"""Tarmac records (first words) that the reference tools read without a warning."""
_FIRST_WORD = re.compile(r"[A-Za-z0-9_.#-]*")  # a record's first word, as the reference tools lex it
_LABEL_UNSAFE = re.compile(r"[^A-Za-z0-9_.#-]")
_HEXISH = re.compile(r"[0-9a-fA-F]+")


class TarmacWriter:
    """Writes a store's instructions, batch by batch, with everything that belongs to them.

    With a `window`, the rows in it that belong to no instruction (an AHB bus trace, records
    after the last instruction) are written too, in seq order; without, only the rows of the
    selected instructions (a `--where` selection leaves the others' rows out).
    """

    def __init__(self, trace: Trace, out: TextIO, window: Window | None = None) -> None:
        self.trace = trace
        self.out = out
        self.window = window
        unit = (trace.manifest.get("time") or {}).get("unit") or "clk"
        cpus = trace.manifest.get("cpus") or []
        self.prefix = _Prefix(_TARMAC_UNITS.get(unit, unit), any(cpus))  # cores named unless cpu0 alone
        self.clock = _Clock(trace, max(cpus, default=0))
        self.origins = _Origins(trace)
        self._covered: int | None = None  # the last seq whose rows are written
        self._opening: int | None = None  # the first instruction written

    def write(self, selection: pa.Table) -> None:
        """Write the instructions in `selection` (ordered by seq) and what belongs to them."""
        for start in range(0, selection.num_rows, _QUERY):
            part = selection.slice(start, _QUERY)
            seq = numpy_of(part.column("seq"), np.int64)
            low = self._first_uncovered(int(seq[0]))
            related = {name: self._related(name, seq, low) for name in ("registers", "memory", "events")}
            for first in range(0, part.num_rows, _BATCH):
                batch = part.slice(first, _BATCH)
                high = int(seq[min(first + _BATCH, part.num_rows) - 1])
                lowest = int(seq[first]) if self.window is None else low
                self._emit(batch, {name: _between(rows, lowest, high) for name, rows in related.items()})
                low = high + 1
            self._covered = int(seq[-1])

    def _first_uncovered(self, first_seq: int) -> int:
        """The lowest seq whose rows the next instructions (from `first_seq`) take along."""
        if self.window is None:
            return first_seq
        if self._covered is not None:
            return self._covered + 1
        return self.window.start if self.window.start is not None else _LOWEST_SEQ

    def finish(self) -> None:
        """With a window: the rows after the last instruction (all of them if there was none)."""
        if self.window is None:
            return
        after = "TRUE" if self._covered is None else f"seq > {self._covered}"
        condition = f"{after} AND {self.window.sql()}"
        rows = {name: self.trace.sql(f"SELECT * FROM {name} WHERE {condition} ORDER BY seq, src")
                for name in ("registers", "memory", "events")}  # fmt: skip
        if any(table.num_rows for table in rows.values()):
            self._emit(self.trace.sql("SELECT * FROM instructions WHERE FALSE"), rows)

    def _related(self, name: str, seq: np.ndarray, low: int) -> pa.Table:
        """Rows of table `name` from seq `low` to the last of `seq`: with no window, only those
        of the instructions in `seq` (the range lets the scan skip row groups)."""
        rows = self.trace.sql(
            f"SELECT * FROM {name} WHERE seq BETWEEN {low} AND {int(seq[-1])} ORDER BY seq, src"
        )
        if self.window is not None:
            return rows
        return rows.filter(np.isin(numpy_of(rows.column("seq"), np.int64), seq))

    def _emit(self, batch: pa.Table, related: dict[str, pa.Table]) -> None:
        memory = related["memory"]
        tables = [
            (batch, _INSTRUCTION),
            # an access whose address the input lacks (LEON ITB loads): Tarmac cannot say it
            (memory.filter(pc.is_valid(memory.column("addr"))), _MEMORY),
            (related["registers"], _REGISTER),
            (related["events"], _EVENT),
        ]
        times = self.clock.fill([table for table, _ in tables])
        rendered = _Rendered(self.prefix)
        render = (_add_instructions, _add_memory, _add_registers, self._add_events)
        for (table, _), (time, has_time), add in zip(tables, times, render, strict=True):
            add(rendered, table, self.prefix.columns(table, time, has_time))
        if self._opening is None and batch.num_rows:
            self._opening = int(batch.column("seq")[0].as_py())
        _write(self.out, rendered.text(self._opening, self.origins))

    def _add_events(self, rendered: _Rendered, table: pa.Table, prefix: tuple) -> None:
        _add_events(rendered, table, prefix, self.origins.tarmac(numpy_of(table.column("seq"), np.int64)))


def write_tarmac(trace: Trace, selection: pa.Table, out: TextIO) -> None:
    """Write the instructions in `selection` (ordered by seq) and everything that belongs to them."""
    TarmacWriter(trace, out).write(selection)


def _between(rows: pa.Table, low: int, high: int) -> pa.Table:
    """The rows (sorted by seq) with low <= seq <= high."""
    seq = numpy_of(rows.column("seq"), np.int64)
    start = int(np.searchsorted(seq, low, side="left"))
    return rows.slice(start, int(np.searchsorted(seq, high, side="right")) - start)


def _write(out: TextIO, data: np.ndarray) -> None:
    """UTF-8 bytes to a text stream: straight to its binary buffer when it has one."""
    buffer = getattr(out, "buffer", None)
    if buffer is None:
        out.write(data.tobytes().decode())
        return
    out.flush()
    buffer.write(memoryview(data))


class _Prefix:
    """`TIME UNIT cpuN ` before a record: the unit, and whether cores are named."""

    def __init__(self, unit: str, multicore: bool) -> None:
        self.unit = np.frombuffer(unit.encode(), np.uint8)
        self.multicore = multicore

    def columns(self, table: pa.Table, time: np.ndarray, has_time: np.ndarray) -> tuple:
        """The render functions' first arguments: time, has time and cpu per row, unit, multicore."""
        return time, has_time, numpy_of(table.column("cpu"), np.int64), self.unit, self.multicore


class _Origins:
    """Which rows came from Tarmac inputs: their events' text is a Tarmac record already."""

    def __init__(self, trace: Trace) -> None:
        inputs = trace.manifest.get("inputs") or []
        self.first_seq = np.array([entry.get("first_seq", 0) for entry in inputs], np.int64)
        self.is_tarmac = np.array([entry.get("format") == "tarmac" for entry in inputs], np.bool_)
        self.only_tarmac = bool(len(inputs)) and bool(self.is_tarmac.all())

    def tarmac(self, seq: np.ndarray) -> np.ndarray:
        if not len(self.first_seq):
            return np.zeros(len(seq), np.bool_)
        which = np.maximum(np.searchsorted(self.first_seq, seq, side="right") - 1, 0)
        return self.is_tarmac[which]


class _Clock:
    """Times for the rows that have none, so that the Tarmac reads back with each core's times
    in order: a line without a time takes the previous line's, which may be another core's.

    Before the first line with a time, rows stay without one (they read back so). After it, a
    row without time gets its core's last time, or its core's first time in the trace when it
    has had none yet; a core that never has a time stays without (it takes the line before's).
    """

    def __init__(self, trace: Trace, largest_cpu: int) -> None:
        self.trace = trace
        self.started = np.zeros(1, np.bool_)
        self.last = np.zeros(largest_cpu + 1, np.int64)
        self.known = np.zeros(largest_cpu + 1, np.bool_)
        self._first: tuple[np.ndarray, np.ndarray] | None = None

    def fill(self, tables: list[pa.Table]) -> list[tuple[np.ndarray, np.ndarray]]:
        """(time, has time) for the rows of `tables` (instructions first), as they are to be written."""
        columns = [(numpy_of(t.column("time"), np.int64), valid_of(t.column("time"))) for t in tables]
        if not self.started[0] and not any(has.any() for _, has in columns):
            return columns  # no time yet: the lines have none either
        seq = np.concatenate([numpy_of(t.column("seq"), np.int64) for t in tables])
        cpu = np.concatenate([numpy_of(t.column("cpu"), np.int64) for t in tables])
        time = np.concatenate([time for time, _ in columns])
        has = np.concatenate([has for _, has in columns])
        if has.all():  # nothing to fill: keep each core's last time (by seq, then as `tables` lists)
            listed = np.concatenate([np.full(t.num_rows, k) for k, t in enumerate(tables)])
            place = seq * len(tables) + listed
            for core in np.unique(cpu).tolist():
                if 0 <= core < len(self.last):
                    mine = np.flatnonzero(cpu == core)
                    self.last[core], self.known[core] = time[mine[np.argmax(place[mine])]], True
            self.started[0] = True
            return columns
        first, has_first = self._firsts()
        order = np.argsort(seq, kind="stable")  # the rows of one instruction: as `tables` lists them
        _fill_times(order, cpu, time, has, self.started, self.last, self.known, first, has_first)
        ends = np.cumsum([0, *(t.num_rows for t in tables)])
        return [(time[a:b], has[a:b]) for a, b in pairwise(ends)]

    def _firsts(self) -> tuple[np.ndarray, np.ndarray]:
        """Each core's first time in the trace (the time of its first instruction with one)."""
        if self._first is None:
            rows = self.trace.sql(
                "SELECT cpu, arg_min(time, seq) AS first FROM instructions "
                "WHERE time IS NOT NULL GROUP BY cpu"
            ).to_pylist()
            first = np.zeros(len(self.last), np.int64)
            has = np.zeros(len(self.last), np.bool_)
            for row in rows:
                if row["cpu"] < len(first):
                    first[row["cpu"]], has[row["cpu"]] = row["first"], True
            self._first = first, has
        return self._first


@numba.njit(cache=True, nogil=True)
def _fill_times(order, cpu, time, has, started, last, known, first, has_first):
    """Give the rows without time theirs (see _Clock), visiting them in `order`; keeps each
    core's last time in `last`/`known` and whether a time was written in `started[0]`."""
    for k in order:
        c = cpu[k]
        if has[k]:
            started[0] = True
            if 0 <= c < len(last):
                last[c] = time[k]
                known[c] = True
        elif started[0] and 0 <= c < len(last):
            if known[c]:
                time[k], has[k] = last[c], True
            elif c < len(first) and has_first[c]:
                time[k], has[k] = first[c], True


def _text_column(column: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    """A string column, decoded from its dictionary when it has one."""
    return column.cast(column.type.value_type) if pa.types.is_dictionary(column.type) else column


def _distinct(table: pa.Table, columns: list[str]) -> tuple[np.ndarray, list[tuple]]:
    """Per row the number of its combination of `columns`' values, and each combination."""
    keys = np.zeros(table.num_rows, np.int64)
    values = []
    for name in columns:
        column = table.column(name).combine_chunks()
        encoded = column if pa.types.is_dictionary(column.type) else column.dictionary_encode()
        codes = numpy_of(encoded.indices, np.int64, len(encoded.dictionary))
        keys = keys * (len(encoded.dictionary) + 1) + codes
        values.append([*encoded.dictionary.to_pylist(), None])
    distinct = np.unique(keys) if np.prod([len(v) for v in values]) > 4 * len(keys) else _present(keys)
    combinations = []
    for key in distinct.tolist():
        combination = []
        for options in reversed(values):
            key, code = divmod(key, len(options))
            combination.append(options[code])
        combinations.append(tuple(reversed(combination)))
    return np.searchsorted(distinct, keys), combinations


def _present(keys: np.ndarray) -> np.ndarray:
    """The distinct small non-negative `keys`, sorted, without sorting them."""
    seen = np.zeros(int(keys.max(initial=0)) + 1, np.bool_)
    seen[keys] = True
    return np.flatnonzero(seen)


def _texts(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Strings as (bytes, offsets), as `bytes_and_offsets` gives them."""
    encoded = [t.encode() for t in texts]
    offsets = np.zeros(len(encoded) + 1, np.int64)
    offsets[1:] = np.cumsum([len(e) for e in encoded])
    return np.frombuffer(b"".join(encoded), np.uint8).copy(), offsets


@numba.njit(cache=True, nogil=True)
def _copy(out, p, data, start, end):
    """data[start:end] to out[p:]; returns where it ends. (Unsigned indices: no wraparound checks.)"""
    i, q, stop, one = np.uint64(start), np.uint64(p), np.uint64(end), np.uint64(1)
    while i < stop:
        out[q] = data[i]
        q += one
        i += one
    return p + end - start


@numba.njit(cache=True, nogil=True)
def _decimal(out, p, value):
    if value < 0:
        out[p] = 45  # '-'
        p += 1
        value = -value
    digits = 1
    rest = value // 10
    while rest:
        digits += 1
        rest //= 10
    for d in range(digits - 1, -1, -1):
        out[p + d] = 48 + value % 10
        value //= 10
    return p + digits


@numba.njit(cache=True, nogil=True)
def _hex(out, p, value, digits):
    """`value` (uint64) in lowercase hex, at least `digits` digits."""
    needed = 1
    while needed < 16 and (value >> np.uint64(4 * needed)) != 0:
        needed += 1
    digits = max(digits, needed)
    for d in range(digits):
        nibble = (value >> np.uint64(4 * d)) & np.uint64(15) if d < 16 else np.uint64(0)
        out[p + digits - 1 - d] = _HEX_DIGITS[nibble]
    return p + digits


@numba.njit(cache=True, nogil=True)
def _address(out, p, value):
    """An address: 8 hex digits, or 16 above 32 bits."""
    return _hex(out, p, value, 8 if value < np.uint64(1 << 32) else 16)


@numba.njit(cache=True, nogil=True)
def _prefix(out, p, has_time, time, cpu, unit, multicore):
    if has_time:
        p = _decimal(out, p, time)
        out[p] = 32
        p = _copy(out, p + 1, unit, 0, len(unit))
        out[p] = 32
        p += 1
    if multicore:
        out[p], out[p + 1], out[p + 2] = 99, 112, 117  # "cpu"
        p = _decimal(out, p + 3, cpu)
        out[p] = 32
        p += 1
    return p


@numba.njit(cache=True, nogil=True)
def _trailing_space(out, start, p):
    """How many bytes of whitespace (as str.isspace says, in UTF-8) end out[start:p]."""
    if p - start >= 1:
        b = out[p - 1]
        if b == 32 or 9 <= b <= 13 or 28 <= b <= 31:
            return 1
    if p - start >= 2 and out[p - 2] == 0xC2 and (out[p - 1] == 0x85 or out[p - 1] == 0xA0):
        return 2
    if p - start >= 3:
        a, b, c = out[p - 3], out[p - 2], out[p - 1]
        if a == 0xE1 and b == 0x9A and c == 0x80:  # U+1680
            return 3
        if a == 0xE2 and b == 0x80 and (0x80 <= c <= 0x8A or c == 0xA8 or c == 0xA9 or c == 0xAF):
            return 3
        if (a == 0xE2 and b == 0x81 and c == 0x9F) or (a == 0xE3 and b == 0x80 and c == 0x80):
            return 3
    return 0


@numba.njit(cache=True, nogil=True)
def _render_instructions(
    time, has_time, cpu, unit, multicore, seq, pc, opcode, has_opcode, digits, executed,
    middle, middle_data, middle_offset, disasm_data, disasm_offset, out, starts,
):  # fmt: skip
    """`[time unit] [cpuN] IT|IS (seq) pc opcode[ L mode :] disasm`, right-stripped, per row; a
    failed fetch (no opcode) as `ES (pc:--------)[ L mode :] [CCFAIL ]disasm`."""
    p = 0
    for i in range(len(seq)):
        starts[i] = p
        p = _prefix(out, p, has_time[i], time[i], cpu[i], unit, multicore)
        body = p
        if has_opcode[i]:
            kind = 84 if executed[i] else 83  # IT / IS
            out[p], out[p + 1], out[p + 2], out[p + 3] = 73, kind, 32, 40
            p = _decimal(out, p + 4, seq[i])
            out[p], out[p + 1] = 41, 32  # ") "
            p = _address(out, p + 2, pc[i])
            out[p] = 32
            p = _hex(out, p + 1, np.uint64(opcode[i]), digits[i])
        else:
            out[p], out[p + 1], out[p + 2], out[p + 3] = 69, 83, 32, 40  # "ES ("
            p = _address(out, p + 4, pc[i])
            out[p] = 58  # ':'
            p += 1
            for _ in range(digits[i]):
                out[p] = 45  # '-'
                p += 1
            out[p] = 41  # ')'
            p += 1
        p = _copy(out, p, middle_data, middle_offset[middle[i]], middle_offset[middle[i] + 1])
        out[p] = 32
        p += 1
        if not has_opcode[i] and not executed[i]:
            for c in (67, 67, 70, 65, 73, 76, 32):  # "CCFAIL "
                out[p] = c
                p += 1
        p = _copy(out, p, disasm_data, disasm_offset[i], disasm_offset[i + 1])
        while True:
            strip = _trailing_space(out, body, p)
            if not strip:
                break
            p -= strip
    starts[len(seq)] = p


@numba.njit(cache=True, nogil=True)
def _render_registers(
    time, has_time, cpu, unit, multicore, name, name_data, name_offset, size, value, wide, wide_data,
    wide_offset, has_mask, mask_data, mask_offset, out, starts,
):  # fmt: skip
    """`[time unit] [cpuN] R name value`: bytes from the highest, `--` where the mask says unwritten."""
    p = 0
    for i in range(len(size)):
        starts[i] = p
        p = _prefix(out, p, has_time[i], time[i], cpu[i], unit, multicore)
        p = _copy(out, p, name_data, name_offset[name[i]], name_offset[name[i] + 1])
        if wide[i]:
            count = wide_offset[i + 1] - wide_offset[i]
        elif size[i]:
            count = size[i]
        else:
            count = 4 if value[i] < np.uint64(1 << 32) else 8
        mask_start, mask_length = mask_offset[i], mask_offset[i + 1] - mask_offset[i]
        for k in range(count - 1, -1, -1):
            if has_mask[i] and k // 8 < mask_length and not (mask_data[mask_start + k // 8] >> (k % 8)) & 1:
                out[p], out[p + 1] = 45, 45
            else:
                if wide[i]:
                    byte = np.uint64(wide_data[wide_offset[i] + k])
                elif k < 8:
                    byte = (value[i] >> np.uint64(8 * k)) & np.uint64(255)
                else:
                    byte = np.uint64(0)
                out[p], out[p + 1] = _HEX_DIGITS[byte >> np.uint64(4)], _HEX_DIGITS[byte & np.uint64(15)]
            p += 2
    starts[len(size)] = p


@numba.njit(cache=True, nogil=True)
def _render_diagram(
    out, p, has_time, time, cpu, unit, multicore, keyword, addr, size, paddr, has_paddr, non_secure,
    trailer_data, trailer_start, trailer_end,
):  # fmt: skip
    """An access with unknown data as `LD|ST line-address` and the 16 bytes of each line it
    touches, high word first, `##` for its bytes and `..` for the others; then `[N]S:paddr`
    and the attributes, as the diagram's trailing columns."""
    line = addr & ~np.uint64(15)
    end = addr + np.uint64(size)
    first = True
    while line < end:
        if not first:
            out[p] = 10  # a line of its own, with its own stamp
            p += 1
        first = False
        p = _prefix(out, p, has_time, time, cpu, unit, multicore)
        p = _copy(out, p, keyword, 0, 2)
        out[p] = 32
        p = _address(out, p + 1, line)
        for b in range(15, -1, -1):
            if b % 4 == 3:
                out[p] = 32
                p += 1
            byte = line + np.uint64(b)
            inside = addr <= byte < end
            out[p] = out[p + 1] = 35 if inside else 46  # '#' or '.'
            p += 2
        if has_paddr:
            out[p] = 32
            p += 1
            if non_secure:
                out[p] = 78  # 'N'
                p += 1
            out[p], out[p + 1] = 83, 58  # "S:"
            p = _hex(out, p + 2, paddr - (addr - line), 8)
        if trailer_end > trailer_start:
            out[p] = 32
            p = _copy(out, p + 1, trailer_data, trailer_start, trailer_end)
        line += np.uint64(16)
    return p


@numba.njit(cache=True, nogil=True)
def _render_memory(
    time, has_time, cpu, unit, multicore, word, word_data, word_offset, non_secure, aborted, keyword,
    trailer_data, trailer_offset, size, addr, paddr, has_paddr, value, has_value, wide, wide_data,
    wide_offset, out, starts,
):  # fmt: skip
    """`[time unit] [cpuN] WORD addr[:paddr][_NS] data` per access (data of more than 8 bytes in
    groups of 8, highest first); with unknown data, an LD/ST diagram."""
    p = 0
    for i in range(len(size)):
        starts[i] = p
        w = word[i]
        if not has_value[i] and not wide[i] and not aborted[w]:
            p = _render_diagram(
                out, p, has_time[i], time[i], cpu[i], unit, multicore, keyword[w], addr[i], size[i],
                paddr[i], has_paddr[i], non_secure[w], trailer_data, trailer_offset[w], trailer_offset[w + 1],
            )  # fmt: skip
            continue
        p = _prefix(out, p, has_time[i], time[i], cpu[i], unit, multicore)
        p = _copy(out, p, word_data, word_offset[w], word_offset[w + 1])
        out[p] = 32
        p = _address(out, p + 1, addr[i])
        if has_paddr[i]:
            out[p] = 58  # ':'
            p = _hex(out, p + 1, paddr[i], 12)
        if non_secure[w]:
            out[p], out[p + 1], out[p + 2] = 95, 78, 83  # "_NS"
            p += 3
        out[p] = 32
        p += 1
        if aborted[w]:
            for c in (40, 65, 66, 79, 82, 84, 69, 68, 41):  # "(ABORTED)"
                out[p] = c
                p += 1
        elif wide[i]:
            first, last = wide_offset[i], wide_offset[i + 1]
            for k in range(last - 1, first - 1, -1):
                out[p], out[p + 1] = _HEX_DIGITS[wide_data[k] >> 4], _HEX_DIGITS[wide_data[k] & 15]
                p += 2
                if (k - first) % 8 == 0 and k > first:
                    out[p] = 32
                    p += 1
        else:
            p = _hex(out, p, value[i], 2 * size[i])
    starts[len(size)] = p


@numba.njit(cache=True, nogil=True)
def _render_events(
    time, has_time, cpu, unit, multicore, form, raw, label, label_data, label_offset, number, value,
    has_value, value1, has_value1, text_data, text_offset, out, starts,
):  # fmt: skip
    """Per event, by `form`: its record (`text`; alone for raw lines: headers), or
    `E value [value1] number label`, `BR (target) label`, `E DebugEvent_label value|- text`,
    `EXC [0xnumber] label`."""
    p = 0
    for i in range(len(form)):
        starts[i] = p
        if not (form[i] == _VERBATIM and raw[i]):
            p = _prefix(out, p, has_time[i], time[i], cpu[i], unit, multicore)
        f = form[i]
        lo, hi = label_offset[label[i]], label_offset[label[i] + 1]
        if f == _VERBATIM:
            p = _copy(out, p, text_data, text_offset[i], text_offset[i + 1])
        elif f == _EXCEPTION:
            out[p], out[p + 1] = 69, 32  # "E "
            p = _hex(out, p + 2, value[i], 8)
            if has_value1[i]:
                out[p] = 32
                p = _hex(out, p + 1, value1[i], 8)
            out[p] = 32
            p = _hex(out, p + 1, np.uint64(number[i]), 8)
            out[p] = 32
            p = _copy(out, p + 1, label_data, lo, hi)
        elif f == _BRANCH:
            out[p], out[p + 1], out[p + 2], out[p + 3] = 66, 82, 32, 40  # "BR ("
            p = _hex(out, p + 4, value1[i] if has_value1[i] else value[i], 8)
            out[p] = 41  # ')'
            p += 1
            if hi > lo:
                out[p] = 32
                p = _copy(out, p + 1, label_data, lo, hi)
        elif f == _EXC:
            for c in (69, 88, 67, 32, 91, 48, 120):  # "EXC [0x"
                out[p] = c
                p += 1
            p = _hex(out, p, np.uint64(number[i]), 1)
            out[p], out[p + 1] = 93, 32  # "] "
            p = _copy(out, p + 2, label_data, lo, hi)
        else:
            for c in (69, 32, 68, 101, 98, 117, 103, 69, 118, 101, 110, 116, 95):  # "E DebugEvent_"
                out[p] = c
                p += 1
            p = _copy(out, p, label_data, lo, hi)
            out[p] = 32
            if has_value[i]:
                p = _hex(out, p + 1, value[i], 8)
            else:
                out[p + 1] = 45  # '-'
                p += 2
            if text_offset[i + 1] > text_offset[i]:
                out[p] = 32
                p = _copy(out, p + 1, text_data, text_offset[i], text_offset[i + 1])
    starts[len(form)] = p


@numba.njit(cache=True, nogil=True)
def _lines_in_order(order, data, line_start, line_end, out):
    """The lines `data[line_start[k]:line_end[k]]` for k in `order`, each ended by a newline."""
    p = 0
    for k in order:
        p = _copy(out, p, data, line_start[k], line_end[k])
        out[p] = 10
        p += 1
    return p


class _Rendered:
    """Rendered records of the tables of a batch, and the key that puts them in input order."""

    def __init__(self, prefix: _Prefix) -> None:
        self.line_room = _LINE_ROOM + len(prefix.unit)
        self.buffers: list[np.ndarray] = []
        self.starts: list[np.ndarray] = []
        self.keys: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # seq, src, table order

    def add(self, table: pa.Table, order: int, room: int, render, *columns) -> None:
        """Render `table`'s rows with `render(*columns, out, starts)`.

        `room` is what the rows' variable-length fields need; the others get `line_room` per row.
        """
        out = np.empty(room + table.num_rows * self.line_room, np.uint8)
        starts = np.empty(table.num_rows + 1, np.int64)
        render(*columns, out, starts)
        self.buffers.append(out[: starts[-1]])
        self.starts.append(starts)
        seq = numpy_of(table.column("seq"), np.int64)
        src = numpy_of(table.column("src"), np.int64)
        self.keys.append((seq, src, np.full(len(seq), order, np.int8)))

    def text(self, opening: int | None, origins: _Origins) -> np.ndarray:
        """Every line (UTF-8) in input order: by seq, then src, then table (stably: as listed
        within a table), but each instruction's records after it.

        A Tarmac record belongs to the instruction before it, so a record another format gave
        before its instruction (an ARMulator fetch) is written after it; but for the records
        before instruction `opening`, the first written, which read back as its anyway. A
        Tarmac input's records keep their order: they read back as they were read.
        """
        seq, src, order = (np.concatenate([key[i] for key in self.keys]) for i in range(3))
        place = src
        own_seq, own_src = self.keys[0][0], self.keys[0][1]  # the instructions, by seq
        if len(own_seq) and not origins.only_tarmac:
            at = np.minimum(np.searchsorted(own_seq, seq), len(own_seq) - 1)
            before = (own_seq[at] == seq) & (src < own_src[at]) & (seq != opening) & ~origins.tarmac(seq)
            place = np.where(before, own_src[at], src)
        bases = np.cumsum([0, *(len(b) for b in self.buffers[:-1])])
        line_start = np.concatenate([s[:-1] + base for s, base in zip(self.starts, bases, strict=True)])
        line_end = np.concatenate([s[1:] + base for s, base in zip(self.starts, bases, strict=True)])
        data = np.concatenate(self.buffers)
        out = np.empty(len(data) + len(seq), np.uint8)
        written = _lines_in_order(np.lexsort((src, order, place, seq)), data, line_start, line_end, out)
        return out[:written]


def _add_instructions(rendered: _Rendered, table: pa.Table, prefix: tuple) -> None:
    size = numpy_of(table.column("size"), np.int64)
    digits = 2 * np.where(size > 0, size, 4)
    middle, combinations = _distinct(table, ["isa", "mode"])
    middle_data, middle_offset = _texts([_isa_and_mode(isa, mode) for isa, mode in combinations])
    disasm_data, disasm_offset = bytes_and_offsets(table.column("disasm"))
    room = int(digits.sum()) + int(np.diff(middle_offset)[middle].sum()) + len(disasm_data)
    opcode = table.column("opcode")
    rendered.add(
        table, _INSTRUCTION, room, _render_instructions, *prefix,
        numpy_of(table.column("seq"), np.int64), numpy_of(table.column("pc"), np.uint64),
        numpy_of(opcode, np.uint64), valid_of(opcode), digits,
        numpy_of(table.column("executed"), np.bool_, True),  # unknown: IT (Tarmac has no third state)
        middle, middle_data, middle_offset, disasm_data, disasm_offset,
    )  # fmt: skip


def _add_registers(rendered: _Rendered, table: pa.Table, prefix: tuple) -> None:
    name, combinations = _distinct(table, ["reg", "size"])
    name_data, name_offset = _texts([f"R {_register_name(reg, size)} " for reg, size in combinations])
    size = numpy_of(table.column("size"), np.int64)
    wide_data, wide_offset = bytes_and_offsets(table.column("wide"))
    mask_data, mask_offset = bytes_and_offsets(table.column("mask"))
    room = int(np.diff(name_offset)[name].sum()) + 2 * len(wide_data) + 2 * int(np.maximum(size, 8).sum())
    rendered.add(
        table, _REGISTER, room, _render_registers, *prefix,
        name, name_data, name_offset, size, numpy_of(table.column("value"), np.uint64),
        valid_of(table.column("wide")), wide_data, wide_offset,
        valid_of(table.column("mask")), mask_data, mask_offset,
    )  # fmt: skip


def _add_memory(rendered: _Rendered, table: pa.Table, prefix: tuple) -> None:
    word, combinations = _distinct(table, ["op", "source", "size", "attrs"])
    words = [memory_word(op, size, source=source, attrs=attrs) for op, source, size, attrs in combinations]
    word_data, word_offset = _texts([w for w, _, _ in words])
    non_secure = np.array([s for _, s, _ in words], np.bool_)
    aborted = np.array([a for _, _, a in words], np.bool_)
    keyword = np.array([list(_diagram_keyword(op).encode()) for op, *_ in combinations], np.uint8)
    keyword = keyword.reshape(len(combinations), 2)
    trailer_data, trailer_offset = _texts([_diagram_trailer(attrs) for *_, attrs in combinations])
    size = numpy_of(table.column("size"), np.int64)
    wide_data, wide_offset = bytes_and_offsets(table.column("wide"))
    lines = (size + 30) // 16  # an unknown access's diagram lines: at most one more than its 16-byte lines
    per_line = _DIAGRAM_ROOM + len(prefix[3]) + int(np.diff(trailer_offset).max(initial=0))
    room = int(np.diff(word_offset)[word].sum()) + 3 * len(wide_data) + 2 * int(np.maximum(size, 8).sum())
    room += int(lines.sum()) * per_line
    paddr, value = table.column("paddr"), table.column("value")
    rendered.add(
        table, _MEMORY, room, _render_memory, *prefix,
        word, word_data, word_offset, non_secure, aborted, keyword, trailer_data, trailer_offset,
        size, numpy_of(table.column("addr"), np.uint64), numpy_of(paddr, np.uint64), valid_of(paddr),
        numpy_of(value, np.uint64), valid_of(value), valid_of(table.column("wide")), wide_data, wide_offset,
    )  # fmt: skip


def _add_events(rendered: _Rendered, table: pa.Table, prefix: tuple, tarmac: np.ndarray) -> None:
    """Events in the form `_event_form` chooses, decided once per distinct combination of what
    it looks at: a Tarmac input's record as it was read where the reference tools know it,
    else one made from the event's columns."""
    kind = _text_column(table.column("kind"))
    text = table.column("text")
    number = table.column("number")
    facts = pa.table({
        "kind": kind, "name": table.column("name"),
        "first": pc.struct_field(pc.extract_regex(text, f"^(?P<first>{_FIRST_WORD.pattern})"), [0]),
        "has_text": pc.is_valid(text), "tarmac": pa.array(tarmac),
        "has_value": pc.is_valid(table.column("value")), "has_value1": pc.is_valid(table.column("value1")),
        "numbered": pc.greater_equal(number, 0).fill_null(False),
        "says_exc": pc.match_substring(text, "EXC").fill_null(False),
    })  # fmt: skip
    combination, combinations = _distinct(facts, facts.column_names)
    chosen = [_event_form(*values) for values in combinations]
    form = np.array([f for f, _ in chosen], np.int8)[combination]
    label_data, label_offset = _texts([label for _, label in chosen])
    raw = pc.or_(pc.is_null(table.column("name")), pc.equal(kind, "header").fill_null(False))
    text_data, text_offset = bytes_and_offsets(text)
    room = len(text_data) + int(np.diff(label_offset)[combination].sum())
    rendered.add(
        table, _EVENT, room, _render_events, *prefix,
        form, numpy_of(raw, np.bool_), combination, label_data, label_offset,
        numpy_of(number, np.int64),
        numpy_of(table.column("value"), np.uint64), valid_of(table.column("value")),
        numpy_of(table.column("value1"), np.uint64), valid_of(table.column("value1")), text_data, text_offset,
    )  # fmt: skip


def _event_form(
    kind: str | None, name: str | None, first: str | None, has_text: bool, tarmac: bool, has_value: bool,
    has_value1: bool, numbered: bool, says_exc: bool,
) -> tuple[int, str]:  # fmt: skip
    """How an event is written (_VERBATIM, _EXCEPTION, _BRANCH, _DEBUG, _EXC), and its label.

    A Tarmac input's event is its record again unless the reference tools would warn about
    it (flow records, system operations, unknown records, lines the reader kept as text), or
    it is an `ES <name>` whose number came on an `EXC` line of its own (Cortex-A53 RTL), which
    is written `EXC [number] name`. Other events: exceptions and mode changes with an address
    and a number in Fast Models' `E` form, flow records as `BR`, the rest as
    `E DebugEvent_<kind>.<name>`.
    """
    unparsed = kind == "text" and name is None
    if tarmac and kind == "exception" and first == "ES" and numbered and not says_exc:
        return _EXC, _LABEL_UNSAFE.sub("_", name or "")
    if tarmac and has_text and not unparsed and (first in _QUIET_RECORDS or kind == "coprocessor"):
        return _VERBATIM, ""
    if kind in ("exception", "mode_change") and has_value and numbered:
        return _EXCEPTION, _exception_label(kind, name)
    if kind == "branch" and (has_value or has_value1):
        return _BRANCH, ISA_LETTER.get(name.split()[-1] if name else "", "")
    return _DEBUG, _LABEL_UNSAFE.sub("_", f"{kind}.{name}" if name else str(kind))


def _exception_label(kind: str, name: str | None) -> str:
    """The last word of an `E` exception record: the name, one token, never read as a number;
    a mode change says so (the reader tells the two apart by it)."""
    label = _LABEL_UNSAFE.sub("_", name or kind)
    if kind == "mode_change" and "ModeChange" not in label:
        label = f"ModeChange_{label}"
    return f"CoreEvent_{label}" if _HEXISH.fullmatch(label) else label


def event_record(
    kind: str | None,
    name: str | None,
    number: int | None,
    value: int | None,
    value1: int | None,
    text: str | None,
    *,
    tarmac: bool,
) -> str:
    """An event as `write_tarmac` writes it (without time and core); `tarmac`: it was read
    from a Tarmac input, so `text` is its record."""
    first = _FIRST_WORD.match(text or "")[0]
    numbered = number is not None and number >= 0
    form, label = _event_form(
        kind, name, first, text is not None, tarmac, value is not None, value1 is not None, numbered,
        "EXC" in (text or ""),
    )  # fmt: skip
    if form == _VERBATIM:
        return text or ""
    if form == _EXC:
        return f"EXC [0x{number:x}] {label}"
    if form == _EXCEPTION:
        extra = "" if value1 is None else f" {value1:08x}"
        return f"E {value:08x}{extra} {number:08x} {label}"
    if form == _BRANCH:
        target = value1 if value1 is not None else value
        return f"BR ({target:08x})" + (f" {label}" if label else "")
    shown = "-" if value is None else f"{value:08x}"
    return f"E DebugEvent_{label} {shown}" + (f" {text}" if text else "")


def _register_name(reg: str | None, size: int | None) -> str:
    """A register as Tarmac names it for the bytes written: a 4-byte write of an AArch64
    register is `w<n>` (the reference tools expect x registers with 8 bytes)."""
    m = re.fullmatch(r"x(\d+)", reg or "")
    return f"w{m[1]}" if m and size == 4 else reg or ""


def _isa_and_mode(isa: str | None, mode: str | None) -> str:
    """What goes between an instruction record's opcode and its disassembly (before its space)."""
    letter = ISA_LETTER.get(isa or "")
    return "" if letter is None else f" {letter} {mode or ''} :"


def _hex_text(value: int, digits: int) -> str:
    return f"{value:0{digits}x}"


def instruction_record(
    ident: int,
    pc: int,
    opcode: int | None,
    size: int | None,
    isa: str | None,
    mode: str | None,
    executed: bool | None,
    disasm: str | None,
) -> str:
    """`IT|IS (ident) addr opcode ISA mode : disasm`; `ident` is the tick count or seq. An
    unknown outcome (None) is IT; a failed fetch `ES (addr:--------) ISA mode : [CCFAIL] disasm`."""
    digits = 2 * (size or 4)
    addr = _hex_text(pc, 8 if pc < 1 << 32 else 16)
    if opcode is None:
        failed = "" if executed is not False else "CCFAIL "
        return f"ES ({addr}:{'-' * digits}){_isa_and_mode(isa, mode)} {failed}{disasm or ''}".rstrip()
    kw = "IS" if executed is False else "IT"
    opcode_text = _hex_text(opcode, digits)
    return f"{kw} ({ident}) {addr} {opcode_text}{_isa_and_mode(isa, mode)} {disasm or ''}".rstrip()


def _masked_hex(data: bytes, mask: bytes | None) -> str:
    """Bytes (little-endian) as big-endian hex, `--` for bytes the mask says were not written."""
    if mask is None:
        return data[::-1].hex()
    pairs = []
    for i in reversed(range(len(data))):
        written = mask is None or (mask[i // 8] >> (i % 8)) & 1
        pairs.append(f"{data[i]:02x}" if written else "--")
    return "".join(pairs)


def register_record(reg: str, data: bytes, mask: bytes | None = None) -> str:
    """`R name value`: `data` little-endian, printed big-endian with `--` for unwritten bytes."""
    return f"R {_register_name(reg, len(data))} {_masked_hex(data, mask)}"


def memory_word(
    op: str, size: int, *, source: str = "core", attrs: str | None = None
) -> tuple[str, bool, bool]:
    """An access's record word (MR4, MW8X, MU4_SWP, MR4_I...), and whether it is non-secure and
    aborted. Bus accesses have the core's words: the reference tools know no bus records."""
    attr_list = (attrs or "").split()
    if op == "U":
        word = f"MU{size}_{attr_list[0] if attr_list else 'SWP'}"
    elif op == "F":
        word = f"MR{size}_I"
    else:
        word = f"M{op}{size}" + "".join(a for a in attr_list if a in ("X", "T", "L"))
    return word, "NS" in attr_list, "ABORTED" in attr_list


def _diagram_keyword(op: str | None) -> str:
    """LD for what reads (a fetch too), ST for what writes."""
    return "ST" if op in ("W", "U") else "LD"


def _diagram_trailer(attrs: str | None) -> str:
    """An LD/ST diagram's trailing attribute columns (NS goes with the physical address)."""
    return " ".join(a for a in (attrs or "").split() if a not in ("NS", "ABORTED"))


def memory_record(
    op: str,
    size: int,
    addr: int,
    value: int | None,
    *,
    source: str = "core",
    paddr: int | None = None,
    attrs: str | None = None,
    wide: bytes | None = None,
) -> str:
    """A memory access in the record syntax its op and source call for (MR/MW/MU/LD/ST...)."""
    word, non_secure, aborted = memory_word(op, size, source=source, attrs=attrs)
    if value is None and wide is None and not aborted:
        return _diagram_record(op, size, addr, paddr, non_secure, attrs)
    addr_text = _hex_text(addr, 8 if addr < 1 << 32 else 16)
    if paddr is not None:
        addr_text += ":" + _hex_text(paddr, 12)
    if non_secure:
        addr_text += "_NS"
    if aborted:
        data = "(ABORTED)"
    elif wide is not None:
        digits = wide[::-1].hex()
        data = " ".join(digits[i : i + 16] for i in range(0, len(digits), 16))
    else:
        data = _hex_text(value, 2 * size)
    return f"{word} {addr_text} {data}"


def _diagram_record(
    op: str, size: int, addr: int, paddr: int | None, non_secure: bool, attrs: str | None
) -> str:
    """`LD|ST` diagram lines (joined by newlines, without stamps) for an access with unknown data."""
    lines = []
    trailer = _diagram_trailer(attrs)
    for line in range(addr & ~15, addr + size, 16):
        cells = ["##" if addr <= line + b < addr + size else ".." for b in range(15, -1, -1)]
        columns = " ".join("".join(cells[c : c + 4]) for c in range(0, 16, 4))
        text = f"{_diagram_keyword(op)} {_hex_text(line, 8 if line < 1 << 32 else 16)} {columns}"
        if paddr is not None:
            text += f" {'NS' if non_secure else 'S'}:{_hex_text(paddr - (addr - line), 8)}"
        lines.append(text + (f" {trailer}" if trailer else ""))
    return "\n".join(lines)
