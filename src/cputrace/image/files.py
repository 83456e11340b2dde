"""Mapping binary files into memory, so large dumps cost address space rather than RAM."""

from __future__ import annotations

import mmap
from pathlib import Path

from .errors import ImageError


def map_file(path: Path, offset: int = 0, length: int | None = None) -> memoryview | bytes:
    """Bytes [offset, offset+length) of a file (to its end when length is None), read-only.

    ImageError when the file cannot be read or is shorter than asked.
    """
    try:
        with open(path, "rb") as stream:
            size = stream.seek(0, 2)
            wanted = size - offset if length is None else length
            if offset < 0 or wanted < 0 or offset + wanted > size:
                raise ImageError(
                    f"{path}: asked for 0x{max(wanted, 0):x} bytes at file offset 0x{offset:x}, "
                    f"but the file has 0x{size:x} bytes"
                )
            if wanted == 0:
                return b""
            mapped = mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as exc:
        raise ImageError(f"{path}: cannot read: {exc.strerror}") from exc
    return memoryview(mapped)[offset : offset + wanted]
