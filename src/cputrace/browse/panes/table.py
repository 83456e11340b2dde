"""A light table for the Registers and Calls panes: rows of styled cells in columns under a
header, one row selected, scrolled to keep it in view.

Textual's DataTable renders a row in 1-2 ms and lays the screen out again when its rows are
replaced, a far jump's cost for the whole screen. This table draws its lines itself
(`render_line`, one segment a cell) and, when given new rows, repaints only the lines whose
cells changed; the pane's size comes from the CSS alone, so new rows never change the layout.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Region
from textual.strip import Strip

from .drawn import DrawnPane

HEADER = Style(bold=True)
SELECTED = Style(reverse=True)
"""The selected row, in the focused pane."""
SELECTED_UNFOCUSED = Style(bgcolor="grey23")
SELECTED_UNFOCUSED_ON_COLOUR = Style(underline=True)
"""The selected row in a pane without the focus, in a cell with a background of its own."""
GAP = 1
"""Columns between cells."""

Row = tuple[Text, ...]


class RowTable(DrawnPane, can_focus=True):
    """Rows of cells (Texts: their text and style, spans are not drawn) under `headers`; the
    cursor row is selected. Up, Down, PgUp, PgDn, Home, End and a click select a row."""

    DEFAULT_CSS = "RowTable { overflow: hidden; }"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "select(-1)", show=False),
        Binding("down", "select(1)", show=False),
        Binding("pageup", "select_page(-1)", show=False),
        Binding("pagedown", "select_page(1)", show=False),
        Binding("home", "select_row(0)", show=False),
        Binding("end", "select_row(-1)", show=False),
    ]

    def __init__(self, headers: Sequence[str], **kwargs) -> None:
        super().__init__(**kwargs)
        self._headers: Row = tuple(Text(h) for h in headers)
        self._rows: list[Row] = []
        self._widths = [len(h) for h in headers]
        self.cursor_row = 0
        self._top = 0
        """The row on the table's first line below the header."""

    @property
    def row_count(self) -> int:
        return len(self._rows)

    def get_row_at(self, row: int) -> Row:
        return self._rows[row]

    @property
    def _visible(self) -> int:
        """Rows that fit below the header."""
        return max(1, (self.content_region.height or 2) - 1)

    def set_rows(self, rows: Sequence[Row], cursor: int | None = None) -> None:
        """Show `rows` (and select row `cursor`, if given); repaints the lines that change."""
        old = self._rows
        self._rows = list(rows)
        widths = [len(h) for h in self._headers]
        for row in self._rows:
            widths = [max(w, cell.cell_len) for w, cell in zip(widths, row, strict=True)]
        if widths != self._widths:
            self._widths = widths
            self._move(self.cursor_row if cursor is None else cursor, everything=True)
            return
        changed = {i for i in range(max(len(old), len(self._rows))) if not _same_row(old, self._rows, i)}
        if cursor is not None and cursor != self.cursor_row:
            self._move(cursor, changed)
        else:
            self._move(self.cursor_row, changed)

    def move_cursor(self, row: int) -> None:
        """Select `row` (clamped to the rows)."""
        self._move(row, set())

    def _move(self, row: int, changed: set[int] | None = None, everything: bool = False) -> None:
        """Select `row`, scroll it into view, and repaint the lines of the rows in `changed`,
        of the old and new selection (everything when told, or when the table scrolls)."""
        old = self.cursor_row
        self.cursor_row = max(0, min(row, len(self._rows) - 1))
        top = min(max(self._top, self.cursor_row - self._visible + 1), self.cursor_row)
        top = max(0, min(top, len(self._rows) - self._visible))
        if everything or top != self._top:
            self._top = top
            self.refresh()
            return
        rows = (changed or set()) | {old, self.cursor_row}
        width = self.size.width
        lines = [1 + r - top for r in rows if 0 <= r - top < self._visible]
        if lines:
            self.refresh(*(Region(0, y, width, 1) for y in lines))

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        blank = self.base_style
        if y == 0:
            return self._strip(self._headers, HEADER, blank, width)
        row = self._top + y - 1
        if row >= len(self._rows):
            return Strip.blank(width, blank)
        selected = None
        if row == self.cursor_row:
            selected = SELECTED if self.has_focus else SELECTED_UNFOCUSED
        return self._strip(self._rows[row], selected, blank, width)

    def _strip(self, cells: Row, over: Style | None, blank: Style, width: int) -> Strip:
        segments = []
        for cell, cell_width in zip(cells, self._widths, strict=True):
            style = blank + _style(cell.style) if cell.style else blank
            if over is SELECTED_UNFOCUSED and cell.style and _style(cell.style).bgcolor is not None:
                style += SELECTED_UNFOCUSED_ON_COLOUR
            elif over is not None:
                style += over
            segments.append(Segment(cell.plain + " " * (cell_width - cell.cell_len + GAP), style))
        strip = Strip(segments).crop(0, width)
        return strip.extend_cell_length(width, blank + over if over is not None else blank)

    def action_select(self, delta: int) -> None:
        self.move_cursor(self.cursor_row + delta)

    def action_select_page(self, direction: int) -> None:
        self.move_cursor(self.cursor_row + direction * self._visible)

    def action_select_row(self, row: int) -> None:
        self.move_cursor(len(self._rows) - 1 if row < 0 else row)

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is not None and offset.y > 0:
            self.move_cursor(self._top + offset.y - 1)

    def on_mouse_scroll_down(self) -> None:
        self.move_cursor(self.cursor_row + 1)

    def on_mouse_scroll_up(self) -> None:
        self.move_cursor(self.cursor_row - 1)

    def on_focus(self) -> None:
        self._move(self.cursor_row, set())

    def on_blur(self) -> None:
        self._move(self.cursor_row, set())

    def on_resize(self) -> None:
        self._move(self.cursor_row, everything=True)


def _style(style: str | Style) -> Style:
    return Style.parse(style) if isinstance(style, str) else style  # Style.parse keeps its answers


def _same_row(old: Sequence[Row], new: Sequence[Row], i: int) -> bool:
    """Row `i` is in both and draws the same (Text's `==` ignores the base style)."""
    if i >= len(old) or i >= len(new):
        return False
    return all(a.plain == b.plain and a.style == b.style for a, b in zip(old[i], new[i], strict=True))
