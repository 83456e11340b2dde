"""What call detection tells its consumers: per chunk of a core, a log of typed records.

Detection (detect.py) decides calls as the instructions stream past; a `CallLog` is what it
decided over one chunk of one core, in order. Consumers (the calling-context sums,
contexts.py; the frame spill, frames.py) read a log and keep what they need; they never
touch the detector. Rows of `calls` are numbered; when detection frees the rows of
decided calls it renumbers the rest, and says so in the next log (`kept`).

Records (numpy structured dtypes, read and written field by field in compiled code):

- `SITE`: one instruction, (seq, time, pc, src); seq -1 where there is none.
- `CALL`: a potential call (register rule) or an open frame (ISA rule): its call site (the
  call instruction), entry site (the callee's first instruction) and `entry_index`, the
  core's instructions before the entry.
- `END`: a detected call's end: its `call` row, `end_index` (the core's instructions before
  its resume site), exit site (the callee's last instruction) and resume site (first
  instruction after the return; seq -1 if it never returned).
- `EVENT`: one decision, at instruction `index`: a `call` row OPENED, an `END` row ENDED
  its call, a `call` row DIED (never a call: sp rose above it, another took its sp and lr,
  or the trace ended).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np


class Method(enum.StrEnum):
    """Which rule finds calls: from lr/sp writes, from instruction semantics, or chosen per core."""

    AUTO = "auto"
    REGISTERS = "registers"
    ISA = "isa"


SITE = np.dtype([("seq", "<i8"), ("time", "<i8"), ("pc", "<i8"), ("src", "<i8")])
CALL = np.dtype([("entry_index", "<i8"), ("call", SITE), ("entry", SITE)])
END = np.dtype([("call", "<i8"), ("end_index", "<i8"), ("exit", SITE), ("resume", SITE)])
EVENT = np.dtype([("kind", "<i8"), ("ref", "<i8"), ("index", "<i8")])
OPENED, ENDED, DIED = 0, 1, 2  # EVENT kinds; `ref` is a CALL row, an END row, a CALL row

NO_SITE = np.array((-1, -1, -1, -1), SITE)[()]
"""A SITE of -1s: none."""


@dataclass(frozen=True)
class CallLog:
    """What detection decided over one chunk of one core (or, `final`, at the trace's end).

    `calls`, `ends` and `events` are views of the detector's rows, valid until its next feed:
    read them, do not keep them. `events` refer to rows of `calls` and `ends` by number.
    """

    cpu: int
    method: Method  # the rule the core's calls are decided by (REGISTERS or ISA)
    start: int  # the core's instructions before the chunk
    count: int  # the core's instructions up to the chunk's end
    has_time: bool  # every instruction of the core so far has a time
    first: np.void  # SITE of the core's first instruction
    last: np.void  # SITE of the core's last instruction so far
    kept: np.ndarray  # `calls` rows kept from before this log: new row i was row kept[i]
    calls: np.ndarray  # CALL rows, by number
    ends: np.ndarray  # END rows of the calls ended in this log
    events: np.ndarray  # EVENT rows, in the order decided
    pc: np.ndarray  # int64: the chunk's instructions (none in the final log), whose events
    time: np.ndarray  # are those at their index; charging a call's instructions needs them
    final: bool = False  # the trace ended: open ISA frames ended, undecided calls died

    @property
    def by_registers(self) -> bool:
        """Whether OPENED calls are potential calls, known to be calls only when they end."""
        return self.method is Method.REGISTERS
