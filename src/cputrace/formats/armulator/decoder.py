"""ARMulator Tracer output (ARM ADS / SDT): I, M/B, R and E lines with their headers.

Row association (the model's seq rule): a record belongs to the instruction before it, and
records before the first instruction to instruction 0. The exception is a core opcode fetch
(`M` line with flag `O`): the core fetches ahead, so a fetch belongs to the first of the next
few instructions whose address it covers. It is kept pending, with the seq of the instruction
in progress, until such an instruction arrives (its seq is then patched in, and the row moves
after the rows of earlier instructions) or `FETCH_WINDOW` (fetch.py) instructions
have gone by. Bus (`B`) lines belong to the instruction in progress: bus traffic such as line
fills serves later instructions only indirectly.

An access that prints several words (`BNR8O___ 00008000 E28F8090 E898000F`) is one `memory`
row covering them all. Each word is the 32-bit word at its address, lowest address first, so
the row's value is the little-endian reading of the bytes: word0 | word1 << 32. Wider accesses
go to `wide` as little-endian bytes. `(wait)` and `(abort)` cycles print no data: value null.

Event kinds for `E` lines: core exceptions 0x1-0x9 `exception`, 0x19 `mode_change`, the
Watchpoint and the debugger and trace-module ranges `debug`, MMU line fills, write-back and
stalls `cache`, TLB walks `ttw`, simulator configuration changes `sysop`, everything else
(IRQ/FIQ spotted, pipeline dependencies, prefetch unit, signals, user events) `signal`. Idle
and coprocessor cycles (`MI`, `MIO`, `MC`, `BI`…) move no data and are `signal` events named
`idle`, `instruction_idle` and `coprocessor`, with the line as text.

Decoding: a compiled scanner (scan.py) reads the common lines (`IT`/`IS`, one- and
two-word accesses with or without a `(wait)`-like suffix, idle and coprocessor cycles, `R`,
`E`, after an optional `T`) straight into columns; `LineParser` below, the full grammar, reads
every other line; fetch.py gives every row its seq; events.py names the events.

Numbers are checked against the model's ranges where they are read (times below 2^63,
register values of at most 65,535 bytes); a line longer than the input's line cap
(inputs.MAX_LINE_BYTES) is rejected, kept as a text event of its first bytes. Lines are UTF-8
text, a raw 0xA0 byte being a no-break space (the Tracer writes it); a line with other bytes
that are not UTF-8 is rejected too, kept as a text event with U+FFFD for them.
"""

from __future__ import annotations

import re
from collections.abc import Generator, Iterator
from functools import partial
from typing import ClassVar

import numpy as np

from ...inputs import InputFile
from ...model import SCHEMAS
from ...regnames import canonical_register
from ...rowbuffer import RowBuffer
from ..base import Batch, DecodeContext
from ..cycleword import CycleWord, parse_cycle_word
from ..linerows import merged, numbered, scanned_ahead
from .events import event_kind
from .fetch import Sequencer
from .scan import ScannedChunk, scanned_chunk

CPU = 0  # the Tracer traces a single core
MAX_TIME = 2**63 - 1  # `time` is int64
MAX_REGISTER_BYTES = 0xFFFF  # register `size` is uint16
CHUNK_BYTES = 4 << 20
"""The bytes of lines read, scanned and numbered at a time. While a chunk is scanned its records
take several times its size, two chunks ahead of the one being assembled: smaller chunks than
the input's default (inputs.CHUNK_BYTES) keep that small beside the rows being written, and
are still large enough that the work per chunk outweighs its fixed costs (docs/benchmarks.md,
ARMulator)."""

_HEADER_KEYS = frozenset({"Date:", "Source:", "Options:", "Range:", "Sample:"})
_SUFFIXES = frozenset({"wait", "abort", "peek", "poke"})
_HEX = re.compile(r"[0-9A-Fa-f]+")
_STRAY = re.compile("[\udc80-\udcff]")  # undecodable bytes left by surrogateescape

_PAIR = r"([A-Za-z][A-Za-z0-9_]*)\s*=\s*(?:0[xX])?([0-9A-Fa-f]+)"
_PAIR_RE = re.compile(_PAIR)
_PAIRS = re.compile(rf"{_PAIR}(?:(?:\s*,\s*|\s+){_PAIR})*\s*,?")

_EXPECT_LINE = "an ARMulator Tracer line (header, I, M/B, R, E, optionally after T <time>)"
_EXPECT_I = "IT|IS <address> <4 or 8 hex digit opcode> [disassembly]"
_EXPECT_MEM = "<address> then data words and/or (wait)/(abort)/(peek)/(poke)"
_EXPECT_R = "R <register>=<hex value>[, <register>=<hex value>...]"
_EXPECT_E = "E <word1> <word2> <event number> [name]"


class _Unparsed(Exception):
    """A line that does not follow the format; carries what was expected."""

    def __init__(self, expected: str) -> None:
        super().__init__(expected)
        self.expected = expected


def _hex(token: str, max_digits: int = 16) -> int:
    """A hex number as the Tracer prints it (no 0x); `int(x, 16)` alone also takes 0x, _ and +."""
    if len(token) > max_digits or not _HEX.fullmatch(token):
        raise _Unparsed(f"a hex number of at most {max_digits} digits")
    return int(token, 16)


def _decoded(data: bytes) -> tuple[str, bool]:
    """Lines as text, and whether they are all UTF-8. A raw 0xA0 byte is NBSP, i.e. whitespace
    (the Tracer writes it); other bytes that are not UTF-8 stay as lone surrogates
    (surrogateescape), so that their lines can be told apart and rejected."""
    try:
        return data.decode("utf-8").replace("\xa0", " "), True
    except UnicodeDecodeError:
        text = data.decode("utf-8", "surrogateescape").replace("\udca0", " ").replace("\xa0", " ")
        return text, not _STRAY.search(text)


def _shown(text: str) -> str:
    """`text` with the bytes that were not UTF-8 as U+FFFD, as a text event keeps it."""
    return _STRAY.sub("\ufffd", text)


def _long_lines(chunk: bytes, max_line: int) -> dict[int, bytes]:
    """The lines of `chunk` longer than `max_line` bytes, by index: their first `max_line` bytes."""
    ends = np.flatnonzero(np.frombuffer(chunk, np.uint8) == 10)
    starts = np.concatenate(([0], ends + 1))
    ends = np.append(ends, len(chunk))
    return {int(i): chunk[starts[i] : starts[i] + max_line] for i in np.flatnonzero(ends - starts > max_line)}


def _split(text: str) -> tuple[str, str]:
    """The first word of `text` and the rest, leading whitespace removed."""
    parts = text.split(None, 1)
    return (parts[0], parts[1]) if len(parts) == 2 else (parts[0], "")


class LineParser:
    """Turns lines into rows: the full grammar (the scanner of scan.py is a fast path
    for the common lines). Rows come without seq, each with its line (`src`): fetch.py
    numbers them."""

    def __init__(self, path: str, ctx: DecodeContext, max_line: int) -> None:
        self.path = path
        self.ctx = ctx
        self.max_line = max_line
        self.buffers = {name: RowBuffer(name) for name in SCHEMAS}
        self.events = self.buffers["events"]

    def take(self) -> Batch:
        """The rows of the lines so far, every table (empty or not), and start afresh."""
        return {name: buffer.take() for name, buffer in self.buffers.items()}

    def line(self, src: int, line: str, utf8: bool = True) -> None:
        """One line; `utf8` False when it may hold bytes that are not UTF-8 (lone surrogates)."""
        text = line.strip()
        if not text:
            return
        if not utf8 and _STRAY.search(text):
            self._reject(src, "UTF-8 text", _shown(text))
            return
        try:
            self._record(src, text)
        except _Unparsed as bad:
            self._reject(src, bad.expected, text)

    def long_line(self, src: int, start: bytes) -> None:
        """A line over the input's line cap: kept as a text event of its first `max_line` bytes."""
        self._reject(src, f"a line of at most {self.max_line:,} bytes", _shown(_decoded(start)[0]))

    def _reject(self, src: int, expected: str, text: str) -> None:
        """A line kept as a text event with a warning (an error with --strict)."""
        self.ctx.reject(self.path, str(src), expected, text)
        self._event(src, None, "text", text=text)

    def _event(self, src: int, time: int | None, kind: str, **values: object) -> None:
        self.events.append(time=time, cpu=CPU, kind=kind, src=src, **values)

    def _record(self, src: int, text: str) -> None:
        time = None
        word, rest = _split(text)
        if word == "T":
            if not rest:
                raise _Unparsed("T <hex time>")
            stamp, rest = _split(rest)
            time = _hex(stamp)
            if time > MAX_TIME:
                raise _Unparsed("T <hex time below 2^63>")
            if not rest:
                self._event(src, time, "timestamp", value=time, text=text)
                return
            word, rest = _split(rest)
        if word in ("IT", "IS"):
            self._instruction(src, time, word == "IT", rest)
        elif word in _HEADER_KEYS:
            self._header(src, time, word[:-1].lower(), rest, text)
        elif word in ("R", "RCP"):
            self._registers(src, time, rest)
        elif word == "E":
            self._exception(src, time, rest, text)
        else:
            cycle = parse_cycle_word(word)
            if cycle is None:
                raise _Unparsed(_EXPECT_LINE)
            if cycle.op:
                self._memory(src, time, cycle, rest)
            else:
                name = "coprocessor" if cycle.cycle == "C" else "idle"
                if "O" in cycle.flags:
                    name = "instruction_idle"
                self._event(src, time, "signal", name=name, text=text)

    def _instruction(self, src: int, time: int | None, executed: bool, rest: str) -> None:
        parts = rest.split(None, 2)
        if len(parts) < 2 or len(parts[1]) not in (4, 8):
            raise _Unparsed(_EXPECT_I)
        opcode = _hex(parts[1], 8)
        thumb = len(parts[1]) == 4
        self.buffers["instructions"].append(
            time=time,
            cpu=CPU,
            pc=_hex(parts[0]),
            opcode=opcode,
            size=2 if thumb else 4,
            isa="T32" if thumb else "A32",
            executed=executed,
            flags=0,
            disasm=parts[2] if len(parts) == 3 else None,
            src=src,
        )

    def _memory(self, src: int, time: int | None, cycle: CycleWord, rest: str) -> None:
        tokens = rest.split()
        if not tokens:
            raise _Unparsed(_EXPECT_MEM)
        addr = _hex(tokens[0])
        words: list[str] = []
        suffixes: list[str] = []
        for token in tokens[1:]:
            if token[0] == "(":
                suffix = token[1:-1].lower()
                if token[-1] != ")" or suffix not in _SUFFIXES:
                    raise _Unparsed(_EXPECT_MEM)
                suffixes.append(suffix)
            elif suffixes:
                raise _Unparsed(_EXPECT_MEM)
            else:
                words.append(token)
        value = wide = None
        if len(words) == 1:
            value = _hex(words[0])
        elif words:
            if len(words) * 4 != cycle.size:
                raise _Unparsed(f"{cycle.size // 4} data words for a {cycle.size}-byte access")
            numbers = [_hex(word, 8) for word in words]
            if cycle.size == 8:
                value = numbers[0] | numbers[1] << 32
            else:
                wide = b"".join(number.to_bytes(4, "little") for number in numbers)
        elif not suffixes:
            raise _Unparsed(_EXPECT_MEM)
        self.buffers["memory"].append(
            time=time,
            cpu=CPU,
            op="F" if cycle.fetch else cycle.op,
            source="bus" if cycle.bus else "core",
            size=cycle.size,
            addr=addr,
            value=value,
            wide=wide,
            attrs=" ".join(filter(None, (cycle.cycle, cycle.flags, *suffixes))) or None,
            src=src,
        )

    def _registers(self, src: int, time: int | None, rest: str) -> None:
        if not _PAIRS.fullmatch(rest):
            raise _Unparsed(_EXPECT_R)
        registers = self.buffers["registers"]
        pairs = _PAIR_RE.findall(rest)
        if any(len(digits) > 2 * MAX_REGISTER_BYTES for _, digits in pairs):
            raise _Unparsed(f"register values of at most {MAX_REGISTER_BYTES:,} bytes")
        for name, digits in pairs:
            number = int(digits, 16)
            nbytes = (len(digits) + 1) // 2
            wide = number.to_bytes(nbytes, "little") if nbytes > 8 else None
            registers.append(
                time=time,
                cpu=CPU,
                reg=canonical_register(name, nbytes),
                size=nbytes,
                value=None if wide else number,
                wide=wide,
                src=src,
            )

    def _exception(self, src: int, time: int | None, rest: str, text: str) -> None:
        parts = rest.split(None, 3)
        if len(parts) < 3:
            raise _Unparsed(_EXPECT_E)
        word1, word2, number = _hex(parts[0]), _hex(parts[1]), _hex(parts[2], 8)
        kind, name = event_kind(number)
        if len(parts) == 4:
            name = parts[3]
        self._event(src, time, kind, number=number, name=name, value=word1, value1=word2, text=text)

    def _header(self, src: int, time: int | None, key: str, rest: str, text: str) -> None:
        notes = self.ctx.notes.setdefault("armulator", {})
        notes.setdefault(key, " ".join(rest.split()))
        self._event(src, time, "header", name=key, text=text)


class ArmulatorDecoder:
    """ARMulator Tracer files: instructions, core and bus memory cycles, registers, events.

    `compiled` False reads every line with the line parser alone: the full grammar the
    scanner's fast path must agree with (tests compare the two)."""

    name: ClassVar[str] = "armulator"

    def __init__(self, compiled: bool = True) -> None:
        self.compiled = compiled

    def decode(self, source: InputFile, ctx: DecodeContext) -> Iterator[Batch]:
        sequencer = Sequencer()
        parser = LineParser(source.path, ctx, source.max_line)
        yield from fed(sequencer, parser, source, compiled=self.compiled)
        batch = sequencer.finish()
        if batch:
            yield batch


def fed(
    sequencer: Sequencer,
    parser: LineParser,
    source: InputFile,
    byte_range: tuple[int, int] | None = None,
    first_line: int = 1,
    compiled: bool = True,
) -> Generator[Batch, None, int]:
    """The rows of the lines of `source` (or of its `byte_range`, whose first line is line
    `first_line`), a batch a chunk, numbered by `sequencer` (the rows it holds back are left in
    it); then the number of the line after them.

    Compiled, the chunks are scanned on worker threads ahead (`linerows.scanned_ahead`); the
    lines the scanner leaves are parsed here, in order, as the warnings are counted."""
    chunks = source.line_chunks(CHUNK_BYTES, byte_range=byte_range)
    scans: Iterator[tuple[memoryview, ScannedChunk | None]] = (
        scanned_ahead(chunks, partial(scanned_chunk, max_line=parser.max_line, cpu=CPU))
        if compiled
        else ((chunk, None) for chunk in chunks)
    )
    for chunk, scanned in scans:
        if scanned is None:
            rows, lines = _parsed(chunk, first_line, parser)
        else:
            rows, lines = _with_slow_lines(chunk, scanned, first_line, parser)
        batch = sequencer.sequenced(rows)
        if batch:
            yield batch
        first_line += lines
    return first_line


def _with_slow_lines(
    chunk: memoryview, scanned: ScannedChunk, first_line: int, parser: LineParser
) -> tuple[Batch, int]:
    """The rows of a chunk of lines: the scanner's, and the line parser's for the rest; and the
    number of lines it ends."""
    left = scanned.left.tolist(), scanned.starts.tolist(), scanned.ends.tolist(), scanned.long.tolist()
    for index, start, end, long in zip(*left, strict=True):
        raw = bytes(chunk[start:end])
        if long:
            parser.long_line(first_line + index, raw[: parser.max_line])
        else:
            parser.line(first_line + index, *_decoded(raw.removesuffix(b"\n")))
    slow = parser.take()
    fast = scanned.rows
    rows = {
        name: merged(numbered(fast[name], first_line), table) if name in fast else table
        for name, table in slow.items()
    }
    return rows, scanned.newlines


def _parsed(chunk: memoryview, first_line: int, parser: LineParser) -> tuple[Batch, int]:
    """The rows of a chunk of lines, every line read by the line parser; and the number of
    lines it ends."""
    data = bytes(chunk)
    long = _long_lines(data, parser.max_line)
    text, utf8 = _decoded(data)
    for index, line in enumerate(text.split("\n")):
        if index in long:
            parser.long_line(first_line + index, long[index])
        else:
            parser.line(first_line + index, line, utf8)
    return parser.take(), data.count(b"\n")
