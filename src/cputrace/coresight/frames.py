"""CoreSight formatter frames: one trace buffer shared by several sources, split per trace ID.

A formatter frame is 16 bytes. Each even byte 0, 2, ..., 14 is either an ID change (bit 0
set: the new trace ID is in bits 7:1) or a data byte whose bit 0 is stored in byte 15 (bit k
for byte 2k). Odd bytes 1..13 are always data. When an ID change is followed by a data byte
and its byte-15 bit is set, that data byte still belongs to the previous ID. ID 0 is the null
source (padding) and 0x70-0x7F are reserved: their bytes are dropped, as are bytes before the
first ID change.

Buffer layouts, named as in a snapshot's trace.ini:
- `coresight`: frames aligned in memory (ETB, ETF, ETR). A frame of four full frame syncs
  (FF FF FF 7F) is padding that resets the formatter (Linux perf writes them).
- `dstream_coresight`: a capture of a trace port (TPIU): full frame syncs FF FF FF 7F come
  between frames, half-word syncs FF 7F at any even position inside them; the first full sync
  gives the frame alignment. Neither can be frame content, since ID 0x7F is reserved.
- `source_data`: one source's bytes, no frames (not handled here).

Every byte handed out carries its offset in the original buffer, so packet decoders report
positions a user can find with a hex dump.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numba
import numpy as np

from .sniff import FRAME_BYTES

FORMATTED_LAYOUTS = ("coresight", "dstream_coresight")
HALF_SYNC = b"\xff\x7f"

NO_ID = -1
FIRST_RESERVED_ID = 0x70
_NO_POSITIONS = np.empty(0, np.int64)  # frames are the buffer itself: offsets are indices

# _frame_owners state and counters (int64 array)
_CUR_ID, _FRAMES, _DROPPED, _PADDING = 0, 1, 2, 3
# _strip_syncs state and counters (int64 array)
_ALIGNED, _UNALIGNED, _FULL_SYNCS, _HALF_SYNCS, _BROKEN = 0, 1, 2, 3, 4


@numba.njit(inline="always")
def _is_full_sync(buf, p):
    return buf[p] == 0xFF and buf[p + 1] == 0xFF and buf[p + 2] == 0xFF and buf[p + 3] == 0x7F


@numba.njit(inline="always")
def _is_padding(frames, p):
    """Four full frame syncs: a frame of padding that resets the formatter."""
    return (
        _is_full_sync(frames, p)
        and _is_full_sync(frames, p + 4)
        and _is_full_sync(frames, p + 8)
        and _is_full_sync(frames, p + 12)
    )


@numba.njit(inline="always")
def _has_id_change(frames, p):
    """Whether any even byte of the frame at p is an ID change (bit 0 set)."""
    flags = 0
    for q in range(p, p + FRAME_BYTES - 1, 2):
        flags |= frames[q]
    return (flags & 1) != 0


@numba.njit(inline="always")
def _source(trace_id):
    """The trace ID if its bytes are a source's data; 0 for the null ID and the reserved ones."""
    return trace_id if 0 < trace_id < FIRST_RESERVED_ID else 0


@numba.njit(inline="always")
def _pair(b, aux, j, cur):
    """Byte 2j of a frame (`b`; `aux` is its byte 15) and the byte after it, with `cur` the ID
    current before them: (the source of byte 2j, -1 for an ID change; its value, bit 0 from
    byte 15; the source of byte 2j + 1, data for j < 7; the ID current after byte 2j)."""
    if b & 1:
        new = b >> 1
        return -1, 0, _source(cur if (aux >> j) & 1 else new), new  # the byte after may still be cur's
    return _source(cur), b | ((aux >> j) & 1), _source(cur), cur


@numba.njit(cache=True, nogil=True)
def _frame_owners(frames, state, owner, value):
    """The trace ID (owner[q]) and value (value[q]) of each byte q of whole frames.

    owner[q] is 0 where byte q is no source's data: ID changes, byte 15, padding frames, and
    bytes of the null or a reserved ID (these are counted as dropped).
    """
    cur = state[_CUR_ID]
    frame_count = padding = dropped = 0
    for p in range(0, len(frames) - FRAME_BYTES + 1, FRAME_BYTES):
        if _is_padding(frames, p):
            cur = NO_ID
            padding += 1
            owner[p : p + FRAME_BYTES] = 0
            continue
        frame_count += 1
        aux = np.int64(frames[p + FRAME_BYTES - 1])
        for j in range(8):
            q = p + 2 * j
            first, first_value, second, cur = _pair(np.int64(frames[q]), aux, j, cur)
            owner[q], value[q] = max(first, 0), first_value
            dropped += first == 0
            if j < 7:
                owner[q + 1], value[q + 1] = second, frames[q + 1]
                dropped += second == 0
        owner[p + FRAME_BYTES - 1] = 0
    state[_CUR_ID] = cur
    state[_FRAMES] += frame_count
    state[_PADDING] += padding
    state[_DROPPED] += dropped


@numba.njit(cache=True, nogil=True)
def _bytes_of(frames, state, wanted, positions, base, values, offsets):
    """The bytes of one trace ID (`wanted`) in whole frames, into values and their offsets (as
    _gather_owned gives them); returns how many. One pass that writes that ID's bytes alone:
    a source decoded on its own costs a fraction of splitting the buffer by every ID."""
    mapped = len(positions) > 0
    cur = state[_CUR_ID]
    frame_count = padding = dropped = 0
    k = 0
    for p in range(0, len(frames) - FRAME_BYTES + 1, FRAME_BYTES):
        if _is_padding(frames, p):
            cur = NO_ID
            padding += 1
            continue
        frame_count += 1
        if cur != wanted and not _has_id_change(frames, p):  # another source's frame
            dropped += 0 if _source(cur) else FRAME_BYTES - 1
            continue
        aux = np.int64(frames[p + FRAME_BYTES - 1])
        for j in range(8):
            q = p + 2 * j
            first, first_value, second, cur = _pair(np.int64(frames[q]), aux, j, cur)
            dropped += first == 0
            if first == wanted:
                values[k] = first_value
                offsets[k] = (positions[q] if mapped else q) + base
                k += 1
            if j < 7:
                dropped += second == 0
                if second == wanted:
                    values[k] = frames[q + 1]
                    offsets[k] = (positions[q + 1] if mapped else q + 1) + base
                    k += 1
    state[_CUR_ID] = cur
    state[_FRAMES] += frame_count
    state[_PADDING] += padding
    state[_DROPPED] += dropped
    return k


@numba.njit(cache=True, nogil=True)
def _count_owned(owner, counts):
    """counts[i] += the bytes owned by trace ID i (runs of one owner are counted in a register)."""
    last, count = 0, counts[0]
    for o in owner:
        if o != last:
            counts[last] = count
            last, count = o, counts[o]
        count += 1
    counts[last] = count


@numba.njit(cache=True, nogil=True)
def _gather_owned(owner, value, positions, base, fill, values, offsets):
    """Each owned byte to its trace ID's run: values[fill[id]], and its offset: its index in the
    frames (or positions[index] when given) plus `base`."""
    mapped = len(positions) > 0
    last, slot = 0, fill[0]
    for q in range(len(owner)):
        o = owner[q]
        if o == 0:
            continue
        if o != last:
            fill[last] = slot
            last, slot = o, fill[o]
        values[slot] = value[q]
        offsets[slot] = (positions[q] if mapped else q) + base
        slot += 1
    fill[last] = slot


@numba.njit(cache=True, nogil=True)
def _strip_syncs(buf, final, state, frames, frame_pos):
    """Remove frame syncs from a port capture, keeping whole frames and each byte's index.

    Returns (frame bytes written, bytes consumed); unconsumed bytes start an unfinished frame
    (or an unfinished search for alignment) and must be fed again with what follows.
    """
    n = len(buf)
    i = 0
    if not state[_ALIGNED]:
        while i + 4 <= n and not _is_full_sync(buf, i):
            i += 1
        if i + 4 > n:
            consumed = n if final else i
            state[_UNALIGNED] += consumed
            return 0, consumed
        state[_UNALIGNED] += i
        state[_ALIGNED] = 1
    k = 0
    fill = 0
    halves = 0  # half syncs since the last whole frame, counted once the frame is used
    frame_start = i
    while True:
        if fill % 4 == 0 and i + 4 <= n and _is_full_sync(buf, i):
            if fill:
                state[_BROKEN] += 1  # a frame cut short by a sync: drop its bytes
                k -= fill
                fill = 0
            state[_FULL_SYNCS] += 1
            state[_HALF_SYNCS] += halves
            halves = 0
            i += 4
            frame_start = i
            continue
        if i + 2 > n or (fill % 4 == 0 and i + 4 > n and not final):
            break
        if buf[i] == 0xFF and buf[i + 1] == 0x7F:
            halves += 1
            i += 2
            continue
        frames[k] = buf[i]
        frames[k + 1] = buf[i + 1]
        frame_pos[k] = i
        frame_pos[k + 1] = i + 1
        k += 2
        fill += 2
        i += 2
        if fill == FRAME_BYTES:
            state[_HALF_SYNCS] += halves
            halves = 0
            fill = 0
            frame_start = i
    return k - fill, frame_start


def read_only(array: np.ndarray) -> np.ndarray:
    """A read-only view. Compiled functions are built once per kind of array they are given:
    passing them read-only arrays only (as np.frombuffer of bytes gives) builds them once."""
    view = array.view()
    view.flags.writeable = False
    return view


@dataclass
class SourceBytes:
    """The bytes of one trace source and, for each, its offset in the original buffer."""

    data: np.ndarray  # uint8
    offsets: np.ndarray  # int64

    def __len__(self) -> int:
        return len(self.data)


@dataclass
class FrameStats:
    """What the deformatter saw: frames, syncs and bytes that belong to no source."""

    frames: int = 0
    padding_frames: int = 0
    full_syncs: int = 0
    half_syncs: int = 0
    unaligned_bytes: int = 0  # before the first full sync of a port capture
    broken_frames: int = 0  # cut short by a full sync
    dropped_bytes: int = 0  # null or reserved ID, or before the first ID change
    trailing_bytes: int = 0  # an incomplete frame at the end
    trailing_offset: int = 0  # where it starts in the buffer
    bytes_per_id: dict[int, int] = field(default_factory=dict)


class Deformatter:
    """Splits a formatted buffer, fed in chunks of any size, into per-trace-ID byte streams.

    With `only`, the stream of that trace ID alone (and `stats.bytes_per_id` counts it alone)."""

    def __init__(self, layout: str = "coresight", only: int | None = None) -> None:
        if layout not in FORMATTED_LAYOUTS:
            raise ValueError(f"not a formatted buffer layout: {layout!r}")
        self.layout = layout
        self.only = only
        self.stats = FrameStats()
        self._unpack_state = np.array([NO_ID, 0, 0, 0], dtype=np.int64)
        self._sync_state = np.zeros(5, dtype=np.int64)
        self._carry = np.empty(0, dtype=np.uint8)
        self._carry_offset = 0

    def feed(self, chunk: bytes | np.ndarray, offset: int, final: bool = False) -> dict[int, SourceBytes]:
        """The source bytes completed by `chunk`, which starts at buffer offset `offset`."""
        data = np.frombuffer(chunk, dtype=np.uint8)
        if len(self._carry):
            data = np.concatenate([self._carry, data])
            offset = self._carry_offset
        data = read_only(data)
        if self.layout == "coresight":
            whole = len(data) - len(data) % FRAME_BYTES
            frames, positions = data[:whole], None
            consumed = whole
        else:
            frames = np.empty(len(data), dtype=np.uint8)
            positions = np.empty(len(data), dtype=np.int64)
            count, consumed = _strip_syncs(data, final, self._sync_state, frames, positions)
            frames, positions = frames[:count], positions[:count]
        rest = data[consumed:]
        if final:
            if len(rest):
                self.stats.trailing_bytes, self.stats.trailing_offset = len(rest), offset + consumed
            rest = rest[:0]
        self._carry = rest.copy()
        self._carry_offset = offset + consumed
        out = self._unpack(frames, positions, offset)
        self._update_stats()
        return out

    def _unpack(
        self, frames: np.ndarray, positions: np.ndarray | None, offset: int
    ) -> dict[int, SourceBytes]:
        frames = read_only(frames)
        positions = read_only(positions if positions is not None else _NO_POSITIONS)
        if self.only is not None:
            return self._unpack_only(self.only, frames, positions, offset)
        owner, value = np.empty(len(frames), np.int8), np.empty(len(frames), np.uint8)
        _frame_owners(frames, self._unpack_state, owner, value)
        counts = np.zeros(FIRST_RESERVED_ID, np.int64)
        _count_owned(owner, counts)
        counts[0] = 0  # bytes of no source
        starts = np.concatenate([[0], np.cumsum(counts)])
        values, offsets = np.empty(starts[-1], np.uint8), np.empty(starts[-1], np.int64)
        _gather_owned(owner, value, positions, offset, starts[:-1].copy(), values, offsets)
        out = {}
        for trace_id in np.flatnonzero(counts).tolist():
            run = slice(starts[trace_id], starts[trace_id + 1])
            out[trace_id] = SourceBytes(values[run], offsets[run])
            self._count(trace_id, len(out[trace_id]))
        return out

    def _unpack_only(
        self, trace_id: int, frames: np.ndarray, positions: np.ndarray, offset: int
    ) -> dict[int, SourceBytes]:
        # room for every byte; memory is only touched where the source's bytes are written
        values, offsets = np.empty(len(frames), np.uint8), np.empty(len(frames), np.int64)
        count = _bytes_of(frames, self._unpack_state, trace_id, positions, offset, values, offsets)
        if not count:
            return {}
        self._count(trace_id, count)
        return {trace_id: SourceBytes(values[:count], offsets[:count])}

    def _count(self, trace_id: int, count: int) -> None:
        self.stats.bytes_per_id[trace_id] = self.stats.bytes_per_id.get(trace_id, 0) + count

    def _update_stats(self) -> None:
        unpack, sync = self._unpack_state, self._sync_state
        self.stats.frames = int(unpack[_FRAMES])
        self.stats.padding_frames = int(unpack[_PADDING])
        self.stats.dropped_bytes = int(unpack[_DROPPED])
        self.stats.unaligned_bytes = int(sync[_UNALIGNED])
        self.stats.full_syncs = int(sync[_FULL_SYNCS])
        self.stats.half_syncs = int(sync[_HALF_SYNCS])
        self.stats.broken_frames = int(sync[_BROKEN])


def deformat(
    buffer: bytes | np.ndarray, layout: str = "coresight"
) -> tuple[dict[int, SourceBytes], FrameStats]:
    """All sources of a whole formatted buffer held in memory."""
    deformatter = Deformatter(layout)
    return deformatter.feed(buffer, 0, final=True), deformatter.stats
