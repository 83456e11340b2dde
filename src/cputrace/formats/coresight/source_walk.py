"""One CoreSight trace source's packet batches turned into model rows, whatever its protocol.

Each source has its own `Walker` through its core's image; sources are decoded one after the
other, each numbering on from where the one before it ended. A protocol (ETMv3, PTM, ETMv4)
subclasses `SourceWalk` with its op builder and its events: which packets are events, at which
seq, with which names and texts.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from ...coresight.events import R_COUNT, R_KIND, R_NAME, R_ROW, Labels, gap_texts, trace_texts
from ...coresight.held_events import HeldEvents
from ...coresight.packet_ops import PacketOps
from ...coresight.packets import K_ERROR, Packets
from ...flow.batches import ROW, instructions
from ...flow.program import Program
from ...flow.walker import Walker
from ...kernels.records import copied, joined
from ..base import Batch
from .capture import EtmSource

if TYPE_CHECKING:
    from ..etmv3.data import DataMatcher

EARLIER = -(1 << 62)
"""The first seq of a source resumed after its first instruction: below every seq, so that no
event is moved up to it."""
ROW_BUDGET = 1 << 15
"""Instruction or event rows a source's walk holds before it yields them: a small source comes
out as one instructions table and one events table, a large one in tables of about a full walk
buffer (`flow.walker.Walker`), so memory stays bounded."""


class SourceWalk(ABC):
    """One source's packets, turned into instructions, events and memory rows numbered from
    `first_seq`; each table's rows come out in seq order, instructions and events held until
    they are ROW_BUDGET rows or the source ends."""

    _names: list[str]
    """`name` labels of the protocol's event rows (`coresight.events.event_names`)."""
    _error_text: dict[int, str]
    """The text of an error packet's reason, by its `info`."""
    _data_only = False
    """The source traces data and no instructions: its ops are not walked."""

    def __init__(
        self, source: EtmSource, program: Program, first_seq: int = 0,
        on_error: Callable[[Packets, int], None] | None = None,
    ) -> None:  # fmt: skip
        """`on_error(packets, row)` is told of each error packet (reserved or malformed)."""
        self.source = source
        self.first_seq = first_seq
        self.on_error = on_error
        self.walker = Walker(program, cpu=source.cpu, first_seq=first_seq, records=True)
        self.state = self._new_state()
        self.data = self._data_matcher(program)
        self._context = np.full(2, -1, np.int64)  # the last context ID and VMID seen (_C_*), -1: none yet
        self._rows: list[np.ndarray] = []  # the walk's ROW records held (ROW_BUDGET)
        self._row_count = 0
        self._events = HeldEvents(source.cpu, program)

    def carried(self) -> dict[str, Any]:
        """What the packets still to come take from those walked so far, free of this walk's
        numbering (`flow.walker.Walker.carried`): the walk's, the op builder's and the data
        matcher's state, the last context ID and VMID, and whether any instruction came
        before (events before the source's first take its seq)."""
        next_seq = self.walker.next_seq
        return {
            "walk": self.walker.carried(), "ops": self.state.copy(), "context": self._context.copy(),
            "started": np.array([next_seq > self.first_seq]),
            "data": {} if self.data is None else self.data.carried(next_seq),
        }  # fmt: skip

    def resume(self, carried: dict[str, Any], next_seq: int) -> None:
        """Go on from a walk's `carried` state, numbering from `next_seq`."""
        self.first_seq = EARLIER if carried["started"][0] else next_seq
        self.walker.resume(carried["walk"], next_seq)
        self.state[:] = carried["ops"]
        self._context[:] = carried["context"]
        if self.data is not None:
            self.data.first_seq = self.first_seq
            self.data.resume(carried["data"], next_seq)

    def batch(self, packets: Packets) -> Iterator[Batch]:
        """Rows of one packet batch: memory as it is matched; instructions and events once
        ROW_BUDGET of them are held (else at `finish`).

        The walk holds its last row back (see `flow.walker.Walker`), and data packets wait for it:
        every event of a batch is at or before that row, every event of the next one at or
        after it, so each batch's events, sorted, follow the last batch's."""
        first_seq = self.walker.next_seq
        built = self._packet_ops(packets)
        if self.on_error is not None:  # errors are among the few eventful packets
            for row in built.eventful[packets["kind"][built.eventful] == K_ERROR].tolist():
                self.on_error(packets, row)
        if self._data_only:  # its I-syncs have no address: there is nothing to walk
            built = built.without_ops()
        yield from self._walked(self.walker.run(built.ops))
        self._hold_events(packets, built, first_seq)
        if self.data is not None:
            self.data.add(packets, built, self.walker.op_end, first_seq)
            yield from self._matched(self.data.rows())
        self._events.next_batch()
        if self._events.rows >= ROW_BUDGET:
            yield {"events": self._events.take(self.first_seq)}

    @abstractmethod
    def _new_state(self) -> np.ndarray:
        """The protocol's op builder state, as a source starts."""

    @abstractmethod
    def _packet_ops(self, packets: Packets) -> PacketOps:
        """The waypoint ops of a batch."""

    @abstractmethod
    def _event_rows(self, t: np.ndarray, built: PacketOps, first_seq: int, out: np.ndarray) -> int:
        """The event rows of a batch's eventful packets into `out`; returns how many."""

    @abstractmethod
    def _label(self, t: np.ndarray, rows: np.ndarray, names: Labels, texts: Labels) -> None:
        """Names and texts of the events only this protocol makes."""

    def _data_matcher(self, program: Program) -> DataMatcher | None:
        """The matcher of the source's data packets with its instructions, when it traces data
        (ETMv3's); None for a protocol whose data trace this decoder does not read."""
        return None

    def finish(self) -> Iterator[Batch]:
        """The rows held, once no more packets will come."""
        yield from self._walked(self.walker.finish())
        if self.data is not None:
            yield from self._matched(self.data.rows(final=True))
        if self._rows:
            yield self._held_instructions()
        yield {"events": self._events.take(self.first_seq)}

    def held(self) -> Iterator[Batch]:
        """The instructions and events held so far, for a decode that stops here and goes on
        from `carried` elsewhere (a range of a split stream): the walk keeps its last row."""
        if self._rows:
            yield self._held_instructions()
        if self._events.rows:
            yield {"events": self._events.take(self.first_seq)}

    def _walked(self, batches: Iterator[Batch]) -> Iterator[Batch]:
        """The walk's rows, shown to the data matcher and held (made a table once ROW_BUDGET
        are; a batch of as many, when none are held, at once, without a copy); its trace gaps
        are held with the events."""
        for batch in batches:
            rows = batch["rows"]  # a view of the walk's buffer, read before the walk goes on
            if self.data is not None:
                self.data.see(rows)
            self._events.add_gaps(batch["gaps"])
            if not self._rows and len(rows) >= ROW_BUDGET:
                yield {"instructions": instructions(rows, self.walker.program.insns, self.source.cpu)}
                continue
            self._rows.append(copied(rows))
            self._row_count += len(rows)
            if self._row_count >= ROW_BUDGET:
                yield self._held_instructions()

    def _held_instructions(self) -> Batch:
        """The rows held, as one instructions table; none are held after."""
        rows = joined(self._rows, ROW)
        self._rows, self._row_count = [], 0
        return {"instructions": instructions(rows, self.walker.program.insns, self.source.cpu)}

    def _matched(self, batches: Iterator[Batch]) -> Iterator[Batch]:
        """The data matcher's memory rows; its events are held with the batch's."""
        for batch in batches:
            if "events" in batch:
                self._events.add_table(batch["events"])
            if "memory" in batch:
                yield {"memory": batch["memory"]}

    @property
    def next_seq(self) -> int:
        return self.walker.next_seq

    def _hold_events(self, packets: Packets, built: PacketOps, first_seq: int) -> None:
        """The events of a batch's packets (few: one per I-sync, timestamp or exception), made
        in one compiled pass (`_event_rows`) and held; the protocol's names and texts
        (`_label`) are formatted once per distinct value."""
        if not len(built.eventful):
            return
        t = packets.table
        out = np.empty((R_COUNT, 3 * len(built.eventful)), np.int64)  # three at most a packet (an I-sync)
        rows = out[:, : self._event_rows(t, built, first_seq, out)]
        kind = rows[R_KIND]
        names, texts = Labels(self._names, rows[R_NAME]), trace_texts(kind)
        gap_texts(texts, kind, rows[R_ROW], t, self._error_text)
        self._label(t, rows, names, texts)  # after: a protocol's own trace gaps have their texts
        self._events.add_events(rows, names, texts, t["offset"][rows[R_ROW]])

