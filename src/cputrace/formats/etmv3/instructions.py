"""From ETMv3 packet batches to model rows: each source's ops walked through its core's image.

A source is walked as every CoreSight source is (`coresight.source_walk.SourceWalk`: one
`Walker` a source, seq numbering on from the source before), with ETMv3's ops and events, and
its data trace matched with the instructions. Events come from the few packets that are not atoms:
`trace_on` per I-sync (`name` its reason; `value` the address; `value1` the cycles since the
trace stopped, in cycle-accurate mode, including the W cycles after the last atom), and per
cycle-count packet (`name` `cycle_count`, `value1` the trace-off cycles of the last trace-on
I-sync that had no count, null when the counter overflowed), an `overflow` event when the
reason is overflow, `exception` per branch address with exception information (`number` and
`name` the exception, `value` the vector), `exception_return`, `timestamp` (`value`),
`trigger` per trigger packet, `context` when the context ID (`name` `context_id`, from
context-ID packets and I-syncs) or the VMID (`name` `vmid`) changes, with the new value in
`value`, and `trace_gap` for packet errors and resynchronisation. An event's seq is that of
the last instruction of its source before it (the first, before any). With data trace on,
data packets become `memory` rows (`data`).
"""

from __future__ import annotations

import numba
import numpy as np

from ...coresight.events import (
    E_EXCEPTION,
    E_TRACE_ON,
    HAS_NUMBER,
    HAS_VALUE,
    HAS_VALUE1,
    N_KINDS,
    Labels,
    common_event,
    distinct,
    event_names,
    event_seq,
    i_sync_events,
    put_event,
)
from ...coresight.packet_ops import PacketOps
from ...coresight.packets import I_SYNC_PERIODIC
from ...flow.program import Program
from ..coresight.source_walk import SourceWalk
from .data import DataMatcher
from .ops import new_state, packet_ops
from .packets import Packets
from .protocol import ERROR_TEXT, KIND_NAMES, Flag, Kind, exception_name

_NAMES = event_names(KIND_NAMES)  # exceptions get theirs after
_K_I_SYNC, _K_BRANCH, _K_CYCLE_COUNT = int(Kind.I_SYNC), int(Kind.BRANCH), int(Kind.CYCLE_COUNT)
_N_CYCLE_COUNT = N_KINDS + _K_CYCLE_COUNT
_F_EXCEPTION = int(Flag.EXCEPTION)


class Etmv3SourceWalk(SourceWalk):
    """One ETMv3 source's packets, turned into instructions, events and memory rows numbered
    from `first_seq`."""

    def _new_state(self) -> np.ndarray:
        return new_state()

    def _data_matcher(self, program: Program) -> DataMatcher | None:
        """The matcher of the source's data packets with its instructions, when it traces data
        (ETMv3 data trace; a protocol without it gives None)."""
        config = self.source.config
        traces_data = config.data_value or config.data_address
        return DataMatcher(program, config, self.source.cpu, self.first_seq) if traces_data else None

    @property
    def _data_only(self) -> bool:
        """The source traces data and no instructions (ETMv3's data-only mode)."""
        return self.source.config.data_only

    def _packet_ops(self, packets: Packets) -> PacketOps:
        return packet_ops(packets, self.state, self.source.config.cycle_accurate)

    _names = _NAMES  # `name` labels of the event rows; exceptions get theirs after
    _error_text = ERROR_TEXT

    def _event_rows(self, t: np.ndarray, built: PacketOps, first_seq: int, out: np.ndarray) -> int:
        """The event rows of a batch's eventful packets into `out`; returns how many."""
        config = self.source.config
        return _event_rows(t, built.eventful, built.before, built.pending, built.gap, self.walker.op_end,
                           first_seq, self.first_seq, config.cycle_accurate, config.context_id_bytes > 0,
                           self._context, out)  # fmt: skip

    def _label(self, t: np.ndarray, rows: np.ndarray, names: Labels, texts: Labels) -> None:
        """Names and texts of the events only this protocol makes: cycle counts, exceptions."""
        _, kind, name, number, value, value1, _, row = rows
        counts = np.flatnonzero(name == _N_CYCLE_COUNT)
        if len(counts):
            texts.add(counts, *distinct(
                lambda c: f"{c} cycles of trace-off time before the last trace-on I-sync" if c
                else "cycle count 0: the counter overflowed, the trace-off time is not known",
                value1[counts],
            ))  # fmt: skip
        exception = np.flatnonzero(kind == E_EXCEPTION)
        if len(exception):
            at, numbers = row[exception], number[exception]
            m_profile = self.source.config.m_profile
            names.add(exception, *distinct(lambda k: exception_name(k, m_profile), numbers))
            cancels = t["flags"][at] & Flag.CANCEL != 0
            texts.add(exception, *distinct(
                lambda k, a, c: f"{exception_name(k, m_profile)} exception to 0x{a:08x}"
                + (" (cancels the last instruction)" if c else ""),
                numbers, value[exception], cancels,
            ))  # fmt: skip


@numba.njit(cache=True, nogil=True)
def _event_rows(packets, rows, before, pending, gap, op_end, first_seq, source_seq, cycle_accurate,
                context_on_sync, context, out) -> int:  # fmt: skip
    """The events of packets[rows], in packet order, into out[R_*] (at the seqs `event_seq`
    gives); returns how many. A trace-on I-sync's value1 is the
    trace-off time before it: its cycle count (when it has one) and the W cycles it ended
    (pending[p]); a cycle-count packet gives the count of the last one that had none."""
    n = 0
    for i in range(len(rows)):
        p = rows[i]
        pk = packets[p]
        seq = event_seq(before, op_end, p, first_seq, source_seq)
        k = pk.kind
        if k == _K_I_SYNC:
            ends_trace_off = pk.cycles >= 0 or (cycle_accurate and pk.info != I_SYNC_PERIODIC)
            value1 = max(pk.cycles, 0) + pending[p]
            present = HAS_NUMBER | HAS_VALUE | (HAS_VALUE1 if ends_trace_off else 0)
            n = i_sync_events(out, n, seq, p, pk, value1, present, context_on_sync, context)
        elif k == _K_BRANCH:
            if pk.flags & _F_EXCEPTION and pk.exception > 0:
                present = HAS_NUMBER | HAS_VALUE
                n = put_event(out, n, seq, p, E_EXCEPTION, -1, pk.exception, pk.address, 0, present)
        elif k == _K_CYCLE_COUNT:  # a count of 0 says the counter overflowed: the time is not known
            present = HAS_VALUE1 if pk.cycles else 0
            n = put_event(out, n, seq, p, E_TRACE_ON, _N_CYCLE_COUNT, 0, 0, pk.cycles, present)
        else:
            n = common_event(out, n, seq, p, pk, gap, context)
    return n
