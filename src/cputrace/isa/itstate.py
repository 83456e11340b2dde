"""The T32 IT instruction: which following instructions it makes conditional, and how."""

from __future__ import annotations

CONDITIONS = ("eq", "ne", "hs", "lo", "mi", "pl", "vs", "vc", "hi", "ls", "ge", "lt", "gt", "le")
"""Arm condition names by 4-bit condition code; 14 (al) and 15 mean always."""


def condition_name(code: int) -> str | None:
    """The name of a 4-bit Arm condition code, None for always."""
    return CONDITIONS[code] if code < len(CONDITIONS) else None


def next_it_state(state: int) -> int:
    """ITSTATE after one more instruction: the low five bits shift left; when only the
    closing one is left, the block is over (0)."""
    return 0 if state & 0x7 == 0 else (state & 0xE0) | ((state << 1) & 0x1F)


def it_conditions(opcode: int) -> tuple[str | None, ...]:
    """Conditions of the 1-4 instructions an IT opcode (0xBFxy) covers, in order.

    Follows the architecture's ITSTATE: the top four bits are the current condition and the
    low five bits shift left after each instruction. A mask of 0 is a hint (NOP, WFI...),
    not an IT, and covers nothing.
    """
    state = opcode & 0xFF
    conditions: list[str | None] = []
    while state & 0xF:
        conditions.append(condition_name(state >> 4))
        state = next_it_state(state)
    return tuple(conditions)
