"""The Timeline pane: a strip of the cursor's core's execution over the whole trace (bands of
code addresses against time, as `profile --plot`'s heat map), the cursor's place marked.

A click on the strip, or `<` `>`, asks the app to go to another stretch of the trace.
"""

from __future__ import annotations

import math

import numpy as np
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.message import Message
from textual.strip import Strip as Line
from textual.widget import Widget

from ..timeline import Strip

SHADES = " ░▒▓█"
LABEL = 14
"""Columns of the band names on the left."""
HEAT = Style(color="bright_green")
CURSOR = Style(bgcolor="red", color="white", bold=True)
NAME = Style(color="grey62")


class TimelinePane(Widget):
    """Rows are bands of code addresses (high addresses on top), columns stretches of the trace."""

    DEFAULT_CSS = "TimelinePane { height: 7; border: round $secondary; }"

    class Clicked(Message):
        """Go to the stretch at `column` of the strip."""

        def __init__(self, column: int) -> None:
            super().__init__()
            self.column = column

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.border_title = "Timeline"
        self.strip: Strip | None = None
        self.cursor = 0
        self._rows: list[str] = []
        """Each band's shades as text, by band."""

    @property
    def columns(self) -> int:
        """Stretches that fit beside the band names."""
        return max(1, self.content_region.width - LABEL)

    @property
    def rows(self) -> int:
        return max(1, self.content_region.height)

    def show(self, strip: Strip, cursor: int) -> None:
        """`strip` (one of this pane's size), the cursor in column `cursor` (repainted only
        when one of them changes)."""
        if strip is self.strip and cursor == self.cursor:
            return
        if strip is not self.strip:
            self.strip = strip
            counts = strip.counts.astype(np.float64)
            top = math.log1p(counts.max()) if counts.size and counts.max() > 0 else 1.0
            shades = np.ceil(np.log1p(counts) / top * (len(SHADES) - 1)).astype(np.int64)
            self._rows = ["".join(SHADES[shade] for shade in row) for row in shades.tolist()]
            self.border_title = f"Timeline (cpu {strip.cpu}, by {strip.axis.name})"
        self.cursor = cursor
        self.refresh()

    def render_line(self, y: int) -> Line:
        width = self.size.width
        strip = self.strip
        if strip is None or y >= len(strip.bands):
            return Line.blank(width, self.rich_style)
        band = len(strip.bands) - 1 - y  # high addresses on top
        name = strip.bands[band].name or f"0x{strip.bands[band].lo:x}"
        row, cursor = self._rows[band], self.cursor
        # three segments (the cells before the cursor, the cursor's, those after), not one a
        # cell: each later stage of Textual's line pipeline goes through them one by one
        parts = [(f"{name[: LABEL - 1]:<{LABEL}}", NAME), (row, HEAT)]
        if 0 <= cursor < len(row):
            at = row[cursor].replace(" ", "|")
            parts[1:] = [(row[:cursor], HEAT), (at, CURSOR), (row[cursor + 1 :], HEAT)]
        return Line([Segment(text, style) for text, style in parts if text]).crop(0, width)

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None or self.strip is None:
            return
        column = offset.x - LABEL
        if 0 <= column < self.strip.columns:
            self.post_message(self.Clicked(column))
