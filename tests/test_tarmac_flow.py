"""Program-flow Tarmac traces (FD/FI only) ingested with their image give the full run back."""

from __future__ import annotations

import struct
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from flow_ops import Stream
from paths import open_input, shared

import cputrace
from cputrace import inputs
from cputrace.cli import cli
from cputrace.image import load_elf
from cputrace.ingest import ingest
from cputrace.isa import BlockCache
from cputrace.model import TABLES, Flag
from cputrace.record import record
from cputrace.store.manifest import table_path

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
_LETTER = {"A32": "A", "T32": "T", "A64": "O"}


def flow_trace(full: Path, elf: Path, out: Path, *, ticks: bool = True) -> Stream:
    """Write the FD/FI records a flow-only tracer gives for the run in `full`; returns the run."""
    stream = Stream.of(open_input(full).sql("SELECT pc, isa, executed FROM instructions ORDER BY seq"))
    blocks = BlockCache(load_elf(elf))
    lines = []
    for i in range(len(stream.pc) - 1):
        if stream.taken(i, blocks):
            kw = "FD" if blocks.insn_at(stream.pc[i], stream.isa[i]).is_direct else "FI"
            tick = f"({i + 1}) " if ticks else ""
            letter = _LETTER[stream.isa[i + 1].name]
            lines.append(f"{i + 1} clk {kw} {tick}{stream.pc[i]:08x} {stream.pc[i + 1]:08x} {letter}")
    out.write_text("\n".join(lines) + "\n")
    return stream


def pcs_of(store: Path) -> list[int]:
    return cputrace.Trace(store).sql("SELECT pc FROM instructions ORDER BY seq").column("pc").to_pylist()


def last_branch(stream: Stream, blocks: BlockCache) -> int:
    return max(i for i in range(len(stream.pc) - 1) if stream.taken(i, blocks))


@pytest.mark.parametrize(
    ("full", "elf"),
    [
        (EXAMPLES / "quicksort.tarmac", EXAMPLES / "quicksort.elf"),
        (("samples", "calculator-aarch32-fastmodel.tarmac"), ("samples", "calculator-aarch32.elf")),
        (("samples", "calculator-aarch64-fastmodel.tarmac"), ("samples", "calculator-aarch64.elf")),
    ],
)
def test_flow_only_trace_with_its_image_gives_the_full_run(full, elf, tmp_path: Path) -> None:
    if isinstance(full, tuple):
        full, elf = shared("tarmac-trace-utilities", *full), shared("tarmac-trace-utilities", *elf)
    stream = flow_trace(full, elf, tmp_path / "flow.tarmac")
    trace = ingest([tmp_path / "flow.tarmac"], tmp_path / "s.ctrace", strict=True,
                                   images=[str(elf)])  # fmt: skip
    rows = cputrace.Trace(trace.store).sql("SELECT pc, isa, executed, flags FROM instructions ORDER BY seq")
    end = last_branch(stream, BlockCache(load_elf(elf))) + 1  # what ran after the last branch is unknown
    assert rows.column("pc").to_pylist() == stream.pc[:end]
    assert rows.column("isa").to_pylist() == [isa.name for isa in stream.isa[:end]]
    assert set(rows.column("flags").to_pylist()) == {Flag.RECONSTRUCTED}
    gaps = cputrace.Trace(trace.store).sql("SELECT count(*) AS n FROM events WHERE kind = 'trace_gap'")
    assert gaps.column("n")[0].as_py() == 0
    # every FD/FI record belongs to the branch instruction it names
    wrong = cputrace.Trace(trace.store).sql(
        "SELECT count(*) AS n FROM events e JOIN instructions i USING (seq) "
        "WHERE e.kind = 'branch' AND e.value <> i.pc"
    )
    assert wrong.column("n")[0].as_py() == 0


def test_without_ticks_or_entry_the_walk_starts_at_the_first_branch(tmp_path: Path) -> None:
    stream = flow_trace(
        EXAMPLES / "quicksort.tarmac", EXAMPLES / "quicksort.elf", tmp_path / "f.tarmac", ticks=False
    )
    lines = (tmp_path / "f.tarmac").read_text().splitlines()
    (tmp_path / "late.tarmac").write_text("\n".join(lines[5:]) + "\n")  # tracing began later
    result = ingest([tmp_path / "late.tarmac"], tmp_path / "s.ctrace",
                                    images=[str(EXAMPLES / "quicksort.elf")])  # fmt: skip
    pcs = pcs_of(result.store)
    source = int(lines[5].split()[3], 16)
    assert pcs[0] == source
    start = next(i for i in range(len(stream.pc)) if stream.pc[i] == source and i >= 5)
    assert pcs == stream.pc[start : start + len(pcs)]


def test_cli_ingest_with_image(tmp_path: Path) -> None:
    flow_trace(EXAMPLES / "quicksort.tarmac", EXAMPLES / "quicksort.elf", tmp_path / "f.tarmac")
    runner = CliRunner()
    elf = str(EXAMPLES / "quicksort.elf")
    store = str(tmp_path / "s")
    out = runner.invoke(cli, ["ingest", str(tmp_path / "f.tarmac"), "--image", elf, "-o", store])
    assert out.exit_code == 0, out.output
    assert "2,036 instructions" in out.output
    listed = runner.invoke(cli, ["list", str(tmp_path / "s"), "--limit", "3"])
    assert listed.exit_code == 0
    assert "0x00008000" in listed.output


def test_a_missing_image_file_is_a_clear_error(tmp_path: Path) -> None:
    flow_trace(EXAMPLES / "quicksort.tarmac", EXAMPLES / "quicksort.elf", tmp_path / "f.tarmac")
    missing = str(tmp_path / "nope.elf")
    out = CliRunner().invoke(cli, ["ingest", str(tmp_path / "f.tarmac"), "--image", missing])
    assert out.exit_code == 1
    assert "nope.elf" in out.output
    assert not (tmp_path / "f.tarmac.ctrace").exists()


A32 = {"nop": 0xE1A00000, "svc": 0xEF000000, "b_self": 0xEAFFFFFE}


def test_exceptions_trap_to_the_vector_and_interrupts_are_gaps(tmp_path: Path) -> None:
    # 0x0: vectors (0x8, 0x18: b 0x100), 0x100: handler; 0x200: main: nop, svc, nop, nop, b 0x200
    words = {0x8: 0xEA00003C, 0x18: 0xEA000038, 0x100: 0xE1B0F00E}  # b 0x100; b 0x100; movs pc, lr
    words |= {0x200: A32["nop"], 0x204: A32["svc"], 0x208: A32["nop"], 0x20C: A32["nop"], 0x210: 0xEAFFFFFA}
    image = bytearray(0x214)
    for address, word in words.items():
        image[address : address + 4] = struct.pack("<I", word)
    (tmp_path / "code.bin").write_bytes(bytes(image))
    (tmp_path / "f.tarmac").write_text(
        "1 clk FD (1) 00000210 00000200 A\n"  # a first loop pass ends at the b
        "2 clk E 00000000 00000003 CoreEvent_SWI\n"
        "3 clk FD (3) 00000008 00000100 A\n"
        "4 clk FI (4) 00000100 00000208 A\n"
        "5 clk FD (5) 00000210 00000200 A\n"
        "6 clk E 00000000 00000007 CoreEvent_IRQ\n"
        "7 clk FD (7) 00000018 00000100 A\n"
    )
    result = ingest([tmp_path / "f.tarmac"], tmp_path / "s.ctrace",
                                    images=[f"{tmp_path / 'code.bin'}@0"])  # fmt: skip
    pcs = pcs_of(result.store)
    assert pcs == [0x210, 0x200, 0x204, 0x8, 0x100, 0x208, 0x20C, 0x210, 0x18]
    events = [e for e in stored(result.store)["events"] if e["kind"] in ("exception", "trace_gap")]
    # the instructions lost before the IRQ come before it, after the last one the walk knows
    assert [(e["kind"], e["name"], e["seq"]) for e in events] == [
        ("exception", "CoreEvent_SWI", 2), ("trace_gap", "interrupted", 7), ("exception", "CoreEvent_IRQ", 7),
    ]  # fmt: skip


def test_list_fills_disassembly_the_input_lacks_and_keeps_the_inputs_own(tmp_path: Path) -> None:
    flow_trace(EXAMPLES / "quicksort.tarmac", EXAMPLES / "quicksort.elf", tmp_path / "f.tarmac")
    runner = CliRunner()
    elf = str(EXAMPLES / "quicksort.elf")
    runner.invoke(cli, ["ingest", str(tmp_path / "f.tarmac"), "--image", elf, "-o", str(tmp_path / "s")])
    filled = runner.invoke(cli, ["list", str(tmp_path / "s"), "--limit", "3", "--format", "csv"])
    assert filled.exit_code == 0
    rows = filled.output.splitlines()
    assert rows[1].endswith(',"mov x0, #0x100000",1') and "bl #0x800c" in rows[3]
    full = str(open_input(EXAMPLES / "quicksort.tarmac").path)
    own = runner.invoke(cli, ["list", full, "--limit", "1", "--format", "csv"])
    assert "MOV      x0,#0x100000" in own.output  # the input's own text wins


def test_bad_images_are_clear_errors_or_gaps(tmp_path: Path) -> None:
    flow_trace(EXAMPLES / "quicksort.tarmac", EXAMPLES / "quicksort.elf", tmp_path / "f.tarmac")
    runner = CliRunner()
    elf = (EXAMPLES / "quicksort.elf").read_bytes()
    (tmp_path / "cut.elf").write_bytes(elf[: len(elf) // 3])
    trace = str(tmp_path / "f.tarmac")
    truncated = runner.invoke(cli, ["ingest", trace, "--image", str(tmp_path / "cut.elf")])
    assert truncated.exit_code == 1
    assert "cut.elf" in truncated.output and "Traceback" not in truncated.output
    (tmp_path / "a.bin").write_bytes(b"\0" * 64)
    overlapping = runner.invoke(
        cli, ["ingest", str(tmp_path / "f.tarmac"), "--image", f"{tmp_path / 'a.bin'}@0x8000",
              "--image", f"{tmp_path / 'a.bin'}@0x8020"],
    )  # fmt: skip
    assert overlapping.exit_code == 1 and "overlaps" in overlapping.output
    # an image that lacks the code: every branch source is an address outside it, so gaps
    (tmp_path / "far.bin").write_bytes(b"\0" * 64)
    far = f"{tmp_path / 'far.bin'}@0x100000"
    result = ingest([tmp_path / "f.tarmac"], tmp_path / "s.ctrace", images=[far])
    gaps = cputrace.Trace(result.store).sql(
        "SELECT name, count(*) AS n FROM events WHERE kind = 'trace_gap' GROUP BY 1"
    )
    assert gaps.to_pylist() == [{"name": "no_code", "n": 309}]
    assert result.manifest["counts"]["instructions"] == 0


CORPUS = Path(__file__).parent / "corpus"
CORPUS_RUNS = [
    ("calls-a32.elf", None), ("calls-t32.elf", None), ("calls-a64.elf", None),
    ("calls-armv5te.elf", "pxa270"), ("exceptions-a32.elf", None), ("exceptions-a64.elf", None),
]  # fmt: skip


@pytest.mark.parametrize(("program", "cpu"), CORPUS_RUNS)
def test_corpus_flow_trace_with_its_elf_gives_the_recorded_full_run(program, cpu, tmp_path: Path) -> None:
    elf = CORPUS / program
    record(elf, tmp_path / "full.tarmac", cpu=cpu)
    record(elf, tmp_path / "flow.tarmac", cpu=cpu, flow_only=True)
    full = ingest([tmp_path / "full.tarmac"], tmp_path / "full.ctrace", strict=True)
    flow = ingest([tmp_path / "flow.tarmac"], tmp_path / "flow.ctrace", strict=True, images=[elf])
    columns = "pc, opcode, size, isa"
    want = cputrace.Trace(full.store).sql(f"SELECT {columns} FROM instructions ORDER BY seq")
    got = cputrace.Trace(flow.store).sql(f"SELECT {columns}, executed FROM instructions ORDER BY seq")
    assert got.num_rows > 100
    assert got.select(columns.split(", ")).to_pydict() == want.slice(0, got.num_rows).to_pydict()
    tail = want.num_rows - got.num_rows  # what ran after the last taken branch is not in a flow trace
    assert 0 <= tail < 64
    gaps = cputrace.Trace(flow.store).sql("SELECT count(*) AS n FROM events WHERE kind = 'trace_gap'")
    assert gaps.column("n")[0].as_py() == 0


@pytest.mark.parametrize("program", sorted(p.name for p in CORPUS.glob("*.elf")))
def test_symbols_and_source_lines_resolve_for_every_corpus_program(program) -> None:
    image = load_elf(CORPUS / program)
    main = image.symbols.address_of("main") if "calls" in program else image.entry
    assert image.symbols.lookup(main) is not None
    if "calls" in program:  # C built with -g1: line tables
        file, line = image.lines.lines_for(main)
        assert file.endswith("calls.c") and line > 0


def test_vector_options_are_numbers_in_any_base_and_bad_ones_are_clear_errors(tmp_path: Path) -> None:
    flow_trace(EXAMPLES / "quicksort.tarmac", EXAMPLES / "quicksort.elf", tmp_path / "f.tarmac")
    runner = CliRunner()
    trace, elf = str(tmp_path / "f.tarmac"), str(EXAMPLES / "quicksort.elf")
    given = ["ingest", trace, "--image", elf, "--option"]
    ok = runner.invoke(cli, [*given, "vbar=0x8800", "-o", str(tmp_path / "a")])
    assert ok.exit_code == 0, ok.output
    bad = runner.invoke(cli, [*given, "vector_base=high", "-o", str(tmp_path / "b")])
    assert bad.exit_code == 2 and "vector_base" in bad.output and "Traceback" not in bad.output
    for value, expected in [
        ("0x1ffffffffffffffff", "a number from 0 to 0xffffffffffffffff"),
        ("-0x800", "a number from 0 to 0xffffffffffffffff"),
        ("0xfffffffffffffff0", "a 2 KiB-aligned address (VBAR bits 10:0 are 0)"),
    ]:
        bad = runner.invoke(cli, [*given, f"vbar={value}", "-o", str(tmp_path / "c")])
        assert bad.exit_code == 2, bad.output
        assert f"option vbar: expected {expected}, got '{value}'" in bad.output
    bad = runner.invoke(cli, [*given, "vector_base=0x1ffffffffffffffff", "-o", str(tmp_path / "d")])
    assert bad.exit_code == 2 and "option vector_base: expected a number from 0 to 0xffffffff" in bad.output


def interleaved(lines: list[str], behind: int) -> list[str]:
    """Flow records of two cores running the same program, core 1 `behind` branches behind."""
    out = []
    for i, line in enumerate(lines):
        time, unit, rest = line.split(" ", 2)
        out.append(f"{time} {unit} cpu0 {rest}")
        if i >= behind:
            time, unit, rest = lines[i - behind].split(" ", 2)
            out.append(f"{time} {unit} cpu1 {rest}")
    return out


def stored(store: Path) -> dict[str, list[dict]]:
    """Every table's rows as stored (not as a query orders them)."""
    return {name: pq.read_table(table_path(store, name)).to_pylist() for name in TABLES}


def test_multi_core_flow_trace_walks_each_core_in_one_seq_order(tmp_path: Path) -> None:
    stream = flow_trace(EXAMPLES / "quicksort.tarmac", EXAMPLES / "quicksort.elf", tmp_path / "f.tarmac")
    lines = (tmp_path / "f.tarmac").read_text().splitlines()
    (tmp_path / "mc.tarmac").write_text("\n".join(interleaved(lines, 3)) + "\n")
    result = ingest([tmp_path / "mc.tarmac"], tmp_path / "s.ctrace", strict=True,
                    images=[str(EXAMPLES / "quicksort.elf")])  # fmt: skip
    rows = stored(result.store)["instructions"]
    assert [r["seq"] for r in rows] == list(range(len(rows)))  # as stored: one seq order over both cores
    src = [r["src"] for r in rows]
    assert src == sorted(src)  # in the order of the records that imply them
    for cpu, branches in ((0, len(lines)), (1, len(lines) - 3)):
        pcs = [r["pc"] for r in rows if r["cpu"] == cpu]
        last = int(lines[branches - 1].split()[4], 16)
        assert pcs == stream.pc[: len(pcs)] and pcs[-1] == last
    t = cputrace.Trace(result.store)
    wrong = t.sql(
        "SELECT count(*) AS n FROM events e JOIN instructions i USING (seq) "
        "WHERE e.kind = 'branch' AND (e.value <> i.pc OR e.cpu <> i.cpu)"
    )
    assert wrong.column("n")[0].as_py() == 0


def test_a_multi_core_flow_trace_stores_the_same_in_chunks_of_any_size(tmp_path: Path, monkeypatch) -> None:
    flow_trace(EXAMPLES / "quicksort.tarmac", EXAMPLES / "quicksort.elf", tmp_path / "f.tarmac")
    lines = interleaved((tmp_path / "f.tarmac").read_text().splitlines(), 5)
    lines[40] = lines[40].replace("FD", "FD_bad")  # a text event of core 0 among core 1's records
    lines.insert(60, f"{lines[60].split()[0]} clk cpu0 E 00000000 00000085 CoreEvent_IRQ")  # vbar unknown
    fields = lines[101].split()
    lines[101] = " ".join([*fields[:5], "00000010", *fields[6:]])  # a source the program never reaches
    (tmp_path / "mc.tarmac").write_text("\n".join(lines) + "\n")
    images = [EXAMPLES / "quicksort.elf"]
    whole = stored(ingest([tmp_path / "mc.tarmac"], tmp_path / "whole.ctrace", images=images).store)
    assert [(e["name"], e["src"]) for e in whole["events"] if e["kind"] in ("text", "trace_gap")] == [
        (None, 41), ("interrupted", 61), ("vector", 61), ("mismatch", 102), ("no_code", 102)
    ]  # fmt: skip
    monkeypatch.setattr(inputs, "CHUNK_BYTES", 512)
    chunked = stored(ingest([tmp_path / "mc.tarmac"], tmp_path / "chunked.ctrace", images=images).store)
    assert chunked == whole


def test_mismatch_gaps_are_stored_in_place_among_the_branch_records(tmp_path: Path) -> None:
    stream = flow_trace(EXAMPLES / "quicksort.tarmac", EXAMPLES / "quicksort.elf", tmp_path / "f.tarmac")
    lines = (tmp_path / "f.tarmac").read_text().splitlines()
    fields = lines[30].split()
    lines[30] = " ".join([*fields[:4], f"{int(fields[4], 16) + 4:08x}", *fields[5:]])  # past the branch
    (tmp_path / "f.tarmac").write_text("\n".join(lines) + "\n")
    images = [EXAMPLES / "quicksort.elf"]
    tables = stored(ingest([tmp_path / "f.tarmac"], tmp_path / "s.ctrace", images=images).store)
    events = [(e["kind"], e["name"], e["src"], e["value"]) for e in tables["events"]]
    branch = int(fields[4], 16)  # walking to the source given runs into the branch: a mismatch there,
    gaps = [("trace_gap", "mismatch", 31, branch), ("trace_gap", "mismatch", 31, branch + 4)]  # and at it
    records = [("branch", f"{f[2]} A64", n, int(f[4], 16)) for n, f in enumerate(map(str.split, lines), 1)]
    assert events == records[:30] + gaps + records[30:]
    before = tables["events"][29]["seq"]  # the gaps belong to the branch before them
    assert [e["seq"] for e in tables["events"][30:33]] == [before] * 3
    pcs = [row["pc"] for row in tables["instructions"]]
    assert pcs[before] == int(lines[29].split()[4], 16) and pcs[: before + 1] == stream.pc[: before + 1]


def test_calls_and_profile_of_a_flow_only_trace_match_the_full_trace(tmp_path: Path) -> None:
    # Conditional instructions whose outcome a flow-only trace cannot tell have executed = null;
    # the analyses read them as executed. The full trace of the same run is the independent answer.
    elf = str(CORPUS / "calls-t32.elf")
    runner = CliRunner()
    for name, extra in (("full", []), ("flow", ["--flow-only"])):
        recorded = runner.invoke(cli, ["record", elf, "-o", str(tmp_path / f"{name}.tarmac"), *extra])
        assert recorded.exit_code == 0, recorded.output
        ingested = runner.invoke(cli, ["ingest", str(tmp_path / f"{name}.tarmac"), "--image", elf])
        assert ingested.exit_code == 0, ingested.output
    assert cputrace.open(tmp_path / "flow.tarmac").sql(
        "SELECT count(*) AS n FROM instructions WHERE executed IS NULL"
    ).column("n")[0].as_py() > 0

    def rows(name: str, command: str) -> dict[str, list[str]]:
        store = str(tmp_path / f"{name}.tarmac.ctrace")
        out = runner.invoke(cli, [command, store, "--image", elf, "--method", "isa", "--format", "csv"])
        assert out.exit_code == 0, out.output
        header, *lines = [line.split(",") for line in out.stdout.splitlines()]
        counts = [i for i, column in enumerate(header) if not column.startswith("time")]  # times differ
        return {row[header.index("name")]: [row[i] for i in counts] for row in lines}

    for command in ("calls", "profile"):
        full, flow = rows("full", command), rows("flow", command)
        # a flow-only trace ends at its last branch: the program's exit after it is not in it
        assert set(full) - set(flow) == {"exit_with"} and set(flow) <= set(full)
        for function in set(flow) - {"_start"}:
            assert flow[function] == full[function], (command, function)


def test_records_of_a_batch_without_branch_records_are_kept(tmp_path: Path) -> None:
    """The fuzz case: a flow-only trace with CR line ends is one line of the LF-split reader,
    so the only batch has no FD/FI record to walk; its text event is kept at seq 0."""
    elf = CORPUS / "calls-a32.elf"
    record(elf, tmp_path / "flow.tarmac", flow_only=True)
    text = (tmp_path / "flow.tarmac").read_bytes()
    (tmp_path / "cr.tarmac").write_bytes(text.replace(b"\n", b"\r"))
    result = ingest([tmp_path / "cr.tarmac"], tmp_path / "s.ctrace", images=[str(elf)])
    tables = stored(result.store)
    assert tables["instructions"] == []
    events = [(e["seq"], e["kind"], e["src"]) for e in tables["events"]]
    assert events == [(0, "text", 1)]
    assert tables["events"][0]["text"].startswith(text.split(b"\n")[0].decode())
