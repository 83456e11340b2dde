"""Options that several analysis commands share: the seq/time window, the cores asked for."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import TYPE_CHECKING, Any

import click

from ..store.window import Window, time_window

if TYPE_CHECKING:
    from ..store.trace import Trace


def window_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """--start/--stop (seq) and --from-time/--to-time options, passed on as `window_spec`."""

    @click.option("--start", type=click.IntRange(min=0), help="First seq to include.")
    @click.option("--stop", type=click.IntRange(min=0), help="Seq to stop before.")
    @click.option("--from-time", "since", type=int, help="First time (trace units) to include.")
    @click.option("--to-time", "until", type=int, help="Last time (trace units) to include.")
    @wraps(command)
    def wrapper(*args: Any, start: int | None, stop: int | None, since: int | None, until: int | None,
                **kwargs: Any) -> Any:  # fmt: skip
        _check_order("--start", start, "--stop", stop)
        _check_order("--from-time", since, "--to-time", until)
        return command(*args, window_spec=(start, stop, since, until), **kwargs)

    return wrapper


def _check_order(first_name: str, first: int | None, last_name: str, last: int | None) -> None:
    """A window whose bounds are the wrong way round holds nothing: the user meant something else."""
    if first is not None and last is not None and first > last:
        raise click.UsageError(f"{first_name} {first} is after {last_name} {last}: the window holds nothing")


def resolve_window(trace: Trace, spec: tuple[int | None, int | None, int | None, int | None]) -> Window:
    """The seq window meant by the options: seq bounds, narrowed further by time bounds."""
    start, stop, since, until = spec
    if since is None and until is None:
        return Window(start, stop)
    timed = time_window(trace, since, until)
    lo = (
        max(x for x in (start, timed.start) if x is not None)
        if (start, timed.start) != (None, None)
        else None
    )
    hi = min(x for x in (stop, timed.stop) if x is not None) if (stop, timed.stop) != (None, None) else None
    return Window(lo, hi)


def check_cores(trace: Trace, cpus: tuple[int, ...]) -> None:
    """Bad usage for a --cpu the trace has no core of: what the command shows of it would be
    left out in silence (no registers, no calls, every function never executed)."""
    absent = sorted(set(cpus) - set(trace.manifest["cpus"]))
    if absent:
        cores = ", ".join(map(str, trace.manifest["cpus"])) or "none"
        raise click.UsageError(f"--cpu {absent[0]}: the trace has no such core (its cores: {cores})")
