"""ETMv3 commands (`etm packets`) and the ETM input options that `ingest` shares."""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Callable
from typing import Any

import click

from ..coresight.frames import LAYOUTS, FrameStats
from ..formats.etmv3.capture import Capture, EtmSource, PacketReader, open_captures, split_sources
from ..formats.etmv3.listing import FIELDS, packet_fields, packet_text
from ..formats.etmv3.packets import Packets
from ..formats.etmv3.protocol import KIND_NAMES
from .common import cli, err

RAW_SHOWN = 16  # raw bytes printed per packet in text listings
RAW_WIDTH = 3 * RAW_SHOWN + 2


class _Number(click.ParamType):
    """An integer in Python syntax: 0x10001860, 268441696, 0b1..."""

    name = "number"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        try:
            return int(str(value), 0)
        except ValueError:
            self.fail(f"{value!r} is not a number (write 0x11 or 17)", param, ctx)


NUMBER = _Number()


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


@cli.group("etm")
def etm_group() -> None:
    """Arm ETMv3 trace: CoreSight snapshots and trace buffers."""


@etm_group.command("packets")
@click.argument("input_path", metavar="INPUT", type=click.Path(exists=True))
@etm_input_options
@click.option("--limit", type=click.IntRange(min=0), default=None, help="At most N packets.")
@click.option(
    "--format", "fmt", type=click.Choice(["text", "csv", "jsonl"]), default="text", show_default=True
)
def packets_cmd(input_path: str, limit: int | None, fmt: str, **etm: Any) -> None:
    """List the ETMv3 packets of INPUT: a snapshot.ini, a snapshot directory, or a bare buffer.

    One line per packet: its offset in the trace buffer, trace ID, raw bytes, kind and decoded
    fields. Sources are listed one after another (a snapshot's in its device order, a bare
    buffer's by trace ID); a line about each goes to stderr.
    """
    captures = open_captures(input_path, etm_options(etm))
    out = sys.stdout
    writer = csv.writer(out, lineterminator="\n") if fmt == "csv" else None
    if writer:
        writer.writerow(["source", "offset", "size", "raw", "kind", *FIELDS])
    elif fmt == "text":
        out.write(f"{'offset':<10}  {'id':<4}  {'raw bytes':<{RAW_WIDTH}}  packet\n")
    shown = 0
    for capture in captures:
        stats = None
        for single in split_sources(capture):
            source = single.sources[0]
            err.print(f"{capture.path.name}: {_about(source)}")
            reader = PacketReader(single)
            for _, batch in reader:
                for index in range(len(batch)):
                    if limit is not None and shown >= limit:
                        return
                    _write(out, fmt, writer, source, batch, index)
                    shown += 1
            stats = reader.frame_stats
        _report(capture, stats)


def _about(source: EtmSource) -> str:
    name = f" {source.name}" if source.name != source.label else ""
    core = f", {source.core.name} ({source.core.type})" if source.core else ""
    return f"source {source.label}{name}{core}: {source.config.describe()}"


def _write(out: Any, fmt: str, writer: Any, source: EtmSource, batch: Packets, index: int) -> None:
    record = batch.table[index]
    kind = int(record["kind"])
    offset = int(record["offset"])
    raw = batch.raw(index)
    fields = packet_fields(batch, index, source.config)
    if fmt == "text":
        shown = raw[:RAW_SHOWN].hex(" ") + (" .." if len(raw) > RAW_SHOWN else "")
        out.write(f"0x{offset:08x}  {source.label:<4}  {shown:<{RAW_WIDTH}}  {packet_text(kind, fields)}\n")
    elif writer:
        row = [source.trace_id, offset, len(raw), raw.hex(), KIND_NAMES[kind]]
        writer.writerow(row + [fields.get(name, "") for name in FIELDS])
    else:
        head = {"source": source.trace_id, "offset": offset, "size": len(raw), "raw": raw.hex()}
        out.write(json.dumps({**head, "kind": KIND_NAMES[kind], **fields}) + "\n")


def _report(capture: Capture, stats: FrameStats | None) -> None:
    """Bytes of the buffer that belong to no packet stream, on stderr."""
    if stats and (stats.dropped_bytes or stats.trailing_bytes or stats.broken_frames):
        err.print(
            f"{capture.path.name}: {stats.dropped_bytes} bytes outside any source (null ID, or before the "
            f"first ID), {stats.broken_frames} frames cut by a sync, {stats.trailing_bytes} bytes of an "
            "unfinished last frame"
        )


__all__ = ["etm_input_options", "etm_options"]
