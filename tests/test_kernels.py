"""The kernels' array helpers against NumPy's own answers: distinct rows against np.unique,
record copies against field-by-field copies."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from cputrace.flow.batches import ROW
from cputrace.kernels.distinct import distinct_rows
from cputrace.kernels.growth import grown
from cputrace.kernels.records import copied, joined, opaque

small_ints = hnp.arrays(np.int64, st.integers(0, 60), elements=st.integers(-3, 3))


@given(st.data())
def test_distinct_rows_are_numpys_unique_rows(data: st.DataObject) -> None:
    first = data.draw(small_ints)
    second = data.draw(hnp.arrays(np.int64, len(first), elements=st.integers(-(1 << 63), (1 << 63) - 1)))
    third = data.draw(hnp.arrays(np.bool_, len(first)))
    columns, codes = distinct_rows(first, second, third)
    stacked = np.column_stack([first, second, third.astype(np.int64)])
    unique, inverse = np.unique(stacked, axis=0, return_inverse=True)
    assert np.array_equal(np.column_stack([c.astype(np.int64) for c in columns]), unique.reshape(-1, 3))
    assert np.array_equal(codes, inverse.reshape(-1))
    assert [c.dtype for c in columns] == [np.int64, np.int64, np.bool_]


def test_distinct_rows_of_nothing() -> None:
    (column,), codes = distinct_rows(np.zeros(0, np.uint64))
    assert column.dtype == np.uint64 and len(column) == len(codes) == 0


def _rows(count: int, start: int) -> np.ndarray:
    rows = np.zeros(count, ROW)
    numbers = np.arange(count) + start
    for name in ROW.names:
        rows[name] = numbers % 2 if name in ("executed", "cancelled") else numbers
    return rows


def test_record_copies_are_field_copies() -> None:
    rows = _rows(50, 7)
    copy = copied(rows[3:40])
    assert copy.dtype == ROW and np.array_equal(copy, rows[3:40].copy())
    copy["seq"] = -1  # a copy, not a view
    assert rows["seq"][3] == 10
    together = joined([rows[:5], _rows(0, 0), rows[20:]], ROW)
    assert np.array_equal(together, np.concatenate([rows[:5], rows[20:]]))
    assert joined([], ROW).dtype == ROW and len(joined([], ROW)) == 0
    assert joined([rows], ROW) is rows
    assert opaque(rows).dtype.itemsize == ROW.itemsize and opaque(rows).base is not None


def test_grown_keeps_records_and_zeroes_the_rest() -> None:
    rows = _rows(10, 1)
    bigger = grown(rows, 12)
    assert len(bigger) == 20 and np.array_equal(bigger[:10], rows) and not bigger[10:]["seq"].any()
    assert grown(rows, 9) is rows
    table = np.arange(12, dtype=np.int64).reshape(6, 2)
    assert np.array_equal(grown(table, 6)[:6], table) and grown(table, 6).shape == (12, 2)
