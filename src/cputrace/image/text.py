"""Reading the lines of small text image files with line numbers for error messages."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from .errors import ImageError


def numbered_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, stripped text) of each non-blank line; ImageError for unreadable files."""
    try:
        with open(path, "rb") as stream:
            for number, raw in enumerate(stream, 1):
                try:
                    line = raw.decode("ascii").strip()
                except UnicodeDecodeError:
                    raise ImageError(f"{path}:{number}: not ASCII text") from None
                if line:
                    yield number, line
    except OSError as exc:
        raise ImageError(f"{path}: cannot read: {exc.strerror}") from exc
