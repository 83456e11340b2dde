"""Perfetto traces (protobuf): a slice track per core with one slice per call, and a counter
track per core with the instructions executed so far.

Written with the public TracePacket schema (field numbers from perfetto's
protos/perfetto/trace), packet by packet, so memory stays flat. Timestamps are nanoseconds:
trace time converted by its unit (clk, cyc and other counts as 1 ns each), or instructions.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO

from ..analysis.calls.frames import FrameStream, Timeline
from .calldata import call_frames, clock_of, nanoseconds_per_tick
from .protobuf import bytes_field, string_field, uint_field
from .registry import ExportRequest

# field numbers of the Perfetto protos
_TRACE_PACKET = 1  # Trace.packet
_TIMESTAMP = 8  # TracePacket
_SEQUENCE_ID = 10
_TRACK_EVENT = 11
_SEQUENCE_FLAGS = 13
_TRACK_DESCRIPTOR = 60
_TRACK_UUID_DESCRIPTOR = 1  # TrackDescriptor.uuid
_TRACK_NAME = 2
_TRACK_COUNTER = 8
_COUNTER_UNIT_NAME = 6  # CounterDescriptor
_EVENT_TYPE = 9  # TrackEvent
_EVENT_TRACK = 11
_EVENT_NAME = 23
_EVENT_COUNTER_VALUE = 30
_EVENT_DEBUG = 4
_DEBUG_NAME = 10  # DebugAnnotation
_DEBUG_POINTER = 7
_SLICE_BEGIN, _SLICE_END, _COUNTER = 1, 2, 4
_INCREMENTAL_STATE_CLEARED = 1

_SEQUENCE = 1


def _packet(body: bytes) -> bytes:
    return bytes_field(_TRACE_PACKET, uint_field(_SEQUENCE_ID, _SEQUENCE) + body)


def _descriptors(cpu: int, slices: int, counter: int) -> Iterator[bytes]:
    yield _packet(
        bytes_field(
            _TRACK_DESCRIPTOR,
            uint_field(_TRACK_UUID_DESCRIPTOR, slices) + string_field(_TRACK_NAME, f"cpu{cpu}"),
        )
    )
    yield _packet(
        bytes_field(
            _TRACK_DESCRIPTOR,
            uint_field(_TRACK_UUID_DESCRIPTOR, counter)
            + string_field(_TRACK_NAME, f"cpu{cpu} instructions")
            + bytes_field(_TRACK_COUNTER, string_field(_COUNTER_UNIT_NAME, "instructions")),
        )
    )


def _events(
    timeline: Timeline, tree: FrameStream, ns_per_tick: float, slices: int, counter: int
) -> Iterator[bytes]:
    slice_track = uint_field(_EVENT_TRACK, slices)
    begin_head = uint_field(_EVENT_TYPE, _SLICE_BEGIN) + slice_track
    end = bytes_field(_TRACK_EVENT, uint_field(_EVENT_TYPE, _SLICE_END) + slice_track)
    counter_head = uint_field(_EVENT_TYPE, _COUNTER) + uint_field(_EVENT_TRACK, counter)
    entry_name = string_field(_DEBUG_NAME, "entry")
    begins: dict[int, bytes] = {}  # one encoding per function
    addresses = tree.addresses.tolist()
    for block in timeline.events:
        for opens, at, function, entry_index, end_index, _ in zip(*block, strict=True):
            stamp = uint_field(_TIMESTAMP, round(at * ns_per_tick))
            if opens:
                begin = begins.get(function)
                if begin is None:
                    pointer = uint_field(_DEBUG_POINTER, addresses[function])
                    entry = bytes_field(_EVENT_DEBUG, entry_name + pointer)
                    begin = begins[function] = bytes_field(
                        _TRACK_EVENT, begin_head + string_field(_EVENT_NAME, tree.names[function]) + entry
                    )
                yield _packet(stamp + begin)
                value = entry_index
            else:
                yield _packet(stamp + end)
                value = end_index
            yield _packet(
                stamp + bytes_field(_TRACK_EVENT, counter_head + uint_field(_EVENT_COUNTER_VALUE, value))
            )


def write_perfetto(request: ExportRequest) -> None:
    with call_frames(request) as tree:
        clock = clock_of(request, tree)
        with open(request.output, "wb") as out:
            _write(out, tree, clock, nanoseconds_per_tick(request, clock))


def _write(out: BinaryIO, tree: FrameStream, clock: str, ns_per_tick: float) -> None:
    out.write(_packet(uint_field(_SEQUENCE_FLAGS, _INCREMENTAL_STATE_CLEARED)))
    pending: list[bytes] = []
    for core in tree.cores:
        slices, counter = 2 * core.cpu + 1, 2 * core.cpu + 2
        out.write(b"".join(_descriptors(core.cpu, slices, counter)))
        for packet in _events(tree.timeline(core, clock), tree, ns_per_tick, slices, counter):
            pending.append(packet)
            if len(pending) >= 65536:
                out.write(b"".join(pending))
                pending.clear()
        out.write(b"".join(pending))
        pending.clear()
