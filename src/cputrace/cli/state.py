"""The state command: register values and memory bytes after one instruction.

Short and run often, so it imports only what it needs: the state index answers from
DuckDB, and image loaders are imported only when --image is given.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import click
import numpy as np

from ..analysis.state import FROM_IMAGE, READ_BEFORE_WRITE, UNKNOWN, MemoryBytes, StateIndex
from .common import cli, open_trace_arg
from .options import check_cores
from .params import NUMBER, image_option, load_images

_ORIGIN_NAMES = {READ_BEFORE_WRITE: "read", FROM_IMAGE: "image", UNKNOWN: "unknown"}
_ORIGIN_TEXT = {"read": "not written yet; a read saw it", "image": "from the image", "unknown": "unknown"}


def _runs(memory: MemoryBytes) -> list[dict[str, Any]]:
    """Consecutive bytes with the same origin, as (address, length, origin, seq)."""
    origin = memory.origin
    if not len(origin):
        return []
    starts = np.flatnonzero(np.r_[True, origin[1:] != origin[:-1]])
    ends = np.r_[starts[1:], len(origin)]
    runs = []
    for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
        code = int(origin[start])
        runs.append(
            {
                "address": memory.address + start,
                "length": end - start,
                "origin": _ORIGIN_NAMES.get(code, "write"),
                "seq": code if code >= 0 else None,
            }
        )
    return runs


def _dump(memory: MemoryBytes) -> list[str]:
    """Hex dump lines, 16 bytes each from a 16-byte boundary, `??` where unknown."""
    lines = []
    known = memory.known
    first = memory.address - memory.address % 16
    for row in range(first, memory.address + len(memory.data), 16):
        cells = []
        for address in range(row, row + 16):
            i = address - memory.address
            if 0 <= i < len(memory.data):
                cells.append(f"{memory.data[i]:02x}" if known[i] else "??")
            else:
                cells.append("  ")
        lines.append(f"  {row:016x}  {' '.join(cells[:8])}  {' '.join(cells[8:])}")
    return lines


@cli.command("state")
@click.argument("trace")
@click.option("--at", "seq", type=click.IntRange(min=0), help="After instruction SEQ.")
@click.option("--time", "time", type=int, help="After the last instruction at or before time T.")
@click.option(
    "--mem", "ranges", type=(NUMBER, NUMBER), multiple=True, metavar="ADDR LEN",
    help="Also show LEN bytes (at most 16 MiB) of memory from ADDR (repeatable).",
)  # fmt: skip
@image_option("Program image whose bytes stand for memory the trace never wrote or read.")
@click.option("--cpu", "cpus", type=int, multiple=True, help="Only these cores' registers.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def state_cmd(
    trace: str,
    seq: int | None,
    time: int | None,
    ranges: tuple[tuple[int, int], ...],
    images: tuple[str, ...],
    cpus: tuple[int, ...],
    fmt: str,
) -> None:
    """Register values and memory bytes after one instruction, each with the seq that wrote it.

    Memory never written shows as unknown (??), or as the bytes of --image. Bytes read
    before any write show the value that read saw ("read"). The first call on a store
    builds an index inside it; later calls answer from the index.
    """
    if (seq is None) == (time is None):
        raise click.UsageError("give exactly one of --at SEQ and --time T")
    image = load_images(images)
    opened = open_trace_arg(trace)
    check_cores(opened, cpus)
    index = StateIndex.open(opened)
    point = index.point(seq) if seq is not None else index.point_at_time(time)  # type: ignore[arg-type]
    registers = index.registers(point.seq, list(cpus) or None)
    memories = [index.memory(point.seq, address, length, image) for address, length in ranges]
    if fmt == "json":
        body: dict[str, Any] = {
            "seq": point.seq,
            "time": point.time,
            "cpu": point.cpu,
            "pc": point.pc,
            "registers": [
                {
                    "cpu": r.cpu,
                    "name": r.name,
                    "size": len(r.data),
                    "value": r.value,
                    "hex": r.hex(),
                    "seq": r.seq,
                }
                for r in registers
            ],
            "memory": [
                {
                    "address": m.address,
                    "length": len(m.data),
                    "hex": "".join(f"{b:02x}" if k else "??" for b, k in zip(m.data, m.known, strict=True)),
                    "runs": _runs(m),
                }
                for m in memories
            ],
        }
        json.dump(body, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return
    out = sys.stdout
    time_text = "" if point.time is None else f", time {point.time}"
    out.write(f"after seq {point.seq}: cpu {point.cpu}, pc 0x{point.pc:x}{time_text}\n")
    width = max((len(r.name) for r in registers), default=0)
    for cpu in sorted({r.cpu for r in registers}):
        out.write(f"cpu {cpu} registers:\n")
        for r in registers:
            if r.cpu == cpu:
                out.write(f"  {r.name:<{width}}  {'0x' + r.hex():>18}  seq {r.seq}\n")
    for memory in memories:
        out.write(f"memory 0x{memory.address:x}..0x{memory.address + len(memory.data):x}:\n")
        out.write("".join(line + "\n" for line in _dump(memory)))
        for run in _runs(memory):
            where = f"  0x{run['address']:x}+{run['length']}"
            how = f"written at seq {run['seq']}" if run["seq"] is not None else _ORIGIN_TEXT[run["origin"]]
            out.write(f"{where:<24}{how}\n")
