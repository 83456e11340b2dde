"""From ETMv4 packet batches to model rows: each source's ops walked through its core's image.

A source is walked as every CoreSight source is (`coresight.source_walk.SourceWalk`: one
`Walker` a source, seq numbering on from the source before), with ETMv4's ops and events. Events:
`trace_on` per trace-on packet (`name` `trace_on`, or `overflow` after an overflow), `overflow`
per overflow packet, `exception` per exception packet (`number` and `name` its type, `value`
its preferred return address), `exception_return`, `timestamp` (`value`; `value1` the cycle
count that comes with it), `context` when the context ID or the VMID changes, `trigger` per
event packet (`number` its event mask), and `trace_gap` for packet errors, resynchronisation,
discards and Q elements (`name` `q`, `number` the instructions it leaves out, or null when the
packet gives no count). An event's seq is that of the last instruction of its source before it;
an exception's, that of the last instruction before its preferred return address. A packet
batch that ends between an exception packet and its address packet is cut before the exception
packet, whose packets wait for the next batch (`ExceptionTail`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numba
import numpy as np

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
    Labels,
    context_event,
    distinct,
    event_names,
    event_seq,
    put_event,
)
from ...coresight.packet_ops import PacketOps
from ...coresight.packets import I_SYNC_OVERFLOW, I_SYNC_REASONS, Packets
from ...flow.program import Program
from ..base import Batch
from ..coresight.capture import EtmSource
from ..coresight.source_walk import SourceWalk
from .ops import ADDRESS_KINDS, new_state, packet_ops
from .protocol import ERROR_TEXT, KIND_NAMES, Flag, Kind, exception_name

_NAMES = event_names(KIND_NAMES)  # exceptions get theirs after
_N_TRACE_ON = I_SYNC_REASONS.index("trace_on")
_N_Q = N_KINDS + int(Kind.Q)
_K_TRACE_ON, _K_OVERFLOW, _K_EXCEPTION = int(Kind.TRACE_ON), int(Kind.OVERFLOW), int(Kind.EXCEPTION)
_K_EXCEPTION_RETURN, _K_TIMESTAMP, _K_EVENT = int(Kind.EXCEPTION_RETURN), int(Kind.TIMESTAMP), int(Kind.EVENT)
_K_CONTEXT, _K_ADDRESS_CONTEXT, _K_Q = int(Kind.CONTEXT), int(Kind.ADDRESS_CONTEXT), int(Kind.Q)
_F_CONTEXT_ID, _F_VMID, _F_UNKNOWN_COUNT = int(Flag.CONTEXT_ID), int(Flag.VMID), int(Flag.UNKNOWN_COUNT)
_F_Q_ADDRESS = int(Flag.Q_ADDRESS)
_N_DISCARD = N_KINDS + int(Kind.DISCARD)


class Etmv4SourceWalk(SourceWalk):
    """One ETMv4 source's packets, turned into instructions and events numbered from `first_seq`."""

    def __init__(
        self, source: EtmSource, program: Program, first_seq: int = 0,
        on_error: Callable[[Packets, int], None] | None = None,
    ) -> None:  # fmt: skip
        super().__init__(source, program, first_seq, on_error)
        self._overflowed = np.zeros(1, np.bool_)  # an overflow since the last trace on
        self._returns = np.zeros(0, np.uint64)
        self._tail = ExceptionTail()

    def batch(self, packets: Packets) -> Iterator[Batch]:
        packets = self._tail.joined(packets)
        if len(packets):
            yield from super().batch(packets)

    def finish(self) -> Iterator[Batch]:
        held = self._tail.held()
        if held is not None:
            yield from super().batch(held)
        yield from super().finish()

    def _new_state(self) -> np.ndarray:
        """The builder's state; its element queue (`queue`) beside it."""
        state, self.queue = new_state()
        return state

    def _packet_ops(self, packets: Packets) -> PacketOps:
        config = self.source.config
        self._returns = np.zeros(len(packets), np.uint64)
        return packet_ops(packets, self.state, self.queue, self._returns, return_stack=config.return_stack,
                          max_speculation=config.max_speculation)  # fmt: skip

    _names = _NAMES
    _error_text = ERROR_TEXT

    def _event_rows(self, t: np.ndarray, built: PacketOps, first_seq: int, out: np.ndarray) -> int:
        return _event_rows(t, built.eventful, built.before, built.gap, self.walker.op_end, first_seq,
                           self.first_seq, self._returns, self._overflowed, self._context, out)  # fmt: skip

    def _label(self, t: np.ndarray, rows: np.ndarray, names: Labels, texts: Labels) -> None:
        """Names and texts of exception, Q and discard events."""
        _, kind, name, number, value, _, present, _ = rows
        m_profile = self.source.config.m_profile
        exception = np.flatnonzero(kind == E_EXCEPTION)
        if len(exception):
            numbers, known = number[exception], present[exception] & HAS_VALUE != 0
            names.add(exception, *distinct(lambda k: exception_name(k, m_profile), numbers))
            texts.add(exception, *distinct(
                lambda k, a, b: f"{exception_name(k, m_profile)} exception"
                + (f", returning to 0x{a:x}" if b else ""),
                numbers, value[exception], known,
            ))  # fmt: skip
        q = np.flatnonzero(name == _N_Q)
        if len(q):
            counted = present[q] & HAS_NUMBER != 0
            texts.add(q, *distinct(
                lambda c, b: f"Q element: {c if b else 'an unknown number of'} instructions not traced; "
                "no instructions until the next address",
                number[q], counted,
            ))  # fmt: skip
        discard = np.flatnonzero(name == _N_DISCARD)
        texts.add(discard, np.zeros(len(discard), np.int64), [
            "the trace unit discarded its speculative elements; no instructions until the next address"
        ])  # fmt: skip


class ExceptionTail:
    """Keeps an exception packet whose address packet has not come yet for the next batch.

    An exception element is complete with the address packet that follows it (its preferred
    return address, ETMv4 spec IHI 0064 6.4.12). A batch that ends between the two is cut before
    the exception packet, and what follows it waits to lead the next batch: the exception event
    then has its return address and seq, whatever the batch size. Only a short tail is held (an
    address packet follows within a few packets), so memory stays bounded."""

    LONGEST = 64
    """Packets held at most; a longer tail without an address goes on as it is."""

    def __init__(self) -> None:
        self._held: Packets | None = None

    def joined(self, packets: Packets) -> Packets:
        """The held packets and `packets`, less a new tail (held in turn)."""
        if self._held is not None:
            packets, self._held = Packets.concatenate([self._held, packets]), None
        cut = _incomplete_exception(packets["kind"], self.LONGEST)
        if cut < len(packets):
            self._held = Packets(packets.table[cut:], packets.stream, packets.stream_pos)
            packets = Packets(packets.table[:cut], packets.stream, packets.stream_pos)
        return packets

    def held(self) -> Packets | None:
        """The packets held at the end of the stream (no address will come)."""
        held, self._held = self._held, None
        return held


_ADDRESS_KINDS = [int(kind) for kind in ADDRESS_KINDS]


def _incomplete_exception(kinds: np.ndarray, longest: int) -> int:
    """Where the last exception packet is, when no address packet follows it among the last
    `longest` packets; len(kinds) otherwise."""
    tail = kinds[-longest:]
    exceptions = np.flatnonzero(tail == _K_EXCEPTION)
    if not len(exceptions) or np.isin(tail[exceptions[-1] :], _ADDRESS_KINDS).any():
        return len(kinds)
    return len(kinds) - len(tail) + int(exceptions[-1])


@numba.njit(cache=True, nogil=True)
def _event_rows(packets, rows, before, gap, op_end, first_seq, source_seq, returns, overflowed, context,
                out) -> int:  # fmt: skip
    """The events of packets[rows], in packet order, into out[R_*] (at the seqs `event_seq`
    gives); returns how many."""
    n = 0
    for i in range(len(rows)):
        p = rows[i]
        pk = packets[p]
        seq = event_seq(before, op_end, p, first_seq, source_seq)
        k = pk.kind
        if k == _K_TRACE_ON:
            name = I_SYNC_OVERFLOW if overflowed[0] else _N_TRACE_ON
            overflowed[0] = False
            n = put_event(out, n, seq, p, E_TRACE_ON, name, name, 0, 0, HAS_NUMBER)
        elif k == _K_OVERFLOW:
            overflowed[0] = True
            n = put_event(out, n, seq, p, E_OVERFLOW, I_SYNC_OVERFLOW, 0, 0, 0, 0)
        elif k == _K_EXCEPTION:
            present = HAS_NUMBER | (HAS_VALUE if returns[p] else 0)
            n = put_event(out, n, seq, p, E_EXCEPTION, -1, pk.exception, returns[p], 0, present)
        elif k == _K_EXCEPTION_RETURN:
            n = put_event(out, n, seq, p, E_EXCEPTION_RETURN, N_EXCEPTION_RETURN, 0, 0, 0, 0)
        elif k == _K_TIMESTAMP:
            present = HAS_VALUE | (HAS_VALUE1 if pk.cycles >= 0 else 0)
            n = put_event(out, n, seq, p, E_TIMESTAMP, N_TIMESTAMP, 0, pk.value, max(pk.cycles, 0), present)
        elif k in (_K_CONTEXT, _K_ADDRESS_CONTEXT):
            if pk.flags & _F_CONTEXT_ID:
                n = context_event(out, n, seq, p, N_CONTEXT_ID, pk.value, context, C_CONTEXT_ID)
            if pk.flags & _F_VMID:
                n = context_event(out, n, seq, p, N_VMID, pk.value2, context, C_VMID)
        elif k == _K_EVENT:
            n = put_event(out, n, seq, p, E_TRIGGER, N_KINDS + k, pk.value, 0, 0, HAS_NUMBER)
        elif k == _K_Q:
            counted = 0 if pk.flags & _F_UNKNOWN_COUNT else HAS_NUMBER
            present = counted | (HAS_VALUE if pk.flags & _F_Q_ADDRESS else 0)
            n = put_event(out, n, seq, p, E_TRACE_GAP, _N_Q, pk.value, pk.address, 0, present)
        elif gap[p]:
            n = put_event(out, n, seq, p, E_TRACE_GAP, N_KINDS + k, pk.size, 0, 0, HAS_NUMBER)
    return n
