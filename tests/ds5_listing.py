"""Reading DS-5 trace listings (tab-separated exports of its Trace view), the reference decodes
of the TC2 ETMv3 snapshot."""

from __future__ import annotations

import lzma
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Ds5Instruction:
    address: int
    opcode: int
    branch: bool  # DS-5's Branch column
    failed: bool  # condition failed
    cycles: int


@dataclass(frozen=True)
class Ds5Listing:
    """`flow`: instructions in order, None where another record (trace off/on, an exception
    return) breaks the flow; `cycle_counts`: the Cycle Count records; `timestamps`."""

    flow: list[Ds5Instruction | None]
    cycle_counts: list[int]
    timestamps: list[int]

    @property
    def instructions(self) -> list[Ds5Instruction]:
        return [r for r in self.flow if r is not None]


def read_ds5_listing(path: Path) -> Ds5Listing:
    """A listing, plain or xz-compressed (.xz)."""
    text = lzma.decompress(path.read_bytes()).decode() if path.suffix == ".xz" else path.read_text()
    flow: list[Ds5Instruction | None] = []
    cycle_counts, timestamps = [], []
    for line in text.splitlines()[1:]:
        fields = line.split("\t")
        if fields[0] == "Instruction":
            address = int(fields[2].split(":")[-1], 16)
            flow.append(Ds5Instruction(address, int(fields[3], 16), fields[6] == "true", fields[7] == "fail",
                                       int(fields[4])))  # fmt: skip
        elif fields[0] == "Timestamp":
            timestamps.append(int(fields[5].split(":")[-1]))
        else:
            flow.append(None)
            if fields[0] == "Cycle Count":
                cycle_counts.append(int(fields[4]))
    return Ds5Listing(flow, cycle_counts, timestamps)
