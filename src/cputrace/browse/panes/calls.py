"""The Calls pane: the call stack at the cursor, outermost first; Enter jumps to a call."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.message import Message

from .table import RowTable


@dataclass(frozen=True, slots=True)
class StackRow:
    """A frame of the stack as the pane shows it."""

    function: str
    call_site: str  # where it was called from ("" for the outermost frame)
    entry_seq: int  # the frame's first instruction
    call_seq: int | None  # the call instruction (None for the outermost frame)


class CallsPane(RowTable):
    """Frames as rows (depth, function, call site, seq of the call); Enter goes to the call
    instruction (the outermost frame: its first instruction)."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("enter", "jump", "go to call", show=False)]

    class JumpToCall(Message):
        """Go to instruction `seq`, the entry of a call."""

        def __init__(self, seq: int) -> None:
            super().__init__()
            self.seq = seq

    def __init__(self, **kwargs) -> None:
        super().__init__(("#", "function", "called from", "call seq"), **kwargs)
        self.border_title = "Calls"
        self._stack: list[StackRow] = []

    def show(self, rows: Sequence[StackRow]) -> None:
        """The stack `rows`, outermost first, the innermost selected (only the lines that
        change are repainted)."""
        rows = list(rows)
        if rows == self._stack:
            return
        self._stack = rows
        self.set_rows([_cells(depth, row) for depth, row in enumerate(rows)], cursor=len(rows) - 1)

    def action_jump(self) -> None:
        if self._stack:
            row = self._stack[self.cursor_row]
            self.post_message(self.JumpToCall(row.entry_seq if row.call_seq is None else row.call_seq))


def _cells(depth: int, row: StackRow) -> tuple[Text, Text, Text, Text]:
    seq = row.entry_seq if row.call_seq is None else row.call_seq
    return Text(str(depth)), Text(row.function, style="bold"), Text(row.call_site), Text(str(seq))
