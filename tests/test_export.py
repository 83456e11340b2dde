"""Exporters: every file parses back (JSON, protobuf, callgrind, Tarmac, CSV, Parquet) and says
what the call tree and the tables say; the folded stacks agree with the reference flame graph."""

from __future__ import annotations

import csv
import json
import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import test_calls
from calltree_oracle import CallTree
from click.testing import CliRunner
from paths import DATA
from test_calls import IMAGES, TTU, build, two_core_tarmac

import cputrace
from cputrace.analysis.calls.log import Method
from cputrace.cli import cli
from cputrace.export.registry import EXPORTERS, ExportRequest
from cputrace.image import load_elf
from cputrace.model import SCHEMAS
from cputrace.store.window import Window

stores = test_calls.stores  # the session fixture of ingested shared traces


@pytest.fixture(scope="module")
def quicksort(stores) -> cputrace.Trace:
    return stores(*TTU, "tests", "quicksort.tarmac")


@pytest.fixture(scope="module")
def two_cores(tmp_path_factory) -> cputrace.Trace:
    root = tmp_path_factory.mktemp("two-cores")
    return cputrace.open(cputrace.ingest([two_core_tarmac(root / "two.tarmac")], root / "two.ctrace").store)


def export(trace: cputrace.Trace, fmt: str, path: Path, elf: str | None = None, **options) -> Path:
    image = load_elf(IMAGES / elf) if elf else None
    EXPORTERS[fmt].load()(ExportRequest(trace, path, image=image, **options))
    return path


def _tree(trace: cputrace.Trace, elf: str | None = None) -> CallTree:
    return build(trace, elf)


# -- rows ---------------------------------------------------------------------------------------


def _instructions(trace: cputrace.Trace) -> list[tuple]:
    rows = trace.sql("SELECT time, pc, opcode, executed, isa FROM instructions ORDER BY seq").to_pylist()
    return [tuple(r.values()) for r in rows]


def test_tarmac_export_reads_back_the_same(quicksort, tmp_path):
    out = export(quicksort, "tarmac", tmp_path / "q.tarmac")
    again = cputrace.open(cputrace.ingest([out], tmp_path / "q.ctrace", format="tarmac").store)
    assert _instructions(again) == _instructions(quicksort)
    for table in ("registers", "memory"):
        assert again.manifest["counts"][table] == quicksort.manifest["counts"][table]
    assert _tree(again).functions().drop_columns(["name"]) == _tree(quicksort).functions().drop_columns(
        ["name"]
    )


def test_tarmac_export_of_another_format(tmp_path):
    """An ARMulator trace written as Tarmac: other Tarmac tools can read it."""
    source = cputrace.open(
        cputrace.ingest([DATA / "armulator" / "seed_example.trc"], tmp_path / "a.ctrace").store
    )
    out = export(source, "tarmac", tmp_path / "a.tarmac")
    again = cputrace.open(cputrace.ingest([out], tmp_path / "b.ctrace", format="tarmac").store)
    assert _instructions(again) == _instructions(source)
    assert again.manifest["counts"]["memory"] == source.manifest["counts"]["memory"]


def test_tarmac_export_of_a_leon_trace(tmp_path):
    """A LEON ITB trace as Tarmac: instructions, results and addressed memory accesses survive;
    loads whose address the ITB does not record have no Tarmac form and are left out."""
    enc = pytest.importorskip("leon_encoder")
    dump, pointer = enc.buffer(enc.entries(list(enc.record(str(DATA / "leon" / "itb_demo.elf")))), 256)
    source = tmp_path / "itb.txt"
    source.write_text(enc.text(dump, kind="itb", cpu=0, itbc0=pointer))
    leon = cputrace.open(cputrace.ingest([source], tmp_path / "itb.ctrace").store)
    out = export(leon, "tarmac", tmp_path / "itb.tarmac")
    again = cputrace.open(cputrace.ingest([out], tmp_path / "again.ctrace", format="tarmac").store)
    query = "SELECT time, pc, opcode, executed FROM instructions ORDER BY seq"
    assert again.sql(query) == leon.sql(query)
    assert again.manifest["counts"]["registers"] == leon.manifest["counts"]["registers"]
    addressed = "SELECT count(*) FROM memory WHERE addr IS NOT NULL"
    assert again.sql(addressed).column(0)[0].as_py() == leon.sql(addressed).column(0)[0].as_py() > 0


def test_tarmac_window(quicksort, tmp_path):
    out = export(quicksort, "tarmac", tmp_path / "w.tarmac", window=Window(100, 250))
    assert len(re.findall(r"^\d+ clk IT|^\d+ clk IS", out.read_text(), re.M)) == 150


@pytest.mark.parametrize("table", ["instructions", "registers", "memory", "events"])
def test_model_tables_as_csv_and_parquet(quicksort, tmp_path, table):
    window = Window(0 if table == "events" else 10, 1000)
    expected = quicksort.sql(f"SELECT * FROM {table} WHERE {window.sql()} ORDER BY seq")
    with export(quicksort, "csv", tmp_path / "t.csv", table=table, window=window).open() as text:
        header, *rows = list(csv.reader(text))
    assert header == SCHEMAS[table].names
    assert len(rows) == expected.num_rows > 0
    assert [int(r[0]) for r in rows] == expected.column("seq").to_pylist()
    parquet = pq.read_table(export(quicksort, "parquet", tmp_path / "t.parquet", table=table, window=window))
    assert parquet.column("seq").to_pylist() == expected.column("seq").to_pylist()
    if table == "instructions":
        assert [int(r[header.index("pc")]) for r in rows] == expected.column("pc").to_pylist()


@pytest.mark.parametrize("table", ["frames", "functions", "addresses", "blocks", "mix"])
def test_analysis_tables_as_csv_and_parquet(quicksort, tmp_path, table):
    parquet = pq.read_table(
        export(quicksort, "parquet", tmp_path / "t.parquet", "quicksort.elf", table=table)
    )
    rows = list(
        csv.DictReader(export(quicksort, "csv", tmp_path / "t.csv", "quicksort.elf", table=table).open())
    )
    assert len(rows) == parquet.num_rows
    if table == "frames":
        assert parquet == _tree(quicksort, "quicksort.elf").frames
    if table == "functions":
        assert parquet == _tree(quicksort, "quicksort.elf").functions()


def test_table_must_be_named(quicksort, tmp_path):
    runner = CliRunner()
    missing = runner.invoke(
        cli, ["export", str(quicksort.path), "--to", "csv", "-o", str(tmp_path / "x.csv")]
    )
    assert missing.exit_code == 1 and "--table" in missing.output
    wrong = runner.invoke(
        cli, ["export", str(quicksort.path), "--to", "csv", "--table", "nope", "-o", "x.csv"]
    )
    assert wrong.exit_code == 1 and "no table 'nope'" in wrong.output
    unknown = runner.invoke(cli, ["export", str(quicksort.path), "--to", "nope", "-o", "x"])
    assert unknown.exit_code == 2


# -- stacks and timelines -----------------------------------------------------------------------


def _read_folded(path: Path) -> dict[str, int]:
    return {line.rsplit(" ", 1)[0]: int(line.rsplit(" ", 1)[1]) for line in path.read_text().splitlines()}


def test_folded_stacks_agree_with_the_reference_flame_graph(quicksort, tmp_path):
    """The reference weighs a call by (exit - entry) time, so the return instruction's tick goes
    to the caller; cputrace charges it to the callee: per stack, ref = ours - returned calls
    with that stack + returned calls they made."""
    ours = _read_folded(export(quicksort, "folded", tmp_path / "q.folded", "quicksort.elf", clock="time"))
    reference = _read_folded(test_calls.shared(*TTU, "tests", "flamegraph-quicksort-symbols.ref"))
    frames = _tree(quicksort, "quicksort.elf").frames.to_pylist()
    stack_of: dict[int, str] = {}
    returned: Counter[str] = Counter()
    returned_children: Counter[str] = Counter()
    for f in frames:
        parent = stack_of.get(f["parent"])
        stack_of[f["id"]] = f["name"] if parent is None else f"{parent};{f['name']}"
        if f["resume_seq"] is not None:
            returned[stack_of[f["id"]]] += 1
            returned_children[parent] += 1
    assert set(ours) == set(reference)
    for stack, weight in ours.items():
        assert reference[stack] == weight - returned[stack] + returned_children[stack]
    by_insns = _read_folded(export(quicksort, "folded", tmp_path / "i.folded", clock="insns"))
    assert sum(by_insns.values()) == quicksort.manifest["counts"]["instructions"]


def test_folded_stacks_of_two_cores(two_cores, tmp_path):
    stacks = _read_folded(export(two_cores, "folded", tmp_path / "m.folded"))
    assert {s.split(";")[0] for s in stacks} == {"cpu0", "cpu1"}
    assert (
        sum(stacks.values())
        == two_cores.sql("SELECT max(time) - min(time) FROM instructions WHERE cpu = 0").column(0)[0].as_py()
        + two_cores.sql("SELECT max(time) - min(time) FROM instructions WHERE cpu = 1").column(0)[0].as_py()
    )


def _check_nesting(events: list[tuple[str, int, float]]) -> int:
    """Opens and closes balance like brackets, in time order; returns the number of opens."""
    stack: list[int] = []
    last = float("-inf")
    opens = 0
    for kind, frame, at in events:
        assert at >= last
        last = at
        if kind in ("O", "B"):
            stack.append(frame)
            opens += 1
        else:
            assert stack and stack.pop() == frame
    assert not stack
    return opens


def test_speedscope(two_cores, tmp_path):
    data = json.loads(
        export(two_cores, "speedscope", tmp_path / "s.json", "calculator-aarch64.elf").read_text()
    )
    assert data["$schema"] == "https://www.speedscope.app/file-format-schema.json"
    tree = _tree(two_cores, "calculator-aarch64.elf")
    names = [f["name"] for f in data["shared"]["frames"]]
    assert [p["name"] for p in data["profiles"]] == ["cpu0", "cpu1"]
    for profile, cpu in zip(data["profiles"], (0, 1), strict=True):
        frames = tree.frames.filter(tree.frames.column("cpu").to_numpy() == cpu)
        events = [(e["type"], e["frame"], e["at"]) for e in profile["events"]]
        assert _check_nesting(events) == frames.num_rows
        opened = [names[e["frame"]] for e in profile["events"] if e["type"] == "O"]
        assert opened == frames.column("name").to_pylist()
        assert profile["startValue"] == events[0][2] and profile["endValue"] == events[-1][2]


def test_chrome_trace(quicksort, tmp_path):
    data = json.loads(export(quicksort, "chrome", tmp_path / "c.json", "quicksort.elf").read_text())
    slices = [e for e in data["traceEvents"] if e["ph"] == "X"]
    frames = _tree(quicksort, "quicksort.elf").frames.to_pylist()
    assert [s["name"] for s in slices] == [f["name"] for f in frames]
    # clk counts as 1 ns: durations in microseconds are the frames' times / 1000
    assert [round(s["dur"] * 1000) for s in slices] == [f["time"] for f in frames]
    counters = [e["args"]["instructions"] for e in data["traceEvents"] if e["ph"] == "C"]
    assert counters == sorted(counters) and counters[-1] == quicksort.manifest["counts"]["instructions"]


def test_perfetto_trace(two_cores, tmp_path):
    pb2 = pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2")
    path = export(two_cores, "perfetto", tmp_path / "p.perfetto-trace", "calculator-aarch64.elf")
    trace = pb2.Trace()
    trace.ParseFromString(path.read_bytes())
    tracks = {
        p.track_descriptor.uuid: p.track_descriptor for p in trace.packet if p.HasField("track_descriptor")
    }
    assert sorted(t.name for t in tracks.values()) == [
        "cpu0",
        "cpu0 instructions",
        "cpu1",
        "cpu1 instructions",
    ]
    tree = _tree(two_cores, "calculator-aarch64.elf")
    for cpu in (0, 1):
        slices = next(u for u, t in tracks.items() if t.name == f"cpu{cpu}")
        counter = next(u for u, t in tracks.items() if t.name == f"cpu{cpu} instructions")
        events = [p for p in trace.packet if p.HasField("track_event")]
        on_slices = [(p.track_event, p.timestamp) for p in events if p.track_event.track_uuid == slices]
        kinds = {pb2.TrackEvent.TYPE_SLICE_BEGIN: "B", pb2.TrackEvent.TYPE_SLICE_END: "E"}
        names = [e.name for e, _ in on_slices if e.type == pb2.TrackEvent.TYPE_SLICE_BEGIN]
        frames = tree.frames.filter(tree.frames.column("cpu").to_numpy() == cpu)
        assert names == frames.column("name").to_pylist()
        # nesting, checked by depth since slice ends carry no name
        depth = 0
        for event, _ in on_slices:
            depth += 1 if kinds[event.type] == "B" else -1
            assert depth >= 0
        assert depth == 0
        values = [p.track_event.counter_value for p in events if p.track_event.track_uuid == counter]
        assert values == sorted(values)
        assert values[-1] == frames.column("insns")[0].as_py()


def _parse_callgrind(text: str) -> tuple[dict[str, str], int, list[int], int]:
    """(header, total self Ir, calls= counts, number of functions)."""
    header: dict[str, str] = {}
    self_ir = 0
    calls: list[int] = []
    functions = 0
    after_calls = False
    for line in text.splitlines():
        if (
            ":" in line
            and not line.startswith(("fn=", "fl=", "fi=", "cfn=", "cfi=", "calls="))
            and not line[0].isdigit()
        ):
            key, _, value = line.partition(":")
            header[key.strip()] = value.strip()
        elif line.startswith("fn="):
            functions += 1
        elif line.startswith("calls="):
            calls.append(int(line.split("=")[1].split()[0]))
            after_calls = True
        elif line.startswith("0x"):
            cost = int(line.split()[1])
            if not after_calls:
                self_ir += cost
            after_calls = False
    return header, self_ir, calls, functions


def test_callgrind(quicksort, tmp_path):
    path = export(quicksort, "callgrind", tmp_path / "callgrind.out.q", "quicksort.elf")
    header, self_ir, calls, functions = _parse_callgrind(path.read_text())
    assert header["events"] == "Ir Time" and header["positions"] == "instr"
    total = quicksort.manifest["counts"]["instructions"]
    assert self_ir == total and header["summary"].split()[0] == str(total)
    tree = _tree(quicksort, "quicksort.elf")
    assert sum(calls) == len(tree) - 1
    assert functions == tree.functions().num_rows
    report = _annotated(path)
    if report is not None:
        assert re.search(rf"{total:,}\s+\(100\.0%\).*PROGRAM TOTALS", report)


def _annotated(path: Path) -> str | None:
    """callgrind_annotate's report of the file, where it is installed (tests/test_callgrind.py
    checks its figures); it reads every line without a warning."""
    annotate = shutil.which("callgrind_annotate")
    if annotate is None:
        return None
    done = subprocess.run([annotate, str(path)], capture_output=True, text=True, check=True)
    assert "WARNING" not in done.stderr, done.stderr
    return done.stdout


def test_callgrind_with_source_lines(tmp_path):
    """With DWARF, cost lines carry source lines (addresses of a program with a line table)."""
    image = load_elf(DATA / "image" / "lines-dwarf4.elf")
    function = next(s for s in image.symbols if s.size and s.kind == "func")
    lines = [
        f"{t + 1} clk IT ({t + 1}) {function.address + 4 * t:08x} d503201f O EL3h_s : NOP" for t in range(8)
    ]
    source = tmp_path / "l.tarmac"
    source.write_text("\n".join(lines) + "\n")
    trace = cputrace.open(cputrace.ingest([source], tmp_path / "l.ctrace").store)
    path = tmp_path / "l.callgrind"
    EXPORTERS["callgrind"].load()(ExportRequest(trace, path, image=image))
    text = path.read_text()
    assert "positions: instr line" in text
    file, line = image.lines.lines_for(function.address)
    assert f"fl=(1) {file}" in text
    assert re.search(rf"^{function.address:#x} {line} 1 1$", text, re.M)
    report = _annotated(path)
    if report is not None:
        function_line = rf"^8 \(100\.0%\) +7 \(100\.0%\) +{re.escape(file)}:{function.name} "
        assert re.search(function_line, report, re.M)  # 8 instructions, 7 time units, one function


# -- command line -------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", sorted(EXPORTERS))
def test_export_command(quicksort, tmp_path, fmt):
    out = tmp_path / f"out{EXPORTERS[fmt].suffix}"
    args = [
        "export",
        str(quicksort.path),
        "--to",
        fmt,
        "-o",
        str(out),
        "--image",
        str(IMAGES / "quicksort.elf"),
    ]
    if fmt in ("csv", "parquet"):
        args += ["--table", "functions"]
    result = CliRunner().invoke(cli, [*args, "--start", "0", "--stop", "1000"])
    assert result.exit_code == 0, result.output
    assert out.stat().st_size > 0


def test_clock_time_needs_time(tmp_path):
    source = cputrace.open(
        cputrace.ingest([DATA / "armulator" / "seed_example.trc"], tmp_path / "a.ctrace").store
    )
    runner = CliRunner()
    timeless = runner.invoke(
        cli, ["export", str(source.path), "--to", "chrome", "--clock", "time", "-o", str(tmp_path / "c")]
    )
    assert timeless.exit_code == 1 and "no time" in timeless.output
    counted = runner.invoke(
        cli, ["export", str(source.path), "--to", "chrome", "-o", str(tmp_path / "c.json")]
    )
    assert counted.exit_code == 0
    data = json.loads((tmp_path / "c.json").read_text())
    assert data["otherData"]["clock"] == "insns"


def test_isa_method_export(quicksort, tmp_path):
    by_isa = export(quicksort, "folded", tmp_path / "isa.folded", method=Method.ISA, clock="insns")
    assert sum(_read_folded(by_isa).values()) == quicksort.manifest["counts"]["instructions"]
