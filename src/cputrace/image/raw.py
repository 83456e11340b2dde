"""Raw binary images: a file's bytes placed at an address the user gives."""

from __future__ import annotations

import os
from pathlib import Path

from .files import map_file
from .memory import Image, Region


def load_raw(path: str | os.PathLike[str], address: int) -> Image:
    """The whole file as one region starting at `address`."""
    path = Path(path)
    return Image([Region(address, map_file(path), str(path))])
