"""Basic blocks decoded once per (address, ISA) and replayed from a cache.

A flow walker turns millions of trace atoms into instructions; it must not touch capstone
or build Python objects per instruction. Each block is decoded the first time it is
reached, stored as columns of facts (`insn.Decoded`; rows and InsnInfo objects, with the
instructions' text, are built only when asked for), and found again with one dict lookup.
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numba
import numpy as np

from ..image import Image, ImageError
from ..model import Isa
from .dispatch import decode_runs
from .insn import (
    C_ADDRESS,
    C_FACTS,
    C_OPCODE,
    C_SIZE,
    F_BRANCH,
    F_CONDITIONAL,
    F_DELAY,
    F_UNDEFINED,
    Decoded,
    InsnInfo,
    Row,
)  # fmt: skip

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

    The arrays are read-only and shared by every walk that replays the block. Rows and
    InsnInfo objects (with the instructions' text) are built only when asked for.
    """

    isa: Isa
    columns: np.ndarray  # (instructions, insn.C_COUNT) int64
    stop: Stop
    branch_index: int | None  # where the branch that ends the block is, when it ends at one
    make_rows: Callable[[], tuple[Row, ...]] = field(repr=False)
    _rows: tuple[Row, ...] | None = field(default=None, repr=False)
    _insns: tuple[InsnInfo, ...] | None = field(default=None, repr=False)

    @property
    def rows(self) -> tuple[Row, ...]:
        """The InsnInfo fields of each instruction, built on first use."""
        if self._rows is None:
            object.__setattr__(self, "_rows", self.make_rows())
        return self._rows  # type: ignore[return-value]

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
    def pcs(self) -> np.ndarray:
        return _frozen(self.columns[:, C_ADDRESS].astype(np.uint64))

    @property
    def sizes(self) -> np.ndarray:
        return _frozen(self.columns[:, C_SIZE].astype(np.uint8))

    @property
    def opcodes(self) -> np.ndarray:
        return _frozen(self.columns[:, C_OPCODE].astype(np.uint32))

    @property
    def start(self) -> int:
        return int(self.columns[0, C_ADDRESS])

    @property
    def next_address(self) -> int:
        """Where execution goes on when the block falls through."""
        return int(self.columns[-1, C_ADDRESS]) + int(self.columns[-1, C_SIZE])

    def __len__(self) -> int:
        return len(self.columns)


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
    known: Callable[[np.ndarray], np.ndarray] | None = None,
    *,
    through_conditional: bool = False,
    leftovers: dict[int, Decoded] | None = None,
) -> Block:
    """The block from `address` up to and including the next branch (and its delay slot).

    `known(addresses)` (int64; returns a mask of them) lets a caller with its own index stop
    the block before an instruction it has decoded already (never between a branch and its
    delay slot). With `through_conditional`, the block goes on past conditional branches without
    a delay slot (what follows them is code: it runs when they are not taken), for a caller
    that links instructions itself; `branch` is then the branch that ends the block.

    `leftovers` (address << 3 | ISA of their first instruction -> instructions) keeps what was
    decoded past the end of blocks that end at a branch, and is where a block looks first:
    the block after a call, where the call returns, then costs no decoding. (No IT block
    spans a branch's end, so the instructions are what decoding from there would give.)
    """
    code = image.read_upto(address, _WINDOW)
    parts: list[Decoded] = []
    length, stop, branch, delay_slot_due = 0, Stop.NO_MEMORY, None, False
    for run in _runs(code, address, isa, leftovers):
        if delay_slot_due:  # the delay slot of a SPARC branch
            parts.append(run.head(1))
            stop, delay_slot_due = Stop.BRANCH, False
            _leave(run, 1, leftovers)
            break
        addresses = run.columns[:, C_ADDRESS]
        known_here = np.zeros(len(run), np.bool_) if known is None else known(addresses)
        kept, ends, at = _end_in(run.columns[:, C_FACTS], known_here, length, through_conditional)
        parts.append(run.head(kept))
        if at >= 0:
            branch = length + at
            delay_slot_due = kept == at + 1 and bool(run.columns[at, C_FACTS] & F_DELAY)
        length += kept
        if ends:
            stop = _STOPS[ends]
            if not delay_slot_due:
                if stop is Stop.BRANCH:
                    _leave(run, kept, leftovers)
                break
    if delay_slot_due:
        stop = Stop.NO_MEMORY  # the delay slot is missing from the image
    if not any(len(part) for part in parts):
        raise ImageError(
            f"0x{address:x}: no {isa.name} instruction in the program image there"
            + (" (it runs past the end of the image)" if code else "")
        )
    columns = parts[0].columns if len(parts) == 1 else np.concatenate([part.columns for part in parts])
    return Block(
        isa=isa,
        columns=_frozen(columns),
        stop=stop,
        branch_index=branch,
        make_rows=lambda: tuple(itertools.chain.from_iterable(part.rows() for part in parts)),
    )


def _runs(code: bytes, address: int, isa: Isa, leftovers: dict[int, Decoded] | None) -> Iterator[Decoded]:
    """The instructions from `address` on: those left over from another block, then decoded."""
    first = leftovers.pop((address << 3) | isa, None) if leftovers is not None else None
    offset = 0
    if first is not None:
        yield first
        offset = int(first.columns[:, C_SIZE].sum())
    yield from decode_runs(code[offset:], address + offset, isa)


def _leave(run: Decoded, used: int, leftovers: dict[int, Decoded] | None) -> None:
    """Keep the instructions of `run` after the first `used`, for the block that starts there."""
    if leftovers is not None and used < len(run):
        rest = run.after(used)
        leftovers[(int(rest.columns[0, C_ADDRESS]) << 3) | rest.isa] = rest


_STOPS = (None, Stop.KNOWN, Stop.LIMIT, Stop.UNDEFINED, Stop.BRANCH)


@numba.njit(cache=True, nogil=True)
def _end_in(
    facts: np.ndarray, known: np.ndarray, before: int, through_conditional: bool
) -> tuple[int, int, int]:
    """Where a block whose first `before` instructions precede these ends in them.

    Returns how many of them it keeps, why it ends (an index of _STOPS; 0: it goes on past
    them) and where its branch is among them (-1: none). A block ends before an instruction
    decoded already or past MAX_BLOCK (never inside an IT block), and after an undefined
    instruction or a branch (and its delay slot, when the slot is among them).
    """
    for i in range(len(facts)):
        fact, position = facts[i], before + i
        if known[i] and position > 0:
            return i, 1, -1
        if position >= MAX_BLOCK and not fact & F_CONDITIONAL:
            return i, 2, -1
        if fact & F_UNDEFINED:
            return i + 1, 3, -1
        if fact & F_BRANCH and not (through_conditional and fact & F_CONDITIONAL and not fact & F_DELAY):
            return min(len(facts), i + (2 if fact & F_DELAY else 1)), 4, i
    return len(facts), 0, -1


def _frozen(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array
