"""The facts a flow walk needs about an A64 instruction, from its 32 bits alone, compiled.

A walk of a compressed trace (ETMv4) asks of each instruction only its size, whether and
where it branches, whether it is a call or a return, whether it may not be taken, whether it
traps or is undefined, and whether it is an ISB. `a64_flow` answers from the encoding tables
of the Arm Architecture Reference Manual (DDI 0487, C4.1 "A64 instruction set encoding"),
into the same columns and fact bits (`insn.C_*`, `insn.F_*`) as capstone's reader
(`arm._read_facts`), so that the walk's blocks are the same whichever made them, at a few
nanoseconds an instruction instead of capstone's microseconds.

The branch, exception-generating and system group (C4.1.65 and its subgroups) and the
data-processing (immediate) group (C4.1.86) are followed exactly, as are the top-level
groups that are unallocated (op1 0001 and 0011, the reserved group but for UDF). Only the
conditional branches carry a condition: conditional select and compare read one and always
execute. The other groups (loads and stores, data processing
(register), SIMD and floating point, SVE, SME) are taken as allocated: none of them
branches, and which of their encodings are unallocated matters to a walk only when a trace
runs into data. docs/formats.md lists where capstone 5 answers otherwise, and why.
"""

from __future__ import annotations

import numba
import numpy as np

from ..model import Isa
from .barriers import barrier_facts
from .insn import (
    C_ACCESS,
    C_ADDRESS,
    C_FACTS,
    C_KIND,
    C_NEXT_ISA,
    C_OPCODE,
    C_SIZE,
    C_TARGET,
    C_TRANSFERS,
    F_BRANCH,
    F_CALL,
    F_CONDITIONAL,
    F_DIRECT,
    F_HAS_CONDITION,
    F_HAS_TARGET,
    F_RETURN,
    F_TRAP,
    F_UNDEFINED,
    KINDS,
    NO_ISA,
    Kind,
)

_A64 = int(Isa.A64)
_K_NONE, _K_CALL, _K_RETURN, _K_JUMP = (
    KINDS.index(kind) for kind in (Kind.NONE, Kind.CALL, Kind.RETURN, Kind.JUMP)
)
_ALWAYS = 0b1110
"""Condition codes from here on (AL, NV) mean always: the instruction carries no condition."""
_DIRECT = F_BRANCH | F_DIRECT | F_HAS_TARGET
_CONDITION = F_CONDITIONAL | F_HAS_CONDITION
_XZR = 0b11111  # a register field that names XZR/SP, or an all-ones fixed field
_PAC_A, _PAC_B = 0b000010, 0b000011  # op3 of the pointer-authenticating register branches


@numba.njit(cache=True, nogil=True)
def a64_flow(word: int, address: int, row: np.ndarray) -> None:
    """The flow facts of the A64 instruction `word` at `address` into `row` (C_COUNT columns).

    C_TRANSFERS and C_ACCESS (load/store facts, which a walk does not read) are 0.
    """
    facts, target, kind, next_isa = _classify(word, address)
    row[C_ADDRESS], row[C_SIZE], row[C_OPCODE] = address, 4, word
    row[C_FACTS], row[C_TARGET], row[C_NEXT_ISA], row[C_KIND] = facts, target, next_isa, kind
    row[C_TRANSFERS], row[C_ACCESS] = 0, 0


@numba.njit(cache=True, nogil=True)
def _classify(word: int, address: int) -> tuple[int, int, int, int]:
    """Fact bits, target, kind and next ISA of one encoding (C4.1, the top-level op1 field)."""
    op1 = (word >> 25) & 0xF
    if op1 & 0b1110 == 0b1010:
        return _branch_system(word, address)
    if op1 == 0b0000:
        if word >> 16 == 0:  # op0 000, op1 000000000 of the reserved group
            return F_UNDEFINED | F_TRAP, 0, _K_NONE, _A64  # UDF
        if word >> 31 == 0:
            return F_UNDEFINED, 0, _K_NONE, _A64
        return 0, 0, _K_NONE, _A64  # SME
    if op1 == 0b0001 or op1 == 0b0011 or (op1 & 0b1110 == 0b1000 and not _immediate_allocated(word)):
        return F_UNDEFINED, 0, _K_NONE, _A64
    return 0, 0, _K_NONE, _A64


@numba.njit(cache=True, nogil=True)
def _immediate_allocated(word: int) -> bool:
    """Whether a data-processing (immediate) encoding is allocated (C4.1.86: op0 25:23)."""
    sf, n = word >> 31, (word >> 22) & 1
    group = (word >> 23) & 0b111
    if group == 0b011:  # add/subtract with tags (o2 0): sf 1, S 0, op3 00; min/max (o2 1, FEAT_CSSC)
        if n == 0:
            return sf == 1 and (word >> 29) & 1 == 0 and word & 0xC000 == 0
        return (word >> 29) & 0b11 == 0 and (word >> 18) & 0b1100 == 0
    if group == 0b100:  # logical: N 0 with sf 0, and a bit mask DecodeBitMasks accepts
        return (sf == 1 or n == 0) and _bit_mask_allocated(n, (word >> 10) & 0x3F)
    if group == 0b101:  # move wide: opc 01 unallocated; hw 1x only with sf 1
        return (word >> 29) & 0b11 != 0b01 and (sf == 1 or (word >> 22) & 1 == 0)
    if group == 0b110:  # bitfield: immr and imms below 32 when sf is 0
        return (word >> 29) & 0b11 != 0b11 and sf == n and (sf == 1 or word & 0x208000 == 0)
    if group == 0b111:  # extract: op21 00, o0 0, imms below 32 when sf is 0
        return word & 0x60200000 == 0 and sf == n and (sf == 1 or word & 0x8000 == 0)
    return True  # PC-relative addressing, add/subtract (immediate)


@numba.njit(cache=True, nogil=True)
def _bit_mask_allocated(n: int, imms: int) -> bool:
    """Whether DecodeBitMasks (J1, with immediate TRUE) accepts N:imms: an element size (the
    highest set bit of N:NOT(imms)) of 2 bits or more, and not all its bits set."""
    pattern = (n << 6) | (~imms & 0x3F)
    length = -1
    while pattern:
        length += 1
        pattern >>= 1
    levels = (1 << length) - 1
    return length >= 1 and imms & levels != levels


@numba.njit(cache=True, nogil=True)
def _branch_system(word: int, address: int) -> tuple[int, int, int, int]:
    """The branch, exception-generating and system group (C4.1.65): op0 31:29, op1 25:12."""
    op0 = word >> 29
    if op0 & 0b011 == 0b000:  # B, BL (C4.1.65.8)
        target = address + (_signed(word & 0x3FFFFFF, 26) << 2)
        if op0 == 0b100:
            return _DIRECT | F_CALL, target, _K_CALL, _A64
        return _DIRECT, target, _K_JUMP, _A64
    if op0 & 0b011 == 0b001:  # CBZ, CBNZ; TBZ, TBNZ (C4.1.65.9, .10)
        if word & 0x02000000 == 0:
            target = address + (_signed((word >> 5) & 0x7FFFF, 19) << 2)
        else:
            target = address + (_signed((word >> 5) & 0x3FFF, 14) << 2)
        return _DIRECT | F_CONDITIONAL, target, _K_JUMP, _A64
    if op0 == 0b010:  # conditional branch (immediate), C4.1.65.1: o1 24, o0 4
        if word & 0x02000000 or word & 0x01000000:
            return F_UNDEFINED, 0, _K_NONE, _A64
        target = address + (_signed((word >> 5) & 0x7FFFF, 19) << 2)
        facts = _DIRECT | (_CONDITION if word & 0xF < _ALWAYS else 0)
        return facts, target, _K_JUMP, _A64  # B.cond (o0 0), BC.cond (o0 1)
    if op0 == 0b110:
        if word & 0x02000000:
            return _register_branch(word)
        if word & 0x01000000 == 0:
            return _exception(word)
        return _system(word)
    return F_UNDEFINED, 0, _K_NONE, _A64


@numba.njit(cache=True, nogil=True)
def _exception(word: int) -> tuple[int, int, int, int]:
    """Exception generation (C4.1.65.2): opc 23:21, op2 4:2, LL 1:0."""
    opc, op2, ll = (word >> 21) & 0b111, (word >> 2) & 0b111, word & 0b11
    if op2 != 0:
        return F_UNDEFINED, 0, _K_NONE, _A64
    if opc == 0b000 and ll != 0:
        return F_TRAP, 0, _K_NONE, _A64  # SVC, HVC, SMC
    if (opc == 0b001 or opc == 0b010) and ll == 0:
        return F_TRAP, 0, _K_NONE, _A64  # BRK, HLT
    if opc == 0b011 and ll == 0:
        return 0, 0, _K_NONE, _A64  # TCANCEL
    if opc == 0b101 and ll != 0:
        return 0, 0, _K_NONE, _A64  # DCPS1-3: debug state only; elsewhere UNDEFINED at run time
    return F_UNDEFINED, 0, _K_NONE, _A64


@numba.njit(cache=True, nogil=True)
def _system(word: int) -> tuple[int, int, int, int]:
    """System instructions (C4.1.65.3-.7: op1 of the group 25:12 is 0100xx...); the barriers
    are the ones with facts (`barrier_facts`).

    Bits 23:22 other than 00 are unallocated (the 128-bit forms of Armv9.4 are not
    decoded). Inside, the classifier takes what capstone (as LLVM) takes: every encoding
    that is not a hint, barrier or PSTATE instruction is a system register access, even with
    op0 00 (`msr s0_3_c3_c0_0, xzr`), where C4.1.65.6 leaves many unallocated; none of them
    branches. Of the hints, barriers and PSTATE instructions (L 0, op0 00, Rt 11111), SB
    with CRm other than 0000 and XAFLAG and AXFLAG with CRm other than 0000 are unallocated.
    """
    if word & 0x00C00000:
        return F_UNDEFINED, 0, _K_NONE, _A64
    if (word >> 19) & 0b111 or word & _XZR != _XZR:
        return 0, 0, _K_NONE, _A64  # SYS, SYSL, MSR (register), MRS, and the above
    op1, crn, crm, op2 = (word >> 16) & 0b111, (word >> 12) & 0xF, (word >> 8) & 0xF, (word >> 5) & 0b111
    if op1 == 0b011 and crn == 0b0011:  # barriers (C4.1.65.4)
        if op2 == 0b111 and crm != 0:
            return F_UNDEFINED, 0, _K_NONE, _A64  # SB
        return barrier_facts(_A64, word), 0, _K_NONE, _A64  # ISB, DSB, DMB
    if op1 == 0b000 and crn == 0b0100 and (op2 == 0b001 or op2 == 0b010) and crm != 0:
        return F_UNDEFINED, 0, _K_NONE, _A64  # XAFLAG, AXFLAG (C4.1.65.5)
    return 0, 0, _K_NONE, _A64


@numba.njit(cache=True, nogil=True)
def _register_branch(word: int) -> tuple[int, int, int, int]:
    """Unconditional branch (register) (C4.1.65.7): opc 24:21, op2 20:16, op3 15:10, Rn 9:5, op4 4:0."""
    opc, op2, op3 = (word >> 21) & 0xF, (word >> 16) & 0x1F, (word >> 10) & 0x3F
    rn, op4 = (word >> 5) & 0x1F, word & 0x1F
    if op2 != _XZR:
        return F_UNDEFINED, 0, _K_NONE, _A64
    if opc <= 0b0010:  # BR, BLR, RET and their PAC forms with a zero (or SP) modifier
        plain = op3 == 0 and op4 == 0
        authenticated = op3 in (_PAC_A, _PAC_B) and op4 == _XZR and (opc != 0b0010 or rn == _XZR)
        if not (plain or authenticated):
            return F_UNDEFINED, 0, _K_NONE, _A64
        if opc == 0b0000:
            return F_BRANCH, 0, _K_JUMP, _A64
        if opc == 0b0001:
            return F_BRANCH | F_CALL, 0, _K_CALL, _A64
        return F_BRANCH | F_RETURN, 0, _K_RETURN, _A64
    if opc == 0b0100 or opc == 0b0101:  # ERET, ERETAA, ERETAB; DRPS
        plain = op3 == 0 and op4 == 0
        authenticated = opc == 0b0100 and op3 in (_PAC_A, _PAC_B) and op4 == _XZR
        if rn == _XZR and (plain or authenticated):
            return F_BRANCH, 0, _K_JUMP, NO_ISA  # the state comes back from SPSR
        return F_UNDEFINED, 0, _K_NONE, _A64
    if opc == 0b1000 or opc == 0b1001:  # BRAA, BRAB, BLRAA, BLRAB (op4: the modifier)
        if op3 != _PAC_A and op3 != _PAC_B:
            return F_UNDEFINED, 0, _K_NONE, _A64
        if opc == 0b1000:
            return F_BRANCH, 0, _K_JUMP, _A64
        return F_BRANCH | F_CALL, 0, _K_CALL, _A64
    return F_UNDEFINED, 0, _K_NONE, _A64


@numba.njit(cache=True, nogil=True, inline="always")
def _signed(value: int, bits: int) -> int:
    """A `bits`-wide two's complement field as a signed number."""
    return value - (1 << bits) if value >> (bits - 1) else value
