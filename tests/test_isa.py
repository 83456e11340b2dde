"""Instruction facts (A32, T32, A64, SPARC V8) and the per-image basic-block cache."""

from __future__ import annotations

import re
import struct
from pathlib import Path

import numpy as np
import pytest
from ds5_listing import read_ds5_listing
from hypothesis import given, settings
from hypothesis import strategies as st
from paths import shared

from cputrace.coresight.dumps import load_snapshot_device
from cputrace.image import Image, ImageError, Region, load_elf
from cputrace.isa import (
    MAX_BLOCK,
    BlockCache,
    InsnInfo,
    Kind,
    Stop,
    blocks,
    decode,
    decode_block,
    decode_columns,
    it_conditions,
    opcode_bytes,
    sparc_insn,
)
from cputrace.isa.arm import arm_block
from cputrace.isa.dispatch import decode_runs
from cputrace.isa.factcodes import FactCodes
from cputrace.isa.flow_aarch32 import t32_flow
from cputrace.isa.index import AddressIndex
from cputrace.isa.insn import (
    C_ADDRESS,
    C_COUNT,
    C_FACTS,
    C_OPCODE,
    C_SIZE,
    C_TARGET,
    F_BRANCH,
    F_CALL,
    F_DELAY,
    F_LOAD,
    F_RETURN,
    F_STORE,
    columns_of,
    facts_of,
)
from cputrace.model import Isa

DATA = Path(__file__).parent / "data" / "image"


@pytest.fixture(scope="module")
def quicksort() -> BlockCache:
    return BlockCache(load_elf(DATA / "quicksort.elf"))


@pytest.fixture(scope="module")
def calltest32() -> BlockCache:
    return BlockCache(load_elf(DATA / "calltest32.elf"))


@pytest.fixture(scope="module")
def calltest64() -> BlockCache:
    return BlockCache(load_elf(DATA / "calltest64.elf"))


def thumb(*halfwords: int) -> bytes:
    return b"".join(struct.pack("<H", h) for h in halfwords)


def words(*values: int, order: str = "<") -> bytes:
    return b"".join(struct.pack(f"{order}I", v) for v in values)


def t32(address: int, *halfwords: int) -> InsnInfo:
    info = decode(thumb(*halfwords), address, Isa.T32)
    assert info is not None
    return info


# --- A64 (quicksort.elf, calltest64.elf) -------------------------------------------------------


def test_a64_calls_returns_and_conditional_branches(quicksort: BlockCache) -> None:
    bl = quicksort.insn_at(0x8020, Isa.A64)  # c_entry: bl quicksort
    assert (bl.mnemonic, bl.opcode, bl.size) == ("bl", 0x94000006, 4)
    assert (bl.is_branch, bl.is_direct, bl.target, bl.kind) == (True, True, 0x8038, Kind.CALL)
    assert bl.next_isa is Isa.A64 and not bl.is_conditional
    ret = quicksort.insn_at(0x8050, Isa.A64)
    assert (ret.kind, ret.is_direct, ret.target, ret.next_isa) == (Kind.RETURN, False, None, Isa.A64)
    bhs = quicksort.insn_at(0x8044, Isa.A64)
    assert (bhs.condition, bhs.is_conditional, bhs.target, bhs.kind) == ("hs", True, 0x8054, Kind.JUMP)
    b = quicksort.insn_at(0x8034, Isa.A64)  # tail branch to sys_exit
    assert (b.kind, b.target, b.is_conditional) == (Kind.JUMP, 0x80C8, False)


def test_a64_loads_and_stores(quicksort: BlockCache) -> None:
    stp = quicksort.insn_at(0x800C, Isa.A64)  # stp x30, x19, [sp, #-0x10]!
    assert (stp.is_store, stp.is_load, stp.transfers, stp.is_branch) == (True, False, 2, False)
    ldp = quicksort.insn_at(0x8030, Isa.A64)
    assert (ldp.is_load, ldp.is_store, ldp.transfers) == (True, False, 2)
    ldrb = quicksort.insn_at(0x8064, Isa.A64)
    assert (ldrb.is_load, ldrb.transfers) == (True, 1)
    strb = quicksort.insn_at(0x8070, Isa.A64)
    assert (strb.is_store, strb.transfers) == (True, 1)
    mov = quicksort.insn_at(0x8000, Isa.A64)
    assert (mov.is_load, mov.is_store, mov.transfers, mov.kind) == (False, False, 0, Kind.NONE)
    assert mov.disasm == "mov x0, #0x100000"


def test_a64_indirect_branches(calltest64: BlockCache) -> None:
    blr = calltest64.insn_at(0x210134, Isa.A64)
    assert (blr.mnemonic, blr.kind, blr.is_direct, blr.target) == ("blr", Kind.CALL, False, None)
    br = calltest64.insn_at(0x210198, Isa.A64)  # call_via_x1: br x1
    assert (br.kind, br.is_direct, br.next_isa) == (Kind.JUMP, False, Isa.A64)


def test_a64_hand_assembled() -> None:
    facts = {
        0xB4000040: ("cbz", True, None, 0x1008),
        0x36000040: ("tbz", True, None, 0x1008),
        0x54000040: ("b.eq", True, "eq", 0x1008),
    }
    for word, (mnemonic, conditional, condition, target) in facts.items():
        info = decode(words(word), 0x1000, Isa.A64)
        assert info is not None
        assert (info.mnemonic, info.is_conditional, info.condition) == (mnemonic, conditional, condition)
        assert (info.is_direct, info.target) == (True, target)
    eret = decode(words(0xD69F03E0), 0x1000, Isa.A64)
    assert eret is not None and eret.is_branch and eret.next_isa is None  # may return to AArch32
    casp = decode(words(0x48207C82), 0, Isa.A64)  # casp x0, x1, x2, x3, [x4]
    assert casp is not None and (casp.is_load, casp.is_store, casp.transfers) == (True, True, 2)
    undefined = decode(words(0xFFFFFFFF), 0x1000, Isa.A64)
    assert undefined is not None and undefined.is_undefined and undefined.size == 4


# --- A32 (calltest32.elf) -------------------------------------------------------------------


def test_a32_calls(calltest32: BlockCache) -> None:
    bl = calltest32.insn_at(0x200C0, Isa.A32)
    assert (bl.mnemonic, bl.opcode, bl.target, bl.kind) == ("bl", 0xEB000014, 0x20118, Kind.CALL)
    assert bl.next_isa is Isa.A32
    blx = calltest32.insn_at(0x200C8, Isa.A32)  # blx r1
    assert (blx.kind, blx.is_direct, blx.next_isa) == (Kind.CALL, False, None)
    bx = calltest32.insn_at(0x200D4, Isa.A32)  # bx r1 after mov lr, pc: a jump by the rule
    assert (bx.kind, bx.next_isa) == (Kind.JUMP, None)


@pytest.mark.parametrize(
    ("address", "text", "writes_pc", "is_load", "transfers"),
    [
        (0x20124, "bx lr", False, False, 0),  # leaf_bx_lr
        (0x20134, "mov pc, lr", True, False, 0),  # leaf_mov_pc_lr
        (0x20144, "pop {r4, pc}", True, True, 2),  # nonleaf_pop_pc
        (0x20158, "bx lr", False, False, 0),  # nonleaf_pop_lr
    ],
)
def test_a32_returns(
    calltest32: BlockCache, address: int, text: str, writes_pc: bool, is_load: bool, transfers: int
) -> None:
    info = calltest32.insn_at(address, Isa.A32)
    assert info.disasm == text
    assert (info.kind, info.is_branch, info.is_direct) == (Kind.RETURN, True, False)
    assert (info.writes_pc, info.is_load, info.transfers) == (writes_pc, is_load, transfers)


def test_a32_conditional_branch_and_memory(calltest32: BlockCache) -> None:
    bhs = calltest32.insn_at(0x200E8, Isa.A32)
    assert (bhs.mnemonic, bhs.condition, bhs.is_conditional, bhs.target) == ("bhs", "hs", True, 0x200F4)
    push = calltest32.insn_at(0x20138, Isa.A32)
    assert (push.disasm, push.is_store, push.transfers) == ("push {r4, lr}", True, 2)
    pop_lr = calltest32.insn_at(0x20154, Isa.A32)  # pop {r4, lr}: a load, not a branch
    assert (pop_lr.is_load, pop_lr.transfers, pop_lr.is_branch, pop_lr.kind) == (True, 2, False, Kind.NONE)
    ldr = calltest32.insn_at(0x200C4, Isa.A32)
    assert (ldr.is_load, ldr.transfers) == (True, 1)
    svc = calltest32.insn_at(0x20114, Isa.A32)
    assert (svc.mnemonic, svc.is_branch) == ("svc", False)
    udf = calltest32.insn_at(0x20174, Isa.A32)
    assert udf.is_undefined


def test_a32_multiple_transfers_from_calculator() -> None:
    cache = BlockCache(load_elf(DATA / "calculator-aarch32.elf"))
    cases = {
        0x20184: ("push {r4, r5, fp, lr}", True, 4),
        0x201A8: ("ldmeq sp, {r4, r5}", False, 2),
        0x201AC: ("strdeq r4, r5, [r2]", True, 2),
        0x20300: ("stm sp, {r0, r1, r2}", True, 3),
        0x201B8: ("pop {r4, r5, fp, pc}", False, 4),
    }
    for address, (text, store, transfers) in cases.items():
        info = cache.insn_at(address, Isa.A32)
        assert (info.disasm, info.is_store, info.transfers) == (text, store, transfers)
    assert cache.insn_at(0x201A8, Isa.A32).condition == "eq"
    assert cache.insn_at(0x201B8, Isa.A32).kind is Kind.RETURN


def test_blx_immediate_switches_instruction_set() -> None:
    to_thumb = decode(words(0xFA000010), 0x8004, Isa.A32)
    assert to_thumb is not None
    assert (to_thumb.kind, to_thumb.target, to_thumb.next_isa) == (Kind.CALL, 0x804C, Isa.T32)
    halfword = decode(words(0xFB000010), 0x8004, Isa.A32)  # H bit: +2
    assert halfword is not None and halfword.target == 0x804E
    to_arm = t32(0x1002, 0xF000, 0xE800)  # blx: target Align(pc, 4) + 0
    assert (to_arm.mnemonic, to_arm.opcode, to_arm.size) == ("blx", 0xF000E800, 4)
    assert (to_arm.target, to_arm.next_isa, to_arm.kind) == (0x1004, Isa.A32, Kind.CALL)
    bl = t32(0x1000, 0xF000, 0xF800)
    assert (bl.mnemonic, bl.next_isa) == ("bl", Isa.T32)


# --- T32 -------------------------------------------------------------------------------------


def test_t32_opcode_packing_and_sizes() -> None:
    bl = t32(0xC004F6A6, 0xF7FF, 0xFFE5)  # from the TC2 kernel, as DS-5 lists it
    assert (bl.opcode, bl.size, bl.target, bl.kind) == (0xF7FFFFE5, 4, 0xC004F674, Kind.CALL)
    ldr = t32(0xC004F69E, 0xF85D, 0xEB04)  # ldr lr, [sp], #4 (DS-5: POP {lr})
    assert (ldr.opcode, ldr.size, ldr.is_load, ldr.transfers) == (0xF85DEB04, 4, True, 1)
    assert not ldr.is_branch
    push = t32(0xC004EF88, 0xE92D, 0x47F0)  # push.w {r4-r10, lr}
    assert (push.opcode, push.is_store, push.transfers) == (0xE92D47F0, True, 8)
    narrow = t32(0xC002115C, 0x6963)  # ldr r3, [r4, #0x14]
    assert (narrow.opcode, narrow.size, narrow.is_load) == (0x6963, 2, True)


def test_t32_returns_and_indirect_branches() -> None:
    pop = t32(0x100, 0xBD38)  # pop {r3, r4, r5, pc}
    assert (pop.kind, pop.transfers, pop.writes_pc, pop.next_isa) == (Kind.RETURN, 4, True, None)
    pop_one = t32(0x100, 0xF85D, 0xFB04)  # ldr pc, [sp], #4: POP {pc}
    assert (pop_one.kind, pop_one.is_direct, pop_one.target) == (Kind.RETURN, False, None)
    assert pop_one.next_isa is None
    ldm = t32(0x100, 0xE8BD, 0x8010)  # pop.w {r4, pc}
    assert (ldm.kind, ldm.transfers, ldm.size) == (Kind.RETURN, 2, 4)
    bx = t32(0x100, 0x4770)
    assert (bx.disasm, bx.kind, bx.next_isa) == ("bx lr", Kind.RETURN, None)
    mov = t32(0x100, 0x46F7)  # mov pc, lr: no interworking in T32
    assert (mov.kind, mov.writes_pc, mov.next_isa) == (Kind.RETURN, True, Isa.T32)
    add = t32(0x100, 0x4487)  # add pc, r0
    assert (add.kind, add.is_branch, add.is_direct, add.next_isa) == (Kind.JUMP, True, False, Isa.T32)
    tbb = t32(0x100, 0xE8DF, 0xF001)  # tbb [pc, r1]
    assert (tbb.is_branch, tbb.is_direct, tbb.next_isa) == (True, False, Isa.T32)
    subs = t32(0x100, 0xF3DE, 0x8F04)  # subs pc, lr, #4: exception return
    assert (subs.is_branch, subs.kind, subs.next_isa) == (True, Kind.JUMP, None)


def test_t32_compare_and_branch_is_conditional_without_condition() -> None:
    cbz = t32(0xC002113C, 0xB173)  # cbz r3, 0xc002115c (from the TC2 kernel)
    assert (cbz.is_conditional, cbz.condition, cbz.is_direct) == (True, None, True)
    assert cbz.target == 0xC002115C
    beq = t32(0xC0021166, 0xD0EA)
    assert (beq.condition, beq.target) == ("eq", 0xC002113E)


def test_it_conditions() -> None:
    assert it_conditions(0xBF08) == ("eq",)
    assert it_conditions(0xBF0C) == ("eq", "ne")  # ite eq
    assert it_conditions(0xBF14) == ("ne", "eq")  # ite ne
    assert it_conditions(0xBF04) == ("eq", "eq")  # itt eq
    assert it_conditions(0xBF02) == ("eq", "eq", "eq")  # ittt eq
    assert it_conditions(0xBFBA) == ("lt", "lt", "ge")  # itte lt
    assert it_conditions(0xBFB6) == ("lt", "ge", "lt")  # itet lt
    assert it_conditions(0xBF11) == ("ne", "eq", "eq", "eq")  # iteee ne
    assert it_conditions(0xBF1F) == ("ne",) * 4  # itttt ne
    assert it_conditions(0xBFE8) == (None,)  # it al
    assert it_conditions(0xBF00) == ()  # nop, not an IT


def test_instructions_in_an_it_block_are_conditional() -> None:
    # cmp r0, #0; ite eq; moveq r0, #1; movne r0, #0; it ne; bxne lr; bx lr
    code = thumb(0x2800, 0xBF0C, 0x2001, 0x2000, 0xBF18, 0x4770, 0x4770)
    cache = BlockCache(Image([Region(0x2000, code, "it")]))
    block = cache.block_at(0x2000, Isa.T32)
    assert [(i.mnemonic, i.condition, i.is_conditional) for i in block.insns] == [
        ("cmp", None, False),
        ("ite", None, False),
        ("moveq", "eq", True),
        ("movne", "ne", True),
        ("it", None, False),
        ("bxne", "ne", True),
    ]
    assert (block.branch.kind, block.stop) == (Kind.RETURN, Stop.BRANCH)
    after = cache.block_at(block.next_address, Isa.T32)
    assert (after.insns[0].disasm, after.insns[0].is_conditional) == ("bx lr", False)


def test_armv8_1m_low_overhead_loop_instructions() -> None:
    """WLS, LE and DLS, which capstone 5 does not decode. The targets are where OpenCSD's decode
    of armv8_1m_branches goes on after each taken (reference/armv8_1m_branches.ppl.xz: the
    ranges after 0x1E0C4 and 0x1E104 start at 0x1E0CC and 0x1E0F4)."""
    wls, le, dls = t32(0x1E0C4, 0xF044, 0xC003), t32(0x1E104, 0xF00F, 0xC00B), t32(0x1E0C0, 0xF044, 0xE001)
    assert (wls.mnemonic, wls.is_branch, wls.is_conditional, wls.target) == ("wls", True, True, 0x1E0CC)
    assert (le.mnemonic, le.is_branch, le.is_conditional, le.target) == ("le", True, True, 0x1E0F4)
    assert (dls.mnemonic, dls.is_branch, dls.size, dls.opcode) == ("dls", False, 4, 0xF044E001)
    code = thumb(0xF044, 0xE001, 0xBF00, 0xBF00, 0xF00F, 0xC005)  # dls; nop; nop; le back to the first nop
    image = Image([Region(0x1000, code, "m")])
    columns = decode_columns(image, 0x1000, Isa.T32, AddressIndex(), {})  # the walk's compiled path
    assert columns[:, C_ADDRESS].tolist() == [0x1000, 0x1004, 0x1006, 0x1008]
    assert columns[3, C_TARGET] == 0x1004 and columns[3, C_FACTS] & F_BRANCH


LOOPS = Path(__file__).parent / "data" / "armv8.1m-loops"
OBJDUMP_LINE = re.compile(r"^\s*([0-9a-f]+):\s+([0-9a-f]{4}) ([0-9a-f]{4})\s+(\S+)\s*([^<@]*)")
LOOP_BRANCHES = ("wls", "wlstp", "le", "letp")


def objdump_loops() -> list[tuple[int, int, int, str, str]]:
    """GNU objdump's decode of every low-overhead-loop encoding (tests/data/armv8.1m-loops):
    (address, first halfword, second halfword, mnemonic, operands)."""
    found = []
    for line in (LOOPS / "loops.objdump").read_text().splitlines():
        if match := OBJDUMP_LINE.match(line):
            address, first, second, mnemonic, operands = match.groups()
            found.append((int(address, 16), int(first, 16), int(second, 16), mnemonic, operands.strip()))
    return found


@pytest.mark.parametrize("address,first,second,mnemonic,operands", objdump_loops())
def test_low_overhead_loops_as_objdump_decodes_them(
    address: int, first: int, second: int, mnemonic: str, operands: str
) -> None:
    """Each loop instruction, on capstone's path and in the walk's classifier, is what GNU
    objdump says: its name, and for WLS/WLSTP/LE/LETP a branch to objdump's target (the last
    operand); DLS, DLSTP and LCTP do not branch, and a BLX immediate in the same space is not
    one of them."""
    info = t32(address, first, second)
    row = np.zeros(C_COUNT, np.int64)
    code = np.frombuffer(thumb(first, second), np.uint8)
    t32_flow(code, 0, address, 0, row)
    assert (info.mnemonic, row[C_SIZE], row[C_OPCODE]) == (mnemonic, 4, (first << 16) | second)
    branches = mnemonic.split(".")[0] in LOOP_BRANCHES or mnemonic == "blx"
    assert info.is_branch == branches and bool(row[C_FACTS] & F_BRANCH) == branches
    if branches:
        target = int(operands.split(",")[-1], 16)
        assert info.target == target and row[C_TARGET] == target
    if mnemonic.startswith(("wls", "dls", "dlstp", "wlstp")):
        register = operands.split(",")[1].strip()
        named = {"fp": "r11", "ip": "r12", "lr": "r14", "pc": "r15"}  # objdump's names
        assert info.operands.split(", ")[1] == named.get(register, register)


def test_t32_undefined_sizes() -> None:
    wide = t32(0x100, 0xF7F0, 0xA000)  # udf.w
    assert (wide.is_undefined, wide.size, wide.opcode) == (True, 4, 0xF7F0A000)
    narrow = t32(0x100, 0xB7FF)  # no such 16-bit encoding
    assert (narrow.is_undefined, narrow.size, narrow.opcode) == (True, 2, 0xB7FF)
    assert decode(thumb(0xF7FF), 0x100, Isa.T32) is None  # half of a 32-bit instruction


# --- SPARC V8 --------------------------------------------------------------------------------


def test_sparc_call_and_returns() -> None:
    call = sparc_insn(0x40000010, 0x40001000)
    assert (call.mnemonic, call.kind, call.is_direct, call.target) == ("call", Kind.CALL, True, 0x40001040)
    assert (call.delay_slot, call.size, call.opcode, call.next_isa) == (True, 4, 0x40000010, Isa.SPARC)
    backwards = sparc_insn(0x7FFFFFFF, 0x40001000)  # disp30 = -1
    assert backwards.target == 0x40000FFC
    wrap = sparc_insn(0x40000000 | 0x3FFFFC00, 0x100)
    assert wrap.target == (0x100 - 0x1000) & 0xFFFFFFFF
    retl = sparc_insn(0x81C3E008, 0x40001000)  # jmpl %o7 + 8, %g0
    assert (retl.mnemonic, retl.kind, retl.is_direct, retl.delay_slot) == ("retl", Kind.RETURN, False, True)
    ret = sparc_insn(0x81C7E008, 0x40001000)  # jmpl %i7 + 8, %g0
    assert (ret.mnemonic, ret.kind) == ("ret", Kind.RETURN)
    struct_return = sparc_insn(0x81C7E00C, 0)  # jmp %i7 + 12, past the caller's unimp
    assert struct_return.kind is Kind.RETURN
    indirect_call = sparc_insn(0x9FC04000, 0)  # jmpl %g1, %o7 (call %g1)
    assert (indirect_call.kind, indirect_call.is_direct, indirect_call.target) == (Kind.CALL, False, None)
    jump = sparc_insn(0x81C04000, 0)  # jmp %g1
    assert (jump.kind, jump.is_branch) == (Kind.JUMP, True)
    rett = sparc_insn(0x81CC4000, 0)  # rett %l1
    assert (rett.is_branch, rett.kind, rett.delay_slot) == (True, Kind.JUMP, True)


def test_sparc_branches() -> None:
    bne = sparc_insn(0x12800004, 0x40001000)
    assert (bne.condition, bne.is_conditional, bne.target, bne.annul) == ("ne", True, 0x40001010, False)
    assert (bne.kind, bne.delay_slot) == (Kind.JUMP, True)
    bne_a = sparc_insn(0x32800004, 0x40001000)
    assert (bne_a.mnemonic, bne_a.annul) == ("bne,a", True)
    ba = sparc_insn(0x10800004, 0x40001000)
    assert (ba.condition, ba.is_conditional, ba.annul) == (None, False, False)
    ba_a = sparc_insn(0x30800004, 0x40001000)
    assert (ba_a.annul, ba_a.is_conditional) == (True, False)
    back = sparc_insn(0x12BFFFFF, 0x40001000)  # bne .-4
    assert back.target == 0x40000FFC
    fbe = sparc_insn(0x13BFFFFF, 0x40001000)
    assert (fbe.mnemonic, fbe.condition) == ("fbe", "e")
    bn = sparc_insn(0x00800004, 0)  # branch never
    assert (bn.condition, bn.is_conditional) == ("n", True)


def test_sparc_loads_and_stores_including_those_capstone_lacks() -> None:
    ldd = sparc_insn(0xD01A0000, 0)  # ldd [%o0 + %g0], %o0
    assert (ldd.mnemonic, ldd.operands) == ("ldd", "[%o0 + %g0], %o0")
    assert (ldd.is_load, ldd.is_store, ldd.transfers, ldd.is_undefined) == (True, False, 2, False)
    std = sparc_insn(0xD43A2008, 0)  # std %o2, [%o0 + 8]
    assert (std.disasm, std.is_store, std.transfers) == ("std %o2, [%o0 + 8]", True, 2)
    ld = sparc_insn(0xD0022000, 0)
    assert (ld.mnemonic, ld.is_load, ld.transfers) == ("ld", True, 1)
    st = sparc_insn(0xD0222000, 0)
    assert (st.mnemonic, st.is_store, st.transfers) == ("st", True, 1)
    ldstub = sparc_insn(0xD06A0000, 0)
    assert (ldstub.mnemonic, ldstub.is_load, ldstub.is_store) == ("ldstub", True, True)
    lda = sparc_insn(0xD0820100, 0)  # lda [%o0] 0x8, %o0
    assert (lda.disasm, lda.is_load) == ("lda [%o0 + %g0] 0x8, %o0", True)
    lddf = sparc_insn(0xC11A2000, 0)
    assert (lddf.mnemonic, lddf.transfers) == ("ldd", 2)
    assert sparc_insn(0xD0822000, 0).is_undefined  # alternate space with an immediate: V9 only


def test_sparc_other_instructions() -> None:
    for word, mnemonic in [(0x01000000, "nop"), (0x9DE3BFA0, "save"), (0x81E80000, "restore")]:
        info = sparc_insn(word, 0)
        assert (info.mnemonic, info.is_branch, info.is_load, info.kind) == (mnemonic, False, False, Kind.NONE)
    ta = sparc_insn(0x91D02000, 0)  # ta 0: a trap, not a branch
    assert (ta.is_branch, ta.is_conditional) == (False, False)
    tne = sparc_insn(0x93D02000, 0)
    assert (tne.condition, tne.is_conditional) == ("ne", True)
    flush = sparc_insn(0x81D82000, 0)  # capstone cannot print it
    assert (flush.mnemonic, flush.is_undefined) == ("flush", False)
    unimp = sparc_insn(0x00000000, 0)
    assert (unimp.mnemonic, unimp.is_undefined) == ("unimp", True)
    for word in (0xFFFFFFFF, 0x10480004, 0x81B00000):  # op3 0x3f, V9 BPcc, op3 0x36 is cpop1
        info = sparc_insn(word, 0)
        assert info.is_undefined == (word != 0x81B00000)


def test_sparc_blocks_keep_the_delay_slot() -> None:
    code = words(0x9DE3BFA0, 0x40000004, 0x01000000, 0x81C7E008, 0x81E80000, order=">")
    cache = BlockCache(Image([Region(0x40000000, code, "leon")]))
    block = cache.block_at(0x40000000, Isa.SPARC)
    assert block.pcs.tolist() == [0x40000000, 0x40000004, 0x40000008]
    assert (block.branch.kind, block.branch.target, block.stop) == (Kind.CALL, 0x40000014, Stop.BRANCH)
    assert block.next_address == 0x4000000C
    returning = cache.block_at(0x4000000C, Isa.SPARC)
    assert [i.mnemonic for i in returning.insns] == ["ret", "restore"]
    with pytest.raises(ImageError, match="0x40000014"):
        cache.block_at(0x40000014, Isa.SPARC)
    tail = cache.block_at(0x40000008, Isa.SPARC)
    assert len(tail) == 3 and tail.branch.kind is Kind.RETURN


# --- blocks and the cache --------------------------------------------------------------------


def test_block_runs_to_the_next_branch(calltest32: BlockCache) -> None:
    block = calltest32.block_at(0x200B4, Isa.A32)
    assert block.pcs.tolist() == [0x200B4, 0x200B8, 0x200BC, 0x200C0]
    assert block.sizes.tolist() == [4, 4, 4, 4]
    assert block.opcodes.tolist() == [0xE3A00601, 0xE1A0D000, 0xE3A00013, 0xEB000014]
    assert (block.pcs.dtype, block.sizes.dtype, block.opcodes.dtype) == (np.uint64, np.uint8, np.uint32)
    assert block.branch is block.insns[-1]
    assert (block.branch.target, block.stop, block.start, block.next_address) == (
        0x20118, Stop.BRANCH, 0x200B4, 0x200C4,
    )  # fmt: skip
    assert not block.pcs.flags.writeable


def test_decoding_a_block_twice_hits_the_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    cache = BlockCache(load_elf(DATA / "calltest64.elf"))
    calls = []

    def counting(code: bytes, address: int, *args):
        calls.append(address)
        return arm_block(code, address, *args)

    monkeypatch.setattr("cputrace.isa.blocks.arm_block", counting)
    first = cache.block_at(0x210120, Isa.A64)
    second = cache.block_at(0x210120, Isa.A64)
    assert first is second
    assert calls == [0x210120] and len(cache) == 1
    assert cache.insn_at(0x210120, Isa.A64) is first.insns[0]
    assert calls == [0x210120]
    cache.block_at(0x210120, Isa.A32)  # another ISA at the same address is another block
    assert len(cache) == 2


def test_block_ends_at_undefined_and_at_end_of_image() -> None:
    cache = BlockCache(Image([Region(0x1000, words(0xE3A00001, 0xE7F000F0, 0xE3A00002), "a")]))
    undefined = cache.block_at(0x1000, Isa.A32)
    assert (len(undefined), undefined.stop, undefined.branch) == (2, Stop.UNDEFINED, None)
    end = cache.block_at(0x1008, Isa.A32)
    assert (len(end), end.stop, end.next_address) == (1, Stop.NO_MEMORY, 0x100C)
    with pytest.raises(ImageError, match="0x100c: no A32 instruction"):
        cache.block_at(0x100C, Isa.A32)


def test_block_through_conditional_branches() -> None:
    """For a caller that links instructions itself, a block goes on past conditional branches
    (the code after one runs when it is not taken) and ends at the next other branch."""
    code = words(0xE3A00001, 0x0A000001, 0xE3A00002, 0x1AFFFFFC, 0xE12FFF1E, 0xE3A00003)
    image = Image([Region(0x1000, code, "a")])  # mov; beq; mov; bne; bx lr; mov
    plain = decode_block(image, 0x1000, Isa.A32)
    assert (len(plain), plain.stop, plain.branch.condition) == (2, Stop.BRANCH, "eq")
    through = decode_block(image, 0x1000, Isa.A32, through_conditional=True)
    assert [i.mnemonic for i in through.insns] == ["mov", "beq", "mov", "bne", "bx"]
    assert (through.stop, through.next_address) == (Stop.BRANCH, 0x1014)
    assert through.branch is through.insns[-1]
    index = AddressIndex()
    index.add(np.array([0x1008 << 3 | Isa.A32], np.int64), np.array([0], np.int64))
    known = decode_block(image, 0x1000, Isa.A32, known=index, through_conditional=True)
    assert (len(known), known.stop) == (2, Stop.KNOWN)


@pytest.mark.parametrize(
    ("program", "isa"),
    [("corpus/calls-a32.elf", None), ("corpus/calls-t32.elf", None), ("corpus/calls-a64.elf", None),
     ("data/leon/itb_demo.elf", Isa.SPARC)],
)  # fmt: skip
def test_blocks_from_leftovers_equal_blocks_decoded_afresh(program: str, isa: Isa | None) -> None:
    """A block that starts where another ended (after a call) takes the instructions decoded
    past that end; they must be the ones decoding from its start gives. The same for a walk's
    program, which keeps the columns alone (`decode_columns`)."""
    image = load_elf(Path(__file__).parent / program)
    leftovers: dict = {}
    column_leftovers: dict = {}
    pending = [(s.address, isa or s.isa) for s in image.symbols if isa or s.kind == "func"]
    seen, reused, columns_reused = set(), 0, 0
    while pending:
        address, block_isa = pending.pop()
        if (address, block_isa) in seen:
            continue
        seen.add((address, block_isa))
        reused += ((address << 3) | block_isa) in leftovers
        try:
            block = decode_block(image, address, block_isa, through_conditional=True, leftovers=leftovers)
        except ImageError:
            continue
        fresh = decode_block(image, address, block_isa, through_conditional=True)
        assert np.array_equal(block.columns, fresh.columns), hex(address)
        columns_reused += ((address << 3) | block_isa) in column_leftovers
        alone = decode_columns(image, address, block_isa, AddressIndex(), column_leftovers)
        assert np.array_equal(alone, fresh.columns), hex(address)
        assert block.insns == fresh.insns
        code = image.read_upto(address, blocks.WINDOW)  # run by run, as SPARC blocks are decoded
        columns, stop, branch, rows = blocks._decode_runs(code, address, block_isa, None, True, None, None)
        assert np.array_equal(fresh.columns, columns), hex(address)
        assert (fresh.stop, fresh.branch_index, fresh.rows) == (stop, None if branch < 0 else branch, rows())
        if block.stop is Stop.BRANCH:
            pending.append((block.next_address, block_isa))
    assert reused >= 3 and columns_reused == reused


def test_instruction_cut_by_end_of_image() -> None:
    cache = BlockCache(Image([Region(0x1000, thumb(0xF7FF), "cut")]))
    with pytest.raises(ImageError, match=r"0x1000: .*runs past the end of the image"):
        cache.block_at(0x1000, Isa.T32)


def test_long_straight_run_is_split_at_the_limit() -> None:
    code = words(*([0xE1A00000] * (MAX_BLOCK + 10)), 0xE12FFF1E)  # nop...; bx lr
    cache = BlockCache(Image([Region(0, code, "nops")]))
    first = cache.block_at(0, Isa.A32)
    assert (len(first), first.stop, first.branch) == (MAX_BLOCK, Stop.LIMIT, None)
    rest = cache.block_at(first.next_address, Isa.A32)
    assert (len(rest), rest.stop, rest.branch.kind) == (11, Stop.BRANCH, Kind.RETURN)


def test_unsupported_isa() -> None:
    with pytest.raises(ValueError, match="JAZELLE"):
        decode(b"\x00" * 4, 0, Isa.JAZELLE)


# --- against a commercial decoder's listing of real Thumb-2 kernel code ------------------------


def test_thumb_facts_match_ds5_listing_of_tc2_trace() -> None:
    """Walk the kernel image along DS-5's decode of ETM source 0x10: every opcode, branch flag,
    condition failure (including inside IT blocks) and taken direct branch target agrees."""
    listing = read_ds5_listing(shared("tc2-etmv3", "ds5-dumps", "etmv3_0x10.txt"))
    cache = BlockCache(load_snapshot_device(shared("tc2-etmv3", "cpu_0.ini")))
    records = [r and (r.address, r.opcode, r.branch, r.failed) for r in listing.flow]
    block, index = None, 0
    checked_targets = 0
    for n, record in enumerate(records):
        if record is None:
            block = None
            continue
        address, opcode, branch, failed = record
        if block is None or index >= len(block) or int(block.pcs[index]) != address:
            block, index = cache.block_at(address, Isa.T32), 0
        info = block.insns[index]
        index += 1
        assert (info.opcode, info.size) == (opcode, 4 if opcode > 0xFFFF else 2), hex(address)
        assert info.is_branch == branch, hex(address)
        if failed:
            assert info.is_conditional, hex(address)
        following = records[n + 1] if n + 1 < len(records) else None
        if following is None:
            continue
        if info.is_branch and not failed:
            if info.is_direct:
                assert following[0] == info.target, hex(address)
                checked_targets += 1
        else:
            assert following[0] == info.next_address, hex(address)
    assert len([r for r in records if r]) == 7205
    assert checked_targets > 300


def test_sparc_words_capstone_cannot_print_still_decode() -> None:
    coprocessor_branch = sparc_insn(0x01F00000, 0)  # op=0, op2=7: CBccc
    assert coprocessor_branch.mnemonic == ".word" and coprocessor_branch.is_branch
    assert sparc_insn(0x01C00000, 0).mnemonic == ".word"


@settings(max_examples=60, deadline=None)
@given(code=st.binary(min_size=0, max_size=600), isa=st.sampled_from([Isa.A32, Isa.T32, Isa.A64, Isa.SPARC]))
def test_decoded_columns_agree_with_their_rows(code: bytes, isa: Isa) -> None:
    """The columns a walk reads and the rows (InsnInfo fields) built from them on demand say
    the same, over any bytes; and the chunks run on from each other."""
    runs = list(decode_runs(code, 0x8000, isa))
    rows = [row for run in runs for row in run.rows()]
    columns = np.concatenate([run.columns for run in runs]) if runs else np.zeros((0, C_COUNT), np.int64)
    assert np.array_equal(columns, columns_of(rows))
    addresses = [row[0] for row in rows]
    assert addresses == [0x8000 + sum(row[2] for row in rows[:i]) for i in range(len(rows))]


@settings(max_examples=150, deadline=None)
@given(
    code=st.binary(min_size=0, max_size=300),
    isa=st.sampled_from([Isa.A32, Isa.T32, Isa.A64]),
    known_at=st.lists(st.integers(0, 150), max_size=3),
    through_conditional=st.booleans(),
)
def test_compiled_arm_blocks_agree_with_blocks_decoded_run_by_run(
    code: bytes, isa: Isa, known_at: list[int], through_conditional: bool
) -> None:
    """Over any bytes (undefined instructions, IT blocks cut by a chunk, code that ends
    mid-instruction) a block decoded in one compiled call is the one built run by run."""
    image = Image([Region(0x8000, code, "code")])
    index = AddressIndex()
    keys = [(0x8000 + 2 * at) << 3 | isa for at in known_at]
    index.add(np.array(keys, np.int64), np.zeros(len(keys), np.int64))
    run_by_run = blocks._decode_runs(code, 0x8000, isa, index, through_conditional, None, None)
    columns, stop, branch, rows = run_by_run
    if not len(columns):
        with pytest.raises(ImageError):
            decode_block(image, 0x8000, isa, index, through_conditional=through_conditional)
        return
    block = decode_block(image, 0x8000, isa, index, through_conditional=through_conditional)
    assert np.array_equal(block.columns, columns)
    assert (block.stop, block.branch_index, block.rows) == (stop, None if branch < 0 else branch, rows())


# --- fact bits of trace rows (isa.factcodes) ---------------------------------------------------


@pytest.mark.parametrize(("elf", "isa"), [("calltest32.elf", Isa.A32), ("calltest64.elf", Isa.A64),
                                          ("quicksort.elf", Isa.A64)])  # fmt: skip
def test_fact_codes_of_opcodes_and_of_the_image_say_what_insn_info_says(elf: str, isa: Isa) -> None:
    """Every instruction of a program's text, given to FactCodes as a trace gives it (opcode, or
    only its address and the image): its bits say what its InsnInfo says."""
    image = load_elf(DATA / elf)
    (text,) = image.code_ranges
    infos = instructions_from(image, text.start, text.end, isa)
    assert len(infos) > 40
    assert any(i.kind is Kind.CALL for i in infos) and any(i.kind is Kind.RETURN for i in infos)
    column = {
        "opcode": np.array([i.opcode for i in infos], np.uint32),
        "size": np.array([i.size for i in infos], np.uint8),
        "isa": np.full(len(infos), int(isa), np.int16),
        "address": np.array([i.address for i in infos], np.uint64),
    }
    wanted = [
        (F_BRANCH if i.is_branch else 0) | (F_LOAD if i.is_load else 0) | (F_STORE if i.is_store else 0)
        | (F_DELAY if i.delay_slot else 0) | (F_CALL if i.kind is Kind.CALL else 0)
        | (F_RETURN if i.kind is Kind.RETURN else 0)
        for i in infos
    ]  # fmt: skip
    mask = F_BRANCH | F_LOAD | F_STORE | F_DELAY | F_CALL | F_RETURN
    for has_opcode, codes in ((True, FactCodes()), (False, FactCodes(image))):
        got = codes.codes(column["opcode"], np.full(len(infos), has_opcode), column["size"], column["isa"],
                          column["address"])  # fmt: skip
        assert (got & mask).tolist() == wanted
        assert got.tolist() == [facts_of(i) for i in infos]


def instructions_from(image: Image, start: int, end: int, isa: Isa) -> list[InsnInfo]:
    """The instructions from `start` up to `end`, one after the other (data decoded as such)."""
    infos, at = [], start
    while at + 4 <= end:
        info = decode(image.read_upto(at, 4), at, isa)
        if info is None:
            break
        infos.append(info)
        at += info.size
    return infos


@pytest.mark.parametrize(
    ("opcode", "size", "isa", "memory"),
    [
        (0xE12FFF1E, 4, Isa.A32, "1eff2fe1"),  # bx lr
        (0xF000F800, 4, Isa.T32, "00f000f8"),  # bl: hw1 then hw2, each little-endian
        (0x4770, 2, Isa.T32, "7047"),  # bx lr
        (0x81C3E008, 4, Isa.SPARC, "81c3e008"),  # retl: big-endian
        (0x1234_4770, 2, Isa.T32, "7047"),  # bits above the size are not the instruction's
    ],
)
def test_opcode_bytes(opcode: int, size: int, isa: Isa, memory: str) -> None:
    assert opcode_bytes(opcode, size, isa).hex() == memory


def test_an_undefined_instruction_at_a_kernel_address_after_one_at_a_low_address() -> None:
    """The undefined row of a run at an address of 2**63 or more (an AArch64 kernel's), after
    one at a low address: the compiled helper once knew only the first's integer type."""
    word = b"\xff\xff\xff\xff"  # an encoding capstone does not decode
    low, high = (decode(word, at, Isa.A64) for at in (0x1000, 0xFFFF_0000_0000_1000))
    assert low is not None and high is not None
    assert (low.is_undefined, high.is_undefined, high.address) == (True, True, 0xFFFF_0000_0000_1000)


def test_an_address_index_of_any_capacity_finds_every_key_it_holds() -> None:
    """Rows are found by masking a hash with the table's length, so the table rounds its
    capacity up to a power of two: one of 8,260 rows (a Program's) once probed for ever."""
    index = AddressIndex(8260)
    assert len(index.table) == 16384
    keys = np.arange(1, 3000, dtype=np.int64) << 3
    index.add(keys, np.arange(len(keys), dtype=np.int64))
    assert index.contains(keys >> 3, 0).all() and not index.contains(np.array([5000], np.int64), 0).any()
