"""ETMv4 instruction trace packet vocabulary shared by the packet decoder, its printer and the
flow layer (Arm IHI 0064, "ETM Architecture Specification ETMv4", chapter 6 "Descriptions of
Trace Packets").

Numbers, not strings, travel in the packet columns; the names here turn them into text.
Packets come out as `coresight.packets.PACKET` records. Fields by kind, beyond `kind`,
`offset` (in the buffer), `pos` (in the source's stream) and `size` (bytes):

- trace_info: info (the INFO field: bit 0 cycle counting, bits 3:1 conditional trace), value
  (the P0 key), value2 (the speculation depth: P0 elements not yet committed), cycles (the cycle
  count threshold). Absent sections are 0. It resets the address history to zero.
- trace_on, discard, overflow, exception_return, function_return, cond_flush, ignore, a_sync:
  no fields.
- timestamp: value (the timestamp, the bits carried merged into the last one), bits (carried),
  cycles (the cycle count that follows it; -1 none).
- exception: exception (the exception type, 10 bits on the M profile), info (the address
  interpretation E1:E0 bits), flag FAULT_PENDING (M profile). The preferred return address is
  the address packet that follows.
- cycle_count: info (format 1-3), cycles (the count, threshold added; -1 for format 1 after an
  overflow, flag UNKNOWN_COUNT), value (the P0 elements committed, where the format gives them;
  flag COMMIT).
- commit: value (P0 elements committed).
- cancel: info (format 1-3), value (P0 elements cancelled), atoms and count (the atoms of format
  2 and 3: the newest P0 elements left after the cancel, given again), flag MISPREDICT (format 1
  with a mispredict: the newest element left was mispredicted).
- mispredict: atoms and count (0 to 2 atoms that follow the mispredict).
- atom: info (format 1-6), atoms (bit i set: atom i, oldest first, is E), count (1 to 24).
- cond_instr: info (format 1-3), value (format 1: the key; format 2: the element index code;
  format 3: the element count), flag COND_FINAL (format 3: the last element is a final one).
- cond_result: info (format 1-4), value (format 1: the key of the first result; else the
  tokens), value2 (format 1: the key of the second, flag COND_TWO), atoms (format 1: results,
  4 bits each), count (format 1: the results' CI bits, the first in bit 0; format 2: the key
  increment).
- event: value (the 4-bit event mask).
- context: info (EL), value (context ID), value2 (VMID), flags NS AARCH64, and CONTEXT_ID and
  VMID when the packet carries them; these are the context after the packet (a context packet
  without payload, flag CONTEXT_SAME, repeats the current one).
- address_context: as address_long, and the context fields of `context`.
- address_long, address_short: address (complete: the bits carried merged into the newest
  entry of the address history), bits (carried: 64 or 32 long; 9, 17 short IS0; 8, 16 short
  IS1), isa (IS0 is A64 in AArch64 state, A32 in AArch32; IS1 is T32), flags IS1
  PARTIAL_ADDRESS.
- address_match: address, isa and flag IS1 of the entry of the address history it names; info
  (the entry, 0-2).
- q: value (instructions; flag UNKNOWN_COUNT when the packet gives none), the address fields of
  address_short, address_long or address_match when it carries an address (flag Q_ADDRESS).
- numbered_data_sync, unnumbered_data_sync: value (the marker number).
- error: info (ErrorReason). unsynced: no fields.

Data trace is a separate ETMv4 stream (its own trace ID) that no snapshot here holds and few
trace units implement: this decoder reads the instruction trace stream, where data trace shows
only as data synchronisation markers.
"""

from __future__ import annotations

import enum

from ...coresight import packets


class Kind(enum.IntEnum):
    """What a packet is (the `kind` column). The codes ETMv4 shares with ETMv3 and PFT have the
    same numbers (coresight.packets.K_*); those of packets ETMv4 lacks (the I-sync's 3, trigger
    7, context ID 8 and VMID 9) are not used, so that no code means different things to the
    events layer."""

    UNSYNCED = packets.K_UNSYNCED  # bytes before the first A-sync, or skipped after an error
    ERROR = packets.K_ERROR  # a reserved or malformed packet; `info` holds an ErrorReason
    A_SYNC = packets.K_A_SYNC  # extension: 11 x 0x00, then 0x80
    TRACE_INFO = 4
    TRACE_ON = 5
    DISCARD = 6  # extension 0x03: the trace unit discarded the speculative elements
    TIMESTAMP = packets.K_TIMESTAMP
    EXCEPTION_RETURN = packets.K_EXCEPTION_RETURN
    OVERFLOW = 12  # extension 0x05: the trace unit's buffer overflowed
    EXCEPTION = 13
    CYCLE_COUNT = 14
    COMMIT = 15
    CANCEL = 16
    MISPREDICT = 17
    COND_INSTR = 18
    COND_RESULT = 19
    COND_FLUSH = 20
    EVENT = 21
    CONTEXT = 22
    ADDRESS_CONTEXT = 23
    ADDRESS_LONG = 24
    ADDRESS_SHORT = 25
    ADDRESS_MATCH = 26
    ATOM = 27
    Q = 28
    IGNORE = 29  # ETMv4.3 and later
    FUNCTION_RETURN = 30  # Armv8-M, ETMv4.2 and later
    NUMBERED_DATA_SYNC = 31
    UNNUMBERED_DATA_SYNC = 32


KIND_NAMES: tuple[str, ...] = tuple(
    Kind(code).name.lower() if code in Kind._value2member_map_ else "" for code in range(max(Kind) + 1)
)
"""Kind names by code ("" for the codes ETMv4 does not use)."""


class ErrorReason(enum.IntEnum):
    """Why a packet is an error (the `info` column of ERROR packets)."""

    RESERVED_HEADER = 1
    NOT_CONFIGURED = 2  # a header the trace unit's configuration does not produce
    BAD_EXTENSION = 3  # 0x00 followed by a byte that starts no extension packet
    BAD_A_SYNC = 4  # eleven zeros not followed by 0x80, or more zeros than an A-sync has
    FIELD_TOO_LONG = 5  # a continuation field goes on past the bytes its value can have
    RESERVED_VALUE = 6  # a field holds a value out of its range (a count wider than the counter...)
    TRUNCATED = 7  # the trace ends inside the packet


ERROR_TEXT: dict[int, str] = {
    ErrorReason.RESERVED_HEADER: "reserved packet header",
    ErrorReason.NOT_CONFIGURED: "packet the trace unit's configuration does not produce",
    ErrorReason.BAD_EXTENSION: "extension packet (0x00) of a reserved type",
    ErrorReason.BAD_A_SYNC: "zeros that are not an A-sync (eleven 0x00, then 0x80)",
    ErrorReason.FIELD_TOO_LONG: "continuation field longer than its value allows",
    ErrorReason.RESERVED_VALUE: "field value out of its range",
    ErrorReason.TRUNCATED: "packet cut off by the end of the trace",
}

EXPECTED: dict[int, str] = {
    ErrorReason.RESERVED_HEADER: "an ETMv4 instruction trace packet header",
    ErrorReason.NOT_CONFIGURED: "a packet this configuration produces (TRCIDR0/TRCCONFIGR say which)",
    ErrorReason.BAD_EXTENSION: "an A-sync (0x00 0x00), discard (0x00 0x03) or overflow (0x00 0x05)",
    ErrorReason.BAD_A_SYNC: "an A-sync (eleven 0x00, then 0x80)",
    ErrorReason.FIELD_TOO_LONG: "a continuation field that ends within its value's bytes",
    ErrorReason.RESERVED_VALUE: "a value in the field's range (a cycle count within TRCIDR2.CCSIZE bits, "
    "a trace info INFO field of 8 bits, a commit count of 0 or more)",
    ErrorReason.TRUNCATED: "the rest of the packet (the trace ends inside it)",
}
"""What the decoder expected where it found each error, for error messages."""


class Flag(enum.IntFlag):
    """Bits of the `flags` column."""

    NS = 0x1  # context: non-secure state
    AARCH64 = 0x2  # context: AArch64 state (the SF bit); clear: AArch32
    CONTEXT_ID = 0x4  # context: the packet carries a context ID
    VMID = 0x8  # context: the packet carries a VMID
    CONTEXT_SAME = 0x10  # context: the packet carries no context information (it is unchanged)
    IS1 = 0x20  # address: instruction set 1 (T32); clear: IS0 (A64 or A32)
    PARTIAL_ADDRESS = 0x40  # address: bits above those carried are not known yet
    UNKNOWN_COUNT = 0x80  # cycle_count: the count is unknown (after an overflow); q: no count
    COMMIT = 0x100  # cycle_count: the packet commits `value` P0 elements
    MISPREDICT = 0x200  # cancel format 1: the newest element left was mispredicted
    COND_FINAL = 0x400  # cond_instr format 3: the last element is final
    COND_TWO = 0x800  # cond_result format 1: two results
    FAULT_PENDING = 0x1000  # exception (M profile): a fault was pending
    Q_ADDRESS = 0x2000  # q: the packet carries an address


ATOM_FORMATS = 6
"""Atom packet formats (1-6): `info` of atom packets."""
MAX_ATOMS = 24
"""The most atoms one packet holds (format 6)."""

# Exception types of the A and R profiles (IHI 0064, 6.4.14 "Exception packet", table 6-17)
EXCEPTIONS_AR: dict[int, str] = {
    0x0: "PE reset", 0x1: "Debug halt", 0x2: "Call", 0x3: "Trap", 0x4: "System error",
    0x6: "Inst debug", 0x7: "Data debug", 0xA: "Alignment", 0xB: "Inst fault", 0xC: "Data fault",
    0xE: "IRQ", 0xF: "FIQ",
}  # fmt: skip

# Exception types of the M profile: 0x01-0x0F the exception numbers (0x07-0x0A and 0x0D
# reserved), IRQ0-7 at 0x10-0x17, the trace unit's codes for debug halt, lazy floating-point
# push and lockup at 0x18-0x1A, and IRQ8 up at 0x208 up (IHI 0064, table 6-18)
EXCEPTIONS_M: dict[int, str] = {
    0x1: "PE reset", 0x2: "NMI", 0x3: "HardFault", 0x4: "MemManage", 0x5: "BusFault",
    0x6: "UsageFault", 0xB: "SVC", 0xC: "DebugMonitor", 0xE: "PendSV", 0xF: "SysTick",
    0x18: "Debug halt", 0x19: "Lazy FP push", 0x1A: "Lockup",
}  # fmt: skip


def exception_name(number: int, m_profile: bool) -> str:
    """A readable name for an exception packet's type (`exception`)."""
    if m_profile:
        if 0x10 <= number < 0x18:
            return f"IRQ{number - 0x10}"
        if 0x208 <= number <= 0x3EF:
            return f"IRQ{number - 0x200}"
        return EXCEPTIONS_M.get(number, f"reserved{number}")
    return EXCEPTIONS_AR.get(number, f"reserved{number}")
