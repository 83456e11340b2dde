"""The trace pane's lines: an instruction with its register, memory and event records.

Built from the rows the browse index's keyed files give for a seq range (a screen's worth),
never from a whole table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from ..model import Flag

_RECONSTRUCTED = int(Flag.RECONSTRUCTED)
"""The flag as a plain int: `&` on the IntFlag builds an enum member, 20 µs a line drawn."""


@dataclass(frozen=True, slots=True)
class RegisterWrite:
    name: str
    value: int | None  # None when wider than 64 bits (then `wide`)
    wide: bytes | None
    mask: bytes | None  # the bytes written, where the input says so

    def hex(self) -> str:
        if self.value is not None:
            return f"0x{self.value:x}"
        return "0x" + bytes(reversed(self.wide or b"")).hex()


@dataclass(frozen=True, slots=True)
class MemoryAccess:
    op: str  # R W U F
    size: int
    address: int
    value: int | None
    wide: bytes | None
    attrs: str | None


@dataclass(frozen=True, slots=True)
class Event:
    kind: str  # exception, trace_gap, text, ... (model.EVENT_KINDS)
    number: int | None
    name: str | None
    value: int | None
    value1: int | None
    text: str | None


@dataclass(frozen=True, slots=True)
class FoldedCall:
    """A folded call the line stands for: the instructions from `entry_seq` to `end_seq`."""

    function: str
    entry_seq: int
    end_seq: int  # the last instruction of the call (its return)
    instructions: int


@dataclass(frozen=True, slots=True)
class Line:
    """One instruction of the trace pane and the records that belong to it."""

    seq: int
    index: int  # its position among its core's instructions
    time: int | None
    cpu: int
    pc: int
    opcode: int | None
    size: int
    isa: str
    mode: str | None
    executed: bool | None  # False: condition failed; None: unknown (the trace does not say)
    flags: int  # model.Flag bits
    disasm: str | None
    src: int  # line number or byte offset of the record in the input
    symbol: str | None  # `function+0x10` for the pc, with an image
    target: int | None  # a direct branch's target, with an image
    target_symbol: str | None
    registers: tuple[RegisterWrite, ...]
    memory: tuple[MemoryAccess, ...]
    events: tuple[Event, ...]
    folded: FoldedCall | None = None  # the line stands for this whole call

    @property
    def height(self) -> int:
        """Lines of the trace pane it takes: the instruction's and one per record, or one for
        a folded call."""
        if self.folded is not None:
            return 1
        return 1 + len(self.registers) + len(self.memory) + len(self.events)

    @property
    def reconstructed(self) -> bool:
        """Inferred from the program image, not seen in the input."""
        return bool(self.flags & _RECONSTRUCTED)


def _by_seq(table: pa.Table) -> dict[int, list[dict[str, Any]]]:
    grouped: dict[int, list[dict[str, Any]]] = {}
    for row in table.to_pylist():
        grouped.setdefault(row["seq"], []).append(row)
    return grouped


def records_by_seq(registers: pa.Table, memory: pa.Table, events: pa.Table) -> tuple[dict, dict, dict]:
    """Each table's rows as RegisterWrite, MemoryAccess and Event tuples, by seq."""
    regs = {
        seq: tuple(RegisterWrite(r["reg"], r["value"], r["wide"], r["mask"]) for r in rows)
        for seq, rows in _by_seq(registers).items()
    }
    mems = {
        seq: tuple(
            MemoryAccess(r["op"], r["size"], r["addr"], r["value"], r["wide"], r["attrs"]) for r in rows
        )
        for seq, rows in _by_seq(memory).items()
    }
    evs = {
        seq: tuple(Event(r["kind"], r["number"], r["name"], r["value"], r["value1"], r["text"]) for r in rows)
        for seq, rows in _by_seq(events).items()
    }
    return regs, mems, evs
