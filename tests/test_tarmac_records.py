"""Every Tarmac record type of the Fast Models plug-in's documentation, as structured rows."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest
from paths import DATA

from cputrace.ingest import ingest
from cputrace.store.manifest import table_path


def rows(store, table: str) -> list[dict]:
    return pq.read_table(table_path(store, table)).to_pylist()


@pytest.mark.parametrize(
    ("unit", "stored", "scale"),
    [("clk", "clk", 1), ("cyc", "cyc", 1), ("tic", "tic", 1), ("cs", "cs", 1), ("s", "ps", 10**12),
     ("ms", "ps", 10**9), ("us", "ps", 10**6), ("ns", "ns", 1), ("ps", "ps", 1), ("fs", "fs", 1)],
)  # fmt: skip
def test_every_time_unit_is_recognised_without_format(tmp_path, unit: str, stored: str, scale: int) -> None:
    """The Fast Models sample with its `clk` times in another unit, in a file whose name says
    nothing: sniffed as Tarmac, its times kept in that unit (microseconds and coarser in
    picoseconds, docs/model.md)."""
    text = (DATA / "tarmac" / "seed_fastmodels_example.tarmac").read_text().replace(" clk ", f" {unit} ")
    (tmp_path / "trace.log").write_text(text)
    manifest = ingest([tmp_path / "trace.log"], tmp_path / "s.ctrace").manifest
    assert manifest["format"] == "tarmac"
    assert manifest["time"] == {"min": 1939 * scale, "max": 1954 * scale, "unit": stored}


def test_documentation_example(tmp_path) -> None:
    path = DATA / "tarmac" / "seed_fastmodels_example.tarmac"
    store = ingest([path], tmp_path / "s.ctrace", strict=True).store
    insns = rows(store, "instructions")
    assert len(insns) == 16
    assert insns[0]["pc"] == 0x1129C and insns[0]["opcode"] == 0xD51BD061
    assert insns[0]["mode"] == "el3h_s" and insns[0]["isa"] == "A64" and insns[0]["cpu"] == 0
    regs = {(r["seq"], r["reg"]): r["value"] for r in rows(store, "registers")}
    assert regs[(0, "tpidrro_el0")] == 0
    assert regs[(12, "x30")] == 0x112D0  # BLR x1
    assert regs[(7, "sp_el3")] == 0x3833890  # MOV sp,x0
    mem = rows(store, "memory")
    assert [(m["op"], m["addr"], m["paddr"], m["value"], m["attrs"]) for m in mem] == [
        ("R", 0x11540, 0x15211540, 0x13000000, None),
        ("W", 0x0620E000, 0x1600E000, 0x13000000, "NS"),
    ]
    events = rows(store, "events")
    kinds = [e["kind"] for e in events]
    assert kinds.count("cache") == 9 and kinds.count("ttw") == 2 and kinds.count("tlb") == 4
    line = next(e for e in events if e["kind"] == "cache")
    assert line["name"] == "CACHE ALLOC" and line["value"] == 0x152112C0 and line["value1"] == 0x96
    walk = next(e for e in events if e["kind"] == "ttw")
    assert walk["name"] == "TTW ITLB" and walk["value"] == 0x16390010 and walk["value1"] == 0x152204C3
    fill = next(e for e in events if e["kind"] == "tlb")
    assert fill["name"] == "TLB FILL" and "cpu.cpu0.ITLB 64K" in fill["text"]
    # every record belongs to the instruction before it
    assert {e["seq"] for e in events if e["text"].startswith("TTW ITLB")} == {12}


def test_other_documented_records(ingest_text) -> None:
    text = "\n".join(
        [
            "1 clk cpu0 IT (1) 00008000 e3a00001 A svc_s : MOV r0,#1",
            "2 clk cpu0 FD (2) 00008004 00008100 A",
            "3 clk cpu0 FI (3) 00008104:000000008104 00009000_NS T",
            "4 clk cpu0 MU4_ADD 00001000 00000005",
            "5 clk cpu0 MR4X 00001004 00000006",
            "6 clk cpu0 MW2T 00001008 0007",
            "7 clk cpu0 MR1L 0000100c 08",
            "8 clk cpu0 BW4D__N IWRCB_ OWRCB_ 3 80001000 78563412",
            "9 clk cpu0 CACHE MAINTENANCE Data Clean by MVA to PoC 00001000 4K Normal",
            "10 clk cpu0 WALKCACHE EVICT cpu.cpu0.walk 4K 0x00020000 EL1_n",
            "11 clk cpu0 TTU DTLB LPAE 1:3 000016393100 0000000016000463 : BLOCK NS=1",
            "12 clk cpu0 E 00008200 svc 00000010 00000019 CoreEvent_ModeChange",
            "13 clk cpu0 E 00000000 00000003 CoreEvent_SWI",
        ]
    )
    store = ingest_text(text, strict=True).store
    events = rows(store, "events")
    flow = [(e["name"], e["value"], e["value1"]) for e in events if e["kind"] == "branch"]
    assert flow == [("FD A32", 0x8004, 0x8100), ("FI T32", 0x8104, 0x9000)]
    mem = [
        (m["op"], m["source"], m["size"], m["addr"], m["value"], m["attrs"])
        for m in rows(store, "memory")
    ]
    assert mem == [
        ("U", "core", 4, 0x1000, 5, "ADD"),
        ("R", "core", 4, 0x1004, 6, "X"),
        ("W", "core", 2, 0x1008, 7, "T"),
        ("R", "core", 1, 0x100C, 8, "L"),
        ("W", "bus", 4, 0x80001000, 0x12345678, "NS master=3 IWRCB_ OWRCB_"),
    ]
    by_kind = {e["kind"]: e for e in events}
    assert by_kind["cache"]["name"] == "CACHE MAINTENANCE"
    assert by_kind["tlb"]["name"] == "WALKCACHE EVICT"
    assert by_kind["ttw"]["name"] == "TTU DTLB" and by_kind["ttw"]["value1"] == 0x16000463
    assert by_kind["mode_change"]["number"] == 0x19 and by_kind["mode_change"]["value1"] == 0x10
    assert by_kind["mode_change"]["name"] == "CoreEvent_ModeChange svc"
    assert by_kind["exception"]["number"] == 3 and by_kind["exception"]["name"] == "CoreEvent_SWI"
