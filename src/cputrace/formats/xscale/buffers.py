"""XScale trace buffers as users get them: raw bytes, a text form, and OpenOCD's dump file.

A buffer is the 256 message bytes, oldest first, plus CHKPT0, CHKPT1 and the PC at debug
entry. Fewer than 256 bytes means the never-written (zero) oldest bytes were left out, as
OpenOCD does. The three forms:

- raw: the bytes alone (one buffer); the registers come from the options `xscale_chkpt0`,
  `xscale_chkpt1` and `xscale_pc`.
- text: `chkpt0=`, `chkpt1=` and `pc=` lines (hex with or without 0x) and lines of hex bytes
  (`9a 00 ff`, or `9a00ff`); `#` starts a comment. Register lines after bytes start the
  next buffer, so a fill-once series is several blocks in one file.
- OpenOCD `xscale dump_trace`: big-endian 32-bit words, per buffer chkpt0, chkpt1, the PC at
  debug entry, the depth, then depth words `data | type << 16` (type 1: an address byte).

Each byte keeps where it came from (`src`: byte offset in the file, or line number for the
text form), so problems are reported at their place in the input.

What does not follow the form is rejected through `DecodeContext.reject`: an error in strict
mode; in lenient mode a warning, and the reading goes on without it, saying what it left out
(`Unread`). The parse of a buffer runs from its newest byte back, so a buffer keeps only its
bytes newer than a problem: older ones cannot be lined up with them any more.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..base import DecodeContext
from .options import XSCALE_CHKPT0, XSCALE_CHKPT1, XSCALE_INPUT, XSCALE_PC

BUFFER_BYTES = 256
_OPENOCD_HEADER = 16
_REGISTER = re.compile(rb"^\s*(chkpt0|chkpt1|pc)\s*[=:]\s*(?:0x)?([0-9a-f]{1,8})\s*$", re.IGNORECASE)
_HEX_LINE = re.compile(rb"^[0-9a-f\s]*$", re.IGNORECASE)
_REGISTER_NAMES = {b"chkpt0": "chkpt0", b"chkpt1": "chkpt1", b"pc": "pc"}
_TEXT_LINES_SNIFFED = 50
_HEAD_BYTES = 64 << 10  # what sniffing sees, and all that form detection looks at
_PRINTABLE = bytes(range(0x20, 0x7F)) + b"\t\n\r"
MOSTLY = 0.75  # the share of well-formed lines or words that still says which form an input is
_TEXT_EXPECTED = "hex bytes or chkpt0=/chkpt1=/pc= lines (hex, at most 8 digits)"
_ENTRY_EXPECTED = "an entry word data | type << 16 (type 0 or 1)"


@dataclass
class TraceBuffer:
    """One read-out of the trace buffer: message bytes oldest first and the registers with it."""

    data: bytes
    src: np.ndarray  # int64 per byte: where in the input it came from
    chkpt0: int | None = None
    chkpt1: int | None = None
    pc: int | None = None  # where execution stopped (debug entry): the next instruction to run
    label: str = "buffer 1"
    unit: str = "offset"  # what `src` counts: "offset" (bytes) or "line"

    def where(self, index: int) -> str:
        """`index` (a byte of `data`) as a place in the input, for messages."""
        return f"{self.label} byte {index} ({self.unit} {int(self.src[index])})"


@dataclass(frozen=True, slots=True)
class Unread:
    """Input that lenient reading left out, in input order among the buffers: a text line
    (kept as a `text` event) or bytes (a `trace_gap` event saying why and how many)."""

    src: int  # line number or byte offset
    text: str  # the line itself, or what was left out and why
    is_line: bool
    dropped: int = 0  # buffer bytes left out


# -- which form an input has -----------------------------------------------------------------


def openocd_share(head: bytes) -> float:
    """The share of well-formed entry words in the records `head` starts with (0: no record).

    `head` may end anywhere, inside a record too (a sniffed prefix, or a truncated file);
    only its whole words are looked at. A record with an impossible depth ends the look.
    """
    offset, good, seen = 0, 0, 0
    while offset + _OPENOCD_HEADER <= len(head) and seen < 4 * BUFFER_BYTES:
        depth = int.from_bytes(head[offset + 12 : offset + 16], "big")
        if not 0 < depth <= BUFFER_BYTES:
            break
        start = offset + _OPENOCD_HEADER
        whole = min(depth, (len(head) - start) // 4)
        words = np.frombuffer(head, ">u4", count=whole, offset=start)
        good += whole - int(np.count_nonzero(_bad_entries(words)))
        seen += whole
        offset = start + 4 * depth
    return good / seen if seen else 0.0


def text_share(head: bytes) -> float:
    """The share of well-formed lines among `head`'s first lines, if one of them is a register
    line (0 otherwise): hex byte lines alone are no sign of this form."""
    first = head[:_HEAD_BYTES].splitlines()[:_TEXT_LINES_SNIFFED]
    lines = [line for line in (_strip(raw) for raw in first) if line]
    registers = sum(1 for line in lines if _REGISTER.match(line))
    if not registers:
        return 0.0
    return (registers + sum(1 for line in lines if _is_hex_line(line))) / len(lines)


def form_of(data: bytes, options: Mapping[str, Any]) -> str:
    """The form `xscale_input` names, or the one the bytes have: text when they are all
    printable (a raw buffer's branch messages are bytes from 0x80 up), raw when no form fits."""
    form = XSCALE_INPUT.read(options)
    if form is None:
        head = data[:_HEAD_BYTES]
        if openocd_share(head) >= MOSTLY:
            return "openocd"
        return "text" if text_share(head) >= MOSTLY or not head.translate(None, _PRINTABLE) else "raw"
    return form


# -- reading ---------------------------------------------------------------------------------


def read_buffers(data: bytes, path: str, ctx: DecodeContext) -> Iterator[TraceBuffer | Unread]:
    """The buffers of an input, and in lenient mode what was left out of them, in input order
    (as they are read: what is left out stays bounded). The register options are checked
    first, whatever the form (only a raw buffer uses them)."""
    registers = {
        "chkpt0": ctx.option(XSCALE_CHKPT0), "chkpt1": ctx.option(XSCALE_CHKPT1), "pc": ctx.option(XSCALE_PC)
    }  # fmt: skip
    form = form_of(data, ctx.options)
    if form == "openocd":
        return read_openocd(data, path, ctx)
    if form == "text":
        return read_text(data, path, ctx)
    return iter(read_raw(data, path, ctx, registers))


def read_openocd(data: bytes, path: str, ctx: DecodeContext) -> Iterator[TraceBuffer | Unread]:
    offset, count = 0, 0
    while offset < len(data):
        left = len(data) - offset
        if left < _OPENOCD_HEADER:
            ctx.reject(path, f"byte {offset}", "a 16-byte xscale dump_trace record header", f"{left} bytes")
            yield Unread(offset, f"the last {left} bytes: a record header cut short", False)
            return
        chkpt0, chkpt1, pc, depth = (int.from_bytes(data[offset + 4 * i : offset + 4 * i + 4], "big")
                                     for i in range(4))  # fmt: skip
        if not 0 < depth <= BUFFER_BYTES:
            ctx.reject(path, f"byte {offset + 12}", "a trace depth of 1 to 256", str(depth))
            text = f"bytes {offset} on: a record of depth {depth}, so where the next records start is unknown"
            yield Unread(offset + 12, text, False)
            return
        start = offset + _OPENOCD_HEADER
        if start + 4 * depth > len(data):
            ctx.reject(path, f"byte {start}", f"{depth} entry words", "the end of the file")
            present = (left - _OPENOCD_HEADER) // 4
            text = f"a record of {depth} entry words, cut short by the end of the file after {present}"
            yield Unread(start, text, False, present)
            return
        count += 1
        label = f"buffer {count}"
        words = np.frombuffer(data, ">u4", count=depth, offset=start)
        src = start + 4 * np.arange(depth, dtype=np.int64) + 3
        bad = np.flatnonzero(_bad_entries(words))
        if len(bad):
            newest = int(bad[-1])
            at = start + 4 * newest
            ctx.reject(path, f"byte {at}", _ENTRY_EXPECTED, f"0x{int(words[newest]):08x}")
            text = f"{label}: entry word at byte {at} malformed: it and the {newest} older are left out"
            yield Unread(at, text, False, newest + 1)
            words, src = words[newest + 1 :], src[newest + 1 :]
        if len(words):
            data_bytes = (words & 0xFF).astype(np.uint8).tobytes()
            yield TraceBuffer(data_bytes, src, chkpt0, chkpt1, pc, label)
        offset = start + 4 * depth


def read_text(data: bytes, path: str, ctx: DecodeContext) -> Iterator[TraceBuffer | Unread]:
    registers: dict[str, int] = {}
    values: list[int] = []
    lines: list[int] = []
    broken: int | None = None  # a line that could not be read, after some bytes of this buffer
    count = 0

    def buffer() -> TraceBuffer:
        nonlocal count
        count += 1
        src = np.array(lines, np.int64)
        return TraceBuffer(bytes(values), src, label=f"buffer {count}", unit="line", **registers)

    number = 0
    for number, raw in enumerate(data.splitlines(), start=1):
        line = _strip(raw)
        if not line:
            continue
        register = _REGISTER.match(line)
        if register:
            if values:
                yield buffer()
                registers, values, lines, broken = {}, [], [], None
            registers[_REGISTER_NAMES[register.group(1).lower()]] = int(register.group(2), 16)
            continue
        if not _is_hex_line(line):
            text = raw.decode("latin-1")
            ctx.reject(path, f"line {number}", _TEXT_EXPECTED, text)
            yield Unread(number, text, True)
            broken = number if values else None
            continue
        if broken is not None:
            text = (f"buffer {count + 1}: its {len(values)} bytes before line {broken} are left out: that "
                    "line, between them and the newer bytes, could not be read")  # fmt: skip
            yield Unread(lines[0], text, False, len(values))
            values, lines, broken = [], [], None
        parsed = bytes.fromhex(b"".join(line.split()).decode("ascii"))
        values += parsed
        lines += [number] * len(parsed)
        if len(values) > BUFFER_BYTES:
            ctx.reject(path, f"line {number}", "at most 256 bytes per buffer", f"{len(values)}")
            excess = len(values) - BUFFER_BYTES
            yield _too_long(lines[0], excess, f"buffer {count + 1}")
            values, lines = values[excess:], lines[excess:]
    if values:
        yield buffer()
    elif registers:
        ctx.reject(path, f"line {number}", "trace buffer bytes after the registers", "none")
    if not count:
        ctx.reject(path, "line 1", "an XScale trace buffer in hex", "no bytes")


def read_raw(
    data: bytes, path: str, ctx: DecodeContext, registers: dict[str, int | None]
) -> list[TraceBuffer | Unread]:  # fmt: skip
    """One buffer; its registers (`chkpt0`, `chkpt1`, `pc`) are the options'."""
    if 0 < len(data) <= BUFFER_BYTES:
        return [TraceBuffer(data, np.arange(len(data), dtype=np.int64), **registers)]
    expected = "a raw XScale trace buffer of 1 to 256 bytes (or --option xscale_input=text or openocd)"
    ctx.reject(path, "byte 0", expected, f"{len(data)} bytes")
    if not data:
        return []
    excess = len(data) - BUFFER_BYTES
    buffer = TraceBuffer(data[excess:], np.arange(excess, len(data), dtype=np.int64), **registers)
    return [_too_long(0, excess, buffer.label), buffer]


def _too_long(src: int, excess: int, label: str) -> Unread:
    text = f"{label}: its {excess} oldest bytes, beyond the 256 a buffer holds, are left out"
    return Unread(src, text, False, excess)


def _bad_entries(words: np.ndarray) -> np.ndarray:
    """Which OpenOCD entry words are not `data | type << 16` with type 0 or 1."""
    return ((words >> 8) & 0xFF).astype(bool) | (words >> 16 > 1)


def _is_hex_line(line: bytes) -> bool:
    return bool(_HEX_LINE.match(line)) and len(b"".join(line.split())) % 2 == 0


def _strip(line: bytes) -> bytes:
    return line.split(b"#", 1)[0].strip()

