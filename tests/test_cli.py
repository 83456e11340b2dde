"""The command line end to end, as a user runs it."""

from __future__ import annotations

import csv
import gzip
import io
import json
import lzma
import subprocess
import sys
from pathlib import Path

import pytest
import zstandard
from click.testing import CliRunner
from paths import shared

from cputrace.cli import cli

TRACE = (
    "Tarmac Text Rev 3t\n"
    "0 clk IT (0) 00008000 e3a00001 A svc_s : MOV r0,#1\n"
    "0 clk R r0 00000001\n"
    "1 clk IT (1) 00008004 e5801000 A svc_s : STR r1,[r0,#0]\n"
    "1 clk MW4 00000001 00000000\n"
    "2 clk IS (2) 00008008 03a00002 A svc_s : MOVEQ r0,#2\n"
    "3 clk IT (3) 0000800c 4770 T svc_s : BX lr\n"
    "3 clk E 0000800c 00000001 CoreEvent_Reset\n"
)


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "cputrace", *args], capture_output=True, text=True
    )


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    path = tmp_path / "run.tarmac"
    path.write_text(TRACE)
    return path


def test_ingest_info_list_sql(trace: Path) -> None:
    r = run("ingest", str(trace))
    assert r.returncode == 0, r.stderr
    assert "format tarmac (sniffed)" in r.stderr
    assert "4 instructions, 1 register writes, 1 memory accesses, 2 events" in r.stdout
    store = trace.with_name("run.tarmac.ctrace")
    assert (store / "manifest.json").is_file()

    r = run("info", str(store))
    assert r.returncode == 0, r.stderr
    assert "instructions  4 (1 condition failed)" in r.stdout
    assert "ISAs          A32, T32" in r.stdout
    assert "time          0 .. 3 clk" in r.stdout
    info = json.loads(run("info", str(store), "--json").stdout)
    assert info["counts"]["instructions"] == 4 and info["condition_failed"] == 1

    r = run("list", str(trace), "--where", "pc between 0x8004 and 0x8008", "--limit", "5")
    assert r.returncode == 0, r.stderr
    header, *lines = r.stdout.splitlines()
    assert header.split() == ["seq", "time", "cpu", "pc", "opcode", "X", "isa", "mode", "disasm"]
    assert len(lines) == 2
    assert "0x00008004 e5801000 E A32" in lines[0] and "STR r1,[r0,#0]" in lines[0]
    assert "0x00008008 03a00002 N A32" in lines[1]

    rows = list(csv.DictReader(io.StringIO(run("list", str(trace), "--format", "csv").stdout)))
    assert [int(r["pc"]) for r in rows] == [0x8000, 0x8004, 0x8008, 0x800C]
    assert rows[3]["size"] == "2" and rows[3]["isa"] == "T32"
    first = json.loads(run("list", str(trace), "--format", "jsonl", "--limit", "1").stdout)
    assert first["pc"] == 0x8000 and first["disasm"] == "MOV r0,#1"

    r = run("sql", str(trace), "select reg, count(*) as n from registers group by reg", "--format", "csv")
    assert r.stdout.splitlines() == ["reg,n", "r0,1"]
    got = run("sql", str(trace), "select kind from events order by src", "--format", "json")
    got = json.loads(got.stdout)
    assert got == [{"kind": "header"}, {"kind": "exception"}]
    assert "r0" in run("sql", str(trace), "select reg from registers").stdout


def test_tarmac_round_trip(tmp_path: Path) -> None:
    """list --format tarmac writes a trace that ingests back to the same rows."""
    source = shared("tarmac-trace-utilities", "samples", "calculator-aarch32-fastmodel.tarmac")
    runner = CliRunner()
    first = runner.invoke(cli, ["ingest", str(source), "-o", str(tmp_path / "a.ctrace")])
    assert first.exit_code == 0, first.output
    out = runner.invoke(cli, ["list", str(tmp_path / "a.ctrace"), "--format", "tarmac"])
    assert out.exit_code == 0
    copy = tmp_path / "copy.tarmac"
    copy.write_text(out.stdout)
    again = runner.invoke(cli, ["ingest", "--strict", str(copy), "-o", str(tmp_path / "b.ctrace")])
    assert again.exit_code == 0, again.output
    import cputrace

    a, b = cputrace.open(tmp_path / "a.ctrace"), cputrace.open(tmp_path / "b.ctrace")
    for table in ("instructions", "registers", "memory", "events"):
        assert a.manifest["counts"][table] == b.manifest["counts"][table], table
    keep = ["seq", "time", "cpu", "pc", "opcode", "size", "isa", "mode", "executed", "disasm"]
    assert a.instructions.select(keep).to_pylist() == b.instructions.select(keep).to_pylist()
    regs = ["seq", "time", "reg", "size", "value", "wide", "mask"]
    assert a.registers.select(regs).to_pylist() == b.registers.select(regs).to_pylist()
    mem = ["seq", "time", "op", "size", "addr", "paddr", "value", "wide", "attrs"]
    assert a.memory.select(mem).to_pylist() == b.memory.select(mem).to_pylist()


@pytest.mark.parametrize(
    "compress",
    [gzip.compress, lambda b: zstandard.ZstdCompressor().compress(b), lzma.compress],
    ids=["gzip", "zstd", "xz"],
)
def test_compressed_inputs_are_read_transparently(tmp_path: Path, compress) -> None:
    path = tmp_path / "run.tarmac.z"
    path.write_bytes(compress(TRACE.encode()))
    r = run("ingest", str(path), "-o", str(tmp_path / "z.ctrace"))
    assert r.returncode == 0, r.stderr
    assert "4 instructions" in r.stdout


def test_crlf_and_truncated_last_line(tmp_path: Path) -> None:
    path = tmp_path / "crlf.tarmac"
    path.write_bytes(TRACE.replace("\n", "\r\n").encode() + b"4 clk IT (4) 0000")
    r = run("ingest", str(path))
    assert r.returncode == 0, r.stderr
    assert "4 instructions" in r.stdout
    assert "1 warning, e.g.:\n" in r.stderr and "kept as text: expected" in r.stderr
    assert "crlf.tarmac:9" in r.stderr
    r = run("ingest", "--strict", str(path), "-o", str(tmp_path / "s.ctrace"))
    assert r.returncode == 1
    assert "crlf.tarmac:9: expected an instruction address and opcode" in r.stderr
    assert not (tmp_path / "s.ctrace").exists()


def test_bad_inputs_exit_1_with_a_clear_message(tmp_path: Path) -> None:
    empty = tmp_path / "empty.tarmac"
    empty.write_bytes(b"")
    r = run("ingest", str(empty))
    assert r.returncode == 1 and "empty.tarmac" in r.stderr and "empty input" in r.stderr

    garbage = tmp_path / "garbage.bin"
    garbage.write_bytes(bytes(range(256)) * 64)
    r = run("ingest", str(garbage))
    assert r.returncode == 1 and "garbage.bin" in r.stderr and "--format" in r.stderr
    assert not list(tmp_path.glob("*.ctrace*"))

    broken = tmp_path / "broken.gz"
    broken.write_bytes(gzip.compress(TRACE.encode())[:30])
    r = run("ingest", "--format", "tarmac", str(broken))
    assert r.returncode == 1 and "broken.gz" in r.stderr


def test_usage_errors_exit_2(trace: Path) -> None:
    assert run("ingest").returncode == 2
    assert run("list", str(trace), "--format", "nope").returncode == 2
    assert run("list", str(trace.with_name("missing.tarmac"))).returncode == 2
    r = run("sql", str(trace), "select nonsense from nowhere")
    assert r.returncode == 2 and "SQL" in r.stderr


def test_lenient_mode_keeps_unknown_records(tmp_path: Path) -> None:
    path = tmp_path / "odd.tarmac"
    path.write_text(TRACE + "5 clk WIBBLE something new\n")
    r = run("ingest", str(path))
    assert r.returncode == 0
    assert "1 warning, e.g.:\n" in r.stderr and "kept as text: expected" in r.stderr
    import cputrace

    t = cputrace.open(path)
    assert t.manifest["warnings"]["count"] == 1
    texts = t.sql("select text from events where kind = 'text'").column("text").to_pylist()
    assert texts == ["5 clk WIBBLE something new"]
