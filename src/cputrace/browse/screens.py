"""The browser's screens over the panes: the help (F1, ?) and the one-line prompt that asks
for an expression, a seq, a time or an SQL condition."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Static

from .keys import Key


class HelpScreen(ModalScreen[None]):
    """Every key of the browser, by group; any of Escape, q, F1 or ? closes it."""

    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 90%; height: 90%; border: round $accent; background: $surface; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss", show=False),
        Binding("q", "dismiss", show=False),
        Binding("f1", "dismiss", show=False),
        Binding("question_mark", "dismiss", show=False),
    ]

    def __init__(self, keys: Sequence[Key]) -> None:
        super().__init__()
        self.keys = keys

    def compose(self) -> ComposeResult:
        table = Table(box=None, show_header=False, pad_edge=False)
        table.add_column(style="bold cyan", no_wrap=True)
        table.add_column()
        group = None
        for key in self.keys:
            if key.group != group:
                group = key.group
                table.add_row("", "")
                table.add_row(f"[bold]{group}[/bold]", "")
            table.add_row(key.shown, key.help)
        with VerticalScroll() as scroll:
            scroll.border_title = "cputrace browse: keys (Escape closes)"
            yield Static(table)


class PromptScreen(ModalScreen[str | None]):
    """A question and a line to answer it; Enter gives the text, Escape gives None."""

    DEFAULT_CSS = """
    PromptScreen { align: center bottom; }
    PromptScreen > Vertical { height: auto; border: round $accent; background: $surface; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", show=False)]

    def __init__(self, question: str, value: str = "") -> None:
        super().__init__()
        self.question = question
        self.value = value

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(self.question)
            yield Input(value=self.value, id="answer")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip() or None)

    def action_cancel(self) -> None:
        self.dismiss(None)
