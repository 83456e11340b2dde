"""Disassembly text for instructions a trace gave without it, from the opcode or the image."""

from __future__ import annotations

import pyarrow as pa

from ..image import Image
from ..model import Isa
from .dispatch import SUPPORTED_ISAS, decode


def opcode_bytes(opcode: int, size: int, isa: Isa) -> bytes:
    """The instruction's bytes in memory, from its opcode as Tarmac prints it.

    A 32-bit T32 opcode is hw1<<16 | hw2, each halfword little-endian in memory; SPARC is
    big-endian; the rest little-endian. Bits above `size` bytes are not the instruction's.
    """
    opcode &= (1 << (8 * size)) - 1
    if isa is Isa.SPARC:
        return opcode.to_bytes(size, "big")
    if isa is Isa.T32 and size == 4:
        return (opcode >> 16).to_bytes(2, "little") + (opcode & 0xFFFF).to_bytes(2, "little")
    return opcode.to_bytes(size, "little")


class Disassembler:
    """Text for (pc, opcode, size, ISA), decoded once per distinct instruction.

    The opcode is what ran, so it is preferred; the image's bytes serve when the trace
    has no opcode (a failed fetch, a flow-only record).
    """

    def __init__(self, image: Image | None = None) -> None:
        self.image = image
        self._cache: dict[tuple[int, int | None, int, str], str | None] = {}

    def text(self, pc: int, opcode: int | None, size: int | None, isa: str | None) -> str | None:
        if isa is None or isa not in Isa.__members__ or Isa[isa] not in SUPPORTED_ISAS:
            return None
        key = (pc, opcode, size or 0, isa)
        if key not in self._cache:
            self._cache[key] = self._decode(pc, opcode, size, Isa[isa])
        return self._cache[key]

    def _decode(self, pc: int, opcode: int | None, size: int | None, isa: Isa) -> str | None:
        if opcode is not None and size:
            code = opcode_bytes(opcode, size, isa)
        elif self.image is not None and self.image.contains(pc, 2):
            code = self.image.read_upto(pc, 4)
        else:
            return None
        info = decode(code, pc, isa)
        return None if info is None or (info.is_undefined and info.mnemonic == "undefined") else info.disasm


def fill_disasm(table: pa.Table, disassembler: Disassembler) -> pa.Table:
    """`instructions` rows with `disasm` filled in where the input had none (kept where it had)."""
    if "disasm" not in table.column_names or table.column("disasm").null_count == 0:
        return table
    columns = table.select(["pc", "opcode", "size", "isa", "disasm"]).to_pydict()
    texts = [
        given if given is not None else disassembler.text(pc, opcode, size, isa)
        for pc, opcode, size, isa, given in zip(*columns.values(), strict=True)
    ]
    index = table.schema.get_field_index("disasm")
    return table.set_column(index, "disasm", pa.array(texts, pa.string()))
