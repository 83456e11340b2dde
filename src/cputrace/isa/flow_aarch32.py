"""A32 and T32 flow facts from the instruction bits alone, compiled: what a walk of a
compressed trace needs (size, branch, target, next ISA, call/return, trap, UNDEFINED).

The walk used to decode each block with capstone in detail mode; these classifiers give the
same flow columns (`insn.C_*`, the flow bits of C_FACTS) as `arm._read_facts` makes from
capstone's groups, operands and written registers, from the encoding tables of the Arm ARM
(DDI 0406C.d A5 "ARM instruction set encoding", A6 "Thumb instruction set encoding", A7
"Advanced SIMD and Floating-point instruction encoding"; DDI 0487 F5/F3 for the Armv8
additions). Like capstone's path, a destination register field of 15 writes the pc whether
the architecture calls it a branch or UNPREDICTABLE, and so does a writeback to base pc.
Where the classifier and capstone 5 part (encodings the tables leave out, extensions
capstone lacks), docs/formats.md names the class and which side the Arm ARM supports.
"""

from __future__ import annotations

import enum

import numba
import numpy as np

from ..model import Isa
from .barriers import barrier_facts
from .insn import (
    C_ADDRESS,
    C_FACTS,
    C_KIND,
    C_NEXT_ISA,
    C_OPCODE,
    C_SIZE,
    C_TARGET,
    F_BRANCH,
    F_CALL,
    F_CONDITIONAL,
    F_DIRECT,
    F_HAS_CONDITION,
    F_HAS_TARGET,
    F_RETURN,
    F_TRAP,
    F_UNDEFINED,
    F_WRITES_PC,
    KINDS,
    NO_ISA,
    Kind,
)
from .itstate import next_it_state

_KIND_NONE, _KIND_CALL, _KIND_RETURN, _KIND_JUMP = (
    KINDS.index(kind) for kind in (Kind.NONE, Kind.CALL, Kind.RETURN, Kind.JUMP)
)
PC = 15
"""Register number of the pc."""
_SP, _LR = 13, 14
_ALWAYS = 14  # condition codes 14 and 15 mean always

it_advance = numba.njit(cache=True, nogil=True, inline="always")(next_it_state)
"""`itstate.next_it_state`, compiled: ITSTATE after one more instruction."""
_HLT, _BKPT, _HVC = 0x01000070, 0x01200070, 0x01400070  # A32 traps without a condition (bits 27:20, 7:4)


class Effect(enum.IntEnum):
    """What an instruction does to the flow, before its condition is applied."""

    NONE = 0  # goes on to the next instruction
    UNDEFINED = 1  # does not decode
    WRITES_PC = 2  # a result, load or writeback lands in the pc (`Pc` says how)
    BRANCH = 3  # B, B<c>, CBZ/CBNZ, LE/WLS: direct
    CALL = 4  # BL: direct
    BRANCH_REGISTER = 5  # BX, BXJ (BX lr: with Pc.RETURN)
    CALL_REGISTER = 6  # BLX register
    TRAP = 7  # SVC, BKPT, HVC, SMC, HLT
    UDF = 8  # permanently undefined, a trap by design
    EXCEPTION_RETURN = 10  # RFE, ERET
    TABLE_BRANCH = 11  # TBB, TBH
    CALL_SWITCH = 12  # BLX (immediate): direct, to the other instruction set


class Pc(enum.IntEnum):
    """How an instruction that writes the pc (Effect.WRITES_PC) does it, as bits."""

    RESULT = 0  # a data-processing result: T32 stays in T32
    LOADED = 1  # from memory: the state comes from bit 0 of the value
    FLAGS = 2  # with the flags set (capstone's update_flags): an exception return
    RETURN = 4  # one of `_read_facts`' return forms (POP/LDM with pc, LDR pc from sp, MOV pc, lr)


@numba.njit(cache=True, nogil=True)
def _field(word: int, low: int, width: int) -> int:
    """Bits low + width - 1 .. low of `word`."""
    return (word >> low) & ((1 << width) - 1)


@numba.njit(cache=True, nogil=True)
def _signed(value: int, bits: int) -> int:
    """`value` as a `bits`-bit two's complement number."""
    return value - (1 << bits) if value >> (bits - 1) & 1 else value


@numba.njit(cache=True, nogil=True)
def _writes(register: int, how: int) -> tuple[int, int]:
    """(Effect.WRITES_PC, how) when `register` is the pc, else (Effect.NONE, 0)."""
    if register == PC:
        return Effect.WRITES_PC, how
    return Effect.NONE, 0


@numba.njit(cache=True, nogil=True)
def _writes_any(first: int, second: int, how: int) -> tuple[int, int]:
    """`_writes` for two destination registers."""
    return _writes(PC if first == PC or second == PC else first, how)


@numba.njit(cache=True, nogil=True)
def _fill(row: np.ndarray, isa: int, address: int, size: int, opcode: int, effect: int, how: int,
          target: int, condition: int, tests: bool) -> None:  # fmt: skip
    """Write the flow columns of one instruction to `row`, as `arm._read_facts` makes them.

    `condition`: its condition code (0-13; larger: always); `tests`: CBZ/CBNZ, conditional
    without a condition code. An undefined instruction is `arm._undefined_at`'s row.
    """
    row[:] = 0
    row[C_ADDRESS], row[C_SIZE], row[C_OPCODE], row[C_NEXT_ISA] = address, size, opcode, isa
    if effect == Effect.UNDEFINED:
        row[C_FACTS] = F_UNDEFINED
        return
    facts, kind = 0, _KIND_NONE
    if effect == Effect.WRITES_PC:
        facts = F_BRANCH | F_WRITES_PC
        kind = _KIND_RETURN if how & Pc.RETURN else _KIND_JUMP
        if isa == Isa.A32 or how & (Pc.LOADED | Pc.FLAGS):
            row[C_NEXT_ISA] = NO_ISA  # A32 writes interwork; loads and exception returns choose
    elif effect == Effect.BRANCH or effect == Effect.CALL or effect == Effect.CALL_SWITCH:
        facts = F_BRANCH | F_DIRECT | F_HAS_TARGET
        row[C_TARGET] = target & 0xFFFFFFFF
        kind = _KIND_JUMP if effect == Effect.BRANCH else _KIND_CALL
        if effect == Effect.CALL_SWITCH:
            row[C_NEXT_ISA] = Isa.T32 if isa == Isa.A32 else Isa.A32
    elif effect == Effect.BRANCH_REGISTER:
        facts, kind = F_BRANCH, _KIND_RETURN if how & Pc.RETURN else _KIND_JUMP
        row[C_NEXT_ISA] = NO_ISA
    elif effect == Effect.CALL_REGISTER:
        facts, kind = F_BRANCH, _KIND_CALL
        row[C_NEXT_ISA] = NO_ISA
    elif effect == Effect.EXCEPTION_RETURN:
        facts, kind = F_BRANCH, _KIND_JUMP
        row[C_NEXT_ISA] = NO_ISA
    elif effect == Effect.TABLE_BRANCH:
        facts, kind = F_BRANCH, _KIND_JUMP
    elif effect == Effect.TRAP:
        facts = F_TRAP
    elif effect == Effect.UDF:
        facts = F_TRAP | F_UNDEFINED
    facts |= barrier_facts(isa, opcode)  # ISB, DSB, DMB and their CP15 forms
    if condition < _ALWAYS:
        facts |= F_CONDITIONAL | F_HAS_CONDITION
    elif tests:
        facts |= F_CONDITIONAL
    if kind == _KIND_CALL:
        facts |= F_CALL
    elif kind == _KIND_RETURN:
        facts |= F_RETURN
    row[C_FACTS], row[C_KIND] = facts, kind


# A32 ---------------------------------------------------------------------------------------


@numba.njit(cache=True, nogil=True)
def a32_flow(word: int, address: int, row: np.ndarray) -> None:
    """The flow columns (`row`, int64, C_COUNT of them) of the A32 instruction `word` at `address`."""
    condition = word >> 28
    if condition == 0xF:
        effect, how, target = _a32_unconditional(word, address)
    else:
        effect, how = _a32_conditional(word)
        target = address + 8 + (_signed(word & 0xFFFFFF, 24) << 2)
    if effect == Effect.TRAP and word & 0x0FF000F0 in (_BKPT, _HLT):
        if condition != _ALWAYS:  # BKPT and HLT are unconditional
            effect = Effect.UNDEFINED
    elif effect == Effect.TRAP and word & 0x0FF000F0 == _HVC:
        condition = _ALWAYS  # HVC's condition field is ignored
    if effect == Effect.UNDEFINED or (effect == Effect.UDF and condition != _ALWAYS):
        effect, condition = Effect.UNDEFINED, _ALWAYS
    _fill(row, Isa.A32, address, 4, word, effect, how, target, condition, False)


@numba.njit(cache=True, nogil=True)
def _a32_conditional(word: int) -> tuple[int, int]:
    """Effect and `Pc` bits of an A32 instruction with a condition field (A5.1)."""
    group = _field(word, 25, 3)
    if group <= 1:
        return _a32_data_and_misc(word)
    if group == 2 or (group == 3 and not word & 0x10):
        return _a32_load_store(word)
    if group == 3:
        return _a32_media(word)
    if group == 4:
        return _a32_block_transfer(word)
    if group == 5:
        return (Effect.CALL if word & (1 << 24) else Effect.BRANCH), 0
    return _a32_coprocessor(word)


@numba.njit(cache=True, nogil=True)
def _a32_data_and_misc(word: int) -> tuple[int, int]:
    """Data-processing and miscellaneous instructions (A5.2)."""
    immediate = word & (1 << 25) != 0
    op1, op2 = _field(word, 20, 5), _field(word, 4, 4)
    rn, rd = _field(word, 16, 4), _field(word, 12, 4)
    if not immediate:
        if op2 == 0b1001:
            return _a32_synchronization(word) if op1 & 0x10 else _a32_multiply(word)
        if op2 in (0b1011, 0b1101, 0b1111):
            return _a32_extra_load_store(word)
        if op1 & 0b11001 == 0b10000:
            if op2 & 0b1000 == 0:
                return _a32_miscellaneous(word)
            return _a32_halfword_multiply(word)
        return _a32_data_processing(op1, rn, rd, False, op2 == 0 and _field(word, 7, 5) == 0, word & 0xF)
    if op1 & 0b11001 == 0b10000:
        if op1 & 0b00010 == 0:  # MOVW, MOVT
            return _writes(rd, Pc.RESULT)
        return _a32_hints_msr(word, rn)
    return _a32_data_processing(op1, rn, rd, True, False, -1)


@numba.njit(cache=True, nogil=True)
def _a32_data_processing(op1: int, rn: int, rd: int, immediate: bool, plain_register: bool,
                         rm: int) -> tuple[int, int]:  # fmt: skip
    """AND ... MVN (A5.2.1-A5.2.3): TST, TEQ, CMP and CMN write no register. `plain_register`:
    the unshifted register form, which is MOV for op1 1101x (a return when it is MOV pc, lr).
    Rn of MOV, and of MVN (immediate), must be zero (capstone rejects the others)."""
    if op1 & 0b11001 == 0b10001:
        return Effect.NONE, 0
    if rn != 0 and (op1 >> 1 == 0b1101 or (op1 >> 1 == 0b1111 and immediate)):
        return Effect.UNDEFINED, 0
    how = Pc.FLAGS if op1 & 1 else Pc.RESULT
    if op1 >> 1 == 0b1101 and plain_register and rm == _LR:
        how |= Pc.RETURN
    return _writes(rd, how)


@numba.njit(cache=True, nogil=True)
def _a32_miscellaneous(word: int) -> tuple[int, int]:
    """Miscellaneous instructions (A5.2.12): MRS/MSR, BX, BXJ, BLX, CLZ, saturating, ERET, traps.

    The bits the Arm ARM shows as (0) and (1) in BX, BXJ, BLX, CLZ, MSR, ERET and SMC must
    be so (capstone rejects the others). HLT (Armv8) and CRC32 (the Armv8 CRC extension)
    are defined, which capstone 5 does not know.
    """
    op, op2, rd = _field(word, 21, 2), _field(word, 4, 3), _field(word, 12, 4)
    body = word & 0x0FFFFFF0  # without the condition and Rm
    if op2 == 0b000:
        banked = word & (1 << 9) != 0
        sysm = (_field(word, 8, 1) << 4) | _field(word, 16, 4)
        zeros = word & 0xC00 or (op & 1 == 0 and word & 0xF)  # the (0)s of MRS/MSR (banked)
        if banked and (zeros or not _banked(_field(word, 22, 1), sysm)):
            return Effect.UNDEFINED, 0
        if op & 1 == 0 and (banked or word & (1 << 22 | 1 << 16)):  # MRS (capstone: bit 16 of APSR's)
            return _writes(rd, Pc.RESULT)
        if op & 1 == 0:
            return Effect.UNDEFINED, 0
        msr = rd == PC and (banked or (word & 0xF00 == 0 and _field(word, 16, 4) != 0))  # MSR (register)
        return (Effect.NONE, 0) if msr else (Effect.UNDEFINED, 0)
    if op2 == 0b001 and op == 0b01 and body == 0x012FFF10:  # BX
        return Effect.BRANCH_REGISTER, Pc.RETURN if word & 0xF == _LR else 0
    if op2 == 0b001 and op == 0b11 and body & 0x0FFF0F00 == 0x016F0F00:
        return _writes(rd, Pc.RESULT)  # CLZ
    if op2 == 0b010 and body == 0x012FFF20:  # BXJ
        return Effect.BRANCH_REGISTER, 0
    if op2 == 0b011 and body == 0x012FFF30:  # BLX (register)
        return Effect.CALL_REGISTER, 0
    if op2 == 0b100 and word & 0x0D00 == 0:  # CRC32, CRC32C
        return _writes(rd, Pc.RESULT)
    if op2 == 0b101:  # QADD, QSUB, QDADD, QDSUB
        return _writes(rd, Pc.RESULT)
    if op2 == 0b110 and (word & 0x0FFFFFFF) == 0x0160006E:  # ERET
        return Effect.EXCEPTION_RETURN, 0
    if op2 == 0b111 and (op != 0b11 or body & 0x000FFF00 == 0):  # HLT, BKPT, HVC, SMC
        return Effect.TRAP, 0
    return Effect.UNDEFINED, 0


@numba.njit(cache=True, nogil=True)
def _banked(spsr: int, sysm: int) -> bool:
    """Whether MRS/MSR (banked register) name a register (B9.2.3): R8_usr..LR_usr, R8_fiq..LR_fiq,
    LR_irq..SP_und, LR_mon..SP_hyp; or, with R set, the SPSR of a mode."""
    if spsr:
        return sysm in (0b01110, 0b10000, 0b10010, 0b10100, 0b10110, 0b11100, 0b11110)
    return (sysm & 0b11000 != 0b11000 and sysm & 0b01111 != 0b00111 and sysm & 0b11111 != 0b01111) \
        or sysm >= 0b11100


@numba.njit(cache=True, nogil=True)
def _a32_halfword_multiply(word: int) -> tuple[int, int]:
    """SMLA<x><y>, SMLAW<y>, SMULW<y>, SMLAL<x><y>, SMUL<x><y> (A5.2.7)."""
    if _field(word, 21, 2) == 0b10:
        return _writes_any(_field(word, 16, 4), _field(word, 12, 4), Pc.RESULT)
    return _writes(_field(word, 16, 4), Pc.RESULT)


@numba.njit(cache=True, nogil=True)
def _a32_multiply(word: int) -> tuple[int, int]:
    """MUL, MLA, UMAAL, MLS and the long multiplies (A5.2.5)."""
    op = _field(word, 20, 4)
    if op in (0b0101, 0b0111):
        return Effect.UNDEFINED, 0
    if op == 0b0100 or op & 0b1000:  # UMAAL, UMULL, UMLAL, SMULL, SMLAL: RdHi and RdLo
        return _writes_any(_field(word, 16, 4), _field(word, 12, 4), Pc.RESULT)
    return _writes(_field(word, 16, 4), Pc.RESULT)


@numba.njit(cache=True, nogil=True)
def _a32_synchronization(word: int) -> tuple[int, int]:
    """SWP, the exclusives and the load-acquire/store-release instructions (A5.2.10; Armv8's
    LDA/STL forms, DDI 0487 F4)."""
    op, rt = _field(word, 20, 4), _field(word, 12, 4)
    if op & 0b1000 == 0:
        return _writes(rt, Pc.LOADED) if op & 0b1011 == 0 else (Effect.UNDEFINED, 0)
    order, size, load = _field(word, 8, 4), _field(word, 21, 2), word & (1 << 20) != 0
    if order & 0b1100 != 0b1100 or order == 0b1101 or (order == 0b1100 and size == 0b01):
        return Effect.UNDEFINED, 0
    if not load:
        if order == 0b1100:  # STL: (1)(1)(1)(1) in bits 15:12
            return (Effect.NONE, 0) if rt == PC else (Effect.UNDEFINED, 0)
        return _writes(rt, Pc.RESULT)  # the status result
    if word & 0xF != 0b1111:  # (1)(1)(1)(1)
        return Effect.UNDEFINED, 0
    if size == 0b01:  # LDREXD, LDAEXD: Rt and Rt + 1
        return _writes_any(rt, rt + 1, Pc.LOADED)
    return _writes(rt, Pc.LOADED)


@numba.njit(cache=True, nogil=True)
def _a32_extra_load_store(word: int) -> tuple[int, int]:
    """STRH, LDRH, LDRD, LDRSB, STRD, LDRSH and their unprivileged forms (A5.2.8, A5.2.9)."""
    op2, load = _field(word, 5, 2), word & (1 << 20) != 0
    rn, rt = _field(word, 16, 4), _field(word, 12, 4)
    pre, writeback = word & (1 << 24) != 0, word & (1 << 21) != 0
    if not pre and writeback and not load and (op2 != 0b01 or (not word & (1 << 22) and word & 0xF00)):
        return Effect.UNDEFINED, 0  # no unprivileged LDRD or STRD; (0)(0)(0)(0) of STRHT (register)
    if op2 != 0b01 and not load and rt == PC:
        return Effect.UNDEFINED, 0  # LDRD, STRD of pc and a sixteenth register
    effect, how = Effect.NONE, 0
    if load or op2 == 0b10:  # LDRH, LDRSB, LDRSH; LDRD (L clear)
        second = rt + 1 if not load else rt
        effect, how = _writes_any(rt, second, Pc.LOADED)
    if (pre and writeback) or (not pre and not writeback):  # capstone: no writeback in LDRHT...
        base, base_how = _writes(rn, Pc.RESULT)
        if base == Effect.WRITES_PC and effect == Effect.NONE:
            effect, how = base, base_how
    return effect, how


@numba.njit(cache=True, nogil=True)
def _a32_load_store(word: int) -> tuple[int, int]:
    """LDR, STR, LDRB, STRB and their unprivileged forms (A5.3)."""
    rn, rt = _field(word, 16, 4), _field(word, 12, 4)
    pre, byte = word & (1 << 24) != 0, word & (1 << 22) != 0
    writeback, load = word & (1 << 21) != 0, word & (1 << 20) != 0
    if load and rt == PC:
        # LDR pc from the stack is a return, but not as LDRT, nor with a register post-index
        plain = pre or (not writeback and not word & (1 << 25))
        return Effect.WRITES_PC, Pc.LOADED | (Pc.RETURN if rn == _SP and not byte and plain else 0)
    if (pre and writeback) or (not pre and not writeback and not (byte and word & (1 << 25))):
        return _writes(rn, Pc.RESULT)  # capstone: no writeback in LDRT..., nor LDRB/STRB [Rn], Rm
    return Effect.NONE, 0


@numba.njit(cache=True, nogil=True)
def _a32_media(word: int) -> tuple[int, int]:
    """Media instructions (A5.4)."""
    op1, op2 = _field(word, 20, 5), _field(word, 5, 3)
    rd, high = _field(word, 12, 4), _field(word, 16, 4)
    if op1 >> 3 == 0b00:  # parallel addition and subtraction, signed and unsigned
        if op1 & 0b11 == 0 or op2 in (0b101, 0b110):
            return Effect.UNDEFINED, 0
        return _writes(rd, Pc.RESULT)
    if op1 >> 3 == 0b01:
        return _a32_packing(word, op1 & 0b111, op2, rd)
    if op1 >> 3 == 0b10:
        return _a32_signed_multiply(word, op1 & 0b111, op2, rd, high)
    if op1 == 0b11000 and op2 == 0b000:  # USAD8, USADA8
        return _writes(high, Pc.RESULT)
    if (op1 >> 1 == 0b1101 and op2 & 0b011 == 0b010) or (op1 >> 1 == 0b1111 and op2 & 0b011 == 0b010):
        return _writes(rd, Pc.RESULT)  # SBFX, UBFX
    if op1 >> 1 == 0b1110 and op2 & 0b011 == 0b000:  # BFC, BFI
        return _writes(rd, Pc.RESULT)
    if op1 == 0b11111 and op2 == 0b111:
        return Effect.UDF, 0
    return Effect.UNDEFINED, 0


@numba.njit(cache=True, nogil=True)
def _a32_packing(word: int, op1: int, op2: int, rd: int) -> tuple[int, int]:
    """Packing, unpacking, saturation and reversal (A5.4.3); capstone rejects SSAT16, USAT16
    and the reversals without their (1)(1)(1)(1) fields."""
    ones_8, ones_16 = _field(word, 8, 4) == 0b1111, _field(word, 16, 4) == 0b1111
    defined = (
        (op1 == 0b000 and op2 & 1 == 0)  # PKH
        or (op2 == 0b011 and op1 != 0b001 and op1 != 0b101)  # SXTAB16, SXTAB, SXTAH, UXTAB16...
        or (op1 == 0b000 and op2 == 0b101)  # SEL
        or (op1 & 0b010 == 0b010 and op2 & 1 == 0)  # SSAT, USAT
        or ((op1 == 0b010 or op1 == 0b110) and op2 == 0b001 and ones_8)  # SSAT16, USAT16
        or ((op1 == 0b011 or op1 == 0b111) and (op2 == 0b001 or op2 == 0b101) and ones_8 and ones_16)
    )  # fmt: skip REV, REV16, RBIT, REVSH
    return _writes(rd, Pc.RESULT) if defined else (Effect.UNDEFINED, 0)


@numba.njit(cache=True, nogil=True)
def _a32_signed_multiply(word: int, op1: int, op2: int, low: int, high: int) -> tuple[int, int]:
    """Signed multiplies and the divides (A5.4.4): Rd in bits 19:16, long forms RdHi:RdLo."""
    if (op1 == 0b000 and op2 >> 2 == 0) or (op1 == 0b101 and (op2 >> 1 == 0b00 or op2 >> 1 == 0b11)):
        return _writes(high, Pc.RESULT)  # SMLAD, SMUAD, SMLSD, SMUSD, SMMLA, SMMUL, SMMLS
    if (op1 == 0b001 or op1 == 0b011) and op2 == 0b000 and low == 0b1111:  # SDIV, UDIV
        return _writes(high, Pc.RESULT)
    if op1 == 0b100 and op2 >> 2 == 0:  # SMLALD, SMLSLD
        return _writes_any(high, low, Pc.RESULT)
    return Effect.UNDEFINED, 0


@numba.njit(cache=True, nogil=True)
def _a32_block_transfer(word: int) -> tuple[int, int]:
    """LDM, STM and their forms (A5.5): an LDM that writes the pc is a return, as POP is."""
    rn, load = _field(word, 16, 4), word & (1 << 20) != 0
    writeback = word & (1 << 21) != 0
    if word & 0xFFFF == 0:
        return Effect.UNDEFINED, 0
    if load and word & (1 << PC):
        return Effect.WRITES_PC, Pc.LOADED | Pc.RETURN
    if writeback and rn == PC and (load or word & 0x01C00000 != 0x01000000):  # capstone: not STMDB
        return Effect.WRITES_PC, Pc.RETURN if load else Pc.RESULT
    return Effect.NONE, 0


@numba.njit(cache=True, nogil=True)
def _a32_coprocessor(word: int) -> tuple[int, int]:
    """Coprocessor instructions and SVC (A5.6), the floating-point ones among them (A7.5-A7.9)."""
    op1, coprocessor = _field(word, 20, 6), _field(word, 8, 4)
    if op1 >> 1 == 0:
        return Effect.UNDEFINED, 0
    if op1 >> 4 == 0b11:
        return Effect.TRAP, 0  # SVC
    floating = coprocessor >> 1 == 0b101
    if op1 >> 5 == 0:  # loads and stores, 64-bit transfers
        if op1 >> 1 == 0b00010:
            return _a32_two_register_transfer(word, floating)
        if floating:
            return _a32_extension_load_store(word, op1)
        return _writeback(word)
    if word & 0x10 == 0:
        return Effect.NONE, 0  # CDP, floating-point data processing
    if floating:
        return _a32_core_transfer(word)
    return Effect.NONE, 0  # MCR, MRC: Rt 15 is APSR_nzcv


@numba.njit(cache=True, nogil=True)
def _writeback(word: int) -> tuple[int, int]:
    """An LDC/STC or VLDM/VSTM writes its base back (W, bit 21), pc among them: for a load
    (L, bit 20) capstone's path takes the state from the value, as for loads to the pc."""
    if word & (1 << 21):
        return _writes(_field(word, 16, 4), Pc.LOADED if word & (1 << 20) else Pc.RESULT)
    return Effect.NONE, 0


@numba.njit(cache=True, nogil=True)
def _a32_two_register_transfer(word: int, floating: bool) -> tuple[int, int]:
    """MCRR, MRRC and the floating-point VMOV between two core registers (A7.8)."""
    if floating and word & 0xD0 != 0x10:  # VMOV: bits 7:4 are 00x1
        return Effect.UNDEFINED, 0
    if word & (1 << 20) == 0 or not floating:  # capstone: MRRC writes no pc
        return Effect.NONE, 0
    return _writes_any(_field(word, 12, 4), _field(word, 16, 4), Pc.RESULT)


@numba.njit(cache=True, nogil=True)
def _a32_extension_load_store(word: int, op1: int) -> tuple[int, int]:
    """VLDR, VSTR, VLDM, VSTM, VPUSH, VPOP (A7.6)."""
    indexing = _field(op1, 3, 2)  # P, U
    if (indexing == 0b00 or indexing == 0b11) and op1 & 0b10:  # writeback with P == U
        return Effect.UNDEFINED, 0
    return _writeback(word)


@numba.njit(cache=True, nogil=True)
def _a32_core_transfer(word: int) -> tuple[int, int]:
    """VMOV to and from core registers, VMRS, VMSR, VDUP (A7.8): VMRS to Rt 15 is APSR_nzcv;
    capstone rejects them without the (0)(0)(0)(0) of bits 3:0."""
    load, scalar, op = word & (1 << 20) != 0, word & (1 << 8) != 0, _field(word, 21, 3)
    if scalar and not load and op >> 2 == 1 and word & 0x40:  # VDUP: B is 0x
        return Effect.UNDEFINED, 0
    if not scalar and op != 0b000 and op != 0b111:
        return Effect.UNDEFINED, 0
    if word & 0xF and (scalar or op != 0b111):
        return Effect.UNDEFINED, 0
    if load and (scalar or op == 0b000):  # VMOV to a core register
        return _writes(_field(word, 12, 4), Pc.RESULT)
    return Effect.NONE, 0


@numba.njit(cache=True, nogil=True)
def _a32_hints_msr(word: int, rn: int) -> tuple[int, int]:
    """MSR (immediate) and hints (A5.2.11): bits 15:12 are (1)(1)(1)(1); MSR of APSR/CPSR has a mask."""
    hint = word & 0x004F0F00 == 0
    if _field(word, 12, 4) == 0b1111 and (rn != 0 or hint or word & (1 << 22)):
        return Effect.NONE, 0
    return Effect.UNDEFINED, 0


@numba.njit(cache=True, nogil=True)
def _a32_unconditional(word: int, address: int) -> tuple[int, int, int]:
    """Effect, `Pc` bits and target of an instruction in A32's unconditional space (A5.7)."""
    op1 = _field(word, 20, 8)
    if op1 >> 5 == 0b101:  # BLX (immediate): H is bit 1 of the offset
        offset = (_signed(word & 0xFFFFFF, 24) << 2) | (_field(word, 24, 1) << 1)
        return Effect.CALL_SWITCH, 0, address + 8 + offset
    if op1 >> 7 == 0:
        return _a32_hints_simd(word), Pc.RESULT, 0
    if word & 0xFE5FFFE0 == 0xF84D0500:  # SRS
        return Effect.NONE, 0, 0
    if word & 0xFE500000 == 0xF8100000 and (word & (1 << 21) or word & 0xFFFF == 0x0A00):  # RFE
        return Effect.EXCEPTION_RETURN, 0, 0
    if _field(word, 9, 3) == 0b101 and (op1 >> 4 == 0b1110 or op1 >> 1 == 0b1100010):  # CDP2... MRRC2
        # of coprocessors 10 and 11: the Armv8 floating-point instructions
        return _a32_floating_unconditional(word), 0, 0
    if op1 >> 5 == 0b110:  # LDC2, STC2, MCRR2, MRRC2
        if op1 >> 1 == 0b1100000:
            return Effect.UNDEFINED, 0, 0
        if op1 >> 1 == 0b1100010:
            effect, how = _a32_two_register_transfer(word, False)
            return effect, how, 0
        quad_odd = word & 0x40 and word & 0x0001_1001  # Q with an odd Vn, Vd or Vm: not a VSDOT
        if word & 0xFFB00F00 == 0xFC200D00 and not quad_odd:  # VSDOT, VUDOT (Armv8.2), in STC2's space
            return Effect.NONE, 0, 0
        effect, how = _writeback(word)
        return effect, how, 0
    if op1 >> 4 == 0b1110:  # CDP2, MCR2, MRC2
        return Effect.NONE, 0, 0
    return Effect.UNDEFINED, 0, 0


@numba.njit(cache=True, nogil=True)
def _a32_floating_unconditional(word: int) -> int:
    """VSEL, VMAXNM, VMINNM, VCVTA..., VRINTA... (Armv8, DDI 0487 F6): the unconditional instructions
    of coprocessors 10 and 11, all in CDP2's space (bit 4 clear)."""
    if word & 0x10 or _field(word, 24, 4) != 0b1110:
        return Effect.UNDEFINED
    if word & (1 << 23) == 0:  # VSEL
        return Effect.UNDEFINED if word & 0x40 else Effect.NONE
    return Effect.NONE


@numba.njit(cache=True, nogil=True)
def _a32_hints_simd(word: int) -> int:
    """Memory hints, Advanced SIMD and miscellaneous instructions (A5.7.1)."""
    op1 = _field(word, 20, 7)
    if op1 >> 5 == 0b01:
        return _a32_simd_data_processing(word)
    if op1 & 0b1110001 == 0b1000000:
        return _a32_element_load_store(word)[0]
    if op1 == 0b0010000:  # CPS, SETEND
        imod, change = _field(word, 18, 2), _field(word, 17, 3)
        cps = word & 0x10020 == 0 and imod != 0b01 and (change != 0 or word & 0x1FF != 0)
        setend = word & 0xFFFFFDFF == 0xF1010000
        return Effect.NONE if cps or setend else Effect.UNDEFINED
    if op1 == 0b1010111:  # CLREX, DSB, DMB, ISB
        if word == 0xF57FF01F or word & 0xFFFFFFF0 in (0xF57FF040, 0xF57FF050):
            return Effect.NONE
        return Effect.NONE if word & 0xFFFFFFF0 == 0xF57FF060 else Effect.UNDEFINED  # ISB
    hint = op1 & 0b1000111  # PLI, PLD, PLDW with (1)(1)(1)(1) in bits 15:12; register forms: bit 4 clear
    preload = hint == 0b1000101 or (hint == 0b1000001 and op1 & 0b0010000)
    register = op1 & 0b0100000 != 0
    if preload and _field(word, 12, 4) == 0b1111 and not (register and word & 0x10):
        return Effect.NONE
    return Effect.UNDEFINED


@numba.njit(cache=True, nogil=True)
def _a32_simd_data_processing(word: int) -> int:
    """Advanced SIMD data processing (A7.4), as far as its groups' UNDEFINED rules go: the
    three-registers-of-the-same-length table (A7.4.1), the modified immediates (A7.4.6), VEXT
    and VDUP (scalar), and in every group a Q register given an odd D register number. The
    two-register, shift, scalar and different-length tables are taken as defined."""
    a, b, c = _field(word, 19, 5), _field(word, 8, 4), _field(word, 4, 4)
    unsigned, quad = word & (1 << 24) != 0, word & 0x40 != 0
    vd, vn, vm = _field(word, 12, 1), _field(word, 16, 1), _field(word, 0, 1)  # the low bits
    if a >> 4 == 0:
        if quad and (vd | vn | vm):
            return Effect.UNDEFINED
        return Effect.NONE if _simd_three_same(unsigned, b, c & 1, _field(word, 20, 2), quad) \
            else Effect.UNDEFINED
    if a & 0b10111 == 0b10000 and c & 0b1001 == 0b0001:  # one register and a modified immediate
        return Effect.UNDEFINED if (quad and vd) or (b == 0b1111 and word & 0x20) else Effect.NONE
    if not unsigned and a & 0b10110 == 0b10110 and c & 1 == 0:  # VEXT
        return Effect.UNDEFINED if (quad and (vd | vn | vm)) or (not quad and word & 0x800) else Effect.NONE
    if unsigned and a & 0b10110 == 0b10110 and b == 0b1100 and c & 0b1001 == 0:  # VDUP (scalar)
        return Effect.UNDEFINED if (quad and vd) or _field(word, 16, 3) == 0 else Effect.NONE
    if c & 1:  # two registers and a shift amount: Q takes even registers
        if b == 0b1000 or b == 0b1001:  # VSHRN... VQRSHRN: bit 6 is the rounding, Vm a Q register
            return Effect.UNDEFINED if vm else Effect.NONE
        if b == 0b1010:  # VSHLL, VMOVL: Vd a Q register
            return Effect.UNDEFINED if quad or vd else Effect.NONE
        return Effect.UNDEFINED if quad and (vd | vm) else Effect.NONE
    return Effect.NONE


@numba.njit(cache=True, nogil=True)
def _simd_three_same(unsigned: bool, a: int, b: int, size: int, quad: bool) -> bool:
    """Whether A7.4.1 defines the instruction: `a` is bits 11:8, `b` bit 4, `size` bits 21:20."""
    if a in (0b0000, 0b0010, 0b0100, 0b0101) or (a == 0b0001 and b):  # VQADD... VQRSHL, logic
        return (a != 0b0000 and a != 0b0010) or b == 1 or size != 0b11
    if a in (0b0001, 0b0011, 0b0110, 0b0111):  # VRHADD, VCGT, VCGE, VMAX, VMIN, VABD, VABA
        return size != 0b11
    if a == 0b1000:  # VADD, VSUB; VTST, VCEQ
        return not b or size != 0b11
    if a == 0b1001:  # VMLA, VMLS; VMUL (polynomial: 8-bit only)
        return size != 0b11 and not (b and unsigned and size != 0)
    if a == 0b1010:  # VPMAX, VPMIN
        return size != 0b11 and not quad
    if a == 0b1011:  # VQDMULH, VQRDMULH, VPADD, VQRDMLAH
        if b and not unsigned:
            return size != 0b11 and not quad
        return size != 0b00 and size != 0b11
    if a == 0b1100:  # SHA1*, SHA256* (Q only); VFMA, VFMS
        if not b:
            return quad and not (unsigned and size == 0b11)
        return not unsigned
    if a == 0b1101:  # VADD, VSUB, VPADD, VABD, VMLA, VMLS, VMUL (floating point)
        return not (unsigned and quad and not b and size >> 1 == 0) and not (unsigned and b and size >> 1)
    if a == 0b1110:  # VCEQ, VCGE, VCGT, VACGE, VACGT
        return not (not unsigned and (b or size >> 1))
    return not (unsigned and not b and quad)  # VMAX, VMIN, VPMAX, VPMIN, VRECPS, VRSQRTS, VMAXNM


@numba.njit(cache=True, nogil=True)
def _a32_element_load_store(word: int) -> tuple[int, int]:
    """VLDn and VSTn (A7.7), with the size and alignment each leaves UNDEFINED, and a lane's
    registers past D31 (UNPREDICTABLE; capstone rejects them): writeback to base pc writes
    the pc (capstone: with Rm 1101, the post-increment by the size, only)."""
    kind, size, align = _field(word, 8, 4), _field(word, 6, 2), _field(word, 4, 2)
    if not word & (1 << 23):  # multiple elements
        defined = kind <= 0b1010 and not (
            (size == 0b11 and kind in (0b0000, 0b0001, 0b0011, 0b0100, 0b0101, 0b1000, 0b1001))
            or (align & 0b10 and kind in (0b0100, 0b0101, 0b0110, 0b0111))
            or (align == 0b11 and kind in (0b1000, 0b1001, 0b1010))
        )  # fmt: skip
    elif kind >> 2 == 0b11:  # a single element to all lanes (VLDn only)
        n, bit = kind & 0b11, word & 0x10 != 0
        defined = word & (1 << 21) != 0 and not (
            (n == 0 and (size == 0b11 or (size == 0 and bit))) or (n == 1 and size == 0b11)
            or (n == 2 and (size == 0b11 or bit)) or (n == 3 and size == 0b11 and not bit)
        )  # fmt: skip
    else:  # a single lane: index_align in bits 7:4
        n, lanes, index_align = kind & 0b11, kind >> 2, _field(word, 4, 4)
        first = (_field(word, 22, 1) << 4) | _field(word, 12, 4)  # D:Vd
        last = first + n * (1 + (_field(index_align, lanes, 1) if lanes else 0))
        defined = last <= 31 and not (
            (n == 0 and ((lanes == 0 and index_align & 1) or (lanes == 1 and index_align & 0b10)
                        or (lanes == 2 and (index_align & 0b100 or index_align & 0b11 in (0b01, 0b10)))))
            or (n == 1 and lanes == 2 and index_align & 0b10)
            or (n == 2 and ((lanes < 2 and index_align & 1) or (lanes == 2 and index_align & 0b11)))
            or (n == 3 and lanes == 2 and index_align & 0b11 == 0b11)
        )  # fmt: skip
    if not defined:
        return Effect.UNDEFINED, 0
    if _field(word, 16, 4) == PC and _field(word, 0, 4) == _SP:
        return Effect.WRITES_PC, Pc.LOADED if word & (1 << 21) else Pc.RESULT
    return Effect.NONE, 0


# T32 ---------------------------------------------------------------------------------------


@numba.njit(cache=True, nogil=True)
def t32_flow(code: np.ndarray, offset: int, address: int, it_state: int, row: np.ndarray) -> int:
    """The flow columns of the T32 instruction at code[offset] (`address`), inside the IT block
    `it_state` describes (ITSTATE; 0: none); returns ITSTATE after it. C_SIZE is 0 when `code`
    ends before the instruction does."""
    row[:] = 0
    if offset + 2 > len(code):
        return it_state
    first = np.int64(code[offset]) | (np.int64(code[offset + 1]) << 8)
    size = 4 if first >> 11 in (0b11101, 0b11110, 0b11111) else 2
    if offset + size > len(code):
        return it_state
    condition, tests, target, how = _ALWAYS + 1, False, 0, 0
    if size == 2:
        opcode = first
        effect, how, condition, tests = _t16(first)
        target = address + 4 + _t16_offset(first)
    else:
        second = np.int64(code[offset + 2]) | (np.int64(code[offset + 3]) << 8)
        opcode = (first << 16) | second
        if loop_flow(first, second, address, row):
            return it_advance(it_state) if it_state & 0xF else it_state
        effect, how, condition, target = _t32(first, second, address)
    if it_state & 0xF:  # inside an IT block: its condition, whatever the encoding holds
        condition = it_state >> 4
        it_state = it_advance(it_state)
    if size == 2 and first >> 8 == 0xBF and first & 0xF:  # IT (conditional only inside another)
        it_state = first & 0xFF
    if effect == Effect.UNDEFINED:
        condition = _ALWAYS
    _fill(row, Isa.T32, address, size, opcode, effect, how, target, condition, tests)
    return it_state


@numba.njit(cache=True, nogil=True)
def _t16_offset(halfword: int) -> int:
    """The offset of a 16-bit branch from its pc (the address + 4): B<c>, B, CBZ/CBNZ."""
    if halfword >> 12 == 0b1101:
        return _signed(halfword & 0xFF, 8) << 1
    if halfword >> 11 == 0b11100:
        return _signed(halfword & 0x7FF, 11) << 1
    return (_field(halfword, 9, 1) << 6) | (_field(halfword, 3, 5) << 1)


@numba.njit(cache=True, nogil=True)
def _t16(halfword: int) -> tuple[int, int, int, bool]:
    """Effect, `Pc` bits, condition and CBZ-style test of a 16-bit T32 instruction (A6.2)."""
    never = _ALWAYS + 1
    top = halfword >> 10
    if top == 0b010001:  # special data processing, branch and exchange (A6.2.3)
        op, rd = _field(halfword, 6, 4), (_field(halfword, 7, 1) << 3) | (halfword & 7)
        rm = _field(halfword, 3, 4)
        if op >> 2 == 0b00:  # ADD (register)
            effect, how = _writes(rd, Pc.RESULT)
            return effect, how, never, False
        if op >> 2 == 0b10:  # MOV (register)
            effect, how = _writes(rd, Pc.RETURN if rm == _LR else Pc.RESULT)
            return effect, how, never, False
        if op >> 1 == 0b110:  # BX, BXNS (Armv8-M: bit 2)
            return Effect.BRANCH_REGISTER, Pc.RETURN if rm == _LR and not halfword & 4 else 0, never, False
        if op >> 1 == 0b111 and (halfword & 0b11 == 0 or halfword & 0b100):  # BLX (register), BLXNS
            return Effect.CALL_REGISTER, 0, never, False
        if op >> 1 == 0b111:
            return Effect.UNDEFINED, 0, never, False
        return Effect.NONE, 0, never, False  # CMP
    if halfword >> 12 == 0b1011:
        return _t16_miscellaneous(halfword)
    if halfword >> 12 == 0b1101:  # B<c>, UDF, SVC
        condition = _field(halfword, 8, 4)
        if condition == 0b1110:
            return Effect.UDF, 0, never, False
        if condition == 0b1111:
            return Effect.TRAP, 0, never, False
        return Effect.BRANCH, 0, condition, False
    if halfword >> 11 == 0b11100:
        return Effect.BRANCH, 0, never, False
    if halfword >> 12 == 0b1100 and halfword & 0xFF == 0:  # LDM, STM of no register
        return Effect.UNDEFINED, 0, never, False
    return Effect.NONE, 0, never, False


@numba.njit(cache=True, nogil=True)
def _t16_miscellaneous(halfword: int) -> tuple[int, int, int, bool]:
    """Miscellaneous 16-bit instructions (A6.2.5): CBZ/CBNZ, POP, BKPT, HLT, IT and hints."""
    never = _ALWAYS + 1
    op = _field(halfword, 8, 4)
    if op & 0b0101 == 0b0001:  # CBZ, CBNZ
        return Effect.BRANCH, 0, never, True
    if op & 0b0110 == 0b0100 and halfword & 0x1FF == 0:  # PUSH, POP of no register
        return Effect.UNDEFINED, 0, never, False
    if op == 0b1101 or op == 0b1100:  # POP
        if halfword & 0x100:
            return Effect.WRITES_PC, Pc.LOADED | Pc.RETURN, never, False
        return Effect.NONE, 0, never, False
    if op == 0b1110 or (op == 0b1010 and _field(halfword, 6, 2) == 0b10):  # BKPT, HLT
        return Effect.TRAP, 0, never, False
    if op in (0b0000, 0b0010, 0b0100, 0b0101, 0b1010, 0b1111):  # SP, extend, PUSH, REV, IT, hints
        return Effect.NONE, 0, never, False
    if op == 0b0110 and (halfword & 0xFFF7 == 0xB650 or halfword & 0xFFE8 == 0xB660):  # SETEND, CPS
        return Effect.NONE, 0, never, False
    return Effect.UNDEFINED, 0, never, False


@numba.njit(cache=True, nogil=True)
def _t32(first: int, second: int, address: int) -> tuple[int, int, int, int]:
    """Effect, `Pc` bits, condition and target of a 32-bit T32 instruction (A6.3)."""
    never = _ALWAYS + 1
    op1, op2 = _field(first, 11, 2), _field(first, 4, 7)
    if op1 == 0b10 and second & 0x8000:
        return _t32_branch_control(first, second, address)
    if (op1 == 0b01 and op2 >> 6) or (op1 == 0b11 and op2 >> 6):  # coprocessor, SIMD, floating point
        effect, how = _t32_coprocessor(first, second)
        return effect, how, never, 0
    word = (first << 16) | second
    if op1 == 0b01:
        if op2 >> 5 == 0b01:
            effect, how = _t32_data_processing(first, second, False)
        elif op2 & 0b0000100:
            effect, how = _t32_dual_exclusive_table(first, second)
        else:
            effect, how = _t32_load_store_multiple(first, second)
    elif op1 == 0b10:
        if op2 & 0b0100000:
            effect, how = _t32_plain_immediate(first, second)
        else:
            effect, how = _t32_data_processing(first, second, True)
    elif op2 & 0b1110001 == 0b0010000:  # Advanced SIMD element and structure loads and stores
        effect, how = _a32_element_load_store(0xF4000000 | (word & 0x00FFFFFF))
    elif op2 >> 4 == 0b000 or op2 >> 4 == 0b001:
        effect, how = _t32_load_store_single(first, second)
    elif op2 >> 4 == 0b010:
        effect, how = _t32_data_processing_register(first, second)
    elif op2 >> 3 == 0b0110:
        effect, how = _t32_multiply(first, second)
    else:
        effect, how = _t32_long_multiply(first, second)
    return effect, how, never, 0


@numba.njit(cache=True, nogil=True)
def _t32_branch_control(first: int, second: int, address: int) -> tuple[int, int, int, int]:
    """Branches and miscellaneous control (A6.3.4)."""
    never = _ALWAYS + 1
    op, op1 = _field(first, 4, 7), _field(second, 12, 3)
    sign = _field(first, 10, 1)
    j1, j2 = _field(second, 13, 1), _field(second, 11, 1)
    if op1 & 0b101 == 0b000:
        if op & 0b0111000 != 0b0111000:  # B<c> (T3)
            offset = (sign << 20) | (j2 << 19) | (j1 << 18) | (_field(first, 0, 6) << 12)
            offset |= (second & 0x7FF) << 1
            return Effect.BRANCH, 0, _field(first, 6, 4), address + 4 + _signed(offset, 21)
        effect, how = _t32_control(first, second, op, op1)
        return effect, how, never, 0
    i1, i2 = 1 - (j1 ^ sign), 1 - (j2 ^ sign)
    offset = (sign << 24) | (i1 << 23) | (i2 << 22) | (_field(first, 0, 10) << 12) | ((second & 0x7FF) << 1)
    offset = _signed(offset, 25)
    if op1 & 0b101 == 0b001:  # B (T4)
        return Effect.BRANCH, 0, never, address + 4 + offset
    if op1 & 0b101 == 0b101:  # BL
        return Effect.CALL, 0, never, address + 4 + offset
    if second & 1:
        return Effect.UNDEFINED, 0, never, 0
    return Effect.CALL_SWITCH, 0, never, ((address + 4) & ~3) + offset  # BLX (immediate)


@numba.njit(cache=True, nogil=True)
def _t32_control(first: int, second: int, op: int, op1: int) -> tuple[int, int]:
    """MSR, MRS, hints, barriers, BXJ, SUBS pc, lr, HVC, SMC, UDF (A6.3.4, op1 0x0)."""
    if op >> 1 == 0b011100:  # MSR (register), of a banked register (bit 5) or with a mask
        if second & 0x20:
            sysm = (_field(second, 4, 1) << 4) | _field(second, 8, 4)
            defined = second & 0xCF == 0 and _banked(op & 1, sysm)
        else:
            defined = second & 0xFF == 0 and (op & 1 or _field(second, 8, 4) != 0)
        return (Effect.NONE, 0) if defined and not second & 0x2000 else (Effect.UNDEFINED, 0)
    if op == 0b0111010:  # CPS and hints: (1)(1)(1)(1) in bits 3:0, (0) in 13 and 11
        imod, change = _field(second, 9, 2), _field(second, 8, 1)
        cps = imod != 0b01 and (change or second & 0x1F == 0)  # a mode only with M
        defined = first & 0xF == 0xF and second & 0x2800 == 0 and (second & 0x700 == 0 or cps)
        return (Effect.NONE, 0) if defined else (Effect.UNDEFINED, 0)
    if op == 0b0111011:  # CLREX, DSB, DMB, ISB
        barrier = first == 0xF3BF and (second == 0x8F2F or second & 0xFFF0 in (0x8F40, 0x8F50, 0x8F60))
        if not barrier:
            return Effect.UNDEFINED, 0
        return Effect.NONE, 0
    if op == 0b0111100:  # BXJ
        return (Effect.BRANCH_REGISTER, 0) if second == 0x8F00 else (Effect.UNDEFINED, 0)
    if op == 0b0111101 and first == 0xF3DE and second & 0xFF00 == 0x8F00:  # SUBS pc, lr; ERET (#0)
        return Effect.WRITES_PC, Pc.FLAGS
    if op >> 1 == 0b011111:  # MRS: (1)(1)(1)(1) in Rn, or a banked register
        banked = second & 0x20 != 0
        sysm = (_field(second, 4, 1) << 4) | (first & 0xF)
        if banked:
            defined = second & 0x20CF == 0 and _banked(op & 1, sysm)
        else:
            defined = second & 0x20FF == 0 and first & 0xF == 0xF
        if not defined:
            return Effect.UNDEFINED, 0
        return _writes(_field(second, 8, 4), Pc.RESULT)
    if (op == 0b1111110 and op1 == 0b000) or (op == 0b1111111 and op1 == 0b000):  # HVC, SMC
        return Effect.TRAP, 0
    if op == 0b1111111 and op1 == 0b010:
        return Effect.UDF, 0
    return Effect.UNDEFINED, 0


@numba.njit(cache=True, nogil=True)
def _t32_data_processing(first: int, second: int, immediate: bool) -> tuple[int, int]:
    """Data processing with a modified immediate or a shifted register (A6.3.1, A6.3.11): Rd
    1111 with S set is TST, TEQ, CMN or CMP; ADC and SBC set capstone's update_flags always."""
    op, flags = _field(first, 5, 4), first & 0x10 != 0
    rd = _field(second, 8, 4)
    pack = op == 0b0110  # PKH: no immediate form, no S, T (bit 4) clear
    if op in (0b0101, 0b0111, 0b1001, 0b1100, 0b1111) or (pack and (immediate or flags or second & 0x10)):
        return Effect.UNDEFINED, 0
    if rd == PC and flags and op in (0b0000, 0b0100, 0b1000, 0b1101):
        return Effect.NONE, 0
    return _writes(rd, Pc.FLAGS if flags or op == 0b1010 or op == 0b1011 else Pc.RESULT)


_PLAIN_IMMEDIATES = (0b00000, 0b00100, 0b01010, 0b01100, 0b10000, 0b10010, 0b10100, 0b10110, 0b11000,
                     0b11010, 0b11100)  # fmt: skip
"""op (bits 8:4) of ADDW, MOVW, SUBW, MOVT, SSAT, SSAT16, SBFX, BFI, USAT, USAT16, UBFX (A6.3.3)."""


@numba.njit(cache=True, nogil=True)
def _t32_plain_immediate(first: int, second: int) -> tuple[int, int]:
    """ADDW, SUBW, MOVW, MOVT, SSAT, USAT, SBFX, UBFX, BFI, BFC (A6.3.3)."""
    op = _field(first, 4, 5)
    checked = op & 0b10101 == 0b10000 or op == 0b10110  # SSAT, SSAT16, USAT, USAT16, BFI: (0) in 10 and 5
    halves = op & 0b10111 == 0b10010 and second & 0x70C0 == 0  # SSAT16, USAT16: (0) in 4 as well
    if op not in _PLAIN_IMMEDIATES or (checked and (second & 0x20 or first & 0x400)):
        return Effect.UNDEFINED, 0
    if halves and second & 0x10:
        return Effect.UNDEFINED, 0
    return _writes(_field(second, 8, 4), Pc.RESULT)


@numba.njit(cache=True, nogil=True)
def _t32_load_store_multiple(first: int, second: int) -> tuple[int, int]:
    """LDM, STM, PUSH, POP, SRS, RFE (A6.3.5)."""
    op, load = _field(first, 7, 2), first & 0x10 != 0
    if op == 0b00 or op == 0b11:  # RFE, SRS: with their (1)(1)(0)(0)... bits
        if load:
            return (Effect.EXCEPTION_RETURN, 0) if second == 0xC000 else (Effect.UNDEFINED, 0)
        return (Effect.NONE, 0) if second & 0xFFE0 == 0xC000 and first & 0xF == _SP else (Effect.UNDEFINED, 0)
    if (not load and second & 0xA000) or second == 0:  # STM of sp or pc, no register
        return Effect.UNDEFINED, 0
    if load and second & 0x8000:
        return Effect.WRITES_PC, Pc.LOADED | Pc.RETURN
    if first & 0x20 and first & 0xF == PC and (load or op != 0b10):  # capstone: not STMDB
        return Effect.WRITES_PC, Pc.LOADED | Pc.RETURN if load else Pc.RESULT
    return Effect.NONE, 0


@numba.njit(cache=True, nogil=True)
def _t32_dual_exclusive_table(first: int, second: int) -> tuple[int, int]:
    """LDRD, STRD, the exclusives, load-acquire/store-release and TBB/TBH (A6.3.6), with the
    fields the Arm ARM shows as (1)(1)(1)(1) or (0)(0)(0)(0) (capstone rejects the others)."""
    op1, op2, op3 = _field(first, 7, 2), _field(first, 4, 2), _field(second, 4, 4)
    rt, rt2, rd = _field(second, 12, 4), _field(second, 8, 4), second & 0xF
    if op1 == 0b00 and op2 == 0b00:  # STREX: the status in bits 11:8; Rt 1111: TT (Armv8-M)
        return _writes(rt2, Pc.RESULT) if rt != PC else (Effect.NONE, 0)
    if op1 == 0b00 and op2 == 0b01:  # LDREX
        return _writes(rt, Pc.LOADED) if rt2 == 0b1111 else (Effect.UNDEFINED, 0)
    if op1 == 0b01 and op2 < 0b10:
        double = op3 == 0b0111 or op3 == 0b1111  # STREXD, STLEXD, LDREXD, LDAEXD: Rt2 in bits 11:8
        exclusive = op3 in (0b0100, 0b0101, 0b1100, 0b1101, 0b1110)
        acquire_release = op3 in (0b1000, 0b1001, 0b1010)
        if op2 == 0b00 and (double or (exclusive and rt2 == 0b1111)):  # the status in bits 3:0
            return _writes(rd, Pc.RESULT)
        if op2 == 0b00 and acquire_release and rt2 == 0b1111 and rd == 0b1111:
            return Effect.NONE, 0
        if op2 == 0b01 and (op3 == 0b0000 or op3 == 0b0001) and second & 0xFF00 == 0xF000:  # TBB, TBH
            return Effect.TABLE_BRANCH, 0
        if op2 == 0b01 and (exclusive or acquire_release) and rt2 == 0b1111 and rd == 0b1111:
            return _writes(rt, Pc.LOADED)
        if op2 == 0b01 and double and rd == 0b1111:
            return _writes_any(rt, rt2, Pc.LOADED)
        return Effect.UNDEFINED, 0
    effect, how = Effect.NONE, 0
    if op2 & 1:  # LDRD
        effect, how = _writes_any(rt, rt2, Pc.LOADED)
    if effect == Effect.NONE and first & 0x20 and first & 0xF == PC:  # writeback to pc
        effect, how = Effect.WRITES_PC, Pc.LOADED if op2 & 1 else Pc.RESULT
    return effect, how


@numba.njit(cache=True, nogil=True)
def _t32_load_store_single(first: int, second: int) -> tuple[int, int]:
    """Loads (A6.3.7-A6.3.9, memory hints among them) and stores (A6.3.10) of one register."""
    size, load = _field(first, 5, 2), first & 0x10 != 0
    rn, rt = first & 0xF, _field(second, 12, 4)
    long_offset = first & 0x80 != 0  # imm12
    op2 = _field(second, 6, 6)
    indexed = not long_offset and op2 & 0b100100 == 0b100100  # imm8 with P/W: post, pre
    unprivileged = not long_offset and op2 >> 2 == 0b1110
    if size == 0b11 or (not load and (rn == PC or first & 0x100)) or (size == 0b10 and first & 0x100):
        return Effect.UNDEFINED, 0
    long_offset |= rn == PC  # a literal
    if not long_offset and not indexed and not unprivileged and op2 >> 2 != 0b1100 and op2 != 0:
        return Effect.UNDEFINED, 0
    if not load:
        return _writes(rt, Pc.RESULT) if unprivileged and size != 0b10 else (Effect.NONE, 0)  # STRBT, STRHT
    if size == 0b10:  # LDR: from the stack a return, but not LDRT
        plain = not unprivileged
        return Effect.WRITES_PC if rt == PC else Effect.NONE, Pc.LOADED | (
            Pc.RETURN if rn == _SP and plain else 0)
    if rt == PC and (rn == PC or long_offset or (not indexed and not unprivileged)):
        if size == 0b01 and (first & 0x100 or (rn == PC and first & 0x80)):  # LDRSH's, LDRH [pc, #+]'s
            return Effect.UNDEFINED, 0
        return Effect.NONE, 0  # PLD, PLI, PLDW
    return _writes(rt, Pc.LOADED)


@numba.njit(cache=True, nogil=True)
def _t32_data_processing_register(first: int, second: int) -> tuple[int, int]:
    """Shifts by a register, extends, parallel arithmetic, QADD..., REV, SEL, CLZ (A6.3.12)."""
    op1, op2 = _field(first, 4, 4), _field(second, 4, 4)
    defined = (
        (op1 >> 3 == 0 and op2 == 0)  # LSL, LSR, ASR, ROR
        or (op1 <= 0b0101 and op2 >> 3 == 1)  # SXTAH ... UXTAB
        or (op1 >> 3 == 1 and op2 >> 3 == 0 and op1 & 0b011 != 0b011 and op2 & 0b011 != 0b011)  # parallel
        or (op1 >> 2 == 0b10 and op2 >> 2 == 0b10 and (op1 & 0b10 == 0 or op2 == 0b1000))  # QADD, REV...
        or (op1 >> 1 == 0b110 and op2 >> 2 == 0b10)  # CRC32, CRC32C (Armv8)
    )  # fmt: skip
    if not defined or _field(second, 12, 4) != 0b1111:
        return Effect.UNDEFINED, 0
    flags = op1 >> 3 == 0 and op2 == 0 and op1 & 1  # LSLS, LSRS, ASRS, RORS
    return _writes(_field(second, 8, 4), Pc.FLAGS if flags else Pc.RESULT)


@numba.njit(cache=True, nogil=True)
def _t32_multiply(first: int, second: int) -> tuple[int, int]:
    """Multiply, multiply accumulate and absolute difference (A6.3.16): Rd in bits 11:8."""
    op1, op2 = _field(first, 4, 3), _field(second, 4, 2)
    defined = (
        (op1 == 0b000 and op2 < 0b10)  # MLA, MUL, MLS
        or op1 == 0b001  # SMLA<x><y>, SMUL<x><y>
        or (0b010 <= op1 <= 0b110 and op2 < 0b10)  # SMLAD, SMLAW, SMLSD, SMMLA, SMMLS
        or (op1 == 0b111 and op2 == 0b00)  # USAD8, USADA8
    )  # fmt: skip
    if not defined or _field(second, 6, 2) != 0:
        return Effect.UNDEFINED, 0
    return _writes(_field(second, 8, 4), Pc.RESULT)


@numba.njit(cache=True, nogil=True)
def _t32_long_multiply(first: int, second: int) -> tuple[int, int]:
    """Long multiply, long multiply accumulate and divide (A6.3.17): RdLo, RdHi in bits 15:8."""
    op1, op2 = _field(first, 4, 3), _field(second, 4, 4)
    if (op1 == 0b001 or op1 == 0b011) and op2 == 0b1111:  # SDIV, UDIV
        if _field(second, 12, 4) != 0b1111:
            return Effect.UNDEFINED, 0
        return _writes(_field(second, 8, 4), Pc.RESULT)
    defined = (
        (op2 == 0b0000 and op1 in (0b000, 0b010, 0b100, 0b110))  # SMULL, UMULL, SMLAL, UMLAL
        or (op1 == 0b100 and (op2 >> 2 == 0b10 or op2 >> 1 == 0b110))  # SMLAL<x><y>, SMLALD
        or (op1 == 0b101 and op2 >> 1 == 0b110)  # SMLSLD
        or (op1 == 0b110 and op2 == 0b0110)  # UMAAL
    )  # fmt: skip
    if not defined:
        return Effect.UNDEFINED, 0
    return _writes_any(_field(second, 12, 4), _field(second, 8, 4), Pc.RESULT)


@numba.njit(cache=True, nogil=True)
def _t32_coprocessor(first: int, second: int) -> tuple[int, int]:
    """Coprocessor, Advanced SIMD and floating-point instructions (A6.3.18): the A32 encodings
    with T32's prefix (1110 11xx: condition always; 1111 11xx: A32's unconditional space;
    111U 1111: Advanced SIMD data processing, A32's 1111 001U)."""
    word = (first << 16) | second
    if first >> 8 & 0b11101111 == 0b11101111:
        return _a32_hints_simd(0xF2000000 | (word >> 4 & 0x01000000) | (word & 0x00FFFFFF)), 0
    if first & 0x1000:
        effect, how, _ = _a32_unconditional(0xF0000000 | (word & 0x0FFFFFFF), 0)
        return effect, how
    return _a32_coprocessor(0xE0000000 | (word & 0x0FFFFFFF))


@numba.njit(cache=True, nogil=True)
def loop_flow(first: int, second: int, address: int, row: np.ndarray) -> bool:
    """The Armv8.1-M low-overhead-loop instruction with these halfwords, which capstone 5 does
    not decode, into `row`: WLS and WLSTP (a branch forward, taken when the loop count is
    zero), LE and LETP (a branch back, taken while the loop goes on), DLS, DLSTP and LCTP (no
    branch); False for any other bits. Their offset is the second halfword's bits 10:1 times
    four, plus bit 11 times two (Armv8-M ARM, DDI 0553, "WLS", "LE"). The tail-predicated
    forms take size bits 5:4 and Rn 3:0 of the first halfword in the space of 0xF000; those
    whose first halfword is LE's, LETP's or LE-without-LR's (0xF00F, 0xF01F, 0xF02F) are those
    instructions, as DLSTP's with 0xF00F is LCTP (GNU objdump decodes them so:
    tests/data/armv8.1m-loops). Elsewhere in T32 these encodings are UNDEFINED (a BLX
    immediate with bit 0 set), so no other instruction is read as one."""
    plain = first & 0xFFF0 == 0xF040  # WLS, DLS
    predicated = first & 0xFFC0 == 0xF000  # WLSTP, DLSTP, and in their space LE, LETP, LCTP
    loop_end = first == 0xF00F or first == 0xF01F or first == 0xF02F
    if (plain or predicated) and second == 0xE001:
        effect, target = Effect.NONE, 0  # DLS, DLSTP, LCTP
    elif (plain or predicated) and second & 0xF001 == 0xC001:
        distance = (_field(second, 1, 10) << 2) | (_field(second, 11, 1) << 1)
        effect, target = Effect.BRANCH, address + 4 + (-distance if loop_end else distance)
    else:
        return False
    opcode = (first << 16) | second
    _fill(row, Isa.T32, address, 4, opcode, effect, 0, target, _ALWAYS, effect == Effect.BRANCH)
    return True

