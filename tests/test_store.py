"""Stores: atomic writes, the model contract, version checks, and cache reuse."""

from __future__ import annotations

import importlib
import json
import os
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import cputrace
from cputrace.errors import StoreError, TraceFormatError
from cputrace.ingest import ingest
from cputrace.model import MODEL_VERSION, SCHEMAS, TABLES
from cputrace.store.checksums import read_manifest
from cputrace.store.manifest import table_path
from cputrace.store.write import STORED_SCHEMAS, StoreWriter

INGEST = importlib.import_module("cputrace.ingest")  # the package's `ingest` is the function

TRACE = (
    "0 clk IT (0) 00008000 e3a00001 A svc_s : MOV r0,#1\n"
    "0 clk R r0 00000001\n"
    "1 clk IT (1) 00008004 e5801000 A svc_s : STR r1,[r0,#0]\n"
    "1 clk MW4 00000001 00000000\n"
)


def test_model_columns_are_the_public_contract() -> None:
    assert {name: schema.names for name, schema in SCHEMAS.items()} == {
        "instructions": [
            "seq", "time", "cpu", "pc", "opcode", "size", "isa", "mode", "executed", "cycles",
            "flags", "disasm", "src",
        ],
        "registers": ["seq", "time", "cpu", "reg", "size", "value", "wide", "mask", "src"],
        "memory": [
            "seq", "time", "cpu", "op", "source", "size", "addr", "paddr", "value", "wide",
            "attrs", "src",
        ],
        "events": [
            "seq", "time", "cpu", "kind", "number", "name", "value", "value1", "text", "src",
        ],
    }  # fmt: skip
    assert SCHEMAS["instructions"].field("pc").type == pa.uint64()
    assert SCHEMAS["instructions"].field("opcode").type == pa.uint32()
    assert SCHEMAS["memory"].field("addr").type == pa.uint64()


def test_store_files_and_manifest(tmp_path: Path) -> None:
    src = tmp_path / "a.tarmac"
    src.write_text(TRACE)
    result = ingest([src])
    assert result.store == tmp_path / "a.tarmac.ctrace"
    manifest = json.loads((result.store / "manifest.json").read_text())
    version = manifest["data"]
    assert sorted(p.name for p in result.store.iterdir()) == ["manifest.json", version]
    assert sorted(p.name for p in (result.store / version).iterdir()) == [
        "events.parquet", "instructions.parquet", "memory.parquet", "registers.parquet",
    ]  # fmt: skip
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.tarmac", "a.tarmac.ctrace"]
    assert manifest["model_version"] == 2  # a plain store: older cputrace reads it (3 is partitioned)
    assert manifest["counts"] == {"instructions": 2, "registers": 1, "memory": 1, "events": 0}
    assert manifest["inputs"][0]["size"] == len(TRACE)
    assert len(manifest["inputs"][0]["xxh3_128"]) == 32
    assert manifest["time"] == {"min": 0, "max": 1, "unit": "clk"}
    assert manifest["isas"] == ["A32"] and manifest["cpus"] == [0]
    events = pq.read_table(table_path(result.store, "events"))  # a table with no rows still has its schema
    assert events.num_rows == 0 and events.schema.equals(STORED_SCHEMAS["events"])


def test_columns_are_stored_in_their_encodings(tmp_path: Path) -> None:
    """The encodings docs/model.md names: positions delta-encoded, addresses split into byte
    streams, few-valued columns in a dictionary, opcodes and `executed` plain."""
    src = tmp_path / "a.tarmac"
    src.write_text(TRACE)
    group = pq.ParquetFile(table_path(ingest([src]).store, "instructions")).metadata.row_group(0)
    columns = (group.column(i) for i in range(group.num_columns))
    encodings = {column.path_in_schema: set(column.encodings) for column in columns}
    assert "DELTA_BINARY_PACKED" in encodings["seq"] and "DELTA_BINARY_PACKED" in encodings["src"]
    assert "BYTE_STREAM_SPLIT" in encodings["pc"]
    assert "RLE_DICTIONARY" in encodings["isa"] and "RLE_DICTIONARY" in encodings["size"]
    assert "RLE_DICTIONARY" not in encodings["executed"] and "PLAIN" in encodings["executed"]
    assert "RLE_DICTIONARY" not in encodings["opcode"]


def test_manifest_lists_the_values_every_chunk_of_a_dictionary_column_uses() -> None:
    """One value, several, none (all null) and an empty chunk: the manifest's isas and modes."""
    names = pa.array(["A32", "T32", "A64"])
    chunks = [
        pa.DictionaryArray.from_arrays(pa.array(indices, pa.int32()), names)
        for indices in ([1, 1, 1], [0, 2, None, 0], [None, None], [])
    ]
    assert INGEST._distinct(pa.chunked_array(chunks)) == {"A32", "T32", "A64"}
    assert INGEST._distinct(pa.chunked_array(chunks[2:])) == set()
    assert INGEST._distinct(pa.chunked_array(chunks[:1])) == {"T32"}


def test_failed_ingest_leaves_nothing_and_keeps_the_old_store(tmp_path: Path) -> None:
    good = tmp_path / "a.tarmac"
    good.write_text(TRACE)
    store = tmp_path / "out.ctrace"
    ingest([good], store)
    before = (store / "manifest.json").read_text()
    bad = tmp_path / "b.tarmac"
    bad.write_text(TRACE + "this is not tarmac\n")
    with pytest.raises(TraceFormatError, match=r"b\.tarmac:5: expected"):
        ingest([bad], store, strict=True)
    assert (store / "manifest.json").read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.tarmac", "b.tarmac", "out.ctrace"]


def _instructions(first: int, count: int) -> pa.Table:
    seq = pa.array(range(first, first + count), pa.int64())
    columns = {
        "seq": seq, "cpu": pa.array([0] * count, pa.uint16()), "pc": pa.array([0x8000] * count, pa.uint64()),
        "size": pa.array([4] * count, pa.uint8()), "isa": pa.array(["A32"] * count).dictionary_encode(),
        "flags": pa.array([0] * count, pa.uint16()), "src": seq,
    }  # fmt: skip
    schema = SCHEMAS["instructions"]
    return pa.table([columns.get(f.name, pa.nulls(count, f.type)) for f in schema], schema=schema)


def _manifest() -> dict:
    """The fields a manifest must have, for stores written directly with a StoreWriter."""
    return {
        "format": "test", "inputs": [], "counts": dict.fromkeys(TABLES, 0),
        "time": {"min": None, "max": None, "unit": None}, "cpus": [], "isas": [], "modes": [],
        "event_kinds": {}, "warnings": {"count": 0, "samples": []},
    }  # fmt: skip


def test_writes_gather_batches_into_row_groups(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(INGEST, "ROW_GROUP_ROWS", 1000)
    writer = StoreWriter(tmp_path / "s.ctrace")
    stats = INGEST.IngestStats()
    writes = INGEST.BackgroundWrites(writer, stats)
    for first in range(0, 3000, 300):
        writes.submit("instructions", _instructions(first, 300))
    writes.drain()
    writes.close()
    path = writer.commit(_manifest())
    stored = pq.ParquetFile(table_path(path, "instructions"))
    groups = [stored.metadata.row_group(i).num_rows for i in range(stored.metadata.num_row_groups)]
    assert groups == [300, 1200, 1200, 300]  # the first is written once a quarter of a group is held
    assert stored.read().column("seq").to_pylist() == list(range(3000))
    assert stats.counts["instructions"] == 3000 and stats.cpus == {0} and stats.isas == {"A32"}


def test_gathering_many_small_batches_takes_steps_linear_in_their_number(tmp_path: Path) -> None:
    """A decoder may yield a few rows at a time (an XScale dump: one batch of events per
    256-byte buffer). Holding them until a row group is full must not look at every held
    batch again on each one: that was quadratic (an OpenOCD dump of 3,000 buffers spent
    8.4 million steps summing held batches). Steps are counted as the Python calls (and
    generator resumptions) in the ingest module, not timed."""
    count = 2000
    writer = StoreWriter(tmp_path / "s.ctrace")
    writes = INGEST.BackgroundWrites(writer, INGEST.IngestStats())
    batches = [_instructions(first, 1) for first in range(count)]
    steps = 0

    def profile(frame, event: str, arg) -> None:
        nonlocal steps
        if event == "call" and frame.f_code.co_filename == INGEST.__file__:
            steps += 1

    sys.setprofile(profile)
    try:
        for batch in batches:
            writes.submit("instructions", batch)
    finally:
        sys.setprofile(None)
    writes.drain()
    writes.close()
    assert steps <= 2 * count
    stored = pq.read_table(table_path(writer.commit(_manifest()), "instructions"))
    assert stored.column("seq").to_pylist() == list(range(count))


def test_batches_of_a_row_group_may_differ_in_schema(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches already in the stored schema (required columns not nullable) join those in the
    model's schema in one row group."""
    monkeypatch.setattr(INGEST, "ROW_GROUP_ROWS", 1000)
    writer = StoreWriter(tmp_path / "s.ctrace")
    writes = INGEST.BackgroundWrites(writer, INGEST.IngestStats())
    writes.submit("instructions", _instructions(0, 300))
    writes.submit("instructions", writer.checked("instructions", _instructions(300, 300)))
    writes.drain()
    writes.close()
    stored = pq.read_table(table_path(writer.commit(_manifest()), "instructions"))
    assert stored.column("seq").to_pylist() == list(range(600))


def _with_seq(table: pa.Table, seq: list[int]) -> pa.Table:
    return table.set_column(table.schema.get_field_index("seq"), "seq", pa.array(seq, pa.int64()))


def _registers(seq: list[int]) -> pa.Table:
    count = len(seq)
    columns = {
        "seq": pa.array(seq, pa.int64()), "cpu": pa.array([0] * count, pa.uint16()),
        "reg": pa.array(["r0"] * count).dictionary_encode(), "src": pa.array(range(count), pa.int64()),
    }  # fmt: skip
    schema = SCHEMAS["registers"]
    return pa.table([columns.get(f.name, pa.nulls(count, f.type)) for f in schema], schema=schema)


def test_rows_out_of_seq_order_are_refused(tmp_path: Path) -> None:
    """Every table is stored in seq order, each instruction with a seq of its own: the writer
    refuses anything else, naming the table and the row, within a row group and across them."""
    writer = StoreWriter(tmp_path / "s.ctrace")
    writer.write("instructions", writer.checked("instructions", _instructions(0, 5)))
    with pytest.raises(StoreError, match=r"internal error: instructions row 5 has seq 4 after seq 4"):
        writer.write("instructions", writer.checked("instructions", _instructions(4, 2)))
    backwards = _with_seq(_instructions(5, 3), [5, 7, 6])
    with pytest.raises(StoreError, match=r"instructions row 7 has seq 6 after seq 7; .* increasing"):
        writer.write("instructions", writer.checked("instructions", backwards))
    writer.write("registers", writer.checked("registers", _registers([0, 0, 3, 3])))  # a seq may repeat
    writer.write("registers", writer.checked("registers", _registers([3, 4])))
    with pytest.raises(StoreError, match=r"registers row 6 has seq 2 after seq 4; .* non-decreasing"):
        writer.write("registers", writer.checked("registers", _registers([2])))
    writer.abort()
    assert not list(tmp_path.iterdir())


def test_an_ingest_writing_rows_out_of_order_fails_and_leaves_nothing(tmp_path: Path) -> None:
    """The order is checked where rows are written, on the writing threads of an ingest."""
    writer = StoreWriter(tmp_path / "s.ctrace")
    writes = INGEST.BackgroundWrites(writer, INGEST.IngestStats())
    writes.submit("instructions", _instructions(0, 3))
    writes.submit("instructions", _with_seq(_instructions(0, 1), [2]))  # the last one again, at the end
    with pytest.raises(StoreError, match=r"internal error: instructions row 3 has seq 2 after seq 2"):
        writes.drain()
    writes.close()
    writer.abort()
    assert not list(tmp_path.iterdir())


def test_a_null_in_a_batch_fails_the_ingest_when_written(tmp_path: Path) -> None:
    """Row groups are checked on the writing thread: the error comes back to the caller."""
    writer = StoreWriter(tmp_path / "s.ctrace")
    writes = INGEST.BackgroundWrites(writer, INGEST.IngestStats())
    table = _instructions(0, 3)
    pc = table.schema.get_field_index("pc")
    writes.submit("instructions", table.set_column(pc, "pc", pa.array([1, None, 3], pa.uint64())))
    with pytest.raises(StoreError, match=r"instructions\.pc has nulls"):
        writes.drain()
    writes.close()
    writer.abort()
    assert not list(tmp_path.iterdir())


def test_a_null_in_a_column_every_row_has_is_refused(tmp_path: Path) -> None:
    writer = StoreWriter(tmp_path / "s.ctrace")
    table = _instructions(0, 3)
    table = table.set_column(table.schema.get_field_index("pc"), "pc", pa.array([1, None, 3], pa.uint64()))
    with pytest.raises(StoreError, match=r"instructions\.pc has nulls"):
        writer.checked("instructions", table)
    writer.abort()
    assert not list(tmp_path.iterdir())


def test_newer_model_version_is_refused(tmp_path: Path) -> None:
    src = tmp_path / "a.tarmac"
    src.write_text(TRACE)
    store = ingest([src]).store
    manifest = json.loads((store / "manifest.json").read_text())
    manifest["model_version"] = MODEL_VERSION + 1
    (store / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(StoreError, match=r"newer|model version"):
        read_manifest(store)
    with pytest.raises(StoreError):
        cputrace.open(store)


def test_damaged_store_is_refused(tmp_path: Path) -> None:
    src = tmp_path / "a.tarmac"
    src.write_text(TRACE)
    store = ingest([src]).store
    table_path(store, "memory").unlink()
    with pytest.raises(StoreError, match=r"damaged store: .*memory\.parquet: missing"):
        cputrace.open(store)


def test_open_reuses_the_store_while_the_input_is_unchanged(tmp_path: Path) -> None:
    src = tmp_path / "a.tarmac"
    src.write_text(TRACE)
    t = cputrace.open(src)
    created = (t.path / "manifest.json").stat().st_mtime_ns
    assert cputrace.open(src).path == t.path
    assert (t.path / "manifest.json").stat().st_mtime_ns == created  # reused
    os.utime(src, ns=(1, 1))  # touched, same bytes: still reused (hash matches)
    cputrace.open(src)
    assert (t.path / "manifest.json").stat().st_mtime_ns == created
    src.write_text(TRACE + "2 clk IT (2) 00008008 e3a00002 A svc_s : MOV r0,#2\n")
    t2 = cputrace.open(src)
    assert t2.manifest["counts"]["instructions"] == 3


def test_python_api_tables_and_sql(tmp_path: Path) -> None:
    src = tmp_path / "a.tarmac"
    src.write_text(TRACE)
    with cputrace.open(src) as t:
        assert t.instructions.num_rows == 2
        assert t.instructions.column("pc").to_pylist() == [0x8000, 0x8004]
        assert t.memory.column("op").to_pylist() == ["W"]
        assert t.registers.column("reg").to_pylist() == ["r0"]
        got = t.sql(
            "SELECT i.pc, m.addr FROM instructions i JOIN memory m USING (seq) WHERE i.pc = 0x8004"
        ).to_pylist()
        assert got == [{"pc": 0x8004, "addr": 1}]
        assert t.sql("SELECT count(*) AS n FROM events").to_pylist() == [{"n": 0}]


def test_hex_literals_only_outside_quotes() -> None:
    from cputrace.store.sql import decimal_hex_literals

    assert decimal_hex_literals("pc = 0x10 AND disasm = 'x 0x10'") == "pc = 16 AND disasm = 'x 0x10'"
