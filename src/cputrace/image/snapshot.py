"""Memory dumps listed by CoreSight trace snapshots (the `[dump]` sections of device .ini files).

A device file may hold several dump sections, all called `[dump]` or `[dumpN]`; Python's
configparser merges sections of one name, so the file is read with a small parser here.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from .errors import ImageError
from .files import map_or_decompress
from .memory import Image, Region
from .text import numbered_lines


class DumpEntry(NamedTuple):
    """One dump: `length` bytes (None = to the end) of `file` from `offset`, at `address`."""

    file: str
    address: int
    length: int | None = None
    offset: int = 0


def read_ini_sections(ini: Path) -> list[tuple[str, int, dict[str, tuple[int, str]]]]:
    """(section name, line, {key: (line, value)}) in file order, repeated names kept apart."""
    sections: list[tuple[str, int, dict[str, tuple[int, str]]]] = []
    for number, line in numbered_lines(ini):
        if line.startswith((";", "#")):
            continue
        if line.startswith("[") and line.endswith("]"):
            sections.append((line[1:-1].strip().lower(), number, {}))
        elif "=" in line and sections:
            key, value = line.split("=", 1)
            sections[-1][2][key.strip().lower()] = (number, value.strip())
        else:
            raise ImageError(f"{ini}:{number}: expected [section] or key=value")
    return sections


def _number(ini: Path, keys: dict[str, tuple[int, str]], key: str) -> int | None:
    if key not in keys:
        return None
    number, text = keys[key]
    try:
        return int(text, 0)
    except ValueError:
        raise ImageError(f"{ini}:{number}: {key}={text} is not a number") from None


def read_dump_entries(ini: str | os.PathLike[str]) -> list[DumpEntry]:
    """The dump entries of a snapshot device file (`file=`, `address=`, `length=`, `offset=`)."""
    ini = Path(ini)
    entries = []
    for name, number, keys in read_ini_sections(ini):
        if not name.startswith("dump"):
            continue
        address = _number(ini, keys, "address")
        if "file" not in keys or address is None:
            raise ImageError(f"{ini}:{number}: [{name}] needs both file= and address=")
        entries.append(
            DumpEntry(
                keys["file"][1],
                address,
                _number(ini, keys, "length"),
                _number(ini, keys, "offset") or 0,
            )
        )
    return entries


def load_snapshot_dumps(ini: str | os.PathLike[str], entries: Iterable[DumpEntry]) -> Image:
    """The dumps as one image; dump files are found relative to the .ini file's directory, and
    may be there compressed (`kernel_dump.bin.xz` for `kernel_dump.bin`)."""
    ini = Path(ini)
    regions = []
    for entry in entries:
        path = ini.parent / entry.file
        try:
            data = map_or_decompress(path, entry.offset, entry.length)
        except ImageError as exc:
            raise ImageError(f"{ini}: dump at 0x{entry.address:x}: {exc}") from exc
        regions.append(Region(entry.address, data, str(path)))
    return Image(regions)


def load_snapshot_device(ini: str | os.PathLike[str]) -> Image:
    """The memory a snapshot device file dumps: `read_dump_entries` then load them."""
    return load_snapshot_dumps(ini, read_dump_entries(ini))
