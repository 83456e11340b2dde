"""(address << 3 | ISA) -> instruction index: a hash table compiled code reads directly.

A program's walk looks up every block it enters here, and block decoding asks it where
code decoded before begins (`decode_block`'s `known`). The table is a `kernels.pairtable`
keyed (address << 3 | ISA, 0): entries are only ever added.
"""

from __future__ import annotations

import numba
import numpy as np

from ..kernels import pairtable

MISSING = -1
"""What `lookup` returns for a key the index does not hold."""


def as_int64(value: int) -> int:
    """The int64 with the same 64 bits as `value` (0 to 2**64 - 1): how keys, records and
    decoded columns hold an address (a kernel's, 0xFFFF..., is negative there)."""
    return value - (1 << 64) if value >> 63 else value


@numba.njit(cache=True, nogil=True)
def lookup(table: np.ndarray, key: int) -> int:
    """The value of `key` in an index's table, or MISSING."""
    row = pairtable.find(table, key, 0)
    return table[row, 2] if row >= 0 else MISSING


@numba.njit(cache=True, nogil=True)
def holds(table: np.ndarray, addresses: np.ndarray, isa: int) -> np.ndarray:
    """Which of these addresses (int64) an index's table holds in `isa`."""
    found = np.zeros(len(addresses), np.bool_)
    for i in range(len(addresses)):
        found[i] = pairtable.find(table, (addresses[i] << 3) | isa, 0) >= 0
    return found


@numba.njit(cache=True, nogil=True)
def put(table: np.ndarray, counts: np.ndarray, key: int, value: int) -> None:
    """Set `key` in an index's table, which must have room (`AddressIndex.claim`)."""
    pairtable.put(table, counts, key, 0, value)


@numba.njit(cache=True, nogil=True)
def _insert(table: np.ndarray, counts: np.ndarray, keys: np.ndarray, values: np.ndarray) -> None:
    for i in range(len(keys)):
        put(table, counts, keys[i], values[i])


class AddressIndex:
    """Keys (address << 3 | ISA) to values; `table` is what compiled code reads."""

    def __init__(self, capacity: int = 1 << 12) -> None:
        self.table, self.counts = pairtable.new_table(capacity)

    def __contains__(self, key: int) -> bool:
        return lookup(self.table, key) != MISSING

    def contains(self, addresses: np.ndarray, isa: int) -> np.ndarray:
        """Which of these addresses (int64) the index holds in `isa`."""
        return holds(self.table, addresses, isa)

    def add(self, keys: np.ndarray, values: np.ndarray) -> None:
        _insert(*self.claim(len(keys)), keys, values)

    def claim(self, count: int) -> tuple[np.ndarray, np.ndarray]:
        """Room for `count` new keys: the table and counts to `put` them in."""
        if 2 * (int(self.counts.sum()) + count + 1) > len(self.table):  # keep probes short
            self.table, self.counts = pairtable.rehashed(self.table, self.counts, count)
        return self.table, self.counts
