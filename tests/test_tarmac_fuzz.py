"""Property tests: no input makes the Tarmac decoder crash.

Lenient mode never raises on any bytes except a broken compressed stream (a documented input
error); strict mode raises only TraceFormatError. Inputs are built from real tokens of the
grammar, and from real lines of the reference tool's dialect corpus mutated the ways that
broke decoders (huge numbers, non-UTF-8 bytes, long lines, stray tokens), so the scanner and
parser meet near-misses.
"""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from paths import DATA

from cputrace.errors import TraceFormatError
from cputrace.formats.base import DecodeContext
from cputrace.formats.tarmac.decoder import TarmacDecoder
from cputrace.formats.tarmac.grammar import Rows, TarmacLineParser
from cputrace.formats.tarmac.scan import KIND_INSN, KIND_MEM, KIND_REG, scan_chunk
from cputrace.formats.tarmac.timescale import TimeScale
from cputrace.inputs import InputFile, compression_of
from cputrace.model import SCHEMAS

TOKENS = [
    "0", "12", "clk", "ns", "ps", "us", "1.5us", "cpu0", "cpu1", "IT", "IS", "ES", "IF", "(1)",
    "(00008000:e3a00001)", "00008000", "0000800a:00000000800a_NS", "e3a00001", "4770", "--------",
    "A", "T", "O", "X", "T16", "svc_s", ":", "el3h_s:", "MOV", "r0,#1", "CCFAIL", "R", "r0", "X0",
    "V0<127:64>", "Q0", "(USR)", "00000001", "0123_4567", "xxxxxxxx", "MR4", "MW8", "MR16",
    "MU4_ADD", "MNR4O__I", "R08", "W04", "(ABORTED)", "LD", "ST", "........", "....00##", "S:00",
    "E", "EXC", "[0x00]", "Reset", "CoreEvent_RESET", "BR", "(00000020)", "CACHE", "LINE", "TTW",
    "TLB", "FILL", "DC", "CISW", "TRANSFER", "\xa0", "\t", "é", "\x00",
]  # fmt: skip

line = st.lists(st.sampled_from(TOKENS), min_size=0, max_size=12).map(" ".join)
mutated = st.tuples(line, st.integers(0, 80), st.sampled_from(["", "_", ":", "(", ")", "-", "0"])).map(
    lambda t: t[0][: t[1]] + t[2] + t[0][t[1] :]
)
traces = st.lists(st.one_of(line, mutated), max_size=30).map(lambda ls: "\n".join(ls).encode())


def decode(path: Path, strict: bool) -> int:
    rows = 0
    for batch in TarmacDecoder().decode(InputFile(path), DecodeContext(strict=strict)):
        rows += sum(t.num_rows for t in batch.values())
    return rows


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.one_of(traces, st.binary(max_size=400)))
def test_lenient_never_raises(tmp_path: Path, data: bytes) -> None:
    """Lenient mode keeps every record; only a broken compressed stream is an input error."""
    path = tmp_path / "f.tarmac"
    path.write_bytes(data)
    if compression_of(data) is None:
        decode(path, strict=False)
        return
    try:
        decode(path, strict=False)
    except TraceFormatError as exc:
        assert "f.tarmac:0: expected a readable compressed stream" in str(exc)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=traces)
def test_strict_raises_only_format_errors(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "f.tarmac"
    path.write_bytes(data)
    try:
        decode(path, strict=True)
    except TraceFormatError as exc:
        assert "f.tarmac:" in str(exc)


# --- real lines, mutated -------------------------------------------------------------------

SEED_LINES = [
    line
    for name in ("parsertest.txt", "parsertest-implicit-thumb.txt", "seed_fastmodels_example.tarmac")
    for line in (DATA / "tarmac" / name).read_bytes().splitlines()
    if line.strip() and not line.lstrip().startswith(b"#")
]
HUGE = [
    b"1" + b"0" * 16,  # 17 hex digits
    b"f" * 40,
    b"18446744073709551616",  # 2^64
    b"9223372036854775808",  # 2^63
    b"65536",
    b"9" * 5000,  # past int()'s 4,300 decimal digits
]
NOT_UTF8 = [b"\xff", b"\xc3", b"\xe9", b"\x80\x80", b"\xa0"]
EXTRA_TOKENS = [b"junk", b"ST 200016c0", b"(USR)", b"__C_", b"00", b"A", b":", b"(1)"]
LINE_CAP = 300
_NUMBER = re.compile(rb"[0-9a-fA-F]+")


@st.composite
def mutated_line(draw: st.DrawFn) -> bytes:
    """A real Tarmac line with one of the mutations that broke decoders: a number replaced
    by a huge one, non-UTF-8 bytes, a line past the cap, a token repeated or added."""
    line = draw(st.sampled_from(SEED_LINES))
    tokens = line.split(b" ")
    at = draw(st.integers(0, len(tokens) - 1))
    kind = draw(st.sampled_from(["number", "bytes", "long", "repeat", "extra", "none"]))
    if kind == "number":
        tokens[at] = _NUMBER.sub(lambda _: draw(st.sampled_from(HUGE)), tokens[at], count=1)
    elif kind == "bytes":
        cut = draw(st.integers(0, len(tokens[at])))
        tokens[at] = tokens[at][:cut] + draw(st.sampled_from(NOT_UTF8)) + tokens[at][cut:]
    elif kind == "long":
        tokens.insert(at, tokens[at] * (LINE_CAP // max(1, len(tokens[at])) + 1))
    elif kind == "repeat":
        tokens.insert(at, tokens[at])
    elif kind == "extra":
        tokens.insert(at + 1, draw(st.sampled_from(EXTRA_TOKENS)))
    return b" ".join(tokens)


def decoded(path: Path, strict: bool) -> tuple[dict[str, pa.Table], DecodeContext]:
    """Every table of the decode (schema and contents checked), and its context."""
    source = InputFile(path)
    source.max_line = LINE_CAP
    ctx = DecodeContext(strict=strict)
    parts: dict[str, list[pa.Table]] = {name: [] for name in SCHEMAS}
    for batch in TarmacDecoder().decode(source, ctx):
        for name, table in batch.items():
            assert table.schema == SCHEMAS[name]
            table.validate(full=True)  # valid UTF-8 in every string, offsets, dictionaries
            parts[name].append(table)
    return {name: pa.concat_tables(t) if t else SCHEMAS[name].empty_table() for name, t in parts.items()}, ctx


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(st.one_of(mutated_line(), st.sampled_from(SEED_LINES)), min_size=1, max_size=12))
def test_mutated_real_lines_are_rows_or_rejected_lines(tmp_path: Path, lines: list[bytes]) -> None:
    """Lenient mode gives valid tables, with one warning per rejected line (kept whole as an
    unnamed text event, up to the cap). --strict fails exactly when lenient warned, at the
    first line it warned about, with a TraceFormatError; otherwise it gives the same rows."""
    path = tmp_path / "f.tarmac"
    path.write_bytes(b"\n".join(lines) + b"\n")
    tables, ctx = decoded(path, strict=False)
    events = tables["events"].to_pylist()
    rejected = [e for e in events if e["kind"] == "text" and e["name"] is None]
    assert ctx.warnings == len(rejected)
    for event in rejected:
        original = lines[event["src"] - 1][:LINE_CAP].rstrip(b"\r")
        assert event["text"] == original.decode("utf-8", "replace")
    if ctx.warnings:
        with pytest.raises(TraceFormatError) as error:
            decoded(path, strict=True)
        assert error.value.path == str(path)
        # rows are in seq order, and seq is per core: the first line warned about is the lowest src
        assert error.value.where == str(min(event["src"] for event in rejected))
    else:
        strict, _ = decoded(path, strict=True)
        assert all(strict[name].equals(tables[name]) for name in SCHEMAS)


@settings(max_examples=300, deadline=None)
@given(lines=st.lists(mutated_line(), min_size=1, max_size=12))
def test_scanner_takes_only_what_the_full_grammar_reads_the_same(lines: list[bytes]) -> None:
    """Every mutated line the compiled scanner takes, the full grammar reads with the same
    numbers: no digit is dropped, no number wraps."""
    data = b"\n".join(lines)
    scan = scan_chunk(data, LINE_CAP)
    for kind, table, fields, columns in (
        (KIND_INSN, "instructions", scan.insn, {"pc": "pc", "opcode": "opcode", "size": "size"}),
        (KIND_REG, "registers", scan.reg, {"value": "value", "size": "nbytes"}),
        (KIND_MEM, "memory", scan.mem, {"addr": "addr", "value": "value", "size": "size"}),
    ):
        for k, li in enumerate(fields["line"].tolist()):
            assert scan.kind[li] == kind
            rows = Rows()
            stamp = TarmacLineParser(timescale=TimeScale()).parse(lines[li].decode(), li + 1, rows)
            assert stamp.time is None or stamp.time == scan.time[li]
            assert stamp.cpu is None or stamp.cpu == scan.cpu[li]
            (row,) = getattr(rows, table).to_table().to_pylist()
            for column, field in columns.items():
                assert (row[column] or 0) == fields[field][k], (lines[li], column)
