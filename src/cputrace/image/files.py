"""Reading binary files for images: mapped into memory, so large dumps cost address space
rather than RAM, or decompressed where only a compressed copy is there."""

from __future__ import annotations

import mmap
from pathlib import Path

from ..errors import TraceFormatError
from ..inputs import InputFile, read_exactly
from .errors import ImageError

COMPRESSED_SUFFIXES = (".xz", ".gz", ".zst", ".bz2")
"""The compressed copies of a file `map_or_decompress` looks for, in this order."""
_BLOCK = 1 << 20


def names_a_file(path: Path) -> bool:
    """Whether `path` is a file; False too for a name no file can have (too long, a NUL byte)."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


def _span(path: Path, size: int, offset: int, length: int | None) -> int:
    """How many bytes [offset, offset+length) asks for (to the end when length is None)."""
    wanted = size - offset if length is None else length
    if offset < 0 or wanted < 0 or offset + wanted > size:
        raise ImageError(
            f"{path}: asked for 0x{max(wanted, 0):x} bytes at file offset 0x{offset:x}, "
            f"but the file has 0x{size:x} bytes"
        )
    return wanted


def map_file(path: Path, offset: int = 0, length: int | None = None) -> memoryview | bytes:
    """Bytes [offset, offset+length) of a file (to its end when length is None), read-only.

    ImageError when the file cannot be read or is shorter than asked.
    """
    try:
        with open(path, "rb") as stream:
            wanted = _span(path, stream.seek(0, 2), offset, length)
            if wanted == 0:
                return b""
            mapped = mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as exc:
        raise ImageError(f"{path}: cannot read: {exc.strerror}") from exc
    return memoryview(mapped)[offset : offset + wanted]


def _compressed_copy(path: Path) -> Path | None:
    """A compressed copy beside a missing `path` (`NAME.xz`, `.gz`, `.zst`, `.bz2`), if any."""
    if names_a_file(path) or not path.name:  # there, or a name ("/") that has no copies
        return None
    return next((c for s in COMPRESSED_SUFFIXES if names_a_file(c := path.with_name(path.name + s))), None)


def has_copy(path: Path) -> bool:
    """Whether `path` is a file, or a compressed copy of it is beside it (see `map_or_decompress`)."""
    return names_a_file(path) or _compressed_copy(path) is not None


def map_or_decompress(path: Path, offset: int = 0, length: int | None = None) -> memoryview | bytes:
    """`map_file(path, offset, length)`; or, when `path` is missing and a compressed copy is
    beside it (`NAME.xz`, `.gz`, `.zst`, `.bz2`: data shipped compressed to save space), the
    same bytes of that copy's content, decompressed into memory."""
    packed = _compressed_copy(path)
    return map_file(path, offset, length) if packed is None else _decompressed(packed, offset, length)


def _decompressed(path: Path, offset: int, length: int | None) -> bytes:
    """Bytes [offset, offset+length) of a compressed file's content; only what they need is read."""
    try:
        source = InputFile(path)
        if source.compression is None:
            raise ImageError(f"{path}: expected a gzip, zstd, xz or bzip2 file, got none of them")
        stream = source.open(report=False)
        try:
            end = None if length is None else offset + max(length, 0)
            parts = []
            while block := read_exactly(stream, _BLOCK if end is None else min(_BLOCK, end), str(path)):
                parts.append(block)
                if end is not None:
                    end -= len(block)
        finally:
            stream.close()
    except OSError as exc:
        raise ImageError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    except TraceFormatError as exc:
        raise ImageError(str(exc)) from exc
    content = b"".join(parts)
    wanted = _span(path, len(content), offset, length)
    return content[offset : offset + wanted]
