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

Each chunk of a core gives a `CallLog` (log.py) of what was decided, which the detector's
followers read. Before the next chunk the detector frees the rows of everything decided,
so memory follows the undecided potential calls, not the calls. `detect` is the one loop
that reads a window and feeds the detector and its followers.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

import numba
import numpy as np
import pyarrow as pa

from ...image import Image
from ...isa.factcodes import FactCodes
from ...isa.index import as_int64
from ...isa.insn import F_CALL, F_DELAY, F_RETURN
from ...kernels import pairtable
from ...kernels.growth import grown
from ...model import Isa
from ...store.chunks import NO_TIME, Instructions, Step, read_steps
from ...store.columns import dictionary_codes
from ...store.trace import Trace
from ...store.window import WHOLE_TRACE, Window
from .. import caution
from .log import CALL, DIED, END, ENDED, EVENT, OPENED, SITE, CallLog, Method

LR_NAMES = ("x30", "r14")
SP_NAMES = ("sp", "wsp", "r13")
_LR, _SP, _OTHER = 0, 1, 2

STATE = np.dtype(
    [
        ("n", "<i8"),  # instructions seen
        ("pos", "<i8"),  # where a pass stopped in its chunk to let arrays grow (instruction row)
        ("reg_pos", "<i8"),  # and register write row
        ("have_prev", "<i8"),
        ("prev", SITE),  # the previous instruction
        ("expected", "<i8"),  # the address after it: anything else is a transfer
        ("expected_lr", "<i8"),  # the lr a call by it would set
        ("lr_known", "<i8"),
        ("lr", "<i8"),
        ("lr_age", "<i8"),  # instructions since lr was written
        ("sp", "<i8"),
        ("calls", "<i8"),  # rows used: calls, ends, heap, open ISA frames, events
        ("ends", "<i8"),
        ("heap", "<i8"),
        ("depth", "<i8"),
        ("events", "<i8"),
        ("call_countdown", "<i8"),  # ISA: instructions until a call's transfer (2 with a delay slot)
        ("call_return", "<i8"),  # and where it returns to
        ("call_site", SITE),
        ("return_countdown", "<i8"),
        ("first", SITE),  # the core's first instruction
    ]
)
"""One core's detection state between chunks."""

HEAP_ENTRY = np.dtype([("key", "<i8"), ("lr", "<i8"), ("call", "<i8")])
"""A potential call by its sp (`key`: unsigned order as signed), smallest first: the ones sp rises above."""

FRAME = np.dtype([("call", "<i8"), ("returns_to", "<i8")])
"""An open ISA frame: its CALL row and return address."""

_SIGN = np.int64(-(1 << 63))
_LR_WINDOW = 8  # lr written by the transfer or the 6 instructions before it
_LR_DISTANCE = 64
_INITIAL_ROWS = 1 << 14


class Chunk(NamedTuple):
    """One chunk of a core's instructions as a compiled pass reads them."""

    pc: np.ndarray  # int64
    size: np.ndarray
    thumb: np.ndarray  # int8, register rule only (else empty)
    seq: np.ndarray
    time: np.ndarray
    src: np.ndarray
    codes: np.ndarray  # facts codes, ISA rule only (else empty)
    executed: np.ndarray


class Writes(NamedTuple):
    """A core's lr and sp writes in a chunk: seq, `_LR` or `_SP`, value."""

    seq: np.ndarray
    kind: np.ndarray
    value: np.ndarray


class Rows(NamedTuple):
    """The detector's growable rows, as a compiled pass sees them."""

    calls: np.ndarray  # CALL
    ends: np.ndarray  # END
    events: np.ndarray  # EVENT
    heap: np.ndarray  # HEAP_ENTRY (register rule)
    stack: np.ndarray  # FRAME (ISA rule)
    pending: np.ndarray  # pairtable: (sp, lr) -> CALL row of an undecided potential call
    pending_counts: np.ndarray


def register_code(name: str) -> int:
    """Whether a canonical register name is the link register, the stack pointer, or neither."""
    base = name.partition("_")[0]
    if base in LR_NAMES:
        return _LR
    if base in SP_NAMES:
        return _SP
    return _OTHER


@numba.njit(cache=True, nogil=True)
def _set_site(site, seq, time, pc, src) -> None:
    site.seq = seq
    site.time = time
    site.pc = pc
    site.src = src


@numba.njit(cache=True, nogil=True)
def _swap(heap, i, j) -> None:
    """Exchange two heap entries (records are references: field by field)."""
    key, lr, call = heap[i].key, heap[i].lr, heap[i].call
    heap[i].key, heap[i].lr, heap[i].call = heap[j].key, heap[j].lr, heap[j].call
    heap[j].key, heap[j].lr, heap[j].call = key, lr, call


@numba.njit(cache=True, nogil=True)
def _heap_push(heap, size: int, key: int, lr: int, call: int) -> int:
    i = size
    heap[i].key = key
    heap[i].lr = lr
    heap[i].call = call
    while i > 0:
        parent = (i - 1) // 2
        if heap[parent].key <= heap[i].key:
            break
        _swap(heap, parent, i)
        i = parent
    return size + 1


@numba.njit(cache=True, nogil=True)
def _heap_pop(heap, size: int) -> int:
    size -= 1
    _swap(heap, 0, size)
    i = 0
    while True:
        left = 2 * i + 1
        smallest = i
        if left < size and heap[left].key < heap[smallest].key:
            smallest = left
        if left + 1 < size and heap[left + 1].key < heap[smallest].key:
            smallest = left + 1
        if smallest == i:
            return size
        _swap(heap, smallest, i)
        i = smallest


@numba.njit(cache=True, nogil=True)
def _compact_heap(heap, size: int, pending: np.ndarray) -> int:
    """Drop the heap entries of potential calls that already returned; returns the new size."""
    kept = 0
    for i in range(size):
        entry = heap[i]
        row = pairtable.find(pending, entry.key ^ _SIGN, entry.lr)
        if row >= 0 and pending[row, 2] == entry.call:
            kept = _heap_push(heap, kept, entry.key, entry.lr, entry.call)
    return kept


@numba.njit(cache=True, nogil=True)
def _log(st, events, kind: int, ref: int) -> None:
    event = events[st.events]
    event.kind = kind
    event.ref = ref
    event.index = st.n
    st.events += 1


@numba.njit(cache=True, nogil=True)
def _apply_register(st, rows, kind: int, value: int) -> None:
    if kind == _LR:
        st.lr = value
        st.lr_known = 1
        st.lr_age = 0
        return
    st.sp = value
    key = value ^ _SIGN  # unsigned order as signed
    heap, pending = rows.heap, rows.pending
    size = st.heap
    while size > 0 and heap[0].key < key:  # sp rose above these potential calls: they are dead
        row = pairtable.find(pending, heap[0].key ^ _SIGN, heap[0].lr)
        if row >= 0 and pending[row, 2] == heap[0].call:
            _log(st, rows.events, DIED, heap[0].call)
            pairtable.remove(pending, rows.pending_counts, row)
        size = _heap_pop(heap, size)
    st.heap = size


@numba.njit(cache=True, nogil=True)
def _start_instruction(st, chunk, pos) -> None:
    if st.n == 0:
        _set_site(st.first, chunk.seq[pos], chunk.time[pos], chunk.pc[pos], chunk.src[pos])


@numba.njit(cache=True, nogil=True)
def _end_instruction(st, chunk, pos, expected) -> None:
    _set_site(st.prev, chunk.seq[pos], chunk.time[pos], chunk.pc[pos], chunk.src[pos])
    st.have_prev = 1
    st.expected = expected
    st.n += 1


@numba.njit(cache=True, nogil=True)
def _open(st, rows, call_site, chunk, pos) -> int:
    """A new CALL row entered at instruction `pos` of the chunk from `call_site`, logged OPENED."""
    row = st.calls
    call = rows.calls[row]
    call.entry_index = st.n
    call.call = call_site
    _set_site(call.entry, chunk.seq[pos], chunk.time[pos], chunk.pc[pos], chunk.src[pos])
    st.calls = row + 1
    return row


@numba.njit(cache=True, nogil=True)
def _end(st, rows, call, end_index, resume_seq, resume_time, resume_pc, resume_src) -> None:
    """An END row for CALL row `call`, exiting at the previous instruction; logged ENDED."""
    row = st.ends
    end = rows.ends[row]
    end.call = call
    end.end_index = end_index
    end.exit = st.prev
    _set_site(end.resume, resume_seq, resume_time, resume_pc, resume_src)
    st.ends = row + 1
    _log(st, rows.events, ENDED, row)


@numba.njit(cache=True, nogil=True)
def detect_by_registers(chunk, writes, state, rows):
    """The lr/sp rule over one chunk of one core; False when an output array must grow first."""
    st = state[0]
    pending, counts = rows.pending, rows.pending_counts
    n = len(chunk.pc)
    pos = st.pos
    rp = st.reg_pos
    while pos < n:
        full = st.calls >= len(rows.calls) or st.ends >= len(rows.ends) or st.heap >= len(rows.heap)
        full |= st.events + counts[0] + 2 >= len(rows.events)  # every undecided call may die here
        if full or pairtable.needs_rehash(pending, counts):
            st.pos = pos
            st.reg_pos = rp
            return False
        k_seq = chunk.seq[pos]
        while rp < len(writes.seq) and writes.seq[rp] < k_seq:
            _apply_register(st, rows, writes.kind[rp], writes.value[rp])
            rp += 1
        k_pc = chunk.pc[pos]
        k_thumb = np.int64(chunk.thumb[pos])
        _start_instruction(st, chunk, pos)
        st.lr_age += 1
        if st.have_prev and ((k_pc ^ st.expected) & ~np.int64(1)) != 0:
            found = pairtable.find(pending, st.sp, k_pc | k_thumb)
            if found >= 0:
                call = pending[found, 2]
                pairtable.remove(pending, counts, found)
                _end(st, rows, call, st.n, k_seq, chunk.time[pos], k_pc, chunk.src[pos])
            elif st.lr_known and st.lr_age < _LR_WINDOW:
                lr = st.lr
                if abs(lr - st.expected_lr) < _LR_DISTANCE:
                    call = _open(st, rows, st.prev, chunk, pos)
                    replaced = pairtable.find(pending, st.sp, lr)  # an older one with the same sp and lr
                    if replaced >= 0:
                        _log(st, rows.events, DIED, pending[replaced, 2])
                    _log(st, rows.events, OPENED, call)
                    pairtable.put(pending, counts, st.sp, lr, call)
                    st.heap = _heap_push(rows.heap, st.heap, st.sp ^ _SIGN, lr, call)
        expected = (k_pc | k_thumb) + np.int64(chunk.size[pos])
        st.expected_lr = expected | k_thumb
        _end_instruction(st, chunk, pos, expected)
        pos += 1
    while rp < len(writes.seq):  # writes of the chunk's last instruction, seen before the next one
        _apply_register(st, rows, writes.kind[rp], writes.value[rp])
        rp += 1
    st.pos = 0
    st.reg_pos = 0
    return True


@numba.njit(cache=True, nogil=True)
def _close_frames(st, rows, level: int, resume_seq, resume_time, resume_pc, resume_src) -> None:
    """Close the open ISA frames from the top of the stack down to `level` (inclusive)."""
    for d in range(st.depth - 1, level - 1, -1):
        _end(st, rows, rows.stack[d].call, st.n, resume_seq, resume_time, resume_pc, resume_src)
    st.depth = level


@numba.njit(cache=True, nogil=True)
def detect_by_isa(chunk, state, rows):
    """The ISA-semantics rule over one chunk of one core; False when an array must grow first."""
    st = state[0]
    stack = rows.stack
    n = len(chunk.pc)
    pos = st.pos
    while pos < n:
        depth = st.depth
        full = st.calls >= len(rows.calls) or depth >= len(stack) or st.ends + depth >= len(rows.ends)
        if full or st.events + depth + 2 >= len(rows.events):
            st.pos = pos
            return False
        k_seq = chunk.seq[pos]
        k_pc = chunk.pc[pos]
        _start_instruction(st, chunk, pos)
        transfer = st.have_prev and ((k_pc ^ st.expected) & ~np.int64(1)) != 0
        if st.call_countdown > 0:
            st.call_countdown -= 1
            if st.call_countdown == 0 and transfer:
                call = _open(st, rows, st.call_site, chunk, pos)
                _log(st, rows.events, OPENED, call)
                stack[depth].call = call
                stack[depth].returns_to = st.call_return
                st.depth = depth + 1
                transfer = False
        if st.return_countdown > 0:
            st.return_countdown -= 1
            if st.return_countdown == 0 and transfer:
                target = k_pc & ~np.int64(1)
                for level in range(st.depth - 1, -1, -1):
                    if (stack[level].returns_to & ~np.int64(1)) == target:
                        _close_frames(st, rows, level, k_seq, chunk.time[pos], k_pc, chunk.src[pos])
                        break
        code = chunk.codes[pos]
        if chunk.executed[pos]:
            delay = 2 if code & F_DELAY else 1
            if code & F_CALL:
                st.call_countdown = delay
                st.call_return = k_pc + np.int64(chunk.size[pos]) * delay
                _set_site(st.call_site, k_seq, chunk.time[pos], k_pc, chunk.src[pos])
            elif code & F_RETURN:
                st.return_countdown = delay
        _end_instruction(st, chunk, pos, k_pc + np.int64(chunk.size[pos]))
        pos += 1
    st.pos = 0
    return True


@numba.njit(cache=True, nogil=True)
def _end_of_trace(state, rows, dying) -> None:
    """The trace ended: open ISA frames end there; undecided potential calls (`dying`) die."""
    st = state[0]
    _close_frames(st, rows, 0, -1, NO_TIME, -1, -1)
    for call in dying:
        _log(st, rows.events, DIED, call)


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
            None if lr is None else as_int64(lr["value"]), age, None if sp is None else as_int64(sp["value"])
        )
    return result


_EMPTY_INT8 = np.zeros(0, np.int8)
_EMPTY_CODES = np.zeros(0, np.uint8)
_NO_INSTRUCTIONS = np.zeros(0, np.int64)


class CoreDetector:
    """The detection of one core, carried from chunk to chunk; each feed gives a CallLog."""

    def __init__(self, cpu: int, method: Method) -> None:
        self.cpu = cpu
        self.method = method
        self._state = np.zeros(1, STATE)
        self._state[0]["sp"] = -1  # unknown sp: one value for all, as if sp were never written
        self._calls = np.zeros(_INITIAL_ROWS, CALL)
        self._ends = np.zeros(_INITIAL_ROWS, END)
        self._heap = np.zeros(_INITIAL_ROWS, HEAP_ENTRY)
        self._stack = np.zeros(256, FRAME)
        self._events = np.zeros(_INITIAL_ROWS, EVENT)
        self._pending, self._pending_counts = pairtable.new_table()
        self._carried = 0  # events past the last log (deaths after a chunk's last instruction)
        self._has_time = True

    @property
    def _st(self) -> np.void:
        return self._state[0]

    def prime(self, before: RegistersBefore) -> None:
        """Start from the lr and sp the core had before a window (and how long ago lr was written)."""
        st = self._st
        if before.lr is not None:
            st["lr"] = before.lr
            st["lr_known"] = 1
            st["lr_age"] = min(before.lr_age, _LR_WINDOW)
        if before.sp is not None:
            st["sp"] = before.sp

    def _rows(self) -> Rows:
        return Rows(self._calls, self._ends, self._events, self._heap, self._stack, self._pending,
                    self._pending_counts)  # fmt: skip

    def feed(self, chunk: Instructions, codes: np.ndarray | None, writes: Writes) -> CallLog:
        """Detect over the core's next chunk (`codes`: its facts codes, for the ISA rule)."""
        kept = self._recycle()
        start = int(self._st["n"])
        self._has_time &= chunk.has_time
        by_registers = self.method is Method.REGISTERS
        arrays = Chunk(
            chunk.pc.view(np.int64), chunk.size,
            (chunk.isa == Isa.T32).astype(np.int8) if by_registers else _EMPTY_INT8,
            chunk.seq, chunk.time, chunk.src, _EMPTY_CODES if codes is None else codes, chunk.executed,
        )  # fmt: skip
        while True:
            if by_registers:
                done = detect_by_registers(arrays, writes, self._state, self._rows())
            else:
                done = detect_by_isa(arrays, self._state, self._rows())
            if done:
                break
            self._make_room()
        return self._log(start, kept, arrays.pc, chunk.time)

    def _make_room(self) -> None:
        st = self._st
        self._calls = grown(self._calls, st["calls"])
        self._ends = grown(self._ends, st["ends"] + st["depth"])
        self._events = grown(self._events, st["events"] + self._pending_counts[0] + st["depth"] + 2)
        st["heap"] = _compact_heap(self._heap, st["heap"], self._pending)
        if pairtable.needs_rehash(self._pending, self._pending_counts):
            self._pending, self._pending_counts = pairtable.rehashed(self._pending, self._pending_counts)
        self._heap = grown(self._heap, 2 * st["heap"])
        self._stack = grown(self._stack, st["depth"])

    def finish(self) -> CallLog:
        """The trace ended: the open ISA frames end, the potential calls never returned die."""
        kept = self._recycle()
        st = self._st
        start = int(st["n"])
        dying = self._undecided()[::-1] if self.method is Method.REGISTERS else np.zeros(0, np.int64)
        self._ends = grown(self._ends, st["ends"] + st["depth"])
        self._events = grown(self._events, st["events"] + st["depth"] + len(dying))
        _end_of_trace(self._state, self._rows(), np.ascontiguousarray(dying))
        return self._log(start, kept, _NO_INSTRUCTIONS, _NO_INSTRUCTIONS, final=True)

    def _log(
        self, start: int, kept: np.ndarray, pc: np.ndarray, time: np.ndarray, final: bool = False
    ) -> CallLog:
        """The log of what was decided since the last; deaths after the chunk's last instruction
        wait for the next (a consumer charging instructions needs them after it)."""
        st = self._st
        count = int(st["n"])
        events = self._events[: st["events"]]
        decided = len(events) if final else int(np.searchsorted(events["index"], count))
        self._carried = len(events) - decided
        return CallLog(
            cpu=self.cpu, method=self.method, start=start, count=count, has_time=self._has_time,
            first=st["first"].copy(), last=st["prev"].copy(), kept=kept, calls=self._calls[: st["calls"]],
            ends=self._ends[: st["ends"]], events=events[:decided], pc=pc, time=time, final=final,
        )  # fmt: skip

    def _undecided(self) -> np.ndarray:
        """The CALL rows still open: potential calls not yet returned or dead, or open ISA frames."""
        if self.method is Method.REGISTERS:
            return np.sort(pairtable.live_rows(self._pending)[:, 2])
        return self._stack[: self._st["depth"]]["call"].copy()

    def _recycle(self) -> np.ndarray:
        """Free the rows of the decided calls and every END row, renumbering the CALL rows still
        needed (undecided, or named by a carried event) 0, 1, ... in order; returns their old
        numbers. Carried events move to the front of the log."""
        st = self._st
        carried = self._events[st["events"] - self._carried : st["events"]].copy()
        st["heap"] = _compact_heap(self._heap, st["heap"], self._pending)
        kept = np.union1d(self._undecided(), carried["ref"])
        renumber = np.full(max(int(st["calls"]), 1), -1, np.int64)
        renumber[kept] = np.arange(len(kept))
        self._calls[: len(kept)] = self._calls[kept]
        live = self._pending[:, 2] > pairtable.REMOVED
        self._pending[live, 2] = renumber[self._pending[live, 2]]
        heap = self._heap[: st["heap"]]
        heap["call"] = renumber[heap["call"]]
        stack = self._stack[: st["depth"]]
        stack["call"] = renumber[stack["call"]]
        carried["ref"] = renumber[carried["ref"]]
        self._events[: len(carried)] = carried
        st["events"] = len(carried)
        st["calls"] = len(kept)
        st["ends"] = 0
        return kept


def _register_rows(table: pa.Table | None, cpu: int) -> Writes:
    """One core's lr and sp writes."""
    if table is None or not table.num_rows:
        empty = np.zeros(0, np.int64)
        return Writes(empty, np.zeros(0, np.int8), empty)
    cpus = table.column("cpu").to_numpy()
    kinds = np.concatenate(
        [dictionary_codes(chunk, register_code, _OTHER) for chunk in table.column("reg").chunks]
    )
    values = table.column("value")
    keep = (cpus == cpu) & (kinds != _OTHER) & values.is_valid().to_numpy(zero_copy_only=False)
    rows = np.flatnonzero(keep)
    seq = table.column("seq").to_numpy()[rows]
    value = values.fill_null(0).to_numpy().astype(np.uint64)[rows].view(np.int64)
    return Writes(seq, kinds[rows].astype(np.int8), value)


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


class Follower(Protocol):
    """What reads detection's logs: each core's, chunk after chunk, the last one `final`."""

    def follow(self, log: CallLog) -> None: ...


class CallDetector:
    """Call detection fed step by step, each core's log handed to every follower.

    `by_registers` names the cores that use the register rule under Method.AUTO (`detect` finds
    them); the other cores use ISA semantics.
    """

    def __init__(
        self,
        followers: Sequence[Follower],
        method: Method = Method.AUTO,
        image: Image | None = None,
        cpus: Iterable[int] | None = None,
        by_registers: Iterable[int] = (),
    ) -> None:
        self.followers = followers
        self.method = Method(method)
        self.wanted = None if cpus is None else set(cpus)
        self.by_registers = set(by_registers)
        self.fact_codes = FactCodes(image)
        self.detectors: dict[int, CoreDetector] = {}
        self.before: dict[int, RegistersBefore] = {}

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
            self._hand_on(detector.feed(chunk, codes, _register_rows(step.registers, cpu)))

    def finish(self) -> None:
        """End of the trace: every core's final log, cores in order."""
        for cpu in sorted(self.detectors):
            self._hand_on(self.detectors[cpu].finish())

    def _hand_on(self, log: CallLog) -> None:
        for follower in self.followers:
            follower.follow(log)


def detect(
    trace: Trace,
    followers: Sequence[Follower],
    window: Window = WHOLE_TRACE,
    method: Method = Method.AUTO,
    image: Image | None = None,
    cpus: Iterable[int] | None = None,
) -> Iterator[Step]:
    """Detect the calls of every core (or those in `cpus`) in the window, handing each log to the
    followers; yields each step of the window once detection has seen it, so other passes can
    share the reading. The final logs follow the last step.

    Under Method.AUTO, the cores whose trace records lr and sp writes use the register rule.
    """
    caution.check_image(trace, image)
    if Method(method) is Method.REGISTERS:
        _warn_without_registers(trace, window, cpus)
    registers = cores_with_registers(trace, window) if Method(method) is Method.AUTO else ()
    detector = CallDetector(followers, method, image, cpus, registers)
    if window.start is not None and detector.needs_registers:
        detector.before = registers_before(trace, window.start)
    for step in read_steps(trace, window, registers=detector.needs_registers):
        detector.feed(step)
        yield step
    detector.finish()
