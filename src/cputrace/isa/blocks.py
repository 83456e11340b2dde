"""Basic blocks decoded once per (address, ISA) and replayed from a cache.

A flow walker turns millions of trace atoms into instructions; it must not touch capstone
or build Python objects per instruction. Each block is decoded the first time it is
reached, stored as numpy arrays, and found again with one dict lookup.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..image import Image, ImageError
from ..model import Isa
from .dispatch import decode_run
from .insn import InsnInfo

MAX_BLOCK = 1024
"""Instructions in a block without a branch; a longer straight run continues in the next."""

_WINDOW = MAX_BLOCK * 4 + 32  # bytes read per block: the cap, plus an IT block or delay slot


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
    insns: tuple[InsnInfo, ...]
    stop: Stop
    branch: InsnInfo | None  # the branch that ends the block, when it ends at one

    @property
    def start(self) -> int:
        return self.insns[0].address

    @property
    def next_address(self) -> int:
        """Where execution goes on when the block falls through."""
        return self.insns[-1].next_address

    def __len__(self) -> int:
        return len(self.insns)


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
    image: Image, address: int, isa: Isa, known: Callable[[int], bool] | None = None
) -> Block:
    """The block from `address` up to and including the next branch (and its delay slot).

    `known(address)` lets a caller with its own index stop the block before an instruction
    it has decoded already (never between a branch and its delay slot).
    """
    code = image.read_upto(address, _WINDOW)
    insns: list[InsnInfo] = []
    stop, branch = Stop.NO_MEMORY, None
    for info in decode_run(code, address, isa):
        if branch is not None:  # the delay slot of a SPARC branch
            insns.append(info)
            stop = Stop.BRANCH
            break
        if known is not None and insns and known(info.address):
            stop = Stop.KNOWN  # the rest is decoded already: do not decode it again
            break
        if len(insns) >= MAX_BLOCK and not info.is_conditional:
            stop = Stop.LIMIT  # never between an IT and the instructions it covers
            break
        insns.append(info)
        if info.is_undefined:
            stop = Stop.UNDEFINED
            break
        if info.is_branch:
            branch = info
            stop = Stop.BRANCH
            if not info.delay_slot:
                break
    if not insns:
        raise ImageError(
            f"0x{address:x}: no {isa.name} instruction in the program image there"
            + (" (it runs past the end of the image)" if code else "")
        )
    if branch is not None and insns[-1] is branch and branch.delay_slot:
        stop = Stop.NO_MEMORY  # the delay slot is missing from the image
    return Block(
        isa=isa,
        pcs=_frozen(np.array([i.address for i in insns], dtype=np.uint64)),
        sizes=_frozen(np.array([i.size for i in insns], dtype=np.uint8)),
        opcodes=_frozen(np.array([i.opcode for i in insns], dtype=np.uint32)),
        insns=tuple(insns),
        stop=stop,
        branch=branch,
    )


def _frozen(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array
