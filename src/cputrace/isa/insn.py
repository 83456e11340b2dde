"""What decoders of compressed traces need to know about one instruction."""

from __future__ import annotations

import enum
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from ..model import Isa


class Kind(enum.StrEnum):
    """How a control transfer relates to calls, for traces without register values."""

    NONE = "none"  # not a control transfer
    CALL = "call"
    RETURN = "return"
    JUMP = "jump"  # any other branch


@dataclass(frozen=True, slots=True)
class InsnInfo:
    """Facts about the instruction at (address, ISA), from its encoding alone.

    `opcode` is what Tarmac prints: the 32-bit word for A32/A64/SPARC, the halfword for
    16-bit T32 and hw1<<16 | hw2 for 32-bit T32. `next_isa` is the instruction set after
    the instruction when it branches (the same ISA for non-branches; None when it depends
    on a register, as for BX); a condition-failed branch stays in `isa`.
    """

    address: int
    isa: Isa
    size: int
    opcode: int
    mnemonic: str
    operands: str = ""
    is_branch: bool = False  # may move the pc other than to the next instruction
    is_direct: bool = False  # the target is in the encoding
    target: int | None = None  # the target of a direct branch
    next_isa: Isa | None = None
    condition: str | None = None  # condition code ("eq", "ne", ...); None = always
    is_conditional: bool = False  # may not execute/branch: a condition, or CBZ-style test
    kind: Kind = Kind.NONE
    writes_pc: bool = False  # a load or data-processing instruction with pc as destination
    is_load: bool = False
    is_store: bool = False
    transfers: int = 0  # memory transfers: registers of LDM/STM/PUSH/POP, 2 for pairs
    access_size: int = 0  # bytes per transfer (a register of an LSM, a lane of VLDn); 0: no memory access
    is_undefined: bool = False  # encoding that does not decode (or UDF/UNIMP)
    raises_exception: bool = False  # SVC, BKPT, HVC, SMC, BRK, HLT, UDF, SPARC Ticc: a trap by design
    delay_slot: bool = False  # SPARC: the next instruction executes before the target
    annul: bool = False  # SPARC: the annul bit (delay slot skipped unless taken; always for ba,a)
    is_isb: bool = False  # an instruction synchronisation barrier (a waypoint of PTM and ETMv4 traces)
    is_data_barrier: bool = False  # DSB or DMB (a waypoint of PTM traces whose ETMCCER bit 24 is set)

    @property
    def next_address(self) -> int:
        """The address of the following instruction in memory."""
        return self.address + self.size

    @property
    def disasm(self) -> str:
        """Mnemonic and operands as one line of text."""
        return f"{self.mnemonic} {self.operands}" if self.operands else self.mnemonic


Row = tuple[Any, ...]
"""The fields of an InsnInfo in their order, as decoders make them: `InsnInfo(*row)`.

Block decoding keeps rows and builds InsnInfo objects only for the blocks whose
instructions are asked for (a frozen dataclass costs microseconds to build).
"""

_FIELDS = tuple(field.name for field in fields(InsnInfo))
ROW = {name: index for index, name in enumerate(_FIELDS)}
"""Index of each InsnInfo field in a Row."""


def as_row(info: InsnInfo) -> Row:
    return tuple(getattr(info, name) for name in _FIELDS)


# Columns of `Decoded.columns` (int64; addresses and targets as their 64-bit patterns).
C_ADDRESS, C_SIZE, C_OPCODE, C_FACTS, C_TARGET, C_NEXT_ISA, C_KIND, C_TRANSFERS, C_ACCESS = range(9)
C_COUNT = 9
# Fact bits: an instruction's InsnInfo booleans, whether `target` and `condition` are set, and
# whether its kind is a call or a return, in one word (`facts_of`). The decoded columns hold it
# in C_FACTS; analyses keep one a trace row (`factcodes.FactCodes`).
F_BRANCH, F_DIRECT, F_WRITES_PC, F_LOAD, F_STORE, F_UNDEFINED = (1 << n for n in range(6))
F_TRAP, F_CONDITIONAL, F_HAS_CONDITION, F_HAS_TARGET, F_DELAY, F_ANNUL = (1 << n for n in range(6, 12))
F_CALL, F_RETURN = 1 << 12, 1 << 13
F_ISB, F_DATA_BARRIER = 1 << 14, 1 << 15
FLOW_FACTS = (
    F_BRANCH | F_DIRECT | F_HAS_TARGET | F_WRITES_PC | F_CONDITIONAL | F_HAS_CONDITION | F_CALL
    | F_RETURN | F_TRAP | F_UNDEFINED | F_ISB | F_DATA_BARRIER
)  # fmt: skip
"""The fact bits a flow walk reads, which the compiled flow classifiers (`flow_a64`,
`flow_aarch32`) give; capstone's path gives the load/store ones as well."""
NO_ISA = 255
"""C_NEXT_ISA when `next_isa` is None."""
KINDS = tuple(Kind)
"""Kind by its C_KIND value."""
_BIT_FIELDS = (
    ("is_branch", F_BRANCH), ("is_direct", F_DIRECT), ("writes_pc", F_WRITES_PC), ("is_load", F_LOAD),
    ("is_store", F_STORE), ("is_undefined", F_UNDEFINED), ("raises_exception", F_TRAP),
    ("is_conditional", F_CONDITIONAL), ("delay_slot", F_DELAY), ("annul", F_ANNUL), ("is_isb", F_ISB),
    ("is_data_barrier", F_DATA_BARRIER),
)  # fmt: skip
_KIND_BITS = {Kind.NONE: 0, Kind.CALL: F_CALL, Kind.RETURN: F_RETURN, Kind.JUMP: 0}


def _facts(field: Callable[[str], Any]) -> int:
    """The fact bits of the instruction whose fields `field` gives by name."""
    facts = sum(bit for name, bit in _BIT_FIELDS if field(name))
    facts |= F_HAS_CONDITION if field("condition") is not None else 0
    facts |= F_HAS_TARGET if field("target") is not None else 0
    return facts | _KIND_BITS[field("kind")]


def facts_of(info: InsnInfo) -> int:
    """The fact bits of one instruction."""
    return _facts(functools.partial(getattr, info))


FIRST_CHUNK, LARGEST_CHUNK = 8, 256
"""Instructions decoded at a time into `Decoded` runs, doubling up to the largest: a caller
that stops at the first branch decodes little past it."""


@dataclass(frozen=True, slots=True, eq=False)
class Decoded:
    """Consecutive instructions of one ISA as columns, with their rows made only when asked.

    A walk needs the columns alone; the rows (text included) cost microseconds an
    instruction to build, so `make_rows` is called only by those who look at instructions.
    """

    isa: Isa
    columns: np.ndarray  # (instructions, C_COUNT) int64
    make_rows: Callable[[], Sequence[Row]]

    def __len__(self) -> int:
        return len(self.columns)

    def rows(self) -> Sequence[Row]:
        return self.make_rows()

    def head(self, count: int) -> Decoded:
        """The first `count` instructions."""
        if count >= len(self.columns):
            return self
        make_rows = self.make_rows
        return Decoded(self.isa, self.columns[:count], lambda: make_rows()[:count])

    def after(self, count: int) -> Decoded:
        """The instructions after the first `count`."""
        make_rows = self.make_rows
        return Decoded(self.isa, self.columns[count:], lambda: make_rows()[count:])


def columns_of(rows: Sequence[Row]) -> np.ndarray:
    """The columns of instructions given as rows (for decoders that make rows first)."""
    columns = np.zeros((len(rows), C_COUNT), np.uint64)  # every field is an unsigned number
    for index, row in enumerate(rows):
        info = dict(zip(_FIELDS, row, strict=True))
        facts = _facts(info.__getitem__)
        next_isa = NO_ISA if info["next_isa"] is None else int(info["next_isa"])
        columns[index] = (
            info["address"], info["size"], info["opcode"], facts, info["target"] or 0,
            next_isa, KINDS.index(info["kind"]), info["transfers"], info["access_size"],
        )  # fmt: skip
    return columns.view(np.int64)
