"""Reading the lines of small text files (image formats, CoreSight .ini files) with line numbers
for error messages."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from .errors import ImageError

MAX_LINE_BYTES = 1 << 20
"""The longest line read: these files' lines are short, and a longer one is not such a file."""


def numbered_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, stripped text) of each non-blank line; ImageError naming the file (and
    line) for a file that cannot be read, or that is not short lines of ASCII text."""
    try:
        with open(path, "rb") as stream:
            number = 0
            while raw := stream.readline(MAX_LINE_BYTES + 1):
                number += 1
                if len(raw) > MAX_LINE_BYTES:
                    raise ImageError(f"{path}:{number}: expected a line of at most {MAX_LINE_BYTES:,} bytes")
                try:
                    line = raw.decode("ascii").strip()
                except UnicodeDecodeError:
                    raise ImageError(f"{path}:{number}: not ASCII text") from None
                if "\0" in line:
                    raise ImageError(f"{path}:{number}: expected text, got a NUL byte")
                if line:
                    yield number, line
    except OSError as exc:
        raise ImageError(f"{path}: cannot read: {exc.strerror}") from exc
