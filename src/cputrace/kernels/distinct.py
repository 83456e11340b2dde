"""The distinct tuples among rows of key columns, and each row's tuple: for formatting a string
once per distinct tuple where many rows share few (events' names and texts)."""

from __future__ import annotations

import numpy as np


def distinct_rows(*keys: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
    """The distinct (keys[0][i], keys[1][i], ...) in lexicographic order, as one column per key,
    and for each row the index of its tuple among them. One sort of the rows and a pass over
    it: np.unique of the stacked columns (axis=0) took several times as long, and a small
    decode calls this a dozen times."""
    order = np.lexsort(keys[::-1])
    ordered = [key[order] for key in keys]
    first = np.zeros(len(order), np.bool_)
    first[:1] = True
    for column in ordered:
        first[1:] |= column[1:] != column[:-1]
    codes = np.empty(len(order), np.int64)
    codes[order] = np.cumsum(first) - 1
    return [column[first] for column in ordered], codes
