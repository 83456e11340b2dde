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
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ...errors import TraceFormatError
from ..base import option_number

BUFFER_BYTES = 256
_OPENOCD_HEADER = 16
_REGISTER = re.compile(rb"^\s*(chkpt0|chkpt1|pc)\s*[=:]\s*(?:0x)?([0-9a-f]{1,8})\s*$", re.IGNORECASE)
_HEX_LINE = re.compile(rb"^[0-9a-f\s]*$", re.IGNORECASE)
_REGISTER_NAMES = {b"chkpt0": "chkpt0", b"chkpt1": "chkpt1", b"pc": "pc"}


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


def looks_like_openocd(head: bytes) -> bool:
    """Whether `head` parses as OpenOCD dump records up to its end (or its first 4 records)."""
    offset, records = 0, 0
    while offset + _OPENOCD_HEADER <= len(head) and records < 4:
        depth = int.from_bytes(head[offset + 12 : offset + 16], "big")
        if not 0 < depth <= BUFFER_BYTES:
            return False
        words = np.frombuffer(head[offset + 16 : offset + 16 + 4 * depth], ">u4")
        if (words >> 8 & 0xFF).any() or (words >> 16 > 1).any():
            return False
        offset += _OPENOCD_HEADER + 4 * depth
        records += 1
    return records > 0 and (offset == len(head) or records == 4)


def looks_like_text(head: bytes) -> bool:
    lines = [line for line in (_strip(raw) for raw in head.splitlines()[:50]) if line]
    return (
        bool(lines)
        and any(_REGISTER.match(line) for line in lines)
        and all(_REGISTER.match(line) or _HEX_LINE.match(line) for line in lines)
    )


def read_openocd(data: bytes, path: str) -> list[TraceBuffer]:
    buffers: list[TraceBuffer] = []
    offset = 0
    while offset < len(data):
        if offset + _OPENOCD_HEADER > len(data):
            raise TraceFormatError(path, f"byte {offset}", "a 16-byte xscale dump_trace record header",
                                   f"{len(data) - offset} bytes")  # fmt: skip
        chkpt0, chkpt1, pc, depth = (int.from_bytes(data[offset + 4 * i : offset + 4 * i + 4], "big")
                                     for i in range(4))  # fmt: skip
        if not 0 < depth <= BUFFER_BYTES:
            raise TraceFormatError(path, f"byte {offset + 12}", "a trace depth of 1 to 256", str(depth))
        start = offset + _OPENOCD_HEADER
        if start + 4 * depth > len(data):
            raise TraceFormatError(path, f"byte {start}", f"{depth} entry words", "the end of the file")
        words = np.frombuffer(data[start : start + 4 * depth], ">u4")
        bad = np.flatnonzero((words >> 8 & 0xFF) | (words >> 16 > 1))
        if len(bad):
            at = start + 4 * int(bad[0])
            raise TraceFormatError(path, f"byte {at}", "an entry word data | type << 16 (type 0 or 1)",
                                   f"0x{int(words[bad[0]]):08x}")  # fmt: skip
        src = start + 4 * np.arange(depth, dtype=np.int64) + 3
        label = f"buffer {len(buffers) + 1}"
        buffers.append(TraceBuffer((words & 0xFF).astype(np.uint8).tobytes(), src, chkpt0, chkpt1, pc, label))
        offset = start + 4 * depth
    return buffers


def read_text(data: bytes, path: str) -> list[TraceBuffer]:
    buffers: list[TraceBuffer] = []
    registers: dict[str, int] = {}
    values: list[int] = []
    lines: list[int] = []

    def close() -> None:
        if values:
            src = np.array(lines, np.int64)
            label = f"buffer {len(buffers) + 1}"
            buffers.append(TraceBuffer(bytes(values), src, label=label, unit="line", **registers))
        elif registers:
            raise TraceFormatError(path, f"line {number}", "trace buffer bytes after the registers", "none")

    number = 0
    for number, raw in enumerate(data.splitlines(), start=1):
        line = _strip(raw)
        if not line:
            continue
        register = _REGISTER.match(line)
        if register:
            if values:
                close()
                registers, values, lines = {}, [], []
            registers[_REGISTER_NAMES[register.group(1).lower()]] = int(register.group(2), 16)
            continue
        digits = b"".join(line.split())
        if not _HEX_LINE.match(line) or len(digits) % 2:
            raise TraceFormatError(path, f"line {number}", "hex bytes or chkpt0=/chkpt1=/pc= lines",
                                   line.decode("latin-1"))  # fmt: skip
        parsed = bytes.fromhex(digits.decode("ascii"))
        values += parsed
        lines += [number] * len(parsed)
        if len(values) > BUFFER_BYTES:
            raise TraceFormatError(path, f"line {number}", "at most 256 bytes per buffer", f"{len(values)}")
    close()
    if not buffers:
        raise TraceFormatError(path, "line 1", "an XScale trace buffer in hex", "no bytes")
    return buffers


def read_raw(data: bytes, path: str, options: dict) -> list[TraceBuffer]:
    if not 0 < len(data) <= BUFFER_BYTES:
        raise TraceFormatError(path, "byte 0", "a raw XScale trace buffer of 1 to 256 bytes",
                               f"{len(data)} bytes")  # fmt: skip
    registers = {name: option_number(options, f"xscale_{name}") for name in ("chkpt0", "chkpt1", "pc")}
    return [TraceBuffer(data, np.arange(len(data), dtype=np.int64), **registers)]


def read_buffers(data: bytes, path: str, options: dict) -> list[TraceBuffer]:
    """The buffers of an input, in the form `xscale_input` names or the one its bytes have."""
    form = options.get("xscale_input") or (
        "openocd" if looks_like_openocd(data) else "text" if looks_like_text(data) else "raw"
    )
    if form == "openocd":
        return read_openocd(data, path)
    if form == "text":
        return read_text(data, path)
    if form == "raw":
        return read_raw(data, path, options)
    raise TraceFormatError(path, "0", "xscale_input raw, text or openocd", str(form))


def _strip(line: bytes) -> bytes:
    return line.split(b"#", 1)[0].strip()
