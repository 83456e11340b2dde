"""The command line: one thin layer over the library, one module per group of commands.

Exit codes: 0 success, 1 bad input (the message names file, line or offset), 2 bad usage.
"""

from __future__ import annotations

from .common import cli

cli.modules = {
    "ingest": "ingest", "info": "store", "list": "store", "sql": "store",
    "calls": "analysis", "profile": "analysis", "export": "export",
    "state": "state", "diff": "diff", "coverage": "coverage",
    "record": "record", "etm": "etm", "verify": "verify",
}  # fmt: skip


def main() -> None:
    cli(prog_name="cputrace")


__all__ = ["cli", "main"]
