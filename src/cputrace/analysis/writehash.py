"""One hash per instruction of the register values and of the memory bytes it writes.

Comparing what two traces' instructions write must not depend on how a producer splits or
orders its records (one 16-byte LD/ST line or two 8-byte MW records, registers in any
order), so each record is hashed byte by byte (memory) or as (name, value) (registers), and
an instruction's hash is the wrapping sum of its records' hashes. The tables are read in
bounded batches and hashed by compiled loops.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable

import numba
import numpy as np
import pyarrow as pa
import xxhash

from ..trace import Trace
from .stream import read_batches

_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_BYTE = np.uint64(0x9E3779B97F4A7C15)


@numba.njit(cache=True, nogil=True, inline="always")
def _mix(x):
    """splitmix64's finaliser: spreads every input bit over the whole word."""
    x = (x ^ (x >> np.uint64(30))) * _MIX1
    x = (x ^ (x >> np.uint64(27))) * _MIX2
    return x ^ (x >> np.uint64(31))


@numba.njit(cache=True, nogil=True)
def _memory_hashes(addr, size, value, wide, wide_data, wide_offsets):
    """Sum over the bytes a write stores of mix(address, byte), per row."""
    out = np.zeros(len(addr), np.uint64)
    for r in range(len(addr)):
        h = np.uint64(0)
        if wide[r]:
            start = wide_offsets[r]
            for i in range(wide_offsets[r + 1] - start):
                h += _mix((addr[r] + np.uint64(i)) * _BYTE + np.uint64(wide_data[start + i]))
        else:
            for i in range(size[r]):
                byte = (value[r] >> np.uint64(8 * i)) & np.uint64(255)
                h += _mix((addr[r] + np.uint64(i)) * _BYTE + byte)
        out[r] = h
    return out


@numba.njit(cache=True, nogil=True)
def _register_hashes(name, value, wide, wide_data, wide_offsets, masked, mask_data, mask_offsets):
    """mix(name, value bytes, mask bytes) per row."""
    out = np.empty(len(name), np.uint64)
    for r in range(len(name)):
        h = _mix(name[r])
        if wide[r]:
            for i in range(wide_offsets[r], wide_offsets[r + 1]):
                h = _mix(h ^ np.uint64(wide_data[i]))
        else:
            h = _mix(h ^ value[r])
        if masked[r]:
            for i in range(mask_offsets[r], mask_offsets[r + 1]):
                h = _mix(h ^ np.uint64(mask_data[i]) ^ np.uint64(0x100))
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


def _numpy(column: pa.ChunkedArray | pa.Array, dtype: type, fill: int = 0) -> np.ndarray:
    return column.fill_null(fill).to_numpy(zero_copy_only=False).astype(dtype, copy=False)


def _per_name(column: pa.ChunkedArray, value_of: Callable[[str], int]) -> np.ndarray:
    """`value_of(name)` for each row of a string column, computed once per distinct name."""
    strings = column.cast(pa.string())
    if isinstance(strings, pa.ChunkedArray):
        strings = strings.combine_chunks()
    encoded = strings.dictionary_encode()
    table = np.array([value_of(name) for name in encoded.dictionary.to_pylist()] + [0], np.uint64)
    return table[_numpy(encoded.indices, np.int64, len(encoded.dictionary))]


class WriteHashes:
    """Per instruction (by position in `seq`): hashes of its register and memory writes.

    Records printed before a core's first instruction (an initial register dump) describe
    the state before the trace and are left out; so are registers matching `ignore` globs.
    """

    def __init__(
        self, trace: Trace, seq: np.ndarray, first: dict[int, tuple[int, int]], ignore: tuple[str, ...]
    ):
        self.seq = seq
        self.first = first  # cpu -> (seq, src) of its first instruction
        self.registers = np.zeros(len(seq), np.uint64)
        self.memory = np.zeros(len(seq), np.uint64)
        patterns = [p.lower() for p in ignore]

        def name_hash(name: str) -> int:
            return (
                0
                if any(fnmatch.fnmatchcase(name, p) for p in patterns)
                else xxhash.xxh3_64_intdigest(name.encode())
            )

        columns = ("cpu", "src", "reg", "value", "wide", "mask")
        for batch in read_batches(trace, "registers", columns):
            names = _per_name(batch.column("reg"), name_hash)
            wide, wide_data, wide_offsets = binary_parts(batch.column("wide"))
            masked, mask_data, mask_offsets = binary_parts(batch.column("mask"))
            value = _numpy(batch.column("value"), np.uint64)
            hashes = _register_hashes(
                names, value, wide, wide_data, wide_offsets, masked, mask_data, mask_offsets
            )
            self._add(self.registers, batch, hashes, names != 0)
        columns = ("cpu", "src", "op", "source", "size", "addr", "value", "wide")
        for batch in read_batches(trace, "memory", columns):
            write = _per_name(batch.column("op"), lambda op: op in ("W", "U")).astype(bool)
            core = _per_name(batch.column("source"), lambda source: source == "core").astype(bool)
            wide, wide_data, wide_offsets = binary_parts(batch.column("wide"))
            known = batch.column("value").is_valid().to_numpy(zero_copy_only=False) | wide
            hashes = _memory_hashes(
                _numpy(batch.column("addr"), np.uint64), _numpy(batch.column("size"), np.int64),
                _numpy(batch.column("value"), np.uint64), wide, wide_data, wide_offsets,
            )  # fmt: skip
            self._add(self.memory, batch, hashes, write & core & known)

    def _add(self, target: np.ndarray, batch: pa.RecordBatch, hashes: np.ndarray, keep: np.ndarray) -> None:
        seq = batch.column("seq").to_numpy()
        cpu = batch.column("cpu").to_numpy()
        src = _numpy(batch.column("src"), np.int64)
        for c, (first_seq, first_src) in self.first.items():
            keep &= ~((cpu == c) & (seq == first_seq) & (src < first_src))
        position = np.searchsorted(self.seq, seq[keep])
        inside = position < len(self.seq)
        position, hashes = position[inside], hashes[keep][inside]
        matched = self.seq[position] == seq[keep][inside]
        position, hashes = position[matched], hashes[matched]
        if len(position):  # rows come in seq order: sum each instruction's run, then add
            starts = np.flatnonzero(np.r_[True, position[1:] != position[:-1]])
            target[position[starts]] += np.add.reduceat(hashes, starts)
