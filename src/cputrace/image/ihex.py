"""Intel HEX images (`:LLAAAATT<data>CC` records)."""

from __future__ import annotations

import os
from pathlib import Path

from .errors import ImageError
from .memory import Image
from .records import Record, hex_bytes, regions_from_records
from .text import numbered_lines

_DATA, _EOF, _SEGMENT_BASE, _SEGMENT_START, _LINEAR_BASE, _LINEAR_START = range(6)


def load_ihex(path: str | os.PathLike[str], offset: int = 0) -> Image:
    """The data records of an Intel HEX file, each checksum verified; `offset` moves them all."""
    path = Path(path)
    records: list[Record] = []
    base = 0
    ended = False
    for number, line in numbered_lines(path):
        where = f"{path}:{number}"
        if ended:
            raise ImageError(f"{where}: record after the end-of-file record")
        if not line.startswith(":"):
            raise ImageError(f"{where}: expected an Intel HEX record starting with ':'")
        record = hex_bytes(line[1:], where)
        if len(record) < 5 or len(record) != record[0] + 5:
            raise ImageError(
                f"{where}: record length does not match its byte count"
                + (f" ({record[0]})" if record else "")
            )
        if sum(record) & 0xFF:
            expected = -sum(record[:-1]) & 0xFF
            raise ImageError(
                f"{where}: bad checksum 0x{record[-1]:02x} (the record sums to 0x{expected:02x})"
            )
        kind, data = record[3], record[4:-1]
        if kind == _DATA:
            address = base + (record[1] << 8 | record[2])
            records.append(Record(address + offset, data, number))
        elif kind == _EOF:
            ended = True
        elif kind in (_SEGMENT_BASE, _LINEAR_BASE):
            if len(data) != 2:
                raise ImageError(f"{where}: address record needs 2 data bytes, has {len(data)}")
            base = int.from_bytes(data, "big") << (4 if kind == _SEGMENT_BASE else 16)
        elif kind not in (_SEGMENT_START, _LINEAR_START):
            raise ImageError(f"{where}: unknown Intel HEX record type 0x{kind:02x}")
    if not ended:
        raise ImageError(f"{path}: no end-of-file record (:00000001FF); is the file truncated?")
    return Image(regions_from_records(records, str(path)))
