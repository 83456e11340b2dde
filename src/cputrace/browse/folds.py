"""Folded calls: which calls the trace pane shows as one line, and the rows it shows then.

A call is folded by itself (`fold_call`, the reference browser's `-`), or because it is a call
made by a folded-into function (`fold_callees`, `[`: every call inside the current function).
Where folds nest, the outermost wins. The pane's rows are then segments of a core's
instruction indexes: runs shown one instruction a line, and folded calls, one line each.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .calls import CallIndex, Frame


@dataclass(frozen=True, slots=True)
class Segment:
    """Rows of the pane: instructions `start` to `stop - 1` one a line, or (`call` set) the
    folded call that spans them, as one line."""

    start: int
    stop: int
    call: Frame | None = None


@dataclass
class Folds:
    """The folds of every core: frames folded, and frames whose callees are folded (by id)."""

    calls: CallIndex
    folded: dict[int, set[int]] = field(default_factory=dict)
    callees_of: dict[int, set[int]] = field(default_factory=dict)

    def fold_call(self, cpu: int, index: int) -> Frame | None:
        """Fold the innermost call holding instruction `index` (None: it is in no call)."""
        frame = self.calls.innermost(cpu, index)
        if frame is None or frame.depth == 0:
            return None
        self.folded.setdefault(cpu, set()).add(frame.id)
        return frame

    def fold_callees(self, cpu: int, index: int) -> Frame | None:
        """Fold every call made by the innermost frame holding `index` (None: no frame does)."""
        frame = self.calls.innermost(cpu, index)
        if frame is not None:
            self.callees_of.setdefault(cpu, set()).add(frame.id)
        return frame

    def unfold(self, cpu: int, index: int) -> Frame | None:
        """Unfold the folded call shown at `index` (and any fold of the calls it made)."""
        call = self.folded_at(cpu, index)
        if call is None:
            return None
        self.folded.get(cpu, set()).discard(call.id)
        self.callees_of.get(cpu, set()).discard(call.parent)
        self.callees_of.get(cpu, set()).discard(call.id)
        return call

    def unfold_all(self, cpu: int | None = None) -> None:
        for table in (self.folded, self.callees_of):
            if cpu is None:
                table.clear()
            else:
                table.pop(cpu, None)

    def any(self, cpu: int) -> bool:
        return bool(self.folded.get(cpu) or self.callees_of.get(cpu))

    def folded_at(self, cpu: int, index: int) -> Frame | None:
        """The outermost folded call holding instruction `index`, or None."""
        if not self.any(cpu):
            return None
        folded, callees_of = self.folded.get(cpu, set()), self.callees_of.get(cpu, set())
        for frame in self.calls.stack(cpu, index)[1:]:
            if frame.id in folded or frame.parent in callees_of:
                return frame
        return None

    def shown(self, cpu: int, index: int) -> int:
        """The index of the line that shows instruction `index`: the entry of the folded call
        holding it, or itself."""
        call = self.folded_at(cpu, index)
        return index if call is None else call.index

    def segments(self, cpu: int, first: int, lines: int, count: int) -> list[Segment]:
        """The segments of `lines` rows of the pane from the line showing instruction `first`,
        of a core with `count` instructions (fewer at the end)."""
        index = self.shown(cpu, max(0, first))
        segments: list[Segment] = []
        shown = 0
        while shown < lines and index < count:
            call = self.folded_at(cpu, index)
            if call is not None:
                segments.append(Segment(call.index, call.last_index + 1, call))
                shown += 1
                index = call.last_index + 1
                continue
            stop = min(count, index + lines - shown, self._next_change(cpu, index))
            segments.append(Segment(index, stop))
            shown += stop - index
            index = stop
        return segments

    def _next_change(self, cpu: int, index: int) -> int:
        """Where the frames holding `index` next change: the innermost one's end, or the next entry."""
        if not self.any(cpu):
            return index + (1 << 62)
        innermost = self.calls.innermost(cpu, index)
        ends = [] if innermost is None else [innermost.last_index + 1]
        entry = self.calls.next_entry(cpu, index)
        if entry is not None:
            ends.append(entry)
        return max(index + 1, min(ends, default=index + (1 << 62)))
