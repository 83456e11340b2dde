"""The A32/T32/A64 instruction facts as cputrace first made them: through capstone's Python objects.

A slow oracle for tests/test_isa_facts.py: `isa/arm.py` reads the same facts from
capstone's C records (and finds "writes pc" without regs_access()); both must agree on
every field of every instruction. The access size is found from capstone's text (mnemonic
and operand names), an independent check of `arm.py`'s instruction and register id tables.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator

import capstone

from cputrace.isa import InsnInfo, Kind, condition_name, it_conditions
from cputrace.isa.arm import (
    _AARCH32,
    _AARCH64,
    _BX,
    _IT,
    _LDR,
    _LR,
    _MASK64,
    _MODES,
    _MOV,
    _OP_IMM,
    _OP_MEM,
    _OP_REG,
    _PC,
    _RETURN_LISTS,
    _SP,
    _TABLE_BRANCHES,
    _Classes,
)
from cputrace.model import Isa

_MASK32 = (1 << 32) - 1
_BRANCH_GROUPS = frozenset({capstone.CS_GRP_JUMP, capstone.CS_GRP_CALL, capstone.CS_GRP_RET})


def _opcode(raw_bytes: bytes, isa: Isa) -> int:
    """The opcode as Tarmac prints it (32-bit T32 as hw1<<16 | hw2, both little-endian)."""
    if isa is Isa.T32 and len(raw_bytes) == 4:
        return (raw_bytes[1] << 24) | (raw_bytes[0] << 16) | (raw_bytes[3] << 8) | raw_bytes[2]
    return int.from_bytes(raw_bytes, "little")


def _t32_size(first_halfword: int) -> int:
    return 4 if first_halfword >> 11 in (0b11101, 0b11110, 0b11111) else 2


@functools.cache
def _engine(isa: Isa) -> capstone.Cs:
    engine = capstone.Cs(*_MODES[isa])
    engine.detail = True
    return engine


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


_CONDITION = "(eq|ne|cs|hs|cc|lo|mi|pl|vs|vc|hi|ls|ge|lt|gt|le|al)?"
_A32_BYTE = re.compile(r"((ldr|str)(s?bt?|exb)|(lda|stl)(ex)?b|swpb)" + _CONDITION)
_A32_HALF = re.compile(r"((ldr|str)(s?ht?|exh)|(lda|stl)(ex)?h)" + _CONDITION)
_A32_STATUS = re.compile(r"(strex|stlex)[bhd]?" + _CONDITION)
_A64_ELEMENT = re.compile(r"(ld|st)(ff|nf|nt)?[1-4](r|ro|rq)?s?([bhwdq])")
_A64_STATUS = frozenset(
    {"stxr", "stxrb", "stxrh", "stlxr", "stlxrb", "stlxrh", "stxp", "stlxp", "st64bv", "st64bv0"}
)
_BYTES = {"b": 1, "h": 2, "s": 4, "w": 4, "d": 8, "q": 16}
_A32_REGISTER = {r"r\d+|sb|sl|fp|ip|sp|lr|pc|s\d+": 4, r"d\d+": 8, r"q\d+": 16}
_A64_REGISTER = {r"w\d+|wsp|wzr|s\d+": 4, r"x\d+|sp|xzr|fp|lr|d\d+": 8, r"b\d+": 1, r"h\d+": 2, r"q\d+": 16}


def _access_size(insn: capstone.CsInsn, isa: Isa, classes: _Classes) -> int:
    """Bytes per transfer, from the text: the mnemonic's size suffix, else the transferred
    register's name (a NEON lane: the mnemonic's element size; an A64 vector: its arrangement)."""
    mnemonic, stem = insn.mnemonic, insn.mnemonic.split(".")[0]
    if isa is Isa.A64:
        element = _A64_ELEMENT.fullmatch(mnemonic)
        if element:
            return _BYTES[element[4]]
        if mnemonic.endswith("sw"):
            return 4
        if mnemonic.endswith("b") and mnemonic not in ("ldrab", "ld64b", "st64b"):
            return 1
        if mnemonic.endswith("h"):
            return 2
        skip = mnemonic in _A64_STATUS
    else:
        if _A32_BYTE.fullmatch(stem):
            return 1
        if _A32_HALF.fullmatch(stem):
            return 2
        skip = bool(_A32_STATUS.fullmatch(stem))
    text = insn.op_str.split("{", 1)[1] if insn.id in classes.based_lists else insn.op_str
    operand = text.split(", ")[1 if skip else 0].lstrip("{")
    name = re.match(r"[a-z]+\d*", operand)
    register = name[0] if name else ""
    if isa is Isa.A64:
        vector = re.fullmatch(r"v\d+\.(\d*)([bhsdq])\}?(\[\w+\])?", operand)
        if vector:
            count = 1 if not vector[1] or re.fullmatch(r"ld[1-4]r", mnemonic) else int(vector[1])
            return count * _BYTES[vector[2]]
        widths = _A64_REGISTER
    else:
        if operand[len(register) : len(register) + 1] == "[" and insn.id in classes.structures:
            return int(mnemonic.split(".")[1]) // 8 if "." in mnemonic else 4  # a lane, or all lanes
        widths = _A32_REGISTER
    return next((w for pattern, w in widths.items() if re.fullmatch(pattern, register)), 4)


def _is_return(iid: int, operands: list) -> bool:
    registers = [op.reg for op in operands if op.type == _OP_REG]
    if iid == _BX:
        return registers == [_LR]
    if iid in _RETURN_LISTS:
        return _PC in registers
    if iid == _LDR:
        return registers == [_PC] and any(op.type == _OP_MEM and op.mem.base == _SP for op in operands)
    return iid == _MOV and registers == [_PC, _LR]


def _next_isa(isa: Isa, iid: int, direct: bool, computes_pc: bool, exception_return: bool) -> Isa | None:
    if exception_return:
        return None
    if isa is Isa.A64:
        return Isa.A64
    if direct:
        if iid == capstone.arm_const.ARM_INS_BLX:
            return Isa.T32 if isa is Isa.A32 else Isa.A32
        return isa
    if isa is Isa.T32 and (computes_pc or iid in _TABLE_BRANCHES):
        return Isa.T32
    return None


def reference_facts(insn: capstone.CsInsn, isa: Isa, it_condition: tuple[str | None] | None) -> InsnInfo:
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
    elif insn.cc > 0 and iid != _IT and not (aarch64 and not jumps):
        # A64 executes conditionally only B.cond and BC.cond (C1.2.4): CSEL, CSET, CCMP and the
        # like read a condition as an operand and always execute
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
        access_size=_access_size(insn, isa, classes) if is_load or is_store else 0,
        is_undefined=iid in classes.undefined,
        raises_exception=iid in classes.traps,
        is_isb=_barrier(insn) == "isb",
        is_data_barrier=_barrier(insn) in ("dmb", "dsb"),
    )


_CP15_BARRIER = re.compile(r"p15, #0, \w+, c7, (c5, #4|c10, #4|c10, #5)")
_CP15_BARRIERS = {"c5, #4": "isb", "c10, #4": "dsb", "c10, #5": "dmb"}


def _barrier(insn: capstone.CsInsn) -> str | None:
    """isb, dsb or dmb by capstone's text: the instructions, and the CP15 operations that do
    the same in AArch32 (`mcr p15, #0, Rt, c7, c5, #4` is an ISB; c10 #4 a DSB, #5 a DMB)."""
    if insn.mnemonic in ("isb", "dsb", "dmb"):
        return insn.mnemonic
    cp15 = _CP15_BARRIER.fullmatch(insn.op_str) if insn.mnemonic == "mcr" else None
    return _CP15_BARRIERS[cp15[1]] if cp15 else None


def reference_run(code: bytes, address: int, isa: Isa) -> Iterator[InsnInfo]:
    """The instructions from the start of `code` up to the first undefined one, one capstone call."""
    offset = 0
    covered: tuple[str | None, ...] = ()
    for insn in _engine(isa).disasm(code, address):
        if covered:
            yield reference_facts(insn, isa, covered[:1])
            covered = covered[1:]
        else:
            yield reference_facts(insn, isa, None)
        if insn.id == _IT and isa is Isa.T32:
            covered = it_conditions(_opcode(insn.bytes, isa))
        offset += insn.size
    size = 4
    if isa is Isa.T32 and offset + 2 <= len(code):
        size = _t32_size(int.from_bytes(code[offset : offset + 2], "little"))
    if offset + size <= len(code):
        raw = code[offset : offset + size]
        yield InsnInfo(
            address + offset, isa, size, _opcode(raw, isa), "undefined", next_isa=isa, is_undefined=True
        )
