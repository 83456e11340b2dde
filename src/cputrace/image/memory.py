"""Program images: memory regions with bytes, read by address.

Decoders of compressed traces fetch every instruction they reconstruct from here, so reads
that the image cannot satisfy fail loudly with the address, never with made-up bytes.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import pairwise

from .arch import Architecture, CodeRange
from .errors import ImageError
from .sourcelines import LineTable
from .symbols import SymbolTable


@dataclass(frozen=True, slots=True)
class Region:
    """Bytes at an address; `name` says where they came from so errors can point at it."""

    start: int
    data: bytes | memoryview
    name: str

    @property
    def end(self) -> int:
        """The address just past the last byte."""
        return self.start + len(self.data)

    def __str__(self) -> str:
        return f"{self.name} [0x{self.start:x}-0x{self.end:x})"


ADDRESS_SPACE = 1 << 64
"""Addresses are 64-bit: an image's bytes lie below this."""


class Image:
    """Non-overlapping regions of memory, plus the symbols and line tables that describe them.

    `architecture` is what the file says its code is for (None: it does not say); `code` the
    ranges that hold code (None: not known, every region may).
    """

    def __init__(
        self,
        regions: Iterable[Region] = (),
        symbols: SymbolTable | None = None,
        lines: LineTable | None = None,
        entry: int | None = None,
        architecture: Architecture | None = None,
        code: Iterable[CodeRange] | None = None,
    ) -> None:
        ordered = sorted((r for r in regions if len(r.data)), key=lambda r: r.start)
        for region in ordered:
            if region.start < 0:
                raise ImageError(f"{region}: negative address")
            if region.end > ADDRESS_SPACE:
                raise ImageError(f"{region}: beyond the 64-bit address space")
        for before, after in pairwise(ordered):
            if after.start < before.end:
                raise ImageError(f"{after} overlaps {before}")
        self._regions = tuple(ordered)
        self._starts = [r.start for r in ordered]
        self.symbols: SymbolTable = symbols if symbols is not None else SymbolTable()
        self.lines: LineTable = lines if lines is not None else LineTable()
        self.entry = entry  # where execution starts (ELF e_entry), when the file says
        self.architecture = architecture
        self._code = None if code is None else tuple(sorted(code, key=lambda c: c.start))

    @classmethod
    def merge(cls, images: Iterable[Image]) -> Image:
        """One image holding the regions, symbols and lines of all; regions must not overlap."""
        images = list(images)
        return cls(
            (r for image in images for r in image.regions),
            SymbolTable.merge(image.symbols for image in images),
            LineTable.merge(image.lines for image in images),
            next((image.entry for image in images if image.entry is not None), None),
            Architecture.combined(image.architecture for image in images),
            (c for image in images for c in image.code_ranges),
        )

    @property
    def code_ranges(self) -> tuple[CodeRange, ...]:
        """Where the image holds code, by address: as the file says, else every region."""
        if self._code is not None:
            return self._code
        return tuple(CodeRange(r.start, r.end, r.name) for r in self._regions)

    @property
    def regions(self) -> tuple[Region, ...]:
        """The regions in address order."""
        return self._regions

    def __repr__(self) -> str:
        shown = ", ".join(str(r) for r in self._regions[:4])
        more = f", +{len(self._regions) - 4} more" if len(self._regions) > 4 else ""
        return f"Image({shown}{more}; {len(self.symbols)} symbols)"

    def _pieces(self, address: int, size: int) -> Iterator[memoryview]:
        """Consecutive bytes from `address`, across adjacent regions, until `size` or a gap."""
        i = bisect_right(self._starts, address) - 1
        while size > 0 and 0 <= i < len(self._regions):
            region = self._regions[i]
            if not region.start <= address < region.end:
                return
            offset = address - region.start
            piece = memoryview(region.data)[offset : offset + size]
            yield piece
            address += len(piece)
            size -= len(piece)
            i += 1

    def read(self, address: int, size: int) -> bytes:
        """`size` bytes at `address`; ImageError naming the first address the image lacks."""
        data = b"".join(self._pieces(address, size))
        if len(data) < size:
            missing = address + len(data)
            raise ImageError(
                f"0x{missing:x} is not in the program image (reading {size} bytes at "
                f"0x{address:x}; image holds {self._describe()})"
            )
        return data

    def read_upto(self, address: int, limit: int) -> bytes:
        """Up to `limit` bytes from `address`, fewer where the image ends; b"" if none there."""
        return b"".join(self._pieces(address, limit))

    def contains(self, address: int, size: int = 1) -> bool:
        """Whether every byte of [address, address+size) is in the image."""
        return sum(len(p) for p in self._pieces(address, size)) == size

    def _describe(self) -> str:
        if not self._regions:
            return "nothing"
        shown = ", ".join(str(r) for r in self._regions[:3])
        more = len(self._regions) - 3
        return shown + (f" and {more} more regions" if more > 0 else "")
