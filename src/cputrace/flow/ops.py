"""Waypoint ops: what a decoder tells the walk (`Ops`, one `OP` record per op), and why a walk
loses its place (`GapReason`).

Each op kind uses the operands that carry its meaning; the others stay 0:

| kind      | address                        | target        | count        | flags         |
|-----------|--------------------------------|---------------|--------------|---------------|
| SYNC      | where the walk (re)starts      |               |              |               |
| ATOM      |                                |               |              | ATOM_EXECUTED |
| RUN       |                                |               | instructions | RUN_*         |
| BRANCH    | the taken branch               | where it went |              |               |
| TARGET    | where an indirect branch went  |               |              |               |
| EXCEPTION | the vector                     |               |              | EXCEPTION_*   |
| WAYPOINT  | (TO_/BEFORE_ADDRESS) where it ends |               |              | WAYPOINT_*    |
| GAP, TRAP |                                |               |              |               |

`isa` is the instruction set at `address` (or `target` for BRANCH); `cycles` and `time` are
NO_TIME when the record gives none; `src` is the line or byte offset of the record in the input.
"""

from __future__ import annotations

import enum

import numpy as np

from ..kernels.records import joined, opaque
from ..model import Isa


class Op(enum.IntEnum):
    """Waypoint op kinds."""

    SYNC = 0  # the walk (re)starts at `address` (I-sync, trace on, a resume)
    ATOM = 1  # the next instruction executed (ATOM_EXECUTED) or failed its condition; `cycles`
    RUN = 2  # `count` instructions ran in sequence
    BRANCH = 3  # run in sequence to the branch at `address`, which was taken to `target` (FD/FI)
    TARGET = 4  # the walk goes on at `address`: where the last taken indirect branch went
    EXCEPTION = 5  # an exception entered the vector at `address`
    GAP = 6  # the trace stops here (trace off, overflow); the decoder reports why
    TRAP = 7  # run in sequence to the next exception-generating instruction (SVC, UDF, Ticc)
    WAYPOINT = 8  # run in sequence to the next waypoint (branch or ISB), taken or not; its `cycles`


ATOM_EXECUTED = 1
"""`flags` bit of ATOM: the instruction executed (clear: it failed its condition)."""
RUN_TAKEN = 1
"""`flags` bit of RUN: its last instruction was a taken branch."""
RUN_THUMB_PAIRS = 2
"""`flags` bit of RUN: `count` counts a Thumb BL/BLX pair (one 32-bit T32 row) as two
instructions, as ARMv4T/ARMv5 cores and their traces do: there the pair is two 16-bit
instructions."""
EXCEPTION_CANCELS = 1
"""`flags` bit of EXCEPTION: the exception cancelled the last instruction (it did not complete)."""
EXCEPTION_NO_VECTOR = 2
"""`flags` bit of EXCEPTION: the vector is unknown; the walk resumes at the next address."""
WAYPOINT_TAKEN = 1
"""`flags` bit of WAYPOINT: an E atom (the waypoint executed; a branch was taken); clear: N."""
WAYPOINT_RETURN_STACK = 2
"""`flags` bit of WAYPOINT: the trace keeps a return stack: a taken call pushes its return
address, and a taken indirect branch whose target the trace does not give (no
WAYPOINT_TARGET_FOLLOWS) goes to the address it pops (PTM, ETMv4)."""
WAYPOINT_TARGET_FOLLOWS = 4
"""`flags` bit of WAYPOINT: a TARGET op follows with where a taken indirect branch went."""
WAYPOINT_TO_ADDRESS = 8
"""`flags` bit of WAYPOINT: run in sequence up to and including the instruction at `address`
(a PTM waypoint update); the conditional branches it passes were not taken."""
WAYPOINT_BEFORE_ADDRESS = 16
"""`flags` bit of WAYPOINT: run in sequence up to the instruction at `address`, not including
it (an ETMv4 exception's preferred return address): none when the walk is there already; the
conditional branches it passes were not taken."""
WAYPOINT_DATA_BARRIERS = 32
"""`flags` bit of WAYPOINT: DSB and DMB are waypoints too, as branches and ISBs are (a PTM
whose ETMCCER bit 24 is set)."""
RETURN_STACK_DEPTH = 16
"""Return addresses a walk keeps; a deeper push forgets the oldest."""

NO_TIME = np.iinfo(np.int64).min
"""`cycles` and `time` value meaning none."""

OP = np.dtype(
    [
        ("address", "<u8"), ("target", "<u8"), ("count", "<i8"), ("cycles", "<i8"), ("time", "<i8"),
        ("src", "<i8"), ("kind", "u1"), ("isa", "u1"), ("flags", "u1"),
    ],
    align=True,
)  # fmt: skip
"""One waypoint op (see the table above)."""


class _Column:
    """An `Ops` attribute: one field of its records, as a NumPy view."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, ops: Ops, owner: type | None = None) -> np.ndarray:
        return ops.records[self.name]


class Ops:
    """A column of waypoint ops, as decoders build them: an OP record array."""

    kind = _Column()  # Op
    address = _Column()
    target = _Column()
    count = _Column()
    flags = _Column()
    isa = _Column()  # Isa
    cycles = _Column()
    time = _Column()
    src = _Column()

    def __init__(self, records: np.ndarray) -> None:
        self.records = records

    @classmethod
    def empty(cls, n: int) -> Ops:
        """`n` ops with every operand 0 and no cycles or time, to fill in."""
        records = np.zeros(n, OP)
        records["cycles"] = records["time"] = NO_TIME
        return cls(records)

    @classmethod
    def of(cls, kind: np.ndarray, **columns: np.ndarray | int) -> Ops:
        """Ops of the kinds `kind` from columns (or one value for all) named like OP's fields;
        the rest as `empty`."""
        ops = cls.empty(len(kind))
        ops.records["kind"] = kind
        for name, column in columns.items():
            ops.records[name] = column
        return ops

    def __len__(self) -> int:
        return len(self.records)

    def select(self, which: slice | np.ndarray) -> Ops:
        """The ops at `which` (a slice, index array or mask)."""
        return Ops(opaque(self.records)[which].view(OP))

    @classmethod
    def concat(cls, *parts: Ops) -> Ops:
        return cls(joined([p.records for p in parts], OP))


class OpBuffer:
    """Builds `Ops` one record at a time, for decoders whose records come one by one."""

    def __init__(self) -> None:
        self._rows: list[tuple[int, ...]] = []

    def __len__(self) -> int:
        return len(self._rows)

    def add(
        self, kind: Op, *, address: int = 0, target: int = 0, count: int = 0, flags: int = 0,
        isa: Isa | int = 0, cycles: int | None = None, time: int | None = None, src: int = 0,
    ) -> None:  # fmt: skip
        """One op; the operands its kind does not use stay 0 (see the module's table)."""
        cycles = NO_TIME if cycles is None else cycles
        time = NO_TIME if time is None else time
        self._rows.append((address, target, count, cycles, time, src, kind, int(isa), flags))

    def take(self) -> Ops:
        """The ops added so far; the buffer starts afresh."""
        rows, self._rows = self._rows, []
        return Ops(np.array(rows, OP) if rows else np.zeros(0, OP))


class GapReason(enum.IntEnum):
    """Why the walk lost its place (`trace_gap` events' `number`; `name` is the lower-case name).

    The first three are anomalies, reported where they happen; the others only when an op
    needs the position before the trace gives an address again.
    """

    NO_CODE = 1  # the image has no instruction at the address
    UNDEFINED = 2  # the bytes at the address do not decode (or are an undefined instruction)
    MISMATCH = 3  # the trace contradicts the image (a branch the trace says was not taken)
    NO_TARGET = 4  # an indirect branch was taken and the trace gave no target
    VECTOR = 5  # an exception entered a handler at an address the trace does not give


LOSS_NAMES = frozenset(reason.name.lower() for reason in GapReason)
"""The `trace_gap` event names of a walk losing its place (decoders' own gaps have others)."""

GAP_TEXT = {
    GapReason.NO_CODE: "no instruction in the program image at this address",
    GapReason.UNDEFINED: "undecodable or undefined instruction in the image at this address",
    GapReason.MISMATCH: "the trace contradicts the program image here",
    GapReason.NO_TARGET: "an indirect branch was taken but the trace gave no target",
    GapReason.VECTOR: "an exception entered a handler the trace does not locate",
}
