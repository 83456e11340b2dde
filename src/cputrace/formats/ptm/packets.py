"""PTM (PFT v1.0, v1.1) packets from one source's byte stream: a compiled decoder with columnar
output (ARM IHI 0035B, 4.5 "PFT packet formats").

Packets come out as `coresight.packets.PACKET` records. Fields by kind, beyond `kind`,
`offset` (in the buffer), `pos` (in the source's stream) and `size` (bytes):

- i_sync: address (of the next instruction), isa, cycles (cycle-accurate trace, reason other
  than periodic; -1 none), value (context ID), info (reason, I_SYNC_REASONS), flags NS HYP ALT_ISA.
- atom: atoms (bit i set: atom i, oldest first, is E), count (atoms), cycles (cycle-accurate:
  the cycles the atom's waypoint took since the last one).
- branch: address (target, or the vector of an exception), bits (address bits carried), isa,
  exception (number; -1 none), cycles (cycle-accurate), flags NS HYP ALT_ISA EXCEPTION.
- waypoint_update: address (of the last instruction executed), bits, isa.
- timestamp: value, bits carried, cycles (cycle-accurate), flag CLOCK_CHANGED.
  context_id, vmid: value.
- trigger, exception_return, ignore, a_sync: no fields. error: info (ErrorReason).

Addresses are complete (compression undone against the previous address); PARTIAL_ADDRESS
marks those whose upper bits no I-sync or full branch address has given yet.

Synchronisation, errors and feeding in chunks are as for ETMv3 (`coresight.packets`): bytes
before the first A-sync are an `unsynced` packet, a reserved header an `error` packet after
which the decoder skips to the next A-sync.
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
    gray_to_binary,
    locate,
    low_bits,
    skip_to_a_sync,
    start_packet,
    timestamp_update,
    zeros_in_sync,
)
from ...model import Isa
from .config import PtmConfig
from .protocol import ErrorReason, Flag, Kind

SCAN = np.dtype(
    [
        ("synced", "<i8"), ("address", "<i8"), ("address_known", "<i8"), ("isa", "<i8"), ("ns", "<i8"),
        ("hyp", "<i8"), ("alt_isa", "<i8"), ("context_id", "<i8"), ("vmid", "<i8"), ("timestamp", "<i8"),
    ]
)  # fmt: skip
"""The decoder's state between feeds: synchronised, the last address and its ISA (and whether
all its bits are known), the security, Hyp and AltISA state, context ID, VMID and the raw
timestamp register (Gray-coded where the stream is)."""

_A32, _T32, _T32EE, _JAZELLE = int(Isa.A32), int(Isa.T32), int(Isa.T32EE), int(Isa.JAZELLE)
_F_NS, _F_HYP, _F_ALT_ISA = int(Flag.NS), int(Flag.HYP), int(Flag.ALT_ISA)
_F_EXCEPTION, _F_CLOCK_CHANGED = int(Flag.EXCEPTION), int(Flag.CLOCK_CHANGED)
_F_PARTIAL = int(Flag.PARTIAL_ADDRESS)
_K_ERROR, _K_A_SYNC, _K_I_SYNC, _K_ATOM = int(Kind.ERROR), int(Kind.A_SYNC), int(Kind.I_SYNC), int(Kind.ATOM)
_K_BRANCH, _K_WAYPOINT_UPDATE, _K_TRIGGER = int(Kind.BRANCH), int(Kind.WAYPOINT_UPDATE), int(Kind.TRIGGER)
_K_CONTEXT_ID, _K_VMID, _K_TIMESTAMP = int(Kind.CONTEXT_ID), int(Kind.VMID), int(Kind.TIMESTAMP)
_E_RESERVED_HEADER, _E_CONTEXT_ID_OFF = int(ErrorReason.RESERVED_HEADER), int(ErrorReason.CONTEXT_ID_OFF)
_E_BAD_A_SYNC, _E_TRUNCATED = int(ErrorReason.BAD_A_SYNC), int(ErrorReason.TRUNCATED)


def _header_kinds() -> np.ndarray:
    """The packet kind each header byte starts (ERROR: reserved), as table 4-1 of the spec lists them."""
    kinds = np.full(256, Kind.ERROR, dtype=np.int64)
    for b in range(256):
        if b & 0x01:
            kinds[b] = Kind.BRANCH  # bCxxxxxx1
        elif b & 0x80:
            kinds[b] = Kind.ATOM  # b1xxxxxx0
    single = {0x00: Kind.A_SYNC, 0x08: Kind.I_SYNC, 0x72: Kind.WAYPOINT_UPDATE, 0x0C: Kind.TRIGGER,
              0x6E: Kind.CONTEXT_ID, 0x3C: Kind.VMID, 0x42: Kind.TIMESTAMP, 0x46: Kind.TIMESTAMP,
              0x76: Kind.EXCEPTION_RETURN, 0x66: Kind.IGNORE}  # fmt: skip
    for b, kind in single.items():
        kinds[b] = kind
    return kinds


def _atom_headers() -> np.ndarray:
    """[field, header] of the atom headers outside cycle-accurate mode (4.5.3): atoms (bit i set:
    atom i, oldest first, is E) and count. The header holds 1 to 5 atoms in bits count..1, the
    oldest in the highest, 0 meaning E; the bits above them say how many: b1000_0xA0 one,
    b1000_1AA0 two, b1001_AAA0 three, b101A_AAA0 four, b11AA_AAA0 five."""
    table = np.zeros((2, 256), dtype=np.int64)
    for b in range(0x80, 0x100, 2):
        if b & 0xF0 == 0x80:
            count = 2 if b & 0x08 else 1
        elif b & 0xF0 == 0x90:
            count = 3
        elif b & 0xE0 == 0xA0:
            count = 4
        else:
            count = 5
        atoms = 0
        for i in range(count):
            if not (b >> (count - i)) & 1:
                atoms |= 1 << i
        table[:, b] = (atoms, count)
    return table


HEADER_KINDS = _header_kinds()
ATOM_HEADERS = _atom_headers()


@numba.njit(cache=True, nogil=True)
def _cycle_count(data, p, n):
    """A cycle count from byte p (4.5.3): bits 5:2 of its first byte, bit 6 set if more follow;
    then up to four bytes of 7 bits, bit 7 set if more follow. Returns (end or NEED_MORE, count)."""
    if p >= n:
        return NEED_MORE, 0
    b = np.int64(data[p])
    value = (b >> 2) & 0xF
    more = (b & 0x40) != 0
    p += 1
    shift = 4
    extra = 0
    while more:
        if p >= n:
            return NEED_MORE, 0
        b = np.int64(data[p])
        p += 1
        value |= (b & 0x7F) << shift
        shift += 7
        extra += 1
        more = (b & 0x80) != 0 and extra < 4
    return p, value


@numba.njit(cache=True, nogil=True)
def _address(data, p, n, branch, st):
    """The address section of a branch address (from its header, `branch`) or waypoint update
    packet (from byte p), and its exception or AltISA bytes (4.5.4, 4.5.5).

    Up to five address bytes, bit 7 set if another follows: the first gives 6 bits, the middle
    ones 7, a last one before the fifth 6 (bit 6: exception bytes follow, in a branch address),
    the fifth the top bits and the instruction set (bit 5 Jazelle, bits 5:4 b01 Thumb, else
    ARM; bit 6: an exception byte follows). Returns (end or NEED_MORE, address, bits carried,
    isa, exception or -1, ns, hyp, alt_isa (-1: not given), flags)."""
    b0 = b1 = b2 = b3 = b4 = np.int64(0)
    count = 0
    more = True
    while more and count < 5:
        if p >= n:
            return NEED_MORE, 0, 0, 0, -1, -1, -1, -1, 0
        b = np.int64(data[p])
        p += 1
        if count == 0:
            b0 = b
        elif count == 1:
            b1 = b
        elif count == 2:
            b2 = b
        elif count == 3:
            b3 = b
        else:
            b4 = b
        count += 1
        more = count < 5 and (b & 0x80) != 0
    last = (b0, b1, b2, b3, b4)[count - 1]
    isa = st.isa
    follows = False
    if count == 5:
        follows = (b4 & 0x40) != 0
        if b4 & 0x20:
            isa = _JAZELLE
        elif b4 & 0x30 == 0x10:
            isa = _T32
        else:
            isa = _A32
    elif count > 1 and branch:
        follows = (last & 0x40) != 0
    exception = -1
    ns = hyp = alt_isa = -1
    flags = 0
    if follows:
        if p >= n:
            return NEED_MORE, 0, 0, 0, -1, -1, -1, -1, 0
        e = np.int64(data[p])
        p += 1
        alt_isa = (e >> 6) & 1
        if branch:
            flags |= _F_EXCEPTION
            ns = e & 1
            exception = (e >> 1) & 0xF
            if e & 0x80:
                if p >= n:
                    return NEED_MORE, 0, 0, 0, -1, -1, -1, -1, 0
                e = np.int64(data[p])
                p += 1
                exception |= (e & 0x1F) << 4
                hyp = (e >> 5) & 1
    if isa in (_T32, _T32EE):  # Thumb or ThumbEE: the AltISA bit tells them apart
        isa = _T32EE if (alt_isa if alt_isa >= 0 else st.alt_isa) else _T32
    jazelle = isa == _JAZELLE
    value = (b0 & 0x7E) >> 1 if jazelle else b0 & 0x7E
    bits = 6 if jazelle else 7
    shift = bits
    for j in range(1, count):
        b = (b0, b1, b2, b3, b4)[j]
        if j == 4:
            width = 5 if jazelle else (3 if isa == _A32 else 4)
        elif j == count - 1:
            width = 6
        else:
            width = 7
        value |= (b & low_bits(width)) << shift
        shift += width
        bits += width
    if isa == _A32:
        value <<= 1
        bits += 1
    keep = low_bits(bits)
    address = ((st.address & ~keep) | (value & keep)) & 0xFFFFFFFF
    return p, address, bits, isa, exception, ns, hyp, alt_isa, flags


@numba.njit(inline="always")
def _address_flags(st, bits):
    flags = _F_NS if st.ns else 0
    flags |= _F_HYP if st.hyp else 0
    flags |= _F_ALT_ISA if st.alt_isa else 0
    if bits < 32 and not st.address_known:
        flags |= _F_PARTIAL
    return flags


@numba.njit(cache=True, nogil=True)
def _i_sync(data, i, n, cfg, st, rec):
    """I-sync (4.5.2): four address bytes (bit 0: Thumb), an information byte (reason in bits
    6:5, NS bit 3, AltISA bit 2, Hyp bit 1), a cycle count in cycle-accurate mode unless the
    reason is periodic, then the context ID. Returns the end or NEED_MORE."""
    if i + 6 > n:
        return NEED_MORE
    raw = 0
    for j in range(4):
        raw |= np.int64(data[i + 1 + j]) << (8 * j)
    info = np.int64(data[i + 5])
    p = i + 6
    reason = (info >> 5) & 3
    cycles = -1
    if cfg.cycle_accurate and reason != 0:
        p, cycles = _cycle_count(data, p, n)
        if p < 0:
            return NEED_MORE
    context_bytes = cfg.context_id_bytes
    if p + context_bytes > n:
        return NEED_MORE
    context = st.context_id
    if context_bytes:
        context = 0
        for j in range(context_bytes):
            context |= np.int64(data[p + j]) << (8 * j)
        p += context_bytes
    st.ns = (info >> 3) & 1
    st.alt_isa = (info >> 2) & 1
    st.hyp = (info >> 1) & 1
    st.context_id = context
    st.address = raw & 0xFFFFFFFE
    st.isa = (_T32EE if st.alt_isa else _T32) if raw & 1 else _A32
    st.address_known = 1
    start_packet(rec, _K_I_SYNC, i, p)
    rec.address = st.address
    rec.bits = 32
    rec.isa = st.isa
    rec.cycles = cycles
    rec.value = context
    rec.info = reason
    rec.flags = _address_flags(st, 32)
    return p


@numba.njit(cache=True, nogil=True)
def _branch(data, i, n, cfg, st, rec, kind):
    """Branch address (the header is its first address byte) or waypoint update packet."""
    branch = kind == _K_BRANCH
    end, address, bits, isa, exception, ns, hyp, alt_isa, flags = _address(data, i if branch else i + 1, n,
                                                                          branch, st)  # fmt: skip
    if end < 0:
        return NEED_MORE
    cycles = -1
    if branch and cfg.cycle_accurate:
        end, cycles = _cycle_count(data, end, n)
        if end < 0:
            return NEED_MORE
    if ns >= 0:
        st.ns = ns
    if hyp >= 0:
        st.hyp = hyp
    if alt_isa >= 0:
        st.alt_isa = alt_isa
    st.address = address
    st.isa = isa
    flags |= _address_flags(st, bits)
    if bits >= 32:
        st.address_known = 1
    start_packet(rec, kind, i, end)
    rec.address = address
    rec.bits = bits
    rec.isa = isa
    rec.exception = exception
    rec.cycles = cycles
    rec.flags = flags
    return end


@numba.njit(cache=True, nogil=True)
def _timestamp(data, i, n, cfg, st, rec):
    """Timestamp (4.5.9): the value (`timestamp_update`), then a cycle count in cycle-accurate
    mode. Returns the end or NEED_MORE."""
    p, raw, bits = timestamp_update(data, i + 1, n, cfg.timestamp_64, st.timestamp)
    if p < 0:
        return NEED_MORE
    cycles = -1
    if cfg.cycle_accurate:
        p, cycles = _cycle_count(data, p, n)
        if p < 0:
            return NEED_MORE
    st.timestamp = raw
    start_packet(rec, _K_TIMESTAMP, i, p)
    rec.value = gray_to_binary(raw) if cfg.timestamp_gray else raw
    rec.bits = bits
    rec.cycles = cycles
    rec.flags = _F_CLOCK_CHANGED if data[i] & 0x04 else 0
    return p


@numba.njit(cache=True, nogil=True)
def _packet(data, i, n, cfg, st, rec, kind):
    """The packet whose header is data[i], of `kind` from HEADER_KINDS: (end, status)."""
    if kind == _K_ATOM:  # cycle-accurate: one atom (bit 1 clear: E), its cycles from the header on
        end, cycles = _cycle_count(data, i, n)
        if end < 0:
            return NEED_MORE, NEED_MORE
        start_packet(rec, kind, i, end)
        rec.atoms = 0 if data[i] & 0x02 else 1
        rec.count = 1
        rec.cycles = cycles
        return end, 0
    if kind in (_K_BRANCH, _K_WAYPOINT_UPDATE):
        end = _branch(data, i, n, cfg, st, rec, kind)
    elif kind == _K_I_SYNC:
        end = _i_sync(data, i, n, cfg, st, rec)
    elif kind == _K_TIMESTAMP:
        end = _timestamp(data, i, n, cfg, st, rec)
    elif kind == _K_CONTEXT_ID:
        size = np.int64(cfg.context_id_bytes)
        if size == 0:
            return i + 1, _E_CONTEXT_ID_OFF
        end = i + 1 + size
        if end > n:
            return NEED_MORE, NEED_MORE
        context = 0
        for j in range(size):
            context |= np.int64(data[i + 1 + j]) << (8 * j)
        st.context_id = context
        start_packet(rec, kind, i, end)
        rec.value = context
    elif kind == _K_VMID:
        end = i + 2
        if end > n:
            return NEED_MORE, NEED_MORE
        st.vmid = data[i + 1]
        start_packet(rec, kind, i, end)
        rec.value = data[i + 1]
    elif kind == _K_ERROR:
        return i + 1, _E_RESERVED_HEADER
    else:  # trigger, exception return, ignore: the header alone
        end = i + 1
        start_packet(rec, kind, i, end)
    return end, (NEED_MORE if end < 0 else 0)


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
            k, i, found = skip_to_a_sync(data, i, n, final, out, k, _K_A_SYNC)
            if not found:
                break
            st.synced = 1
            continue
        h = data[i]
        kind = HEADER_KINDS[h]
        rec = out[k]
        if kind == _K_ATOM and not cfg.cycle_accurate:  # the most common packet, inline
            start_packet(rec, _K_ATOM, i, i + 1)
            rec.atoms = ATOM_HEADERS[0, h]
            rec.count = ATOM_HEADERS[1, h]
            k += 1
            i += 1
            continue
        if kind == _K_A_SYNC:
            k, i, synced, done = zeros_in_sync(
                data, i, n, final, out, k, _K_A_SYNC, _E_BAD_A_SYNC, _E_TRUNCATED
            )
            st.synced = 1 if synced else 0
            if done:
                break
            continue
        end, status = _packet(data, i, n, cfg, st, rec, kind)
        if status == NEED_MORE:
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
    state["isa"] = ISA_UNKNOWN
    return state


class PacketDecoder(PacketScanner):
    """Decodes one PTM source's bytes, fed in chunks, into batches of packets."""

    def __init__(self, config: PtmConfig, batch_packets: int = BATCH_PACKETS) -> None:
        self.config = config
        super().__init__(_decode, config.as_record(), new_state(), batch_packets)


def decode_packets(data: bytes | np.ndarray, config: PtmConfig, offsets: np.ndarray | None = None) -> Packets:
    """Every packet of a whole stream held in memory (offsets default to stream positions)."""
    return PacketDecoder(config).decode_all(data, offsets)
