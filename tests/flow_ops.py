"""Test-side encoders: waypoint ops derived from a full instruction trace (the ground truth).

Each follows what one kind of compressed trace records of the same run, so a walk of the
ops through the image must give the full trace back.
"""

from __future__ import annotations

from dataclasses import dataclass

from cputrace.flow.ops import ATOM_EXECUTED, RUN_TAKEN, Op, OpBuffer, Ops
from cputrace.isa import BlockCache
from cputrace.model import Isa


@dataclass
class Stream:
    """The ground truth: one core's instructions in order."""

    pc: list[int]
    isa: list[Isa]
    executed: list[bool]

    @classmethod
    def of(cls, table) -> Stream:
        columns = table.to_pydict()
        return cls(columns["pc"], [Isa[name] for name in columns["isa"]], columns["executed"])

    def taken(self, i: int, blocks: BlockCache) -> bool:
        """Whether instruction i moved the pc somewhere other than the next instruction."""
        info = blocks.insn_at(self.pc[i], self.isa[i])
        if i + 1 < len(self.pc) and self.pc[i + 1] != info.next_address:
            return True
        return info.is_branch and not info.is_conditional and self.executed[i]

    def indirect(self, i: int, blocks: BlockCache) -> bool:
        info = blocks.insn_at(self.pc[i], self.isa[i])
        return not (info.is_direct and info.next_isa is not None)


def atom_ops(stream: Stream, blocks: BlockCache) -> Ops:
    """ETMv3 style: an atom per instruction, a target after each taken indirect branch."""
    ops = OpBuffer()
    ops.add(Op.SYNC, address=stream.pc[0], isa=stream.isa[0])
    for i in range(len(stream.pc)):
        ops.add(Op.ATOM, flags=ATOM_EXECUTED if stream.executed[i] else 0, src=i)
        if i + 1 < len(stream.pc) and stream.taken(i, blocks) and stream.indirect(i, blocks):
            ops.add(Op.TARGET, address=stream.pc[i + 1], isa=stream.isa[i + 1])
    return ops.take()


def branch_ops(stream: Stream, blocks: BlockCache) -> Ops:
    """Tarmac FD/FI style: the source and target of every taken branch, then the tail's length."""
    ops = OpBuffer()
    ops.add(Op.SYNC, address=stream.pc[0], isa=stream.isa[0])
    last = -1
    for i in range(len(stream.pc) - 1):
        if stream.taken(i, blocks):
            ops.add(Op.BRANCH, address=stream.pc[i], target=stream.pc[i + 1], isa=stream.isa[i + 1], src=i)
            last = i
    ops.add(Op.RUN, count=len(stream.pc) - 1 - last, src=len(stream.pc) - 1)
    return ops.take()


def run_ops(stream: Stream, blocks: BlockCache) -> Ops:
    """XScale style: counts of instructions ending in each taken branch, targets of indirect ones."""
    ops = OpBuffer()
    ops.add(Op.SYNC, address=stream.pc[0], isa=stream.isa[0])
    count = 0
    for i in range(len(stream.pc) - 1):
        count += 1
        if stream.taken(i, blocks):
            ops.add(Op.RUN, count=count, flags=RUN_TAKEN, src=i)
            count = 0
            if stream.indirect(i, blocks):
                ops.add(Op.TARGET, address=stream.pc[i + 1], isa=stream.isa[i + 1])
    ops.add(Op.RUN, count=count + 1, src=len(stream.pc) - 1)
    return ops.take()
