"""Every analysis and every export of the whole TC2 snapshot (its three ETMv3 sources and the
PTM source that traced, as the README ingests it), each output checked against the store by
another route: SQL, another command, OpenCSD's decode, a re-ingest, the reference tools where
installed."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
import subprocess
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from opencsd_reference import read_reference
from paths import shared
from test_etmv3_decode import tc2  # noqa: F401 - the fixture: the snapshot with its memory dump
from test_export import _check_nesting, _parse_callgrind, _read_folded

import cputrace
from cputrace.cli import cli
from cputrace.model import TABLES
from cputrace.store.manifest import table_path

COUNTS = {0: 7205, 1: 7471, 2: 1947, 3: 9548}  # instructions per core (OpenCSD agrees on each; DS-5 on 0-2)


def run(*args: object) -> str:
    result = CliRunner().invoke(cli, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.fixture(scope="module")
def store(tc2: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:  # noqa: F811
    path = tmp_path_factory.mktemp("tc2") / "tc2.ctrace"
    run("ingest", tc2 / "snapshot.ini", "-o", path)
    return path


@pytest.fixture(scope="module")
def trace(store: Path) -> cputrace.Trace:
    return cputrace.Trace(store)


@pytest.fixture(scope="module")
def kernel(tc2: Path) -> str:  # noqa: F811
    """The cores' memory dump as an --image spec."""
    return f"{tc2 / 'kernel_dump.bin'}@0xc0008000"


def rows(trace: cputrace.Trace, query: str) -> list[tuple]:
    return [tuple(r.values()) for r in trace.sql(query).to_pylist()]


def per_cpu(trace: cputrace.Trace, query: str) -> dict[int, list[tuple]]:
    """Rows of `query` (cpu first) grouped by core."""
    grouped: dict[int, list[tuple]] = defaultdict(list)
    for row in rows(trace, query):
        grouped[row[0]].append(row[1:])
    return grouped


# --- the store ----------------------------------------------------------------------------------


def test_every_table_is_in_seq_order(store: Path, trace: cputrace.Trace) -> None:
    """Instructions are numbered 0..n-1 in stored order; the rows of every table come in seq
    order, a seq's events in buffer order; every event belongs to an instruction of its core."""
    assert {cpu: n for cpu, n in rows(trace, "SELECT cpu, count(*) FROM instructions GROUP BY cpu")} == COUNTS
    for table in TABLES:
        data = pq.read_table(table_path(store, table))
        seq = data["seq"].to_numpy()
        assert np.all(np.diff(seq) >= 0), table
        if table == "instructions":
            assert np.array_equal(seq, np.arange(len(seq)))
        if table == "events":
            src = data["src"].to_numpy()
            assert np.all((np.diff(seq) > 0) | (np.diff(src) >= 0))
    join = "SELECT e.seq, e.cpu FROM events e JOIN instructions i USING (seq) WHERE e.cpu != i.cpu"
    assert not rows(trace, join)


def test_the_instructions_of_every_source_are_opencsds(trace: cputrace.Trace) -> None:
    """OpenCSD's decode of the ETMv3 sources (one instruction range per instruction, with
    cycle-accurate tracing): address, size and executed of each, source by source, in order
    (the PTM source's ranges are compared in test_ptm_decode)."""
    decodes = read_reference(shared("opencsd-snapshots", "reference", "TC2.ppl.xz"))
    ranges = {trace_id - 0x10: decodes[trace_id].ranges for trace_id in (0x10, 0x11, 0x12)}
    columns = ["start", "end", "executed"]
    reference = {
        cpu: [(start, end - start, executed) for start, end, executed in r[columns].tolist()]
        for cpu, r in ranges.items()
    }
    assert all((r["count"] == 1).all() for r in ranges.values())
    ours = per_cpu(trace, "SELECT cpu, pc, size, executed FROM instructions WHERE cpu < 3 ORDER BY seq")
    assert ours == reference


# --- analyses ----------------------------------------------------------------------------------


def test_calls(store: Path) -> None:
    """Per core, the outermost function counts every instruction, and the functions' own
    instructions add up to the same."""
    functions = json.loads(run("calls", store, "--format", "json"))
    own = Counter()
    for f in functions:
        own[f["cpu"]] += f["insns_self"]
    assert own == COUNTS
    assert {cpu: max(f["insns"] for f in functions if f["cpu"] == cpu) for cpu in COUNTS} == COUNTS


def test_the_call_tree(store: Path, trace: cputrace.Trace) -> None:
    """Each call's instructions are its own plus its callees'; the outermost calls of a core
    hold all of its instructions; every call enters and leaves at instructions of its core."""
    tree = list(csv.DictReader(io.StringIO(run("calls", store, "--tree", "--format", "csv"))))
    children: Counter[tuple[str, str]] = Counter()
    for row in tree:
        if row["parent"]:
            children[(row["cpu"], row["parent"])] += int(row["insns"])
    outermost = Counter()
    cores = dict(rows(trace, "SELECT seq, cpu FROM instructions"))
    for row in tree:
        assert int(row["insns"]) == int(row["insns_self"]) + children[(row["cpu"], row["id"])]
        if row["depth"] == "0":
            outermost[int(row["cpu"])] += int(row["insns"])
        assert cores[int(row["entry_seq"])] == cores[int(row["exit_seq"])] == int(row["cpu"])
    assert outermost == COUNTS


def test_profile(store: Path, trace: cputrace.Trace) -> None:
    """Counts by address and the instruction mix are the store's."""
    profile = json.loads(run("profile", store, "--format", "json"))
    by_address = {(a["cpu"], a["pc"]): (a["count"], a["failed"]) for a in profile["addresses"]}
    failed = "count(*) FILTER (WHERE NOT executed)"
    query = f"SELECT cpu, pc, count(*), {failed} FROM instructions GROUP BY cpu, pc"
    assert by_address == {(cpu, pc): (n, failed) for cpu, pc, n, failed in rows(trace, query)}
    mix = {m["cpu"]: (m["instructions"], m["condition_failed"]) for m in profile["mix"]}
    query = f"SELECT cpu, count(*), {failed} FROM instructions GROUP BY cpu"
    assert mix == {cpu: (n, failed) for cpu, n, failed in rows(trace, query)}
    assert sum(f["insns_self"] for f in profile["functions"]) == sum(COUNTS.values())


def test_coverage(store: Path, trace: cputrace.Trace, kernel: str, tmp_path: Path) -> None:
    """Object-code coverage of the dump (a raw image: no symbols, so by address range): the
    addresses the lcov report counts as run are the store's instruction addresses."""
    lcov = tmp_path / "tc2.info"
    run("coverage", store, "--image", kernel, "--range", "0xc0008000", "0x50000", "--isa", "T32",
        "--lcov", lcov, "--cobertura", tmp_path / "tc2.xml")  # fmt: skip
    listing = (tmp_path / "tc2.info.lst").read_text().splitlines()
    code = re.compile(r"\s+([0-9a-f]+):")
    address_of = {n: int(m[1], 16) for n, line in enumerate(listing, 1) if (m := code.match(line))}
    counts = {int(n): int(c) for n, c in re.findall(r"^DA:(\d+),(\d+)$", lcov.read_text(), re.M)}
    run_addresses = {address_of[n] for n, count in counts.items() if count}
    assert run_addresses == {pc for (pc,) in rows(trace, "SELECT DISTINCT pc FROM instructions")}
    by_address = dict(rows(trace, "SELECT pc, count(*) FROM instructions GROUP BY pc"))
    assert {address_of[n]: c for n, c in counts.items() if c} == by_address
    assert re.search(r'lines-covered="8772"', (tmp_path / "tc2.xml").read_text())


def test_state(store: Path, trace: cputrace.Trace) -> None:
    """After each core's last instruction: that instruction's core, pc and time (ETMv3 traces
    no registers or memory values)."""
    last = rows(trace, "SELECT max(seq) FROM instructions GROUP BY cpu ORDER BY cpu")
    for (seq,) in last:
        state = json.loads(run("state", store, "--at", seq, "--format", "json"))
        (want,) = rows(trace, f"SELECT cpu, pc, time FROM instructions WHERE seq = {seq}")
        assert (state["seq"], state["cpu"], state["pc"], state["time"]) == (seq, *want)
        assert state["registers"] == [] and state["memory"] == []


def test_diff(store: Path, tc2: Path, tmp_path: Path) -> None:  # noqa: F811
    """The store against itself: the same. Against a store of source 0x10 alone: core 0 paired
    instruction by instruction, the other cores' instructions only in the first."""
    same = json.loads(run("diff", store, store, "--format", "json"))
    assert (same["same"], same["paired"], same["divergences"]) == (True, sum(COUNTS.values()), 0)
    one = tmp_path / "one.ctrace"
    run("ingest", tc2 / "snapshot.ini", "--source", "0x10", "-o", one)
    against = json.loads(run("diff", store, one, "--format", "json"))
    others = sum(COUNTS.values()) - COUNTS[0]
    assert (against["paired"], against["only_a"], against["only_b"]) == (COUNTS[0], others, 0)
    assert sum(against["counts"][k] for k in ("opcode", "executed", "time")) == 0


# --- exports ------------------------------------------------------------------------------------


def export(store: Path, fmt: str, path: Path, *options: object) -> Path:
    run("export", store, "--to", fmt, "-o", path, *options)
    return path


def test_tarmac_export_reads_back(store: Path, trace: cputrace.Trace, tmp_path: Path) -> None:
    """Each core's instructions come back: pc, opcode, and executed and time where they are
    known (PTM traces whether waypoints executed, not other conditional instructions)."""
    back = tmp_path / "back.ctrace"
    run("ingest", export(store, "tarmac", tmp_path / "tc2.tarmac"), "-o", back)
    query = "SELECT cpu, pc, opcode, executed, time FROM instructions ORDER BY seq"
    ours, theirs = per_cpu(trace, query), per_cpu(cputrace.Trace(back), query)
    assert ours.keys() == theirs.keys()
    for cpu, instructions in ours.items():
        assert [r[:2] for r in instructions] == [r[:2] for r in theirs[cpu]]
        for field in (2, 3):
            assert all(a[field] == b[field] for a, b in zip(instructions, theirs[cpu], strict=True)
                       if a[field] is not None)  # fmt: skip


def test_csv_and_parquet_exports(store: Path, trace: cputrace.Trace, tmp_path: Path) -> None:
    table = pq.read_table(table_path(store, "instructions"))
    written = pq.read_table(export(store, "parquet", tmp_path / "i.parquet", "--table", "instructions"))
    assert written.select(["seq", "cpu", "pc", "executed", "cycles"]).equals(
        table.select(["seq", "cpu", "pc", "executed", "cycles"])
    )
    lines = list(csv.DictReader(export(store, "csv", tmp_path / "i.csv", "--table", "instructions").open()))
    want = rows(trace, "SELECT seq, pc FROM instructions ORDER BY seq")
    assert [(int(r["seq"]), int(r["pc"])) for r in lines] == want


def test_folded_stacks(store: Path, tmp_path: Path) -> None:
    stacks = _read_folded(export(store, "folded", tmp_path / "tc2.folded", "--clock", "insns"))
    weight = Counter()
    for stack, w in stacks.items():
        weight[int(stack.split(";")[0].removeprefix("cpu"))] += w
    assert weight == COUNTS


def test_callgrind(store: Path, tmp_path: Path) -> None:
    """Self costs add up to the instructions, per address as the store counts them; one
    calls= line per call that is not a core's outermost (callgrind_annotate agrees, where
    installed)."""
    path = export(store, "callgrind", tmp_path / "callgrind.out.tc2", "--clock", "insns")
    header, self_ir, calls, _ = _parse_callgrind(path.read_text())
    total = sum(COUNTS.values())
    assert self_ir == total and header["summary"].split()[0] == str(total)
    tree = list(csv.DictReader(io.StringIO(run("calls", store, "--tree", "--format", "csv"))))
    assert sum(calls) == len(tree) - sum(row["depth"] == "0" for row in tree)
    annotate = shutil.which("callgrind_annotate")
    if annotate:
        report = subprocess.run([annotate, str(path)], capture_output=True, text=True, check=True).stdout
        assert re.search(rf"{total:,}\s+\(100\.0%\).*PROGRAM TOTALS", report)


def frames_by_core(store: Path) -> dict[int, list[str]]:
    """The call tree's function names, core by core, in tree order."""
    tree = csv.DictReader(io.StringIO(run("calls", store, "--tree", "--format", "csv")))
    names: dict[int, list[str]] = defaultdict(list)
    for row in tree:
        names[int(row["cpu"])].append(row["name"])
    return names


def test_speedscope(store: Path, tmp_path: Path) -> None:
    data = json.loads(export(store, "speedscope", tmp_path / "tc2.json", "--clock", "insns").read_text())
    names = [f["name"] for f in data["shared"]["frames"]]
    frames = frames_by_core(store)
    assert [p["name"] for p in data["profiles"]] == [f"cpu{cpu}" for cpu in COUNTS]
    for cpu, profile in enumerate(data["profiles"]):
        events = [(e["type"], e["frame"], e["at"]) for e in profile["events"]]
        assert _check_nesting(events) == len(frames[cpu])
        assert [names[e["frame"]] for e in profile["events"] if e["type"] == "O"] == frames[cpu]
        assert profile["endValue"] - profile["startValue"] == COUNTS[cpu]


def test_chrome_trace(store: Path, tmp_path: Path) -> None:
    data = json.loads(export(store, "chrome", tmp_path / "tc2.json", "--clock", "insns").read_text())
    frames = frames_by_core(store)
    for cpu in COUNTS:
        events = [e for e in data["traceEvents"] if e["tid"] == cpu]
        assert [e["name"] for e in events if e["ph"] == "X"] == frames[cpu]
        counters = [e["args"]["instructions"] for e in events if e["ph"] == "C"]
        assert counters == sorted(counters) and counters[-1] == COUNTS[cpu]


def test_perfetto_trace(store: Path, tmp_path: Path) -> None:
    pb2 = pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2")
    trace = pb2.Trace()
    path = export(store, "perfetto", tmp_path / "tc2.perfetto-trace", "--clock", "insns")
    trace.ParseFromString(path.read_bytes())
    described = [p.track_descriptor for p in trace.packet if p.HasField("track_descriptor")]
    tracks = {track.name: track.uuid for track in described}
    events = [p.track_event for p in trace.packet if p.HasField("track_event")]
    frames = frames_by_core(store)
    for cpu in COUNTS:
        slices = [e for e in events if e.track_uuid == tracks[f"cpu{cpu}"]]
        begun = [e.name for e in slices if e.type == pb2.TrackEvent.TYPE_SLICE_BEGIN]
        assert begun == frames[cpu]
        values = [e.counter_value for e in events if e.track_uuid == tracks[f"cpu{cpu} instructions"]]
        assert values == sorted(values) and values[-1] == COUNTS[cpu]


def test_vcd(store: Path, trace: cputrace.Trace, tmp_path: Path) -> None:
    """One time step per seq: each core's pc signal holds its instruction's pc at that seq."""
    text = export(store, "vcd", tmp_path / "tc2.vcd").read_text()
    ids = {f"cpu{cpu}": None for cpu in COUNTS}
    scope = None
    for line in text.splitlines():
        if line.startswith("$scope module cpu"):
            scope = line.split()[2]
        elif line.startswith("$var") and line.split()[4] == "pc" and scope in ids:
            ids[scope] = line.split()[3]
        elif line.startswith("$enddefinitions"):
            break
    pcs: dict[str, dict[int, int]] = {signal: {} for signal in ids.values()}
    now = 0
    for line in text.splitlines():
        if line.startswith("#"):
            now = int(line[1:])
        elif line.startswith("b") and line.split()[1] in pcs and "x" not in line.split()[0]:
            pcs[line.split()[1]][now] = int(line.split()[0][1:], 2)
    for cpu, instructions in per_cpu(trace, "SELECT cpu, seq, pc FROM instructions ORDER BY seq").items():
        changes = pcs[ids[f"cpu{cpu}"]]
        times = np.array(sorted(changes))
        values = [changes[t] for t in times]
        for seq, pc in instructions:
            assert values[int(np.searchsorted(times, seq, side="right")) - 1] == pc


@pytest.mark.parametrize("fmt", ["lcov", "cobertura"])
def test_coverage_exports(store: Path, kernel: str, tmp_path: Path, fmt: str) -> None:
    """The same addresses as the coverage command's reports, by address range."""
    report = export(store, fmt, tmp_path / f"tc2.{fmt}", "--image", kernel).read_text()
    assert "6463" in report
