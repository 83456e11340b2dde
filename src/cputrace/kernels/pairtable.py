"""A hash table from (int64, int64) keys to int64 values in one NumPy array, for compiled loops.

numba's typed dictionaries cost about a second per process to create (their code is compiled
anew each time); this table is plain arrays, so the loops using it load from numba's cache.
Open addressing with linear probing; removed entries leave tombstones until the next rehash.
A row is (key a, key b, value); value EMPTY or REMOVED marks a free row, so a value is any
int64 above REMOVED (negative values included: a caller's own "known absent" marks). Callers
keep the table at most half used (`needs_rehash`) and rehash outside their loop.
"""

from __future__ import annotations

import numba
import numpy as np

from .hashing import GOLDEN, SECOND

EMPTY = np.int64(-(1 << 63))
REMOVED = np.int64(EMPTY + 1)
_LIVE, _TOMBSTONES = 0, 1
_MIX_A = GOLDEN.view(np.int64)  # int64 arithmetic: keys are signed
_MIX_B = SECOND.view(np.int64)


def new_table(capacity: int = 1 << 12) -> tuple[np.ndarray, np.ndarray]:
    """An empty table of `capacity` rows, rounded up to a power of two (rows are found by
    masking a hash), and its counts (live, tombstones)."""
    capacity = 1 << max(capacity - 1, 1).bit_length()
    table = np.zeros((capacity, 3), np.int64)
    table[:, 2] = EMPTY
    return table, np.zeros(2, np.int64)


@numba.njit(cache=True, nogil=True)
def _home(table: np.ndarray, a: int, b: int) -> int:
    mixed = (a * _MIX_A) ^ (b * _MIX_B)
    mixed ^= mixed >> 29
    return mixed & (len(table) - 1)


@numba.njit(cache=True, nogil=True)
def find(table: np.ndarray, a: int, b: int) -> int:
    """The row holding key (a, b), or -1."""
    mask = len(table) - 1
    i = _home(table, a, b)
    while table[i, 2] != EMPTY:
        if table[i, 2] != REMOVED and table[i, 0] == a and table[i, 1] == b:
            return i
        i = (i + 1) & mask
    return -1


@numba.njit(cache=True, nogil=True)
def put(table: np.ndarray, counts: np.ndarray, a: int, b: int, value: int) -> None:
    """Set key (a, b) to `value`, replacing any value it had."""
    found = find(table, a, b)
    if found >= 0:
        table[found, 2] = value
        return
    mask = len(table) - 1
    i = _home(table, a, b)
    while table[i, 2] > REMOVED:
        i = (i + 1) & mask
    if table[i, 2] == REMOVED:
        counts[_TOMBSTONES] -= 1
    table[i, 0] = a
    table[i, 1] = b
    table[i, 2] = value
    counts[_LIVE] += 1


@numba.njit(cache=True, nogil=True)
def remove(table: np.ndarray, counts: np.ndarray, row: int) -> None:
    table[row, 2] = REMOVED
    counts[_LIVE] -= 1
    counts[_TOMBSTONES] += 1


@numba.njit(cache=True, nogil=True)
def needs_rehash(table: np.ndarray, counts: np.ndarray) -> bool:
    return 2 * (counts[_LIVE] + counts[_TOMBSTONES] + 1) > len(table)


@numba.njit(cache=True, nogil=True)
def _moved(table: np.ndarray, capacity: int) -> tuple[np.ndarray, np.ndarray]:
    fresh = np.zeros((capacity, 3), np.int64)
    fresh[:, 2] = EMPTY
    counts = np.zeros(2, np.int64)
    for i in range(len(table)):
        if table[i, 2] > REMOVED:
            put(fresh, counts, table[i, 0], table[i, 1], table[i, 2])
    return fresh, counts


@numba.njit(cache=True, nogil=True)
def purge(table: np.ndarray, counts: np.ndarray) -> None:
    """Drop the tombstones in place, for compiled loops that cannot swap in a rehashed table."""
    live = table[table[:, 2] > REMOVED].copy()
    table[:, 2] = EMPTY
    counts[:] = 0
    for i in range(len(live)):
        put(table, counts, live[i, 0], live[i, 1], live[i, 2])


def live_rows(table: np.ndarray) -> np.ndarray:
    """The rows holding an entry: (a, b, value) each."""
    return table[table[:, 2] > REMOVED]


def rehashed(table: np.ndarray, counts: np.ndarray, room: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The same entries without tombstones, in a table at most a quarter full (counting `room`
    more entries)."""
    capacity = len(table)
    while 4 * (int(counts[_LIVE]) + room + 1) > capacity:
        capacity *= 2
    return _moved(table, capacity)
