"""Memory dumps listed by CoreSight trace snapshots (the `[dump]` sections of device .ini files)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from ..image import Image, ImageError, Region
from ..image.files import has_copy, map_or_decompress
from .ini import Section, read_ini_sections


class DumpEntry(NamedTuple):
    """One dump: `length` bytes (None = to the end) of `file` from `offset`, at `address`;
    `line` is where its section starts in the device file."""

    file: str
    address: int
    length: int | None = None
    offset: int = 0
    line: int = 0


ADDRESS_LIMIT = 1 << 64
"""Dumps are of a 64-bit address space: every byte's address is below this."""
_EXPECTED = {
    "address": f"an address from 0 to {ADDRESS_LIMIT - 1:#x}",
    "length": f"a byte count from 0 to {ADDRESS_LIMIT:#x}",
    "offset": f"a file offset from 0 to {(1 << 63) - 1:#x}",
}
_LIMITS = {"address": ADDRESS_LIMIT - 1, "length": ADDRESS_LIMIT, "offset": (1 << 63) - 1}


def _number(ini: Path, keys: dict[str, tuple[int, str]], key: str) -> int | None:
    """The number `key=` gives (in any base Python reads), checked against its range."""
    if key not in keys:
        return None
    number, text = keys[key]
    try:
        value = int(text, 0)
    except ValueError:  # not a number, or one of over 4,300 digits
        value = -1
    if not 0 <= value <= _LIMITS[key]:
        raise ImageError(f"{ini}:{number}: expected {key}= {_EXPECTED[key]}, got {text!r}")
    return value


def read_dump_entries(ini: str | os.PathLike[str]) -> list[DumpEntry]:
    """The dump entries of a snapshot device file (`file=`, `address=`, `length=`, `offset=`)."""
    return dump_entries(Path(ini), read_ini_sections(Path(ini)))


def dump_entries(ini: Path, sections: Iterable[Section]) -> list[DumpEntry]:
    """The dump entries of the `[dump...]` sections among `sections`, read from `ini`."""
    entries = []
    for name, number, keys in sections:
        if not name.startswith("dump"):
            continue
        address = _number(ini, keys, "address")
        if "file" not in keys or address is None:
            raise ImageError(f"{ini}:{number}: [{name}] needs both file= and address=")
        length = _number(ini, keys, "length")
        if length is not None and address + length > ADDRESS_LIMIT:
            line, text = keys["length"]
            expected = f"length= at most {ADDRESS_LIMIT - address:#x} (a dump ends by address 2**64)"
            raise ImageError(f"{ini}:{line}: expected {expected}, got {text!r}")
        entries.append(DumpEntry(keys["file"][1], address, length, _number(ini, keys, "offset") or 0, number))
    return entries


def load_snapshot_dumps(ini: str | os.PathLike[str], entries: Iterable[DumpEntry]) -> Image:
    """The dumps as one image; dump files are found relative to the .ini file's directory, and
    may be there compressed (`kernel_dump.bin.xz` for `kernel_dump.bin`). An error names the
    device file and the line of the dump's section."""
    ini = Path(ini)
    regions = []
    for entry in entries:
        path = ini.parent / entry.file
        where = f"{ini}:{entry.line}: dump of {entry.file} at {entry.address:#x}"
        try:
            data = map_or_decompress(path, entry.offset, entry.length)
        except ImageError as exc:
            raise ImageError(f"{where}: {exc}") from exc
        if entry.address + len(data) > ADDRESS_LIMIT:
            raise ImageError(f"{where}: its {len(data):#x} bytes end past address {ADDRESS_LIMIT:#x}")
        regions.append(Region(entry.address, data, str(path)))
    return Image(regions)


def load_snapshot_device(ini: str | os.PathLike[str]) -> Image:
    """The memory a snapshot device file dumps: `read_dump_entries` then load them."""
    return load_snapshot_dumps(ini, read_dump_entries(ini))


def present_dumps(ini: Path, entries: list[DumpEntry]) -> tuple[list[DumpEntry], list[DumpEntry]]:
    """`entries` split into those whose file (or a compressed copy) is there beside `ini`,
    and those whose file is not."""
    there = {entry: has_copy(ini.parent / entry.file) for entry in entries}
    return [e for e in entries if there[e]], [e for e in entries if not there[e]]
