"""The Source pane: the file and line of the cursor's pc (the image's DWARF line tables) and
the source text around it when the file is found (as named, or under --source-dir)."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from ..source import SourceView

CURRENT = "bold black on yellow"


class SourcePane(Static):
    """The cursor's source line, highlighted among its neighbours."""

    DEFAULT_CSS = "SourcePane { height: 9; border: round $secondary; }"

    def __init__(self, **kwargs) -> None:
        super().__init__("", **kwargs)
        self.border_title = "Source"

    def show(self, view: SourceView | None, pc: int) -> None:
        """`view` of the cursor's `pc` (None: no line table covers it)."""
        if view is None:
            self.border_title = "Source"
            self.update(Text(f"no line table covers pc 0x{pc:x}", style="dim"), layout=False)
            return
        self.border_title = f"Source {view.file}:{view.line}"
        if view.path is None:
            self.update(Text(f"{view.file}:{view.line} (file not found: give --source-dir)", style="dim"),
                        layout=False)
            return
        text = Text(no_wrap=True)
        for number, line in enumerate(view.text, view.first):
            style = CURRENT if number == view.line else ""
            text.append(f"{number:>5}  {line}\n", style=style)
        self.update(text, layout=False)  # the pane's height is fixed: no layout of the screen
