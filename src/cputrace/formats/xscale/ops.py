"""From XScale messages to instructions: waypoint ops walked through the program image.

Each branch message is a RUN of its count plus the branch, ending in a taken branch; an
indirect one is followed by a TARGET (its address bytes); an exception is a RUN of its count
(plus the faulting instruction for undefined instruction, SWI and prefetch abort, whose
count leaves it out) and an EXCEPTION at the vector (low 0x0, high 0xFFFF0000 with
`high_vectors`, or `vector_base`), in ARM state. A prefetch or data abort cancels the
instruction it hit. Counts are the core's: a Thumb BL/BLX pair is two instructions (two
16-bit halves on ARMv5) in one row, so a roll-over's 16 can end between its halves; a
roll-over's RUN therefore joins the next message's, where the pair's branch half is.

The walk starts at the first anchor: an indirect branch's address, a checkpointed branch's
CHKPT register, or an exception vector. What ran before it cannot be placed: one
`trace_gap` event (`unanchored`) gives how many instructions, as the core counts them
(`value`). A buffer that continues the previous one of a series (its first message returns
from the debugger to the PC where the previous one stopped) has no such gap. After the last
message, the walk runs in sequence to the PC at debug entry: those instructions are in no
message yet.

Indirect targets and checkpoints select Thumb by bit 0, as BX does; an address with bit 0
clear is ARM unless bit 1 is set or the image's mapping symbols say Thumb.

Checkpoints: the registers hold the targets of the two newest checkpointed messages (one
maps to CHKPT0; two, oldest first, to CHKPT1 and CHKPT0), so when a wrapped buffer still
holds an older checkpointed message, its register has since been overwritten: only the
newest two are mapped. A checkpoint that disagrees with the address bytes of its indirect
branch or with the image's target of its direct branch is reported (`checkpoint_mismatch`)
and not used as an anchor.

Events come in seq order. Those of a buffer's start (and what lenient reading left out
before it) are at the seq of its first instruction, as the walk's own gaps are at the
instruction that comes next.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numba
import numpy as np
import pyarrow as pa

from ...flow.ops import EXCEPTION_CANCELS, RUN_TAKEN, RUN_THUMB_PAIRS, Op, OpBuffer, Ops
from ...flow.program import Program
from ...flow.walker import Walker
from ...image import Image, ImageError
from ...model import SCHEMAS, Isa
from ...rowbuffer import RowBuffer
from ..base import Batch
from .buffers import TraceBuffer, Unread
from .messages import VECTOR_NAMES, Kind, Parsed, instruction_counts

ABORTS = (3, 4)  # prefetch and data abort: the instruction hit did not complete
MAX_PENDING = 16  # instructions after the last message: fewer, or a roll-over would be written
CPU = 0


@dataclass(frozen=True, slots=True)
class Anchor:
    message: int  # index in Parsed.messages
    address: int
    isa: Isa
    how: str


class BufferWalk:
    """Walks the buffers of one input (a series: each may continue the one before)."""

    def __init__(self, image: Image, vector_base: int) -> None:
        self.image = image
        self.program = Program(image)
        self.walker = Walker(self.program, cpu=CPU)
        self.vector_base = vector_base
        self.stopped_at: int | None = None  # debug-entry PC the walk reached in the last buffer

    def buffer(self, buffer: TraceBuffer, parsed: Parsed) -> Iterator[Batch]:
        """The instructions and events of one buffer, whose messages are `parsed`."""
        events = RowBuffer("events")
        first_seq = self.walker.next_seq
        self._report_parse(buffer, parsed, events, first_seq)
        checkpoints = self._checkpoints(buffer, parsed, events, first_seq)
        anchor = self._anchor(parsed, checkpoints)
        stopped_at, self.stopped_at = self.stopped_at, None
        if anchor is None:
            self._unanchored(buffer, parsed, None, events, first_seq)
            yield {"events": events.take()}
            return
        if not (anchor.message == 0 and stopped_at is not None and _resumes(parsed, stopped_at)):
            self._unanchored(buffer, parsed, anchor, events, first_seq)
        ops, op_message = self._ops(buffer, parsed, anchor, checkpoints)
        tables = [*self.walker.run(ops), *self.walker.finish()]
        instructions = _concat("instructions", [t["instructions"] for t in tables])
        self._message_events(buffer, parsed, op_message, ops, instructions, checkpoints, events)
        tables += self._complete(buffer, ops, instructions, events)
        yield {"instructions": _concat("instructions", [t["instructions"] for t in tables])}
        gaps = [t["events"] for t in tables]
        yield {"events": _not_before(_concat("events", [*gaps, events.take()]), first_seq).sort_by("seq")}

    def unread(self, left_out: list[Unread]) -> Batch:
        """What lenient reading left out before the next buffer: lines as `text` events, bytes
        as gaps."""
        events, seq = RowBuffer("events"), self.walker.next_seq
        for unread in left_out:
            if unread.is_line:
                events.append(seq=seq, cpu=CPU, kind="text", text=unread.text, src=unread.src)
            else:
                events.append(seq=seq, cpu=CPU, kind="trace_gap", name="dropped_bytes", value=unread.dropped,
                              text=unread.text, src=unread.src)  # fmt: skip
        return {"events": events.take()}

    # -- parsing results -------------------------------------------------------------------

    def _report_parse(self, buffer: TraceBuffer, parsed: Parsed, events: RowBuffer, seq: int) -> None:
        index = parsed.bad_index
        if index is not None:
            events.append(
                seq=seq, cpu=CPU, kind="trace_gap", name="bad_message", number=index,
                value=buffer.data[index], src=int(buffer.src[index]),
                text=f"{buffer.where(index)}: 0x{buffer.data[index]:02x} is no message type; the {index} "
                "older bytes cannot be parsed and are dropped",
            )  # fmt: skip

    def _checkpoints(
        self, buffer: TraceBuffer, parsed: Parsed, events: RowBuffer, seq: int
    ) -> dict[int, tuple[int, int]]:  # fmt: skip
        """Message number -> (register, address), for the newest two checkpointed messages."""
        marked = np.flatnonzero(parsed.messages["checkpointed"])[-2:].tolist()
        if not marked:
            return {}
        registers = [(0, buffer.chkpt0)] if len(marked) == 1 else [(1, buffer.chkpt1), (0, buffer.chkpt0)]
        mapped: dict[int, tuple[int, int]] = {}
        for i, (register, value) in zip(marked, registers, strict=True):
            message = parsed.messages[i]
            if value is None:
                continue
            index, address = int(message["index"]), int(message["address"])
            if message["has_address"] and address != value:
                text = (f"{buffer.where(index)}: CHKPT{register} 0x{value:08x} differs from the "
                        f"branch address 0x{address:08x}")  # fmt: skip
                self._mismatch(events, seq, buffer, index, text)
                continue
            mapped[i] = register, value
        return mapped

    @staticmethod
    def _mismatch(events: RowBuffer, seq: int, buffer: TraceBuffer, index: int, text: str) -> None:
        """A checkpoint_mismatch gap for the message whose byte is at `index`."""
        events.append(
            seq=seq, cpu=CPU, kind="trace_gap", name="checkpoint_mismatch", number=index, text=text,
            src=int(buffer.src[index]),
        )  # fmt: skip

    def _anchor(self, parsed: Parsed, checkpoints: dict[int, tuple[int, int]]) -> Anchor | None:
        """The first message that gives an address: an indirect branch's own, a checkpoint, or
        an exception's vector (a message is only ever one of these)."""
        messages = parsed.messages
        kind = messages["kind"]
        gives = ((kind == Kind.INDIRECT) & messages["has_address"]) | (kind == Kind.EXCEPTION)
        gives[list(checkpoints)] = True
        found = np.flatnonzero(gives)
        if not len(found):
            return None
        i = int(found[0])
        if kind[i] == Kind.INDIRECT and messages["has_address"][i]:
            return Anchor(i, *self._target(int(messages["address"][i])), "indirect branch address")
        if i in checkpoints:
            return Anchor(i, *self._target(checkpoints[i][1]), "checkpoint")
        return Anchor(i, self._vector(int(messages["vector"][i])), Isa.A32, "exception vector")

    def _unanchored(
        self, buffer: TraceBuffer, parsed: Parsed, anchor: Anchor | None, events: RowBuffer, seq: int
    ) -> None:  # fmt: skip
        """The gap of what ran before the anchor: the messages before it and its own instructions."""
        counted = parsed.messages if anchor is None else parsed.messages[: anchor.message + 1]
        count = int(instruction_counts(counted).sum())
        if not count and not parsed.cut:
            return
        index = int(counted["index"][-1]) if len(counted) else len(buffer.data) - 1
        if anchor is None:
            why = "the buffer gives no address to start at"
        else:
            why = f"they ran before the first address, 0x{anchor.address:x} ({anchor.how})"
        text = f"{buffer.label}: {count} instructions cannot be placed: {why}, up to {buffer.where(index)}"
        if parsed.cut:
            text += f"; {parsed.cut} bytes at its start are the rest of a message a wrap overwrote"
        events.append(
            seq=seq, cpu=CPU, kind="trace_gap", name="unanchored", number=index, value=count, text=text,
            src=int(buffer.src[index]),
        )  # fmt: skip

    # -- ops -------------------------------------------------------------------------------

    def _ops(
        self, buffer: TraceBuffer, parsed: Parsed, anchor: Anchor, checkpoints: dict[int, tuple[int, int]]
    ) -> tuple[Ops, np.ndarray]:  # fmt: skip
        """The walk from the anchor on, and the message each op comes from."""
        messages = parsed.messages
        target = np.where(messages["has_address"], messages["address"].astype(np.int64), -1)
        for i, (_, value) in checkpoints.items():
            if not messages["has_address"][i]:
                target[i] = value
        has_target = target >= 0
        values, which = np.unique(target[has_target], return_inverse=True)
        placed = np.array([self._target(value) for value in values.tolist()], np.int64).reshape(-1, 2)
        target_address, target_isa = np.zeros(len(messages), np.int64), np.zeros(len(messages), np.uint8)
        target_address[has_target], target_isa[has_target] = placed[which, 0], placed[which, 1]
        ops = Ops.empty(2 * (len(messages) - anchor.message) + 1)
        op_message = np.empty(len(ops), np.int64)
        src = buffer.src[messages["index"]]
        vectors = self.vector_base + 4 * messages["vector"].astype(np.int64)
        n = _build(
            messages, instruction_counts(messages), anchor.message, anchor.address, int(anchor.isa),
            has_target, target_address, target_isa, vectors, src, ops.records, op_message,
        )  # fmt: skip
        return ops.select(slice(0, n)), op_message[:n]

    def _target(self, address: int) -> tuple[int, Isa]:
        if address & 3:
            return address & ~1, Isa.T32
        return address, self.image.symbols.state_at(address) or Isa.A32

    def _vector(self, vector: int) -> int:
        return self.vector_base + 4 * vector

    # -- events after the walk -------------------------------------------------------------

    def _message_events(
        self, buffer: TraceBuffer, parsed: Parsed, op_message: list[int], ops: Ops, instructions: pa.Table,
        checkpoints: dict[int, tuple[int, int]], events: RowBuffer,
    ) -> None:  # fmt: skip
        """Exceptions and checkpoints, at the instruction before them; checkpoints checked."""
        first, end = self.walker.op_first, self.walker.op_end
        wanted = (ops.kind == Op.EXCEPTION) | np.isin(op_message, list(checkpoints))
        wanted[0] = True  # the anchor
        for j in np.flatnonzero(wanted).tolist():
            i = int(op_message[j])
            kind, message = int(ops.kind[j]), parsed.messages[i]
            vector, count, index = int(message["vector"]), int(message["count"]), int(message["index"])
            seq, src, where = max(int(end[j]) - 1, 0), int(ops.src[j]), buffer.where(index)
            if kind == Op.EXCEPTION or (kind == Op.SYNC and message["kind"] == Kind.EXCEPTION):
                name = VECTOR_NAMES[vector]
                events.append(
                    seq=seq, cpu=CPU, kind="exception", number=4 * vector, name=name,
                    value=self._vector(vector), value1=count, src=src,
                    text=f"{where}: {name} after {count} instructions",
                )  # fmt: skip
            if i not in checkpoints or kind not in (Op.SYNC, Op.TARGET):
                continue
            register, address = checkpoints[i]
            events.append(seq=seq, cpu=CPU, kind="debug", name="checkpoint", number=register, value=address,
                          text=f"{where}: CHKPT{register}", src=src)  # fmt: skip
            if kind == Op.TARGET and message["kind"] == Kind.DIRECT and first[j - 1] < end[j - 1]:
                expected = self._direct_target(instructions, int(end[j - 1]) - 1)
                if expected is not None and expected != self._target(address)[0]:
                    text = (
                        f"{where}: CHKPT{register} 0x{address:08x}, but the branch goes to 0x{expected:08x}"
                    )
                    self._mismatch(events, seq, buffer, index, text)

    def _direct_target(self, instructions: pa.Table, seq: int) -> int | None:
        """The image's target of the direct branch the walk placed at `seq`."""
        row = seq - int(instructions.column("seq")[0].as_py())
        pc = int(instructions.column("pc")[row].as_py())
        isa = Isa[instructions.column("isa")[row].as_py()]
        try:
            info = self.program.blocks.insn_at(pc, isa)
        except (ImageError, ValueError):
            return None
        return info.target if info.is_direct else None

    # -- the run to the debug-entry PC -----------------------------------------------------

    def _complete(
        self, buffer: TraceBuffer, ops: Ops, instructions: pa.Table, events: RowBuffer
    ) -> Iterator[Batch]:  # fmt: skip
        """The instructions after the last message, up to the PC at debug entry (a generator:
        its events are appended once it has been run through)."""
        src = int(buffer.src[-1])
        seq = max(self.walker.next_seq - 1, 0)
        if buffer.pc is None:
            events.append(
                seq=seq, cpu=CPU, kind="trace_gap", name="no_debug_pc", src=src,
                text=f"{buffer.label}: no PC at debug entry given: up to {MAX_PENDING - 1} instructions "
                "after the last message are left out",
            )  # fmt: skip
            return
        position = self._position(ops, instructions)
        if position is None:
            return  # the walk lost its place: its gap says so
        count = self._steps_to(position, buffer.pc)
        if count is None:
            events.append(
                seq=seq, cpu=CPU, kind="trace_gap", name="debug_pc_unreached", value=buffer.pc, src=src,
                text=f"{buffer.label}: the PC at debug entry 0x{buffer.pc:08x} is not within {MAX_PENDING} "
                f"instructions in sequence of 0x{position[0]:08x}, where the last message left the walk",
            )  # fmt: skip
            return
        run = OpBuffer()
        run.add(Op.RUN, count=count, src=src)
        ops = run.take()
        yield from self.walker.run(ops)  # this buffer's walk ends here: its held row too
        yield from self.walker.finish()
        self.stopped_at = buffer.pc
        events.append(
            seq=max(self.walker.next_seq - 1, 0), cpu=CPU, kind="debug", name="debug_entry", value=buffer.pc,
            value1=count, text=f"{buffer.label}: debug entry at 0x{buffer.pc:08x}", src=src,
        )  # fmt: skip

    def _position(self, ops: Ops, instructions: pa.Table) -> tuple[int, Isa] | None:
        """Where the walk stands after the last op, or None when it lost its place."""
        j = len(ops) - 1
        kind = ops.kind[j]
        if kind in (Op.SYNC, Op.TARGET, Op.EXCEPTION):
            return int(ops.address[j]), Isa(int(ops.isa[j]))
        if self.walker.op_end[j] == self.walker.op_first[j] or not instructions.num_rows:
            return None
        pc = int(instructions.column("pc")[-1].as_py())
        isa = Isa[instructions.column("isa")[-1].as_py()]
        info = self.program.blocks.insn_at(pc, isa)
        if not ops.flags[j] & RUN_TAKEN:
            return info.next_address, isa
        if info.is_direct and info.target is not None and info.next_isa is not None:
            return info.target, info.next_isa
        return None

    def _steps_to(self, position: tuple[int, Isa], pc: int) -> int | None:
        """Instructions in sequence from `position` to `pc`, if it is reached without a branch."""
        address, isa = position
        for count in range(MAX_PENDING):
            if address == pc & ~1:
                return count
            try:
                info = self.program.blocks.insn_at(address, isa)
            except (ImageError, ValueError):
                return None
            if info.is_branch and not info.is_conditional:
                return None
            address = info.next_address
        return None


def _resumes(parsed: Parsed, stopped_at: int) -> bool:
    """Whether the buffer starts with the debugger's return to where the last one stopped."""
    first = parsed.messages[0]
    return (
        first["kind"] == Kind.INDIRECT and bool(first["has_address"])
        and int(first["address"]) & ~1 == stopped_at & ~1
    )  # fmt: skip


_K_EXCEPTION, _K_ROLL_OVER = int(Kind.EXCEPTION), int(Kind.ROLL_OVER)
_SYNC, _RUN, _EXCEPTION, _TARGET = int(Op.SYNC), int(Op.RUN), int(Op.EXCEPTION), int(Op.TARGET)
_A32 = int(Isa.A32)


@numba.njit(cache=True, nogil=True)
def _op(ops, op_message, n, message, kind, address, isa, count, flags, src) -> int:
    """Op n (cycles and time left as `Ops.empty` made them); returns the next op's index."""
    op = ops[n]
    op.kind, op.address, op.isa, op.count, op.flags, op.src = kind, address, isa, count, flags, src
    op_message[n] = message
    return n + 1


@numba.njit(cache=True, nogil=True)
def _build(messages, counts, anchor, anchor_address, anchor_isa, has_target, target_address, target_isa,
           vectors, src, ops, op_message) -> int:  # fmt: skip
    """The ops of the messages from the anchor on (see the module's docstring), into `ops` and
    the message of each into `op_message`; returns how many."""
    n = _op(ops, op_message, 0, anchor, _SYNC, anchor_address, anchor_isa, 0, 0, src[anchor])
    rolled = 0  # instructions of roll-overs not yet in a RUN
    last = len(messages) - 1
    for i in range(anchor + 1, len(messages)):
        kind = messages[i].kind
        count, rolled = rolled + counts[i], 0
        if kind == _K_ROLL_OVER:
            rolled = count
            if i == last:
                n = _op(ops, op_message, n, i, _RUN, 0, _A32, count, RUN_THUMB_PAIRS, src[i])
            continue
        if kind == _K_EXCEPTION:
            n = _op(ops, op_message, n, i, _RUN, 0, _A32, count, RUN_THUMB_PAIRS, src[i])
            vector = messages[i].vector
            flags = EXCEPTION_CANCELS if vector == ABORTS[0] or vector == ABORTS[1] else 0
            n = _op(ops, op_message, n, i, _EXCEPTION, vectors[i], _A32, 0, flags, src[i])
            continue
        n = _op(ops, op_message, n, i, _RUN, 0, _A32, count, RUN_TAKEN | RUN_THUMB_PAIRS, src[i])
        if has_target[i]:
            n = _op(ops, op_message, n, i, _TARGET, target_address[i], target_isa[i], 0, 0, src[i])
    return n


def _not_before(events: pa.Table, first_seq: int) -> pa.Table:
    """A buffer's events with none before its first instruction, `first_seq`.

    Events at the instruction before them (the anchor's exception or checkpoint; the end's,
    when the buffer placed no instruction) would go to the previous buffer's last one, behind
    the events of what lenient reading left out between the buffers (at `first_seq`): they
    are at the buffer's start, with its other start events."""
    seq = events.column("seq").to_numpy()
    if not len(seq) or seq.min() >= first_seq:
        return events
    moved = pa.array(np.maximum(seq, first_seq), pa.int64())
    return events.set_column(events.schema.get_field_index("seq"), "seq", moved)


def _concat(table: str, tables: list[pa.Table]) -> pa.Table:
    tables = [t for t in tables if t.num_rows]
    return pa.concat_tables(tables) if tables else SCHEMAS[table].empty_table()
