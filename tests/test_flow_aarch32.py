"""The compiled A32/T32 flow classifiers (isa/flow_aarch32.py) against capstone's path.

The independent answer is capstone's detail mode as `isa.arm` reads it (`arm_runs`), masked
to the flow facts: every instruction of the corpus's A32 and T32 images decoded linearly (T32
as a stream, the IT state carried from instruction to instruction), and seeded random words
and halfword streams. Where the two part, the difference must fall in one of the classes
docs/formats.md names ("AArch32 flow classifier and capstone"), each recognised here from the
encoding alone; a difference outside every class fails. Each class is also asserted to
occur where the sample holds its encodings, so a class that stops matching anything is noticed.
"""

from __future__ import annotations

import lzma
from collections.abc import Callable

import numba
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from paths import CORPUS, DATA, shared

from cputrace.image import load_elf
from cputrace.isa.arm import arm_runs
from cputrace.isa.flow_aarch32 import a32_flow, t32_flow
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
    F_TRAP,
    F_UNDEFINED,
    FLOW_FACTS,
    KINDS,
    Kind,
)
from cputrace.isa.itstate import next_it_state
from cputrace.model import Isa

COMPARED = [C_ADDRESS, C_SIZE, C_OPCODE, C_FACTS, C_TARGET, C_NEXT_ISA, C_KIND]
KERNEL = DATA / "etmv3" / "tc2" / "kernel_dump.bin.xz"
KERNEL_ADDRESS = 0xC0008000


def capstone_columns(code: bytes, address: int, isa: Isa) -> np.ndarray:
    """Capstone's columns of every instruction of `code`, decoded linearly: a run ends at an
    instruction capstone cannot decode, and the next starts after it (with no IT state)."""
    runs, offset = [], 0
    while offset < len(code):
        before = offset
        for run in arm_runs(code[offset:], address + offset, isa):
            runs.append(run.columns)
            offset += int(run.columns[:, C_SIZE].sum())
        if offset == before:
            break  # a partial instruction at the end
    columns = np.concatenate(runs) if runs else np.zeros((0, C_COUNT), np.int64)
    columns[:, C_FACTS] &= FLOW_FACTS
    return columns


@numba.njit(cache=True)
def _a32_rows(words: np.ndarray, addresses: np.ndarray, out: np.ndarray) -> None:
    for i in range(len(words)):
        a32_flow(words[i], addresses[i], out[i])


@numba.njit(cache=True)
def _t32_rows(code: np.ndarray, offsets: np.ndarray, address: int, restarts: np.ndarray,
              out: np.ndarray) -> None:  # fmt: skip
    """The T32 stream at capstone's offsets, the IT state carried along (and dropped where
    capstone's path starts a new run, as it does)."""
    it_state = 0
    for i in range(len(offsets)):
        if restarts[i]:
            it_state = 0
        it_state = t32_flow(code, offsets[i], address + offsets[i], it_state, out[i])


def classifier_columns(code: bytes, address: int, isa: Isa, reference: np.ndarray) -> np.ndarray:
    """The classifier's columns for the instructions `reference` holds (at the same offsets)."""
    out = np.zeros_like(reference)
    if isa is Isa.A32:
        _a32_rows(reference[:, C_OPCODE] & 0xFFFFFFFF, reference[:, C_ADDRESS], out)
    else:
        undecodable = reference[:, C_FACTS] & (F_UNDEFINED | F_TRAP) == F_UNDEFINED
        restarts = np.concatenate([[True], undecodable[:-1]])
        _t32_rows(np.frombuffer(code, np.uint8), reference[:, C_ADDRESS] - address, address, restarts, out)
    return out


# The classes of difference (docs/formats.md, "AArch32 flow classifier and capstone"). Each is
# a predicate on (isa, size, opcode); `it_block` needs the stream (`in_unpredictable_it_block`).
def _simd(isa: Isa, size: int, op: int) -> bool:
    """Advanced SIMD data processing (A7.4): the classifier takes the space as defined."""
    return op & 0xFE000000 == 0xF2000000 if isa is Isa.A32 else size == 4 and op & 0xEF000000 == 0xEF000000


def _simd_elements(isa: Isa, size: int, op: int) -> bool:
    """VLDn, VSTn (A7.7): capstone rejects a few encodings the classifier takes."""
    return op & 0xFF100000 == (0xF4000000 if isa is Isa.A32 else 0xF9000000) and (isa is Isa.A32 or size == 4)


def _vlldm(isa: Isa, size: int, op: int) -> bool:
    """VLLDM, VLSTM: Armv8-M (T32) instructions that capstone also decodes in A32, where the
    A-profile has none (the classifier: undefined)."""
    return isa is Isa.A32 and op >> 28 != 0xF and op & 0x0FE0FFFF == 0x0C200A00


def _floating_point(isa: Isa, size: int, op: int) -> bool:
    """Floating-point instructions in coprocessors 10 and 11 (A7.5, A7.6, A7.8)."""
    if isa is Isa.A32:
        return (op >> 28 != 0xF and op & 0x0C000E00 == 0x0C000A00) or op & 0xFF000E00 == 0xFE000A00
    return size == 4 and op & 0xEC000E00 == 0xEC000A00


def _hlt(isa: Isa, size: int, op: int) -> bool:
    """HLT (Armv8 halting debug, DDI 0487 "HLT", A1 and T1): capstone 5 does not decode it."""
    return op & 0x0FF000F0 == 0x01000070 if isa is Isa.A32 else size == 2 and op & 0xFFC0 == 0xBA80


def _crc32(isa: Isa, size: int, op: int) -> bool:
    """CRC32, CRC32C (Armv8 CRC extension, DDI 0487 "CRC32", "CRC32C"): capstone 5 does not decode them."""
    if isa is Isa.A32:
        return op >> 28 != 0xF and op & 0x0F9000F0 == 0x01000040
    return size == 4 and op & 0xFFE0F0C0 == 0xFAC0F080


def _bxns(isa: Isa, size: int, op: int) -> bool:
    """BXNS, BLXNS (Armv8-M): capstone decodes them as no branch."""
    return isa is Isa.T32 and size == 2 and op & 0xFF04 == 0x4704


def _udf(isa: Isa, size: int, op: int) -> bool:
    """UDF #0xFE (capstone's `trap`, not undefined) and T16 UDF #0xF9 (capstone cannot decode it)."""
    return op == 0xE7FFDEFE if isa is Isa.A32 else size == 2 and op in (0xDEFE, 0xDEF9)


def _mov_rn(isa: Isa, size: int, op: int) -> bool:
    """A32 MOV with its (0)(0)(0)(0) Rn field set: capstone decodes a few, the classifier none."""
    return isa is Isa.A32 and op >> 28 != 0xF and op & 0x0DE00000 == 0x01A00000 and op & 0x000F0000 != 0


def _cps(isa: Isa, size: int, op: int) -> bool:
    """A32 CPS: capstone rejects some field combinations the classifier takes."""
    return isa is Isa.A32 and op & 0xFFF10020 == 0xF1000000


CLASSES: dict[str, Callable[[Isa, int, int], bool]] = {
    "simd": _simd, "simd_elements": _simd_elements, "vlldm": _vlldm, "floating_point": _floating_point,
    "hlt": _hlt, "crc32": _crc32, "bxns": _bxns, "udf": _udf, "mov_rn": _mov_rn, "cps": _cps,
}  # fmt: skip
CAPSTONE_REJECTS = frozenset({"simd", "simd_elements", "floating_point"})
"""The classes where capstone rejects what the classifier takes as defined, never the reverse."""


def in_unpredictable_it_block(columns: np.ndarray) -> np.ndarray:
    """Rows up to 8 after an instruction an IT block must not hold (UNPREDICTABLE, A8.8.54 "IT"): an
    IT, where capstone's path cuts its chunks before the inner IT and loses the outer block,
    or one of T32's unconditional encodings (hw1 111111xx: VSEL, VMAXNM, CDP2...), which
    capstone's own IT state does not count."""
    marked = np.zeros(len(columns), bool)
    state, left = 0, 0
    for i, (size, opcode) in enumerate(columns[:, [C_SIZE, C_OPCODE]].tolist()):
        is_it = size == 2 and opcode >> 8 == 0xBF and opcode & 0xF
        if state & 0xF and (is_it or (size == 4 and opcode >> 26 == 0b111111)):
            left = 9
        marked[i] = left > 0
        left = max(left - 1, 0)
        state = next_it_state(state) if state & 0xF else 0
        if is_it:
            state = opcode & 0xFF
    return marked


def classify(isa: Isa, reference: np.ndarray, mine: np.ndarray) -> dict[str, int]:
    """How many differing instructions each class holds; fails on a difference outside every class."""
    differ = (reference[:, COMPARED] != mine[:, COMPARED]).any(axis=1)
    unpredictable = in_unpredictable_it_block(reference) if isa is Isa.T32 else np.zeros(len(reference), bool)
    counts = dict.fromkeys([*CLASSES, "it_block"], 0)
    for i in np.flatnonzero(differ).tolist():
        size, opcode = int(reference[i, C_SIZE]), int(reference[i, C_OPCODE]) & 0xFFFFFFFF
        name = next((name for name, holds in CLASSES.items() if holds(isa, size, opcode)), None)
        if name is None and unpredictable[i]:
            name = "it_block"
        rejected = reference[i, C_FACTS] & F_UNDEFINED and not mine[i, C_FACTS] & F_UNDEFINED
        assert name is not None and (name not in CAPSTONE_REJECTS or rejected), (
            f"{isa.name} 0x{reference[i, C_ADDRESS]:x} opcode 0x{opcode:x} ({name}): "
            f"capstone {reference[i].tolist()}, classifier {mine[i].tolist()}"
        )
        counts[name] += 1
    return counts


def compare(code: bytes, address: int, isa: Isa) -> dict[str, int]:
    reference = capstone_columns(code, address, isa)
    assert len(reference) > 0
    return classify(isa, reference, classifier_columns(code, address, isa, reference))


def test_tc2_kernel_as_a32_and_t32() -> None:
    """TC2's kernel (Thumb-2 code, A32 vectors and data) read both ways: no difference outside
    the classes, and none at all in the instructions capstone calls branches."""
    code = lzma.decompress(KERNEL.read_bytes())
    for isa in (Isa.A32, Isa.T32):
        reference = capstone_columns(code, KERNEL_ADDRESS, isa)
        mine = classifier_columns(code, KERNEL_ADDRESS, isa, reference)
        classify(isa, reference, mine)
        branches = reference[:, C_FACTS] & F_BRANCH != 0
        assert branches.sum() > 1000
        different = (reference[branches][:, COMPARED] != mine[branches][:, COMPARED]).any(axis=1)
        kinds = reference[branches][:, [C_SIZE, C_OPCODE]].tolist()
        assert not (different & ~np.array([_bxns(isa, size, op) for size, op in kinds], bool)).any()


@pytest.mark.parametrize(
    ("snapshot", "files"),
    [
        ("Snowball", [("kernel_dump.bin", 0xC0008000, Isa.A32)]),
        ("tc2-ptm-rstk-t32", [("mem_Cortex-A15_0_0_VECTORS.bin", 0x80000000, Isa.A32),
                              ("mem_Cortex-A15_0_1_RO_CODE.bin", 0x80000278, Isa.T32)]),
        ("armv8_1m_branches", [("range1.bin", 0x1E008, Isa.T32), ("range2.bin", 0x4F9A02, Isa.T32)]),
    ],
)  # fmt: skip
def test_snapshot_code(snapshot: str, files: list[tuple[str, int, Isa]]) -> None:
    """The code of the PTM/ETM snapshots, in the instruction set each runs."""
    for name, address, isa in files:
        compare(shared("opencsd-snapshots", snapshot, name).read_bytes(), address, isa)


def test_tc2_etmv3_kernel_dump_in_shared_corpus() -> None:
    code = shared("tc2-etmv3", "kernel_dump.bin").read_bytes()
    compare(code, KERNEL_ADDRESS, Isa.T32)


@pytest.mark.parametrize("program", ["calls-a32", "calls-t32", "calls-armv5te", "calls-armv5te-thumb",
                                     "exceptions-a32"])  # fmt: skip
def test_corpus_programs(program: str) -> None:
    """The 32-bit corpus programs' images as A32 and as T32 (each holds functions of both)."""
    image = load_elf(CORPUS / f"{program}.elf")
    for region in image.regions:
        for isa in (Isa.A32, Isa.T32):
            compare(bytes(region.data), region.start, isa)


def test_random_a32_words() -> None:
    """Seeded random A32 words: every difference classed, and the classes that random words
    reach do occur (each would be a lie if it matched nothing)."""
    words = np.random.default_rng(22).integers(0, 1 << 32, 200_000, dtype=np.uint32)
    counts = compare(words.tobytes(), 0x10000, Isa.A32)
    assert all(counts[name] > 0 for name in ("simd", "floating_point", "hlt", "crc32", "cps"))


def test_random_t32_stream() -> None:
    """Seeded random halfwords as one T32 stream (IT blocks among them)."""
    halfwords = np.random.default_rng(22).integers(0, 1 << 16, 300_000, dtype=np.uint16)
    counts = compare(halfwords.tobytes(), 0x10000, Isa.T32)
    assert all(counts[name] > 0 for name in ("simd", "hlt", "bxns", "udf"))


@settings(max_examples=300, deadline=None)
@given(st.integers(0, (1 << 32) - 1))
def test_any_a32_word(word: int) -> None:
    compare(word.to_bytes(4, "little"), 0x8000, Isa.A32)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, (1 << 16) - 1), st.integers(0, (1 << 16) - 1), st.integers(0, 0xFF))
def test_any_t32_instruction_in_an_it_block(first: int, second: int, it: int) -> None:
    """Any instruction after an IT (or a hint, where the mask is 0)."""
    code = (0xBF00 | it).to_bytes(2, "little") + first.to_bytes(2, "little") + second.to_bytes(2, "little")
    compare(code, 0x8000, Isa.T32)


@pytest.mark.parametrize(
    ("isa", "opcode"),
    [
        (Isa.T32, 0xFA54FF05),  # asrs.w pc, r4, r5: flags set, so the next ISA is unknown
        (Isa.T32, 0xE84AFF6B),  # ttt pc, sl (Armv8-M), not a STREX writing pc
        (Isa.T32, 0xF3AF86DE),  # CPS with a mode but no M: undefined
        (Isa.T32, 0xF8BFF840),  # LDRH (literal, +) to pc: undefined; (-) is PLD
        (Isa.T32, 0xF83FF49F),
        (Isa.T32, 0xF3FF834F),  # MRS with its (0)s set: undefined
        (Isa.T32, 0xF846FE51),  # strt pc: capstone writes no pc; strbt pc: it does
        (Isa.T32, 0xF805FE5B),
        (Isa.T32, 0xE92F0045),  # stmdb pc!: no pc written, unlike stm pc!
        (Isa.A32, 0xB10F2700),  # MRS (banked) with its (0)s set
        (Isa.A32, 0x21F4CC9A),  # LDAH without (1)(1)(1)(1) in bits 3:0
        (Isa.A32, 0x01C8BC96),  # STLB without (1)(1)(1)(1) in bits 15:12
        (Isa.A32, 0xFC6FFD51),  # stc2l (a Q VSDOT with odd registers is none)
        (Isa.A32, 0x7008F8DA),  # LDRD of pc and a sixteenth register
    ],
)  # fmt: skip
def test_instructions_once_misclassified(isa: Isa, opcode: int) -> None:
    """Encodings the random samples found the classifier wrong on, each fixed: now as capstone."""
    if isa is Isa.T32:
        code = (opcode >> 16).to_bytes(2, "little") + (opcode & 0xFFFF).to_bytes(2, "little")
    else:
        code = opcode.to_bytes(4, "little")
    reference = capstone_columns(code, 0x8000, isa)
    mine = classifier_columns(code, 0x8000, isa, reference)
    assert reference[:1, COMPARED].tolist() == mine[:1, COMPARED].tolist()


def t32_row(halfwords: list[int], address: int = 0x1000, it_state: int = 0) -> tuple[np.ndarray, int]:
    row = np.zeros(C_COUNT, np.int64)
    code = np.frombuffer(b"".join(h.to_bytes(2, "little") for h in halfwords), np.uint8)
    return row, t32_flow(code, 0, address, it_state, row)


def test_t32_too_few_bytes() -> None:
    """C_SIZE 0 when the code ends inside the instruction; the IT state is unchanged."""
    row, state = t32_row([0xF000], it_state=0x18)
    assert row[C_SIZE] == 0 and state == 0x18
    row, state = t32_row([], it_state=0)
    assert row[C_SIZE] == 0


def test_known_instructions() -> None:
    """A few facts from the Arm ARM, not from capstone: BLX immediate's target is aligned and
    switches to A32; the loop instructions are jumps with their DDI 0553 targets."""
    row, _ = t32_row([0xF000, 0xE802], address=0x1002)  # blx #+4 from 0x1002: Align(0x1006, 4) + 4
    assert (row[C_TARGET], row[C_NEXT_ISA], KINDS[row[C_KIND]]) == (0x1008, Isa.A32, Kind.CALL)
    row, _ = t32_row([0xF044, 0xC003], address=0x1E0C4)  # wls lr, r4 (armv8_1m_branches)
    assert (row[C_TARGET], KINDS[row[C_KIND]]) == (0x1E0CC, Kind.JUMP)
    row = np.zeros(C_COUNT, np.int64)
    a32_flow(0xFA000001, 0x8000, row)  # blx from A32: H (bit 24) clear, target 0x8000 + 8 + 4
    assert (row[C_TARGET], row[C_NEXT_ISA]) == (0x800C, Isa.T32)
