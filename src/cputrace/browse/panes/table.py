"""A DataTable whose cell updates repaint only their rows (the Registers and Calls panes)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Self

from textual.coordinate import Coordinate
from textual.geometry import Region
from textual.widgets import DataTable
from textual.widgets.data_table import CellType


class RowTable(DataTable):
    """`DataTable.update_cell` repaints the whole table (every visible row rendered again,
    1-2 ms a row): `update_rows` repaints only the rows it changes."""

    _rows_only = False
    """Set while `update_rows` updates cells."""

    def refresh(
        self, *regions: Region, repaint: bool = True, layout: bool = False, recompose: bool = False
    ) -> Self:
        if self._rows_only and not (regions or layout or recompose):
            return self  # a cell update's repaint of the whole table: `update_rows` repaints its rows
        return super().refresh(*regions, repaint=repaint, layout=layout, recompose=recompose)

    def update_rows(self, rows: Mapping[int, Sequence[CellType]], update_width: bool = False) -> None:
        """Every cell of the rows (by index) in `rows`, repainting only those rows; with
        `update_width`, columns widen to fit the new cells."""
        self._rows_only = True
        try:
            for row, cells in rows.items():
                for column, cell in enumerate(cells):
                    self.update_cell_at(Coordinate(row, column), cell, update_width=update_width)
        finally:
            self._rows_only = False
        for row in rows:
            self.refresh_row(row)
