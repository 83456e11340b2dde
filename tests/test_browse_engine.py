"""The browsing engine (cputrace.browse.session) on real traces, against independent answers:
SQL over the store, `cputrace state`, the reference tool's index dumps, the ELF's symbols."""

from __future__ import annotations

import csv
import io
import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from elftools.elf.elffile import ELFFile
from paths import DATA, SHARED, shared

from cputrace.analysis.state import FROM_IMAGE, READ_BEFORE_WRITE, UNKNOWN
from cputrace.browse.diffview import Difference, DiffView
from cputrace.browse.index import build
from cputrace.browse.session import Session
from cputrace.cli import cli
from cputrace.errors import BrowseError, CputraceError
from cputrace.image import load_elf
from cputrace.ingest import ingest
from cputrace.model import TABLES
from cputrace.store.trace import Trace

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
STATE = DATA / "state"


@pytest.fixture(scope="module")
def quicksort(open_input) -> Session:
    session = Session.open(open_input(EXAMPLES / "quicksort.tarmac"), load_elf(EXAMPLES / "quicksort.elf"))
    yield session
    session.close()


def test_a_built_store_browses_without_the_isa_decoders(open_input) -> None:
    """A store whose instructions carry their disassembly, browsed without an image, needs no
    ISA decoder: numba and capstone (a second of imports before the first screen) stay out;
    nor pyarrow's compute functions, datasets and query engine, nor the ingest module, nor
    DuckDB until a search asks for SQL (a tenth of a second and more)."""
    trace = open_input(EXAMPLES / "quicksort.tarmac")
    Session.open(trace).close()  # its indexes, built here
    script = (
        "import sys, cputrace\n"
        "from cputrace.browse.app import BrowseApp\n"
        "from cputrace.browse.session import Session\n"
        f"s = Session.open(cputrace.open({str(trace.path)!r}))\n"
        "seq = s.seq_of(s.cpu, 40)\n"
        "lines, stack = s.lines(s.cpu, 0, 48), s.stack(s.cpu, seq)\n"
        "registers, memory = s.registers(s.cpu, seq), s.memory(s.evaluate('sp', s.cpu, seq), 64, seq)\n"
        "strip = s.timeline(s.cpu, 80, 8)\n"
        "assert lines[40].seq == seq and lines[40].disasm and registers and stack and strip.counts.sum()\n"
        "unused = ('numba', 'capstone', 'cputrace.isa', 'cputrace.ingest',\n"
        "          'pyarrow.compute', 'pyarrow.dataset', 'pyarrow.acero', 'duckdb')\n"
        "print(sorted(name for name in unused if name in sys.modules))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    found = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert found.returncode == 0, found.stderr
    assert found.stdout.strip() == "[]"


def test_with_an_image_the_branch_targets_can_wait_for_the_decoders(open_input) -> None:
    """`targets_later` (the app's first screen): lines come without branch targets, and the
    ISA decoders (longer to load than the rest of the browser) stay out, until `load_targets`;
    then the direct calls into quicksort name it: the BLs SQL finds followed by its entry."""
    trace = open_input(EXAMPLES / "quicksort.tarmac")
    elf = EXAMPLES / "quicksort.elf"
    Session.open(trace, load_elf(elf)).close()  # its indexes, built here
    script = (
        "import json, sys, cputrace\n"
        "from cputrace.image import load_elf\n"
        "from cputrace.browse.session import Session\n"
        f"s = Session.open(cputrace.open({str(trace.path)!r}), load_elf({str(elf)!r}))\n"
        "s.targets_later = True\n"
        "before = [ln.target for ln in s.lines(s.cpu, 0, s.count(s.cpu))]\n"
        "loaded = sorted(name for name in ('numba', 'capstone', 'cputrace.isa') if name in sys.modules)\n"
        "s.load_targets()\n"
        "after = [(ln.seq, ln.target, ln.target_symbol) for ln in s.lines(s.cpu, 0, s.count(s.cpu))]\n"
        "print(json.dumps([before, loaded, after]))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    found = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert found.returncode == 0, found.stderr
    before, loaded, after = json.loads(found.stdout)
    assert set(before) == {None} and loaded == []
    entry = _elf_symbol("quicksort")
    calls = trace.sql(
        "SELECT a.seq FROM instructions a JOIN instructions b ON b.seq = a.seq + 1 "
        f"WHERE b.pc = {entry} AND upper(a.disasm) LIKE 'BL %' ORDER BY a.seq"
    ).column("seq").to_pylist()
    assert calls
    assert [seq for seq, target, _ in after if target == entry] == calls
    assert {name for _, target, name in after if target == entry} == {"quicksort"}


def _elf_symbol(name: str) -> int:
    with open(EXAMPLES / "quicksort.elf", "rb") as f:
        symbols = ELFFile(f).get_section_by_name(".symtab")
        return next(s["st_value"] for s in symbols.iter_symbols() if s.name == name)


def _state_json(trace: Trace, seq: int, *more: str) -> dict:
    result = CliRunner().invoke(cli, ["state", str(trace.path), "--at", str(seq), "--format", "json", *more])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_lines_are_the_stores_rows_with_their_records(quicksort: Session) -> None:
    trace = quicksort.trace
    count = quicksort.count(0)
    assert count == trace.manifest["counts"]["instructions"]
    # overlapping screens: lines kept from one read and lines read anew, in one answer
    for first, rows in ((0, 40), (1000, 40), (990, 40), (1030, 40), (950, 160), (count - 20, 40)):
        lines = quicksort.lines(0, first, rows)
        expected = trace.sql(
            "SELECT seq, pc, opcode, executed, src FROM instructions ORDER BY seq "
            f"LIMIT {rows} OFFSET {first}"
        ).to_pylist()
        assert [(ln.seq, ln.pc, ln.opcode, ln.executed, ln.src) for ln in lines] == [
            (r["seq"], r["pc"], r["opcode"], r["executed"], r["src"]) for r in expected
        ]
        assert [ln.index for ln in lines] == list(range(first, first + len(expected)))
        low, high = lines[0].seq, lines[-1].seq
        registers = trace.sql(
            f"SELECT seq, reg, value FROM registers WHERE seq BETWEEN {low} AND {high} ORDER BY seq, src"
        )
        assert [(ln.seq, w.name, w.value) for ln in lines for w in ln.registers] == [
            (r["seq"], r["reg"], r["value"]) for r in registers.to_pylist()
        ]
        memory = trace.sql(
            f"SELECT seq, op, addr, size, value FROM memory WHERE seq BETWEEN {low} AND {high} "
            "ORDER BY seq, src"
        )
        assert [(ln.seq, m.op, m.address, m.size, m.value) for ln in lines for m in ln.memory] == [
            (r["seq"], r["op"], r["addr"], r["size"], r["value"]) for r in memory.to_pylist()
        ]
    assert quicksort.lines(0, count, 10) == []


def test_events_and_symbols_in_lines(quicksort: Session) -> None:
    row = quicksort.trace.sql("SELECT seq, kind FROM events WHERE kind = 'exception'").to_pylist()[0]
    line = quicksort.line(row["seq"])
    assert "exception" in [e.kind for e in line.events]
    main = _elf_symbol("quicksort")
    visit = quicksort.trace.sql(f"SELECT min(seq) AS seq FROM instructions WHERE pc = {main}").to_pylist()[0]
    assert quicksort.line(visit["seq"]).symbol == "quicksort"
    # a direct call into quicksort: its target is named
    calls = [ln for ln in quicksort.lines(0, 0, quicksort.count(0)) if ln.target == main]
    assert calls and all(ln.target_symbol == "quicksort" for ln in calls)


def test_positions_against_sql(quicksort: Session) -> None:
    trace = quicksort.trace
    rows = trace.sql("SELECT seq, time FROM instructions ORDER BY seq").to_pylist()
    for index in (0, 1, 777, len(rows) - 1):
        assert quicksort.seq_of(0, index) == rows[index]["seq"]
        assert quicksort.index_of(0, rows[index]["seq"]) == index
    for time in (rows[0]["time"], rows[500]["time"] + 1, rows[-1]["time"] + 100):
        expected = trace.sql(f"SELECT max(seq) AS s FROM instructions WHERE time <= {time}").to_pylist()[0][
            "s"
        ]
        assert quicksort.seq_at_time(time) == expected
    with pytest.raises(BrowseError, match="no instruction at or before time"):
        quicksort.seq_at_time(rows[0]["time"] - 1)


def test_registers_against_the_state_command(quicksort: Session) -> None:
    rng = random.Random(5)
    count = quicksort.count(0)
    for seq in [0, count - 1, *(rng.randrange(count) for _ in range(6))]:
        expected = {r["name"]: (r["hex"], r["seq"]) for r in _state_json(quicksort.trace, seq)["registers"]}
        mine = {r.name: (r.hex(), r.seq) for r in quicksort.registers(0, seq)}
        assert mine == expected, f"seq {seq}"
        name = "x9"
        if name in expected:
            assert quicksort.register_writer(0, name, seq) == expected[name][1]


def test_registers_and_memory_against_the_reference_tool(tmp_path: Path) -> None:
    """Every register and memory byte after every instruction, and its writer, as
    tarmac-indextest dumps them."""
    from test_state import _a64_register, parse_ref

    trace = Trace(ingest([STATE / "indextest.tarmac"], tmp_path / "i.ctrace").store)
    session = Session.open(trace)
    line_to_seq = {r["src"]: r["seq"] for r in trace.sql("SELECT src, seq FROM instructions").to_pylist()}
    nodes = parse_ref(STATE / "indextest-li.ref")
    low = min(a for n in nodes for a in n.memory) - 16
    length = max(a for n in nodes for a in n.memory) + 16 - low
    for node in nodes:
        seq = line_to_seq[node.line]
        mine = {r.name: r for r in session.registers(0, seq)}
        for name, (data, line) in node.registers.items():
            ours = _a64_register(name)
            if ours is None:
                continue
            assert mine[ours].data[: len(data)] == data
            assert mine[ours].seq == line_to_seq[line]
            assert session.register_writer(0, ours, seq) == line_to_seq[line]
        memory = session.memory(low, length, seq)
        for offset in range(length):
            if low + offset in node.memory:
                byte, line = node.memory[low + offset]
                assert memory.data[offset] == byte
                assert memory.origin[offset] == (line_to_seq[line] if line else READ_BEFORE_WRITE)
            else:
                assert memory.origin[offset] == UNKNOWN
    session.close()


def test_memory_and_its_writers(quicksort: Session) -> None:
    trace = quicksort.trace
    writes = trace.sql("SELECT seq, addr, size FROM memory WHERE op = 'W' ORDER BY seq").to_pylist()
    for write in (writes[3], writes[len(writes) // 2], writes[-1]):
        seq, address = write["seq"], write["addr"]
        image = str(EXAMPLES / "quicksort.elf")
        state = _state_json(trace, seq, "--mem", hex(address - 8), "32", "--image", image)["memory"][0]
        memory = quicksort.memory(address - 8, 32, seq)
        assert state["hex"] == "".join(
            f"{b:02x}" if k else "??" for b, k in zip(memory.data, memory.known, strict=True)
        )
        origins = [run["seq"] if run["origin"] == "write" else run["origin"] for run in state["runs"]
                   for _ in range(run["length"])]  # fmt: skip
        named = {READ_BEFORE_WRITE: "read", FROM_IMAGE: "image", UNKNOWN: "unknown"}
        assert [int(o) if o >= 0 else named[int(o)] for o in memory.origin] == origins
        for size in (1, 2, 4, 8):
            unit = address - address % size
            last = trace.sql(
                f"SELECT max(seq) AS s FROM memory WHERE op IN ('W', 'U') AND seq <= {seq} "
                f"AND addr < {unit + size} AND addr + size > {unit}"
            ).to_pylist()[0]["s"]
            assert quicksort.memory_writer(address, size, seq) == last
        assert quicksort.memory_writer(address, 4, write["seq"] - 1) != seq


def test_expressions(quicksort: Session) -> None:
    main = _elf_symbol("quicksort")
    seq = 1500
    registers = {r["name"]: r["value"] for r in _state_json(quicksort.trace, seq)["registers"]}
    assert quicksort.evaluate("quicksort+0x10", 0, seq) == main + 0x10
    assert quicksort.evaluate("(quicksort + 4) * 2 - 8", 0, seq) == (main + 4) * 2 - 8
    assert quicksort.evaluate("sp+16", 0, seq) == registers["sp_el3"] + 16
    assert quicksort.evaluate("X9 + x10", 0, seq) == registers["x9"] + registers["x10"]
    assert quicksort.evaluate("0x8000", 0, seq) == 0x8000
    assert quicksort.evaluate("pc", 0, seq) == quicksort.line(seq).pc
    for text, message in [
        ("nosuchsymbol", "unknown name 'nosuchsymbol'"),
        ("main +", "not an expression"),
        ("main(1)", "not allowed"),
        ("0 - 1", "outside the 64-bit address space"),
        ("1 << 99", "shift by 99"),
        ("__import__('os')", "not allowed"),
        ("", "empty expression"),
    ]:
        with pytest.raises(BrowseError, match=message):
            quicksort.evaluate(text, 0, seq)


def test_bad_positions(quicksort: Session) -> None:
    count = quicksort.count(0)
    with pytest.raises(BrowseError, match=f"instructions 0..{count - 1}, not {count}"):
        quicksort.seq_of(0, count)
    with pytest.raises(BrowseError, match="no instruction with seq"):
        quicksort.line(10**9)
    with pytest.raises(BrowseError, match="no core 7"):
        quicksort.registers(7, 0)
    with pytest.raises(BrowseError, match="1, 2, 4 or 8"):
        quicksort.memory_writer(0, 3, 0)
    last = count - 1
    for ask in (
        lambda: quicksort.registers(0, last + 1),
        lambda: quicksort.memory(0x8000, 16, last + 1),
        lambda: quicksort.memory_writer(0x8000, 4, last + 1),
        lambda: quicksort.evaluate("sp", 0, last + 1),
        lambda: quicksort.stack(0, last + 1),
    ):
        with pytest.raises(BrowseError, match=f"seq {last + 1} is past the end of the trace"):
            ask()
    with pytest.raises(BrowseError, match="outside the 64-bit address space"):
        quicksort.memory((1 << 64) - 4, 16, 0)
    assert quicksort.registers(0, -1) == []  # before the first instruction: nothing written
    assert quicksort.index_of(0, -5) is None and quicksort.stack(0, -5) == []
    assert quicksort.index_of(0, 1 << 70) == last and quicksort.next_mark(0, 1 << 70) is None
    assert quicksort.lines(0, 1 << 70, 5) == [] and quicksort.move(0, 1 << 70, 1 << 70) == last
    assert issubclass(BrowseError, CputraceError)


def test_visits_marks_and_search_against_sql(quicksort: Session) -> None:
    trace = quicksort.trace
    pc = _elf_symbol("quicksort")
    visits = [
        r["seq"] for r in trace.sql(f"SELECT seq FROM instructions WHERE pc = {pc} ORDER BY seq").to_pylist()
    ]
    assert len(visits) > 2
    assert quicksort.next_visit(0, visits[0]) == visits[1]
    assert quicksort.next_visit(0, visits[1] - 1, pc=pc) == visits[1]
    assert quicksort.next_visit(0, visits[1], forward=False) == visits[0]
    assert quicksort.next_visit(0, visits[-1]) is None
    assert quicksort.next_visit(0, visits[0], forward=False) is None
    assert quicksort.goto_pc(pc, 0, visits[-1]) == visits[0]  # wraps round
    with pytest.raises(BrowseError, match="never executes"):
        quicksort.goto_pc(0x4, 0, 0)

    exceptions = [r["seq"] for r in trace.sql("SELECT seq FROM events WHERE kind = 'exception'").to_pylist()]
    assert quicksort.next_mark(0, -1) == (exceptions[0], "exception")
    assert quicksort.next_mark(0, exceptions[0]) is None
    assert quicksort.next_mark(0, exceptions[0] + 1, forward=False) == (exceptions[0], "exception")
    assert quicksort.next_mark(0, -1, kinds=("trace_gap",)) is None
    with pytest.raises(BrowseError, match="cannot jump to text"):
        quicksort.next_mark(0, 0, kinds=("text",))

    condition = "NOT executed AND pc > 0x8000"
    matches = [
        r["seq"]
        for r in trace.sql(f"SELECT seq FROM instructions WHERE {condition} ORDER BY seq").to_pylist()
    ]
    assert len(matches) > 2
    assert quicksort.search(condition, 0, -1) == matches[0]
    assert quicksort.search(condition, 0, matches[1]) == matches[2]
    assert quicksort.search(condition, 0, matches[2], forward=False) == matches[1]
    assert quicksort.search(condition, 0, matches[0], forward=False) is None
    assert quicksort.search("pc = 1", 0, 0) is None


@pytest.mark.parametrize(
    ("condition", "message"),
    [
        ("pc = ", "not an SQL expression"),
        ("1 = 1) UNION SELECT 1 --", "not"),
        ("no_such_column = 1", "no_such_column"),
        ("pc = (SELECT count(*) FROM read_csv('/etc/passwd'))", "search"),
    ],
)
def test_bad_searches(quicksort: Session, condition: str, message: str) -> None:
    with pytest.raises(CputraceError, match=message):
        quicksort.search(condition, 0, 0)


def _frames_csv(trace: Trace, *more: str) -> list[dict]:
    result = CliRunner().invoke(cli, ["calls", str(trace.path), "--tree", "--format", "csv", *more])
    assert result.exit_code == 0, result.output
    return list(csv.DictReader(io.StringIO(result.output)))


def test_stacks_and_folds_against_the_calls_command(quicksort: Session) -> None:
    frames = _frames_csv(quicksort.trace, "--image", str(EXAMPLES / "quicksort.elf"))
    count = quicksort.count(0)
    for seq in (0, 100, 500, 1500, count - 1):
        holding = [f for f in frames if int(f["index"]) <= seq < int(f["index"]) + int(f["insns"])]
        expected = [
            (f["name"], int(f["entry_seq"]), int(f["call_pc"]) if f["call_pc"] else None) for f in holding
        ]
        assert [(f.name, f.entry_seq, f.call_pc) for f in quicksort.stack(0, seq)] == expected
    deepest = max((f for f in frames if int(f["depth"]) > 0), key=lambda f: int(f["depth"]))
    inside = int(deepest["entry_seq"]) + 1
    call, last = quicksort.call_at(0, inside)
    assert (call.entry_seq, last + 1) == (int(deepest["entry_seq"]), int(deepest["resume_seq"]))
    assert quicksort.call_at(0, 0) is None

    folds = quicksort.folds
    try:
        assert quicksort.fold_call(0, inside).entry_seq == int(deepest["entry_seq"])
        lines = quicksort.lines(0, int(deepest["call_seq"]), 3, folds)
        assert [ln.seq for ln in lines] == [
            int(deepest["call_seq"]), int(deepest["entry_seq"]), int(deepest["resume_seq"])
        ]  # fmt: skip
        assert lines[1].folded.instructions == int(deepest["insns"])
        assert lines[1].folded.end_seq == int(deepest["resume_seq"]) - 1
        assert quicksort.move(0, int(deepest["call_seq"]), 2, folds) == int(deepest["resume_seq"])
        assert quicksort.move(0, int(deepest["resume_seq"]), -1, folds) == int(deepest["entry_seq"])
        assert quicksort.move(0, inside, 0, folds) == int(deepest["entry_seq"])  # shown by the folded line
        assert quicksort.unfold(0, inside).entry_seq == int(deepest["entry_seq"])
        assert [ln.seq for ln in quicksort.lines(0, int(deepest["call_seq"]), 3, folds)] == [
            int(deepest["call_seq"]) + i for i in range(3)
        ]

        # `[` at the outermost quicksort call folds the calls it makes, and only those
        outer = next(f for f in frames if f["depth"] == "1")
        callees = [f for f in frames if f["parent"] == outer["id"]]
        quicksort.fold_callees(0, int(outer["entry_seq"]))
        shown = quicksort.lines(0, 0, count, folds)
        assert [ln.folded.entry_seq for ln in shown if ln.folded] == [int(f["entry_seq"]) for f in callees]
        assert len(shown) == count - sum(int(f["insns"]) - 1 for f in callees)
    finally:
        quicksort.unfold_all()
    assert not folds.any(0)


def test_call_tree_against_the_calls_command(quicksort: Session) -> None:
    result = CliRunner().invoke(
        cli,
        ["calls", str(quicksort.trace.path), "--format", "csv", "--image", str(EXAMPLES / "quicksort.elf")],
    )
    functions = {r["name"]: r for r in csv.DictReader(io.StringIO(result.output))}
    tree = quicksort.call_tree(0)
    for name, row in functions.items():
        nodes = [n for n in tree if n.name == name]
        assert sum(n.calls for n in nodes) == int(row["calls"])
        assert sum(n.insns for n in nodes if not n.recursive) == int(row["insns"])
    root = tree[0]
    assert (root.parent, root.insns, quicksort.seq_of(0, root.first_index)) == (-1, quicksort.count(0), 0)


ROOT = Path(__file__).resolve().parent.parent
STORES = {
    # name: (input, ingest keyword arguments, image for the session)
    "tc2 (ETMv3, 3 cores)": ("tests/data/etmv3/tc2/snapshot.ini", {}, None),
    "leon-cf": ("examples/leon-cf.txt", {"images": [DATA / "leon" / "itb_demo.elf"]}, None),
    "leon-itb": ("examples/leon-itb.bin", {"format": "leon-itb"}, DATA / "leon" / "itb_demo.elf"),
    "xscale": (
        "tests/data/xscale/calls-armv5te-wrap.txt",
        {"images": [ROOT / "tests" / "corpus" / "calls-armv5te.elf"]},
        ROOT / "tests" / "corpus" / "calls-armv5te.elf",
    ),
    "calltest64": (str(SHARED / "tarmac-trace-utilities" / "tests" / "calltests" / "calltest64.tarmac"), {},
                   DATA / "image" / "calltest64.elf"),
}  # fmt: skip


@pytest.fixture(scope="module", params=list(STORES))
def store_session(request, open_input) -> tuple[Session, list[str]]:
    """A session on each kind of store, and the --image options its calls were found with."""
    source, kwargs, image = STORES[request.param]
    path = ROOT / source
    if not path.exists():
        shared(*path.relative_to(SHARED).parts)  # skips (fails in CI) without the shared corpus
    session = Session.open(open_input(path, **kwargs), load_elf(image) if image else None)
    yield session, ["--image", str(image)] if image else []
    session.close()


def _sql(trace: Trace, query: str) -> list[dict]:
    return trace.sql(query).to_pylist()


def test_every_store_kind_against_sql_and_the_commands(store_session: tuple[Session, list[str]]) -> None:
    session, image = store_session
    trace = session.trace
    counts = {
        r["cpu"]: r["n"] for r in _sql(trace, "SELECT cpu, count(*) AS n FROM instructions GROUP BY cpu")
    }
    assert {cpu: session.count(cpu) for cpu in session.cores} == counts
    for cpu, count in counts.items():
        frames = _frames_csv(trace, "--cpu", str(cpu), *image)
        for first in sorted({0, count // 2, max(0, count - 5)}):
            expected = _sql(
                trace,
                f"SELECT seq, pc, executed FROM instructions WHERE cpu = {cpu} "
                f"ORDER BY seq LIMIT 8 OFFSET {first}",
            )
            lines = session.lines(cpu, first, 8)
            assert [(ln.seq, ln.pc, ln.executed) for ln in lines] == [
                (r["seq"], r["pc"], r["executed"]) for r in expected
            ]
            seq = lines[0].seq
            state = _state_json(trace, seq, "--cpu", str(cpu))["registers"]
            assert {(r.name, r.hex(), r.seq) for r in session.registers(cpu, seq)} == {
                (r["name"], r["hex"], r["seq"]) for r in state
            }
            marks = _sql(
                trace,
                f"SELECT seq, kind FROM events WHERE cpu = {cpu} AND kind IN ('exception', 'trace_gap') "
                f"AND seq > {seq} ORDER BY seq, src LIMIT 1",
            )
            assert session.next_mark(cpu, seq) == ((marks[0]["seq"], marks[0]["kind"]) if marks else None)
            holding = [int(f["entry_seq"]) for f in frames
                       if int(f["index"]) <= first < int(f["index"]) + int(f["insns"])]  # fmt: skip
            assert [f.entry_seq for f in session.stack(cpu, seq)] == holding
    if len(counts) > 1:
        cpu = session.cores[0]
        seq = session.seq_of(cpu, counts[cpu] // 2)
        clause = f"time <= {session.line(seq).time}" if session.has_time else f"seq <= {seq}"
        for other, position in session.positions_at(seq).items():
            expected = _sql(trace, f"SELECT max(seq) AS s FROM instructions WHERE cpu = {other} AND {clause}")
            assert position == (seq if other == cpu else expected[0]["s"])


def test_source_lines_against_addr2line(recorded_calls_a64: tuple[Path, Trace]) -> None:
    """A program recorded under unicorn, its pcs' files and lines as binutils' addr2line
    gives them, and the text from the corpus sources."""
    if shutil.which("addr2line") is None:
        pytest.skip("binutils' addr2line is not installed")
    elf, trace = recorded_calls_a64
    session = Session.open(trace, load_elf(elf), source_dirs=[ROOT / "tests" / "corpus" / "src"])
    pcs = sorted({r["pc"] for r in _sql(trace, "SELECT DISTINCT pc FROM instructions")})[::7]
    answers = subprocess.run(
        ["addr2line", "-e", str(elf), *(hex(pc) for pc in pcs)], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    checked = 0
    for pc, answer in zip(pcs, answers, strict=True):
        file, _, line = answer.split(" (discriminator")[0].rpartition(":")
        view = session.source(pc, context=2)
        if file == "??":
            assert view is None
            continue
        assert (Path(view.file).name, view.line) == (Path(file).name, int(line))
        source = (ROOT / "tests" / "corpus" / "src" / Path(file).name).read_text().splitlines()
        assert view.path is not None and view.text == tuple(source[view.first - 1 : view.line + 2])
        checked += 1
    assert checked > 10
    assert Session.open(trace).source(pcs[0]) is None  # no image, no lines


@pytest.mark.parametrize(("columns", "rows"), [(16, 4), (200, 64), (7, 3)])
def test_timeline_against_sql(quicksort: Session, columns: int, rows: int) -> None:
    trace = quicksort.trace
    strip = quicksort.timeline(0, columns, rows)
    assert strip.axis.name == "time" and strip.counts.shape == (min(rows, len(strip.bands)), columns)
    starts = [strip.start_of(c) for c in range(columns)] + [strip.axis.hi]
    for column in range(columns):
        expected = _sql(
            trace,
            f"SELECT count(*) AS n FROM instructions WHERE time >= {starts[column]} "
            f"AND time < {starts[column + 1]}",
        )[0]["n"]
        assert strip.counts[:, column].sum() == expected
    for row, band in enumerate(strip.bands):
        expected = _sql(
            trace, f"SELECT count(*) AS n FROM instructions WHERE pc BETWEEN {band.lo} AND {band.hi}"
        )
        assert strip.counts[row].sum() == expected[0]["n"]
    assert strip.bands[0].name == "_start"
    for seq in (0, 999, quicksort.count(0) - 1):
        time = quicksort.line(seq).time
        column = quicksort.timeline_column(strip, seq)
        assert starts[column] <= time < starts[column + 1]
    for column in (0, columns // 2, columns - 1):
        first = _sql(trace, f"SELECT min(seq) AS s FROM instructions WHERE time >= {starts[column]}")[0]["s"]
        assert quicksort.timeline_seq(strip, column) == first


def test_diff_against_the_diff_command(quicksort: Session, tmp_path: Path) -> None:
    """Quicksort against a copy with one register value changed and one instruction left out."""
    text = (EXAMPLES / "quicksort.tarmac").read_text().splitlines(keepends=True)
    changed = text.index("1427 clk R X20 000000000000810A\n")
    dropped = text.index("1433 clk IT (1433) 00008080 f100067f O EL3h_s : CMP      x19,#1\n")
    assert text[dropped + 1].startswith("1433 clk R cpsr")
    text[changed] = "1427 clk R X20 000000000000810F\n"
    del text[dropped : dropped + 2]
    (tmp_path / "b.tarmac").write_text("".join(text))
    other = Session.open(Trace(ingest([tmp_path / "b.tarmac"], tmp_path / "b.ctrace").store))
    view = DiffView.open(quicksort, other)

    result = CliRunner().invoke(
        cli, ["diff", str(quicksort.trace.path), str(other.trace.path), "--format", "json", "--max", "1000"]
    )
    listed = json.loads(result.output)["listed"]
    walked, seq = [], -1
    while (divergence := view.next_divergence(0, seq)) is not None:
        walked.append(divergence)
        seq = divergence.position
    assert [
        {"cpu": d.cpu, "kinds": list(d.kinds), "a_seq": d.a_seq, "b_seq": d.b_seq, "a_count": d.a_count,
         "b_count": d.b_count} for d in walked
    ] == listed  # fmt: skip
    assert view.next_divergence(0, walked[-1].position + 1, forward=False) == walked[-1]
    assert view.summary["divergences"] == len(listed)

    seqs = {r["src"]: r["seq"] for r in _sql(quicksort.trace, "SELECT src, seq FROM instructions")}
    at_change = seqs[changed]  # the instruction line just above the register line (lines count from 1)
    assert quicksort.line(at_change).disasm.startswith("ADD")
    gone = seqs[dropped + 1]
    assert view.aligned(0, at_change) == (at_change, True)
    assert view.aligned(0, gone) == (gone - 1, False)
    assert view.aligned(0, gone + 1) == (gone, True)
    assert [k for d in view.divergences_at(0, at_change) for k in d.kinds] == ["registers"]
    assert view.divergent_seqs(0, 0, quicksort.last_seq) == {d.position for d in walked}
    assert view.divergent_seqs(0, at_change - 5, at_change + 5) == {at_change}
    assert view.differences(at_change, at_change) == [Difference("x20", 0x810A, 0x810F)]
    assert view.differences(gone + 1, gone) == []
    other.close()


def test_index_build_reports_its_progress(quicksort: Session, tmp_path: Path) -> None:
    seen: list[tuple[str, float]] = []
    build(quicksort.trace, tmp_path, lambda what, done: seen.append((what, done)))
    fractions = [done for _, done in seen]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0 and len(seen) > len(TABLES)
    assert {what for what, _ in seen} >= {"copying instructions", "register snapshots", "visits", "timeline"}


def test_a_trace_without_instructions(tmp_path: Path) -> None:
    (tmp_path / "t.tarmac").write_text("not a trace line\n")
    trace = Trace(ingest([tmp_path / "t.tarmac"], tmp_path / "t.ctrace", format="tarmac").store)
    assert trace.manifest["counts"]["instructions"] == 0
    with pytest.raises(BrowseError, match="no instructions to browse"):
        Session.open(trace)
