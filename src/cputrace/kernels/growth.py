"""Making room in the arrays compiled loops fill: the loop returns when an array is full, the
caller grows it here and calls the loop again."""

from __future__ import annotations

import numpy as np

from .records import opaque


def grown(array: np.ndarray, need: int) -> np.ndarray:
    """`array`, or a copy with zero rows added (at least doubling it) so that row `need` exists.

    Works for any dtype, structured ones included, and any number of dimensions (rows are the
    first axis)."""
    if need < len(array):
        return array
    bigger = np.zeros((max(need + 1, 2 * len(array)), *array.shape[1:]), array.dtype)
    opaque(bigger)[: len(array)] = opaque(array)
    return bigger
