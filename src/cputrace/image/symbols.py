"""Symbols: names for addresses, and the instruction set each address range holds.

Analyses resolve millions of program counters to names, so the table is flattened once into
a sorted list of address intervals, each owned by one symbol: a lookup is one binary search,
and `lookup_many` does all of them in one `numpy.searchsorted`.
"""

from __future__ import annotations

import enum
import heapq
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from ..model import Isa


class SymbolKind(enum.StrEnum):
    """What a symbol names; the order of the members is the preference among duplicates."""

    FUNC = "func"
    OBJECT = "object"
    NOTYPE = "notype"


class Binding(enum.StrEnum):
    """Symbol visibility; the order of the members is the preference among duplicates."""

    GLOBAL = "global"
    WEAK = "weak"
    LOCAL = "local"


_KIND_RANK = {kind: rank for rank, kind in enumerate(SymbolKind)}
_BINDING_RANK = {binding: rank for rank, binding in enumerate(Binding)}


@dataclass(frozen=True, slots=True)
class Symbol:
    """A named address. `size` 0 means unknown: the symbol then reaches the next symbol."""

    name: str
    address: int
    size: int = 0
    kind: SymbolKind = SymbolKind.NOTYPE
    binding: Binding = Binding.GLOBAL
    isa: Isa | None = None  # instruction set of a function's code (Thumb from bit 0 on Arm)


@dataclass(frozen=True, slots=True)
class StateRange:
    """Addresses [start, end) that hold code of one instruction set, or data when isa is None.

    Arm ELF files mark these with mapping symbols ($a, $t, $x, $d), which are not names.
    """

    start: int
    end: int
    isa: Isa | None


class _Ranges:
    """Sorted, non-overlapping ranges looked up by address."""

    def __init__(self, ranges: Iterable[StateRange]) -> None:
        ordered = sorted(ranges, key=lambda r: (r.start, r.end))
        self.ranges = tuple(ordered)
        self._starts = [r.start for r in ordered]

    def at(self, address: int) -> StateRange | None:
        i = bisect_right(self._starts, address) - 1
        if i >= 0 and address < self.ranges[i].end:
            return self.ranges[i]
        return None


class SymbolTable:
    """Symbols of one or more programs, with address lookup, name lookup and ISA state.

    `lookup` returns the innermost sized symbol containing the address; where none does, the
    nearest preceding zero-size symbol (which reaches up to the next symbol's address). Of
    several symbols at one address the preferred one names it: names given in `prefer`
    first, then FUNC over OBJECT over NOTYPE, then global over weak over local, then the
    first in input order.
    """

    def __init__(
        self,
        symbols: Iterable[Symbol] = (),
        states: Iterable[StateRange] = (),
        prefer: Sequence[str] = (),
    ) -> None:
        self.symbols: tuple[Symbol, ...] = tuple(symbols)
        self.states: tuple[StateRange, ...] = tuple(states)
        self.preferred: tuple[str, ...] = tuple(prefer)
        self.addresses = np.fromiter(
            (s.address for s in self.symbols), dtype=np.uint64, count=len(self.symbols)
        )
        self.addresses.flags.writeable = False
        self._mapping = _Ranges(self.states)
        self._functions = _Ranges(
            StateRange(s.address, s.address + max(s.size, 1), s.isa)
            for s in self.symbols
            if s.isa is not None
        )
        self._by_address: dict[int, list[int]] = {}
        self._by_name: dict[str, int] = {}
        for i in sorted(range(len(self.symbols)), key=self._rank):
            symbol = self.symbols[i]
            self._by_address.setdefault(symbol.address, []).append(i)
            self._by_name.setdefault(symbol.name, i)
        self._bounds, self._owners = self._intervals()
        self._bounds_list: list[int] = self._bounds.tolist()
        self._owners_list: list[int] = self._owners.tolist()

    @classmethod
    def merge(cls, tables: Iterable[SymbolTable]) -> SymbolTable:
        """One table with the symbols, states and preferences of all."""
        tables = list(tables)
        return cls(
            (s for t in tables for s in t.symbols),
            (r for t in tables for r in t.states),
            [name for t in tables for name in t.preferred],
        )

    def prefer(self, *names: str) -> SymbolTable:
        """A table where `names` win over other symbols at their addresses (earlier first)."""
        return SymbolTable(self.symbols, self.states, (*names, *self.preferred))

    def __len__(self) -> int:
        return len(self.symbols)

    def __iter__(self) -> Iterator[Symbol]:
        return iter(self.symbols)

    def _rank(self, i: int) -> tuple[int, int, int, int]:
        symbol = self.symbols[i]
        preferred = (
            self.preferred.index(symbol.name) if symbol.name in self.preferred else len(self.preferred)
        )
        return (preferred, _KIND_RANK[symbol.kind], _BINDING_RANK[symbol.binding], i)

    def _intervals(self) -> tuple[np.ndarray, np.ndarray]:
        """Flatten the symbols into (interval starts, owning symbol index or -1)."""
        groups: dict[int, tuple[int, int | None]] = {}
        for address, members in self._by_address.items():
            ends = [address + self.symbols[i].size for i in members if self.symbols[i].size]
            groups[address] = (members[0], max(ends) if ends else None)
        points = sorted(set(groups) | {end for _, end in groups.values() if end is not None})
        active: list[tuple[int, int, int]] = []  # (-start, end, symbol) of sized symbols
        last_unsized = -1
        bounds: list[int] = []
        owners: list[int] = []
        for point in points:
            if point in groups:
                index, end = groups[point]
                if end is None:
                    last_unsized = index
                else:
                    heapq.heappush(active, (-point, end, index))
                    last_unsized = -1
            while active and active[0][1] <= point:
                heapq.heappop(active)
            owner = active[0][2] if active else last_unsized
            if not owners or owners[-1] != owner:
                bounds.append(point)
                owners.append(owner)
        return np.array(bounds, dtype=np.uint64), np.array(owners, dtype=np.int32)

    def index_of(self, address: int) -> int:
        """Index into `symbols` of the symbol naming `address`, or -1."""
        i = bisect_right(self._bounds_list, address) - 1
        return self._owners_list[i] if i >= 0 else -1

    def lookup(self, address: int) -> tuple[str, int] | None:
        """(name, offset) of the symbol naming `address`, or None."""
        i = self.index_of(address)
        if i < 0:
            return None
        symbol = self.symbols[i]
        return symbol.name, address - symbol.address

    def lookup_many(self, addresses: np.ndarray) -> np.ndarray:
        """Indices into `symbols` (int32, -1 for none) naming each address, vectorised.

        Offsets are `addresses - table.addresses[indices]` where the index is not -1.
        """
        addresses = np.asarray(addresses, dtype=np.uint64)
        if not len(self._bounds):
            return np.full(addresses.shape, -1, dtype=np.int32)
        i = np.searchsorted(self._bounds, addresses, side="right").astype(np.int64) - 1
        return np.where(i >= 0, self._owners[np.maximum(i, 0)], np.int32(-1))

    def symbols_at(self, address: int) -> list[Symbol]:
        """Every symbol at exactly `address`, preferred first."""
        return [self.symbols[i] for i in self._by_address.get(address, ())]

    def address_of(self, name: str) -> int | None:
        """Address of the symbol called `name` (the preferred one if several), or None."""
        i = self._by_name.get(name)
        return None if i is None else self.symbols[i].address

    def state_at(self, address: int) -> Isa | None:
        """Instruction set of the code at `address`, or None for data or unknown.

        Mapping symbols decide where present; otherwise the function containing the address.
        """
        mapped = self._mapping.at(address)
        if mapped is not None:
            return mapped.isa
        function = self._functions.at(address)
        return function.isa if function is not None else None

    def is_data(self, address: int) -> bool:
        """Whether a mapping symbol ($d) marks `address` as data inside code."""
        mapped = self._mapping.at(address)
        return mapped is not None and mapped.isa is None


def function_names(addresses: np.ndarray, symbols: SymbolTable | None) -> list[str]:
    """`symbol` or `symbol+0x10` for each function entry address, `0x8000` where no symbol covers it."""
    fallback = [f"{a:#x}" for a in addresses.tolist()]
    if symbols is None or not len(symbols):
        return fallback
    indices = symbols.lookup_many(addresses)
    names = []
    for address, index, plain in zip(addresses.tolist(), indices.tolist(), fallback, strict=True):
        if index < 0:
            names.append(plain)
            continue
        symbol = symbols.symbols[index]
        offset = address - symbol.address
        names.append(symbol.name if not offset else f"{symbol.name}+{offset:#x}")
    return names
