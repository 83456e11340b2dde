"""A32, T32 and A64 instruction facts from capstone's detail mode.

Branch, call and return come from capstone's groups, operands and written registers; the
load/store classes from its instruction ids, grouped once by their names at import.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass
from types import ModuleType

import capstone
from capstone import arm64_const as a64
from capstone import arm_const as arm

from ..model import Isa
from .insn import InsnInfo, Kind
from .itstate import condition_name, it_conditions

_MODES = {
    Isa.A32: (capstone.CS_ARCH_ARM, capstone.CS_MODE_ARM),
    Isa.T32: (capstone.CS_ARCH_ARM, capstone.CS_MODE_THUMB),
    Isa.A64: (capstone.CS_ARCH_ARM64, capstone.CS_MODE_ARM),
}
ARM_ISAS = frozenset(_MODES)

_OP_REG = arm.ARM_OP_REG  # the same values for A64 operands
_OP_IMM = arm.ARM_OP_IMM
_OP_MEM = arm.ARM_OP_MEM
assert (_OP_REG, _OP_IMM, _OP_MEM) == (a64.ARM64_OP_REG, a64.ARM64_OP_IMM, a64.ARM64_OP_MEM)


def _ids(module: ModuleType, prefix: str, *starts: str) -> frozenset[int]:
    """Capstone instruction ids whose names (after `prefix`) start with any of `starts`."""
    return frozenset(
        value
        for name, value in vars(module).items()
        if name.startswith(prefix) and name[len(prefix) :].startswith(starts)
    )


def _named(module: ModuleType, prefix: str, *names: str) -> frozenset[int]:
    """Capstone instruction ids with exactly these names (after `prefix`)."""
    return frozenset(getattr(module, prefix + name) for name in names if hasattr(module, prefix + name))


@dataclass(frozen=True, slots=True)
class _Classes:
    """The instruction ids of one architecture that the facts depend on."""

    loads: frozenset[int]
    stores: frozenset[int]
    pairs: frozenset[int]  # two transfers
    lists: frozenset[int]  # one transfer per register operand (PUSH/POP)
    based_lists: frozenset[int]  # the same after the base register (LDM/STM)
    structures: frozenset[int]  # one per register before the memory operand (VLDn)
    tests: frozenset[int]  # compare-and-branch: conditional without a condition code
    exception_returns: frozenset[int]
    undefined: frozenset[int]
    traps: frozenset[int]  # exception-generating instructions


_A = "ARM_INS_"
_AARCH32 = _Classes(
    loads=_ids(arm, _A, "LD", "VLD", "POP", "VPOP", "FLDM", "RFE", "SWP"),
    stores=_ids(arm, _A, "ST", "VST", "PUSH", "VPUSH", "FSTM", "SRS", "SWP"),
    pairs=_named(arm, _A, "LDRD", "STRD", "LDREXD", "STREXD", "LDAEXD", "STLEXD")
    | _ids(arm, _A, "RFE", "SRS"),
    lists=_named(arm, _A, "POP", "PUSH", "VPOP", "VPUSH"),
    based_lists=_ids(arm, _A, "LDM", "STM", "VLDM", "VSTM", "FLDM", "FSTM"),
    structures=_ids(arm, _A, "VLD1", "VLD2", "VLD3", "VLD4", "VST1", "VST2", "VST3", "VST4"),
    tests=_named(arm, _A, "CBZ", "CBNZ"),
    exception_returns=_named(arm, _A, "ERET") | _ids(arm, _A, "RFE"),
    undefined=_named(arm, _A, "UDF"),
    traps=_named(arm, _A, "SVC", "BKPT", "HVC", "SMC", "UDF"),
)
_X = "ARM64_INS_"
_ATOMIC_OPS = ("ADD", "CLR", "EOR", "SET", "SMAX", "SMIN", "UMAX", "UMIN")
_ATOMICS = _ids(a64, _X, "SWP", "CAS", *(op + kind for op in ("LD", "ST") for kind in _ATOMIC_OPS))
_AARCH64 = _Classes(
    loads=_ids(a64, _X, "LD") | _ATOMICS,
    stores=_ids(a64, _X, "ST") | _ATOMICS,
    pairs=_named(a64, _X, "LDP", "LDPSW", "LDNP", "LDXP", "LDAXP", "STP", "STNP", "STXP", "STLXP")
    | _named(a64, _X, "STGP")
    | _ids(a64, _X, "CASP"),
    lists=frozenset(),
    based_lists=frozenset(),
    structures=_named(a64, _X, *(f"{op}{n}{r}" for op in ("LD", "ST") for n in "1234" for r in ("", "R"))),
    tests=_named(a64, _X, "CBZ", "CBNZ", "TBZ", "TBNZ"),
    exception_returns=_named(a64, _X, "ERET", "ERETAA", "ERETAB", "DRPS"),
    undefined=_named(a64, _X, "UDF"),
    traps=_named(a64, _X, "SVC", "HVC", "SMC", "BRK", "HLT", "UDF"),
)
_RETURN_LISTS = _named(arm, _A, "POP", "LDM", "LDMDA", "LDMDB", "LDMIB")
_TABLE_BRANCHES = _named(arm, _A, "TBB", "TBH")
_IT = arm.ARM_INS_IT
_BX, _BLX, _MOV, _LDR = arm.ARM_INS_BX, arm.ARM_INS_BLX, arm.ARM_INS_MOV, arm.ARM_INS_LDR
_PC, _LR, _SP = arm.ARM_REG_PC, arm.ARM_REG_LR, arm.ARM_REG_SP
_BRANCH_GROUPS = frozenset({capstone.CS_GRP_JUMP, capstone.CS_GRP_CALL, capstone.CS_GRP_RET})
_FIRST_CHUNK = 8  # instructions capstone decodes at a time, doubling up to the largest
_LARGEST_CHUNK = 256
_MASK32 = (1 << 32) - 1
_MASK64 = (1 << 64) - 1


@functools.cache
def _engine(isa: Isa) -> capstone.Cs:
    engine = capstone.Cs(*_MODES[isa])
    engine.detail = True
    return engine


def _opcode(raw: bytes, isa: Isa) -> int:
    """The opcode as Tarmac prints it (32-bit T32 as hw1<<16 | hw2, both little-endian)."""
    if isa is Isa.T32 and len(raw) == 4:
        return (raw[1] << 24) | (raw[0] << 16) | (raw[3] << 8) | raw[2]
    return int.from_bytes(raw, "little")


def _transfers(classes: _Classes, iid: int, operands: list) -> int:
    if iid in classes.pairs:
        return 2
    registers = sum(op.type == _OP_REG for op in operands)
    if iid in classes.lists:
        return registers
    if iid in classes.based_lists:
        return registers - 1
    if iid in classes.structures:
        first_memory = next((n for n, op in enumerate(operands) if op.type == _OP_MEM), 0)
        return sum(op.type == _OP_REG for op in operands[:first_memory])
    return 1


def _is_return(iid: int, operands: list) -> bool:
    """A32/T32 returns: BX lr, POP/LDM with pc in the list, LDR pc from the stack, MOV pc, lr."""
    registers = [op.reg for op in operands if op.type == _OP_REG]
    if iid == _BX:
        return registers == [_LR]
    if iid in _RETURN_LISTS:
        return _PC in registers
    if iid == _LDR:  # T32 prints the one-register POP {pc} as LDR pc, [sp], #4
        return registers == [_PC] and any(op.type == _OP_MEM and op.mem.base == _SP for op in operands)
    return iid == _MOV and registers == [_PC, _LR]


def _facts(insn: capstone.CsInsn, isa: Isa, it_condition: tuple[str | None] | None) -> InsnInfo:
    """InsnInfo of a decoded instruction.

    `it_condition` is None outside IT blocks; inside one it is a 1-tuple holding the
    condition the IT gives this instruction (None for always).
    """
    iid = insn.id
    groups = set(insn.groups)
    operands = insn.operands
    aarch64 = isa is Isa.A64
    classes = _AARCH64 if aarch64 else _AARCH32
    is_call = capstone.CS_GRP_CALL in groups
    jumps = bool(groups & _BRANCH_GROUPS)
    writes_pc = not aarch64 and not jumps and _PC in insn.regs_access()[1]
    exception_return = iid in classes.exception_returns or (writes_pc and insn.update_flags)
    is_branch = jumps or writes_pc or exception_return
    is_load = iid in classes.loads
    is_store = iid in classes.stores
    direct = jumps and bool(operands) and operands[-1].type == _OP_IMM
    target = operands[-1].imm & (_MASK64 if aarch64 else _MASK32) if direct else None
    if it_condition is not None:
        condition = it_condition[0]
    elif insn.cc > 0 and iid != _IT:  # capstone gives an IT its first condition
        condition = condition_name(insn.cc - 1)
    else:
        condition = None
    if not is_branch:
        kind, next_isa = Kind.NONE, isa
    else:
        if is_call:
            kind = Kind.CALL
        elif capstone.CS_GRP_RET in groups or (not aarch64 and _is_return(iid, operands)):
            kind = Kind.RETURN
        else:
            kind = Kind.JUMP
        next_isa = _next_isa(isa, iid, direct, writes_pc and not is_load, exception_return)
    return InsnInfo(
        address=insn.address,
        isa=isa,
        size=insn.size,
        opcode=_opcode(insn.bytes, isa),
        mnemonic=insn.mnemonic,
        operands=insn.op_str,
        is_branch=is_branch,
        is_direct=direct,
        target=target,
        next_isa=next_isa,
        condition=condition,
        is_conditional=condition is not None or iid in classes.tests,
        kind=kind,
        writes_pc=writes_pc,
        is_load=is_load,
        is_store=is_store,
        transfers=_transfers(classes, iid, operands) if is_load or is_store else 0,
        is_undefined=iid in classes.undefined,
        raises_exception=iid in classes.traps,
    )


def _next_isa(isa: Isa, iid: int, direct: bool, computes_pc: bool, exception_return: bool) -> Isa | None:
    """The ISA at a branch's target: BLX immediate switches; register targets interwork.

    In T32, data-processing writes to pc (ADD pc, MOV pc) and TBB/TBH stay in T32; loads
    to pc and BX/BLX take the state from bit 0 of the address, unknown here. A32 writes to
    pc all interwork (ARMv7), and exception returns restore the state from the SPSR.
    """
    if exception_return:
        return None
    if isa is Isa.A64:
        return Isa.A64
    if direct:
        if iid == _BLX:
            return Isa.T32 if isa is Isa.A32 else Isa.A32
        return isa
    if isa is Isa.T32 and (computes_pc or iid in _TABLE_BRANCHES):
        return Isa.T32
    return None


def _t32_size(first_halfword: int) -> int:
    return 4 if first_halfword >> 11 in (0b11101, 0b11110, 0b11111) else 2


def _undefined(code: bytes, offset: int, address: int, isa: Isa) -> InsnInfo | None:
    """The undecodable instruction at `offset`, or None if the bytes end before it does."""
    if isa is Isa.T32:
        if offset + 2 > len(code):
            return None
        size = _t32_size(int.from_bytes(code[offset : offset + 2], "little"))
    else:
        size = 4
    if offset + size > len(code):
        return None
    raw = code[offset : offset + size]
    return InsnInfo(address, isa, size, _opcode(raw, isa), "undefined", next_isa=isa, is_undefined=True)


def _open_it_block(insns: list[capstone.CsInsn]) -> int | None:
    """Index of an IT instruction whose block runs past the end of `insns`, if any."""
    for index in range(max(0, len(insns) - 5), len(insns)):
        insn = insns[index]
        if insn.id == _IT and len(it_conditions(insn.bytes[0])) >= len(insns) - index:
            return index
    return None


def decode_arm(code: bytes, address: int, isa: Isa) -> Iterator[InsnInfo]:
    """Consecutive instructions from the start of `code` (at `address`), as far as they go.

    Ends with an undefined instruction where capstone cannot decode, or where the bytes run
    out mid-instruction. capstone decodes all it is given before returning anything, so
    it gets growing chunks: a block of a few instructions costs a few decodes. IT blocks
    are tracked here (chunks never split one), so the instructions an IT covers are
    conditional whatever capstone prints for them.
    """
    engine = _engine(isa)
    offset = 0
    count = _FIRST_CHUNK
    while True:
        chunk = code[offset : offset + count * 4]
        insns = list(engine.disasm(chunk, address + offset, count))
        complete = len(insns) == count
        if complete and isa is Isa.T32:
            cut = _open_it_block(insns)
            insns = insns if cut is None else insns[:cut]
        covered: tuple[str | None, ...] = ()
        for insn in insns:
            if covered:
                info = _facts(insn, isa, covered[:1])
                covered = covered[1:]
            else:
                info = _facts(insn, isa, None)
            yield info
            if insn.id == _IT and isa is Isa.T32:
                covered = it_conditions(info.opcode)
            offset += insn.size
        if not complete:
            break
        count = min(count * 2, _LARGEST_CHUNK)
    undefined = _undefined(code, offset, address + offset, isa)
    if undefined is not None:
        yield undefined
