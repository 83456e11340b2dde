"""Barrier instructions by their encodings: ISB, DSB and DMB, and the ARMv7 CP15 operations
that do the same.

A PTM or ETMv4 trace makes an ISB a waypoint (PFT 1.1, IHI 0035B 2.2: an atom for each); a
PTM whose ETMCCER bit 24 is set makes DMB and DSB waypoints as well. The CP15 forms are
`MCR p15, 0, Rt, c7, c5, 4` (ISB), `c7, c10, 4` (DSB) and `c7, c10, 5` (DMB): DDI 0406C B4.2.1
lists them as the deprecated equivalents of the instructions, and the reference decoder
takes them as such.
"""

from __future__ import annotations

import numba

from ..model import Isa
from .insn import F_DATA_BARRIER, F_ISB

_A32, _T32, _A64 = int(Isa.A32), int(Isa.T32), int(Isa.A64)
_DSB, _DMB, _ISB = 0b0100, 0b0101, 0b0110  # A32/T32 op field (bits 7:4) of the barriers
_CP15_ISB, _CP15_DSB, _CP15_DMB = 0x95, 0x9A, 0xBA  # an MCR's opc2, 1, CRm (bits 7:0)


@numba.njit(cache=True, nogil=True)
def barrier_facts(isa: int, opcode: int) -> int:
    """F_ISB for an instruction synchronisation barrier, F_DATA_BARRIER for a DSB or DMB, else 0.

    `opcode` as Tarmac prints it (hw1 << 16 | hw2 for a 32-bit T32 instruction). The A32/T32
    masks are the encoding tables' (DDI 0487 F5.1.? "Barriers" / "Miscellaneous control"): op
    bits 7:4 choose the barrier, its option is any value."""
    if isa == _A64:  # D503 3 CRm op2 11111 (C6.2: DSB op2 100, DMB 101, ISB 110)
        if opcode & 0xFFFFF01F != 0xD503301F:
            return 0
        kind = (opcode >> 5) & 0b111
        return F_ISB if kind == 0b110 else F_DATA_BARRIER if kind in (0b100, 0b101) else 0
    if isa == _A32:
        if opcode & 0xFFF00000 == 0xF5700000:
            return _barrier_of((opcode >> 4) & 0xF)
        if opcode >> 28 != 0xF and opcode & 0x0FFF0F00 == 0x0E070F00:
            return _cp15_barrier(opcode & 0xFF)
        return 0
    if isa == _T32:
        if opcode & 0xFFF0D000 == 0xF3B08000:
            return _barrier_of((opcode >> 4) & 0xF)
        if opcode & 0xFFFF0F00 == 0xEE070F00:
            return _cp15_barrier(opcode & 0xFF)
    return 0


@numba.njit(cache=True, nogil=True, inline="always")
def _barrier_of(op: int) -> int:
    return F_ISB if op == _ISB else F_DATA_BARRIER if op in (_DSB, _DMB) else 0


@numba.njit(cache=True, nogil=True, inline="always")
def _cp15_barrier(low: int) -> int:
    return F_ISB if low == _CP15_ISB else F_DATA_BARRIER if low in (_CP15_DSB, _CP15_DMB) else 0
