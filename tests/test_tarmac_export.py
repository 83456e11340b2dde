"""The Tarmac writer: the compiled writer gives the record functions' lines; every input
format's export reads back with --strict to the same instructions, register writes, accesses
and event kinds (where Tarmac can say them; the rest as docs/formats.md "Tarmac export" lists);
every line is in a form Arm's Tarmac Trace Utilities read without a warning, as their own
parser tests (tests/data/tarmac/parsertest*) show; each core's times stay in order."""

from __future__ import annotations

import io
import json
import lzma
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from paths import DATA, shared

import cputrace
from cputrace.export.registry import EXPORTERS, ExportRequest
from cputrace.export.tarmac import (
    event_record,
    instruction_record,
    memory_record,
    register_record,
    write_tarmac,
)
from cputrace.ingest import ingest
from cputrace.record import record

TTU = "tarmac-trace-utilities"
TRACES = [
    (TTU, "tests", "quicksort.tarmac"),
    (TTU, "samples", "calculator-aarch32-fastmodel.tarmac"),
    (TTU, "samples", "calculator-aarch32-es-ld-st-style.tarmac"),
    (TTU, "samples", "calculator-aarch64-fastmodel.tarmac"),
    (TTU, "samples", "calculator-aarch64-es-ld-st-style.tarmac"),
    (TTU, "samples", "calculator-aarch64-gem5.tarmac"),
]
TARMAC = [DATA / "tarmac" / "parsertest.txt"]
CORPUS = Path(__file__).parent / "corpus"
LEON_ELF = DATA / "leon" / "itb_demo.elf"


def _name(source: tuple[str, ...] | Path) -> str:
    return Path(*source).name if isinstance(source, tuple) else source.name


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory):
    """Each shared or committed Tarmac input ingested once, into a temporary store."""
    made: dict[Path, cputrace.Trace] = {}

    def get(source: tuple[str, ...] | Path) -> cputrace.Trace:
        path = source if isinstance(source, Path) else shared(*source)
        if path not in made:
            store = tmp_path_factory.mktemp("stores") / f"{path.name}.ctrace"
            made[path] = cputrace.open(ingest([path], store).store)
        return made[path]

    return get


# -- one store per input format ---------------------------------------------------------------


def _tc2(folder: Path) -> Path:
    """The TC2 snapshot with its kernel memory dump (committed xz-compressed)."""
    tc2 = DATA / "etmv3" / "tc2"
    for path in tc2.iterdir():
        if path.is_file() and path.suffix != ".xz":
            shutil.copy(path, folder)
    (folder / "kernel_dump.bin").write_bytes(lzma.decompress((tc2 / "kernel_dump.bin.xz").read_bytes()))
    return folder / "snapshot.ini"


def _leon_raw(folder: Path, lines: list[int], size: int, settings: dict) -> Path:
    enc = pytest.importorskip("leon_encoder")
    dump, pointer = enc.buffer(lines, size)
    path = folder / "buffer.bin"
    path.write_bytes(dump)
    key = "control" if settings.get("kind") == "ahb" else "itbc0"
    register = hex(settings.pop("tfilt", 0) << 28 | pointer)
    Path(f"{path}.json").write_text(json.dumps({key: register, **settings}))
    return path


def _leon_itb(folder: Path) -> tuple[list[Path], dict]:
    enc = pytest.importorskip("leon_encoder")
    steps = list(enc.record(str(LEON_ELF)))
    return [_leon_raw(folder, enc.entries(steps), 256, {"cpu": 1})], {"format": "leon-itb"}


def _leon_ahb(folder: Path) -> tuple[list[Path], dict]:
    enc = pytest.importorskip("leon_encoder")
    lines = [
        enc.ahb_line(100, 0x40010004, 0x00000005, write=True, master=1),
        enc.ahb_line(104, 0x40010021, 0x00180000, write=True, hsize=0, htrans=2, locked=True),
        enc.ahb_line(112, 0x40010022, 0x00000018, write=False, hsize=1, htrans=3, breakpoint=True),
    ]
    return [_leon_raw(folder, lines, 8, {"kind": "ahb", "cpu": 2})], {"format": "leon-ahb"}


def _leon_text(folder: Path) -> tuple[list[Path], dict]:
    """A control-flow filtered (TFILT 2) buffer in the text form, rebuilt through the image."""
    enc = pytest.importorskip("leon_encoder")
    dump, pointer = enc.buffer(enc.entries(enc.control_flow(list(enc.record(str(LEON_ELF))))), 64)
    path = folder / "cf.txt"
    path.write_text(enc.text(dump, kind="itb", cpu=0, itbc0=2 << 28 | pointer))
    return [path], {"images": [LEON_ELF]}


def _flow_tarmac(folder: Path) -> tuple[list[Path], dict]:
    """calls-a32's run as a flow-only Tarmac trace (FD/FI), walked through its image."""
    run = record(CORPUS / "calls-a32.elf", folder / "flow.tarmac", flow_only=True).trace
    return [run], {"images": [CORPUS / "calls-a32.elf"]}


def _etm_data(folder: Path) -> tuple[list[Path], dict]:
    """calls-t32's run as an ETMv3 stream with data trace: addresses and values, every third
    value not traced (the encoder of tests/test_etmv3_data.py)."""
    data = pytest.importorskip("test_etmv3_data")
    steps, memory = data.recorded("calls-t32.elf", folder)
    encoder = data.EtmEncoder(data_address=True, data_value=True).a_sync()

    def traced(i: int, k: int) -> str:
        return data.NOT_TRACED if (i + k) % 3 == 0 else data.TRACED

    data.encode_run(encoder, steps, data.blocks_of("calls-t32.elf"), memory=memory, data=traced)
    stream = folder / "etm.bin"
    stream.write_bytes(encoder.data)
    images = [CORPUS / "calls-t32.elf"]
    return [stream], {"format": "coresight", "options": data.options(encoder), "images": images}


ARMV5TE = {"images": [CORPUS / "calls-armv5te.elf"]}
FORMATS: dict[str, Callable[[Path], tuple[list[Path], dict]]] = {
    "tarmac": lambda folder: ([DATA / "tarmac" / "seed_fastmodels_example.tarmac"], {}),
    "armulator": lambda folder: ([DATA / "armulator" / "seed_example.trc"], {}),
    "etmv3": lambda folder: ([_tc2(folder)], {"options": {"source": 0x10}}),
    "etmv3-data": _etm_data,
    "xscale": lambda folder: ([DATA / "xscale" / "calls-armv5te-wrap.txt"], ARMV5TE),
    "xscale-openocd": lambda folder: ([DATA / "xscale" / "calls-armv5te-fill.dump"], ARMV5TE),
    "leon-itb": _leon_itb,
    "leon-ahb": _leon_ahb,
    "leon-text": _leon_text,
    "flow-tarmac": _flow_tarmac,
}


@pytest.fixture(scope="module")
def formats(tmp_path_factory: pytest.TempPathFactory):
    """A store of each input format, made once: formats(name) -> Trace."""
    made: dict[str, cputrace.Trace] = {}

    def get(name: str) -> cputrace.Trace:
        if name not in made:
            folder = tmp_path_factory.mktemp(name)
            inputs, kwargs = FORMATS[name](folder)
            made[name] = cputrace.open(ingest(inputs, folder / "store.ctrace", **kwargs).store)
        return made[name]

    return get


def _read_back(trace: cputrace.Trace, folder: Path) -> tuple[Path, cputrace.Trace]:
    """The trace exported to Tarmac, and that file ingested with --strict."""
    out = folder / "export.tarmac"
    EXPORTERS["tarmac"].load()(ExportRequest(trace, out))
    options = {"default_isa": "SPARC"} if trace.manifest["isas"] == ["SPARC"] else {}  # no SPARC letter
    again = ingest([out], folder / "again.ctrace", format="tarmac", strict=True, options=options)
    return out, cputrace.open(again.store)


# -- the writer against the record functions ----------------------------------------------------


def _filled_times(rows: dict[str, list[dict]], firsts: dict[int, int]) -> None:
    """The documented times of rows without one: none before the first line with a time; then
    the core's last time, or its first in the trace. Rows visited by seq, an instruction's
    records after it (instructions, memory, registers, events)."""
    ordered = sorted(
        ((r["seq"], k, i) for k, name in enumerate(rows) for i, r in enumerate(rows[name])),
        key=lambda key: key[:2],
    )
    names = list(rows)
    started, last = False, {}
    for _, k, i in ordered:
        row = rows[names[k]][i]
        if row["time"] is not None:
            started, last[row["cpu"]] = True, row["time"]
        elif started:
            row["time"] = last.get(row["cpu"], firsts.get(row["cpu"]))


def _row_by_row(trace: cputrace.Trace, where: str) -> str:
    """The trace as Tarmac from the record functions, one row at a time (the writer's oracle)."""
    unit = (trace.manifest.get("time") or {}).get("unit") or "clk"
    unit = {"cycles": "cyc"}.get(unit, unit)
    multicore = any(trace.manifest.get("cpus", []))
    inputs = trace.manifest["inputs"]

    def prefix(r: dict) -> str:
        stamp = "" if r["time"] is None else f"{r['time']} {unit} "
        return stamp + (f"cpu{r['cpu']} " if multicore else "")

    def from_tarmac(seq: int) -> bool:
        return [i["format"] for i in inputs if i["first_seq"] <= seq][-1] == "tarmac"

    selected = f"seq IN (SELECT seq FROM instructions WHERE {where})"
    rows = {
        name: trace.sql(f"SELECT * FROM {name} WHERE {selected} ORDER BY seq, src").to_pylist()
        for name in ("instructions", "memory", "registers", "events")
    }
    rows["memory"] = [r for r in rows["memory"] if r["addr"] is not None]
    firsts = trace.sql(
        "SELECT cpu, arg_min(time, seq) AS t FROM instructions WHERE time IS NOT NULL GROUP BY cpu"
    )
    _filled_times(rows, {r["cpu"]: r["t"] for r in firsts.to_pylist()})
    entries = []
    own = {r["seq"]: r["src"] for r in rows["instructions"]}
    opening = rows["instructions"][0]["seq"] if rows["instructions"] else None

    def place(r: dict) -> int:  # records another format gave before their instruction: after it
        mine = own.get(r["seq"])
        moved = mine is not None and r["src"] < mine and r["seq"] != opening and not from_tarmac(r["seq"])
        return mine if moved else r["src"]

    for r in rows["instructions"]:
        text = instruction_record(
            r["seq"], r["pc"], r["opcode"], r["size"], r["isa"], r["mode"], r["executed"], r["disasm"]
        )
        entries.append((r["seq"], r["src"], 0, r["src"], prefix(r) + text))
    for r in rows["memory"]:
        text = memory_record(
            r["op"], r["size"], r["addr"], r["value"],
            source=r["source"], paddr=r["paddr"], attrs=r["attrs"], wide=r["wide"],
        )  # fmt: skip
        lines = "\n".join(prefix(r) + line for line in text.split("\n"))  # a diagram may take several
        entries.append((r["seq"], place(r), 1, r["src"], lines))
    for r in rows["registers"]:
        size = r["size"] or (4 if (r["value"] or 0) < 1 << 32 else 8)
        data = r["wide"] if r["wide"] is not None else (r["value"] or 0).to_bytes(size, "little")
        text = register_record(r["reg"], data, r["mask"])
        entries.append((r["seq"], place(r), 2, r["src"], prefix(r) + text))
    for r in rows["events"]:
        tarmac = from_tarmac(r["seq"])
        text = event_record(
            r["kind"], r["name"], r["number"], r["value"], r["value1"], r["text"], tarmac=tarmac
        )
        verbatim = tarmac and text == r["text"]
        raw = verbatim and (r["name"] is None or r["kind"] == "header")
        entries.append((r["seq"], place(r), 3, r["src"], ("" if raw else prefix(r)) + text))
    entries.sort(key=lambda e: e[:4])
    return "".join(e[4] + "\n" for e in entries)


@pytest.mark.parametrize("source", [*TRACES, *TARMAC], ids=_name)
@pytest.mark.parametrize("where", ["TRUE", "seq % 3 = 1"])
def test_writer_gives_the_record_functions_lines(stores, source, where) -> None:
    trace = stores(source)
    selection = trace.sql(f"SELECT * FROM instructions WHERE {where} ORDER BY seq")
    out = io.StringIO()
    write_tarmac(trace, selection, out)
    assert out.getvalue() == _row_by_row(trace, where)


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_writer_gives_the_record_functions_lines_for_every_format(formats, fmt) -> None:
    trace = formats(fmt)
    selection = trace.sql("SELECT * FROM instructions ORDER BY seq")
    out = io.StringIO()
    write_tarmac(trace, selection, out)
    assert out.getvalue() == _row_by_row(trace, "TRUE")


# -- reading the export back ----------------------------------------------------------------------

_INSTRUCTIONS = "SELECT seq, cpu, pc, opcode, size, isa::VARCHAR AS isa, coalesce(executed, true) AS executed"
_REGISTERS = "SELECT seq, cpu, reg::VARCHAR AS reg, size, value, wide, mask FROM registers ORDER BY seq, src"
_MEMORY = (
    "SELECT seq, cpu, {op} AS op, size, addr, value, wide FROM memory "
    "WHERE addr IS NOT NULL ORDER BY seq, src"
)
# An access whose data is unknown becomes an LD/ST diagram: reads (fetches too) come back as R,
# writes (atomic updates too) as W; the rest keep their op.
_DIAGRAM_OP = (
    "CASE WHEN value IS NULL AND wide IS NULL AND coalesce(attrs NOT LIKE '%ABORTED%', true) "
    "THEN (CASE WHEN op::VARCHAR IN ('W', 'U') THEN 'W' ELSE 'R' END) ELSE op::VARCHAR END"
)


def _events(trace: cputrace.Trace) -> list[dict]:
    query = "SELECT seq, cpu, kind::VARCHAR AS kind, name, number, value FROM events ORDER BY seq, src"
    return trace.sql(query).to_pylist()


def _check_read_back(source: cputrace.Trace, again: cputrace.Trace) -> None:
    """What docs/formats.md "Tarmac export" promises survives a round trip."""
    assert again.sql(f"{_INSTRUCTIONS} FROM instructions ORDER BY seq") == source.sql(
        f"{_INSTRUCTIONS} FROM instructions ORDER BY seq"
    )
    timed = "SELECT seq, time FROM instructions WHERE time IS NOT NULL"
    kept = {(r["seq"], r["time"]) for r in again.sql(timed).to_pylist()}
    assert {(r["seq"], r["time"]) for r in source.sql(timed).to_pylist()} <= kept  # times given stay
    assert again.sql(_REGISTERS) == source.sql(_REGISTERS)
    assert again.sql(_MEMORY.format(op="op::VARCHAR")) == source.sql(_MEMORY.format(op=_DIAGRAM_OP))
    written, read = _events(source), _events(again)
    assert [(e["seq"], e["cpu"]) for e in read] == [(e["seq"], e["cpu"]) for e in written]
    for before, after in zip(written, read, strict=True):
        if after["kind"] == "debug" and before["kind"] != "debug":  # no Tarmac form: named for what it was
            assert after["name"].startswith(f"DebugEvent_{before['kind']}"), (before, after)
        else:
            assert after["kind"] == before["kind"], (before, after)
        if before["kind"] == "exception" and after["kind"] == "exception":
            assert (after["number"], after["value"]) == (before["number"], before["value"])


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_every_format_reads_back_with_strict(formats, fmt, tmp_path: Path) -> None:
    source = formats(fmt)
    _, again = _read_back(source, tmp_path)
    _check_read_back(source, again)
    kinds = {e["kind"] for e in _events(source)}
    if kinds & {"exception", "branch"}:  # the kinds Tarmac has forms for come back as themselves
        assert kinds & {"exception", "branch"} <= {e["kind"] for e in _events(again)}


@pytest.mark.parametrize("source", [*TRACES, *TARMAC], ids=_name)
def test_tarmac_inputs_read_back_with_their_records(stores, source, tmp_path: Path) -> None:
    """A Tarmac input's events are its records again, but for those the reference tools do not
    know (FD/FI, system operations), which come back as their DebugEvent lines."""
    trace = stores(source)
    _, again = _read_back(trace, tmp_path)
    _check_read_back(trace, again)
    query = "SELECT kind::VARCHAR AS kind, name, text FROM events ORDER BY seq, src"
    for before, after in zip(trace.sql(query).to_pylist(), again.sql(query).to_pylist(), strict=True):
        unparsed = (before["kind"], before["name"]) == ("text", None)
        rewritten = unparsed or before["kind"] in ("cache", "tlb", "sysop")
        if not rewritten and not re.match(r"F[DI] |ES +(?!EXC)", before["text"] or ""):
            assert after["text"] == before["text"]


def test_a_memory_only_trace_is_written_whole(formats, tmp_path: Path) -> None:
    """An AHB bus trace has accesses and no instructions: they are all written."""
    ahb = formats("leon-ahb")
    assert ahb.manifest["counts"]["instructions"] == 0 < ahb.manifest["counts"]["memory"]
    _, again = _read_back(ahb, tmp_path)
    assert again.manifest["counts"]["memory"] == ahb.manifest["counts"]["memory"]
    assert again.sql("SELECT source::VARCHAR AS s FROM memory").column("s").to_pylist() == ["core"] * 3


# -- what the reference tools read ------------------------------------------------------------

_UNITS = "clk|ns|cs|cyc|tic|ps"  # the reference parser's timestamp units
_STAMP = re.compile(rf"(?:\d+ (?:{_UNITS}) )?(?:cpu\d+ )?")
FORMS = {  # the record forms the writer uses
    "instruction": r"I[TS] \(\d+\) [0-9a-f]{8,16} (?:[0-9a-f]{4}|[0-9a-f]{8}) +[ATO] +(?:\S+ +)?:(?: .*)?",
    "failed fetch": r"ES +\([0-9a-f]+:-{4,8}\) [ATO] +\S*:?(?: .*)?",
    "register": r"R [A-Za-z][A-Za-z0-9_]* [0-9a-f-]+",
    "memory": r"M[RW]\d+(?:_[ID]|[XTL]*) [0-9a-f]+(?::[0-9a-f]+)?(?:_NS)? +"
    r"(?:[0-9a-f]+(?: [0-9a-f]+)*|\(ABORTED\))",
    "diagram": r"(?:LD|ST) [0-9a-f]+(?: +[.#0-9a-f]{8}){4}(?: .*)?",
    "exception": r"E [0-9a-f]{8,16}(?: [0-9a-f]{8,16})? [0-9a-f]{8} [A-Za-z_][A-Za-z0-9_.#-]*",
    "text event": r"E DebugEvent_\S+(?: .*)?",
    "branch": r"BR \([0-9a-f]+\)(?: [ATO])?",
    "header": r"Tarmac Text Rev \w+",
    # a Tarmac input's records, written as read: any E record, and the text records the
    # reference tools know (ES EXC and EXC exceptions, CADI, CACHE, ...)
    "event": r"E [A-Za-z0-9_.#-]+(?: .*)?",
    "exception record": r"(?:ES +)?EXC .*",
    "text record": r"(?:CADI|SIGNAL|P|CACHE|TTW|INFO_EXCEPTION_REASON)\b.*",
}
_REGISTER_BYTES = {  # the reference tools' register classes: (bytes, how many; 1 = no number)
    "r": (4, 16), "w": (4, 31), "x": (8, 31), "wsp": (4, 1), "xsp": (8, 1), "v": (16, 32), "q": (16, 32),
    "d": (8, 32), "s": (4, 32), "psr": (4, 1), "fpscr": (4, 1), "fpsr": (4, 1), "vpr": (4, 1),
    "msp": (4, 1), "e": (8, 31), "lr": (4, 1),
}  # fmt: skip
_REGISTER_SPECIAL = ("sp", "cpsr", "fpcr", "z", "p")  # widths the reference reads from the data


def _accepted_samples() -> list[str]:
    """The lines of the reference tools' parser tests that they read without a warning."""
    accepted = []
    for name in ("parsertest.ref", "parsertest-implicit-thumb.ref"):
        blocks = (DATA / "tarmac" / name).read_text().split("--- Tarmac line: ")[1:]
        for block in blocks:
            line, _, results = block.partition("\n")
            if "Parse warning" not in results:
                accepted.append(line)
    return accepted


def _form_of(line: str) -> str | None:
    body = line[_STAMP.match(line).end() :]
    return next((name for name, form in FORMS.items() if re.fullmatch(form, body)), None)


def test_the_writers_forms_are_ones_the_reference_tools_read() -> None:
    """Each form the writer uses has lines in the reference parser tests read without warning."""
    samples = [line.strip() for line in _accepted_samples()]
    assert len(samples) > 150
    bodies = [line[_STAMP.match(line).end() :] for line in samples]
    unseen = [name for name, form in FORMS.items() if not any(re.fullmatch(form, b) for b in bodies)]
    assert unseen == []


def _register_digits_fit(line: str) -> bool:
    """A register line gives the bytes the reference tools expect of the register's class."""
    name, digits = line[_STAMP.match(line).end() :].split()[1:3]
    prefix = re.match(r"[^0-9_]*", name)[0].lower()
    number = re.match(r"\d*", name[len(prefix) :])[0]
    if prefix in _REGISTER_SPECIAL or prefix not in _REGISTER_BYTES:
        return True  # read by their data's width, or a register the tools pass over silently
    size, count = _REGISTER_BYTES[prefix]
    if (count == 1) != (number == "") or (number and int(number) >= count):
        return True  # not that class (the tools pass over it)
    return len(digits.replace("_", "")) == 2 * size or not digits.strip("0")


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_every_exported_line_is_a_form_the_reference_tools_read(formats, fmt, tmp_path: Path) -> None:
    """SPARC instructions excepted: Tarmac has no instruction-set letter for them."""
    trace = formats(fmt)
    out, _ = _read_back(trace, tmp_path)
    sparc = trace.manifest["isas"] == ["SPARC"]
    for line in out.read_text().splitlines():
        form = _form_of(line)
        if form is None and sparc:
            assert re.fullmatch(rf"{_STAMP.pattern}I[TS] \(\d+\) [0-9a-f]{{8}} [0-9a-f]{{8}} .*", line), line
            continue
        assert form is not None, line
        if form == "register":
            assert _register_digits_fit(line), line


# -- time ---------------------------------------------------------------------------------------


def _times_in_order(trace: cputrace.Trace) -> dict[int, bool]:
    rows = trace.sql("SELECT cpu, time FROM instructions WHERE time IS NOT NULL ORDER BY seq").to_pylist()
    last: dict[int, int] = {}
    ordered: dict[int, bool] = {}
    for row in rows:
        cpu = row["cpu"]
        ordered[cpu] = ordered.get(cpu, True) and row["time"] >= last.get(cpu, row["time"])
        last[row["cpu"]] = row["time"]
    return ordered


def test_each_cores_times_stay_in_order(tmp_path: Path) -> None:
    """TC2's sources, one after another: each core's first instructions have no time (before
    its first timestamp) and come after another core's timed ones. Read back, they take their
    core's first time, not the line before's."""
    trace = cputrace.open(ingest([_tc2(tmp_path)], tmp_path / "tc2.ctrace").store)
    late = trace.sql(
        "SELECT i.cpu FROM instructions i WHERE i.time IS NULL AND EXISTS "
        "(SELECT 1 FROM instructions o WHERE o.cpu <> i.cpu AND o.seq < i.seq AND o.time IS NOT NULL)"
    )
    assert late.num_rows and _times_in_order(trace) == dict.fromkeys(trace.manifest["cpus"], True)
    _, again = _read_back(trace, tmp_path)
    assert _times_in_order(again) == dict.fromkeys(trace.manifest["cpus"], True)
    _check_read_back(trace, again)
