"""Events of CoreSight packet batches, as the ETMv3 and PTM walks make them: a compiled pass
writes one row of numbers per event (`put_event`, into an int64 array by the R_* rows), and
`event_table` turns the rows into an events table, with names and texts formatted once per
distinct value (`distinct`, `Labels`), never once per event.

Row fields: `seq`, `kind` (an index into EVENT_KINDS), `name` (an index into the protocol's
names), `number`, `value`, `value1`, `present` (which of number, value and value1 the row has:
HAS_*) and `row` (the packet's row in its batch).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numba
import numpy as np
import pyarrow as pa

from ..kernels.distinct import distinct_rows
from ..model import SCHEMAS
from .packets import (
    I_SYNC_OVERFLOW,
    I_SYNC_REASONS,
    K_CONTEXT_ID,
    K_ERROR,
    K_EXCEPTION_RETURN,
    K_TIMESTAMP,
    K_TRIGGER,
    K_VMID,
)

(
    E_TRACE_ON, E_OVERFLOW, E_EXCEPTION, E_EXCEPTION_RETURN, E_CONTEXT, E_TIMESTAMP, E_TRACE_GAP, E_TRIGGER,
) = range(8)  # fmt: skip
EVENT_KINDS = pa.array(
    ["trace_on", "overflow", "exception", "exception_return", "context", "timestamp", "trace_gap", "trigger"]
)
R_SEQ, R_KIND, R_NAME, R_NUMBER, R_VALUE, R_VALUE1, R_PRESENT, R_ROW, R_COUNT = range(9)
HAS_NUMBER, HAS_VALUE, HAS_VALUE1 = 1, 2, 4
NO_EVENTS = SCHEMAS["events"].empty_table()
LABELS = ("exception_return", "context_id", "vmid", "timestamp")
N_EXCEPTION_RETURN, N_CONTEXT_ID, N_VMID, N_TIMESTAMP = range(len(I_SYNC_REASONS), len(I_SYNC_REASONS) + 4)
N_KINDS = len(I_SYNC_REASONS) + len(LABELS)
"""`name` of event rows (`event_names`): an I-sync's reason, then LABELS, then the protocol's
packet kinds from N_KINDS; the walks add their exceptions' names after these."""
C_CONTEXT_ID, C_VMID = 0, 1
"""Slots of a walk's last context ID and VMID (-1 before the first), for `context_event`."""
TEXTS = (
    "the ETM FIFO overflowed: trace was lost before this I-sync",
    "the ETM's trigger condition occurred",
)
"""The texts of overflow and trigger events."""


@numba.njit(cache=True, nogil=True, inline="always")
def put_event(out, n, seq, p, kind, name, number, value, value1, present) -> int:
    """Event row n; returns the next row's index."""
    out[R_SEQ, n], out[R_KIND, n], out[R_NAME, n], out[R_NUMBER, n] = seq, kind, name, number
    out[R_VALUE, n], out[R_VALUE1, n], out[R_PRESENT, n], out[R_ROW, n] = value, value1, present, p
    return n + 1


def event_names(kind_names: Sequence[str]) -> tuple[str, ...]:
    """The `name` labels of a protocol's event rows, by the N_* codes and its packet kinds."""
    return (*I_SYNC_REASONS, *LABELS, *kind_names)


@numba.njit(cache=True, nogil=True, inline="always")
def event_seq(before, op_end, p, first_seq, source_seq) -> int:
    """The seq of packet p's events: the last instruction's before it (before[p] ops came
    before it; op_end[i] is the seq after op i; the batch's first instruction is first_seq), or
    the source's first (source_seq) when there is none yet."""
    made = before[p]
    return max(op_end[made - 1] - 1 if made > 0 else first_seq - 1, source_seq)


@numba.njit(cache=True, nogil=True)
def context_event(out, n, seq, p, name, value, context, which) -> int:
    """A `context` event when the context ID or VMID (`which`) differs from the last seen."""
    value = np.int64(value)
    if value == context[which]:
        return n
    context[which] = value
    return put_event(out, n, seq, p, E_CONTEXT, name, 0, value, 0, HAS_VALUE)


@numba.njit(cache=True, nogil=True, inline="always")
def i_sync_events(out, n, seq, p, pk, value1, present, context_on_sync, context) -> int:
    """An I-sync's events: `trace_on` (its reason, address and `value1`, which of them
    `present` says), `overflow` when that is its reason, and `context` when it carries a
    context ID (`context_on_sync`) that differs from the last."""
    n = put_event(out, n, seq, p, E_TRACE_ON, pk.info, pk.info, pk.address, value1, present)
    if pk.info == I_SYNC_OVERFLOW:
        n = put_event(out, n, seq, p, E_OVERFLOW, I_SYNC_OVERFLOW, 0, 0, 0, 0)
    if context_on_sync:
        n = context_event(out, n, seq, p, N_CONTEXT_ID, pk.value, context, C_CONTEXT_ID)
    return n


@numba.njit(cache=True, nogil=True, inline="always")
def common_event(out, n, seq, p, pk, gap, context) -> int:
    """The event of a packet every protocol has alike (exception return, context ID, VMID,
    timestamp with its cycle count if any, trigger), or a `trace_gap` where an error or skipped
    bytes broke a synchronised trace (gap[p]); none for any other packet."""
    k = pk.kind
    if k == K_EXCEPTION_RETURN:
        return put_event(out, n, seq, p, E_EXCEPTION_RETURN, N_EXCEPTION_RETURN, 0, 0, 0, 0)
    if k == K_CONTEXT_ID:
        return context_event(out, n, seq, p, N_CONTEXT_ID, pk.value, context, C_CONTEXT_ID)
    if k == K_VMID:
        return context_event(out, n, seq, p, N_VMID, pk.value, context, C_VMID)
    if k == K_TIMESTAMP:
        present = HAS_VALUE | (HAS_VALUE1 if pk.cycles >= 0 else 0)
        return put_event(out, n, seq, p, E_TIMESTAMP, N_TIMESTAMP, 0, pk.value, max(pk.cycles, 0), present)
    if k == K_TRIGGER:
        return put_event(out, n, seq, p, E_TRIGGER, N_KINDS + K_TRIGGER, 0, 0, 0, 0)
    if gap[p]:
        return put_event(out, n, seq, p, E_TRACE_GAP, N_KINDS + k, pk.size, 0, 0, HAS_NUMBER)
    return n


def distinct(label: Callable[..., str], *keys: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Strings that depend only on `keys`, formatted once per distinct key (few, of many events):
    a code per row into the strings."""
    unique, codes = distinct_rows(*(key.astype(np.int64) for key in keys))
    return codes, [label(*key) for key in zip(*(column.tolist() for column in unique), strict=True)]


class Labels:
    """A string column as codes into a few labels (-1: null), so no Python runs per event."""

    def __init__(self, labels: Sequence[str], codes: np.ndarray) -> None:
        self.labels, self.codes = list(labels), codes

    def add(self, rows: np.ndarray, codes: np.ndarray, labels: Sequence[str]) -> None:
        """Give `rows` these codes into these labels."""
        self.codes[rows] = codes + len(self.labels)
        self.labels.extend(labels)

    def array(self) -> pa.Array:
        return pa.array(self.labels, pa.string()).take(pa.array(self.codes, mask=self.codes < 0))


def trace_texts(kind: np.ndarray) -> Labels:
    """The text column of event rows of these kinds: overflow and trigger events' (TEXTS), the
    others null until added."""
    return Labels(TEXTS, np.select([kind == E_OVERFLOW, kind == E_TRIGGER], [0, 1], -1))


def gap_texts(
    texts: Labels, kind: np.ndarray, row: np.ndarray, packets: np.ndarray, error_text: dict[int, str]
) -> None:
    """The texts of the trace-gap rows among event rows: the bytes that broke the trace and
    why (an error packet's reason by `error_text`, else bytes skipped to resynchronise)."""
    gap = np.flatnonzero(kind == E_TRACE_GAP)
    if len(gap):
        at = row[gap]
        texts.add(gap, *distinct(
            lambda k, size, info: f"{size} bytes: "
            f"{error_text.get(info, 'bytes skipped') if k == K_ERROR else 'bytes skipped'}; "
            "no instructions until the next I-sync",
            packets["kind"][at], packets["size"][at], packets["info"][at],
        ))  # fmt: skip


def event_table(rows: np.ndarray, cpu: int, names: pa.Array, texts: pa.Array, src: np.ndarray) -> pa.Table:
    """The events table of event rows (R_*; R_ROW is not read) with these `name`, `text` and
    `src` columns."""
    seq, kind, _, number, value, value1, present, _ = rows
    n = rows.shape[1]
    columns = [
        pa.array(seq),
        pa.nulls(n, pa.int64()),
        pa.array(np.full(n, cpu, np.uint16)),
        pa.DictionaryArray.from_arrays(pa.array(kind.astype(np.int32)), EVENT_KINDS),
        pa.array(number, mask=(present & HAS_NUMBER) == 0),
        names,
        pa.array(value.astype(np.uint64), mask=(present & HAS_VALUE) == 0),
        pa.array(value1.astype(np.uint64), mask=(present & HAS_VALUE1) == 0),
        texts,
        pa.array(src),
    ]
    return pa.Table.from_arrays(columns, schema=SCHEMAS["events"])


MANY_RUNS = 64
"""Runs of rows of one table beyond which merging takes rows one by one rather than slicing."""


def in_seq_order(tables: list[pa.Table], groups: list[np.ndarray] | None = None) -> pa.Table:
    """Event tables, each in order, merged into one by group (`groups`, each table's rows':
    the packet batch they came from; all one group when None), then seq and, within a seq,
    buffer offset (input order; ties keep the tables' order). The result is slices of the tables,
    not a copy, when most batches' walk gaps fall between runs of many packet events; when the
    tables interleave finely (a buffer that wraps often), one `take` costs less than many
    slices."""
    kept = [i for i, t in enumerate(tables) if t.num_rows]
    tables = [tables[i] for i in kept]
    if len(tables) < 2:
        return tables[0] if tables else NO_EVENTS
    sizes = [t.num_rows for t in tables]
    seq = np.concatenate([t["seq"].to_numpy() for t in tables])
    src = np.concatenate([t["src"].to_numpy() for t in tables])
    keys = (src, seq) if groups is None else (src, seq, np.concatenate([groups[i] for i in kept]))
    order = np.lexsort(keys)  # stable
    table_of = np.repeat(np.arange(len(tables)), sizes)[order]
    row = order - np.concatenate([[0], np.cumsum(sizes)[:-1]])[table_of]
    starts = np.flatnonzero(np.diff(table_of, prepend=-1))  # runs of rows of one table, in its order
    if len(starts) > MANY_RUNS:
        return pa.concat_tables(tables).take(order)
    ends = np.append(starts[1:], len(order))
    return pa.concat_tables([
        tables[table_of[a]].slice(row[a], b - a) for a, b in zip(starts.tolist(), ends.tolist(), strict=True)
    ])  # fmt: skip
