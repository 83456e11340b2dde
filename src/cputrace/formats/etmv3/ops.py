"""ETMv3 packets as waypoint ops for `flow.walker.Walker`: one compiled pass over a packet table.

- I-sync: SYNC at its address (the walk starts, or is re-anchored). With a load/store in
  progress (LSiP) the address is that of the load/store, which executed without an atom of
  its own: an E ATOM for it (no cycle count), then SYNC at the branch-format address that
  follows, where instruction trace goes on.
- P-header: one ATOM per atom (E executed, N condition failed). In cycle-accurate mode each
  atom carries its cycles: the W cycles of the P-headers since the last atom, plus its own
  (format 1: one per atom; format 2: one, on the first atom; format 3: the header's WWW+1
  cycles, on its E atom; format 4: none). W cycles left when an I-sync comes belong to the
  trace-off time before it, not to an instruction, when that I-sync has a cycle count or is
  not periodic (trace on after trace off, overflow, debug exit: its event reports them); a
  periodic I-sync leaves them to the next atom.
- Branch address: TARGET (where the E atom before it went), or EXCEPTION at the vector it
  gives, cancelling the last instruction when its cancel bit is set.
- Error or resynchronisation after the trace was synchronised: GAP; nothing is walked until
  the next I-sync.
- Timestamps become the `time` of the ops that follow.

Packets before the first I-sync give no position and produce no ops.
"""

from __future__ import annotations

import numba
import numpy as np

from ...coresight.packet_ops import PacketOps, add_op, build_ops
from ...coresight.packets import I_SYNC_PERIODIC
from ...flow.ops import ATOM_EXECUTED, EXCEPTION_CANCELS, NO_TIME, Op
from .packets import Packets
from .protocol import Flag, Kind

BUILD = np.dtype([("synced", "<i8"), ("pending", "<i8"), ("time", "<i8")])
"""The op builder's state between packet batches: an I-sync has given the position (and no
error has lost it since), W cycles counted since the last atom (cycle-accurate trace), and
the last timestamp (NO_TIME before one)."""

_K_I_SYNC, _K_BRANCH, _K_P_HEADER = int(Kind.I_SYNC), int(Kind.BRANCH), int(Kind.P_HEADER)
_K_TIMESTAMP, _K_ERROR, _K_UNSYNCED = int(Kind.TIMESTAMP), int(Kind.ERROR), int(Kind.UNSYNCED)
_F_EXCEPTION, _F_CANCEL, _F_LSIP = int(Flag.EXCEPTION), int(Flag.CANCEL), int(Flag.LSIP)


def new_state() -> np.ndarray:
    state = np.zeros(1, BUILD)
    state["time"] = NO_TIME
    return state


def packet_ops(packets: Packets, state: np.ndarray, cycle_accurate: bool) -> PacketOps:
    """The waypoint ops of `packets`, continuing from `state` (updated in place)."""
    return build_ops(packets, _capacity(packets.table), _build, cycle_accurate, state)


@numba.njit(cache=True, nogil=True)
def _capacity(packets) -> int:
    """The most ops `packets` can make: one per atom or other packet, three per LSiP I-sync."""
    total = 0
    for p in range(len(packets)):
        total += max(packets[p].count, 1) + (2 if packets[p].flags & _F_LSIP else 0)
    return total


@numba.njit(cache=True, nogil=True)
def _atom_cycles(form: int, index: int, header_cycles: int) -> int:
    """Cycles a P-header gives its atom `index`, beyond the W cycles before the header."""
    if form == 1:
        return 1
    if form == 2:
        return 1 if index == 0 else 0
    if form == 3:
        return header_cycles
    return 0


@numba.njit(cache=True, nogil=True)
def _build(packets, cycle_accurate, state, ops, packet, before, pending, gap, eventful):
    st = state[0]
    n = 0
    events = 0
    for p in range(len(packets)):
        before[p] = n
        pk = packets[p]
        k = pk.kind
        if (k != _K_P_HEADER and k != _K_BRANCH) or (k == _K_BRANCH and pk.flags & _F_EXCEPTION):
            eventful[events] = p  # the events layer picks what it reports among these
            events += 1
        if k == _K_P_HEADER:
            count = pk.count
            if st.synced == 0:
                continue
            if count == 0:
                if cycle_accurate and pk.cycles > 0:
                    st.pending += pk.cycles
                continue
            for i in range(count):
                op = ops[n]  # every field written, as add_op does: in line, as this loop is hot
                op.kind = Op.ATOM
                op.address = op.target = op.count = op.isa = 0
                op.flags = (pk.atoms >> i) & ATOM_EXECUTED
                if cycle_accurate:
                    c = _atom_cycles(pk.info, i, pk.cycles)
                    if i == 0:
                        c += st.pending
                        st.pending = 0
                    op.cycles = c
                else:
                    op.cycles = NO_TIME
                op.time = st.time
                op.src = pk.offset
                packet[n] = p
                n += 1
        elif k == _K_I_SYNC:
            if pk.cycles >= 0 or (cycle_accurate and pk.info != I_SYNC_PERIODIC):  # trace off: W cycles end
                pending[p] = st.pending
                st.pending = 0
            st.synced = 1
            n = add_op(ops, packet, n, p, pk.offset, Op.SYNC, pk.address, 0, pk.isa, NO_TIME, st.time)
            if pk.flags & _F_LSIP:  # the load/store ran, then the trace goes on at address2
                n = add_op(ops, packet, n, p, pk.offset, Op.ATOM, 0, ATOM_EXECUTED, 0, NO_TIME, st.time)
                n = add_op(ops, packet, n, p, pk.offset, Op.SYNC, pk.address2, 0, pk.isa, NO_TIME,
                           st.time)  # fmt: skip
        elif k == _K_BRANCH:
            if st.synced == 0:
                continue
            kind, flags = Op.TARGET, 0
            if pk.flags & _F_EXCEPTION and pk.exception > 0:
                kind, flags = Op.EXCEPTION, EXCEPTION_CANCELS if pk.flags & _F_CANCEL else 0
            n = add_op(ops, packet, n, p, pk.offset, kind, pk.address, flags, pk.isa, NO_TIME, st.time)
        elif k == _K_TIMESTAMP:
            st.time = np.int64(pk.value)
        elif k in (_K_ERROR, _K_UNSYNCED):
            if st.synced == 0:
                continue
            st.synced = 0
            st.pending = 0
            gap[p] = True
            n = add_op(ops, packet, n, p, pk.offset, Op.GAP, 0, 0, 0, NO_TIME, st.time)
    return n, events

