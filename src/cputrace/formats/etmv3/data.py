"""ETMv3 data packets as `memory` rows, each given the seq of the load or store it belongs to.

A data packet belongs to the most recently traced data instruction: the last executed
load/store walked before it (instructions may run before a transfer completes, so it need
not be the last instruction). Consecutive packets of one instruction are its transfers in
order. Only the first traced transfer of a load/store-multiple carries the data address
(later ones carry it only when not sequential), so transfer k without an address is at the
last given address + 4 per transfer since. A partially traced LSM starts at whichever
transfer the filter first matched, with its address. A swap (SWP, SWPB) reads, then writes;
when a filter traced only one of its transfers, the transfers are counted back from the last,
as the architecture says for partly traced LSMs: a single packet is the write. Values:
- normal data: the value when ETMCR traces values (leading zero bytes are not sent);
- value not traced: a row with value null;
- out-of-order placeholder: a row whose value is the one of the next out-of-order data
  packet with its tag (1-3), whenever that comes. The rows from the first placeholder still
  waiting onward are held back (memory rows stay in seq order) until its value arrives or
  can no longer arrive: its tag is reused by a new placeholder, a fence (trace gap,
  overflow, trace-on I-sync) passes, `max_wait` rows follow it (memory stays bounded when
  a value is lost without any of these), or the stream ends. Then its value stays null,
  and a value that comes after that is unexpected data.
The ETM sends a packet per 32-bit word (a 64-bit transfer, as VLDR of a D register, is two):
the row's `size` is the instruction's access size, at most 4; `addr` is null when no address
is traced; `time` is the instruction's.

Exclusive loads and stores (LDREX, STREX and their B/H/D and acquire/release forms) get
`attrs` `X`. A store-failed packet follows the data packet of a STREX that did not store: that
row keeps its address, gets `attrs` `X FAILED` and value null (the packet's value is a dummy 0). A
data-suppressed packet (the ETM's FIFO was filling up) means data packets were dropped until
the next one: a `trace_gap` event named `data_suppressed`, and the load/store in progress
takes no more transfers (which of its transfers were traced cannot be known).

A data-only trace (ETMCR bit 20) traces no instructions: every transfer is a row of the
next instruction's seq (there is none), with `op` and `size` null (packets do not say), and
a transfer without an address 4 bytes on from the one before.

A data packet with no load/store to belong to (before the first instruction, after a trace
gap until the next trace-on I-sync, or past the instruction's transfers), and an
out-of-order value without a placeholder waiting for its tag, are `trace_gap` events named
`unexpected_data`: the transfer is lost, never guessed.

Matching needs the instruction rows up to a packet's position; the walker holds its last
row back until the next batch, so packets wait (`pending`) until those rows have been seen.
"""

from __future__ import annotations

from collections.abc import Iterator

import numba
import numpy as np
import pyarrow as pa

from ...coresight.packet_ops import PacketOps
from ...flow.batches import EXECUTED
from ...flow.ops import NO_TIME
from ...flow.program import Program
from ...model import SCHEMAS, Isa
from ..base import Batch
from .config import EtmConfig
from .packets import Packets
from .protocol import Kind

_DATA_KINDS = (
    Kind.NORMAL_DATA, Kind.VALUE_NOT_TRACED, Kind.OOO_PLACEHOLDER, Kind.OOO_DATA, Kind.STORE_FAILED,
    Kind.DATA_SUPPRESSED,
)  # fmt: skip
_UNEXPECTED_TEXT = "data packet with no load/store to belong to: its transfer is lost"
_OPS = pa.array(["R", "W"])
_SUPPRESSED_TEXT = "data trace suppressed (FIFO filling): transfers lost until the next data packet"

# Matcher state carried between batches (int64): the owning instruction's seq, its transfers
# so far, and the last traced address with the transfer it was given for.
S_OWNER, S_COUNT, S_ANCHOR, S_ANCHOR_K = range(4)
NO_ANCHOR = -1


class DataMatcher:
    """One source's data packets, matched to the load/store instructions its walk yields."""

    def __init__(self, program: Program, config: EtmConfig, cpu: int, first_seq: int = 0) -> None:
        self.program, self.cpu = program, cpu
        self.first_seq = first_seq  # the source's first instruction (or the next, when it has none)
        self.values = config.data_value
        self.data_only = config.data_only
        self.facts: dict[int, tuple[int, int, int, int]] = {}  # key -> _facts
        self.ls_seq = np.zeros(0, np.int64)  # executed loads/stores seen, in seq order
        self.ls_facts = np.zeros((0, _FACTS), np.int64)
        self.ls_time = np.zeros(0, np.int64)  # their times, NO_TIME when the trace has none
        self.seen_end = 0  # every instruction below this seq has been seen
        self.pending = np.zeros(0, _PENDING)
        self.floor = -1  # packets still to come lie after the instruction of this seq
        self.fence = -1  # seq of the last instruction before the latest trace gap or trace-on
        self.epoch = 0  # fences so far: an out-of-order value only fills a placeholder of its epoch
        self.state = np.array([-1, 0, NO_ANCHOR, 0], np.int64)
        self.held = np.zeros(0, _HELD)  # matched rows not yet emitted: a placeholder waits for its value
        self.waiting = np.full((4, 2), -1, np.int64)  # by tag: the held row waiting for a value, its epoch
        self.max_wait = _MAX_WAIT

    def carried(self, next_seq: int) -> dict[str, np.ndarray]:
        """What the packets and rows still to come take from those so far (see `Walker.carried`),
        with seqs relative to `next_seq` and epochs to the current one: the load/stores that
        may still own packets, the packets and rows held back, the placeholders waiting (none:
        (-1, 0)), the matcher's state and its marks (seen_end, floor, fence)."""
        pending = self.pending.copy()
        pending["at"] -= next_seq
        pending["fence"] -= next_seq
        pending["epoch"] -= self.epoch
        held = self.held.copy()
        held["seq"] -= next_seq
        waiting = np.where(self.waiting[:, :1] >= 0, self.waiting - [0, self.epoch], [-1, 0])
        state = self.state.copy()
        state[S_OWNER] -= next_seq
        marks = np.array([self.seen_end, self.floor, self.fence], np.int64) - next_seq
        return {
            "ls_seq": self.ls_seq - next_seq, "ls_facts": self.ls_facts, "ls_time": self.ls_time,
            "pending": pending, "held": held, "waiting": waiting, "state": state, "marks": marks,
        }  # fmt: skip

    def resume(self, carried: dict[str, np.ndarray], next_seq: int) -> None:
        """Go on from a matcher's `carried` state, numbering from `next_seq`."""
        self.ls_seq = carried["ls_seq"] + next_seq
        self.ls_facts, self.ls_time = carried["ls_facts"].copy(), carried["ls_time"].copy()
        self.pending = carried["pending"].copy()
        self.pending["at"] += next_seq
        self.pending["fence"] += next_seq
        self.held = carried["held"].copy()
        self.held["seq"] += next_seq
        self.epoch = 0
        self.waiting = carried["waiting"].copy()
        self.state = carried["state"].copy()
        self.state[S_OWNER] += next_seq
        self.seen_end, self.floor, self.fence = (int(mark) + next_seq for mark in carried["marks"])

    def see(self, rows: np.ndarray) -> None:
        """Note the executed loads and stores among the walk's rows (ROW records)."""
        if not len(rows):
            return
        seq = rows["seq"]
        self.seen_end = int(seq[-1]) + 1
        executed = rows["executed"] == EXECUTED
        insns, idx = self.program.insns, rows["idx"]
        keys = (insns["pc"][idx].astype(np.int64) << 3) | insns["isa"][idx]
        unique, inverse = np.unique(keys, return_inverse=True)  # a few hundred addresses per batch
        facts = np.array([self._facts(k) for k in unique.tolist()], np.int64).reshape(-1, _FACTS)[inverse]
        keep = executed & (facts[:, 0] != 0)
        time = rows["time"]
        self.ls_seq = np.concatenate([self.ls_seq, seq[keep]])
        self.ls_facts = np.concatenate([self.ls_facts, facts[keep]])
        self.ls_time = np.concatenate([self.ls_time, time[keep]])

    def _facts(self, key: int) -> tuple[int, int, int, int]:
        """(ops: 1 load, 2 store, 3 swap; data packets; row size; exclusive) of an instruction."""
        found = self.facts.get(key)
        if found is None:
            info = self.program.blocks.insn_at(key >> 3, Isa(key & 7))
            ops = (1 if info.is_load else 0) | (2 if info.is_store else 0)
            words = max(-(-info.access_size // 4), 1)  # a packet per 32-bit word of each transfer
            exclusive = info.mnemonic.startswith(_EXCLUSIVE)
            size = min(info.access_size, 4) or 4
            found = self.facts[key] = (ops, max(info.transfers, 1) * words, size, exclusive)
        return found

    def add(self, packets: Packets, built: PacketOps, op_end: np.ndarray, first_seq: int) -> None:
        """Queue a batch's data packets with the seq of the last instruction before each."""
        t = packets.table
        if not len(t):
            return
        made = built.before
        at = np.where(made > 0, op_end[np.maximum(made - 1, 0)] - 1 if len(op_end) else 0, first_seq - 1)
        self.floor = int(at[-1])
        kind = t["kind"]
        barrier = (kind == Kind.ERROR) | (kind == Kind.UNSYNCED) | ((kind == Kind.I_SYNC) & (t["info"] != 0))
        fences = np.maximum(np.maximum.accumulate(np.where(barrier, at, -1)), self.fence)
        self.fence = int(fences[-1])
        epochs = self.epoch + np.cumsum(barrier)
        self.epoch = int(epochs[-1])
        rows = np.flatnonzero(np.isin(kind, _DATA_KINDS))
        queued = np.zeros(len(rows), _PENDING)
        queued["at"], queued["fence"], queued["epoch"] = at[rows], fences[rows], epochs[rows]
        for name in ("kind", "bits", "address", "value", "info", "offset"):
            queued[name] = t[name][rows]
        self.pending = np.concatenate([self.pending, queued])

    def rows(self, final: bool = False) -> Iterator[Batch]:
        """Memory rows (and unexpected-data events) of the packets whose instructions are known,
        up to the first placeholder still waiting for its value (all of them when `final`)."""
        ready = len(self.pending) if final else int(np.searchsorted(self.pending["at"], self.seen_end))
        batch: Batch = {}
        if ready:
            p, self.pending = self.pending[:ready], self.pending[ready:]
            batch["events"] = self._matched(p)
        if final:
            self.waiting[:, 0] = -1
        else:  # packets still to come are of this epoch or later: earlier placeholders wait in vain
            upcoming = int(self.pending["epoch"][0]) if len(self.pending) else self.epoch
            self.waiting[self.waiting[:, 1] != upcoming, 0] = -1
        waiting = self.waiting[:, 0]
        cut = int(waiting[waiting >= 0].min(initial=self._settle_swaps(final)))
        if ready or cut:
            released, self.held = self.held[:cut], self.held[cut:]
            waiting[waiting >= 0] -= cut
            yield {"memory": self._memory(released), **batch}
        lowest = min(self.floor, int(self.pending["at"][0])) if len(self.pending) else self.floor
        cut = max(int(np.searchsorted(self.ls_seq, lowest, side="right")) - 1, 0)
        # none later can own a packet
        self.ls_seq, self.ls_facts, self.ls_time = self.ls_seq[cut:], self.ls_facts[cut:], self.ls_time[cut:]

    def _settle_swaps(self, final: bool) -> int:
        """Give each swap's transfers their direction, working back from the last: it is the
        write and one before it the read (a filter that traced only the write sent one packet).
        Returns the held row from which a swap still waits for its write (len(held): none):
        while the matcher has not moved on to another load/store, a second packet may come."""
        ops = self.held["op"]
        unsettled = np.flatnonzero(ops == _SWAP)
        if not len(unsettled):
            return len(self.held)
        seq = self.held["seq"][unsettled]
        waits_from = len(self.held)
        owner, taken = self.state[S_OWNER], self.state[S_COUNT]
        j = int(np.searchsorted(self.ls_seq, owner))
        transfers = self.ls_facts[j, 1] if j < len(self.ls_seq) and self.ls_seq[j] == owner else 0
        if not final and seq[-1] == owner and taken < transfers:  # the swap in progress: one packet so far
            mine = seq == owner
            waits_from = int(unsettled[mine][0])
            unsettled, seq = unsettled[~mine], seq[~mine]
        last = np.append(seq[1:] != seq[:-1], True)
        ops[unsettled] = np.where(last, _WRITE, _READ)
        return waits_from

    def _matched(self, p: np.ndarray) -> pa.Table:
        """Match packets to their instructions, holding their rows; returns the gap events."""
        n = len(p)
        seq, address, has_address, op, size, exclusive, status = (np.zeros(n, np.int64) for _ in range(7))
        if self.data_only:
            _sequential(p["kind"], p["bits"], p["address"].astype(np.int64), self.state, address, has_address,
                        status)  # fmt: skip
            seq[:] = np.maximum(p["at"] + 1, self.first_seq)
        else:
            _match(p["kind"], p["at"], p["fence"], p["bits"], p["address"].astype(np.int64), self.ls_seq,
                   self.ls_facts, self.state, seq, address, has_address, op, size, exclusive,
                   status)  # fmt: skip
        failed = _failed_stores(p["kind"], status)
        r = np.flatnonzero(status == _ROW)
        rows = np.zeros(len(r), _HELD)
        rows["seq"], rows["op"], rows["size"], rows["offset"] = seq[r], op[r], size[r], p["offset"][r]
        rows["address"], rows["has_address"], rows["failed"] = address[r], has_address[r], failed[r]
        rows["exclusive"] = exclusive[r]
        rows["value"] = p["value"][r]
        rows["known"] = (p["kind"][r] == Kind.NORMAL_DATA) & self.values & ~failed[r]
        rows["time"] = NO_TIME if self.data_only else self.ls_time[np.searchsorted(self.ls_seq, seq[r])]
        first = len(self.held)
        self.held = np.concatenate([self.held, rows])
        _fill_out_of_order(p["kind"], p["info"], p["epoch"], p["value"], status, first, self.held["value"],
                           self.held["known"], self.waiting, self.max_wait)  # fmt: skip
        gaps = (status == _UNEXPECTED) | (status == _SUPPRESSED)
        return self._gaps(p[gaps], status[gaps] == _SUPPRESSED)

    def _memory(self, rows: np.ndarray) -> pa.Table:
        n = len(rows)
        unknown = np.full(n, self.data_only)
        time, failed = rows["time"], rows["failed"]
        columns = [
            pa.array(rows["seq"]), pa.array(time, mask=time == NO_TIME),
            pa.array(np.full(n, self.cpu, np.uint16)),
            pa.DictionaryArray.from_arrays(pa.array(rows["op"].astype(np.int32), mask=unknown), _OPS),
            pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int32)), pa.array(["core"])),
            pa.array(rows["size"], mask=unknown),
            pa.array(rows["address"], mask=~rows["has_address"]), pa.nulls(n, pa.uint64()),
            pa.array(rows["value"], mask=~rows["known"]), pa.nulls(n, pa.binary()),
            pa.array(np.select([failed, rows["exclusive"]], ["X FAILED", "X"], None), pa.string()),
            pa.array(rows["offset"]),
        ]  # fmt: skip
        return pa.Table.from_arrays(columns, schema=SCHEMAS["memory"])

    def _gaps(self, p: np.ndarray, suppressed: np.ndarray) -> pa.Table:
        """`trace_gap` events: data packets that belong to nothing, and data suppression."""
        n = len(p)
        return pa.Table.from_arrays(
            [
                pa.array(np.maximum(p["at"], self.first_seq)), pa.nulls(n, pa.int64()),
                pa.array(np.full(n, self.cpu, np.uint16)),
                pa.array(["trace_gap"] * n, pa.string()).dictionary_encode(), pa.nulls(n, pa.int64()),
                pa.array(np.where(suppressed, "data_suppressed", "unexpected_data"), pa.string()),
                pa.nulls(n, pa.uint64()), pa.nulls(n, pa.uint64()),
                pa.array(np.where(suppressed, _SUPPRESSED_TEXT, _UNEXPECTED_TEXT), pa.string()),
                pa.array(p["offset"].astype(np.int64)),
            ],
            schema=SCHEMAS["events"],
        )  # fmt: skip


_PENDING = np.dtype([("at", "<i8"), ("fence", "<i8"), ("epoch", "<i8"), ("offset", "<i8"), ("value", "<u8"),
                     ("address", "<u4"), ("kind", "u1"), ("bits", "u1"), ("info", "u1")])  # fmt: skip
_HELD = np.dtype([("seq", "<i8"), ("time", "<i8"), ("offset", "<i8"), ("value", "<u8"), ("address", "<u8"),
                  ("op", "u1"), ("size", "u1"), ("has_address", "?"), ("known", "?"), ("failed", "?"),
                  ("exclusive", "?")])  # fmt: skip
_MAX_WAIT = 1 << 16  # rows a placeholder holds back before its value is given up (bounds memory)
_ROW, _UNEXPECTED, _FILLER, _SUPPRESSED = 0, 1, 2, 3
_READ, _WRITE, _SWAP = 0, 1, 2  # a row's op; _SWAP: a swap's transfer, a read or the write (_settle_swaps)
_FACTS = 4  # columns of DataMatcher._facts
_EXCLUSIVE = ("ldrex", "strex", "ldaex", "stlex")  # mnemonics of the exclusive loads and stores
_K_OOO, _K_FAILED, _K_SUPPRESSED = int(Kind.OOO_DATA), int(Kind.STORE_FAILED), int(Kind.DATA_SUPPRESSED)
_K_PLACEHOLDER = int(Kind.OOO_PLACEHOLDER)
_NO_MORE = 1 << 62  # a transfer count no load/store reaches: its transfers are over


@numba.njit(cache=True, nogil=True)
def _match(kind, at, fence, bits, address, ls_seq, ls_facts, state, owner, out_address, has_address, op, size,
           exclusive, status):  # fmt: skip
    """Give each packet its owner seq, transfer address, op (_READ, _WRITE or _SWAP), size and
    whether it is exclusive, or a status."""
    for i in range(len(kind)):
        if kind[i] == _K_OOO or kind[i] == _K_FAILED:
            status[i] = _FILLER
            continue
        j = np.searchsorted(ls_seq, at[i], side="right") - 1
        if kind[i] == _K_SUPPRESSED:  # the load/store in progress takes no more transfers
            status[i] = _SUPPRESSED
            if j >= 0:
                state[S_OWNER], state[S_COUNT] = ls_seq[j], _NO_MORE
            continue
        if j < 0 or ls_seq[j] <= fence[i]:
            status[i] = _UNEXPECTED
            continue
        if ls_seq[j] != state[S_OWNER]:
            state[S_OWNER], state[S_COUNT], state[S_ANCHOR_K] = ls_seq[j], 0, 0
            state[S_ANCHOR] = NO_ANCHOR
        k = state[S_COUNT]
        if k >= ls_facts[j, 1]:
            status[i] = _UNEXPECTED
            continue
        state[S_COUNT] = k + 1
        if bits[i] > 0:
            state[S_ANCHOR], state[S_ANCHOR_K] = address[i], k
        if state[S_ANCHOR] != NO_ANCHOR:
            out_address[i] = (state[S_ANCHOR] + 4 * (k - state[S_ANCHOR_K])) & 0xFFFFFFFF
            has_address[i] = 1
        ops = ls_facts[j, 0]
        op[i] = _SWAP if ops == 3 else (_WRITE if ops == 2 else _READ)
        owner[i] = ls_seq[j]
        size[i] = ls_facts[j, 2]
        exclusive[i] = ls_facts[j, 3]
        status[i] = _ROW


@numba.njit(cache=True, nogil=True)
def _sequential(kind, bits, address, state, out_address, has_address, status):  # fmt: skip
    """Data-only trace: every transfer is a row; one without an address follows the last, 4 bytes on."""
    for i in range(len(kind)):
        if kind[i] == _K_OOO or kind[i] == _K_FAILED:
            status[i] = _FILLER
            continue
        if kind[i] == _K_SUPPRESSED:  # transfers were lost: the next address is not known
            status[i] = _SUPPRESSED
            state[S_ANCHOR] = NO_ANCHOR
            continue
        if bits[i] > 0:
            state[S_ANCHOR] = address[i]
        elif state[S_ANCHOR] != NO_ANCHOR:
            state[S_ANCHOR] = (state[S_ANCHOR] + 4) & 0xFFFFFFFF
        if state[S_ANCHOR] != NO_ANCHOR:
            out_address[i] = state[S_ANCHOR]
            has_address[i] = 1
        status[i] = _ROW


def _failed_stores(kind: np.ndarray, status: np.ndarray) -> np.ndarray:
    """Rows of the transfers a store-failed packet names: the data packet just before it."""
    failed = np.zeros(len(kind), bool)
    marks = np.flatnonzero(kind == Kind.STORE_FAILED)
    marks = marks[marks > 0]
    named = marks - 1
    failed[named[status[named] == _ROW]] = True
    return failed


@numba.njit(cache=True, nogil=True)
def _fill_out_of_order(kind, tag, epoch, value, status, row, held_value, held_known, waiting,
                       max_wait):  # fmt: skip
    """Each out-of-order value into the placeholder row waiting for its tag, or _UNEXPECTED.

    `row` is the held row of the first packet with status _ROW; `waiting` holds by tag the
    held row of the placeholder waiting (-1: none) and its epoch. A placeholder stops
    waiting when a new one takes its tag, at a later epoch, or `max_wait` rows on."""
    for i in range(len(kind)):
        for t in range(4):
            if waiting[t, 0] >= 0 and (epoch[i] != waiting[t, 1] or row - waiting[t, 0] > max_wait):
                waiting[t, 0] = -1
        t = tag[i] & 3
        if status[i] == _ROW:
            if kind[i] == _K_PLACEHOLDER:
                waiting[t, 0], waiting[t, 1] = row, epoch[i]
            row += 1
        elif kind[i] == _K_OOO:
            if waiting[t, 0] < 0:
                status[i] = _UNEXPECTED
            else:
                held_value[waiting[t, 0]], held_known[waiting[t, 0]] = value[i], True
                waiting[t, 0] = -1
