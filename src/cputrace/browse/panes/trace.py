"""The Trace pane: the screenful of trace lines around the cursor, the cursor's instruction
highlighted.

The pane holds only the lines on screen: the app reads that many from the session whenever
the cursor or the pane's height changes (virtual scrolling), so its cost does not depend on
the size of the trace. A line is drawn as segments made straight from its fields, in styles
parsed once (`rendered`): 15-22 µs of CPU an instruction with its records, against 80-170 µs
built as Rich Text and rendered by Rich (a far jump with trace B beside draws some 35 new
instructions); and only the lines on the screen are drawn (`Line.height` says where the
cursor's line falls without drawing any).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import NamedTuple

from rich.segment import Segment
from rich.style import Style
from textual.color import Color
from textual.containers import Vertical
from textual.filter import LineFilter
from textual.geometry import Region
from textual.message import Message
from textual.strip import Strip
from textual.style import Style as TextualStyle
from textual.widget import Widget

from ..lines import Line

RENDERED_KEPT = 256
"""Instructions whose rendering a pane keeps: some fifteen screens."""
Row = tuple[Segment, ...]
"""One line of the pane, as segments: a Strip is made only for a row on the screen (a Strip
holds nine caches, and kept by the thousand they made each full garbage collection 3-4 times
longer)."""
CURSOR = Style(reverse=True, bold=True)
CURSOR_RECORDS = Style(bgcolor="grey23")


class TraceFrame(Vertical):
    """The border and title around a Trace pane (the pane itself has none: see `TracePane`)."""

    DEFAULT_CSS = "TraceFrame { width: 1fr; height: 1fr; border: round $primary; }"

    def __init__(self, pane: TracePane, title: str = "Trace") -> None:
        super().__init__(pane)
        self.border_title = title


class TracePane(Widget, can_focus=True):
    """Lines of the trace; `cursor` rows (the instruction and its records) are highlighted.

    The pane has no border, padding, tint or opacity (its `TraceFrame` draws the border), so
    it draws its rows to the end itself (`render_lines`) rather than through Textual's
    StylesCache, whose stages (borders, padding, post-processing, a Strip a stage) took some
    0.13 ms of CPU a row, three times the row's own drawing, for nothing to add: a far jump
    with trace B beside draws some 60 rows. Each row's final Strip is kept with the row
    while it is shown, so a repaint of rows that did not change is a lookup."""

    DEFAULT_CSS = "TracePane { width: 1fr; height: 1fr; }"

    class Resized(Message):
        """The pane's height changed: the app reads a screenful again."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._lines: list[Row] = []
        self._strips: dict[tuple[int, Style | None], tuple[Row, Strip]] = {}
        """The final Strip of each row shown, by the id of the row (kept with it) and its
        cursor style: a repaint, or a scroll, draws only the rows it had not shown."""
        self._paint: _Paint | None = None
        """What the kept Strips were drawn for."""
        self._cursor: range = range(0)
        self._rendered: OrderedDict[tuple, list[Row]] = OrderedDict()

    def rendered(self, line: Line, multicore: bool) -> list[Row]:
        """`rendered(line, multicore)`, kept for the lines seen last (a step re-shows a screen
        of them)."""
        key = (line.seq, line.folded, multicore)
        found = self._rendered.get(key)
        if found is None:
            found = self._rendered[key] = rendered(line, multicore)
            if len(self._rendered) > RENDERED_KEPT:
                self._rendered.popitem(last=False)
        else:
            self._rendered.move_to_end(key)
        return found

    def set_title(self, title: str) -> None:
        """Title the pane's frame; only a new title repaints it (setting `border_title`
        repaints the whole frame, even with the same title)."""
        frame = self.parent
        if isinstance(frame, TraceFrame) and title != frame.border_title:
            frame.border_title = title

    def forget_rendered(self) -> None:
        """Render lines anew from now on (their lines have changed: branch targets named)."""
        self._rendered.clear()

    @property
    def rows(self) -> int:
        """Lines that fit in the pane."""
        return max(1, self.content_region.height or 20)

    def show(self, lines: Sequence[Row], cursor: range) -> None:
        """`lines` from the top of the pane; `cursor` the rows of the cursor's instruction.
        Only the rows that change are repainted (a step without scrolling: the cursor's)."""
        old, old_cursor = self._lines, self._cursor
        self._lines = list(lines)
        self._cursor = cursor
        kept = self._strips
        self._strips = {}
        for y, row in enumerate(self._lines):
            key = (id(row), _row_style(y, cursor))
            if key in kept:
                self._strips[key] = kept[key]
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
        return ["".join(segment.text for segment in row) for row in self._lines]

    def render_lines(self, crop: Region) -> list[Strip]:
        """The rows in `crop`: those kept from an earlier paint as they were, the others drawn
        (`render_line`)."""
        paint = self._painting()
        blank = paint.filtered(Strip.blank(paint.width, self.rich_style))
        strips = []
        for y in crop.line_range:
            if y >= len(self._lines):
                strips.append(blank)
                continue
            found = self._strips.get((id(self._lines[y]), _row_style(y, self._cursor)))
            strips.append(self.render_line(y) if found is None else found[1])
        if crop.column_span != (0, paint.width):
            strips = [strip.crop(*crop.column_span) for strip in strips]
        return strips

    def _painting(self) -> _Paint:
        """What the pane's rows are drawn for now (the rows kept are forgotten if it changed)."""
        base_background, background = self.background_colors
        padding = TextualStyle(background=base_background + background).rich_style
        paint = _Paint(self.size.width, padding, background, tuple(self.app.get_line_filters()))
        if paint != self._paint:
            self._strips.clear()
            self._paint = paint
        return paint

    def render_line(self, y: int) -> Strip:
        """Row `y` as it is drawn now (and kept for the next paint): in the cursor's style if
        it is the cursor's, cut or padded to the pane's width (in its background, or the
        cursor's style), through the app's line filters: the steps on segment lists, one Strip
        made at the end (Strip's own methods make one a step, each with its caches)."""
        paint = self._paint or self._painting()
        if y >= len(self._lines):
            return paint.filtered(Strip.blank(paint.width, self.rich_style))
        row, style = self._lines[y], _row_style(y, self._cursor)
        if style is None:
            segments = Segment.adjust_line_length(list(row), paint.width, paint.padding)
        else:
            styled = list(Segment.apply_style(row, post_style=style))
            segments = Segment.adjust_line_length(styled, paint.width, style)
        for line_filter in paint.filters:
            segments = line_filter.apply(segments, paint.background)
        strip = Strip(segments, paint.width)
        self._strips[id(row), style] = (row, strip)
        return strip


class _Paint(NamedTuple):
    """What a Trace pane's rows are drawn for: when it changes, they are drawn anew."""

    width: int
    padding: Style
    """The pane's background, after a row's end."""
    background: Color
    filters: tuple[LineFilter, ...]
    """The app's line filters (ANSI colours to the theme's, NO_COLOR, ...)."""

    def filtered(self, strip: Strip) -> Strip:
        for line_filter in self.filters:
            strip = strip.apply_filter(line_filter, self.background)
        return strip


def _row_style(y: int, cursor: range) -> Style | None:
    """The cursor's style of row `y`: the instruction's, its records', or None (not the cursor's)."""
    if y not in cursor:
        return None
    return CURSOR if y == cursor.start else CURSOR_RECORDS


PLAIN = Style.null()
TIME = Style.parse("grey62")
CPU = Style.parse("bold")
PC = Style.parse("bright_blue")
OPCODE = Style.parse("grey50")
ISA = TIME
DISASM = Style.parse("bold")
FAILED = Style.parse("dim strike")
RECONSTRUCTED = Style.parse("italic")
_DISASM = {
    (failed, reconstructed): (FAILED if failed else DISASM) + (RECONSTRUCTED if reconstructed else PLAIN)
    for failed in (False, True)
    for reconstructed in (False, True)
}
"""The disassembly's style, by (condition failed, reconstructed)."""
_CONDITION = {True: "IT ", False: "IS ", None: "I? "}
"""The condition outcome as Tarmac prints it, and `I?` where the trace does not say (PTM)."""
SYMBOL = Style.parse("magenta")
REGISTER = Style.parse("green")
READ = Style.parse("cyan")
WRITE = Style.parse("yellow")
EVENT = Style.parse("bold red")
TEXT = Style.parse("grey50")
FOLDED = Style.parse("bold magenta")
DIVERGENT = Style.parse("on dark_red")
"""A line of an instruction that differs from trace B's (`marked`)."""
NOTE = Style.parse("dim")
_INDENT = Segment(" " * 20, PLAIN)
"""Where a record's line starts: under the instruction's pc."""


def rendered(line: Line, multicore: bool) -> list[Row]:
    """An instruction and its records as Tarmac-like lines: the instruction, then one line per
    register write, memory access and event under it."""
    head = [Segment(f"{line.seq:>9} ", PLAIN), Segment(f"{'' if line.time is None else line.time:>9} ", TIME)]
    if multicore:
        head.append(Segment(f"cpu{line.cpu} ", CPU))
    if line.folded is not None:
        call = line.folded
        folded = f"{call.instructions:,} instructions folded (seq {call.entry_seq}..{call.end_seq})"
        head.append(Segment(f"▸ {call.function}: {folded}", FOLDED))
        return [tuple(head)]
    failed = line.executed is False
    head.append(Segment(_CONDITION[line.executed], FAILED if failed else PLAIN))
    head.append(Segment(f"{line.pc:08x} ", PC))
    opcode = f"{line.opcode:0{2 * line.size}x} " if line.opcode is not None else "-------- "
    head.append(Segment(opcode, OPCODE))
    head.append(Segment(f"{line.isa} {line.mode or '-'} ", ISA))
    mnemonic, _, operands = (line.disasm or "?").strip().partition(" ")
    disasm = f"{mnemonic:<7} {operands.strip()}".rstrip()
    if line.target_symbol:
        disasm = f"{disasm} <{line.target_symbol}>"
    reconstructed = line.reconstructed
    head.append(Segment(disasm, _DISASM[failed, reconstructed]))
    if reconstructed:
        head.append(Segment("  [reconstructed]", RECONSTRUCTED))
    if line.symbol:
        head.append(Segment(f"  {line.symbol}", SYMBOL))
    lines = [tuple(head)]
    for r in line.registers:
        lines.append((_INDENT, Segment(f"R {r.name} {r.hex()}", REGISTER)))
    for m in line.memory:  # a trace buffer may give no address, size or value: shown as ?
        digits = 2 * (m.size or 1)
        wide = bytes(reversed(m.wide or b"")).hex() or "?"
        value = f"{m.value:0{digits}x}" if m.value is not None else wide
        address = "?" if m.address is None else f"{m.address:08x}"
        style = WRITE if m.op in ("W", "U") else READ
        lines.append((_INDENT, Segment(f"M{m.op}{m.size or ''} {address} {value}", style)))
    for e in line.events:
        style = TEXT if e.kind == "text" else EVENT
        words = [e.kind, e.name or "", "" if e.number is None else str(e.number), e.text or ""]
        if e.value is not None:
            words.append(f"0x{e.value:x}")
        lines.append((_INDENT, Segment(" ".join(w for w in words if w), style)))
    return lines


def marked(row: Row) -> Row:
    """`row` on the background of a divergent instruction."""
    return tuple(Segment.apply_style(row, post_style=DIVERGENT))


def note(text: str) -> Row:
    """A line saying something about the pane rather than showing the trace."""
    return (Segment(text, NOTE),)
