"""From ETMv3 packet batches to model rows: each source's ops walked through its core's image.

Each source has its own `Walker`; all share one seq order (a source's walk numbers on from
the rows the others have emitted). Events come from the few packets that are not atoms:
`trace_on` per I-sync (`name` its reason; `value` the address; `value1` the cycles since the
trace stopped, in cycle-accurate mode, including the W cycles after the last atom), an
`overflow` event when the reason is overflow, `exception` per branch address with exception
information (`number` and `name` the exception, `value` the vector), `exception_return`,
`timestamp` (`value`), `context` when the context ID (`name` `context_id`, from context-ID
packets and I-syncs) or the VMID (`name` `vmid`) changes, with the new value in `value`, and
`trace_gap` for packet errors and resynchronisation. An event's seq is that of the last
instruction before it. With data trace on, data packets become
`memory` rows (`data`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import numpy as np
import pyarrow as pa

from ...flow import Op, Program, Walker
from ...model import SCHEMAS
from ..base import Batch
from .capture import EtmSource
from .data import DataMatcher
from .ops import PacketOps, new_state, packet_ops
from .packets import Packets
from .protocol import ERROR_TEXT, I_SYNC_REASONS, KIND_NAMES, Flag, Kind, exception_name

_OVERFLOW = I_SYNC_REASONS.index("overflow")
_OVERFLOW_TEXT = "the ETM FIFO overflowed: trace was lost before this I-sync"
_Strings = tuple[np.ndarray, Sequence[str]]  # codes into labels


class SourceWalk:
    """One source's packets, turned into instructions and events."""

    def __init__(self, source: EtmSource, program: Program) -> None:
        self.source = source
        self.walker = Walker(program, cpu=source.cpu)
        self.state = new_state()
        self.cycle_accurate = source.config.cycle_accurate
        config = source.config
        traces_data = config.data_value or config.data_address
        self.data = DataMatcher(program, config, source.cpu) if traces_data else None
        self.context: dict[str, int | None] = {"context_id": None, "vmid": None}  # the last values seen

    def batch(self, packets: Packets, next_seq: int) -> Iterator[Batch]:
        """Rows of one packet batch, numbered from `next_seq` (then see `next_seq`)."""
        self.walker.next_seq = next_seq
        first_seq = next_seq
        built = packet_ops(packets, self.state, self.cycle_accurate)
        if self.source.config.data_only:  # its I-syncs have no address: there is nothing to walk
            built = built.without_ops()
        yield from self._seen(self.walker.run(built.ops))
        yield {"events": self._events(packets, built, first_seq)}
        if self.data is not None:
            self.data.add(packets, built, self.walker.op_end, first_seq)
            yield from self.data.rows()

    def finish(self) -> Iterator[Batch]:
        yield from self._seen(self.walker.finish())
        if self.data is not None:
            yield from self.data.rows(final=True)

    def _seen(self, batches: Iterator[Batch]) -> Iterator[Batch]:
        """The walk's batches, with their instructions shown to the data matcher."""
        for batch in batches:
            if self.data is not None:
                self.data.see(batch["instructions"])
            yield batch

    @property
    def next_seq(self) -> int:
        return self.walker.next_seq

    def _events(self, packets: Packets, built: PacketOps, first_seq: int) -> pa.Table:
        """The events of a batch's packets, built column-wise (there is one per branch or I-sync)."""
        rows = built.eventful
        # the few packets that can make events: indices below are into these (np.take: indexing
        # records with [] copies them one by one, some 25 times slower)
        t = np.take(packets.table, rows)
        kind = t["kind"]
        made = built.before[rows]
        end = self.walker.op_end
        seq = np.where(made > 0, end[np.maximum(made - 1, 0)] - 1 if len(end) else 0, first_seq - 1)
        events = _EventColumns(self.source.cpu, np.maximum(seq, 0), t["offset"])
        address = t["address"].astype(np.uint64)
        i_sync = np.flatnonzero(kind == Kind.I_SYNC)
        reason = t["info"][i_sync].astype(np.int64)
        timed = t["cycles"][i_sync] >= 0
        cycles = np.where(timed, t["cycles"][i_sync] + built.pending[rows[i_sync]], 0).astype(np.uint64)
        events.add(i_sync, "trace_on", (reason, I_SYNC_REASONS), reason, address[i_sync], (cycles, ~timed))
        overflow = i_sync[reason == _OVERFLOW]
        events.add(overflow, "overflow", "overflow", text=_OVERFLOW_TEXT)
        with_exception = (t["flags"] & Flag.EXCEPTION != 0) & (t["exception"] > 0)
        exception = np.flatnonzero((kind == Kind.BRANCH) & with_exception)
        number = t["exception"][exception].astype(np.int64)
        m_profile = self.source.config.m_profile
        cancels = t["flags"][exception] & Flag.CANCEL != 0
        names = _distinct(lambda n: exception_name(n, m_profile), number)
        text = _distinct(
            lambda n, a, c: f"{exception_name(n, m_profile)} exception to 0x{a:08x}"
            + (" (cancels the last instruction)" if c else ""),
            number, address[exception], cancels,
        )  # fmt: skip
        events.add(exception, "exception", names, number, address[exception], text=text)
        exits = np.flatnonzero(kind == Kind.EXCEPTION_EXIT)
        events.add(exits, "exception_return", "exception_return")
        carries_context = kind == Kind.CONTEXT_ID
        if self.source.config.context_id_bytes:
            carries_context |= kind == Kind.I_SYNC
        for name, rows_of in (("context_id", carries_context), ("vmid", kind == Kind.VMID)):
            changed = self._changes(name, np.flatnonzero(rows_of), t["value"])
            events.add(changed, "context", name, value=t["value"][changed])
        stamps = np.flatnonzero(kind == Kind.TIMESTAMP)
        events.add(stamps, "timestamp", "timestamp", value=t["value"][stamps])
        gaps = np.searchsorted(rows, built.packet[built.ops.kind == Op.GAP])
        text = _distinct(
            lambda k, size, info: f"{size} bytes: "
            f"{ERROR_TEXT.get(info, 'bytes skipped') if k == Kind.ERROR else 'bytes skipped'}; "
            "no instructions until the next I-sync",
            kind[gaps], t["size"][gaps], t["info"][gaps],
        )  # fmt: skip
        size = t["size"][gaps].astype(np.int64)
        events.add(gaps, "trace_gap", (kind[gaps].astype(np.int64), KIND_NAMES), size, text=text)
        return events.table()

    def _changes(self, name: str, rows: np.ndarray, values: np.ndarray) -> np.ndarray:
        """The rows among `rows` whose value differs from the one before (the first ever counts)."""
        if not len(rows):
            return rows
        seen = values[rows].astype(np.int64)
        last = self.context[name]
        before = np.concatenate([[seen[0] - 1 if last is None else last], seen[:-1]])
        self.context[name] = int(seen[-1])
        return rows[seen != before]


def _distinct(label: Callable[..., str], *keys: np.ndarray) -> _Strings:
    """Strings that depend only on `keys`, formatted once per distinct key (few, of many events)."""
    if not len(keys[0]):  # the usual case, and np.unique over rows costs even when there are none
        return np.zeros(0, np.int64), ()
    stacked = np.column_stack([key.astype(np.int64) for key in keys])
    distinct, codes = np.unique(stacked, axis=0, return_inverse=True)
    return codes.reshape(-1), [label(*key) for key in distinct.tolist()]


class _EventColumns:
    """Event rows gathered kind by kind from packet indices, then put in packet order.

    String columns come as one string for all of a kind's rows, or as codes into a few labels,
    so that no Python runs per event."""

    def __init__(self, cpu: int, seq: np.ndarray, src: np.ndarray) -> None:
        self.cpu, self.seq, self.src = cpu, seq, src
        self.parts: list[tuple] = []

    def add(self, packets: np.ndarray, kind: str, names: str | _Strings, number: np.ndarray | None = None,
            value: np.ndarray | None = None, value1: tuple[np.ndarray, np.ndarray] | None = None,
            text: str | _Strings | None = None) -> None:  # fmt: skip
        n = len(packets)
        if not n:
            return
        none = np.zeros(n, bool)
        self.parts.append((
            packets, kind, names,
            (np.zeros(n, np.int64), ~none) if number is None else (number, none),
            (np.zeros(n, np.uint64), ~none) if value is None else (value.astype(np.uint64), none),
            (np.zeros(n, np.uint64), ~none) if value1 is None else value1,
            text,
        ))  # fmt: skip

    def table(self) -> pa.Table:
        if not self.parts:
            return SCHEMAS["events"].empty_table()
        packets = np.concatenate([p[0] for p in self.parts])
        order = np.argsort(packets, kind="stable")
        packets = packets[order]

        def numbers(i: int) -> pa.Array:
            values = np.concatenate([p[i][0] for p in self.parts])[order]
            return pa.array(values, mask=np.concatenate([p[i][1] for p in self.parts])[order])

        def strings(i: int) -> pa.Array:
            """Codes into all parts' labels (-1: null), taken in row order."""
            labels: list[str] = []
            codes = []
            for part in self.parts:
                given, rows = part[i], len(part[0])
                if given is None:
                    codes.append(np.full(rows, -1, np.int64))
                    continue
                own, own_labels = (np.zeros(rows, np.int64), (given,)) if isinstance(given, str) else given
                codes.append(own + len(labels))
                labels.extend(own_labels)
            if not labels:
                return pa.nulls(len(order), pa.string())
            ordered = np.concatenate(codes)[order]
            return pa.array(labels, pa.string()).take(pa.array(ordered, mask=ordered < 0))

        n = len(packets)
        columns = [
            pa.array(self.seq[packets].astype(np.int64)),
            pa.nulls(n, pa.int64()),
            pa.array(np.full(n, self.cpu, np.uint16)),
            strings(1).dictionary_encode(),
            numbers(3),
            strings(2),
            numbers(4),
            numbers(5),
            strings(6),
            pa.array(self.src[packets].astype(np.int64)),
        ]
        return pa.Table.from_arrays(columns, schema=SCHEMAS["events"])
