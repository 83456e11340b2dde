"""The error raised for program images that cannot be loaded or read."""

from __future__ import annotations

from ..errors import CputraceError


class ImageError(CputraceError):
    """A program image problem: the message names the file, line or address at fault."""
