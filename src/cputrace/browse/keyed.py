"""Parquet files sorted by a key, in small row groups whose first and last keys are kept beside
them, so that finding a row by its key costs one small group read.

The browser asks for a few rows at a time anywhere in a trace (a screen of instructions, the
register writes after a snapshot, the next visit of a pc); the store's own row groups hold
some 130,000 rows, 40 ms to decode. Its index (index.py) copies what it needs into files like
these, with groups of a few thousand rows, each within one value of the key's first column
(a core), and the key bounds of every group in `NAME.keys.npy`.

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
import pyarrow.parquet as pq

from ..errors import StoreError

Key = tuple[int, ...]

_CACHED_GROUPS = 16
"""Decoded groups kept per file: a screen, its neighbours, and a few places jumped between."""


def _keys_path(path: Path) -> Path:
    return path.with_suffix(".keys.npy")


class KeyedWriter:
    """Writes rows given in key order as groups of at most `rows` rows, each within one value of
    the key's first column, and records every group's first and last key.

    Groups are found by those keys, so no column statistics are written; only text columns are
    dictionary-encoded (each small group would otherwise pay for dictionaries of numbers)."""

    def __init__(self, path: Path, schema: pa.Schema, key: Sequence[str], rows: int) -> None:
        self.path = path
        self.key = tuple(key)
        self.rows = rows
        texts = [f.name for f in schema if pa.types.is_dictionary(f.type) or pa.types.is_string(f.type)]
        options = {"compression": "zstd", "compression_level": 1, "write_statistics": False}
        self._writer = pq.ParquetWriter(path, schema, use_dictionary=texts, **options)
        self._held: list[pa.Table] = []
        self._held_rows = 0
        self._bounds: list[tuple[Key, Key]] = []

    def write(self, table: pa.Table | pa.RecordBatch) -> None:
        """Append rows (in key order, after every row written before)."""
        if isinstance(table, pa.RecordBatch):
            table = pa.Table.from_batches([table])
        if not table.num_rows:
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
        group = pa.concat_tables(self._held).combine_chunks()
        self._writer.write_table(group, row_group_size=group.num_rows)
        self._bounds.append((self._key_of(group, 0), self._key_of(group, group.num_rows - 1)))
        self._held, self._held_rows = [], 0

    def _key_of(self, table: pa.Table, row: int) -> Key:
        return tuple(int(table.column(name)[row].as_py()) for name in self.key)

    def close(self) -> None:
        self._flush()
        self._writer.close()
        bounds = np.array(self._bounds, dtype=np.uint64).reshape(len(self._bounds), 2, len(self.key))
        np.save(_keys_path(self.path), bounds)


def write_keyed(
    path: Path, schema: pa.Schema, key: Sequence[str], rows: int, parts: Iterable[pa.Table | pa.RecordBatch]
) -> None:
    """Write `parts` (in key order) as a keyed file."""
    writer = KeyedWriter(path, schema, key, rows)
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
    read are kept decoded)."""

    def __init__(self, path: Path, key: Sequence[str]) -> None:
        self.path = path
        self.key = tuple(key)
        try:
            self._file = pq.ParquetFile(path)
            bounds = np.load(_keys_path(path))
        except (OSError, ValueError, pa.ArrowException) as exc:
            raise StoreError(f"damaged browse index: {path}: {exc}") from None
        metadata = self._file.metadata
        sizes = [metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)]
        if len(sizes) != len(bounds):
            raise StoreError(f"damaged browse index: {path}: {len(sizes)} groups, {len(bounds)} key bounds")
        self.starts = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)])
        self.num_rows = int(self.starts[-1])
        self._firsts: list[Key] = [tuple(int(v) for v in b[0]) for b in bounds]
        self._lasts: list[Key] = [tuple(int(v) for v in b[1]) for b in bounds]
        self._cache: OrderedDict[int, pa.Table] = OrderedDict()

    def group(self, index: int) -> pa.Table:
        """Row group `index`, decoded (or from the cache)."""
        table = self._cache.get(index)
        if table is not None:
            self._cache.move_to_end(index)
            return table
        try:
            table = self._file.read_row_group(index)
        except (OSError, pa.ArrowException) as exc:
            raise StoreError(f"damaged browse index: {self.path}: {exc}") from None
        self._cache[index] = table
        if len(self._cache) > _CACHED_GROUPS:
            self._cache.popitem(last=False)
        return table

    def _key_columns(self, index: int) -> list[np.ndarray]:
        table = self.group(index)
        return [table.column(name).to_numpy() for name in self.key]

    def lower_bound(self, key: Key) -> int:
        """The first row whose key is >= `key` (num_rows if none is)."""
        group = bisect.bisect_left(self._lasts, key)
        if group == len(self._lasts):
            return self.num_rows
        if self._firsts[group] >= key:
            return int(self.starts[group])
        return int(self.starts[group]) + _bound(self._key_columns(group), key, "left")

    def upper_bound(self, key: Key) -> int:
        """The first row whose key is > `key` (num_rows if none is)."""
        group = bisect.bisect_right(self._lasts, key)
        if group == len(self._lasts):
            return self.num_rows
        if self._firsts[group] > key:
            return int(self.starts[group])
        return int(self.starts[group]) + _bound(self._key_columns(group), key, "right")

    def rows(self, start: int, stop: int) -> pa.Table:
        """Rows [start, stop) (clipped to the file)."""
        start, stop = max(0, start), min(self.num_rows, stop)
        if start >= stop:
            return self._file.schema_arrow.empty_table()
        first = int(np.searchsorted(self.starts, start, "right")) - 1
        last = int(np.searchsorted(self.starts, stop - 1, "right")) - 1
        parts = []
        for index in range(first, last + 1):
            lo = max(start, int(self.starts[index])) - int(self.starts[index])
            hi = min(stop, int(self.starts[index + 1])) - int(self.starts[index])
            parts.append(self.group(index).slice(lo, hi - lo))
        return parts[0] if len(parts) == 1 else pa.concat_tables(parts)

    def row(self, row: int) -> dict:
        """One row as a dict of Python values."""
        return self.rows(row, row + 1).to_pylist()[0]

    def between(self, low: Key, high: Key) -> pa.Table:
        """Rows with low <= key <= high."""
        return self.rows(self.lower_bound(low), self.upper_bound(high))
