"""Control-flow filtered ITBs (TFILT 2): where the instructions the filter left out ran.

The filter keeps CALL, Bicc/FBfcc/CBccc, JMPL and RETT, trapped instructions, and the
instruction run at the target of each taken transfer; an annulled instruction does not run
and is never traced (LEON3 iu3.vhd, `itfilt`). So between two traced lines only other
instructions ran: in sequence, or the one in a taken transfer's delay slot before its target.

The walk follows SPARC's two program counters (V8 manual, "Delayed Control Transfer"): each
instruction moves PC to nPC, and nPC on by 4 or, when it is a taken transfer, to its target;
an annulled delay slot is passed over. A transfer in the delay slot of another (a DCTI
couple, as in the return from a trap, `jmp %l1; rett %l2`) therefore runs one instruction
at the first target and goes on at the second. Indirect targets (JMPL, RETT) and the first
instruction of a trap handler are where the next traced lines are.

A conditional transfer was taken when the traced lines after it fit that reading and not
the other (looking a few lines ahead). Both fit when its target is also reached in sequence
with only transfers traced on the way; it is then read as taken.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ...flow.ops import GapReason
from ...image import Image
from ...isa.sparc import transfers_or_undefined
from .itb import Anomalies, Traced, insn

STEP = 4
TRAP_ENTRY = 16
"""Trap handlers start at TBR + 16 * trap type: 16-byte aligned."""
LOOK_AHEAD = 3
"""Traced lines a conditional transfer's outcome is read from."""

GIVEN = -1  # an address the next traced line gives (an indirect target)
HANDLER = -2  # the first instruction of a trap handler: the next traced line, at a trap table entry
LOST = -3  # unknown: the walk goes on at the next traced line, instructions may be missing before it
SEQUENCE = -4  # (npc only) pc + 4, once the next traced line gives pc


@dataclass(frozen=True, slots=True)
class Position:
    """The next instruction to run (pc) and the one after it (npc), as SPARC keeps them.

    `pc_traced` and `npc_traced`: that instruction runs at a taken transfer's target (or is a
    trap handler's first), so the filter traces it.
    """

    pc: int
    npc: int
    pc_traced: bool = False
    npc_traced: bool = False


class Before(NamedTuple):
    """What ran before a traced line that the buffer does not hold."""

    start: int  # the first untraced instruction's address
    count: int  # untraced instructions, in sequence from `start`
    unknown: bool  # instructions ran before the line that the walk cannot count (or place)


def untraced_before(traced: list[Traced], anomalies: Anomalies) -> list[Before]:
    """For each traced line, the instructions that ran untraced just before it.

    A line the walk cannot reach is reported (`anomalies`) and the walk resumes there.
    """
    befores = []
    at = _start(traced[: 1 + LOOK_AHEAD])
    for i, line in enumerate(traced):
        arrived = _arrive(at, line)
        if isinstance(arrived, str):
            anomalies.report(i, line.src, arrived, f"0x{line.pc:x}")
            before, at = Before(line.pc, 0, False), Position(line.pc, line.pc + STEP, pc_traced=True)
        else:
            before, at = arrived
        befores.append(before)
        at = _leave(line, at, _taken(line, at, traced[i + 1 : i + 1 + LOOK_AHEAD]))
    return befores


def _start(first: list[Traced]) -> Position:
    """Where the walk starts, at the oldest line: in sequence, unless the lines after it fit
    only its running in a delay slot (a wrapped buffer may start inside a DCTI couple)."""
    in_sequence = Position(GIVEN, SEQUENCE, pc_traced=True)
    in_delay_slot = Position(GIVEN, GIVEN, pc_traced=True, npc_traced=True)
    return in_sequence if _fits(in_sequence, first) or not _fits(in_delay_slot, first) else in_delay_slot


def _arrive(at: Position, line: Traced) -> tuple[Before, Position] | str:
    """How the walk gets from `at` to the traced `line`: what ran untraced before it, and the
    position with `line` next; or, when it cannot, what the line should have been."""
    pc = line.pc
    if at.pc < 0:  # GIVEN, HANDLER, LOST: the line is where the walk is
        npc = pc + STEP if at.npc == SEQUENCE else at.npc
        unknown = at.pc == LOST or (at.pc == HANDLER and pc % TRAP_ENTRY != 0)
        return Before(pc, 0, unknown), Position(pc, npc, True, at.npc_traced)
    if pc == at.pc:
        arrived = at
        before = Before(pc, 0, False)
    elif at.pc_traced:
        return f"the target of a traced transfer (0x{at.pc:x})"
    elif at.npc_traced:  # at.pc is a delay slot, run untraced; the target after it is traced
        if at.npc not in (GIVEN, pc):
            return f"the target of a traced transfer (0x{at.npc:x})"
        before, arrived = Before(at.pc, 1, False), Position(pc, pc + STEP, pc_traced=True)
    elif pc > at.pc and (pc - at.pc) % STEP == 0:
        before, arrived = Before(at.pc, (pc - at.pc) // STEP, False), Position(pc, pc + STEP)
    else:
        return f"an instruction at or after 0x{at.pc:x} in sequence"
    if not (arrived.pc_traced or line.trap or line.error or line.info.is_branch):
        return f"a transfer, a trap or a transfer's target after 0x{at.pc:x}, not an instruction in sequence"
    return before, arrived


def _leave(line: Traced, at: Position, taken: bool) -> Position:
    """The position after `line` ran at `at` (taken: whether it transferred control)."""
    if line.trap or line.error:  # the trap handler's first instruction is traced
        return Position(HANDLER if line.trap else GIVEN, SEQUENCE, pc_traced=True)
    info = line.info
    npc = at.npc
    if not info.is_branch or not taken:
        if info.is_branch and info.annul:  # not taken: its delay slot is annulled
            return Position(LOST, SEQUENCE) if npc == GIVEN else Position(npc + STEP, npc + 2 * STEP)
        return _in_sequence(npc, at.npc_traced)
    target = info.target if info.is_direct else GIVEN
    if info.annul and not info.is_conditional:  # ba,a: the delay slot is annulled
        return _in_sequence(target, True)
    return Position(npc, target, at.npc_traced, True)


def _in_sequence(pc: int, traced: bool) -> Position:
    return Position(pc, SEQUENCE if pc == GIVEN else pc + STEP, traced)


def _taken(line: Traced, at: Position, following: list[Traced]) -> bool:
    """Whether the transfer `line` (at `at`) was taken, from the traced lines `following` it."""
    info = line.info
    if not info.is_branch or line.trap or line.error or info.condition == "n":  # bn never branches
        return False
    if not info.is_conditional:
        return True
    if not following:
        return True
    return _fits(_leave(line, at, True), following) or not _fits(_leave(line, at, False), following)


def _fits(at: Position, lines: list[Traced]) -> bool:
    """Whether the walk from `at` reaches each of `lines` in turn."""
    for k, line in enumerate(lines):
        arrived = _arrive(at, line)
        if isinstance(arrived, str):
            return False
        at = arrived[1]
        at = _leave(line, at, _taken(line, at, lines[k + 1 :]))
    return True


class StraightCode:
    """The image's instructions as runs in sequence: whether a run is there to be walked.

    The addresses a run cannot pass (a transfer, which the filter would have traced, an
    undefined instruction, the end of the image's code) are found once for the whole image,
    so checking a run costs a search, however long the run a corrupt line asks for.
    """

    def __init__(self, image: Image) -> None:
        self.image = image
        self._barriers: tuple[np.ndarray, np.ndarray] | None = None  # found on first use

    def _find_barriers(self) -> tuple[np.ndarray, np.ndarray]:
        """The barriers' addresses, sorted, and whether each is the end of the code."""
        addresses, ends = [np.zeros(0, np.int64)], [np.zeros(0, bool)]
        regions = self.image.regions
        for k, region in enumerate(regions):
            skip = min(-region.start % STEP, len(region.data))  # to the first whole word
            first, count = region.start + skip, (len(region.data) - skip) // STEP
            words = np.frombuffer(region.data, ">u4", count, skip)
            stops = np.flatnonzero(transfers_or_undefined(words))
            addresses.append(first + STEP * stops.astype(np.int64))
            ends.append(np.zeros(len(stops), bool))
            if k + 1 == len(regions) or regions[k + 1].start != region.end:
                addresses.append(np.array([first + STEP * count], np.int64))
                ends.append(np.ones(1, bool))
        return np.concatenate(addresses), np.concatenate(ends)

    def check(self, start: int, count: int) -> tuple[GapReason, int] | None:
        """Why the `count` instructions from `start` cannot all have run in sequence (the
        reason and the address), or None when they can."""
        if not self.image.contains(start, STEP):
            return GapReason.NO_CODE, start
        if self._barriers is None:
            self._barriers = self._find_barriers()
        barriers, ends = self._barriers
        k = int(np.searchsorted(barriers, start))
        if k == len(barriers) or barriers[k] >= start + STEP * count:
            return None
        address = int(barriers[k])
        if ends[k]:
            return GapReason.NO_CODE, address
        word = int.from_bytes(self.image.read(address, STEP), "big")
        return (GapReason.MISMATCH if insn(word, address).is_branch else GapReason.UNDEFINED), address

    def words(self, start: int, count: int) -> np.ndarray:
        """The instruction words of a run that `check` passed."""
        return np.frombuffer(self.image.read(start, STEP * count), ">u4").astype(np.uint32)
