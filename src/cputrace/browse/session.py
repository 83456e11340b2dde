"""The browsing engine: everything the browser shows and every move it makes, without Textual.

A `Session` answers from the browse index (index.py: the store's rows re-laid in small groups
by core, register snapshots, sorted pc visits, times and memory writes) and the calls index
(calls.py), so each answer reads a few small row groups, whatever the trace's size.

Points and positions. A point of a trace is a seq: the point after that instruction and all
its records. Each core's instructions are also numbered 0..count-1 in seq order ("index":
the position among the core's instructions, for scrolling); `seq_of` and `index_of` convert.

API (stable; the UI builds on it). Every error for bad input is a CputraceError subclass
(BrowseError, or UsageError for SQL) whose message fits a status line. A Session keeps
decoded groups and a DuckDB connection: use it from one thread at a time.

    session = Session.open(trace, image=None, cpu=None, progress=None, source_dirs=())
    session.cores                       cores with instructions, ascending
    session.cpu                         the core to start on (`cpu` given, else the first)
    session.count(cpu)                  instructions of the core
    session.seq_of(cpu, index)          seq of the core's instruction at `index`
    session.index_of(cpu, seq)          index of the core's last instruction at or before seq
                                        (None: it has none that early)
    session.cpu_of(seq)                 the core of instruction `seq`
    session.positions_at(seq)           every core's seq at the time of instruction `seq`
    session.seq_at_time(time, cpu=None) last instruction at or before `time` (of `cpu`, or of
                                        any core)
    session.line(seq)                   the Line (lines.py) of instruction `seq`
    session.lines(cpu, first, count, folds=None)
                                        Lines of the core from the line showing index `first`;
                                        with folds (`session.folds`), a folded call is one line
    session.move(cpu, index, rows, folds=None)   the index `rows` lines down (up: < 0)
    session.stack(cpu, seq)             Frames (calls.py) holding seq, outermost first
    session.call_at(cpu, seq)           (innermost call, seq of its last instruction) or None
    session.fold_call / fold_callees / unfold (cpu, seq), unfold_all()
                                        `-` `[` `+` `]`: change `session.folds`
    session.call_tree(cpu)              TreeNodes (calls.py): calls, inclusive insns and time
                                        per calling context, parents first
    session.register_names(cpu)         every register the core writes, general first
    session.registers(cpu, seq)         RegisterValue (analysis/state.py) of every register the
                                        core has written by seq (its last writer: `.seq`;
                                        written by instruction seq itself: `.seq == seq`)
    session.register_writer(cpu, name, seq)   seq that wrote the value (None: never written)
    session.memory(address, length, seq)      MemoryBytes (analysis/state.py), image bytes
                                              with an image
    session.memory_writer(address, size, seq) seq of the last write to any byte of the
                                              aligned `size`-byte unit around `address`
    session.evaluate(text, cpu, seq)    an address expression (expressions.py)
    session.next_visit(cpu, seq, forward=True, pc=None)   next/previous run of a pc
    session.goto_pc(address, cpu, seq)  next run of an address, wrapping round
    session.next_mark(cpu, seq, forward=True, kinds=MARK_KINDS)  (seq, kind) of the next
                                        or previous exception / trace gap
    session.search(condition, cpu, seq, forward=True)    next/previous instruction meeting
                                        an SQL condition (untrusted-SQL mode)
    session.symbol(address)             `name+0x10`, or None
    session.targets_later, load_targets()   lines without branch targets until the decoders
                                        are loaded (from another thread, say)
    session.timeline(cpu, columns, rows)  Strip (timeline.py): instructions per stretch of the
                                        trace and band of code addresses
    session.timeline_column(strip, seq) / timeline_seq(strip, column)   cursor <-> column
    session.source(pc, context=8)       SourceView (source.py): file, line and the text around
                                        it (files found as named or under `source_dirs`)
    session.has_time, session.last_seq
    session.close()

Two traces side by side: `DiffView.open(session_a, session_b)` (diffview.py): `aligned(cpu,
seq)`, `next_divergence(cpu, seq, forward)`, `divergences_at(cpu, seq)`, `differences(a_seq,
b_seq)`.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..analysis.state import MemoryBytes, RegisterValue
from ..errors import BrowseError
from .calls import CallIndex, Frame, TreeNode
from .expressions import evaluate
from .folds import Folds
from .index import MARK_KINDS, BrowseIndex, Core, Progress
from .lines import FoldedCall, Line, records_by_seq
from .memory import memory_at
from .navigate import Navigator
from .registers import registers_at
from .source import Sources, SourceView
from .timeline import Band, Strip, strip_of

if TYPE_CHECKING:
    import pyarrow as pa

    from ..image import Image
    from ..isa.disasm import Disassembler
    from ..store.trace import Trace
    from .targets import BranchTargets

_SEQ_LIMIT = (1 << 63) - 1
LINES_KEPT = 1024
"""Lines a session keeps built, the last used: some twenty screens of trace around the places
seen last, so that a step or a page builds only the lines it brings into view (kept by the
thousand, with their records, they lengthen every full garbage collection)."""
_ALIASES = {"lr": ("x30", "r14"), "fp": ("x29", "r11"), "ip": ("r12",), "sp": ("r13", "sp_el")}
"""Other names of registers, tried in order; `sp_el` is the AArch64 stack pointer of the mode."""
_HANDLER_MODE = re.compile(r"el([0-3])h")


class Session:
    """One trace opened for browsing (see the module docstring for the API)."""

    def __init__(
        self,
        trace: Trace,
        image: Image | None,
        index: BrowseIndex,
        calls: CallIndex,
        cpu: int,
    ) -> None:
        self.trace = trace
        self.image = image
        self.index = index
        self.cpu = cpu
        self._disassembler: Disassembler | None = None
        self._targets: BranchTargets | None = None
        self.targets_later = False
        """Lines name no branch targets until `load_targets` has run (the app runs it after its
        first screen, in the background); otherwise the first line to need them loads them."""
        self._navigator = Navigator(trace, index)
        self.calls = calls
        self.folds = Folds(calls)
        """The folds of the trace pane (folds.py), changed by `fold_call` and the like."""
        self._registers: tuple[tuple[int, int], list[RegisterValue]] | None = None
        self._kept: OrderedDict[tuple[int, int, bool], Line] = OrderedDict()
        """Lines built, by (core, index, branch targets loaded), least recently used first."""
        self.sources: Sources | None = None
        """Source lines from the image's line tables (`Session.open`'s `source_dirs`)."""

    @classmethod
    def open(
        cls,
        trace: Trace,
        image: Image | None = None,
        cpu: int | None = None,
        progress: Progress | None = None,
        source_dirs: Sequence[str | os.PathLike[str]] = (),
    ) -> Session:
        """Open `trace` for browsing, building its indexes on first use (`progress` follows
        the builds of the browse index and of the calls); start on core `cpu` (default: the
        first); source files are looked for under `source_dirs` too."""
        index = BrowseIndex.open(trace, progress)
        if not index.cores:
            raise BrowseError(f"{trace.path}: the trace has no instructions to browse")
        if cpu is not None and cpu not in index.cores:
            raise BrowseError(f"no core {cpu} in the trace (cores: {', '.join(map(str, index.cores))})")
        calls = CallIndex.open(trace, image, progress)
        session = cls(trace, image, index, calls, min(index.cores) if cpu is None else cpu)
        session.sources = Sources(image.lines, [Path(d) for d in source_dirs]) if image is not None else None
        return session

    def close(self) -> None:
        self._navigator.close()

    # -- positions -----------------------------------------------------------------------

    @property
    def cores(self) -> list[int]:
        return sorted(self.index.cores)

    @property
    def last_seq(self) -> int:
        """The trace's last instruction."""
        return max(core.last_seq for core in self.index.cores.values())

    def _check_point(self, seq: int) -> None:
        """BrowseError for a point past the trace's end."""
        if seq > self.last_seq:
            raise BrowseError(
                f"seq {seq} is past the end of the trace (its last instruction is {self.last_seq})"
            )

    def core(self, cpu: int) -> Core:
        core = self.index.cores.get(cpu)
        if core is None:
            raise BrowseError(f"no core {cpu} in the trace (cores: {', '.join(map(str, self.cores))})")
        return core

    def count(self, cpu: int) -> int:
        return self.core(cpu).count

    @property
    def has_time(self) -> bool:
        return self.index.times.num_rows > 0

    def seq_of(self, cpu: int, index: int) -> int:
        core = self.core(cpu)
        if not 0 <= index < core.count:
            raise BrowseError(f"core {cpu} has instructions 0..{core.count - 1}, not {index}")
        return self.index.tables["instructions"].key_of(core.first_row + index)[1]

    def index_of(self, cpu: int, seq: int) -> int | None:
        core = self.core(cpu)
        row = self.index.tables["instructions"].upper_bound((cpu, _clip(seq))) - 1
        return row - core.first_row if row >= core.first_row else None

    def cpu_of(self, seq: int) -> int:
        """The core that ran instruction `seq`; BrowseError if no instruction has that seq."""
        for cpu, core in self.index.cores.items():
            if core.first_seq <= seq <= core.last_seq:
                row = self.index.tables["instructions"].lower_bound((cpu, seq))
                if (
                    row < core.first_row + core.count
                    and self.index.tables["instructions"].key_of(row)[1] == seq
                ):
                    return cpu
        first = min(c.first_seq for c in self.index.cores.values())
        last = max(c.last_seq for c in self.index.cores.values())
        raise BrowseError(f"no instruction with seq {seq} (the trace has seq {first}..{last})")

    def seq_at_time(self, time: int, cpu: int | None = None) -> int:
        """The last instruction at or before `time` (in time order; of `cpu`, or of any core)."""
        if not self.has_time:
            raise BrowseError("the trace has no times")
        found = []
        for c in [cpu] if cpu is not None else self.cores:
            self.core(c)
            row = self.index.times.upper_bound((c, _clip(time), _SEQ_LIMIT)) - 1
            if row >= 0:
                hit_cpu, _, hit_seq = self.index.times.key_of(row)
                if hit_cpu == c:
                    found.append(hit_seq)
        if not found:
            raise BrowseError(f"no instruction at or before time {time}")
        return max(found)

    def _time_of(self, seq: int) -> int | None:
        """The time of instruction `seq` (one row read, not its line and records)."""
        instructions = self.index.tables["instructions"]
        return instructions.row(instructions.lower_bound((self.cpu_of(seq), seq)))["time"]

    def positions_at(self, seq: int) -> dict[int, int | None]:
        """Where every core is at the point of instruction `seq`: its last instruction at or
        before that instruction's time (or, without times, at or before `seq`); None for a
        core that has not started yet."""
        cpu = self.cpu_of(seq)
        time = self._time_of(seq) if self.has_time else None
        positions: dict[int, int | None] = {}
        for other in self.cores:
            if other == cpu:
                positions[other] = seq
            elif time is not None:
                row = self.index.times.upper_bound((other, time, _SEQ_LIMIT)) - 1
                hit = self.index.times.key_of(row) if row >= 0 else None
                positions[other] = hit[2] if hit is not None and hit[0] == other else None
            else:
                index = self.index_of(other, seq)
                positions[other] = None if index is None else self.seq_of(other, index)
        return positions

    # -- moves ---------------------------------------------------------------------------

    def next_visit(self, cpu: int, seq: int, forward: bool = True, pc: int | None = None) -> int | None:
        """Core `cpu`'s next (previous) instruction after (before) `seq` at `pc` (default: the
        pc of the core's instruction at `seq`); None when there is none."""
        if pc is None:
            index = self.index_of(cpu, seq)
            if index is None:
                return None
            pc = self._lines(self.core(cpu), index, index + 1)[0].pc
        return self._navigator.visit(cpu, pc, seq, forward)

    def goto_pc(self, address: int, cpu: int, seq: int) -> int:
        """Core `cpu`'s next instruction at `address` after `seq`, or its first one (wrapping
        round); BrowseError if the core never ran it."""
        found = self._navigator.visit(cpu, address, seq, True)
        if found is None:
            found = self._navigator.visit(cpu, address, -1, True)
        if found is None:
            raise BrowseError(f"core {cpu} never executes {self.symbol(address) or f'{address:#x}'}")
        return found

    def next_mark(
        self, cpu: int, seq: int, forward: bool = True, kinds: tuple[str, ...] = MARK_KINDS
    ) -> tuple[int, str] | None:
        """(seq, kind) of core `cpu`'s next (previous) exception or trace gap after (before) `seq`."""
        self.core(cpu)
        return self._navigator.mark(cpu, seq, forward, kinds)

    def search(self, condition: str, cpu: int, seq: int, forward: bool = True) -> int | None:
        """Core `cpu`'s next (previous) instruction after (before) `seq` meeting `condition`, one
        SQL expression over the columns of `instructions` (`pc = 0x8000 AND NOT executed`),
        run in the untrusted-SQL mode; None when none does."""
        core = self.core(cpu)
        return self._navigator.search(condition, cpu, seq, forward, core.first_seq, core.last_seq)

    # -- lines ---------------------------------------------------------------------------

    def line(self, seq: int) -> Line:
        """The line of instruction `seq`."""
        cpu = self.cpu_of(seq)
        index = self.index_of(cpu, seq) or 0
        return self._lines(self.core(cpu), index, index + 1)[0]

    def lines(self, cpu: int, first: int, count: int, folds: Folds | None = None) -> list[Line]:
        """Up to `count` lines of core `cpu` from the line showing instruction index `first`
        (fewer at the end); with `folds`, a folded call is one line (its entry's, with
        `folded` set) and the instructions it holds are stepped over."""
        core = self.core(cpu)
        first = max(0, first)
        if folds is None or not folds.any(cpu):
            return self._lines(core, first, first + max(0, count))
        segments = folds.segments(cpu, first, count, core.count)
        lines: list[Line] = []
        for segment in segments:
            if segment.call is None:
                lines += self._lines(core, segment.start, segment.stop)
                continue
            entry = self._lines(core, segment.start, segment.start + 1)[0]
            call = segment.call
            folded = FoldedCall(call.name, entry.seq, self.seq_of(cpu, call.last_index), call.insns)
            lines.append(dataclasses.replace(entry, folded=folded))
        return lines

    def move(self, cpu: int, index: int, rows: int, folds: Folds | None = None) -> int:
        """The index of the line `rows` lines below (above, when negative) the line showing
        `index`, stopping at the first and last lines; folded calls count as one line."""
        core = self.core(cpu)
        if folds is None or not folds.any(cpu):
            return max(0, min(core.count - 1, index + rows))
        index = folds.shown(cpu, max(0, min(core.count - 1, index)))
        if rows >= 0:
            last = folds.segments(cpu, index, rows + 1, core.count)[-1]
            return last.start if last.call is not None else last.stop - 1
        for _ in range(-rows):
            if index == 0:
                break
            index = folds.shown(cpu, index - 1)
        return index

    def _lines(self, core: Core, start: int, stop: int) -> list[Line]:
        """Lines of a core's instructions `start` to `stop - 1`: those kept, and the others
        read in one run (from the first missing to the last)."""
        stop = min(stop, core.count)
        targets = self._targets is not None
        kept = self._kept
        keys = [(core.cpu, index, targets) for index in range(start, stop)]
        missing = [offset for offset, key in enumerate(keys) if key not in kept]
        if missing:
            lo, hi = missing[0], missing[-1] + 1
            kept.update(zip(keys[lo:hi], self._read_lines(core, start + lo, start + hi), strict=True))
        lines = []
        for key in keys:
            kept.move_to_end(key)
            lines.append(kept[key])
        while len(kept) > LINES_KEPT:
            kept.popitem(last=False)
        return lines

    def _read_lines(self, core: Core, start: int, stop: int) -> list[Line]:
        """Lines of a core's instructions `start` to `stop - 1` (within the core), built from
        the index's rows."""
        cpu, first = core.cpu, start
        if stop <= start:
            return []
        rows = self.index.tables["instructions"].rows(core.first_row + start, core.first_row + stop)
        rows = self._with_disasm(rows)
        seqs = rows.column("seq")
        low, high = (cpu, int(seqs[0].as_py())), (cpu, int(seqs[-1].as_py()))
        registers, memory, events = records_by_seq(
            *(self.index.tables[name].between(low, high) for name in ("registers", "memory", "events"))
        )
        lines = []
        for offset, row in enumerate(rows.to_pylist()):
            target = self._target(row["pc"], row["opcode"], row["size"], row["isa"])
            seq = row["seq"]
            lines.append(
                Line(
                    seq,
                    first + offset,
                    row["time"],
                    row["cpu"],
                    row["pc"],
                    row["opcode"],
                    row["size"],
                    row["isa"],
                    row["mode"],
                    row["executed"],
                    row["flags"],
                    row["disasm"],
                    row["src"],
                    self.symbol(row["pc"]),
                    target,
                    None if target is None else self.symbol(target),
                    registers.get(seq, ()),
                    memory.get(seq, ()),
                    events.get(seq, ()),
                )
            )
        return lines

    # The ISA decoders (capstone, numba: a second to load) are imported on first use: a store
    # whose instructions carry their disassembly, browsed without an image, never needs them.

    def _with_disasm(self, rows: pa.Table) -> pa.Table:
        """`instructions` rows with the disassembly the input lacked decoded from the opcodes."""
        if "disasm" not in rows.column_names or rows.column("disasm").null_count == 0:
            return rows
        from ..isa.disasm import Disassembler, fill_disasm

        if self._disassembler is None:
            self._disassembler = Disassembler(self.image)
        return fill_disasm(rows, self._disassembler)

    def load_targets(self) -> None:
        """Load the decoders that find branch targets, with an image (capstone and numba's
        compiled code: one to two seconds). Safe from another thread while this one reads
        lines: the session uses them only once they are loaded."""
        if self.image is not None and self._targets is None:
            from .targets import BranchTargets

            self._targets = BranchTargets.loaded()

    def _target(self, pc: int, opcode: int | None, size: int | None, isa: str | None) -> int | None:
        """A direct branch's target; only with an image, whose symbols name it."""
        if self.image is None:
            return None
        if self._targets is None:
            if self.targets_later:
                return None
            self.load_targets()
            assert self._targets is not None
        return self._targets.target(pc, opcode, size, isa)

    def symbol(self, address: int) -> str | None:
        """`name` or `name+0x10` for an address the image's symbols cover."""
        if self.image is None:
            return None
        found = self.image.symbols.lookup(address)
        if found is None:
            return None
        name, offset = found
        return name if not offset else f"{name}+{offset:#x}"

    # -- calls ---------------------------------------------------------------------------

    def stack(self, cpu: int, seq: int) -> list[Frame]:
        """The call stack at instruction `seq` of core `cpu`, outermost first (each frame's
        function, call site and entry seq); empty before the core's first instruction."""
        self._check_point(seq)
        index = self.index_of(cpu, seq)
        return [] if index is None else self.calls.stack(cpu, index)

    def call_at(self, cpu: int, seq: int) -> tuple[Frame, int] | None:
        """The innermost call holding instruction `seq` and the seq of its last instruction
        (None: `seq` is in no call, only in the core's outermost frame)."""
        stack = self.stack(cpu, seq)
        if len(stack) < 2:
            return None
        return stack[-1], self.seq_of(cpu, stack[-1].last_index)

    def fold_call(self, cpu: int, seq: int) -> Frame | None:
        """Fold the call holding `seq` into one line (`-`); the folded frame, or None."""
        index = self.index_of(cpu, seq)
        return None if index is None else self.folds.fold_call(cpu, index)

    def fold_callees(self, cpu: int, seq: int) -> Frame | None:
        """Fold every call made by the function running at `seq` (`[`); that function's frame."""
        index = self.index_of(cpu, seq)
        return None if index is None else self.folds.fold_callees(cpu, index)

    def unfold(self, cpu: int, seq: int) -> Frame | None:
        """Unfold the folded call shown at `seq` (`+`); the frame unfolded, or None."""
        index = self.index_of(cpu, seq)
        return None if index is None else self.folds.unfold(cpu, index)

    def unfold_all(self) -> None:
        """Unfold every call of every core (`]`)."""
        self.folds.unfold_all()

    def call_tree(self, cpu: int) -> list[TreeNode]:
        """Core `cpu`'s calling contexts, parents first, with their calls and inclusive
        instructions and time; a node's first call starts at `seq_of(cpu, node.first_index)`."""
        self.core(cpu)
        return self.calls.tree(cpu)

    def source(self, pc: int, context: int = 8) -> SourceView | None:
        """The source file and line of `pc` (DWARF line tables of the image), with up to
        `context` lines either side when the file is found; None without an image or a line
        table covering `pc`."""
        return None if self.sources is None else self.sources.at(pc, context)

    # -- timeline --------------------------------------------------------------------------

    def timeline(self, cpu: int, columns: int, rows: int) -> Strip:
        """Core `cpu`'s execution as a strip of `columns` stretches of the trace (time, or seq
        without times) by `rows` bands of code addresses, named by function with an image."""
        self.core(cpu)
        bands = [Band(lo, hi, self._function_at(lo)) for lo, hi in self.index.bands]
        return strip_of(cpu, self.index.timeline, bands, self.index.timeline_cells, columns, rows)

    def timeline_column(self, strip: Strip, seq: int) -> int:
        """The strip's column holding instruction `seq` (the cursor's)."""
        return strip.column_of(self._time_of(seq) if strip.axis.name == "time" else seq)

    def timeline_seq(self, strip: Strip, column: int) -> int:
        """Where a click on `column` goes: the strip's core's first instruction from the
        column's start on (its last one past the end)."""
        core = self.core(strip.cpu)
        start = strip.start_of(max(0, min(column, strip.columns - 1)))
        if strip.axis.name == "time":
            row = self.index.times.lower_bound((core.cpu, start, 0))
            hit = self.index.times.key_of(row) if row < self.index.times.num_rows else None
            return hit[2] if hit is not None and hit[0] == core.cpu else core.last_seq
        row = self.index.tables["instructions"].lower_bound((core.cpu, start))
        return (
            self.seq_of(core.cpu, min(row - core.first_row, core.count - 1))
            if row >= core.first_row
            else core.first_seq
        )

    def _function_at(self, address: int) -> str | None:
        name = self.symbol(address)
        return None if name is None else name.split("+")[0]

    # -- registers -----------------------------------------------------------------------

    def register_names(self, cpu: int) -> tuple[str, ...]:
        return self.core(cpu).registers

    def registers(self, cpu: int, seq: int) -> list[RegisterValue]:
        """Every register core `cpu` has written up to and including instruction `seq`: the
        snapshot before it, and the writes since (the last answer is kept: a screen asks for
        it again to evaluate `sp`)."""
        if self._registers is not None and self._registers[0] == (cpu, seq):
            return self._registers[1]
        self._registers = ((cpu, seq), self._read_registers(cpu, seq))
        return self._registers[1]

    def _read_registers(self, cpu: int, seq: int) -> list[RegisterValue]:
        self.core(cpu)
        self._check_point(seq)
        if seq < 0:
            return []
        return registers_at(self.index, cpu, seq)

    def register_writer(self, cpu: int, name: str, seq: int) -> int | None:
        for register in self.registers(cpu, seq):
            if register.name == name:
                return register.seq
        if name not in self.register_names(cpu):
            raise BrowseError(f"core {cpu} has no register {name!r}")
        return None

    # -- memory --------------------------------------------------------------------------

    def memory(self, address: int, length: int, seq: int) -> MemoryBytes:
        """Bytes [address, address+length) after instruction `seq`, each with its origin
        (analysis/state.py's meanings; the image's bytes where the trace shows none)."""
        self._check_point(seq)
        return memory_at(self.index, address, length, seq, self.image)

    def memory_writer(self, address: int, size: int, seq: int) -> int | None:
        """The last write at or before `seq` to any byte of the `size`-byte unit (1, 2, 4 or 8,
        aligned) holding `address`; None if the trace wrote none of them."""
        if size not in (1, 2, 4, 8):
            raise BrowseError(f"a memory unit is 1, 2, 4 or 8 bytes, not {size}")
        unit = address - address % size
        origin = self.memory(unit, size, seq).origin
        written = origin[origin >= 0]
        return int(written.max()) if len(written) else None

    # -- expressions ---------------------------------------------------------------------

    def evaluate(self, text: str, cpu: int, seq: int) -> int:
        """The address `text` stands for at the point after `seq` on core `cpu`."""
        values: dict[str, int] | None = None

        def resolve(name: str) -> int | None:
            nonlocal values
            if values is None:
                values = {r.name: r.value for r in self.registers(cpu, seq) if r.value is not None}
            lowered = name.lower()
            if lowered == "pc":
                return self.line(seq).pc
            for candidate in (lowered, *_ALIASES.get(lowered, ())):
                if candidate == "sp_el":
                    candidate = _stack_pointer(self.line(seq).mode)
                if candidate in values:
                    return values[candidate]
            if self.image is not None:
                return self.image.symbols.address_of(name)
            return None

        return evaluate(text, resolve)


def _stack_pointer(mode: str | None) -> str:
    """The AArch64 stack pointer a mode uses: SP_ELn in ELnh, SP_EL0 otherwise."""
    handler = _HANDLER_MODE.match(mode or "")
    return f"sp_el{handler.group(1)}" if handler else "sp_el0"


def _clip(value: int) -> int:
    """A seq or time as a key the index's int64 columns can be searched for (-1: before all)."""
    return max(-1, min(int(value), _SEQ_LIMIT))
