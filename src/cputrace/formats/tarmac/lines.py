"""The complete Tarmac line grammar, one line at a time.

This is the reference parser: it understands every record type and producer dialect
(formats.md section 1). The compiled scanner in `scan.py` handles the few line shapes that
make up nearly all of a large trace and hands every other line to this parser, so the two
must agree on the lines both accept (a test checks that over the shared samples).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ...model import Flag, Isa
from ...regnames import canonical_register
from ...rows import RowBuffer
from ..cycleword import parse_cycle_word

UNITS = ("clk", "ns", "ps", "cs", "cyc", "tic", "us", "ms", "s", "fs")

KNOWN_TEXT_RECORDS = frozenset({"CADI", "SIGNAL", "SIGNAL:", "INFO_EXCEPTION_REASON:", "P"})

_TOKEN = re.compile(r"\S+")
_TIME = re.compile(r"(\d+(?:\.\d+)?)([a-z]*)")
_CPU = re.compile(r"cpu(\d+)")
_HEXISH = re.compile(r"[0-9a-fA-F]+")
_ADDRESS = re.compile(r"([0-9a-fA-F]+)(?::([0-9a-fA-F]+))?(?:_(NS|S))?(?:,\S*)?")
_OPCODE = re.compile(r"[0-9a-fA-F]{4}|[0-9a-fA-F]{8}|-{4}|-{8}")
_VALUE_DIGITS = re.compile(r"[0-9a-fA-FxX_:\-]+")
_REG_RANGE = re.compile(r"([A-Za-z0-9_]+)<(\d+):(\d+)>")
_BRACKET_NUMBER = re.compile(r"\[(0x[0-9a-fA-F]+|\d+)\]")
_SHORT_MEMORY = re.compile(r"([RW])(\d\d)")
_UPDATE = re.compile(r"MU(\d+)_([A-Z]+)")
_BUS = re.compile(r"B([RW])(\d+)([ID])([LX_])([P_])([SN])")
_DIAGRAM_COLUMN = re.compile(r"[0-9a-fA-F.#]{8}")
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
    """Time and core printed on a line (None where the line leaves them out)."""

    time: str | None = None
    unit: str | None = None
    cpu: int | None = None


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

    def __init__(self, default_isa: Isa = Isa.T32, big_endian: bool = False) -> None:
        self.default_isa = default_isa
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
        i = self._read_stamp(toks, stamp)
        try:
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

    @staticmethod
    def _read_stamp(toks: list[str], stamp: LineStamp) -> int:
        i = 0
        m = _TIME.fullmatch(toks[0])
        if m:
            number, unit = m.groups()
            if unit in UNITS:
                stamp.time, stamp.unit, i = number, unit, 1
            elif not unit and len(toks) > 1 and toks[1] in UNITS:
                stamp.time, stamp.unit, i = number, toks[1], 2
            elif not unit and "." not in number and len(toks) > 1 and _looks_like_keyword(toks[1]):
                stamp.time, i = number, 1
        if i < len(toks):
            m = _CPU.fullmatch(toks[i])
            if m:
                stamp.cpu = int(m.group(1))
                i += 1
        return i

    def _instruction(
        self, kw: str, spans: list[tuple[int, str]], s: str, src: int, rows: Rows
    ) -> None:
        toks = [t for _, t in spans]
        j = 0
        paren = None
        if toks and toks[0].startswith("("):
            paren = toks[0].strip("()")
            j = 1
        if kw == "ES":
            addr_text, _, opcode_text = (paren or "").partition(":")
        else:
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
        pc = int(addr.group(1), 16)
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
            rows.events.append(
                kind=SYSOP_KINDS[name],
                name=f"{name} {rest[1]}",
                value=int(value, 16) & (2**64 - 1) if _HEXISH.fullmatch(value) else None,
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
        if k < len(rest) and rest[k].startswith("(") and rest[k].endswith(")") and not suffix:
            suffix = "_" + rest[k][1:-1].lower()
        data_be, known_be = parse_hex_value("".join(digits))
        offset = 0
        ranged = _REG_RANGE.fullmatch(name)
        if ranged:
            name = ranged.group(1)
            hi, lo = int(ranged.group(2)), int(ranged.group(3))
            span = (hi - lo + 1 + 7) // 8
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
            op, size, flags = "U", int(update.group(1)), update.group(2)
        elif short:
            op, size = short.group(1), int(short.group(2))
        elif bus:
            # B<rw><sz><fd><lk><p><s> I<wrcbs> O<wrcbs> <master> <addr> <data>, data lowest
            # byte first
            op, size, source = bus.group(1), int(bus.group(2)), "bus"
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
            k += 1
        if k < len(rest) and rest[k] == "TRANSFER":
            value = rest[k + 1] if k + 1 < len(rest) else ""
            rows.events.append(
                kind="coprocessor",
                name=kw,
                value=int(value, 16) if _HEXISH.fullmatch(value) else None,
                text=record,
                src=src,
            )
            return True
        addr = _ADDRESS.fullmatch(rest[k]) if k < len(rest) else None
        if addr is None:
            raise LineError("a memory address")
        k += 1
        if addr.group(3) == "NS":
            attrs.append("NS")
        data_tokens = []
        while k < len(rest) and _VALUE_DIGITS.fullmatch(rest[k]):
            data_tokens.append(rest[k])
            k += 1
        value = wide = None
        if k < len(rest) and rest[k].upper() in ("(ABORTED)", "(ABORT)"):
            attrs.append("ABORTED")
        elif not data_tokens:
            raise LineError("memory data in hex")
        else:
            data_be, known_be = parse_hex_value("".join(data_tokens))
            data = data_be if memory_order or self.big_endian else data_be[::-1]
            width = len(data)
            if width > size and width & (width - 1) == 0:
                # a narrow access printed as the whole aligned bus word (Cortex-M RTL fetches)
                lane = int(addr.group(1), 16) % width
                data = data[lane : lane + size]
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
            addr=int(addr.group(1), 16),
            paddr=int(addr.group(2), 16) if addr.group(2) else None,
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
        base = int(rest[0], 16)
        paddr_base = None
        attrs = []
        for tok in rest[5:]:
            m = _SECURE_PADDR.fullmatch(tok)
            if m and paddr_base is None:
                paddr_base = int(m.group(2), 16)
                if m.group(1) == "NS":
                    attrs.append("NS")
            elif paddr_base is None and _HEXISH.fullmatch(tok):
                paddr_base = int(tok, 16)
            else:
                attrs.append(tok)
        cells: list[str] = []  # cell b = byte at base + b
        for b in range(16):
            col = columns[3 - b // 4]
            at = 2 * (3 - b % 4)
            cells.append(col[at : at + 2])
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
        if rest and _BRACKET_NUMBER.fullmatch(rest[0]):
            number = int(rest[0][1:-1], 0)
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
            number = int(rest[-2], 16) if _HEXISH.fullmatch(rest[-2]) else None
            middle = rest[1:-2]
            mode = next((t for t in middle if not _HEXISH.fullmatch(t)), None)
            value1 = next((int(t, 16) for t in middle if _HEXISH.fullmatch(t)), None)
            desc = rest[-1]
            kind = "mode_change" if number == 0x19 or "ModeChange" in desc else "exception"
            rows.events.append(
                kind=kind,
                number=number,
                name=desc if mode is None else f"{desc} {mode}",
                value=int(first.group(1), 16),
                value1=value1,
                text=record,
                src=src,
            )
            return
        name = rest[0]
        value = int(rest[1], 16) if len(rest) > 1 and _HEXISH.fullmatch(rest[1]) else None
        kind = "debug" if name.startswith("DebugEvent") else "signal"
        rows.events.append(kind=kind, name=name, value=value, text=record, src=src)

    @staticmethod
    def _branch(rest: list[str], record: str, src: int, rows: Rows) -> None:
        target = rest[0].strip("()")
        if not _HEXISH.fullmatch(target):
            raise LineError("a branch target address")
        isa = ISA_LETTERS.get(rest[1])[0].name if len(rest) > 1 and rest[1] in ISA_LETTERS else None
        rows.events.append(kind="branch", value=int(target, 16), name=isa, text=record, src=src)

    @staticmethod
    def _flow(kw: str, rest: list[str], record: str, src: int, rows: Rows) -> None:
        """Program-flow records: `FD|FI (tick) <addr> <target> <ISA after>`; the tick is `number`."""
        tick = rest[0][1:-1] if rest and rest[0].startswith("(") and rest[0].endswith(")") else None
        args = rest[1:] if rest and rest[0].startswith("(") else rest
        source = _ADDRESS.fullmatch(args[0]) if args else None
        target = _ADDRESS.fullmatch(args[1]) if len(args) > 1 else None
        if not source or not target:
            raise LineError(f"{kw} branch address and target address")
        isa = ISA_LETTERS[args[2]][0].name if len(args) > 2 and args[2] in ISA_LETTERS else None
        rows.events.append(
            kind="branch",
            name=f"{kw} {isa}" if isa else kw,
            number=int(tick) if tick is not None and tick.isdigit() else None,
            value=int(source.group(1), 16),
            value1=int(target.group(1), 16),
            text=record,
            src=src,
        )

    @staticmethod
    def _microarch(kw: str, rest: list[str], record: str, src: int, rows: Rows) -> None:
        """Cache, table-walk and TLB records: structured where the seed gives the syntax."""
        name, value, value1 = kw, None, None
        if kw == "CACHE" and len(rest) >= 5 and rest[1] == "LINE":
            name = f"CACHE {rest[3]}"
            value1 = int(rest[2], 16) if _HEXISH.fullmatch(rest[2]) else None
            paddr = rest[4].removeprefix("0x").removesuffix("_NS")
            value = int(paddr, 16) if _HEXISH.fullmatch(paddr) else None
        elif kw == "CACHE" and rest[:1] == ["MAINTENANCE"]:
            name = "CACHE MAINTENANCE"
        elif kw in ("TTW", "TTU") and len(rest) >= 5:
            name = f"{kw} {rest[0]}"
            value = int(rest[3], 16) if _HEXISH.fullmatch(rest[3]) else None
            value1 = int(rest[4], 16) if _HEXISH.fullmatch(rest[4]) else None
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
