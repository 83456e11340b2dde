"""Instructions that a compressed trace leaves out, recovered by walking the program image.

ETM atoms, XScale messages and Tarmac FD/FI records say only where control went (filtered
LEON buffers, whose delay slots may hold transfers, have their own walk in formats/leon). A
decoder turns its records into a column of *waypoint ops* (`Ops`); a `Walker` follows them
through the image and yields `instructions` rows flagged RECONSTRUCTED, plus `trace_gap`
events where the walk cannot go on.

The walk is one compiled loop over ops. Instruction facts come from a `Program`: every
address the walk reaches is decoded once (a basic block at a time, `isa.decode_columns`)
into flat arrays, and the links between blocks are cached in those arrays, so a loop that
runs a million times costs one decode and a million array reads. When the loop meets an
address not yet decoded it returns to Python, which decodes the block and resumes it.

What the trace and the image cannot tell is never guessed:
- a reconstructed instruction with a condition whose outcome the trace does not give has
  `executed` null;
- when the walk loses its place (no code at an address, an undefined instruction, the trace
  contradicting the image, an indirect branch whose target never came), the next op that
  needs the position emits one `trace_gap` event naming the reason and the address, and
  the ops are dropped (counted in `Walker.lost`) until one carries an address again.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from dataclasses import dataclass, fields

import numba
import numpy as np
import pyarrow as pa

from .image import Image, ImageError
from .isa import BlockCache, decode_columns
from .isa.index import MISSING, AddressIndex, lookup, put
from .isa.insn import (
    C_ADDRESS,
    C_FACTS,
    C_NEXT_ISA,
    C_OPCODE,
    C_SIZE,
    C_TARGET,
    F_ANNUL,
    F_BRANCH,
    F_CONDITIONAL,
    F_DELAY,
    F_DIRECT,
    F_HAS_CONDITION,
    F_HAS_TARGET,
    F_TRAP,
    F_UNDEFINED,
    NO_ISA,
)
from .model import ISA_NAMES, SCHEMAS, Flag, Isa


class Op(enum.IntEnum):
    """Waypoint ops. Fields: `a`, `b` (addresses or counts), `isa`, `cycles`, `time`, `src`."""

    SYNC = 0  # the walk (re)starts at address a in `isa` (I-sync, trace on, a resume)
    ATOM = 1  # the next instruction executed (b=1) or failed its condition (b=0); `cycles`
    RUN = 2  # a instructions ran in sequence; b: RUN_* bits
    BRANCH = 3  # run in sequence to the branch at a, which was taken to b in `isa` (FD/FI)
    TARGET = 4  # the walk goes on at a in `isa`: where the last taken indirect branch went
    EXCEPTION = 5  # an exception entered the vector a in `isa`; b: EXCEPTION_* bits
    GAP = 6  # the trace stops here (trace off, overflow); the decoder reports why
    TRAP = 7  # run in sequence to the next exception-generating instruction (SVC, UDF, Ticc)


RUN_TAKEN = 1
"""`Ops.b` bit of RUN: its last instruction was a taken branch."""
RUN_THUMB_PAIRS = 2
"""`Ops.b` bit of RUN: `a` counts a Thumb BL/BLX pair (one 32-bit T32 row) as two instructions,
as ARMv4T/ARMv5 cores and their traces do: there the pair is two 16-bit instructions."""

EXCEPTION_CANCELS = 1
"""`Ops.b` bit of EXCEPTION: the exception cancelled the last instruction (it did not complete)."""
EXCEPTION_NO_VECTOR = 2
"""`Ops.b` bit of EXCEPTION: the vector is unknown; the walk resumes at the next address."""


class GapReason(enum.IntEnum):
    """Why the walk lost its place (`trace_gap` events' `number`; `name` is the lower-case name).

    The first three are anomalies, reported where they happen; the others only when an op
    needs the position before the trace gives an address again.
    """

    NO_CODE = 1  # the image has no instruction at the address
    UNDEFINED = 2  # the bytes at the address do not decode (or are an undefined instruction)
    MISMATCH = 3  # the trace contradicts the image (a branch the trace says was not taken)
    NO_TARGET = 4  # an indirect branch was taken and the trace gave no target
    VECTOR = 5  # an exception entered a handler at an address the trace does not give


LOSS_NAMES = frozenset(reason.name.lower() for reason in GapReason)
"""The `trace_gap` event names of a walk losing its place (decoders' own gaps have others)."""

GAP_TEXT = {
    GapReason.NO_CODE: "no instruction in the program image at this address",
    GapReason.UNDEFINED: "undecodable or undefined instruction in the image at this address",
    GapReason.MISMATCH: "the trace contradicts the program image here",
    GapReason.NO_TARGET: "an indirect branch was taken but the trace gave no target",
    GapReason.VECTOR: "an exception entered a handler the trace does not locate",
}

NO_TIME = np.iinfo(np.int64).min
"""`Ops.time` and `Ops.cycles` value meaning none."""

MAX_SEQUENTIAL = 1 << 20
"""Instructions a BRANCH op may walk before its source; beyond that trace and image disagree."""

# Instruction facts in Program.flags: bits of the decoded columns' C_FACTS, and one more.
_BRANCH = F_BRANCH
_DIRECT = F_DIRECT  # with the target known
_CONDITIONAL = F_CONDITIONAL  # may not branch/execute (condition, CBZ-style test)
_HAS_COND = F_HAS_CONDITION  # not taken means condition failed (B<cond>), unlike CBZ
_UNDEFINED = F_UNDEFINED  # and not a trap by design
_DELAY = F_DELAY  # SPARC: has a delay slot
_ANNUL = F_ANNUL  # SPARC: the annul bit
_TRAP = F_TRAP  # raises an exception by design
_THUMB_PAIR = 1 << 14  # T32 BL/BLX (immediate): before Thumb-2, a pair of 16-bit instructions
_BLOCK_END = 1 << 15  # the following instruction is found through the index, not at idx + 1
_FLAGS = _BRANCH | _DIRECT | _CONDITIONAL | _HAS_COND | _UNDEFINED | _DELAY | _ANNUL | _TRAP
assert not _FLAGS & (_THUMB_PAIR | _BLOCK_END)

_UNRESOLVED = MISSING  # a position not known (yet)
_NO_CODE = -2  # index value: decoding failed there (reason in Program.failures)


@dataclass
class Ops:
    """A column of waypoint ops, as decoders build them (NumPy arrays of equal length)."""

    kind: np.ndarray  # uint8, Op
    a: np.ndarray  # uint64
    b: np.ndarray  # uint64
    isa: np.ndarray  # uint8, Isa
    cycles: np.ndarray  # int64, NO_TIME when none
    time: np.ndarray  # int64, NO_TIME when none
    src: np.ndarray  # int64: line or byte offset of the record in the input

    def __len__(self) -> int:
        return len(self.kind)

    def select(self, which: slice | np.ndarray) -> Ops:
        """The ops at `which` (a slice, index array or mask), every column alike."""
        return Ops(*(column[which] for column in self._columns()))

    @classmethod
    def concat(cls, *parts: Ops) -> Ops:
        return cls(*(np.concatenate(columns) for columns in zip(*(p._columns() for p in parts), strict=True)))

    def _columns(self) -> tuple[np.ndarray, ...]:
        return tuple(getattr(self, f.name) for f in fields(self))


class OpBuffer:
    """Builds `Ops` one record at a time, for decoders whose records come one by one."""

    def __init__(self) -> None:
        self._rows: list[tuple[int, int, int, int, int, int, int]] = []

    def __len__(self) -> int:
        return len(self._rows)

    def add(
        self, kind: Op, a: int = 0, b: int = 0, isa: Isa | int = 0, *, cycles: int | None = None,
        time: int | None = None, src: int = 0,
    ) -> None:  # fmt: skip
        cycles = NO_TIME if cycles is None else cycles
        self._rows.append((kind, a, b, int(isa), cycles, NO_TIME if time is None else time, src))

    def take(self) -> Ops:
        """The ops added so far; the buffer starts afresh."""
        rows, self._rows = self._rows, []
        columns = list(zip(*rows, strict=True)) if rows else [()] * 7
        dtypes = (np.uint8, np.uint64, np.uint64, np.uint8, np.int64, np.int64, np.int64)
        return Ops(*(np.array(c, dtype=t) for c, t in zip(columns, dtypes, strict=True)))


class Program:
    """The instructions of an image that walks have reached, as flat arrays plus an index.

    Shared by the walkers of all cores that run the same image.
    """

    def __init__(self, image: Image, capacity: int = 4096) -> None:
        self.image = image
        self.blocks = BlockCache(image)  # whole blocks, for decoders that need facts beside the walk
        self.count = 0
        self.pc = np.zeros(capacity, np.uint64)
        self.size = np.zeros(capacity, np.uint8)
        self.opcode = np.zeros(capacity, np.uint32)
        self.isa = np.zeros(capacity, np.uint8)
        self.flags = np.zeros(capacity, np.uint16)
        self.target = np.zeros(capacity, np.uint64)
        self.next_isa = np.zeros(capacity, np.uint8)
        self.next_idx = np.zeros(capacity, np.int64)
        self.target_idx = np.zeros(capacity, np.int64)
        self.index = AddressIndex()
        self.failures: dict[int, str] = {}
        self._leftovers: dict[int, np.ndarray] = {}  # see decode_columns

    def decode(self, key: int) -> None:
        """Decode the block at `key` (address << 3 | ISA) into the arrays."""
        address, isa = key >> 3, Isa(key & 7)
        architecture = self.image.architecture
        try:  # up to the next unconditional branch, or to code decoded before from another entry point
            if architecture is not None and isa not in architecture.isas:
                raise ImageError(f"the image holds {architecture.name} code, not {isa.name}")
            columns = decode_columns(self.image, address, isa, self.index, self._leftovers)
        except (ImageError, ValueError) as exc:  # ValueError: an instruction set isa/ cannot decode
            self.index.add(np.array([key], np.int64), np.array([_NO_CODE], np.int64))
            self.failures[key] = str(exc)
            return
        n, start = len(columns), self.count
        end = start + n
        if end > len(self.pc):
            self._grow(max(2 * len(self.pc), end))
        _fill(columns, start, int(isa), self.pc, self.size, self.opcode, self.isa, self.flags, self.target,
              self.next_isa, self.next_idx, self.target_idx, *self.index.claim(n))  # fmt: skip
        self.count = end

    def _grow(self, capacity: int) -> None:
        for name in ("pc", "size", "opcode", "isa", "flags", "target", "next_isa", "next_idx", "target_idx"):
            old = getattr(self, name)
            new = np.zeros(capacity, old.dtype)
            new[: self.count] = old[: self.count]
            setattr(self, name, new)


@numba.njit(cache=True, nogil=True)
def _fill(
    columns: np.ndarray, start: int, block_isa: int, pc: np.ndarray, size: np.ndarray, opcode: np.ndarray,
    isa: np.ndarray, flags: np.ndarray, target: np.ndarray, next_isa: np.ndarray, next_idx: np.ndarray,
    target_idx: np.ndarray, keys: np.ndarray, values: np.ndarray,
) -> None:  # fmt: skip
    """Program arrays of a block's instructions from its decoded columns, from index `start`,
    and their index entries (in arrays with room for them)."""
    for i in range(len(columns)):
        facts, at = columns[i, C_FACTS], start + i
        put(keys, values, (columns[i, C_ADDRESS] << 3) | block_isa, at)
        isa[at] = block_isa
        flag = facts & _FLAGS
        if facts & F_TRAP:
            flag &= ~_UNDEFINED  # a trap by design is defined
        if not facts & F_HAS_TARGET:
            flag &= ~_DIRECT
        if block_isa == Isa.T32 and _is_bl_pair(columns[i, C_SIZE], columns[i, C_OPCODE]):
            flag |= _THUMB_PAIR
        pc[at], size[at], opcode[at] = columns[i, C_ADDRESS], columns[i, C_SIZE], columns[i, C_OPCODE]
        flags[at] = flag
        target[at] = columns[i, C_TARGET] if facts & F_HAS_TARGET else 0
        next_isa[at] = columns[i, C_NEXT_ISA]
        next_idx[at] = at + 1
        target_idx[at] = _UNRESOLVED
    flags[start + len(columns) - 1] |= _BLOCK_END
    next_idx[start + len(columns) - 1] = _UNRESOLVED


@numba.njit(cache=True, nogil=True)
def _is_bl_pair(size: int, opcode: int) -> bool:
    """Whether a T32 encoding is BL/BLX (immediate): first halfword 11110..., second 11x1... (BL)
    or 11x0... (BLX)."""
    return size == 4 and opcode >> 27 == 0b11110 and (opcode >> 14) & 0b11 == 0b11


# Walker state: one int64 array, so the compiled loop can stop anywhere and resume.
_S_OP = 0  # the op being applied
_S_STEP = 1  # instructions the current RUN/BRANCH/TRAP op has walked
_S_BEGUN = 2  # op_first is set for the current op
_S_POS = 3  # index of the next instruction, or _UNRESOLVED
_S_KEY = 4  # when _S_POS is unresolved: the key to look up, or -1 when the position is lost
_S_LINK = 5  # instruction whose link waits for _S_KEY's index (-1: none)
_S_SLOT = 6  # which link: 0 fall-through (next_idx), 1 branch target (target_idx)
_S_LOST = 7  # GapReason while lost and not yet reported (0: none to report)
_S_LOST_ADDR = 8
_S_ISA = 9  # ISA of the last position (for an FD/FI source when the walk resumes there)
_S_ROWS = 10  # rows in the output buffers
_S_SEQ = 11  # seq of the next row
_S_GAPS = 12  # rows in the gap buffers
_S_DROPPED = 13  # ops dropped for want of a position
_S_NEED = 14  # key to decode when the loop returns _NEED
_S_CHECKED = 15  # the current RUN/BRANCH/TRAP op's instructions are known to be there
_S_RESUMED = 16  # the current BRANCH op resumed the walk at its source
_S_OP_SRC = 17  # src of the op being applied
_S_LOST_SRC = 18  # src of the op where the walk lost its place
_S_LEN = 19

_DONE, _FULL, _NEED = 0, 1, 2

# Rows of the walker's output array (one int64 array: a tuple of arrays costs a call each time).
_O_IDX = 0  # instruction index in the program
_O_EXEC = 1  # executed: 1, 0, or -1 unknown
_O_CYCLES = 2
_O_CANCEL = 3
_O_TIME = 4
_O_SRC = 5
_O_SEQ = 6
_O_LEN = 7
_NOT_EXECUTED, _EXECUTED, _UNKNOWN = 0, 1, -1


@numba.njit(cache=True, nogil=True)
def _lose(state: np.ndarray, reason: int, address: int) -> None:
    state[_S_POS] = _UNRESOLVED
    state[_S_KEY] = -1
    state[_S_LINK] = -1
    state[_S_LOST] = reason
    state[_S_LOST_ADDR] = address
    state[_S_LOST_SRC] = state[_S_OP_SRC]


@numba.njit(cache=True, nogil=True)
def _go_to(state: np.ndarray, address: int, isa: int) -> None:
    """Continue at an address from the trace."""
    state[_S_POS] = _UNRESOLVED
    state[_S_KEY] = (np.int64(address) << 3) | np.int64(isa)
    state[_S_LINK] = -1
    state[_S_LOST] = 0
    state[_S_ISA] = isa


@numba.njit(cache=True, nogil=True)
def _follow(state, idx, slot, link, address, isa) -> None:
    """Continue along a link of instruction `idx`: its index if cached, else its address."""
    if link >= 0:
        state[_S_POS] = link
    else:
        _go_to(state, address, isa)
        state[_S_LINK] = idx
        state[_S_SLOT] = slot


@numba.njit(cache=True, nogil=True)
def _fall_through(state, idx, pc, size, isa, next_idx) -> None:
    _follow(state, idx, 0, next_idx[idx], pc[idx] + size[idx], isa[idx])


@numba.njit(cache=True, nogil=True)
def _take(state, idx, pc, isa, flags, target, next_isa, target_idx) -> None:
    """Continue at the target of the taken branch `idx`; lost if the image cannot say where."""
    if flags[idx] & _DIRECT and next_isa[idx] != NO_ISA:
        _follow(state, idx, 1, target_idx[idx], target[idx], next_isa[idx])
    else:
        _lose(state, GapReason.NO_TARGET, pc[idx])


@numba.njit(cache=True, nogil=True)
def _resolve(state, keys, values, next_idx, target_idx) -> bool:
    """Turn a pending address into an index; False when it must be decoded first."""
    if state[_S_POS] != _UNRESOLVED or state[_S_KEY] == -1:
        return True
    found = lookup(keys, values, state[_S_KEY])
    if found == _UNRESOLVED:
        state[_S_NEED] = state[_S_KEY]
        return False
    if found == _NO_CODE:
        _lose(state, GapReason.NO_CODE, state[_S_KEY] >> 3)
        return True
    link = state[_S_LINK]
    if link >= 0:
        if state[_S_SLOT] == 0:
            next_idx[link] = found
        else:
            target_idx[link] = found
    state[_S_POS] = found
    state[_S_KEY] = -1
    state[_S_LINK] = -1
    return True


@numba.njit(cache=True, nogil=True)
def _report_loss(state, gaps) -> None:
    if state[_S_LOST] != 0:
        g = state[_S_GAPS]
        gaps[0, g] = state[_S_SEQ]
        gaps[1, g] = state[_S_LOST]
        gaps[2, g] = state[_S_LOST_ADDR]
        gaps[3, g] = state[_S_LOST_SRC]
        state[_S_GAPS] = g + 1
        state[_S_LOST] = 0


@numba.njit(cache=True, nogil=True, inline="always")
def _put(out, row, idx, executed, cycles, time, src, seq) -> None:
    """Write one instruction row into the output array."""
    row = np.uint64(row)  # unsigned indices: no wrap-around code in the hot loops
    out[_O_IDX, row] = idx
    out[_O_EXEC, row] = executed
    out[_O_CYCLES, row] = cycles
    out[_O_CANCEL, row] = 0
    out[_O_TIME, row] = time
    out[_O_SRC, row] = src
    out[_O_SEQ, row] = seq


@numba.njit(cache=True, nogil=True)
def _emit(state, out, idx, executed, cycles, time, src, isa) -> None:
    r = state[_S_ROWS]
    _put(out, r, idx, executed, cycles, time, src, state[_S_SEQ])
    state[_S_ROWS] = r + 1
    state[_S_SEQ] += 1
    state[_S_ISA] = isa[idx]


@numba.njit(cache=True, nogil=True)
def _ends_op(kind, steps, count, source, taken, pc, f, halves) -> bool:
    """Whether the instruction with facts `f` at `pc` is the last one of a RUN/BRANCH/TRAP op.

    `halves` is _THUMB_PAIR when a RUN counts Thumb BL/BLX pairs as two (RUN_THUMB_PAIRS), else 0.
    A pair is an unconditional branch, so only a RUN's last instruction can be one (anywhere
    else the walk is a mismatch): only there does it count twice.
    """
    if kind == Op.RUN:
        return steps + (2 if f & halves else 1) >= count
    if kind == Op.BRANCH:
        return pc == source
    return f & _TRAP != 0


@numba.njit(cache=True, nogil=True)
def _check_run(state, idx, kind, count, source, taken, halves, pc, size, isa, flags, next_idx, keys,
               values) -> int:  # fmt: skip
    """Walk a RUN/BRANCH/TRAP op's instructions without emitting them: are they all there?

    Returns 1 when the walk can be emitted (every fall-through link is then cached), 0 when
    trace and image disagree (the position is lost, with the reason), 2 when an address
    must be decoded first (state[_S_NEED]). Checking first means a contradiction never
    leaves instructions behind that the trace did not run.
    """
    steps = 0
    while True:
        f = flags[idx]
        if f & _UNDEFINED:
            _lose(state, GapReason.UNDEFINED, pc[idx])
            return 0
        if _ends_op(kind, steps, count, source, taken, pc[idx], f, halves):
            if taken and not f & _BRANCH:
                _lose(state, GapReason.MISMATCH, pc[idx])  # a taken branch that is not one
                return 0
            if taken and f & _DELAY and f & _BLOCK_END:
                _lose(state, GapReason.NO_CODE, pc[idx] + 4)
                return 0
            return 1
        if (f & _BRANCH and not f & _CONDITIONAL) or steps >= MAX_SEQUENTIAL:
            _lose(state, GapReason.MISMATCH, pc[idx])  # a branch the trace says was not taken
            return 0
        last = idx
        if f & _DELAY:
            if f & _BLOCK_END:
                _lose(state, GapReason.NO_CODE, pc[idx] + 4)
                return 0
            last = idx + 1
            steps += 1
        following = next_idx[last]
        if following < 0:
            address = pc[last] + size[last]
            key = (np.int64(address) << 3) | np.int64(isa[last])
            following = lookup(keys, values, key)
            if following == _UNRESOLVED:
                state[_S_NEED] = key
                return 2
            if following == _NO_CODE:
                _lose(state, GapReason.NO_CODE, address)
                return 0
            next_idx[last] = following
        idx = following
        steps += 1


@numba.njit(cache=True, nogil=True)
def _in_sequence(f) -> int:
    """`executed` of an instruction passed in sequence (not a taken branch)."""
    if f & _BRANCH:
        return _NOT_EXECUTED if f & _HAS_COND else _EXECUTED
    return _UNKNOWN if f & _CONDITIONAL else _EXECUTED


@numba.njit(cache=True, nogil=True)
def _run_checked(state, out, idx, kind, count, source, taken, halves, cycles, time, src, pc, isa, flags,
                 next_idx):  # fmt: skip
    """Emit a checked RUN/BRANCH/TRAP walk up to (not including) its last instruction.

    The hot loop of every flow-only trace, so it keeps its state in locals. Returns where it
    stopped and the op's step count there; stops early when the output is full.
    """
    rows, seq, steps = state[_S_ROWS], state[_S_SEQ], state[_S_STEP]
    room = out.shape[1] - 1  # rows < room: space for a branch and its delay slot
    f = flags[idx]
    while rows < room and not _ends_op(kind, steps, count, source, taken, pc[idx], f, halves):
        last = idx + 1 if f & _DELAY else idx  # a branch not taken runs its delay slot too
        for row in range(idx, last + 1):
            if row == idx:
                executed = _in_sequence(f)
            else:
                executed = _NOT_EXECUTED if f & _ANNUL else _EXECUTED
                steps += 1
            _put(out, rows, row, executed, cycles, time, src, seq)
            rows += 1
            seq += 1
        state[_S_ISA] = isa[last]
        idx = next_idx[last]
        steps += 1
        f = flags[idx]
    state[_S_ROWS], state[_S_SEQ], state[_S_STEP], state[_S_POS] = rows, seq, steps, idx
    return idx, steps


@numba.njit(cache=True, nogil=True)
def _run_atoms(state, out, i, op_kind, op_b, op_cycles, op_time, op_src, isa, flags, next_idx, target_idx,
               op_first, op_end):  # fmt: skip
    """Apply consecutive ATOM ops from op i while each next instruction is a cached link.

    The hot loop of ETM traces, so it keeps its state in locals; anything else (an address
    to look up, an indirect branch, a full output) is left to the general loop. Returns the
    first op not applied.
    """
    rows, seq, idx = state[_S_ROWS], state[_S_SEQ], state[_S_POS]
    room = out.shape[1] - 1
    last = -1
    while i < len(op_kind) and op_kind[np.uint64(i)] == Op.ATOM and rows < room:
        at, op = np.uint64(idx), np.uint64(i)  # unsigned: no wrap-around code
        f = flags[at]
        executed = op_b[op] == 1
        following = target_idx[at] if executed and f & _BRANCH and f & _DIRECT else next_idx[at]
        if f & _UNDEFINED or (executed and f & _BRANCH and not f & _DIRECT) or following < 0:
            break
        outcome = _EXECUTED if executed else _NOT_EXECUTED
        _put(out, rows, idx, outcome, op_cycles[op], op_time[op], op_src[op], seq)
        op_first[op] = seq
        rows += 1
        seq += 1
        op_end[op] = seq
        last = idx
        idx = following
        i += 1
    if last >= 0:
        state[_S_ROWS], state[_S_SEQ], state[_S_POS], state[_S_ISA] = rows, seq, idx, isa[last]
    return i


@numba.njit(cache=True, nogil=True)
def _walk(
    op_kind, op_a, op_b, op_isa, op_cycles, op_time, op_src,
    pc, size, isa, flags, target, next_isa, next_idx, target_idx, keys, values,
    state, out, gaps, op_first, op_end,
):  # fmt: skip
    """Apply ops from state[_S_OP] on; returns _DONE, _FULL (buffers full) or _NEED (decode)."""
    while state[_S_OP] < len(op_kind):
        i = state[_S_OP]
        if state[_S_ROWS] + 2 > out.shape[1] or state[_S_GAPS] + 2 > gaps.shape[1]:
            return _FULL
        if state[_S_LOST] != 0 and state[_S_LOST] <= GapReason.MISMATCH:
            _report_loss(state, gaps)  # anomalies: at once
        if state[_S_BEGUN] == 0:
            op_first[i] = state[_S_SEQ]
            state[_S_BEGUN] = 1
            state[_S_OP_SRC] = op_src[i]
        kind = op_kind[i]
        cycles, time, src = op_cycles[i], op_time[i], op_src[i]
        if kind == Op.SYNC or kind == Op.TARGET:
            _go_to(state, op_a[i], op_isa[i])
        elif kind == Op.EXCEPTION:
            if op_b[i] & EXCEPTION_CANCELS and state[_S_ROWS] > 0:
                out[_O_EXEC, state[_S_ROWS] - 1] = _NOT_EXECUTED
                out[_O_CANCEL, state[_S_ROWS] - 1] = 1
            if op_b[i] & EXCEPTION_NO_VECTOR:
                _lose(state, GapReason.VECTOR, 0)
            else:
                _go_to(state, op_a[i], op_isa[i])
        elif kind == Op.GAP:
            _lose(state, 0, 0)  # the decoder reports its own gaps
        elif kind == Op.RUN and op_a[i] == 0:
            pass
        else:  # ATOM, RUN, BRANCH, TRAP: these need the position
            if not _resolve(state, keys, values, next_idx, target_idx):
                return _NEED
            idx = state[_S_POS]
            if idx >= 0 and flags[idx] & _UNDEFINED:
                _lose(state, GapReason.UNDEFINED, pc[idx])
                _report_loss(state, gaps)
                idx = _UNRESOLVED
            count, source = np.int64(op_a[i]), op_a[i]
            taken = kind == Op.BRANCH or (kind == Op.RUN and op_b[i] & RUN_TAKEN != 0)
            halves = _THUMB_PAIR if kind == Op.RUN and op_b[i] & RUN_THUMB_PAIRS else 0
            if idx >= 0 and kind != Op.ATOM and state[_S_CHECKED] == 0:
                checked = _check_run(state, idx, kind, count, source, taken, halves, pc, size, isa, flags,
                                     next_idx, keys, values)  # fmt: skip
                if checked == 2:
                    return _NEED
                state[_S_CHECKED] = checked
                if checked == 0:
                    idx = _UNRESOLVED
            if idx < 0:
                _report_loss(state, gaps)
                if kind == Op.BRANCH and state[_S_RESUMED] == 0:  # its source address resumes the walk
                    _go_to(state, source, op_isa[i] if state[_S_ISA] < 0 else state[_S_ISA])
                    state[_S_RESUMED] = 1
                    continue
                state[_S_DROPPED] += 1
            elif kind == Op.ATOM:
                following = _run_atoms(state, out, i, op_kind, op_b, op_cycles, op_time, op_src, isa, flags,
                                       next_idx, target_idx, op_first, op_end)  # fmt: skip
                if following > i:
                    state[_S_OP] = following
                    state[_S_BEGUN] = 0
                    continue
                executed = op_b[i] == 1
                _emit(state, out, idx, _EXECUTED if executed else _NOT_EXECUTED, cycles, time, src, isa)
                if executed and flags[idx] & _BRANCH:
                    _take(state, idx, pc, isa, flags, target, next_isa, target_idx)
                else:
                    _fall_through(state, idx, pc, size, isa, next_idx)
            else:  # checked, so every link up to the op's last instruction is cached
                idx, steps = _run_checked(state, out, idx, kind, count, source, taken, halves, cycles, time,
                                          src, pc, isa, flags, next_idx)  # fmt: skip
                f = flags[idx]
                if not _ends_op(kind, steps, count, source, taken, pc[idx], f, halves):
                    continue  # the output is full: the loop's top hands it over
                if taken:
                    _emit(state, out, idx, _EXECUTED, cycles, time, src, isa)
                    if f & _DELAY:  # the delay slot runs with the branch, unless ba,a
                        slot = _NOT_EXECUTED if f & _ANNUL and not f & _CONDITIONAL else _EXECUTED
                        _emit(state, out, idx + 1, slot, cycles, time, src, isa)
                    if kind == Op.BRANCH:
                        _go_to(state, op_b[i], op_isa[i])
                    else:
                        _take(state, idx, pc, isa, flags, target, next_isa, target_idx)
                else:
                    trap = kind == Op.TRAP
                    _emit(state, out, idx, _EXECUTED if trap else _in_sequence(f), cycles, time, src, isa)
                    last = idx
                    if f & _DELAY:  # a branch not taken: its delay slot, unless annulled
                        last = idx + 1
                        _emit(state, out, last, _NOT_EXECUTED if f & _ANNUL else _EXECUTED, cycles, time, src,
                              isa)  # fmt: skip
                    _fall_through(state, last, pc, size, isa, next_idx)
        op_end[i] = state[_S_SEQ]
        state[_S_OP] = i + 1
        state[_S_STEP] = state[_S_BEGUN] = state[_S_CHECKED] = state[_S_RESUMED] = 0
    if state[_S_LOST] != 0 and state[_S_LOST] <= GapReason.MISMATCH:
        _report_loss(state, gaps)
    return _DONE


_NO_EVENTS = SCHEMAS["events"].empty_table()
# The `isa` dictionary; columns index it unchecked (their indices are Isa values): checking
# a batch's 64 k indices took 15 times longer than building the column.
_ISA_NAMES = pa.array(ISA_NAMES)
_ROW_FLAGS = np.uint16(Flag.RECONSTRUCTED)
_CANCELLED_FLAGS = np.uint16(Flag.RECONSTRUCTED | Flag.CANCELLED)


@numba.njit(cache=True, nogil=True)
def _gather(
    out, program_pc, program_opcode, program_size, program_isa,
    seq, time, cycles, src, pc, opcode, size, isa, flags, executed, known, timed, counted,
):  # fmt: skip
    """The instruction columns of the first len(seq) output rows; `known`, `timed` and
    `counted` say where executed, time and cycles are not null. A loop per column or two:
    one loop writing all of them runs slower, short of registers."""
    n = len(seq)
    rows = out[_O_IDX, :n]
    for row in range(n):
        pc[row] = program_pc[rows[row]]
    for row in range(n):
        opcode[row] = program_opcode[rows[row]]
    for row in range(n):
        size[row], isa[row] = program_size[rows[row]], program_isa[rows[row]]
    for row in range(n):  # loops, not slices: see isa.arm._copy_rows
        seq[row], src[row] = out[_O_SEQ, row], out[_O_SRC, row]
    for row in range(n):
        time[row], cycles[row] = out[_O_TIME, row], out[_O_CYCLES, row]
    for row in range(n):
        timed[row], counted[row] = time[row] != NO_TIME, cycles[row] != NO_TIME
    outcome, cancelled = out[_O_EXEC, :n], out[_O_CANCEL, :n]
    for row in range(n):
        flags[row] = _CANCELLED_FLAGS if cancelled[row] != 0 else _ROW_FLAGS
        executed[row], known[row] = outcome[row] == _EXECUTED, outcome[row] != _UNKNOWN


def _nullable(values: np.ndarray, present: np.ndarray, type_: pa.DataType) -> pa.Array:
    """`values` (int64 or bool) with nulls where not `present`, built from buffers: a fraction
    of the time pa.array(values, mask=...) takes."""
    data = np.packbits(values, bitorder="little") if type_ == pa.bool_() else values
    nulls = len(values) - int(np.count_nonzero(present))
    validity = pa.py_buffer(np.packbits(present, bitorder="little")) if nulls else None
    return pa.Array.from_buffers(type_, len(values), [validity, pa.py_buffer(data)], null_count=nulls)


class Walker:
    """Follows one core's waypoint ops through a `Program`, yielding model rows in batches.

    Feed ops with `run` as the decoder produces them (any number of calls), then `finish`.
    The last row is held back until then, so an EXCEPTION that cancels it can still mark
    it. After each `run`, `op_first[i]` and `op_end[i]` are the seq before and after op i
    (op i emitted rows op_first[i] .. op_end[i] - 1), so the decoder can give its own events
    (exceptions, timestamps, gaps) the seq of the instruction they belong to. The walk's own
    trace_gap events carry the `src` of the op where it lost its place.
    """

    def __init__(self, program: Program, *, cpu: int = 0, first_seq: int = 0, batch: int = 1 << 16) -> None:
        self.program = program
        self.cpu = cpu
        self.state = np.zeros(_S_LEN, np.int64)
        self.state[[_S_POS, _S_KEY, _S_LINK, _S_ISA]] = (_UNRESOLVED, -1, -1, -1)
        self.state[_S_SEQ] = first_seq
        self._out = np.zeros((_O_LEN, batch), np.int64)
        self._gaps = np.zeros((4, 256), np.int64)  # seq, reason, address, src
        self.op_first = np.zeros(0, np.int64)
        self.op_end = np.zeros(0, np.int64)

    @property
    def next_seq(self) -> int:
        """The seq the next instruction will get."""
        return int(self.state[_S_SEQ])

    @next_seq.setter
    def next_seq(self, seq: int) -> None:
        """Number on from `seq`: when several cores' walks interleave in one seq order."""
        self.state[_S_SEQ] = seq

    @property
    def dropped(self) -> int:
        """Ops dropped because the walk had lost its place."""
        return int(self.state[_S_DROPPED])

    def run(self, ops: Ops) -> Iterator[dict[str, pa.Table]]:
        """Apply `ops`; yields batches of `instructions` and `events` (trace_gap) rows."""
        self.op_first = np.empty(len(ops), np.int64)  # the walk sets both for every op
        self.op_end = np.empty(len(ops), np.int64)
        state = self.state
        state[_S_OP] = state[_S_STEP] = state[_S_BEGUN] = state[_S_CHECKED] = state[_S_RESUMED] = 0
        p = self.program
        while True:
            status = _walk(
                ops.kind, ops.a, ops.b, ops.isa, ops.cycles, ops.time, ops.src,
                p.pc, p.size, p.isa, p.flags, p.target, p.next_isa, p.next_idx, p.target_idx,
                p.index.keys, p.index.values,
                state, self._out, self._gaps, self.op_first, self.op_end,
            )  # fmt: skip
            if status == _NEED:
                p.decode(int(state[_S_NEED]))
            elif status == _FULL:
                yield self._flush(keep_last=True)
            else:
                break
        if state[_S_ROWS] > 1 or state[_S_GAPS]:
            yield self._flush(keep_last=True)

    def finish(self) -> Iterator[dict[str, pa.Table]]:
        """The row held back, once no more ops will come."""
        if self.state[_S_ROWS] or self.state[_S_GAPS]:
            yield self._flush(keep_last=False)

    def _flush(self, *, keep_last: bool) -> dict[str, pa.Table]:
        rows = int(self.state[_S_ROWS])
        n = rows - 1 if keep_last and rows else rows
        batch = {"instructions": self._instructions(n), "events": self._gap_events()}
        if n < rows:
            self._out[:, 0] = self._out[:, rows - 1]
        self.state[_S_ROWS] = rows - n
        return batch

    def _instructions(self, n: int) -> pa.Table:
        p = self.program
        seq, time, cycles, src = (np.empty(n, np.int64) for _ in range(4))
        pc, opcode = np.empty(n, np.uint64), np.empty(n, np.uint32)
        size, isa, flags = np.empty(n, np.uint8), np.empty(n, np.int32), np.empty(n, np.uint16)
        executed, known, timed, counted = (np.empty(n, np.bool_) for _ in range(4))
        _gather(
            self._out, p.pc, p.opcode, p.size, p.isa,
            seq, time, cycles, src, pc, opcode, size, isa, flags, executed, known, timed, counted,
        )  # fmt: skip
        columns = [
            pa.array(seq),
            _nullable(time, timed, pa.int64()),
            pa.array(np.full(n, self.cpu, np.uint16)),
            pa.array(pc),
            pa.array(opcode),
            pa.array(size),
            pa.DictionaryArray.from_arrays(pa.array(isa), _ISA_NAMES, safe=False),
            pa.nulls(n, SCHEMAS["instructions"].field("mode").type),
            _nullable(executed, known, pa.bool_()),
            _nullable(cycles, counted, pa.int64()),
            pa.array(flags),
            pa.nulls(n, pa.string()),
            pa.array(src),
        ]
        return pa.Table.from_arrays(columns, schema=SCHEMAS["instructions"])

    def _gap_events(self) -> pa.Table:
        count = int(self.state[_S_GAPS])
        if count == 0:  # most batches: building an empty table column by column costs as much as a full one
            return _NO_EVENTS
        self.state[_S_GAPS] = 0
        seq, reason, address, src = self._gaps[:, :count].copy()
        reasons = [GapReason(int(r)) for r in reason]
        return pa.Table.from_pydict(
            {
                "seq": pa.array(seq.copy()),
                "time": pa.nulls(count, pa.int64()),
                "cpu": pa.array(np.full(count, self.cpu, np.uint16)),
                "kind": pa.array(["trace_gap"] * count, pa.string()).dictionary_encode(),
                "number": pa.array([int(r) for r in reasons], pa.int64()),
                "name": pa.array([r.name.lower() for r in reasons], pa.string()),
                "value": pa.array(address.astype(np.uint64)),
                "value1": pa.nulls(count, pa.uint64()),
                "text": pa.array([self._gap_text(r, int(a)) for r, a in zip(reasons, address, strict=True)]),
                "src": pa.array(src),
            },
            schema=SCHEMAS["events"],
        )

    def _gap_text(self, reason: GapReason, address: int) -> str:
        if reason is GapReason.VECTOR:
            return GAP_TEXT[reason]
        failure = next((m for k, m in self.program.failures.items() if k >> 3 == address), None)
        detail = f" ({failure})" if failure and reason is GapReason.NO_CODE else ""
        return f"{GAP_TEXT[reason]} at 0x{address:x}{detail}"
