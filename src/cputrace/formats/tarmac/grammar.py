"""The complete Tarmac line grammar, one line at a time.

This is the reference parser: it understands every record type and producer dialect
(formats.md section 1). The compiled scanner in `scan.py` handles the few line shapes that
make up nearly all of a large trace and hands every other line to this parser, so the two
must agree on the lines both accept (a test checks that over the shared samples).

Every token of a record is accounted for: a record with tokens this grammar does not place,
or a number out of the model's range, is a LineError (an error with `--strict`, else a text
event and a warning). Free text is kept where the record has it: disassembly, event names
and descriptions, LD/ST attributes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ...model import Flag, Isa
from ...regnames import canonical_register
from ...rowbuffer import RowBuffer
from ...timeunits import COUNTING_UNITS, SECOND_EXPONENTS
from ..cycleword import parse_cycle_word
from .timescale import TimeScale

UNITS = (*COUNTING_UNITS, *SECOND_EXPONENTS)

KNOWN_TEXT_RECORDS = frozenset({"CADI", "SIGNAL", "SIGNAL:", "INFO_EXCEPTION_REASON:", "P"})

MAX_CORE = 0xFFFF  # `cpu` is uint16
MAX_ACCESS_BYTES = 0xFF  # memory `size` is uint8
MAX_REGISTER_BYTES = 0xFFFF  # register `size` is uint16
MAX_NUMBER = 2**63 - 1  # event `number` is int64
ADDRESS_BITS = 64

_TOKEN = re.compile(r"\S+")
_TIME = re.compile(r"([0-9]+(?:\.[0-9]+)?)([a-z]*)")
_CPU = re.compile(r"cpu([0-9]+)")
_HEXISH = re.compile(r"[0-9a-fA-F]+")
_DECIMAL = re.compile(r"[0-9]+")
_ADDRESS = re.compile(
    r"([0-9a-fA-F]+)(?::([0-9a-fA-F]+))?(?:_(NS|S))?(?:,([0-9a-fA-F]+)(?:_(?:NS|S))?)?"
)  # va[:pa][_NS|_S][,next halfword's address]
_PARENTHESISED = re.compile(r"\((\S*)\)")
_TICK_OR_ADDRESS = re.compile(r"([0-9a-fA-F]+)(?::([0-9a-fA-F]+))?")  # (tick), (addr), (addr:serial)
_OPCODE = re.compile(r"[0-9a-fA-F]{4}|[0-9a-fA-F]{8}|-{4}|-{8}")
_VALUE_DIGITS = re.compile(r"[0-9a-fA-FxX_:\-]+")
_FLAGS = re.compile(r"[NZCVQ_]{4,5}")  # `R cpsr 20000000 __C_`: the flags spelt out
_REG_RANGE = re.compile(r"([A-Za-z0-9_]+)<([0-9]+):([0-9]+)>")
_BRACKET_NUMBER = re.compile(r"\[(?:0x([0-9a-fA-F]+)|([0-9]+))\]")
_SHORT_MEMORY = re.compile(r"([RW])([0-9][0-9])")
_UPDATE = re.compile(r"MU([0-9]+)_([A-Z]+)")
_BUS = re.compile(r"B([RW])([0-9]+)([ID])([LX_])([P_])([SN])")
_DIAGRAM_COLUMN = re.compile(r"[0-9a-fA-F.#]{8}")
_DIAGRAM_CELL = re.compile(r"\.\.|##|[0-9a-fA-F]{2}")
_SECURE_PADDR = re.compile(r"(N?S):([0-9a-fA-F]+)")

ISA_LETTERS = {
    "A": (Isa.A32, 4),
    "T": (Isa.T32, 0),
    "T16": (Isa.T32, 2),
    "T32": (Isa.T32, 4),
    "X": (Isa.T32EE, 0),
    "O": (Isa.A64, 4),
}

SYSOP_KINDS = {"DC": "cache", "IC": "cache", "TLBI": "tlb", "AT": "sysop"}


class LineError(ValueError):
    """A line this grammar does not accept; the message says what was expected."""

    stamp: LineStamp | None = None


@dataclass
class LineStamp:
    """Time (in the stored unit) and core printed on a line (None where the line leaves them out)."""

    time: int | None = None
    cpu: int | None = None


def hex_number(digits: str, what: str, bits: int = ADDRESS_BITS) -> int:
    """Hex digits (already matched as such) as a number of at most `bits` bits."""
    value = int(digits, 16)  # linear in the digits: base 16 has no length limit
    if value >> bits:
        raise LineError(f"{what} of at most {bits} bits")
    return value


def decimal_number(digits: str, what: str, largest: int) -> int:
    """Decimal digits (already matched as such) as a number of at most `largest`."""
    digits = digits.lstrip("0") or "0"
    if len(digits) > len(str(largest)) or int(digits) > largest:
        raise LineError(f"{what} of at most {largest:,}")
    return int(digits)


class Rows:
    """The four tables' rows that a run of lines produced, tagged with their line numbers."""

    def __init__(self) -> None:
        self.instructions = RowBuffer("instructions")
        self.registers = RowBuffer("registers")
        self.memory = RowBuffer("memory")
        self.events = RowBuffer("events")


def parse_hex_value(digits: str) -> tuple[bytes, bytes]:
    """Big-endian hex digits with `x`/`-` unknowns -> (bytes, per-byte known flags)."""
    clean = digits.replace("_", "").replace(":", "")
    if len(clean) % 2:
        clean = "0" + clean
    data = bytearray()
    known = bytearray()
    for i in range(0, len(clean), 2):
        pair = clean[i : i + 2]
        if all(c in "0123456789abcdefABCDEF" for c in pair):
            data.append(int(pair, 16))
            known.append(1)
        else:
            data.append(0)
            known.append(0)
    return bytes(data), bytes(known)


def _address(match: re.Match[str], what: str) -> int:
    """The (virtual) address of an `_ADDRESS` match; every address in it of at most 64 bits."""
    for extra in (match.group(2), match.group(4)):
        if extra:
            hex_number(extra, "a physical or second address")
    return hex_number(match.group(1), what)


def _access_size(digits: str) -> int:
    size = decimal_number(digits, "an access size in bytes", MAX_ACCESS_BYTES)
    if size == 0:
        raise LineError("an access size of at least one byte")
    return size


def _window(digits: str, what: str) -> int:
    """The base address of an LD/ST diagram: its 16 bytes must all have 64-bit addresses."""
    if not _HEXISH.fullmatch(digits):
        raise LineError(f"{what} in hex")
    base = hex_number(digits, what)
    if base + 15 >> ADDRESS_BITS:
        raise LineError(f"{what} at least 16 bytes below 2^64")
    return base


def _optional_hex(digits: str, what: str, bits: int = ADDRESS_BITS) -> int | None:
    """A hex field of a record whose text is kept whole: None when it is not hex."""
    return hex_number(digits, what, bits) if _HEXISH.fullmatch(digits) else None


def mask_bytes(known_le: bytes) -> bytes | None:
    """The model's byte mask (bit i = byte i written), or None when every byte was."""
    if all(known_le):
        return None
    mask = bytearray((len(known_le) + 7) // 8)
    for i, k in enumerate(known_le):
        if k:
            mask[i // 8] |= 1 << (i % 8)
    return bytes(mask)


def split_power_of_two(lo: int, hi: int) -> list[tuple[int, int]]:
    """Split byte run [lo, hi) from the top into naturally sized pieces of at most 8 bytes."""
    pieces = []
    while hi > lo:
        size = 8
        while size > hi - lo:
            size //= 2
        pieces.append((hi - size, size))
        hi -= size
    return pieces


class TarmacLineParser:
    """Parses Tarmac lines into model rows; keeps the little state some dialects need."""

    def __init__(
        self, default_isa: Isa = Isa.T32, big_endian: bool = False, timescale: TimeScale | None = None
    ) -> None:
        self.default_isa = default_isa
        self.timescale = timescale or TimeScale()
        self.big_endian = big_endian  # MR/MW data printed as a big-endian value: memory order
        self._diagram_line = -2  # line number of the last LD/ST line (continuations follow)
        self._diagram_kind = ""
        self._pending_exception: tuple[int, Rows, int, str] | None = None  # (line, rows, row, name)
        self.earlier_numbers: list[tuple[int, int | None]] = []  # (line, number) for earlier Rows

    def take_earlier_numbers(self) -> list[tuple[int, int | None]]:
        """Exception numbers that belong to event rows of an earlier `Rows` (a pair of lines
        split between chunks): (the event's line, number). The caller patches them in."""
        numbers, self.earlier_numbers = self.earlier_numbers, []
        return numbers

    # -- entry point -------------------------------------------------------------------

    def parse(self, text: str, lineno: int, rows: Rows) -> LineStamp:
        """Parse one line (without its newline), appending its rows; LineError if unknown."""
        s = text.replace("\xa0", " ").rstrip()
        spans = [(m.start(), m.group()) for m in _TOKEN.finditer(s)]
        stamp = LineStamp()
        if not spans:
            return stamp
        toks = [t for _, t in spans]
        try:
            i = self._read_stamp(toks, stamp)
            self._dispatch(s, spans, toks, i, stamp, lineno, rows)
        except LineError as exc:
            exc.stamp = stamp
            raise
        return stamp

    def _dispatch(
        self,
        s: str,
        spans: list[tuple[int, str]],
        toks: list[str],
        i: int,
        stamp: LineStamp,
        lineno: int,
        rows: Rows,
    ) -> None:
        if i >= len(toks):
            raise LineError("a record after the timestamp")
        kw = toks[i]
        rest = toks[i + 1 :]
        record = s[spans[i][0] :]  # what events keep as text: the record without its stamp
        src = lineno

        if kw in ("IT", "IS", "IF", "ES"):
            if kw == "ES" and (not rest or not rest[0].startswith("(")):
                self._es_exception(rest, record, src, rows)
            else:
                self._instruction(kw, spans[i + 1 :], s, src, rows)
        elif kw == "R":
            self._register(rest, record, src, rows)
        elif kw in ("LD", "ST"):
            self._diagram(kw, rest, src, rows)
        elif kw == "EXC":
            self._exc(rest, record, src, rows)
        elif kw == "E":
            self._event(rest, record, src, rows)
        elif kw in ("FD", "FI"):
            self._flow(kw, rest, record, src, rows)
        elif kw == "BR" and rest and rest[0].startswith("("):
            self._branch(rest, record, src, rows)
        elif kw in ("CACHE", "TTW", "TTU", "TLB", "WALKCACHE"):
            self._microarch(kw, rest, record, src, rows)
        elif kw in KNOWN_TEXT_RECORDS:
            rows.events.append(kind="text", name=kw.rstrip(":"), text=record, src=src)
        elif kw == "Tarmac" and rest[:1] == ["Text"]:
            rows.events.append(kind="header", name="tarmac", text=s.strip(), src=src)
        elif self._memory(kw, rest, record, src, rows):
            pass
        elif (
            stamp.time is None
            and self._diagram_line == lineno - 1
            and _HEXISH.fullmatch(kw)
            and len(rest) >= 4
        ):
            self._diagram(self._diagram_kind, toks[i:], src, rows)
        else:
            raise LineError("a Tarmac record (IT, IS, ES, R, M.., LD, ST, E, EXC, BR, ...)")

    # -- pieces ------------------------------------------------------------------------

    def _read_stamp(self, toks: list[str], stamp: LineStamp) -> int:
        i = 0
        m = _TIME.fullmatch(toks[0])
        if m:
            number, unit = m.groups()
            if unit in UNITS:
                i = 1
            elif not unit and len(toks) > 1 and toks[1] in UNITS:
                unit, i = toks[1], 2
            elif not unit and "." not in number and len(toks) > 1 and _looks_like_keyword(toks[1]):
                unit, i = None, 1
            if i:
                stamp.time = self.timescale.convert(number, unit)
                if stamp.time is None:
                    raise LineError(self.timescale.out_of_range(unit))
        if i < len(toks):
            m = _CPU.fullmatch(toks[i])
            if m:
                stamp.cpu = decimal_number(m.group(1), "a core number", MAX_CORE)
                i += 1
        return i

    def _instruction(
        self, kw: str, spans: list[tuple[int, str]], s: str, src: int, rows: Rows
    ) -> None:
        toks = [t for _, t in spans]
        j = 0
        paren = None
        if toks and toks[0].startswith("("):
            bracketed = _PARENTHESISED.fullmatch(toks[0])
            if not bracketed:
                raise LineError("a parenthesised tick or address, as in (123)")
            paren = bracketed.group(1)
            j = 1
        if kw == "ES":
            addr_text, _, opcode_text = (paren or "").partition(":")
        else:
            if paren is not None and not _TICK_OR_ADDRESS.fullmatch(paren):
                raise LineError("a tick or address in hex or decimal in the parentheses")
            after = toks[j:]
            if (
                len(after) >= 2
                and _ADDRESS.fullmatch(after[0])
                and _OPCODE.fullmatch(after[1])
            ):
                addr_text, opcode_text = after[0], after[1]
                j += 2
            elif (
                paren is not None
                and len(after) >= 2
                and _OPCODE.fullmatch(after[0])
                and after[1] in ISA_LETTERS
            ):  # `IT (address) opcode ISA ...`
                addr_text, opcode_text = paren.partition(":")[0], after[0]
                j += 1
            else:
                raise LineError("an instruction address and opcode")
        addr = _ADDRESS.fullmatch(addr_text)
        if not addr or not _OPCODE.fullmatch(opcode_text):
            raise LineError("an instruction address and opcode")
        pc = _address(addr, "an instruction address")
        fetch_failed = opcode_text.startswith("-")
        opcode = None if fetch_failed else int(opcode_text, 16)

        isa, size = self.default_isa, 0
        mode = None
        if j < len(toks) and toks[j] in ISA_LETTERS:
            isa, size = ISA_LETTERS[toks[j]]
            j += 1
            if j < len(toks) and toks[j] == ":":
                j += 1
            elif j < len(toks) and toks[j].endswith(":"):
                mode = toks[j][:-1]
                j += 1
            elif j + 1 < len(toks) and toks[j + 1] == ":":
                mode = toks[j]
                j += 2
        if size == 0:
            size = 2 if len(opcode_text) == 4 else 4
        disasm = s[spans[j][0] :].strip() if j < len(spans) else ""
        executed = kw != "IS"
        if disasm.startswith("CCFAIL"):
            executed = False
            disasm = disasm[6:].strip()
        rows.instructions.append(
            pc=pc,
            opcode=opcode,
            size=size,
            isa=isa.name,
            mode=mode.lower() if mode else None,
            executed=executed,
            flags=int(Flag.FETCH_FAILED) if fetch_failed else 0,
            disasm=disasm or None,
            src=src,
        )

    def _register(self, rest: list[str], record: str, src: int, rows: Rows) -> None:
        if not rest:
            raise LineError("a register name")
        name = rest[0]
        if name in SYSOP_KINDS and len(rest) >= 3 and not _VALUE_DIGITS.fullmatch(rest[1]):
            value = rest[2].replace(":", "").replace("_", "")
            if len(rest) > 3 or not _HEXISH.fullmatch(value):
                raise LineError(f"R {name} <operation> <argument in hex> and nothing after it")
            rows.events.append(
                kind=SYSOP_KINDS[name],
                name=f"{name} {rest[1]}",
                value=hex_number(value, "a system operation argument"),
                text=record,
                src=src,
            )
            return
        k = 1
        suffix = ""
        if k < len(rest) and rest[k].startswith("(") and rest[k].endswith(")"):
            bank = rest[k][1:-1].lower()
            if bank not in ("usr", "aarch32", "aarch64"):
                suffix = "_" + bank
            k += 1
        if k >= len(rest) or not _VALUE_DIGITS.fullmatch(rest[k]):
            raise LineError("a register value in hex")
        width = len(rest[k])
        digits = [rest[k]]
        k += 1
        while k < len(rest) and len(rest[k]) == width and _VALUE_DIGITS.fullmatch(rest[k]):
            digits.append(rest[k])
            k += 1
        if k < len(rest) and _PARENTHESISED.fullmatch(rest[k]):  # `R r13 20001fff (MSP)`
            if not suffix:
                suffix = "_" + rest[k][1:-1].lower()
            k += 1
        if k < len(rest) and _FLAGS.fullmatch(rest[k]):
            k += 1
        if k < len(rest):
            raise LineError("nothing after a register value but a (bank) or flags (NZCV) annotation")
        value = "".join(digits)
        if len(value) - value.count("_") - value.count(":") > 2 * MAX_REGISTER_BYTES:
            raise LineError(f"a register value of at most {MAX_REGISTER_BYTES:,} bytes")
        data_be, known_be = parse_hex_value(value)
        offset = 0
        ranged = _REG_RANGE.fullmatch(name)
        if ranged:
            name = ranged.group(1)
            hi = decimal_number(ranged.group(2), "a register bit", 8 * MAX_REGISTER_BYTES - 1)
            lo = decimal_number(ranged.group(3), "a register bit", 8 * MAX_REGISTER_BYTES - 1)
            if hi < lo or lo % 8 or hi % 8 != 7:
                raise LineError("a byte-aligned register bit range <hi:lo> with hi above lo")
            span = (hi - lo + 1) // 8
            offset = lo // 8
            pad = span - len(data_be)
            if pad > 0:
                data_be = bytes(pad) + data_be
                known_be = b"\x01" * pad + known_be
            data_be, known_be = data_be[-span:], known_be[-span:]
        elif "<" in name:
            raise LineError("a register name, optionally with a <hi:lo> bit range")
        data = bytes(offset) + data_be[::-1]
        known = bytes(offset) + known_be[::-1]
        reg = canonical_register(name + suffix, len(data))
        self._register_row(rows, reg, data, known, src)

    @staticmethod
    def _register_row(rows: Rows, reg: str, data: bytes, known: bytes, src: int) -> None:
        mask = mask_bytes(known)
        if len(data) <= 8:
            value = int.from_bytes(data, "little") if any(known) else None
            rows.registers.append(reg=reg, size=len(data), value=value, mask=mask, src=src)
        else:
            rows.registers.append(reg=reg, size=len(data), wide=data, mask=mask, src=src)

    def _memory(self, kw: str, rest: list[str], record: str, src: int, rows: Rows) -> bool:
        """Memory access records in all their spellings; False if `kw` is not one."""
        op = size = None
        flags = ""
        bus_attrs: list[str] = []
        fetch = memory_order = False
        source = "core"
        update = _UPDATE.fullmatch(kw)
        short = _SHORT_MEMORY.fullmatch(kw)
        bus = _BUS.fullmatch(kw)
        if update:
            op, size, flags = "U", _access_size(update.group(1)), update.group(2)
        elif short:
            op, size = short.group(1), _access_size(short.group(2))
        elif bus:
            # B<rw><sz><fd><lk><p><s> I<wrcbs> O<wrcbs> <master> <addr> <data>, data lowest
            # byte first
            op, size, source = bus.group(1), _access_size(bus.group(2)), "bus"
            fetch, memory_order = bus.group(3) == "I", True
            flags = "".join(c for c in bus.group(4, 5) if c != "_") + bus.group(6)
            bus_attrs, rest = rest[:3], rest[3:]
        else:
            word = parse_cycle_word(kw)
            if word is None or not word.op:
                return False
            op, size, flags = word.op, word.size, word.flags
            fetch, memory_order = word.fetch, word.memory_order
            source = "bus" if word.bus else "core"
        k = 0
        attrs: list[str] = [c for c in flags if c in "XTLO" and not (fetch and c == "O")]
        if update:
            attrs = [flags]
        elif bus:
            attrs = [c for c in flags if c in "XLP"] + ["NS" if flags[-1] == "N" else "S"]
            attrs += [f"master={bus_attrs[2]}", *bus_attrs[:2]] if len(bus_attrs) == 3 else []
        if k < len(rest) and rest[k] in ("X", "T", "L"):
            attrs.append(rest[k])
            k += 1
        if k < len(rest) and rest[k].startswith("("):  # (pc:serial) of some RTL dialects
            paired = _PARENTHESISED.fullmatch(rest[k])
            if not paired or not _TICK_OR_ADDRESS.fullmatch(paired.group(1)):
                raise LineError("a parenthesised (address:serial) pair in hex")
            k += 1
        if k < len(rest) and rest[k] == "TRANSFER":
            if len(rest) != k + 2 or not _HEXISH.fullmatch(rest[k + 1]):
                raise LineError("TRANSFER and the value transferred in hex, and nothing after it")
            rows.events.append(
                kind="coprocessor",
                name=kw,
                value=hex_number(rest[k + 1], "a transferred value"),
                text=record,
                src=src,
            )
            return True
        addr = _ADDRESS.fullmatch(rest[k]) if k < len(rest) else None
        if addr is None:
            raise LineError("a memory address")
        k += 1
        address = _address(addr, "a memory address")
        if addr.group(3) == "NS":
            attrs.append("NS")
        data_tokens = []
        while k < len(rest) and _VALUE_DIGITS.fullmatch(rest[k]):
            data_tokens.append(rest[k])
            k += 1
        value = wide = None
        if k < len(rest) and rest[k].upper() in ("(ABORTED)", "(ABORT)") and not data_tokens:
            attrs.append("ABORTED")
            k += 1
        elif not data_tokens:
            raise LineError("memory data in hex")
        if k < len(rest):
            raise LineError("nothing after a memory access's data")
        if data_tokens:
            data_be, known_be = parse_hex_value("".join(data_tokens))
            data = data_be if memory_order or self.big_endian else data_be[::-1]
            width = len(data)
            if width > size and width & (width - 1) == 0:
                # a narrow access printed as the whole aligned bus word (Cortex-M RTL fetches)
                lane = address % width
                data = data[lane : lane + size]
            elif width > size:
                raise LineError(f"at most {size} bytes of data for a {size}-byte access")
            data = (data + bytes(size))[:size]
            if all(known_be):
                if size <= 8:
                    value = int.from_bytes(data, "little")
                else:
                    wide = data
        rows.memory.append(
            op="F" if fetch else op,
            source=source,
            size=size,
            addr=address,
            paddr=hex_number(addr.group(2), "a physical address") if addr.group(2) else None,
            value=value,
            wide=wide,
            attrs=" ".join(attrs) or None,
            src=src,
        )
        return True

    def _diagram(self, kind: str, rest: list[str], src: int, rows: Rows) -> None:
        """LD/ST lines: a 16-byte window printed high word first, `..` for bytes not accessed."""
        if len(rest) < 5 or not _HEXISH.fullmatch(rest[0]):
            raise LineError(f"{kind} address and four 8-character byte columns")
        columns = rest[1:5]
        if not all(_DIAGRAM_COLUMN.fullmatch(c) for c in columns):
            raise LineError(f"{kind} address and four 8-character byte columns")
        base = _window(rest[0], "an address")
        paddr_base = None
        attrs = []
        for tok in rest[5:]:
            m = _SECURE_PADDR.fullmatch(tok)
            if m and paddr_base is None:
                paddr_base = _window(m.group(2), "a physical address")
                if m.group(1) == "NS":
                    attrs.append("NS")
            elif paddr_base is None and _HEXISH.fullmatch(tok):
                paddr_base = _window(tok, "a physical address")
            else:
                attrs.append(tok)
        cells: list[str] = []  # cell b = byte at base + b
        for b in range(16):
            col = columns[3 - b // 4]
            at = 2 * (3 - b % 4)
            cells.append(col[at : at + 2])
        if not all(_DIAGRAM_CELL.fullmatch(cell) for cell in cells):
            raise LineError(f"{kind} byte cells each '..', '##' or two hex digits")
        self._diagram_line, self._diagram_kind = src, kind
        b = 0
        runs: list[tuple[int, int, bool]] = []
        while b < 16:
            if cells[b] == "..":
                b += 1
                continue
            known = cells[b] != "##"
            start = b
            while b < 16 and cells[b] != ".." and (cells[b] != "##") == known:
                b += 1
            runs.append((start, b, known))
        attr_text = " ".join(attrs) or None
        for start, end, known in reversed(runs):
            for at, size in split_power_of_two(start, end):
                value = None
                if known:
                    value = int.from_bytes(bytes.fromhex("".join(cells[at : at + size])), "little")
                rows.memory.append(
                    op="R" if kind == "LD" else "W",
                    source="core",
                    size=size,
                    addr=base + at,
                    paddr=None if paddr_base is None else paddr_base + at,
                    value=value,
                    attrs=attr_text,
                    src=src,
                )

    def _exc(self, rest: list[str], record: str, src: int, rows: Rows) -> None:
        number = None
        bracketed = _BRACKET_NUMBER.fullmatch(rest[0]) if rest else None
        if bracketed:
            hexadecimal, decimal = bracketed.groups()
            if hexadecimal is not None:
                number = hex_number(hexadecimal, "an exception number", 63)
            else:
                number = decimal_number(decimal, "an exception number", MAX_NUMBER)
            rest = rest[1:]
        name = " ".join(rest)
        pending = self._pending_exception
        if pending and pending[0] == src - 1 and pending[3] == name:
            _, pending_rows, row, _ = pending
            if pending_rows is rows:
                rows.events.columns["number"][row] = number
            else:
                self.earlier_numbers.append((pending[0], number))
            self._pending_exception = None
            return
        rows.events.append(kind="exception", number=number, name=name or None, text=record, src=src)

    def _es_exception(self, rest: list[str], record: str, src: int, rows: Rows) -> None:
        if rest and rest[0] == "EXC":
            self._exc(rest[1:], record, src, rows)
            return
        if not rest:
            raise LineError("an ES instruction '(address:opcode)' or exception")
        name = " ".join(rest)
        rows.events.append(kind="exception", name=name, text=record, src=src)
        self._pending_exception = (src, rows, len(rows.events) - 1, name)

    def _event(self, rest: list[str], record: str, src: int, rows: Rows) -> None:
        if not rest:
            raise LineError("an event")
        first = _ADDRESS.fullmatch(rest[0])
        if first and len(rest) >= 3 and not _HEXISH.fullmatch(rest[-1]):
            # E <value> {<mode>} {<value1>} <number> <desc>
            middle = rest[1:-2]
            shape = "".join("h" if _HEXISH.fullmatch(t) else "m" for t in middle)
            if shape not in ("", "m", "h", "mh") or not _HEXISH.fullmatch(rest[-2]):
                raise LineError("E <value> [<mode>] [<value1>] <number> <description>")
            number = hex_number(rest[-2], "an event number", 63)
            mode = middle[0] if shape.startswith("m") else None
            value1 = hex_number(middle[-1], "an event value") if shape.endswith("h") else None
            desc = rest[-1]
            kind = "mode_change" if number == 0x19 or "ModeChange" in desc else "exception"
            rows.events.append(
                kind=kind,
                number=number,
                name=desc if mode is None else f"{desc} {mode}",
                value=_address(first, "an event value"),
                value1=value1,
                text=record,
                src=src,
            )
            return
        name = rest[0]
        value = _optional_hex(rest[1], "an event value") if len(rest) > 1 else None
        kind = "debug" if name.startswith("DebugEvent") else "signal"
        rows.events.append(kind=kind, name=name, value=value, text=record, src=src)

    @staticmethod
    def _branch(rest: list[str], record: str, src: int, rows: Rows) -> None:
        """`BR (target) [ISA]`."""
        bracketed = _PARENTHESISED.fullmatch(rest[0])
        if not bracketed or not _HEXISH.fullmatch(bracketed.group(1)):
            raise LineError("a branch target address in parentheses")
        if len(rest) > 2 or (len(rest) == 2 and rest[1] not in ISA_LETTERS):
            raise LineError("at most an instruction set letter after a branch target")
        isa = ISA_LETTERS[rest[1]][0].name if len(rest) == 2 else None
        target = hex_number(bracketed.group(1), "a branch target")
        rows.events.append(kind="branch", value=target, name=isa, text=record, src=src)

    @staticmethod
    def _flow(kw: str, rest: list[str], record: str, src: int, rows: Rows) -> None:
        """Program-flow records: `FD|FI (tick) <addr> <target> <ISA after>`; the tick is `number`."""
        tick = None
        args = rest
        if rest and rest[0].startswith("("):
            bracketed = _PARENTHESISED.fullmatch(rest[0])
            if not bracketed or not _DECIMAL.fullmatch(bracketed.group(1)):
                raise LineError(f"{kw} tick as a decimal number in parentheses")
            tick = decimal_number(bracketed.group(1), "a tick", MAX_NUMBER)
            args = rest[1:]
        source = _ADDRESS.fullmatch(args[0]) if args else None
        target = _ADDRESS.fullmatch(args[1]) if len(args) > 1 else None
        if not source or not target:
            raise LineError(f"{kw} branch address and target address")
        if len(args) > 3 or (len(args) == 3 and args[2] not in ISA_LETTERS):
            raise LineError(f"at most an instruction set letter after an {kw} target address")
        isa = ISA_LETTERS[args[2]][0].name if len(args) == 3 else None
        rows.events.append(
            kind="branch",
            name=f"{kw} {isa}" if isa else kw,
            number=tick,
            value=_address(source, "a branch address"),
            value1=_address(target, "a branch target"),
            text=record,
            src=src,
        )

    @staticmethod
    def _microarch(kw: str, rest: list[str], record: str, src: int, rows: Rows) -> None:
        """Cache, table-walk and TLB records: structured where the seed gives the syntax."""
        name, value, value1 = kw, None, None
        if kw == "CACHE" and len(rest) >= 5 and rest[1] == "LINE":
            name = f"CACHE {rest[3]}"
            value1 = _optional_hex(rest[2], "a cache line index")
            value = _optional_hex(rest[4].removeprefix("0x").removesuffix("_NS"), "a physical address")
        elif kw == "CACHE" and rest[:1] == ["MAINTENANCE"]:
            name = "CACHE MAINTENANCE"
        elif kw in ("TTW", "TTU") and len(rest) >= 5:
            name = f"{kw} {rest[0]}"
            value = _optional_hex(rest[3], "a table address")
            value1 = _optional_hex(rest[4], "a table descriptor")
        elif kw in ("TLB", "WALKCACHE") and rest:
            name = f"{kw} {rest[0]}"
        kind = {"CACHE": "cache", "TTW": "ttw", "TTU": "ttw"}.get(kw, "tlb")
        rows.events.append(kind=kind, name=name, value=value, value1=value1, text=record, src=src)


_KEYWORDS = frozenset(
    {"IT", "IS", "IF", "ES", "R", "E", "EXC", "LD", "ST", "BR", "CACHE", "TTW", "TTU", "TLB", "FD", "FI"}
)


def _looks_like_keyword(tok: str) -> bool:
    return (
        tok in _KEYWORDS or tok.startswith(("MR", "MW", "MU", "cpu")) or tok in KNOWN_TEXT_RECORDS
    )
