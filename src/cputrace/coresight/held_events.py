"""A source's events held over its packet batches as rows, made into one events table in seq
order once they are many or the source ends.

The packets' events (R_* rows with their names and texts as `Labels` codes) and the walk's
trace gaps (GAP records) are merged as numbers: one sort of the rows and one `take` of each
string column for the whole table, where merging a table per batch and per walk flush took
one of every column. Each batch's events, sorted, follow the last batch's (see
`formats.coresight.source_walk.SourceWalk.batch`), so a row keeps its batch's place ahead of its
seq and offset; within a batch, at one seq and offset, the walk's gaps come before the
packets' events, and the data matcher's events (tables of their own) after both.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ..flow.batches import GAP, GAP_NAMES, gap_texts_by_code
from ..flow.program import Program
from ..kernels.records import joined
from .events import (
    E_TRACE_GAP,
    HAS_NUMBER,
    HAS_VALUE,
    R_COUNT,
    R_KIND,
    R_NAME,
    R_NUMBER,
    R_PRESENT,
    R_SEQ,
    R_VALUE,
    Labels,
    event_table,
    in_seq_order,
)

_NO_CODES, _NO_TEXTS = np.empty(0, np.int64), pa.array([], pa.string())


class HeldEvents:
    """The events of one source's batches, until `take`."""

    def __init__(self, cpu: int, program: Program) -> None:
        self.cpu, self.program = cpu, program
        self.batch = 0  # the batch the events added now belong to
        self._clear()

    def _clear(self) -> None:
        """Hold no events."""
        self.rows = 0
        self._gaps: list[np.ndarray] = []
        self._gap_batches: list[int] = []
        self._events: list[np.ndarray] = []  # R_* rows, R_NAME into _names
        self._texts_of: list[np.ndarray] = []  # their texts, into _texts (-1: none)
        self._src: list[np.ndarray] = []
        self._event_batches: list[int] = []
        self._names: list[str] = list(GAP_NAMES)  # a gap's name by its reason first
        self._texts: list[str] = []
        self._tables: list[pa.Table] = []  # the data matcher's
        self._table_batches: list[int] = []

    def add_gaps(self, gaps: np.ndarray) -> None:
        """The walk's trace gaps (GAP records, seq the next instruction's)."""
        if len(gaps):
            self._gaps.append(gaps)
            self._gap_batches.append(self.batch)
            self.rows += len(gaps)

    def add_events(self, rows: np.ndarray, names: Labels, texts: Labels, src: np.ndarray) -> None:
        """Event rows (R_*) of the packets, their names and texts, and their `src`."""
        if not rows.shape[1]:
            return
        rows = rows.copy()
        rows[R_NAME] = _shifted(names.codes, len(self._names))
        self._names.extend(names.labels)
        self._texts_of.append(_shifted(texts.codes, len(self._texts)))
        self._texts.extend(texts.labels)
        self._events.append(rows)
        self._src.append(src)
        self._event_batches.append(self.batch)
        self.rows += rows.shape[1]

    def add_table(self, table: pa.Table) -> None:
        """Events made as a table (the data matcher's), in seq order."""
        if table.num_rows:
            self._tables.append(table)
            self._table_batches.append(self.batch)
            self.rows += table.num_rows

    def next_batch(self) -> None:
        """The events added from now on are of the next batch."""
        self.batch += 1

    def take(self, first_seq: int) -> pa.Table:
        """The events held, in seq order, a gap given the seq of the last instruction before it
        (as every other event), `first_seq` (the source's first instruction's) before any;
        none are held after."""
        gaps = joined(self._gaps, GAP)
        events = np.concatenate([_gap_rows(gaps, first_seq), *self._events], axis=1)
        src = np.concatenate([gaps["src"], *self._src])
        batch = np.repeat(
            self._gap_batches + self._event_batches,
            [len(g) for g in self._gaps] + [e.shape[1] for e in self._events],
        )  # fmt: skip
        gap_codes, gap_texts = gap_texts_by_code(gaps, self.program) if len(gaps) else (_NO_CODES, _NO_TEXTS)
        texts_of = np.concatenate([gap_codes + len(self._texts), *self._texts_of])
        order = np.lexsort((src, events[R_SEQ], batch))  # stable: gaps first at a tie
        events, src, batch, texts_of = events[:, order], src[order], batch[order], texts_of[order]
        texts = pa.concat_arrays([pa.array(self._texts, pa.string()), gap_texts])
        table = event_table(
            events, self.cpu, Labels(self._names, events[R_NAME]).array(),
            texts.take(pa.array(texts_of, mask=texts_of < 0)), src,
        )  # fmt: skip
        if self._tables:
            tables = zip(self._tables, self._table_batches, strict=True)
            groups = [batch, *(np.full(t.num_rows, b) for t, b in tables)]
            table = in_seq_order([table, *self._tables], groups)
        self._clear()
        return table


def _shifted(codes: np.ndarray, by: int) -> np.ndarray:
    """Label codes moved up `by` (-1, no label, kept)."""
    return np.where(codes < 0, codes, codes + by)


def _gap_rows(gaps: np.ndarray, first_seq: int) -> np.ndarray:
    """Event rows (R_*) of GAP records: `trace_gap` events with the GapReason as number and
    name, the address as value, at the seq of the instruction before (not below `first_seq`)."""
    rows = np.zeros((R_COUNT, len(gaps)), np.int64)
    rows[R_SEQ] = np.maximum(gaps["seq"] - 1, first_seq)
    rows[R_KIND] = E_TRACE_GAP
    rows[R_NAME] = rows[R_NUMBER] = gaps["reason"]
    rows[R_VALUE] = gaps["address"]
    rows[R_PRESENT] = HAS_NUMBER | HAS_VALUE
    return rows
