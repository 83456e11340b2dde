"""Call and return detection over the instruction stream of each core, in compiled passes.

Two rules, chosen per core (docs/formats.md section 1):

- registers (when the trace records lr and/or sp writes): a control transfer is a potential
  call if lr was written by one of the 7 instructions up to and including the transfer
  and lies within 64 bytes of the address after it; it becomes a call when a later transfer
  reaches that lr value with the same sp, sp never having risen above it in between. This
  survives BL used as a long branch, BX lr in table branches, MOV pc,lr, hand-set lr and tail
  calls, and matches the reference Tarmac tools' call trees. A potential call that never
  returns is not a call.
- ISA semantics (traces without registers: ETM, XScale, LEON; or on request): an executed
  call instruction (A32/T32 BL/BLX, A64 BL/BLR, SPARC CALL/JMPL to %o7) followed by a
  transfer opens a frame returning to the address after it (after the delay slot on SPARC);
  an executed return instruction whose transfer reaches the return address of an open frame
  closes it and every frame above it. Frames still open when the trace ends are calls.

A site is (seq, time, pc, src) of one instruction. Each detected call gives its call site
(the call instruction), entry (first instruction of the callee), exit (last instruction of
the callee) and resume site (first instruction after the return; none if it never
returned). Everything per instruction happens in numba loops over chunk arrays; the state
carried between chunks is a few arrays.

Detection also logs what it decided, in order: a potential call (or ISA frame) opened, a
call ended, a potential call died (sp rose above it, another took its sp and lr, or the
trace ended). A consumer of that log (callsums.py) folds calls into per-context sums while
detection runs; `recycle` then frees the rows of everything decided, so memory follows the
undecided potential calls, not the calls.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numba
import numpy as np
import pyarrow as pa

from ..image import Image
from ..isa.factcodes import FactCodes
from ..isa.insn import F_CALL, F_DELAY, F_RETURN
from ..kernels import pairtable
from ..kernels.growth import grown
from ..model import Isa
from ..store.chunks import NO_TIME, Instructions, Step, read_steps
from ..store.columns import dictionary_codes
from ..store.trace import Trace
from ..store.window import WHOLE_TRACE, Window
from . import caution


class Method(enum.StrEnum):
    """Which rule finds calls: from lr/sp writes, from instruction semantics, or chosen per core."""

    AUTO = "auto"
    REGISTERS = "registers"
    ISA = "isa"


LR_NAMES = ("x30", "r14")
SP_NAMES = ("sp", "wsp", "r13")
_LR, _SP, _OTHER = 0, 1, 2

# columns of a site record
SEQ, TIME, PC, SRC = 0, 1, 2, 3
# slots: a potential call (register rule) or an open frame (ISA rule)
S_ENTRY_IDX, S_CALL, S_ENTRY = 0, 1, 5
SLOT_WIDTH = 9
# pairs: a detected call's end
P_SLOT, P_END_IDX, P_EXIT, P_RESUME = 0, 1, 2, 6
PAIR_WIDTH = 10
# the decision log: (kind, slot or pair row, instruction index it happened at)
E_KIND, E_REF, E_INDEX = 0, 1, 2
EVENT_WIDTH = 3
EV_OPEN, EV_END, EV_DEATH = 0, 1, 2  # a slot opened, a pair row ended its slot, a slot died

# scalar state
(
    ST_N, ST_POS, ST_REG_POS, ST_HAVE_PREV, ST_PREV, ST_EXPECTED, ST_EXPECTED_LR,
    ST_LR_KNOWN, ST_LR, ST_LR_AGE, ST_SP, ST_SLOTS, ST_PAIRS, ST_HEAP, ST_DEPTH,
    ST_CALL_COUNTDOWN, ST_CALL_RETURN, ST_CALL_SITE, ST_RETURN_COUNTDOWN, ST_FIRST, ST_EVENTS,
) = (0, 1, 2, 3, 4, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 24, 25, 29)  # fmt: skip
STATE_WIDTH = 30

_SIGN = np.int64(-(1 << 63))
_LR_WINDOW = 8  # lr written by the transfer or the 6 instructions before it
_LR_DISTANCE = 64
_INITIAL_ROWS = 1 << 14


def register_code(name: str) -> int:
    """Whether a canonical register name is the link register, the stack pointer, or neither."""
    base = name.partition("_")[0]
    if base in LR_NAMES:
        return _LR
    if base in SP_NAMES:
        return _SP
    return _OTHER


@numba.njit(cache=True, nogil=True)
def _site(out: np.ndarray, row: int, col: int, seq: int, time: int, pc: int, src: int) -> None:
    out[row, col + SEQ] = seq
    out[row, col + TIME] = time
    out[row, col + PC] = pc
    out[row, col + SRC] = src


@numba.njit(cache=True, nogil=True)
def _copy_site(out: np.ndarray, row: int, col: int, st: np.ndarray, at: int) -> None:
    for i in range(4):
        out[row, col + i] = st[at + i]


@numba.njit(cache=True, nogil=True)
def _heap_push(heap: np.ndarray, size: int, key: int, lr: int, slot: int) -> int:
    i = size
    heap[i, 0] = key
    heap[i, 1] = lr
    heap[i, 2] = slot
    while i > 0:
        parent = (i - 1) // 2
        if heap[parent, 0] <= heap[i, 0]:
            break
        for c in range(3):
            heap[parent, c], heap[i, c] = heap[i, c], heap[parent, c]
        i = parent
    return size + 1


@numba.njit(cache=True, nogil=True)
def _heap_pop(heap: np.ndarray, size: int) -> int:
    size -= 1
    for c in range(3):
        heap[0, c] = heap[size, c]
    i = 0
    while True:
        left = 2 * i + 1
        smallest = i
        if left < size and heap[left, 0] < heap[smallest, 0]:
            smallest = left
        if left + 1 < size and heap[left + 1, 0] < heap[smallest, 0]:
            smallest = left + 1
        if smallest == i:
            return size
        for c in range(3):
            heap[smallest, c], heap[i, c] = heap[i, c], heap[smallest, c]
        i = smallest


@numba.njit(cache=True, nogil=True)
def _compact_heap(heap: np.ndarray, size: int, pending: np.ndarray) -> int:
    """Drop the heap entries of potential calls that already returned; returns the new size."""
    kept = 0
    for i in range(size):
        row = pairtable.find(pending, heap[i, 0] ^ _SIGN, heap[i, 1])
        if row >= 0 and pending[row, 2] == heap[i, 2]:
            kept = _heap_push(heap, kept, heap[i, 0], heap[i, 1], heap[i, 2])
    return kept


@numba.njit(cache=True, nogil=True)
def _log(st: np.ndarray, events: np.ndarray, kind: int, ref: int) -> None:
    row = st[ST_EVENTS]
    events[row, E_KIND] = kind
    events[row, E_REF] = ref
    events[row, E_INDEX] = st[ST_N]
    st[ST_EVENTS] = row + 1


@numba.njit(cache=True, nogil=True)
def _apply_register(st, pending, counts, heap, events, kind: int, value: int) -> None:
    if kind == _LR:
        st[ST_LR] = value
        st[ST_LR_KNOWN] = 1
        st[ST_LR_AGE] = 0
        return
    st[ST_SP] = value
    key = value ^ _SIGN  # unsigned order as signed
    size = st[ST_HEAP]
    while size > 0 and heap[0, 0] < key:  # sp rose above these potential calls: they are dead
        row = pairtable.find(pending, heap[0, 0] ^ _SIGN, heap[0, 1])
        if row >= 0 and pending[row, 2] == heap[0, 2]:
            _log(st, events, EV_DEATH, heap[0, 2])
            pairtable.remove(pending, counts, row)
        size = _heap_pop(heap, size)
    st[ST_HEAP] = size


@numba.njit(cache=True, nogil=True)
def _keep_site(st: np.ndarray, at: int, seq: int, time: int, pc: int, src: int) -> None:
    st[at + SEQ] = seq
    st[at + TIME] = time
    st[at + PC] = pc
    st[at + SRC] = src


@numba.njit(cache=True, nogil=True)
def _start_instruction(st, seq, time, pc, src) -> None:
    if st[ST_N] == 0:
        _keep_site(st, ST_FIRST, seq, time, pc, src)


@numba.njit(cache=True, nogil=True)
def _end_instruction(st, seq, time, pc, src, expected) -> None:
    _keep_site(st, ST_PREV, seq, time, pc, src)
    st[ST_HAVE_PREV] = 1
    st[ST_EXPECTED] = expected
    st[ST_N] += 1


@numba.njit(cache=True, nogil=True)
def detect_by_registers(
    pc, size, thumb, seq, time, src, rseq, rkind, rval, st, pending, counts, heap, slots, pairs, events
):
    """The lr/sp rule over one chunk of one core; False when an output array must grow first."""
    n = len(pc)
    pos = st[ST_POS]
    rp = st[ST_REG_POS]
    while pos < n:
        full = st[ST_SLOTS] >= len(slots) or st[ST_PAIRS] >= len(pairs) or st[ST_HEAP] >= len(heap)
        full |= st[ST_EVENTS] + counts[0] + 2 >= len(events)  # every undecided call may die here
        if full or pairtable.needs_rehash(pending, counts):
            st[ST_POS] = pos
            st[ST_REG_POS] = rp
            return False
        k_seq = seq[pos]
        while rp < len(rseq) and rseq[rp] < k_seq:
            _apply_register(st, pending, counts, heap, events, rkind[rp], rval[rp])
            rp += 1
        k_pc = pc[pos]
        k_thumb = np.int64(thumb[pos])
        _start_instruction(st, k_seq, time[pos], k_pc, src[pos])
        st[ST_LR_AGE] += 1
        if st[ST_HAVE_PREV] and ((k_pc ^ st[ST_EXPECTED]) & ~np.int64(1)) != 0:
            found = pairtable.find(pending, st[ST_SP], k_pc | k_thumb)
            if found >= 0:
                slot = pending[found, 2]
                pairtable.remove(pending, counts, found)
                row = st[ST_PAIRS]
                pairs[row, P_SLOT] = slot
                pairs[row, P_END_IDX] = st[ST_N]
                _copy_site(pairs, row, P_EXIT, st, ST_PREV)
                _site(pairs, row, P_RESUME, k_seq, time[pos], k_pc, src[pos])
                st[ST_PAIRS] = row + 1
                _log(st, events, EV_END, row)
            elif st[ST_LR_KNOWN] and st[ST_LR_AGE] < _LR_WINDOW:
                lr = st[ST_LR]
                if abs(lr - st[ST_EXPECTED_LR]) < _LR_DISTANCE:
                    slot = st[ST_SLOTS]  # replaces an older potential call with the same sp and lr
                    slots[slot, S_ENTRY_IDX] = st[ST_N]
                    _copy_site(slots, slot, S_CALL, st, ST_PREV)
                    _site(slots, slot, S_ENTRY, k_seq, time[pos], k_pc, src[pos])
                    st[ST_SLOTS] = slot + 1
                    replaced = pairtable.find(pending, st[ST_SP], lr)
                    if replaced >= 0:
                        _log(st, events, EV_DEATH, pending[replaced, 2])
                    _log(st, events, EV_OPEN, slot)
                    pairtable.put(pending, counts, st[ST_SP], lr, slot)
                    st[ST_HEAP] = _heap_push(heap, st[ST_HEAP], st[ST_SP] ^ _SIGN, lr, slot)
        expected = (k_pc | k_thumb) + np.int64(size[pos])
        st[ST_EXPECTED_LR] = expected | k_thumb
        _end_instruction(st, k_seq, time[pos], k_pc, src[pos], expected)
        pos += 1
    while rp < len(rseq):  # writes of the chunk's last instruction, seen before the next one
        _apply_register(st, pending, counts, heap, events, rkind[rp], rval[rp])
        rp += 1
    st[ST_POS] = 0
    st[ST_REG_POS] = 0
    return True


@numba.njit(cache=True, nogil=True)
def _close_frames(
    st, stack, level: int, pairs, events, end_idx: int, resume_seq, resume_time, resume_pc, resume_src
):
    """Close the open frames from the top of the stack down to `level` (inclusive)."""
    depth = st[ST_DEPTH]
    row = st[ST_PAIRS]
    for d in range(depth - 1, level - 1, -1):
        pairs[row, P_SLOT] = stack[d, 0]
        pairs[row, P_END_IDX] = end_idx
        _copy_site(pairs, row, P_EXIT, st, ST_PREV)
        _site(pairs, row, P_RESUME, resume_seq, resume_time, resume_pc, resume_src)
        _log(st, events, EV_END, row)
        row += 1
    st[ST_PAIRS] = row
    st[ST_DEPTH] = level


@numba.njit(cache=True, nogil=True)
def detect_by_isa(pc, size, seq, time, src, codes, executed, st, stack, slots, pairs, events):
    """The ISA-semantics rule over one chunk of one core; False when an array must grow first."""
    n = len(pc)
    pos = st[ST_POS]
    while pos < n:
        depth = st[ST_DEPTH]
        full = st[ST_SLOTS] >= len(slots) or depth >= len(stack) or st[ST_PAIRS] + depth >= len(pairs)
        if full or st[ST_EVENTS] + depth + 2 >= len(events):
            st[ST_POS] = pos
            return False
        k_seq = seq[pos]
        k_pc = pc[pos]
        _start_instruction(st, k_seq, time[pos], k_pc, src[pos])
        transfer = st[ST_HAVE_PREV] and ((k_pc ^ st[ST_EXPECTED]) & ~np.int64(1)) != 0
        if st[ST_CALL_COUNTDOWN] > 0:
            st[ST_CALL_COUNTDOWN] -= 1
            if st[ST_CALL_COUNTDOWN] == 0 and transfer:
                slot = st[ST_SLOTS]
                slots[slot, S_ENTRY_IDX] = st[ST_N]
                _copy_site(slots, slot, S_CALL, st, ST_CALL_SITE)
                _site(slots, slot, S_ENTRY, k_seq, time[pos], k_pc, src[pos])
                st[ST_SLOTS] = slot + 1
                _log(st, events, EV_OPEN, slot)
                stack[depth, 0] = slot
                stack[depth, 1] = st[ST_CALL_RETURN]
                st[ST_DEPTH] = depth + 1
                transfer = False
        if st[ST_RETURN_COUNTDOWN] > 0:
            st[ST_RETURN_COUNTDOWN] -= 1
            if st[ST_RETURN_COUNTDOWN] == 0 and transfer:
                target = k_pc & ~np.int64(1)
                for level in range(st[ST_DEPTH] - 1, -1, -1):
                    if (stack[level, 1] & ~np.int64(1)) == target:
                        _close_frames(
                            st, stack, level, pairs, events, st[ST_N], k_seq, time[pos], k_pc, src[pos]
                        )
                        break
        code = codes[pos]
        if executed[pos]:
            delay = 2 if code & F_DELAY else 1
            if code & F_CALL:
                st[ST_CALL_COUNTDOWN] = delay
                st[ST_CALL_RETURN] = k_pc + np.int64(size[pos]) * delay
                _keep_site(st, ST_CALL_SITE, k_seq, time[pos], k_pc, src[pos])
            elif code & F_RETURN:
                st[ST_RETURN_COUNTDOWN] = delay
        _end_instruction(st, k_seq, time[pos], k_pc, src[pos], k_pc + np.int64(size[pos]))
        pos += 1
    st[ST_POS] = 0
    return True


@dataclass
class CoreCalls:
    """What detection found on one core: the trace's first and last instruction, and each call."""

    cpu: int
    method: Method
    count: int  # instructions
    has_time: bool
    first: np.ndarray  # site of the first instruction
    last: np.ndarray  # site of the last instruction
    slots: np.ndarray  # (n, SLOT_WIDTH): calls (and potential calls) with their call and entry sites
    pairs: np.ndarray  # (m, PAIR_WIDTH): the calls' ends: slot, end index, exit and resume sites


@dataclass(frozen=True, slots=True)
class RegistersBefore:
    """A core's last lr and sp writes before a window; lr_age counts the instructions since."""

    lr: int | None
    lr_age: int
    sp: int | None


def registers_before(trace: Trace, seq: int) -> dict[int, RegistersBefore]:
    """Each core's lr and sp as the trace left them before instruction `seq`."""
    names = trace.sql("SELECT DISTINCT reg FROM registers").column("reg").to_pylist()
    kinds = {n: register_code(n) for n in names if n is not None and register_code(n) != _OTHER}
    if not kinds:
        return {}
    quoted = ", ".join("'" + n.replace("'", "''") + "'" for n in kinds)
    rows = trace.sql(
        "SELECT cpu, reg, max(seq) AS seq, arg_max(value, seq) AS value FROM registers "
        f"WHERE seq < {int(seq)} AND reg IN ({quoted}) AND value IS NOT NULL GROUP BY cpu, reg"
    ).to_pylist()
    latest: dict[tuple[int, int], dict] = {}
    for row in rows:
        key = (row["cpu"], kinds[row["reg"]])
        if key not in latest or row["seq"] > latest[key]["seq"]:
            latest[key] = row
    result = {}
    for cpu in {cpu for cpu, _ in latest}:
        lr, sp = latest.get((cpu, _LR)), latest.get((cpu, _SP))
        age = 0
        if lr is not None:
            between = f"cpu = {cpu} AND seq > {lr['seq']} AND seq < {int(seq)}"
            age = (
                trace.sql(f"SELECT count(*) AS n FROM instructions WHERE {between}").column("n")[0].as_py()
                + 1
            )
        result[cpu] = RegistersBefore(
            None if lr is None else _signed(lr["value"]), age, None if sp is None else _signed(sp["value"])
        )
    return result


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


class CoreDetector:
    """The state of one core's detection, carried from chunk to chunk."""

    def __init__(self, cpu: int, method: Method) -> None:
        self.cpu = cpu
        self.method = method
        self.state = np.zeros(STATE_WIDTH, np.int64)
        self.state[ST_SP] = -1  # unknown sp: one value for all, as if sp were never written
        self.slots = np.zeros((_INITIAL_ROWS, SLOT_WIDTH), np.int64)
        self.pairs = np.zeros((_INITIAL_ROWS, PAIR_WIDTH), np.int64)
        self.heap = np.zeros((_INITIAL_ROWS, 3), np.int64)
        self.stack = np.zeros((256, 2), np.int64)
        self.events = np.zeros((_INITIAL_ROWS, EVENT_WIDTH), np.int64)
        self.pending, self.pending_counts = pairtable.new_table()
        self.has_time = True

    def prime(self, before: RegistersBefore) -> None:
        """Start from the lr and sp the core had before a window (and how long ago lr was written)."""
        if before.lr is not None:
            self.state[ST_LR] = before.lr
            self.state[ST_LR_KNOWN] = 1
            self.state[ST_LR_AGE] = min(before.lr_age, _LR_WINDOW)
        if before.sp is not None:
            self.state[ST_SP] = before.sp

    def feed(self, chunk: Instructions, codes: np.ndarray | None, registers: tuple[np.ndarray, ...]) -> None:
        self.has_time &= chunk.has_time
        st = self.state
        pc = chunk.pc.view(np.int64)
        thumb = (chunk.isa == Isa.T32).astype(np.int8)
        while True:
            if self.method is Method.REGISTERS:
                rseq, rkind, rval = registers
                done = detect_by_registers(
                    pc, chunk.size, thumb, chunk.seq, chunk.time, chunk.src, rseq, rkind, rval,
                    st, self.pending, self.pending_counts, self.heap, self.slots, self.pairs, self.events,
                )  # fmt: skip
            else:
                done = detect_by_isa(
                    pc, chunk.size, chunk.seq, chunk.time, chunk.src, codes, chunk.executed,
                    st, self.stack, self.slots, self.pairs, self.events,
                )  # fmt: skip
            if done:
                return
            self.slots = grown(self.slots, st[ST_SLOTS])
            self.pairs = grown(self.pairs, st[ST_PAIRS] + st[ST_DEPTH])
            self.events = grown(self.events, st[ST_EVENTS] + self.pending_counts[0] + st[ST_DEPTH] + 2)
            st[ST_HEAP] = _compact_heap(self.heap, st[ST_HEAP], self.pending)
            if pairtable.needs_rehash(self.pending, self.pending_counts):
                self.pending, self.pending_counts = pairtable.rehashed(self.pending, self.pending_counts)
            self.heap = grown(self.heap, 2 * st[ST_HEAP])
            self.stack = grown(self.stack, st[ST_DEPTH])

    def close(self) -> None:
        """End the trace: under ISA semantics, the frames still open were calls."""
        st = self.state
        if self.method is Method.ISA and st[ST_DEPTH]:
            self.pairs = grown(self.pairs, st[ST_PAIRS] + st[ST_DEPTH])
            self.events = grown(self.events, st[ST_EVENTS] + st[ST_DEPTH])
            _close_frames(st, self.stack, 0, self.pairs, self.events, st[ST_N], -1, NO_TIME, -1, -1)

    def undecided(self) -> np.ndarray:
        """The slots still open: potential calls not yet returned or dead, or open ISA frames."""
        if self.method is Method.REGISTERS:
            return np.sort(self.pending[self.pending[:, 2] >= 0, 2])
        return self.stack[: self.state[ST_DEPTH], 0].copy()

    def recycle(self, also: np.ndarray) -> np.ndarray:
        """Forget the decided slots and every pair, renumbering the undecided slots and `also`
        0, 1, ... in order; returns their old numbers."""
        st = self.state
        st[ST_HEAP] = _compact_heap(self.heap, st[ST_HEAP], self.pending)
        kept = np.union1d(self.undecided(), also)
        renumber = np.full(max(int(st[ST_SLOTS]), 1), -1, np.int64)
        renumber[kept] = np.arange(len(kept))
        self.slots[: len(kept)] = self.slots[kept]
        live = self.pending[:, 2] >= 0
        self.pending[live, 2] = renumber[self.pending[live, 2]]
        self.heap[: st[ST_HEAP], 2] = renumber[self.heap[: st[ST_HEAP], 2]]
        self.stack[: st[ST_DEPTH], 0] = renumber[self.stack[: st[ST_DEPTH], 0]]
        st[ST_SLOTS] = len(kept)
        st[ST_PAIRS] = 0
        return kept

    def finish(self) -> CoreCalls:
        self.close()
        st = self.state
        return CoreCalls(
            cpu=self.cpu,
            method=self.method,
            count=int(st[ST_N]),
            has_time=self.has_time,
            first=st[ST_FIRST : ST_FIRST + 4].copy(),
            last=st[ST_PREV : ST_PREV + 4].copy(),
            # views, not copies: the rows past them were never written, so take no memory
            slots=self.slots[: st[ST_SLOTS]],
            pairs=self.pairs[: st[ST_PAIRS]],
        )


def _register_rows(table: pa.Table | None, cpu: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(seq, lr-or-sp kind, value) of one core's lr and sp writes."""
    if table is None or not table.num_rows:
        empty = np.zeros(0, np.int64)
        return empty, np.zeros(0, np.int8), empty
    cpus = table.column("cpu").to_numpy()
    kinds = np.concatenate(
        [dictionary_codes(chunk, register_code, _OTHER) for chunk in table.column("reg").chunks]
    )
    values = table.column("value")
    keep = (cpus == cpu) & (kinds != _OTHER) & values.is_valid().to_numpy(zero_copy_only=False)
    rows = np.flatnonzero(keep)
    seq = table.column("seq").to_numpy()[rows]
    value = values.fill_null(0).to_numpy().astype(np.uint64)[rows].view(np.int64)
    return seq, kinds[rows].astype(np.int8), value


def _register_kinds(trace: Trace, window: Window) -> dict[int, set[int]]:
    """Per core, which of lr and sp (`_LR`, `_SP`) the trace records writes of in the window."""
    names = trace.sql("SELECT DISTINCT reg FROM registers").column("reg").to_pylist()
    kinds = {n: register_code(n) for n in names if n is not None}
    wanted = [n for n, kind in kinds.items() if kind != _OTHER]
    if not wanted:
        return {}
    quoted = ", ".join("'" + n.replace("'", "''") + "'" for n in wanted)
    rows = trace.sql(
        f"SELECT DISTINCT cpu, reg FROM registers WHERE reg IN ({quoted}) AND {window.sql()}"
    ).to_pylist()
    seen: dict[int, set[int]] = {}
    for row in rows:
        seen.setdefault(row["cpu"], set()).add(kinds[row["reg"]])
    return seen


def cores_with_registers(trace: Trace, window: Window = WHOLE_TRACE) -> set[int]:
    """The cores whose trace records both lr and sp writes in the window: the register rule applies.

    With lr but no sp (gem5 prints no sp writes), returns at the same lr from different
    depths of recursion cannot be told apart, so those cores use ISA semantics.
    """
    return {cpu for cpu, found in _register_kinds(trace, window).items() if found == {_LR, _SP}}


def _warn_without_registers(trace: Trace, window: Window, cpus: Iterable[int] | None) -> None:
    """The register rule asked for on cores whose trace lacks lr or sp writes: say that its
    call tree is wrong there, since nothing else will."""
    found = _register_kinds(trace, window)
    wanted = set(trace.manifest.get("cpus") or found) if cpus is None else set(cpus)
    for cpu in sorted(wanted):
        missing = [name for kind, name in ((_LR, "lr"), (_SP, "sp")) if kind not in found.get(cpu, set())]
        if missing:
            caution.warn(
                f"cpu{cpu}: the trace records no {' or '.join(missing)} writes, so the register rule "
                "cannot tell calls and returns apart and its call tree is wrong; use --method isa "
                "(or auto), with --image when the trace has no opcodes"
            )


class CallDetector:
    """Call detection fed chunk by chunk, so other passes can share the reading of the trace.

    `by_registers` names the cores that use the register rule under Method.AUTO
    (`for_trace` finds them); the other cores use ISA semantics. `follow`, when given, is
    called after each chunk of a core with its detector and the chunk: it reads the decision
    log and recycles the decided rows (see callsums.py); without it every row is kept.
    """

    def __init__(
        self,
        method: Method = Method.AUTO,
        image: Image | None = None,
        cpus: Iterable[int] | None = None,
        by_registers: Iterable[int] = (),
        follow: Callable[[CoreDetector, Instructions], None] | None = None,
    ) -> None:
        self.follow = follow
        self.method = Method(method)
        self.wanted = None if cpus is None else set(cpus)
        self.by_registers = set(by_registers)
        self.fact_codes = FactCodes(image)
        self.detectors: dict[int, CoreDetector] = {}
        self.before: dict[int, RegistersBefore] = {}

    @classmethod
    def for_trace(
        cls,
        trace: Trace,
        window: Window = WHOLE_TRACE,
        method: Method = Method.AUTO,
        image: Image | None = None,
        cpus: Iterable[int] | None = None,
        follow: Callable[[CoreDetector, Instructions], None] | None = None,
    ) -> CallDetector:
        caution.check_image(trace, image)
        if Method(method) is Method.REGISTERS:
            _warn_without_registers(trace, window, cpus)
        registers = cores_with_registers(trace, window) if Method(method) is Method.AUTO else ()
        detector = cls(method, image, cpus, registers, follow)
        if window.start is not None and detector.needs_registers:
            detector.before = registers_before(trace, window.start)
        return detector

    @property
    def needs_registers(self) -> bool:
        return self.method is Method.REGISTERS or bool(self.by_registers)

    def feed(self, step: Step) -> None:
        for cpu, chunk in step.chunks.items():
            if self.wanted is not None and cpu not in self.wanted:
                continue
            detector = self.detectors.get(cpu)
            if detector is None:
                chosen = self.method
                if chosen is Method.AUTO:
                    chosen = Method.REGISTERS if cpu in self.by_registers else Method.ISA
                detector = self.detectors[cpu] = CoreDetector(cpu, chosen)
                if cpu in self.before:
                    detector.prime(self.before[cpu])
            codes = None
            if detector.method is Method.ISA:
                codes = self.fact_codes.codes(chunk.opcode, chunk.has_opcode, chunk.size, chunk.isa, chunk.pc)
            detector.feed(chunk, codes, _register_rows(step.registers, cpu))
            if self.follow is None:
                detector.state[ST_EVENTS] = 0  # nobody reads the log
            else:
                self.follow(detector, chunk)

    def finish(self) -> list[CoreCalls]:
        return [self.detectors[cpu].finish() for cpu in sorted(self.detectors)]


def detect_calls(
    trace: Trace,
    window: Window = WHOLE_TRACE,
    method: Method = Method.AUTO,
    image: Image | None = None,
    cpus: Iterable[int] | None = None,
) -> list[CoreCalls]:
    """Detect calls on every core (or those in `cpus`) of the trace within the window."""
    detector = CallDetector.for_trace(trace, window, method, image, cpus)
    for step in read_steps(trace, window, registers=detector.needs_registers):
        detector.feed(step)
    return detector.finish()
