"""The ETM input options that `ingest` and `etm packets` share (light: no decoder is imported)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from ..coresight.sniff import LAYOUTS
from .params import NUMBER


def etm_input_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The options that say which ETMv3 source to decode and, for bare buffers, how."""
    options = [
        click.option("--source", type=NUMBER, help="Only the trace source with this trace ID (e.g. 0x11)."),
        click.option(
            "--etm-config", type=click.Path(exists=True, dir_okay=False),
            help="Bare buffer: ETM registers from an ini ([etm] etmcr=...) or JSON file.",
        ),
        click.option("--etmcr", type=NUMBER, help="Bare buffer: ETM main control register."),
        click.option("--etmidr", type=NUMBER, help="Bare buffer: ETM ID register (default 0x4100F250)."),
        click.option("--etmccer", type=NUMBER, help="Bare buffer: configuration code extension register."),
        click.option(
            "--buffer-format", type=click.Choice(LAYOUTS),
            help="Bare buffer: formatter frames in memory, a trace port capture, or one raw source.",
        ),
    ]  # fmt: skip
    for option in reversed(options):
        command = option(command)
    return command


def etm_options(values: dict[str, Any]) -> dict[str, Any]:
    """The given ETM input options as ingest options (DecodeContext.options)."""
    keys = ("source", "etm_config", "etmcr", "etmidr", "etmccer", "buffer_format")
    return {key: values[key] for key in keys if values.get(key) is not None}
