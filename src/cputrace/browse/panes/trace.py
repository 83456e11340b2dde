"""The Trace pane: the screenful of trace lines around the cursor, the cursor's instruction
highlighted.

The pane holds only the lines on screen: the app reads that many from the session whenever
the cursor or the pane's height changes (virtual scrolling), so its cost does not depend on
the size of the trace.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.geometry import Region
from textual.message import Message
from textual.strip import Strip
from textual.widget import Widget

from ..lines import Line

RENDERED_KEPT = 1024
"""Lines whose rendering a pane keeps: a few screens."""
CURSOR = Style(reverse=True, bold=True)
CURSOR_RECORDS = Style(bgcolor="grey23")


class TracePane(Widget, can_focus=True):
    """Lines of the trace; `cursor` rows (the instruction and its records) are highlighted."""

    DEFAULT_CSS = "TracePane { height: 1fr; border: round $primary; }"

    class Resized(Message):
        """The pane's height changed: the app reads a screenful again."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.border_title = "Trace"
        self._lines: list[Text] = []
        self._cursor: range = range(0)
        self._rendered: OrderedDict[tuple, list[Text]] = OrderedDict()
        self._segments: dict[int, tuple[Text, Strip]] = {}
        """The segments of each line shown, by the id of its Text (kept with it): a repaint of
        the pane, or a scroll, renders only the lines it had not shown."""

    def rendered(self, line: Line, multicore: bool) -> list[Text]:
        """`rendered(line, multicore)`, kept for the lines seen last (a step re-shows a screen
        of them); the Texts are shared: copy one before changing it."""
        key = (line.seq, line.folded, multicore)
        found = self._rendered.get(key)
        if found is None:
            found = self._rendered[key] = rendered(line, multicore)
            if len(self._rendered) > RENDERED_KEPT:
                self._rendered.popitem(last=False)
        else:
            self._rendered.move_to_end(key)
        return found

    def forget_rendered(self) -> None:
        """Render lines anew from now on (their lines have changed: branch targets named)."""
        self._rendered.clear()

    @property
    def rows(self) -> int:
        """Lines that fit in the pane."""
        return max(1, self.content_region.height or 20)

    def show(self, lines: Sequence[Text], cursor: range) -> None:
        """`lines` from the top of the pane; `cursor` the rows of the cursor's instruction.
        Only the rows that change are repainted (a step without scrolling: the cursor's)."""
        old, old_cursor = self._lines, self._cursor
        self._lines = list(lines)
        self._cursor = cursor
        kept = self._segments
        self._segments = {id(text): kept[id(text)] for text in self._lines if id(text) in kept}
        width = self.size.width
        changed = [
            Region(0, y, width, 1)
            for y in range(max(len(old), len(self._lines)))
            if y >= len(old)
            or y >= len(self._lines)
            or _row_style(y, old_cursor) != _row_style(y, cursor)
            or not (old[y] is self._lines[y] or old[y] == self._lines[y])
        ]
        if changed:
            self.refresh(*changed)

    def on_resize(self) -> None:
        self.post_message(self.Resized())

    def lines(self) -> list[str]:
        """The lines shown, as plain text."""
        return [line.plain for line in self._lines]

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if y >= len(self._lines):
            return Strip.blank(width, self.rich_style)
        text = self._lines[y]
        found = self._segments.get(id(text))
        if found is None:
            found = self._segments[id(text)] = (text, Strip(list(text.render(self.app.console))))
        strip = found[1].crop(0, width)
        style = _row_style(y, self._cursor)
        if style is not None:
            strip = Strip(list(Segment.apply_style(strip, post_style=style))).extend_cell_length(width, style)
        return strip


def _row_style(y: int, cursor: range) -> Style | None:
    """The cursor's style of row `y`: the instruction's, its records', or None (not the cursor's)."""
    if y not in cursor:
        return None
    return CURSOR if y == cursor.start else CURSOR_RECORDS


PC = "bright_blue"
OPCODE = "grey50"
DISASM = "bold"
FAILED = "dim strike"
_CONDITION = {True: "IT ", False: "IS ", None: "I? "}
"""The condition outcome as Tarmac prints it, and `I?` where the trace does not say (PTM)."""
SYMBOL = "magenta"
REGISTER = "green"
READ = "cyan"
WRITE = "yellow"
EVENT = "bold red"
TEXT = "grey50"
FOLDED = "bold magenta"
RECONSTRUCTED = "italic"


def rendered(line: Line, multicore: bool) -> list[Text]:
    """An instruction and its records as Tarmac-like lines: the instruction, then one line per
    register write, memory access and event under it."""
    head = Text(no_wrap=True)
    head.append(f"{line.seq:>9} ")
    head.append(f"{'' if line.time is None else line.time:>9} ", style="grey62")
    if multicore:
        head.append(f"cpu{line.cpu} ", style="bold")
    if line.folded is not None:
        call = line.folded
        folded = f"{call.instructions:,} instructions folded (seq {call.entry_seq}..{call.end_seq})"
        head.append(f"▸ {call.function}: {folded}", style=FOLDED)
        return [head]
    failed = line.executed is False
    head.append(_CONDITION[line.executed], style=FAILED if failed else "")
    head.append(f"{line.pc:08x} ", style=PC)
    head.append(f"{line.opcode:0{2 * line.size}x} " if line.opcode is not None else "-------- ", style=OPCODE)
    head.append(f"{line.isa} {line.mode or '-'} ", style="grey62")
    mnemonic, _, operands = (line.disasm or "?").strip().partition(" ")
    disasm = f"{mnemonic:<7} {operands.strip()}".rstrip()
    if line.target_symbol:
        disasm = f"{disasm} <{line.target_symbol}>"
    style = FAILED if failed else DISASM
    head.append(disasm, style=f"{style} {RECONSTRUCTED}" if line.reconstructed else style)
    if line.reconstructed:
        head.append("  [reconstructed]", style=RECONSTRUCTED)
    if line.symbol:
        head.append(f"  {line.symbol}", style=SYMBOL)
    lines = [head]
    indent = " " * 20
    for r in line.registers:
        lines.append(Text.assemble(indent, ("R ", REGISTER), (f"{r.name} {r.hex()}", REGISTER), no_wrap=True))
    for m in line.memory:  # a trace buffer may give no address, size or value: shown as ?
        digits = 2 * (m.size or 1)
        wide = bytes(reversed(m.wide or b"")).hex() or "?"
        value = f"{m.value:0{digits}x}" if m.value is not None else wide
        address = "?" if m.address is None else f"{m.address:08x}"
        style = WRITE if m.op in ("W", "U") else READ
        lines.append(Text.assemble(indent, (f"M{m.op}{m.size or ''} {address} {value}", style), no_wrap=True))
    for e in line.events:
        style = TEXT if e.kind == "text" else EVENT
        words = [e.kind, e.name or "", "" if e.number is None else str(e.number), e.text or ""]
        if e.value is not None:
            words.append(f"0x{e.value:x}")
        lines.append(Text.assemble(indent, (" ".join(w for w in words if w), style), no_wrap=True))
    return lines
