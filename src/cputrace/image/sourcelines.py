"""Source lines for addresses, from the DWARF line tables of ELF files.

pyelftools runs line programs in pure Python, which takes seconds for a large ELF, so a
table is parsed only when first asked, flattened into sorted numpy arrays, and kept per
(path, mtime, size) so that loading the same unchanged file again costs nothing.
"""

from __future__ import annotations

import functools
import os
import posixpath
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .elfopen import open_elf
from .errors import ImageError


@dataclass(frozen=True, slots=True)
class _Rows:
    """A line table as arrays sorted by address; a row with file -1 ends a sequence."""

    addresses: np.ndarray  # uint64
    file_index: np.ndarray  # int32 into `files`, -1 = no line from here on
    lines: np.ndarray  # int32
    files: tuple[str, ...]

    def shifted(self, offset: int) -> _Rows:
        if not offset:
            return self
        moved = self.addresses + np.uint64(offset % (1 << 64))
        return _Rows(moved, self.file_index, self.lines, self.files)

    def find(self, addresses: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(file index, line) for each address; (-1, 0) where there is no line."""
        if not len(self.addresses):
            return np.full(addresses.shape, -1, np.int32), np.zeros(addresses.shape, np.int32)
        i = np.searchsorted(self.addresses, addresses, side="right").astype(np.int64) - 1
        clipped = np.maximum(i, 0)
        files = np.where(i >= 0, self.file_index[clipped], -1).astype(np.int32)
        lines = np.where(files >= 0, self.lines[clipped], 0).astype(np.int32)
        return files, lines


_EMPTY = _Rows(np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int32), ())


def _file_names(program, comp_dir: str) -> list[str | None]:
    """Paths of a line program's files, indexed as its `file` register counts them.

    DWARF 5 counts files from 0 and directory 0 is the compilation directory; earlier
    versions count files from 1, and directory 0 means the compilation directory.
    """
    version = program["version"]
    dirs = [_text(d) for d in program["include_directory"]]
    names: list[str | None] = [] if version >= 5 else [None]
    for entry in program["file_entry"]:
        name = _text(entry.name)
        index = entry.dir_index
        if version >= 5:
            directory = dirs[index] if index < len(dirs) else ""
        else:
            directory = comp_dir if index == 0 else (dirs[index - 1] if index <= len(dirs) else "")
        names.append(name if os.path.isabs(name) or not directory else _join(directory, name))
    return names


def _text(value: bytes | str | None) -> str:
    """A name from DWARF: bytes, or str from some forms, or None when damaged."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value if isinstance(value, str) else "?"


def _join(directory: str, name: str) -> str:
    return posixpath.normpath(f"{directory}/{name}")


@functools.lru_cache(maxsize=16)
def _rows_for(path: str, mtime_ns: int, size: int) -> _Rows:
    """Parse the line table of one ELF file version (mtime and size key the cache)."""
    addresses: list[int] = []
    file_index: list[int] = []
    lines: list[int] = []
    files: dict[str, int] = {}
    with open_elf(Path(path), "damaged DWARF line table") as (elf, _, _):
        if not elf.has_dwarf_info():
            return _EMPTY
        dwarf = elf.get_dwarf_info()
        for cu in dwarf.iter_CUs():
            program = dwarf.line_program_for_CU(cu)
            if program is None:
                continue
            comp_dir = cu.get_top_DIE().attributes.get("DW_AT_comp_dir")
            names = _file_names(program, _text(comp_dir.value) if comp_dir else "")
            local = [-1 if n is None else files.setdefault(n, len(files)) for n in names]
            for entry in program.get_entries():
                state = entry.state
                if state is None:
                    continue
                addresses.append(state.address)
                if state.end_sequence:
                    file_index.append(-1)
                    lines.append(0)
                else:
                    file_index.append(local[state.file] if state.file < len(local) else -1)
                    lines.append(state.line)
        address_array = np.array(addresses, dtype=np.uint64)
        file_array = np.array(file_index, dtype=np.int32)
        line_array = np.array(lines, dtype=np.int32)
    # by address; at one address an end of sequence first, then rows in program order
    order = np.lexsort((np.arange(len(addresses)), file_array >= 0, address_array))
    return _Rows(address_array[order], file_array[order], line_array[order], tuple(files))


class _ElfLines:
    """The line table of one ELF file, read on first use, addresses moved by `offset`."""

    def __init__(self, path: Path, offset: int) -> None:
        self.path = path
        self.offset = offset
        self._rows: _Rows | None = None

    def rows(self) -> _Rows:
        if self._rows is None:
            try:
                st = os.stat(self.path)
            except OSError as exc:
                raise ImageError(f"{self.path}: cannot read line table: {exc.strerror}") from exc
            key = str(self.path.resolve())
            self._rows = _rows_for(key, st.st_mtime_ns, st.st_size).shifted(self.offset)
        return self._rows


class LineTable:
    """(file, line) for code addresses, over the line tables of any number of ELF files."""

    def __init__(self, sources: Sequence[_ElfLines] = ()) -> None:
        self._sources = tuple(sources)

    @classmethod
    def from_elf(cls, path: str | os.PathLike[str], load_offset: int = 0) -> LineTable:
        """The line table of an ELF file; nothing is read until the first lookup."""
        return cls([_ElfLines(Path(path), load_offset)])

    @classmethod
    def merge(cls, tables: Iterable[LineTable]) -> LineTable:
        return cls([source for table in tables for source in table._sources])

    @property
    def files(self) -> tuple[str, ...]:
        """Source file paths; `lines_for_many` returns indices into this."""
        return tuple(name for source in self._sources for name in source.rows().files)

    def lines_for(self, address: int) -> tuple[str, int] | None:
        """(source file, line) of the code at `address`, or None."""
        for source in self._sources:
            rows = source.rows()
            files, lines = rows.find(np.array([address], dtype=np.uint64))
            if files[0] >= 0:
                return rows.files[files[0]], int(lines[0])
        return None

    def lines_for_many(self, addresses: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(indices into `files`, lines) per address, vectorised; (-1, 0) where unknown."""
        addresses = np.asarray(addresses, dtype=np.uint64)
        result_files = np.full(addresses.shape, -1, dtype=np.int32)
        result_lines = np.zeros(addresses.shape, dtype=np.int32)
        base = 0
        for source in self._sources:
            rows = source.rows()
            files, lines = rows.find(addresses)
            fill = (result_files < 0) & (files >= 0)
            result_files[fill] = files[fill] + base
            result_lines[fill] = lines[fill]
            base += len(rows.files)
        return result_files, result_lines
