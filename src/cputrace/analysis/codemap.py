"""The instructions a program image holds, found by a linear sweep in the right instruction set.

Coverage needs every instruction that could have run, not just those that did: each
function's bytes (or an address range) are decoded from start to end, switching instruction
set where the ELF's mapping symbols say so and skipping what they mark as data.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import pairwise

import numpy as np

from ..image import Image, Symbol, SymbolKind
from ..isa import InsnInfo, decode_run
from ..model import Isa


@dataclass(frozen=True, slots=True)
class CodeMap:
    """Static facts per instruction, sorted by address, with the function each belongs to."""

    address: np.ndarray  # uint64
    size: np.ndarray  # uint8
    isa: np.ndarray  # uint8, model.Isa
    function: np.ndarray  # int32 index into `functions`, -1 for none
    conditional_branch: np.ndarray  # bool: a branch that may or may not be taken
    target: np.ndarray  # uint64 direct target of a branch; valid where `has_target`
    has_target: np.ndarray  # bool
    delay_slot: np.ndarray  # bool: SPARC, the next instruction runs before the branch lands
    disasm: tuple[str, ...]
    opcode: np.ndarray  # uint32, as Tarmac prints it
    functions: tuple[Symbol, ...]

    def __len__(self) -> int:
        return len(self.address)

    def index_of(self, addresses: np.ndarray) -> np.ndarray:
        """Index of the instruction starting at each address, -1 where none does."""
        addresses = np.asarray(addresses, dtype=np.uint64)
        i = np.searchsorted(self.address, addresses)
        inside = i < len(self.address)
        i = np.where(inside, i, 0)
        found = inside & (self.address[i] == addresses) if len(self.address) else inside
        return np.where(found, i, -1)


def _segments(image: Image, start: int, end: int, default: Isa | None) -> Iterator[tuple[int, int, Isa]]:
    """[lo, hi) pieces of [start, end) that hold code of one instruction set.

    Mapping symbols decide; where there are none, `default` (None: the piece is skipped).
    """
    states = image.symbols.states
    cuts = sorted({start, end, *(p for s in states for p in (s.start, s.end) if start < p < end)})
    for lo, hi in pairwise(cuts):
        isa = image.symbols.state_at(lo)
        if isa is None and (image.symbols.is_data(lo) or default is None):
            continue
        yield lo, hi, isa or default  # type: ignore[misc]


def sweep(image: Image, start: int, end: int, default: Isa | None) -> Iterator[InsnInfo]:
    """Every instruction in [start, end), decoded back to back (past undefined encodings)."""
    for lo, hi, isa in _segments(image, start, end, default):
        code = image.read_upto(lo, hi - lo)
        offset = 0
        while offset < len(code):
            last = None
            for info in decode_run(code[offset:], lo + offset, isa):
                last = info
                yield info
            if last is None:  # a partial instruction at the end
                break
            offset = last.next_address - lo


def _build(pieces: list[tuple[int, InsnInfo]], functions: tuple[Symbol, ...]) -> CodeMap:
    pieces.sort(key=lambda p: p[1].address)
    unique = [p for i, p in enumerate(pieces) if i == 0 or p[1].address != pieces[i - 1][1].address]
    infos = [info for _, info in unique]
    n = len(infos)
    return CodeMap(
        address=np.fromiter((i.address for i in infos), np.uint64, n),
        size=np.fromiter((i.size for i in infos), np.uint8, n),
        isa=np.fromiter((i.isa for i in infos), np.uint8, n),
        function=np.fromiter((f for f, _ in unique), np.int32, n),
        conditional_branch=np.fromiter((i.is_branch and i.is_conditional for i in infos), bool, n),
        target=np.fromiter((i.target or 0 for i in infos), np.uint64, n),
        has_target=np.fromiter((i.target is not None for i in infos), bool, n),
        delay_slot=np.fromiter((i.delay_slot for i in infos), bool, n),
        disasm=tuple(i.disasm for i in infos),
        opcode=np.fromiter((i.opcode for i in infos), np.uint32, n),
        functions=functions,
    )


def functions_of(image: Image) -> tuple[Symbol, ...]:
    """The image's sized function symbols in its bytes, by address; aliases count once."""
    functions = tuple(
        sorted(
            (s for s in image.symbols if s.kind is SymbolKind.FUNC and s.size and image.contains(s.address)),
            key=lambda s: (s.address, s.name),
        )
    )
    kept: list[Symbol] = []
    for symbol in functions:  # aliases (several names, one body) count once
        if not kept or (kept[-1].address, kept[-1].size) != (symbol.address, symbol.size):
            kept.append(symbol)
    return tuple(kept)


def function_code(image: Image) -> CodeMap:
    """The instructions of every sized function symbol of the image."""
    kept = functions_of(image)
    pieces = [
        (index, info)
        for index, symbol in enumerate(kept)
        for info in sweep(image, symbol.address, symbol.address + symbol.size, symbol.isa)
    ]
    return _build(pieces, kept)


def range_code(image: Image, ranges: Sequence[tuple[int, int]], default: Isa | None) -> CodeMap:
    """The instructions in the [start, end) ranges, each tagged with the function holding it."""
    functions = functions_of(image)
    starts = [f.address for f in functions]

    def owner(address: int) -> int:
        i = bisect_right(starts, address) - 1
        return i if i >= 0 and address < functions[i].address + functions[i].size else -1

    pieces = [(owner(i.address), i) for start, end in ranges for i in sweep(image, start, end, default)]
    return _build(pieces, functions)
