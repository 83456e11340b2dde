"""The base of the panes that draw their lines themselves (`render_line`).

A line drawn in the pane's own colours needs the pane's Rich style, and `Widget.rich_style`
works it out anew at every call from the styles of the widget and all its ancestors (60-90 µs
of CPU): once a line, that was a third of a Registers line's time. A paint asks for it once
(`render_lines`, which Textual calls once a paint of the widget, before its lines).
"""

from __future__ import annotations

from rich.style import Style
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget


class DrawnPane(Widget):
    """A widget whose `render_line` draws in `base_style`: its Rich style at this paint."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.base_style = Style.null()

    def render_lines(self, crop: Region) -> list[Strip]:
        self.base_style = self.rich_style
        return super().render_lines(crop)
