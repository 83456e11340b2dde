"""Where a basic block ends: the rules every block decoder follows, compiled."""

from __future__ import annotations

import numba
import numpy as np

from .insn import F_BRANCH, F_CONDITIONAL, F_DELAY, F_UNDEFINED

MAX_BLOCK = 1024
"""Instructions in a block without a branch; a longer straight run continues in the next."""
WINDOW = MAX_BLOCK * 4 + 32
"""Bytes read for a block: the cap, plus an IT block or a delay slot."""

# Why a block ends (`end_in`); isa.blocks.Stop names them.
GOES_ON, KNOWN, LIMIT, UNDEFINED, BRANCH = range(5)


@numba.njit(cache=True, nogil=True)
def end_at(fact: int, known: bool, position: int, through_conditional: bool) -> int:
    """Why a block ends at its instruction number `position`, which has these fact bits
    (GOES_ON: it does not). KNOWN and LIMIT end it before the instruction, UNDEFINED and
    BRANCH after it (and after its delay slot, when it has one).

    A block ends before an instruction decoded already (`known`) or past MAX_BLOCK (never
    inside an IT block), and after an undefined instruction or a branch; with
    `through_conditional` it goes on past conditional branches without a delay slot.
    """
    if known and position > 0:
        return KNOWN
    if position >= MAX_BLOCK and not fact & F_CONDITIONAL:
        return LIMIT
    if fact & F_UNDEFINED:
        return UNDEFINED
    if fact & F_BRANCH and not (through_conditional and fact & F_CONDITIONAL and not fact & F_DELAY):
        return BRANCH
    return GOES_ON


@numba.njit(cache=True, nogil=True)
def end_in(
    facts: np.ndarray, known: np.ndarray, before: int, through_conditional: bool
) -> tuple[int, int, int]:
    """Where a block whose first `before` instructions precede these ends in them (`end_at`).

    Returns how many of them it keeps, why it ends (GOES_ON: it goes on past them) and where
    its branch is among them (-1: none).
    """
    for i in range(len(facts)):
        why = end_at(facts[i], known[i], before + i, through_conditional)
        if why in (KNOWN, LIMIT):
            return i, why, -1
        if why == UNDEFINED:
            return i + 1, why, -1
        if why == BRANCH:
            return min(len(facts), i + (2 if facts[i] & F_DELAY else 1)), BRANCH, i
    return len(facts), GOES_ON, -1
