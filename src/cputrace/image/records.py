"""Turning the address/data records of hex files into image regions."""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from .errors import ImageError
from .memory import Region


class Record(NamedTuple):
    """Data bytes at an address, from one line of a text image file."""

    address: int
    data: bytes
    line: int


def regions_from_records(records: Iterable[Record], path: str) -> list[Region]:
    """Join records that follow on from each other into regions; overlaps are errors.

    Hex files list data in any order, and writers split it into short lines, so sorting and
    joining keeps an image of a few large regions rather than thousands of small ones.
    """
    regions: list[Region] = []
    parts: list[bytes] = []
    start = end = 0
    first_line = 0
    previous: Record | None = None
    for record in sorted((r for r in records if r.data), key=lambda r: r.address):
        if previous is not None and record.address < end:
            raise ImageError(
                f"{path}:{record.line}: data at 0x{record.address:x} overlaps the data at "
                f"0x{previous.address:x} from line {previous.line}"
            )
        if not parts or record.address != end:
            if parts:
                regions.append(Region(start, b"".join(parts), f"{path}:{first_line}"))
            parts, start, first_line = [], record.address, record.line
        parts.append(record.data)
        end = record.address + len(record.data)
        previous = record
    if parts:
        regions.append(Region(start, b"".join(parts), f"{path}:{first_line}"))
    return regions


def hex_bytes(text: str, where: str) -> bytes:
    """The bytes spelled by the hex digits of one record, or an ImageError naming the line."""
    if len(text) % 2:
        raise ImageError(f"{where}: odd number of hex digits in record")
    try:
        return bytes.fromhex(text)
    except ValueError:
        raise ImageError(f"{where}: record holds characters that are not hex digits") from None
