"""AArch32 (A32 and T32): banked registers by mode, semihosting traps, exception entry."""

from __future__ import annotations

import unicorn
from unicorn import Uc
from unicorn import arm_const as arm

from ..isa import InsnInfo
from ..model import Isa
from .conditions import condition_passed
from .machine import Cause, ExceptionTaken, Machine, View

_MODES = {
    0x10: "usr", 0x11: "fiq", 0x12: "irq", 0x13: "svc", 0x16: "mon",
    0x17: "abt", 0x1A: "hyp", 0x1B: "und", 0x1F: "sys",
}  # fmt: skip
_SHARED_LR = ("usr", "sys", "hyp")  # modes whose r14 is the User mode one
_T_BIT = 0x20
_ENTRY_CLEARS = 0x1F | _T_BIT | 0x0600FC00 | 0x01000000  # mode, T, IT state, J
_IRQ_MASK, _ABORT_MASK = 0x80, 0x100
_SCTLR_V, _SCTLR_TE = 1 << 13, 1 << 30
_HIGH_VECTORS = 0xFFFF0000

_EXCEPTIONS = {  # cause -> (mode, vector offset, return offset A32/T32, event number, name)
    Cause.SUPERVISOR_CALL: (0x13, 0x08, (4, 2), 3, "CoreEvent_SWI"),
    Cause.UNDEFINED: (0x1B, 0x04, (4, 2), 2, "CoreEvent_UndefinedInstr"),
    Cause.BREAKPOINT: (0x17, 0x0C, (4, 4), 4, "CoreEvent_PrefetchAbort"),
}
"""Return offsets are from the address of the instruction that raised the exception."""

_SEMIHOSTING = {Isa.A32: (0x0F123456,), Isa.T32: (0xDFAB, 0xBEAB)}  # SVC 0x123456; SVC/BKPT 0xAB


class ArmMachine(Machine):
    uc_arch = unicorn.UC_ARCH_ARM
    uc_mode = unicorn.UC_MODE_ARM
    register_ids = (
        *(getattr(arm, f"UC_ARM_REG_R{n}") for n in range(13)),
        arm.UC_ARM_REG_SP,
        arm.UC_ARM_REG_LR,
        arm.UC_ARM_REG_CPSR,
        arm.UC_ARM_REG_SPSR,
    )
    widths = (4,) * 17
    status_index = 15
    link_index = 14
    view_bits = 0x3F
    pc_id = arm.UC_ARM_REG_PC
    sp_id = arm.UC_ARM_REG_SP
    address_digits = 8
    pointer_size = 4

    def _make_view(self, bits: int) -> View:
        mode = _MODES.get(bits & 0x1F, f"mode{bits & 0x1F:02x}")
        bank = "usr" if mode == "sys" else mode
        gp = [f"r{n}" for n in range(8)] + [f"r{n}" + ("_fiq" if mode == "fiq" else "") for n in range(8, 13)]
        names = (
            *gp,
            f"r13_{bank}",
            f"r14_{'usr' if mode in _SHARED_LR else mode}",
            "cpsr",
            None if bank == "usr" else f"spsr_{mode}",
        )
        suffix = "_s" if self.cpu.secure else ""
        return View(names, mode + suffix, Isa.T32 if bits & _T_BIT else Isa.A32)

    def executes(self, info: InsnInfo, nzcv: int) -> bool:
        return condition_passed(info.condition, nzcv)

    def start_address(self, address: int, isa: Isa) -> int:
        return address | 1 if isa is Isa.T32 else address

    def is_semihosting(self, info: InsnInfo) -> bool:
        opcode = info.opcode & 0x0FFFFFFF if info.isa is Isa.A32 else info.opcode
        return opcode in _SEMIHOSTING.get(info.isa, ())

    def semihosting_call(self, uc: Uc) -> tuple[int, int]:
        return uc.reg_read(arm.UC_ARM_REG_R0), uc.reg_read(arm.UC_ARM_REG_R1)

    def semihosting_return(self, uc: Uc, value: int) -> None:
        uc.reg_write(arm.UC_ARM_REG_R0, value & 0xFFFFFFFF)

    def take_exception(self, uc: Uc, cause: Cause, info: InsnInfo) -> ExceptionTaken:
        mode, offset, returns, number, name = _EXCEPTIONS[cause]
        cpsr = uc.reg_read(arm.UC_ARM_REG_CPSR)
        sctlr = uc.cpr_read(15, 0, 1, 0, 0, 0, False)
        if sctlr & _SCTLR_V:
            base = _HIGH_VECTORS
        else:
            base = uc.cpr_read(15, 0, 12, 0, 0, 0, False) if self.cpu.vbar else 0
        thumb = self.cpu.vbar and bool(sctlr & _SCTLR_TE)
        masks = _IRQ_MASK | (_ABORT_MASK if cause is Cause.BREAKPOINT else 0)
        new = (cpsr & ~_ENTRY_CLEARS) | mode | masks | (_T_BIT if thumb else 0)
        lr = info.address + returns[info.isa is Isa.T32]
        uc.reg_write(arm.UC_ARM_REG_CPSR, new)  # switches to the mode's banked r13, r14, SPSR
        uc.reg_write(arm.UC_ARM_REG_SPSR, cpsr)
        uc.reg_write(arm.UC_ARM_REG_LR, lr)
        vector = base + offset
        self.set_pc(uc, vector, Isa.T32 if thumb else Isa.A32)
        view = self.view(new)
        writes = ((view.names[14], lr, 4), (view.names[16], cpsr, 4), ("cpsr", new, 4))
        return ExceptionTaken(number, name, vector, writes)
