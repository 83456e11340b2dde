"""State at a point: against the reference tool's index dumps, with images, reuse, the CLI."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from paths import DATA, shared

import cputrace
from cputrace.analysis import state
from cputrace.analysis.state import FROM_IMAGE, READ_BEFORE_WRITE, UNKNOWN, StateIndex
from cputrace.cli import cli
from cputrace.errors import CputraceError
from cputrace.image import load_elf
from cputrace.ingest import ingest

STATE = DATA / "state"


@dataclass
class RefNode:
    """One node of `tarmac-indextest` output: the state after the instruction at `line`."""

    line: int = 0
    memory: dict[int, tuple[int, int]] = field(default_factory=dict)  # address -> (byte, line)
    registers: dict[str, tuple[bytes, int]] = field(default_factory=dict)  # name -> (LE bytes, line)


_REGISTER = re.compile(r"(\w+), last modified at line (\d+): ((?:[0-9a-f]{2} ?)+)")
_DUMP = re.compile(r"\s*([0-9a-f]{16}) ")


def parse_ref(path: Path) -> list[RefNode]:
    nodes: list[RefNode] = []
    memory_line = 0
    for raw in path.read_text().splitlines():
        text = raw.strip()
        if text == "Node:":
            nodes.append(RefNode())
        elif text.startswith("Line range: start"):
            nodes[-1].line = int(text.split()[3].rstrip(","))
        elif m := re.fullmatch(r"Memory last modified at line (\d+):", text):
            memory_line = int(m.group(1))
        elif m := _DUMP.match(raw):
            base = int(m.group(1), 16)
            cells = raw[m.end() : m.end() + 48]
            for i in range(16):
                cell = cells[3 * i : 3 * i + 2]
                if cell.strip():
                    nodes[-1].memory[base + i] = (int(cell, 16), memory_line)
        elif m := _REGISTER.fullmatch(text):
            data = bytes.fromhex(m.group(3).replace(" ", ""))
            nodes[-1].registers[m.group(1)] = (data, int(m.group(2)))
    return nodes


def _a64_register(name: str) -> str | None:
    """Our name for a register the reference tool shows; r/w/x<n> are views of x<n>."""
    if name == "internal_flags":  # the reference tool's own bookkeeping
        return None
    m = re.fullmatch(r"[rwx](\d+)", name)
    return f"x{m.group(1)}" if m else name


@pytest.fixture(scope="module")
def indextest(tmp_path_factory: pytest.TempPathFactory) -> cputrace.Trace:
    store = tmp_path_factory.mktemp("state") / "indextest.ctrace"
    ingest([STATE / "indextest.tarmac"], store)
    return cputrace.open(store)


def _check_against_ref(trace: cputrace.Trace, ref: Path) -> None:
    index = StateIndex.open(trace)
    rows = trace.sql("SELECT src, seq FROM instructions").to_pylist()
    line_to_seq = {row["src"]: row["seq"] for row in rows}
    nodes = parse_ref(ref)
    assert len(nodes) == trace.manifest["counts"]["instructions"]
    addresses = [a for node in nodes for a in node.memory]
    low, high = min(addresses) - 16, max(addresses) + 16
    for node in nodes:
        seq = line_to_seq[node.line]
        ours = {r.name: r for r in index.registers(seq)}
        expected = {_a64_register(n): v for n, v in node.registers.items() if _a64_register(n)}
        assert set(ours) == set(expected), f"seq {seq}"
        for name, (data, line) in node.registers.items():
            mine = _a64_register(name)
            if mine is None:
                continue
            assert ours[mine].data[: len(data)] == data, f"{name} after seq {seq}"
            assert all(ours[mine].known)
            assert ours[mine].seq == line_to_seq[line], f"{name} after seq {seq}"
        memory = index.memory(seq, low, high - low)
        for offset in range(high - low):
            address = low + offset
            if address in node.memory:
                byte, line = node.memory[address]
                assert memory.data[offset] == byte, f"0x{address:x} after seq {seq}"
                assert memory.origin[offset] == (line_to_seq[line] if line else READ_BEFORE_WRITE)
            else:
                assert memory.origin[offset] == UNKNOWN, f"0x{address:x} after seq {seq}"


def test_little_endian_reference(indextest: cputrace.Trace) -> None:
    _check_against_ref(indextest, STATE / "indextest-li.ref")


def test_big_endian_reference(tmp_path: Path) -> None:
    store = tmp_path / "bi.ctrace"
    ingest([STATE / "indextest.tarmac"], store, options={"byte_order": "big"})
    _check_against_ref(cputrace.open(store), STATE / "indextest-bi.ref")


def test_time_picks_the_last_instruction_at_or_before(indextest: cputrace.Trace) -> None:
    index = StateIndex.open(indextest)
    assert index.point_at_time(100).seq == 0
    assert index.point_at_time(115).seq == 1
    assert index.point_at_time(10**9).seq == 3
    with pytest.raises(CputraceError, match="no instruction at or before time 99"):
        index.point_at_time(99)
    with pytest.raises(CputraceError, match="no instruction with seq 4"):
        index.point(4)


def test_image_fills_memory_the_trace_never_touched(tmp_path: Path, open_input) -> None:
    trace = open_input(shared("tarmac-trace-utilities", "tests", "quicksort.tarmac"))
    image = load_elf(DATA / "image" / "quicksort.elf")
    index = StateIndex.open(trace)
    first = index.point(0)
    plain = index.memory(0, first.pc, 16)
    assert (plain.origin == UNKNOWN).all()
    filled = index.memory(0, first.pc, 16, image)
    assert filled.data == image.read(first.pc, 16)
    assert (filled.origin == FROM_IMAGE).all()
    row = trace.sql(
        "SELECT addr, size, seq, value FROM memory WHERE op = 'W' AND value IS NOT NULL ORDER BY seq LIMIT 1"
    ).to_pylist()[0]
    written = index.memory(row["seq"], row["addr"], row["size"], image)
    assert written.data == row["value"].to_bytes(row["size"], "little")
    assert (written.origin == row["seq"]).all()
    before = index.memory(row["seq"] - 1, row["addr"], row["size"], image)
    assert (before.origin != row["seq"]).all()


MULTICORE = """\
0 clk cpu0 IT (0) 00008000 d2800020 O EL1h_s : MOV x0,#1
0 clk cpu0 R X0 ffffffffffffffff
0 clk cpu1 IT (0) 00009000 d2800020 O EL1h_s : MOV x0,#1
0 clk cpu1 R X0 0000000000000007
1 clk cpu0 IT (1) 00008004 d2800020 O EL1h_s : MOV w0,#5
1 clk cpu0 R W0 00000005
1 clk cpu0 R Q1 00112233445566778899aabbccddeeff
2 clk cpu0 IT (2) 00008008 d2800020 O EL1h_s : INS v1.d[1],x2
2 clk cpu0 R Q1<127:64> 0123456789abcdef
2 clk cpu1 IT (1) 00009004 f9000020 O EL1h_s : STR x0,[x1]
2 clk cpu1 MW8 00001000 0000000000000007
"""


def test_cores_views_and_partial_writes(ingest_text) -> None:
    trace = cputrace.open(ingest_text(MULTICORE).store)
    index = StateIndex.open(trace)

    def regs(seq: int) -> dict[tuple[int, str], tuple[int | None, int]]:
        return {(r.cpu, r.name): (int.from_bytes(r.data, "little"), r.seq) for r in index.registers(seq)}

    assert regs(1) == {(0, "x0"): (2**64 - 1, 0), (1, "x0"): (7, 1)}
    after = regs(3)
    assert after[(0, "x0")] == (5, 2)  # a W write zero-extends
    assert after[(1, "x0")] == (7, 1)  # the other core's register is its own
    assert after[(0, "q1")] == (0x0123456789ABCDEF8899AABBCCDDEEFF, 3)  # only the upper half written
    assert [r.name for r in index.registers(3, [1])] == ["x0"]
    assert index.memory(3, 0x1000, 8).origin.tolist() == [UNKNOWN] * 8
    memory = index.memory(4, 0x1000, 8)
    assert memory.data == (7).to_bytes(8, "little") and memory.origin.tolist() == [4] * 8


def test_index_is_built_once_and_rebuilt_for_a_new_store(tmp_path: Path, monkeypatch) -> None:
    source = tmp_path / "t.tarmac"
    source.write_text(MULTICORE)
    store = tmp_path / "t.ctrace"
    ingest([source], store)
    builds = []
    real_build = state._build
    monkeypatch.setattr(state, "_build", lambda trace, d: (builds.append(d), real_build(trace, d)))
    first = StateIndex.open(cputrace.open(store)).directory
    again = StateIndex.open(cputrace.open(store)).directory
    assert first == again and len(builds) == 1
    assert first.parent == cputrace.open(store).data / "index" and not list(first.parent.glob(".*"))
    source.write_text(MULTICORE.replace("0000000000000007", "0000000000000009"))
    ingest([source], store)
    index = StateIndex.open(cputrace.open(store))
    assert len(builds) == 2 and index.directory != first
    assert [p.name for p in (cputrace.open(store).data / "index").iterdir()] == [index.directory.name]
    assert index.memory(4, 0x1000, 1).data == b"\x09"


def test_cli_state(indextest: cputrace.Trace) -> None:
    runner = CliRunner()
    store = str(indextest.path)
    result = runner.invoke(cli, ["state", store, "--at", "2", "--mem", "0x10400", "0x18"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "after seq 2: cpu 0, pc 0x8008, time 120"
    assert "  x9  0xfedcba9876543210  seq 2" in lines
    assert "  0000000000010400  ef cd ab 89 67 45 23 01  ?? ?? ?? ?? ?? ?? ?? ??" in lines
    assert any(line.split() == ["0x10410+8", "written", "at", "seq", "2"] for line in lines)
    result = runner.invoke(
        cli, ["state", store, "--time", "135", "--mem", "0x10000", "16", "--format", "json"]
    )
    body = json.loads(result.output)
    assert body["seq"] == 3 and body["memory"][0]["hex"] == b"0123456789abcdef".hex()
    assert body["memory"][0]["runs"] == [{"address": 0x10000, "length": 16, "origin": "write", "seq": 3}]
    assert runner.invoke(cli, ["state", store]).exit_code == 2
    assert runner.invoke(cli, ["state", store, "--at", "1", "--time", "3"]).exit_code == 2
    bad = runner.invoke(cli, ["state", store, "--at", "9"])
    assert bad.exit_code == 1 and "no instruction with seq 9" in bad.output
    absent = runner.invoke(cli, ["state", store, "--at", "2", "--cpu", "7"])  # printed no registers
    assert absent.exit_code == 2 and "--cpu 7: the trace has no such core (its cores: 0)" in absent.output


@st.composite
def random_traces(draw) -> list[list[tuple]]:
    """Instructions, each with register writes and memory accesses to a small window."""
    instructions = []
    for _ in range(draw(st.integers(1, 12))):
        records = []
        for _ in range(draw(st.integers(0, 3))):
            kind = draw(st.sampled_from(["X", "W", "MW", "MR"]))
            if kind in ("X", "W"):
                records.append((kind, draw(st.integers(0, 3)), draw(st.integers(0, 2**64 - 1))))
            else:
                size = draw(st.sampled_from([1, 2, 4, 8]))
                address = 0x1000 + size * draw(st.integers(0, 32 // size - 1))
                records.append((kind, size, address, draw(st.integers(0, 2 ** (8 * size) - 1))))
        instructions.append(records)
    return instructions


def _tarmac(instructions: list[list[tuple]]) -> str:
    lines = []
    for t, records in enumerate(instructions):
        lines.append(f"{t} clk IT ({t}) {0x8000 + 4 * t:08x} d503201f O EL1h_s : NOP")
        for record in records:
            if record[0] == "X":
                lines.append(f"{t} clk R X{record[1]} {record[2]:016x}")
            elif record[0] == "W":
                lines.append(f"{t} clk R W{record[1]} {record[2] & 0xFFFFFFFF:08x}")
            else:
                kind, size, address, value = record
                lines.append(f"{t} clk {kind}{size} {address:08x} {value:0{2 * size}x}")
    return "\n".join(lines) + "\n"


def _replay(instructions: list[list[tuple]], point: int) -> tuple[dict, dict]:
    """Registers {name: (value, seq)} and memory {address: (byte, origin)} after `point`, naively."""
    registers: dict[str, tuple[int, int]] = {}
    memory: dict[int, tuple[int, int]] = {}
    first_access: dict[int, tuple[bool, int]] = {}  # address -> (was a read, byte)
    for seq, records in enumerate(instructions):
        for record in records:
            if record[0] in ("X", "W"):
                value = record[2] if record[0] == "X" else record[2] & 0xFFFFFFFF
                if seq <= point:
                    registers[f"x{record[1]}"] = (value, seq)
                continue
            kind, size, address, value = record
            for i, byte in enumerate(value.to_bytes(size, "little")):
                first_access.setdefault(address + i, (kind == "MR", byte))
                if kind == "MW" and seq <= point:
                    memory[address + i] = (byte, seq)
    for address, (was_read, byte) in first_access.items():
        if was_read and address not in memory:
            memory[address] = (byte, READ_BEFORE_WRITE)
    return registers, memory


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(random_traces())
def test_state_matches_a_naive_replay(tmp_path: Path, monkeypatch, instructions) -> None:
    monkeypatch.setattr(state, "CHECKPOINT", 4)  # snapshots and thinned writes even in short traces
    path = tmp_path / f"r{abs(hash(str(instructions)))}.tarmac"
    path.write_text(_tarmac(instructions))
    store = path.with_suffix(".ctrace")
    ingest([path], store)
    index = StateIndex.open(cputrace.open(store))
    assert index.checkpoint == 4
    for point in range(len(instructions)):
        registers, memory = _replay(instructions, point)
        ours = {r.name: (r.value, r.seq) for r in index.registers(point)}
        assert ours == registers, point
        window = index.memory(point, 0x1000, 32)
        for offset in range(32):
            byte, origin = memory.get(0x1000 + offset, (0, UNKNOWN))
            assert (window.data[offset], window.origin[offset]) == (byte, origin), (point, offset)
