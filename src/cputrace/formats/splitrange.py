"""What the formats' split modules (batch/partition.py's `SPLITS`) share: a byte range of an
input decoded from a carry.

Each format's `RangeDecode` is one, with that format's carry and facts (its split module's
docstring says what they hold): batch/partition.py makes one a task, from the range's start
carry, runs its `batches`, then reads its `end` and `facts`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import BinaryIO, Generic, TypeVar

from ..inputs import InputFile
from .base import Batch, DecodeContext

CarryT = TypeVar("CarryT")
FactsT = TypeVar("FactsT")


def moved_starts(
    source: InputFile, nominal: list[int], found_at: Callable[[BinaryIO, int, int], int | None]
) -> list[int]:
    """Where the ranges start, 0 first: each offset of `nominal` (increasing) moved on to the
    place `found_at(file, offset, size)` finds at or after it (the format's next place a range
    can start; None: none near); offsets that find none, or the place the one before found,
    are dropped."""
    starts = [0]
    with open(source.path, "rb") as file:
        for offset in nominal:
            found = found_at(file, max(offset, starts[-1] + 1), source.size)
            if found is not None and found > starts[-1]:
                starts.append(found)
    return starts


@dataclass(eq=False)
class SplitRange(ABC, Generic[CarryT, FactsT]):
    """A byte range of an input decoded from the carry `start`: `batches`, then `end` (the
    carry after its last line) and `facts` (what its decoding found beyond its rows), which a
    format's subclass declares with their starting values. The last range (`final`) decodes
    to the input's end."""

    source: InputFile
    ctx: DecodeContext
    start: CarryT
    byte_range: tuple[int, int]
    final: bool

    @abstractmethod
    def batches(self) -> Iterator[Batch]:
        """The range's rows; `end` and `facts` are known once they are all taken."""
