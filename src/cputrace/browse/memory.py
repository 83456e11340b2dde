"""Memory at a point, from the browse index: analysis/state.py's answer, by lookups.

A byte's value after instruction `seq` is the last known-data write covering it at or before
`seq` (writes of different sizes overlap: they are applied oldest first), else the value a
read saw before any write, else unknown (or the image's). The index lists every (address,
size) written (`places`), so the writes that can cover a range are those of the places from
`widest_write - 1` bytes below it to its end: one lookup each for its last write by `seq`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..analysis.state import READ_BEFORE_WRITE, UNKNOWN, MemoryBytes, fill_from_image, paint_writes
from ..errors import BrowseError
from .index import BrowseIndex

if TYPE_CHECKING:
    from ..image import Image

ADDRESS_LIMIT = 1 << 64
MAX_LENGTH = 1 << 16
"""Bytes one query may ask for: a pane's worth, many times over."""
_LAST = (1 << 63) - 1


def memory_at(index: BrowseIndex, address: int, length: int, seq: int, image: Image | None) -> MemoryBytes:
    """Bytes [address, address + length) after instruction `seq`, each with its origin."""
    if not 0 <= length <= MAX_LENGTH:
        raise BrowseError(f"memory: {length} bytes asked for, at most {MAX_LENGTH}")
    if address < 0 or address + length > ADDRESS_LIMIT:
        raise BrowseError(f"memory range {address:#x}+{length} is outside the 64-bit address space")
    data = np.zeros(length, np.uint8)
    origin = np.full(length, UNKNOWN, np.int64)
    if length:
        end = address + length - 1
        initial = index.initial.between((address,), (end,))
        at = (initial.column("addr").to_numpy() - np.uint64(address)).astype(np.int64)
        data[at] = initial.column("byte").to_numpy()
        origin[at] = READ_BEFORE_WRITE
        paint_writes(_last_writes(index, address, end, seq), address, data, origin)
    if image is not None:
        fill_from_image(image, address, data, origin)
    return MemoryBytes(address, data.tobytes(), origin)


def _last_writes(index: BrowseIndex, address: int, end: int, seq: int) -> list[tuple]:
    """(addr, size, value, wide, seq, src) of the last write at or before `seq` of each place
    overlapping [address, end], oldest first."""
    low = max(0, address - index.widest_write + 1)
    places = index.places.between((low, 0), (end, 255))
    writes = index.writes
    found = []
    for addr, size in zip(places.column("addr").to_pylist(), places.column("size").to_pylist(), strict=True):
        if addr + size <= address:
            continue
        row = writes.upper_bound((addr, size, max(seq, -1), _LAST)) - 1
        if row < 0:
            continue
        write = writes.row(row)
        if (write["addr"], write["size"]) == (addr, size) and write["seq"] <= seq:
            found.append((addr, size, write["value"], write["wide"], write["seq"], write["src"]))
    found.sort(key=lambda w: (w[4], w[5]))
    return found
