"""What an outside check of every command found: inputs and option values that ended in an internal
error (exit 70) instead of an answer or a clear message. Each test is the command as the user
typed it; answers are checked against DuckDB's own text of the same values."""

from __future__ import annotations

import contextlib
import decimal
import json
import os
import shutil
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from paths import shared

from cputrace.cli import cli, exits

ROOT = Path(__file__).resolve().parent.parent
QUICKSORT = ROOT / "examples" / "quicksort.tarmac"


def _run(*args: str):
    return CliRunner().invoke(cli, list(args))


# -- sql ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("query", ["", "   ", "/* nothing */"])
def test_sql_without_a_statement_is_bad_usage(quicksort_copy, query):
    result = _run("sql", str(quicksort_copy), query)
    assert result.exit_code == exits.USAGE, result.output
    assert "no SQL statement" in result.output and "internal error" not in result.output


_TYPED = (
    "SELECT 1.50::DECIMAL(10, 2) AS dec, 123456789012345678901234567890.5::DECIMAL(38, 1) AS wide, "
    "(1::HUGEINT << 100) AS huge, TIMESTAMP '2024-01-02 03:04:05' AS ts, DATE '2024-01-02' AS day, "
    "TIME '10:11:12' AS tod, '00000000-0000-0000-0000-000000000001'::UUID AS id, "
    "[1, 2] AS list, {'a': 1, 'b': '\\x01'::BLOB} AS rec, count(*) AS n FROM instructions"
)


def test_sql_json_writes_every_column_type(quicksort_copy):
    """Decimals, HUGEINT, timestamps, dates, times and UUIDs ended in 'TypeError: Object of type
    Decimal is not JSON serializable'."""
    result = _run("sql", str(quicksort_copy), _TYPED, "--format", "json")
    assert result.exit_code == exits.OK, result.output
    (row,) = json.loads(result.output)
    texts = duckdb.sql(
        "SELECT 1.50::DECIMAL(10, 2)::VARCHAR, 123456789012345678901234567890.5::DECIMAL(38, 1)::VARCHAR, "
        "(1::HUGEINT << 100)::VARCHAR, strftime(TIMESTAMP '2024-01-02 03:04:05', '%Y-%m-%dT%H:%M:%S')"
    ).fetchall()[0]
    assert decimal.Decimal(str(row["dec"])) == decimal.Decimal(texts[0])
    assert decimal.Decimal(row["wide"]) == decimal.Decimal(texts[1])  # a double would round it
    assert row["huge"] == int(texts[2])
    assert row["ts"] == texts[3]
    assert (row["day"], row["tod"]) == ("2024-01-02", "10:11:12")
    assert row["id"] == "00000000-0000-0000-0000-000000000001"
    assert row["list"] == [1, 2] and row["rec"] == {"a": 1, "b": "01"}
    assert row["n"] == 2044


def test_sql_json_is_strict_json_with_nan_and_infinity(quicksort_copy):
    """NaN and infinities (alone, in a list, in a struct) were written as the `NaN` and
    `Infinity` no JSON reader that follows RFC 8259 accepts: they are null."""
    query = (
        "SELECT 'nan'::DOUBLE AS a, '-inf'::DOUBLE AS b, [1.5, 'inf'::DOUBLE] AS c, {'x': 'nan'::DOUBLE} AS d"
    )
    result = _run("sql", str(quicksort_copy), query, "--format", "json")
    assert result.exit_code == exits.OK, result.output

    def refuse(constant: str) -> None:
        raise ValueError(constant)

    expected = [{"a": None, "b": None, "c": [1.5, None], "d": {"x": None}}]
    assert json.loads(result.output, parse_constant=refuse) == expected


# -- file names that are not UTF-8 ----------------------------------------------------------------


def test_a_trace_whose_name_is_not_utf8(tmp_path):
    """Its default store, `NAME.ctrace`, ended in 'internal error: UnicodeEncodeError' in Arrow: a
    store's path must be UTF-8, and the message says to give another; with -o it ingests."""
    trace = tmp_path / os.fsdecode(b"run-\xff.tarmac")
    shutil.copy(QUICKSORT, trace)
    for command in ("ingest", "info"):
        result = _run(command, str(trace))
        assert result.exit_code == exits.USAGE, result.output
        assert "run-\\xff.tarmac.ctrace: a store's path must be UTF-8 text" in result.output
    assert _run("ingest", str(trace), "-o", str(tmp_path / "run.ctrace")).exit_code == exits.OK
    info = json.loads(_run("info", str(tmp_path / "run.ctrace"), "--json").output)
    assert info["counts"]["instructions"] == 2044
    for to in ("parquet", "csv"):
        output = tmp_path / os.fsdecode(b"out-\xff." + to.encode())
        store = str(tmp_path / "run.ctrace")
        result = _run("export", store, "--to", to, "--table", "instructions", "-o", str(output))
        assert result.exit_code == exits.USAGE and "an output's path must be UTF-8 text" in result.output
        assert not output.exists()


# -- a cluster ------------------------------------------------------------------------------------


@pytest.mark.parametrize("held", [b"a,b\nx.tarmac,y.tarmac\n", b"{}", b'{"address": 5}', b""])
def test_a_scheduler_file_that_is_not_one(tmp_path, held):
    """distributed's own check was an AssertionError (internal error, exit 70); the file is now
    read first and named, with what it holds (exit 1)."""
    pytest.importorskip("distributed")
    described = tmp_path / "scheduler.json"
    described.write_bytes(held)
    output = tmp_path / "split.ctrace"
    result = _run("ingest", str(QUICKSORT), "-o", str(output), "--scheduler-file", str(described))
    assert result.exit_code == exits.BAD_INPUT, result.output
    assert f"{described}: expected a Dask scheduler file" in result.output
    assert not output.exists()


# -- numbers past what a command can hold ---------------------------------------------------------


def test_state_refuses_a_memory_range_too_long_to_hold(quicksort_copy):
    """--mem 0x8000 1000000000000 tried to allocate 931 GiB (internal error: MemoryError)."""
    result = _run("state", str(quicksort_copy), "--at", "5", "--mem", "0x8000", "1000000000000")
    assert result.exit_code == exits.USAGE, result.output
    assert "memory range 0x8000+1000000000000: at most 16,777,216 bytes at a time" in result.output


def test_counts_beyond_64_bits_mean_everything(quicksort_copy):
    """`profile --top` and `list --limit` past 2**63 were an OverflowError (internal error) and a
    DuckDB parser error: the whole table is shown, as for any count above its rows."""
    huge = str(10**22)
    profiled = _run("profile", str(quicksort_copy), "--by", "functions", "--top", huge)
    assert profiled.exit_code == exits.OK, profiled.output
    assert profiled.output == _run("profile", str(quicksort_copy), "--by", "functions", "--top", "3").output
    listed = _run("list", str(quicksort_copy), "--limit", huge, "--format", "csv")
    assert listed.exit_code == exits.OK, listed.output
    assert listed.output == _run("list", str(quicksort_copy), "--format", "csv").output
    assert len(listed.output.splitlines()) == 1 + 2044


@pytest.mark.parametrize("at", ["0x1000000000000000000", "0xfffffffffffff800"])
def test_a_raw_image_beyond_64_bits_is_refused(quicksort_copy, at):
    """A raw binary placed past 2**64 loaded without a word, its bytes at addresses no trace holds."""
    raw = ROOT / "examples" / "leon-itb.bin"
    result = _run("list", str(quicksort_copy), "--limit", "1", "--image", f"{raw}@{at}")
    assert result.exit_code == exits.BAD_INPUT, result.output
    assert str(raw) in result.output and ("64 bits" in result.output or "64-bit" in result.output)


@pytest.mark.parametrize("at", ["0xfffffffffffffff0", "-0x10000"])
def test_an_elf_moved_outside_64_bits_is_refused(quicksort_copy, at):
    """quicksort.elf's one segment (at 0x8000) moved past 2**64 or below 0: it read 'not a valid
    ELF file (truncated or damaged?): Python int too large to convert to C long'."""
    elf = ROOT / "examples" / "quicksort.elf"
    result = _run("list", str(quicksort_copy), "--limit", "1", "--image", f"{elf}@{at}")
    assert result.exit_code == exits.BAD_INPUT, result.output
    assert f"{elf}: segment 0 at 0x8000 moved by {at} lies outside the 64-bit address space" in result.output


# -- the Python API -------------------------------------------------------------------------------


def test_ingest_takes_one_path_as_well_as_a_list(tmp_path):
    """`cputrace.ingest("run.trc", ...)` read the path's characters as inputs ("No such file or
    directory: 'e'"); one path is one input, as `images` takes one."""
    import cputrace

    one = cputrace.ingest(str(ROOT / "examples" / "armulator.trc"), tmp_path / "one.ctrace")
    listed = cputrace.ingest([ROOT / "examples" / "armulator.trc"], tmp_path / "listed.ctrace")
    assert one.manifest["counts"] == listed.manifest["counts"] == {
        "instructions": 4, "registers": 0, "memory": 21, "events": 3,
    }  # fmt: skip
    as_path = cputrace.ingest(ROOT / "examples" / "armulator.trc", tmp_path / "path.ctrace")
    assert as_path.manifest["counts"] == one.manifest["counts"]


def test_batch_diff_pairs_that_are_not_text(tmp_path):
    """An ELF given as --pairs was 'internal error: UnicodeDecodeError'; a field past csv's limit
    an internal csv.Error. Both name the file and line (exit 1)."""
    pytest.importorskip("distributed")
    elf = ROOT / "examples" / "quicksort.elf"
    result = _run("batch", "diff", "--pairs", str(elf), "--workers", "1")
    assert result.exit_code == exits.BAD_INPUT, result.output
    assert f"{elf}:1: expected UTF-8 text, CSV rows a,b, got binary data, bytes 7f 45 4c 46" in result.output
    wide = tmp_path / "wide.csv"
    wide.write_text("a,b\n" + "x" * 200_000 + ",y\n")
    result = _run("batch", "diff", "--pairs", str(wide), "--workers", "1")
    assert result.exit_code == exits.BAD_INPUT, result.output
    assert f"{wide}:2: expected CSV rows a,b, got 'field larger than field limit" in result.output


# -- a folder where a file is expected ------------------------------------------------------------


def test_a_leon_dump_whose_settings_file_is_a_folder(tmp_path):
    """DUMP.json as a folder (or a dangling link) was passed over in silence, the dump decoded
    with default settings: now exit 1 naming it."""
    dump = tmp_path / "dump.bin"
    shutil.copy(ROOT / "examples" / "leon-itb.bin", dump)
    (tmp_path / "dump.bin.json").mkdir()
    result = _run("ingest", "--format", "leon-itb", str(dump))
    assert result.exit_code == exits.BAD_INPUT, result.output
    assert f"{dump}.json:0: expected a JSON object of trace buffer settings" in result.output
    assert "Is a directory" in result.output and not (tmp_path / "dump.bin.ctrace").exists()


def test_state_of_a_trace_without_instructions(tmp_path):
    """The message said 'the trace has seq 0..-1'."""
    empty = tmp_path / "empty.tarmac"
    empty.write_bytes(b"")
    assert _run("ingest", str(empty), "--format", "tarmac").exit_code == exits.OK
    result = _run("state", str(empty), "--at", "0")
    assert result.exit_code == exits.BAD_INPUT, result.output
    assert "no instruction with seq 0 (the trace has no instructions)" in result.output


def test_a_local_cluster_says_nothing_when_port_8787_is_taken(tmp_path):
    """With 8787 taken (another Dask cluster, a notebook's dashboard), every `--workers` command
    printed distributed's 'UserWarning: Port 8787 is already in use' into its output (and the
    README's examples failed whenever another cluster ran on the machine)."""
    pytest.importorskip("distributed")
    import socket
    import subprocess
    import sys

    held = socket.socket()
    with contextlib.suppress(OSError):  # taken already: as good
        held.bind(("127.0.0.1", 8787))
        held.listen()
    try:
        trace = ROOT / "examples" / "armulator.trc"
        command = [sys.executable, "-m", "cputrace", "batch", "ingest", str(trace), "-d", str(tmp_path)]
        command += ["--workers", "1"]
        done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    finally:
        held.close()
    assert done.returncode == exits.OK, done.stderr
    assert done.stderr == ""
    assert done.stdout.startswith(f"{tmp_path}/armulator.trc.ctrace: 4 instructions,")


@pytest.mark.parametrize(
    ("command", "window", "said"),
    [
        (("calls",), ("--start", "100", "--stop", "10"), "--start 100 is after --stop 10"),
        (("profile",), ("--from-time", "10", "--to-time", "9"), "--from-time 10 is after --to-time 9"),
    ],
)
def test_a_window_the_wrong_way_round_is_bad_usage(quicksort_copy, command, window, said):
    """It printed empty tables, exit 0: the user had swapped the bounds."""
    result = _run(*command, str(quicksort_copy), *window)
    assert result.exit_code == exits.USAGE, result.output
    assert f"{said}: the window holds nothing" in result.output


# -- a store whose manifest does not match its tables ---------------------------------------------


def _store_copy(quicksort_copy: Path, tmp_path: Path) -> tuple[Path, dict]:
    """A copy of the example's store (to damage), and its manifest."""
    store = tmp_path / "copy.ctrace"
    shutil.copytree(quicksort_copy.parent / "quicksort.tarmac.ctrace", store)
    for index in store.glob("v-*/index"):
        shutil.rmtree(index)
    return store, json.loads((store / "manifest.json").read_text())


@pytest.mark.parametrize(("table", "count"), [("instructions", 2**70), ("instructions", 2045), ("memory", 0)])
def test_a_manifest_whose_counts_are_not_its_tables(quicksort_copy, tmp_path, table, count):
    """A manifest whose row counts were not those of its tables (a digit changed) was believed:
    `info` printed them, and `state` sized its index by them: with 2**70 instructions it wrote
    DuckDB spill files until the disk was full. The Parquet footers' row counts are checked on
    opening (exit 1, naming the table's file)."""
    store, manifest = _store_copy(quicksort_copy, tmp_path)
    file = store / manifest["data"] / f"{table}.parquet"
    rows = pq.ParquetFile(file).metadata.num_rows
    manifest["counts"][table] = count
    (store / "manifest.json").write_text(json.dumps(manifest))
    said = f"damaged store: {file}: {rows:,} rows, the manifest says {count:,}"
    for command in (("info",), ("verify",), ("state", "--at", "5")):
        result = _run(command[0], str(store), *command[1:])
        assert result.exit_code == exits.BAD_INPUT, result.output
        assert said in result.output
    assert not list(store.glob("v-*/index/*"))


def test_a_manifest_naming_a_core_no_column_can_hold(quicksort_copy, tmp_path):
    """`"cpus": [2**80]` passed as a list of core numbers, and `export --to tarmac` sized an array
    by it: 'internal error: ValueError: Maximum allowed dimension exceeded'. The cpu columns are
    uint16: a core past 65535 is a damaged manifest."""
    store, manifest = _store_copy(quicksort_copy, tmp_path)
    manifest["cpus"] = [2**80]
    (store / "manifest.json").write_text(json.dumps(manifest))
    output = tmp_path / "out.tarmac"
    result = _run("export", str(store), "--to", "tarmac", "-o", str(output))
    assert result.exit_code == exits.BAD_INPUT, result.output
    said = f"damaged store: {store / 'manifest.json'}: 'cpus' is not a list of core numbers from 0 to 65535"
    assert said in result.output and not output.exists()


@pytest.mark.parametrize("damage", ["truncated", "emptied", "removed"])
def test_a_damaged_state_index_is_built_again(quicksort_copy, tmp_path, damage):
    """An index folder of the store's with a file truncated, emptied or removed (a failing disk,
    a tidy-up by hand) was read as it was: `state` ended in 'SQL: Invalid Input Error: ...' (exit
    2) or 'internal error: JSONDecodeError'. It is our own: built again, the answer the same."""
    store, _ = _store_copy(quicksort_copy, tmp_path)
    first = _run("state", str(store), "--at", "700", "--mem", "0xfffc0", "0x40")
    assert first.exit_code == exits.OK, first.output
    (index,) = store.glob("v-*/index/state-*")
    for name in ("meta.json", "registers.parquet", "writes.parquet"):
        file = index / name
        if damage == "removed":
            file.unlink()
        else:
            file.write_bytes(file.read_bytes()[: len(file.read_bytes()) // 2 if damage == "truncated" else 0])
        again = _run("state", str(store), "--at", "700", "--mem", "0xfffc0", "0x40")
        assert again.exit_code == exits.OK, again.output
        assert again.output == first.output


# -- standard streams -----------------------------------------------------------------------------


def test_a_closed_standard_output(tmp_path):
    """`cputrace ingest run.tarmac >&-` ingested, then printed a traceback three exceptions deep
    ('NoneType' object has no attribute 'write', then 'flush'), exit 1. What it prints is
    dropped; the store is written."""
    import subprocess
    import sys

    trace = tmp_path / "run.tarmac"
    shutil.copy(QUICKSORT, trace)
    command = [sys.executable, "-m", "cputrace", "ingest", str(trace)]
    closed = subprocess.run(
        command, stderr=subprocess.PIPE, text=True, timeout=300, preexec_fn=lambda: os.close(1)
    )
    assert closed.returncode == exits.OK, closed.stderr
    assert closed.stderr == f"{trace}: format tarmac (sniffed)\n"
    assert json.loads(_run("info", str(trace), "--json").output)["counts"]["instructions"] == 2044


# -- CoreSight snapshots --------------------------------------------------------------------------


def test_a_source_mapped_to_a_buffer_the_snapshot_does_not_have(tmp_path):
    """trace_cov_a15's trace.ini with `PTM_0_2=NOPE` under [source_buffers]: the PTM then counted
    as a source the snapshot does not map, the one buffer went to the first source left, an
    ETMv3.5 on another core, and `etm packets` listed the PTM's bytes as ETMv3 packets (exit 0);
    ingest said that source had no memory dump. The line is named (exit 1)."""
    snapshot = tmp_path / "snapshot"
    shutil.copytree(shared("opencsd-snapshots", "trace_cov_a15"), snapshot)
    trace_ini = snapshot / "trace.ini"
    text = trace_ini.read_text()
    trace_ini.write_text(text.replace("PTM_0_2=PTM_0_2", "PTM_0_2=NOPE"))
    line = text[: text.index("PTM_0_2=PTM_0_2")].count("\n") + 1
    said = f"{trace_ini}:{line}: expected ptm_0_2= one of the buffers [trace_buffers] lists (PTM_0_2)"
    for command in (("etm", "packets", str(snapshot), "--limit", "3"), ("ingest", str(snapshot))):
        result = _run(*command)
        assert result.exit_code == exits.BAD_INPUT, result.output
        assert said + ", got 'NOPE'" in result.output


def test_ingest_of_a_format_no_decoder_has(tmp_path):
    """`cputrace.ingest(path, out, format="tarmak")` raised KeyError, an exception that says a
    lookup failed inside cputrace: it is a UsageError like a bad option, and nothing is written."""
    import cputrace
    from cputrace.errors import UsageError

    with pytest.raises(UsageError, match=r"unknown format 'tarmak' \(known: armulator, coresight, "):
        cputrace.ingest(QUICKSORT, tmp_path / "out.ctrace", format="tarmak")
    assert not list(tmp_path.iterdir())


# -- the browser ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "said"),
    [("a..b", "'a..b' is not a host name"), ("no-such-host.invalid", "'no-such-host.invalid': ")],
)
def test_browse_serve_on_a_host_that_is_not_one(quicksort_copy, host, said):
    """--host a..b was 'internal error: UnicodeError: encoding with 'idna' codec failed', after the
    indexes were built; a name no resolver knows said only 'error: Name or service not known'.
    Both are bad usage naming the host, before anything is built or served."""
    pytest.importorskip("textual")
    result = _run("browse", str(quicksort_copy), "--serve", "--host", host, "--port", "18767")
    assert result.exit_code == exits.USAGE, result.output
    assert f"Invalid value for --host: {said}" in result.output


# -- trace buffers --------------------------------------------------------------------------------


def test_a_leon_header_giving_a_setting_twice(tmp_path):
    """`# leon-trace kind=itb cpu=0 itbc0=0x2000000e itbc0=0x0`: the last value was taken in
    silence, the control-flow filter (TFILT 2) of the first lost, and the 32 traced lines were
    ingested as the whole trace (32 instructions, not the 87 the image rebuilds; exit 0)."""
    listing = tmp_path / "cf.txt"
    header, body = (ROOT / "examples" / "leon-cf.txt").read_text().split("\n", 1)
    listing.write_text(f"{header} itbc0=0x0\n{body}")
    image = ROOT / "tests" / "data" / "leon" / "itb_demo.elf"
    result = _run("ingest", str(listing), "--image", str(image))
    assert result.exit_code == exits.BAD_INPUT, result.output
    assert f"{listing}:line 1: expected itbc0= once in a header, got '{header} itbc0=0x0'" in result.output
    assert not (tmp_path / "cf.txt.ctrace").exists()


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("ETMCR(id:0x0)=0x00000001", ":42: expected etmcr(id:0x0)= once in [regs] (line 7 has it)"),
        ("ETMCR=0x00000001", ":42: expected ETMCR once in [regs], got 'etmcr(id:0x0)'"),
    ],
)
def test_a_trace_unit_register_given_twice(tmp_path, line, said):
    """A trace unit's device file with ETMCR twice (0x1 first, the snapshot's 0x20000400 below) was
    decoded with the last value in silence: no value of the two can be told right, the second's
    line is named."""
    snapshot = tmp_path / "snapshot"
    shutil.copytree(shared("opencsd-snapshots", "trace_cov_a15"), snapshot)
    device = snapshot / "device5.ini"  # PTM_0_2's, whose trace the buffer holds
    device.write_text(device.read_text().replace("[regs]\n", f"[regs]\n{line}\n", 1))
    for command in (("etm", "packets", str(snapshot), "--limit", "3"), ("ingest", str(snapshot))):
        result = _run(*command)
        assert result.exit_code == exits.BAD_INPUT, result.output
        assert f"{device}{said}" in result.output


def test_a_state_index_whose_meta_json_is_junk_of_its_size(quicksort_copy, tmp_path):
    """meta.json overwritten by bytes of its own size (the sizes recorded still match) was
    'internal error: UnicodeDecodeError' (or JSONDecodeError): a damaged index, named, with what
    to do (exit 1)."""
    store, _ = _store_copy(quicksort_copy, tmp_path)
    assert _run("state", str(store), "--at", "5").exit_code == exits.OK
    (meta,) = store.glob("v-*/index/state-*/meta.json")
    meta.write_bytes(bytes((37 * i + 11) & 0xFF for i in range(meta.stat().st_size)))
    result = _run("state", str(store), "--at", "5")
    assert result.exit_code == exits.BAD_INPUT, result.output
    assert f"damaged index: {meta}: not the JSON the index was built with" in result.output
    assert f"remove {meta.parent} and it is built again" in result.output


def test_a_state_index_parquet_file_damaged_in_place(quicksort_copy, tmp_path):
    """registers.parquet of the index with its footer's bytes changed in place (its size kept)
    was 'error: SQL: TProtocolException: Invalid data', exit 2, as if the user's SQL were bad:
    a damaged index, named, with what to do (exit 1)."""
    store, _ = _store_copy(quicksort_copy, tmp_path)
    assert _run("state", str(store), "--at", "5").exit_code == exits.OK
    (snapshots,) = store.glob("v-*/index/state-*/registers.parquet")
    damaged = bytearray(snapshots.read_bytes())
    for at in range(len(damaged) - 200, len(damaged) - 8, 3):  # within the footer
        damaged[at] ^= 0x55
    snapshots.write_bytes(bytes(damaged))
    result = _run("state", str(store), "--at", "5")
    assert result.exit_code == exits.BAD_INPUT, result.output
    assert f"damaged index: {snapshots}: " in result.output
    assert f"remove {snapshots.parent} and it is built again" in result.output


def _parquet_data_pages(path: Path) -> range:
    """The byte offsets of a Parquet file's pages: after the magic, before the footer."""
    data = path.read_bytes()
    footer = int.from_bytes(data[-8:-4], "little")
    return range(4, len(data) - 8 - footer)


@pytest.mark.parametrize("file", ["writes", "initial"])
def test_a_state_index_damaged_in_its_data_pages(quicksort_copy, tmp_path, file):
    """A state index file whose data pages were overwritten in place (its size and footer kept)
    failed a memory query with 'error: SQL: don't know what type', exit 2, as if the user's SQL
    were bad: a damaged index, named, with what to do (exit 1); removed as told, it is built again
    and answers as before."""
    store, _ = _store_copy(quicksort_copy, tmp_path)
    command = ("state", str(store), "--at", "1500", "--mem", "0x80f0", "0x20", "--mem", "0xffe00", "0x200")
    before = _run(*command)
    assert before.exit_code == exits.OK, before.output
    (damaged,) = store.glob(f"v-*/index/state-*/{file}.parquet")
    data = bytearray(damaged.read_bytes())
    for at in _parquet_data_pages(damaged):
        data[at] = 0xFF
    damaged.write_bytes(bytes(data))
    result = _run(*command)
    assert result.exit_code == exits.BAD_INPUT, result.output
    assert f"damaged index: {damaged}: " in result.output
    assert f"remove {damaged.parent} and it is built again" in result.output
    shutil.rmtree(damaged.parent)
    assert _run(*command).output == before.output


@pytest.mark.parametrize("version", [0, -1, -(2**70)])
def test_a_manifest_of_a_model_version_below_the_first(quicksort_copy, tmp_path, version):
    """A manifest whose model_version was 0 or below was read as a store of version 1 (whose
    tables are not checked against recorded hashes): `info` answered, exit 0."""
    store, manifest = _store_copy(quicksort_copy, tmp_path)
    manifest["model_version"] = version
    (store / "manifest.json").write_text(json.dumps(manifest))
    said = f"damaged store: {store / 'manifest.json'}: model_version {version} is not a model version"
    for command in ("info", "verify"):
        result = _run(command, str(store))
        assert result.exit_code == exits.BAD_INPUT, result.output
        assert said in result.output


TC2 = ROOT / "tests" / "data" / "etmv3" / "tc2"


@pytest.mark.parametrize(
    ("ini", "section"),
    [
        ("trace.ini", "[buffer0]\nname=ETB_0\nfile=cpu_0.ini\n"),
        ("trace.ini", "[source_buffers]\nETM_0=ETB_0\n"),
        ("snapshot.ini", "[device_list]\ndevice0=cpu_0.ini\n"),
        ("device_5.ini", "[device]\nname=other\n"),
    ],
)
def test_a_snapshot_section_given_twice(tmp_path, ini, section):
    """TC2's trace.ini with a second [buffer0] whose file= is another file: the first was taken
    in silence (and any other section of one name given twice likewise). Which one is meant
    cannot be told: the second section's line is named (exit 1)."""
    snapshot = tmp_path / "tc2"
    shutil.copytree(TC2, snapshot, ignore=shutil.ignore_patterns("*.xz", "ds5-dumps"))
    file = snapshot / ini
    text = file.read_text().rstrip("\n") + "\n\n"
    file.write_text(text + section)
    name = section.split("]")[0] + "]"
    said = f"{file}:{text.count(chr(10)) + 1}: expected {name} once (line "
    for command in (("etm", "packets", str(snapshot), "--limit", "3"), ("ingest", str(snapshot))):
        result = _run(*command)
        assert result.exit_code == exits.BAD_INPUT, result.output
        assert said in result.output


def test_a_trace_source_of_a_type_no_decoder_knows(tmp_path):
    """trace_cov_a15 with its PTM's type=PFT9.9: the source was passed over in silence and the
    snapshot refused as 'no trace buffer is listed for any trace source (ETM_0_4, ETM_1_5,
    ETM_2_6)', which blamed the other sources. The device file, the type and the types known
    are named (exit 1)."""
    snapshot = tmp_path / "snapshot"
    shutil.copytree(shared("opencsd-snapshots", "trace_cov_a15"), snapshot)
    device = snapshot / "device5.ini"
    device.write_text(device.read_text().replace("type=PFT1.1", "type=PFT9.9"))
    said = f"{device}: trace source PTM_0_2 of type PFT9.9: expected ETM3.x, PTM1.x or PFT1.x, ETM4.x"
    for command in (("etm", "packets", str(snapshot), "--limit", "3"), ("ingest", str(snapshot))):
        result = _run(*command)
        assert result.exit_code == exits.BAD_INPUT, result.output
        assert said in result.output


def _empty_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A new empty folder, made the current one: where an output named by a bad name would land."""
    folder = tmp_path / "here"
    folder.mkdir()
    monkeypatch.chdir(folder)
    return folder


def _filled(command: tuple[str, ...], quicksort_copy: Path) -> list[str]:
    """`command` with {store} the quicksort store and {elf} its program."""
    values = {
        "store": str(quicksort_copy.parent / "quicksort.tarmac.ctrace"),
        "elf": str(ROOT / "examples" / "quicksort.elf"),
    }
    return [part.format(**values) for part in command]


@pytest.mark.parametrize(
    "command",
    [
        ("export", "{store}", "--to", "lcov", "--image", "{elf}", "-o", ""),
        ("export", "{store}", "--to", "vcd", "-o", ""),
        ("coverage", "{store}", "--image", "{elf}", "--lcov", ""),
        ("coverage", "{store}", "--image", "{elf}", "--cobertura", ""),
        ("coverage", "{store}", "--image", "{elf}", "--lcov", "report.info", "--listing", ""),
        ("profile", "{store}", "--plot", ""),
        ("record", "{elf}", "-o", ""),
    ],
)
def test_an_output_file_named_by_the_empty_string(quicksort_copy, tmp_path, monkeypatch, command):
    """An output given as '' (a variable that was not set) names no file: `profile --plot ''`
    wrote a hidden '.png' and said 'wrote ', `coverage --lcov ''` wrote no report and said
    nothing (exit 0), `export --to lcov -o ''` left '..lst' behind and failed as '.: Is a
    directory' (exit 1). Bad usage, and nothing written."""
    folder = _empty_folder(tmp_path, monkeypatch)
    result = _run(*_filled(command, quicksort_copy))
    assert result.exit_code == exits.USAGE, result.output
    assert "'': an empty name names no file" in result.output
    assert list(folder.iterdir()) == []


@pytest.mark.parametrize(
    "command",
    [
        ("export", "{store}", "--to", "lcov", "--image", "{elf}", "-o", "-"),
        ("export", "{store}", "--to", "csv", "--table", "instructions", "-o", "-"),
        ("coverage", "{store}", "--image", "{elf}", "--cobertura", "-"),
        ("profile", "{store}", "--plot", "-"),
    ],
)
def test_an_output_file_named_dash(quicksort_copy, tmp_path, monkeypatch, command):
    """`-o -` (meant as the standard output) wrote a file called '-' (and an lcov export its
    listing '-.lst' beside it) and said 'wrote -': an output is a file written whole, so `-` is
    bad usage saying so, and nothing is written; `./-` still names a file called '-'."""
    folder = _empty_folder(tmp_path, monkeypatch)
    result = _run(*_filled(command, quicksort_copy))
    assert result.exit_code == exits.USAGE, result.output
    assert "'-': the output is a file" in result.output
    assert list(folder.iterdir()) == []
    named = _run(*_filled(command[:-1], quicksort_copy), "./-")
    assert named.exit_code == exits.OK, named.output
    assert (folder / "-").is_file()


CALCULATOR = ROOT / "examples" / "calculator-aarch64-fastmodel.tarmac.xz"


def test_diff_with_a_window_past_both_traces(tmp_path):
    """Two traces that never resynchronise (quicksort against the calculator) with `--window
    1000000`: the search for resynchronisation tried every distance up to twice the window,
    the positions past both traces' ends too, and ran for minutes on 2,044 against 4,783
    instructions (over 300 s of wall time at 400,000; 2 s at the default). A window past the
    traces' ends answers as one that reaches them."""
    a, b = tmp_path / "a.tarmac", tmp_path / "b.tarmac.xz"
    shutil.copy(QUICKSORT, a)
    shutil.copy(CALCULATOR, b)
    reaching = _run("diff", str(a), str(b), "--window", "4783", "--format", "json")
    assert reaching.exit_code == exits.OK, reaching.output
    assert json.loads(reaching.output)["divergences"]
    wide = _run("diff", str(a), str(b), "--window", "1000000", "--format", "json")
    assert wide.exit_code == exits.OK, wide.output
    assert json.loads(wide.output) == json.loads(reaching.output)


def test_diff_with_a_window_no_integer_holds(quicksort_copy):
    """`diff --window 99999999999999999999` was 'internal error: OverflowError: int too big
    to convert' (exit 70): bad usage naming the range."""
    result = _run("diff", str(quicksort_copy), str(quicksort_copy), "--window", "99999999999999999999")
    assert result.exit_code == exits.USAGE, result.output
    assert "--window" in result.output and "1<=x<=4294967296" in result.output


@pytest.mark.parametrize("command", ["ingest", "batch ingest"])
def test_a_local_cluster_of_more_processes_than_the_machine_holds(tmp_path, command):
    """`ingest --workers 99999999999999999999` made distributed build the specs of that many
    worker processes: it took every byte of memory and was killed (or, under a memory limit,
    'internal error: MemoryError'). Bad usage naming the bound, before any process starts."""
    from cputrace.batch.cluster import most_local_workers

    trace = tmp_path / "q.tarmac"
    shutil.copy(QUICKSORT, trace)
    for workers in (str(most_local_workers() + 1), "99999999999999999999"):
        result = _run(*command.split(), str(trace), "--workers", workers)
        assert result.exit_code == exits.USAGE, result.output
        assert f"a local cluster of 1 to {most_local_workers()} processes on this machine" in result.output
        assert f"got {workers}" in result.output
    assert sorted(path.name for path in tmp_path.iterdir()) == ["q.tarmac"]


@pytest.mark.parametrize(
    "command",
    [
        ("coverage", "{store}", "--image", "{elf}", "--cpu", "3"),
        ("coverage", "{store}", "--image", "{elf}", "--cpu", "0", "--cpu", "3", "--lcov", "{tmp}/r.info"),
        ("calls", "{store}", "--cpu", "3"),
        ("calls", "{store}", "--cpu", "3", "--tree"),
    ],
)
def test_a_core_the_trace_does_not_have(quicksort_copy, tmp_path, command):
    """`coverage --cpu 3` of the one-core quicksort trace reported every function never
    executed, and `calls --cpu 3` 'calls detected from no instructions' (exit 0), as `state`
    did before it refused: a typo for a core was a report of nothing run. Bad usage naming the
    cores there are, and no report written."""
    values = {
        "store": str(quicksort_copy.parent / "quicksort.tarmac.ctrace"),
        "elf": str(ROOT / "examples" / "quicksort.elf"),
        "tmp": str(tmp_path),
    }
    result = _run(*(part.format(**values) for part in command))
    assert result.exit_code == exits.USAGE, result.output
    assert "--cpu 3: the trace has no such core (its cores: 0)" in result.output
    assert list(tmp_path.iterdir()) == []


CORPUS = ROOT / "tests" / "corpus"


@pytest.mark.parametrize(
    ("program", "ram", "said"),
    [
        ("calls-a64.elf", "0xffffffffffffff00:0x1000", "RAM 0xffffffffffffff00+0x1000 ends past the 64-bit"),
        ("calls-a64.elf", "0x0:0xffffffffffffffff", "no room for the stack"),
        ("calls-t32.elf", "0x100000:0x100000000", "RAM 0x100000+0x100000000 ends past the 32-bit"),
        ("calls-t32.elf", "0xfff00000:0x100000", "no room for the stack"),
    ],
)
def test_record_with_ram_past_the_address_space(tmp_path, program, ram, said):
    """`record --ram` past the end of the address space was 'internal error: UcError: Invalid
    argument (UC_ERR_ARG)' (exit 70), and the trace named by -o had been opened first: an
    earlier recording there was left empty. (RAM at the top of the 32-bit space put the stack
    above 4 GiB, where an ARM program's SP cannot point.) Bad usage naming the area; the file
    there is kept."""
    trace = tmp_path / "run.tarmac"
    trace.write_text("an earlier recording\n")
    result = _run("record", str(CORPUS / program), "-o", str(trace), "--ram", ram)
    assert result.exit_code == exits.USAGE, result.output
    assert said in result.output
    assert trace.read_text() == "an earlier recording\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["run.tarmac"]


def test_record_keeps_the_trace_up_to_a_fault(tmp_path):
    """The quicksort example run without the RAM its stack needs faults at its fourth
    instruction: the trace up to the fault is still written (exit 1), over an earlier one."""
    trace = tmp_path / "run.tarmac"
    trace.write_text("an earlier recording\n")
    result = _run("record", str(ROOT / "examples" / "quicksort.elf"), "-o", str(trace))
    assert result.exit_code == exits.BAD_INPUT, result.output
    assert "stopped at pc 0x800c after 4 instructions: write of 8 bytes at unmapped address" in result.output
    assert trace.read_text().count(" IT ") == 4
    assert sorted(path.name for path in tmp_path.iterdir()) == ["run.tarmac"]


@pytest.mark.parametrize(
    ("file", "where"),
    [
        ("browse-*/meta.json", "all"),  # 'internal error: UnicodeDecodeError'
        ("browse-*/instructions.keys.npy", "middle"),  # 'internal error: TokenError'
        ("browse-*/timeline.parquet", "all"),  # 'internal error: ArrowInvalid'
        ("browse-*/instructions.arrow", "middle"),  # read while drawing: Textual's traceback, exit 70
        ("calls-*/meta.json", "all"),  # 'internal error: UnicodeDecodeError'
        ("calls-*/tree.parquet", "all"),  # 'internal error: ArrowInvalid'
    ],
)
def test_a_browse_index_file_damaged_in_place(quicksort_copy, tmp_path, file, where):
    """A browse or calls index file overwritten in place, its size kept (which the recorded
    sizes do not catch): internal errors, and data found damaged while the screen was drawn
    printed Textual's traceback then 'internal error: RuntimeError: the browser failed before
    its screenshot'. A damaged index, named, with what to do (exit 1); removed as told, it is
    built again."""
    store, _ = _store_copy(quicksort_copy, tmp_path)
    shot = tmp_path / "screen.svg"
    assert _run("browse", str(store), "--screenshot", str(shot)).exit_code == exits.OK
    (damaged,) = store.glob(f"v-*/index/{file}")
    data = bytearray(damaged.read_bytes())
    span = range(len(data)) if where == "all" else range(len(data) // 3, 2 * len(data) // 3)
    for at in span:
        data[at] = 0xFF
    damaged.write_bytes(bytes(data))
    result = _run("browse", str(store), "--screenshot", str(shot))
    assert result.exit_code == exits.BAD_INPUT, result.output
    assert f"damaged index: {damaged}: " in result.output
    assert f"remove {damaged.parent} and it is built again" in result.output
    assert "Traceback" not in result.output and "internal error" not in result.output
    shutil.rmtree(damaged.parent)
    assert _run("browse", str(store), "--screenshot", str(shot)).exit_code == exits.OK


@pytest.mark.parametrize(
    ("start", "length"), [("0xffffffffffffff00", "0x200"), ("99999999999999999999", "4")]
)
def test_coverage_of_a_range_past_the_address_space(quicksort_copy, start, length):
    """`coverage --range` past the end of the 64-bit address space printed an empty report
    (exit 0), as if the range held no code: bad usage naming the range."""
    store = quicksort_copy.parent / "quicksort.tarmac.ctrace"
    elf = ROOT / "examples" / "quicksort.elf"
    result = _run("coverage", str(store), "--image", str(elf), "--range", start, length)
    assert result.exit_code == exits.USAGE, result.output
    said = f"range 0x{int(start, 0):x}+{int(length, 0)}: expected a range within the 64-bit address space"
    assert said in result.output


def test_a_plot_named_without_a_suffix_is_a_png(quicksort_copy, tmp_path):
    """`profile --plot out` was 'internal error: ValueError: Format 'tmp-3908ab59' is not
    supported' (exit 70): matplotlib took the format from the suffix of the temporary file the
    plot is written to before it is renamed. A name without a suffix is a PNG, as --help says."""
    store = quicksort_copy.parent / "quicksort.tarmac.ctrace"
    result = _run("profile", str(store), "--plot", str(tmp_path / "out"))
    assert result.exit_code == exits.OK, result.output
    assert (tmp_path / "out").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [path.name for path in tmp_path.iterdir()] == ["out"]
