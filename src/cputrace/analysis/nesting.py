"""Frames nested in tree order, block by block: parents, depths, cuts, recursion, self costs.

Frames come in tree order (entry up, end down, each core's outermost frame first). The open
frames are a stack carried from block to block, so a core's frames nest the same whatever
the blocks, in memory that follows the call depth. A frame that ends after its parent
(crossing call/return pairs) is cut at its parent's end: its end, end time and exit and
resume sites become the parent's. A frame's self costs are known when it closes (every
frame it called has been seen): they come out as `closed` rows (id, insns_self, time_self).
"""

from __future__ import annotations

import numba
import numpy as np

from ..kernels.growth import grown

# columns of an open frame on the stack: id, (cut) end index and end time, function, depth,
# self costs so far, then its exit and resume sites (4 fields each)
K_ID, K_END, K_END_TIME, K_FUNCTION, K_DEPTH, K_SELF, K_SELF_TIME, K_SITES = range(8)
END_SITES = 8  # exit (seq, time, pc, src) then resume
STACK_WIDTH = K_SITES + END_SITES
CLOSED_WIDTH = 3  # id, insns_self, time_self


@numba.njit(cache=True, nogil=True)
def _close(stack, top, open_frames, closed, filled):
    closed[filled, 0] = stack[top, K_ID]
    closed[filled, 1] = stack[top, K_SELF]
    closed[filled, 2] = stack[top, K_SELF_TIME]
    open_frames[stack[top, K_FUNCTION]] -= 1
    return filled + 1


@numba.njit(cache=True, nogil=True)
def nest_block(entry_idx, end_idx, entry_time, end_time, function, end_sites, state, stack, open_frames,
               parent, depth, recursive, closed, final):  # fmt: skip
    """Nest one block of frames; returns how many rows of `closed` it filled.

    `end_idx`, `end_time` and `end_sites` ((n, 8): exit then resume site) are cut in place.
    `state` carries [id of the block's first frame, stack depth]; `stack` needs room for
    depth + n rows, `closed` for depth + n. `open_frames` counts the open frames of each
    function (recursion). With `final`, every frame still open closes after the block.
    """
    next_id, top = state[0], state[1]
    filled = 0
    for i in range(len(entry_idx)):
        while top > 0 and stack[top - 1, K_END] <= entry_idx[i]:
            top -= 1
            filled = _close(stack, top, open_frames, closed, filled)
        if top > 0:
            p = top - 1
            if end_idx[i] > stack[p, K_END]:
                end_idx[i] = stack[p, K_END]
                end_time[i] = stack[p, K_END_TIME]
                for k in range(END_SITES):  # loops, not slices: see isa.arm._copy_rows
                    end_sites[i, k] = stack[p, K_SITES + k]
            parent[i] = stack[p, K_ID]
            depth[i] = stack[p, K_DEPTH] + 1
            stack[p, K_SELF] -= end_idx[i] - entry_idx[i]
            stack[p, K_SELF_TIME] -= end_time[i] - entry_time[i]
        else:
            parent[i] = -1
            depth[i] = 0
        recursive[i] = open_frames[function[i]] > 0
        open_frames[function[i]] += 1
        stack[top, K_ID] = next_id + i
        stack[top, K_END] = end_idx[i]
        stack[top, K_END_TIME] = end_time[i]
        stack[top, K_FUNCTION] = function[i]
        stack[top, K_DEPTH] = depth[i]
        stack[top, K_SELF] = end_idx[i] - entry_idx[i]
        stack[top, K_SELF_TIME] = end_time[i] - entry_time[i]
        for k in range(END_SITES):
            stack[top, K_SITES + k] = end_sites[i, k]
        top += 1
    if final:
        while top > 0:
            top -= 1
            filled = _close(stack, top, open_frames, closed, filled)
    state[0] = next_id + len(entry_idx)
    state[1] = top
    return filled


class Nesting:
    """One core's nesting state between blocks."""

    def __init__(self, functions: int, first_id: int = 0) -> None:
        self.state = np.array([first_id, 0], np.int64)
        self.stack = np.zeros((64, STACK_WIDTH), np.int64)
        self.open_frames = np.zeros(max(functions, 1), np.int64)

    def nest(
        self, entry_idx: np.ndarray, end_idx: np.ndarray, entry_time: np.ndarray, end_time: np.ndarray,
        function: np.ndarray, end_sites: np.ndarray, final: bool,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
        """(parent id, depth, recursive, closed rows) of a block; cuts ends and end sites in place."""
        n = len(entry_idx)
        room = int(self.state[1]) + n
        self.stack = grown(self.stack, room)
        parent = np.empty(n, np.int64)
        depth = np.empty(n, np.int32)
        recursive = np.empty(n, np.bool_)
        closed = np.empty((room, CLOSED_WIDTH), np.int64)
        filled = nest_block(
            entry_idx, end_idx, entry_time, end_time, function, end_sites, self.state, self.stack,
            self.open_frames, parent, depth, recursive, closed, final,
        )  # fmt: skip
        return parent, depth, recursive, closed[:filled]
