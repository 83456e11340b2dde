"""Putting a circular DSU buffer in time order and unwrapping its 30-bit time tags."""

from __future__ import annotations

import numpy as np

TIME_BITS = 30
FILTER_SHIFT = 28  # ITBC0 bits 31:28: TFILT


def oldest_first(words: np.ndarray, control: int | None) -> np.ndarray:
    """Line indices from oldest to newest.

    ITBC0's pointer is the next line to be written. Its field width differs between
    documents, so it is taken modulo the buffer's line count (a power of two in hardware).
    A buffer whose lines from the pointer on were never written (all zero) has not wrapped
    and starts at line 0; unwritten lines are left out. Without a pointer the buffer is read
    from line 0.
    """
    count = len(words)
    written = words.any(axis=1)
    pointer = 0 if control is None or not count else (control & 0xFFFF) % count
    if not written[pointer:].any():
        order = np.arange(pointer)
    else:
        order = np.concatenate([np.arange(pointer, count), np.arange(pointer)])
    return order[written[order]]


def unwrap_time(tags: np.ndarray) -> np.ndarray:
    """Monotonic times from 30-bit tags in time order: each step is the tag difference mod 2**30."""
    if not len(tags):
        return np.zeros(0, np.int64)
    steps = np.diff(tags.astype(np.int64)) % (1 << TIME_BITS)
    return np.concatenate([[int(tags[0])], int(tags[0]) + np.cumsum(steps)]).astype(np.int64)


def trace_filter(control: int | None) -> int:
    return 0 if control is None else (control >> FILTER_SHIFT) & 0xF
