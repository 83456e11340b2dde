"""What the formats' split modules (batch/partition.py's `SPLITS`) share: a byte range of an
input decoded from a carry.

Each format's `RangeDecode` is one, with that format's carry and facts (its split module's
docstring says what they hold): batch/partition.py makes one a task, from the range's start
carry, runs its `batches`, then reads its `end` and `facts`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

from ..inputs import InputFile
from .base import Batch, DecodeContext

CarryT = TypeVar("CarryT")
FactsT = TypeVar("FactsT")


@dataclass(eq=False)
class SplitRange(Generic[CarryT, FactsT]):
    """A byte range of an input decoded from the carry `start`: `batches`, then `end` (the
    carry after its last line) and `facts` (what its decoding found beyond its rows), which a
    format's subclass declares with their starting values. The last range (`final`) decodes
    to the input's end."""

    source: InputFile
    ctx: DecodeContext
    start: CarryT
    byte_range: tuple[int, int]
    final: bool

    def batches(self) -> Iterator[Batch]:
        raise NotImplementedError
