"""Writing a store back out as a Fast-Models-style Tarmac trace.

Every table's rows for the selected instructions are written in their input order (`seq`,
then `src`), so ingesting the output gives the same instructions, register writes, memory
accesses and events. This is what lets Tarmac tools read traces from any input format.

Records are formatted by compiled loops straight into a byte buffer, a batch of
instructions (and their records) at a time: per row only numbers and copied bytes. What
depends on a few distinct values (the ISA letter and mode, a memory access's record word
from its op, source, size and attributes, a register's name) is formatted once per
distinct value by the record functions below, which also serve the other writers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TextIO

import numba
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .arrowbytes import bytes_and_offsets

if TYPE_CHECKING:
    from ..trace import Trace

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


def write_tarmac(trace: Trace, selection: pa.Table, out: TextIO) -> None:
    """Write the instructions in `selection` (ordered by seq) and everything that belongs to them."""
    unit = (trace.manifest.get("time") or {}).get("unit") or "clk"
    prefix = _Prefix(_TARMAC_UNITS.get(unit, unit), len(trace.manifest.get("cpus", [])) > 1)
    for start in range(0, selection.num_rows, _QUERY):
        part = selection.slice(start, _QUERY)
        seq = _numpy(part.column("seq"), np.int64)
        related = {name: _belonging(trace, name, seq) for name in ("registers", "memory", "events")}
        for first in range(0, part.num_rows, _BATCH):
            batch = part.slice(first, _BATCH)
            low, high = seq[first], seq[min(first + _BATCH, part.num_rows) - 1]
            mine = {name: _between(rows, low, high) for name, rows in related.items()}
            _write(out, _batch_text(batch, mine, prefix))


def _between(rows: pa.Table, low: int, high: int) -> pa.Table:
    """The rows (sorted by seq) with low <= seq <= high."""
    seq = _numpy(rows.column("seq"), np.int64)
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


def _belonging(trace: Trace, name: str, seq: np.ndarray) -> pa.Table:
    """The rows of table `name` that belong to an instruction of `seq` (sorted), by seq and src.

    The seq range lets the scan skip row groups; rows of other instructions in it (a --where
    selection may skip some) are filtered out here.
    """
    rows = trace.sql(
        f"SELECT * FROM {name} WHERE seq BETWEEN {int(seq[0])} AND {int(seq[-1])} ORDER BY seq, src"
    )
    return rows.filter(np.isin(_numpy(rows.column("seq"), np.int64), seq))


class _Prefix:
    """`TIME UNIT cpuN ` before a record: the unit, and whether cores are named."""

    def __init__(self, unit: str, multicore: bool) -> None:
        self.unit = np.frombuffer(unit.encode(), np.uint8)
        self.multicore = multicore

    def columns(self, table: pa.Table) -> tuple:
        """The render functions' first arguments: time, has time and cpu per row, unit, multicore."""
        time = table.column("time")
        cpu = _values(table.column("cpu"), np.int64)
        return _values(time, np.int64), _valid(time), cpu, self.unit, self.multicore


def _numpy(column: pa.ChunkedArray | pa.Array, dtype: type) -> np.ndarray:
    return column.to_numpy(zero_copy_only=False).astype(dtype, copy=False)


def _values(column: pa.ChunkedArray | pa.Array, dtype: type) -> np.ndarray:
    """The column as NumPy, nulls as 0 (False)."""
    return _numpy(column.fill_null(False if dtype is np.bool_ else 0), dtype)


def _valid(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    return _numpy(column.is_valid(), np.bool_)


def _distinct(table: pa.Table, columns: list[str]) -> tuple[np.ndarray, list[tuple]]:
    """Per row the number of its combination of `columns`' values, and each combination."""
    keys = np.zeros(table.num_rows, np.int64)
    values = []
    for name in columns:
        column = table.column(name).combine_chunks()
        encoded = column if pa.types.is_dictionary(column.type) else column.dictionary_encode()
        codes = _numpy(encoded.indices.fill_null(len(encoded.dictionary)), np.int64)
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
    """`[time unit] [cpuN] IT|IS (seq) pc opcode[ L mode :] disasm`, right-stripped, per row."""
    p = 0
    for i in range(len(seq)):
        starts[i] = p
        p = _prefix(out, p, has_time[i], time[i], cpu[i], unit, multicore)
        body = p
        out[p], out[p + 1], out[p + 2], out[p + 3] = 73, 84 if executed[i] else 83, 32, 40  # "IT (" / "IS ("
        p = _decimal(out, p + 4, seq[i])
        out[p], out[p + 1] = 41, 32  # ") "
        p = _hex(out, p + 2, pc[i], 8 if pc[i] < np.uint64(1 << 32) else 16)
        out[p] = 32
        p += 1
        if has_opcode[i]:
            p = _hex(out, p, np.uint64(opcode[i]), digits[i])
        else:
            for _ in range(digits[i]):
                out[p] = 45  # '-'
                p += 1
        p = _copy(out, p, middle_data, middle_offset[middle[i]], middle_offset[middle[i] + 1])
        out[p] = 32
        p = _copy(out, p + 1, disasm_data, disasm_offset[i], disasm_offset[i + 1])
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
def _render_memory(
    time, has_time, cpu, unit, multicore, word, word_data, word_offset, non_secure, aborted, size, addr,
    paddr, has_paddr, value, has_value, wide, wide_data, wide_offset, out, starts,
):  # fmt: skip
    """`[time unit] [cpuN] WORD addr[:paddr][_NS] data` per access."""
    p = 0
    for i in range(len(size)):
        starts[i] = p
        p = _prefix(out, p, has_time[i], time[i], cpu[i], unit, multicore)
        p = _copy(out, p, word_data, word_offset[word[i]], word_offset[word[i] + 1])
        out[p] = 32
        p = _hex(out, p + 1, addr[i], 8 if addr[i] < np.uint64(1 << 32) else 16)
        if has_paddr[i]:
            out[p] = 58  # ':'
            p = _hex(out, p + 1, paddr[i], 12)
        if non_secure[word[i]]:
            out[p], out[p + 1], out[p + 2] = 95, 78, 83  # "_NS"
            p += 3
        out[p] = 32
        p += 1
        if aborted[word[i]]:
            for c in (40, 65, 66, 79, 82, 84, 69, 68, 41):  # "(ABORTED)"
                out[p] = c
                p += 1
        elif wide[i]:
            for k in range(wide_offset[i + 1] - 1, wide_offset[i] - 1, -1):
                out[p], out[p + 1] = _HEX_DIGITS[wide_data[k] >> 4], _HEX_DIGITS[wide_data[k] & 15]
                p += 2
        elif not has_value[i]:
            for _ in range(2 * size[i]):
                out[p] = 120  # 'x'
                p += 1
        else:
            p = _hex(out, p, value[i], 2 * size[i])
    starts[len(size)] = p


@numba.njit(cache=True, nogil=True)
def _render_events(time, has_time, cpu, unit, multicore, raw, text_data, text_offset, out, starts):
    """`[time unit] [cpuN] text`, or the text alone for raw lines (headers, unparsed records)."""
    p = 0
    for i in range(len(raw)):
        starts[i] = p
        if not raw[i]:
            p = _prefix(out, p, has_time[i], time[i], cpu[i], unit, multicore)
        p = _copy(out, p, text_data, text_offset[i], text_offset[i + 1])
    starts[len(raw)] = p


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
        seq = _values(table.column("seq"), np.int64)
        src = _values(table.column("src"), np.int64)
        self.keys.append((seq, src, np.full(len(seq), order, np.int8)))

    def text(self) -> np.ndarray:
        """Every line (UTF-8), ordered by seq, then src, then table (stably: as listed within a table)."""
        seq, src, order = (np.concatenate([key[i] for key in self.keys]) for i in range(3))
        bases = np.cumsum([0, *(len(b) for b in self.buffers[:-1])])
        line_start = np.concatenate([s[:-1] + base for s, base in zip(self.starts, bases, strict=True)])
        line_end = np.concatenate([s[1:] + base for s, base in zip(self.starts, bases, strict=True)])
        data = np.concatenate(self.buffers)
        out = np.empty(len(data) + len(seq), np.uint8)
        written = _lines_in_order(np.lexsort((order, src, seq)), data, line_start, line_end, out)
        return out[:written]


def _batch_text(batch: pa.Table, related: dict[str, pa.Table], prefix: _Prefix) -> np.ndarray:
    rendered = _Rendered(prefix)
    _add_instructions(rendered, batch, prefix)
    memory = related["memory"]
    # an access whose address the input lacks (LEON ITB loads): Tarmac cannot say it
    _add_memory(rendered, memory.filter(pc.is_valid(memory.column("addr"))), prefix)
    _add_registers(rendered, related["registers"], prefix)
    events = related["events"]
    _add_events(rendered, events.filter(pc.is_valid(events.column("text"))), prefix)
    return rendered.text()


def _add_instructions(rendered: _Rendered, table: pa.Table, prefix: _Prefix) -> None:
    size = _values(table.column("size"), np.int64)
    digits = 2 * np.where(size > 0, size, 4)
    middle, combinations = _distinct(table, ["isa", "mode"])
    middle_data, middle_offset = _texts([_isa_and_mode(isa, mode) for isa, mode in combinations])
    disasm_data, disasm_offset = bytes_and_offsets(table.column("disasm"))
    room = int(digits.sum()) + int(np.diff(middle_offset)[middle].sum()) + len(disasm_data)
    opcode = table.column("opcode")
    rendered.add(
        table, _INSTRUCTION, room, _render_instructions, *prefix.columns(table),
        _values(table.column("seq"), np.int64), _values(table.column("pc"), np.uint64),
        _values(opcode, np.uint64), _valid(opcode), digits, _values(table.column("executed"), np.bool_),
        middle, middle_data, middle_offset, disasm_data, disasm_offset,
    )  # fmt: skip


def _add_registers(rendered: _Rendered, table: pa.Table, prefix: _Prefix) -> None:
    name, combinations = _distinct(table, ["reg"])
    name_data, name_offset = _texts([f"R {reg} " for (reg,) in combinations])
    size = _values(table.column("size"), np.int64)
    wide_data, wide_offset = bytes_and_offsets(table.column("wide"))
    mask_data, mask_offset = bytes_and_offsets(table.column("mask"))
    room = int(np.diff(name_offset)[name].sum()) + 2 * len(wide_data) + 2 * int(np.maximum(size, 8).sum())
    rendered.add(
        table, _REGISTER, room, _render_registers, *prefix.columns(table),
        name, name_data, name_offset, size, _values(table.column("value"), np.uint64),
        _valid(table.column("wide")), wide_data, wide_offset,
        _valid(table.column("mask")), mask_data, mask_offset,
    )  # fmt: skip


def _add_memory(rendered: _Rendered, table: pa.Table, prefix: _Prefix) -> None:
    word, combinations = _distinct(table, ["op", "source", "size", "attrs"])
    words = [memory_word(op, size, source=source, attrs=attrs) for op, source, size, attrs in combinations]
    word_data, word_offset = _texts([w for w, _, _ in words])
    non_secure = np.array([s for _, s, _ in words], np.bool_)
    aborted = np.array([a for _, _, a in words], np.bool_)
    size = _values(table.column("size"), np.int64)
    wide_data, wide_offset = bytes_and_offsets(table.column("wide"))
    room = int(np.diff(word_offset)[word].sum()) + 2 * len(wide_data) + 2 * int(np.maximum(size, 8).sum())
    paddr, value = table.column("paddr"), table.column("value")
    rendered.add(
        table, _MEMORY, room, _render_memory, *prefix.columns(table),
        word, word_data, word_offset, non_secure, aborted, size, _values(table.column("addr"), np.uint64),
        _values(paddr, np.uint64), _valid(paddr), _values(value, np.uint64), _valid(value),
        _valid(table.column("wide")), wide_data, wide_offset,
    )  # fmt: skip


def _add_events(rendered: _Rendered, table: pa.Table, prefix: _Prefix) -> None:
    """Events keep their record's text (without time and core), so it is written as is."""
    kind = table.column("kind")
    kind = kind.cast(kind.type.value_type) if pa.types.is_dictionary(kind.type) else kind
    raw = pc.or_(pc.is_null(table.column("name")), pc.equal(kind, "header").fill_null(False))
    text_data, text_offset = bytes_and_offsets(table.column("text"))
    rendered.add(
        table, _EVENT, len(text_data), _render_events, *prefix.columns(table),
        _values(raw, np.bool_), text_data, text_offset,
    )  # fmt: skip


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
    executed: bool,
    disasm: str | None,
) -> str:
    """`IT|IS (ident) addr opcode ISA mode : disasm`; `ident` is the tick count or seq."""
    digits = 2 * (size or 4)
    opcode_text = "-" * digits if opcode is None else _hex_text(opcode, digits)
    kw = "IT" if executed else "IS"
    addr = _hex_text(pc, 8 if pc < 1 << 32 else 16)
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
    return f"R {reg} {_masked_hex(data, mask)}"


def memory_word(
    op: str, size: int, *, source: str = "core", attrs: str | None = None
) -> tuple[str, bool, bool]:
    """An access's record word (MR4, MW8X, BR4O, MU4_SWP...), and whether it is non-secure and aborted."""
    attr_list = (attrs or "").split()
    if op == "U":
        word = f"MU{size}_{attr_list[0] if attr_list else 'SWP'}"
    elif source == "bus":
        word = f"B{'R' if op == 'F' else op}{size}{'O' if op == 'F' else ''}"
    elif op == "F":
        word = f"MR{size}_I"
    else:
        word = f"M{op}{size}" + "".join(a for a in attr_list if a in ("X", "T", "L"))
    return word, "NS" in attr_list, "ABORTED" in attr_list


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
    """A memory access in the record syntax its op and source call for (MR/MW/MU/B...)."""
    word, non_secure, aborted = memory_word(op, size, source=source, attrs=attrs)
    addr_text = _hex_text(addr, 8 if addr < 1 << 32 else 16)
    if paddr is not None:
        addr_text += ":" + _hex_text(paddr, 12)
    if non_secure:
        addr_text += "_NS"
    if aborted:
        data = "(ABORTED)"
    elif wide is not None:
        data = wide[::-1].hex()
    elif value is None:
        data = "x" * (2 * size)
    else:
        data = _hex_text(value, 2 * size)
    return f"{word} {addr_text} {data}"
