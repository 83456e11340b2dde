"""The trace browser: Textual panes that follow one cursor over a `Session` (session.py).

The app holds where each core's cursor is (its position among the core's instructions) and
which core is shown; every move goes through `_go`, which re-reads what the panes show at
the new point (a screenful of lines, the registers, the memory panes, the call stack) from
the session. The session does all trace work; the panes only draw. The same app runs in a
terminal and, through textual-serve, in a web browser (cli/browse.py).

Requests typed into the app that cannot be answered (an unknown symbol, a malformed
expression or SQL, a seq past the end) end as a message in the status line: the
session raises CputraceError for them, and `_reported` shows it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual.app import App, ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widget import Widget

from ..errors import CputraceError
from .keys import KEYS, bindings
from .panes.memory import MemoryPane
from .panes.registers import RegistersPane
from .panes.status import StatusLine
from .panes.trace import TracePane, rendered
from .screens import HelpScreen, PromptScreen
from .session import Session

if TYPE_CHECKING:
    from ..store.trace import Trace

SCREENSHOT_SIZE = (132, 40)
"""Columns and lines of a `--screenshot`."""


@dataclass(frozen=True, slots=True)
class Start:
    """Where the browser opens: a core, and a seq or a time (the first instruction otherwise)."""

    cpu: int | None = None
    seq: int | None = None
    time: int | None = None


def _reported(action: Callable[..., Any]) -> Callable[..., Any]:
    """Run an action; a CputraceError (bad input typed into the app) or a DuckDB error (bad
    SQL) becomes a message in the status line, and the app goes on."""

    @functools.wraps(action)
    def run(self: BrowseApp, *args: Any) -> Any:
        try:
            return action(self, *args)
        except CputraceError as exc:
            self.say(str(exc))
        except Exception as exc:
            if not _is_sql_error(exc):
                raise
            self.say(f"SQL: {exc}")
        return None

    return run


def _is_sql_error(exc: Exception) -> bool:
    import duckdb

    return isinstance(exc, duckdb.Error)


class BrowseApp(App[None]):
    """Trace, Registers, Memory and Calls panes, a status line, and the keys of keys.py."""

    TITLE = "cputrace browse"
    CSS = """
    #main { height: 1fr; }
    #left { width: 1fr; }
    #right { width: 56; }
    RegistersPane { height: 2fr; border: round $secondary; }
    #memories { height: auto; max-height: 50%; }
    """
    BINDINGS = bindings()

    def __init__(self, session: Session, start: Start = Start()) -> None:
        super().__init__()
        self.session = session
        self.start = start
        self.cpu = session.cpu
        self.cursors: dict[int, int] = dict.fromkeys(session.cores, 0)
        """Each core's cursor: its position among the core's instructions."""
        self.top: dict[int, int] = dict.fromkeys(session.cores, 0)
        """Each core's first line on screen."""
        self._on_screen = 1
        """Instructions on screen, whole or cut (a page moves by one less)."""

    @classmethod
    def open(
        cls,
        trace: Trace,
        images: Sequence[str] = (),
        start: Start = Start(),
    ) -> BrowseApp:
        """The browser on `trace` with the images `images` (`PATH[@ADDR]` specs)."""
        from ..cli.params import load_images

        return cls(Session.open(trace, load_images(images), start.cpu), start)

    # -- layout --------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        with Horizontal(id="main"):
            with Vertical(id="left"):
                yield TracePane(id="trace")
                yield Vertical(id="memories")
            with Vertical(id="right"):
                yield RegistersPane(id="registers")
        yield StatusLine(id="status")

    @property
    def trace_pane(self) -> TracePane:
        return self.query_one("#trace", TracePane)

    @property
    def registers_pane(self) -> RegistersPane:
        return self.query_one("#registers", RegistersPane)

    @property
    def status(self) -> StatusLine:
        return self.query_one("#status", StatusLine)

    @property
    def memory_panes(self) -> list[MemoryPane]:
        return list(self.query(MemoryPane))

    def on_mount(self) -> None:
        self.trace_pane.focus()
        self._open_at_start()

    @_reported
    def _open_at_start(self) -> None:
        start = self.start
        if start.seq is not None:
            self.go_to_seq(start.seq)
        elif start.time is not None:
            self.go_to_seq(self.session.seq_at_time(start.time, start.cpu))
        else:
            self._go(self.cpu, 0)

    def on_trace_pane_resized(self) -> None:
        self._go(self.cpu, self.cursors[self.cpu])

    # -- where the cursor is -------------------------------------------------------------

    @property
    def seq(self) -> int:
        """The cursor's point: after this instruction."""
        return self.session.seq_of(self.cpu, self.cursors[self.cpu])

    def go_to_seq(self, seq: int) -> None:
        """Move the cursor to instruction `seq` (on its own core)."""
        cpu = self.session.cpu_of(seq)
        index = self.session.index_of(cpu, seq)
        if index is None:
            raise CputraceError(f"no instruction with seq {seq}")
        self._go(cpu, index)

    def _go(self, cpu: int, index: int) -> None:
        """Put core `cpu`'s cursor at `index` (clamped to its instructions), show that core,
        and re-read every pane at the new point."""
        count = self.session.count(cpu)
        index = max(0, min(index, count - 1))
        self.cpu = cpu
        self.cursors[cpu] = index
        seq = self.session.seq_of(cpu, index)
        self._show_trace(cpu, index)
        self.registers_pane.show(self.session.register_names(cpu), self.session.registers(cpu, seq))
        for pane in self.memory_panes:
            self._show_memory(pane)
        self._show_place(cpu, index, seq)

    def _show_trace(self, cpu: int, index: int) -> None:
        """The screenful of lines with the cursor's instruction on it: the screen scrolls only
        when the cursor leaves it, and then just enough to show the cursor's lines."""
        pane = self.trace_pane
        rows = pane.rows
        multicore = len(self.session.cores) > 1
        top = min(max(self.top[cpu], index - rows + 1), index)
        above = [rendered(line, multicore) for line in self.session.lines(cpu, top, index - top + 1)]
        while len(above) > 1 and sum(map(len, above)) > rows:  # the cursor's lines end the screen
            above.pop(0)
            top += 1
        texts = [text for block in above for text in block]
        cursor = range(len(texts) - len(above[-1]), len(texts))
        below = 0
        if len(texts) < rows:
            for line in self.session.lines(cpu, index + 1, rows - len(texts)):
                texts.extend(rendered(line, multicore))
                below += 1
                if len(texts) >= rows:
                    break
        self.top[cpu] = top
        self._on_screen = len(above) + below
        pane.show(texts[:rows], cursor)

    def _show_place(self, cpu: int, index: int, seq: int) -> None:
        line = self.session.lines(cpu, index, 1)[0]
        count = self.session.count(cpu)
        where = [f"seq {seq}"]
        if line.time is not None:
            where.append(f"time {line.time}")
        where.append(f"cpu {cpu}")
        where.append(f"pc 0x{line.pc:x}")
        if line.symbol:
            where.append(line.symbol)
        where.append(f"{index + 1:,}/{count:,} ({100 * (index + 1) / count:.0f}%)")
        self.status.show_place("  ".join(where))

    def say(self, message: str, error: bool = True) -> None:
        """A message in the status line."""
        self.status.say(message, error)

    # -- memory panes --------------------------------------------------------------------

    def _show_memory(self, pane: MemoryPane) -> None:
        seq = pane.locked if pane.locked is not None else self.seq
        address, length = pane.wanted()
        pane.show(seq, self.session.memory(address, length, seq))

    @_reported
    def open_memory(self, expression: str) -> None:
        address = self.session.evaluate(expression, self.cpu, self.seq)
        pane = MemoryPane(expression)
        self.query_one("#memories").mount(pane)
        pane.place(address)
        self._show_memory(pane)
        pane.focus()

    def on_memory_pane_moved(self, event: MemoryPane.Moved) -> None:
        self._show_memory(event.pane)

    @_reported
    def on_memory_pane_last_write(self, event: MemoryPane.LastWrite) -> None:
        seq = event.pane.locked if event.pane.locked is not None else self.seq
        writer = self.session.memory_writer(event.address, event.size, seq)
        if writer is None:
            self.say(f"the trace wrote no byte of 0x{event.address:x}+{event.size} by seq {seq}")
            return
        self.go_to_seq(writer)
        self.say(f"last write to 0x{event.address:x}+{event.size}: seq {writer}", error=False)

    @_reported
    def on_registers_pane_jump_to_writer(self, event: RegistersPane.JumpToWriter) -> None:
        if event.seq is None:
            self.say(f"{event.name} has not been written by this point")
            return
        self.go_to_seq(event.seq)
        self.say(f"{event.name} was written at seq {event.seq}", error=False)

    # -- actions -------------------------------------------------------------------------

    @_reported
    def action_step(self, delta: int) -> None:
        self.status.clear()
        self._go(self.cpu, self.cursors[self.cpu] + delta)

    @_reported
    def action_page(self, direction: int) -> None:
        self.status.clear()
        self._go(self.cpu, self.cursors[self.cpu] + direction * max(1, self._on_screen - 1))

    @_reported
    def action_first(self) -> None:
        self._go(self.cpu, 0)

    @_reported
    def action_last(self) -> None:
        self._go(self.cpu, self.session.count(self.cpu) - 1)

    def action_prompt(self, what: str) -> None:
        question, answer = _PROMPTS[what]
        self.push_screen(PromptScreen(question), lambda text: text is not None and answer(self, text))

    @_reported
    def _go_to_expression(self, text: str) -> None:
        self.go_to_seq(self.session.evaluate(text, self.cpu, self.seq))

    @_reported
    def _go_to_time(self, text: str) -> None:
        time = self.session.evaluate(text, self.cpu, self.seq)
        self.go_to_seq(self.session.seq_at_time(time, self.cpu))

    def action_focus_pane(self, name: str) -> None:
        self.query_one(f"#{name}", Widget).focus()

    def action_close_memory(self) -> None:
        focused = self.focused
        if isinstance(focused, MemoryPane):
            focused.remove()
            self.trace_pane.focus()

    def action_help(self) -> None:
        self.push_screen(HelpScreen(KEYS))

    def action_copy(self) -> None:
        text = self.state_text()
        self.copy_to_clipboard(text)
        panes = len(self.memory_panes)
        self.say(f"copied the registers and {panes} memory pane(s) at seq {self.seq}", error=False)

    def state_text(self) -> str:
        """The registers and the visible memory at the cursor, as text (what `y` copies)."""
        parts = [f"seq {self.seq} cpu {self.cpu}\n", self.registers_pane.text()]
        parts.extend(pane.text() for pane in self.memory_panes)
        return "".join(parts)

    # -- without a terminal --------------------------------------------------------------

    def screenshot(self, path: Path) -> None:
        """Run headless, write the first screen to `path` as SVG, and stop."""

        async def shoot(pilot: Any) -> None:
            await pilot.pause()
            self.save_screenshot(path.name, str(path.parent))
            self.exit()

        self.run(headless=True, size=SCREENSHOT_SIZE, auto_pilot=shoot)


_PROMPTS: dict[str, tuple[str, Callable[[BrowseApp, str], Any]]] = {
    "goto": ("Go to seq (an expression: 1200, 0x4b0):", BrowseApp._go_to_expression),
    "time": ("Go to time:", BrowseApp._go_to_time),
    "memory": ("Memory at (an expression: sp+16, buffer, 0x8000):", BrowseApp.open_memory),
}
