"""The compiled A64 flow classifier (isa.flow_a64) and the walk's compiled blocks (isa.flowblock)
against capstone's facts (isa.arm), word for word and block for block.

Capstone is the independent answer: the classifier decodes from the Arm ARM's tables, capstone
from LLVM's. The only differences allowed are the classes docs/formats.md names, each
recognised here by what it is (never by a count).
"""

from __future__ import annotations

import struct

import numba
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from paths import CORPUS, shared

from cputrace.flow import program as program_module
from cputrace.flow.program import NO_CODE, UNRESOLVED, Program, found
from cputrace.image import Image, load_elf
from cputrace.image.memory import Region
from cputrace.isa import decode_columns
from cputrace.isa.arm import arm_runs
from cputrace.isa.flow_a64 import a64_flow
from cputrace.isa.flowblock import block_rows, flow_block
from cputrace.isa.index import AddressIndex, lookup
from cputrace.isa.insn import (
    C_ADDRESS,
    C_COUNT,
    C_FACTS,
    C_KIND,
    C_NEXT_ISA,
    C_OPCODE,
    C_SIZE,
    C_TARGET,
    F_BRANCH,
    F_CALL,
    F_CONDITIONAL,
    F_DATA_BARRIER,
    F_DIRECT,
    F_HAS_CONDITION,
    F_HAS_TARGET,
    F_ISB,
    F_RETURN,
    F_TRAP,
    F_UNDEFINED,
    FLOW_FACTS,
)
from cputrace.model import Isa

COMPARED = [C_SIZE, C_OPCODE, C_FACTS, C_TARGET, C_NEXT_ISA, C_KIND]
KERNEL_BASE = 0xFFFFFFC000080000  # juno_r1_1's kernel: targets wrap at the top of the address space

# The classes of difference docs/formats.md names ("A64 flow classifier").
BC_COND = "BC.cond, a branch capstone 5 does not take for one"
CSSC = "a FEAT_CSSC minimum/maximum (immediate), which capstone 5 does not decode"
UNFOLLOWED = "an encoding capstone 5 does not decode, in a group the classifier takes as allocated"


def capstone_columns(code: bytes, address: int) -> np.ndarray:
    """Capstone's columns of every whole word of `code`, flow bits alone: `arm_runs` from each
    word after an undefined one (a run ends there)."""
    parts, offset = [], 0
    while offset + 4 <= len(code):
        for run in arm_runs(code[offset:], _wrapped(address + offset), Isa.A64):
            parts.append(run.columns)
            offset += 4 * len(run)
    columns = np.concatenate(parts)
    columns[:, C_FACTS] &= FLOW_FACTS
    return columns


@numba.njit(cache=True)
def _classified(words: np.ndarray, address: int, out: np.ndarray) -> None:
    for i in range(len(words)):
        a64_flow(np.int64(words[i]), address + 4 * i, out[i])


def classifier_columns(code: bytes, address: int) -> np.ndarray:
    words = np.frombuffer(code[: len(code) // 4 * 4], "<u4")
    out = np.zeros((len(words), C_COUNT), np.int64)
    _classified(words, np.int64(_signed(address)), out)
    return out


def difference(word: int, capstone: np.ndarray, classifier: np.ndarray) -> str | None:
    """The named class of a difference between the two decoders' columns of one word (None:
    they agree); AssertionError for any other difference."""
    if (capstone[COMPARED] == classifier[COMPARED]).all():
        return None
    facts, ours = int(capstone[C_FACTS]), int(classifier[C_FACTS])
    if word & 0xFF000010 == 0x54000010 and not facts & F_BRANCH:  # DDI 0487 C6.2.36 BC.cond
        assert ours & (F_BRANCH | F_DIRECT | F_HAS_TARGET) == F_BRANCH | F_DIRECT | F_HAS_TARGET
        assert int(classifier[C_TARGET]) == _signed(int(classifier[C_ADDRESS]) + (_field(word >> 5, 19) << 2))
        return BC_COND
    if word & 0x1FC00000 == 0x11C00000 and facts == F_UNDEFINED and ours == 0:  # C6.2 SMAX (immediate)...
        return CSSC
    group = (word >> 25) & 0xF  # C4.1's op1: x1x0 loads and stores, x101 data processing (register),
    unfollowed = group & 0b0101 == 0b0100 or (group & 0b0111) in (0b0101, 0b0111)
    unfollowed |= group == 0b0010 or (group == 0 and word >> 31 == 1)  # x111 SIMD&FP, 0010 SVE, 0000 SME
    if unfollowed and facts == F_UNDEFINED and ours & ~(F_CONDITIONAL | F_HAS_CONDITION) == 0:
        return UNFOLLOWED
    raise AssertionError(f"{word:08x}: capstone {capstone.tolist()}, classifier {classifier.tolist()}")


def compare(code: bytes, address: int) -> set[str]:
    """The classes of difference over every word of `code`."""
    capstone, classifier = capstone_columns(code, address), classifier_columns(code, address)
    words = np.frombuffer(code[: len(code) // 4 * 4], "<u4")
    assert len(capstone) == len(words)
    differs = np.nonzero((capstone[:, COMPARED] != classifier[:, COMPARED]).any(axis=1))[0]
    return {difference(int(words[i]), capstone[i], classifier[i]) for i in differs}  # type: ignore[misc]


def _field(value: int, bits: int) -> int:
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def _signed(address: int) -> int:
    return _field(address, 64)


def _words(*words: int) -> bytes:
    return struct.pack(f"<{len(words)}I", *words)


def _wrapped(address: int) -> int:
    return address & ((1 << 64) - 1)


SNAPSHOT_DUMPS = [
    ("bugfix-exact-match", "cc1.text_dump.bin", 0x400000),
    ("bugfix-exact-match", "cc1__libc_freeres_fn_dump.bin", 0x400000),
    ("juno_r1_1", "kernel_dump.bin", KERNEL_BASE),
    ("juno-uname-001", "uname.bin", 0x400000),
    ("juno-uname-001", "vdso.bin", 0x400000),
    ("a57_single_step", "mem_Cortex-A57_0.bin", 0x400000),
]


@pytest.mark.parametrize(
    ("snapshot", "dump", "base"), SNAPSHOT_DUMPS, ids=[f"{s}/{d}" for s, d, _ in SNAPSHOT_DUMPS]
)
def test_every_word_of_the_snapshots_dumps(snapshot: str, dump: str, base: int) -> None:
    code = shared("opencsd-snapshots", snapshot, dump).read_bytes()
    assert compare(code, base) <= {BC_COND, CSSC, UNFOLLOWED}  # the dumps hold data beside the code


@pytest.mark.parametrize("name", ["calls-a64.elf", "exceptions-a64.elf"])
def test_every_word_of_the_a64_programs(name: str) -> None:
    image = load_elf(CORPUS / name)
    for region in image.regions:
        assert compare(bytes(region.data), region.start) <= {BC_COND, CSSC, UNFOLLOWED}


def test_random_words_differ_only_by_named_classes() -> None:
    rng = np.random.default_rng(22)
    words = rng.integers(0, 1 << 32, 20_000, dtype=np.uint64).astype("<u4")
    assert compare(words.tobytes(), 0x40_0000) == {BC_COND, CSSC, UNFOLLOWED}
    # the branch, exception-generating and system group (C4.1 op1 101x) is followed exactly,
    branches = (words & np.uint32(0xE3FFFFFF)) | np.uint32(0x14000000)
    assert compare(branches.tobytes(), KERNEL_BASE) == {BC_COND}
    # and the data-processing (immediate) group (100x)
    immediates = (words & np.uint32(0xE3FFFFFF)) | np.uint32(0x10000000)
    assert compare(immediates.tobytes(), KERNEL_BASE) == {CSSC}


@settings(max_examples=300, deadline=None)
@given(st.integers(0, (1 << 32) - 1), st.integers(0, (1 << 62) - 1).map(lambda a: a * 4))
def test_any_word_at_any_address(word: int, address: int) -> None:
    code = word.to_bytes(4, "little")
    assert compare(code, address) <= {BC_COND, CSSC, UNFOLLOWED}


@pytest.mark.parametrize(
    ("word", "facts", "kind", "next_isa"),
    [
        (0x94000010, F_BRANCH | F_DIRECT | F_HAS_TARGET | F_CALL, 1, Isa.A64),  # bl #0x40
        (
            0x54000040,
            F_BRANCH | F_DIRECT | F_HAS_TARGET | F_CONDITIONAL | F_HAS_CONDITION,
            3,
            Isa.A64,
        ),  # b.eq
        (0x5400004E, F_BRANCH | F_DIRECT | F_HAS_TARGET, 3, Isa.A64),  # b.al: no condition
        (0xD65F0BFF, F_BRANCH | F_RETURN, 2, Isa.A64),  # retaa
        (0xD73F0800, F_BRANCH | F_CALL, 1, Isa.A64),  # blraa x0, x0
        (0xD69F0BFF, F_BRANCH, 3, 255),  # eretaa: the state comes from SPSR
        (0xD4000001, F_TRAP, 0, Isa.A64),  # svc #0
        (0x00000000, F_UNDEFINED | F_TRAP, 0, Isa.A64),  # udf #0
        (0xD5033FDF, F_ISB, 0, Isa.A64),  # isb
        (0xD5033BBF, F_DATA_BARRIER, 0, Isa.A64),  # dmb ish
        (0x9A821020, 0, 0, Isa.A64),  # csel x0, x1, x2, ne: reads a condition, always executes
        (0xD61F0001, F_UNDEFINED, 0, Isa.A64),  # br with op4 != 0: unallocated
        (0x02000000, F_UNDEFINED, 0, Isa.A64),  # C4.1 op1 0001: unallocated
    ],
)
def test_the_facts_of_named_instructions(word: int, facts: int, kind: int, next_isa: int) -> None:
    """Facts from the Arm ARM's descriptions of each instruction (C6.2), written out."""
    row = classifier_columns(word.to_bytes(4, "little"), 0x1000)[0]
    assert (int(row[C_FACTS]), int(row[C_KIND]), int(row[C_NEXT_ISA])) == (facts, kind, next_isa)


def test_blocks_are_the_capstone_paths_blocks() -> None:
    """flow_block against decode_columns (capstone) from every address of calls-a64.elf's code,
    with an index that holds every 16th address (a block ends before one). Blocks that run
    into the data after the code may part at a word of a named class, and only there."""
    image = load_elf(CORPUS / "calls-a64.elf")
    (text,) = image.code_ranges
    region = next(r for r in image.regions if r.start <= text.start < r.end)
    code = bytes(region.data)
    capstone, classifier = capstone_columns(code, region.start), classifier_columns(code, region.start)
    differing = {
        region.start + 4 * int(i)
        for i in np.nonzero((capstone[:, COMPARED] != classifier[:, COMPARED]).any(axis=1))[0]
    }
    known = AddressIndex()
    held = np.arange(text.start, text.end, 64, dtype=np.int64)
    known.add((held << 3) | int(Isa.A64), np.zeros(len(held), np.int64))
    rows = block_rows()
    for address in range(text.start, text.end, 4):
        expected = decode_columns(image, address, Isa.A64, known, {})
        expected[:, C_FACTS] &= FLOW_FACTS
        count, _ = flow_block(np.frombuffer(code, np.uint8)[address - region.start :], address, int(Isa.A64),
                              known.table, rows)  # fmt: skip
        same = min(count, len(expected))
        parts = np.nonzero((rows[:same, COMPARED] != expected[:same, COMPARED]).any(axis=1))[0]
        parted = int(parts[0]) if len(parts) else same
        if parted < max(count, len(expected)):
            assert address + 4 * parted in differing, hex(address)


def test_the_programs_records_are_the_capstone_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Program decoding blocks of calls-a64.elf's code through the classifier holds the
    records and index entries one decoding them through capstone holds."""
    image = load_elf(CORPUS / "calls-a64.elf")
    (text,) = image.code_ranges
    keys = [(address << 3) | int(Isa.A64) for address in range(text.start, text.end, 52)]
    compiled = Program(image)
    for key in keys:
        compiled.decode(key)
    monkeypatch.setattr(program_module, "FLOW_ISAS", frozenset())
    by_capstone = Program(image)
    for key in keys:
        by_capstone.decode(key)
    assert compiled.count == by_capstone.count > len(keys)
    assert (compiled.insns[: compiled.count] == by_capstone.insns[: by_capstone.count]).all()
    for address in range(text.start, text.end + 64, 4):
        key = (address << 3) | int(Isa.A64)
        assert (key in compiled.index) == (key in by_capstone.index)


def test_a_block_without_a_whole_instruction_is_a_failure_named_there() -> None:
    program = Program(Image([Region(0x1000, b"\x1f\x20", "test")]))
    program.decode((0x1000 << 3) | int(Isa.A64))
    assert program.count == 0
    assert program.failures[0x1000] == (
        "0x1000: no A64 instruction in the program image there (it runs past the end of the image)"
    )
    assert lookup(program.index.table, (0x1000 << 3) | int(Isa.A64)) == NO_CODE


def test_the_walk_decodes_the_blocks_that_end_inside_their_region() -> None:
    """program.found decodes a block in the walk when it ends inside its region of the image
    (a kernel's addresses, above 2**63, included); one that runs on to the region's end is
    left to Program.decode, which reads on into an adjacent region."""
    nop, b_self = 0xD503201F, 0x14000000
    image = Image([
        Region(0x1000, _words(nop, nop), "a"), Region(0x1008, _words(nop, b_self), "b"),
        Region(KERNEL_BASE, _words(nop, b_self), "kernel"),
    ])  # fmt: skip
    program = Program(image)

    def key(address: int) -> int:
        return _signed((address << 3) | int(Isa.A64))

    def at(address: int) -> int:
        return found(key(address), program.insns, program.index.table, program.index.counts, program.code)

    assert at(0x1000) == UNRESOLVED
    assert (at(0x1008), at(KERNEL_BASE), program.count) == (0, 2, 4)
    assert program.insns["pc"][:4].tolist() == [0x1008, 0x100C, KERNEL_BASE, KERNEL_BASE + 4]
    program.decode(key(0x1000))  # up to the block decoded before, across the regions' border
    assert program.insns["pc"][4 : program.count].tolist() == [0x1000, 0x1004]
    assert at(0x1000) == 4


def test_an_address_far_above_the_image_is_outside_it() -> None:
    """An address 2**63 or more above the start of the region below it is outside the image,
    not read from the image's end (the distance, as an int64, wrapped round to negative)."""
    image = Image([Region(0, _words(*[0xD503201F] * 1023, 0x14000000), "low")])
    program = Program(image)
    key = _signed((0xFFFFFFFFFFFFF800 << 3) | int(Isa.A64))
    at = found(key, program.insns, program.index.table, program.index.counts, program.code)
    assert (at, program.count) == (NO_CODE, 0)
    failure = "0xfffffffffffff800: no A64 instruction in the program image there"
    assert program.failures == {0xFFFFFFFFFFFFF800: failure}


def test_the_walk_marks_an_address_outside_the_image_as_program_decode_does() -> None:
    """program.found marks a key whose address no region holds NO_CODE itself, and
    Program.failures then names it as Program.decode does; past its notes (OUTSIDE_NOTES, one
    here) it leaves the key to Program.decode until the notes have been read."""
    image = Image([Region(0x1000, _words(0xD503201F, 0x14000000), "a")])
    outside = [0x2000, KERNEL_BASE, 0x3000]
    by_decode = Program(image)
    for address in outside:
        by_decode.decode(_signed((address << 3) | int(Isa.A64)))
    program = Program(image)
    program._outside = np.zeros(1, np.int64)  # room for one note before program.code is made

    def at(address: int) -> int:
        key = _signed((address << 3) | int(Isa.A64))
        return found(key, program.insns, program.index.table, program.index.counts, program.code)

    assert (at(0x2000), at(KERNEL_BASE)) == (NO_CODE, UNRESOLVED)
    assert program.failures == {0x2000: by_decode.failures[0x2000]}
    assert (at(KERNEL_BASE), at(0x3000)) == (NO_CODE, UNRESOLVED)
    program.decode(_signed((0x3000 << 3) | int(Isa.A64)))
    assert program.failures == by_decode.failures
    assert by_decode.failures[0x3000] == "0x3000: no A64 instruction in the program image there"
    for address in outside:
        assert at(address) == NO_CODE
