"""Row-at-a-time table building for decoders of low-volume records.

High-volume paths build Arrow arrays from NumPy directly; this is for the records that come
one by one (events, rare dialects, slow-path lines) and must land in the same schemas.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from .model import SCHEMAS


class RowBuffer:
    """Collects rows of one model table as column lists and turns them into an Arrow table."""

    def __init__(self, table: str) -> None:
        self.table = table
        self.schema = SCHEMAS[table]
        self.columns: dict[str, list[Any]] = {name: [] for name in self.schema.names}

    def __len__(self) -> int:
        return len(self.columns["seq"])

    def append(self, **values: Any) -> None:
        """Add one row; columns not given are null."""
        for name, column in self.columns.items():
            column.append(values.get(name))

    def to_table(self) -> pa.Table:
        arrays = []
        for field in self.schema:
            values = self.columns[field.name]
            if pa.types.is_dictionary(field.type):
                arrays.append(pa.array(values, pa.string()).dictionary_encode())
            else:
                arrays.append(pa.array(values, field.type))
        return pa.Table.from_arrays(arrays, schema=self.schema)

    def take(self) -> pa.Table:
        """Return the rows collected so far and start afresh."""
        table = self.to_table()
        self.columns = {name: [] for name in self.schema.names}
        return table

    def put_back(self, table: pa.Table) -> None:
        """Append rows taken before (a decoder holding some back for its next batch)."""
        for name, values in table.to_pydict().items():
            self.columns[name].extend(values)

