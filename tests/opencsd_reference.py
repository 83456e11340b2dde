"""OpenCSD's decode of a snapshot (`trc_pkt_lister -decode` output, the `reference/*.ppl.xz`
files of the shared corpus), read into the elements the tests compare a store with.

Each packet line is `Idx:<byte index>; ID:<trace ID>; [<bytes>];\tNAME : text` and each
decoded element line `Idx:<its packet's byte index>; ID:<trace ID>; OCSD_GEN_TRC_ELEM_*(...)`;
this reads the packets, and the instruction ranges, exceptions, exception returns, trace-ons
and timestamps with their cycle counts (`[CC=n]`), source by source in decode order. (The
packets of a raw stream, not formatted, are listed under trace ID 0.)
"""

from __future__ import annotations

import lzma
import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_LINE = re.compile(r"Idx:(\d+); ID:([0-9a-f]+); OCSD_GEN_TRC_ELEM_([A-Z_]+)\((.*)\)\s*$")
_RANGE = re.compile(
    r"^Idx:(\d+); ID:([0-9a-f]+); OCSD_GEN_TRC_ELEM_INSTR_RANGE\(exec range=0x([0-9a-f]+):\[0x([0-9a-f]+)\] "
    r"num_i\((\d+)\) last_sz\((\d+)\) \(ISA=(\w+)\) ([EN]) (\S+)(?:[^\n]*?\[CC=(\d+)\])?",
    re.MULTILINE,
)
_EXCEPTION = re.compile(r"pref ret addr:0x([0-9a-f]+)(?: \[[^]]*\])?; excep num \(0x([0-9a-f]+)\)")
_TIMESTAMP = re.compile(r"TS=0x([0-9a-f]+)")
_CYCLES = re.compile(r"\[CC=(\d+)\]")
_PACKET = re.compile(r"Idx:(\d+); ID:([0-9a-f]+); \[((?:0x[0-9a-f]{2} )*)\];\s+(\w+) :(.*)")

RANGE = np.dtype([
    ("index", np.int64), ("start", np.uint64), ("end", np.uint64), ("count", np.int64), ("size", np.uint64),
    ("isa", "U8"), ("executed", np.bool_), ("last", "U4"), ("cycles", np.int64),
])  # fmt: skip
"""An instruction range: instructions from `start` up to `end` (exclusive), `count` of them,
from the packet at byte `index`; the last one `size` bytes, executed (E) or not (N), of type
`last` (`BR`, `iBR`, `ISB`, `---`: a waypoint update's), with `cycles` (-1: none). A source's
ranges are an array of these records, as a listing holds millions."""


@dataclass(frozen=True)
class Packet:
    """A packet: its byte `index`, bytes, the lister's name for its kind (ATOM, ISYNC...) and
    the text after it (the decoded fields)."""

    index: int
    raw: bytes
    name: str
    text: str = ""


@dataclass(frozen=True)
class Element:
    """An element other than a range: `kind` (exception, exception_return, trace_on,
    timestamp), its packet's `index`, `value` (the exception number, the timestamp), `address`
    (an exception's preferred return address) and cycle count."""

    index: int
    kind: str
    value: int | None = None
    address: int | None = None
    cycles: int | None = None


def _no_ranges() -> np.ndarray:
    return np.zeros(0, RANGE)


@dataclass
class Decode:
    """One trace source's elements in decode order."""

    ranges: np.ndarray = field(default_factory=_no_ranges)  # RANGE records
    elements: list[Element] = field(default_factory=list)
    packets: list[Packet] = field(default_factory=list)

    def of(self, kind: str) -> list[Element]:
        return [e for e in self.elements if e.kind == kind]

    @property
    def instructions(self) -> int:
        return int(self.ranges["count"].sum())


def read_reference(path: Path) -> dict[int, Decode]:
    """The decode of every trace source in a `.ppl.xz` listing, by trace ID."""
    text = lzma.decompress(path.read_bytes()).decode()
    decodes: dict[int, Decode] = defaultdict(Decode)
    for trace_id, ranges in _ranges(text).items():
        decodes[trace_id].ranges = ranges
    for line in text.splitlines():
        if "INSTR_RANGE" in line:
            continue  # read above, all at once
        p = _PACKET.match(line)
        if p is not None:
            trace_id, packet = _packet(p)
            decodes[trace_id].packets.append(packet)
            continue
        m = _LINE.match(line)
        if m is None:
            continue
        index, trace_id, kind, body = int(m[1]), int(m[2], 16), m[3], m[4]
        cc = _CYCLES.search(body)
        cycles = int(cc[1]) if cc else None
        decode = decodes[trace_id]
        if kind == "EXCEPTION":
            e = _EXCEPTION.search(body)
            assert e is not None, line
            decode.elements.append(Element(index, "exception", int(e[2], 16), int(e[1], 16), cycles))
        elif kind == "EXCEPTION_RET":
            decode.elements.append(Element(index, "exception_return"))
        elif kind == "TRACE_ON":
            decode.elements.append(Element(index, "trace_on", cycles=cycles))
        elif kind == "TIMESTAMP":
            t = _TIMESTAMP.search(body)
            assert t is not None, line
            decode.elements.append(Element(index, "timestamp", int(t[1], 16), cycles=cycles))
    return dict(decodes)


def _ranges(text: str) -> dict[int, np.ndarray]:
    """The instruction ranges of a listing by trace ID, in decode order: one pass of one regular
    expression over the whole text, the fields converted column by column."""
    found = _RANGE.findall(text)
    assert text.count("INSTR_RANGE") == len(found), "an instruction range line the reader does not know"
    if not found:
        return {}
    index, trace_id, start, end, count, size, isa, executed, last, cycles = zip(*found, strict=True)
    ranges = np.zeros(len(found), RANGE)
    for name, column in (("index", index), ("count", count), ("size", size), ("isa", isa), ("last", last)):
        ranges[name] = column
    for name, column in (("start", start), ("end", end)):
        ranges[name] = [int(a, 16) for a in column]
    ranges["executed"] = np.array(executed) == "E"
    ranges["cycles"] = [int(c) if c else -1 for c in cycles]
    assert (ranges["count"] > 0).all()
    ids = np.array([int(i, 16) for i in trace_id], np.int64)
    return {int(i): ranges[ids == i] for i in np.unique(ids)}


def read_packets(path: Path) -> dict[int, list[Packet]]:
    """The packets alone of every trace source in a `.ppl.xz` listing, by trace ID (faster than
    `read_reference` on long listings: the element lines are skipped unread)."""
    packets: dict[int, list[Packet]] = defaultdict(list)
    for line in lzma.decompress(path.read_bytes()).decode().splitlines():
        if "; [" in line and (p := _PACKET.match(line)) is not None:
            trace_id, packet = _packet(p)
            packets[trace_id].append(packet)
    return dict(packets)


def _packet(line: re.Match[str]) -> tuple[int, Packet]:
    """The trace ID and the packet of a packet line (`_PACKET`)."""
    return int(line[2], 16), Packet(int(line[1]), bytes.fromhex(line[3].replace("0x", "")), line[4], line[5])


Check = tuple[np.ndarray, Callable[[int], str]]
"""A check of instructions cut as ranges: a mask of the ranges that fail it, and what is wrong
with range i."""


def range_disagreements(
    address: np.ndarray, size: np.ndarray, ranges: np.ndarray,
    checks: Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray], list[Check]] | None = None,
    shown: int = 20,
) -> list[str]:  # fmt: skip
    """Where instructions (their addresses and sizes, in seq order) and a source's reference
    ranges differ, a line each (the first `shown` of each kind, then how many more): each range
    is its count of instructions in sequence from its start up to its end, the last one of its
    size; then the caller's `checks(first, last, within, ranges)`, given each range's first and
    last instruction and the range of each instruction. Compared as arrays: a listing holds
    millions of ranges."""
    ends = np.cumsum(ranges["count"])
    held = int(np.searchsorted(ends, len(address), side="right"))  # the ranges the instructions hold whole

    def where(i: int) -> str:
        start, end, index = (int(ranges[name][i]) for name in ("start", "end", "index"))
        return f"range 0x{start:x}-0x{end:x} of packet {index}"

    def run(i: int) -> str:
        return f"the store runs {[hex(a) for a in address[first[i] : last[i] + 1].tolist()]}"

    ends_early = held < len(ranges)
    found = [f"{where(held)}: the store ends"] if ends_early else []
    ranges, ends = ranges[:held], ends[:held]
    n = int(ends[-1]) if held else 0
    first, last = ends - ranges["count"], ends - 1
    within = np.repeat(np.arange(held), ranges["count"])
    follows = address[: n - 1] + size[: n - 1] == address[1:n] if n else np.ones(0, np.bool_)
    broken = np.zeros(held, np.bool_)  # a range whose instructions are not in sequence
    broken[within[:-1][~follows & (within[:-1] == within[1:])]] = True
    ends_wrong = (address[last] + size[last] != ranges["end"]) | (size[last] != ranges["size"])
    problems = [((address[first] != ranges["start"]) | ends_wrong | broken, run)]
    if checks is not None:
        problems += checks(first, last, within, ranges)
    for bad, what in problems:
        failed = np.flatnonzero(bad).tolist()
        found += [f"{where(i)}: {what(i)}" for i in failed[:shown]]
        if len(failed) > shown:
            found.append(f"and {len(failed) - shown} more ranges like those")
    if not ends_early and n < len(address):
        found.append(f"{len(address) - n} instructions more than the reference's")
    return found


def nullable(column: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """A column's values (nulls as 0 or False) and where they are not null."""
    zero = 0 if pa.types.is_integer(column.type) else False
    return pc.fill_null(column, zero).to_numpy(), pc.is_valid(column).to_numpy()
