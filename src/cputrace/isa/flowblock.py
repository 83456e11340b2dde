"""A walk's blocks decoded by the compiled flow classifiers, without capstone.

A walk of a compressed trace needs of each instruction only its flow facts (`flow_a64`,
`flow_aarch32`);
capstone's detailed decode costs microseconds an instruction and a round of Python per
block. `flow_block` classifies a block's instructions one by one from the image bytes and
ends it by the rules every block decoder follows (`ends.end_at`), in one compiled call,
writing the same columns (`insn.C_*`) as capstone's path (`blocks.decode_columns`).
Capstone still decodes everything that shows instructions (text, load/store facts).
"""

from __future__ import annotations

import numba
import numpy as np

from ..model import Isa
from .ends import GOES_ON, KNOWN, LIMIT, WINDOW, end_at
from .flow_a64 import a64_flow
from .flow_aarch32 import a32_flow, t32_flow
from .index import MISSING, lookup
from .insn import C_COUNT, C_FACTS, C_SIZE

FLOW_ISAS = frozenset({Isa.A32, Isa.T32, Isa.A64})
"""The instruction sets `flow_block` decodes."""
BLOCK_ROWS = WINDOW // 2 + 1
"""Rows `flow_block` may write from a WINDOW of bytes: one per instruction (T32: 2 bytes or 4)."""
_A32, _T32 = int(Isa.A32), int(Isa.T32)


def block_rows() -> np.ndarray:
    """An array for `flow_block`'s rows."""
    return np.empty((BLOCK_ROWS, C_COUNT), np.int64)


@numba.njit(cache=True, nogil=True)
def flow_block(
    code: np.ndarray, address: int, isa: int, index: np.ndarray, out: np.ndarray
) -> tuple[int, int]:
    """The block at the start of `code` (bytes at `address`), into the first rows of `out`.

    As a walk's program decodes it: through conditional branches, up to the next other
    branch, before an address `index` (keys address << 3 | ISA) holds, after an undefined
    instruction, MAX_BLOCK instructions at most. Returns how many rows and why it ends (an
    `ends` code; GOES_ON when the bytes end first). `isa` must be one of FLOW_ISAS. A T32 block
    follows the IT blocks it holds (one that starts inside an IT block cannot know it, as
    capstone's path cannot).
    """
    offset = count = it_state = 0
    while count < len(out):
        at = address + offset
        if isa == _T32:
            it_state = t32_flow(code, offset, at, it_state, out[count])
            if out[count, C_SIZE] == 0:
                break  # the bytes end inside the instruction
        elif offset + 4 > len(code):
            break
        elif isa == _A32:
            a32_flow(_word(code, offset), at, out[count])
        else:
            a64_flow(_word(code, offset), at, out[count])
        why = end_at(out[count, C_FACTS], lookup(index, (at << 3) | isa) != MISSING, count, True)
        if why in (KNOWN, LIMIT):
            return count, why
        offset += out[count, C_SIZE]
        count += 1
        if why != GOES_ON:
            return count, why
    return count, GOES_ON


@numba.njit(cache=True, nogil=True, inline="always")
def _word(code: np.ndarray, offset: int) -> int:
    """The little-endian 32-bit word at code[offset]."""
    return (
        np.int64(code[offset]) | (np.int64(code[offset + 1]) << 8) | (np.int64(code[offset + 2]) << 16)
        | (np.int64(code[offset + 3]) << 24)
    )  # fmt: skip
