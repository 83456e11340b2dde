"""The compiled walk: waypoint ops followed through a `Program`, one loop over ops.

The loop keeps its state in a WALK record, so that it can stop anywhere (its output full, an
address to decode) and resume where it stopped.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numba
import numpy as np

from ..isa.index import as_int64, lookup
from ..isa.insn import NO_ISA
from ..kernels.records import copied
from . import batches
from .batches import EXECUTED, GAP, NOT_EXECUTED, ROW, UNKNOWN
from .ops import (
    ATOM_EXECUTED,
    EXCEPTION_CANCELS,
    EXCEPTION_NO_VECTOR,
    NO_TIME,
    RETURN_STACK_DEPTH,
    RUN_TAKEN,
    RUN_THUMB_PAIRS,
    WAYPOINT_BEFORE_ADDRESS,
    WAYPOINT_DATA_BARRIERS,
    WAYPOINT_RETURN_STACK,
    WAYPOINT_TAKEN,
    WAYPOINT_TARGET_FOLLOWS,
    WAYPOINT_TO_ADDRESS,
    GapReason,
    Op,
    Ops,
)
from .program import (
    ADDRESS_MASK,
    ANNUL,
    BLOCK_END,
    BRANCH,
    CALL,
    CONDITIONAL,
    DATA_BARRIER,
    DELAY,
    DIRECT,
    HAS_COND,
    ISB,
    NO_CODE,
    THUMB_PAIR,
    TRAP,
    UNDEFINED,
    UNRESOLVED,
    Program,
    found,
)

MAX_SEQUENTIAL = 1 << 20
"""Instructions a BRANCH op may walk before its source; beyond that trace and image disagree."""

WALK = np.dtype(
    [
        ("op", "<i8"), ("steps", "<i8"), ("pos", "<i8"), ("key", "<i8"), ("link", "<i8"), ("lost", "<i8"),
        ("lost_address", "<i8"), ("lost_src", "<i8"), ("isa", "<i8"), ("rows", "<i8"), ("seq", "<i8"),
        ("gaps", "<i8"), ("dropped", "<i8"), ("need", "<i8"), ("op_src", "<i8"),
        ("returns", "<i8", (RETURN_STACK_DEPTH,)), ("returns_top", "<i8"), ("returns_size", "<i8"),
        ("begun", "?"), ("checked", "?"), ("resumed", "?"), ("link_to_target", "?"), ("pop_pending", "?"),
    ],
    align=True,
)  # fmt: skip
"""A walk's state between calls of the compiled loop:
- op: the op being applied; op_src: its `src`; begun: its `op_first` is set;
  steps: instructions it has walked (RUN/BRANCH/TRAP); checked: its instructions are known
  to be there; resumed: (BRANCH) it resumed the walk at its source;
- pos: index of the next instruction, or UNRESOLVED; then key: the (address << 3 | ISA) to
  look up, or -1 when the position is lost; link: the instruction whose link waits for
  that index (-1: none), its branch target's (link_to_target) or its fall-through's;
- lost: the GapReason while lost and not yet reported (0: none), at lost_address, in the op
  of src lost_src;
- isa: ISA of the last position (for an FD/FI source when the walk resumes there);
- rows, gaps: records in the output buffers; seq: of the next row; dropped: ops dropped for
  want of a position; need: the key to decode when the loop returns NEED;
- returns: the return stack of WAYPOINT ops (keys, a ring of RETURN_STACK_DEPTH), its top
  (the next slot) and how many it holds; a SYNC or GAP empties it; pop_pending: a taken
  indirect branch waits for its target from the stack, which the next op that is not a
  SYNC, TARGET or GAP pops (an address, when the trace gives one, comes first)."""

_ANCHORED = WAYPOINT_TO_ADDRESS | WAYPOINT_BEFORE_ADDRESS
"""WAYPOINT flags of a run that ends at an address, not at the next waypoint."""

DONE, FULL, NEED = 0, 1, 2
_CHECK_LOST, _CHECK_OK, _CHECK_NEED = 0, 1, 2


@numba.njit(cache=True, nogil=True)
def _lose(st, reason: int, address: int) -> None:
    st.pos = UNRESOLVED
    st.key = -1
    st.link = -1
    st.lost = reason
    st.lost_address = address
    st.lost_src = st.op_src


@numba.njit(cache=True, nogil=True)
def _go_to(st, address: int, isa: int) -> None:
    """Continue at an address from the trace."""
    st.pos = UNRESOLVED
    st.key = (np.int64(address) << 3) | np.int64(isa)
    st.link = -1
    st.lost = 0
    st.isa = isa


@numba.njit(cache=True, nogil=True)
def _follow(st, idx, to_target, link, address, isa) -> None:
    """Continue along a link of instruction `idx`: its index if cached, else its address."""
    if link >= 0:
        st.pos = link
    else:
        _go_to(st, address, isa)
        st.link = idx
        st.link_to_target = to_target


@numba.njit(cache=True, nogil=True)
def _fall_through(st, idx, insns) -> None:
    insn = insns[idx]
    _follow(st, idx, False, insn.next_idx, insn.pc + insn.size, insn.isa)


@numba.njit(cache=True, nogil=True)
def _take(st, idx, insns) -> None:
    """Continue at the target of the taken branch `idx`; lost if the image cannot say where."""
    insn = insns[idx]
    if insn.flags & DIRECT and insn.next_isa != NO_ISA:
        _follow(st, idx, True, insn.target_idx, insn.target, insn.next_isa)
    else:
        _lose(st, GapReason.NO_TARGET, insn.pc)


@numba.njit(cache=True, nogil=True)
def _is_at(st, insns, address) -> bool:
    """Whether the walk's next instruction is the one at `address` (False when it is lost)."""
    if st.pos >= 0:
        return insns[st.pos].pc == address
    return st.key >= 0 and (st.key >> 3) == np.int64(address)


@numba.njit(cache=True, nogil=True)
def _resolve(st, insns, index, counts, code) -> bool:
    """Turn the pending address (`_pending`) into an index; False when Python must decode it
    first."""
    at = found(st.key, insns, index, counts, code)
    if at == UNRESOLVED:
        st.need = st.key
        return False
    if at == NO_CODE:
        _lose(st, GapReason.NO_CODE, st.key >> 3)
        return True
    if st.link >= 0:
        if st.link_to_target:
            insns[st.link].target_idx = at
        else:
            insns[st.link].next_idx = at
    st.pos = at
    st.key = -1
    st.link = -1
    return True


@numba.njit(cache=True, nogil=True, inline="always")
def _pending(st) -> bool:
    """Whether the walk has an address to look up: not when it knows its position, nor when it
    is lost. Asked before calling `_resolve`, whose 12 arrays numba counts references to at each
    call: a walk that keeps leaving the image drops thousands of ops while lost."""
    return st.pos == UNRESOLVED and st.key != -1


@numba.njit(cache=True, nogil=True)
def _report_loss(st, gaps) -> None:
    if st.lost != 0:
        gap = gaps[st.gaps]
        gap.seq = st.seq
        gap.reason = st.lost
        gap.address = st.lost_address
        gap.src = st.lost_src
        st.gaps += 1
        st.lost = 0


@numba.njit(cache=True, nogil=True, inline="always")
def _put(out, row, idx, executed, op, seq, cycles) -> None:
    """Write one instruction row of op `op` into the output."""
    r = out[np.uint64(row)]  # unsigned indices: no wrap-around code in the hot loops
    r.idx = idx
    r.executed = executed
    r.cycles = cycles
    r.cancelled = False
    r.time = op.time
    r.src = op.src
    r.seq = seq


@numba.njit(cache=True, nogil=True)
def _emit(st, out, idx, executed, op, insns) -> None:
    _put(out, st.rows, idx, executed, op, st.seq, op.cycles)
    st.rows += 1
    st.seq += 1
    st.isa = insns[idx].isa


@numba.njit(cache=True, nogil=True)
def _ends_op(op, steps, insn, halves) -> bool:
    """Whether the instruction `insn` is the last one of a RUN/BRANCH/TRAP/WAYPOINT op.

    `halves` is THUMB_PAIR when a RUN counts Thumb BL/BLX pairs as two (RUN_THUMB_PAIRS), else 0.
    A pair is an unconditional branch, so only a RUN's last instruction can be one (anywhere
    else the walk is a mismatch): only there does it count twice.
    """
    f = insn.flags
    if op.kind == Op.RUN:
        return steps + (2 if f & halves else 1) >= op.count
    if op.kind == Op.BRANCH:
        return insn.pc == op.address
    if op.kind == Op.WAYPOINT:
        if op.flags & WAYPOINT_TO_ADDRESS:
            return insn.pc == op.address
        if op.flags & WAYPOINT_BEFORE_ADDRESS:
            return insn.pc + insn.size == op.address
        barriers = ISB | (DATA_BARRIER if op.flags & WAYPOINT_DATA_BARRIERS else 0)
        return f & (BRANCH | barriers) != 0
    return f & TRAP != 0


@numba.njit(cache=True, nogil=True)
def _check_run(st, idx, op, taken, halves, insns, index, counts, code) -> int:
    """Walk a RUN/BRANCH/TRAP op's instructions without emitting them: are they all there?

    Returns _CHECK_OK when the walk can be emitted (every fall-through link is then cached),
    _CHECK_LOST when trace and image disagree (the position is lost, with the reason),
    _CHECK_NEED when an address must be decoded first (st.need). Checking first means a
    contradiction never leaves instructions behind that the trace did not run.
    """
    steps = 0
    while True:
        insn = insns[idx]
        f = insn.flags
        if f & UNDEFINED:
            _lose(st, GapReason.UNDEFINED, insn.pc)
            return _CHECK_LOST
        if _ends_op(op, steps, insn, halves):
            if taken and not f & BRANCH:
                _lose(st, GapReason.MISMATCH, insn.pc)  # a taken branch that is not one
                return _CHECK_LOST
            if taken and f & DELAY and f & BLOCK_END:
                _lose(st, GapReason.NO_CODE, insn.pc + 4)
                return _CHECK_LOST
            return _CHECK_OK
        if (f & BRANCH and not f & CONDITIONAL) or steps >= MAX_SEQUENTIAL:
            _lose(st, GapReason.MISMATCH, insn.pc)  # a branch the trace says was not taken
            return _CHECK_LOST
        last = idx
        if f & DELAY:
            if f & BLOCK_END:
                _lose(st, GapReason.NO_CODE, insn.pc + 4)
                return _CHECK_LOST
            last = idx + 1
            steps += 1
        following = insns[last].next_idx
        if following < 0:
            address = insns[last].pc + insns[last].size
            key = (np.int64(address) << 3) | np.int64(insns[last].isa)
            following = found(key, insns, index, counts, code)
            if following == UNRESOLVED:
                st.need = key
                return _CHECK_NEED
            if following == NO_CODE:
                _lose(st, GapReason.NO_CODE, address)
                return _CHECK_LOST
            insns[last].next_idx = following
        idx = following
        steps += 1


@numba.njit(cache=True, nogil=True)
def _in_sequence(f) -> int:
    """`executed` of an instruction passed in sequence (not a taken branch)."""
    if f & BRANCH:
        return NOT_EXECUTED if f & HAS_COND else EXECUTED
    return UNKNOWN if f & CONDITIONAL else EXECUTED


@numba.njit(cache=True, nogil=True)
def _run_checked(st, out, idx, op, halves, insns):
    """Emit a checked RUN/BRANCH/TRAP walk up to (not including) its last instruction.

    The hot loop of every flow-only trace, so it keeps its state in locals. Returns where it
    stopped and the op's step count there; stops early when the output is full.
    """
    rows, seq, steps = st.rows, st.seq, st.steps
    room = len(out) - 1  # rows < room: space for a branch and its delay slot
    cycles = NO_TIME if op.kind == Op.WAYPOINT else op.cycles  # a waypoint's are its last instruction's
    f = insns[idx].flags
    while rows < room and not _ends_op(op, steps, insns[idx], halves):
        last = idx + 1 if f & DELAY else idx  # a branch not taken runs its delay slot too
        for row in range(idx, last + 1):
            if row == idx:
                executed = _in_sequence(f)
            else:
                executed = NOT_EXECUTED if f & ANNUL else EXECUTED
                steps += 1
            _put(out, rows, row, executed, op, seq, cycles)
            rows += 1
            seq += 1
        st.isa = insns[last].isa
        idx = insns[last].next_idx
        steps += 1
        f = insns[idx].flags
    st.rows, st.seq, st.steps, st.pos = rows, seq, steps, idx
    return idx, steps


@numba.njit(cache=True, nogil=True)
def _run_atoms(st, out, i, ops, insns, op_first, op_end):
    """Apply consecutive ATOM ops from op i while each next instruction is a cached link.

    The hot loop of ETM traces, so it keeps its state in locals; anything else (an address
    to look up, an indirect branch, a full output) is left to the general loop. Returns the
    first op not applied.
    """
    rows, seq, idx = st.rows, st.seq, st.pos
    room = len(out) - 1
    last = -1
    while i < len(ops) and ops[np.uint64(i)].kind == Op.ATOM and rows < room:
        at, o = np.uint64(idx), np.uint64(i)  # unsigned: no wrap-around code
        op, insn = ops[o], insns[at]
        f = insn.flags
        executed = op.flags & ATOM_EXECUTED != 0
        following = insn.target_idx if executed and f & BRANCH and f & DIRECT else insn.next_idx
        if f & UNDEFINED or (executed and f & BRANCH and not f & DIRECT) or following < 0:
            break
        _put(out, rows, idx, EXECUTED if executed else NOT_EXECUTED, op, seq, op.cycles)
        op_first[o] = seq
        rows += 1
        seq += 1
        op_end[o] = seq
        last = idx
        idx = following
        i += 1
    if last >= 0:
        st.rows, st.seq, st.pos, st.isa = rows, seq, idx, insns[last].isa
    return i


@numba.njit(cache=True, nogil=True)
def _run_waypoints(st, out, i, ops, insns, index, op_first, op_end):
    """Apply consecutive WAYPOINT ops (each a run to the next branch or ISB) and TARGET ops from
    op i while every instruction they reach is decoded and linked.

    The hot loop of PTM and ETMv4 traces: one pass over each op's instructions, in locals, with
    no call that takes an array (numba counts references to the arrays a function is given,
    with atomic instructions: per op, they cost more than the op; docs/benchmarks.md). An op is written
    out, then kept only if it ends where the image says (its instructions defined and linked,
    room for them): anything else leaves it to the general loop, which checks an op before it
    emits it. A taken indirect branch loses the position until a TARGET op gives it again.
    Returns whether it applied any; st.op is the first op it did not.
    """
    rows, seq, idx, isa = st.rows, st.seq, st.pos, st.isa
    room = len(out) - 1
    lost_pc, lost_src, pending = np.uint64(0), 0, False  # idx < 0: lost at the indirect branch lost_pc
    while i < len(ops):
        o = np.uint64(i)  # unsigned: no wrap-around code
        op = ops[o]
        if op.kind == Op.TARGET:
            at = lookup(index, (np.int64(op.address) << 3) | np.int64(op.isa))
            if at < 0:
                break  # not decoded yet, or no code there: the general loop says which
            op_first[o] = op_end[o] = seq
            idx, isa, pending = at, op.isa, False
            i += 1
            continue
        if op.kind != Op.WAYPOINT or op.flags & _ANCHORED or idx < 0:
            break
        barriers = BRANCH | ISB | (DATA_BARRIER if op.flags & WAYPOINT_DATA_BARRIERS else 0)
        r, s, at, steps = rows, seq, idx, 0
        insn = insns[np.uint64(at)]
        while not insn.flags & barriers:
            f = insn.flags
            if f & (UNDEFINED | DELAY) or r >= room or steps >= MAX_SEQUENTIAL:
                break
            _put(out, r, at, _in_sequence(f), op, s, NO_TIME)
            r, s, steps = r + 1, s + 1, steps + 1
            at = insn.next_idx
            if at < 0:
                break
            insn = insns[np.uint64(at)]
        f = insn.flags
        if at < 0 or not f & barriers or f & UNDEFINED or r >= room:
            break
        taken = op.flags & WAYPOINT_TAKEN != 0
        stacked = op.flags & WAYPOINT_RETURN_STACK != 0
        following = insn.next_idx
        if taken and f & BRANCH:
            direct = f & DIRECT and insn.next_isa != NO_ISA
            following = insn.target_idx if direct else UNRESOLVED
            if direct and following < 0:
                break  # a target not linked yet
            if not direct:
                lost_pc, lost_src = insn.pc, op.src
                pending = stacked and not op.flags & WAYPOINT_TARGET_FOLLOWS
            if stacked and f & CALL:
                _push_return(st, (np.int64(insn.pc + insn.size) << 3) | np.int64(insn.isa))
        elif following < 0:
            break
        _put(out, r, at, EXECUTED if taken else NOT_EXECUTED, op, s, op.cycles)
        op_first[o], op_end[o] = seq, s + 1
        rows, seq, idx, isa = r + 1, s + 1, following, insn.isa
        i += 1
    st.rows, st.seq, st.isa = rows, seq, isa
    if idx >= 0:
        st.pos = idx
    else:
        st.op_src = lost_src
        _lose(st, GapReason.NO_TARGET, lost_pc)
        st.pop_pending = pending
    applied = i > st.op
    st.op = i
    return applied


@numba.njit(cache=True, nogil=True)
def _push_return(st, key) -> None:
    st.returns[st.returns_top] = key
    st.returns_top = (st.returns_top + 1) % RETURN_STACK_DEPTH
    st.returns_size = min(st.returns_size + 1, RETURN_STACK_DEPTH)


@numba.njit(cache=True, nogil=True)
def _pop_return(st) -> int:
    """The key on top of the return stack, removed; -1 when it is empty."""
    if st.returns_size == 0:
        return -1
    st.returns_top = (st.returns_top - 1) % RETURN_STACK_DEPTH
    st.returns_size -= 1
    return st.returns[st.returns_top]


@numba.njit(cache=True, nogil=True)
def _end_waypoint(st, out, idx, op, insns) -> None:
    """Emit a WAYPOINT op's last instruction, with the op's cycles, and go where it leads: a
    taken branch to its target (a return to the address on the return stack when the trace
    keeps one and gives none), anything else in sequence."""
    insn = insns[idx]
    f = insn.flags
    to_address = op.flags & (WAYPOINT_TO_ADDRESS | WAYPOINT_BEFORE_ADDRESS) != 0
    taken = op.flags & WAYPOINT_TAKEN != 0 and not to_address
    executed = _in_sequence(f) if to_address else (EXECUTED if taken else NOT_EXECUTED)
    _emit(st, out, idx, executed, op, insns)
    if not (taken and f & BRANCH):
        _fall_through(st, idx, insns)
        return
    stacked = op.flags & WAYPOINT_RETURN_STACK != 0
    if stacked and f & CALL:
        _push_return(st, (np.int64(insn.pc + insn.size) << 3) | np.int64(insn.isa))
    if stacked and not f & DIRECT and not op.flags & WAYPOINT_TARGET_FOLLOWS:
        _lose(st, GapReason.NO_TARGET, insn.pc)
        st.pop_pending = True  # an address may follow (ETMv4): the next op decides
    else:
        _take(st, idx, insns)


@numba.njit(cache=True, nogil=True)
def _pop_pending(st) -> None:
    """Go to the return address a taken indirect branch left waiting on the return stack;
    lost (as the branch left it) when the stack is empty."""
    st.pop_pending = False
    key = _pop_return(st)
    if key >= 0:
        _go_to(st, key >> 3, key & 7)


@numba.njit(cache=True, nogil=True)
def _walk(ops, insns, index, counts, code, state, out, gaps, op_first, op_end):
    """Apply ops from state.op on; returns DONE, FULL (output full) or NEED (a block Python
    must decode). `index`, `counts` and `code`: the program's (`program.found`)."""
    st = state[0]
    while st.op < len(ops):
        i = st.op
        if st.rows + 2 > len(out) or st.gaps + 2 > len(gaps):
            return FULL
        if st.lost != 0 and st.lost <= GapReason.MISMATCH:
            _report_loss(st, gaps)  # anomalies: at once
        op = ops[i]
        if not st.begun:
            op_first[i] = st.seq
            st.begun = True
            st.op_src = op.src
        kind = op.kind
        if st.pop_pending and kind != Op.SYNC and kind != Op.TARGET and kind != Op.GAP:
            _pop_pending(st)
        st.pop_pending = False  # a SYNC, TARGET or GAP says where the walk goes instead
        if kind == Op.SYNC or kind == Op.TARGET:
            _go_to(st, op.address, op.isa)
            if kind == Op.SYNC:
                st.returns_size = 0
        elif kind == Op.EXCEPTION:
            if op.flags & EXCEPTION_CANCELS and st.rows > 0:
                out[st.rows - 1].executed = NOT_EXECUTED
                out[st.rows - 1].cancelled = True
            if op.flags & EXCEPTION_NO_VECTOR:
                _lose(st, GapReason.VECTOR, 0)
            else:
                _go_to(st, op.address, op.isa)
        elif kind == Op.GAP:
            _lose(st, 0, 0)  # the decoder reports its own gaps
            st.returns_size = 0
        elif (kind == Op.RUN and op.count == 0) or (
            kind == Op.WAYPOINT and op.flags & WAYPOINT_BEFORE_ADDRESS and _is_at(st, insns, op.address)
        ):
            pass  # nothing to run
        else:  # ATOM, RUN, BRANCH, TRAP: these need the position
            if _pending(st) and not _resolve(st, insns, index, counts, code):
                return NEED
            idx = st.pos
            if idx >= 0 and insns[idx].flags & UNDEFINED:
                _lose(st, GapReason.UNDEFINED, insns[idx].pc)
                _report_loss(st, gaps)
                idx = UNRESOLVED
            if idx >= 0 and kind == Op.WAYPOINT and not st.checked and _run_waypoints(
                st, out, i, ops, insns, index, op_first, op_end
            ):
                st.begun = False  # st.op: the first op it left
                continue
            taken = kind == Op.BRANCH or (kind == Op.RUN and op.flags & RUN_TAKEN != 0)
            halves = THUMB_PAIR if kind == Op.RUN and op.flags & RUN_THUMB_PAIRS else 0
            if idx >= 0 and kind != Op.ATOM and not st.checked:
                checked = _check_run(st, idx, op, taken, halves, insns, index, counts, code)
                if checked == _CHECK_NEED:
                    return NEED
                st.checked = checked == _CHECK_OK
                if checked == _CHECK_LOST:
                    idx = UNRESOLVED
            if idx < 0:
                if st.lost != 0:
                    _report_loss(st, gaps)
                if kind == Op.BRANCH and not st.resumed:  # its source address resumes the walk
                    _go_to(st, op.address, op.isa if st.isa < 0 else st.isa)
                    st.resumed = True
                    continue
                st.dropped += 1
            elif kind == Op.ATOM:
                following = _run_atoms(st, out, i, ops, insns, op_first, op_end)
                if following > i:
                    st.op = following
                    st.begun = False
                    continue
                executed = op.flags & ATOM_EXECUTED != 0
                _emit(st, out, idx, EXECUTED if executed else NOT_EXECUTED, op, insns)
                if executed and insns[idx].flags & BRANCH:
                    _take(st, idx, insns)
                else:
                    _fall_through(st, idx, insns)
            else:  # checked, so every link up to the op's last instruction is cached
                idx, steps = _run_checked(st, out, idx, op, halves, insns)
                f = insns[idx].flags
                if not _ends_op(op, steps, insns[idx], halves):
                    continue  # the output is full: the loop's top hands it over
                if kind == Op.WAYPOINT:
                    _end_waypoint(st, out, idx, op, insns)
                elif taken:
                    _emit(st, out, idx, EXECUTED, op, insns)
                    if f & DELAY:  # the delay slot runs with the branch, unless ba,a
                        slot = NOT_EXECUTED if f & ANNUL and not f & CONDITIONAL else EXECUTED
                        _emit(st, out, idx + 1, slot, op, insns)
                    if kind == Op.BRANCH:
                        _go_to(st, op.target, op.isa)
                    else:
                        _take(st, idx, insns)
                else:
                    trap = kind == Op.TRAP
                    _emit(st, out, idx, EXECUTED if trap else _in_sequence(f), op, insns)
                    last = idx
                    if f & DELAY:  # a branch not taken: its delay slot, unless annulled
                        last = idx + 1
                        _emit(st, out, last, NOT_EXECUTED if f & ANNUL else EXECUTED, op, insns)
                    _fall_through(st, last, insns)
        op_end[i] = st.seq
        st.op = i + 1
        st.steps = 0
        st.begun = st.checked = st.resumed = False
    if st.lost != 0 and st.lost <= GapReason.MISMATCH:
        _report_loss(st, gaps)
    return DONE


def _key_of(insn: np.void) -> int:
    """The index key (address << 3 | ISA) of an INSN record, as the walk makes them."""
    return as_int64(((int(insn["pc"]) << 3) & ADDRESS_MASK) | int(insn["isa"]))


class Walker:
    """Follows one core's waypoint ops through a `Program`, yielding model rows in batches.

    Feed ops with `run` as the decoder produces them (any number of calls), then `finish`.
    The last row is held back until then, so an EXCEPTION that cancels it can still mark
    it. After each `run`, `op_first[i]` and `op_end[i]` are the seq before and after op i
    (op i emitted rows op_first[i] .. op_end[i] - 1), so the decoder can give its own events
    (exceptions, timestamps, gaps) the seq of the instruction they belong to. The walk's own
    trace_gap events carry the `src` of the op where it lost its place. Batches are tables
    (`instructions`, `events`); with `records`, they are the walk's ROW and GAP records (`rows`,
    `gaps`), for a caller that holds them and makes its own tables
    (`flow.batches.instructions`): one table of many batches costs a fraction of one per batch.
    `rows` is a view of the walk's output buffer, to be read (or copied) before the walk is
    asked for its next batch.
    """

    def __init__(
        self, program: Program, *, cpu: int = 0, first_seq: int = 0, batch: int = 1 << 16,
        records: bool = False,
    ) -> None:  # fmt: skip
        self.program = program
        self.cpu = cpu
        self.records = records
        self.state = np.zeros(1, WALK)
        self._st = self.state[0]  # a view: writes go to the array the walk reads
        self._st["pos"], self._st["key"], self._st["link"], self._st["isa"] = UNRESOLVED, -1, -1, -1
        self._st["seq"] = first_seq
        # Output buffers the walk writes whole records into before it counts them, so never
        # read uninitialised: np.empty, as zeroing their 5 MiB was a tenth of a small decode.
        # As many gaps as rows: a walk that keeps leaving the image (a kernel's) loses its place
        # thousands of times, and a smaller buffer cut its rows into as many small batches.
        self._out = np.empty(batch, ROW)
        self._gaps = np.empty(batch, GAP)
        self.op_first = np.zeros(0, np.int64)
        self.op_end = np.zeros(0, np.int64)

    @property
    def next_seq(self) -> int:
        """The seq the next instruction will get."""
        return int(self._st["seq"])

    @next_seq.setter
    def next_seq(self, seq: int) -> None:
        """Number on from `seq`: when several cores' walks interleave in one seq order."""
        self._st["seq"] = seq

    @property
    def dropped(self) -> int:
        """Ops dropped because the walk had lost its place."""
        return int(self._st["dropped"])

    def carried(self) -> dict[str, np.ndarray]:
        """What the ops still to come take from those applied so far, free of this walk's
        numbering and of its program's cache, so that two walks compare by it and another
        walk (`resume`) goes on as this one would: the WALK record with seq 0, its position as
        a key, no cached link, its return stack from slot 0 and the counters of one `run`
        cleared; the row held back (`held`, none or one) with its seq relative to the next and
        its instruction as a key in `idx`."""
        state = self.state.copy()
        st = state[0]
        if st["pos"] >= 0:
            st["key"] = _key_of(self.program.insns[st["pos"]])
            st["pos"] = UNRESOLVED
        st["link"], st["link_to_target"] = -1, False
        for name in ("op", "steps", "need", "op_src", "dropped", "begun", "checked", "resumed", "gaps"):
            st[name] = 0
        size, top = int(st["returns_size"]), int(st["returns_top"])
        returns = np.zeros(RETURN_STACK_DEPTH, np.int64)
        returns[:size] = st["returns"][(top - size + np.arange(size)) % RETURN_STACK_DEPTH]
        st["returns"], st["returns_top"] = returns, size % RETURN_STACK_DEPTH
        held = copied(self._out[: int(st["rows"])])
        held["idx"] = [_key_of(self.program.insns[idx]) for idx in held["idx"].tolist()]
        held["seq"] -= st["seq"]
        st["seq"] = 0
        return {"walk": state, "held": held}

    def resume(self, carried: dict[str, np.ndarray], next_seq: int) -> None:
        """Go on from a walk's `carried` state, numbering from `next_seq`."""
        self.state[:] = carried["walk"]
        self._st["seq"] = next_seq
        held = copied(carried["held"])
        held["seq"] += next_seq
        held["idx"] = [self._index_of(key) for key in held["idx"].tolist()]
        self._out[: len(held)] = held

    def _index_of(self, key: int) -> int:
        """The program's record of the instruction at `key` (address << 3 | ISA), decoded if
        it was not yet."""
        p = self.program
        at = found(key, p.insns, p.index.table, p.index.counts, p.code)
        if at == UNRESOLVED:
            p.decode(key)
            at = found(key, p.insns, p.index.table, p.index.counts, p.code)
        return at

    def run(self, ops: Ops) -> Iterator[dict[str, Any]]:
        """Apply `ops`; yields batches of `instructions` and `events` (trace_gap) rows, or of
        their records."""
        records = np.ascontiguousarray(ops.records)
        self.op_first = np.empty(len(ops), np.int64)  # the walk sets both for every op
        self.op_end = np.empty(len(ops), np.int64)
        st = self._st
        st["op"] = st["steps"] = 0
        st["begun"] = st["checked"] = st["resumed"] = False
        p = self.program
        while True:
            status = _walk(records, p.insns, p.index.table, p.index.counts, p.code, self.state, self._out,
                           self._gaps, self.op_first, self.op_end)  # fmt: skip
            if status == NEED:
                p.decode(int(st["need"]))
            elif status == FULL:
                yield from self._flush(keep_last=True)
            else:
                break
        if st["rows"] > 1 or st["gaps"]:
            yield from self._flush(keep_last=True)

    def finish(self) -> Iterator[dict[str, Any]]:
        """The row held back, once no more ops will come."""
        if self._st["rows"] or self._st["gaps"]:
            yield from self._flush(keep_last=False)

    def _flush(self, *, keep_last: bool) -> Iterator[dict[str, Any]]:
        """The rows and gaps so far as one batch, then the output buffers emptied (but for the
        row held back) once the batch has been taken: a batch of records views the buffer."""
        rows = int(self._st["rows"])
        n = rows - 1 if keep_last and rows else rows
        gaps = copied(self._gaps[: int(self._st["gaps"])])
        if self.records:
            yield {"rows": self._out[:n], "gaps": gaps}
        else:
            yield {
                "instructions": batches.instructions(self._out[:n], self.program.insns, self.cpu),
                "events": batches.gap_events(gaps, self.cpu, self.program),
            }
        self._st["gaps"] = 0
        if n < rows:
            self._out[0] = self._out[rows - 1]
        self._st["rows"] = rows - n
