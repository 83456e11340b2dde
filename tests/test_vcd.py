"""VCD export: read back with pyvcd's reader, the waveform agrees with the trace and its state."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner
from paths import DATA, shared
from vcd.reader import TokenKind, tokenize

import cputrace
from cputrace.analysis.state import StateIndex
from cputrace.cli import cli
from cputrace.errors import CputraceError
from cputrace.export.vcd import _finer, _steps, write_vcd_stream
from cputrace.image import load_elf


class Waveform:
    """A VCD file replayed: declarations by scope path, and every change per variable."""

    def __init__(self, path: Path) -> None:
        self.vars: dict[str, str] = {}  # "cpu0.regs.x8" -> id code
        self.sizes: dict[str, int] = {}
        self.changes: dict[str, list[tuple[int, object]]] = {}
        self.times: list[int] = []
        self.timescale = ""
        self.comment = ""
        scope: list[str] = []
        time = 0
        with open(path, "rb") as stream:
            for token in tokenize(stream):
                kind, data = token.kind, token.data
                if kind is TokenKind.SCOPE:
                    scope.append(data.ident)
                elif kind is TokenKind.UPSCOPE:
                    scope.pop()
                elif kind is TokenKind.VAR:
                    name = ".".join([*scope, data.reference])
                    self.vars[name] = data.id_code
                    self.sizes[name] = data.size
                elif kind is TokenKind.TIMESCALE:
                    self.timescale = str(data)
                elif kind is TokenKind.COMMENT:
                    self.comment = data
                elif kind is TokenKind.CHANGE_TIME:
                    time = data
                    self.times.append(time)
                elif kind in (TokenKind.CHANGE_VECTOR, TokenKind.CHANGE_STRING):
                    self.changes.setdefault(data.id_code, []).append((time, data.value))

    def values(self, name: str) -> list[object]:
        return [v for _, v in self.changes.get(self.vars[name], [])]

    def final(self, name: str) -> object:
        return self.values(name)[-1]


@pytest.fixture(scope="module")
def quicksort(tmp_path_factory: pytest.TempPathFactory, open_input) -> tuple[cputrace.Trace, Waveform]:
    trace = open_input(shared("tarmac-trace-utilities", "tests", "quicksort.tarmac"))
    out = tmp_path_factory.mktemp("vcd") / "qs.vcd"
    with open(out, "wb") as stream:
        write_vcd_stream(trace, stream, image=load_elf(DATA / "image" / "quicksort.elf"))
    return trace, Waveform(out)


def test_pc_and_time(quicksort) -> None:
    """STP makes two accesses in one instruction: time runs 10 steps per clk."""
    trace, wave = quicksort
    rows = trace.sql("SELECT time, pc FROM instructions ORDER BY seq").to_pylist()
    assert wave.comment.strip() == (
        "cputrace: time in clk; 10 steps per clk of time, an instruction's memory accesses one step apart"
    )
    assert wave.timescale == "100 ps"
    pcs = wave.changes[wave.vars["cpu0.pc"]]
    assert pcs[1:] == [(10 * r["time"], r["pc"]) for r in rows]  # after the initial x
    assert wave.times == sorted(wave.times)


def test_every_access_of_a_multiple_transfer_shows(tmp_path: Path, open_input) -> None:
    """PUSH {r4,r5,r11,lr} and STM sp,{r0-r2}: each access at its own time, in trace order."""
    trace = open_input(shared("tarmac-trace-utilities", "samples", "calculator-aarch32-fastmodel.tarmac"))
    out = tmp_path / "calc.vcd"
    with open(out, "wb") as stream:
        write_vcd_stream(trace, stream)
    wave = Waveform(out)
    assert wave.timescale == "100 ps" and "10 steps per clk" in wave.comment
    accesses = trace.sql(
        "SELECT m.seq, i.time, m.addr, m.value FROM memory m JOIN instructions i USING (seq) "
        "ORDER BY m.seq, m.src"
    ).to_pylist()
    assert max(Counter(a["seq"] for a in accesses).values()) == 4
    expected, previous, step = [], None, 0
    for access in accesses:
        step = step + 1 if access["seq"] == previous else 0
        previous = access["seq"]
        expected.append((10 * access["time"] + step, access["addr"], access["value"]))
    addresses = wave.changes[wave.vars["cpu0.bus.addr"]][1:]
    data = wave.changes[wave.vars["cpu0.bus.data"]][1:]
    # no change overwritten by another at the same time: the viewer shows each of them
    assert [(t, a, d) for (t, a), (_, d) in zip(addresses, data, strict=True)] == expected
    assert len({t for t, _ in addresses}) == len(accesses)


def test_registers_end_as_the_state_says(quicksort) -> None:
    trace, wave = quicksort
    last = trace.manifest["counts"]["instructions"] - 1
    registers = StateIndex.open(trace).registers(last)
    assert len(registers) > 30
    for register in registers:
        name = f"cpu0.regs.{register.name}"
        assert wave.sizes[name] == 8 * len(register.data)
        assert wave.final(name) == register.value, register.name


def test_function_and_memory_bus(quicksort) -> None:
    trace, wave = quicksort
    image = load_elf(DATA / "image" / "quicksort.elf")
    names = wave.values("cpu0.function")
    pcs = trace.sql("SELECT pc FROM instructions ORDER BY seq").column("pc").to_pylist()
    expected = [image.symbols.lookup(pc)[0] for pc in pcs]
    collapsed = [name for i, name in enumerate(expected) if i == 0 or name != expected[i - 1]]
    assert names[1:] == collapsed
    memory = trace.sql("SELECT op::VARCHAR AS op, addr, value FROM memory ORDER BY seq, src").to_pylist()
    assert wave.values("cpu0.bus.op")[1:] == [m["op"] for m in memory]
    assert wave.values("cpu0.bus.addr")[1:] == [m["addr"] for m in memory]
    assert wave.values("cpu0.bus.data")[1:] == [m["value"] for m in memory]


MULTICORE = """\
0 clk cpu0 IT (0) 00008000 d2800020 O EL1h_s : MOV x0,#1
0 clk cpu0 R X0 0000000000000001
0 clk cpu1 IT (0) 00009000 d2800020 O EL1h_s : MOV x0,#7
0 clk cpu1 R X0 0000000000000007
1 clk cpu0 IT (1) 00008004 d2800020 O EL1h_s : INS v1.d[1],x2
1 clk cpu0 R Q1<127:64> 0123456789abcdef
1 clk cpu1 IT (1) 00009004 f9000020 O EL1h_s : STR x0,[x1]
1 clk cpu1 MW8 00001000 0000000000000007
"""


def test_cores_and_the_instruction_clock(ingest_text, tmp_path: Path) -> None:
    trace = cputrace.open(ingest_text(MULTICORE).store)
    out = tmp_path / "mc.vcd"
    with open(out, "wb") as stream:
        write_vcd_stream(trace, stream)  # time repeats across cores only: trace time is used
    wave = Waveform(out)
    assert wave.values("cpu0.pc")[1:] == [0x8000, 0x8004] and wave.values("cpu1.pc")[1:] == [0x9000, 0x9004]
    assert wave.final("cpu1.regs.x0") == 7 and wave.final("cpu0.regs.x0") == 1
    assert wave.final("cpu0.regs.q1") == "x"  # only half of q1 was written
    assert wave.values("cpu1.bus.data")[1:] == [7] and "cpu0.function" not in wave.vars
    with open(out, "wb") as stream:
        write_vcd_stream(trace, stream, clock="insns")
    wave = Waveform(out)
    assert wave.comment.strip() == "cputrace: one time step per instruction (seq)"
    assert wave.times == [0, 1, 2, 3]


def test_a_core_with_records_and_no_instructions(ingest_text, tmp_path: Path) -> None:
    """A core's register dump before it runs anything still gets its variables."""
    text = (
        "0 clk cpu1 R x0 0000000000000005\n"
        "1 clk cpu0 IT (1) 00008000 d2800020 O EL1h_s : MOV x0,#1\n"
        "1 clk cpu0 R x0 0000000000000001\n"
    )
    trace = cputrace.open(ingest_text(text).store)
    out = tmp_path / "idle.vcd"
    with open(out, "wb") as stream:
        write_vcd_stream(trace, stream)
    wave = Waveform(out)
    assert wave.final("cpu1.regs.x0") == 5 and wave.final("cpu0.regs.x0") == 1
    assert wave.values("cpu0.pc")[1:] == [0x8000]


@pytest.mark.parametrize(
    ("timescale", "accesses", "finer"),
    [("1 ns", 1, "1 ns"), ("1 ns", 2, "100 ps"), ("1 ns", 10, "100 ps"), ("1 ns", 11, "10 ps"),
     ("1 ns", 1000, "1 ps"), ("1 ms", 16, "10 us"), ("1 s", 3, "100 ms")],
)  # fmt: skip
def test_time_steps_for_the_accesses_of_one_instruction(timescale, accesses, finer) -> None:
    assert _finer(timescale, _steps(accesses)) == finer


def test_no_timescale_finer_than_a_femtosecond() -> None:
    assert _finer("1 ps", 100) == "10 fs"
    with pytest.raises(CputraceError, match="--clock insns"):
        _finer("1 fs", _steps(4))


def test_traces_without_usable_time_use_instructions(tmp_path: Path, open_input) -> None:
    es = shared("tarmac-trace-utilities", "samples", "calculator-aarch64-es-ld-st-style.tarmac")
    trace = open_input(es)
    out = tmp_path / "es.vcd"
    with open(out, "wb") as stream:
        write_vcd_stream(trace, stream)  # every instruction is at "0 tic"
    wave = Waveform(out)
    pcs = wave.changes[wave.vars["cpu0.pc"]][1:]
    assert [t for t, _ in pcs] == [10 * seq for seq in range(trace.manifest["counts"]["instructions"])]
    assert "10 steps per instruction" in wave.comment  # LDP/STP: two accesses in one instruction
    with open(out, "wb") as stream, pytest.raises(CputraceError, match="use --clock insns"):
        write_vcd_stream(trace, stream, clock="time")


def test_export_command(tmp_path: Path, open_input) -> None:
    trace = open_input(shared("tarmac-trace-utilities", "tests", "quicksort.tarmac"))
    out = tmp_path / "qs.vcd"
    result = CliRunner().invoke(
        cli, ["export", str(trace.path), "--to", "vcd", "-o", str(out), "--clock", "insns"]
    )
    assert result.exit_code == 0, result.output
    wave = Waveform(out)
    assert len(wave.values("cpu0.pc")) == 1 + trace.manifest["counts"]["instructions"]
