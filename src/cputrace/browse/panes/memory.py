"""A Memory pane: hex and ASCII of memory at an address expression, each byte styled by where
its value comes from (a write, a read before any write, the image, or unknown).

The pane follows the cursor unless locked to a point (`toggle_lock`, the app's `l`). It
selects one byte; Enter or `1` asks for the last write to that byte, `2` `4` `8` to the
aligned halfword, word or doubleword around it. The app evaluates the expression and reads the bytes (`show`).
"""

from __future__ import annotations

import functools
from typing import ClassVar

import numpy as np
from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding, BindingType
from textual.geometry import Region
from textual.message import Message
from textual.strip import Strip

from ...analysis.state import FROM_IMAGE, READ_BEFORE_WRITE, UNKNOWN, MemoryBytes
from .drawn import DrawnPane

ROW = 16
"""Bytes per line."""

ORIGIN_STYLES = {
    UNKNOWN: Style(dim=True),
    READ_BEFORE_WRITE: Style(color="cyan"),
    FROM_IMAGE: Style(color="magenta"),
}
WRITTEN = Style(color="green")
CHANGED = Style(color="black", bgcolor="yellow")
SELECTED = Style(reverse=True)
ADDRESS = Style(color="bright_blue")
_HEX = tuple(f"{byte:02x}" for byte in range(256))
_CHARACTER = tuple(chr(byte) if 32 <= byte < 127 else "." for byte in range(256))
"""A known byte in the ASCII column."""


class MemoryPane(DrawnPane, can_focus=True):
    """ROW bytes a line from the 16-byte boundary at or below the expression's address."""

    DEFAULT_CSS = "MemoryPane { height: 8; border: round $secondary; }"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("left", "move(-1)", show=False),
        Binding("right", "move(1)", show=False),
        Binding("up", "move(-16)", show=False),
        Binding("down", "move(16)", show=False),
        Binding("enter", "last_write(1)", "last write", show=False),
        Binding("1", "last_write(1)", show=False),
        Binding("2", "last_write(2)", show=False),
        Binding("4", "last_write(4)", show=False),
        Binding("8", "last_write(8)", show=False),
    ]

    class LastWrite(Message):
        """Go to the last write to any byte of [address, address + size) before the pane's point."""

        def __init__(self, pane: MemoryPane, address: int, size: int) -> None:
            super().__init__()
            self.pane = pane
            self.address = address
            self.size = size

    class Moved(Message):
        """The selection left the bytes shown: the app reads the pane again."""

        def __init__(self, pane: MemoryPane) -> None:
            super().__init__()
            self.pane = pane

    def __init__(self, expression: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.expression = expression
        self.locked: int | None = None
        """The seq the pane is locked to, or None to follow the cursor."""
        self.seq: int | None = None
        """The point shown."""
        self.base = 0
        """The address of the first byte shown (a multiple of ROW)."""
        self.selected = 0
        """The address of the selected byte."""
        self._memory: MemoryBytes | None = None
        self._changed: set[int] = set()
        self._title()

    @property
    def rows(self) -> int:
        """Lines of bytes that fit in the pane."""
        return max(1, self.content_region.height or 4)

    def place(self, address: int) -> None:
        """Select `address` (the expression's value), its line first in the pane."""
        self.selected = address
        self.base = min(address - address % ROW, (1 << 64) - self.rows * ROW)
        self._title()

    def wanted(self) -> tuple[int, int]:
        """The (address, length) the pane shows: the app reads these bytes for `show`."""
        return self.base, self.rows * ROW

    def show(self, seq: int, memory: MemoryBytes) -> None:
        """The bytes at point `seq`; bytes whose value differs from the previous `show` of the
        same addresses are highlighted. At the same addresses only the lines with a byte
        changed now or before are repainted (a step changes a word or none)."""
        old, was_changed = self._memory, self._changed
        self._changed = set()
        same_place = old is not None and old.address == memory.address and len(old.data) == len(memory.data)
        if same_place:
            assert old is not None
            differs = (np.frombuffer(old.data, np.uint8) != np.frombuffer(memory.data, np.uint8)) | (
                old.origin != memory.origin
            )
            self._changed = {memory.address + int(i) for i in np.flatnonzero(differs)}
        self.seq = seq
        self._memory = memory
        self._title()
        if not same_place:
            self.refresh()
            return
        width = self.size.width
        lines = sorted({(address - memory.address) // ROW for address in self._changed | was_changed})
        if lines:
            self.refresh(*(Region(0, y, width, 1) for y in lines))

    def render_line(self, y: int) -> Strip:
        memory = self._memory
        blank = self.base_style
        if memory is None or y * ROW >= len(memory.data):
            return Strip.blank(self.size.width, blank)
        start = y * ROW
        row = memory.address + start
        selected = self.selected if self.has_focus else None
        changed = self._changed
        hexes: list[tuple[str, Style]] = []
        chars: list[tuple[str, Style]] = []
        origins = memory.origin[start : start + ROW].tolist()
        for i, (origin, byte) in enumerate(zip(origins, memory.data[start : start + ROW], strict=False)):
            style = CHANGED if row + i in changed else ORIGIN_STYLES.get(origin, WRITTEN)
            if row + i == selected:
                style = style + SELECTED
            known = origin != UNKNOWN
            hexes.append((_HEX[byte] if known else "??", style))
            hexes.append(("  " if i == 7 else " ", style if _plain_on_space(style) else blank))
            chars.append((_CHARACTER[byte] if known else " ", style))
        segments = [Segment(f"{row:016x}  ", ADDRESS), *_runs(hexes), Segment(" ", blank), *_runs(chars)]
        return Strip(segments).crop(0, self.size.width)

    def text(self) -> str:
        """The bytes shown, as text (`??` for unknown)."""
        memory = self._memory
        if memory is None:
            return ""
        lines = [f"memory at {self.expression} (seq {self.seq}):"]
        for y in range(0, len(memory.data), ROW):
            cells = [
                f"{memory.data[i]:02x}" if memory.origin[i] != UNKNOWN else "??"
                for i in range(y, min(y + ROW, len(memory.data)))
            ]
            lines.append(f"{memory.address + y:016x}  {' '.join(cells)}")
        return "\n".join(lines) + "\n"

    def action_move(self, delta: int) -> None:
        self.selected = max(0, min((1 << 64) - 1, self.selected + delta))
        before = self.base
        self._scroll_to_selected()
        if self.base != before:
            self.post_message(self.Moved(self))
        self.refresh()

    def action_last_write(self, size: int) -> None:
        self.post_message(self.LastWrite(self, self.selected - self.selected % size, size))

    def action_toggle_lock(self) -> None:
        self.locked = None if self.locked is not None else self.seq
        self._title()
        self.post_message(self.Moved(self))

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()

    def on_resize(self) -> None:
        self._scroll_to_selected()
        self.post_message(self.Moved(self))

    def _scroll_to_selected(self) -> None:
        line = self.selected - self.selected % ROW
        last = self.base + (self.rows - 1) * ROW
        if line < self.base:
            self.base = line
        elif line > last:
            self.base = line - (self.rows - 1) * ROW
        self.base = max(0, min(self.base, (1 << 64) - self.rows * ROW))

    def _title(self) -> None:
        """Title the pane with its expression and lock, and the selected address below; only
        a change repaints it (setting `border_title` repaints the whole pane, even with the
        same title)."""
        lock = f" locked at seq {self.locked}" if self.locked is not None else ""
        title, subtitle = f"Memory {self.expression}{lock}", f"0x{self.selected:x}"
        if title != self.border_title:
            self.border_title = title
        if subtitle != self.border_subtitle:
            self.border_subtitle = subtitle


@functools.lru_cache(maxsize=64)
def _plain_on_space(style: Style) -> bool:
    """A space in `style` looks like a space in the pane's own: it colours no background."""
    return style.bgcolor is None and not (style.reverse or style.underline or style.strike)


def _runs(cells: list[tuple[str, Style]]) -> list[Segment]:
    """(text, style) cells as one segment per run of one style object: each segment costs
    its own pass through every stage of Textual's line pipeline."""
    segments: list[Segment] = []
    text: list[str] = []
    run: Style | None = None
    for cell, style in cells:
        if style is not run and text:  # the styles are a few objects: `!=` costs 5 µs
            segments.append(Segment("".join(text), run))
            text = []
        text.append(cell)
        run = style
    if text:
        segments.append(Segment("".join(text), run))
    return segments
