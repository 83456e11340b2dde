"""Chrome trace-event JSON: one complete ("X") slice per call on a thread per core, and a
counter of instructions executed, readable by chrome://tracing and the Perfetto UI."""

from __future__ import annotations

import json
from collections.abc import Iterator

from ..analysis.calltree import CoreTimeline, timelines
from .calldata import call_tree, clock_of, nanoseconds_per_tick
from .jsontext import number, write_items
from .registry import ExportRequest


def _events(timeline: CoreTimeline, microseconds: float) -> Iterator[str]:
    cpu = timeline.cpu
    yield json.dumps({"name": "thread_name", "ph": "M", "pid": 0, "tid": cpu, "args": {"name": f"cpu{cpu}"}})
    names = [json.dumps(n) for n in timeline.names]
    counter = json.dumps(f"cpu{cpu} instructions")
    where = f'"pid": 0, "tid": {cpu}'
    for opens, frame, at in timeline.events():
        ts = number(at * microseconds)
        value = int(timeline.entry_index[frame] if opens else timeline.end_index[frame])
        yield f'{{"name": {counter}, "ph": "C", "ts": {ts}, {where}, "args": {{"instructions": {value}}}}}'
        if opens:
            duration = number((timeline.end[frame] - at) * microseconds)
            insns = int(timeline.end_index[frame] - timeline.entry_index[frame])
            args = f'{{"entry": "{int(timeline.function[frame]):#x}", "instructions": {insns}}}'
            span = f'"ts": {ts}, "dur": {duration}'
            yield f'{{"name": {names[frame]}, "cat": "call", "ph": "X", {span}, {where}, "args": {args}}}'


def write_chrome(request: ExportRequest) -> None:
    tree = call_tree(request)
    clock = clock_of(request, tree)
    microseconds = nanoseconds_per_tick(request, clock) / 1000.0
    with open(request.output, "w", encoding="utf-8") as out:
        other = json.dumps({"trace": request.trace.path.name, "clock": clock})
        out.write(f'{{"displayTimeUnit": "ns", "otherData": {other}, "traceEvents": [')
        first = True
        for timeline in timelines(tree, clock):
            if not first:
                out.write(", ")
            write_items(out, _events(timeline, microseconds))
            first = False
        out.write("]}\n")
