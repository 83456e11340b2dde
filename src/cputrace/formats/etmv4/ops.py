"""ETMv4 packets as waypoint ops for `flow.walker.Walker`: one compiled pass over a packet table,
with the trace unit's speculation resolved in it (Arm IHI 0064: its trace elements, and the
description of each packet).

The packets make trace elements. P0 elements are each atom and each exception; the others
(an address, trace on) stand between them. Elements wait in a bounded queue (QUEUE, kept in
the state between packet batches) until they are committed: by a commit packet (or a cycle
count packet that commits), or at once when more P0 elements wait than the trace unit can
hold speculatively (TRCIDR8.MAXSPEC; 0, every element committed as it comes, on most cores).
A cancel packet drops the newest P0 elements and the elements after them; a mispredict flips
the newest atom and drops the addresses after it; cancel formats 2 and 3 and mispredict
packets then add their atoms, in that order. Discard and overflow drop every waiting element.
A packet that makes an event (a timestamp, a context, an exception return...) behind waiting
elements waits among them (E_EVENT), so that its event comes after the instructions of the
elements traced before it, as they are committed.

Committed elements become ops:
- Atom: one WAYPOINT (E taken, N not): the instructions up to the next branch or ISB. With the
  return stack on (TRCCONFIGR.RS), a taken indirect branch that no address follows goes to
  the address the stack pops (the walker pops when the next op needs the position).
- Address (long, short, exact match, with context): TARGET, where the walk goes on.
- Exception, with the address packet that follows it (its preferred return address): a
  WAYPOINT run in sequence up to, not including, that address (none when the walk is there),
  then EXCEPTION without a vector: the next address is where the handler starts. When the
  exception packet says the address is also a branch's target (E1:E0 = 0b10), TARGET there
  first, so that nothing runs before the exception.
- Q element: an unknown path of a counted number of instructions: GAP, so the walk
  resumes at its address, or the next one. Its event says how many instructions it hides.
- Trace on: GAP: the trace stopped; the next address says where it starts again.
- Discard, overflow, a packet error or resynchronisation after the trace was synchronised:
  GAP; after an error nothing is decoded until the next trace info.
- Timestamps become the `time` of the ops of the elements after them; a cycle count becomes
  the `cycles` of the last P0 element committed before it (in the same batch of packets).

Packets before the first trace info give no elements.
"""

from __future__ import annotations

import numba
import numpy as np

from ...coresight.packet_ops import PacketOps, add_op, build_ops
from ...coresight.packets import Packets
from ...flow.ops import (
    EXCEPTION_NO_VECTOR,
    NO_TIME,
    WAYPOINT_BEFORE_ADDRESS,
    WAYPOINT_RETURN_STACK,
    WAYPOINT_TAKEN,
    Op,
)
from .protocol import Flag, Kind

QUEUE = 1 << 12
"""Elements the queue holds; when it is full the oldest P0 element is committed to make room
(a trace unit holds far fewer speculative elements: TRCIDR8.MAXSPEC)."""

E_ATOM, E_EXCEPTION, E_Q, E_ADDRESS, E_TRACE_ON, E_EVENT = range(6)
"""Element kinds in the queue; the first three are P0 elements. E_EVENT stands for a packet
that makes an event behind elements still waiting: its event's place (`before`) is known when
the elements before it are committed or dropped, and a cancel keeps it."""
_P0_KINDS = 3

ELEMENT = np.dtype(
    [("address", "<u8"), ("src", "<i8"), ("row", "<i8"), ("time", "<i8"), ("kind", "u1"), ("isa", "u1"),
     ("taken", "?"), ("branch_target", "?")],
    align=True,
)  # fmt: skip
"""A waiting element: its kind, the address it carries (an exception's preferred return
address), the ISA there, whether an atom is E, whether an exception's address is also a branch
target; `src` its packet's offset, `row` its packet's row in the batch (-1 once the batch is
over), `time` the last timestamp before it."""

BUILD = np.dtype(
    [("synced", "<i8"), ("time", "<i8"), ("depth", "<i8"), ("unseen", "<i8"), ("head", "<i8"),
     ("size", "<i8"), ("exception", "<i8"), ("exception_src", "<i8"), ("exception_row", "<i8"),
     ("exception_target", "?")],
    align=True,
)  # fmt: skip
"""The op builder's state between packet batches: a trace info has synchronised the trace (and
no error has lost it since), the last timestamp (NO_TIME before one); the speculation depth
(P0 elements not yet committed) and how many of those came before the trace info (`unseen`:
not in the queue); the queue's oldest slot and size; an exception waiting for its address
(1, else 0), its packet's offset and row, and whether its address is also a branch target."""

ADDRESS_KINDS = (Kind.ADDRESS_LONG, Kind.ADDRESS_SHORT, Kind.ADDRESS_MATCH, Kind.ADDRESS_CONTEXT)
EVENTFUL_KINDS = (
    Kind.ERROR, Kind.UNSYNCED, Kind.TRACE_ON, Kind.OVERFLOW, Kind.DISCARD, Kind.EXCEPTION,
    Kind.EXCEPTION_RETURN, Kind.TIMESTAMP, Kind.CONTEXT, Kind.ADDRESS_CONTEXT, Kind.Q, Kind.EVENT,
)  # fmt: skip
"""The packets that make events (the events layer picks among them)."""
EXCEPTION_BRANCH_TARGET = 0b10
"""An exception packet's E1:E0 when its address is also the target of the branch before it."""


def _kinds(kinds: tuple[Kind, ...]) -> np.ndarray:
    """A lookup table by packet kind code: whether it is one of `kinds`."""
    table = np.zeros(256, np.bool_)
    table[list(kinds)] = True
    return table


_ADDRESS, _EVENTFUL = _kinds(ADDRESS_KINDS), _kinds(EVENTFUL_KINDS)
_K_ERROR, _K_UNSYNCED, _K_TRACE_INFO = int(Kind.ERROR), int(Kind.UNSYNCED), int(Kind.TRACE_INFO)
_K_TRACE_ON, _K_OVERFLOW, _K_DISCARD = int(Kind.TRACE_ON), int(Kind.OVERFLOW), int(Kind.DISCARD)
_K_TIMESTAMP, _K_ATOM, _K_EXCEPTION = int(Kind.TIMESTAMP), int(Kind.ATOM), int(Kind.EXCEPTION)
_K_COMMIT, _K_CANCEL, _K_MISPREDICT = int(Kind.COMMIT), int(Kind.CANCEL), int(Kind.MISPREDICT)
_K_CYCLE_COUNT, _K_Q = int(Kind.CYCLE_COUNT), int(Kind.Q)
_F_COMMIT, _F_MISPREDICT, _F_Q_ADDRESS = int(Flag.COMMIT), int(Flag.MISPREDICT), int(Flag.Q_ADDRESS)
_F_UNKNOWN_COUNT = int(Flag.UNKNOWN_COUNT)


def new_state() -> tuple[np.ndarray, np.ndarray]:
    """A builder's state and its element queue."""
    state = np.zeros(1, BUILD)
    state["time"] = NO_TIME
    return state, np.zeros(QUEUE, ELEMENT)


def packet_ops(
    packets: Packets, state: np.ndarray, queue: np.ndarray, returns: np.ndarray, *, return_stack: bool,
    max_speculation: int,
) -> PacketOps:  # fmt: skip
    """The waypoint ops of `packets`, continuing from `state` and `queue` (updated in place);
    `returns` (one per packet, filled here) gets each exception packet's preferred return
    address, when its address packet is in the batch."""
    stack = WAYPOINT_RETURN_STACK if return_stack else 0
    return build_ops(packets, _capacity(packets.table), _build, stack, max_speculation, state, queue, returns)


@numba.njit(cache=True, nogil=True)
def _capacity(packets) -> int:
    """The most ops `packets` can make: three per element (an exception: a target, its run and
    the exception), those waiting in the queue and those of each packet (an atom packet's atoms,
    a Q packet's two)."""
    total = QUEUE * 3
    for p in range(len(packets)):
        total += 3 * max(packets[p].count, 2)
    return total


@numba.njit(cache=True, nogil=True)
def _slot(st, i) -> int:
    """The queue slot of its i-th element from the oldest."""
    return (st.head + i) % QUEUE


@numba.njit(cache=True, nogil=True)
def _emit(el, stack, out, n) -> int:
    """The ops of one committed element from op n into `out` (ops, packet, before); returns
    the next op's index."""
    ops, packet, before = out
    k = el.kind
    row, src, time = el.row, el.src, el.time
    if k == E_ATOM:
        flags = (WAYPOINT_TAKEN if el.taken else 0) | stack
        return add_op(ops, packet, n, row, src, Op.WAYPOINT, 0, flags, 0, NO_TIME, time)
    if k == E_ADDRESS:
        return add_op(ops, packet, n, row, src, Op.TARGET, el.address, 0, el.isa, NO_TIME, time)
    if k == E_EVENT:
        if row >= 0:
            before[row] = n  # after the ops of the elements before it
        return n
    if k == E_EXCEPTION:
        if el.branch_target:
            n = add_op(ops, packet, n, row, src, Op.TARGET, el.address, 0, el.isa, NO_TIME, time)
        before_return = WAYPOINT_BEFORE_ADDRESS
        n = add_op(ops, packet, n, row, src, Op.WAYPOINT, el.address, before_return, el.isa, NO_TIME, time)
        n = add_op(ops, packet, n, row, src, Op.EXCEPTION, 0, EXCEPTION_NO_VECTOR, el.isa, NO_TIME, time)
        if row >= 0:
            before[row] = n  # its event follows the instructions it ended
        return n
    return add_op(ops, packet, n, row, src, Op.GAP, 0, 0, 0, NO_TIME, time)  # Q, trace on


@numba.njit(cache=True, nogil=True, inline="always")
def _emit_oldest(st, queue, stack, out, n) -> int:
    """The ops of the oldest waiting element, which leaves the queue; returns the next op's index."""
    n = _emit(queue[st.head], stack, out, n)
    st.head = (st.head + 1) % QUEUE
    st.size -= 1
    return n


@numba.njit(cache=True, nogil=True)
def _commit(st, queue, count, stack, out, n) -> int:
    """Commit the `count` oldest P0 elements (those before the trace info first), with the
    elements between them; returns the next op's index."""
    unseen = min(count, st.unseen)
    st.unseen -= unseen
    st.depth -= unseen
    count -= unseen
    while count > 0 and st.size > 0:
        if queue[st.head].kind < _P0_KINDS:
            count -= 1
            st.depth -= 1
        n = _emit_oldest(st, queue, stack, out, n)
    st.depth -= min(count, st.depth)  # more committed than were traced: the stream is corrupt
    return n


@numba.njit(cache=True, nogil=True)
def _flush(st, queue, stack, out, n) -> int:
    """Emit every waiting element, when none of them is a P0 element (nothing speculative
    waits); returns the next op's index."""
    while st.size > 0:
        n = _emit_oldest(st, queue, stack, out, n)
    return n


@numba.njit(cache=True, nogil=True)
def _cancel(st, queue, count) -> None:
    """Drop the `count` newest P0 elements and the elements after them (those before the trace
    info last), but not the events among them: they happened, after what is left."""
    cut = st.size
    while count > 0 and cut > 0:
        cut -= 1
        if queue[_slot(st, cut)].kind < _P0_KINDS:
            count -= 1
            st.depth -= 1
    kept = cut
    for i in range(cut, st.size):
        if queue[_slot(st, i)].kind == E_EVENT:
            _copy(queue[_slot(st, kept)], queue[_slot(st, i)])
            kept += 1
    st.size = kept
    unseen = min(count, st.unseen)
    st.unseen -= unseen
    st.depth -= unseen


@numba.njit(cache=True, nogil=True)
def _copy(to, el) -> None:
    to.address, to.src, to.row, to.time = el.address, el.src, el.row, el.time
    to.kind, to.isa, to.taken, to.branch_target = el.kind, el.isa, el.taken, el.branch_target


@numba.njit(cache=True, nogil=True)
def _mispredict(st, queue) -> None:
    """Flip the newest atom; the addresses after it (targets of the path not taken) go."""
    for i in range(st.size - 1, -1, -1):
        el = queue[_slot(st, i)]
        if el.kind == E_ATOM:
            el.taken = not el.taken
            kept = i + 1
            for j in range(i + 1, st.size):
                if queue[_slot(st, j)].kind != E_ADDRESS:
                    _copy(queue[_slot(st, kept)], queue[_slot(st, j)])
                    kept += 1
            st.size = kept
            return
        if el.kind != E_ADDRESS:
            return  # the newest P0 element is not an atom: nothing to flip


@numba.njit(cache=True, nogil=True)
def _push(st, queue, kind, address, isa, taken, src, row, stack, out, n) -> int:
    """Queue an element (committing the oldest P0 element first when the queue is full);
    returns the next op's index. An exception's `taken` says its address is a branch target."""
    if st.size == QUEUE:
        n = _commit(st, queue, 1, stack, out, n)
        if st.size == QUEUE:  # no P0 element to commit among them: the oldest goes alone
            n = _emit_oldest(st, queue, stack, out, n)
    el = queue[_slot(st, st.size)]
    el.kind, el.address, el.isa, el.src, el.row, el.time = kind, address, isa, src, row, st.time
    el.taken = taken and kind == E_ATOM
    el.branch_target = taken and kind == E_EXCEPTION
    st.size += 1
    if kind < _P0_KINDS:
        st.depth += 1
    return n


@numba.njit(cache=True, nogil=True)
def _push_atoms(st, queue, pk, p, stack, out, n) -> int:
    for i in range(pk.count):
        n = _push(st, queue, E_ATOM, 0, 0, (pk.atoms >> i) & 1 != 0, pk.offset, p, stack, out, n)
    return n


@numba.njit(cache=True, nogil=True)
def _lose_sync(st, queue, p, pk, out, n) -> int:
    """The trace broke: every waiting element goes, and the walk stops (a GAP)."""
    _place_events(st, queue, out[2], n)
    st.size = st.depth = st.unseen = st.exception = 0
    ops, packet, _ = out
    return add_op(ops, packet, n, p, pk.offset, Op.GAP, 0, 0, 0, NO_TIME, st.time)


@numba.njit(cache=True, nogil=True)
def _wait_turn(st, queue, pk, p, stack, out, n) -> int:
    """The event of packet p comes after the elements waiting before it: behind them in the
    queue, when there are any (`before[p]` is then set as they are committed)."""
    if st.size == 0:
        return n
    return _push(st, queue, E_EVENT, 0, 0, False, pk.offset, p, stack, out, n)


@numba.njit(cache=True, nogil=True)
def _place_events(st, queue, before, n) -> None:
    """The waiting events' places, now: no op of the elements before them will come (they are
    dropped, or belong to the next batch)."""
    for i in range(st.size):
        el = queue[_slot(st, i)]
        if el.kind == E_EVENT and el.row >= 0:
            before[el.row] = n


@numba.njit(cache=True, nogil=True)
def _element(st, queue, pk, p, stack, out, n) -> int:
    """Queue the elements of one packet of a synchronised trace (commits, cancels and
    mispredicts act on the queue); returns the next op's index."""
    k = pk.kind
    if k == _K_TRACE_ON:
        return _push(st, queue, E_TRACE_ON, 0, 0, False, pk.offset, p, stack, out, n)
    if k == _K_ATOM:
        return _push_atoms(st, queue, pk, p, stack, out, n)
    if k == _K_EXCEPTION:
        st.exception = 1
        st.exception_src, st.exception_row = pk.offset, p
        st.exception_target = pk.info == EXCEPTION_BRANCH_TARGET
        return n
    if _ADDRESS[k] and st.exception:  # the exception's preferred return address: it is complete
        st.exception = 0
        return _push(st, queue, E_EXCEPTION, pk.address, pk.isa, st.exception_target, st.exception_src,
                     st.exception_row, stack, out, n)  # fmt: skip
    if _ADDRESS[k]:
        return _push(st, queue, E_ADDRESS, pk.address, pk.isa, False, pk.offset, p, stack, out, n)
    if k == _K_Q:
        n = _push(st, queue, E_Q, 0, 0, False, pk.offset, p, stack, out, n)
        if pk.flags & _F_Q_ADDRESS:
            n = _push(st, queue, E_ADDRESS, pk.address, pk.isa, False, pk.offset, p, stack, out, n)
        return n
    if k == _K_COMMIT or (k == _K_CYCLE_COUNT and pk.flags & _F_COMMIT):
        return _commit(st, queue, np.int64(pk.value), stack, out, n)
    if k in (_K_CANCEL, _K_MISPREDICT):
        if k == _K_CANCEL:
            _cancel(st, queue, np.int64(pk.value))
        if k == _K_MISPREDICT or pk.info != 1 or pk.flags & _F_MISPREDICT:
            _mispredict(st, queue)
        return _push_atoms(st, queue, pk, p, stack, out, n)
    return n


@numba.njit(cache=True, nogil=True)
def _build(packets, stack, max_speculation, state, queue, returns, ops, packet, before, pending, gap,
           eventful):  # fmt: skip
    """The ops of `packets` into ops[:n] (ETMv4 has no trace-off W cycles: `pending` stays 0)."""
    st = state[0]
    out = (ops, packet, before)
    n = events = scanned = 0
    last_waypoint = -1  # the last WAYPOINT op among ops[:scanned], for cycle counts
    for p in range(len(packets)):
        before[p] = n
        pk = packets[p]
        k = pk.kind
        returns[p] = 0
        if _EVENTFUL[k] and (st.synced or k == _K_ERROR):  # every error is reported, synchronised or not
            eventful[events] = p
            events += 1
        if k in (_K_ERROR, _K_UNSYNCED):
            if st.synced:
                st.synced = 0
                gap[p] = True
                n = _lose_sync(st, queue, p, pk, out, n)
        elif k == _K_TRACE_INFO:
            if not st.synced:  # the first: the speculation depth counts elements before it
                st.synced = 1
                st.depth = st.unseen = np.int64(pk.value2)
        elif not st.synced:
            continue
        elif k in (_K_OVERFLOW, _K_DISCARD):
            gap[p] = k == _K_DISCARD
            n = _lose_sync(st, queue, p, pk, out, n)
        elif k == _K_ATOM and max_speculation == 0 and st.depth == 0:
            # Committed as they come, after the elements waiting: the ops at once (the queue's
            # calls, each given its arrays, cost more than the ops).
            if st.size:
                n = _flush(st, queue, stack, out, n)
            for i in range(pk.count):
                flags = (WAYPOINT_TAKEN if (pk.atoms >> i) & 1 else 0) | stack
                n = add_op(ops, packet, n, p, pk.offset, Op.WAYPOINT, 0, flags, 0, NO_TIME, st.time)
        elif k == _K_TIMESTAMP:
            n = _wait_turn(st, queue, pk, p, stack, out, n)
            st.time = np.int64(pk.value)
        else:
            if _ADDRESS[k] and st.exception and st.exception_row >= 0:
                returns[st.exception_row] = pk.address
            if _EVENTFUL[k] and k != _K_EXCEPTION:  # an exception's event has its element's place
                n = _wait_turn(st, queue, pk, p, stack, out, n)
            n = _element(st, queue, pk, p, stack, out, n)
            if st.depth > max_speculation:
                n = _commit(st, queue, st.depth - max_speculation, stack, out, n)
            if k == _K_CYCLE_COUNT and not pk.flags & _F_UNKNOWN_COUNT:
                while scanned < n:  # each op is looked at once
                    if ops[scanned].kind == Op.WAYPOINT:
                        last_waypoint = scanned
                    scanned += 1
                if last_waypoint >= 0:
                    ops[last_waypoint].cycles = pk.cycles
    _place_events(st, queue, before, n)
    for i in range(st.size):  # waiting elements: their packets' rows end with the batch
        queue[_slot(st, i)].row = -1
    if st.exception:
        st.exception_row = -1
    return n, events
