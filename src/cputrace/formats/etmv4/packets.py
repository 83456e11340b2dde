"""ETMv4 instruction trace packets from one source's byte stream: a compiled decoder with
columnar output (Arm IHI 0064, chapter 6). `protocol` lists the fields each packet kind fills.

Addresses are complete: each address packet's bits are merged into the newest entry of the
three-entry address history (zero after a trace info packet), and an exact-match packet
repeats the entry it names; every address (exact matches too) then becomes the newest entry.
A 32-bit long address keeps the upper 32 bits of the last address in AArch64 state. The
instruction set of an address is its IS bit and the AArch64/AArch32 state of the last context
(unknown before one).

Synchronisation, errors and feeding in chunks are as for ETMv3 and PFT (`coresight.packets`),
with ETMv4's A-sync (eleven 0x00, then 0x80): bytes before the first A-sync are an `unsynced`
packet; a reserved header, a header the configuration rules out, a malformed extension or a
continuation field longer than its value an `error` packet, after which the decoder skips to
the next A-sync.
"""

from __future__ import annotations

import numba
import numpy as np

from ...coresight.packets import (
    BATCH_PACKETS,
    ISA_UNKNOWN,
    NEED_MORE,
    Packets,
    PacketScanner,
    error_packet,
    locate,
    low_bits,
    skip_to_a_sync,
    start_packet,
    zeros_in_sync,
)
from ...model import Isa
from .config import Etmv4Config
from .protocol import ErrorReason, Flag, Kind

A_SYNC_ZEROS = 11
"""Zero bytes before the 0x80 of an ETMv4 A-sync."""
HISTORY = 3
"""Entries of the address history (exact-match packets name one)."""

SCAN = np.dtype(
    [
        ("synced", "<i8"), ("history", "<i8", (HISTORY,)), ("history_is", "<i8", (HISTORY,)),
        ("history_bits", "<i8", (HISTORY,)), ("el", "<i8"), ("ns", "<i8"), ("aarch64", "<i8"),
        ("context_id", "<i8"), ("vmid", "<i8"), ("timestamp", "<i8"), ("cycle_threshold", "<i8"),
    ]
)  # fmt: skip
"""The decoder's state between feeds: synchronised; the address history, newest first, with
each entry's instruction set bit and the address bits known; the context (exception level,
non-secure, AArch64: -1 before a context packet gives it; context ID, VMID); the timestamp;
the cycle count threshold of the last trace info packet."""

_A32, _T32, _A64 = int(Isa.A32), int(Isa.T32), int(Isa.A64)
_K_ERROR, _K_A_SYNC, _K_TRACE_INFO = int(Kind.ERROR), int(Kind.A_SYNC), int(Kind.TRACE_INFO)
_K_TRACE_ON, _K_DISCARD, _K_OVERFLOW = int(Kind.TRACE_ON), int(Kind.DISCARD), int(Kind.OVERFLOW)
_K_TIMESTAMP, _K_EXCEPTION = int(Kind.TIMESTAMP), int(Kind.EXCEPTION)
_K_EXCEPTION_RETURN, _K_CYCLE_COUNT = int(Kind.EXCEPTION_RETURN), int(Kind.CYCLE_COUNT)
_K_COMMIT, _K_CANCEL, _K_MISPREDICT = int(Kind.COMMIT), int(Kind.CANCEL), int(Kind.MISPREDICT)
_K_COND_INSTR, _K_COND_RESULT = int(Kind.COND_INSTR), int(Kind.COND_RESULT)
_K_COND_FLUSH, _K_EVENT, _K_CONTEXT = int(Kind.COND_FLUSH), int(Kind.EVENT), int(Kind.CONTEXT)
_K_ADDRESS_CONTEXT, _K_ADDRESS_LONG = int(Kind.ADDRESS_CONTEXT), int(Kind.ADDRESS_LONG)
_K_ADDRESS_SHORT, _K_ADDRESS_MATCH, _K_ATOM = int(Kind.ADDRESS_SHORT), int(Kind.ADDRESS_MATCH), int(Kind.ATOM)
_K_Q, _K_IGNORE, _K_FUNCTION_RETURN = int(Kind.Q), int(Kind.IGNORE), int(Kind.FUNCTION_RETURN)
_K_NUMBERED_DATA_SYNC, _K_UNNUMBERED_DATA_SYNC = int(Kind.NUMBERED_DATA_SYNC), int(Kind.UNNUMBERED_DATA_SYNC)
_E_RESERVED_HEADER, _E_NOT_CONFIGURED = int(ErrorReason.RESERVED_HEADER), int(ErrorReason.NOT_CONFIGURED)
_E_BAD_EXTENSION, _E_BAD_A_SYNC = int(ErrorReason.BAD_EXTENSION), int(ErrorReason.BAD_A_SYNC)
_E_FIELD_TOO_LONG, _E_RESERVED_VALUE = int(ErrorReason.FIELD_TOO_LONG), int(ErrorReason.RESERVED_VALUE)
_E_TRUNCATED = int(ErrorReason.TRUNCATED)
_F_NS, _F_AARCH64, _F_CONTEXT_ID = int(Flag.NS), int(Flag.AARCH64), int(Flag.CONTEXT_ID)
_F_VMID, _F_CONTEXT_SAME, _F_IS1 = int(Flag.VMID), int(Flag.CONTEXT_SAME), int(Flag.IS1)
_F_PARTIAL, _F_UNKNOWN_COUNT, _F_COMMIT = int(Flag.PARTIAL_ADDRESS), int(Flag.UNKNOWN_COUNT), int(Flag.COMMIT)
_F_MISPREDICT, _F_COND_FINAL, _F_COND_TWO = int(Flag.MISPREDICT), int(Flag.COND_FINAL), int(Flag.COND_TWO)
_F_FAULT_PENDING, _F_Q_ADDRESS = int(Flag.FAULT_PENDING), int(Flag.Q_ADDRESS)

FIELD_BYTES = 5  # a 32-bit continuation field: 7 bits a byte
COUNT_BYTES = 3  # a cycle count: at most 20 bits
TIMESTAMP_BYTES = 9  # eight of 7 bits, the ninth of 8
TOO_LONG = -2  # a field reader's status: the field goes on past its last byte


def _header_kinds() -> np.ndarray:
    """The packet kind each header byte starts (ERROR: reserved), as IHI 0064, table 6-2
    lists them. Headers that only some configurations produce are checked as they are read."""
    kinds = np.full(256, _K_ERROR, dtype=np.int64)
    ranges = (
        (0x01, 0x01, _K_TRACE_INFO), (0x02, 0x03, _K_TIMESTAMP), (0x04, 0x04, _K_TRACE_ON),
        (0x05, 0x05, _K_FUNCTION_RETURN), (0x06, 0x06, _K_EXCEPTION), (0x07, 0x07, _K_EXCEPTION_RETURN),
        (0x0C, 0x1F, _K_CYCLE_COUNT), (0x20, 0x27, _K_NUMBERED_DATA_SYNC),
        (0x28, 0x2C, _K_UNNUMBERED_DATA_SYNC), (0x2D, 0x2D, _K_COMMIT), (0x2E, 0x2F, _K_CANCEL),
        (0x30, 0x33, _K_MISPREDICT), (0x34, 0x3F, _K_CANCEL),
        (0x40, 0x42, _K_COND_INSTR), (0x43, 0x43, _K_COND_FLUSH), (0x44, 0x46, _K_COND_RESULT),
        (0x48, 0x4A, _K_COND_RESULT), (0x4C, 0x4E, _K_COND_RESULT), (0x50, 0x5F, _K_COND_RESULT),
        (0x68, 0x6B, _K_COND_RESULT), (0x6C, 0x6D, _K_COND_INSTR), (0x6E, 0x6F, _K_COND_RESULT),
        (0x70, 0x70, _K_IGNORE), (0x71, 0x7F, _K_EVENT), (0x80, 0x81, _K_CONTEXT),
        (0x82, 0x83, _K_ADDRESS_CONTEXT), (0x85, 0x86, _K_ADDRESS_CONTEXT), (0x90, 0x92, _K_ADDRESS_MATCH),
        (0x95, 0x96, _K_ADDRESS_SHORT), (0x9A, 0x9B, _K_ADDRESS_LONG), (0x9D, 0x9E, _K_ADDRESS_LONG),
        (0xA0, 0xAF, _K_Q), (0xC0, 0xFF, _K_ATOM),
    )  # fmt: skip
    for first, last, kind in ranges:
        kinds[first : last + 1] = kind
    for q_type in (0x3, 0x4, 0x7, 0x8, 0x9, 0xD, 0xE):  # reserved Q types
        kinds[0xA0 + q_type] = _K_ERROR
    return kinds


def _atom_headers() -> np.ndarray:
    """[field, header] of the atom headers (6.4.20-6.4.25): atoms (bit i set: atom i, oldest
    first, is E), count and format.

    Format 1 b1111011A, one atom; format 2 b110110AA, two; format 3 b11111AAA, three (bit 0 the
    oldest); format 4 b110111AA, four in one of four patterns; format 5 b11A101AA (0xD5-0xD7,
    0xF5), five in one of four patterns; format 6 b11A0CCCC and b11A10000-b11A10100: C + 3 E
    atoms, then an E (A = 0) or N."""
    table = np.zeros((3, 256), dtype=np.int64)
    four = (0b1110, 0b0000, 0b1010, 0b0101)  # oldest atom in bit 0: NEEE, NNNN, NENE, ENEN
    five = {0xD5: 0b00000, 0xD6: 0b01010, 0xD7: 0b10101, 0xF5: 0b11110}
    for h in range(0xC0, 0x100):
        if h in (0xF6, 0xF7):
            row = (h & 1, 1, 1)
        elif 0xD8 <= h <= 0xDB:
            row = (h & 3, 2, 2)
        elif h >= 0xF8:
            row = (h & 7, 3, 3)
        elif 0xDC <= h <= 0xDF:
            row = (four[h & 3], 4, 4)
        elif h in five:
            row = (five[h], 5, 5)
        else:  # format 6
            count = (h & 0x1F) + 3
            atoms = (1 << count) - 1 | (0 if h & 0x20 else 1 << count)
            row = (atoms, count + 1, 6)
        table[:, h] = row
    return table


HEADER_KINDS = _header_kinds()
ATOM_HEADERS = _atom_headers()
SPECULATION_ATOMS = np.array([[0, 0], [1, 1], [3, 2], [0, 1]], dtype=np.int64)
"""[code, (atoms, count)]: the atoms of a mispredict or cancel format 2 header's bits 1:0 (none,
E, EE, N)."""


@numba.njit(cache=True, nogil=True)
def _field(data, p, n, limit):
    """A continuation field from byte p: 7 bits a byte, least significant first, bit 7 set if
    another follows, at most `limit` bytes. Returns (end, NEED_MORE or TOO_LONG; value)."""
    value = 0
    for j in range(limit):
        if p + j >= n:
            return NEED_MORE, 0
        b = np.int64(data[p + j])
        value |= (b & 0x7F) << (7 * j)
        if not b & 0x80:
            return p + j + 1, value
    return TOO_LONG, 0


@numba.njit(inline="always")
def _isa(st, is1):
    if is1:
        return _T32
    if st.aarch64 < 0:
        return ISA_UNKNOWN
    return _A64 if st.aarch64 else _A32


@numba.njit(cache=True, nogil=True)
def _push(st, address, is1, bits):
    """Make an address the newest entry of the address history."""
    for j in range(HISTORY - 1, 0, -1):
        st.history[j] = st.history[j - 1]
        st.history_is[j] = st.history_is[j - 1]
        st.history_bits[j] = st.history_bits[j - 1]
    st.history[0] = address
    st.history_is[0] = is1
    st.history_bits[0] = bits


@numba.njit(cache=True, nogil=True)
def _address_packet(st, rec, value, carried, is1, long32):
    """Merge `carried` bits of an address into the newest one (a 32-bit long address: all 32 in
    AArch32 state), push it, and fill the record's address fields."""
    last, known = st.history[0], st.history_bits[0]
    if long32 and st.aarch64 != 1:
        address, known = value & 0xFFFFFFFF, 32
    else:
        keep = low_bits(carried)
        address = (last & ~keep) | (value & keep)
        known = max(known, carried)
    _push(st, address, is1, known)
    _address_record(st, rec, carried)


@numba.njit(cache=True, nogil=True)
def _address_record(st, rec, carried):
    """The record's address fields from the newest history entry."""
    rec.address = st.history[0]
    rec.bits = carried
    rec.isa = _isa(st, st.history_is[0])
    full = 64 if st.aarch64 == 1 else 32
    rec.flags |= (_F_IS1 if st.history_is[0] else 0) | (_F_PARTIAL if st.history_bits[0] < full else 0)


@numba.njit(cache=True, nogil=True)
def _long_address(data, p, n, is1, bytes_):
    """A long address's value from byte p (6.4.11): IS0 bits 8:2 then 15:9 in the low 7 bits of
    the first two bytes, IS1 bits 7:1 then 15:8; the other bytes 8 bits each. Returns (end or
    NEED_MORE, value)."""
    if p + bytes_ > n:
        return NEED_MORE, 0
    b0, b1 = np.int64(data[p]), np.int64(data[p + 1])
    value = ((b0 & 0x7F) << 1 | b1 << 8) if is1 else ((b0 & 0x7F) << 2 | (b1 & 0x7F) << 9)
    for j in range(2, bytes_):
        value |= np.int64(data[p + j]) << (8 * j)
    return p + bytes_, value


@numba.njit(cache=True, nogil=True)
def _short_address(data, p, n, is1):
    """A short address from byte p (6.4.12): 7 bits (IS0: bits 8:2, IS1: bits 7:1), and when
    bit 7 is set a second byte of 8 more. Returns (end or NEED_MORE, value, bits carried)."""
    if p >= n:
        return NEED_MORE, 0, 0
    shift = 1 if is1 else 2
    b0 = np.int64(data[p])
    value = (b0 & 0x7F) << shift
    if not b0 & 0x80:
        return p + 1, value, 7 + shift
    if p + 1 >= n:
        return NEED_MORE, 0, 0
    return p + 2, value | np.int64(data[p + 1]) << (7 + shift), 15 + shift


@numba.njit(cache=True, nogil=True)
def _context(data, p, n, cfg, st, rec):
    """A context information byte from p and the VMID and context ID bytes it announces
    (6.4.9): EL bits 1:0, SF (AArch64) bit 4, NS bit 5, V (VMID follows) bit 6, C (context ID
    follows) bit 7. Updates the state; returns the end or NEED_MORE."""
    if p >= n:
        return NEED_MORE
    info = np.int64(data[p])
    vmid_bytes = np.int64(cfg.vmid_bytes) if info & 0x40 else 0
    context_bytes = np.int64(cfg.context_id_bytes) if info & 0x80 else 0
    end = p + 1 + vmid_bytes + context_bytes
    if end > n:
        return NEED_MORE
    flags = 0
    if vmid_bytes:
        vmid = 0
        for j in range(vmid_bytes):
            vmid |= np.int64(data[p + 1 + j]) << (8 * j)
        st.vmid = vmid
        flags |= _F_VMID
    if context_bytes:
        context = 0
        for j in range(context_bytes):
            context |= np.int64(data[p + 1 + vmid_bytes + j]) << (8 * j)
        st.context_id = context
        flags |= _F_CONTEXT_ID
    st.el = info & 3
    st.aarch64 = (info >> 4) & 1
    st.ns = (info >> 5) & 1
    rec.flags |= flags
    return end


@numba.njit(inline="always")
def _context_record(st, rec):
    rec.info = max(st.el, 0)
    rec.value = st.context_id
    rec.value2 = st.vmid
    rec.flags |= (_F_NS if st.ns == 1 else 0) | (_F_AARCH64 if st.aarch64 == 1 else 0)


@numba.njit(cache=True, nogil=True)
def _trace_info(data, i, n, st, rec):
    """Trace info (6.4.4): control bytes (the first's bits 0-3 say which of the INFO, KEY, SPEC
    and CYCT sections follow; bit 7 another control byte), then those sections, each a
    continuation field. It resets the address history to zero: a short address right after it
    has zero upper bits (as the reference decoder reads init-short-addr). Returns (end or
    NEED_MORE, error)."""
    p = i + 1
    present = -1
    while True:
        if p >= n:
            return NEED_MORE, 0
        b = np.int64(data[p])
        p += 1
        if present < 0:
            present = b
        if not b & 0x80:
            break
        if p - i > FIELD_BYTES:
            return p, _E_FIELD_TOO_LONG
    values = np.zeros(4, np.int64)
    for section in range(4):
        if present & (1 << section):
            p, values[section] = _field(data, p, n, FIELD_BYTES)
            if p < 0:
                return (NEED_MORE, 0) if p == NEED_MORE else (i + 1, _E_FIELD_TOO_LONG)
    if values[0] > 0xFF:
        return p, _E_RESERVED_VALUE
    st.cycle_threshold = values[3]
    for j in range(HISTORY):  # the address history starts again from zero, every bit known
        st.history[j] = 0
        st.history_is[j] = 0
        st.history_bits[j] = 64
    start_packet(rec, _K_TRACE_INFO, i, p)
    rec.info = values[0]
    rec.value = values[1]
    rec.value2 = values[2]
    rec.cycles = values[3]
    return p, 0


@numba.njit(cache=True, nogil=True)
def _timestamp(data, i, n, cfg, st, rec):
    """Timestamp (6.4.5): up to nine bytes replacing the low bits of the timestamp (7 bits a
    byte, bit 7 set if more follow; a ninth byte 8 bits), then a cycle count if the header's
    bit 0 is set. Returns (end or NEED_MORE, error)."""
    p = i + 1
    value = 0
    bits = 0
    for j in range(TIMESTAMP_BYTES):
        if p >= n:
            return NEED_MORE, 0
        b = np.int64(data[p])
        p += 1
        if j == TIMESTAMP_BYTES - 1:
            value |= b << 56
            bits = 64
            break
        value |= (b & 0x7F) << (7 * j)
        bits += 7
        if not b & 0x80:
            break
    cycles = -1
    if data[i] & 1:
        p, cycles = _field(data, p, n, COUNT_BYTES)
        if p < 0:
            return (NEED_MORE, 0) if p == NEED_MORE else (i + 1, _E_FIELD_TOO_LONG)
        if cycles >= np.int64(1) << cfg.cycle_count_bits:
            return p, _E_RESERVED_VALUE
    keep = low_bits(bits)
    st.timestamp = (st.timestamp & ~keep) | (value & keep)
    start_packet(rec, _K_TIMESTAMP, i, p)
    rec.value = st.timestamp
    rec.bits = bits
    rec.cycles = cycles
    return p, 0


@numba.njit(cache=True, nogil=True)
def _exception(data, i, n, rec):
    """Exception (6.4.14): byte 1 holds E1 (bit 6), the type's low 5 bits (5:1) and E0 (bit 0);
    when its bit 7 is set, byte 2 the type's next 5 bits and P (fault pending, bit 5)."""
    if i + 2 > n:
        return NEED_MORE
    b1 = np.int64(data[i + 1])
    end = i + 2
    number = (b1 >> 1) & 0x1F
    flags = 0
    if b1 & 0x80:
        if end >= n:
            return NEED_MORE
        b2 = np.int64(data[end])
        end += 1
        number |= (b2 & 0x1F) << 5
        flags = _F_FAULT_PENDING if b2 & 0x20 else 0
    start_packet(rec, _K_EXCEPTION, i, end)
    rec.exception = number
    rec.info = (b1 & 0x40) >> 5 | (b1 & 1)
    rec.flags = flags
    return end


@numba.njit(cache=True, nogil=True)
def _cycle_count(data, i, n, cfg, st, rec):
    """Cycle count formats 1-3 (6.4.7): format 1 (b0000111U) a commit field where cycle count
    packets carry commits, then a count unless U; format 2 (b0000110F) a byte of commit (bits
    7:4, plus 1, or with F the most speculation less 15) and count (3:0); format 3 (b0001CCAA)
    commit CC + 1 and count AA. Counts of formats 2 and 3 and format 1's are added to the
    threshold. Returns (end or NEED_MORE, error)."""
    h = np.int64(data[i])
    p = i + 1
    commit = -1
    cycles = -1
    flags = 0
    if h >= 0x10:
        fmt = 3
        if cfg.commit_in_cycle_count:
            commit = ((h >> 2) & 3) + 1
        cycles = st.cycle_threshold + (h & 3)
    elif h <= 0x0D:
        fmt = 2
        if p >= n:
            return NEED_MORE, 0
        b = np.int64(data[p])
        p += 1
        commit = ((b >> 4) & 0xF) + (cfg.max_speculation - 15 if h & 1 else 1)
        if commit < 0:
            return p, _E_RESERVED_VALUE
        cycles = st.cycle_threshold + (b & 0xF)
    else:
        fmt = 1
        if cfg.commit_in_cycle_count:
            p, commit = _field(data, p, n, FIELD_BYTES)
            if p < 0:
                return (NEED_MORE, 0) if p == NEED_MORE else (i + 1, _E_FIELD_TOO_LONG)
        if h & 1:
            flags = _F_UNKNOWN_COUNT
        else:
            p, count = _field(data, p, n, COUNT_BYTES)
            if p < 0:
                return (NEED_MORE, 0) if p == NEED_MORE else (i + 1, _E_FIELD_TOO_LONG)
            if count >= np.int64(1) << cfg.cycle_count_bits:
                return p, _E_RESERVED_VALUE
            cycles = st.cycle_threshold + count
    start_packet(rec, _K_CYCLE_COUNT, i, p)
    rec.info = fmt
    rec.cycles = cycles
    if commit >= 0:
        rec.value = commit
        flags |= _F_COMMIT
    rec.flags = flags
    return p, 0


@numba.njit(cache=True, nogil=True)
def _speculation(data, i, n, kind, rec):
    """Commit, cancel and mispredict (6.4.16-6.4.19): commit and cancel format 1 (b0010111M,
    M: mispredict) a continuation field; mispredict (b001100AA) and cancel format 2 (b001101AA)
    the atoms of AA and cancel 1; cancel format 3 (b00111CCA) cancel CC + 2 and an E atom if A.
    Returns (end or NEED_MORE, error)."""
    h = np.int64(data[i])
    if h <= 0x2F:  # commit, cancel format 1
        end, count = _field(data, i + 1, n, FIELD_BYTES)
        if end < 0:
            return (NEED_MORE, 0) if end == NEED_MORE else (i + 1, _E_FIELD_TOO_LONG)
        start_packet(rec, kind, i, end)
        rec.value = count
        if kind == _K_CANCEL:
            rec.info = 1
            rec.flags = _F_MISPREDICT if h & 1 else 0
        return end, 0
    start_packet(rec, kind, i, i + 1)
    if h >= 0x38:
        rec.info = 3
        rec.value = ((h >> 1) & 3) + 2
        rec.atoms = h & 1
        rec.count = h & 1
    else:
        rec.atoms = SPECULATION_ATOMS[h & 3, 0]
        rec.count = SPECULATION_ATOMS[h & 3, 1]
        if kind == _K_CANCEL:
            rec.info = 2
            rec.value = 1
    return i + 1, 0


@numba.njit(cache=True, nogil=True)
def _conditional(data, i, n, kind, rec):
    """Conditional instruction and result packets (6.4.26-6.4.33). Returns (end or NEED_MORE,
    error)."""
    h = np.int64(data[i])
    end = i + 1
    if kind == _K_COND_FLUSH:
        start_packet(rec, kind, i, end)
        return end, 0
    fmt = 0
    value = value2 = atoms = count = flags = 0
    if kind == _K_COND_INSTR:
        if h == 0x6C:  # format 1: a key
            fmt = 1
            end, value = _field(data, i + 1, n, FIELD_BYTES)
        elif h == 0x6D:  # format 3: element count and final bit
            fmt = 3
            if i + 2 > n:
                return NEED_MORE, 0
            b = np.int64(data[i + 1])
            end = i + 2
            value = ((b >> 1) & 0x3F) + (b & 1)
            flags = _F_COND_FINAL if b & 1 else 0
        else:  # format 2: the element index code
            fmt = 2
            value = h & 3
    elif h >= 0x68:  # result format 1: one or two results with keys
        fmt = 1
        p = i + 1
        results = 1 if h >= 0x6E else 2
        for r in range(results):
            if p >= n:
                return NEED_MORE, 0
            first = np.int64(data[p])
            key, shift = (first >> 4) & 7, 3
            more = (first & 0x80) != 0
            p += 1
            extra = 0
            while more:
                if p >= n:
                    return NEED_MORE, 0
                if extra == FIELD_BYTES:
                    return i + 1, _E_FIELD_TOO_LONG
                b = np.int64(data[p])
                key |= (b & 0x7F) << shift
                shift += 7
                extra += 1
                more = (b & 0x80) != 0
                p += 1
            if r == 0:
                value = key
            else:
                value2 = key
            atoms |= (first & 0xF) << (4 * r)
            count |= ((h >> r) & 1) << r  # the CI bits
        flags = _F_COND_TWO if results == 2 else 0
        end = p
    elif h >= 0x50:  # result format 3: twelve bits of tokens
        fmt = 3
        if i + 2 > n:
            return NEED_MORE, 0
        value = np.int64(data[i + 1]) | (h & 0xF) << 8
        end = i + 2
    elif h >= 0x48:  # result format 2: key increment and token
        fmt = 2
        value = h & 3
        count = 2 if h & 4 else 1
    else:  # result format 4: a token
        fmt = 4
        value = h & 3
    if end < 0:
        return (NEED_MORE, 0) if end == NEED_MORE else (i + 1, _E_FIELD_TOO_LONG)
    start_packet(rec, kind, i, end)
    rec.info = fmt
    rec.value = value
    rec.value2 = value2
    rec.atoms = atoms
    rec.count = count
    rec.flags = flags
    return end, 0


@numba.njit(cache=True, nogil=True)
def _address(data, i, n, cfg, st, rec, kind):
    """Address packets: with context (b100000SI: S 64-bit, I the instruction set), long
    (b10011S0I + 1), short (b1001010I + 1) and exact match (b100100QQ). Returns the end or
    NEED_MORE."""
    h = np.int64(data[i])
    if kind == _K_ADDRESS_MATCH:
        entry = h & 3
        _push(st, st.history[entry], st.history_is[entry], st.history_bits[entry])
        start_packet(rec, kind, i, i + 1)
        _address_record(st, rec, 0)
        rec.info = entry
        return i + 1
    if kind == _K_ADDRESS_SHORT:
        is1 = (h & 1) == 0  # 0x95 IS0, 0x96 IS1
        end, value, bits = _short_address(data, i + 1, n, is1)
        if end < 0:
            return NEED_MORE
        start_packet(rec, kind, i, end)
        _address_packet(st, rec, value, bits, is1, False)
        return end
    wide = h >= (0x9D if kind == _K_ADDRESS_LONG else 0x85)
    is1 = (h & 1) == (0 if wide else 1)  # IS0, IS1: 0x82, 0x83, 0x85, 0x86; 0x9A, 0x9B, 0x9D, 0x9E
    p, value = _long_address(data, i + 1, n, is1, 8 if wide else 4)
    if p < 0:
        return NEED_MORE
    if kind == _K_ADDRESS_CONTEXT:
        before = (st.el, st.aarch64, st.ns, st.context_id, st.vmid)
        p = _context(data, p, n, cfg, st, rec)
        if p < 0:
            st.el, st.aarch64, st.ns, st.context_id, st.vmid = before
            return NEED_MORE
        flags = rec.flags
        start_packet(rec, kind, i, p)
        rec.flags = flags
    else:
        start_packet(rec, kind, i, p)
    _address_packet(st, rec, value, 64 if wide else 32, is1, not wide)
    if kind == _K_ADDRESS_CONTEXT:
        _context_record(st, rec)
        rec.info = st.el
    return p


@numba.njit(cache=True, nogil=True)
def _q(data, i, n, st, rec):
    """Q (6.4.34), b1010TTTT: types 0-2 an exact-match address entry, 5/6 a short address
    (IS0/IS1), 10/11 a 32-bit long address (IS0/IS1), 12 none, each followed by a count of
    instructions; type 15 nothing (count unknown). Returns (end or NEED_MORE, error)."""
    q_type = np.int64(data[i]) & 0xF
    p = i + 1
    value = 0
    bits = 0
    is1 = False
    if q_type == 5 or q_type == 6:
        is1 = q_type == 6
        p, value, bits = _short_address(data, p, n, is1)
    elif q_type == 10 or q_type == 11:
        is1 = q_type == 11
        p, value = _long_address(data, p, n, is1, 4)
        bits = 32
    if p < 0:
        return NEED_MORE, 0
    count = 0
    if q_type != 15:
        p, count = _field(data, p, n, FIELD_BYTES)
        if p < 0:
            return (NEED_MORE, 0) if p == NEED_MORE else (i + 1, _E_FIELD_TOO_LONG)
    start_packet(rec, _K_Q, i, p)
    if q_type <= 2:
        _push(st, st.history[q_type], st.history_is[q_type], st.history_bits[q_type])
        _address_record(st, rec, 0)
        rec.info = q_type
        rec.flags |= _F_Q_ADDRESS
    elif bits:
        _address_packet(st, rec, value, bits, is1, bits == 32)
        rec.flags |= _F_Q_ADDRESS
    rec.value = count
    if q_type == 15:
        rec.flags |= _F_UNKNOWN_COUNT
    return p, 0


@numba.njit(cache=True, nogil=True)
def _configured(cfg, kind, h):
    """Whether this configuration produces a packet with this header."""
    if kind == _K_Q:
        return cfg.q_elements
    if kind in (_K_COND_INSTR, _K_COND_RESULT, _K_COND_FLUSH):
        return cfg.conditional
    if kind in (_K_NUMBERED_DATA_SYNC, _K_UNNUMBERED_DATA_SYNC):
        return cfg.data_sync_markers
    if kind == _K_IGNORE:
        return cfg.ignore_packets
    if kind == _K_FUNCTION_RETURN:
        return cfg.function_return
    return True


@numba.njit(cache=True, nogil=True)
def _packet(data, i, n, cfg, st, rec, kind):
    """The packet at i (not an atom, not an extension): (end or NEED_MORE, 0 or ErrorReason)."""
    h = np.int64(data[i])
    if kind == _K_ERROR:
        return i + 1, _E_RESERVED_HEADER
    if not _configured(cfg, kind, h):
        return i + 1, _E_NOT_CONFIGURED
    if kind == _K_TRACE_INFO:
        return _trace_info(data, i, n, st, rec)
    if kind == _K_TIMESTAMP:
        return _timestamp(data, i, n, cfg, st, rec)
    if kind == _K_CYCLE_COUNT:
        return _cycle_count(data, i, n, cfg, st, rec)
    if kind in (_K_COMMIT, _K_CANCEL, _K_MISPREDICT):
        return _speculation(data, i, n, kind, rec)
    if kind in (_K_COND_INSTR, _K_COND_RESULT, _K_COND_FLUSH):
        return _conditional(data, i, n, kind, rec)
    if kind == _K_Q:
        return _q(data, i, n, st, rec)
    end = i + 1
    if kind == _K_EXCEPTION:
        end = _exception(data, i, n, rec)
    elif kind == _K_CONTEXT:
        if h & 1:
            before = (st.el, st.aarch64, st.ns, st.context_id, st.vmid)
            rec.flags = 0
            end = _context(data, i + 1, n, cfg, st, rec)
            if end < 0:
                st.el, st.aarch64, st.ns, st.context_id, st.vmid = before
                return NEED_MORE, 0
            flags = rec.flags
            start_packet(rec, kind, i, end)
            rec.flags = flags
        else:
            start_packet(rec, kind, i, end)
            rec.flags = _F_CONTEXT_SAME
        _context_record(st, rec)
    elif kind in (_K_ADDRESS_CONTEXT, _K_ADDRESS_LONG, _K_ADDRESS_SHORT, _K_ADDRESS_MATCH):
        rec.flags = 0
        end = _address(data, i, n, cfg, st, rec, kind)
    elif kind in (_K_EVENT, _K_NUMBERED_DATA_SYNC, _K_UNNUMBERED_DATA_SYNC):
        start_packet(rec, kind, i, end)
        rec.value = h & (0xF if kind == _K_EVENT else 0x7)
    else:  # trace on, exception return, function return, ignore: the header alone
        start_packet(rec, kind, i, end)
    return end, 0


@numba.njit(cache=True, nogil=True)
def _decode(data, offsets, base, final, config, state, out):
    """Decode packets from `data` into `out` until it is full or the bytes run out.

    `offsets` are the bytes' buffer offsets and `base` the stream position of data[0].
    Returns (packets written, bytes consumed); the rest must be fed again with what follows.
    """
    cfg, st = config[0], state[0]
    n = len(data)
    cap = len(out)
    i = np.int64(0)
    k = 0
    while i < n and k + 2 <= cap:
        if not st.synced:
            k, i, found = skip_to_a_sync(data, i, n, final, out, k, _K_A_SYNC, A_SYNC_ZEROS)
            if not found:
                break
            st.synced = 1
            continue
        h = data[i]
        rec = out[k]
        if h >= 0xC0:  # atoms, the most common packets
            start_packet(rec, _K_ATOM, i, i + 1)
            rec.atoms = ATOM_HEADERS[0, h]
            rec.count = ATOM_HEADERS[1, h]
            rec.info = ATOM_HEADERS[2, h]
            k += 1
            i += 1
            continue
        if h == 0:  # extension: A-sync, discard or overflow
            if i + 1 >= n:
                if final:
                    error_packet(rec, _E_TRUNCATED, i, n)
                    k += 1
                    i = n
                break
            second = data[i + 1]
            if second == 0:
                k, i, synced, done = zeros_in_sync(
                    data, i, n, final, out, k, _K_A_SYNC, _E_BAD_A_SYNC, _E_TRUNCATED, A_SYNC_ZEROS
                )
                st.synced = 1 if synced else 0
                if done:
                    break
                continue
            if second == 0x03 or second == 0x05:
                start_packet(rec, _K_DISCARD if second == 0x03 else _K_OVERFLOW, i, i + 2)
            else:
                error_packet(rec, _E_BAD_EXTENSION, i, i + 2)
                st.synced = 0
            k += 1
            i += 2
            continue
        end, status = _packet(data, i, n, cfg, st, rec, HEADER_KINDS[h])
        if end == NEED_MORE:
            if final:
                error_packet(rec, _E_TRUNCATED, i, n)
                k += 1
                i = n
            break
        if status != 0:
            error_packet(rec, status, i, end)
            st.synced = 0
        k += 1
        i = end
    locate(out, k, offsets, base)
    return k, i


def new_state() -> np.ndarray:
    """The decoder's state before the first byte (one SCAN record)."""
    state = np.zeros(1, SCAN)
    state["el"] = state["ns"] = state["aarch64"] = -1
    return state


class PacketDecoder(PacketScanner):
    """Decodes one ETMv4 source's bytes, fed in chunks, into batches of packets."""

    def __init__(self, config: Etmv4Config, batch_packets: int = BATCH_PACKETS) -> None:
        self.config = config
        super().__init__(_decode, config.as_record(), new_state(), batch_packets)


def decode_packets(
    data: bytes | np.ndarray, config: Etmv4Config, offsets: np.ndarray | None = None
) -> Packets:
    """Every packet of a whole stream held in memory (offsets default to stream positions)."""
    return PacketDecoder(config).decode_all(data, offsets)
