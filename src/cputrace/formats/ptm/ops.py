"""PTM packets as waypoint ops for `flow.walker.Walker`: one compiled pass over a packet table.

In PFT an atom stands for a waypoint, not an instruction: the instructions up to the next
branch or ISB, and whether it was taken (ARM IHI 0035B, 4.2).

- I-sync: SYNC at its address (the walk starts, or is re-anchored; the return stack empties).
- Atom: one WAYPOINT per atom (E taken, N not), with its cycle count in cycle-accurate mode
  (given to the waypoint instruction). With the return stack enabled (ETMCR bit 29) a taken
  indirect branch without a branch address goes to the address the stack pops (4.4).
- Branch address: the E atom it implies (a WAYPOINT that the TARGET after it completes), then
  TARGET at its address; with exception information, EXCEPTION at the vector instead: the
  instructions before it ended at the last waypoint, or at a waypoint update.
- Waypoint update: a WAYPOINT run to the instruction at its address, included (4.5.5).
- Error or resynchronisation after the trace was synchronised: GAP; nothing is walked until
  the next I-sync.
- Timestamps become the `time` of the ops that follow.

Packets before the first I-sync give no position and produce no ops.
"""

from __future__ import annotations

import numba
import numpy as np

from ...coresight.packet_ops import PacketOps, add_op, build_ops
from ...coresight.packets import Packets
from ...flow.ops import (
    NO_TIME,
    WAYPOINT_DATA_BARRIERS,
    WAYPOINT_RETURN_STACK,
    WAYPOINT_TAKEN,
    WAYPOINT_TARGET_FOLLOWS,
    WAYPOINT_TO_ADDRESS,
    Op,
)
from .protocol import Flag, Kind

BUILD = np.dtype([("synced", "<i8"), ("time", "<i8")])
"""The op builder's state between packet batches: an I-sync has given the position (and no
error has lost it since), and the last timestamp (NO_TIME before one)."""

_K_I_SYNC, _K_ATOM, _K_BRANCH = int(Kind.I_SYNC), int(Kind.ATOM), int(Kind.BRANCH)
_K_WAYPOINT_UPDATE, _K_TIMESTAMP = int(Kind.WAYPOINT_UPDATE), int(Kind.TIMESTAMP)
_K_ERROR, _K_UNSYNCED = int(Kind.ERROR), int(Kind.UNSYNCED)
_F_EXCEPTION = int(Flag.EXCEPTION)


def new_state() -> np.ndarray:
    state = np.zeros(1, BUILD)
    state["time"] = NO_TIME
    return state


def packet_ops(packets: Packets, state: np.ndarray, return_stack: bool, data_barriers: bool) -> PacketOps:
    """The waypoint ops of `packets`, continuing from `state` (updated in place).

    `return_stack` and `data_barriers` (DSB and DMB are waypoints) say what the PTM's
    registers set; every WAYPOINT op carries them as flags."""
    waypoint = WAYPOINT_RETURN_STACK if return_stack else 0
    waypoint |= WAYPOINT_DATA_BARRIERS if data_barriers else 0
    return build_ops(packets, _capacity(packets.table), _build, waypoint, state)


@numba.njit(cache=True, nogil=True)
def _capacity(packets) -> int:
    """The most ops `packets` can make: one per atom, two per branch address, one per other."""
    total = 0
    for p in range(len(packets)):
        total += max(packets[p].count, 2)
    return total


@numba.njit(cache=True, nogil=True)
def _build(packets, waypoint, state, ops, packet, before, pending, gap, eventful):
    """The ops of `packets` into ops[:n] (PFT has no trace-off W cycles: `pending` stays 0);
    `waypoint`: the flags of every WAYPOINT op."""
    st = state[0]
    n = 0
    events = 0
    for p in range(len(packets)):
        before[p] = n
        pk = packets[p]
        k = pk.kind
        exception = k == _K_BRANCH and pk.flags & _F_EXCEPTION != 0
        if (k != _K_ATOM and k != _K_BRANCH and k != _K_WAYPOINT_UPDATE) or exception:
            eventful[events] = p  # the events layer picks what it reports among these
            events += 1
        if k == _K_I_SYNC:
            st.synced = 1
            n = add_op(ops, packet, n, p, pk.offset, Op.SYNC, pk.address, 0, pk.isa, NO_TIME, st.time)
        elif k == _K_TIMESTAMP:
            st.time = np.int64(pk.value)
        elif k in (_K_ERROR, _K_UNSYNCED):
            if st.synced:
                st.synced = 0
                gap[p] = True
                n = add_op(ops, packet, n, p, pk.offset, Op.GAP, 0, 0, 0, NO_TIME, st.time)
        elif not st.synced:
            continue
        elif k == _K_ATOM:
            cycles = pk.cycles if pk.cycles >= 0 else NO_TIME
            for i in range(pk.count):
                taken = WAYPOINT_TAKEN if (pk.atoms >> i) & 1 else 0
                n = add_op(ops, packet, n, p, pk.offset, Op.WAYPOINT, 0, taken | waypoint, 0, cycles, st.time)
        elif exception:
            n = add_op(ops, packet, n, p, pk.offset, Op.EXCEPTION, pk.address, 0, pk.isa, NO_TIME, st.time)
        elif k == _K_BRANCH:
            cycles = pk.cycles if pk.cycles >= 0 else NO_TIME
            flags = WAYPOINT_TAKEN | WAYPOINT_TARGET_FOLLOWS | waypoint
            n = add_op(ops, packet, n, p, pk.offset, Op.WAYPOINT, 0, flags, 0, cycles, st.time)
            n = add_op(ops, packet, n, p, pk.offset, Op.TARGET, pk.address, 0, pk.isa, NO_TIME, st.time)
        elif k == _K_WAYPOINT_UPDATE:
            flags = WAYPOINT_TO_ADDRESS | waypoint
            n = add_op(ops, packet, n, p, pk.offset, Op.WAYPOINT, pk.address, flags, pk.isa, NO_TIME, st.time)
    return n, events

