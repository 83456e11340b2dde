"""Chrome trace-event JSON: one complete ("X") slice per call on a thread per core, and a
counter of instructions executed, readable by chrome://tracing and the Perfetto UI."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TextIO

from ..analysis.calls.frames import FrameStream, Timeline
from .calldata import call_frames, clock_of, nanoseconds_per_tick
from .jsontext import number, write_items
from .registry import ExportRequest


def _events(timeline: Timeline, tree: FrameStream, microseconds: float) -> Iterator[str]:
    cpu = timeline.cpu
    yield json.dumps({"name": "thread_name", "ph": "M", "pid": 0, "tid": cpu, "args": {"name": f"cpu{cpu}"}})
    quoted = [json.dumps(n) for n in tree.names]
    addresses = tree.addresses.tolist()
    counter = json.dumps(f"cpu{cpu} instructions")
    where = f'"pid": 0, "tid": {cpu}'
    for block in timeline.events:
        for opens, at, function, entry_index, end_index, end in zip(*block, strict=True):
            ts = number(at * microseconds)
            value = entry_index if opens else end_index
            count = f'"args": {{"instructions": {value}}}'
            yield f'{{"name": {counter}, "ph": "C", "ts": {ts}, {where}, {count}}}'
            if opens:
                duration = number((end - at) * microseconds)
                args = f'{{"entry": "{addresses[function]:#x}", "instructions": {end_index - entry_index}}}'
                span = f'"ts": {ts}, "dur": {duration}, {where}'
                yield f'{{"name": {quoted[function]}, "cat": "call", "ph": "X", {span}, "args": {args}}}'


def write_chrome(request: ExportRequest) -> None:
    with call_frames(request) as tree:
        clock = clock_of(request, tree)
        microseconds = nanoseconds_per_tick(request, clock) / 1000.0
        with open(request.output, "w", encoding="utf-8") as out:
            _write_chrome(out, request, tree, clock, microseconds)


def _write_chrome(
    out: TextIO, request: ExportRequest, tree: FrameStream, clock: str, microseconds: float
) -> None:
    other = json.dumps({"trace": request.trace.path.name, "clock": clock})
    out.write(f'{{"displayTimeUnit": "ns", "otherData": {other}, "traceEvents": [')
    for count, core in enumerate(tree.cores):
        if count:
            out.write(", ")
        write_items(out, _events(tree.timeline(core, clock), tree, microseconds))
    out.write("]}\n")
