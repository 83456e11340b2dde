"""PFT packet vocabulary shared by the packet decoder, its printer and the flow layer
(ARM IHI 0035B, chapter 4).

Numbers, not strings, travel in the packet columns; the names here turn them into text.
"""

from __future__ import annotations

import enum

from ...coresight import packets


class Kind(enum.IntEnum):
    """What a packet is (the `kind` column)."""

    UNSYNCED = packets.K_UNSYNCED  # bytes before the first A-sync, or skipped after an error
    ERROR = packets.K_ERROR  # a reserved or malformed packet; `info` holds an ErrorReason
    A_SYNC = packets.K_A_SYNC
    I_SYNC = packets.K_I_SYNC
    ATOM = 4
    BRANCH = 5
    WAYPOINT_UPDATE = 6
    TRIGGER = packets.K_TRIGGER
    CONTEXT_ID = packets.K_CONTEXT_ID
    VMID = packets.K_VMID
    TIMESTAMP = packets.K_TIMESTAMP
    EXCEPTION_RETURN = packets.K_EXCEPTION_RETURN
    IGNORE = 12


KIND_NAMES: tuple[str, ...] = tuple(kind.name.lower() for kind in Kind)


class ErrorReason(enum.IntEnum):
    """Why a packet is an error (the `info` column of ERROR packets)."""

    RESERVED_HEADER = 1
    CONTEXT_ID_OFF = 2  # a context ID packet while ETMCR traces no context ID bytes
    BAD_A_SYNC = 3  # zeros not followed by 0x80 after at least five of them
    TRUNCATED = 4  # the trace ends inside the packet


ERROR_TEXT: dict[int, str] = {
    ErrorReason.RESERVED_HEADER: "reserved packet header",
    ErrorReason.CONTEXT_ID_OFF: "context ID packet while ETMCR traces no context ID",
    ErrorReason.BAD_A_SYNC: "zeros that are not an A-sync (five or more 0x00, then 0x80)",
    ErrorReason.TRUNCATED: "packet cut off by the end of the trace",
}

EXPECTED: dict[int, str] = {
    ErrorReason.RESERVED_HEADER: "a PFT packet header",
    ErrorReason.CONTEXT_ID_OFF: "no context ID packet (ETMCR traces no context ID)",
    ErrorReason.BAD_A_SYNC: "an A-sync (five or more 0x00, then 0x80)",
    ErrorReason.TRUNCATED: "the rest of the packet (the trace ends inside it)",
}
"""What the decoder expected where it found each error, for error messages."""


class Flag(enum.IntFlag):
    """Bits of the `flags` column."""

    NS = 0x1  # I-sync, branch: non-secure state after the packet
    HYP = 0x2  # I-sync, branch: Hyp mode after the packet
    ALT_ISA = 0x4  # I-sync, branch: AltISA (ThumbEE rather than Thumb) after the packet
    EXCEPTION = 0x8  # branch: exception information bytes present
    CLOCK_CHANGED = 0x10  # timestamp: the processor clock frequency changed (header bit 2)
    PARTIAL_ADDRESS = 0x20  # address bits above those carried are not known yet


# Exception numbers of branch address packets (ARM IHI 0035B, 4.5.4, table 4-4)
EXCEPTIONS: dict[int, str] = {
    0: "none", 1: "DebugHalt", 2: "SMC", 3: "Hyp", 4: "AsyncDataAbort", 5: "ThumbEECheckFail",
    8: "Reset", 9: "Undef", 10: "SVC", 11: "PrefetchAbort", 12: "DataAbort", 13: "Generic",
    14: "IRQ", 15: "FIQ",
}  # fmt: skip


def exception_name(number: int) -> str:
    """A readable name for a branch address packet's exception number."""
    return EXCEPTIONS.get(number, f"reserved{number}")
