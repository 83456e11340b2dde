"""What the call-based exporters share: the frames or call sums of the request, and its clock."""

from __future__ import annotations

from contextlib import AbstractContextManager

from ..analysis.calls.contexts import CallSums
from ..analysis.calls.frames import FrameStream, frame_stream
from ..errors import CputraceError
from ..timeunits import is_real, ratio
from .registry import ExportRequest

CLOCKS = ("time", "insns")


def call_frames(request: ExportRequest) -> AbstractContextManager[FrameStream]:
    """The request's frames in tree order, streamed from disk (for exports with one item per call)."""
    return frame_stream(request.trace, request.window, request.method, request.image)


def call_sums(request: ExportRequest, self_costs: bool = False) -> CallSums:
    """The request's calls summed per calling context: for exports that need no single frame
    (`self_costs`: each instruction charged to the function it ran in, too)."""
    return CallSums.for_trace(
        request.trace, request.window, request.method, request.image, self_costs=self_costs
    )


def clock_of(request: ExportRequest, tree: FrameStream | CallSums) -> str:
    """The requested clock, or trace time when the trace has it and instructions otherwise."""
    if request.clock is None:
        return "time" if tree.has_time else "insns"
    if request.clock not in CLOCKS:
        raise CputraceError(f"unknown clock {request.clock!r}; use one of {', '.join(CLOCKS)}")
    if request.clock == "time" and not tree.has_time:
        raise CputraceError(f"{request.trace.path}: the trace has no time; use --clock insns")
    return request.clock


def time_unit(request: ExportRequest) -> str | None:
    return (request.trace.manifest.get("time") or {}).get("unit")


def nanoseconds_per_tick(request: ExportRequest, clock: str) -> float:
    """Trace time units (or instructions) in nanoseconds, for timeline viewers.

    Units that are not a duration (clk, cyc, tic, cs) and instructions count 1 ns each, so
    the viewer's nanoseconds read as cycles or instructions.
    """
    unit = time_unit(request)
    return float(ratio(unit, "ns")) if clock == "time" and is_real(unit) else 1.0
