"""Test-side XScale trace buffer encoder: what the trace hardware would write for a recorded run.

Follows the 80200 manual's message rules (section 13.13) on a ground-truth instruction
stream, so decoding the buffers must give back the part of the stream they cover.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import accumulate

from flow_ops import Stream

from cputrace.isa import BlockCache
from cputrace.model import Isa

BUFFER_BYTES = 256
FAULTING = {1, 2, 3}  # undefined instruction, SWI, prefetch abort: the count leaves them out


@dataclass
class Truth(Stream):
    """A recorded run: its instructions and the exceptions taken after some of them."""

    exceptions: dict[int, int] = field(default_factory=dict)  # instruction index -> vector offset

    @classmethod
    def of_trace(cls, trace) -> Truth:
        stream = Stream.of(trace.sql("SELECT pc, isa, executed FROM instructions ORDER BY seq"))
        rows = trace.sql(
            "SELECT seq, value1 FROM events WHERE kind = 'exception' AND value1 IS NOT NULL ORDER BY seq"
        ).to_pylist()
        return cls(stream.pc, stream.isa, stream.executed, {r["seq"]: r["value1"] & 0x1F for r in rows})


@dataclass
class Entry:
    """One message as written: its bytes (address bytes first) and the instructions it covers."""

    data: bytes
    first: int  # first instruction it covers
    end: int  # the instruction after the last one it covers
    target: int | None = None  # branch messages: where the branch went (bit 0: Thumb)

    def checkpointed(self) -> Entry:
        return Entry(self.data[:-1] + bytes([self.data[-1] | 0x40]), self.first, self.end, self.target)


def address_of(truth: Truth, i: int, thumb_bit: bool) -> int:
    return truth.pc[i] | (1 if thumb_bit and truth.isa[i] is Isa.T32 else 0)


def encode(truth: Truth, blocks: BlockCache, start: int, stop: int, *, thumb_bit: bool = True) -> list[Entry]:
    """The messages written while instructions start .. stop - 1 ran (the pending count is not)."""
    entries: list[Entry] = []
    count, first = 0, start
    for i in range(start, stop):
        if i in truth.exceptions:
            vector = truth.exceptions[i] >> 2
            if vector not in FAULTING:
                count += 1
                if count == 16:
                    entries.append(Entry(b"\xff", first, i + 1))
                    count, first = 0, i + 1
            entries.append(Entry(bytes([vector << 4 | count]), first, i + 1))
        elif truth.taken(i, blocks):
            target = address_of(truth, i + 1, thumb_bit)
            if truth.indirect(i, blocks):
                entries.append(Entry(target.to_bytes(4, "big") + bytes([0x90 | count]), first, i + 1, target))
            else:
                entries.append(Entry(bytes([0x80 | count]), first, i + 1, target))
        else:
            count += 1
            if count == 16:
                entries.append(Entry(b"\xff", first, i + 1))
                count, first = 0, i + 1
            continue
        count, first = 0, i + 1
    return entries


@dataclass
class Buffer:
    """A read-out and what it covers of the run."""

    data: bytes
    chkpt0: int = 0
    chkpt1: int = 0
    pc: int = 0
    covered: int = 0  # first instruction of the oldest complete message
    stop: int = 0  # the instruction at debug entry (not run)


def wrap_buffer(
    truth: Truth, blocks: BlockCache, stop: int, *, checkpoints: int = 0, start: int = 0,
    thumb_bit: bool = True,
) -> Buffer:  # fmt: skip
    """Wrap-around mode halted at instruction `stop`: the newest 256 bytes written since `start`."""
    entries = encode(truth, blocks, start, stop, thumb_bit=thumb_bit)
    entries = _checkpoint(entries, checkpoints)
    data = b"".join(e.data for e in entries)
    window, offset = data[-BUFFER_BYTES:].rjust(BUFFER_BYTES, b"\0"), max(len(data) - BUFFER_BYTES, 0)
    position, covered = 0, stop
    for entry in entries:  # the oldest entry whose message byte is inside the window
        position += len(entry.data)
        if position - 1 >= offset:
            covered = entry.first
            break
    registers = _registers(entries, offset)
    return Buffer(window, *registers, truth.pc[stop], covered, stop)


def _checkpoint(entries: list[Entry], wanted: int) -> list[Entry]:
    """Mark `wanted` branch messages checkpointed, ending 64 and 192 bytes before the newest."""
    ends = list(accumulate(len(e.data) for e in entries))
    total = ends[-1] if ends else 0
    marked = set()
    for back in (64, 192)[:wanted]:
        branches = [j for j, end in enumerate(ends) if end <= total - back and entries[j].target is not None]
        if branches:
            marked.add(branches[-1])
    return [e.checkpointed() if j in marked else e for j, e in enumerate(entries)]


def _registers(entries: list[Entry], offset: int) -> tuple[int, int]:
    """CHKPT0/CHKPT1 for the checkpointed messages inside the window (older: CHKPT1 when two)."""
    position, targets = 0, []
    for entry in entries:
        position += len(entry.data)
        if position - 1 >= offset and entry.data[-1] >> 4 in (0xC, 0xD):
            targets.append(entry.target)
    if len(targets) == 1:
        return targets[0], 0
    if len(targets) == 2:
        return targets[1], targets[0]
    return 0, 0


def fill_once_series(truth: Truth, blocks: BlockCache, start: int, buffers: int) -> list[Buffer]:
    """Fill-once mode: each buffer begins with the debugger's return (an indirect branch with
    the resume address) and ends when the next message would not fit; debug entry follows."""
    entries = iter(encode(truth, blocks, start, len(truth.pc) - 1))
    series: list[Buffer] = []
    pending = next(entries)
    for _ in range(buffers):
        data = address_of(truth, start, True).to_bytes(4, "big") + b"\x90"
        end = start
        while pending is not None and len(data) + len(pending.data) <= BUFFER_BYTES:
            data += pending.data
            end = pending.end
            pending = next(entries, None)
        series.append(Buffer(data, 0, 0, truth.pc[end], start, end))
        start = end
    return series


def as_text(buffers: list[Buffer]) -> str:
    """The documented text form of a list of buffers."""
    lines = ["# XScale trace buffers, oldest byte first"]
    for b in buffers:
        lines += [f"chkpt0=0x{b.chkpt0:08x}", f"chkpt1=0x{b.chkpt1:08x}", f"pc=0x{b.pc:08x}"]
        lines += [" ".join(f"{x:02x}" for x in b.data[i : i + 16]) for i in range(0, len(b.data), 16)]
    return "\n".join(lines) + "\n"


def as_openocd(buffers: list[Buffer], address_types: list[set[int]] | None = None) -> bytes:
    """OpenOCD `xscale dump_trace` records (address bytes typed 1 where `address_types` says)."""
    out = b""
    for n, b in enumerate(buffers):
        out += b"".join(v.to_bytes(4, "big") for v in (b.chkpt0, b.chkpt1, b.pc, len(b.data)))
        types = address_types[n] if address_types else set()
        out += b"".join((x | (1 << 16 if i in types else 0)).to_bytes(4, "big") for i, x in enumerate(b.data))
    return out
