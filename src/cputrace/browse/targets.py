"""Where a direct branch goes, from its opcode: for the trace pane's branch targets."""

from __future__ import annotations

from ..isa.disasm import opcode_bytes
from ..isa.dispatch import SUPPORTED_ISAS, decode
from ..model import Isa


class BranchTargets:
    """The target of each direct branch, decoded once per distinct (pc, opcode, size, ISA)."""

    def __init__(self) -> None:
        self._cache: dict[tuple[int, int, int, str], int | None] = {}

    @classmethod
    def loaded(cls) -> BranchTargets:
        """Targets with the decoders loaded: a NOP of each Arm instruction set decoded once,
        which loads numba's compiled code (the first decode's second or so)."""
        targets = cls()
        for isa, opcode, size in _NOPS:
            decode(opcode_bytes(opcode, size, isa), 0, isa)
        return targets

    def target(self, pc: int, opcode: int | None, size: int | None, isa: str | None) -> int | None:
        """The branch's target, or None (not a direct branch, or no opcode to decode)."""
        if opcode is None or not size or isa not in Isa.__members__ or Isa[isa] not in SUPPORTED_ISAS:
            return None
        key = (pc, opcode, size, isa)
        if key not in self._cache:
            info = decode(opcode_bytes(opcode, size, Isa[isa]), pc, Isa[isa])
            self._cache[key] = info.target if info is not None and info.is_direct else None
        return self._cache[key]


_NOPS = ((Isa.A64, 0xD503201F, 4), (Isa.A32, 0xE320F000, 4), (Isa.T32, 0xBF00, 2))
