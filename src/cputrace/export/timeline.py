"""Chrome trace-event JSON: one complete ("X") slice per call on a thread per core, and a
counter of instructions executed, readable by chrome://tracing and the Perfetto UI."""

from __future__ import annotations

import json
from collections.abc import Iterator

from ..analysis.calltree import CallTree, CoreTimeline, timelines
from .calldata import call_tree, clock_of, nanoseconds_per_tick
from .jsontext import number, write_items
from .registry import ExportRequest


def _events(timeline: CoreTimeline, tree: CallTree, microseconds: float) -> Iterator[str]:
    cpu = timeline.cpu
    yield json.dumps({"name": "thread_name", "ph": "M", "pid": 0, "tid": cpu, "args": {"name": f"cpu{cpu}"}})
    quoted = [json.dumps(n) for n in tree.names]
    addresses = tree.addresses.tolist()
    counter = json.dumps(f"cpu{cpu} instructions")
    where = f'"pid": 0, "tid": {cpu}'
    frames = timeline.frames
    end_index = frames.index + frames.insns
    columns = (timeline.end, frames.index, end_index, frames.function)
    for block in timeline.events(*columns):
        for opens, at, end, entry_index, end_index_, function in zip(*block, strict=True):
            ts = number(at * microseconds)
            value = entry_index if opens else end_index_
            count = f'"args": {{"instructions": {value}}}'
            yield f'{{"name": {counter}, "ph": "C", "ts": {ts}, {where}, {count}}}'
            if opens:
                duration = number((end - at) * microseconds)
                args = f'{{"entry": "{addresses[function]:#x}", "instructions": {end_index_ - entry_index}}}'
                span = f'"ts": {ts}, "dur": {duration}, {where}'
                yield f'{{"name": {quoted[function]}, "cat": "call", "ph": "X", {span}, "args": {args}}}'


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
            write_items(out, _events(timeline, tree, microseconds))
            first = False
        out.write("]}\n")
