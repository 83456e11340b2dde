"""The command line: one thin layer over the library, one module per group of commands.

Exit codes: 0 success, 1 bad input (the message names file, line or offset), 2 bad usage.
"""

from __future__ import annotations

from . import analysis, etm, export, inspect, record, store  # noqa: F401  (each module registers its commands on the group)
from .common import cli


def main() -> None:
    cli(prog_name="cputrace")


__all__ = ["cli", "main"]
