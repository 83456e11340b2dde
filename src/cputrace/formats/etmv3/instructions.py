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

from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from ...flow import Op, Program, Walker
from ...model import SCHEMAS
from ..base import Batch
from .capture import EtmSource
from .data import DataMatcher
from .ops import PacketOps, new_state, packet_ops
from .packets import Packets
from .protocol import ERROR_TEXT, I_SYNC_REASONS, Flag, Kind, exception_name

_OVERFLOW = I_SYNC_REASONS.index("overflow")
_OVERFLOW_TEXT = "the ETM FIFO overflowed: trace was lost before this I-sync"


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
        t = packets.table[rows]  # the few packets that can make events: indices below are into these
        kind = t["kind"]
        made = built.before[rows]
        end = self.walker.op_end
        seq = np.where(made > 0, end[np.maximum(made - 1, 0)] - 1 if len(end) else 0, first_seq - 1)
        events = _EventColumns(self.source.cpu, np.maximum(seq, 0), t["offset"])
        address = t["address"].astype(np.uint64)
        i_sync = np.flatnonzero(kind == Kind.I_SYNC)
        reason = t["info"][i_sync].astype(np.int64)
        names = [I_SYNC_REASONS[r] for r in reason.tolist()]
        timed = t["cycles"][i_sync] >= 0
        cycles = np.where(timed, t["cycles"][i_sync] + built.pending[rows[i_sync]], 0).astype(np.uint64)
        events.add(i_sync, "trace_on", names, reason, address[i_sync], (cycles, ~timed))
        overflow = i_sync[reason == _OVERFLOW]
        events.add(overflow, "overflow", ["overflow"] * len(overflow), text=[_OVERFLOW_TEXT] * len(overflow))
        with_exception = (t["flags"] & Flag.EXCEPTION != 0) & (t["exception"] > 0)
        exception = np.flatnonzero((kind == Kind.BRANCH) & with_exception)
        number = t["exception"][exception].astype(np.int64)
        m_profile = self.source.config.m_profile
        names = [exception_name(n, m_profile) for n in number.tolist()]
        cancels = (t["flags"][exception] & Flag.CANCEL != 0).tolist()
        text = [
            f"{n} exception to 0x{a:08x}" + (" (cancels the last instruction)" if c else "")
            for n, a, c in zip(names, address[exception].tolist(), cancels, strict=True)
        ]
        events.add(exception, "exception", names, number, address[exception], text=text)
        exits = np.flatnonzero(kind == Kind.EXCEPTION_EXIT)
        events.add(exits, "exception_return", ["exception_return"] * len(exits))
        carries_context = kind == Kind.CONTEXT_ID
        if self.source.config.context_id_bytes:
            carries_context |= kind == Kind.I_SYNC
        for name, rows_of in (("context_id", carries_context), ("vmid", kind == Kind.VMID)):
            changed = self._changes(name, np.flatnonzero(rows_of), t["value"])
            events.add(changed, "context", [name] * len(changed), value=t["value"][changed])
        stamps = np.flatnonzero(kind == Kind.TIMESTAMP)
        values = t["value"][stamps]
        events.add(stamps, "timestamp", ["timestamp"] * len(stamps), value=values)
        gaps = np.searchsorted(rows, built.packet[built.ops.kind == Op.GAP])
        gap_names = [Kind(k).name.lower() for k in kind[gaps].tolist()]
        sizes, infos = t["size"][gaps].tolist(), t["info"][gaps].tolist()
        text = [
            f"{size} bytes: {ERROR_TEXT.get(info, 'bytes skipped') if n == 'error' else 'bytes skipped'}; "
            "no instructions until the next I-sync"
            for n, size, info in zip(gap_names, sizes, infos, strict=True)
        ]
        events.add(gaps, "trace_gap", gap_names, t["size"][gaps].astype(np.int64), text=text)
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


class _EventColumns:
    """Event rows gathered kind by kind from packet indices, then put in packet order."""

    def __init__(self, cpu: int, seq: np.ndarray, src: np.ndarray) -> None:
        self.cpu, self.seq, self.src = cpu, seq, src
        self.parts: list[tuple] = []

    def add(self, packets: np.ndarray, kind: str, names: list[str], number: np.ndarray | None = None,
            value: np.ndarray | None = None, value1: tuple[np.ndarray, np.ndarray] | None = None,
            text: list[str] | None = None) -> None:  # fmt: skip
        n = len(packets)
        if not n:
            return
        none = np.zeros(n, bool)
        self.parts.append((
            packets, [kind] * n, names,
            (np.zeros(n, np.int64), ~none) if number is None else (number, none),
            (np.zeros(n, np.uint64), ~none) if value is None else (value.astype(np.uint64), none),
            (np.zeros(n, np.uint64), ~none) if value1 is None else value1,
            [None] * n if text is None else text,
        ))  # fmt: skip

    def table(self) -> pa.Table:
        if not self.parts:
            return SCHEMAS["events"].empty_table()
        packets = np.concatenate([p[0] for p in self.parts])
        order = np.argsort(packets, kind="stable")
        packets = packets[order]

        def joined(i: int) -> np.ndarray:
            return np.concatenate([np.asarray(p[i], dtype=object) for p in self.parts])[order]

        def numbers(i: int) -> pa.Array:
            values = np.concatenate([p[i][0] for p in self.parts])[order]
            return pa.array(values, mask=np.concatenate([p[i][1] for p in self.parts])[order])

        n = len(packets)
        columns = [
            pa.array(self.seq[packets].astype(np.int64)),
            pa.nulls(n, pa.int64()),
            pa.array(np.full(n, self.cpu, np.uint16)),
            pa.array(joined(1), pa.string()).dictionary_encode(),
            numbers(3),
            pa.array(joined(2), pa.string()),
            numbers(4),
            numbers(5),
            pa.array(joined(6), pa.string()),
            pa.array(self.src[packets].astype(np.int64)),
        ]
        return pa.Table.from_arrays(columns, schema=SCHEMAS["events"])
