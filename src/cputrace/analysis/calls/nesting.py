"""Frames nested in tree order, block by block: parents, depths, cuts, recursion, self costs.

Frames come in tree order (entry up, end down, each core's outermost frame first). The open
frames are a stack carried from block to block, so a core's frames nest the same whatever
the blocks, in memory that follows the call depth. A frame that ends after its parent
(crossing call/return pairs) is cut at its parent's end: its end, end time and exit and
resume sites become the parent's. A frame's self costs are known when it closes (every
frame it called has been seen): they come out as CLOSED rows.
"""

from __future__ import annotations

import numba
import numpy as np

from ...kernels.growth import grown
from .log import SITE

NESTED = np.dtype(
    [
        ("entry_index", "<i8"),  # given: the core's instructions before the entry and the end,
        ("end_index", "<i8"),  # (the end cut in place)
        ("entry_time", "<i8"),
        ("end_time", "<i8"),
        ("function", "<i8"),  # a number per distinct function, for recursion
        ("exit", SITE),
        ("resume", SITE),
        ("parent", "<i8"),  # found: the parent's id (-1 for the outermost frame), depth, recursion
        ("depth", "<i4"),
        ("recursive", "?"),
    ],
    align=True,  # padded to whole int64s, so that the int64 fields of every record are aligned
)
"""One frame of a block."""

OPEN_FRAME = np.dtype(
    [("id", "<i8"), ("end_index", "<i8"), ("end_time", "<i8"), ("function", "<i8"), ("depth", "<i8"),
     ("insns_self", "<i8"), ("time_self", "<i8"), ("exit", SITE), ("resume", SITE)]
)  # fmt: skip
"""A frame on the stack of open frames: its (cut) end and end sites, its self costs so far."""

CLOSED = np.dtype([("id", "<i8"), ("insns_self", "<i8"), ("time_self", "<i8")])
"""A frame's self costs, once it closed."""

NESTING = np.dtype([("next_id", "<i8"), ("top", "<i8")])
"""Between blocks: the id of the next frame, the depth of the stack of open frames."""


@numba.njit(cache=True, nogil=True)
def _close(stack, top, open_frames, closed, filled):
    closed[filled].id = stack[top].id
    closed[filled].insns_self = stack[top].insns_self
    closed[filled].time_self = stack[top].time_self
    open_frames[stack[top].function] -= 1
    return filled + 1


@numba.njit(cache=True, nogil=True)
def nest_block(frames, state, stack, open_frames, closed, final):
    """Nest one block of frames (NESTED); returns how many CLOSED rows it filled.

    `stack` needs room for the depth + len(frames) rows, `closed` likewise. `open_frames`
    counts the open frames of each function (recursion). With `final`, every frame still
    open closes after the block.
    """
    st = state[0]
    next_id, top = st.next_id, st.top
    filled = 0
    for i in range(len(frames)):
        frame = frames[i]
        while top > 0 and stack[top - 1].end_index <= frame.entry_index:
            top -= 1
            filled = _close(stack, top, open_frames, closed, filled)
        if top > 0:
            above = stack[top - 1]
            if frame.end_index > above.end_index:
                frame.end_index = above.end_index
                frame.end_time = above.end_time
                frame.exit = above.exit
                frame.resume = above.resume
            frame.parent = above.id
            frame.depth = above.depth + 1
            above.insns_self -= frame.end_index - frame.entry_index
            above.time_self -= frame.end_time - frame.entry_time
        else:
            frame.parent = -1
            frame.depth = 0
        frame.recursive = open_frames[frame.function] > 0
        open_frames[frame.function] += 1
        opened = stack[top]
        opened.id = next_id + i
        opened.end_index = frame.end_index
        opened.end_time = frame.end_time
        opened.function = frame.function
        opened.depth = frame.depth
        opened.insns_self = frame.end_index - frame.entry_index
        opened.time_self = frame.end_time - frame.entry_time
        opened.exit = frame.exit
        opened.resume = frame.resume
        top += 1
    if final:
        while top > 0:
            top -= 1
            filled = _close(stack, top, open_frames, closed, filled)
    st.next_id = next_id + len(frames)
    st.top = top
    return filled


class Nesting:
    """One core's nesting state between blocks."""

    def __init__(self, functions: int, first_id: int = 0) -> None:
        self.state = np.zeros(1, NESTING)
        self.state[0]["next_id"] = first_id
        self.stack = np.zeros(64, OPEN_FRAME)
        self.open_frames = np.zeros(max(functions, 1), np.int64)

    @property
    def next_id(self) -> int:
        return int(self.state[0]["next_id"])

    def nest(self, frames: np.ndarray, final: bool) -> np.ndarray:
        """Nest a block of NESTED frames in place; returns the CLOSED rows of the frames it closed."""
        room = int(self.state[0]["top"]) + len(frames)
        self.stack = grown(self.stack, room)
        closed = np.empty(room, CLOSED)
        filled = nest_block(frames, self.state, self.stack, self.open_frames, closed, final)
        return closed[:filled]
