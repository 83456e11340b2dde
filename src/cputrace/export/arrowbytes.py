"""The bytes of Arrow binary and string columns as NumPy arrays, for compiled writers."""

from __future__ import annotations

import numpy as np
import pyarrow as pa


def bytes_and_offsets(column: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(bytes, offsets) of a binary or string column, offsets with one entry more than rows.

    Row i is bytes[offsets[i]:offsets[i + 1]]; nulls are empty.
    """
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if pa.types.is_dictionary(array.type):
        array = array.cast(array.type.value_type)
    array = array.cast(pa.large_binary())
    if array.null_count:
        array = array.fill_null(b"")
    _, offsets, data = array.buffers()
    offsets = np.frombuffer(offsets, np.int64)[array.offset : array.offset + len(array) + 1]
    raw = np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)
    return raw, offsets
