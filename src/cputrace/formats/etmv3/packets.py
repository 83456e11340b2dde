"""ETMv3 packets from one source's byte stream: a compiled decoder with columnar output.

Packets come out as a record array (`PACKET`: one record per packet, a numpy column per field)
so that the instruction layer can walk them in compiled code. Fields by kind, beyond `kind`,
`offset` (in the buffer), `pos` (in the source's stream) and `size` (bytes):

- i_sync: address (of the next instruction), address2 (the LSiP address, flag LSIP), bits (32;
  0 in data-only mode), isa, cycles (the I-sync with cycle count), value (context ID), info
  (reason, I_SYNC_REASONS), flags NS HYP ALT_ISA LSIP.
- branch: address (target), bits (address bits carried), isa, exception (number; -1 none),
  info (resume), flags NS HYP ALT_ISA EXCEPTION CANCEL DEPRECATED.
- p_header: atoms (bit i set: atom i, oldest first, is E), count (atoms), cycles (W cycles in
  cycle-accurate mode), info (format 1-4).
- cycle_count: cycles. timestamp: value, bits carried, flag CLOCK_CHANGED.
  context_id, vmid: value.
- normal_data, ooo_data, ooo_placeholder, value_not_traced: address (data address), bits
  (address bits carried, 0 none), count (value bytes), value, info (out-of-order tag), flag
  BIG_ENDIAN.
- error: info (ErrorReason).

Empty fields hold 0, except cycles and exception (-1) and isa (255). Addresses are complete
(compression undone against the previous address); PARTIAL_ADDRESS marks those whose upper
bits no I-sync or full branch address has given yet.

Synchronisation: bytes before the first A-sync are an `unsynced` packet. A reserved or
malformed packet becomes an `error` packet (its bytes, the reason in `info`), after which
the decoder skips to the next A-sync (the skipped bytes are an `unsynced` packet).

The decoder is resumable: it stops before a packet that the bytes given so far do not
complete and carries that tail into the next feed, so a stream can be decoded in chunks of
any size with the same packets (except inside runs of more than MAX_ZEROS zero bytes in a
synchronised stream, which are reported in pieces rather than carried whole).
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
from .config import EtmConfig
from .protocol import DEPRECATED_EXCEPTIONS, ErrorReason, Flag, Kind

SCAN = np.dtype(
    [
        ("synced", "<i8"), ("address", "<i8"), ("address_known", "<i8"), ("isa", "<i8"), ("ns", "<i8"),
        ("hyp", "<i8"), ("alt_isa", "<i8"), ("context_id", "<i8"), ("vmid", "<i8"), ("timestamp", "<i8"),
        ("data_address", "<i8"), ("big_endian", "<i8"),
    ]
)  # fmt: skip
"""The decoder's state between feeds: synchronised, the last address and its ISA (and whether
all its bits are known), the security, Hyp and AltISA state, context ID, VMID, the raw
timestamp register (Gray-coded where the stream is), and the last data address and its
endianness."""

_A32, _T32, _T32EE, _JAZELLE = int(Isa.A32), int(Isa.T32), int(Isa.T32EE), int(Isa.JAZELLE)
_DEPRECATED = np.array(DEPRECATED_EXCEPTIONS, dtype=np.int64)

_F_NS, _F_HYP, _F_ALT_ISA = int(Flag.NS), int(Flag.HYP), int(Flag.ALT_ISA)
_F_EXCEPTION, _F_CANCEL, _F_DEPRECATED = int(Flag.EXCEPTION), int(Flag.CANCEL), int(Flag.DEPRECATED)
_F_LSIP, _F_BIG_ENDIAN = int(Flag.LSIP), int(Flag.BIG_ENDIAN)
_F_CLOCK_CHANGED, _F_PARTIAL = int(Flag.CLOCK_CHANGED), int(Flag.PARTIAL_ADDRESS)

_K_UNSYNCED, _K_ERROR, _K_A_SYNC = int(Kind.UNSYNCED), int(Kind.ERROR), int(Kind.A_SYNC)
_K_I_SYNC = int(Kind.I_SYNC)
_K_BRANCH, _K_P_HEADER, _K_CYCLE_COUNT = int(Kind.BRANCH), int(Kind.P_HEADER), int(Kind.CYCLE_COUNT)
_K_CONTEXT_ID, _K_VMID, _K_TIMESTAMP = int(Kind.CONTEXT_ID), int(Kind.VMID), int(Kind.TIMESTAMP)
_K_NORMAL_DATA, _K_OOO_DATA = int(Kind.NORMAL_DATA), int(Kind.OOO_DATA)
_K_OOO_PLACEHOLDER, _K_VALUE_NOT_TRACED = int(Kind.OOO_PLACEHOLDER), int(Kind.VALUE_NOT_TRACED)
_K_STORE_FAILED, _K_DATA_SUPPRESSED = int(Kind.STORE_FAILED), int(Kind.DATA_SUPPRESSED)

_E_RESERVED_HEADER, _E_DATA_TRACE_OFF = int(ErrorReason.RESERVED_HEADER), int(ErrorReason.DATA_TRACE_OFF)
_E_CONTEXT_ID_OFF, _E_BAD_A_SYNC = int(ErrorReason.CONTEXT_ID_OFF), int(ErrorReason.BAD_A_SYNC)
_E_RESERVED_P_HEADER, _E_RESERVED_ISA = int(ErrorReason.RESERVED_P_HEADER), int(ErrorReason.RESERVED_ISA)
_E_RESERVED_EXCEPTION, _E_TRUNCATED = int(ErrorReason.RESERVED_EXCEPTION), int(ErrorReason.TRUNCATED)


def _header_kinds() -> np.ndarray:
    """The packet kind each header byte starts (ERROR: reserved), in the architecture's order."""
    kinds = np.full(256, Kind.ERROR, dtype=np.int64)
    for b in range(256):
        if b & 0x01:
            kinds[b] = Kind.BRANCH
        elif b & 0x80:
            kinds[b] = Kind.P_HEADER
        elif b in (0x00, 0x04, 0x08, 0x0C):
            kinds[b] = (Kind.A_SYNC, Kind.CYCLE_COUNT, Kind.I_SYNC, Kind.TRIGGER)[b >> 2]
        elif b & 0x93 == 0x00:
            kinds[b] = Kind.OOO_DATA  # 0TT0SS00, TT != 0
        elif b == 0x70:
            kinds[b] = Kind.I_SYNC  # with cycle count
        elif b == 0x50:
            kinds[b] = Kind.STORE_FAILED
        elif b & 0xD3 == 0x50:
            kinds[b] = Kind.OOO_PLACEHOLDER  # 01A1TT00
        elif b == 0x3C:
            kinds[b] = Kind.VMID
        elif b & 0xD3 == 0x02:
            kinds[b] = Kind.NORMAL_DATA  # 00A0SS10
        elif b & 0xEF == 0x6A:
            kinds[b] = Kind.VALUE_NOT_TRACED  # 011A1010
        elif b & 0xFB == 0x42:
            kinds[b] = Kind.TIMESTAMP
        else:
            single = {0x62: Kind.DATA_SUPPRESSED, 0x66: Kind.IGNORE, 0x6E: Kind.CONTEXT_ID,
                      0x76: Kind.EXCEPTION_EXIT, 0x7E: Kind.EXCEPTION_ENTRY}  # fmt: skip
            kinds[b] = single.get(b, Kind.ERROR)
    return kinds


def _p_headers() -> np.ndarray:
    """[mode, field, header]: format (0 = reserved), atoms (bit set = E), count, cycles (-1 none).

    Mode 0 is not cycle-accurate: format 1 `1NEEEE00` (EEEE E atoms then N if set), format 2
    `1000FF10` (bit 3 first atom, bit 2 second, 0 = E); other `1xxxxx10` are reserved. Mode 1
    is cycle-accurate (as the open-source reference decoder reads it): format 1 `1N0EEE00`
    (a cycle per atom; 0x80 reserved), format 2 `1x00FF10` (one W then two atoms), format 4
    `1x01xF10` (one atom, no cycle), format 3 `1E1WWW00` (WWW+1 cycles then E if set); 0xA2
    under that mask is reserved.
    """
    table = np.zeros((2, 4, 256), dtype=np.int64)
    table[:, 3, :] = -1
    for b in range(0x80, 0x100, 2):
        two = (0 if b & 0x08 else 1) | (0 if b & 0x04 else 2)
        if b & 0x83 == 0x80:
            e, n = (b >> 2) & 0xF, (b >> 6) & 1
            table[0, :3, b] = (1, (1 << e) - 1, e + n)
        elif b & 0xF3 == 0x82:
            table[0, :3, b] = (2, two, 2)
        code = b & 0xA3
        if code == 0x80 and b != 0x80:
            e, n = (b >> 2) & 0x7, (b >> 6) & 1
            table[1, :, b] = (1, (1 << e) - 1, e + n, e + n)
        elif code == 0x82:
            table[1, :, b] = (4, 0 if b & 0x04 else 1, 1, 0) if b & 0x10 else (2, two, 2, 1)
        elif code == 0xA0:
            e = (b >> 6) & 1
            table[1, :, b] = (3, e, e, ((b >> 2) & 7) + 1)
    return table


HEADER_KINDS = _header_kinds()
P_HEADERS = _p_headers()


@numba.njit(cache=True, nogil=True)
def _cycle_count(data, p, n):
    """A 1-5 byte count, 7 bits a byte, bit 7 = more (4 bits in byte 5): (end or -1, count)."""
    value = 0
    for j in range(5):
        if p >= n:
            return NEED_MORE, 0
        b = np.int64(data[p])
        p += 1
        if j == 4:
            value |= (b & 0x0F) << 28
            break
        value |= (b & 0x7F) << (7 * j)
        if not b & 0x80:
            break
    return p, value


@numba.njit(cache=True, nogil=True)
def _data_address(data, p, n):
    """A 1-5 byte data address (byte 5: bits 31:28 and the big-endian flag in bit 4).

    Returns (end or -1, value, bits carried, big-endian flag or -1 when not carried)."""
    value = 0
    for j in range(5):
        if p >= n:
            return NEED_MORE, 0, 0, -1
        b = np.int64(data[p])
        p += 1
        if j == 4:
            return p, value | ((b & 0x0F) << 28), 32, (b >> 4) & 1
        value |= (b & 0x7F) << (7 * j)
        if not b & 0x80:
            return p, value, 7 * (j + 1), -1
    return p, value, 32, -1


@numba.njit(cache=True, nogil=True)
def _branch_address(data, p, n, alt, m_profile, base_address, base_isa, base_alt_isa):
    """A branch address (1-5 bytes) and its exception bytes (0-3), from byte p.

    Returns (end, status, address, bits, isa, exception, resume, ns, hyp, alt_isa, flags):
    status 0, NEED_MORE, or an ErrorReason; ns, hyp and alt_isa are -1 when not given."""
    value = 0
    bits = 0
    count = 0
    more = True
    exception_follows = False
    while more and count < 4:
        if p >= n:
            return NEED_MORE, NEED_MORE, 0, 0, 0, -1, 0, -1, -1, -1, 0
        b = np.int64(data[p])
        p += 1
        more = (b & 0x80) != 0
        if count == 0:
            value = (b >> 1) & 0x3F
            bits = 6
        elif alt and not more:
            value |= (b & 0x3F) << bits
            bits += 6
            exception_follows = (b & 0x40) != 0
        else:
            value |= (b & 0x7F) << bits
            bits += 7
        count += 1
    isa = base_isa
    exception = -1
    resume = 0
    ns = -1
    hyp = -1
    alt_isa = -1
    flags = 0
    last = 0
    if more:  # byte 5: the instruction set, and whether exception bytes follow
        if p >= n:
            return NEED_MORE, NEED_MORE, 0, 0, 0, -1, 0, -1, -1, -1, 0
        last = np.int64(data[p])
        p += 1
        if last & 0x80:  # deprecated: ARM state, exception in bits 5:3, cancel in bit 6
            exception = _DEPRECATED[(last >> 3) & 7]
            if exception < 0:
                return p, _E_RESERVED_EXCEPTION, 0, 0, 0, -1, 0, -1, -1, -1, 0
            flags |= _F_EXCEPTION | _F_DEPRECATED | (_F_CANCEL if last & 0x40 else 0)
            isa = _A32
        else:
            exception_follows = (last & 0x40) != 0
            if last & 0xB8 == 0x08:
                isa = _A32
            elif last & 0xB0 == 0x10:
                isa = _T32
            elif last & 0xA0 == 0x20:
                isa = _JAZELLE
            else:
                return p, _E_RESERVED_ISA, 0, 0, 0, -1, 0, -1, -1, -1, 0
    if exception_follows:
        if p >= n:
            return NEED_MORE, NEED_MORE, 0, 0, 0, -1, 0, -1, -1, -1, 0
        e = np.int64(data[p])
        p += 1
        flags |= _F_EXCEPTION | (_F_CANCEL if e & 0x20 else 0)
        ns = e & 1
        exception = (e >> 1) & 0xF
        alt_isa = (e >> 6) & 1
        if e & 0x80:
            if p >= n:
                return NEED_MORE, NEED_MORE, 0, 0, 0, -1, 0, -1, -1, -1, 0
            e = np.int64(data[p])
            p += 1
            if e & 0x40:  # information byte 2 directly
                resume = e & 0xF
            else:
                if m_profile:
                    exception |= (e & 0x1F) << 4
                hyp = (e >> 5) & 1
                if e & 0x80:
                    if p >= n:
                        return NEED_MORE, NEED_MORE, 0, 0, 0, -1, 0, -1, -1, -1, 0
                    resume = np.int64(data[p]) & 0xF
                    p += 1
    if isa in (_T32, _T32EE):  # Thumb or ThumbEE: the AltISA bit tells them apart
        isa = _T32EE if (alt_isa if alt_isa >= 0 else base_alt_isa) else _T32
    if more:
        if isa == _A32:
            value |= (last & 0x07) << bits
            bits += 3
        elif isa == _JAZELLE:
            value |= (last & 0x1F) << bits
            bits += 5
        else:
            value |= (last & 0x0F) << bits
            bits += 4
    shift = 0 if isa == _JAZELLE else (1 if isa in (_T32, _T32EE) else 2)
    bits += shift
    mask = low_bits(bits)
    address = ((base_address & ~mask) | ((value << shift) & mask)) & 0xFFFFFFFF
    return p, 0, address, bits, isa, exception, resume, ns, hyp, alt_isa, flags


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
    """I-sync (0x08) or I-sync with cycle count (0x70) at i: (end, status)."""
    p = i + 1
    cycles = -1
    if data[i] == 0x70:
        p, cycles = _cycle_count(data, p, n)
        if p < 0:
            return NEED_MORE, NEED_MORE
    context_bytes = cfg.context_id_bytes
    if p + context_bytes >= n:
        return NEED_MORE, NEED_MORE
    context = st.context_id
    if context_bytes:
        context = 0
        for j in range(context_bytes):
            context |= np.int64(data[p + j]) << (8 * j)
        p += context_bytes
    info = np.int64(data[p])
    p += 1
    ns = (info >> 3) & 1
    alt_isa = (info >> 2) & 1 if cfg.alt_isa else 0
    hyp = (info >> 1) & 1 if cfg.hyp else 0
    address = st.address
    isa = st.isa
    bits = 0
    address2 = 0
    lsip = False
    if not cfg.data_only:
        if p + 4 > n:
            return NEED_MORE, NEED_MORE
        raw = 0
        for j in range(4):
            raw |= np.int64(data[p + j]) << (8 * j)
        p += 4
        bits = 32
        if info & 0x10:
            isa, address = _JAZELLE, raw
        else:
            isa = (_T32EE if alt_isa else _T32) if raw & 1 else _A32
            address = raw & 0xFFFFFFFE
        lsip = (info & 0x80) != 0
        if lsip:
            r = _branch_address(data, p, n, cfg.alt_branch, cfg.m_profile, address, isa, alt_isa)
            if r[1] != 0:
                return r[0], r[1]
            p = r[0]
            address2 = r[2]
    st.context_id = context
    st.ns = ns
    st.alt_isa = alt_isa
    st.hyp = hyp
    if bits:
        st.address = address
        st.isa = isa
        st.address_known = 1
    start_packet(rec, _K_I_SYNC, i, p)
    rec.address = address
    rec.address2 = address2
    rec.bits = bits
    rec.isa = isa
    rec.cycles = cycles
    rec.value = context
    rec.info = (info >> 5) & 3
    rec.flags = _address_flags(st, 32) | (_F_LSIP if lsip else 0)
    return p, 0


@numba.njit(cache=True, nogil=True)
def _branch(data, i, n, cfg, st, rec):
    r = _branch_address(
        data, i, n, cfg.alt_branch, cfg.m_profile, st.address, st.isa, st.alt_isa
    )
    end, status, address, bits, isa, exception, resume, ns, hyp, alt_isa, flags = r
    if status != 0:
        return end, status
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
    start_packet(rec, _K_BRANCH, i, end)
    rec.address = address
    rec.bits = bits
    rec.isa = isa
    rec.exception = exception
    rec.info = resume
    rec.flags = flags
    return end, 0


@numba.njit(cache=True, nogil=True)
def _timestamp(data, i, n, cfg, st, rec):
    p, raw, bits = timestamp_update(data, i + 1, n, cfg.timestamp_64, st.timestamp)
    if p < 0:
        return NEED_MORE, NEED_MORE
    st.timestamp = raw
    start_packet(rec, _K_TIMESTAMP, i, p)
    rec.value = gray_to_binary(raw) if cfg.timestamp_gray else raw
    rec.bits = bits
    rec.flags = _F_CLOCK_CHANGED if data[i] & 0x04 else 0
    return p, 0


@numba.njit(cache=True, nogil=True)
def _data(data, i, n, cfg, st, rec, kind):
    """The data packets: normal, out-of-order, placeholder, value not traced."""
    h = np.int64(data[i])
    p = i + 1
    tag = 0
    size_code = 0
    has_address = False
    if kind == _K_NORMAL_DATA:
        size_code = (h >> 2) & 3
        has_address = (h & 0x20) != 0
    elif kind == _K_OOO_DATA:
        size_code = (h >> 2) & 3
        tag = (h >> 5) & 3
    elif kind == _K_OOO_PLACEHOLDER:
        tag = (h >> 2) & 3
        has_address = (h & 0x20) != 0
    else:
        has_address = (h & 0x10) != 0
    bits = 0
    address = st.data_address
    big_endian = st.big_endian
    if has_address and cfg.data_address:
        p, value, bits, be = _data_address(data, p, n)
        if p < 0:
            return NEED_MORE, NEED_MORE
        mask = low_bits(bits)
        address = (address & ~mask) | (value & mask)
        if be >= 0:
            big_endian = be
    size = 4 if size_code == 3 else size_code
    if p + size > n:
        return NEED_MORE, NEED_MORE
    value = 0
    for j in range(size):
        value |= np.int64(data[p + j]) << (8 * j)
    p += size
    st.data_address = address
    st.big_endian = big_endian
    start_packet(rec, kind, i, p)
    rec.address = address
    rec.bits = bits
    rec.count = size
    rec.value = value
    rec.info = tag
    rec.flags = _F_BIG_ENDIAN if big_endian else 0
    return p, 0


@numba.njit(cache=True, nogil=True)
def _packet(data, i, n, cfg, st, rec, kind):
    """The packet whose header is data[i], of `kind` from HEADER_KINDS: (end, status)."""
    if kind == _K_P_HEADER:
        return i + 1, _E_RESERVED_P_HEADER  # the valid ones take the fast path in _decode
    if kind == _K_BRANCH:
        return _branch(data, i, n, cfg, st, rec)
    if kind == _K_I_SYNC:
        return _i_sync(data, i, n, cfg, st, rec)
    if kind == _K_CYCLE_COUNT:
        end, cycles = _cycle_count(data, i + 1, n)
        if end < 0:
            return NEED_MORE, NEED_MORE
        start_packet(rec, kind, i, end)
        rec.cycles = cycles
        return end, 0
    if kind == _K_TIMESTAMP:
        return _timestamp(data, i, n, cfg, st, rec)
    if kind == _K_CONTEXT_ID:
        size = cfg.context_id_bytes
        if size == 0:
            return i + 1, _E_CONTEXT_ID_OFF
        if i + 1 + size > n:
            return NEED_MORE, NEED_MORE
        context = 0
        for j in range(size):
            context |= np.int64(data[i + 1 + j]) << (8 * j)
        st.context_id = context
        start_packet(rec, kind, i, i + 1 + size)
        rec.value = context
        return i + 1 + size, 0
    if kind == _K_VMID:
        if i + 2 > n:
            return NEED_MORE, NEED_MORE
        st.vmid = data[i + 1]
        start_packet(rec, kind, i, i + 2)
        rec.value = data[i + 1]
        return i + 2, 0
    if kind == _K_ERROR:
        return i + 1, _E_RESERVED_HEADER
    data_value = cfg.data_value != 0
    data_trace = data_value or cfg.data_address != 0
    if kind in (_K_OOO_DATA, _K_STORE_FAILED):
        traced = data_value
    elif kind in (_K_NORMAL_DATA, _K_OOO_PLACEHOLDER, _K_VALUE_NOT_TRACED, _K_DATA_SUPPRESSED):
        traced = data_trace
    else:
        traced = True
    if not traced:
        return i + 1, _E_DATA_TRACE_OFF
    if kind in (_K_NORMAL_DATA, _K_OOO_DATA, _K_OOO_PLACEHOLDER, _K_VALUE_NOT_TRACED):
        return _data(data, i, n, cfg, st, rec, kind)
    start_packet(rec, kind, i, i + 1)  # trigger, ignore, exception exit/entry, store failed, data suppressed
    return i + 1, 0


@numba.njit(cache=True, nogil=True)
def _decode(data, offsets, base, final, config, state, out):
    """Decode packets from `data` into `out` until it is full or the bytes run out.

    `offsets` are the bytes' buffer offsets and `base` the stream position of data[0].
    Returns (packets written, bytes consumed); the rest must be fed again with what follows.
    Bytes skipped while looking for an A-sync become `unsynced` packets of MAX_UNSYNCED bytes
    from the start of the run, and a shorter last one, so that chunking does not change them.
    """
    cfg, st = config[0], state[0]
    n = len(data)
    cap = len(out)
    mode = 1 if cfg.cycle_accurate else 0
    i = np.int64(0)  # not the literal 0: numba would compile _packet for it as well as for int64
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
        if kind == _K_P_HEADER and P_HEADERS[mode, 0, h]:  # the most common packet, inline
            start_packet(rec, _K_P_HEADER, i, i + 1)
            rec.info = P_HEADERS[mode, 0, h]
            rec.atoms = P_HEADERS[mode, 1, h]
            rec.count = P_HEADERS[mode, 2, h]
            rec.cycles = P_HEADERS[mode, 3, h]
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
    """Decodes one ETMv3 source's bytes, fed in chunks, into batches of packets."""

    def __init__(self, config: EtmConfig, batch_packets: int = BATCH_PACKETS) -> None:
        self.config = config
        super().__init__(_decode, config.as_record(), new_state(), batch_packets)


def decode_packets(data: bytes | np.ndarray, config: EtmConfig, offsets: np.ndarray | None = None) -> Packets:
    """Every packet of a whole stream held in memory (offsets default to stream positions)."""
    return PacketDecoder(config).decode_all(data, offsets)
