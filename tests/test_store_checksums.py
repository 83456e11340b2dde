"""Damaged stores are found, never read as if whole: checksums in the manifest, page CRCs,
`cputrace verify`, and manifests that are not what cputrace writes."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import cputrace
from cputrace.errors import StoreError
from cputrace.ingest import ingest
from cputrace.store.batches import read_batches
from cputrace.store.checksums import store_problems
from cputrace.store.manifest import load_manifest, table_path

QUICKSORT = Path(__file__).parents[1] / "examples" / "quicksort.tarmac"


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store of a real trace, copied by the tests that damage it."""
    return ingest([QUICKSORT], tmp_path_factory.mktemp("pristine") / "q.ctrace").store


@pytest.fixture
def store(pristine: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(pristine, tmp_path / "q.ctrace"))


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cputrace", *args], capture_output=True, text=True)


def flip(path: Path, position: int, bit: int) -> None:
    data = bytearray(path.read_bytes())
    data[position] ^= 1 << bit
    path.write_bytes(data)


def footer_start(path: Path) -> int:
    data = path.read_bytes()
    return len(data) - 8 - int.from_bytes(data[-8:-4], "little")


READERS = (
    lambda trace: trace.sql("SELECT * FROM instructions"),
    lambda trace: trace.instructions,
    lambda trace: list(read_batches(trace, "instructions", ["pc"])),
)
"""The ways a table is read: DuckDB, Arrow, the chunked reader of the analyses."""


def test_every_bit_flip_in_a_table_is_found_before_rows_are_returned(store: Path) -> None:
    """Single-bit flips all over instructions.parquet: `verify` finds each one; opening the
    store finds those in the Parquet footer; every other one is found by the first read of the
    table, whichever way it is read (DuckDB, Arrow, the chunked reader): no read ever returns
    rows that differ from the store's."""
    file = table_path(store, "instructions")
    pristine = file.read_bytes()
    footer = footer_start(file)
    rng = random.Random(2024)
    found = Counter()
    for _ in range(200):
        position, bit = rng.randrange(len(pristine)), rng.randrange(8)
        file.write_bytes(pristine)
        flip(file, position, bit)
        assert store_problems(file.parent, load_manifest(store)), (position, bit)
        try:
            trace = cputrace.open(store)
        except StoreError as exc:
            assert "damaged store" in str(exc)
            found["open"] += 1
            continue
        assert position < footer, "a flip in the footer got past opening"
        for read in READERS:
            with pytest.raises(StoreError, match="damaged store"):
                read(trace)
        found["first read"] += 1
        trace.close()
    assert found["open"] and found["first read"] and sum(found.values()) == 200


def test_pages_carry_crcs(store: Path) -> None:
    """A flip in the data of a page fails its CRC when Arrow checks them (other Parquet
    readers can too)."""
    file = table_path(store, "instructions")
    group = pq.ParquetFile(file).metadata.row_group(0)
    pc = next(group.column(i) for i in range(group.num_columns) if group.column(i).path_in_schema == "pc")
    flip(file, pc.data_page_offset + pc.total_compressed_size - 1, 0)  # the last byte of its page
    with pytest.raises(OSError, match="CRC checksum verification failed"):
        pq.read_table(file, page_checksum_verification=True)


def test_a_damaged_file_is_exit_1_damaged_store_never_an_sql_error(store: Path) -> None:
    file = table_path(store, "instructions")
    flip(file, footer_start(file) // 2, 3)  # in the pages, not the footer: opening does not see it
    r = run_cli("sql", str(store), "SELECT count(*) FROM instructions")
    assert r.returncode == 1 and "damaged store" in r.stderr and "SQL" not in r.stderr
    r = run_cli("calls", str(store))
    assert r.returncode == 1 and "damaged store" in r.stderr
    r = run_cli("verify", str(store))
    assert r.returncode == 1
    assert f"damaged store: {file}: its content differs from what was written" in r.stderr


def test_verify_names_every_damaged_file(store: Path) -> None:
    assert run_cli("verify", str(store)).returncode == 0
    registers, memory = table_path(store, "registers"), table_path(store, "memory")
    registers.write_bytes(registers.read_bytes()[:-100])  # truncated
    memory.unlink()
    r = run_cli("verify", str(store))
    assert r.returncode == 1
    assert str(memory) + ": missing" in r.stderr
    assert f"{registers}: {registers.stat().st_size:,} bytes, the manifest says" in r.stderr
    with pytest.raises(StoreError, match=r"damaged store: .*registers\.parquet: [\d,]+ bytes"):
        cputrace.open(store)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda m: [m], "a JSON object was expected, got list"),
        (lambda m: {k: v for k, v in m.items() if k != "counts"}, "no 'counts'"),
        (lambda m: {k: v for k, v in m.items() if k != "time"}, "no 'time'"),
        (lambda m: {**m, "time": [0, 1]}, "'time' is not an object"),
        (lambda m: {**m, "counts": {**m["counts"], "events": "16"}}, "'counts' is not a row count per table"),
        (lambda m: {**m, "data": "../q.ctrace"}, "'data' is not a folder name"),
        (lambda m: {**m, "files": {}}, "'files' is not the size and hashes"),
        (lambda m: {k: v for k, v in m.items() if k != "model_version"}, "no model_version"),
    ],
)
def test_a_manifest_not_as_written_is_a_damaged_store(store: Path, change, message: str) -> None:
    manifest_file = store / "manifest.json"
    manifest_file.write_text(json.dumps(change(json.loads(manifest_file.read_text()))))
    with pytest.raises(StoreError, match=f"damaged store: .*manifest.json: {message}"):
        cputrace.open(store)
    r = run_cli("info", str(store))
    assert r.returncode == 1 and "damaged store" in r.stderr and "Traceback" not in r.stderr


def test_a_manifest_that_is_not_json_is_a_damaged_store(store: Path) -> None:
    (store / "manifest.json").write_bytes(b'{"model_version": 2, "counts": {')
    r = run_cli("verify", str(store))
    assert r.returncode == 1 and "damaged store" in r.stderr and "not JSON" in r.stderr
