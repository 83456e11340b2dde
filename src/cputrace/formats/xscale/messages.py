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
from dataclasses import dataclass

import numba
import numpy as np

from .buffers import TraceBuffer

ROLL_OVER = 0xFF
ROLL_OVER_COUNT = 16  # instructions a roll-over message stands for
ADDRESS_BYTES = 4


class Kind(enum.IntEnum):
    EXCEPTION = 0  # 0VVV CCCC
    DIRECT = 8  # 1000 CCCC, checkpointed 1100 CCCC
    INDIRECT = 9  # 1001 CCCC, checkpointed 1101 CCCC
    ROLL_OVER = 15  # 1111 1111


MESSAGE = np.dtype(
    [
        ("index", "<i8"), ("address", "<i8"), ("kind", "u1"), ("count", "u1"), ("vector", "u1"),
        ("checkpointed", "?"), ("has_address", "?"),
    ]
)  # fmt: skip
"""One message: `index` of its message byte in the buffer, `kind` (Kind), `count` (CCCC),
`vector` (an exception's VVV, the vector address bits 4:2), `checkpointed`, and an indirect
branch's target `address` (`has_address` false when a wrap cut its address bytes)."""

NO_BAD_BYTE = -1


@dataclass
class Parsed:
    """A buffer's messages, oldest first (MESSAGE records), and what the parse could not use."""

    messages: np.ndarray
    fill: int = 0  # zero bytes never written (0: the buffer wrapped or was filled)
    cut: int = 0  # bytes at the start belonging to a message overwritten by a wrap
    bad_index: int | None = None  # a byte that is no message type; older bytes are dropped

    @property
    def wrapped(self) -> bool:
        return self.fill == 0


def parse_messages(buffer: TraceBuffer) -> Parsed:
    data = np.frombuffer(buffer.data, np.uint8)
    padding = 256 - len(data)  # the zero bytes a shortened read-out (OpenOCD) left out
    out = np.empty(len(data), MESSAGE)
    n, fill, cut, bad = _parse(data, padding, out)
    return Parsed(out[:n][::-1].copy(), int(fill), int(cut), None if bad == NO_BAD_BYTE else int(bad))


_K_EXCEPTION, _K_DIRECT, _K_INDIRECT = int(Kind.EXCEPTION), int(Kind.DIRECT), int(Kind.INDIRECT)
_K_ROLL_OVER = int(Kind.ROLL_OVER)


@numba.njit(cache=True, nogil=True)
def _parse(data, padding, out):
    """The messages of `data` into `out`, newest first. Returns (messages, fill, cut, bad byte
    or NO_BAD_BYTE): see Parsed."""
    first_set = 0
    while first_set < len(data) and data[first_set] == 0:
        first_set += 1
    n = 0
    p = len(data) - 1
    while p >= 0:
        if p < first_set:  # every older byte is zero: the initial fill
            return n, p + 1 + padding, 0, NO_BAD_BYTE
        byte = np.int64(data[p])
        kind = byte >> 4
        m = out[n]
        m.index, m.count, m.vector = p, byte & 0xF, 0
        m.checkpointed, m.address, m.has_address = False, 0, False
        if kind == 0x9 or kind == 0xD:
            m.kind, m.checkpointed = _K_INDIRECT, kind == 0xD
            n += 1
            start = p - ADDRESS_BYTES
            if start < 0:  # the address bytes were overwritten by a wrap
                return n, 0, p, NO_BAD_BYTE
            address = 0
            for j in range(start, p):
                address = (address << 8) | np.int64(data[j])
            m.address, m.has_address = address, True
            p = start - 1
            continue
        if byte < 0x80:
            m.kind, m.vector = _K_EXCEPTION, byte >> 4
        elif kind == 0x8 or kind == 0xC:
            m.kind, m.checkpointed = _K_DIRECT, kind == 0xC
        elif byte == ROLL_OVER:
            m.kind, m.count = _K_ROLL_OVER, 0
        else:
            return n, 0, 0, p
        n += 1
        p -= 1
    return n, padding, 0, NO_BAD_BYTE


def instruction_counts(messages: np.ndarray) -> np.ndarray:
    """How many instructions each message stands for (a faulting instruction included)."""
    kind = messages["kind"]
    count = messages["count"].astype(np.int64)
    faulting = (kind == _K_EXCEPTION) & np.isin(messages["vector"], FAULTING_VECTORS)
    return np.select(
        [kind == _K_ROLL_OVER, kind == _K_EXCEPTION], [ROLL_OVER_COUNT, count + faulting], count + 1
    )


FAULTING_VECTORS = (1, 2, 3)
"""Undefined instruction, SWI, prefetch abort: the count leaves out the faulting instruction."""

VECTOR_NAMES = ("reset", "undefined", "swi", "prefetch_abort", "data_abort", "reserved", "irq", "fiq")
