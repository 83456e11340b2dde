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


MOVING, FOLDING, PANES, OTHER = "Moving", "Folding", "Panes", "Other"
"""Groups of keys; the folding keys are the reference Tarmac browser's (tarmac-browser)."""

KEYS: tuple[Key, ...] = (
    Key("up", "Up", "step(-1)", "previous instruction (a folded call is one step)", MOVING),
    Key("down", "Down", "step(1)", "next instruction (steps over a folded call)", MOVING),
    Key("pageup", "PgUp", "page(-1)", "a screenful back", MOVING),
    Key("pagedown", "PgDn", "page(1)", "a screenful on", MOVING),
    Key("home", "Home", "first", "first instruction", MOVING),
    Key("end", "End", "last", "last instruction", MOVING),
    Key("g", "g", "prompt('goto')", "go to a seq (an expression: 1200, 0x4b0)", MOVING),
    Key("t", "t", "prompt('time')", "go to the last instruction at or before a time", MOVING),
    Key("p", "p", "prompt('pc_next')", "next visit of a pc or symbol (main, main+0x10)", MOVING),
    Key("P", "P", "prompt('pc_previous')", "previous visit of a pc or symbol", MOVING),
    Key("slash", "/", "prompt('search_next')", "search forward: SQL condition on instructions", MOVING),
    Key("backslash", "\\", "prompt('search_previous')", "search backward with an SQL condition", MOVING),
    Key("n", "n", "repeat(1)", "repeat the last pc visit or search, forward", MOVING),
    Key("N", "N", "repeat(-1)", "repeat the last pc visit or search, backward", MOVING),
    Key("e", "e", "event(1)", "next exception or trace gap", MOVING),
    Key("E", "E", "event(-1)", "previous exception or trace gap", MOVING),
    Key("o", "o", "step_over", "step over the call at the cursor (to its return)", MOVING),
    Key("minus,underscore", "- _", "fold('call')", "fold the call containing the cursor", FOLDING),
    Key("plus,equals_sign", "+ =", "fold('unfold')", "unfold the folded call at the cursor", FOLDING),
    Key("left_square_bracket", "[", "fold('inner')", "fold every call the current function makes", FOLDING),
    Key("right_square_bracket", "]", "fold('unfold_inner')", "unfold all in the current function", FOLDING),
    Key("left_curly_bracket", "{", "fold('unfold_all')", "unfold the whole trace", FOLDING),
    Key("right_curly_bracket", "}", "fold('all')", "fold the whole trace as far as it goes", FOLDING),
    Key("escape", "Esc", "focus_pane('trace')", "back to the Trace pane", PANES),
    Key("tab", "Tab", "app.focus_next", "next pane (Enter in Registers, Memory, Calls jumps)", PANES),
    Key("r", "r", "focus_pane('registers')", "Registers: Enter goes to the writer of the value", PANES),
    Key("m", "m", "prompt('memory')", "Memory pane at an expression; in it Enter 1 2 4 8: last write", PANES),
    Key("l", "l", "lock_memory", "lock the focused (or last) Memory pane at its point; again: unlock", PANES),
    Key("M", "M", "close_memory", "close the focused Memory pane", PANES),
    Key("c", "c", "focus_pane('calls')", "Calls: the stack at the cursor; Enter goes to a call", PANES),
    Key("f", "f", "call_tree", "call tree of the whole trace (Enter opens a call)", PANES),
    Key("s", "s", "toggle_source", "show or hide the Source pane (with --image)", PANES),
    Key("less_than_sign", "<", "timeline(-1)", "Timeline: the previous stretch (or click on it)", PANES),
    Key("greater_than_sign", ">", "timeline(1)", "Timeline: the next stretch", PANES),
    Key("x", "x", "next_core", "switch to the next core (each keeps its cursor)", PANES),
    Key("d", "d", "divergence(1)", "next divergence from the --diff trace (B, beside)", PANES),
    Key("D", "D", "divergence(-1)", "previous divergence from the --diff trace", PANES),
    Key("b", "b", "bookmark", "set or clear a bookmark at the cursor", OTHER),
    Key("apostrophe", "'", "next_bookmark", "go to the next bookmark", OTHER),
    Key("y", "y", "copy", "copy the registers and the visible memory as text", OTHER),
    Key("f1,question_mark", "F1 ?", "help", "this help", OTHER),
    Key("q", "q", "quit", "quit", OTHER),
)


def bindings() -> list[Binding]:
    return [Binding(k.keys, k.action, k.help, show=False) for k in KEYS]
