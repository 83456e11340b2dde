"""Recording real programs under unicorn: the corpus in tests/corpus, checked against the
program image, flow-only traces against full ones, and Fast Models traces of the same programs."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

import pytest
from click.testing import CliRunner
from elftools.elf.elffile import ELFFile
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from paths import DATA, shared

import cputrace
from cputrace.cli import cli
from cputrace.errors import CputraceError
from cputrace.image import Image, load_elf
from cputrace.ingest import ingest
from cputrace.isa import BlockCache
from cputrace.model import Isa
from cputrace.record import RecordResult, StopReason, choose_cpu, load_program, record
from cputrace.record.conditions import condition_passed
from cputrace.record.cpus import Arch, CpuChoiceError
from cputrace.record.semihosting import APPLICATION_EXIT, Semihosting
from cputrace.store.trace import Trace

CORPUS = Path(__file__).parent / "corpus"
LIMIT = 200_000  # far above what any corpus program runs: a runaway program stops here

CALLS_OUTPUT = (
    b"calls: start\nfib(15) = 610\nhanoi(8) = 255\nsorted = 1\nsmallest = 16\n6! = 720\n"
    b"100-10-..-1 = 45\nfold = 31\nfold = -25\nfold = 6480\nfold = 9\nchecksum = 1100385\n"
)
EXCEPTIONS_OUTPUT = b"exceptions: sum of SVC numbers = 6\n"
EXCEPTIONS_A32_OUTPUT = b"exceptions: semihosting from T32\n" + EXCEPTIONS_OUTPUT


@dataclass(frozen=True)
class Case:
    name: str
    cpu: str | None
    status: int
    output: bytes
    isas: frozenset[str]


CASES = [
    Case("calls-a32", None, 0, CALLS_OUTPUT, frozenset({"A32", "T32"})),
    Case("calls-t32", None, 0, CALLS_OUTPUT, frozenset({"A32", "T32"})),
    Case("calls-a64", None, 0, CALLS_OUTPUT, frozenset({"A64"})),
    Case("calls-armv5te", "pxa270", 0, CALLS_OUTPUT, frozenset({"A32", "T32"})),
    Case("exceptions-a32", None, 6, EXCEPTIONS_A32_OUTPUT, frozenset({"A32", "T32"})),
    Case("exceptions-a64", None, 5, EXCEPTIONS_OUTPUT, frozenset({"A64"})),
]


@dataclass
class Recording:
    """One corpus program recorded in both modes, and both traces ingested strictly."""

    case: Case
    image: Image
    full: RecordResult
    flow: RecordResult
    trace: Trace
    flow_trace: Trace


def record_both(elf: Path, folder: Path, **options) -> tuple[RecordResult, RecordResult, Trace, Trace]:
    full = record(elf, folder / "full.tarmac", **options)
    flow = record(elf, folder / "flow.tarmac", flow_only=True, **options)
    traces = []
    for kind, result in (("full", full), ("flow", flow)):
        # without its image, a flow-only trace is one warning naming --image (an error with --strict)
        ingested = ingest([result.trace], folder / f"{kind}.ctrace", strict=kind == "full")
        assert ingested.manifest["warnings"]["count"] == (kind == "flow")
        traces.append(cputrace.open(ingested.store))
    return full, flow, traces[0], traces[1]


@pytest.fixture(scope="module")
def recordings(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[str], Recording]]:
    """Each corpus program recorded once per test module, when a test first asks for it."""
    done: dict[str, Recording] = {}

    def get(name: str) -> Recording:
        if name not in done:
            case = next(c for c in CASES if c.name == name)
            elf = CORPUS / f"{name}.elf"
            full, flow, trace, flow_trace = record_both(
                elf, tmp_path_factory.mktemp(name), cpu=case.cpu, max_insns=LIMIT
            )
            done[name] = Recording(case, load_elf(elf), full, flow, trace, flow_trace)
        return done[name]

    yield get
    for recording in done.values():
        recording.trace.close()
        recording.flow_trace.close()


@pytest.fixture(params=[c.name for c in CASES])
def recording(request: pytest.FixtureRequest, recordings: Callable[[str], Recording]) -> Recording:
    return recordings(request.param)


# -- the image walk: what every recorded trace must agree with ------------------------------


def instruction_rows(trace: Trace) -> list[dict]:
    return trace.instructions.select(["seq", "pc", "opcode", "size", "isa", "executed"]).to_pylist()


def exception_events(trace: Trace) -> list[dict]:
    """Exceptions the program took (not the reset at the start), in order."""
    return trace.sql(
        "SELECT seq, number, name, value, value1 FROM events "
        "WHERE kind = 'exception' AND number != 1 ORDER BY src"
    ).to_pylist()


def taken_branches(trace: Trace, image: Image) -> list[tuple[str, int, int, str]]:
    """(FD|FI, source, target, ISA after) of every branch the full trace shows taken."""
    cache = BlockCache(image)
    rows = instruction_rows(trace)
    excepted = {e["seq"] for e in exception_events(trace)}
    taken = []
    for cur, nxt in pairwise(rows):
        info = cache.insn_at(cur["pc"], Isa[cur["isa"]])
        if not (info.is_branch and cur["executed"]) or cur["seq"] in excepted:
            continue
        if nxt["pc"] != info.next_address or not info.is_conditional:
            taken.append(("FD" if info.is_direct else "FI", cur["pc"], nxt["pc"], nxt["isa"]))
    return taken


def test_program_prints_and_exits_through_semihosting(recording: Recording) -> None:
    case = recording.case
    for result in (recording.full, recording.flow):
        assert result.reason is StopReason.EXIT
        assert result.exit is not None and result.exit.status == case.status
        assert result.exit.reason == APPLICATION_EXIT
        assert result.stdout == case.output and result.stderr == b""
    assert recording.flow.instructions == recording.full.instructions
    assert recording.trace.manifest["counts"]["instructions"] == recording.full.instructions


def test_every_instruction_and_every_step_follows_the_image(recording: Recording) -> None:
    """Opcodes and sizes are the image's; each next pc is the fall-through, a branch's target
    (direct: the encoded one; indirect: any), or an exception vector."""
    cache = BlockCache(recording.image)
    rows = instruction_rows(recording.trace)
    exceptions = {e["seq"]: e for e in exception_events(recording.trace)}
    assert {r["isa"] for r in rows} == recording.case.isas
    for n, (cur, nxt) in enumerate(zip(rows, [*rows[1:], None], strict=True)):
        info = cache.insn_at(cur["pc"], Isa[cur["isa"]])
        assert (cur["opcode"], cur["size"]) == (info.opcode, info.size), cur
        if not cur["executed"]:  # A32 conditions, or a T32 IT block that covers it
            it_before = any(
                r["isa"] == "T32" and r["opcode"] & 0xFF00 == 0xBF00 for r in rows[max(0, n - 4) : n]
            )
            assert info.is_conditional or it_before, cur
        if nxt is None:
            break
        exception = exceptions.get(cur["seq"])
        if exception is not None:
            assert (exception["value"], exception["value1"]) == (cur["pc"], nxt["pc"])
        elif cur["executed"] and info.is_branch:
            if info.is_direct:
                assert nxt["pc"] in (info.target, info.next_address if info.is_conditional else None), cur
            if info.next_isa is not None and nxt["pc"] != info.next_address:
                assert nxt["isa"] == info.next_isa.name, cur
        else:
            assert (nxt["pc"], nxt["isa"]) == (info.next_address, cur["isa"]), cur


def test_memory_reads_return_what_the_image_and_earlier_writes_hold(recording: Recording) -> None:
    image = recording.image
    known: dict[int, int] = {}
    checked = 0
    for row in recording.trace.sql("SELECT op, addr, size, value FROM memory ORDER BY seq, src").to_pylist():
        data = row["value"].to_bytes(row["size"], "little")
        for offset, byte in enumerate(data):
            address = row["addr"] + offset
            if row["op"] == "W":
                known[address] = byte
                continue
            expected = known.get(address)
            if expected is None and image.contains(address):
                expected = image.read(address, 1)[0]
            if expected is not None:
                assert byte == expected, row
                checked += 1
    assert checked > 0


def test_register_records_show_calls_and_state_changes(recording: Recording) -> None:
    """A call writes the link register with its return address (bit 0 set when returning
    to T32); a CPSR write holds the state (T bit) of the next instruction."""
    trace = recording.trace
    cache = BlockCache(recording.image)
    rows = instruction_rows(trace)
    writes: dict[int, dict[str, int]] = {}
    for w in trace.sql("SELECT seq, reg, value FROM registers").to_pylist():
        writes.setdefault(w["seq"], {})[w["reg"]] = w["value"]
    calls = 0
    for cur, nxt in pairwise(rows):
        info = cache.insn_at(cur["pc"], Isa[cur["isa"]])
        written = writes.get(cur["seq"], {})
        if info.kind == "call" and cur["executed"]:
            link = [v for reg, v in written.items() if reg == "x30" or reg.startswith("r14_")]
            assert link == [info.next_address | (cur["isa"] == "T32")], cur
            calls += 1
        if "cpsr" in written and cur["isa"] != "A64":
            assert bool(written["cpsr"] & 0x20) == (nxt["isa"] == "T32"), cur
    assert calls > 0


def test_flow_only_trace_describes_the_same_run(recording: Recording) -> None:
    """The FD/FI records are exactly the branches the full trace takes, with the same
    exceptions; both traces end at the same instruction count."""
    flow = recording.flow_trace
    records = flow.sql(
        "SELECT name, value, value1 FROM events WHERE kind = 'branch' ORDER BY src"
    ).to_pylist()
    got = [(r["name"].split()[0], r["value"], r["value1"], r["name"].split()[1]) for r in records]
    assert got == taken_branches(recording.trace, recording.image)
    assert flow.manifest["counts"]["instructions"] == 0
    strip = [{k: v for k, v in e.items() if k != "seq"} for e in exception_events(recording.trace)]
    assert [{k: v for k, v in e.items() if k != "seq"} for e in exception_events(flow)] == strip
    for trace in (recording.trace, flow):
        reset = trace.sql("SELECT value, time FROM events WHERE number = 1").to_pylist()
        assert reset == [{"value": load_program(CORPUS / f"{recording.case.name}.elf").entry, "time": 0}]
        stop = trace.sql("SELECT time FROM events WHERE kind = 'text' AND text LIKE '%simulation_stopped'")
        assert stop.column("time").to_pylist() == [recording.full.instructions]


# -- exceptions in detail -------------------------------------------------------------------


def test_aarch32_exception_entry_sets_mode_link_register_and_spsr(
    recordings: Callable[[str], Recording],
) -> None:
    trace = recordings("exceptions-a32").trace
    events = exception_events(trace)
    assert [(e["number"], e["name"]) for e in events] == [
        (3, "CoreEvent_SWI"), (3, "CoreEvent_SWI"), (2, "CoreEvent_UndefinedInstr"),
        (4, "CoreEvent_PrefetchAbort"), (3, "CoreEvent_SWI"), (2, "CoreEvent_UndefinedInstr"),
    ]  # fmt: skip
    vbar = load_elf(CORPUS / "exceptions-a32.elf").symbols.address_of("vectors")
    assert [e["value1"] - vbar for e in events] == [8, 8, 4, 12, 8, 4]
    rows = {r["seq"]: r for r in instruction_rows(trace)}
    for e in events:
        insn = rows[e["seq"]]
        mode = {3: "svc", 2: "und", 4: "abt"}[e["number"]]
        regs = {
            r["reg"]: r["value"]
            for r in trace.sql(f"SELECT reg, value FROM registers WHERE seq = {e['seq']}").to_pylist()
        }
        thumb = insn["isa"] == "T32"
        # the return address: after the SVC; the faulting instruction + 4 (A32) / + 2 (T32)
        # for Undefined; + 4 for a prefetch abort. All three are the next instruction here.
        assert regs[f"r14_{mode}"] == insn["pc"] + (2 if thumb else 4)
        assert regs["cpsr"] & 0x3F == {"svc": 0x13, "und": 0x1B, "abt": 0x17}[mode]
        assert bool(regs[f"spsr_{mode}"] & 0x20) == thumb and regs[f"spsr_{mode}"] & 0x1F == 0x10
    modes = set(trace.instructions.column("mode").to_pylist())
    assert modes == {"svc_s", "und_s", "abt_s", "usr_s"}


def test_aarch64_exception_entry_sets_elr_esr_and_spsr(recordings: Callable[[str], Recording]) -> None:
    trace = recordings("exceptions-a64").trace
    events = exception_events(trace)
    assert {(e["number"], e["name"]) for e in events} == {(0x84, "CoreEvent_CURRENT_SPx_SYNC")}
    vbar = load_elf(CORPUS / "exceptions-a64.elf").symbols.address_of("vectors")
    assert all(e["value1"] == vbar + 0x200 for e in events)
    classes = []
    for e in events:
        regs = {
            r["reg"]: r["value"]
            for r in trace.sql(f"SELECT reg, value FROM registers WHERE seq = {e['seq']}").to_pylist()
        }
        classes.append((regs["esr_el1"] >> 26, regs["esr_el1"] & 0xFFFF))
        svc = regs["esr_el1"] >> 26 == 0x15  # returns after the SVC; UDF and BRK to themselves
        assert regs["elr_el1"] == e["value"] + (4 if svc else 0)
        assert regs["spsr_el1"] & 0xF == 0b0101  # taken from EL1h
    assert classes == [(0x15, 1), (0x15, 2), (0x00, 0), (0x3C, 5), (0x15, 3)]


# -- limits, faults and the command line ----------------------------------------------------


def test_instruction_limit_stops_both_modes_at_the_same_point(tmp_path: Path) -> None:
    full, flow, trace, flow_trace = record_both(CORPUS / "calls-t32.elf", tmp_path, max_insns=1500)
    with trace, flow_trace:
        for result in (full, flow):
            assert (result.reason, result.instructions, result.exit) == (StopReason.LIMIT, 1500, None)
        assert trace.manifest["counts"]["instructions"] == 1500
        records = flow_trace.sql(
            "SELECT value, text FROM events WHERE kind = 'branch' ORDER BY src"
        ).to_pylist()
        taken = taken_branches(trace, load_elf(CORPUS / "calls-t32.elf"))
        assert [r["value"] for r in records[: len(taken)]] == [t[1] for t in taken]
        # the last instruction's branch has no next instruction in the full trace to show it
        last = trace.instructions.slice(1499).to_pylist()[0]
        assert [r["text"].split()[1] for r in records[len(taken) :]] in ([], ["(1500)"])
        assert all(r["value"] == last["pc"] for r in records[len(taken) :])
        for t in (trace, flow_trace):
            stop = t.sql("SELECT time FROM events WHERE kind = 'text'").column("time").to_pylist()
            assert stop == [1500]


def test_fault_names_pc_and_access_and_keeps_the_trace(tmp_path: Path) -> None:
    """Arm's quicksort.elf expects RAM below 1 MiB for its stack: without it, the first push faults."""
    out = tmp_path / "q.tarmac"
    with pytest.raises(
        CputraceError, match=r"pc 0x800c after 4 instructions: write of 8 bytes at unmapped address 0xffff0"
    ):
        record(DATA / "image" / "quicksort.elf", out)
    lines = out.read_text().splitlines()
    assert lines[-1] == "4 clk CADI E simulation_stopped"
    assert sum(" IT (" in line for line in lines) == 4


def test_command_line_records_and_exits_with_the_program_status(tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "e.tarmac"
    result = runner.invoke(cli, ["record", str(CORPUS / "exceptions-a32.elf"), "-o", str(out)])
    assert result.exit_code == 6, result.output
    assert result.stdout == EXCEPTIONS_A32_OUTPUT.decode()
    assert "142 instructions on cortex-a15" in result.stderr and "exited with status 6" in result.stderr
    assert out.read_text().startswith("0 clk E 00008020 00000001 CoreEvent_Reset\n")

    flow = tmp_path / "c.tarmac"
    args = ["record", str(CORPUS / "calls-a64.elf"), "-o", str(flow), "--flow-only", "--max-insns", "50"]
    result = runner.invoke(cli, args)
    assert result.exit_code == 0 and "stopped after 50 instructions" in result.stderr
    assert all(" FD (" in line or " FI (" in line or " E " in line for line in flow.read_text().splitlines())

    result = runner.invoke(cli, ["record", str(DATA / "image" / "quicksort.elf"), "-o", str(tmp_path / "q")])
    assert result.exit_code == 1 and "unmapped address 0xffff0" in result.stderr
    ram = ["--ram", "0:0x100000"]
    result = runner.invoke(
        cli, ["record", str(DATA / "image" / "quicksort.elf"), "-o", str(tmp_path / "q"), *ram]
    )
    assert result.exit_code == 0 and result.stdout == "abcdeeefghhijklmnoooopqrrsttuuvwxyz\n"

    for bad in (["--cpu", "pxa270"], ["--cpu", "cortex-m3"], ["--ram", "0x1000"], ["--max-insns", "0"]):
        result = runner.invoke(cli, ["record", str(CORPUS / "calls-a64.elf"), "-o", str(flow), *bad])
        assert result.exit_code == 2, bad


# -- Fast Models traces of the same programs ------------------------------------------------


@pytest.mark.parametrize(
    "elf, reference",
    [
        ("quicksort.elf", "quicksort.tarmac"),
        ("calltest32.elf", "calltests/calltest32.tarmac"),
        ("calltest64.elf", "calltests/calltest64.tarmac"),
    ],
)
def test_programs_run_by_fast_models_give_the_same_trace(tmp_path: Path, elf: str, reference: str) -> None:
    """Arm's sample programs (run by Fast Models for tarmac-trace-utilities) recorded here:
    the same instructions, condition results and memory accesses, and register values that
    Fast Models also reports (it reports writes of unchanged values too; it runs them at
    EL3, unicorn at EL1, so SP and CPSR mode bits differ)."""
    fast_models = shared("tarmac-trace-utilities", "tests", reference)
    record(DATA / "image" / elf, tmp_path / "ours.tarmac", ram=[(0, 0x100000)], max_insns=LIMIT)
    ours = cputrace.open(ingest([tmp_path / "ours.tarmac"], tmp_path / "ours.ctrace", strict=True).store)
    theirs = cputrace.open(ingest([fast_models], tmp_path / "fm.ctrace", strict=True).store)
    with ours, theirs:
        columns = ["pc", "opcode", "size", "isa", "executed"]
        assert (
            ours.instructions.select(columns).to_pylist() == theirs.instructions.select(columns).to_pylist()
        )
        memory = "SELECT seq, op, size, addr, value FROM memory ORDER BY seq, src"
        assert ours.sql(memory).to_pylist() == theirs.sql(memory).to_pylist()
        general = (
            "SELECT seq, reg, value FROM registers "
            "WHERE seq > 0 AND regexp_matches(reg, '^(r[0-9]|r1[0-2]|x[0-9]+)$')"
        )
        mine = {tuple(r.values()) for r in ours.sql(general).to_pylist()}
        assert mine and mine <= {tuple(r.values()) for r in theirs.sql(general).to_pylist()}


# -- the parts ------------------------------------------------------------------------------


def test_conditions() -> None:
    n, z, c, v = 8, 4, 2, 1
    assert condition_passed(None, 0) and condition_passed("eq", z) and not condition_passed("eq", 0)
    assert condition_passed("hi", c) and not condition_passed("hi", c | z)
    assert condition_passed("ge", n | v) and condition_passed("lt", n) and not condition_passed("gt", z)
    assert condition_passed("le", z) and condition_passed("ls", 0) and condition_passed("vs", v)


def test_semihosting_operations() -> None:
    memory = bytearray(256)
    memory[0x10:0x16] = b"hello\0"
    out: list[tuple[int, bytes]] = []

    def call(pointer: int, op: int, param: int):
        return Semihosting(
            lambda a, n: bytes(memory[a : a + n]), pointer, lambda s, d: out.append((s, d))
        ).call(op, param)

    assert call(4, 0x04, 0x10).value is None and out.pop() == (1, b"hello")
    assert call(4, 0x03, 0x11).value is None and out.pop() == (1, b"e")
    memory[0x40:0x4C] = (2).to_bytes(4, "little") + (0x10).to_bytes(4, "little") + (3).to_bytes(4, "little")
    assert call(4, 0x05, 0x40).value == 0 and out.pop() == (2, b"hel")
    memory[0x40:0x44] = (7).to_bytes(4, "little")  # not a handle the recorder knows: nothing written
    assert call(4, 0x05, 0x40).value == 3 and not out
    assert call(4, 0x18, APPLICATION_EXIT).exit.status == 0  # AArch32: the reason itself
    assert call(4, 0x18, 0x20023).exit.status == 1
    memory[0x80:0x90] = APPLICATION_EXIT.to_bytes(8, "little") + (42).to_bytes(8, "little")
    assert call(8, 0x18, 0x80).exit.status == 42  # AArch64: a parameter block
    memory[0x80:0x88] = APPLICATION_EXIT.to_bytes(4, "little") + (9).to_bytes(4, "little")
    assert call(4, 0x20, 0x80).exit.status == 9
    with pytest.raises(CputraceError, match="semihosting operation 0x1 is not supported"):
        call(4, 0x01, 0)


def test_program_and_cpu_choice_errors(tmp_path: Path) -> None:
    with pytest.raises(CputraceError, match="cannot run EM_X86_64 code"):
        load_program(DATA / "image" / "lines-dwarf4.elf")
    text = tmp_path / "text.elf"
    text.write_bytes(b"not an ELF file at all")
    with pytest.raises(CputraceError, match="not a valid ELF file"):
        load_program(text)
    assert choose_cpu(Arch.ARM).name == "cortex-a15" and choose_cpu(Arch.AARCH64).name == "cortex-a72"
    with pytest.raises(CpuChoiceError, match="runs EM_AARCH64 code"):
        choose_cpu(Arch.ARM, "cortex-a53")
    with pytest.raises(CpuChoiceError, match="unknown CPU model"):
        choose_cpu(Arch.ARM, "z80")
    program = load_program(CORPUS / "calls-t32.elf")
    assert program.entry_isa is Isa.A32 and program.segments[0][0] == 0x8000  # crt0 is A32


CORPUS_ELF = (CORPUS / "calls-a32.elf").read_bytes()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(changes=st.lists(st.tuples(st.integers(0, len(CORPUS_ELF) - 1), st.integers(0, 255)), max_size=8),
       cut=st.integers(0, len(CORPUS_ELF)))  # fmt: skip
def test_damaged_programs_fail_only_with_cputrace_errors(tmp_path: Path, changes, cut) -> None:
    data = bytearray(CORPUS_ELF[:cut])
    for at, value in changes:
        if at < len(data):
            data[at] = value
    path = tmp_path / "damaged.elf"
    path.write_bytes(bytes(data))
    with contextlib.suppress(CputraceError):
        load_program(path)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    name=st.sampled_from(["calls-a32", "calls-t32", "calls-a64"]),
    changes=st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(0, 255)), min_size=1, max_size=6),
    flow_only=st.booleans(),
)
def test_programs_with_damaged_code_end_with_cputrace_errors_or_normally(
    tmp_path: Path, name: str, changes: list[tuple[int, int]], flow_only: bool
) -> None:
    """Whatever the code does (undefined instructions, wild jumps, unsupported calls, loops),
    a run ends: normally, at the instruction limit, or with a CputraceError."""
    data = bytearray((CORPUS / f"{name}.elf").read_bytes())
    with open(CORPUS / f"{name}.elf", "rb") as stream:
        segment = ELFFile(stream).get_segment(0)
        offset, size = segment["p_offset"], segment["p_filesz"]
    for at, value in changes:
        data[offset + at % size] = value
    path = tmp_path / "damaged.elf"
    path.write_bytes(bytes(data))
    with contextlib.suppress(CputraceError):
        result = record(path, tmp_path / "d.tarmac", max_insns=1000, flow_only=flow_only)
        assert result.instructions <= 1000
