"""The error raised for program images that cannot be loaded or read."""

from __future__ import annotations

import struct

from elftools.common.exceptions import DWARFError, ELFError
from elftools.construct import ConstructError

from ..errors import CputraceError


class ImageError(CputraceError):
    """A program image problem: the message names the file, line or address at fault."""


ELF_PARSE_ERRORS = (
    ELFError,
    DWARFError,
    ConstructError,
    struct.error,
    ValueError,
    KeyError,
    IndexError,
)
"""What pyelftools raises on truncated or damaged files; loaders turn these into ImageError."""
