"""Control-flow filtered ITBs (TFILT 2): the untraced instructions rebuilt from the image.

The filter keeps CALL, Bicc/FBfcc, JMPL and RETT, trapped instructions, and the first
instruction at the target of each taken transfer. So each traced transfer was taken exactly
when the next traced line is its target (direct transfers) or always (CALL, JMPL, RETT, BA):
a taken transfer becomes a BRANCH op from its pc to the next traced pc, an untaken one is
passed in sequence, a trap ends a RUN and the walk resumes (SYNC) at the next traced line.
The walk (flow.py) supplies the delay slots and everything in between, flagged
RECONSTRUCTED; the traced lines then replace their rows in the walk.

One case is ambiguous and read as taken: a conditional branch whose target is the next
traced transfer reached in sequence as well.
"""

from __future__ import annotations

import pyarrow as pa

from ...flow import Op, OpBuffer, Program, Walker
from ...model import Isa
from .itb import Anomalies, Traced

STEP = 4


def _taken(t: Traced, following: Traced) -> bool:
    info = t.info
    if not info.is_conditional:
        return True
    return info.target == following.pc


def flow_ops(traced: list[Traced], anomalies: Anomalies) -> OpBuffer:
    """Waypoint ops that walk from the first traced line through every traced transfer.

    `position` is where the walk continues in sequence; `passed` the last traced line it
    will pass on the way (an untaken branch), walked up to before the walk is moved.
    """
    ops = OpBuffer()
    ops.add(Op.SYNC, traced[0].pc, 0, Isa.SPARC, src=traced[0].src)
    position, passed, at_target = traced[0].pc, None, True

    def run_to(t: Traced) -> None:
        ops.add(Op.RUN, (t.pc - position) // STEP + 1, 0, src=t.src)

    for i, t in enumerate(traced):
        following = traced[i + 1] if i + 1 < len(traced) else None
        transfer = t.info.is_branch and not t.trap
        if not (transfer or t.trap or (at_target and t.pc == position)):
            problem = f"the target of a traced transfer (0x{position:x})"
        elif t.pc < position or (t.pc - position) % STEP:
            problem = f"an instruction at or after 0x{position:x} in sequence"
        else:
            problem = None
        if problem is not None:
            anomalies.report(i, t.src, problem, f"0x{t.pc:x}")
            if passed is not None:
                run_to(passed)
            ops.add(Op.SYNC, t.pc, 0, Isa.SPARC, src=t.src)
            position = t.pc
        passed, at_target = t, False
        if following is not None and transfer and _taken(t, following):
            ops.add(Op.BRANCH, t.pc, following.pc, Isa.SPARC, src=t.src)
            position, passed, at_target = following.pc, None, True
        elif following is None or t.trap:
            run_to(t)
            passed = None
            if following is not None:  # the trap handler's first instruction
                ops.add(Op.SYNC, following.pc, 0, Isa.SPARC, src=following.src)
                position, at_target = following.pc, True
    return ops


def reconstruct(
    traced: list[Traced], program: Program, cpu: int, anomalies: Anomalies
) -> tuple[list[dict], list[int | None], pa.Table | None]:
    """Walked instruction rows, the walk row each traced line became, and the walk's gap events."""
    if not traced:
        return [], [], None
    walker = Walker(program, cpu=cpu)
    batches = [*walker.run(flow_ops(traced, anomalies).take()), *walker.finish()]
    rows = [row for b in batches for row in b["instructions"].to_pylist()]
    gaps = pa.concat_tables([b["events"] for b in batches]) if batches else None
    placed: list[int | None] = []
    j = 0
    for i, t in enumerate(traced):
        k = j
        while k < len(rows) and rows[k]["pc"] != t.pc:
            k += 1
        if k == len(rows):
            anomalies.report(i, t.src, "a traced instruction on the path the image gives", f"0x{t.pc:x}")
            placed.append(None)
            continue
        placed.append(k)
        j = k + 1
    return rows, placed, gaps
