"""The compiled Tarmac writer: the same lines as the record functions give row by row, and a
round trip (export, re-ingest) keeps every instruction, register write, access and event."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from paths import DATA, shared

import cputrace
from cputrace.export.registry import EXPORTERS, ExportRequest
from cputrace.export.tarmac import instruction_record, memory_record, register_record, write_tarmac
from cputrace.ingest import ingest

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
OTHER = [DATA / "armulator" / "seed_example.trc"]  # its bus fetches are not Tarmac's: no round trip


def _name(source: tuple[str, ...] | Path) -> str:
    return Path(*source).name if isinstance(source, tuple) else source.name


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory):
    """Each input ingested once, into a temporary store."""
    made: dict[Path, cputrace.Trace] = {}

    def get(source: tuple[str, ...] | Path) -> cputrace.Trace:
        path = source if isinstance(source, Path) else shared(*source)
        if path not in made:
            store = tmp_path_factory.mktemp("stores") / f"{path.name}.ctrace"
            made[path] = cputrace.open(ingest([path], store).store)
        return made[path]

    return get


def _row_by_row(trace: cputrace.Trace, where: str) -> str:
    """The trace as Tarmac from the record functions, one row at a time (the writer's oracle)."""
    unit = (trace.manifest.get("time") or {}).get("unit") or "clk"
    multicore = len(trace.manifest.get("cpus", [])) > 1

    def prefix(r: dict) -> str:
        return ("" if r["time"] is None else f"{r['time']} {unit} ") + (
            f"cpu{r['cpu']} " if multicore else ""
        )

    selected = f"seq IN (SELECT seq FROM instructions WHERE {where})"
    rows = {
        name: trace.sql(f"SELECT * FROM {name} WHERE {selected} ORDER BY seq, src").to_pylist()
        for name in ("instructions", "memory", "registers", "events")
    }
    entries = []
    for r in rows["instructions"]:
        text = instruction_record(
            r["seq"], r["pc"], r["opcode"], r["size"], r["isa"], r["mode"], r["executed"], r["disasm"]
        )
        entries.append((r["seq"], r["src"] or 0, 0, prefix(r) + text))
    for r in rows["memory"]:
        if r["addr"] is not None:
            text = memory_record(
                r["op"], r["size"], r["addr"], r["value"],
                source=r["source"], paddr=r["paddr"], attrs=r["attrs"], wide=r["wide"],
            )  # fmt: skip
            entries.append((r["seq"], r["src"] or 0, 1, prefix(r) + text))
    for r in rows["registers"]:
        size = r["size"] or (4 if (r["value"] or 0) < 1 << 32 else 8)
        data = r["wide"] if r["wide"] is not None else (r["value"] or 0).to_bytes(size, "little")
        entries.append((r["seq"], r["src"] or 0, 2, prefix(r) + register_record(r["reg"], data, r["mask"])))
    for r in rows["events"]:
        if r["text"] is not None:
            raw = r["name"] is None or r["kind"] == "header"
            entries.append((r["seq"], r["src"] or 0, 3, ("" if raw else prefix(r)) + r["text"]))
    entries.sort(key=lambda e: e[:3])
    return "".join(e[3] + "\n" for e in entries)


@pytest.mark.parametrize("source", [*TRACES, *TARMAC, *OTHER], ids=_name)
@pytest.mark.parametrize("where", ["TRUE", "seq % 3 = 1"])
def test_writer_gives_the_record_functions_lines(stores, source, where) -> None:
    trace = stores(source)
    selection = trace.sql(f"SELECT * FROM instructions WHERE {where} ORDER BY seq")
    out = io.StringIO()
    write_tarmac(trace, selection, out)
    assert out.getvalue() == _row_by_row(trace, where)


_KEPT = {  # what Tarmac text can say: memory attributes and other formats' headers are not kept
    "instructions": "seq, time, cpu, pc, opcode, size, isa::VARCHAR, mode::VARCHAR, executed, disasm",
    "registers": "seq, time, cpu, reg::VARCHAR, size, value, wide, mask",
    "memory": "seq, time, cpu, op::VARCHAR, source::VARCHAR, size, addr, paddr, value, wide",
    "events": "seq, time, cpu, text",
}


@pytest.mark.parametrize("source", [*TRACES, *TARMAC], ids=_name)
def test_export_reingests_to_the_same_rows(stores, source, tmp_path: Path) -> None:
    trace = stores(source)
    out = tmp_path / "out.tarmac"
    EXPORTERS["tarmac"].load()(ExportRequest(trace, out))
    again = cputrace.open(ingest([out], tmp_path / "again.ctrace", format="tarmac").store)
    for table, columns in _KEPT.items():
        query = f"SELECT {columns} FROM {table} ORDER BY seq, src"
        assert again.sql(query).to_pylist() == trace.sql(query).to_pylist(), table
