"""Message bytes of one XScale trace buffer, parsed from the newest end (80200 manual 13.13).

The last byte read is always a message and address bytes come before their indirect branch
message, so reading backwards assigns every byte unambiguously: what forward reading needs
the zero rule for (are leading zeros fill or the high bytes of an address?) falls out. When
every byte older than the current position is zero, those bytes are the buffer's initial
fill: it did not wrap. An indirect branch whose address bytes would lie before the first
byte was cut by a wrap: its address is lost. A byte that is no message type stops the parse:
the older bytes cannot be told apart any more, so they are dropped, never guessed at.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from .buffers import TraceBuffer

ROLL_OVER = 0xFF
ROLL_OVER_COUNT = 16  # instructions a roll-over message stands for
ADDRESS_BYTES = 4


class Kind(enum.IntEnum):
    EXCEPTION = 0  # 0VVV CCCC
    DIRECT = 8  # 1000 CCCC, checkpointed 1100 CCCC
    INDIRECT = 9  # 1001 CCCC, checkpointed 1101 CCCC
    ROLL_OVER = 15  # 1111 1111


@dataclass(frozen=True, slots=True)
class Message:
    kind: Kind
    count: int  # CCCC
    index: int  # of the message byte in the buffer
    checkpointed: bool = False
    vector: int = 0  # exception: VVV, the vector address bits 4:2
    address: int | None = None  # indirect branch target; None when cut by a wrap


@dataclass
class Parsed:
    """A buffer's messages, oldest first, and what the parse could not use."""

    messages: list[Message] = field(default_factory=list)
    fill: int = 0  # zero bytes never written (0: the buffer wrapped or was filled)
    cut: int = 0  # bytes at the start belonging to a message overwritten by a wrap
    bad_index: int | None = None  # a byte that is no message type; older bytes are dropped

    @property
    def wrapped(self) -> bool:
        return self.fill == 0


def parse_messages(buffer: TraceBuffer) -> Parsed:
    data = buffer.data
    padding = 256 - len(data)  # the zero bytes a shortened read-out (OpenOCD) left out
    first_set = next((i for i, b in enumerate(data) if b), len(data))
    parsed = Parsed()
    found: list[Message] = []
    p = len(data) - 1
    while p >= 0:
        if p < first_set:
            parsed.fill = p + 1 + padding
            break
        byte = data[p]
        kind = byte >> 4
        if kind in (0x9, 0xD):
            start = p - ADDRESS_BYTES
            address = int.from_bytes(data[start:p], "big") if start >= 0 else None
            found.append(Message(Kind.INDIRECT, byte & 0xF, p, kind == 0xD, address=address))
            if start < 0:
                parsed.cut = p
                break
            p = start - 1
            continue
        if byte < 0x80:
            message = Message(Kind.EXCEPTION, byte & 0xF, p, vector=byte >> 4)
        elif kind in (0x8, 0xC):
            message = Message(Kind.DIRECT, byte & 0xF, p, kind == 0xC)
        elif byte == ROLL_OVER:
            message = Message(Kind.ROLL_OVER, 0, p)
        else:
            parsed.bad_index = p
            break
        found.append(message)
        p -= 1
    else:
        parsed.fill = padding
    parsed.messages = found[::-1]
    return parsed


def instructions_of(message: Message) -> int:
    """How many instructions a message stands for (a faulting instruction included)."""
    if message.kind is Kind.ROLL_OVER:
        return ROLL_OVER_COUNT
    if message.kind is Kind.EXCEPTION:
        return message.count + (1 if message.vector in FAULTING_VECTORS else 0)
    return message.count + 1  # the branch itself


FAULTING_VECTORS = frozenset({1, 2, 3})
"""Undefined instruction, SWI, prefetch abort: the count leaves out the faulting instruction."""

VECTOR_NAMES = ("reset", "undefined", "swi", "prefetch_abort", "data_abort", "reserved", "irq", "fiq")
