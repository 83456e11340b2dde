"""Comparing two traces of the same program, e.g. an RTL simulation against a model.

Each core's instruction streams are aligned by pc: equal pcs pair up; at a mismatch, the
nearest pair of positions (fewest instructions skipped on both sides, within `window`)
from which `sync` pcs agree is where the streams resynchronise, and what was skipped is an
unaligned run (instructions only one trace has). Paired instructions are then compared on
opcode, executed flag, time (unless ignored), the register values they write and the
memory bytes they write (core accesses; LD/ST lines and MW records compare equal when
the bytes are the same). Each instruction's writes are reduced to one hash (`writehash`),
so the comparison is vectorised; details are read back only for the divergences shown.

Memory is bounded: each core is one pass over both traces, read `CHUNK_ROWS` instructions
at a time. The alignment keeps what lies past its last pair and reads more of a side only
when a decision needs it (a search for resynchronisation looks `window + sync` instructions
ahead), so every decision, and so the result, is the one the whole streams give.

Records a producer prints before a core's first instruction (an initial register dump)
describe the state before the trace, not that instruction, and are not compared.
"""

from __future__ import annotations

import fnmatch
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

import numba
import numpy as np
import pyarrow as pa

from ..store.batches import read_batches
from ..store.columns import ColumnChunk, numpy_of
from ..store.trace import Trace
from .writehash import WriteHasher

KINDS = ("unaligned", "opcode", "executed", "time", "registers", "memory")
CHUNK_ROWS = 1 << 17
"""Instructions read from a trace at a time, with their records: some tens of MB per trace."""
_FIELD_KINDS = KINDS[1:]


@dataclass(frozen=True, slots=True)
class DiffOptions:
    ignore_registers: tuple[str, ...] = ()  # glob patterns of canonical names (cpsr, x*, ...)
    ignore_time: bool = False
    window: int = 4096  # instructions looked ahead on each side to resynchronise
    sync: int = 4  # pcs that must agree after a resynchronisation


@dataclass(frozen=True, slots=True)
class Divergence:
    """Paired instructions that differ, or a run of instructions only one trace has."""

    cpu: int
    kinds: tuple[str, ...]
    a_seq: int | None  # first instruction of A involved (None: none, the run is B's only)
    b_seq: int | None
    a_count: int = 1  # instructions of A involved (unaligned runs: the run's length)
    b_count: int = 1
    position: int = 0  # where in A it is: A's seq, or for a run only B has, A's next seq


@dataclass
class DiffResult:
    cpus: list[int]
    a_instructions: int = 0
    b_instructions: int = 0
    paired: int = 0
    counts: Counter = field(default_factory=Counter)  # divergences per kind
    only_a: int = 0  # instructions in unaligned runs
    only_b: int = 0
    divergences: list[Divergence] = field(default_factory=list)  # in A's order, up to the limit
    total: int = 0  # divergences found (the list may hold fewer)

    @property
    def same(self) -> bool:
        return self.total == 0


@numba.njit(cache=True, nogil=True)
def _align_from(
    a: np.ndarray, b: np.ndarray, i: int, j: int, window: int, sync: int, a_final: bool, b_final: bool
) -> tuple[np.ndarray, np.ndarray, int, int, bool]:
    """The pairs `align` makes from positions (i, j) on, as far as the keys at hand decide them.

    A side that is not final goes on past its last key, so the walk stops where a search for
    resynchronisation would look beyond it: each decision is the one the whole sequences
    give. Returns the pairs, where the walk stopped, and whether no pair can follow (else
    a non-final side must be extended first).
    """
    na, nb = len(a), len(b)
    reach = window + sync  # keys past a mismatch that a search may read on each side
    out_a = np.empty(max(0, min(na - i, nb - j)), np.int64)
    out_b = np.empty(len(out_a), np.int64)
    n = 0
    while i < na and j < nb:
        if a[i] == b[j]:
            out_a[n] = i
            out_b[n] = j
            n += 1
            i += 1
            j += 1
            continue
        if (not a_final and i + reach > na) or (not b_final and j + reach > nb):
            return out_a[:n], out_b[:n], i, j, False
        found = False
        best_i = best_j = 0
        ahead_a, ahead_b = min(window, na - 1 - i), min(window, nb - 1 - j)  # keys there are to pair
        for distance in range(1, ahead_a + ahead_b + 1):
            for di in range(max(0, distance - ahead_b), min(distance, ahead_a) + 1):
                dj = distance - di
                ii, jj = i + di, j + dj
                if a[ii] != b[jj]:
                    continue
                need = min(sync, na - ii, nb - jj)
                k = 1
                while k < need and a[ii + k] == b[jj + k]:
                    k += 1
                if k == need:
                    found = True
                    best_i, best_j = ii, jj
                    break
            if found:
                break
        if not found:
            return out_a[:n], out_b[:n], i, j, True
        i, j = best_i, best_j
    return out_a[:n], out_b[:n], i, j, (i >= na and a_final) or (j >= nb and b_final)


def align(a: np.ndarray, b: np.ndarray, window: int, sync: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices (into a, into b) of the paired elements of two key sequences.

    Equal keys pair up; at a mismatch, the nearest pair of positions (fewest keys skipped on
    both sides, each at most `window`) from which `sync` keys agree is where pairing resumes.
    When there is none, nothing further pairs.
    """
    pairs_a, pairs_b, _, _, _ = _align_from(a, b, 0, 0, window, sync, True, True)
    return pairs_a, pairs_b


@dataclass(slots=True)
class _Chunk(ColumnChunk):
    """Instructions of one core of one trace, with a hash of what each one writes."""

    ROWS: ClassVar[tuple[str, ...]] = ("seq", "pc", "opcode", "executed", "time", "registers", "memory")

    seq: np.ndarray
    pc: np.ndarray
    opcode: np.ndarray  # int64, -1 where unknown
    executed: np.ndarray
    time: np.ndarray  # int64, -1 where none
    registers: np.ndarray  # uint64 hash of the register writes
    memory: np.ndarray  # uint64 hash of the memory bytes written

    @classmethod
    def empty(cls) -> _Chunk:
        types = (np.int64, np.uint64, np.int64, bool, np.int64, np.uint64, np.uint64)
        return cls(*(np.zeros(0, dtype) for dtype in types))


_FILLS = {"cpu": 0, "pc": 0, "opcode": -1, "executed": True, "time": -1, "src": 0}
_TYPES = {
    "cpu": np.uint16,
    "pc": np.uint64,
    "opcode": np.int64,
    "executed": bool,
    "time": np.int64,
    "src": np.int64,
}


def _column(batch: pa.RecordBatch, name: str) -> np.ndarray:
    column = batch.column(name)
    if name == "opcode":
        column = column.cast(pa.int64())
    return numpy_of(column, _TYPES[name], _FILLS[name])


def _core_chunks(trace: Trace, cpu: int, options: DiffOptions, rows: int) -> Iterator[_Chunk]:
    """One core's instructions in seq order, `rows` instructions of the trace at a time."""
    hasher = WriteHasher(trace, options.ignore_registers, rows)
    for batch in read_batches(trace, "instructions", tuple(_FILLS), rows=rows):
        last_seq = int(batch.column("seq")[-1].as_py())
        mine = _column(batch, "cpu") == cpu
        if not mine.all():
            batch = batch.filter(pa.array(mine))
        seq = batch.column("seq").to_numpy()
        if len(seq) and not hasher.first:
            hasher.first[cpu] = (int(seq[0]), int(_column(batch, "src")[0]))
        registers, memory = hasher.hashes(seq, last_seq)
        if len(seq):
            yield _Chunk(
                seq,
                *(_column(batch, name) for name in ("pc", "opcode", "executed", "time")),
                registers,
                memory,
            )


class _Side:
    """One core's instructions of one trace, read as the alignment needs them.

    Rows are numbered from the core's first instruction; `rows` holds [base, end), and
    rows before `base` are dropped once nothing refers to them any more.
    """

    def __init__(self, chunks: Iterator[_Chunk]) -> None:
        self._chunks = chunks
        self.rows = _Chunk.empty()
        self.base = 0
        self.final = False  # every row has been read
        self.last_seq = -1  # the seq of the last row read

    @property
    def end(self) -> int:
        return self.base + len(self.rows)

    def read(self) -> None:
        """The next chunk, appended to `rows` (or `final` set)."""
        chunk = next(self._chunks, None)
        if chunk is None:
            self.final = True
            return
        self.rows = self.rows.then(chunk)
        self.last_seq = int(chunk.seq[-1])

    def drop(self, before: int) -> None:
        self.rows = self.rows.take(slice(before - self.base, None))
        self.base = before

    def seq(self, row: int) -> int:
        return int(self.rows.seq[row - self.base])

    def rest(self, start: int) -> tuple[int | None, int]:
        """The seq of row `start` (None: there is none) and the number of rows, reading to the end."""
        self.drop(start)
        first = None
        while True:
            if first is None and len(self.rows):
                first = int(self.rows.seq[0])
            self.drop(self.end)
            if self.final:
                return first, self.end
            self.read()


def _cpus(trace: Trace) -> set[int]:
    cpus = trace.sql("SELECT DISTINCT coalesce(cpu, 0) AS cpu FROM instructions").column("cpu")
    return set(cpus.to_pylist())


class AlignmentFollower(Protocol):
    """Sees the whole alignment as the comparison makes it (the browser keeps it): per batch
    of a core, the seqs of the pairs (A's and B's, in order) and every divergence among
    them, in A's order."""

    def follow(
        self, cpu: int, a_seqs: np.ndarray, b_seqs: np.ndarray, divergences: list[Divergence]
    ) -> None: ...


def diff_traces(
    a: Trace,
    b: Trace,
    options: DiffOptions = DiffOptions(),
    limit: int = 100,
    rows: int = CHUNK_ROWS,
    follower: AlignmentFollower | None = None,
) -> DiffResult:
    """Align and compare every core the two traces have; keep the first `limit` divergences
    (a `follower` sees them all, with the pairs).

    Each core is one pass over both traces, `rows` instructions at a time, so memory stays
    bounded however long the traces are and however their cores interleave.
    """
    cpus_a, cpus_b = _cpus(a), _cpus(b)
    result = DiffResult(cpus=sorted(cpus_a | cpus_b))
    found: list[Divergence] = []
    for cpu in result.cpus:
        side_a, side_b = (
            _Side(_core_chunks(trace, cpu, options, rows) if cpu in cpus else iter(()))
            for trace, cpus in ((a, cpus_a), (b, cpus_b))
        )
        found.extend(_compare(cpu, side_a, side_b, options, result, limit, follower))
    found.sort(key=lambda d: (d.position, d.cpu))
    result.divergences = found[:limit]
    return result


def _compare(
    cpu: int,
    a: _Side,
    b: _Side,
    options: DiffOptions,
    result: DiffResult,
    limit: int,
    follower: AlignmentFollower | None = None,
) -> list[Divergence]:
    """Divergences of one core (the first `limit` in A's order), counting all of them.

    The walk aligns what has been read, drops what lies before the last pair, and reads
    more of a side when the alignment needs it: a side holds at most a chunk beyond
    `window + sync` instructions past the last pair.
    """
    found: list[Divergence] = []
    reach = options.window + options.sync
    i = j = 0  # where the alignment goes on
    last_a = last_b = -1  # the last pair
    while True:
        pairs_a, pairs_b, i, j, finished = _align_from(
            a.rows.pc, b.rows.pc, i - a.base, j - b.base, options.window, options.sync, a.final, b.final
        )
        pairs_a += a.base
        pairs_b += b.base
        i += a.base
        j += b.base
        if len(pairs_a):
            room = limit - len(found)
            listed = room if follower is None else len(pairs_a)  # a divergence at most per pair
            runs = _runs(cpu, a, b, (last_a, last_b), pairs_a, pairs_b, result, listed)
            paired = _paired(cpu, a, b, pairs_a, pairs_b, options, result, listed)
            divergences = sorted(runs + paired, key=lambda d: d.position)
            if follower is not None:
                follower.follow(cpu, a.rows.seq[pairs_a - a.base], b.rows.seq[pairs_b - b.base], divergences)
            found.extend(divergences[:room])
            last_a, last_b = int(pairs_a[-1]), int(pairs_b[-1])
        if finished:
            break
        a.drop(last_a + 1)
        b.drop(last_b + 1)
        (a if not a.final and i + reach > a.end else b).read()
    a_seq, na = a.rest(last_a + 1)
    b_seq, nb = b.rest(last_b + 1)
    result.a_instructions += na
    result.b_instructions += nb
    if na - last_a > 1 or nb - last_b > 1:  # instructions after the last pair
        result.counts["unaligned"] += 1
        result.total += 1
        result.only_a += na - last_a - 1
        result.only_b += nb - last_b - 1
        end = a.last_seq + 1 if na else 0
        position = a_seq if a_seq is not None else end
        tail = Divergence(cpu, ("unaligned",), a_seq, b_seq, na - last_a - 1, nb - last_b - 1, position)
        if len(found) < limit:
            found.append(tail)
        if follower is not None:
            follower.follow(cpu, np.zeros(0, np.int64), np.zeros(0, np.int64), [tail])
    return found


def _runs(
    cpu: int, a: _Side, b: _Side, last: tuple[int, int], pairs_a: np.ndarray, pairs_b: np.ndarray,
    result: DiffResult, room: int,
) -> list[Divergence]:  # fmt: skip
    """Unaligned runs before each pair (since `last`, the pair before): counted, the first `room` listed."""
    prev_a, prev_b = np.r_[last[0], pairs_a[:-1]], np.r_[last[1], pairs_b[:-1]]
    next_a, next_b = pairs_a, pairs_b
    gaps = np.flatnonzero((next_a - prev_a > 1) | (next_b - prev_b > 1))
    a_lo, a_hi, b_lo, b_hi = prev_a[gaps] + 1, next_a[gaps], prev_b[gaps] + 1, next_b[gaps]
    result.only_a += int(np.sum(a_hi - a_lo))
    result.only_b += int(np.sum(b_hi - b_lo))
    result.counts["unaligned"] += len(gaps)
    result.total += len(gaps)
    runs = []
    for lo, hi, blo, bhi in zip(
        a_lo[:room].tolist(), a_hi.tolist(), b_lo.tolist(), b_hi.tolist(), strict=False
    ):
        a_seq = a.seq(lo) if lo < hi else None
        b_seq = b.seq(blo) if blo < bhi else None
        runs.append(Divergence(cpu, ("unaligned",), a_seq, b_seq, hi - lo, bhi - blo, a.seq(lo)))
    return runs


def _paired(
    cpu: int, a: _Side, b: _Side, pairs_a: np.ndarray, pairs_b: np.ndarray, options: DiffOptions,
    result: DiffResult, room: int,
) -> list[Divergence]:  # fmt: skip
    """Paired instructions that differ: counted per kind, and the first `room` of them listed."""
    x, y = pairs_a - a.base, pairs_b - b.base
    result.paired += len(x)

    def differs(name: str) -> np.ndarray:
        return getattr(a.rows, name)[x] != getattr(b.rows, name)[y]

    masks = {
        "opcode": differs("opcode"),
        "executed": differs("executed"),
        "time": np.zeros(len(x), bool) if options.ignore_time else differs("time"),
        "registers": differs("registers"),
        "memory": differs("memory"),
    }
    any_kind = np.zeros(len(x), bool)
    for kind, mask in masks.items():
        result.counts[kind] += int(np.count_nonzero(mask))
        any_kind |= mask
    rows = np.flatnonzero(any_kind)
    result.total += len(rows)
    listed = rows[:room]
    found = []
    for row, i, j in zip(listed.tolist(), pairs_a[listed].tolist(), pairs_b[listed].tolist(), strict=True):
        kinds = tuple(kind for kind in _FIELD_KINDS if masks[kind][row])
        found.append(Divergence(cpu, kinds, a.seq(i), b.seq(j), position=a.seq(i)))
    return found


def instruction_rows(trace: Trace, cpu: int, seqs: list[int]) -> list[dict[str, Any]]:
    """Instructions with these seqs, each with the register and memory values it writes.

    As in the comparison, records printed before the core's first instruction are left out.
    """
    if not seqs:
        return []
    listed = ", ".join(str(int(s)) for s in seqs)
    where = f"seq IN ({listed}) AND cpu = {int(cpu)}"
    columns = "seq, time, pc, opcode, size, executed, disasm, src"
    rows = trace.sql(f"SELECT {columns} FROM instructions WHERE {where} ORDER BY seq").to_pylist()
    first = trace.sql(f"SELECT min(seq) AS s FROM instructions WHERE cpu = {int(cpu)}").column("s")[0].as_py()
    regs = trace.sql(
        f"SELECT seq, src, reg::VARCHAR AS reg, value, wide FROM registers WHERE {where} ORDER BY seq, src"
    ).to_pylist()
    mem = trace.sql(
        f"SELECT seq, src, addr, size, value, wide FROM memory WHERE {where} "
        "AND op::VARCHAR IN ('W', 'U') AND source::VARCHAR = 'core' ORDER BY seq, src"
    ).to_pylist()
    by_seq = {row["seq"]: {**row, "registers": {}, "writes": []} for row in rows}

    def belongs(record: dict[str, Any]) -> bool:
        owner = by_seq.get(record["seq"])
        return owner is not None and not (record["seq"] == first and record["src"] < owner["src"])

    for r in filter(belongs, regs):
        value = r["value"] if r["wide"] is None else int.from_bytes(r["wide"], "little")
        by_seq[r["seq"]]["registers"][r["reg"]] = value
    for m in filter(belongs, mem):
        data = m["wide"] if m["wide"] is not None else (m["value"] or 0).to_bytes(m["size"], "little")
        by_seq[m["seq"]]["writes"].append((m["addr"], data))
    return [by_seq[s] for s in sorted(by_seq)]


def neighbours(trace: Trace, cpu: int, seq: int | None, before: int, after: int) -> list[int]:
    """The seqs of up to `before` instructions of `cpu` before `seq` and `after` from it on."""
    if seq is None:
        return []
    query = "SELECT seq FROM instructions WHERE cpu = {cpu} AND seq {op} {seq} ORDER BY seq {order} LIMIT {n}"
    earlier = trace.sql(query.format(cpu=int(cpu), op="<", seq=int(seq), order="DESC", n=int(before)))
    later = trace.sql(query.format(cpu=int(cpu), op=">=", seq=int(seq), order="", n=int(after)))
    return sorted(earlier.column("seq").to_pylist()) + later.column("seq").to_pylist()


def hex_value(value: int | None) -> str:
    """A value as the explanations show it: hex, `?` when unknown."""
    return "?" if value is None else f"0x{value:x}"


def explain(a: dict[str, Any], b: dict[str, Any], options: DiffOptions) -> list[str]:
    """What differs between two paired instructions (`instruction_rows` rows), one line each."""
    lines = []
    if a["opcode"] != b["opcode"]:
        lines.append(f"opcode: A {hex_value(a['opcode'])}  B {hex_value(b['opcode'])}")
    if a["executed"] != b["executed"]:
        lines.append(f"executed: A {a['executed']}  B {b['executed']}")
    if a["time"] != b["time"] and not options.ignore_time:
        lines.append(f"time: A {a['time']}  B {b['time']}")
    for name in sorted(set(a["registers"]) | set(b["registers"])):
        if any(fnmatch.fnmatch(name, p.lower()) for p in options.ignore_registers):
            continue
        va, vb = a["registers"].get(name, "none"), b["registers"].get(name, "none")
        if va != vb:
            shown = [v if isinstance(v, str) else hex_value(v) for v in (va, vb)]
            lines.append(f"register {name}: A {shown[0]}  B {shown[1]}")
    if sorted(a["writes"]) != sorted(b["writes"]):
        for side, row in (("A", a), ("B", b)):
            writes = ", ".join(f"0x{addr:x}={data[::-1].hex()}" for addr, data in row["writes"]) or "none"
            lines.append(f"memory writes {side}: {writes}")
    return lines
