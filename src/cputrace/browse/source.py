"""The source pane: the file and line of a pc from the image's DWARF line tables, and the text
around it when the file is found.

A line table names files as the compiler saw them (relative to its directory, or absolute);
a file is looked for as named, then under each `--source-dir` by the name, then by its path
with leading folders dropped one at a time (so a tree moved elsewhere is still found).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..image.sourcelines import LineTable


MAX_SOURCE_BYTES = 16 << 20
"""Larger files are not read: a source pane shows a few lines of a source file."""
_CACHED_FILES = 8


@dataclass(frozen=True, slots=True)
class SourceView:
    """Where a pc's code comes from, and the lines around it."""

    file: str  # as the line table names it
    line: int
    path: Path | None  # the file found (None: not found, or too large to show)
    first: int  # the line number of text[0]
    text: tuple[str, ...]


class Sources:
    """Source lines of code addresses, from one image's line tables and some source folders."""

    def __init__(self, lines: LineTable, directories: Sequence[Path] = ()) -> None:
        self.lines = lines
        self.directories = tuple(Path(d) for d in directories)
        self._texts: OrderedDict[str, tuple[Path, tuple[str, ...]] | None] = OrderedDict()

    def at(self, pc: int, context: int = 8) -> SourceView | None:
        """The file and line of `pc` with up to `context` lines either side (None: the line
        tables do not cover `pc`)."""
        found = self.lines.lines_for(pc)
        if found is None:
            return None
        name, line = found
        text = self._text(name)
        if text is None:
            return SourceView(name, line, None, line, ())
        path, lines = text
        first = max(1, line - context)
        return SourceView(name, line, path, first, lines[first - 1 : line + context])

    def _text(self, name: str) -> tuple[Path, tuple[str, ...]] | None:
        if name in self._texts:
            self._texts.move_to_end(name)
            return self._texts[name]
        text = None
        for path in self._candidates(name):
            try:
                if path.is_file() and path.stat().st_size <= MAX_SOURCE_BYTES:
                    text = (path, tuple(path.read_text(errors="replace").splitlines()))
                    break
            except OSError:
                continue
        self._texts[name] = text
        if len(self._texts) > _CACHED_FILES:
            self._texts.popitem(last=False)
        return text

    def _candidates(self, name: str) -> list[Path]:
        named = PurePath(name)
        candidates = [Path(named)]
        parts = named.parts[1:] if named.is_absolute() else named.parts
        for directory in self.directories:
            candidates += [directory.joinpath(*parts[i:]) for i in range(len(parts))]
        return candidates
