"""Real traces from several producers: strict ingest, agreement between producers, and the
compiled scanner agreeing with the full grammar on every line it accepts."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from paths import SHARED, shared

from cputrace.formats.tarmac.grammar import Rows, TarmacLineParser
from cputrace.formats.tarmac.scan import KIND_INSN, KIND_MEM, KIND_REG, scan_chunk
from cputrace.ingest import ingest
from cputrace.store.manifest import table_path

UTILS = "tarmac-trace-utilities"
CALCULATOR = {
    "aarch32": ["calculator-aarch32-fastmodel", "calculator-aarch32-es-ld-st-style"],
    "aarch64": [
        "calculator-aarch64-fastmodel",
        "calculator-aarch64-es-ld-st-style",
        "calculator-aarch64-gem5",
    ],
}
ALL_TARMAC = sorted(
    str(p.relative_to(SHARED / UTILS)) for p in (SHARED / UTILS).rglob("*.tarmac")
) or ["absent"]


def table(store: Path, name: str):
    return pq.read_table(table_path(store, name))


@pytest.mark.parametrize("relative", ALL_TARMAC)
def test_every_shared_tarmac_trace_ingests_strictly(tmp_path: Path, relative: str) -> None:
    path = shared(UTILS, relative)
    result = ingest([path], tmp_path / "s.ctrace", strict=True)
    assert result.manifest["warnings"]["count"] == 0
    assert result.manifest["counts"]["instructions"] > 0


@pytest.mark.parametrize("arch", sorted(CALCULATOR))
def test_every_producer_gives_the_same_instruction_stream(tmp_path: Path, arch: str) -> None:
    streams = {}
    for name in CALCULATOR[arch]:
        path = shared(UTILS, "samples", f"{name}.tarmac")
        store = ingest([path], tmp_path / f"{name}.ctrace", strict=True).store
        insns = table(store, "instructions")
        streams[name] = (insns.column("pc").to_pylist(), insns.column("opcode").to_pylist())
    counts = {name: len(s[0]) for name, s in streams.items()}
    assert len(set(counts.values())) == 1, counts
    assert counts[CALCULATOR[arch][0]] == {"aarch32": 5104, "aarch64": 4783}[arch]
    first = streams[CALCULATOR[arch][0]]
    for name, stream in streams.items():
        assert stream[0] == first[0], name  # same pcs in the same order
        assert stream[1] == first[1], name  # same opcodes
    # (`executed` is not compared: Fast Models prints a not-taken CBZ as IS, the other
    # producers as executed; each store keeps what its producer said)


def test_fast_model_records_belong_to_their_instruction(tmp_path: Path) -> None:
    path = shared(UTILS, "samples", "calculator-aarch64-fastmodel.tarmac")
    store = ingest([path], tmp_path / "c.ctrace").store
    insns = table(store, "instructions").to_pylist()
    regs = table(store, "registers").to_pylist()
    by_seq = {i["seq"]: i for i in insns}
    # every register write after the first instruction shares its instruction's time
    for r in regs:
        if r["src"] > insns[0]["src"]:
            assert r["time"] == by_seq[r["seq"]]["time"]
            assert r["src"] > by_seq[r["seq"]]["src"]
    # the first instruction (MOV x0,#0x100000) writes x0
    first = [r for r in regs if r["seq"] == 0 and r["src"] > insns[0]["src"]]
    assert [(r["reg"], r["value"]) for r in first] == [("x0", 0x100000)]


def test_gem5_wide_store_line_313_parses(tmp_path: Path) -> None:
    """The reference C++ tool stops at this line (MW16 with one 32-digit token)."""
    path = shared(UTILS, "samples", "calculator-aarch64-gem5.tarmac")
    store = ingest([path], tmp_path / "g.ctrace", strict=True).store
    rows = [r for r in table(store, "memory").to_pylist() if r["src"] == 313]
    line = path.read_text().splitlines()[312]
    assert "MW16" in line
    assert len(rows) == 1 and rows[0]["size"] == 16 and len(rows[0]["wide"]) == 16
    assert rows[0]["wide"][::-1].hex() == line.split()[-1]


def test_multicore_lines_keep_their_core(ingest_text) -> None:
    text = (
        "0 clk cpu0 IT (1) 00001000 e3a00001 A svc_s : MOV r0,#1\n"
        "0 clk cpu1 IT (1) 00002000 e3a00002 A svc_s : MOV r0,#2\n"
        "0 clk cpu0 R r0 00000001\n"
        "0 clk cpu1 R r0 00000002\n"
        "1 clk cpu1 IT (2) 00002004 e3a00003 A svc_s : MOV r0,#3\n"
        "1 clk cpu0 R r1 00000009\n"
    )
    store = ingest_text(text).store
    insns = table(store, "instructions").to_pylist()
    regs = table(store, "registers").to_pylist()
    assert [(i["cpu"], i["pc"]) for i in insns] == [(0, 0x1000), (1, 0x2000), (1, 0x2004)]
    # each write belongs to the last instruction of its own core; the table is in seq order
    assert [(r["cpu"], r["seq"], r["value"]) for r in regs] == [(0, 0, 1), (0, 0, 9), (1, 1, 2)]
    assert [r["src"] for r in regs] == [3, 6, 4]


@pytest.mark.parametrize(
    "relative",
    [
        "samples/calculator-aarch64-fastmodel.tarmac",
        "samples/calculator-aarch32-es-ld-st-style.tarmac",
        "samples/calculator-aarch64-gem5.tarmac",
        "tests/quicksort.tarmac",
    ],
)
def test_scanner_agrees_with_full_grammar(relative: str) -> None:
    """Every line the compiled scanner takes must mean the same to the reference parser."""
    data = shared(UTILS, relative).read_bytes()
    scan = scan_chunk(data)
    parser = TarmacLineParser()
    lines = data.split(b"\n")
    checked = 0
    for kind, table_name, index_key in (
        (KIND_INSN, "instructions", "insn"),
        (KIND_REG, "registers", "reg"),
        (KIND_MEM, "memory", "mem"),
    ):
        fields = getattr(scan, index_key)
        for k, li in enumerate(fields["line"].tolist()):
            assert scan.kind[li] == kind
            rows = Rows()
            stamp = parser.parse(lines[li].decode(), li + 1, rows)
            assert stamp.time is None or int(stamp.time) == scan.time[li]
            row = getattr(rows, table_name).to_table().to_pylist()
            assert len(row) == 1
            row = row[0]
            if kind == KIND_INSN:
                assert row["pc"] == fields["pc"][k]
                assert row["size"] == fields["size"][k]
                assert row["executed"] == bool(fields["executed"][k])
                assert (row["opcode"] or 0) == fields["opcode"][k]
                dis = bytes(fields["dis_buf"][fields["dis_off"][k] : fields["dis_off"][k + 1]])
                assert (row["disasm"] or "") == dis.decode()
            elif kind == KIND_REG:
                assert row["value"] == fields["value"][k]
                assert row["size"] == fields["nbytes"][k]
            else:
                assert row["addr"] == fields["addr"][k]
                assert row["value"] == fields["value"][k]
                assert row["size"] == fields["size"][k]
            checked += 1
    assert checked > 0
    assert np.count_nonzero(scan.kind == KIND_INSN) == len(scan.insn["line"])
