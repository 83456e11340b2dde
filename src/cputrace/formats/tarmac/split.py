"""A Tarmac input split into byte ranges decoded side by side (batch/partition.py runs them).

Where: each range starts at an instruction line the compiled scanner reads (`split_points`),
so no record of an instruction is cut from it and the line parser's own state (diagram
continuation lines, an exception's number given on the next line) never crosses a split.

What crosses a split is a `decoder.Carry`. Two steps make each range's exactly:

1. `count_range`, a scan of each range side by side: its lines, its instructions and the time
   unit its first timed line decides. Their running sums give each range's first line number
   and seq; the first unit decided is the input's.
2. Each range is decoded from that carry, with no time, core 0 and no earlier instructions
   (`first_carry`), and says which of those its rows took (`RangeFacts`). Its end carry is
   then compared with the next range's start (`Carry.joins`): a range whose lines took
   something its start did not have (a continuation line at its start, a core's records before
   that core's first instruction in it, rows held back for an instruction of the next range,
   a count the scan got wrong) is decoded again from the carry before it, and after a wrong
   count the parts after it too, renumbered (batch/partition.py). The result is the
   single-process decoding's, row for row; the second decoding is rare on real traces.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO

import numpy as np

from ...inputs import InputFile
from ...model import Isa
from ..base import DecodeContext
from ..splitrange import moved_starts
from .decoder import Carry, RangeDecode, RangeFacts, _big_endian, note_flow_only
from .grammar import LineError, Rows, TarmacLineParser
from .options import DEFAULT_ISA
from .scan import KIND_INSN, KIND_SLOW, TIME_UNITS, scan_chunk
from .timescale import TimeScale

__all__ = [
    "NUMBERED_AFTER", "Carry", "RangeDecode", "RangeFacts", "count_range", "finish", "first_carries",
    "split_points", "whole",
]  # fmt: skip
"""The steps of a split, by the names every format's split module gives them (batch/partition.py)."""

NUMBERED_AFTER = False
"""Each range is decoded with the seq it starts at, from the counts of step 1."""

LOOK_BYTES = 64 << 10
"""How far past a nominal split to look for an instruction line, at first (doubled up to
`MAX_LOOK_BYTES`; a range with none is merged with the next): the client reads this much per
part."""
MAX_LOOK_BYTES = 64 << 20


def whole(_source: InputFile, _options: dict[str, Any], images: Sequence[str]) -> str | None:
    """Why the input is decoded whole (None: it splits)."""
    return "an input decoded with a program image is decoded whole" if images else None


def split_points(source: InputFile, nominal: list[int]) -> list[int]:
    """Where the ranges start, 0 first: each offset of `nominal` (increasing) moved on to the
    start of the first instruction line at or after it; offsets with none after them before
    the next are dropped."""
    return moved_starts(source, nominal, _instruction_line_at)


def _instruction_line_at(file: BinaryIO, offset: int, size: int) -> int | None:
    """The offset of the first instruction line starting at or after `offset` (None: none near)."""
    look = LOOK_BYTES
    nominal = offset - 1  # the newline that ends the line before, if a line starts at `offset`
    while nominal < size:
        file.seek(nominal)
        window = file.read(look)
        start = window.find(b"\n") + 1
        end = window.rfind(b"\n") + 1
        if 0 < start < end:
            scan = scan_chunk(memoryview(window)[start:end])
            insns = np.flatnonzero(scan.kind == KIND_INSN)
            if len(insns):
                return nominal + start + int(scan.line_start[insns[0]])
        if look >= MAX_LOOK_BYTES or nominal + look >= size:
            return None
        look *= 2
    return None


@dataclass(frozen=True, slots=True)
class RangeCount:
    """What the scan of a range found: step 1 of the module docstring."""

    lines: int
    instructions: int
    unit: str | None  # the time unit its first timed line decides (None: no timed line)


def count_range(source: InputFile, ctx: DecodeContext, byte_range: tuple[int, int]) -> RangeCount:
    """Count a range's lines and instructions with the scanner, and the lines it leaves to the
    grammar with the line parser, as decoding reads them."""
    parser = TarmacLineParser(Isa[ctx.option(DEFAULT_ISA)], _big_endian(ctx), TimeScale())
    timescale = parser.timescale
    lines = instructions = 0
    for chunk in source.line_chunks(byte_range=byte_range):
        scan = scan_chunk(chunk, source.max_line)
        timed = np.flatnonzero((scan.tunit > 0) & (scan.kind < KIND_SLOW))
        first_timed = int(timed[0]) if len(timed) else scan.n_lines
        for li in np.flatnonzero(scan.kind == KIND_SLOW).tolist():
            if timescale.unit is None and first_timed < li:
                timescale.decide(TIME_UNITS[scan.tunit[first_timed]], False)
            rows = Rows()
            start, stop = scan.line_start[li], scan.line_start[li + 1]
            try:
                parser.parse(bytes(chunk[start:stop]).rstrip(b"\r\n").decode("utf-8"), lines + li + 1, rows)
            except (LineError, UnicodeDecodeError):
                continue
            instructions += len(rows.instructions)
        if timescale.unit is None and first_timed < scan.n_lines:
            timescale.decide(TIME_UNITS[scan.tunit[first_timed]], False)
        instructions += len(scan.insn["line"])
        lines += scan.n_lines
    return RangeCount(lines, instructions, timescale.unit)


def first_carries(counts: list[RangeCount]) -> list[Carry]:
    """Each range's carry to start from: step 2 of the module docstring."""
    unit = next((count.unit for count in counts if count.unit is not None), None)
    carries = []
    line, seq = 1, 0
    for count in counts:
        carries.append(Carry(seq_base=seq, line=line, unit=unit))
        line += count.lines
        seq += count.instructions
    return carries


def finish(facts: list[RangeFacts], ends: list[Carry], path: str, ctx: DecodeContext) -> None:
    """What the whole input says beyond its ranges' rows: whether it is a flow-only trace
    (`note_flow_only`), and its time unit (the last range's carries every range's)."""
    flow_lines = [range_facts.flow_line for range_facts in facts if range_facts.flow_line is not None]
    instructions = any(range_facts.instructions for range_facts in facts)
    note_flow_only(RangeFacts(instructions=instructions, flow_line=min(flow_lines, default=None)), path, ctx)
    ctx.notes["time_unit"] = ends[-1].unit
