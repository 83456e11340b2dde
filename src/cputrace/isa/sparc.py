"""SPARC V8 instruction facts, decoded from the instruction fields.

capstone's SPARC backend follows V9 and cannot decode several V8 instructions that LEON
code relies on (integer LDD/STD, LDSTUB, alternate-space loads and stores, FLUSH; capstone
issues #1451, #1699, #1322), and it accepts V9-only encodings that trap on a V8. So the
facts come from the fields here, and capstone only supplies the text where it can.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import NamedTuple

import capstone
import numpy as np

from ..model import Isa
from .insn import InsnInfo, Kind

_REGISTERS = (
    *(f"%g{n}" for n in range(8)),
    *(f"%o{n}" for n in range(6)),
    "%sp",
    "%o7",
    *(f"%l{n}" for n in range(8)),
    *(f"%i{n}" for n in range(6)),
    "%fp",
    "%i7",
)
_O7, _I7 = 15, 31
_ALWAYS = 8
_ICC = (
    "n", "e", "le", "l", "leu", "cs", "neg", "vs",
    "a", "ne", "g", "ge", "gu", "cc", "pos", "vc",
)  # fmt: skip
_FCC = (
    "n", "ne", "lg", "ul", "l", "ug", "g", "u",
    "a", "e", "ue", "ge", "uge", "le", "ule", "o",
)  # fmt: skip
_CCC = (
    "n", "123", "12", "13", "1", "23", "2", "3",
    "a", "0", "03", "02", "023", "01", "013", "012",
)  # fmt: skip
_BRANCH_CONDITIONS = {2: _ICC, 6: _FCC, 7: _CCC}  # op2 (Bicc, FBfcc, CBccc) -> names by cond
_SETHI = 4
_LOGIC = (
    "add", "and", "or", "xor", "sub", "andn", "orn", "xnor",
    "addx", None, "umul", "smul", "subx", None, "udiv", "sdiv",
)  # fmt: skip
_ARITHMETIC = {  # op=2 op3 -> mnemonic, for the V8 encodings that exist
    **{op3: name for op3, name in enumerate(_LOGIC) if name},
    **{0x10 + op3: name + "cc" for op3, name in enumerate(_LOGIC) if name},
    0x20: "taddcc", 0x21: "tsubcc", 0x22: "taddcctv", 0x23: "tsubcctv", 0x24: "mulscc",
    0x25: "sll", 0x26: "srl", 0x27: "sra",
    0x28: "rd", 0x29: "rdpsr", 0x2A: "rdwim", 0x2B: "rdtbr",
    0x30: "wr", 0x31: "wrpsr", 0x32: "wrwim", 0x33: "wrtbr",
    0x34: "fpop1", 0x35: "fpop2", 0x36: "cpop1", 0x37: "cpop2",
    0x38: "jmpl", 0x39: "rett", 0x3A: "t", 0x3B: "flush", 0x3C: "save", 0x3D: "restore",
}  # fmt: skip
_JMPL, _RETT, _TICC = 0x38, 0x39, 0x3A


class _Memory(NamedTuple):
    mnemonic: str
    load: bool
    store: bool
    transfers: int
    size: int  # bytes per transfer
    register: str  # how rd is named: "r" integer, "f" float, "c" coprocessor, else fixed


_MEMORY = {  # op=3 op3 -> the V8 load/store (plus CASA, which LEON3/4 implement)
    0x00: _Memory("ld", True, False, 1, 4, "r"),
    0x01: _Memory("ldub", True, False, 1, 1, "r"),
    0x02: _Memory("lduh", True, False, 1, 2, "r"),
    0x03: _Memory("ldd", True, False, 2, 4, "r"),
    0x04: _Memory("st", False, True, 1, 4, "r"),
    0x05: _Memory("stb", False, True, 1, 1, "r"),
    0x06: _Memory("sth", False, True, 1, 2, "r"),
    0x07: _Memory("std", False, True, 2, 4, "r"),
    0x09: _Memory("ldsb", True, False, 1, 1, "r"),
    0x0A: _Memory("ldsh", True, False, 1, 2, "r"),
    0x0D: _Memory("ldstub", True, True, 1, 1, "r"),
    0x0F: _Memory("swap", True, True, 1, 4, "r"),
    0x20: _Memory("ld", True, False, 1, 4, "f"),
    0x21: _Memory("ld", True, False, 1, 4, "%fsr"),
    0x23: _Memory("ldd", True, False, 2, 4, "f"),
    0x24: _Memory("st", False, True, 1, 4, "f"),
    0x25: _Memory("st", False, True, 1, 4, "%fsr"),
    0x26: _Memory("std", False, True, 2, 4, "%fq"),
    0x27: _Memory("std", False, True, 2, 4, "f"),
    0x30: _Memory("ld", True, False, 1, 4, "c"),
    0x31: _Memory("ld", True, False, 1, 4, "%csr"),
    0x33: _Memory("ldd", True, False, 2, 4, "c"),
    0x34: _Memory("st", False, True, 1, 4, "c"),
    0x35: _Memory("st", False, True, 1, 4, "%csr"),
    0x36: _Memory("std", False, True, 2, 4, "%cq"),
    0x37: _Memory("std", False, True, 2, 4, "c"),
    0x3C: _Memory("casa", True, True, 1, 4, "r"),
}
_ALTERNATE = 0x10  # op3 bit: the same load/store in an alternate address space (ASI)
for _op3, _memory in list(_MEMORY.items()):
    if _op3 < 0x10:
        _MEMORY[_op3 | _ALTERNATE] = _memory._replace(mnemonic=_memory.mnemonic + "a")


@functools.cache
def _engine() -> capstone.Cs:
    return capstone.Cs(capstone.CS_ARCH_SPARC, capstone.CS_MODE_BIG_ENDIAN)


def _signed(value: int, bits: int) -> int:
    return value - (1 << bits) if value >> (bits - 1) else value


class _Fields(NamedTuple):
    """The format-3 fields of an instruction word."""

    rd: int
    op3: int
    rs1: int
    immediate: bool
    simm13: int
    rs2: int
    asi: int

    @classmethod
    def of(cls, word: int) -> _Fields:
        return cls(
            (word >> 25) & 0x1F,
            (word >> 19) & 0x3F,
            (word >> 14) & 0x1F,
            bool(word >> 13 & 1),
            _signed(word & 0x1FFF, 13),
            word & 0x1F,
            (word >> 5) & 0xFF,
        )

    def source(self) -> str:
        """The second operand: a register or a signed immediate."""
        return str(self.simm13) if self.immediate else _REGISTERS[self.rs2]

    def address(self) -> str:
        """The memory operand, as `[%rs1 + operand]` with the ASI after it if alternate."""
        text = f"[{_REGISTERS[self.rs1]} + {self.source()}]"
        return text if self.immediate or not self.op3 & _ALTERNATE else f"{text} 0x{self.asi:x}"


def _fallback_text(word: int) -> tuple[str, str]:
    """Mnemonic and operands for valid V8 instructions that capstone cannot print."""
    if word >> 30 == 0:  # a format-2 word capstone lacks (coprocessor branches): no text to give
        return ".word", f"0x{word:08x}"
    fields = _Fields.of(word)
    if word >> 30 != 3:
        rs1, rd = _REGISTERS[fields.rs1], _REGISTERS[fields.rd]
        return _ARITHMETIC[fields.op3], f"{rs1}, {fields.source()}, {rd}"
    memory = _MEMORY[fields.op3]
    if memory.register == "r":
        register = _REGISTERS[fields.rd]
    elif memory.register.startswith("%"):
        register = memory.register
    else:
        register = f"%{memory.register}{fields.rd}"
    if memory.load:
        return memory.mnemonic, f"{fields.address()}, {register}"
    return memory.mnemonic, f"{register}, {fields.address()}"


def _text(word: int, address: int) -> tuple[str, str]:
    decoded = next(_engine().disasm_lite(word.to_bytes(4, "big"), address), None)
    if decoded is not None:
        return decoded[2], decoded[3]
    return _fallback_text(word)


def _info(word: int, address: int, text: tuple[str, str] | None = None, **facts) -> InsnInfo:
    mnemonic, operands = text if text is not None else _text(word, address)
    return InsnInfo(address, Isa.SPARC, 4, word, mnemonic, operands, next_isa=Isa.SPARC, **facts)


def sparc_insn(word: int, address: int) -> InsnInfo:
    """The facts of one SPARC V8 instruction word at `address`."""
    op = word >> 30
    if op == 1:  # CALL disp30
        target = (address + (_signed(word & 0x3FFFFFFF, 30) << 2)) & 0xFFFFFFFF
        return _info(
            word,
            address,
            is_branch=True,
            is_direct=True,
            target=target,
            kind=Kind.CALL,
            delay_slot=True,
        )
    if op == 0:
        return _format2(word, address)
    fields = _Fields.of(word)
    if op == 3:
        memory = _MEMORY.get(fields.op3)
        if memory is None or (fields.op3 & _ALTERNATE and fields.immediate):
            return _info(word, address, ("undefined", ""), is_undefined=True)
        return _info(
            word,
            address,
            is_load=memory.load,
            is_store=memory.store,
            transfers=memory.transfers,
            access_size=memory.size,
        )
    if fields.op3 not in _ARITHMETIC:
        return _info(word, address, ("undefined", ""), is_undefined=True)
    if fields.op3 == _TICC:
        condition = _condition(_ICC, word)
        return _info(
            word, address, condition=condition, is_conditional=condition is not None, raises_exception=True
        )
    if fields.op3 == _JMPL:
        return _info(word, address, is_branch=True, kind=_jmpl_kind(fields), delay_slot=True)
    if fields.op3 == _RETT:
        return _info(word, address, is_branch=True, kind=Kind.JUMP, delay_slot=True)
    return _info(word, address)


def _condition(names: tuple[str, ...], word: int) -> str | None:
    cond = (word >> 25) & 0xF
    return None if cond == _ALWAYS else names[cond]


def _format2(word: int, address: int) -> InsnInfo:
    """SETHI, the branches, and UNIMP; the V9-only encodings trap on a V8."""
    op2 = (word >> 22) & 7
    if op2 == _SETHI:
        return _info(word, address)
    names = _BRANCH_CONDITIONS.get(op2)
    if names is None:
        text = ("unimp", f"0x{word & 0x3FFFFF:x}") if op2 == 0 else ("undefined", "")
        return _info(word, address, text, is_undefined=True)
    condition = _condition(names, word)
    return _info(
        word,
        address,
        is_branch=True,
        is_direct=True,
        target=(address + (_signed(word & 0x3FFFFF, 22) << 2)) & 0xFFFFFFFF,
        condition=condition,
        is_conditional=condition is not None,
        kind=Kind.JUMP,
        delay_slot=True,
        annul=bool(word >> 29 & 1),
    )


def _jmpl_kind(fields: _Fields) -> Kind:
    """JMPL linking into %o7 calls; into %g0 from %i7 or %o7 + 8 (`ret`, `retl`) returns.

    + 12 returns too: it skips the UNIMP word that follows calls to struct-returning functions.
    """
    if fields.rd == _O7:
        return Kind.CALL
    returning = fields.immediate and fields.rs1 in (_O7, _I7) and fields.simm13 in (8, 12)
    return Kind.RETURN if fields.rd == 0 and returning else Kind.JUMP


def decode_sparc(code: bytes, address: int) -> Iterator[InsnInfo]:
    """The instructions of `code` (big-endian words) from `address`, one per whole word."""
    for offset in range(0, len(code) - 3, 4):
        yield sparc_insn(int.from_bytes(code[offset : offset + 4], "big"), address + offset)


def _op3_table(valid) -> np.ndarray:
    return np.array([op3 in valid for op3 in range(64)])


_DEFINED_ARITHMETIC = _op3_table(_ARITHMETIC)
_DEFINED_MEMORY = _op3_table(_MEMORY)
_ALTERNATE_MEMORY = _op3_table({op3 for op3 in _MEMORY if op3 & _ALTERNATE})
_TRANSFER_OP2 = np.array([op2 in _BRANCH_CONDITIONS for op2 in range(8)])
_DEFINED_OP2 = _TRANSFER_OP2 | (np.arange(8) == _SETHI)


def transfers_or_undefined(words: np.ndarray) -> np.ndarray:
    """Per instruction word: is it a control transfer or undefined (`sparc_insn`'s is_branch
    or is_undefined), for many words at once. Instructions run in sequence pass neither."""
    words = words.astype(np.uint32)
    op, op2 = words >> 30, (words >> 22) & 7
    op3, immediate = (words >> 19) & 0x3F, (words >> 13) & 1 == 1
    arithmetic, memory = op == 2, op == 3
    transfer = (op == 1) | ((op == 0) & _TRANSFER_OP2[op2]) | (arithmetic & ((op3 == _JMPL) | (op3 == _RETT)))
    undefined = (
        ((op == 0) & ~_DEFINED_OP2[op2])
        | (arithmetic & ~_DEFINED_ARITHMETIC[op3])
        | (memory & (~_DEFINED_MEMORY[op3] | (_ALTERNATE_MEMORY[op3] & immediate)))
    )
    return transfer | undefined
