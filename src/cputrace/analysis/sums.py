"""Sums per (a, b) key over millions of rows, in a compiled loop with a hash table.

Profiles add up counts and times per address (or per (function, address), per block, per
heat-map cell) chunk after chunk; a hash table of the distinct keys and a row of sums per
key does that in one pass, with memory following the number of distinct keys.
"""

from __future__ import annotations

import numba
import numpy as np

from ..kernels import pairtable
from ..kernels.growth import grown


@numba.njit(cache=True, nogil=True)
def _add(a, b, values, start, table, counts, sums, used):
    """Add rows from `start` on; returns where it stopped (len(a) when done, earlier when full)."""
    for i in range(start, len(a)):
        if used[0] >= len(sums) or pairtable.needs_rehash(table, counts):
            return i
        row = pairtable.find(table, a[i], b[i])
        if row < 0:
            slot = used[0]
            used[0] = slot + 1
            pairtable.put(table, counts, a[i], b[i], slot)
        else:
            slot = table[row, 2]
        for c in range(values.shape[1]):
            sums[slot, c] += values[i, c]
    return len(a)


class KeyedSums:
    """Running sums of `width` int64 columns per distinct (a, b) of int64 keys."""

    def __init__(self, width: int, capacity: int = 1 << 12) -> None:
        self.table, self.counts = pairtable.new_table(capacity * 2)
        self.sums = np.zeros((capacity, width), np.int64)
        self.keys_used = np.zeros(1, np.int64)

    def add(self, a: np.ndarray, b: np.ndarray, values: np.ndarray) -> None:
        """Add each row of `values` (n x width) to the sums of its key (a[i], b[i])."""
        a = np.ascontiguousarray(a).view(np.int64)
        b = np.ascontiguousarray(b).view(np.int64)
        values = np.ascontiguousarray(values, dtype=np.int64)
        position = 0
        while True:
            position = _add(a, b, values, position, self.table, self.counts, self.sums, self.keys_used)
            if position == len(a):
                return
            if pairtable.needs_rehash(self.table, self.counts):
                self.table, self.counts = pairtable.rehashed(self.table, self.counts)
            self.sums = grown(self.sums, self.keys_used[0])

    def result(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(a, b, sums) of every key, in no particular order; keys as int64."""
        live = pairtable.live_rows(self.table)
        return live[:, 0], live[:, 1], self.sums[live[:, 2]]
