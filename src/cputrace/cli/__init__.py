"""The command line: one thin layer over the library, one module per group of commands.

Exit statuses are in `exits`. `main` imports the commands itself, so that Ctrl-C during the
imports of start-up ends the command as quietly as Ctrl-C later on.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from types import FrameType
from typing import TYPE_CHECKING, Any, NoReturn

from . import exits

if TYPE_CHECKING:
    from .common import cli

GRACE_SECONDS = 3.0
"""After Ctrl-C, how long the command may take to stop (removing its temporary files) before
the process exits anyway: a worker thread in the middle of a compilation does not stop."""


def main() -> None:
    """The `cputrace` console script and `python -m cputrace`."""
    signal.signal(signal.SIGINT, _interrupted)
    _open_standard_streams()
    try:
        from .common import run

        run()
    except KeyboardInterrupt:
        sys.exit(exits.INTERRUPTED)


def _open_standard_streams() -> None:
    """Standard streams the caller closed (`cputrace ... >&-`) on the null device: Python has
    them as None, which no writer expects, and the first file the command opened would take
    their descriptor (and a worker process's output with it). What is written there is dropped."""
    for fd, name, mode in ((0, "stdin", "r"), (1, "stdout", "w"), (2, "stderr", "w")):
        try:
            os.fstat(fd)
        except OSError:
            opened = os.open(os.devnull, os.O_RDWR)  # the lowest free descriptor: this one
            if opened != fd:
                os.dup2(opened, fd)
                os.close(opened)
            setattr(sys, name, open(fd, mode, closefd=False))  # noqa: SIM115 (for the process's life)


_interrupts = 0


def _interrupted(_signal: int, _frame: FrameType | None) -> NoReturn:
    """Ctrl-C: stop as KeyboardInterrupt does (so temporary files go), but exit within
    GRACE_SECONDS whatever the threads are doing, and at once on a second Ctrl-C."""
    global _interrupts
    _interrupts += 1
    if _interrupts > 1:
        _exit_now()
    watchdog = threading.Timer(GRACE_SECONDS, _exit_now)
    watchdog.daemon = True
    watchdog.start()
    raise KeyboardInterrupt


def _exit_now() -> NoReturn:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(exits.INTERRUPTED)


def __getattr__(name: str) -> Any:
    """`cli`, the click group (imported on first use, see `main`)."""
    if name != "cli":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from .common import cli

    return cli


__all__ = ["cli", "main"]
