"""From PTM packet batches to model rows: each source's ops walked through its core's image.

A source is walked as an ETMv3 one is (`etmv3.instructions.SourceWalk`: one `Walker` a
source, seq numbering on from the source before), with PTM's ops and events. Events:
`trace_on` per I-sync (`name` its reason, `value` the address, `value1` the cycles since the
trace stopped, in cycle-accurate mode, when the reason is not periodic), `overflow` when the
reason is overflow, `exception` per branch address with exception information (`number` and
`name` the exception, `value` the vector, `value1` its cycle count), `exception_return`,
`timestamp` (`value`; `value1` the cycle count in cycle-accurate mode), `trigger`, `context`
when the context ID or the VMID changes, and `trace_gap` for packet errors and
resynchronisation. An event's seq is that of the last instruction of its source before it.
"""

from __future__ import annotations

from collections.abc import Callable

import numba
import numpy as np
import pyarrow as pa

from ...coresight.events import (
    C_CONTEXT_ID,
    C_VMID,
    E_EXCEPTION,
    E_EXCEPTION_RETURN,
    E_OVERFLOW,
    E_TIMESTAMP,
    E_TRACE_GAP,
    E_TRACE_ON,
    E_TRIGGER,
    HAS_NUMBER,
    HAS_VALUE,
    HAS_VALUE1,
    N_CONTEXT_ID,
    N_EXCEPTION_RETURN,
    N_KINDS,
    N_TIMESTAMP,
    N_VMID,
    NO_EVENTS,
    R_COUNT,
    Labels,
    context_event,
    distinct,
    event_names,
    event_seq,
    event_table,
    gap_texts,
    put_event,
    trace_texts,
)
from ...coresight.packet_ops import PacketOps
from ...coresight.packets import I_SYNC_OVERFLOW
from ...flow.program import Program
from ..etmv3.capture import EtmSource
from ..etmv3.instructions import SourceWalk
from .ops import new_state, packet_ops
from .packets import Packets
from .protocol import ERROR_TEXT, KIND_NAMES, Kind, exception_name

_NAMES = event_names(KIND_NAMES)  # exceptions get theirs after
_K_I_SYNC, _K_BRANCH, _K_RETURN = int(Kind.I_SYNC), int(Kind.BRANCH), int(Kind.EXCEPTION_RETURN)
_K_CONTEXT_ID, _K_VMID, _K_TIMESTAMP = int(Kind.CONTEXT_ID), int(Kind.VMID), int(Kind.TIMESTAMP)
_K_TRIGGER, _K_ERROR = int(Kind.TRIGGER), int(Kind.ERROR)
_N_TRIGGER = N_KINDS + _K_TRIGGER


class PtmSourceWalk(SourceWalk):
    """One PTM source's packets, turned into instructions and events numbered from `first_seq`."""

    def __init__(
        self, source: EtmSource, program: Program, first_seq: int = 0,
        on_error: Callable[[Packets, int], None] | None = None,
    ) -> None:  # fmt: skip
        super().__init__(source, program, first_seq, on_error)
        self.state = new_state()

    def _packet_ops(self, packets: Packets) -> PacketOps:
        return packet_ops(packets, self.state, self.source.config.return_stack)

    def _events(self, packets: Packets, built: PacketOps, first_seq: int) -> pa.Table:
        """The events of a batch's packets, in packet order, made in one compiled pass."""
        rows = built.eventful
        if not len(rows):
            return NO_EVENTS
        t = packets.table
        out = np.empty((R_COUNT, 3 * len(rows)), np.int64)  # a packet makes three at most (an I-sync)
        config = self.source.config
        n = _event_rows(t, rows, built.before, built.gap, self.walker.op_end, first_seq, self.first_seq,
                        config.context_id_bytes > 0, self._context, out)  # fmt: skip
        _, kind, name, number, value, _, _, row = out[:, :n]
        names = Labels(_NAMES, name)
        texts = trace_texts(kind)
        exception = np.flatnonzero(kind == E_EXCEPTION)
        if len(exception):
            numbers = number[exception]
            names.add(exception, *distinct(exception_name, numbers))
            texts.add(exception, *distinct(
                lambda k, a: f"{exception_name(k)} exception to 0x{a:08x}", numbers, value[exception]
            ))  # fmt: skip
        gap_texts(texts, kind, row, t, ERROR_TEXT)
        return event_table(out[:, :n], self.source.cpu, names, texts, t["offset"])


@numba.njit(cache=True, nogil=True)
def _event_rows(packets, rows, before, gap, op_end, first_seq, source_seq, context_on_sync, context,
                out) -> int:  # fmt: skip
    """The events of packets[rows], in packet order, into out[_R_*]; returns how many.

    An event's seq is the last instruction's before its packet (before[p] ops came before it;
    op_end[i] is the seq after op i; the batch's first instruction is first_seq), or the
    source's first (source_seq) when there is none yet."""
    n = 0
    for i in range(len(rows)):
        p = rows[i]
        pk = packets[p]
        seq = event_seq(before, op_end, p, first_seq, source_seq)
        k = pk.kind
        counted = HAS_VALUE1 if pk.cycles >= 0 else 0
        cycles = max(pk.cycles, 0)
        if k == _K_I_SYNC:
            present = HAS_NUMBER | HAS_VALUE | counted
            n = put_event(out, n, seq, p, E_TRACE_ON, pk.info, pk.info, pk.address, cycles, present)
            if pk.info == I_SYNC_OVERFLOW:
                n = put_event(out, n, seq, p, E_OVERFLOW, I_SYNC_OVERFLOW, 0, 0, 0, 0)
            if context_on_sync:
                n = context_event(out, n, seq, p, N_CONTEXT_ID, pk.value, context, C_CONTEXT_ID)
        elif k == _K_BRANCH:
            present = HAS_NUMBER | HAS_VALUE | counted
            n = put_event(out, n, seq, p, E_EXCEPTION, -1, pk.exception, pk.address, cycles, present)
        elif k == _K_RETURN:
            n = put_event(out, n, seq, p, E_EXCEPTION_RETURN, N_EXCEPTION_RETURN, 0, 0, 0, 0)
        elif k == _K_CONTEXT_ID:
            n = context_event(out, n, seq, p, N_CONTEXT_ID, pk.value, context, C_CONTEXT_ID)
        elif k == _K_VMID:
            n = context_event(out, n, seq, p, N_VMID, pk.value, context, C_VMID)
        elif k == _K_TIMESTAMP:
            n = put_event(out, n, seq, p, E_TIMESTAMP, N_TIMESTAMP, 0, pk.value, cycles, HAS_VALUE | counted)
        elif k == _K_TRIGGER:
            n = put_event(out, n, seq, p, E_TRIGGER, _N_TRIGGER, 0, 0, 0, 0)
        elif gap[p]:  # an error or skipped bytes where the trace was synchronised: it breaks here
            n = put_event(out, n, seq, p, E_TRACE_GAP, N_KINDS + k, pk.size, 0, 0, HAS_NUMBER)
    return n
