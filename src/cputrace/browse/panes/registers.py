"""The Registers pane: every register of the cursor's core, changed ones highlighted.

A register the core has not written by the cursor is shown as unknown (`?`), and a register
written only in part shows `x` for its unknown bytes (the state index's `hex`). Enter on a
register asks the app to jump to the instruction that wrote its current value.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.message import Message

from ...analysis.state import RegisterValue
from .table import RowTable

CHANGED = "bold black on yellow"
UNKNOWN = "dim"


class RegistersPane(RowTable):
    """Registers as rows (name, seq of the writer, value: a 128-bit value may not fit); the
    row cursor selects one."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("enter", "jump_to_writer", "writer", show=False)]

    class JumpToWriter(Message):
        """Go to instruction `seq`, the writer of register `name` (None: never written)."""

        def __init__(self, name: str, seq: int | None) -> None:
            super().__init__()
            self.name = name
            self.seq = seq

    def __init__(self, **kwargs) -> None:
        super().__init__(("register", "writer", "value"), **kwargs)
        self.border_title = "Registers"
        self._shown: dict[str, str] = {}
        self._writers: dict[str, int] = {}
        self._names: list[str] = []

    def show(self, names: Sequence[str], values: Sequence[RegisterValue]) -> None:
        """The registers `names`, in that order, with the `values` known at the cursor; those
        whose text differs from the previous `show` are highlighted (only the lines that
        change are repainted: a step changes a few)."""
        by_name = {v.name: v for v in values}
        texts = {name: ("0x" + by_name[name].hex() if name in by_name else "?") for name in names}
        self._writers = {v.name: v.seq for v in values}
        previous = self._shown
        changed = {name for name in names if previous and previous.get(name) != texts[name]}
        writers = self._writers
        self.set_rows([self._cells(name, texts[name], writers.get(name), name in changed) for name in names])
        self._shown = texts
        self._names = list(names)

    @staticmethod
    def _cells(name: str, text: str, writer: int | None, changed: bool) -> tuple[Text, Text, Text]:
        style = CHANGED if changed else (UNKNOWN if writer is None else "")
        seq = Text("" if writer is None else str(writer), style=CHANGED if changed else "dim")
        return Text(name, style=style), seq, Text(text, style=style)

    def text(self) -> str:
        """The pane as plain text (`name value`), for copying."""
        width = max((len(n) for n in self._names), default=0)
        return "".join(f"{name:<{width}}  {self._shown[name]}\n" for name in self._names)

    def action_jump_to_writer(self) -> None:
        if not self._names:
            return
        name = self._names[self.cursor_row]
        self.post_message(self.JumpToWriter(name, self._writers.get(name)))
