"""Test-side XScale trace buffer encoder: what the trace hardware would write for a recorded run.

Follows the 80200 manual's message rules (section 13.13) on a ground-truth instruction
stream, so decoding the buffers must give back the part of the stream they cover. Counts
are the core's: a Thumb BL/BLX pair (one 32-bit row of the recorded trace) is two 16-bit
instructions on ARMv5, the second of them the branch. The checkpoint registers work as the
manual describes them: each checkpoint's target goes to CHKPT0, the one before to CHKPT1.
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
    pairs: set[int] = field(default_factory=set)  # instruction indices of Thumb BL/BLX pairs

    @classmethod
    def of_trace(cls, trace) -> Truth:
        table = trace.sql("SELECT pc, isa, executed, opcode, size FROM instructions ORDER BY seq")
        stream = Stream.of(table)
        rows = trace.sql(
            "SELECT seq, value1 FROM events WHERE kind = 'exception' AND value1 IS NOT NULL ORDER BY seq"
        ).to_pylist()
        exceptions = {r["seq"]: r["value1"] & 0x1F for r in rows}
        columns = table.to_pydict()
        recorded = enumerate(zip(stream.isa, columns["opcode"], columns["size"], strict=True))
        pairs = {i for i, (isa, opcode, size) in recorded if isa is Isa.T32 and _bl_pair(opcode, size)}
        return cls(stream.pc, stream.isa, stream.executed, exceptions, pairs)

    def halves(self, i: int) -> int:
        """How many instructions the core counts for row i: two for a BL/BLX pair."""
        return 2 if i in self.pairs else 1

    def after_counted(self, first: int, count: int) -> int:
        """The row after `count` instructions, as the core counts them, from row `first`."""
        i = first
        while count > 0:
            count -= self.halves(i)
            i += 1
        assert count == 0, "the count ends inside a pair"
        return i


@dataclass
class Entry:
    """One message as written: its bytes (address bytes first) and the instructions it covers."""

    data: bytes
    first: int  # first instruction it covers
    end: int  # the instruction after the last one it covers
    target: int | None = None  # branch messages: where the branch went (bit 0: Thumb)

    def checkpointed(self) -> Entry:
        return Entry(self.data[:-1] + bytes([self.data[-1] | 0x40]), self.first, self.end, self.target)


def _bl_pair(opcode: int, size: int) -> bool:
    """A Thumb BL/BLX (immediate) as the trace prints it: the ARMv5 ARM ARM's prefix halfword
    11110..., then the suffix 11111... (BL) or 11101... (BLX)."""
    return size == 4 and opcode >> 27 == 0b11110 and (opcode >> 11) & 0b11111 in (0b11111, 0b11101)


def address_of(truth: Truth, i: int, thumb_bit: bool) -> int:
    return truth.pc[i] | (1 if thumb_bit and truth.isa[i] is Isa.T32 else 0)


def encode(truth: Truth, blocks: BlockCache, start: int, stop: int, *, thumb_bit: bool = True) -> list[Entry]:
    """The messages written while instructions start .. stop - 1 ran (the pending count is not)."""
    entries: list[Entry] = []
    count, first = 0, start

    def counted(end: int) -> None:
        """One more instruction (or the first half of a pair) ran; `end`: the row after it is complete."""
        nonlocal count, first
        count += 1
        if count == 16:  # a roll-over: it may end between the halves of a pair (end = the pair's row)
            entries.append(Entry(b"\xff", first, end))
            count, first = 0, end

    for i in range(start, stop):
        if truth.halves(i) == 2:
            counted(i)  # the first half: the second is the branch
        if i in truth.exceptions:
            vector = truth.exceptions[i] >> 2
            if vector not in FAULTING:
                counted(i + 1)
            entries.append(Entry(bytes([vector << 4 | count]), first, i + 1))
        elif truth.taken(i, blocks):
            target = address_of(truth, i + 1, thumb_bit)
            if truth.indirect(i, blocks):
                entries.append(Entry(target.to_bytes(4, "big") + bytes([0x90 | count]), first, i + 1, target))
            else:
                entries.append(Entry(bytes([0x80 | count]), first, i + 1, target))
        else:
            counted(i + 1)
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
    return Buffer(window, *_registers(entries), truth.pc[stop], covered(entries, offset, stop), stop)


def covered(entries: list[Entry], offset: int, stop: int) -> int:
    """The first instruction of the oldest entry whose message byte is at `offset` or after in
    the bytes of `entries` (`stop` when none is)."""
    position = 0
    for entry in entries:
        position += len(entry.data)
        if position - 1 >= offset:
            return entry.first
    return stop


CHECKPOINTS_BACK = (64, 192, 244)
"""Where `wrap_buffer` checkpoints: the branch messages ending this many bytes before the newest."""


def _checkpoint(entries: list[Entry], wanted: int) -> list[Entry]:
    """Mark `wanted` branch messages checkpointed (at CHECKPOINTS_BACK)."""
    ends = list(accumulate(len(e.data) for e in entries))
    total = ends[-1] if ends else 0
    marked = set()
    for back in CHECKPOINTS_BACK[:wanted]:
        branches = [j for j, end in enumerate(ends) if end <= total - back and entries[j].target is not None]
        if branches:
            marked.add(branches[-1])
    return [e.checkpointed() if j in marked else e for j, e in enumerate(entries)]


def _registers(entries: list[Entry]) -> tuple[int, int]:
    """CHKPT0 and CHKPT1 after the run: each checkpoint moves CHKPT0 to CHKPT1 and sets CHKPT0
    to its target, whether or not its message is still in the buffer."""
    chkpt0 = chkpt1 = 0
    for entry in entries:
        if entry.data[-1] >> 4 in (0xC, 0xD):
            chkpt0, chkpt1 = entry.target, chkpt0
    return chkpt0, chkpt1


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
