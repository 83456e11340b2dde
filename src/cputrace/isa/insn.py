"""What decoders of compressed traces need to know about one instruction."""

from __future__ import annotations

import enum
from dataclasses import dataclass, fields
from typing import Any

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
