"""The ARMulator decoder's compiled scanner against the line parser alone (the full grammar).

The scanner is a fast path: whatever lines it is given, and wherever chunks end, the rows,
warnings and errors must be those of the line parser reading every line.
"""

from __future__ import annotations

import tracemalloc
from pathlib import Path
from unittest import mock

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cputrace import inputs
from cputrace.errors import TraceFormatError
from cputrace.formats.armulator import decoder
from cputrace.formats.armulator.decoder import ArmulatorDecoder
from cputrace.formats.armulator.scan import (
    KIND_BLANK,
    KIND_INSN,
    KIND_MEM,
    KIND_REG,
    KIND_SLOW,
    scan_chunk,
    scanned_chunk,
)
from cputrace.formats.base import DecodeContext
from cputrace.inputs import InputFile
from cputrace.model import SCHEMAS

SEED = Path(__file__).parent / "data" / "armulator" / "seed_example.trc"


def decoded(path: Path, compiled: bool, strict: bool) -> tuple[dict[str, list[dict]] | str, DecodeContext]:
    """Every table's rows (dictionaries read as strings), or the error in strict mode."""
    ctx = DecodeContext(strict=strict)
    parts: dict[str, list[pa.Table]] = {name: [] for name in SCHEMAS}
    try:
        for batch in ArmulatorDecoder(compiled).decode(InputFile(path), ctx):
            for name, table in batch.items():
                assert table.schema == SCHEMAS[name]
                parts[name].append(table)
    except TraceFormatError as error:
        return str(error), ctx
    rows = {name: pa.concat_tables(tables).to_pylist() if tables else [] for name, tables in parts.items()}
    return rows, ctx


def assert_same_as_line_parser(path: Path, chunk_bytes: int) -> None:
    for strict in (False, True):
        want, want_ctx = decoded(path, compiled=False, strict=strict)
        with mock.patch.object(decoder, "CHUNK_BYTES", chunk_bytes):
            got, got_ctx = decoded(path, compiled=True, strict=strict)
        assert got == want
        assert (got_ctx.warnings, got_ctx.warning_samples, got_ctx.notes) == (
            want_ctx.warnings, want_ctx.warning_samples, want_ctx.notes,
        )  # fmt: skip


# --- lines, valid and damaged ---------------------------------------------------------------

def _mostly(good: st.SearchStrategy[bytes], bad: st.SearchStrategy[bytes]) -> st.SearchStrategy[bytes]:
    """`good` about nine times in ten: damage is rare enough that most lines stay whole."""
    return st.integers(0, 9).flatmap(lambda pick: bad if pick == 9 else good)


def _hex(most: int, least: int = 1) -> st.SearchStrategy[bytes]:
    return st.text("0123456789abcdefABCDEF", min_size=least, max_size=most).map(str.encode)


_SPACE = _mostly(
    st.sampled_from([b" ", b" ", b"  ", b"\t", b"\xa0", b"\xc2\xa0", b" \r "]),
    st.sampled_from([b"\x0b", b"\x1c", b"\x85", b"\xc2\x85", b"\xe3\x80\x80", b""]),
)
_EDGES = st.sampled_from([b"7FFFFFFFFFFFFFFF", b"8000000000000000", b"FFFFFFFFFFFFFFFF", b"00000000"])
_DAMAGED = st.sampled_from([b"0x10", b"-1", b"g", b"1_0", b"\xe9", b"\xff", b"\x00", b"(wait)"])
_NUMBER = _mostly(_mostly(_hex(8), _EDGES), st.one_of(_hex(20), _DAMAGED))
_WORD = _mostly(
    st.sampled_from([b"MNR4O___", b"BNR8O___", b"BSR8O___", b"MNR8____", b"MNW2_L__", b"MSW1____"]),
    st.sampled_from(
        [
            b"MNR4OI", b"MNR16___", b"MNR4O___4", b"MR4", b"MI", b"MIO", b"MC", b"BI", b"MXR4", b"MNR3____",
            b"M", b"B", b"MNR4O__\x00", b"MNR4O___\xa0", b"MNR4O____", b"mNR4O___", b"MI______", b"BIO",
            b"MCO", b"MI_O", b"MIX", b"MNI4",
        ]
    ),
)  # fmt: skip
_DISASM = _mostly(
    st.text(st.characters(codec="ascii", exclude_characters="\n"), max_size=20).map(str.encode),
    st.text(st.characters(codec="utf-8", exclude_characters="\n"), max_size=20).map(str.encode),
)
_NAME = _mostly(
    st.sampled_from([b"r0", b"r13", b"sp", b"cpsr", b"SPSR_svc", b"x1", b"p15c1", b"R0"]),
    st.sampled_from([b"0r", b"_a", b"r0=", b"", b"r\xe9"]),
)


@st.composite
def _joined(draw: st.DrawFn, parts: list[bytes]) -> bytes:
    """Some of `parts` (all, mostly) separated by whitespace."""
    kept = draw(st.one_of(st.just(len(parts)), st.integers(1, len(parts))))
    line = b""
    for part in parts[:kept]:
        line += (draw(_SPACE) if line else b"") + part
    return line


@st.composite
def _time(draw: st.DrawFn) -> bytes:
    if not draw(st.booleans()):
        return b""
    return b"T" + draw(_SPACE) + draw(_mostly(_hex(16), _NUMBER)) + draw(_SPACE)


@st.composite
def _instruction(draw: st.DrawFn) -> bytes:
    executed = draw(_mostly(st.sampled_from([b"IT", b"IS"]), st.sampled_from([b"It", b"I", b"ITS"])))
    digits = st.sampled_from([4, 8]).flatmap(lambda n: _hex(n, n))
    opcode = draw(_mostly(digits, _NUMBER))
    parts = [executed, draw(_NUMBER), opcode, *draw(st.lists(_DISASM, max_size=2))]
    return draw(_time()) + draw(_joined(parts))


@st.composite
def _access(draw: st.DrawFn) -> bytes:
    parts = [draw(_WORD), draw(_NUMBER), *draw(st.lists(_NUMBER, min_size=1, max_size=3))]
    suffix = _mostly(
        st.sampled_from([b"(wait)", b"(abort)", b"(peek)", b"(poke)", b"(WAIT)", b"(Abort)"]),
        st.sampled_from([b"(x)", b"()", b"(", b"(wait", b"(wait))", b"(aborts)", b"(pee)", b"(w\xe9it)"]),
    )
    parts += draw(st.lists(suffix, max_size=2))
    return draw(_time()) + draw(_joined(parts))


@st.composite
def _registers(draw: st.DrawFn) -> bytes:
    line = draw(_mostly(st.sampled_from([b"R", b"RCP"]), st.sampled_from([b"RC", b"r", b"R0"])))
    line += draw(_SPACE)
    for index in range(draw(st.integers(1, 3))):
        if index:
            line += draw(_mostly(st.sampled_from([b", ", b",", b" ", b" , "]), st.sampled_from([b",,", b""])))
        line += draw(_NAME) + draw(st.sampled_from([b"=", b" = ", b"= "]))
        line += draw(st.sampled_from([b"", b"", b"0x", b"0X"])) + draw(_mostly(_hex(16), _NUMBER))
    return draw(_time()) + line + draw(st.sampled_from([b"", b",", b" ,", b" "]))


@st.composite
def _idle(draw: st.DrawFn) -> bytes:
    word = draw(st.sampled_from([b"MI", b"MIO", b"MC", b"BI", b"MCO", b"BI__", b"MI_O", b"MIOO", b"MIx"]))
    return draw(_time()) + draw(_joined([word, *draw(st.lists(_NUMBER | _DISASM, max_size=2))]))


_EVENT_NUMBER = _mostly(
    st.sampled_from([b"7", b"19", b"10001", b"40003", b"50002", b"60001", b"7001", b"100000", b"FFFFFFFF"]),
    _NUMBER,
)


@st.composite
def _event(draw: st.DrawFn) -> bytes:
    word = draw(_mostly(st.just(b"E"), st.sampled_from([b"e", b"EE", b"E0"])))
    parts = [word, draw(_NUMBER), draw(_NUMBER), draw(_EVENT_NUMBER), *draw(st.lists(_DISASM, max_size=2))]
    return draw(_time()) + draw(_joined(parts))


_OTHER = st.one_of(
    st.sampled_from(
        [
            b"", b"   ", b"\t", b"\xa0", b"Date: Thu Aug  9 16:41:36 2001", b"Source: Armul", b"T 10",
            b"E 00008000 00000000 7 IRQ", b"E 0 0 10001", b"MI", b"MIO", b"\x00",
        ]
    ),
    st.binary(max_size=12).filter(lambda data: b"\n" not in data),
)  # fmt: skip
_LINE = st.one_of(
    _instruction(), _access(), _registers(), _idle(), _event(), _instruction(), _access(), _OTHER
)
_TRACE = st.tuples(st.lists(_LINE, max_size=30), st.sampled_from([b"\n", b"\r\n"]), st.booleans()).map(
    lambda drawn: drawn[1].join(drawn[0]) + (drawn[1] if drawn[2] else b"")
)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One file reused by every example (function-scoped tmp_path does not mix with @given)."""
    return tmp_path_factory.mktemp("scan") / "trace.trc"


_EDGE_CASES = [
    b"MNR4O__\x00 00008000 E1A00000\nMNR4O___\x0b00008000 E1A00000\nIT\x1c00008000 e1a00000\n",
    b"T 7FFFFFFFFFFFFFFF IT 8000 e28f8090 X\nT 8000000000000000 IT 8000 e28f8090\nT 10\nT 10 MI 0\n",
    b"IT 10000000000000000 e28f8090\nIT FFFFFFFFFFFFFFFF e28f\nIT 8000 e28f80901\nIT 8000 e28f809\n",
    b"MNR4____ 0 FFFFFFFFFFFFFFFF\nMNR4____ 0 1FFFFFFFFFFFFFFFF\nMNR8____ 0 123456789 1\nMNR4____ 0 1 2\n",
    b"R r0=1, r1=0x2,cpsr=600000D3\nR r0 = 1 , r1 = 2,\nRCP c1=0x\nR r0=1,,r1=2\nR r0=1a=2\n",
    b"R sp=0102030405\nR x1=00000000000000001\nR r0=0X1 R1=2\nR\tr0=1\t,\tr1=2\t,\n",
    b"IT\xa000008000\xc2\xa0e28f8090 ADD\xc2\xa0r0\xa0\r\nIT 8000 e28f8090 \xc3\xa0\nIT 8000 e28f8090 \xe9\n",
    b"MNR4O___ 8004 1\nMNR4O___ 8000 2\nIT 8000 0000\nMNR4O___ 8008 3\nBNR4O___ 8008 4\nIT 8004 0\nIT 8008 0",
    b"MNR4____ 8000 (WAIT)\nMNR4____ 8000 1 (abort)\nBNR8O___ 8000 1 2 (Peek)\nMNR4____ 8000 (wait) (wait)\n",
    b"MNR4____ 8000 (wait) 1\nMNR4____ 8000 (wait)x\nMNR4____ 8000 ()\nMNR4____ 8000 (abort\nMNR4 0 (\n",
    b"MNR4____ 8000 123456789 (poke)\nMNR2____ 8000 1 2 (wait)\nMNR4____ 8000 1 2 3\nMNR4____ (wait)\n",
    b"E 8000 0 7\nE 8000 0 7 My  IRQ \nT 1 E FFFFFFFFFFFFFFFF 1 FFFFFFFF\nE 0 0 123456789\nE 0 0\n",
    b"E 0 0 40003 x\n",
    b"E 0 0 10009\nE 0 0 20001\nE\t0\xc2\xa00\xa050007\xa0\nE 0 0 7x\nE 0 10000000000000000 7\nE 0 0 0\n",
    b"MI\nMIO 0 x\n  MC\t\xc2\xa0junk \r\nT 10 BI\nT 10  MI  8000 1\nMI_O\nMIX\nMIO__\xa0\nMNR4___\nMI\x0b\n",
]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_TRACE, st.sampled_from([1, 16, 64, 1 << 20]))
def test_compiled_path_gives_the_line_parsers_rows(scratch: Path, data: bytes, chunk_bytes: int) -> None:
    scratch.write_bytes(data)
    assert_same_as_line_parser(scratch, chunk_bytes)


@pytest.mark.parametrize("chunk_bytes", [1, 40, 1 << 20])
@pytest.mark.parametrize("data", _EDGE_CASES)
def test_edge_cases_of_the_fast_path(tmp_path: Path, data: bytes, chunk_bytes: int) -> None:
    """Lines at the edges of what the scanner takes: control characters Python reads as
    whitespace, a NUL in a cycle word, times and numbers at 2^63 and 64 bits, no-break spaces."""
    path = tmp_path / "trace.trc"
    path.write_bytes(data)
    assert_same_as_line_parser(path, chunk_bytes)


def test_the_scanner_takes_the_common_lines_with_no_break_spaces() -> None:
    """The seed's fields are separated by UTF-8 no-break spaces: its instruction, access and
    register lines are all the scanner's, its headers the line parser's."""
    data = SEED.read_bytes() + b"R\xc2\xa0r0=00000001,\xa0cpsr=600000D3\n"
    scan = scan_chunk(data, inputs.MAX_LINE_BYTES)
    expected = {b"IT": KIND_INSN, b"MN": KIND_MEM, b"BN": KIND_MEM, b"BS": KIND_MEM, b"R\xc2": KIND_REG}
    kinds = [
        next((kind for start, kind in expected.items() if line.startswith(start)), KIND_SLOW)
        for line in data.split(b"\n")[:-1]
    ]
    assert scan.kind.tolist() == kinds
    assert KIND_BLANK not in kinds and kinds.count(KIND_SLOW) == 3  # Date, Source, Options


def test_a_scanned_chunk_keeps_its_rows_not_the_scanners_records() -> None:
    """The scanner's records take several times a chunk's bytes while it scans; what a scanned
    chunk keeps for the main thread (its rows, the lines left to the line parser) is what is
    used, so the chunks scanned ahead stay small (Python's and Arrow's allocations counted)."""
    data = SEED.read_bytes() * 2000  # 2 MiB
    scanned_chunk(data[:4096], inputs.MAX_LINE_BYTES, 0)  # loaded (compiled) before counting
    tracemalloc.start()
    arrow_before = pa.total_allocated_bytes()
    try:
        scanned = scanned_chunk(data, inputs.MAX_LINE_BYTES, 0)
        kept = tracemalloc.get_traced_memory()[0] + pa.total_allocated_bytes() - arrow_before
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert scanned.rows["instructions"].num_rows == sum(line.startswith(b"IT") for line in data.split(b"\n"))
    assert peak > 4 * len(data)  # the scanner's records, while it scans
    assert kept < 3 * len(data)  # the scan and its rows: over 6 times


def test_the_scanner_takes_idle_cycles_and_suffixed_accesses() -> None:
    """Idle and coprocessor cycle lines and accesses with a `(wait)`-like suffix, frequent in
    traces of memory cycles with idles and waits, are the scanner's; other words and shapes the
    line parser's."""
    lines = [
        b"MI", b"MIO", b"T 0A MC  x", b"BI", b"MNR4____ 00008000 (wait)", b"BNR4O___ 8000 E1A00000 (ABORT)",
        b"MNR4____ 00008000 (wait) (wait)", b"MNR4____ 8000 (wait)1", b"MIX", b"MNR4O___",
    ]  # fmt: skip
    scanned = scanned_chunk(b"\n".join(lines) + b"\n", inputs.MAX_LINE_BYTES, 0)
    assert scanned.left.tolist() == [6, 7, 8, 9]
    events = scanned.rows["events"]
    assert events.column("name").to_pylist() == ["idle", "instruction_idle", "coprocessor", "idle"]
    assert events.column("text").to_pylist() == ["MI", "MIO", "T 0A MC  x", "BI"]
    memory = scanned.rows["memory"]
    assert memory.column("attrs").to_pylist() == ["N wait", "N O abort"]
    assert memory.column("value").to_pylist() == [None, 0xE1A00000]


def test_the_scanner_takes_event_lines() -> None:
    """`E` lines are the scanner's, their kind and name from the Tracer's numbers unless a name
    is printed; a number of more than 8 digits the line parser's."""
    lines = [b"E 00008000 00000000 7", b"T 1 E 0 0 10009", b"E 0 0 7  My  IRQ", b"E 0 0 123456789", b"E 0 0"]
    scanned = scanned_chunk(b"\n".join(lines), inputs.MAX_LINE_BYTES, 0)
    assert scanned.left.tolist() == [3, 4]
    events = scanned.rows["events"]
    assert events.column("kind").to_pylist() == ["exception", "cache", "exception"]
    assert events.column("name").to_pylist() == ["IRQ", None, "My  IRQ"]
    assert events.column("text").to_pylist() == [line.decode() for line in lines[:3]]
    assert events.column("time").to_pylist() == [None, 1, None]
