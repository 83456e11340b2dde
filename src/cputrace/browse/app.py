"""The trace browser: Textual panes that follow one cursor over a `Session` (session.py).

The app holds where each core's cursor is (its position among the core's instructions) and
which core is shown; every move goes through `_go`, which re-reads what the panes show at
the new point (a screenful of lines, the registers, the memory panes, the call stack, the
timeline's cursor, the source line) from the session. The session does all trace work; the
panes only draw. The same app runs in a terminal and, through textual-serve, in a web
browser (cli/browse.py).

Requests typed into the app that cannot be answered (an unknown symbol, a malformed
expression or SQL, a seq past the end) end as a message in the status line: the
session raises CputraceError for them, and `_reported` shows it.
"""

from __future__ import annotations

import functools
import gc
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual import events
from textual.app import App, ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widget import Widget

from ..errors import CputraceError
from .calls import Frame
from .keys import KEYS, bindings
from .lines import Line
from .panes.calls import CallsPane, StackRow
from .panes.memory import MemoryPane
from .panes.registers import RegistersPane
from .panes.source import SourcePane
from .panes.status import StatusLine
from .panes.timeline import TimelinePane
from .panes.trace import Row, TraceFrame, TracePane, marked, note
from .screens import CallTreeScreen, HelpScreen
from .session import Session
from .timeline import Strip

if TYPE_CHECKING:
    from ..store.trace import Trace
    from .diffview import DiffView

FULL_PASS_EVERY = 100
"""Passes over the middle generation between two full passes of the garbage collector (10
by default). What the session and the panes keep for a while (lines, rows, decoded groups)
reaches the oldest generation and is freed from there by its references, so a full pass
came every 10-12 middle ones: 9 in the benchmark's 240 actions, 24 ms of CPU each over the
app's objects at load 7-8, a pause in the middle of a key press (with 100: one). Only
cycles wait longer to be freed."""

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
    """Trace (and trace B with --diff), Timeline, Source, Memory, Registers and Calls panes, a
    status line, and the keys of keys.py."""

    TITLE = "cputrace browse"
    CSS = """
    #main { height: 1fr; }
    #traces { height: 1fr; }
    #left { width: 1fr; }
    #right { width: 56; }
    RegistersPane { height: 2fr; border: round $secondary; }
    CallsPane { height: 1fr; border: round $secondary; }
    #memories { height: auto; max-height: 50%; }
    """
    BINDINGS = bindings()

    def __init__(
        self,
        session: Session,
        start: Start = Start(),
        diff: DiffView | None = None,
        targets_later: bool = False,
        freeze_heap: bool = False,
    ) -> None:
        """With `targets_later`, the first screen comes without branch targets, and the
        decoders that find them load in the background after it (with an image; they take
        longer to load than the rest of the app).

        With `freeze_heap` (for a process that runs this one app: `cputrace browse`), the
        objects alive once the first screen is drawn are left out of the garbage collector's
        passes (`gc.freeze`): those of the imported modules (Textual, NumPy, PyArrow: some
        60,000 objects) made each full pass take 80-200 ms, a pause in the middle of a key
        press; so are the branch targets' decoders once loaded. They are still freed when no
        longer referenced; only cycles among them stay. Full passes come rarer from then on
        (`FULL_PASS_EVERY`)."""
        super().__init__()
        self.session = session
        self.start = start
        self.diff = diff
        self.failure: CputraceError | None = None  # what ended the app, for the command to tell
        """Trace B beside this one (--diff), aligned as `cputrace diff` aligns them."""
        self.top_b: dict[int, int] = {}
        """Trace B's first line on screen, per core."""
        self.cpu = session.cpu
        self.cursors: dict[int, int] = dict.fromkeys(session.cores, 0)
        """Each core's cursor: its position among the core's instructions."""
        self.top: dict[int, int] = dict.fromkeys(session.cores, 0)
        """Each core's first line on screen."""
        self._on_screen = 1
        """Lines of instructions on screen, whole or cut (a page moves by one less)."""
        self._cursor_line: Line | None = None
        """The cursor's line as the Trace pane shows it."""
        self._strips: dict[tuple[int, int, int], Strip] = {}
        """Timeline strips by (core, columns, rows)."""
        self.bookmarks: list[int] = []
        """Seqs marked with `b`, ascending."""
        self._repeat: tuple[str, str] | None = None
        """The last pc visit or search (`p`, `/`): ("pc" or "sql", what was typed), for `n` `N`."""
        self._targets_later = targets_later and session.image is not None
        self._freeze_heap = freeze_heap
        for opened in self._sessions:
            opened.targets_later = self._targets_later

    @classmethod
    def open(
        cls,
        trace: Trace,
        images: Sequence[str] = (),
        start: Start = Start(),
        source_dirs: Sequence[str] = (),
    ) -> BrowseApp:
        """The browser on `trace` with the images `images` (`PATH[@ADDR]` specs)."""
        from ..cli.params import load_images

        return cls(Session.open(trace, load_images(images), start.cpu, source_dirs=source_dirs), start)

    # -- layout --------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        with Horizontal(id="main"):
            with Vertical(id="left"):
                if self.diff is None:
                    yield TraceFrame(TracePane(id="trace"))
                else:
                    with Horizontal(id="traces"):
                        yield TraceFrame(TracePane(id="trace"))
                        other = TracePane(id="trace-b")
                        other.can_focus = False
                        yield TraceFrame(other, "Trace B")
                yield TimelinePane(id="timeline")
                source = SourcePane(id="source")
                source.display = self._has_sources
                yield source
                yield Vertical(id="memories")
            with Vertical(id="right"):
                yield RegistersPane(id="registers")
                yield CallsPane(id="calls")
        yield StatusLine(id="status")

    @property
    def _has_sources(self) -> bool:
        """The image has line tables (a Source pane can show something)."""
        return self.session.sources is not None and bool(self.session.sources.lines.files)

    @property
    def trace_pane(self) -> TracePane:
        return self.query_one("#trace", TracePane)

    @property
    def registers_pane(self) -> RegistersPane:
        return self.query_one("#registers", RegistersPane)

    @property
    def calls_pane(self) -> CallsPane:
        return self.query_one("#calls", CallsPane)

    @property
    def timeline_pane(self) -> TimelinePane:
        return self.query_one("#timeline", TimelinePane)

    @property
    def source_pane(self) -> SourcePane:
        return self.query_one("#source", SourcePane)

    @property
    def status(self) -> StatusLine:
        return self.query_one("#status", StatusLine)

    @property
    def memory_panes(self) -> list[MemoryPane]:
        return list(self.query(MemoryPane))

    async def on_event(self, event: events.Event) -> None:
        """Keys and pastes go to the status line while it asks a question (`action_prompt`)."""
        if isinstance(event, events.Key | events.Paste) and self.status.asking:
            if isinstance(event, events.Paste):
                self.status.paste(event.text)
                return
            if self.status.take(event):
                return
        await super().on_event(event)

    @property
    def _sessions(self) -> list[Session]:
        return [self.session] if self.diff is None else [self.session, self.diff.b]

    def on_mount(self) -> None:
        self.trace_pane.focus()
        self._open_at_start()
        if self._freeze_heap:
            self.call_after_refresh(_settle_heap)
        if self._targets_later:
            self.call_after_refresh(self.run_worker, self._load_targets, thread=True)

    def _load_targets(self) -> None:
        """(A worker thread's.) Load the branch targets' decoders, then show the targets."""
        for opened in self._sessions:
            opened.load_targets()
        self.call_from_thread(self._show_targets)

    def _show_targets(self) -> None:
        for pane in self.query(TracePane):
            pane.forget_rendered()
        self._go(self.cpu, self.cursors[self.cpu])
        if self._freeze_heap:  # the decoders' modules too (numba, capstone: some 85,000 objects)
            gc.freeze()

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
        """The cursor's point: after this instruction (the last of a folded call)."""
        return self._point(self.cpu, self.cursors[self.cpu])

    def _point(self, cpu: int, index: int) -> int:
        folded = self.session.folds.folded_at(cpu, index)
        return self.session.seq_of(cpu, index if folded is None else folded.last_index)

    def go_to_seq(self, seq: int) -> None:
        """Move the cursor to instruction `seq` (on its own core; the line of the folded call
        holding it, if one does)."""
        cpu = self.session.cpu_of(seq)
        index = self.session.index_of(cpu, seq)
        if index is None:
            raise CputraceError(f"no instruction with seq {seq}")
        self._go(cpu, index)

    def _go(self, cpu: int, index: int) -> None:
        """Put core `cpu`'s cursor at `index` (clamped to its instructions, on the line showing
        it), show that core, and re-read every pane at the new point."""
        session = self.session
        index = session.folds.shown(cpu, max(0, min(index, session.count(cpu) - 1)))
        self.cpu = cpu
        self.cursors[cpu] = index
        seq = self._point(cpu, index)
        self._show_trace(cpu, index)
        self.registers_pane.show(session.register_names(cpu), session.registers(cpu, seq))
        for pane in self.memory_panes:
            self._show_memory(pane)
        self.calls_pane.show([self._stack_row(frame) for frame in session.stack(cpu, seq)])
        self._show_timeline(cpu, seq)
        if self.source_pane.display:
            pc = session.line(seq).pc
            self.source_pane.show(session.source(pc), pc)
        self._show_place(cpu, index, seq)

    def _stack_row(self, frame: Frame) -> StackRow:
        site = "" if frame.call_pc is None else self.session.symbol(frame.call_pc) or f"0x{frame.call_pc:x}"
        return StackRow(frame.name, site, frame.entry_seq, frame.call_seq)

    def _show_trace(self, cpu: int, index: int) -> None:
        pane, session = self.trace_pane, self.session
        diff = self.diff
        divergent = None if diff is None else functools.partial(diff.divergent_seqs, cpu)
        self._on_screen, self._cursor_line = _show_lines(pane, session, cpu, index, self.top, divergent)
        if diff is not None:
            self._show_other(cpu, self._point(cpu, index))

    def _show_other(self, cpu: int, seq: int) -> None:
        """Trace B's lines beside A's cursor: the instruction paired with it, or B's last
        paired one before it."""
        diff, pane = self.diff, self.query_one("#trace-b", TracePane)
        assert diff is not None
        b_seq, paired = diff.aligned(cpu, seq)
        b_index = None if b_seq is None else diff.b.index_of(cpu, b_seq)
        if b_index is None:
            pane.show([note("(trace B has nothing here)")], range(0))
            return
        _, b_line = _show_lines(pane, diff.b, cpu, b_index, self.top_b, None)
        pane.set_title("Trace B" if paired else "Trace B (A's instruction is only in A)")
        a_line = self._cursor_line
        if not paired:
            differences = []
        elif a_line.seq == seq and a_line.folded is None and b_line.seq == b_seq and b_line.folded is None:
            differences = diff.line_differences(a_line, b_line)  # the lines just shown
        else:
            differences = diff.differences(seq, b_seq)
        if differences:
            shown = ", ".join(f"{d.what} {_value(d.a)} | {_value(d.b)}" for d in differences[:4])
            self.say(f"A | B differ: {shown}")

    @_reported
    def action_divergence(self, direction: int) -> None:
        """To the next (1) or previous (-1) divergence from trace B (--diff)."""
        if self.diff is None:
            self.say("no trace to compare with: give one with --diff")
            return
        found = self.diff.next_divergence(self.cpu, self.seq, direction > 0)
        if found is None:
            self.say(f"no {'later' if direction > 0 else 'earlier'} divergence on cpu {self.cpu}")
            return
        self.go_to_seq(found.a_seq if found.a_seq is not None else found.position)
        if not self.status.message:
            self.say(f"divergence: {', '.join(found.kinds)} (A seq {found.a_seq}, B seq {found.b_seq})")

    def _show_timeline(self, cpu: int, seq: int) -> None:
        """The strip of core `cpu` at the pane's size (summed once per core and size)."""
        pane = self.timeline_pane
        key = (cpu, pane.columns, pane.rows)
        if key not in self._strips:
            self._strips[key] = self.session.timeline(*key)
        strip = self._strips[key]
        pane.show(strip, self.session.timeline_column(strip, seq))

    @_reported
    def on_timeline_pane_clicked(self, event: TimelinePane.Clicked) -> None:
        strip = self.timeline_pane.strip
        if strip is not None:
            self.go_to_seq(self.session.timeline_seq(strip, event.column))

    @_reported
    def action_timeline(self, direction: int) -> None:
        """To the next (1) or previous (-1) stretch of the timeline strip."""
        pane = self.timeline_pane
        if pane.strip is None:
            return
        column = pane.cursor + direction
        if not 0 <= column < pane.strip.columns:
            return
        self.go_to_seq(self.session.timeline_seq(pane.strip, column))

    @_reported
    def action_toggle_source(self) -> None:
        pane = self.source_pane
        if not self._has_sources:
            self.say("no source lines: give the program's ELF, with its line tables, with --image")
            return
        pane.display = not pane.display
        self._go(self.cpu, self.cursors[self.cpu])

    def _show_place(self, cpu: int, index: int, seq: int) -> None:
        session = self.session
        line = self._cursor_line
        if line.folded is not None:  # the point is after the call: its last instruction
            line = session.line(seq)
        count = session.count(cpu)
        where = [f"seq {seq}"]
        if line.time is not None:
            where.append(f"time {line.time}")
        where.append(f"cpu {cpu}")
        where.append(f"pc 0x{line.pc:x}")
        if line.symbol:
            where.append(line.symbol)
        where.append(f"{index + 1:,}/{count:,} ({100 * (index + 1) / count:.0f}%)")
        if len(session.cores) > 1:
            others = [(c, s) for c, s in session.positions_at(seq).items() if c != cpu]
            where.append("others: " + ", ".join(f"cpu {c} " + ("not started" if s is None else f"seq {s}")
                                                for c, s in others))  # fmt: skip
        if self.bookmarks:
            where.append(f"bookmarks {len(self.bookmarks)}")
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
        self._go(self.cpu, self.session.move(self.cpu, self.cursors[self.cpu], delta, self.session.folds))

    @_reported
    def action_page(self, direction: int) -> None:
        self.status.clear()
        rows = direction * max(1, self._on_screen - 1)
        self._go(self.cpu, self.session.move(self.cpu, self.cursors[self.cpu], rows, self.session.folds))

    @_reported
    def action_first(self) -> None:
        self._go(self.cpu, 0)

    @_reported
    def action_last(self) -> None:
        self._go(self.cpu, self.session.count(self.cpu) - 1)

    @_reported
    def action_step_over(self) -> None:
        """To the instruction a call made by the next instruction returns to (a step if the next
        instruction makes no call)."""
        cpu, index = self.cpu, self.cursors[self.cpu]
        if index + 1 >= self.session.count(cpu):
            return
        stack = self.session.stack(cpu, self.session.seq_of(cpu, index + 1))
        entered = stack[-1] if stack and stack[-1].index == index + 1 and stack[-1].depth > 0 else None
        self._go(cpu, index + 1 if entered is None else entered.last_index + 1)

    def action_prompt(self, what: str) -> None:
        question, answer = _PROMPTS[what]
        self.status.ask(question, functools.partial(answer, self))

    @_reported
    def _go_to_expression(self, text: str) -> None:
        self.go_to_seq(self.session.evaluate(text, self.cpu, self.seq))

    @_reported
    def _go_to_time(self, text: str) -> None:
        time = self.session.evaluate(text, self.cpu, self.seq)
        self.go_to_seq(self.session.seq_at_time(time, self.cpu))

    def _visit_next(self, text: str) -> None:
        self._repeat = ("pc", text)
        self.action_repeat(1)

    def _visit_previous(self, text: str) -> None:
        self._repeat = ("pc", text)
        self.action_repeat(-1)

    def _search_next(self, text: str) -> None:
        self._repeat = ("sql", text)
        self.action_repeat(1)

    def _search_previous(self, text: str) -> None:
        self._repeat = ("sql", text)
        self.action_repeat(-1)

    @_reported
    def action_repeat(self, direction: int) -> None:
        """The next (1) or previous (-1) visit of the last pc, or match of the last search."""
        if self._repeat is None:
            self.say("no pc visit or search to repeat yet (p, P, / or \\ first)")
            return
        kind, text = self._repeat
        forward = direction > 0
        way = "later" if forward else "earlier"
        if kind == "pc":
            address = self.session.evaluate(text, self.cpu, self.seq)
            found = self.session.next_visit(self.cpu, self.seq, forward, pc=address)
            missing = f"no {way} visit of {text} (0x{address:x}) on cpu {self.cpu}"
        else:
            found = self.session.search(text, self.cpu, self.seq, forward)
            missing = f"no {way} instruction where {text}"
        if found is None:
            self.say(missing)
            return
        self.go_to_seq(found)
        self.say(f"{kind} {text}: seq {found}", error=False)

    @_reported
    def action_event(self, direction: int) -> None:
        """The next (1) or previous (-1) exception or trace gap."""
        found = self.session.next_mark(self.cpu, self.seq, direction > 0)
        if found is None:
            self.say(f"no {'later' if direction > 0 else 'earlier'} exception or trace gap on cpu {self.cpu}")
            return
        seq, kind = found
        self.go_to_seq(seq)
        self.say(f"{kind} at seq {seq}", error=False)

    @_reported
    def action_fold(self, how: str) -> None:
        """Fold or unfold calls (the reference browser's - + [ ] { } keys)."""
        session, cpu, seq = self.session, self.cpu, self.seq
        if how == "call":
            frame = session.fold_call(cpu, seq)
            said = "no call holds the cursor" if frame is None else f"folded {frame.name}"
        elif how == "unfold":
            frame = session.unfold(cpu, seq)
            said = "no folded call at the cursor" if frame is None else f"unfolded {frame.name}"
        elif how == "inner":
            frame = session.fold_callees(cpu, seq)
            said = "no function holds the cursor" if frame is None else f"folded the calls of {frame.name}"
        elif how == "unfold_inner":
            frame = unfold_inside(session, cpu, self.cursors[cpu])
            said = "no function holds the cursor" if frame is None else f"unfolded all inside {frame.name}"
        elif how == "unfold_all":
            session.unfold_all()
            said = "unfolded every call"
        else:
            fold_everything(session)
            said = "folded every call"
        self._go(cpu, self.cursors[cpu])
        self.say(said, error=False)

    @_reported
    def action_next_core(self) -> None:
        """Show the next core, at its own cursor."""
        cores = self.session.cores
        if len(cores) == 1:
            self.say(f"the trace has one core (cpu {cores[0]})")
            return
        cpu = cores[(cores.index(self.cpu) + 1) % len(cores)]
        self._go(cpu, self.cursors[cpu])

    @_reported
    def on_calls_pane_jump_to_call(self, event: CallsPane.JumpToCall) -> None:
        self.go_to_seq(event.seq)

    def action_call_tree(self) -> None:
        self.push_screen(CallTreeScreen(self.session.call_tree(self.cpu)), self._open_call)

    @_reported
    def _open_call(self, index: int | None) -> None:
        if index is not None:
            self._go(self.cpu, index)

    @_reported
    def action_bookmark(self) -> None:
        seq = self.seq
        if seq in self.bookmarks:
            self.bookmarks.remove(seq)
            self.say(f"bookmark at seq {seq} cleared", error=False)
        else:
            self.bookmarks = sorted([*self.bookmarks, seq])
            self.say(f"bookmark at seq {seq}", error=False)
        self._go(self.cpu, self.cursors[self.cpu])

    @_reported
    def action_next_bookmark(self) -> None:
        if not self.bookmarks:
            self.say("no bookmarks (b sets one)")
            return
        later = [b for b in self.bookmarks if b > self.seq]
        seq = later[0] if later else self.bookmarks[0]
        self.go_to_seq(seq)
        self.say(f"bookmark {self.bookmarks.index(seq) + 1} of {len(self.bookmarks)}: seq {seq}", error=False)

    def action_focus_pane(self, name: str) -> None:
        self.query_one(f"#{name}", Widget).focus()

    def action_lock_memory(self) -> None:
        panes = self.memory_panes
        if not panes:
            self.say("no Memory pane (m opens one)")
            return
        pane = self.focused if isinstance(self.focused, MemoryPane) else panes[-1]
        pane.action_toggle_lock()
        state = "unlocked" if pane.locked is None else f"locked at seq {pane.locked}"
        self.say(f"Memory {pane.expression}: {state}", error=False)

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

    def _handle_exception(self, error: Exception) -> None:
        """An error of ours that no request caused (a damaged index file, found while drawing)
        ends the app quietly, and the command tells it in one line (`failure`); anything else
        is a bug, which Textual shows with its traceback."""
        if isinstance(error, CputraceError) and self.failure is None:
            self.failure = error
            self.exit(return_code=1)
            return
        super()._handle_exception(error)

    # -- without a terminal --------------------------------------------------------------

    def screenshot(self, path: Path) -> None:
        """Run headless, write the first screen to `path` as SVG, and stop."""

        async def shoot(pilot: Any) -> None:
            await pilot.pause()
            if self.return_code is None:  # not ended by an error
                self.save_screenshot(path.name, str(path.parent))
                self.exit()

        self.run(headless=True, size=SCREENSHOT_SIZE, auto_pilot=shoot)
        if self.failure is not None:
            raise self.failure
        if self.return_code:
            raise RuntimeError(f"the browser failed before its screenshot (status {self.return_code})")


def _settle_heap() -> None:
    """Leave the objects alive now out of the garbage collector's passes (`gc.freeze`), and
    make its full passes rarer (see `FULL_PASS_EVERY`)."""
    gc.freeze()
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, FULL_PASS_EVERY)


def _show_lines(
    pane: TracePane,
    session: Session,
    cpu: int,
    index: int,
    tops: dict[int, int],
    divergent: Callable[[int, int], set[int]] | None,
) -> tuple[int, Line]:
    """Show the screenful of `session`'s lines with the line of instruction `index` on it in
    `pane`: the screen (its first line in `tops[cpu]`) scrolls only when the cursor leaves it,
    and then puts the cursor's line in its middle (as `less` and `vi` do after a jump: a step
    past the last line scrolls half a screen, not one line a step, each a repaint of the
    whole pane); lines whose seq is in `divergent(first seq, last seq)` are marked. The number
    of lines of instructions shown (whole or cut), and the cursor's line."""
    folds = session.folds
    rows = pane.rows
    top = min(tops.get(cpu, 0), index)
    lines = session.lines(cpu, top, rows, folds)
    at = next((i for i, line in enumerate(lines) if line.index == index), None)
    if at is None or sum(line.height for line in lines[: at + 1]) > rows:  # scroll: the cursor to the middle
        above = rows // 2
        lines = session.lines(cpu, session.move(cpu, index, -above, folds), rows, folds)
        at = next(i for i, line in enumerate(lines) if line.index == index)
        drop, over_cursor = 0, sum(line.height for line in lines[:at])
        while drop < at and over_cursor > above:
            over_cursor -= lines[drop].height
            drop += 1
        lines, at = lines[drop:], at - drop
        used = sum(line.height for line in lines)
        if used < rows:  # fill the screen below the cursor
            lines += session.lines(cpu, lines[-1].index, rows - used + 1, folds)[1:]
    multicore = len(session.cores) > 1
    rows_shown: list[Row] = []
    cursor = range(0)
    shown = 0
    divergent_seqs = divergent(lines[0].seq, lines[-1].seq) if divergent is not None and lines else set()
    for i, line in enumerate(lines):
        if len(rows_shown) >= rows:
            break
        block = pane.rendered(line, multicore)
        if i == at:
            cursor = range(len(rows_shown), len(rows_shown) + len(block))
        if line.seq in divergent_seqs:
            block = [marked(block[0]), *block[1:]]
        rows_shown.extend(block)
        shown += 1
    tops[cpu] = lines[0].index
    pane.show(rows_shown[:rows], cursor)
    return shown, lines[at]


def _value(value: object) -> str:
    if isinstance(value, bytes):
        return "0x" + value[::-1].hex()
    return f"0x{value:x}" if isinstance(value, int) and not isinstance(value, bool) else str(value)


def unfold_inside(session: Session, cpu: int, index: int) -> Frame | None:
    """Unfold every call inside the function holding line `index` (the reference browser's
    `]`); that function's frame, or None."""
    frames = session.stack(cpu, session.seq_of(cpu, index))
    folded = session.folds.folded_at(cpu, index)
    inside = [f for f in frames if folded is None or f.depth < folded.depth]
    if not inside:
        return None
    function = inside[-1]
    folds = session.folds
    for table in (folds.folded, folds.callees_of):
        ids = table.get(cpu, set())
        for frame_id in list(ids):
            frame = session.calls.frame(frame_id)
            if function.contains(frame.index):
                ids.discard(frame_id)
    return function


def fold_everything(session: Session) -> None:
    """Fold every call of every core as far as it goes, into the calls its outermost function
    makes (the reference browser's `}`)."""
    for cpu in session.cores:
        outermost = session.stack(cpu, session.seq_of(cpu, 0))[:1]
        if outermost:
            session.folds.callees_of.setdefault(cpu, set()).add(outermost[0].id)


_PROMPTS: dict[str, tuple[str, Callable[[BrowseApp, str], Any]]] = {
    "goto": ("Go to seq (an expression: 1200, 0x4b0):", BrowseApp._go_to_expression),
    "time": ("Go to time:", BrowseApp._go_to_time),
    "pc_next": ("Next visit of pc (an expression: main, main+0x10, 0x8000):", BrowseApp._visit_next),
    "pc_previous": ("Previous visit of pc (an expression):", BrowseApp._visit_previous),
    "search_next": ("Search forward: an SQL condition over instructions (pc = 0x8000 AND NOT executed):",
                    BrowseApp._search_next),
    "search_previous": ("Search backward: an SQL condition over instructions:", BrowseApp._search_previous),
    "memory": ("Memory at (an expression: sp+16, buffer, 0x8000):", BrowseApp.open_memory),
}
