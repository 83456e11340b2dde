"""Compiled kernels for the in-order half of decoding: state carried from line to line.

Continuation lines inherit the time and core of the line before them, and every record
belongs to the last instruction of its core before it (or, before any, to the next one).
These are sequential by nature, so they run as single compiled passes rather than as
several whole-array NumPy operations.
"""

from __future__ import annotations

import numba
import numpy as np

NO_SEQ = -1


@numba.njit(nogil=True, cache=True)
def fill_forward(values, present, carry_value, carry_present):
    """Each line's value, or the last one before it (the carry for the chunk's first lines)."""
    n = values.shape[0]
    out = np.empty(n, np.int64)
    known = np.empty(n, np.bool_)
    last = carry_value
    have = carry_present
    for i in range(n):
        if present[i]:
            last = values[i]
            have = True
        out[i] = last
        known[i] = have
    return out, known, last, have


@numba.njit(nogil=True, cache=True)
def assign_seq(row_line, row_cpu, insn_line, insn_cpu, base, last_seq):
    """The seq of each record (rows and instructions both in line order).

    `last_seq[cpu]` is the seq of that core's last instruction in earlier chunks, or NO_SEQ.
    """
    last = last_seq.copy()
    seq = np.empty(row_line.shape[0], np.int64)
    j = 0
    n_insn = insn_line.shape[0]
    for i in range(row_line.shape[0]):
        while j < n_insn and insn_line[j] < row_line[i]:
            last[insn_cpu[j]] = base + j
            j += 1
        s = last[row_cpu[i]]
        seq[i] = s if s != NO_SEQ else base + j
    return seq


@numba.njit(nogil=True, cache=True)
def update_last_seq(insn_cpu, base, last_seq):
    for j in range(insn_cpu.shape[0]):
        last_seq[insn_cpu[j]] = base + j
