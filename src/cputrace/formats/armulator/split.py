"""An ARMulator Tracer file split into byte ranges decoded side by side (batch/partition.py runs
them), with the names formats/tarmac/split.py gives each step.

Where: at the start of any line (`split_points`). The decoder's only state besides its
numbering is what its opcode fetches leave pending (fetch.py): a fetch
belongs to the later instruction whose address it covers, so the memory rows from the oldest
pending fetch's seq on are held back until it is claimed or expires, `FETCH_WINDOW`
instructions on.

What crosses a split is a `Carry`: the seq and line number a range starts at, and the pending
fetches with the memory rows held back for them. Two steps make each range's:

1. `count_range`, a scan of each range side by side: its lines (newlines) and its instruction
   lines (`instruction_line_starts`, as the parser reads them). Their running sums give each
   range's first line and seq (`first_carries`).
2. Each range is decoded from that carry, the pending fetches and held rows at its start
   found by decoding again the lines of the `LOOKBACK` instructions before it, their rows
   dropped (`warmed`): a fetch pending at the start was printed at most `FETCH_WINDOW`
   instructions before it, and a fetch claimed into the held rows at most `FETCH_WINDOW`
   instructions before the instruction that claimed it, so those lines decide both. A range
   before the last ends where a chunk would end (`Sequencer.sequenced`), its pending fetches
   and held rows in its `end` carry, unwritten. That carry is compared with the next range's start
   (`Carry.joins`): a range that started otherwise (a line the scan took for an instruction
   and the parser rejects) is decoded again from the carry before it, and after a wrong count
   the ranges after it too, renumbered (batch/partition.py). The result is the single-process
   decoding's, row for row.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import numba
import numpy as np
import pyarrow as pa

from ...inputs import InputFile
from ...model import SCHEMAS
from ..base import Batch, DecodeContext
from ..linescan import count_newlines, hex_digit, is_space, line_end
from ..splitrange import SplitRange, moved_starts
from .decoder import LineParser, fed
from .fetch import FETCH_WINDOW, PendingFetch, Sequencer

__all__ = [
    "NUMBERED_AFTER", "Carry", "RangeDecode", "RangeFacts", "count_range", "finish", "first_carries",
    "split_points", "whole",
]  # fmt: skip
"""The steps of a split, by the names every format's split module gives them (batch/partition.py)."""

NUMBERED_AFTER = False
"""Each range is decoded with the seq it starts at, from the counts of step 1."""

LOOKBACK = 2 * FETCH_WINDOW
"""Instruction lines before a split whose lines decide the pending fetches at it (step 2)."""

LOOK_BYTES = 64 << 10
"""How far before a split to look for its `LOOKBACK` instruction lines, at first (doubled up
to `MAX_LOOK_BYTES`; a range without them that near is decoded again from the end of the one
before, as one that does not join up)."""
MAX_LOOK_BYTES = 64 << 20


_T, _I, _S = ord("T"), ord("I"), ord("S")
_VT, _FF, _NBSP, _UTF8_NBSP_LEAD = 0x0B, 0x0C, 0xA0, 0xC2


@numba.njit(cache=True)
def _space_width(d, k, e):
    """The bytes the whitespace at k takes (0: none), as the line parser splits a line start:
    space, tab, CR, VT, FF and the no-break space, raw or in UTF-8."""
    c = d[k]
    if is_space(c) or c in (_VT, _FF, _NBSP):
        return 1
    if c == _UTF8_NBSP_LEAD and k + 1 < e and d[k + 1] == _NBSP:
        return 2
    return 0


@numba.njit(cache=True)
def _past_spaces(d, k, e):
    while k < e:
        width = _space_width(d, k, e)
        if width == 0:
            break
        k += width
    return k


@numba.njit(cache=True)
def _starts_instruction(d, s, e):
    """Whether line s..e starts an instruction record as the line parser reads it up to its
    first word: `IT` or `IS` and whitespace, optionally after `T <hex time>` and whitespace.
    It may still reject the line (a bad address or opcode): decoding finds that out."""
    k = _past_spaces(d, s, e)
    if k < e and d[k] == _T:
        q = _past_spaces(d, k + 1, e)
        if q == k + 1:
            return False
        k = q
        while k < e and hex_digit(d[k]) >= 0:
            k += 1
        if k == q:
            return False
        q = _past_spaces(d, k, e)
        if q == k:
            return False
        k = q
    return k + 2 < e and d[k] == _I and (d[k + 1] == _T or d[k + 1] == _S) and _space_width(d, k + 2, e) > 0


@numba.njit(nogil=True, cache=True)
def _instruction_lines(d, starts):
    """Where the instruction lines of `d` start, into `starts` (room for every line): how many."""
    n = len(d)
    found = 0
    s = 0
    while s < n:
        e = line_end(d, s, n)
        if _starts_instruction(d, s, e):
            starts[found] = s
            found += 1
        s = e + 1
    return found


def instruction_line_starts(data: bytes | memoryview) -> tuple[np.ndarray, int]:
    """The offsets in `data` (whole lines) of the lines that start an instruction record, and
    how many newlines it holds."""
    d = np.frombuffer(data, np.uint8)
    d.flags.writeable = False  # one compiled signature, whether the data is bytes or a buffer
    newlines = count_newlines(d)
    starts = np.empty(newlines + 1, np.int64)
    return starts[: _instruction_lines(d, starts)], newlines


def whole(_source: InputFile, _options: dict[str, Any], images: Sequence[str]) -> str | None:
    """Why the input is decoded whole (None: it splits)."""
    return "an input decoded with a program image is decoded whole" if images else None


def split_points(source: InputFile, nominal: list[int]) -> list[int]:
    """Where the ranges start, 0 first: each offset of `nominal` (increasing) moved on to the
    start of the next line; offsets at the same line as the one before are dropped."""
    return moved_starts(source, nominal, _line_start_at)


def _line_start_at(file: BinaryIO, offset: int, size: int) -> int | None:
    """The start of the first line at or after `offset` (above 0; None: none before the end)."""
    position = offset - 1  # the newline that ends the line before, if a line starts at `offset`
    file.seek(position)
    look = LOOK_BYTES
    while window := file.read(look):
        newline = window.find(b"\n")
        if newline >= 0:
            found = position + newline + 1
            return found if found < size else None
        position += len(window)
        look = min(2 * look, MAX_LOOK_BYTES)
    return None


def _lookback(file: BinaryIO, start: int) -> tuple[int, int] | None:
    """Where the lines of the `LOOKBACK` instruction lines before `start` (a line start) begin
    (0 when there are fewer), and how many lines there are from there to `start`; None when
    they are farther than `MAX_LOOK_BYTES`."""
    look = LOOK_BYTES
    while True:
        first = max(start - look, 0)
        file.seek(first)
        window = file.read(start - first)
        whole = 0 if first == 0 else window.find(b"\n") + 1  # the first line may be cut
        if first and not whole:
            found: list[int] = []
        else:
            found = (instruction_line_starts(memoryview(window)[whole:])[0] + whole).tolist()
        if len(found) >= LOOKBACK or first == 0:
            at = found[-LOOKBACK] if len(found) >= LOOKBACK else 0
            return first + at, window.count(b"\n", at)
        if look >= MAX_LOOK_BYTES:
            return None
        look *= 2


@dataclass(frozen=True, slots=True)
class RangeCount:
    """What the scan of a range found: step 1 of the module docstring."""

    lines: int
    instructions: int


def count_range(source: InputFile, _ctx: DecodeContext, byte_range: tuple[int, int]) -> RangeCount:
    """Count a range's lines and its instruction lines."""
    lines = instructions = 0
    for chunk in source.line_chunks(byte_range=byte_range):
        starts, newlines = instruction_line_starts(chunk)
        lines += newlines
        instructions += len(starts)
    return RangeCount(lines, instructions)


@dataclass
class Carry:
    """What decoding the lines after a split takes from those before it: numbering, and the
    pending fetches with the memory rows held back for them (None: found by `warmed`)."""

    seq_base: int = 0
    line: int = 1  # the number of the range's first line
    held: pa.Table | None = None
    pending: list[PendingFetch] = field(default_factory=list)

    def joins(self, start: Carry, facts: RangeFacts) -> bool:
        """Whether a range decoded from `start` comes out as it would from this carry: the same
        numbering, and the same fetches pending with the same rows held."""
        given = start if start.held is not None else facts.warmed
        return (
            (self.seq_base, self.line) == (start.seq_base, start.line)
            and given is not None and given.held is not None and self.held is not None
            and self.pending == given.pending
            and self.held.equals(given.held)
        )  # fmt: skip


@dataclass
class RangeFacts:
    """What a range's decoding found beyond its rows: the state its start was warmed to, and
    its header lines (the manifest's notes keep the first of each key)."""

    warmed: Carry | None = None
    headers: dict[str, str] = field(default_factory=dict)


def first_carries(counts: list[RangeCount]) -> list[Carry]:
    """Each range's carry to start from: step 1 of the module docstring."""
    carries = []
    line, seq = 1, 0
    for count in counts:
        carries.append(Carry(seq_base=seq, line=line))
        line += count.lines
        seq += count.instructions
    return carries


@dataclass(eq=False)
class RangeDecode(SplitRange[Carry, RangeFacts]):
    """A byte range of an input decoded from a carry (splitrange.SplitRange). The last range
    (`final`) gives every row; a range before it leaves the rows held back for pending fetches
    in `end`."""

    facts: RangeFacts = field(default_factory=RangeFacts, init=False)
    end: Carry = field(default_factory=Carry, init=False)

    def batches(self) -> Iterator[Batch]:
        start, first = self.start, self.byte_range[0]
        parser = LineParser(self.source.path, self.ctx, self.source.max_line)
        if start.held is None and first > 0:
            self.facts.warmed = start = warmed(self.source, self.ctx, start, first)
        sequencer = Sequencer()
        sequencer.resume(start.seq_base, start.held, start.pending)
        next_line = yield from fed(sequencer, parser, self.source, self.byte_range, start.line)
        if self.final and (batch := sequencer.finish()):
            yield batch
        self.end = Carry(sequencer.count, next_line, _rows(sequencer.held()), sequencer.pending)
        self.facts.headers = dict(self.ctx.notes.get("armulator", {}))


def warmed(source: InputFile, ctx: DecodeContext, start: Carry, at: int) -> Carry:
    """`start` with the fetches pending at byte `at` and the rows held back for them, found by
    decoding the lines of the `LOOKBACK` instructions before it (step 2 of the module
    docstring) with a context of their own: their rows and warnings are the range before's."""
    with open(source.path, "rb") as file:
        found = _lookback(file, at)
    if found is None:  # out of reach: the range is decoded again from the end of the one before
        return Carry(start.seq_base, start.line)
    lookback, lines = found
    scratch = DecodeContext(options=ctx.options)
    parser = LineParser(source.path, scratch, source.max_line)
    sequencer = Sequencer()
    # Past the input's start, a count above 0, as the true one is: records before the first
    # instruction take seq 0, not count - 1.
    sequencer.resume(0 if lookback == 0 else LOOKBACK, None, [])
    for _ in fed(sequencer, parser, source, (lookback, at), start.line - lines):
        pass
    shift = start.seq_base - sequencer.count
    held = _rows(sequencer.held())
    if shift:
        seq = held.column("seq").to_numpy() + shift
        index = held.schema.get_field_index("seq")
        held = held.set_column(index, held.schema.field(index), pa.array(seq, pa.int64()))
    pending = [(row, addr, size, born + shift) for row, addr, size, born in sequencer.pending]
    return Carry(start.seq_base, start.line, held, pending)


def _rows(held: pa.Table | None) -> pa.Table:
    """The memory rows held back, none as an empty table (a carry's `held` is None only before
    `warmed` has found them)."""
    return held if held is not None else SCHEMAS["memory"].empty_table()


def finish(facts: list[RangeFacts], _ends: list[Carry], _path: str, ctx: DecodeContext) -> None:
    """The whole input's notes from its ranges': the first value of each header key."""
    headers: dict[str, Any] = {}
    for range_facts in facts:
        for key, value in range_facts.headers.items():
            headers.setdefault(key, value)
    if headers:
        ctx.notes["armulator"] = headers
