"""(address << 3 | ISA) -> instruction index: a hash table compiled code reads directly.

A program's walk looks up every block it enters here, and block decoding asks it where
code decoded before begins (`decode_block`'s `known`).
"""

from __future__ import annotations

import numba
import numpy as np

from ..kernels.hashing import GOLDEN

MISSING = -1
"""What `lookup` returns for a key the index does not hold."""

_EMPTY = -1  # hash slot without a key


@numba.njit(cache=True, nogil=True)
def _slot(keys: np.ndarray, key: int) -> int:
    """The slot holding `key` in an open-addressing table, or the empty slot where it would go."""
    mask = len(keys) - 1
    slot = np.int64((np.uint64(key) * GOLDEN) >> np.uint64(40)) & mask
    while keys[slot] != _EMPTY and keys[slot] != key:
        slot = (slot + 1) & mask
    return slot


@numba.njit(cache=True, nogil=True)
def lookup(keys: np.ndarray, values: np.ndarray, key: int) -> int:
    """The value of `key` in an index's arrays, or MISSING."""
    slot = _slot(keys, key)
    return values[slot] if keys[slot] == key else MISSING


@numba.njit(cache=True, nogil=True)
def holds(keys: np.ndarray, values: np.ndarray, addresses: np.ndarray, isa: int) -> np.ndarray:
    """Which of these addresses (int64) an index's arrays hold in `isa`."""
    found = np.zeros(len(addresses), np.bool_)
    for i in range(len(addresses)):
        found[i] = lookup(keys, values, (addresses[i] << 3) | isa) != MISSING
    return found


@numba.njit(cache=True, nogil=True)
def put(keys: np.ndarray, values: np.ndarray, key: int, value: int) -> None:
    """Set `key` in an index's arrays, which must have room (`AddressIndex.claim`)."""
    slot = _slot(keys, key)
    keys[slot] = key
    values[slot] = value


@numba.njit(cache=True, nogil=True)
def _insert(keys: np.ndarray, values: np.ndarray, new_keys: np.ndarray, new_values: np.ndarray) -> None:
    for i in range(len(new_keys)):
        put(keys, values, new_keys[i], new_values[i])


class AddressIndex:
    """Keys (address << 3 | ISA) to values; `keys` and `values` are what compiled code reads."""

    def __init__(self, capacity: int = 1 << 12) -> None:
        self.keys = np.full(capacity, _EMPTY, np.int64)
        self.values = np.zeros(capacity, np.int64)
        self.count = 0

    def __contains__(self, key: int) -> bool:
        return lookup(self.keys, self.values, key) != MISSING

    def contains(self, addresses: np.ndarray, isa: int) -> np.ndarray:
        """Which of these addresses (int64) the index holds in `isa`."""
        return holds(self.keys, self.values, addresses, isa)

    def add(self, keys: np.ndarray, values: np.ndarray) -> None:
        _insert(*self.claim(len(keys)), keys, values)

    def claim(self, count: int) -> tuple[np.ndarray, np.ndarray]:
        """Room for `count` new keys: the arrays to `put` them in."""
        if 2 * (self.count + count) > len(self.keys):  # keep probes short: at most half full
            old_keys, old_values = self.keys, self.values
            used = old_keys != _EMPTY
            capacity = len(old_keys)
            while 2 * (self.count + count) > capacity:
                capacity *= 2
            self.keys = np.full(capacity, _EMPTY, np.int64)
            self.values = np.zeros(capacity, np.int64)
            _insert(self.keys, self.values, old_keys[used], old_values[used])
        self.count += count
        return self.keys, self.values
