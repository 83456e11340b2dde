"""The walk's output rows (`ROW` records naming program instructions) as Arrow tables:
`instructions` rows flagged RECONSTRUCTED, and `trace_gap` events where it lost its place."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numba
import numpy as np
import pyarrow as pa

from ..kernels.distinct import distinct_rows
from ..model import ISA_NAMES, SCHEMAS, Flag
from .gaptexts import gap_texts
from .ops import NO_TIME, GapReason

if TYPE_CHECKING:
    from .program import Program

ROW = np.dtype(
    [("idx", "<i8"), ("seq", "<i8"), ("cycles", "<i8"), ("time", "<i8"), ("src", "<i8"), ("executed", "i1"),
     ("cancelled", "?")],
    align=True,
)  # fmt: skip
"""One walked instruction: its index in the program, seq, cycles and time (NO_TIME: none),
`src` of its op, `executed` (EXECUTED, NOT_EXECUTED or UNKNOWN) and whether an exception
cancelled it."""
NOT_EXECUTED, EXECUTED, UNKNOWN = 0, 1, -1

GAP = np.dtype([("seq", "<i8"), ("reason", "<i8"), ("address", "<i8"), ("src", "<i8")])
"""One place the walk lost its place: the seq of the next instruction, the GapReason, the
address and the `src` of the op where it happened."""

_NO_EVENTS = SCHEMAS["events"].empty_table()
GAP_NAMES = ("", *(GapReason(r).name.lower() for r in range(1, max(GapReason) + 1)))
"""The `name` of a trace_gap event, by its GapReason."""
_GAP_NAMES = pa.array(GAP_NAMES)
_TRACE_GAP = pa.array(["trace_gap"])
# The `isa` dictionary; columns index it unchecked (their indices are Isa values): checking
# a batch's 64 k indices took 15 times longer than building the column.
_ISA_NAMES = pa.array(ISA_NAMES)
_ROW_FLAGS = np.uint16(Flag.RECONSTRUCTED)
_CANCELLED_FLAGS = np.uint16(Flag.RECONSTRUCTED | Flag.CANCELLED)


def instructions(rows: np.ndarray, insns: np.ndarray, cpu: int) -> pa.Table:
    """`instructions` rows of core `cpu` from ROW records naming INSN records."""
    n = len(rows)
    seq, time, cycles, src = (np.empty(n, np.int64) for _ in range(4))
    pc, opcode = np.empty(n, np.uint64), np.empty(n, np.uint32)
    size, isa, flags = np.empty(n, np.uint8), np.empty(n, np.int32), np.empty(n, np.uint16)
    executed, known, timed, counted = (np.empty(n, np.bool_) for _ in range(4))
    present = (executed, known, timed, counted)
    _gather(rows, insns, (seq, time, cycles, src), (pc, opcode, size, isa), flags, present)
    columns = [
        pa.array(seq),
        _nullable(time, timed, pa.int64()),
        pa.array(np.full(n, cpu, np.uint16)),
        pa.array(pc),
        pa.array(opcode),
        pa.array(size),
        pa.DictionaryArray.from_arrays(pa.array(isa), _ISA_NAMES, safe=False),
        pa.nulls(n, SCHEMAS["instructions"].field("mode").type),
        _nullable(executed, known, pa.bool_()),
        _nullable(cycles, counted, pa.int64()),
        pa.array(flags),
        pa.nulls(n, pa.string()),
        pa.array(src),
    ]
    return pa.Table.from_arrays(columns, schema=SCHEMAS["instructions"])


@numba.njit(cache=True, nogil=True)
def _gather(rows, insns, row_columns, insn_columns, flags, present) -> None:
    """The instruction columns of `rows`; `present` (executed, known, timed, counted): where
    executed, time and cycles are not null. One pass over the rows, one over the instructions
    they name."""
    seq, time, cycles, src = row_columns
    pc, opcode, size, isa = insn_columns
    executed, known, timed, counted = present
    for r in range(len(rows)):
        row = rows[r]
        seq[r], src[r], time[r], cycles[r] = row.seq, row.src, row.time, row.cycles
        timed[r], counted[r] = row.time != NO_TIME, row.cycles != NO_TIME
        flags[r] = _CANCELLED_FLAGS if row.cancelled else _ROW_FLAGS
        executed[r], known[r] = row.executed == EXECUTED, row.executed != UNKNOWN
    for r in range(len(rows)):
        insn = insns[rows[r].idx]
        pc[r], opcode[r], size[r], isa[r] = insn.pc, insn.opcode, insn.size, insn.isa


def _nullable(values: np.ndarray, present: np.ndarray, type_: pa.DataType) -> pa.Array:
    """`values` (int64 or bool) with nulls where not `present`, built from buffers: a fraction
    of the time pa.array(values, mask=...) takes."""
    data = np.packbits(values, bitorder="little") if type_ == pa.bool_() else values
    nulls = len(values) - int(np.count_nonzero(present))
    validity = pa.py_buffer(np.packbits(present, bitorder="little")) if nulls else None
    return pa.Array.from_buffers(type_, len(values), [validity, pa.py_buffer(data)], null_count=nulls)


def gap_events(gaps: np.ndarray, cpu: int, program: Program) -> pa.Table:
    """`trace_gap` events of core `cpu` from GAP records of a walk through `program`."""
    count = len(gaps)
    if count == 0:  # most batches: building an empty table column by column costs as much as a full one
        return _NO_EVENTS
    codes, texts = gap_texts_by_code(gaps, program)
    columns = [
        pa.array(gaps["seq"]),
        pa.nulls(count, pa.int64()),
        pa.array(np.full(count, cpu, np.uint16)),
        pa.DictionaryArray.from_arrays(pa.array(np.zeros(count, np.int32)), _TRACE_GAP),
        pa.array(gaps["reason"]),
        _GAP_NAMES.take(pa.array(gaps["reason"])),
        pa.array(gaps["address"].view(np.uint64)),
        pa.nulls(count, pa.uint64()),
        texts.take(pa.array(codes)),
        pa.array(gaps["src"]),
    ]
    return pa.Table.from_arrays(columns, schema=SCHEMAS["events"])


def gap_texts_by_code(gaps: np.ndarray, program: Program) -> tuple[np.ndarray, pa.Array]:
    """The texts of GAP records of a walk through `program`: a code per gap into the texts of
    the distinct (reason, address) pairs, and those texts. Once per pair: a walk that leaves
    the image loses its place at the same few addresses again and again (thousands of times
    in a kernel)."""
    (reasons, addresses), codes = distinct_rows(gaps["reason"], gaps["address"].view(np.uint64))
    return codes, gap_texts(reasons, addresses, program)
