"""Code coverage of a program image by a trace: instructions, lines, functions and branches.

The image says what could run (every instruction of every function, or of an address
range: `codemap`); the trace says what did. One streaming pass over the instructions
counts executions per address and, for each conditional branch, whether it was taken:
the next instruction of the same core lands on the branch target (taken) or just after
the branch (not taken); a branch whose condition failed was not taken. Where neither
shows (an exception in between, the trace ends), the outcome is not counted. SPARC
branches are judged by the instruction after the delay slot.

Source lines come from DWARF. Code without line information is described by an
object-code listing instead: one listing line per instruction, named `listing` in the
result, so that lcov and Cobertura reports still show every instruction.

An image without function symbols (a stripped ELF) is covered by address range: its
executable sections (or segments), swept in the one instruction set its architecture has,
`default_isa`, or the one the trace ran most. An image of an architecture cputrace does not
decode is an error; one whose architecture the trace never ran, a warning.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import CputraceError, UsageError
from ..image import Image
from ..model import Isa
from ..store.chunks import iter_instructions
from ..store.trace import Trace
from ..store.window import WHOLE_TRACE, Window
from .caution import check_image, warn
from .codemap import CodeMap, function_code, functions_of, range_code

LISTING = "<object code>"
"""The file name coverage gives the object-code listing unless told another."""


def listing_beside(report: str | os.PathLike[str]) -> Path:
    """Where a report's object-code listing goes: REPORT.lst next to it."""
    return Path(f"{os.fspath(report)}.lst")


@dataclass(frozen=True, slots=True)
class FunctionCoverage:
    name: str
    address: int
    size: int
    instructions: int
    covered: int
    entries: int  # executions of the first instruction
    file: str | None
    line: int  # of the first instruction, 0 when unknown
    branches: int  # outcomes: two per conditional branch
    branches_covered: int
    lines: tuple[int, ...]  # lines of `file` that hold its instructions


@dataclass(frozen=True, slots=True)
class LineCoverage:
    file: str
    line: int
    hits: int  # executions of the line's most executed instruction
    branches: tuple[tuple[int, int, bool], ...]  # (taken, not taken, reached) per branch


@dataclass(frozen=True, slots=True)
class Totals:
    instructions: int
    instructions_covered: int
    lines: int
    lines_covered: int
    functions: int
    functions_covered: int
    branches: int
    branches_covered: int


@dataclass(frozen=True)
class Coverage:
    """What ran of `code`: per-instruction counts, their source lines, branch outcomes."""

    image_name: str
    code: CodeMap
    hits: np.ndarray  # int64 per instruction
    taken: np.ndarray  # int64 per instruction (conditional branches only)
    not_taken: np.ndarray
    files: tuple[str, ...]  # source files, then the listing when some code has no line
    file: np.ndarray  # int32 index into files
    line: np.ndarray  # int32
    listing: str | None
    outside: int  # executions of addresses that are not instructions of `code`

    def functions(self) -> list[FunctionCoverage]:
        result = []
        for index, mine in _groups(self.code.function):
            if index < 0:
                continue
            symbol = self.code.functions[index]
            first = mine[0]
            branches = mine[self.code.conditional_branch[mine]]
            result.append(
                FunctionCoverage(
                    name=symbol.name,
                    address=symbol.address,
                    size=symbol.size,
                    instructions=len(mine),
                    covered=int(np.count_nonzero(self.hits[mine])),
                    entries=int(self.hits[first]) if self.code.address[first] == symbol.address else 0,
                    file=self.files[self.file[first]],
                    line=int(self.line[first]),
                    branches=2 * len(branches),
                    branches_covered=int(np.count_nonzero(self.taken[branches]))
                    + int(np.count_nonzero(self.not_taken[branches])),
                    lines=tuple(np.unique(self.line[mine][self.file[mine] == self.file[first]]).tolist()),
                )
            )
        return result

    def lines(self) -> list[LineCoverage]:
        """Every line with code, by file then line number."""
        key = self.file.astype(np.int64) << 32 | self.line.astype(np.int64)
        result = []
        for _, members in _groups(key):
            branches = tuple(
                (int(self.taken[i]), int(self.not_taken[i]), bool(self.hits[i]))
                for i in members[self.code.conditional_branch[members]]
            )
            first = members[0]
            hits = int(self.hits[members].max())
            result.append(LineCoverage(self.files[self.file[first]], int(self.line[first]), hits, branches))
        return result

    def totals(self) -> Totals:
        lines = self.lines()
        functions = self.functions()
        branches = self.code.conditional_branch
        return Totals(
            instructions=len(self.code),
            instructions_covered=int(np.count_nonzero(self.hits)),
            lines=len(lines),
            lines_covered=sum(1 for line in lines if line.hits),
            functions=len(functions),
            functions_covered=sum(1 for f in functions if f.covered),
            branches=2 * int(np.count_nonzero(branches)),
            branches_covered=int(np.count_nonzero(self.taken[branches]))
            + int(np.count_nonzero(self.not_taken[branches])),
        )

    def uncovered(self) -> list[tuple[int, int]]:
        """[start, end) address ranges of consecutive instructions that never ran."""
        cold = self.hits == 0
        ranges: list[tuple[int, int]] = []
        for i in np.flatnonzero(cold).tolist():
            start = int(self.code.address[i])
            end = start + int(self.code.size[i])
            if ranges and ranges[-1][1] == start:
                ranges[-1] = (ranges[-1][0], end)
            else:
                ranges.append((start, end))
        return ranges

    def plus(self, other: Coverage) -> Coverage:
        """This coverage and `other`'s (of the same code, by other traces) together: what either
        ran, executions and branch outcomes added up."""
        if not np.array_equal(self.code.address, other.code.address):
            names = f"{self.image_name}, {other.image_name}"
            raise CputraceError(f"coverage of different code cannot be added ({names})")
        return dataclasses.replace(
            self,
            hits=self.hits + other.hits,
            taken=self.taken + other.taken,
            not_taken=self.not_taken + other.not_taken,
            outside=self.outside + other.outside,
        )

    def listing_text(self) -> str:
        """The object-code listing whose line numbers the coverage of code without lines uses."""
        return "".join(line + "\n" for line in _listing_lines(self.code))


def _groups(keys: np.ndarray) -> list[tuple[int, np.ndarray]]:
    """(key, indices in address order) for each distinct key, by key."""
    order = np.argsort(keys, kind="stable")
    values, starts = np.unique(keys[order], return_index=True)
    ends = [*starts[1:].tolist(), len(order)] if len(order) else []
    return [(int(v), order[s:e]) for v, s, e in zip(values.tolist(), starts.tolist(), ends, strict=True)]


def _listing_lines(code: CodeMap) -> list[str]:
    """A header line where the function changes, then one line per instruction."""
    lines: list[str] = []
    current = -2
    for i in range(len(code)):
        function = int(code.function[i])
        if function != current:
            name = code.functions[function].name if function >= 0 else "(no function)"
            lines.append(f"{name}:")
            current = function
        digits = 2 * int(code.size[i])
        lines.append(f"  {int(code.address[i]):08x}:  {int(code.opcode[i]):0{digits}x}  {code.disasm[i]}")
    return lines


def _listing_numbers(code: CodeMap) -> np.ndarray:
    """The listing line (1-based) of each instruction."""
    starts = np.r_[True, code.function[1:] != code.function[:-1]] if len(code) else np.zeros(0, bool)
    return (np.arange(len(code)) + np.cumsum(starts) + 1).astype(np.int32)


class _BranchCounter:
    """Counts executions and branch outcomes over chunks of one core's instructions."""

    def __init__(self, code: CodeMap) -> None:
        self.code = code
        n = len(code)
        self.hits = np.zeros(n, np.int64)
        self.taken = np.zeros(n, np.int64)
        self.not_taken = np.zeros(n, np.int64)
        self.outside = 0
        self._tail: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def add(self, cpu: int, pc: np.ndarray, executed: np.ndarray) -> None:
        index = self.code.index_of(pc)
        known = index >= 0
        self.hits += np.bincount(index[known], minlength=len(self.code))
        self.outside += int(np.count_nonzero(~known))
        tail_pc, tail_executed = self._tail.get(cpu, (pc[:0], executed[:0]))
        pc = np.concatenate([tail_pc, pc])
        executed = np.concatenate([tail_executed, executed])
        keep = max(len(pc) - 2, 0)
        self._outcomes(pc, executed, keep)
        self._tail[cpu] = (pc[keep:], executed[keep:])

    def finish(self) -> None:
        for pc, executed in self._tail.values():
            self._outcomes(pc, executed, len(pc))
        self._tail.clear()

    def _outcomes(self, pc: np.ndarray, executed: np.ndarray, count: int) -> None:
        """Outcomes of the conditional branches among the first `count` rows (later rows follow)."""
        code = self.code
        index = code.index_of(pc[:count])
        rows = np.flatnonzero(index >= 0)
        rows = rows[code.conditional_branch[index[rows]]]
        if not len(rows):
            return
        b = index[rows]
        n = len(pc)
        has1, has2 = rows + 1 < n, rows + 2 < n
        next1 = pc[np.minimum(rows + 1, n - 1)]
        next2 = pc[np.minimum(rows + 2, n - 1)]
        size = code.size[b].astype(np.uint64)
        here = code.address[b]
        delay = code.delay_slot[b]
        in_slot = delay & has1 & (next1 == here + size)
        evidence = np.where(in_slot, next2, next1)
        valid = np.where(in_slot, has2, has1)
        fall = here + np.where(delay, 2 * size, size)
        went_on = valid & (evidence == fall)
        direct = valid & (evidence == code.target[b])
        indirect = valid & ~went_on
        ran = executed[rows]
        taken = ran & np.where(code.has_target[b], direct, indirect)
        not_taken = ~ran | (went_on & ~taken)
        self.taken += np.bincount(b[taken], minlength=len(code))
        self.not_taken += np.bincount(b[not_taken], minlength=len(code))


_DECODED = (Isa.A32, Isa.T32, Isa.A64, Isa.SPARC)


def _object_code(trace: Trace, image: Image, default_isa: Isa | None) -> CodeMap:
    """The code of an image without function symbols: its executable sections, by address."""
    isa = default_isa or _sweep_isa(trace, image)
    ranges = image.code_ranges
    more = f" and {len(ranges) - 4} more" if len(ranges) > 4 else ""
    shown = ", ".join(str(r) for r in ranges[:4]) + more
    warn(
        f"the image has no function symbols: covering its code by address, as {isa.name} "
        f"(data among the code counts as instructions): {shown}"
    )
    return range_code(image, [(r.start, r.end) for r in ranges], isa)


def _sweep_isa(trace: Trace, image: Image) -> Isa:
    """The instruction set to read code in that nothing marks: the architecture's only one, else
    the one of its sets that the trace ran most."""
    possible = image.architecture.isas if image.architecture is not None else frozenset(_DECODED)
    if len(possible) == 1:
        return next(iter(possible))
    ran = trace.sql("SELECT isa, count(*) AS n FROM instructions GROUP BY isa ORDER BY n DESC, isa")
    for name in ran.column("isa").to_pylist():
        isa = Isa.__members__.get(str(name))
        if isa in possible:
            return isa
    raise CputraceError(
        "the image has no symbols to say which instruction set its code is in, and the trace ran "
        "none of them: give --isa"
    )


def compute_coverage(
    trace: Trace,
    image: Image,
    *,
    image_name: str = "image",
    address_range: tuple[int, int] | None = None,
    default_isa: Isa | None = None,
    cpus: set[int] | None = None,
    window: Window = WHOLE_TRACE,
    listing: str = LISTING,
) -> Coverage:
    """Coverage of the image's functions (or of `address_range` = (start, length); of its
    executable sections when it has no function symbols) by the trace.

    `default_isa` decodes range bytes that no mapping symbol describes; `cpus` and `window`
    limit the trace to those cores and that seq range.
    """
    if image.architecture is not None and not image.architecture.isas:
        raise CputraceError(
            f"the image holds {image.architecture.name} code, which cputrace does not decode "
            f"(it decodes {', '.join(isa.name for isa in _DECODED)})"
        )
    check_image(trace, image)
    if address_range is not None:
        start, length = address_range
        if start < 0 or length < 0 or start + length > 1 << 64:  # else a report of nothing
            raise UsageError(f"range 0x{start:x}+{length}: expected a range within the 64-bit address space")
        code = range_code(image, [(start, start + length)], default_isa)
    elif functions_of(image):
        code = function_code(image)
    else:
        code = _object_code(trace, image, default_isa)
    counter = _BranchCounter(code)
    for chunk in iter_instructions(trace, window):
        for cpu, part in chunk.items():
            if cpus is None or cpu in cpus:
                counter.add(cpu, part.pc, part.executed)
    counter.finish()
    files = list(image.lines.files)
    file, line = image.lines.lines_for_many(code.address)
    lacking = file < 0
    used_listing = None
    if lacking.any():
        used_listing = listing
        file = np.where(lacking, len(files), file).astype(np.int32)
        line = np.where(lacking, _listing_numbers(code), line).astype(np.int32)
        files.append(listing)
    return Coverage(
        image_name=image_name,
        code=code,
        hits=counter.hits,
        taken=counter.taken,
        not_taken=counter.not_taken,
        files=tuple(files),
        file=file,
        line=line,
        listing=used_listing,
        outside=counter.outside,
    )
