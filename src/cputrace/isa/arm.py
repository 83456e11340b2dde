"""A32, T32 and A64 instruction facts from capstone's detail mode.

Branch, call and return come from capstone's groups, operands and the registers it says
are written (regs_access(): implicit writes, register operands with write access, and a
written-back memory base); the load/store classes from its instruction ids, grouped once
by their names at import. The access size (bytes per transfer) comes from the id for the
byte, halfword and element-sized forms, else from the width of the transferred register
(a D register 8 bytes, an A64 vector register its arrangement's, a NEON lane its element).
A compiled function reads them from capstone's C records (`capstone_raw`) a chunk at a
time: building capstone's Python objects would cost ten times more than all the rest of a
trace's decoding.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import ModuleType

import capstone
import numba
import numpy as np
from capstone import arm64_const as a64
from capstone import arm_const as arm

from ..model import Isa
from . import capstone_raw as raw
from .barriers import barrier_facts
from .capstone_raw import RawDisassembler, memory, read
from .ends import BRANCH, GOES_ON, end_in
from .flow_aarch32 import it_advance, loop_flow
from .index import AddressIndex, as_int64, holds
from .insn import (
    C_ACCESS,
    C_ADDRESS,
    C_COUNT,
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
    F_DATA_BARRIER,
    F_DIRECT,
    F_HAS_CONDITION,
    F_HAS_TARGET,
    F_ISB,
    F_LOAD,
    F_RETURN,
    F_STORE,
    F_TRAP,
    F_UNDEFINED,
    F_WRITES_PC,
    FIRST_CHUNK,
    KINDS,
    LARGEST_CHUNK,
    NO_ISA,
    Decoded,
    InsnInfo,
    Kind,
    Row,
    columns_of,
)  # fmt: skip
from .itstate import CONDITIONS

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
    pairs: frozenset[int]  # two transfers (a swap's read and write among them)
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
    pairs=_named(arm, _A, "LDRD", "STRD", "LDREXD", "STREXD", "LDAEXD", "STLEXD", "SWP", "SWPB")
    | _ids(arm, _A, "RFE", "SRS"),  # a swap reads, then writes (the ETM traces both)
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
_STATUS_STORES = _named(arm, _A, "STREX", "STREXB", "STREXH", "STREXD", "STLEX", "STLEXB", "STLEXH", "STLEXD")
_STATUS_STORES_64 = _named(a64, _X, "STXR", "STXRB", "STXRH", "STLXR", "STLXRB", "STLXRH", "STXP", "STLXP",
                           "ST64BV", "ST64BV0")  # fmt: skip
_RETURN_LISTS = _named(arm, _A, "POP", "LDM", "LDMDA", "LDMDB", "LDMIB")
_TABLE_BRANCHES = _named(arm, _A, "TBB", "TBH")
_IT = arm.ARM_INS_IT
_BX, _BLX, _MOV, _LDR = arm.ARM_INS_BX, arm.ARM_INS_BLX, arm.ARM_INS_MOV, arm.ARM_INS_LDR
_PC, _LR, _SP = arm.ARM_REG_PC, arm.ARM_REG_LR, arm.ARM_REG_SP
_JUMP, _CALL, _RET = capstone.CS_GRP_JUMP, capstone.CS_GRP_CALL, capstone.CS_GRP_RET
_WRITE = capstone.CS_AC_WRITE
_MASK64 = (1 << 64) - 1

# Bits of the instruction-id tables the compiled reader looks classes up in.
_C_LOAD, _C_STORE, _C_PAIR, _C_LIST, _C_BASED_LIST, _C_STRUCTURE = (1 << n for n in range(6))
_C_TEST, _C_EXCEPTION_RETURN, _C_UNDEFINED, _C_TRAP, _C_RETURN_LIST, _C_TABLE_BRANCH, _C_STATUS = (
    1 << n for n in range(6, 13)
)  # _C_STATUS: a store whose first register is the exclusive store's status result


def _class_table(classes: _Classes, *extra: tuple[frozenset[int], int]) -> np.ndarray:
    sets = [
        (classes.loads, _C_LOAD), (classes.stores, _C_STORE), (classes.pairs, _C_PAIR),
        (classes.lists, _C_LIST), (classes.based_lists, _C_BASED_LIST), (classes.structures, _C_STRUCTURE),
        (classes.tests, _C_TEST), (classes.exception_returns, _C_EXCEPTION_RETURN),
        (classes.undefined, _C_UNDEFINED), (classes.traps, _C_TRAP), *extra,
    ]  # fmt: skip
    table = np.zeros(max(max(ids, default=0) for ids, _ in sets) + 1, np.int64)
    for ids, bit in sets:
        table[list(ids)] |= bit
    return table


_TABLE_AARCH32 = _class_table(
    _AARCH32, (_RETURN_LISTS, _C_RETURN_LIST), (_TABLE_BRANCHES, _C_TABLE_BRANCH),
    (_STATUS_STORES, _C_STATUS),
)  # fmt: skip
_TABLE_AARCH64 = _class_table(_AARCH64, (_STATUS_STORES_64, _C_STATUS))

# Access sizes. By instruction id: bytes per transfer, or _BY_REGISTER (the transferred
# register's width) or _BY_ELEMENT (an element of its arrangement: A64 load-and-replicate).
_BY_REGISTER, _BY_ELEMENT = 0, -1
_ELEMENT_BYTES = {"B": 1, "H": 2, "S": 4, "W": 4, "D": 8, "Q": 16}
_AARCH32_SIZES = {
    1: _named(arm, _A, "LDRB", "STRB", "LDRSB", "LDRBT", "STRBT", "LDRSBT", "LDREXB", "STREXB", "LDAB",
              "STLB", "LDAEXB", "STLEXB", "SWPB"),
    2: _named(arm, _A, "LDRH", "STRH", "LDRSH", "LDRHT", "STRHT", "LDRSHT", "LDREXH", "STREXH", "LDAH",
              "STLH", "LDAEXH", "STLEXH"),
}  # fmt: skip
_SVE_ELEMENT = re.compile(r"(LD|ST)(FF|NF|NT)?[1-4](R|RO|RQ)?S?([BHWDQ])")  # LD1B, LDFF1SW, LD1RQD, ST1Q...
_WIDE = frozenset({"LDRAB", "LD64B", "ST64B"})  # end in B, yet not byte accesses


def _a64_size(name: str) -> int:
    """Bytes per transfer of an A64 load/store id name (after the prefix), by its suffix."""
    element = _SVE_ELEMENT.fullmatch(name)
    if element:
        return _ELEMENT_BYTES[element[4]]
    if name in ("LD1R", "LD2R", "LD3R", "LD4R"):
        return _BY_ELEMENT
    if name.endswith("SW"):
        return 4
    if name.endswith("B") and name not in _WIDE:
        return 1
    return 2 if name.endswith("H") else _BY_REGISTER


def _size_table(sizes: dict[int, int]) -> np.ndarray:
    table = np.zeros(max(sizes, default=0) + 1, np.int64)
    table[list(sizes)] = list(sizes.values())
    return table


_SIZES_AARCH32 = _size_table({iid: size for size, ids in _AARCH32_SIZES.items() for iid in ids})
_SIZES_AARCH64 = _size_table({
    value: _a64_size(name[len(_X) :]) for name, value in vars(a64).items()
    if name.startswith(_X) and value in _AARCH64.loads | _AARCH64.stores
})  # fmt: skip


def _register_widths(module: ModuleType, prefix: str, widths: dict[str, int]) -> np.ndarray:
    """Bytes of each register id, by the pattern its name (after `prefix`) matches; 0: unknown."""
    table = np.zeros(max(v for n, v in vars(module).items() if n.startswith(prefix)) + 1, np.int64)
    for name, value in vars(module).items():
        if name.startswith(prefix):
            table[value] = next((w for p, w in widths.items() if re.fullmatch(p, name[len(prefix) :])), 0)
    return table


_BY_ARRANGEMENT = -1  # an A64 vector register: as wide as its arrangement says
_WIDTHS_AARCH32 = _register_widths(
    arm, "ARM_REG_", {r"R\d+|SP|LR|PC|FP|IP|SB|SL": 4, r"S\d+": 4, r"D\d+": 8, r"Q\d+": 16}
)
_WIDTHS_AARCH64 = _register_widths(a64, "ARM64_REG_", {
    r"W\d+|WSP|WZR": 4, r"X\d+|SP|XZR|FP|LR|IP\d": 8, r"B\d+": 1, r"H\d+": 2, r"S\d+": 4, r"D\d+": 8,
    r"Q\d+": 16, r"V\d+": _BY_ARRANGEMENT,
})  # fmt: skip


def _arrangements() -> np.ndarray:
    """Bytes of each A64 vector arrangement (row 0: all its elements, row 1: one element)."""
    table = np.zeros((2, max(v for n, v in vars(a64).items() if n.startswith("ARM64_VAS_")) + 1), np.int64)
    for name, value in vars(a64).items():
        shape = re.fullmatch(r"ARM64_VAS_(\d+)([BHSDQ])", name)
        if shape:
            element = _ELEMENT_BYTES[shape[2]]
            table[:, value] = int(shape[1]) * element, element
    return table


_ARRANGEMENTS = _arrangements()

# The compiled reader writes the Decoded columns (insn.C_*) of each instruction, and its
# condition code (0-13; -1: none) after them, for the rows.
_O_CONDITION = C_COUNT
_O_COUNT = C_COUNT + 1
_K_NONE, _K_CALL, _K_RETURN, _K_JUMP = (
    KINDS.index(kind) for kind in (Kind.NONE, Kind.CALL, Kind.RETURN, Kind.JUMP)
)
_ISAS = {int(isa): isa for isa in Isa} | {NO_ISA: None}
_A32, _T32, _A64 = int(Isa.A32), int(Isa.T32), int(Isa.A64)
_CONDITION_CODES = len(CONDITIONS)  # codes 14 (al) and 15 mean always
_ROW_BITS = [
    tuple(facts & bit != 0 for bit in (F_BRANCH, F_DIRECT, F_WRITES_PC, F_LOAD, F_STORE, F_UNDEFINED, F_TRAP,
                                       F_CONDITIONAL))
    for facts in range(F_HAS_CONDITION)
]  # fmt: skip
_OP_TYPE, _OP_VALUE, _OP_ACCESS = raw.L_OP_TYPE, raw.L_OP_VALUE, raw.L_OP_ACCESS
_SINGLE_ELEMENT = 1 << 23  # A32/T32 VLDn/VSTn opcode bit: one lane or all lanes, not whole registers


@functools.cache
def _engine(isa: Isa) -> RawDisassembler:
    return RawDisassembler(*_MODES[isa])


@numba.njit(cache=True, nogil=True)
def _read_facts(records: int, count: int, isa: int, layout: np.ndarray, classes: np.ndarray,
                sizes: np.ndarray, widths: np.ndarray, out: np.ndarray) -> int:  # fmt: skip
    """Facts of `count` capstone records at address `records`, a row of `out` (_O_*) each.

    Returns where an IT block that runs past the last record starts (`count` if none): a
    chunk is cut there, so that the next one decodes the whole IT block again.
    """
    record_size = layout[raw.L_INSN_SIZE]
    insns = memory(records, count * record_size)
    aarch64, thumb = isa == _A64, isa == _T32
    ops, op_size = layout[raw.L_OPERANDS], layout[raw.L_OP_SIZE]
    it_state, cut = 0, count  # ITSTATE: the current condition, and a mask of what it covers
    for i in range(count):
        at = i * record_size
        iid = read(insns, at + layout[raw.L_ID], 4)
        size = read(insns, at + layout[raw.L_SIZE], 2)
        b = at + layout[raw.L_BYTES]
        if thumb and size == 4:
            opcode = (read(insns, b + 1, 1) << 24) | (read(insns, b, 1) << 16) | (read(insns, b + 3, 1) << 8)
            opcode |= read(insns, b + 2, 1)
        else:
            opcode = read(insns, b, size)
        detail = memory(read(insns, at + layout[raw.L_DETAIL], 8), layout[raw.L_DETAIL_SIZE])
        cls = classes[iid] if iid < len(classes) else 0
        jumps = calls = returns = False
        for g in range(detail[layout[raw.L_GROUPS_COUNT]]):
            group = detail[layout[raw.L_GROUPS] + g]
            jumps |= group == _JUMP
            calls |= group == _CALL
            returns |= group == _RET
        jumps |= calls or returns
        op_count = np.int64(detail[layout[raw.L_OP_COUNT]])
        writeback = detail[layout[raw.L_WRITEBACK]] != 0
        writes_pc = False
        if not aarch64 and not jumps:
            for r in range(detail[layout[raw.L_REGS_WRITE_COUNT]]):
                writes_pc |= read(detail, layout[raw.L_REGS_WRITE] + 2 * r, 2) == _PC
        registers, first, second, before_memory = 0, -1, -1, 0
        first_vas = second_vas = 0  # A64: the arrangements of the first two registers
        pc_listed = sp_based = memory_seen = False
        for k in range(op_count):
            o = ops + k * op_size
            op_type = read(detail, o + layout[_OP_TYPE], 4)
            value = read(detail, o + layout[_OP_VALUE], 4)  # a register (A32/T32 immediates: 4 bytes)
            if op_type == _OP_REG:
                vas = read(detail, o + layout[raw.L_OP_VAS], 4) if aarch64 else 0
                if registers == 0:
                    first, first_vas = value, vas
                elif registers == 1:
                    second, second_vas = value, vas
                registers += 1
                pc_listed |= value == _PC
                if not aarch64 and not jumps and value == _PC and detail[o + layout[_OP_ACCESS]] & _WRITE:
                    writes_pc = True
            elif op_type == _OP_MEM:
                if not memory_seen:
                    memory_seen, before_memory = True, registers
                sp_based |= value == _SP
                if not aarch64 and not jumps and value == _PC and writeback:
                    writes_pc = True
        update_flags = detail[layout[raw.L_UPDATE_FLAGS]] != 0
        exception_return = (cls & _C_EXCEPTION_RETURN) != 0 or (writes_pc and update_flags)
        branch = jumps or writes_pc or exception_return
        load, store = (cls & _C_LOAD) != 0, (cls & _C_STORE) != 0
        direct, target = False, np.int64(0)
        if jumps and op_count > 0:
            o = ops + (op_count - 1) * op_size
            if read(detail, o + layout[_OP_TYPE], 4) == _OP_IMM:
                direct = True
                target = read(detail, o + layout[_OP_VALUE], layout[raw.L_IMM_SIZE])
        kind, next_isa = _K_NONE, isa
        if branch:
            if calls:
                kind = _K_CALL
            elif returns or (not aarch64 and (
                (iid == _BX and registers == 1 and first == _LR)
                or (iid != _BX and cls & _C_RETURN_LIST and pc_listed)
                or (iid == _LDR and registers == 1 and first == _PC and sp_based)
                or (iid == _MOV and registers == 2 and first == _PC and second == _LR)
            )):  # fmt: skip
                kind = _K_RETURN  # A32/T32: BX lr, POP/LDM with pc, LDR pc from the stack, MOV pc, lr
            else:
                kind = _K_JUMP
            next_isa = _next_isa(isa, iid, cls, direct, writes_pc and not load, exception_return)
        transfers = access = 0
        if load or store:
            if cls & _C_PAIR:
                transfers = 2
            elif cls & _C_LIST:
                transfers = registers
            elif cls & _C_BASED_LIST:
                transfers = registers - 1
            elif cls & _C_STRUCTURE:
                transfers = before_memory  # the registers before the memory operand (VLDn)
            else:
                transfers = 1
            if cls & (_C_BASED_LIST | _C_STATUS):  # the base register or the status comes first
                first, first_vas = second, second_vas
            if not aarch64 and cls & _C_STRUCTURE and opcode & _SINGLE_ELEMENT:
                element = read(detail, layout[raw.L_VECTOR_SIZE], 4) // 8  # VLDn of one lane or all lanes
                access = element if element > 0 else 4
            else:
                access = _access_size(sizes[iid] if iid < len(sizes) else 0, first, first_vas, widths)
        if it_state & 0xF:  # inside an IT block: its condition, whatever capstone prints
            condition = it_state >> 4 if it_state >> 4 < _CONDITION_CODES else -1
            it_state = it_advance(it_state)
        elif (thumb and iid == _IT) or (aarch64 and not jumps):
            condition = -1  # capstone gives an IT its first condition, and A64's CSEL, CCMP... theirs
        else:  # capstone's condition codes are the architecture's plus one (0: none)
            cc = read(detail, layout[raw.L_CC], 4)
            condition = cc - 1 if 1 <= cc <= _CONDITION_CODES else -1
        if thumb and iid == _IT:
            it_state = opcode & 0xFF
            if cut == count and i >= count - 5 and _it_length(it_state) >= count - i:
                cut = i
        facts = (
            (F_BRANCH if branch else 0) | (F_DIRECT | F_HAS_TARGET if direct else 0)
            | (F_WRITES_PC if writes_pc else 0) | (F_LOAD if load else 0) | (F_STORE if store else 0)
            | (F_UNDEFINED if cls & _C_UNDEFINED else 0) | (F_TRAP if cls & _C_TRAP else 0)
            | (F_CONDITIONAL if cls & _C_TEST or condition >= 0 else 0)
            | (F_HAS_CONDITION if condition >= 0 else 0)
            | (F_CALL if kind == _K_CALL else 0) | (F_RETURN if kind == _K_RETURN else 0)
            | barrier_facts(isa, opcode)
        )  # fmt: skip
        if direct and not aarch64:
            target &= 0xFFFFFFFF
        out[i, C_ADDRESS], out[i, C_SIZE] = read(insns, at + layout[raw.L_ADDRESS], 8), size
        out[i, C_OPCODE], out[i, C_FACTS], out[i, C_TARGET] = opcode, facts, target
        out[i, C_NEXT_ISA], out[i, C_KIND], out[i, C_TRANSFERS] = next_isa, kind, transfers
        out[i, C_ACCESS], out[i, _O_CONDITION] = access, condition
    return cut


@numba.njit(cache=True, nogil=True)
def _it_length(state: int) -> int:
    """How many instructions an IT with this ITSTATE covers (see itstate.it_conditions)."""
    length = 0
    while state & 0xF:
        length += 1
        state = it_advance(state)
    return length


@numba.njit(cache=True, nogil=True)
def _access_size(by_id: int, register: int, vas: int, widths: np.ndarray) -> int:
    """Bytes per transfer: fixed by the id, else the register's width (4 when unknown)."""
    if by_id > 0:
        return by_id
    width = widths[register] if 0 <= register < len(widths) else 0
    if width == _BY_ARRANGEMENT and 0 < vas < _ARRANGEMENTS.shape[1]:
        width = _ARRANGEMENTS[1 if by_id == _BY_ELEMENT else 0, vas]
    return width if width > 0 else 4


@numba.njit(cache=True, nogil=True)
def _next_isa(isa: int, iid: int, cls: int, direct: bool, computes_pc: bool, exception_return: bool) -> int:
    """The ISA at a branch's target: BLX immediate switches; register targets interwork.

    In T32, data-processing writes to pc (ADD pc, MOV pc) and TBB/TBH stay in T32; loads
    to pc and BX/BLX take the state from bit 0 of the address, unknown here. A32 writes to
    pc all interwork (ARMv7), and exception returns restore the state from the SPSR.
    """
    if exception_return:
        return NO_ISA
    if isa == _A64:
        return _A64
    if direct:
        if iid == _BLX:
            return _T32 if isa == _A32 else _A32
        return isa
    if isa == _T32 and (computes_pc or cls & _C_TABLE_BRANCH):
        return _T32
    return NO_ISA


def _loop_instruction(code: bytes, offset: int, address: int) -> Decoded | None:
    """The Armv8.1-M low-overhead-loop instruction at `offset` (`_loop_instruction_at`), or None."""
    columns = np.zeros((1, _O_COUNT), np.int64)
    if not _loop_instruction_at(np.frombuffer(code, np.uint8), offset, address, columns):
        return None
    opcode, target = int(columns[0, C_OPCODE]), int(columns[0, C_TARGET])
    columns = columns[:, :C_COUNT].copy(), columns[:, _O_CONDITION].copy()
    rows = _rows_of(Isa.T32, *columns, [_loop_text(opcode >> 16, opcode & 0xFFFF, target)])
    return Decoded(Isa.T32, columns[0], lambda: rows)


def _loop_text(first: int, second: int, target: int) -> tuple[str, str]:
    """Mnemonic and operands of a low-overhead-loop instruction (`flow_aarch32.loop_flow` says
    which halfwords are which), as GNU objdump names them."""
    register, size = f"r{first & 0xF}", 8 << ((first >> 4) & 3)
    predicated = first & 0xFFC0 == 0xF000
    if second == 0xE001:
        if first == 0xF00F:
            return ("lctp", "")
        return (f"dlstp.{size}" if predicated else "dls", f"lr, {register}")
    if first == 0xF02F:
        return ("le", f"#0x{target:x}")
    if first in (0xF00F, 0xF01F):
        return ("le" if first == 0xF00F else "letp", f"lr, #0x{target:x}")
    return (f"wlstp.{size}" if predicated else "wls", f"lr, {register}, #0x{target:x}")


def _undefined(code: bytes, offset: int, address: int, isa: Isa) -> Row | None:
    """The undecodable instruction at `offset`, or None if the bytes end before it does."""
    columns = np.zeros((1, _O_COUNT), np.int64)
    # as an int64: one compiled version for every address
    if not _undefined_at(np.frombuffer(code, np.uint8), offset, as_int64(address), int(isa), columns):
        return None
    size, opcode = int(columns[0, C_SIZE]), int(columns[0, C_OPCODE])
    return (address, isa, size, opcode, "undefined", "", False, False, None, isa, None, False, Kind.NONE,
            False, False, False, 0, 0, True, False, False, False, False, False)  # fmt: skip


@functools.cache
def _reader(isa: Isa) -> Callable[[int, int], tuple[np.ndarray, int]]:
    """What RawDisassembler.disasm calls on capstone's records: their _O_* rows, and the cut."""
    layout = _engine(isa).layout
    classes, sizes, widths = _tables(isa)

    def read_chunk(records: int, count: int) -> tuple[np.ndarray, int]:
        out = np.empty((count, _O_COUNT), np.int64)
        if not count:
            return out, 0
        # records as _block passes them (uint64): one compiled version of _read_facts serves both
        return out, _read_facts(np.uint64(records), count, int(isa), layout, classes, sizes, widths, out)

    return read_chunk


def _tables(isa: Isa) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The instruction classes, access sizes and register widths `_read_facts` reads."""
    if isa is Isa.A64:
        return _TABLE_AARCH64, _SIZES_AARCH64, _WIDTHS_AARCH64
    return _TABLE_AARCH32, _SIZES_AARCH32, _WIDTHS_AARCH32


_NO_INDEX = AddressIndex(1)


def arm_block(
    code: bytes, address: int, isa: Isa, known: AddressIndex | None, through_conditional: bool,
    first: np.ndarray | None,
) -> tuple[np.ndarray, int, int, np.ndarray]:  # fmt: skip
    """The block at the start of `code` (see `blocks.decode_block`), decoded in one compiled call.

    `first`: columns decoded before (left over from another block) that it starts with.
    Returns its columns, why it ends (an `ends` code, or GOES_ON when the bytes ran out),
    where its branch is (-1: none), and what was decoded past its end (its columns).
    """
    engine = _engine(isa)
    index = known if known is not None else _NO_INDEX
    first = np.zeros((0, C_COUNT), np.int64) if first is None else first
    # every row comes from `first` or from the bytes (two or more each), or is the undefined one
    out = np.empty((len(first) + len(code) // 2 + 1, C_COUNT), np.int64)
    scratch = np.empty((LARGEST_CHUNK, _O_COUNT), np.int64)
    n, why, branch, left = _block(
        engine.entry, np.frombuffer(code, np.uint8), as_int64(address), int(isa), engine.layout,
        *_tables(isa), index.table, through_conditional, first, scratch, out,
    )  # fmt: skip
    return out[:n].copy(), why, branch, out[n : n + left].copy()


@numba.njit(cache=True, nogil=True)
def _block(entry, code, address, isa, layout, classes, sizes, widths, index, through_conditional,
           first, scratch, out):  # fmt: skip
    """`arm_block`'s loop: the chunks of `arm_runs`, each taken up to where the block ends.

    Returns the block's length (its rows at the start of `out`), why it ends, where its
    branch is, and how many rows decoded past its end follow them in `out`.
    """
    insns = np.zeros(1, np.uint64)
    n, branch = 0, -1
    kept, why, at = _keep(first, len(first), index, isa, n, through_conditional, out)
    if at >= 0:
        branch = at
    n += kept
    if why != GOES_ON:
        return n, why, branch, _leave(first, kept, len(first), out, n) if why == BRANCH else 0
    offset = 0
    for i in range(len(first)):
        offset += first[i, C_SIZE]
    count = FIRST_CHUNK
    while offset < len(code):
        size = min(count * 4, len(code) - offset)
        decoded = np.int64(raw.disasm(entry, code, offset, size, address + offset, count, insns))
        cut = 0
        if decoded:
            cut = _read_facts(insns[0], decoded, isa, layout, classes, sizes, widths, scratch)
            raw.free(entry, insns[0], decoded)
        complete = decoded == count
        run = cut if complete else decoded
        kept, why, at = _keep(scratch, run, index, isa, n, through_conditional, out)
        if at >= 0:
            branch = n + at
        n += kept
        if why != GOES_ON:
            return n, why, branch, _leave(scratch, kept, run, out, n) if why == BRANCH else 0
        for i in range(run):
            offset += scratch[i, C_SIZE]
        if not complete and isa == _T32 and _loop_instruction_at(code, offset, address + offset, scratch):
            kept, why, at = _keep(scratch, 1, index, isa, n, through_conditional, out)
            if at >= 0:
                branch = n + at
            n += kept
            if why != GOES_ON:
                return n, why, branch, 0
            offset += 4
            count = FIRST_CHUNK
            continue
        if not complete:
            break
        count = min(count * 2, LARGEST_CHUNK)
    if _undefined_at(code, offset, address + offset, isa, scratch):
        kept, why, at = _keep(scratch, 1, index, isa, n, through_conditional, out)
        n += kept
        return n, why, branch, 0
    return n, GOES_ON, branch, 0


@numba.njit(cache=True, nogil=True)
def _copy_rows(source, first, count, target, at):
    """target[at : at + count] = source[first : first + count, :C_COUNT], as a loop: numba (0.68)
    compiles the shape check of an array-to-array slice assignment into error-message
    formatting that costs seconds of the first run."""
    for i in range(count):
        for column in range(C_COUNT):
            target[at + i, column] = source[first + i, column]


@numba.njit(cache=True, nogil=True)
def _keep(run, count, index, isa, before, through_conditional, out):
    """Copy the first `count` rows of `run` to out[before:] up to where the block ends (ends.end_in)."""
    known = holds(index, run[:count, C_ADDRESS], isa)
    kept, why, at = end_in(run[:count, C_FACTS], known, before, through_conditional)
    _copy_rows(run, 0, kept, out, before)
    return kept, why, at


@numba.njit(cache=True, nogil=True)
def _leave(run, used, count, out, at):
    """Copy the rows of `run` after the first `used` (of `count`) to out[at:]; how many."""
    left = count - used
    _copy_rows(run, used, left, out, at)
    return left


@numba.njit(cache=True, nogil=True)
def _loop_instruction_at(code, offset, address, out) -> bool:
    """The Armv8.1-M low-overhead-loop instruction at code[offset] (T32), which capstone 5 does
    not decode, into out[0] (`flow_aarch32.loop_flow`); False for any other bytes."""
    if offset + 4 > len(code):
        return False
    first = np.int64(code[offset]) | (np.int64(code[offset + 1]) << 8)
    second = np.int64(code[offset + 2]) | (np.int64(code[offset + 3]) << 8)
    if not loop_flow(first, second, address, out[0, :C_COUNT]):
        return False
    out[0, _O_CONDITION] = -1
    return True


@numba.njit(cache=True, nogil=True)
def _undefined_at(code, offset, address, isa, out) -> bool:
    """Write the undecodable instruction at code[offset] to out[0] (as `_undefined`); False when
    the bytes end before it does."""
    if isa == _T32:
        if offset + 2 > len(code):
            return False
        size = 4 if (code[offset + 1] >> 3) in (0b11101, 0b11110, 0b11111) else 2
    else:
        size = 4
    if offset + size > len(code):
        return False
    if isa == _T32 and size == 4:
        opcode = (code[offset + 1] << 24) | (code[offset] << 16) | (code[offset + 3] << 8) | code[offset + 2]
    else:
        opcode = read(code, offset, size)
    out[0, :] = 0
    out[0, C_ADDRESS], out[0, C_SIZE], out[0, C_OPCODE], out[0, C_FACTS] = address, size, opcode, F_UNDEFINED
    out[0, C_NEXT_ISA], out[0, C_KIND] = isa, _K_NONE
    return True


def arm_runs(code: bytes, address: int, isa: Isa) -> Iterator[Decoded]:
    """Consecutive instructions from the start of `code` (at `address`), as far as they go.

    Ends with an undefined instruction where capstone cannot decode, or where the bytes run
    out mid-instruction. capstone decodes all it is given before returning anything, so
    it gets growing chunks, each yielded as it comes: a block of a few instructions costs a
    few decodes. A chunk never ends inside an IT block, so the instructions an IT covers are
    conditional whatever capstone prints for them.
    """
    engine, reader = _engine(isa), _reader(isa)
    record_size = int(engine.layout[raw.L_INSN_SIZE])
    offset = 0
    count = FIRST_CHUNK
    while True:
        chunk = code[offset : offset + count * 4]
        (out, cut), records = engine.disasm(chunk, address + offset, count, reader)
        complete = len(out) == count
        kept = cut if complete else len(out)
        if kept:
            columns = out[:kept, :C_COUNT]
            conditions, texts = out[:kept, _O_CONDITION], records[: kept * record_size]
            yield Decoded(isa, columns, functools.partial(_rows, isa, columns, conditions, texts))
            offset += int(columns[:, C_SIZE].sum())
        if not complete and isa is Isa.T32 and (loop := _loop_instruction(code, offset, address + offset)):
            yield loop
            offset += 4
            count = FIRST_CHUNK
            continue
        if not complete:
            break
        count = min(count * 2, LARGEST_CHUNK)
    undefined = _undefined(code, offset, address + offset, isa)
    if undefined is not None:
        yield Decoded(isa, columns_of([undefined]), lambda: (undefined,))


def _rows(isa: Isa, columns: np.ndarray, conditions: np.ndarray, records: bytes) -> tuple[Row, ...]:
    """The rows of decoded columns, with the text from capstone's records."""
    return _rows_of(isa, columns, conditions, raw.texts(records))


def _rows_of(
    isa: Isa, columns: np.ndarray, conditions: np.ndarray, texts: list[tuple[str, str]]
) -> tuple[Row, ...]:
    """The rows of decoded columns, with their mnemonic and operand texts."""
    rows = []
    for (address, size, opcode, facts, target, next_isa, kind, transfers, access), condition, text in zip(
        columns.tolist(), conditions.tolist(), texts, strict=True
    ):
        branch, direct, writes_pc, load, store, undefined, trap, conditional = _ROW_BITS[facts & 0xFF]
        rows.append((
            address & _MASK64, isa, size, opcode, *text, branch, direct,
            target & _MASK64 if facts & F_HAS_TARGET else None, _ISAS[next_isa],
            CONDITIONS[condition] if condition >= 0 else None, conditional, KINDS[kind], writes_pc, load,
            store, transfers, access, undefined, trap, False, False, bool(facts & F_ISB),
            bool(facts & F_DATA_BARRIER),
        ))  # fmt: skip
    return tuple(rows)


def arm_rows(code: bytes, address: int, isa: Isa) -> Iterator[Row]:
    """`arm_runs` as rows."""
    for run in arm_runs(code, address, isa):
        yield from run.rows()


def decode_arm(code: bytes, address: int, isa: Isa) -> Iterator[InsnInfo]:
    """`arm_rows` as InsnInfo."""
    for row in arm_rows(code, address, isa):
        yield InsnInfo(*row)
