"""From PTM packet batches to model rows: each source's ops walked through its core's image.

A source is walked as every CoreSight source is (`coresight.source_walk.SourceWalk`: one
`Walker` a source, seq numbering on from the source before), with PTM's ops and events. Events:
`trace_on` per I-sync (`name` its reason, `value` the address, `value1` the cycles since the
trace stopped, in cycle-accurate mode, when the reason is not periodic), `overflow` when the
reason is overflow, `exception` per branch address with exception information (`number` and
`name` the exception, `value` the vector, `value1` its cycle count), `exception_return`,
`timestamp` (`value`; `value1` the cycle count in cycle-accurate mode), `trigger`, `context`
when the context ID or the VMID changes, and `trace_gap` for packet errors and
resynchronisation. An event's seq is that of the last instruction of its source before it.
"""

from __future__ import annotations

import numba
import numpy as np

from ...coresight.events import (
    E_EXCEPTION,
    HAS_NUMBER,
    HAS_VALUE,
    HAS_VALUE1,
    Labels,
    common_event,
    distinct,
    event_names,
    event_seq,
    i_sync_events,
    put_event,
)
from ...coresight.packet_ops import PacketOps
from ..coresight.source_walk import SourceWalk
from .ops import new_state, packet_ops
from .packets import Packets
from .protocol import ERROR_TEXT, KIND_NAMES, Kind, exception_name

_NAMES = event_names(KIND_NAMES)  # exceptions get theirs after
_K_I_SYNC, _K_BRANCH = int(Kind.I_SYNC), int(Kind.BRANCH)


class PtmSourceWalk(SourceWalk):
    """One PTM source's packets, turned into instructions and events numbered from `first_seq`."""

    def _new_state(self) -> np.ndarray:
        return new_state()

    def _packet_ops(self, packets: Packets) -> PacketOps:
        config = self.source.config
        return packet_ops(packets, self.state, config.return_stack, config.data_barrier_waypoints)

    _names = _NAMES
    _error_text = ERROR_TEXT

    def _event_rows(self, t: np.ndarray, built: PacketOps, first_seq: int, out: np.ndarray) -> int:
        config = self.source.config
        return _event_rows(t, built.eventful, built.before, built.gap, self.walker.op_end, first_seq,
                           self.first_seq, config.context_id_bytes > 0, self._context, out)  # fmt: skip

    def _label(self, t: np.ndarray, rows: np.ndarray, names: Labels, texts: Labels) -> None:
        """Names and texts of exception events."""
        _, kind, _, number, value, _, _, _ = rows
        exception = np.flatnonzero(kind == E_EXCEPTION)
        if len(exception):
            numbers = number[exception]
            names.add(exception, *distinct(exception_name, numbers))
            texts.add(exception, *distinct(
                lambda k, a: f"{exception_name(k)} exception to 0x{a:08x}", numbers, value[exception]
            ))  # fmt: skip


@numba.njit(cache=True, nogil=True)
def _event_rows(packets, rows, before, gap, op_end, first_seq, source_seq, context_on_sync, context,
                out) -> int:  # fmt: skip
    """The events of packets[rows], in packet order, into out[R_*] (at the seqs `event_seq`
    gives); returns how many. A cycle count, where a packet has one, is its event's value1."""
    n = 0
    for i in range(len(rows)):
        p = rows[i]
        pk = packets[p]
        seq = event_seq(before, op_end, p, first_seq, source_seq)
        k = pk.kind
        present = HAS_NUMBER | HAS_VALUE | (HAS_VALUE1 if pk.cycles >= 0 else 0)  # I-sync, branch
        cycles = max(pk.cycles, 0)
        if k == _K_I_SYNC:
            n = i_sync_events(out, n, seq, p, pk, cycles, present, context_on_sync, context)
        elif k == _K_BRANCH:
            n = put_event(out, n, seq, p, E_EXCEPTION, -1, pk.exception, pk.address, cycles, present)
        else:
            n = common_event(out, n, seq, p, pk, gap, context)
    return n
