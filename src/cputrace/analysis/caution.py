"""Warnings an analysis gives about what it was handed: an image that cannot be the traced
program, a call-detection rule the trace cannot support.

They go through logging (logger `cputrace`): with nothing set up, Python's last-resort
handler prints the message alone on stderr, which is what the command line wants; a program
using cputrace as a library routes or silences them as it does its other logs.
"""

from __future__ import annotations

import logging

from ..image import Image
from ..image.arch import mismatch
from ..store.trace import Trace

_log = logging.getLogger("cputrace")


def warn(message: str) -> None:
    _log.warning("warning: %s", message)


def check_image(trace: Trace, image: Image | None) -> None:
    """Warn when `image`'s architecture runs none of the instruction sets the trace ran: its
    symbols and code then describe another program."""
    if image is None:
        return
    why = mismatch(image.architecture, trace.manifest.get("isas") or ())
    if why:
        warn(f"{why}: is --image the program that ran?")
