"""What the CoreSight packet decoders (ETMv3, PTM, ETMv4) share: the packet record, a batch of
packets, the compiled helpers of synchronisation, and the driver that feeds a stream to a
compiled scanner in chunks.

A decoder is a compiled `scan(data, offsets, base, final, config, state, out)` that writes
PACKET records into `out` until it is full or the bytes run out and returns (packets written,
bytes consumed); `PacketScanner` carries what it did not consume into the next feed, so a
stream decodes to the same packets in chunks of any size. Each protocol documents which
PACKET fields its packet kinds fill.

Each protocol writes its scan loop out in full, though the loops differ only in their inline
fast path and the packet function they call: numba caches a compiled function on disk only
when it names its callees as globals; a loop given its packet function as an argument, or
made by a factory around it, is compiled again in every process (numba 0.68), seconds at the
start of every command.

Kind codes 0 and 1 are common to every protocol: bytes skipped while looking for an A-sync
(`UNSYNCED`) and a reserved or malformed packet (`ERROR`, its reason in `info`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numba
import numpy as np

from ..kernels.records import joined
from .frames import read_only

PACKET = np.dtype(
    [
        ("offset", "<i8"), ("pos", "<i8"), ("value", "<u8"), ("value2", "<u8"), ("cycles", "<i8"),
        ("address", "<u8"), ("address2", "<u4"), ("size", "<i4"), ("atoms", "<u4"), ("exception", "<i2"),
        ("flags", "<u2"), ("kind", "u1"), ("bits", "u1"), ("isa", "u1"), ("count", "u1"), ("info", "u1"),
    ],
    align=True,
)  # fmt: skip
"""One packet: `offset` in the buffer, `pos` in the source's stream, `size` in bytes, then
the decoded fields (what each means depends on the protocol and the packet's kind). `address`
holds 64-bit addresses (ETMv4), `atoms` the 24 atoms of an ETMv4 format-6 atom packet, and
`value2` a second number where a packet has two (an ETMv4 context's VMID)."""

K_UNSYNCED, K_ERROR, K_A_SYNC, K_I_SYNC = 0, 1, 2, 3
K_TRIGGER, K_CONTEXT_ID, K_VMID, K_TIMESTAMP, K_EXCEPTION_RETURN = 7, 8, 9, 10, 11
"""The packet kinds ETMv3 and PFT both have, with these codes (each protocol numbers its others)."""
ISA_UNKNOWN = 255
"""`isa` of a packet that gives none."""
I_SYNC_REASONS = ("periodic", "trace_on", "overflow", "debug_exit")
"""The reasons an I-sync gives (ETMv3 and PFT alike), by their code in its `info`."""
I_SYNC_PERIODIC, I_SYNC_OVERFLOW = I_SYNC_REASONS.index("periodic"), I_SYNC_REASONS.index("overflow")

BATCH_PACKETS = 1 << 18
MAX_ZEROS = 4096  # the longest zero run carried from one feed to the next
MAX_UNSYNCED = 1 << 16  # unsynced runs are reported in pieces of at most this many bytes
NEED_MORE = -1  # a helper's status: the packet continues past the bytes given
A_SYNC_ZEROS = 5  # zero bytes before the 0x80 of an ETMv3 or PFT A-sync (ETMv4's has eleven)


@numba.njit(inline="always")
def low_bits(bits):
    """The low `bits` bits set (all 64 from 64 up)."""
    return np.int64(-1) if bits >= 64 else (np.int64(1) << bits) - 1


@numba.njit(cache=True, nogil=True)
def gray_to_binary(gray):
    value = np.uint64(gray)
    shift = np.uint64(1)
    while shift < np.uint64(64):
        value ^= value >> shift
        shift <<= np.uint64(1)
    return np.int64(value)


@numba.njit(cache=True, nogil=True)
def timestamp_update(data, p, n, wide, previous):
    """A timestamp's value bytes from byte p, as ETMv3 and PFT encode them: 7 bits a byte, bit 7
    set if more follow; the last of a 48-bit timestamp (the seventh) 6 bits, of a 64-bit one
    (`wide`: the ninth) 8. They replace the low bits of the raw timestamp `previous`. Returns
    (end or NEED_MORE, the raw timestamp, bits carried)."""
    last = 8 if wide else 6
    value = 0
    bits = 0
    for j in range(last + 1):
        if p >= n:
            return NEED_MORE, 0, 0
        b = np.int64(data[p])
        p += 1
        if j == last:
            width = 8 if wide else 6
            value |= (b & low_bits(width)) << (7 * j)
            bits += width
            break
        value |= (b & 0x7F) << (7 * j)
        bits += 7
        if not b & 0x80:
            break
    keep = low_bits(bits)
    return p, (previous & ~keep) | (value & keep), bits


@numba.njit(inline="always")
def start_packet(rec, kind, start, end):
    """Fill a packet record with its kind, position and size, every other field empty (0;
    cycles and exception -1, isa ISA_UNKNOWN)."""
    rec.kind = kind
    rec.pos = start
    rec.size = end - start
    rec.offset = 0
    rec.value = 0
    rec.value2 = 0
    rec.cycles = -1
    rec.address = 0
    rec.address2 = 0
    rec.exception = -1
    rec.flags = 0
    rec.atoms = 0
    rec.bits = 0
    rec.isa = ISA_UNKNOWN
    rec.count = 0
    rec.info = 0


@numba.njit(inline="always")
def error_packet(rec, reason, start, end):
    start_packet(rec, K_ERROR, start, end)
    rec.info = reason


@numba.njit(cache=True, nogil=True)
def hunt_a_sync(data, i, n, final, sync_zeros=A_SYNC_ZEROS):
    """Look for an A-sync (`sync_zeros` 0x00 then 0x80) from i: (its start, or -1, bytes to skip to)."""
    zeros = 0
    for p in range(i, n):
        b = data[p]
        if b == 0:
            zeros += 1
        elif b == 0x80 and zeros >= sync_zeros:
            return p - sync_zeros, p - sync_zeros
        else:
            zeros = 0
    return -1, (n if final else n - min(zeros, MAX_ZEROS))


@numba.njit(cache=True, nogil=True)
def skip_to_a_sync(data, i, n, final, out, k, a_sync_kind, sync_zeros=A_SYNC_ZEROS):
    """Bytes from i up to the next A-sync (`sync_zeros` 0x00, then 0x80) as UNSYNCED packets
    (MAX_UNSYNCED bytes from the start of the run, then a shorter last one, so that chunking
    does not change them), and the A-sync packet. Returns (packets written, next byte, whether
    an A-sync was found); stops early, before the A-sync, when `out` has no room."""
    cap = len(out)
    found, skip_to = hunt_a_sync(data, i, n, final, sync_zeros)
    end = found if found >= 0 else skip_to
    while end - i >= MAX_UNSYNCED and k + 2 <= cap:
        start_packet(out[k], K_UNSYNCED, i, i + MAX_UNSYNCED)
        k += 1
        i += MAX_UNSYNCED
    if k + 2 > cap or (found < 0 and not final):
        return k, i, False
    if end > i:
        start_packet(out[k], K_UNSYNCED, i, end)
        k += 1
        i = end
    if found < 0:
        return k, i, False
    start_packet(out[k], a_sync_kind, i, i + sync_zeros + 1)
    return k + 1, i + sync_zeros + 1, True


@numba.njit(cache=True, nogil=True)
def zeros_in_sync(data, i, n, final, out, k, a_sync_kind, bad_a_sync, truncated, sync_zeros=A_SYNC_ZEROS):
    """A zero byte at i in a synchronised stream: an A-sync (at least `sync_zeros` 0x00, then
    0x80; zeros beyond those an error before it), or an error. Returns (packets written, next byte,
    still synchronised, done: the bytes given end here)."""
    p = i
    while p < n and data[p] == 0:
        p += 1
    zeros = p - i
    if p == n:
        if final:
            error_packet(out[k], truncated, i, n)
            return k + 1, n, True, True
        if zeros > MAX_ZEROS:
            error_packet(out[k], bad_a_sync, i, n - sync_zeros)
            return k + 1, n - sync_zeros, True, False
        return k, i, True, True
    if data[p] == 0x80 and zeros >= sync_zeros:
        if zeros > sync_zeros:
            error_packet(out[k], bad_a_sync, i, p - sync_zeros)
            k += 1
        start_packet(out[k], a_sync_kind, p - sync_zeros, p + 1)
        return k + 1, p + 1, True, False
    error_packet(out[k], bad_a_sync, i, p)
    return k + 1, p, False, False


@numba.njit(cache=True, nogil=True)
def locate(out, k, offsets, base):
    """Give the first k packets their buffer offsets and stream positions."""
    for j in range(k):
        out[j].offset = offsets[out[j].pos]
        out[j].pos += base


@dataclass
class Packets:
    """A batch of decoded packets (a PACKET record array) and the stream bytes they cover.

    `stream[pos - stream_pos : pos - stream_pos + size]` are a packet's raw bytes.
    """

    table: np.ndarray  # PACKET records, one per packet
    stream: np.ndarray  # uint8: the source bytes this batch was decoded from
    stream_pos: int  # position of stream[0] in the whole source stream

    def __len__(self) -> int:
        return len(self.table)

    def __getitem__(self, field: str) -> np.ndarray:
        return self.table[field]

    def raw(self, index: int) -> bytes:
        start = int(self.table["pos"][index]) - self.stream_pos
        return self.stream[start : start + int(self.table["size"][index])].tobytes()

    @classmethod
    def concatenate(cls, batches: list[Packets]) -> Packets:
        """One batch from consecutive batches of one source."""
        if not batches:
            return cls(np.zeros(0, dtype=PACKET), np.zeros(0, dtype=np.uint8), 0)
        first = batches[0].stream_pos
        end = max(b.stream_pos + len(b.stream) for b in batches)
        stream = np.zeros(end - first, dtype=np.uint8)
        for b in batches:
            stream[b.stream_pos - first : b.stream_pos - first + len(b.stream)] = b.stream
        table = joined([b.table for b in batches], PACKET)
        return cls(table, stream, first)


Scan = Callable[..., tuple[int, int]]
"""A compiled scanner: scan(data, offsets, base, final, config, state, out) -> (packets, bytes)."""


class PacketScanner:
    """Feeds one source's bytes, in chunks, to a compiled scanner: batches of packets."""

    def __init__(
        self, scan: Scan, config: Any, state: np.ndarray, batch_packets: int = BATCH_PACKETS
    ) -> None:
        """`config` and `state` are what `scan` takes (the state is updated in place)."""
        self._scan = scan
        self._config = config
        self._state = state
        self._batch = batch_packets
        self._carry = np.zeros(0, dtype=np.uint8)
        self._carry_offsets = np.zeros(0, dtype=np.int64)
        self._pos = 0  # stream position of the first carried byte

    def feed(self, data: np.ndarray, offsets: np.ndarray, final: bool = False) -> Iterator[Packets]:
        """Packets completed by `data` (uint8), whose bytes sit at `offsets` in the buffer."""
        if len(self._carry):
            data = np.concatenate([self._carry, data])
            offsets = np.concatenate([self._carry_offsets, offsets])
        data, offsets = read_only(data), read_only(offsets)
        done = 0
        while done < len(data):
            out = np.empty(self._batch, dtype=PACKET)
            base = self._pos + done
            count, consumed = self._scan(
                data[done:], offsets[done:], base, final, self._config, self._state, out
            )
            if count:
                yield Packets(out[:count], data[done : done + consumed], base)
            if consumed == 0:
                break
            done += consumed
        self._carry = data[done:].copy()
        self._carry_offsets = offsets[done:].copy()
        self._pos += done

    def carried(self) -> dict[str, np.ndarray]:
        """What the bytes still to come take from those fed so far: the scanner's state and
        the bytes of an unfinished packet (with their buffer offsets)."""
        return {"scan": self._state.copy(), "bytes": self._carry.copy(), "offsets": self._carry_offsets}

    def resume(self, carried: dict[str, np.ndarray]) -> None:
        """Go on from a scanner's `carried` state."""
        self._state[:] = carried["scan"]
        self._carry, self._carry_offsets = carried["bytes"].copy(), carried["offsets"].copy()

    def copy(self) -> PacketScanner:
        """A scanner that goes on from where this one is, on its own."""
        twin = copy.copy(self)
        twin._state = self._state.copy()
        return twin

    def finish(self) -> Iterator[Packets]:
        """Packets left at the end of the stream (an unfinished one becomes an error)."""
        yield from self.feed(np.zeros(0, dtype=np.uint8), np.zeros(0, dtype=np.int64), final=True)

    def decode_all(self, data: bytes | np.ndarray, offsets: np.ndarray | None = None) -> Packets:
        """Every packet of a whole stream held in memory (offsets default to stream positions)."""
        stream = np.frombuffer(data, dtype=np.uint8)
        where = np.arange(len(stream), dtype=np.int64) if offsets is None else offsets
        return Packets.concatenate([*self.feed(stream, where, final=True)])
