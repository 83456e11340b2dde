"""flow: walking waypoint ops through the image gives the recorded run back."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from flow_ops import Stream, atom_ops, branch_ops, run_ops
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from paths import open_input, shared

from cputrace.flow.gaptexts import gap_texts
from cputrace.flow.ops import (
    ATOM_EXECUTED,
    EXCEPTION_CANCELS,
    EXCEPTION_NO_VECTOR,
    RUN_TAKEN,
    WAYPOINT_BEFORE_ADDRESS,
    WAYPOINT_RETURN_STACK,
    WAYPOINT_TAKEN,
    GapReason,
    Op,
    OpBuffer,
    Ops,
)
from cputrace.flow.program import BLOCK_END, NO_CODE, Program, found
from cputrace.flow.walker import Walker
from cputrace.image import Image, Region, load_elf
from cputrace.model import Flag, Isa

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def walk(program: Program, *op_batches: Ops, batch: int = 1 << 16) -> tuple[pa.Table, pa.Table, Walker]:
    walker = Walker(program, batch=batch)
    out = []
    for ops in op_batches:
        out += list(walker.run(ops))
    out += list(walker.finish())
    instructions = pa.concat_tables([b["instructions"] for b in out]) if out else None
    events = pa.concat_tables([b["events"] for b in out]) if out else None
    return instructions, events, walker


def ground_truth(trace: Path, elf: Path) -> tuple[Stream, Program]:
    table = open_input(trace).sql("SELECT pc, isa, executed FROM instructions ORDER BY seq")
    return Stream.of(table), Program(load_elf(elf))


@pytest.fixture(scope="module")
def quicksort() -> tuple[Stream, Program]:
    return ground_truth(EXAMPLES / "quicksort.tarmac", EXAMPLES / "quicksort.elf")


@pytest.fixture(scope="module")
def calculator32() -> tuple[Stream, Program]:
    samples = "tarmac-trace-utilities", "samples"
    return ground_truth(
        shared(*samples, "calculator-aarch32-fastmodel.tarmac"), shared(*samples, "calculator-aarch32.elf")
    )


@pytest.fixture(scope="module")
def calculator64() -> tuple[Stream, Program]:
    samples = "tarmac-trace-utilities", "samples"
    return ground_truth(
        shared(*samples, "calculator-aarch64-fastmodel.tarmac"), shared(*samples, "calculator-aarch64.elf")
    )


@pytest.mark.parametrize("style", [atom_ops, branch_ops, run_ops])
@pytest.mark.parametrize("run", ["quicksort", "calculator32"])
def test_walk_gives_the_recorded_run_back(style, run, request) -> None:
    stream, program = request.getfixturevalue(run)
    instructions, events, walker = walk(program, style(stream, program.blocks))
    assert events.num_rows == 0
    assert walker.dropped == 0
    assert instructions.column("pc").to_pylist() == stream.pc
    assert instructions.column("isa").to_pylist() == [isa.name for isa in stream.isa]
    assert instructions.column("seq").to_pylist() == list(range(len(stream.pc)))
    executed = instructions.column("executed").to_pylist()
    if style is atom_ops:
        assert executed == stream.executed
    else:  # known where the trace implies it, unknown (null) only for conditions it cannot see
        known = [(got, want) for got, want in zip(executed, stream.executed, strict=True) if got is not None]
        assert all(got == want for got, want in known)
        assert len(known) > len(executed) // 2
    assert set(instructions.column("flags").to_pylist()) == {Flag.RECONSTRUCTED}


def test_opcodes_come_from_the_image(quicksort) -> None:
    stream, program = quicksort
    instructions, _, _ = walk(program, atom_ops(stream, program.blocks))
    recorded = open_input(EXAMPLES / "quicksort.tarmac").sql(
        "SELECT opcode, size FROM instructions ORDER BY seq"
    )
    assert instructions.select(["opcode", "size"]).to_pydict() == recorded.to_pydict()


def test_small_batches_and_split_op_streams_change_nothing(quicksort) -> None:
    stream, program = quicksort
    ops = run_ops(stream, program.blocks)
    whole, _, _ = walk(program, ops)
    halves = [ops.select(slice(0, len(ops) // 2)), ops.select(slice(len(ops) // 2, None))]
    split, _, walker = walk(Program(program.blocks.image), *halves, batch=5)
    assert split.to_pydict() == whole.to_pydict()
    assert walker.next_seq == len(stream.pc)


def test_op_seq_ranges_locate_each_ops_instructions(quicksort) -> None:
    stream, program = quicksort
    ops = branch_ops(stream, program.blocks)
    walker = Walker(program)
    list(walker.run(ops))
    branches = np.flatnonzero(ops.kind == Op.BRANCH)
    last_of_op = walker.op_end[branches] - 1  # a BRANCH op ends with its branch
    assert [stream.pc[i] for i in last_of_op] == ops.address[branches].tolist()
    assert (walker.op_first <= walker.op_end).all()


def test_each_address_is_decoded_once(quicksort) -> None:
    stream, program = quicksort
    fresh = Program(program.blocks.image)
    walk(fresh, atom_ops(stream, program.blocks), atom_ops(stream, program.blocks))
    decoded = fresh.insns["pc"][: fresh.count]
    assert len(np.unique(decoded)) == len(decoded)  # whole blocks, each address once
    assert set(decoded.tolist()) >= set(stream.pc)


def test_a64_blocks_are_decoded_inside_the_walk(calculator64, monkeypatch: pytest.MonkeyPatch) -> None:
    """The walk decodes A64 blocks itself (program.found); Python decodes only where the
    records or the index need room, or a block runs on past its region."""
    stream, program = calculator64
    fresh = Program(program.blocks.image, capacity=16)  # the first block needs room: Python makes it
    calls = []
    decode = Program.decode
    monkeypatch.setattr(Program, "decode", lambda self, key: (calls.append(key), decode(self, key)))
    instructions, events, _ = walk(fresh, atom_ops(stream, program.blocks))
    assert events.num_rows == 0
    assert instructions.column("pc").to_pylist() == stream.pc
    assert instructions.column("executed").to_pylist() == stream.executed
    blocks = int((fresh.insns["flags"][: fresh.count] & BLOCK_END != 0).sum())
    assert 0 < len(calls) < blocks // 10


# Hand-made images for the edge cases: A32 words at 0x1000.
B_SELF = 0xEAFFFFFE  # b .
NOP = 0xE1A00000  # mov r0, r0
BX_LR = 0xE12FFF1E
BEQ_PLUS_8 = 0x0A000000  # beq .+8
SVC = 0xEF000000
UDF = 0xE7F000F0


def a32_program(*words: int, base: int = 0x1000, tail: bytes = b"") -> Program:
    code = b"".join(struct.pack("<I", w) for w in words) + tail
    return Program(Image([Region(base, code, "test")]))


def ops(*rows: dict) -> Ops:
    buffer = OpBuffer()
    for row in rows:
        buffer.add(**row)
    return buffer.take()


def sync(address: int, isa: Isa = Isa.A32) -> dict:
    return {"kind": Op.SYNC, "address": address, "isa": isa}


def atom(executed: bool = True) -> dict:
    return {"kind": Op.ATOM, "flags": ATOM_EXECUTED if executed else 0}


def run(count: int, flags: int = 0) -> dict:
    return {"kind": Op.RUN, "count": count, "flags": flags}


def branch(address: int, target: int, isa: Isa = Isa.A32) -> dict:
    return {"kind": Op.BRANCH, "address": address, "target": target, "isa": isa}


def target(address: int, isa: Isa = Isa.A32) -> dict:
    return {"kind": Op.TARGET, "address": address, "isa": isa}


def exception(address: int, flags: int = 0, isa: Isa = Isa.A32) -> dict:
    return {"kind": Op.EXCEPTION, "address": address, "flags": flags, "isa": isa}


TRAP = {"kind": Op.TRAP}


def test_an_address_outside_the_image_is_a_gap_then_the_next_address_resumes() -> None:
    program = a32_program(NOP, NOP, BX_LR)
    instructions, events, walker = walk(
        program,
        ops(sync(0x9000), atom(), atom(), target(0x1004),
            atom()),
    )  # fmt: skip
    assert events.column("name").to_pylist() == ["no_code"]
    assert events.column("value").to_pylist() == [0x9000]
    assert "0x9000" in events.column("text")[0].as_py()
    assert instructions.column("pc").to_pylist() == [0x1004]
    assert walker.dropped == 2


def test_thousands_of_gaps_come_out_with_their_rows_in_one_batch() -> None:
    """A walk that keeps leaving the image (a kernel's, 8,788 times in juno_r1_1) hands its rows
    over in one batch per run, not one per few hundred gaps, and names every gap's address."""
    program = a32_program(NOP, NOP, BX_LR)
    outside = [0x9000 + 4 * i for i in range(1000)]
    rows = [row for address in outside for row in (sync(address), atom(), target(0x1004), atom())]
    walker = Walker(program)
    batches = list(walker.run(ops(*rows))) + list(walker.finish())
    assert len(batches) == 2  # the run's rows, then the one held back
    events = pa.concat_tables([b["events"] for b in batches])
    assert events.column("value").to_pylist() == outside
    assert events.column("text").to_pylist() == [
        f"no instruction in the program image at this address at 0x{a:x} "
        f"(0x{a:x}: no A32 instruction in the program image there)"
        for a in outside
    ]
    assert pa.concat_tables([b["instructions"] for b in batches]).column("pc").to_pylist() == [0x1004] * 1000


def test_gap_texts_name_each_reason_address_and_first_failure() -> None:
    """The texts compiled code writes for trace gaps, written out here by hand: each reason's
    words, the address in hex (0 and the top of the address space alike), and at a NO_CODE
    address the first failure there: the walk's note of an address outside the image, or
    decoding's own text, whichever came first."""
    program = a32_program(NOP, NOP)
    p = program

    def note(address: int) -> None:  # the walk meets an address outside the image
        assert found((address << 3) | Isa.A32, p.insns, p.index.table, p.index.counts, p.code) == NO_CODE

    note(0x9000)
    program.decode((0x9000 << 3) | 7)  # an ISA the trace never gave: a failure after the note
    program.decode((0xA000 << 3) | 7)
    note(0xA000)  # after decoding's failure there
    gaps = [
        (GapReason.NO_CODE, 0x9000), (GapReason.NO_CODE, 0xA000), (GapReason.NO_CODE, 0xB000),
        (GapReason.UNDEFINED, 0x10), (GapReason.MISMATCH, 0), (GapReason.NO_TARGET, (1 << 64) - 1),
        (GapReason.VECTOR, 0), (GapReason.NO_CODE, 0x9000),
    ]  # fmt: skip
    reasons, addresses = np.array([r for r, _ in gaps], np.int64), np.array([a for _, a in gaps], np.uint64)
    texts = gap_texts(reasons, addresses, program)
    nothing = "no instruction in the program image at this address at"
    assert texts.to_pylist() == [
        f"{nothing} 0x9000 (0x9000: no A32 instruction in the program image there)",
        f"{nothing} 0xa000 (0xa000: the trace has not said which instruction set runs there)",
        f"{nothing} 0xb000",
        "undecodable or undefined instruction in the image at this address at 0x10",
        "the trace contradicts the program image here at 0x0",
        "an indirect branch was taken but the trace gave no target at 0xffffffffffffffff",
        "an exception entered a handler the trace does not locate",
        f"{nothing} 0x9000 (0x9000: no A32 instruction in the program image there)",
    ]
    assert program.failures == {
        0x9000: "0x9000: no A32 instruction in the program image there",
        0xA000: "0xa000: the trace has not said which instruction set runs there",
    }


def test_undecodable_bytes_end_the_walk_with_a_gap_and_nothing_unproven_is_emitted() -> None:
    program = a32_program(NOP, tail=b"\xff\xff\xff\xff")
    instructions, events, _ = walk(
        program,
        ops(sync(0x1000), atom(), sync(0x1000), run(3)),
    )
    assert events.column("name").to_pylist() == ["undefined"]
    assert events.column("value").to_pylist() == [0x1004]
    assert instructions.column("pc").to_pylist() == [0x1000]  # the atom's; the run cannot be walked
    assert events.column("seq").to_pylist() == [1]


def test_running_past_the_end_of_the_image_is_a_gap() -> None:
    program = a32_program(NOP, NOP)
    _, events, _ = walk(program, ops(sync(0x1000), run(4)))
    assert events.column("name").to_pylist() == ["no_code"]
    assert events.column("value").to_pylist() == [0x1008]


def test_a_trace_contradicting_the_image_is_a_gap_and_the_branch_source_resumes() -> None:
    program = a32_program(NOP, B_SELF, NOP, NOP, BX_LR)
    # the trace says the branch at 0x100c was taken, but 0x1004 branches unconditionally first
    instructions, events, _ = walk(
        program, ops(sync(0x1000), branch(0x1010, 0x1000), atom())
    )
    assert events.column("name").to_pylist() == ["mismatch"]
    assert events.column("value").to_pylist() == [0x1004]
    assert instructions.column("pc").to_pylist() == [0x1010, 0x1000]


def test_atoms_after_an_indirect_branch_without_target_are_a_gap() -> None:
    program = a32_program(BX_LR)
    instructions, events, walker = walk(
        program, ops(sync(0x1000), atom(), atom(), atom())
    )
    assert instructions.num_rows == 1
    assert events.column("name").to_pylist() == ["no_target"]
    assert walker.dropped == 2


def test_conditional_branch_atoms_and_condition_unknown_in_runs() -> None:
    program = a32_program(BEQ_PLUS_8, 0x03A00001, NOP, B_SELF)  # beq; moveq r0,#1; nop; b .
    instructions, _, _ = walk(
        program,
        ops(sync(0x1000), atom(False), atom(), sync(0x1000),
            atom(), atom(), sync(0x1000), run(3)),
    )  # fmt: skip
    assert instructions.column("pc").to_pylist() == [0x1000, 0x1004, 0x1000, 0x1008, 0x1000, 0x1004, 0x1008]
    assert instructions.column("executed").to_pylist() == [False, True, True, True, False, None, True]


def test_exception_cancels_the_last_instruction_and_enters_the_vector() -> None:
    program = a32_program(NOP, NOP, SVC, NOP, base=0)
    instructions, events, _ = walk(
        program,
        ops(sync(0), atom(), atom(),
            exception(0x8, EXCEPTION_CANCELS), atom()),
    )  # fmt: skip
    assert instructions.column("pc").to_pylist() == [0, 4, 8]
    assert instructions.column("executed").to_pylist() == [True, False, True]
    assert instructions.column("flags").to_pylist()[1] == Flag.RECONSTRUCTED | Flag.CANCELLED
    assert events.num_rows == 0


def test_a_run_before_an_address_stops_short_of_it_and_is_empty_when_already_there() -> None:
    """An ETMv4 exception's run ends before its preferred return address (IHI 0064, exception
    element): a not-taken conditional branch on the way is passed, and a second run to the
    same address walks nothing."""
    program = a32_program(NOP, BEQ_PLUS_8, NOP, NOP, BEQ_PLUS_8, NOP, NOP, base=0)
    before_0xc = {"kind": Op.WAYPOINT, "address": 0xC, "flags": WAYPOINT_BEFORE_ADDRESS}
    instructions, events, walker = walk(
        program,
        ops(sync(0), before_0xc, before_0xc, {"kind": Op.WAYPOINT, "flags": WAYPOINT_TAKEN},
            exception(0, EXCEPTION_NO_VECTOR), target(0x14), atom()),
    )  # fmt: skip
    assert instructions.column("pc").to_pylist() == [0, 4, 8, 0xC, 0x10, 0x14]
    assert instructions.column("executed").to_pylist() == [True, False, True, True, True, True]
    assert events.num_rows == 0 and walker.dropped == 0


def test_an_address_after_a_return_overrides_the_return_stack_which_keeps_its_entry() -> None:
    """ETMv4 (IHI 0064, return stack): a taken indirect branch pops the return stack only when
    no address follows it; when one does, the address wins and the entry stays."""
    bl_plus_16 = 0xEB000002  # bl .+16
    program = a32_program(bl_plus_16, NOP, BX_LR, NOP, BX_LR)
    taken = {"kind": Op.WAYPOINT, "flags": WAYPOINT_TAKEN | WAYPOINT_RETURN_STACK}
    instructions, events, _ = walk(program, ops(sync(0x1000), taken, taken, target(0x100C), taken, taken))
    assert instructions.column("pc").to_pylist() == [0x1000, 0x1010, 0x100C, 0x1010, 0x1004, 0x1008]
    assert events.num_rows == 0


def test_code_at_the_top_of_the_address_space_walks_and_names_its_gaps_unsigned() -> None:
    """An AArch64 kernel runs at 0xFFFF...: its addresses do not fit the int64 the walk keeps
    them in as keys, yet it walks, and a gap names the address as the trace gives it."""
    kernel = 0xFFFFFFC000081000
    a64_nop, a64_b_minus_4 = 0xD503201F, 0x17FFFFFF  # nop; b .-4
    program = a32_program(a64_nop, a64_b_minus_4, base=kernel)
    instructions, events, _ = walk(
        program, ops(sync(kernel, Isa.A64), atom(), atom(), atom(), target(kernel + 8, Isa.A64), atom())
    )
    assert instructions.column("pc").to_pylist() == [kernel, kernel + 4, kernel]
    assert events.column("value").to_pylist() == [kernel + 8]
    assert f"0x{kernel + 8:x}" in events.column("text")[0].as_py()


def test_a_kernel_return_without_target_names_its_address_unsigned() -> None:
    """ETMv4 waypoints through an AArch64 kernel's `ret`, taken with no address after it the
    second time: the gap names the `ret`'s address (a walk that kept it as a float named
    0x8000000000000000)."""
    kernel = 0xFFFFFFC000081000
    a64_nop, a64_ret = 0xD503201F, 0xD65F03C0
    program = a32_program(a64_nop, a64_ret, base=kernel)
    taken = {"kind": Op.WAYPOINT, "flags": WAYPOINT_TAKEN}
    instructions, events, walker = walk(
        program, ops(sync(kernel, Isa.A64), taken, target(kernel, Isa.A64), taken, taken)
    )
    assert instructions.column("pc").to_pylist() == [kernel, kernel + 4] * 2
    assert events.column("name").to_pylist() == ["no_target"]
    assert events.column("value").to_pylist() == [kernel + 4]
    assert f"0x{kernel + 4:x}" in events.column("text")[0].as_py()
    assert walker.dropped == 1


def test_trap_runs_to_the_exception_generating_instruction() -> None:
    program = a32_program(NOP, NOP, SVC, NOP, BX_LR, base=0)
    instructions, events, _ = walk(
        program,
        ops(sync(0), TRAP, exception(0x8), run(1),
            exception(0, EXCEPTION_NO_VECTOR), run(1), branch(0x10, 0x0)),
    )  # fmt: skip
    assert instructions.column("pc").to_pylist() == [0, 4, 8, 8, 0x10]
    assert events.column("name").to_pylist() == ["vector"]
    assert events.column("number").to_pylist() == [GapReason.VECTOR]


# SPARC: words at 0x40000000 (big-endian).
SPARC_NOP = 0x01000000
SPARC_BA_PLUS_12 = 0x10800003  # ba .+12
SPARC_BA_A_PLUS_12 = 0x30800003  # ba,a .+12
SPARC_BNE_A_PLUS_12 = 0x32800003  # bne,a .+12


def sparc_program(*words: int) -> Program:
    code = b"".join(struct.pack(">I", w) for w in words)
    return Program(Image([Region(0x40000000, code, "test")]))


@pytest.mark.parametrize(
    ("branch", "taken", "pcs", "executed"),
    [
        (SPARC_BA_PLUS_12, True, [0, 4, 12], [True, True, True]),
        (SPARC_BA_A_PLUS_12, True, [0, 4, 12], [True, False, True]),
        (SPARC_BNE_A_PLUS_12, True, [0, 4, 12], [True, True, True]),
        (SPARC_BNE_A_PLUS_12, False, [0, 4, 8], [False, False, True]),
    ],
)
def test_sparc_delay_slots_and_annulling(branch, taken, pcs, executed) -> None:
    program = sparc_program(branch, SPARC_NOP, SPARC_NOP, SPARC_NOP)
    first = run(1, RUN_TAKEN if taken else 0)
    instructions, events, _ = walk(program, ops(sync(0x40000000, Isa.SPARC), first, run(1)))
    assert events.num_rows == 0
    assert [pc - 0x40000000 for pc in instructions.column("pc").to_pylist()] == pcs
    assert instructions.column("executed").to_pylist() == executed


ADDRESSES = st.integers(0x80000, 0x80400) | st.integers(0, 2**40)
OP_ROWS = st.fixed_dictionaries(
    {
        "kind": st.sampled_from(list(Op)),
        "address": ADDRESSES,
        "target": ADDRESSES,
        "count": st.integers(0, 40) | st.integers(0, 2**40),
        "flags": st.integers(0, 3),
        "isa": st.sampled_from([Isa.A64, Isa.A32, Isa.T32]),
    }
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(OP_ROWS, max_size=40))
def test_any_op_stream_walks_without_crashing(quicksort, rows) -> None:
    _, program = quicksort
    instructions, events, walker = walk(program, ops(*rows), batch=3)
    n = 0 if instructions is None else instructions.num_rows
    assert walker.next_seq == n
    if n:
        assert instructions.column("seq").to_pylist() == list(range(n))
    if events is not None and events.num_rows:
        assert set(events.column("kind").to_pylist()) == {"trace_gap"}


def test_an_address_whose_instruction_set_the_trace_left_unknown_is_a_failure_there() -> None:
    """An ETMv4 address before any context packet has no instruction set (ISA_UNKNOWN, 255):
    the walk's key then holds 7, which names none; decoding there fails with a reason (a
    fuzzed speculative snapshot raised ValueError from Isa(7) instead)."""
    program = Program(Image([Region(0x1000, bytes(16), "test")]))
    program.decode((0x1000 << 3) | (255 & 7))
    assert program.count == 0
    assert program.failures[0x1000] == "0x1000: the trace has not said which instruction set runs there"
