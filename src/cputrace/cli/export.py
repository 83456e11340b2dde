"""The export command: a trace (or a window of it) in another tool's format."""

from __future__ import annotations

from pathlib import Path

import click

from ..analysis.calls.log import Method
from ..export.calldata import CLOCKS
from ..export.registry import EXPORTERS, ExportRequest
from .analysis import method_option
from .common import cli, open_trace_arg, reading_bar
from .options import resolve_window, window_options
from .params import OUTPUT_FILE, image_files, image_option, load_images


def _formats_epilog() -> str:
    width = max(map(len, EXPORTERS))
    lines = [f"  {name:<{width}}  {e.description}" for name, e in sorted(EXPORTERS.items())]
    return "\b\nFormats:\n" + "\n".join(lines)


@cli.command("export", epilog=_formats_epilog())
@click.argument("trace")
@click.option(
    "--to", "fmt", required=True, type=click.Choice(sorted(EXPORTERS)), help="Output format (see below)."
)
@click.option("-o", "--output", required=True, type=OUTPUT_FILE, help="File to write.")
@image_option()
@method_option
@window_options
@click.option("--table", help="csv/parquet: instructions, registers, memory, events, or an analysis table "
              "(frames, functions, lines, addresses, mix, blocks).")  # fmt: skip
@click.option(
    "--clock",
    type=click.Choice(CLOCKS),
    help="Call-based exports: trace time or instruction counts (default: time when the trace has it).",
)
def export_cmd(
    trace: str, fmt: str, output: str, images: tuple[str, ...], method: str, window_spec: tuple,
    table: str | None, clock: str | None,
) -> None:  # fmt: skip
    """Write TRACE (or a window of it) in another tool's format, streamed to FILE.

    Call-based formats (folded, speedscope, chrome, perfetto, callgrind) run call detection
    first, as `cputrace calls` does; --image names the functions.
    """
    exporter = EXPORTERS[fmt]
    t = open_trace_arg(trace)
    request = ExportRequest(
        trace=t,
        output=Path(output),
        window=resolve_window(t, window_spec),
        image=load_images(images),
        table=table,
        clock=clock,
        method=Method(method),
        inputs=image_files(images),
    )
    with reading_bar([t], request.window):
        exporter.write(request)
    click.echo(f"{output}: {fmt}, {Path(output).stat().st_size:,} bytes", err=True)
