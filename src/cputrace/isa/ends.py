"""Where a basic block ends: the rules every block decoder follows, compiled."""

from __future__ import annotations

import numba
import numpy as np

from .insn import F_BRANCH, F_CONDITIONAL, F_DELAY, F_UNDEFINED

MAX_BLOCK = 1024
"""Instructions in a block without a branch; a longer straight run continues in the next."""

# Why a block ends (`end_in`); isa.blocks.Stop names them.
GOES_ON, KNOWN, LIMIT, UNDEFINED, BRANCH = range(5)


@numba.njit(cache=True, nogil=True)
def end_in(
    facts: np.ndarray, known: np.ndarray, before: int, through_conditional: bool
) -> tuple[int, int, int]:
    """Where a block whose first `before` instructions precede these ends in them.

    Returns how many of them it keeps, why it ends (GOES_ON: it goes on past them) and where
    its branch is among them (-1: none). A block ends before an instruction decoded already
    or past MAX_BLOCK (never inside an IT block), and after an undefined instruction or a
    branch (and its delay slot, when the slot is among them).
    """
    for i in range(len(facts)):
        fact, position = facts[i], before + i
        if known[i] and position > 0:
            return i, KNOWN, -1
        if position >= MAX_BLOCK and not fact & F_CONDITIONAL:
            return i, LIMIT, -1
        if fact & F_UNDEFINED:
            return i + 1, UNDEFINED, -1
        if fact & F_BRANCH and not (through_conditional and fact & F_CONDITIONAL and not fact & F_DELAY):
            return min(len(facts), i + (2 if fact & F_DELAY else 1)), BRANCH, i
    return len(facts), GOES_ON, -1
