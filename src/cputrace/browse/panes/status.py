"""The status line: where the cursor is (seq, time, core, pc, function, position in the trace)
and the last message (a bad expression, a search that found nothing)."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static


class StatusLine(Static):
    """One line at the bottom: the cursor's place, then a message if there is one."""

    DEFAULT_CSS = "StatusLine { height: 1; background: $panel; color: $text; }"

    def __init__(self, **kwargs) -> None:
        super().__init__("", **kwargs)
        self.place = ""
        self.message = ""
        self.error = False

    def show_place(self, place: str) -> None:
        """The cursor's place; the message stays until the next `say` or `clear`."""
        self.place = place
        self._refresh_text()

    def say(self, message: str, error: bool = True) -> None:
        self.message = message
        self.error = error
        self._refresh_text()

    def clear(self) -> None:
        self.message = ""
        self._refresh_text()

    def _refresh_text(self) -> None:
        text = Text(self.place, style="bold")
        if self.message:
            text.append("  ")
            text.append(self.message, style="bold red" if self.error else "green")
        self.update(text, layout=False)  # one line, always: no layout of the screen
