"""A32/T32/A64 facts read from capstone's C records equal those of capstone's Python objects.

`isa/arm.py` unpacks capstone's records itself and decides "writes pc" from the written
registers and operand access flags instead of calling regs_access(); `isa_reference.py`
is the first implementation, through capstone's Python objects. Every field of every
instruction must agree: over the whole TC2 kernel image (as A32 and as T32), the corpus
programs, and random words. The access size is checked against a rule on capstone's text
(mnemonic suffixes, register names) rather than its instruction and register ids.
"""

from __future__ import annotations

import lzma
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from isa_reference import reference_run
from paths import DATA

from cputrace.image import Image, Region, load_elf
from cputrace.isa import BlockCache, InsnInfo, decode_run
from cputrace.model import Isa

CORPUS = Path(__file__).parent / "corpus"
KERNEL = DATA / "etmv3" / "tc2" / "kernel_dump.bin.xz"
KERNEL_ADDRESS = 0xC0008000  # where cpu_0.ini maps the dump


def first_difference(new: list[InsnInfo], old: list[InsnInfo]) -> str:
    for mine, theirs in zip(new, old, strict=False):
        if mine != theirs:
            return f"\n new: {mine}\n old: {theirs}"
    return f"\n {len(new)} instructions, the reference has {len(old)}"


def sweep(code: bytes, address: int, isa: Isa) -> int:
    """Compare every instruction of `code` decoded in runs (each run ends at an undefined
    instruction; the next starts after it); returns how many were compared."""
    offset, compared = 0, 0
    step = 2 if isa is Isa.T32 else 4
    while offset + step <= len(code):
        new = list(decode_run(code[offset:], address + offset, isa))
        old = list(reference_run(code[offset:], address + offset, isa))
        assert new == old, f"{isa.name} at 0x{address + offset:x}: {first_difference(new, old)}"
        compared += len(new)
        if not new:
            break  # a last partial instruction
        offset = new[-1].next_address - address
    return compared


@pytest.fixture(scope="module")
def kernel() -> bytes:
    return lzma.decompress(KERNEL.read_bytes())


@pytest.mark.parametrize("isa", [Isa.T32, Isa.A32])
def test_every_instruction_of_the_tc2_kernel(kernel: bytes, isa: Isa) -> None:
    assert sweep(kernel, KERNEL_ADDRESS, isa) >= len(kernel) // 4


@pytest.mark.parametrize("elf", sorted(CORPUS.glob("*.elf")), ids=lambda path: path.stem)
def test_every_instruction_of_the_corpus_programs(elf: Path) -> None:
    image = load_elf(elf)
    isas = [Isa.A64] if "a64" in elf.stem else [Isa.A32, Isa.T32]
    for region in image.regions:
        for isa in isas:
            assert sweep(bytes(region.data), region.start, isa) > 0


@settings(max_examples=400, deadline=None)
@given(
    st.sampled_from([Isa.A32, Isa.T32, Isa.A64]),
    st.binary(min_size=2, max_size=64),
    st.integers(0, (1 << 32) - 4),
)
def test_random_words(isa: Isa, code: bytes, address: int) -> None:
    address &= ~1 if isa is Isa.T32 else ~3
    new = list(decode_run(code, address, isa))
    old = list(reference_run(code, address, isa))
    assert new == old, first_difference(new, old)


@pytest.mark.parametrize(
    ("isa", "code", "size"),
    [
        ("A32", "0000d1e5", 1), ("A32", "f000d1e1", 2), ("A32", "d000c2e1", 4), ("A32", "9f0ed1e1", 1),
        ("A32", "000b91ed", 8), ("A32", "000a91ed", 4), ("A32", "080bb0ec", 8), ("A32", "040a2ded", 4),
        ("A32", "8f08a0f4", 4), ("A32", "4f0ca0f4", 2), ("A32", "0f0a20f4", 8), ("A32", "4f0380f4", 1),
        ("A32", "910042e1", 1), ("A32", "005e91ed", 4), ("A32", "0100a0e1", 0),
        ("T32", "b1f80200", 2), ("T32", "a0f98f08", 4), ("T32", "b0ec080b", 8), ("T32", "c2e8401f", 1),
        ("A64", "20004039", 1), ("A64", "200080b9", 4), ("A64", "200040f9", 8), ("A64", "2000403d", 1),
        ("A64", "2000c03d", 16), ("A64", "200440ad", 16), ("A64", "00a0400c", 8), ("A64", "0090400d", 4),
        ("A64", "00c4400d", 2), ("A64", "5f002078", 2), ("A64", "827c2048", 8), ("A64", "40047f88", 4),
    ],
)  # fmt: skip
def test_access_sizes_of_known_encodings(isa: str, code: str, size: int) -> None:
    """ldrb 1, ldrsh 2, ldrd 4 (two transfers), vldr d0 8, vldmia {d0-d3} 8, vld1.32 {d0[1]} 4,
    vld1.16 {d0[]} 2, vst4.8 lanes 1, swpb 1, ldc 4, mov 0; ldrh.w, strexb; A64 ldr b0/q0, ldp q,
    ld1 {v.8b} 8, ld1 lane 4, ld1r {v0.4h} 2, staddh, casp x, ldxp w."""
    new = list(decode_run(bytes.fromhex(code), 0x1000, Isa[isa]))
    old = list(reference_run(bytes.fromhex(code), 0x1000, Isa[isa]))
    assert [i.access_size for i in new] == [i.access_size for i in old] == [size]


@pytest.mark.parametrize("code, size", [("910002e1", 4), ("910042e1", 1)])
def test_a_swap_reads_then_writes(code: str, size: int) -> None:
    """swp r0, r1, [r2] and swpb: two transfers to one address (ETMv3 traces a data packet each)."""
    (swap,) = decode_run(bytes.fromhex(code), 0x1000, Isa.A32)
    assert (swap.is_load, swap.is_store, swap.transfers, swap.access_size) == (True, True, 2, size)


def test_blocks_build_their_instructions_once(kernel: bytes) -> None:
    """Blocks keep rows; the InsnInfo objects are built on first use and then kept."""
    cache = BlockCache(Image([Region(KERNEL_ADDRESS, kernel, "kernel")]))
    block = cache.block_at(0xC002113C, Isa.T32)  # cbz r3, ...: the TC2 trace's code
    assert block.insns is block.insns
    assert (
        block.insns
        == tuple(reference_run(kernel[0xC002113C - KERNEL_ADDRESS :], 0xC002113C, Isa.T32))[: len(block)]
    )
    assert block.branch is block.insns[-1] and block.branch.is_branch
