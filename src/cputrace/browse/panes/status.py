"""The status line: where the cursor is (seq, time, core, pc, function, position in the trace)
and the last message (a bad expression, a search that found nothing); and the line where the
app asks for a seq, a time, an expression or an SQL condition (`ask`).

The question is asked in the status line itself, as `less` and `vi` do, and the app hands it
the keys while it asks, rather than a screen or a focused widget of its own taking them: a
new screen, a layout change or a change of focus each repaint the whole screen, whereas this
way each key typed repaints one line, and the answer's move only what it changes. The line
is drawn as a few segments (`render_line`), not through a Static's markup and layout: about
half the CPU time a key.
"""

from __future__ import annotations

from collections.abc import Callable

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.strip import Strip

from .drawn import DrawnPane

BOLD = Style(bold=True)
"""The whole line's."""
ANSWER_CURSOR = Style(reverse=True)
ERROR = Style.parse("red")
NEWS = Style.parse("green")
"""A message that is not an error."""


class StatusLine(DrawnPane):
    """One line at the bottom: the cursor's place, then a message if there is one; or, while
    `asking`, a question and the answer being typed."""

    DEFAULT_CSS = "StatusLine { height: 1; background: $panel; color: $text; }"

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.place = ""
        self.message = ""
        self.error = False
        self.question: str | None = None
        """The question asked (None: not asking)."""
        self.answer = ""
        """The answer typed so far."""
        self._at = 0
        """Where the next character typed goes in `answer`."""
        self._answered: Callable[[str], object] | None = None

    @property
    def asking(self) -> bool:
        return self.question is not None

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

    def ask(self, question: str, answered: Callable[[str], object]) -> None:
        """Ask `question` in this line: the app gives it the keys (`take`) until Enter (then
        `answered` gets the answer, stripped; an empty one is not given) or Escape. The focus
        stays where it is (moving it repaints the whole screen)."""
        self.question, self.answer, self._at, self._answered = question, "", 0, answered
        self._refresh_text()

    def take(self, key: events.Key) -> bool:
        """Edit the answer with `key` (while `asking`); False for a key this line leaves to the
        app (a control key it does not use, such as ctrl+q)."""
        edit = _EDITS.get(key.key)
        if edit is not None:
            edit(self)
        elif key.is_printable:
            assert key.character is not None
            self._insert(key.character)
        elif key.key.startswith("ctrl+"):
            return False
        return True

    def paste(self, text: str) -> None:
        """The first line of `text` typed into the answer."""
        if text:
            self._insert(text.splitlines()[0])

    def _submit(self) -> None:
        answer, answered = self.answer.strip(), self._answered
        self._stop_asking()
        if answer and answered is not None:
            answered(answer)

    def _stop_asking(self) -> None:
        self.question, self._answered = None, None
        self._refresh_text()

    def _insert(self, text: str) -> None:
        self.answer = self.answer[: self._at] + text + self.answer[self._at :]
        self._at += len(text)
        self._refresh_text()

    def _delete(self, offset: int) -> None:
        """Delete the character before the cursor (-1) or under it (0)."""
        at = self._at + offset
        if 0 <= at < len(self.answer):
            self.answer = self.answer[:at] + self.answer[at + 1 :]
            self._at = at
            self._refresh_text()

    def _clear(self) -> None:
        self.answer, self._at = "", 0
        self._refresh_text()

    def _move_to(self, at: int) -> None:
        self._at = max(0, min(len(self.answer), at))
        self._refresh_text()

    def _refresh_text(self) -> None:
        self.refresh()

    def render_line(self, y: int) -> Strip:
        base = self.base_style + BOLD
        if self.question is not None:
            parts = [
                (self.question + " ", None),
                (self.answer[: self._at], None),
                (self.answer[self._at : self._at + 1] or " ", ANSWER_CURSOR),
                (self.answer[self._at + 1 :], None),
            ]
        else:
            parts = [(self.place, None)]
            if self.message:
                parts += [("  ", None), (self.message, ERROR if self.error else NEWS)]
        segments = [Segment(text, base + style if style else base) for text, style in parts if text]
        width = self.size.width
        return Strip(segments).crop(0, width).extend_cell_length(width, self.base_style)


_EDITS: dict[str, Callable[[StatusLine], object]] = {
    "enter": StatusLine._submit,
    "escape": StatusLine._stop_asking,
    "backspace": lambda line: line._delete(-1),
    "delete": lambda line: line._delete(0),
    "left": lambda line: line._move_to(line._at - 1),
    "right": lambda line: line._move_to(line._at + 1),
    "home": lambda line: line._move_to(0),
    "ctrl+a": lambda line: line._move_to(0),
    "end": lambda line: line._move_to(len(line.answer)),
    "ctrl+e": lambda line: line._move_to(len(line.answer)),
    "ctrl+u": lambda line: line._clear(),
}
"""The keys that edit the answer; any other printable key is typed into it."""
