"""A batch of CoreSight packets as ops for `flow.walker.Walker`, with what the events layer
needs to place each packet among them. Each protocol's `ops` module compiles its own builder
(its packets mean different ops); `build_ops` runs one and keeps what it made, and `add_op`
writes one op for any of them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numba
import numpy as np

from ..flow.ops import OP, Ops
from .packets import Packets


@dataclass
class PacketOps:
    """The ops of a packet batch, and for each packet the ops made before it (`before`)."""

    ops: Ops
    packet: np.ndarray  # int64: the packet row each op comes from
    before: np.ndarray  # int64, one per packet: ops made from the packets before it
    pending: np.ndarray  # int64, one per packet: W cycles an I-sync ends (trace-off time), else 0
    gap: np.ndarray  # bool, one per packet: an error or skipped bytes that broke a synchronised trace
    eventful: np.ndarray  # int64: rows of the packets that make events (see `instructions`)

    def without_ops(self) -> PacketOps:
        """The events of the packets and none of their ops (data-only trace: nothing to walk)."""
        none = np.zeros(0, np.int64)
        before = np.zeros_like(self.before)
        return PacketOps(self.ops.select(none), none, before, self.pending, self.gap, self.eventful)


def build_ops(
    packets: Packets, capacity: int, build: Callable[..., tuple[int, int]], *settings: Any
) -> PacketOps:
    """The ops a protocol's compiled builder makes of `packets`: `build(table, *settings, ops,
    packet, before, pending, gap, eventful)` fills the arrays (at most `capacity` ops) and
    returns how many ops and eventful packets it made."""
    t = packets.table
    # np.empty: a builder writes every field of each op it makes (`add_op`); zeroing a
    # capacity of several times the ops made cost more than the ops
    ops = np.empty(capacity, OP)
    packet = np.empty(capacity, np.int64)
    before, eventful = np.empty(len(t), np.int64), np.empty(len(t), np.int64)
    pending, gap = np.zeros(len(t), np.int64), np.zeros(len(t), np.bool_)
    n, events = build(t, *settings, ops, packet, before, pending, gap, eventful)
    return PacketOps(Ops(ops[:n]), packet[:n], before, pending, gap, eventful[:events])


@numba.njit(cache=True, nogil=True, inline="always")
def add_op(ops, packet, n, packet_row, offset, kind, address, flags, isa, cycles, time) -> int:
    """Op n, from the packet at `packet_row`, every field written (`target` and `count` 0: a
    builder sets them after, where its op has them); returns the next op's index."""
    op = ops[n]
    op.kind = kind
    op.address = address
    op.target = 0
    op.count = 0
    op.flags = flags
    op.isa = isa
    op.cycles = cycles
    op.time = time
    op.src = offset
    packet[n] = packet_row
    return n + 1
