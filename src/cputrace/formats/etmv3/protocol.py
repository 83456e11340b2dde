"""ETMv3 packet vocabulary shared by the packet decoder, its printer and the flow layer.

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
    BRANCH = 4
    P_HEADER = 5
    CYCLE_COUNT = 6
    TRIGGER = packets.K_TRIGGER
    CONTEXT_ID = packets.K_CONTEXT_ID
    VMID = packets.K_VMID
    TIMESTAMP = packets.K_TIMESTAMP
    EXCEPTION_EXIT = packets.K_EXCEPTION_RETURN
    EXCEPTION_ENTRY = 12
    IGNORE = 13
    NORMAL_DATA = 14
    OOO_DATA = 15
    OOO_PLACEHOLDER = 16
    VALUE_NOT_TRACED = 17
    STORE_FAILED = 18
    DATA_SUPPRESSED = 19


KIND_NAMES: tuple[str, ...] = tuple(kind.name.lower() for kind in Kind)


class ErrorReason(enum.IntEnum):
    """Why a packet is an error (the `info` column of ERROR packets)."""

    RESERVED_HEADER = 1
    DATA_TRACE_OFF = 2  # a data packet header while ETMCR disables that kind of data trace
    CONTEXT_ID_OFF = 3  # a context ID packet while ETMCR traces no context ID bytes
    BAD_A_SYNC = 4  # zeros not followed by 0x80 after at least five of them
    RESERVED_P_HEADER = 5
    RESERVED_ISA = 6  # byte 5 of a branch address names no instruction set
    RESERVED_EXCEPTION = 7  # deprecated branch encoding with a reserved exception code
    TRUNCATED = 8  # the trace ends inside the packet


ERROR_TEXT: dict[int, str] = {
    ErrorReason.RESERVED_HEADER: "reserved packet header",
    ErrorReason.DATA_TRACE_OFF: "data trace packet while ETMCR disables that data trace",
    ErrorReason.CONTEXT_ID_OFF: "context ID packet while ETMCR traces no context ID",
    ErrorReason.BAD_A_SYNC: "zeros that are not an A-sync (five or more 0x00 then 0x80)",
    ErrorReason.RESERVED_P_HEADER: "reserved P-header encoding for this mode",
    ErrorReason.RESERVED_ISA: "branch address byte 5 names no instruction set",
    ErrorReason.RESERVED_EXCEPTION: "reserved exception in a deprecated branch address byte 5",
    ErrorReason.TRUNCATED: "packet cut off by the end of the trace",
}

EXPECTED: dict[int, str] = {
    ErrorReason.RESERVED_HEADER: "an ETMv3 packet header",
    ErrorReason.DATA_TRACE_OFF: "no data packet (ETMCR disables that data trace)",
    ErrorReason.CONTEXT_ID_OFF: "no context ID packet (ETMCR traces no context ID)",
    ErrorReason.BAD_A_SYNC: "an A-sync (five or more 0x00, then 0x80)",
    ErrorReason.RESERVED_P_HEADER: "a P-header defined for this mode (cycle-accurate or not, as ETMCR says)",
    ErrorReason.RESERVED_ISA: "an instruction set in byte 5 of a branch address",
    ErrorReason.RESERVED_EXCEPTION: "a defined exception in a deprecated branch address byte 5",
    ErrorReason.TRUNCATED: "the rest of the packet (the trace ends inside it)",
}
"""What the decoder expected where it found each error, for error messages."""


class Flag(enum.IntFlag):
    """Bits of the `flags` column."""

    NS = 0x1  # I-sync, branch: non-secure state after the packet
    HYP = 0x2  # I-sync, branch: Hyp mode after the packet
    ALT_ISA = 0x4  # I-sync, branch: AltISA (ThumbEE rather than Thumb) after the packet
    EXCEPTION = 0x8  # branch: exception information bytes present
    CANCEL = 0x10  # branch: the exception cancels the last instruction traced
    DEPRECATED = 0x20  # branch: the deprecated byte-5 exception encoding
    LSIP = 0x40  # I-sync: a load/store was in progress; address2 holds the LSiP address
    BIG_ENDIAN = 0x80  # data packets: transfers are big-endian (from the last full address)
    CLOCK_CHANGED = 0x100  # timestamp: the R bit (processor clock frequency changed)
    PARTIAL_ADDRESS = 0x200  # address bits above those carried are not known yet


# Exception numbers of branch packets, A and R profiles (ETMv3 architecture, table 7-9)
EXCEPTIONS_AR: dict[int, str] = {
    0: "none", 1: "DebugHalt", 2: "SMC", 3: "Hyp", 4: "AsyncDataAbort", 5: "Jazelle",
    8: "Reset", 9: "Undef", 10: "SVC", 11: "PrefetchAbort", 12: "DataAbort", 13: "Generic",
    14: "IRQ", 15: "FIQ",
}  # fmt: skip

# v7-M: 9-bit numbers; interrupts are 8 (IRQ0), 1-7 (IRQ1-7) and 24 up (IRQ8 up)
EXCEPTIONS_M: dict[int, str] = {
    0: "none", 9: "UsageFault", 10: "NMI", 11: "SVC", 12: "DebugMonitor", 13: "MemManage",
    14: "PendSV", 15: "SysTick", 17: "Reset", 19: "HardFault", 21: "BusFault",
}  # fmt: skip

# The deprecated ETMv3.0 byte-5 encoding (ARM state only): 3-bit code -> A/R exception number;
# codes 2 and 3 are reserved (-1).
DEPRECATED_EXCEPTIONS = (8, 14, -1, -1, 5, 15, 4, 1)


def exception_name(number: int, m_profile: bool) -> str:
    """A readable name for a branch packet's exception number."""
    if m_profile:
        if number in EXCEPTIONS_M:
            return EXCEPTIONS_M[number]
        if 1 <= number <= 8:
            return f"IRQ{number % 8}"
        if number >= 24:
            return f"IRQ{number - 16}"
        return f"reserved{number}"
    return EXCEPTIONS_AR.get(number, f"reserved{number}")
