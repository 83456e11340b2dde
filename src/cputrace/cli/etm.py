"""CoreSight ETM-family commands (ETMv3, PTM, ETMv4): `etm packets`."""

from __future__ import annotations

import csv
import json
import sys
from typing import Any

import click

from ..coresight.frames import FrameStats
from ..coresight.listing import FIELDS, packet_text
from ..coresight.packets import Packets
from ..formats.coresight.capture import Capture, EtmSource, PacketReader, open_captures, split_sources
from ..formats.coresight.options import OPTIONS as CORESIGHT_OPTIONS
from ..formats.etmv3 import listing as etmv3_listing
from ..formats.etmv3.protocol import KIND_NAMES
from ..formats.etmv4 import listing as etmv4_listing
from ..formats.etmv4.config import Etmv4Config
from ..formats.etmv4.protocol import KIND_NAMES as ETMV4_KIND_NAMES
from ..formats.ptm import listing as ptm_listing
from ..formats.ptm.config import PtmConfig
from ..formats.ptm.protocol import KIND_NAMES as PTM_KIND_NAMES
from .common import cli, err
from .params import option_flags

RAW_SHOWN = 16  # raw bytes printed per packet in text listings
RAW_WIDTH = 3 * RAW_SHOWN + 2


@cli.group("etm")
def etm_group() -> None:
    """Arm ETMv3, PTM and ETMv4 trace: CoreSight snapshots and trace buffers."""


@etm_group.command("packets")
@click.argument("input_path", metavar="INPUT", type=click.Path(exists=True))
@option_flags(*CORESIGHT_OPTIONS)
@click.option("--limit", type=click.IntRange(min=0), default=None, help="At most N packets.")
@click.option(
    "--format", "fmt", type=click.Choice(["text", "csv", "jsonl"]), default="text", show_default=True
)
def packets_cmd(input_path: str, limit: int | None, fmt: str, flagged: dict[str, Any]) -> None:
    """List the ETMv3, PTM and ETMv4 packets of INPUT: a snapshot.ini, a snapshot directory, or a bare buffer.

    One line per packet: its offset in the trace buffer, trace ID, raw bytes, kind and decoded
    fields. Sources are listed one after another (a snapshot's in its device order, a bare
    buffer's by trace ID); a line about each goes to stderr.
    """
    captures = open_captures(input_path, flagged)
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
            err.print(f"{capture.path.name}: {_about(source)}", markup=False)
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
    if isinstance(source.config, PtmConfig):
        name, fields = PTM_KIND_NAMES[kind], ptm_listing.packet_fields(batch, index, source.config)
    elif isinstance(source.config, Etmv4Config):
        name, fields = ETMV4_KIND_NAMES[kind], etmv4_listing.packet_fields(batch, index, source.config)
    else:
        name, fields = KIND_NAMES[kind], etmv3_listing.packet_fields(batch, index, source.config)
    if fmt == "text":
        shown = raw[:RAW_SHOWN].hex(" ") + (" .." if len(raw) > RAW_SHOWN else "")
        out.write(f"0x{offset:08x}  {source.label:<4}  {shown:<{RAW_WIDTH}}  {packet_text(name, fields)}\n")
    elif writer:
        row = [source.trace_id, offset, len(raw), raw.hex(), name]
        writer.writerow(row + [fields.get(field, "") for field in FIELDS])
    else:
        head = {"source": source.trace_id, "offset": offset, "size": len(raw), "raw": raw.hex()}
        out.write(json.dumps({**head, "kind": name, **fields}) + "\n")


def _report(capture: Capture, stats: FrameStats | None) -> None:
    """Bytes of the buffer that belong to no packet stream, on stderr."""
    if stats and (stats.dropped_bytes or stats.trailing_bytes or stats.broken_frames):
        err.print(
            f"{capture.path.name}: {stats.dropped_bytes} bytes outside any source (null ID, or before the "
            f"first ID), {stats.broken_frames} frames cut by a sync, {stats.trailing_bytes} bytes of an "
            "unfinished last frame",
            markup=False,
        )

