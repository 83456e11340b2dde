"""Comparing two traces of the same program, e.g. an RTL simulation against a model.

Each core's instruction streams are aligned by pc: equal pcs pair up; at a mismatch, the
nearest pair of positions (fewest instructions skipped on both sides, within `window`)
from which `sync` pcs agree is where the streams resynchronise, and what was skipped is an
unaligned run (instructions only one trace has). Paired instructions are then compared on
opcode, executed flag, time (unless ignored), the register values they write and the
memory bytes they write (core accesses; LD/ST lines and MW records compare equal when
the bytes are the same). Each instruction's writes are reduced to one hash (`writehash`),
so the comparison is vectorised; details are read back only for the divergences shown.

Records a producer prints before a core's first instruction (an initial register dump)
describe the state before the trace, not that instruction, and are not compared.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numba
import numpy as np
import pyarrow as pa

from ..trace import Trace
from .stream import read_batches
from .writehash import WriteHashes

KINDS = ("unaligned", "opcode", "executed", "time", "registers", "memory")
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
def align(a: np.ndarray, b: np.ndarray, window: int, sync: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices (into a, into b) of the paired elements of two key sequences."""
    na, nb = len(a), len(b)
    out_a = np.empty(min(na, nb), np.int64)
    out_b = np.empty(min(na, nb), np.int64)
    n = 0
    i = j = 0
    while i < na and j < nb:
        if a[i] == b[j]:
            out_a[n] = i
            out_b[n] = j
            n += 1
            i += 1
            j += 1
            continue
        found = False
        best_i = best_j = 0
        for distance in range(1, 2 * window + 1):
            for di in range(max(0, distance - window), min(distance, window) + 1):
                dj = distance - di
                ii, jj = i + di, j + dj
                if ii >= na or jj >= nb or a[ii] != b[jj]:
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
            break
        i, j = best_i, best_j
    return out_a[:n], out_b[:n]


@dataclass(slots=True)
class _Stream:
    """One core's instructions of one trace, with a hash of what each one writes."""

    seq: np.ndarray
    pc: np.ndarray
    opcode: np.ndarray  # int64, -1 where unknown
    executed: np.ndarray
    time: np.ndarray  # int64, -1 where none
    registers: np.ndarray  # uint64 hash of the register writes
    memory: np.ndarray  # uint64 hash of the memory bytes written

    def take(self, rows: np.ndarray) -> _Stream:
        return _Stream(*(getattr(self, name)[rows] for name in self.__slots__))


_FILLS = {"cpu": 0, "pc": 0, "opcode": -1, "executed": True, "time": -1, "src": 0}
_TYPES = {
    "cpu": np.uint16,
    "pc": np.uint64,
    "opcode": np.int64,
    "executed": bool,
    "time": np.int64,
    "src": np.int64,
}


def _streams(trace: Trace, options: DiffOptions) -> dict[int, _Stream]:
    """Each core's instructions, in seq order, with their write hashes."""
    count = int(trace.manifest["counts"]["instructions"])
    whole = {name: np.empty(count, dtype) for name, dtype in {"seq": np.int64, **_TYPES}.items()}
    at = 0
    for batch in read_batches(trace, "instructions", tuple(_FILLS)):
        n = batch.num_rows
        whole["seq"][at : at + n] = batch.column("seq").to_numpy()
        for name, fill in _FILLS.items():
            column = batch.column(name)
            if name == "opcode":
                column = column.cast(pa.int64())
            whole[name][at : at + n] = column.fill_null(fill).to_numpy(zero_copy_only=False)
        at += n
    whole = {name: array[:at] for name, array in whole.items()}
    cpus = whole["cpu"]
    first = {}
    for c in np.unique(cpus).tolist():
        index = int(np.argmax(cpus == c))
        first[c] = (int(whole["seq"][index]), int(whole["src"][index]))
    hashes = WriteHashes(trace, whole["seq"], first, options.ignore_registers)
    stream = _Stream(
        whole["seq"],
        whole["pc"],
        whole["opcode"],
        whole["executed"],
        whole["time"],
        hashes.registers,
        hashes.memory,
    )
    if len(first) == 1:
        return {next(iter(first)): stream}
    return {c: stream.take(np.flatnonzero(cpus == c)) for c in first}


def diff_traces(a: Trace, b: Trace, options: DiffOptions = DiffOptions(), limit: int = 100) -> DiffResult:
    """Align and compare every core the two traces share; keep the first `limit` divergences."""
    streams_a, streams_b = _streams(a, options), _streams(b, options)
    result = DiffResult(cpus=sorted(set(streams_a) | set(streams_b)))
    found: list[Divergence] = []
    for cpu in result.cpus:
        found.extend(_compare(cpu, streams_a.get(cpu), streams_b.get(cpu), options, result, limit))
    found.sort(key=lambda d: (d.position, d.cpu))
    result.divergences = found[:limit]
    return result


def _compare(
    cpu: int, a: _Stream | None, b: _Stream | None, options: DiffOptions, result: DiffResult, limit: int
) -> list[Divergence]:
    """Divergences of one core (the first `limit` in A's order), counting all of them."""
    na = 0 if a is None else len(a.seq)
    nb = 0 if b is None else len(b.seq)
    result.a_instructions += na
    result.b_instructions += nb
    if a is None or b is None:
        ia = ib = np.zeros(0, np.int64)
    else:
        ia, ib = align(a.pc, b.pc, options.window, options.sync)
    result.paired += len(ia)
    a_lo, a_hi, b_lo, b_hi = _unaligned_runs(ia, ib, na, nb)
    result.only_a += int(np.sum(a_hi - a_lo))
    result.only_b += int(np.sum(b_hi - b_lo))
    result.counts["unaligned"] += len(a_lo)
    result.total += len(a_lo)
    found = []
    end = int(a.seq[-1]) + 1 if a is not None and na else 0
    for lo, hi, blo, bhi in zip(
        a_lo[:limit].tolist(), a_hi.tolist(), b_lo.tolist(), b_hi.tolist(), strict=False
    ):
        a_seq = int(a.seq[lo]) if a is not None and lo < hi else None
        b_seq = int(b.seq[blo]) if b is not None and blo < bhi else None
        position = int(a.seq[lo]) if a is not None and lo < na else end
        found.append(Divergence(cpu, ("unaligned",), a_seq, b_seq, hi - lo, bhi - blo, position))
    if not len(ia):
        return found[:limit]
    masks = {
        "opcode": a.opcode[ia] != b.opcode[ib],
        "executed": a.executed[ia] != b.executed[ib],
        "time": np.zeros(len(ia), bool) if options.ignore_time else a.time[ia] != b.time[ib],
        "registers": a.registers[ia] != b.registers[ib],
        "memory": a.memory[ia] != b.memory[ib],
    }
    any_kind = np.zeros(len(ia), bool)
    for kind, mask in masks.items():
        result.counts[kind] += int(np.count_nonzero(mask))
        any_kind |= mask
    rows = np.flatnonzero(any_kind)
    result.total += len(rows)
    for row in rows[:limit].tolist():
        kinds = tuple(kind for kind in _FIELD_KINDS if masks[kind][row])
        a_seq = int(a.seq[ia[row]])
        found.append(Divergence(cpu, kinds, a_seq, int(b.seq[ib[row]]), position=a_seq))
    found.sort(key=lambda d: d.position)
    return found[:limit]


def _unaligned_runs(
    ia: np.ndarray, ib: np.ndarray, na: int, nb: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """[a_lo, a_hi) and [b_lo, b_hi) of the instructions between consecutive pairs (and at the ends)."""
    prev_a, prev_b = np.r_[-1, ia], np.r_[-1, ib]
    next_a, next_b = np.r_[ia, na], np.r_[ib, nb]
    gaps = np.flatnonzero((next_a - prev_a > 1) | (next_b - prev_b > 1))
    return prev_a[gaps] + 1, next_a[gaps], prev_b[gaps] + 1, next_b[gaps]


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
