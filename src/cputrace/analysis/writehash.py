"""One hash per instruction of the register values and of the memory bytes it writes.

Comparing what two traces' instructions write must not depend on how a producer splits or
orders its records (one 16-byte LD/ST line or two 8-byte MW records, registers in any
order), so each record is hashed byte by byte (memory) or as (name, value) (registers), and
an instruction's hash is the wrapping sum of its records' hashes. The tables are read in
bounded batches, in step with the chunks of instructions asked about, and only the records
of those instructions are hashed (by compiled loops).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable

import numba
import numpy as np
import pyarrow as pa
import xxhash

from ..kernels.hashing import GOLDEN, mix64
from ..store.batches import CHUNK_ROWS, SeqFollower, read_batches
from ..store.columns import numpy_of
from ..store.trace import Trace


@numba.njit(cache=True, nogil=True)
def _memory_hashes(addr, size, value, wide, wide_data, wide_offsets):
    """Sum over the bytes a write stores of mix(address, byte), per row."""
    out = np.zeros(len(addr), np.uint64)
    for r in range(len(addr)):
        h = np.uint64(0)
        if wide[r]:
            start = wide_offsets[r]
            for i in range(wide_offsets[r + 1] - start):
                h += mix64((addr[r] + np.uint64(i)) * GOLDEN + np.uint64(wide_data[start + i]))
        else:
            for i in range(size[r]):
                byte = (value[r] >> np.uint64(8 * i)) & np.uint64(255)
                h += mix64((addr[r] + np.uint64(i)) * GOLDEN + byte)
        out[r] = h
    return out


@numba.njit(cache=True, nogil=True)
def _register_hashes(name, value, wide, wide_data, wide_offsets, masked, mask_data, mask_offsets):
    """mix(name, value bytes, mask bytes) per row."""
    out = np.empty(len(name), np.uint64)
    for r in range(len(name)):
        h = mix64(name[r])
        if wide[r]:
            for i in range(wide_offsets[r], wide_offsets[r + 1]):
                h = mix64(h ^ np.uint64(wide_data[i]))
        else:
            h = mix64(h ^ value[r])
        if masked[r]:
            for i in range(mask_offsets[r], mask_offsets[r + 1]):
                h = mix64(h ^ np.uint64(mask_data[i]) ^ np.uint64(0x100))
        out[r] = h
    return out


def binary_parts(column: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(valid, bytes, offsets) of a binary column; offsets have one entry more than rows."""
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    array = array.cast(pa.large_binary())
    valid = array.is_valid().to_numpy(zero_copy_only=False)
    _, offsets, data = array.buffers()
    offsets = np.frombuffer(offsets, np.int64)[array.offset : array.offset + len(array) + 1]
    raw = np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)
    return valid, raw, offsets


def _per_name(column: pa.Array, value_of: Callable[[str], int]) -> np.ndarray:
    """`value_of(name)` for each row of a (dictionary-encoded) string column, once per distinct name.

    Null rows give 0.
    """
    if not pa.types.is_dictionary(column.type):
        column = column.cast(pa.string()).dictionary_encode()
    names = column.dictionary.to_pylist()
    table = np.array([0 if name is None else value_of(name) for name in names] + [0], np.uint64)
    return table[numpy_of(column.indices, np.int64, len(names))]


REGISTER_COLUMNS = ("cpu", "src", "reg", "value", "wide", "mask")
MEMORY_COLUMNS = ("cpu", "src", "op", "source", "size", "addr", "value", "wide")


class WriteHasher:
    """Hashes of the register and memory writes of instructions, asked for chunk by chunk in seq order.

    Records printed before a core's first instruction (an initial register dump) describe
    the state before the trace and are left out; so are registers matching `ignore` globs.
    """

    def __init__(self, trace: Trace, ignore: tuple[str, ...], rows: int = CHUNK_ROWS) -> None:
        self.first: dict[int, tuple[int, int]] = {}  # cpu -> (seq, src) of its first instruction, as met
        self._registers = SeqFollower(read_batches(trace, "registers", REGISTER_COLUMNS, rows=rows))
        self._memory = SeqFollower(read_batches(trace, "memory", MEMORY_COLUMNS, rows=rows))
        self._ignore = [p.lower() for p in ignore]

    def _name_hash(self, name: str) -> int:
        if any(fnmatch.fnmatchcase(name, p) for p in self._ignore):
            return 0
        return xxhash.xxh3_64_intdigest(name.encode())

    def hashes(self, seq: np.ndarray, last_seq: int) -> tuple[np.ndarray, np.ndarray]:
        """(register, memory) hashes of the instructions `seq` (sorted, all <= `last_seq`).

        Records up to `last_seq` are consumed: those of instructions not in `seq` are passed
        over for good, so the next call asks about later instructions only.
        """
        registers = np.zeros(len(seq), np.uint64)
        memory = np.zeros(len(seq), np.uint64)
        for batch in _batches(self._registers.upto(last_seq)):
            names = _per_name(batch.column("reg"), self._name_hash)
            rows, owners = self._owned(batch, seq, names != 0)
            if len(rows):
                part = _rows(batch, rows)
                wide, wide_data, wide_offsets = binary_parts(part.column("wide"))
                masked, mask_data, mask_offsets = binary_parts(part.column("mask"))
                value = numpy_of(part.column("value"), np.uint64)
                hashes = _register_hashes(
                    names[rows], value, wide, wide_data, wide_offsets, masked, mask_data, mask_offsets
                )
                _add(registers, owners, hashes)
        for batch in _batches(self._memory.upto(last_seq)):
            write = _per_name(batch.column("op"), lambda op: op in ("W", "U")).astype(bool)
            core = _per_name(batch.column("source"), lambda source: source == "core").astype(bool)
            known = batch.column("value").is_valid().to_numpy(zero_copy_only=False)
            known |= batch.column("wide").is_valid().to_numpy(zero_copy_only=False)
            rows, owners = self._owned(batch, seq, write & core & known)
            if len(rows):
                part = _rows(batch, rows)
                wide, wide_data, wide_offsets = binary_parts(part.column("wide"))
                hashes = _memory_hashes(
                    numpy_of(part.column("addr"), np.uint64), numpy_of(part.column("size"), np.int64),
                    numpy_of(part.column("value"), np.uint64), wide, wide_data, wide_offsets,
                )  # fmt: skip
                _add(memory, owners, hashes)
        return registers, memory

    def _owned(
        self, batch: pa.RecordBatch, seq: np.ndarray, keep: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """The kept rows of `batch` that belong to an instruction of `seq`, and its index in `seq`."""
        record_seq = batch.column("seq").to_numpy()
        cpu = batch.column("cpu").to_numpy()
        src = numpy_of(batch.column("src"), np.int64)
        for c, (first_seq, first_src) in self.first.items():
            keep &= ~((cpu == c) & (record_seq == first_seq) & (src < first_src))
        owner = np.searchsorted(seq, record_seq)
        inside = np.flatnonzero(keep & (owner < len(seq)))
        rows = inside[seq[owner[inside]] == record_seq[inside]]
        return rows, owner[rows]


def _batches(table: pa.Table | None) -> list[pa.RecordBatch]:
    return table.to_batches() if table is not None else []


def _rows(batch: pa.RecordBatch, rows: np.ndarray) -> pa.RecordBatch:
    return batch if len(rows) == batch.num_rows else batch.take(pa.array(rows))


def _add(target: np.ndarray, owners: np.ndarray, hashes: np.ndarray) -> None:
    """Add each record's hash to its instruction's; records come in seq order, so sum runs first."""
    starts = np.flatnonzero(np.r_[True, owners[1:] != owners[:-1]])
    target[owners[starts]] += np.add.reduceat(hashes, starts)
