"""Arrow columns as NumPy arrays, and chunks of rows held as such arrays.

Analyses and exports compute on NumPy (and numba) arrays of a chunk's rows: `numpy_of` makes
one of an Arrow column with its nulls replaced by a stated value (`valid_of` says where they
were), `dictionary_codes` turns a
string column into small integer codes, and `ColumnChunk` gives a dataclass of same-length
arrays `take` and `then`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, ClassVar, Self

import numpy as np
import pyarrow as pa


def numpy_of(column: pa.Array | pa.ChunkedArray, dtype: type, fill: Any = None) -> np.ndarray:
    """The column as a NumPy array of `dtype`, its nulls replaced by `fill` (by default 0, or
    False for booleans)."""
    if column.null_count:
        if fill is None:
            fill = False if np.dtype(dtype) == np.bool_ else 0
        column = column.fill_null(fill)
    return column.to_numpy(zero_copy_only=False).astype(dtype, copy=False)


def valid_of(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Where the column has a value, as a NumPy bool array."""
    return numpy_of(column.is_valid(), np.bool_)


def dictionary_codes(column: pa.Array, code_of: Callable[[str], int], default: int) -> np.ndarray:
    """Small integer codes of a (dictionary-encoded) string column: `code_of` once per distinct value."""
    if not pa.types.is_dictionary(column.type):
        column = column.dictionary_encode()
    names = column.dictionary.to_pylist()
    table = np.array([default if v is None else code_of(v) for v in names] + [default], np.int16)
    indices = numpy_of(column.indices, np.int64, len(column.dictionary))
    return table[indices]


class ColumnChunk:
    """Base of dataclasses holding rows as NumPy arrays of one length, the fields named in
    `ROWS` (a field may be None: the chunk has no such column). Other fields describe the
    chunk as a whole and are kept from the first chunk by `take` and `then`."""

    __slots__ = ()
    ROWS: ClassVar[tuple[str, ...]]

    def __len__(self) -> int:
        return len(getattr(self, self.ROWS[0]))

    def take(self, rows: np.ndarray | slice) -> Self:
        """The chunk's `rows` (indices or a slice)."""
        taken = {}
        for name in self.ROWS:
            column = getattr(self, name)
            taken[name] = None if column is None else column[rows]
        return dataclasses.replace(self, **taken)  # type: ignore[type-var]

    def then(self, other: Self) -> Self:
        """These rows followed by `other`'s (a column one of them lacks is lacking)."""
        joined = {}
        for name in self.ROWS:
            mine, theirs = getattr(self, name), getattr(other, name)
            joined[name] = None if mine is None or theirs is None else np.concatenate([mine, theirs])
        return dataclasses.replace(self, **joined)  # type: ignore[type-var]
