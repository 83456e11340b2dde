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
from dataclasses import dataclass, field
from pathlib import Path

_LINE = re.compile(r"Idx:(\d+); ID:([0-9a-f]+); OCSD_GEN_TRC_ELEM_([A-Z_]+)\((.*)\)\s*$")
_RANGE = re.compile(
    r"exec range=0x([0-9a-f]+):\[0x([0-9a-f]+)\] num_i\((\d+)\) last_sz\((\d+)\) \(ISA=(\w+)\) ([EN]) (\S+)"
)
_EXCEPTION = re.compile(r"pref ret addr:0x([0-9a-f]+)(?: \[[^]]*\])?; excep num \(0x([0-9a-f]+)\)")
_TIMESTAMP = re.compile(r"TS=0x([0-9a-f]+)")
_CYCLES = re.compile(r"\[CC=(\d+)\]")
_PACKET = re.compile(r"Idx:(\d+); ID:([0-9a-f]+); \[((?:0x[0-9a-f]{2} )*)\];\s+(\w+) :(.*)")


@dataclass(frozen=True)
class Packet:
    """A packet: its byte `index`, bytes, the lister's name for its kind (ATOM, ISYNC...) and
    the text after it (the decoded fields)."""

    index: int
    raw: bytes
    name: str
    text: str = ""


@dataclass(frozen=True)
class Range:
    """Instructions from `start` up to `end` (exclusive), `count` of them; the last one `size`
    bytes, executed (`executed`, E) or not (N), of type `last` (`BR`, `iBR`, `---`...)."""

    index: int
    start: int
    end: int
    count: int
    size: int
    isa: str
    executed: bool
    last: str
    cycles: int | None


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


@dataclass
class Decode:
    """One trace source's elements in decode order."""

    ranges: list[Range] = field(default_factory=list)
    elements: list[Element] = field(default_factory=list)
    packets: list[Packet] = field(default_factory=list)

    def of(self, kind: str) -> list[Element]:
        return [e for e in self.elements if e.kind == kind]

    @property
    def instructions(self) -> int:
        return sum(r.count for r in self.ranges)


def read_reference(path: Path) -> dict[int, Decode]:
    """The decode of every trace source in a `.ppl.xz` listing, by trace ID."""
    decodes: dict[int, Decode] = defaultdict(Decode)
    for line in lzma.decompress(path.read_bytes()).decode().splitlines():
        p = _PACKET.match(line)
        if p is not None:
            raw = bytes(int(b, 16) for b in p[3].split())
            decodes[int(p[2], 16)].packets.append(Packet(int(p[1]), raw, p[4], p[5]))
            continue
        m = _LINE.match(line)
        if m is None:
            continue
        index, trace_id, kind, body = int(m[1]), int(m[2], 16), m[3], m[4]
        cc = _CYCLES.search(body)
        cycles = int(cc[1]) if cc else None
        decode = decodes[trace_id]
        if kind == "INSTR_RANGE":
            r = _RANGE.search(body)
            assert r is not None, line
            decode.ranges.append(Range(index, int(r[1], 16), int(r[2], 16), int(r[3]), int(r[4]), r[5],
                                       r[6] == "E", r[7], cycles))  # fmt: skip
        elif kind == "EXCEPTION":
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


def read_packets(path: Path) -> dict[int, list[Packet]]:
    """The packets alone of every trace source in a `.ppl.xz` listing, by trace ID (faster than
    `read_reference` on long listings: the element lines are skipped unread)."""
    packets: dict[int, list[Packet]] = defaultdict(list)
    for line in lzma.decompress(path.read_bytes()).decode().splitlines():
        if "; [" in line and (p := _PACKET.match(line)) is not None:
            raw = bytes.fromhex(p[3].replace("0x", ""))
            packets[int(p[2], 16)].append(Packet(int(p[1]), raw, p[4], p[5]))
    return dict(packets)
