"""From ETMv3 packet batches to model rows: each source's ops walked through its core's image.

Each source has its own `Walker`; sources are decoded one after the other, each numbering on
from where the one before it ended. Events come from the few packets that are not atoms:
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

from collections.abc import Callable, Iterator, Sequence

import numba
import numpy as np
import pyarrow as pa

from ...flow.program import Program
from ...flow.walker import Walker
from ...model import SCHEMAS
from ..base import Batch
from .capture import EtmSource
from .data import DataMatcher
from .ops import PacketOps, new_state, packet_ops
from .packets import Packets
from .protocol import ERROR_TEXT, I_SYNC_REASONS, KIND_NAMES, Flag, Kind, exception_name

_OVERFLOW, _PERIODIC = I_SYNC_REASONS.index("overflow"), I_SYNC_REASONS.index("periodic")
_TEXTS = (  # of overflow and trigger events
    "the ETM FIFO overflowed: trace was lost before this I-sync",
    "the ETM's trigger condition occurred",
)


class SourceWalk:
    """One source's packets, turned into instructions, events and memory rows numbered from
    `first_seq`; each table's rows come out in seq order."""

    def __init__(
        self, source: EtmSource, program: Program, first_seq: int = 0,
        on_error: Callable[[Packets, int], None] | None = None,
    ) -> None:  # fmt: skip
        """`on_error(packets, row)` is told of each error packet (reserved or malformed)."""
        self.source = source
        self.first_seq = first_seq
        self.on_error = on_error
        self.walker = Walker(program, cpu=source.cpu, first_seq=first_seq)
        self.state = new_state()
        self.cycle_accurate = source.config.cycle_accurate
        config = source.config
        traces_data = config.data_value or config.data_address
        self.data = DataMatcher(program, config, source.cpu, first_seq) if traces_data else None
        self._context = np.full(2, -1, np.int64)  # the last context ID and VMID seen (_C_*), -1: none yet

    def batch(self, packets: Packets) -> Iterator[Batch]:
        """Rows of one packet batch: instructions as the walk makes them, then memory, then
        the batch's events in one table.

        The walk holds its last row back (see `flow.walker.Walker`), and data packets wait for it:
        every event of a batch is at or before that row, every event of the next one at or
        after it, so each batch's events, sorted, follow the last batch's."""
        first_seq = self.walker.next_seq
        built = self._packet_ops(packets)
        if self.on_error is not None:  # errors are among the few eventful packets
            for row in built.eventful[packets["kind"][built.eventful] == Kind.ERROR].tolist():
                self.on_error(packets, row)
        if self.source.config.data_only:  # its I-syncs have no address: there is nothing to walk
            built = built.without_ops()
        gaps: list[pa.Table] = []
        yield from self._walked(self.walker.run(built.ops), gaps)
        events = [self._after_last(gaps), self._events(packets, built, first_seq)]
        if self.data is not None:
            self.data.add(packets, built, self.walker.op_end, first_seq)
            yield from self._matched(self.data.rows(), events)
        yield {"events": _in_seq_order(events)}

    def _packet_ops(self, packets: Packets) -> PacketOps:
        """The waypoint ops of a batch (a protocol's walk gives its own)."""
        return packet_ops(packets, self.state, self.cycle_accurate)

    def finish(self) -> Iterator[Batch]:
        gaps: list[pa.Table] = []
        yield from self._walked(self.walker.finish(), gaps)
        events = [self._after_last(gaps)]
        if self.data is not None:
            yield from self._matched(self.data.rows(final=True), events)
        yield {"events": _in_seq_order(events)}

    def _walked(self, batches: Iterator[Batch], gaps: list[pa.Table]) -> Iterator[Batch]:
        """The walk's instructions, shown to the data matcher; its trace gaps go to `gaps`."""
        for batch in batches:
            if self.data is not None:
                self.data.see(batch["instructions"])
            if batch["events"].num_rows:
                gaps.append(batch["events"])
            yield {"instructions": batch["instructions"]}

    def _after_last(self, gaps: list[pa.Table]) -> pa.Table:
        """The walk's trace gaps, each given the seq of the last instruction before it (the
        walk gives the next one's), as every other event of the source: the source's first
        instruction's, before any."""
        if not gaps:
            return _NO_EVENTS
        table = pa.concat_tables(gaps)
        index = table.schema.get_field_index("seq")
        seq = np.maximum(table["seq"].to_numpy() - 1, self.first_seq)
        return table.set_column(index, table.schema.field(index), pa.array(seq))

    @staticmethod
    def _matched(batches: Iterator[Batch], events: list[pa.Table]) -> Iterator[Batch]:
        """The data matcher's memory rows; its events go to `events`."""
        for batch in batches:
            if "events" in batch:
                events.append(batch["events"])
            if "memory" in batch:
                yield {"memory": batch["memory"]}

    @property
    def next_seq(self) -> int:
        return self.walker.next_seq

    def _events(self, packets: Packets, built: PacketOps, first_seq: int) -> pa.Table:
        """The events of a batch's packets (few: one per I-sync, timestamp or exception), in
        packet order, made in one compiled pass; text is formatted once per distinct value."""
        rows = built.eventful
        if not len(rows):
            return _NO_EVENTS
        t = packets.table
        out = np.empty((_R_COUNT, 3 * len(rows)), np.int64)  # a packet makes three at most (an I-sync)
        config = self.source.config
        n = _event_rows(t, rows, built.before, built.pending, built.gap, self.walker.op_end, first_seq,
                        self.first_seq, self.cycle_accurate, config.context_id_bytes > 0, self._context,
                        out)  # fmt: skip
        seq, kind, name, number, value, value1, present, row = out[:, :n]
        names = _Labels(_NAMES, name)  # exceptions' names are added to these
        texts = _Labels(_TEXTS, np.select([kind == _E_OVERFLOW, kind == _E_TRIGGER], [0, 1], -1))
        counts = np.flatnonzero(name == _N_CYCLE_COUNT)
        if len(counts):
            texts.add(counts, *_distinct(
                lambda c: f"{c} cycles of trace-off time before the last trace-on I-sync" if c
                else "cycle count 0: the counter overflowed, the trace-off time is not known",
                value1[counts],
            ))  # fmt: skip
        exception = np.flatnonzero(kind == _E_EXCEPTION)
        if len(exception):
            at, numbers = row[exception], number[exception]
            m_profile = config.m_profile
            names.add(exception, *_distinct(lambda k: exception_name(k, m_profile), numbers))
            cancels = t["flags"][at] & Flag.CANCEL != 0
            texts.add(exception, *_distinct(
                lambda k, a, c: f"{exception_name(k, m_profile)} exception to 0x{a:08x}"
                + (" (cancels the last instruction)" if c else ""),
                numbers, value[exception], cancels,
            ))  # fmt: skip
        gap = np.flatnonzero(kind == _E_TRACE_GAP)
        if len(gap):
            at = row[gap]
            texts.add(gap, *_distinct(
                lambda k, size, info: f"{size} bytes: "
                f"{ERROR_TEXT.get(info, 'bytes skipped') if k == Kind.ERROR else 'bytes skipped'}; "
                "no instructions until the next I-sync",
                t["kind"][at], t["size"][at], t["info"][at],
            ))  # fmt: skip
        columns = [
            pa.array(seq),
            pa.nulls(n, pa.int64()),
            pa.array(np.full(n, self.source.cpu, np.uint16)),
            pa.DictionaryArray.from_arrays(pa.array(kind.astype(np.int32)), _EVENT_KINDS),
            pa.array(number, mask=(present & _HAS_NUMBER) == 0),
            names.array(),
            pa.array(value.astype(np.uint64), mask=(present & _HAS_VALUE) == 0),
            pa.array(value1.astype(np.uint64), mask=(present & _HAS_VALUE1) == 0),
            texts.array(),
            pa.array(t["offset"][row]),
        ]
        return pa.Table.from_arrays(columns, schema=SCHEMAS["events"])


def _in_seq_order(tables: list[pa.Table]) -> pa.Table:
    """Event tables, each in order, merged into one by seq and, within a seq, buffer offset
    (input order; ties keep the tables' order). The result is slices of the tables, not a copy:
    most batches' walk gaps fall between runs of many packet events."""
    tables = [t for t in tables if t.num_rows]
    if len(tables) < 2:
        return tables[0] if tables else _NO_EVENTS
    sizes = [t.num_rows for t in tables]
    seq = np.concatenate([t["seq"].to_numpy() for t in tables])
    src = np.concatenate([t["src"].to_numpy() for t in tables])
    order = np.lexsort((src, seq))  # stable
    table_of = np.repeat(np.arange(len(tables)), sizes)[order]
    row = order - np.concatenate([[0], np.cumsum(sizes)[:-1]])[table_of]
    starts = np.flatnonzero(np.diff(table_of, prepend=-1))  # runs of rows of one table, in its order
    ends = np.append(starts[1:], len(order))
    return pa.concat_tables([
        tables[table_of[a]].slice(row[a], b - a) for a, b in zip(starts.tolist(), ends.tolist(), strict=True)
    ])  # fmt: skip


def _distinct(label: Callable[..., str], *keys: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Strings that depend only on `keys`, formatted once per distinct key (few, of many events):
    a code per row into the strings."""
    stacked = np.column_stack([key.astype(np.int64) for key in keys])
    distinct, codes = np.unique(stacked, axis=0, return_inverse=True)
    return codes.reshape(-1), [label(*key) for key in distinct.tolist()]


class _Labels:
    """A string column as codes into a few labels (-1: null), so no Python runs per event."""

    def __init__(self, labels: Sequence[str], codes: np.ndarray) -> None:
        self.labels, self.codes = list(labels), codes

    def add(self, rows: np.ndarray, codes: np.ndarray, labels: Sequence[str]) -> None:
        """Give `rows` these codes into these labels."""
        self.codes[rows] = codes + len(self.labels)
        self.labels.extend(labels)

    def array(self) -> pa.Array:
        return pa.array(self.labels, pa.string()).take(pa.array(self.codes, mask=self.codes < 0))


# The rows the compiled pass makes (out[_R_*]): `kind` indexes _EVENT_KINDS, `name` _NAMES (an
# I-sync's reason, then the _N_* labels, then packet kinds; exceptions get theirs after),
# `present` says which of number, value and value1 the row has, `row` is its packet's row.
(
    _E_TRACE_ON, _E_OVERFLOW, _E_EXCEPTION, _E_EXCEPTION_RETURN, _E_CONTEXT, _E_TIMESTAMP, _E_TRACE_GAP,
    _E_TRIGGER,
) = range(8)  # fmt: skip
_EVENT_KINDS = pa.array(
    ["trace_on", "overflow", "exception", "exception_return", "context", "timestamp", "trace_gap", "trigger"]
)
_NAMES = (*I_SYNC_REASONS, "exception_return", "context_id", "vmid", "timestamp", *KIND_NAMES)
_N_EXCEPTION_RETURN, _N_CONTEXT_ID, _N_VMID, _N_TIMESTAMP, _N_KINDS = (
    _NAMES.index(name) for name in ("exception_return", "context_id", "vmid", "timestamp", KIND_NAMES[0])
)
_R_SEQ, _R_KIND, _R_NAME, _R_NUMBER, _R_VALUE, _R_VALUE1, _R_PRESENT, _R_ROW, _R_COUNT = range(9)
_HAS_NUMBER, _HAS_VALUE, _HAS_VALUE1 = 1, 2, 4
_NO_EVENTS = SCHEMAS["events"].empty_table()
# The last context ID and VMID seen (`SourceWalk._context`), -1 before the first.
_C_CONTEXT_ID, _C_VMID = 0, 1

_K_I_SYNC, _K_BRANCH, _K_EXIT = int(Kind.I_SYNC), int(Kind.BRANCH), int(Kind.EXCEPTION_EXIT)
_K_CONTEXT_ID, _K_VMID, _K_TIMESTAMP = int(Kind.CONTEXT_ID), int(Kind.VMID), int(Kind.TIMESTAMP)
_K_CYCLE_COUNT, _K_TRIGGER = int(Kind.CYCLE_COUNT), int(Kind.TRIGGER)
_N_CYCLE_COUNT, _N_TRIGGER = _N_KINDS + _K_CYCLE_COUNT, _N_KINDS + _K_TRIGGER
_F_EXCEPTION = int(Flag.EXCEPTION)


@numba.njit(cache=True, nogil=True)
def _event_rows(packets, rows, before, pending, gap, op_end, first_seq, source_seq, cycle_accurate,
                context_on_sync, context, out) -> int:  # fmt: skip
    """The events of packets[rows], in packet order, into out[_R_*]; returns how many.

    An event's seq is the last instruction's before its packet (before[p] ops came before it;
    op_end[i] is the seq after op i; the batch's first instruction is first_seq), or the
    source's first (source_seq) when there is none yet. A trace-on I-sync's value1 is the
    trace-off time before it: its cycle count (when it has one) and the W cycles it ended
    (pending[p]); a cycle-count packet gives the count of the last one that had none."""
    n = 0
    for i in range(len(rows)):
        p = rows[i]
        pk = packets[p]
        made = before[p]
        seq = max(op_end[made - 1] - 1 if made > 0 else first_seq - 1, source_seq)
        k = pk.kind
        if k == _K_I_SYNC:
            ends_trace_off = pk.cycles >= 0 or (cycle_accurate and pk.info != _PERIODIC)
            value1 = max(pk.cycles, 0) + pending[p]
            present = _HAS_NUMBER | _HAS_VALUE | (_HAS_VALUE1 if ends_trace_off else 0)
            n = _put(out, n, seq, p, _E_TRACE_ON, pk.info, pk.info, pk.address, value1, present)
            if pk.info == _OVERFLOW:
                n = _put(out, n, seq, p, _E_OVERFLOW, _OVERFLOW, 0, 0, 0, 0)
            if context_on_sync:
                n = _context(out, n, seq, p, _N_CONTEXT_ID, pk.value, context, _C_CONTEXT_ID)
        elif k == _K_BRANCH:
            if pk.flags & _F_EXCEPTION and pk.exception > 0:
                present = _HAS_NUMBER | _HAS_VALUE
                n = _put(out, n, seq, p, _E_EXCEPTION, -1, pk.exception, pk.address, 0, present)
        elif k == _K_EXIT:
            n = _put(out, n, seq, p, _E_EXCEPTION_RETURN, _N_EXCEPTION_RETURN, 0, 0, 0, 0)
        elif k == _K_CONTEXT_ID:
            n = _context(out, n, seq, p, _N_CONTEXT_ID, pk.value, context, _C_CONTEXT_ID)
        elif k == _K_VMID:
            n = _context(out, n, seq, p, _N_VMID, pk.value, context, _C_VMID)
        elif k == _K_TIMESTAMP:
            n = _put(out, n, seq, p, _E_TIMESTAMP, _N_TIMESTAMP, 0, pk.value, 0, _HAS_VALUE)
        elif k == _K_CYCLE_COUNT:  # a count of 0 says the counter overflowed: the time is not known
            present = _HAS_VALUE1 if pk.cycles else 0
            n = _put(out, n, seq, p, _E_TRACE_ON, _N_CYCLE_COUNT, 0, 0, pk.cycles, present)
        elif k == _K_TRIGGER:
            n = _put(out, n, seq, p, _E_TRIGGER, _N_TRIGGER, 0, 0, 0, 0)
        elif gap[p]:  # an error or skipped bytes where the trace was synchronised: it breaks here
            n = _put(out, n, seq, p, _E_TRACE_GAP, _N_KINDS + k, pk.size, 0, 0, _HAS_NUMBER)
    return n


@numba.njit(cache=True, nogil=True)
def _context(out, n, seq, p, name, value, context, which) -> int:
    """A `context` event when the context ID or VMID (`which`) differs from the last seen."""
    value = np.int64(value)
    if value == context[which]:
        return n
    context[which] = value
    return _put(out, n, seq, p, _E_CONTEXT, name, 0, value, 0, _HAS_VALUE)


@numba.njit(cache=True, nogil=True, inline="always")
def _put(out, n, seq, p, kind, name, number, value, value1, present) -> int:
    out[_R_SEQ, n], out[_R_KIND, n], out[_R_NAME, n], out[_R_NUMBER, n] = seq, kind, name, number
    out[_R_VALUE, n], out[_R_VALUE1, n], out[_R_PRESENT, n], out[_R_ROW, n] = value, value1, present, p
    return n + 1
