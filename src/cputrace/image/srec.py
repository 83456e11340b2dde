"""Motorola S-record images (`S<type><count><address><data><checksum>` records)."""

from __future__ import annotations

import os
from pathlib import Path

from .errors import ImageError
from .memory import Image
from .records import Record, hex_bytes, regions_from_records
from .text import numbered_lines

_ADDRESS_BYTES = {"0": 2, "1": 2, "2": 3, "3": 4, "5": 2, "6": 3, "7": 4, "8": 3, "9": 2}
_DATA_TYPES = "123"
_COUNT_TYPES = "56"
_END_TYPES = "789"


def load_srec(path: str | os.PathLike[str], offset: int = 0) -> Image:
    """The S1/S2/S3 data of an S-record file, checksums and S5/S6 counts verified."""
    path = Path(path)
    records: list[Record] = []
    ended = False
    for number, line in numbered_lines(path):
        where = f"{path}:{number}"
        if ended:
            raise ImageError(f"{where}: record after the termination record")
        kind = line[1:2]
        if not line.startswith("S") or kind not in _ADDRESS_BYTES:
            raise ImageError(f"{where}: expected an S-record (S0-S3, S5-S9)")
        record = hex_bytes(line[2:], where)
        width = _ADDRESS_BYTES[kind]
        if len(record) < width + 2 or record[0] != len(record) - 1:
            raise ImageError(
                f"{where}: record length does not match its byte count"
                + (f" ({record[0]})" if record else "")
            )
        expected = ~sum(record[:-1]) & 0xFF
        if record[-1] != expected:
            raise ImageError(f"{where}: bad checksum 0x{record[-1]:02x} (expected 0x{expected:02x})")
        address = int.from_bytes(record[1 : 1 + width], "big")
        if kind in _DATA_TYPES:
            records.append(Record(address + offset, record[1 + width : -1], number))
        elif kind in _COUNT_TYPES and address != len(records):
            raise ImageError(f"{where}: S{kind} says {address} data records, the file has {len(records)}")
        elif kind in _END_TYPES:
            ended = True
    if not ended:
        raise ImageError(f"{path}: no termination record (S7/S8/S9); is the file truncated?")
    return Image(regions_from_records(records, str(path)))
