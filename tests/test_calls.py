"""Call detection and call trees against the reference Tarmac tools' outputs, across producers
and cores, and chunking invariance of the compiled detection."""

from __future__ import annotations

import heapq
import itertools
import json
import logging
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from calltree_oracle import CallTree, Collector, build_tree
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from paths import DATA, shared

import cputrace
from cputrace.analysis.calls.detect import CallDetector, register_code
from cputrace.analysis.calls.log import Method
from cputrace.cli import cli
from cputrace.image import load_elf
from cputrace.model import Isa
from cputrace.store.chunks import Instructions, Step
from cputrace.store.window import Window

TTU = ("tarmac-trace-utilities",)
CALLS = DATA / "calls"
IMAGES = DATA / "image"
CALCULATORS = {
    "calculator-aarch32-fastmodel": "calculator-aarch32.elf",
    "calculator-aarch32-es-ld-st-style": "calculator-aarch32.elf",
    "calculator-aarch64-fastmodel": "calculator-aarch64.elf",
    "calculator-aarch64-es-ld-st-style": "calculator-aarch64.elf",
    "calculator-aarch64-gem5": "calculator-aarch64.elf",
}


@pytest.fixture(scope="session")
def stores(tmp_path_factory: pytest.TempPathFactory):
    """Stores of shared traces, ingested once per session: stores(*path parts) -> Trace."""
    root = tmp_path_factory.mktemp("call-stores")
    made: dict[Path, cputrace.Trace] = {}

    def get(*parts: str) -> cputrace.Trace:
        source = shared(*parts)
        if source not in made:
            made[source] = cputrace.open(cputrace.ingest([source], root / f"{source.stem}.ctrace").store)
        return made[source]

    return get


def build(trace: cputrace.Trace, elf: str | None = None, method: Method = Method.AUTO, **kw) -> CallTree:
    symbols = load_elf(IMAGES / elf).symbols if elf else None
    return build_tree(trace, method=method, symbols=symbols, **kw)


def _site(row: dict, site: str) -> str:
    return f"t:{row[f'{site}_time']} l:{row[f'{site}_src']} pc:{row[f'{site}_pc']:#x}"


def reference_text(tree: CallTree, named: bool = True) -> list[str]:
    """The tree in the reference tool's text format (`tarmac-calltree`), for comparison."""
    lines = []
    for row in tree.frames.to_pylist():
        depth = row["depth"]
        if row["parent"] is not None:
            lines.append(" " * (4 * depth - 2) + f"- {_site(row, 'call')} - {_site(row, 'resume')}")
        name = row["name"] if named else ""
        lines.append(" " * (4 * depth) + f"o {_site(row, 'entry')} - {_site(row, 'exit')} : {name}")
    return lines


def _ref_lines(name: str) -> list[str]:
    return [line.rstrip("\n") for line in shared(*TTU, "tests", name).read_text().splitlines()]


@pytest.mark.parametrize("named", [False, True])
def test_quicksort_call_tree_is_the_reference_tools(stores, named):
    trace = stores(*TTU, "tests", "quicksort.tarmac")
    tree = build(trace, "quicksort.elf" if named else None)
    assert tree.methods == {0: Method.REGISTERS}
    reference = _ref_lines(f"calltree-quicksort-{'symbols' if named else 'addr'}.ref")
    assert reference_text(tree, named) == reference


@pytest.mark.parametrize("name", ["calltest32", "calltest64"])
def test_calltests_give_the_expected_call_trees(stores, name):
    """Corner cases: pop pc, mov pc lr, call via register, branch after call, internal bl."""
    trace = stores(*TTU, "tests", "calltests", f"{name}.tarmac")
    tree = build(trace, f"{name}.elf")
    assert reference_text(tree) == (CALLS / f"{name}.calltree").read_text().splitlines()
    root = tree.frames.to_pylist()[0]
    assert root["name"] == "_start"  # the reference tool leaves the root unnamed


def _parse_profile(name: str) -> dict[int, tuple[int, int, str]]:
    rows = {}
    for line in _ref_lines(name)[1:]:
        address, count, time, *label = line.split()
        rows[int(address, 16)] = (int(count), int(time), " ".join(label))
    return rows


@pytest.mark.parametrize("named", [False, True])
def test_quicksort_profile_agrees_with_the_reference(stores, named):
    """Same calls per function; its Time is the sum over calls of (exit - entry + 1)."""
    trace = stores(*TTU, "tests", "quicksort.tarmac")
    tree = build(trace, "quicksort.elf" if named else None)
    reference = _parse_profile(f"profile-quicksort-{'symbols' if named else 'addr'}.ref")
    functions = {r["address"]: r for r in tree.functions().to_pylist()}
    assert set(functions) == set(reference)
    frames = tree.frames.to_pylist()
    for address, (count, time, label) in reference.items():
        assert functions[address]["calls"] == count
        ours = [f for f in frames if f["function"] == address]
        assert sum(f["exit_time"] - f["entry_time"] + 1 for f in ours) == time
        assert functions[address]["name"] == (label if named else f"{address:#x}")
    whole = tree.functions().to_pylist()[0]  # the root spans the trace
    assert whole["insns"] == trace.manifest["counts"]["instructions"]


def _calls_by_name(tree: CallTree) -> dict[str, tuple[int, int, int]]:
    return {r["name"]: (r["calls"], r["insns"], r["insns_self"]) for r in tree.functions().to_pylist()}


@pytest.mark.parametrize("arch", ["aarch32", "aarch64"])
def test_calculator_producers_agree(stores, arch):
    """Fast Models and ES/LD-ST style traces of one run give the same calls and counts."""
    fast = build(stores(*TTU, "samples", f"calculator-{arch}-fastmodel.tarmac"), f"calculator-{arch}.elf")
    es = build(stores(*TTU, "samples", f"calculator-{arch}-es-ld-st-style.tarmac"), f"calculator-{arch}.elf")
    assert _calls_by_name(fast) == _calls_by_name(es)
    assert fast.frames.column("name")[0].as_py() == "_start"


@pytest.mark.parametrize("name", sorted(CALCULATORS))
def test_calculator_rules_agree_except_where_the_trace_ends(stores, name):
    """ISA semantics find the calls the lr/sp rule finds, plus the calls still open at the end
    (the program exits from inside them), which the lr/sp rule cannot confirm."""
    trace = stores(*TTU, "samples", f"{name}.tarmac")
    elf = CALCULATORS[name]
    by_isa = build(trace, elf, Method.ISA)
    frames = by_isa.frames.to_pylist()
    never_returned = {f["name"] for f in frames if f["resume_seq"] is None and f["parent"] is not None}
    assert never_returned
    reference_trace = stores(
        *TTU, "samples", name.replace("gem5", "fastmodel").replace("es-ld-st-style", "fastmodel") + ".tarmac"
    )
    by_registers = build(reference_trace, elf, Method.REGISTERS)
    isa = {k: v[0] for k, v in _calls_by_name(by_isa).items() if k not in never_returned}
    registers = {k: v[0] for k, v in _calls_by_name(by_registers).items()}
    assert isa == registers


def test_auto_uses_isa_semantics_without_sp_writes(stores):
    """gem5 prints lr but no sp: the register rule would confuse recursion levels."""
    gem5 = stores(*TTU, "samples", "calculator-aarch64-gem5.tarmac")
    tree = build(gem5, "calculator-aarch64.elf")
    assert tree.methods == {0: Method.ISA}
    fast = build(
        stores(*TTU, "samples", "calculator-aarch64-fastmodel.tarmac"), "calculator-aarch64.elf", Method.ISA
    )
    assert _calls_by_name(tree) == _calls_by_name(fast)


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "cputrace" and r.levelno == logging.WARNING]


def test_the_register_rule_on_a_trace_without_sp_writes_is_warned(stores, caplog):
    """Asked for by name on gem5's trace (no sp writes: the SQL below), the register rule gives a
    wrong tree: a warning says so and names the way out; auto, and a trace with sp, say nothing."""
    gem5 = stores(*TTU, "samples", "calculator-aarch64-gem5.tarmac")
    sp = "SELECT count(*) AS n FROM registers WHERE split_part(reg, '_', 1) IN ('sp', 'wsp', 'r13')"
    assert gem5.sql(sp).column("n")[0].as_py() == 0
    build(gem5, "calculator-aarch64.elf", Method.REGISTERS)
    (warning,) = _warnings(caplog)
    assert "cpu0: the trace records no sp writes" in warning and "--method isa" in warning
    caplog.clear()
    build(gem5, "calculator-aarch64.elf")
    fast = stores(*TTU, "samples", "calculator-aarch64-fastmodel.tarmac")
    assert fast.sql(sp).column("n")[0].as_py() > 0
    build(fast, "calculator-aarch64.elf", Method.REGISTERS)
    assert _warnings(caplog) == []


def test_an_image_of_another_architecture_is_warned(stores, caplog):
    """quicksort ran A64 (its manifest); a 32-bit Arm image cannot be its program."""
    trace = stores(*TTU, "tests", "quicksort.tarmac")
    assert trace.manifest["isas"] == ["A64"]
    build_tree(trace, image=load_elf(IMAGES / "quicksort.elf"))
    assert _warnings(caplog) == []
    build_tree(trace, image=load_elf(IMAGES / "calculator-aarch32.elf"))
    (warning,) = _warnings(caplog)
    assert warning == (
        "warning: the image holds 32-bit Arm code (A32/T32) but the trace ran A64: "
        "is --image the program that ran?"
    )


def test_warnings_reach_stderr_on_the_command_line(stores):
    trace = stores(*TTU, "samples", "calculator-aarch64-gem5.tarmac")
    options = ["--method", "registers", "--image", str(IMAGES / "calculator-aarch32.elf")]
    for command in ("calls", "profile"):
        command_line = [sys.executable, "-m", "cputrace", command, str(trace.path), *options]
        done = subprocess.run(command_line, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        lines = done.stderr.splitlines()
        assert "warning: the image holds 32-bit Arm code (A32/T32) but the trace ran A64" in lines[0]
        assert lines[1].startswith("warning: cpu0: the trace records no sp writes")
        assert "warning" not in done.stdout


def two_core_tarmac(path: Path) -> Path:
    """Two real traces interleaved by time as cpu0 (quicksort) and cpu1 (calculator, AArch64)."""
    parts = [
        shared(*TTU, "tests", "quicksort.tarmac"),
        shared(*TTU, "samples", "calculator-aarch64-fastmodel.tarmac"),
    ]

    def tagged(source: Path, cpu: int):
        for line in source.read_text().splitlines():
            m = re.match(r"(\s*(\d+) clk )(.*)", line)
            if m:
                yield int(m.group(2)), f"{m.group(1)}cpu{cpu} {m.group(3)}\n"

    with open(path, "w") as out:
        out.writelines(
            line for _, line in heapq.merge(*(tagged(p, i) for i, p in enumerate(parts)), key=lambda x: x[0])
        )
    return path


def test_cores_are_kept_apart(stores, tmp_path):
    """Two real traces interleaved as cpu0 and cpu1 give each core its own call tree."""
    merged = two_core_tarmac(tmp_path / "two-cores.tarmac")
    both = cputrace.open(cputrace.ingest([merged], tmp_path / "two.ctrace").store)
    tree = build(both, "calculator-aarch64.elf")
    alone = [
        build(stores(*TTU, "tests", "quicksort.tarmac")),
        build(stores(*TTU, "samples", "calculator-aarch64-fastmodel.tarmac")),
    ]
    functions = tree.functions()
    for cpu, single in enumerate(alone):
        mine = functions.filter(functions.column("cpu").to_numpy() == cpu)
        expected = single.functions()
        assert mine.column("calls").to_pylist() == expected.column("calls").to_pylist()
        assert mine.column("insns").to_pylist() == expected.column("insns").to_pylist()
        assert mine.column("address").to_pylist() == expected.column("address").to_pylist()


def test_a_window_is_analysed_alone(stores):
    trace = stores(*TTU, "tests", "quicksort.tarmac")
    whole = build(trace, "quicksort.elf").frames.to_pylist()
    inner = next(f for f in whole if f["depth"] == 2)
    window = Window(inner["call_seq"], inner["resume_seq"] + 1)
    part = build(trace, "quicksort.elf", window=window)
    rows = part.frames.to_pylist()
    assert rows[0]["insns"] == window.stop - window.start
    assert [r["entry_seq"] for r in rows[1:]] == [
        f["entry_seq"] for f in whole if inner["entry_seq"] <= f["entry_seq"] < inner["resume_seq"]
    ]


def test_sparc_calls_from_instruction_semantics(tmp_path):
    """A LEON instruction trace of a real run: CALL and retl, each with its delay slot."""
    enc = pytest.importorskip("leon_encoder")
    elf = DATA / "leon" / "itb_demo.elf"
    dump, pointer = enc.buffer(enc.entries(list(enc.record(str(elf)))), 256)
    source = tmp_path / "itb.txt"
    source.write_text(enc.text(dump, kind="itb", cpu=0, itbc0=pointer))
    trace = cputrace.open(cputrace.ingest([source], tmp_path / "itb.ctrace").store)
    image = load_elf(elf)
    tree = build_tree(trace, image=image, symbols=image.symbols)
    assert tree.methods == {0: Method.ISA}
    calls = (
        trace.sql("SELECT pc FROM instructions WHERE executed AND opcode >> 30 = 1").column("pc").to_pylist()
    )
    frames = tree.frames.to_pylist()
    assert frames[0]["name"] == "_start" and frames[0]["insns"] == trace.manifest["counts"]["instructions"]
    called = frames[1:]
    assert [f["call_pc"] for f in called] == calls
    for frame in called:
        assert frame["name"] == "func" and frame["function"] == image.symbols.address_of("func")
        assert frame["resume_pc"] == frame["call_pc"] + 8  # after the call's delay slot
        returning = trace.sql(f"SELECT disasm FROM instructions WHERE seq = {frame['exit_seq'] - 1}")
        assert returning.column(0)[0].as_py().startswith("retl")  # the exit is retl's delay slot


def test_register_names():
    assert [register_code(n) for n in ("x30", "r14", "r14_svc", "sp", "sp_el3", "r13_irq", "x29")] == [
        0,
        0,
        0,
        1,
        1,
        1,
        2,
    ]


# -- chunking invariance: a random execution of calls, jumps and returns, cut anywhere ------


_ACTIONS = ("step", "step", "call", "call", "return", "return", "jump", "lr", "unwind")


def random_calls(draw) -> tuple[list[int], list[tuple[int, int, int]]]:
    """pcs and (seq, 0 lr / 1 sp, value) writes of a random execution shaped like compiled code:
    BL writes lr, the callee lowers sp, restores it and returns to lr; with tail jumps, lr
    clobbered by hand, and long jumps that unwind several frames at once (sp rises above them)."""
    pcs: list[int] = []
    writes: list[tuple[int, int, int]] = []
    stack: list[tuple[int, int]] = []  # (return address, sp at the call)
    pc, sp = 0x1000, 0x8000
    for _ in range(draw(st.integers(20, 400))):
        action = draw(st.sampled_from(_ACTIONS))
        seq = len(pcs)
        pcs.append(pc)
        if action == "call" and len(stack) < 30:
            writes.append((seq, 0, pc + 4))
            stack.append((pc + 4, sp))
            pc = draw(st.sampled_from([0x2000, 0x3000, 0x4000, 0x5000]))
            pcs.append(pc)  # the callee's first instruction lowers sp
            sp -= 16
            writes.append((seq + 1, 1, sp))
            pc += 4
        elif action == "return" and stack:
            back, sp = stack.pop()
            writes.append((seq, 1, sp))  # restore sp, then return to lr
            pcs.append(pc + 4)
            pc = back
        elif action == "unwind" and len(stack) > 1:
            cut = draw(st.integers(0, len(stack) - 1))
            back, sp = stack[cut]
            del stack[cut:]
            writes.append((seq, 1, sp))
            pc = draw(st.integers(0x1000, 0x6000)) & ~3
        elif action == "jump":
            pc = draw(st.integers(0x1000, 0x6000)) & ~3
        elif action == "lr":
            writes.append((seq, 0, draw(st.integers(0x1000, 0x6000)) & ~3))
            pc += 4
        else:
            pc += 4
    return pcs, writes


def fed(
    pcs: list[int], writes: list[tuple[int, int, int]], cuts: list[int], method: Method, follower=None
) -> Collector:
    """A detector fed a (random) execution in chunks cut at `cuts` to its end (writes are (seq, 0 lr /
    1 sp, value)), followed by `follower` and by the collector returned."""
    collector = Collector()
    detector = CallDetector([collector] if follower is None else [collector, follower], method)
    n = len(pcs)
    bounds = sorted({0, n, *(c % (n + 1) for c in cuts)})
    seq = np.arange(n, dtype=np.int64)
    for lo, hi in itertools.pairwise(bounds):
        if lo == hi:
            continue
        chunk = Instructions(
            cpu=0, seq=seq[lo:hi], time=seq[lo:hi] * 10, has_time=True,
            pc=np.array(pcs[lo:hi], np.uint64), size=np.full(hi - lo, 4, np.uint8),
            isa=np.full(hi - lo, Isa.A64, np.int16), opcode=np.zeros(hi - lo, np.uint32),
            has_opcode=np.zeros(hi - lo, np.bool_), executed=np.ones(hi - lo, np.bool_), src=seq[lo:hi] + 1,
        )  # fmt: skip
        rows = [w for w in writes if lo <= w[0] < hi]
        registers = pa.table({
            "seq": pa.array([w[0] for w in rows], pa.int64()),
            "cpu": pa.array([0] * len(rows), pa.uint16()),
            "reg": pa.array(["x30" if w[1] == 0 else "sp" for w in rows]).dictionary_encode(),
            "value": pa.array([w[2] for w in rows], pa.uint64()),
        })  # fmt: skip
        detector.feed(Step({0: chunk}, registers))
    detector.finish()
    return collector


def _detect(
    pcs: list[int], writes: list[tuple[int, int, int]], cuts: list[int], method: Method
) -> list[dict]:
    return fed(pcs, writes, cuts, method).tree().frames.to_pylist()


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_detection_does_not_depend_on_chunk_boundaries(data):
    pcs, writes = random_calls(data.draw)
    cuts = data.draw(st.lists(st.integers(0, 400), max_size=6))
    whole = _detect(pcs, writes, [], Method.REGISTERS)
    assert _detect(pcs, writes, cuts, Method.REGISTERS) == whole
    # frames nest: each inside its parent, self costs add up to the whole
    by_id = {f["id"]: f for f in whole}
    for frame in whole:
        parent = by_id.get(frame["parent"])
        if parent is not None:
            assert parent["entry_seq"] < frame["entry_seq"]
            assert frame["index"] + frame["insns"] <= parent["index"] + parent["insns"]
    assert sum(f["insns_self"] for f in whole) == len(pcs)
    assert sum(f["time_self"] for f in whole) == 10 * (len(pcs) - 1)


# -- command line ------------------------------------------------------------------------------


def test_calls_command(stores):
    trace = stores(*TTU, "tests", "quicksort.tarmac")
    runner = CliRunner()
    elf = str(IMAGES / "quicksort.elf")
    text = runner.invoke(cli, ["calls", str(trace.path), "--image", elf])
    assert text.exit_code == 0, text.output
    assert re.search(r"0x8038\s+quicksort\s+27\b", text.output)
    as_json = runner.invoke(cli, ["calls", str(trace.path), "--image", elf, "--format", "json"])
    expected = {r["name"]: r["calls"] for r in build(trace, "quicksort.elf").functions().to_pylist()}
    assert {r["name"]: r["calls"] for r in json.loads(as_json.output)} == expected
    tree = json.loads(runner.invoke(cli, ["calls", str(trace.path), "--tree", "--format", "json"]).output)
    assert len(tree) == 1 and tree[0]["insns"] == trace.manifest["counts"]["instructions"]
    csv_tree = runner.invoke(cli, ["calls", str(trace.path), "--tree", "--format", "csv"]).output.splitlines()
    assert len(csv_tree) == 1 + len(build(trace))
    bad = runner.invoke(cli, ["calls", str(trace.path), "--image", str(DATA / "nope.elf")])
    assert bad.exit_code == 1 and "nope.elf" in bad.output
