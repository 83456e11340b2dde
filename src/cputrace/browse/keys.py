"""The browser's keys: one table that makes the app's bindings and its help screen."""

from __future__ import annotations

from dataclasses import dataclass

from textual.binding import Binding


@dataclass(frozen=True, slots=True)
class Key:
    keys: str  # Textual key names, comma-separated
    shown: str  # as the help screen and the README write them
    action: str
    help: str
    group: str


KEYS: tuple[Key, ...] = (
    Key("up", "Up", "step(-1)", "previous instruction (a folded call is one step)", "Moving"),
    Key("down", "Down", "step(1)", "next instruction (steps over a folded call)", "Moving"),
    Key("pageup", "PgUp", "page(-1)", "a screenful back", "Moving"),
    Key("pagedown", "PgDn", "page(1)", "a screenful on", "Moving"),
    Key("home", "Home", "first", "first instruction", "Moving"),
    Key("end", "End", "last", "last instruction", "Moving"),
    Key("g", "g", "prompt('goto')", "go to a seq (an expression: 1200, 0x4b0)", "Moving"),
    Key("t", "t", "prompt('time')", "go to the last instruction at or before a time", "Moving"),
    Key("tab", "Tab", "app.focus_next", "next pane (Enter in Registers, Memory, Calls jumps)", "Panes"),
    Key("r", "r", "focus_pane('registers')", "Registers: Enter goes to the writer of the value", "Panes"),
    Key("m", "m", "prompt('memory')", "open a Memory pane at an expression (sp+16, buffer)", "Panes"),
    Key("M", "M", "close_memory", "close the focused Memory pane", "Panes"),
    Key("y", "y", "copy", "copy the registers and the visible memory as text", "Other"),
    Key("f1,question_mark", "F1 ?", "help", "this help", "Other"),
    Key("q", "q", "quit", "quit", "Other"),
)


def bindings() -> list[Binding]:
    return [Binding(k.keys, k.action, k.help, show=False) for k in KEYS]
