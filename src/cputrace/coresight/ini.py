"""The .ini files of CoreSight snapshots, read section by section in file order.

A device file may hold several dump sections, all called `[dump]` or `[dumpN]`; Python's
configparser merges sections of one name, so the files are read with this small reader.
"""

from __future__ import annotations

from pathlib import Path

from ..image.errors import ImageError
from ..image.text import numbered_lines

Section = tuple[str, int, dict[str, tuple[int, str]]]
"""(name, line, {key: (line, value)}): names and keys lower-cased, values stripped."""


def read_ini_sections(ini: Path) -> list[Section]:
    """The sections of `ini` in file order, repeated names kept apart."""
    sections: list[Section] = []
    for number, line in numbered_lines(ini):
        if line.startswith((";", "#")):
            continue
        if line.startswith("[") and line.endswith("]"):
            sections.append((line[1:-1].strip().lower(), number, {}))
        elif "=" in line and sections:
            key, value = line.split("=", 1)
            name, _, keys = sections[-1]
            key = key.strip().lower()
            if key in keys:  # which of the two values is meant cannot be told
                first = keys[key][0]
                raise ImageError(f"{ini}:{number}: expected {key}= once in [{name}] (line {first} has it)")
            keys[key] = (number, value.strip())
        else:
            raise ImageError(f"{ini}:{number}: expected [section] or key=value")
    return sections
