"""AArch64: X registers and the current SP, HLT semihosting, synchronous exception entry."""

from __future__ import annotations

import unicorn
from unicorn import Uc
from unicorn import arm64_const as a64

from ..errors import CputraceError
from ..isa import InsnInfo
from ..model import Isa
from .conditions import condition_passed
from .machine import Cause, ExceptionTaken, Machine, View

_HLT_SEMIHOSTING = 0xD45E0000  # HLT #0xF000
_EXCEPTION_CLASSES = {Cause.SUPERVISOR_CALL: 0x15, Cause.UNDEFINED: 0x00, Cause.BREAKPOINT: 0x3C}
_IL = 1 << 25  # ESR: a 32-bit instruction raised the exception
_CURRENT_SPX_SYNC = 0x200  # vector offset: synchronous, current EL, SP_ELx
_DAIF = 0x3C0
_NZCV = 0xF0000000
_SPSR_EL1 = (3, 0, 4, 0, 0)  # op0, op1, CRn, CRm, op2: unicorn has no register id for it


class Aarch64Machine(Machine):
    uc_arch = unicorn.UC_ARCH_ARM64
    uc_mode = unicorn.UC_MODE_ARM
    register_ids = (
        *(getattr(a64, f"UC_ARM64_REG_X{n}") for n in range(31)),
        a64.UC_ARM64_REG_SP,
        a64.UC_ARM64_REG_PSTATE,
    )
    widths = (8,) * 32 + (4,)
    status_index = 32
    link_index = 30
    view_bits = 0xF  # EL and SP selection
    pc_id = a64.UC_ARM64_REG_PC
    sp_id = a64.UC_ARM64_REG_SP
    address_digits = 16
    pointer_size = 8

    def _make_view(self, bits: int) -> View:
        el, spx = bits >> 2, bits & 1
        names = (*(f"X{n}" for n in range(31)), f"SP_EL{el if spx else 0}", "cpsr")
        suffix = "_s" if self.cpu.secure else ""
        return View(names, f"EL{el}{'h' if spx else 't'}{suffix}", Isa.A64)

    def executes(self, info: InsnInfo, nzcv: int) -> bool:
        # CSEL, CCMP and the like name a condition but always execute; B.cond does not
        return not info.is_branch or condition_passed(info.condition, nzcv)

    def is_semihosting(self, info: InsnInfo) -> bool:
        return info.opcode == _HLT_SEMIHOSTING

    def semihosting_call(self, uc: Uc) -> tuple[int, int]:
        return uc.reg_read(a64.UC_ARM64_REG_W0), uc.reg_read(a64.UC_ARM64_REG_X1)

    def semihosting_return(self, uc: Uc, value: int) -> None:
        uc.reg_write(a64.UC_ARM64_REG_X0, value & (1 << 64) - 1)

    def take_exception(self, uc: Uc, cause: Cause, info: InsnInfo) -> ExceptionTaken:
        """A synchronous exception taken from EL1 with SP_EL1 to EL1 (what unicorn runs in)."""
        pstate = uc.reg_read(a64.UC_ARM64_REG_PSTATE)
        if pstate & 0xF != 0b0101:
            raise CputraceError(
                f"0x{info.address:x}: exceptions are recorded only from EL1 using SP_EL1 "
                f"(PSTATE is 0x{pstate:x})"
            )
        immediate = (info.opcode >> 5) & 0xFFFF if cause is not Cause.UNDEFINED else 0
        esr = _EXCEPTION_CLASSES[cause] << 26 | _IL | immediate
        elr = info.next_address if cause is Cause.SUPERVISOR_CALL else info.address
        new = (pstate & _NZCV) | _DAIF | 0b0101
        uc.reg_write(a64.UC_ARM64_REG_ELR_EL1, elr)
        uc.reg_write(a64.UC_ARM64_REG_ESR_EL1, esr)
        uc.cpr_write(*_SPSR_EL1, pstate)
        uc.reg_write(a64.UC_ARM64_REG_PSTATE, new)
        vector = uc.reg_read(a64.UC_ARM64_REG_VBAR_EL1) + _CURRENT_SPX_SYNC
        uc.reg_write(a64.UC_ARM64_REG_PC, vector)
        writes = (("ELR_EL1", elr, 8), ("ESR_EL1", esr, 8), ("SPSR_EL1", pstate, 8), ("cpsr", new, 4))
        return ExceptionTaken(0x84, "CoreEvent_CURRENT_SPx_SYNC", vector, writes)
