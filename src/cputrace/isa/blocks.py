"""Basic blocks decoded once per (address, ISA) and replayed from a cache.

A flow walker turns millions of trace atoms into instructions; it must not touch capstone
or build Python objects per instruction. Each block is decoded the first time it is
reached, stored as numpy arrays and rows of facts (InsnInfo objects are built only when
asked for), and found again with one dict lookup.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..image import Image, ImageError
from ..model import Isa
from .dispatch import decode_rows
from .insn import ROW, InsnInfo, Row

MAX_BLOCK = 1024
"""Instructions in a block without a branch; a longer straight run continues in the next."""

_WINDOW = MAX_BLOCK * 4 + 32  # bytes read per block: the cap, plus an IT block or delay slot
_ADDRESS, _SIZE, _OPCODE = ROW["address"], ROW["size"], ROW["opcode"]
_BRANCH, _CONDITIONAL, _UNDEFINED, _DELAY = (
    ROW[name] for name in ("is_branch", "is_conditional", "is_undefined", "delay_slot")
)


class Stop(enum.Enum):
    """Why a block ends where it does."""

    BRANCH = "branch"  # at a branch (SPARC: its delay slot is the block's last instruction)
    UNDEFINED = "undefined"  # at an instruction that does not decode
    NO_MEMORY = "no_memory"  # the image ends (or has a gap) after the last instruction
    LIMIT = "limit"  # MAX_BLOCK instructions without a branch
    KNOWN = "known"  # before an instruction the caller has decoded already


@dataclass(frozen=True, slots=True, eq=False)
class Block:
    """The instructions from `start` up to and including the next branch.

    The arrays are read-only and shared by every walk that replays the block.
    """

    isa: Isa
    pcs: np.ndarray  # uint64
    sizes: np.ndarray  # uint8
    opcodes: np.ndarray  # uint32
    rows: tuple[Row, ...]  # the InsnInfo fields of each instruction
    stop: Stop
    branch_index: int | None  # where the branch that ends the block is, when it ends at one
    _insns: tuple[InsnInfo, ...] | None = field(default=None, repr=False)

    @property
    def insns(self) -> tuple[InsnInfo, ...]:
        """The instructions as InsnInfo, built on first use."""
        if self._insns is None:
            object.__setattr__(self, "_insns", tuple(InsnInfo(*row) for row in self.rows))
        return self._insns  # type: ignore[return-value]

    @property
    def branch(self) -> InsnInfo | None:
        """The branch that ends the block, when it ends at one."""
        return None if self.branch_index is None else self.insns[self.branch_index]

    @property
    def start(self) -> int:
        return self.rows[0][_ADDRESS]

    @property
    def next_address(self) -> int:
        """Where execution goes on when the block falls through."""
        return self.rows[-1][_ADDRESS] + self.rows[-1][_SIZE]

    def __len__(self) -> int:
        return len(self.rows)


class BlockCache:
    """Blocks of one image by (address, ISA); each is decoded only the first time it is asked.

    A block that starts inside a T32 IT block (never a branch target) cannot know the IT
    conditions; everything else is the same whichever block an instruction is reached in.
    """

    def __init__(self, image: Image) -> None:
        self.image = image
        self._blocks: dict[int, Block] = {}

    def __len__(self) -> int:
        """How many blocks have been decoded."""
        return len(self._blocks)

    def block_at(self, address: int, isa: Isa) -> Block:
        """The block starting at `address`; ImageError if the image has no instruction there."""
        block = self._blocks.get((address << 3) | isa)
        if block is None:
            block = self._blocks[(address << 3) | isa] = decode_block(self.image, address, isa)
        return block

    def insn_at(self, address: int, isa: Isa) -> InsnInfo:
        """The instruction at `address` (the first of the block starting there)."""
        return self.block_at(address, isa).insns[0]


def decode_block(
    image: Image,
    address: int,
    isa: Isa,
    known: Callable[[int], bool] | None = None,
    *,
    through_conditional: bool = False,
) -> Block:
    """The block from `address` up to and including the next branch (and its delay slot).

    `known(address)` lets a caller with its own index stop the block before an instruction
    it has decoded already (never between a branch and its delay slot). With
    `through_conditional`, the block goes on past conditional branches without a delay
    slot (what follows them is code: it runs when they are not taken), for a caller that
    links instructions itself; `branch` is then the branch that ends the block.
    """
    code = image.read_upto(address, _WINDOW)
    rows: list[Row] = []
    stop, branch = Stop.NO_MEMORY, None
    for row in decode_rows(code, address, isa):
        if branch is not None:  # the delay slot of a SPARC branch
            rows.append(row)
            stop = Stop.BRANCH
            break
        if known is not None and rows and known(row[_ADDRESS]):
            stop = Stop.KNOWN  # the rest is decoded already: do not decode it again
            break
        if len(rows) >= MAX_BLOCK and not row[_CONDITIONAL]:
            stop = Stop.LIMIT  # never between an IT and the instructions it covers
            break
        rows.append(row)
        if row[_UNDEFINED]:
            stop = Stop.UNDEFINED
            break
        if row[_BRANCH]:
            if through_conditional and row[_CONDITIONAL] and not row[_DELAY]:
                continue
            branch = len(rows) - 1
            stop = Stop.BRANCH
            if not row[_DELAY]:
                break
    if not rows:
        raise ImageError(
            f"0x{address:x}: no {isa.name} instruction in the program image there"
            + (" (it runs past the end of the image)" if code else "")
        )
    if branch is not None and branch == len(rows) - 1 and rows[branch][_DELAY]:
        stop = Stop.NO_MEMORY  # the delay slot is missing from the image
    return Block(
        isa=isa,
        pcs=_frozen(np.array([row[_ADDRESS] for row in rows], dtype=np.uint64)),
        sizes=_frozen(np.array([row[_SIZE] for row in rows], dtype=np.uint8)),
        opcodes=_frozen(np.array([row[_OPCODE] for row in rows], dtype=np.uint32)),
        rows=tuple(rows),
        stop=stop,
        branch_index=branch,
    )


def _frozen(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array
