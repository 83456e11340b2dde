"""A line on the terminal while numba compiles, so that the pause of a first run is explained.

The compiled code of the decoders and analyses is cached (`cache=True`); the first command
that needs a piece compiles it, which takes seconds to tens of seconds. numba announces each
compilation its cache could not spare (a `numba:compile` event); the first of each part of
cputrace gets a line on stderr when stderr is a terminal, nothing otherwise.
"""

from __future__ import annotations

import sys
from typing import Any

from rich.console import Console

from .common import err

PARTS = (
    ("cputrace.formats.tarmac", "the Tarmac decoder"),
    ("cputrace.formats.armulator", "the ARMulator decoder"),
    ("cputrace.formats.linescan", "the text trace scanner"),
    ("cputrace.formats.etmv3", "the ETMv3 decoder"),
    ("cputrace.formats.ptm", "the PTM decoder"),
    ("cputrace.formats.etmv4", "the ETMv4 decoder"),
    ("cputrace.formats.xscale", "the XScale decoder"),
    ("cputrace.coresight", "the CoreSight frame decoder"),
    ("cputrace.flow", "the program-flow walk"),
    ("cputrace.kernels", "the hash tables and buffers"),
    ("cputrace.isa", "the instruction decoder"),
    ("cputrace.export.tarmac", "the Tarmac writer"),
    ("cputrace.export", "the exporter"),
    ("cputrace.analysis.writehash", "the state index"),
    ("cputrace.analysis.profile", "the profiler"),
    ("cputrace.analysis.diff", "the trace comparison"),
    ("cputrace.analysis", "call detection"),
    ("cputrace", "cputrace"),
)
"""Module prefix -> what the user is told is compiling (the first prefix that matches)."""


def part_of(module: str) -> str | None:
    """What part of cputrace a compiled function's module belongs to (None: not cputrace's)."""
    return next((name for prefix, name in PARTS if module == prefix or module.startswith(prefix + ".")), None)


_explaining = False


def explain_compiling() -> None:
    """Say on the terminal (stderr) when this process compiles a part of cputrace; nothing when
    stderr is not a terminal. Imports numba: call it where numba is loaded anyway."""
    global _explaining
    if _explaining or not sys.stderr.isatty():
        return
    from numba.core import event

    event.register("numba:compile", compile_notice(err))
    _explaining = True


def compile_notice(console: Console) -> Any:
    """A numba event listener that tells `console` when a part starts compiling, once a part."""
    from numba.core import event

    told: set[str] = set()

    class Notice(event.Listener):
        def on_start(self, ev: event.Event) -> None:
            part = part_of(ev.data["dispatcher"].py_func.__module__)
            if part is not None and part not in told:
                told.add(part)
                console.print(f"compiling {part} (first run only: it is kept for later runs)...")

        def on_end(self, ev: event.Event) -> None:
            pass

    return Notice()
