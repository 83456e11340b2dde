"""ELF program images: loadable segments, symbols, mapping symbols and line tables."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import BinaryIO

from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection

from ..model import Isa
from .arch import Architecture, CodeRange
from .elfopen import open_elf
from .errors import ImageError
from .memory import ADDRESS_SPACE, Image, Region
from .sourcelines import LineTable
from .symbols import Binding, StateRange, Symbol, SymbolKind, SymbolTable

_MAPPING_SYMBOL = re.compile(r"\$([atxd])(?:\.|$)")
_MAPPING_STATES: dict[str, Isa | None] = {"a": Isa.A32, "t": Isa.T32, "x": Isa.A64, "d": None}
_KINDS = {
    "STT_FUNC": SymbolKind.FUNC,
    "STT_LOOS": SymbolKind.FUNC,  # STT_GNU_IFUNC
    "STT_OBJECT": SymbolKind.OBJECT,
    "STT_NOTYPE": SymbolKind.NOTYPE,
}
_BINDINGS = {"STB_GLOBAL": Binding.GLOBAL, "STB_LOOS": Binding.GLOBAL, "STB_WEAK": Binding.WEAK}
_SHF_ALLOC = 0x2
_SHF_EXECINSTR = 0x4
_PF_X = 0x1


def load_elf(path: str | os.PathLike[str], load_offset: int = 0) -> Image:
    """The PT_LOAD segments (file bytes at their virtual addresses), symbols and lines.

    `load_offset` is added to every address, for code that runs where it was not linked.
    Only the bytes the file holds are loaded (p_filesz): zero-filled .bss is not code.
    """
    path = Path(path)
    with open_elf(path, "not a valid ELF file (truncated or damaged?)") as (elf, stream, size):
        regions = _segments(elf, stream, size, path, load_offset)
        symbols = _symbols(elf, load_offset)
        entry = elf.header["e_entry"] + load_offset
        architecture = Architecture.of_elf(elf["e_machine"])
        code = _code_ranges(elf, load_offset)
    return Image(regions, symbols, LineTable.from_elf(path, load_offset), entry, architecture, code)


def _segments(elf: ELFFile, stream: BinaryIO, file_size: int, path: Path, load_offset: int) -> list[Region]:
    regions = []
    for index, segment in enumerate(elf.iter_segments()):
        if segment["p_type"] != "PT_LOAD" or not segment["p_filesz"]:
            continue
        offset, length = segment["p_offset"], segment["p_filesz"]
        if offset + length > file_size:
            raise ImageError(
                f"{path}: segment {index} needs file bytes 0x{offset:x}-0x{offset + length:x} "
                f"but the file has only 0x{file_size:x} (truncated?)"
            )
        start = segment["p_vaddr"] + load_offset
        if not 0 <= start <= ADDRESS_SPACE - length:  # before its symbols and lines are moved too
            raise ImageError(
                f"{path}: segment {index} at 0x{segment['p_vaddr']:x} moved by {load_offset:#x} lies "
                "outside the 64-bit address space"
            )
        stream.seek(offset)
        data = stream.read(length)
        regions.append(Region(start, data, f"{path} segment {index}"))
    return regions


def _code_ranges(elf: ELFFile, load_offset: int) -> list[CodeRange]:
    """The executable sections that the file holds bytes of (a stripped file keeps them); the
    executable segments when there are no section headers. Sections are narrower: a segment
    may hold data as well (one RWX segment for everything, as `ld -n` links)."""
    sections = [
        CodeRange(s["sh_addr"] + load_offset, s["sh_addr"] + s["sh_size"] + load_offset, s.name)
        for s in elf.iter_sections()
        if s["sh_flags"] & _SHF_ALLOC and s["sh_flags"] & _SHF_EXECINSTR
        and s["sh_type"] != "SHT_NOBITS" and s["sh_size"]
    ]  # fmt: skip
    if sections:
        return sections
    return [
        CodeRange(g["p_vaddr"] + load_offset, g["p_vaddr"] + g["p_filesz"] + load_offset, f"segment {i}")
        for i, g in enumerate(elf.iter_segments())
        if g["p_type"] == "PT_LOAD" and g["p_flags"] & _PF_X and g["p_filesz"]
    ]


def _function_isa(machine: str, value: int, arm_thumb_type: bool) -> Isa | None:
    if machine == "EM_ARM":
        return Isa.T32 if value & 1 or arm_thumb_type else Isa.A32
    if machine == "EM_AARCH64":
        return Isa.A64
    if machine in ("EM_SPARC", "EM_SPARC32PLUS"):
        return Isa.SPARC
    return None


def _symbols(elf: ELFFile, load_offset: int) -> SymbolTable:
    """Named symbols and, on Arm, the ISA ranges that mapping symbols mark."""
    machine = elf["e_machine"]
    arm = machine in ("EM_ARM", "EM_AARCH64")
    tables = [s for s in elf.iter_sections() if isinstance(s, SymbolTableSection)]
    table = next((t for t in tables if t.name == ".symtab"), tables[0] if tables else None)
    if table is None:
        return SymbolTable()
    symbols: list[Symbol] = []
    marks: dict[int, list[tuple[int, Isa | None]]] = {}  # section index -> (address, state)
    for entry in table.iter_symbols():
        shndx = entry["st_shndx"]
        if not entry.name or shndx in ("SHN_UNDEF", "SHN_COMMON"):
            continue
        value = entry["st_value"]
        mapping = _MAPPING_SYMBOL.match(entry.name) if arm else None
        if mapping:
            if isinstance(shndx, int):
                marks.setdefault(shndx, []).append((value, _MAPPING_STATES[mapping[1]]))
            continue
        kind_name = entry["st_info"]["type"]
        thumb_type = machine == "EM_ARM" and kind_name == "STT_LOPROC"  # STT_ARM_TFUNC
        kind = SymbolKind.FUNC if thumb_type else _KINDS.get(kind_name)
        if kind is None or (shndx == "SHN_ABS" and kind is SymbolKind.NOTYPE):
            continue
        isa = None
        if kind is SymbolKind.FUNC:
            isa = _function_isa(machine, value, thumb_type)
            if machine == "EM_ARM":
                value &= ~1
        symbols.append(
            Symbol(
                entry.name,
                value + load_offset,
                entry["st_size"],
                kind,
                _BINDINGS.get(entry["st_info"]["bind"], Binding.LOCAL),
                isa,
            )
        )
    return SymbolTable(symbols, _mapping_ranges(elf, marks, load_offset))


def _mapping_ranges(
    elf: ELFFile, marks: dict[int, list[tuple[int, Isa | None]]], load_offset: int
) -> list[StateRange]:
    """Each mapping symbol's state reaches the next one in its section, or the section end."""
    ranges = []
    for shndx, points in marks.items():
        section = elf.get_section(shndx)
        if not section["sh_flags"] & _SHF_ALLOC:
            continue
        end = section["sh_addr"] + section["sh_size"]
        points.sort(key=lambda p: p[0])
        for (start, state), (stop, _) in zip(points, [*points[1:], (end, None)], strict=True):
            if start < stop:
                ranges.append(StateRange(start + load_offset, stop + load_offset, state))
    return ranges
