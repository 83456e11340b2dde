"""Call stacks for flame-graph tools: folded stacks, and speedscope's evented JSON profile."""

from __future__ import annotations

import json
from collections.abc import Iterator

from .. import __version__
from ..analysis.calls.frames import Timeline
from ..timeunits import is_real, ratio
from .calldata import call_frames, call_sums, clock_of, time_unit
from .jsontext import number, write_items
from .registry import ExportRequest

_SPEEDSCOPE_SCHEMA = "https://www.speedscope.app/file-format-schema.json"
_SPEEDSCOPE_UNITS = {"ns": "nanoseconds", "us": "microseconds", "ms": "milliseconds", "s": "seconds"}
"""speedscope's units of time: a finer trace unit is given in nanoseconds."""


def write_folded(request: ExportRequest) -> None:
    """`outer;inner;leaf WEIGHT` per distinct stack, weight = self instructions or self time.

    Multi-core traces start each stack with `cpuN`.
    """
    sums = call_sums(request)
    clock = clock_of(request, sums)
    multicore = len(sums.cores) > 1
    lines = []
    for cpu, path, weight in sums.stacks(clock):
        names = [f"cpu{cpu}", *path] if multicore else path
        lines.append(f"{';'.join(n.replace(';', ':') for n in names)} {weight}")
    with open(request.output, "w", encoding="utf-8") as out:
        out.writelines(line + "\n" for line in sorted(lines))


def write_speedscope(request: ExportRequest) -> None:
    """One evented profile per core: a frame opens at a function's entry, closes at its return."""
    with call_frames(request) as tree:
        clock = clock_of(request, tree)
        unit, scale = _speedscope_unit(time_unit(request) if clock == "time" else None)
        head = {
            "$schema": _SPEEDSCOPE_SCHEMA,
            "exporter": f"cputrace {__version__}",
            "name": request.trace.path.name,
        }
        with open(request.output, "w", encoding="utf-8") as out:
            out.write(json.dumps(head)[:-1] + ', "activeProfileIndex": 0, "profiles": [')
            frame_index: dict[str, int] = {}  # speedscope's frames: one per name
            for count, core in enumerate(tree.cores):
                timeline = tree.timeline(core, clock)
                profile = {
                    "type": "evented", "name": f"cpu{core.cpu}", "unit": unit,
                    "startValue": timeline.first * scale, "endValue": timeline.last * scale,
                }  # fmt: skip
                out.write((", " if count else "") + json.dumps(profile)[:-1] + ', "events": [')
                write_items(out, _speedscope_events(timeline, tree.names, frame_index, scale))
                out.write("]}")
            out.write('], "shared": {"frames": [')
            write_items(out, (json.dumps({"name": name}) for name in frame_index))
            out.write("]}}\n")


def _speedscope_unit(unit: str | None) -> tuple[str, float]:
    """speedscope's name for the unit of times in `unit` (None: instructions), and the factor
    that converts to it."""
    if not is_real(unit):
        return "none", 1
    if unit in _SPEEDSCOPE_UNITS:
        return _SPEEDSCOPE_UNITS[unit], 1
    return "nanoseconds", float(ratio(unit, "ns"))


def _speedscope_events(timeline: Timeline, names: list[str], frame_index: dict[str, int],
                       scale: float) -> Iterator[str]:  # fmt: skip
    for block in timeline.events:
        for opens, at, function, *_ in zip(*block, strict=True):
            index = frame_index.setdefault(names[function], len(frame_index))
            kind = "O" if opens else "C"
            yield f'{{"type": "{kind}", "frame": {index}, "at": {number(at * scale)}}}'
