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

import numpy as np

from ..image import Image, ImageError
from ..model import Isa
from .arm import ARM_ISAS, arm_block, arm_rows
from .dispatch import decode_runs
from .ends import WINDOW, end_in
from .index import AddressIndex
from .insn import C_ADDRESS, C_COUNT, C_FACTS, C_OPCODE, C_SIZE, F_DELAY, Decoded, InsnInfo, Row


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
    known: AddressIndex | None = None,
    *,
    through_conditional: bool = False,
    leftovers: dict[int, Decoded] | None = None,
) -> Block:
    """The block from `address` up to and including the next branch (and its delay slot).

    `known` (keys address << 3 | ISA) lets a caller with its own index stop the block before
    an instruction it has decoded already (never between a branch and its delay slot). With
    `through_conditional`, the block goes on past conditional branches without a delay slot
    (what follows them is code: it runs when they are not taken), for a caller that links
    instructions itself; `branch` is then the branch that ends the block.

    `leftovers` (address << 3 | ISA of their first instruction -> instructions) keeps what was
    decoded past the end of blocks that end at a branch, and is where a block looks first:
    the block after a call, where the call returns, then costs no decoding. (No IT block
    spans a branch's end, so the instructions are what decoding from there would give.)

    A32, T32 and A64 blocks are decoded in one compiled call (`arm_block`); the others a run
    at a time.
    """
    code = image.read_upto(address, WINDOW)
    first = leftovers.pop((address << 3) | isa, None) if leftovers is not None else None
    if isa in ARM_ISAS:
        columns, ends, branch, rest = arm_block(
            code, address, isa, known, through_conditional, None if first is None else first.columns
        )
        stop = _STOPS[ends] or Stop.NO_MEMORY
        if leftovers is not None and len(rest):
            leftovers[(int(rest[0, C_ADDRESS]) << 3) | isa] = Decoded(
                isa, rest, _rows_at(code, address, rest, isa)
            )
        make_rows = _rows_at(code, address, columns, isa)
    else:
        columns, stop, branch, make_rows = _decode_runs(
            code, address, isa, known, through_conditional, first, leftovers
        )
    if not len(columns):
        raise no_instruction(address, isa, code)
    return Block(
        isa=isa,
        columns=_frozen(columns),
        stop=stop,
        branch_index=branch if branch >= 0 else None,
        make_rows=make_rows,
    )


def decode_columns(
    image: Image, address: int, isa: Isa, known: AddressIndex, leftovers: dict[int, np.ndarray]
) -> np.ndarray:
    """The columns of `decode_block(image, address, isa, known, through_conditional=True)`, alone.

    For a walk's program, which keeps the facts of the instructions and never their text: no
    Block, no rows, and `leftovers` (as in decode_block) holds columns. A program decodes
    hundreds of blocks as a trace starts, and building those objects was a fifth of the cost.
    """
    key = (address << 3) | isa
    code = image.read_upto(address, WINDOW)
    first = leftovers.pop(key, None)
    if isa in ARM_ISAS:
        columns, _, _, rest = arm_block(code, address, isa, known, True, first)
        if len(rest):
            leftovers[(int(rest[0, C_ADDRESS]) << 3) | isa] = rest
    else:
        left: dict[int, Decoded] = {}
        begun = None if first is None else Decoded(isa, first, tuple)  # its rows are never asked for
        columns = _decode_runs(code, address, isa, known, True, begun, left)[0]
        leftovers.update((start, rest.columns) for start, rest in left.items())
    if not len(columns):
        raise no_instruction(address, isa, code)
    return columns


def no_instruction(address: int, isa: Isa, code: bytes) -> ImageError:
    """The error for a block with no instruction: `code` (the bytes from `address`) ends first."""
    return ImageError(no_instruction_text(address, isa.name, bool(code)))


def no_instruction_text(address: int, isa_name: str, past_end: bool) -> str:
    """`no_instruction`'s text, for callers that name thousands of addresses outside the image
    (an error object and an Isa each took 10 times as long as the text)."""
    return f"0x{address:x}{no_instruction_words(isa_name, past_end)}"


def no_instruction_words(isa_name: str, past_end: bool) -> str:
    """What follows the address in `no_instruction_text` (flow/gaptexts writes the address
    itself)."""
    return f": no {isa_name} instruction in the program image there" + (
        " (it runs past the end of the image)" if past_end else ""
    )


def _rows_at(code: bytes, address: int, columns: np.ndarray, isa: Isa) -> Callable[[], tuple[Row, ...]]:
    """The rows of instructions decoded from `code` (at `address`): decoded again when asked
    for, as the text of the instructions is not kept."""
    offset = int(columns[0, C_ADDRESS]) - address if len(columns) else 0
    return lambda: tuple(itertools.islice(arm_rows(code[offset:], address + offset, isa), len(columns)))


def _decode_runs(
    code: bytes, address: int, isa: Isa, known: AddressIndex | None, through_conditional: bool,
    first: Decoded | None, leftovers: dict[int, Decoded] | None,
) -> tuple[np.ndarray, Stop, int, Callable[[], tuple[Row, ...]]]:  # fmt: skip
    """`decode_block` a run at a time (`decode_runs`): the block's columns, stop, branch and rows."""
    parts: list[Decoded] = []
    length, stop, branch, delay_slot_due = 0, Stop.NO_MEMORY, -1, False
    for run in _runs(code, address, isa, first):
        if delay_slot_due:  # the delay slot of a SPARC branch
            parts.append(run.head(1))
            stop, delay_slot_due = Stop.BRANCH, False
            _leave(run, 1, leftovers)
            break
        addresses = run.columns[:, C_ADDRESS]
        known_here = np.zeros(len(run), np.bool_) if known is None else known.contains(addresses, int(isa))
        kept, ends, at = end_in(run.columns[:, C_FACTS], known_here, length, through_conditional)
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
    columns = (
        parts[0].columns if len(parts) == 1
        else np.concatenate([part.columns for part in parts]) if parts
        else np.zeros((0, C_COUNT), np.int64)
    )  # fmt: skip
    return columns, stop, branch, lambda: tuple(itertools.chain.from_iterable(part.rows() for part in parts))


def _runs(code: bytes, address: int, isa: Isa, first: Decoded | None) -> Iterator[Decoded]:
    """The instructions from `address` on: those left over from another block, then decoded."""
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


_STOPS = (None, Stop.KNOWN, Stop.LIMIT, Stop.UNDEFINED, Stop.BRANCH)  # by ends code


def _frozen(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array
