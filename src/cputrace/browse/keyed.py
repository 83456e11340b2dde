"""Files sorted by a key, in small groups of rows whose first and last keys are kept beside
them, so that finding a row by its key costs one small group read.

The browser asks for a few rows at a time anywhere in a trace (a screen of instructions, the
register writes after a snapshot, the next visit of a pc); the store's own row groups hold
some 130,000 rows, 40 ms to decode. Its index (index.py) copies what it needs into files like
these: Arrow IPC files (zstd), memory-mapped, one record batch of about a thousand rows per
group (a fraction of a millisecond to decode: a third of what the same rows cost as a
Parquet row group, for files of about the same size), with the key bounds of every group in
`NAME.keys.npy` (and their sizes in `NAME.sizes.npy`).

Rows are addressed by their number in the file ("row"), counted from 0; `lower_bound` and
`upper_bound` turn a key into a row, as `bisect` does for a list.
"""

from __future__ import annotations

import bisect
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

from ..store.indexes import damaged_index, reading_index_file

Key = tuple[int, ...]

_CACHED_GROUPS = 16
"""Decoded groups kept per file: a screen, its neighbours, and a few places jumped between."""

_ONE_THREAD = ipc.IpcReadOptions(use_threads=False)
"""A group is decoded on the calling thread: its columns are too small to share out. Arrow's
thread pool took 1.5 times the CPU time for a group (instructions 0.52 ms against 0.35,
registers 0.32 against 0.23, memory 0.57 against 0.34 on the 20M-line index, load 7.7) and
3-4 times the wall time (1.1-1.4 ms against 0.4)."""


def _keys_path(path: Path) -> Path:
    return path.with_suffix(".keys.npy")


def _sizes_path(path: Path) -> Path:
    return path.with_suffix(".sizes.npy")


class KeyedWriter:
    """Writes rows given in key order as groups of at most `rows` rows (with `split`, each
    within one value of the key's first column: a core), and records every group's first and
    last key.

    Dictionary columns (the store's `isa`, `reg`, ...) are written as plain strings: an IPC
    file cannot change a dictionary from one batch to the next."""

    def __init__(
        self, path: Path, schema: pa.Schema, key: Sequence[str], rows: int, split: bool = True
    ) -> None:
        self.path = path
        self.key = tuple(key)
        self.rows = rows
        self.split = split
        self.schema = pa.schema([_plain(field) for field in schema])
        self._writer = ipc.new_file(path, self.schema, options=ipc.IpcWriteOptions(compression="zstd"))
        self._held: list[pa.Table] = []
        self._held_rows = 0
        self._bounds: list[tuple[Key, Key]] = []
        self._sizes: list[int] = []

    def write(self, table: pa.Table | pa.RecordBatch) -> None:
        """Append rows (in key order, after every row written before)."""
        if isinstance(table, pa.RecordBatch):
            table = pa.Table.from_batches([table])
        if not table.num_rows:
            return
        table = table.cast(self.schema).combine_chunks()  # once here, not once per group
        if not self.split:
            self._hold(table)
            return
        first = table.column(self.key[0]).to_numpy()
        cuts = np.flatnonzero(first[1:] != first[:-1]) + 1
        starts = [0, *cuts.tolist()]
        stops = [*cuts.tolist(), table.num_rows]
        for start, stop in zip(starts, stops, strict=True):
            if self._held and self._held[0].column(self.key[0])[0].as_py() != first[start]:
                self._flush()
            self._hold(table.slice(start, stop - start))

    def _hold(self, part: pa.Table) -> None:
        while part.num_rows:
            take = min(part.num_rows, self.rows - self._held_rows)
            self._held.append(part.slice(0, take))
            self._held_rows += take
            part = part.slice(take)
            if self._held_rows == self.rows:
                self._flush()

    def _flush(self) -> None:
        if not self._held:
            return
        group = self._held[0] if len(self._held) == 1 else pa.concat_tables(self._held).combine_chunks()
        self._writer.write_table(group, max_chunksize=group.num_rows)
        self._bounds.append((self._key_of(group, 0), self._key_of(group, group.num_rows - 1)))
        self._sizes.append(group.num_rows)
        self._held, self._held_rows = [], 0

    def _key_of(self, table: pa.Table, row: int) -> Key:
        return tuple(int(table.column(name)[row].as_py()) for name in self.key)

    def close(self) -> None:
        self._flush()
        self._writer.close()
        bounds = np.array(self._bounds, dtype=np.uint64).reshape(len(self._bounds), 2, len(self.key))
        np.save(_keys_path(self.path), bounds)
        np.save(_sizes_path(self.path), np.array(self._sizes, dtype=np.int64))


def _plain(field: pa.Field) -> pa.Field:
    """A dictionary column as a column of its values."""
    return field.with_type(field.type.value_type) if pa.types.is_dictionary(field.type) else field


def write_keyed(
    path: Path,
    schema: pa.Schema,
    key: Sequence[str],
    rows: int,
    parts: Iterable[pa.Table | pa.RecordBatch],
    split: bool = True,
) -> None:
    """Write `parts` (in key order) as a keyed file (see KeyedWriter)."""
    writer = KeyedWriter(path, schema, key, rows, split)
    for part in parts:
        writer.write(part)
    writer.close()


def _bound(columns: Sequence[np.ndarray], key: Key, side: str) -> int:
    """The first row whose key is >= `key` (`side="left"`) or > `key` (`"right"`), rows sorted
    by the columns' values in order."""
    lo, hi = 0, len(columns[0])
    for depth, (column, value) in enumerate(zip(columns, key, strict=True)):
        part = column[lo:hi]
        left = lo + int(np.searchsorted(part, value, "left"))
        right = lo + int(np.searchsorted(part, value, "right"))
        if left == right or depth == len(key) - 1:
            return left if side == "left" or left == right else right
        lo, hi = left, right
    return lo


class KeyedFile:
    """A keyed file held open: rows found by key, read a group at a time (the last few groups
    read are kept decoded, with their key columns as NumPy arrays)."""

    def __init__(self, path: Path, key: Sequence[str]) -> None:
        self.path = path
        self.key = tuple(key)
        with reading_index_file(path):
            self._file = ipc.open_file(pa.memory_map(str(path)), options=_ONE_THREAD)
        with reading_index_file(_keys_path(path)):
            bounds = np.load(_keys_path(path))
        groups = self._file.num_record_batches
        if groups != len(bounds):
            raise damaged_index(path, f"{groups} groups, {len(bounds)} key bounds")
        self.schema = self._file.schema
        with reading_index_file(_keys_path(path)):
            self._firsts: list[Key] = list(map(tuple, bounds[:, 0].tolist())) if groups else []
            self._lasts: list[Key] = list(map(tuple, bounds[:, 1].tolist())) if groups else []
        with reading_index_file(_sizes_path(path)):
            sizes = np.load(_sizes_path(path)) if groups else np.zeros(0, np.int64)
        self.starts = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)])
        self.num_rows = int(self.starts[-1])
        self._cache: OrderedDict[int, tuple[pa.RecordBatch, list[np.ndarray]]] = OrderedDict()

    def _cached(self, index: int) -> tuple[pa.RecordBatch, list[np.ndarray]]:
        entry = self._cache.get(index)
        if entry is not None:
            self._cache.move_to_end(index)
            return entry
        with reading_index_file(self.path):
            batch = self._file.get_batch(index)
        entry = (batch, [batch.column(name).to_numpy(zero_copy_only=False) for name in self.key])
        self._cache[index] = entry
        if len(self._cache) > _CACHED_GROUPS:
            self._cache.popitem(last=False)
        return entry

    def group(self, index: int) -> pa.RecordBatch:
        """Group `index`, decoded (or from the cache)."""
        return self._cached(index)[0]

    def lower_bound(self, key: Key) -> int:
        """The first row whose key is >= `key` (num_rows if none is)."""
        group = bisect.bisect_left(self._lasts, key)
        if group == len(self._lasts):
            return self.num_rows
        if self._firsts[group] >= key:
            return int(self.starts[group])
        return int(self.starts[group]) + _bound(self._cached(group)[1], key, "left")

    def upper_bound(self, key: Key) -> int:
        """The first row whose key is > `key` (num_rows if none is)."""
        group = bisect.bisect_right(self._lasts, key)
        if group == len(self._lasts):
            return self.num_rows
        if self._firsts[group] > key:
            return int(self.starts[group])
        return int(self.starts[group]) + _bound(self._cached(group)[1], key, "right")

    def rows(self, start: int, stop: int) -> pa.Table:
        """Rows [start, stop) (clipped to the file)."""
        start, stop = max(0, start), min(self.num_rows, stop)
        if start >= stop:
            return self.schema.empty_table()
        first = int(np.searchsorted(self.starts, start, "right")) - 1
        last = int(np.searchsorted(self.starts, stop - 1, "right")) - 1
        parts = []
        for index in range(first, last + 1):
            lo = max(start, int(self.starts[index])) - int(self.starts[index])
            hi = min(stop, int(self.starts[index + 1])) - int(self.starts[index])
            parts.append(self.group(index).slice(lo, hi - lo))
        return pa.Table.from_batches(parts, self.schema)

    def key_of(self, row: int) -> Key:
        """The key of one row (from the decoded group's key arrays: a tenth of `row`'s time)."""
        if not 0 <= row < self.num_rows:
            raise IndexError(f"{self.path}: no row {row}")
        index = int(np.searchsorted(self.starts, row, "right")) - 1
        offset = row - int(self.starts[index])
        return tuple(int(column[offset]) for column in self._cached(index)[1])

    def row(self, row: int) -> dict:
        """One row as a dict of Python values."""
        if not 0 <= row < self.num_rows:
            raise IndexError(f"{self.path}: no row {row}")
        index = int(np.searchsorted(self.starts, row, "right")) - 1
        return self.group(index).slice(row - int(self.starts[index]), 1).to_pylist()[0]

    def between(self, low: Key, high: Key) -> pa.Table:
        """Rows with low <= key <= high."""
        return self.rows(self.lower_bound(low), self.upper_bound(high))
