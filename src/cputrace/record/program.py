"""A bare-metal ELF as the recorder runs it: loadable bytes, memory to map, entry and its ISA."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..errors import CputraceError
from ..image import Image, load_elf
from ..image.elfopen import open_elf
from ..model import Isa
from .cpus import Arch

_BITS = {Arch.ARM: 32, Arch.AARCH64: 64}


@dataclass(frozen=True, slots=True)
class Program:
    """What running an ELF needs beyond its image: the memory its segments occupy with .bss."""

    path: Path
    arch: Arch
    image: Image  # the file bytes of the PT_LOAD segments, symbols, lines
    segments: tuple[tuple[int, int], ...]  # (address, size in memory) of each PT_LOAD segment
    entry: int
    entry_isa: Isa


def load_program(path: str | os.PathLike[str]) -> Program:
    """Read a little-endian ARM or AArch64 executable; CputraceError names what does not fit."""
    path = Path(path)
    with open_elf(path, "not a valid ELF file (truncated or damaged?)") as (elf, _stream, _size):
        machine = elf["e_machine"]
        try:
            arch = Arch(machine)
        except ValueError:
            known = ", ".join(a.value for a in Arch)
            raise CputraceError(f"{path}: cannot run {machine} code (the recorder runs {known})") from None
        if elf.elfclass != _BITS[arch] or not elf.little_endian:
            raise CputraceError(f"{path}: expected a little-endian {_BITS[arch]}-bit {machine} file")
        segments = tuple(
            (seg["p_vaddr"], seg["p_memsz"])
            for seg in elf.iter_segments()
            if seg["p_type"] == "PT_LOAD" and seg["p_memsz"]
        )
        entry = elf["e_entry"]
    if not segments:
        raise CputraceError(f"{path}: no loadable (PT_LOAD) segment to run")
    image = load_elf(path)
    if arch is Arch.AARCH64:
        entry_isa = Isa.A64
    elif entry & 1 or image.symbols.state_at(entry) is Isa.T32:
        entry_isa = Isa.T32
    else:
        entry_isa = Isa.A32
    return Program(path, arch, image, segments, entry & ~1, entry_isa)
