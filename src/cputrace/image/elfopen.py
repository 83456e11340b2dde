"""Opening ELF files so that damaged or truncated ones fail as ImageError, not as crashes."""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from elftools.common.exceptions import DWARFError, ELFError
from elftools.construct import ConstructError
from elftools.elf.elffile import ELFFile

from .errors import ImageError

_PARSE_ERRORS = (
    ELFError,
    DWARFError,
    ConstructError,
    struct.error,
    ValueError,
    KeyError,
    IndexError,
    OverflowError,
    AttributeError,
    TypeError,
    AssertionError,
    RuntimeError,  # NotImplementedError for forms pyelftools does not know
)
"""What pyelftools raises on damaged files. Damaged DWARF makes it fail deep inside (None
where it expects bytes, asserts), so the list is wide; it is only caught around parsing."""


@contextmanager
def open_elf(path: Path, what: str) -> Iterator[tuple[ELFFile, BinaryIO, int]]:
    """(ELFFile, its stream, file size) for `path`, with every section inside the file.

    Errors while the caller parses inside the block also become ImageError, prefixed with
    the path and `what` was being read.
    """
    try:
        with open(path, "rb") as stream:
            size = os.fstat(stream.fileno()).st_size
            elf = ELFFile(stream)
            for index, section in enumerate(elf.iter_sections()):
                end = section["sh_offset"] + section["sh_size"]
                if section["sh_type"] != "SHT_NOBITS" and end > size:
                    raise ImageError(
                        f"{path}: section {index} ({section.name or 'unnamed'}) ends at file "
                        f"offset 0x{end:x}, past the end of the file (0x{size:x}); truncated?"
                    )
            yield elf, stream, size
    except OSError as exc:
        raise ImageError(f"{path}: cannot read: {exc.strerror}") from exc
    except _PARSE_ERRORS as exc:
        raise ImageError(f"{path}: {what}: {exc}") from exc
