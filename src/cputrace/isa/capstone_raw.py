"""capstone's decoded Arm instructions, read by compiled code straight from its C records.

The binding's `Cs.disasm` wraps each instruction in a CsInsn that copies it, and builds
a list of operand objects on first use, which costs far more than capstone's C decoder
itself. Here one `cs_disasm` call decodes a chunk, and a compiled
function given the address of capstone's records reads the fields it needs in place;
the offsets come from the binding's own ctypes declarations (so they follow the binding
that is installed), as an array `LAYOUT` indexed by the `L_*` constants.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import capstone
import numba
import numpy as np
from capstone import arm, arm64
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

_INSN = capstone._cs_insn
_DETAIL = capstone._cs_detail
_LIB = capstone._cs  # the C library the binding loaded

# Indexes of LAYOUT: where the fields are, in bytes.
L_INSN_SIZE = 0  # one cs_insn record
L_ID = 1
L_ADDRESS = 2
L_SIZE = 3
L_BYTES = 4
L_DETAIL = 5  # the pointer to the cs_detail
L_REGS_WRITE = 6  # in cs_detail: implicitly written registers (uint16 each)
L_REGS_WRITE_COUNT = 7
L_GROUPS = 8
L_GROUPS_COUNT = 9
L_CC = 10  # in cs_detail, the architecture's part: condition code (uint32)
L_UPDATE_FLAGS = 11
L_WRITEBACK = 12
L_OP_COUNT = 13
L_OPERANDS = 14
L_OP_SIZE = 15  # one operand
L_OP_TYPE = 16  # in an operand (uint32)
L_OP_VALUE = 17  # register, immediate or memory operand's base register
L_OP_ACCESS = 18
L_IMM_SIZE = 19  # bytes of an immediate: 4 (A32/T32) or 8 (A64)
L_DETAIL_SIZE = 20  # cs_detail up to the end of the architecture's part
L_VECTOR_SIZE = 21  # A32/T32, in cs_detail: element bits of a NEON instruction (int32); A64: -1
L_OP_VAS = 22  # A64, in an operand: vector arrangement (int32); A32/T32: -1
_L_COUNT = 23


def _layout(detail: type, op: type, imm_size: int) -> np.ndarray:
    arch = _DETAIL.arch.offset
    layout = np.zeros(_L_COUNT, np.int64)
    layout[[L_INSN_SIZE, L_ID, L_ADDRESS, L_SIZE, L_BYTES, L_DETAIL]] = (
        ctypes.sizeof(_INSN), _INSN.id.offset, _INSN.address.offset, _INSN.size.offset,
        _INSN.bytes.offset, _INSN.detail.offset,
    )  # fmt: skip
    layout[[L_REGS_WRITE, L_REGS_WRITE_COUNT, L_GROUPS, L_GROUPS_COUNT]] = (
        _DETAIL.regs_write.offset, _DETAIL.regs_write_count.offset, _DETAIL.groups.offset,
        _DETAIL.groups_count.offset,
    )  # fmt: skip
    layout[[L_CC, L_UPDATE_FLAGS, L_WRITEBACK, L_OP_COUNT, L_OPERANDS]] = (
        arch + detail.cc.offset, arch + detail.update_flags.offset,
        arch + detail.writeback.offset,  # cs_detail's own writeback is not set for Arm
        arch + detail.op_count.offset, arch + detail.operands.offset,
    )  # fmt: skip
    layout[[L_OP_SIZE, L_OP_TYPE, L_OP_VALUE, L_OP_ACCESS, L_IMM_SIZE, L_DETAIL_SIZE]] = (
        ctypes.sizeof(op), op.type.offset, op.value.offset, op.access.offset, imm_size,
        arch + ctypes.sizeof(detail),
    )  # fmt: skip
    layout[L_VECTOR_SIZE] = arch + detail.vector_size.offset if hasattr(detail, "vector_size") else -1
    layout[L_OP_VAS] = op.vas.offset if hasattr(op, "vas") else -1
    return layout


LAYOUT_ARM = _layout(arm.CsArm, arm.ArmOp, 4)
LAYOUT_ARM64 = _layout(arm64.CsArm64, arm64.Arm64Op, 8)


@intrinsic
def _pointer(typingctx, address):
    """An address as a pointer, for numba.carray."""

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], cgutils.voidptr_t)

    return types.voidptr(types.uint64), codegen


@numba.njit(cache=True, nogil=True, inline="always")
def memory(address: int, size: int) -> np.ndarray:
    """`size` bytes at `address` as a uint8 array (no copy)."""
    return numba.carray(_pointer(np.uint64(address)), (size,), np.uint8)


@numba.njit(cache=True, nogil=True, inline="always")
def read(bytes_: np.ndarray, at: int, size: int) -> int:
    """A little-endian integer of `size` bytes (8: as int64, two's complement)."""
    value = np.int64(0)
    for byte in range(size):
        value |= np.int64(bytes_[at + byte]) << np.int64(8 * byte)
    return value


_DISASM_ADDRESS = ctypes.cast(_LIB.cs_disasm, ctypes.c_void_p).value
_FREE_ADDRESS = ctypes.cast(_LIB.cs_free, ctypes.c_void_p).value
E_HANDLE, E_DISASM, E_FREE = range(3)  # what RawDisassembler.entry holds


@intrinsic
def _call_disasm(typingctx, function, handle, code, size, address, count, insns):
    """cs_disasm(handle, code, size, address, count, insns) at the address `function`."""

    def codegen(context, builder, signature, args):
        word = ir.IntType(64)
        bytes_ = ir.IntType(8).as_pointer()
        kind = ir.FunctionType(word, [word, bytes_, word, word, word, word.as_pointer()])
        function, handle, code, size, address, count, insns = args
        return builder.call(
            builder.inttoptr(function, kind.as_pointer()),
            [
                handle,
                builder.inttoptr(code, bytes_),
                size,
                address,
                count,
                builder.inttoptr(insns, word.as_pointer()),
            ],
        )

    return types.uint64(*[types.uint64] * 7), codegen


@intrinsic
def _call_free(typingctx, function, insns, count):
    """cs_free(insns, count) at the address `function`."""

    def codegen(context, builder, signature, args):
        word = ir.IntType(64)
        kind = ir.FunctionType(ir.VoidType(), [word, word])
        function, insns, count = args
        builder.call(builder.inttoptr(function, kind.as_pointer()), [insns, count])
        return context.get_dummy_value()

    return types.none(types.uint64, types.uint64, types.uint64), codegen


@numba.njit(cache=True, nogil=True)
def disasm(entry: np.ndarray, code: np.ndarray, start: int, size: int, address: int, count: int,
           insns: np.ndarray) -> int:  # fmt: skip
    """Compiled `RawDisassembler.disasm`: up to `count` instructions of code[start : start + size],
    their records' address in insns[0]; returns how many (free them with `free`)."""
    return _call_disasm(
        entry[E_DISASM], entry[E_HANDLE], np.uint64(code.ctypes.data + start), np.uint64(size),
        np.uint64(address), np.uint64(count), np.uint64(insns.ctypes.data),
    )  # fmt: skip


@numba.njit(cache=True, nogil=True)
def free(entry: np.ndarray, insns: int, count: int) -> None:
    _call_free(entry[E_FREE], np.uint64(insns), np.uint64(count))


class RawDisassembler:
    """Decodes A32, T32 or A64 code a chunk per capstone call, for a compiled reader.

    `entry` (uint64: E_*) lets compiled code call capstone itself (`disasm`, `free`).
    """

    def __init__(self, arch: int, mode: int) -> None:
        self._engine = capstone.Cs(arch, mode)
        self._engine.detail = True
        self.layout = LAYOUT_ARM64 if arch == capstone.CS_ARCH_ARM64 else LAYOUT_ARM
        self.entry = np.zeros(3, np.uint64)
        self.entry[[E_HANDLE, E_DISASM, E_FREE]] = (self._engine.csh.value, _DISASM_ADDRESS, _FREE_ADDRESS)

    def disasm(
        self, code: bytes, address: int, count: int, reader: Callable[[int, int], Any]
    ) -> tuple[Any, bytes]:
        """Up to `count` instructions from the start of `code` (stops where capstone cannot decode).

        Returns what `reader(records_address, decoded)` makes of capstone's records while
        they exist, and the records as bytes (for the text of the instructions).
        """
        insns = ctypes.POINTER(_INSN)()
        decoded = _LIB.cs_disasm(self._engine.csh, code, len(code), address, count, ctypes.byref(insns))
        try:
            start = ctypes.cast(insns, ctypes.c_void_p).value or 0
            return reader(start, decoded), ctypes.string_at(insns, decoded * int(self.layout[L_INSN_SIZE]))
        finally:
            if decoded:
                _LIB.cs_free(insns, decoded)


_TEXT = np.dtype(
    {
        "names": ["mnemonic", "op_str"],
        "formats": [f"S{_INSN.mnemonic.size}", f"S{_INSN.op_str.size}"],
        "offsets": [_INSN.mnemonic.offset, _INSN.op_str.offset],
        "itemsize": ctypes.sizeof(_INSN),
    }
)


def texts(records: bytes) -> list[tuple[str, str]]:
    """Mnemonic and operand text of each record (up to the NUL that ends each)."""
    fields = np.frombuffer(records, _TEXT)
    return [
        (mnemonic.split(b"\0", 1)[0].decode("ascii"), operands.split(b"\0", 1)[0].decode("ascii"))
        for mnemonic, operands in zip(fields["mnemonic"].tolist(), fields["op_str"].tolist(), strict=True)
    ]
