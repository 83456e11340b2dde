"""Tarmac input at and past the model's limits: numbers out of range, tokens no record has,
bytes that are not UTF-8, lines past the line cap, a flow-only trace without its image.

Each such line is a TraceFormatError naming the file and line with --strict, and otherwise a
`text` event holding the line and one warning, with no other row made of it. The limits are
the model's column types (docs/model.md): 64-bit addresses and values, int64 times, ticks and
event numbers, uint16 cores and register sizes, uint8 access sizes.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from cputrace import inputs
from cputrace.cli import cli
from cputrace.errors import CputraceError, TraceFormatError, UsageError
from cputrace.model import TABLES
from cputrace.store.manifest import table_path

INSN = "IT (1) 00008000 e3a00001 A svc_s : MOV r0,#1"


@pytest.fixture
def tarmac(ingest_text):
    """`ingest_text` as Tarmac: a single odd line is not always sniffed as one."""
    return lambda text, **kwargs: ingest_text(text, format="tarmac", **kwargs)


def tables(store: Path) -> dict[str, list[dict]]:
    return {name: pq.read_table(table_path(store, name)).to_pylist() for name in TABLES}


def rejected_alone(tarmac, line: str | bytes, expected: str) -> None:
    """`line` is an error naming line 1 with --strict, else its text event and one warning."""
    with pytest.raises(TraceFormatError) as error:
        tarmac(line, strict=True)
    assert str(error.value).startswith(f"{error.value.path}:1: expected {expected}")
    result = tarmac(line)
    rows = tables(result.store)
    assert result.manifest["warnings"]["count"] == 1
    assert [(e["kind"], e["src"]) for e in rows["events"]] == [("text", 1)]
    text = line if isinstance(line, str) else line.decode("utf-8", "replace")
    assert rows["events"][0]["text"] == text
    assert rows["instructions"] == rows["registers"] == rows["memory"] == []


# --- numbers ----------------------------------------------------------------------------

BITS64 = "of at most 64 bits"
OTHER = f"a physical or second address {BITS64}"


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        # 17 hex digits: the scanner took 16 of them before (pc 0x1000000000000800, --strict too)
        ("1 clk IT (1) 10000000000008000 e3a00001 A svc_s : MOV r0,#1", f"an instruction address {BITS64}"),
        ("1 clk IT (1) 00008000:10000000000008000 e3a00001 A svc_s : MOV", OTHER),
        ("1 clk ES (10000000000008000:e3a00001) A svc: MOV r0,#1", f"an instruction address {BITS64}"),
        ("1 clk MR4 10000000000001000 00000001", f"a memory address {BITS64}"),
        ("1 clk MR4X 10000000000001000 00000001", f"a memory address {BITS64}"),
        ("1 clk MW4 00001000:10000000000001000 00000001", OTHER),
        ("1 clk LD 10000000000001000 ........ ........ ........ 00000001", f"an address {BITS64}"),
        ("1 clk ST fffffffffffffff8 ........ ........ ........ 00000001", "an address at least 16 bytes"),
        ("1 clk BR (10000000000000000) A", f"a branch target {BITS64}"),
        ("1 clk FD (2) 00008004 10000000000000000 A", f"a branch target {BITS64}"),
        ("1 clk E 10000000000000000 00000003 CoreEvent_SWI", f"an event value {BITS64}"),
        ("1 clk E 00000000 8000000000000000 CoreEvent_SWI", "an event number of at most 63 bits"),
        ("1 clk EXC [0x8000000000000000] Reset", "an exception number of at most 63 bits"),
        ("1 clk EXC [9223372036854775808] Reset", "an exception number of at most 9,223,372,036,854,775,807"),
        ("1 clk FD (9223372036854775808) 00008004 00008100 A", "a tick of at most"),
        # the value was masked to 64 bits
        ("1 clk R DC CISW 00000001:00000000:00000000", f"a system operation argument {BITS64}"),
        ("1 clk MCW4___R (01000250:000000bb) TRANSFER 10000000000000000", f"a transferred value {BITS64}"),
        ("1 clk CACHE ALLOC LINE 10000000000000000 L1D 0x1000", f"a cache line index {BITS64}"),
    ],
)
def test_numbers_over_their_column_are_rejected(tarmac, line: str, expected: str) -> None:
    rejected_alone(tarmac, line, expected)


def test_largest_addresses_are_kept_exactly(tarmac) -> None:
    text = "\n".join(
        [
            "1 clk IT (1) ffffffffffffffff e3a00001 A svc_s : MOV r0,#1",  # scanner
            "2 clk IT (2) 0000ffffffffffffffff e3a00001 A svc_s : MOV r0,#1",  # full grammar
            "3 clk MR8 fffffffffffffff8:ffffffffffffffff ffffffffffffffff",
            "4 clk ST fffffffffffffff0 ff...... ........ ........ ........",
            "5 clk EXC [0x7fffffffffffffff] Reset",
        ]
    )
    result = tarmac(text, strict=True)
    rows = tables(result.store)
    assert [i["pc"] for i in rows["instructions"]] == [2**64 - 1, 2**64 - 1]
    assert [(m["addr"], m["paddr"], m["value"]) for m in rows["memory"]] == [
        (2**64 - 8, 2**64 - 1, 2**64 - 1),
        (2**64 - 1, None, 0xFF),
    ]
    assert rows["events"][0]["number"] == 2**63 - 1


@pytest.mark.parametrize(
    "line",
    [
        "9223372036854775808 clk " + INSN,  # scanner-shaped
        "9223372036854775808 clk R r0 00000001 (USR) __C_ extra",  # full grammar
        "1" * 5000 + " clk " + INSN,  # int() refuses 4,300 decimal digits
        "1." + "0" * 5000 + "1 ns " + INSN,
    ],
)
def test_times_past_int64_are_rejected(tarmac, line: str) -> None:
    rejected_alone(tarmac, line, "a time that fits the store's 64-bit time")


def test_largest_time_is_kept_exactly(tarmac) -> None:
    result = tarmac(f"9223372036854775807 clk {INSN}", strict=True)
    assert tables(result.store)["instructions"][0]["time"] == 2**63 - 1


def test_times_that_overflow_once_converted_are_rejected(tarmac) -> None:
    """The first unit (ps) is the stored one: 10^16 ns is 10^19 ps, past int64."""
    lines = [
        f"1 ps {INSN}",  # the scanner takes all four lines
        f"10000000000000000 ns {INSN}",
        "10000000000000000 ns R r0 00000001",
        f"9223372036854775 ns {INSN}",  # 9,223,372,036,854,775,000 ps still fits
        "10000000000000000 ns E DebugEvent_x 00000000",  # the full grammar's conversion
    ]
    with pytest.raises(TraceFormatError, match=r"t\.tarmac:2: expected a time that fits .* time in ps"):
        tarmac("\n".join(lines), strict=True)
    result = tarmac("\n".join(lines))
    rows = tables(result.store)
    assert result.manifest["warnings"]["count"] == 3
    assert [(i["src"], i["time"]) for i in rows["instructions"]] == [(1, 1), (4, 9223372036854775000)]
    assert rows["registers"] == []
    assert [(e["src"], e["kind"], e["text"]) for e in rows["events"]] == [
        (2, "text", lines[1]),
        (3, "text", lines[2]),
        (5, "text", lines[4]),
    ]


@pytest.mark.parametrize(
    ("core", "expected"),
    [
        ("cpu65536", "a core number of at most 65,535"),
        ("cpu2147483648", "a core number of at most 65,535"),
        ("cpu" + "9" * 5000, "a core number of at most 65,535"),
    ],
)
def test_cores_past_uint16_are_rejected(tarmac, core: str, expected: str) -> None:
    rejected_alone(tarmac, f"1 clk {core} {INSN}", expected)


def test_largest_core_is_kept(tarmac) -> None:
    result = tarmac(f"1 clk cpu65535 {INSN}\n2 clk cpu65535 R r0 00000001", strict=True)
    rows = tables(result.store)
    assert [i["cpu"] for i in rows["instructions"]] == [65535]
    assert [(r["cpu"], r["reg"], r["value"]) for r in rows["registers"]] == [(65535, "r0", 1)]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("1 clk R z0 " + "1" * (2 * 65536), "a register value of at most 65,535 bytes"),
        ("1 clk R V0<99999999999:0> 00", "a register bit of at most 524,279"),  # was a huge bytes()
        ("1 clk R V0<63:64> 00", "a byte-aligned register bit range"),
        ("1 clk R V0<62:0> 00", "a byte-aligned register bit range"),
        # was bytes(size): memory exhausted
        ("1 clk MU99999999999_ADD 00001000 00000005", "an access size in bytes of at most 255"),
        ("1 clk MU0_ADD 00001000 00", "an access size of at least one byte"),
        ("1 clk BW999D__N IWRCB_ OWRCB_ 3 80001000 78", "an access size in bytes of at most 255"),
    ],
)
def test_sizes_past_their_column_are_rejected(tarmac, line: str, expected: str) -> None:
    rejected_alone(tarmac, line, expected)


def test_largest_register_value_is_kept(tarmac) -> None:
    digits = "0123456789abcdef" * (65535 * 2 // 16) + "0123456789abcd"
    result = tarmac(f"1 clk R z0 {digits}", strict=True)
    (row,) = tables(result.store)["registers"]
    assert row["size"] == 65535 and row["wide"] == bytes.fromhex(digits)[::-1]


def test_memory_size_past_the_scanner_is_not_wrapped(tarmac) -> None:
    """`MR` and 19 nines wrapped to a negative size in the scanner and was stored as garbage."""
    with pytest.raises(TraceFormatError, match=r":1: expected a Tarmac record"):
        tarmac("1 clk MR9999999999999999999 00001000 00", strict=True)


@pytest.mark.parametrize("line", ["1 clk cpu\u0663 " + INSN, "1 clk FD (\u00b2) 00008004 00008100 A"])
def test_non_ascii_digits_are_not_numbers(tarmac, line: str) -> None:
    """`\\d` took the Arabic-Indic 3 as core 3; `str.isdigit` took `²`, which int() refuses."""
    with pytest.raises(TraceFormatError, match=r"t\.tarmac:1: expected"):
        tarmac(line, strict=True)


def test_exception_numbers_with_leading_zeros(tarmac) -> None:
    """`int('01', 0)` raised ValueError."""
    result = tarmac("1 clk EXC [01] Reset\n2 clk EXC [0x0a] IRQ", strict=True)
    assert [e["number"] for e in tables(result.store)["events"]] == [1, 10]


# --- tokens no record has (--strict accounts for every token) ---------------------------


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        # the reference tool's issue #24: a register line run into a store was r1 = 0, the
        # store lost
        ("R R1 00   ST 200016c0 ........ ........ ........ 00000000", "nothing after a register value"),
        ("1 clk R r0 00000001 junk", "nothing after a register value"),
        ("1 clk R r0 00000001 (USR) (MSP) 7", "nothing after a register value"),
        ("1 clk MR4 00001000 00000001 junk", "nothing after a memory access's data"),
        ("1 clk MR4 00001000 00000001 (ABORTED)", "nothing after a memory access's data"),
        ("1 clk MR1 00001000 000001", "at most 1 bytes of data for a 1-byte access"),
        ("1 clk MNW4____ (zz) 05011000 00000003", "a parenthesised (address:serial) pair in hex"),
        ("1 clk IT (zz) 00008000 e3a00001 A svc_s : MOV r0,#1", "a tick or address in hex or decimal"),
        ("1 clk IT (1 00008000 e3a00001 A svc_s : MOV r0,#1", "a parenthesised tick or address"),
        ("1 clk IT (1) 00008000zz e3a00001 A svc_s : MOV r0,#1", "an instruction address and opcode"),
        ("1 clk IT (1) 00008000,zz e3a00001 A svc_s : MOV r0,#1", "an instruction address and opcode"),
        ("1 clk FD (x1) 00008004 00008100 A", "FD tick as a decimal number in parentheses"),
        ("1 clk FI (1) 00008004 00008100 A extra", "at most an instruction set letter after an FI target"),
        ("1 clk FD (1) 00008004 00008100 Q", "at most an instruction set letter after an FD target"),
        ("1 clk BR (00000080) A extra", "at most an instruction set letter after a branch target"),
        ("1 clk BR (00000080", "a branch target address in parentheses"),
        ("1 clk R DC CISW 00000000:00000000 extra", "R DC <operation> <argument in hex>"),
        ("1 clk R TLBI ALLE3 zz", "R TLBI <operation> <argument in hex>"),  # the value was null
        ("1 clk MCW4___R (01000250:000000bb) TRANSFER 00000000 7", "TRANSFER and the value"),
        ("1 clk E 00008200 svc 00000010 11 00000019 CoreEvent_ModeChange", "E <value> [<mode>]"),
        ("1 clk E 00008000 00000019 Mode Change", "E <value> [<mode>]"),  # number null, 0x19 value1
        # a '.0' cell passed the column check and raised ValueError in bytes.fromhex
        ("1 clk LD 00001000 ........ ........ ........ .0.0....", "LD byte cells each"),
        ("1 clk ST 00001000 ........ ........ ........ 0#0#....", "ST byte cells each"),
    ],
)
def test_tokens_no_record_has_are_rejected(tarmac, line: str, expected: str) -> None:
    rejected_alone(tarmac, line, expected)


def test_annotations_producers_print_are_kept(tarmac) -> None:
    """Trailing text that real producers print (the reference tool's dialect corpus)."""
    text = "\n".join(
        [
            "6000017 cs R cpsr 20000000 __C_",
            "6000018 cs R r13 20001fff (MSP)",
            "6000019 cs R R1 (USR) 00000800",
            "6000020 cs W04 X ffffffbdc3c15c30 010c010b",
            "6000021 cs MR4 dfdfdfcf (ABORTED)",
            "6000022 cs MNW4____ (00000050:000000a8) 05011000 00000003",
            "6000023 cs IT (23) 0000815c:00000000815c_NS,00000000815e_NS f7ffef76 T hyp_n : BLX {pc}-0x110",
            "6000024 cs LD 00000300  ........ ........ 00000800 ........     0000000300    NM ISH INC",
            "6000025 cs E DebugEvent_dummy to reset timestamp for next two lines",
        ]
    )
    result = tarmac(text, strict=True)
    rows = tables(result.store)
    assert [(r["reg"], r["value"]) for r in rows["registers"]] == [
        ("cpsr", 0x20000000),
        ("r13_msp", 0x20001FFF),
        ("r1", 0x800),
    ]
    assert [(m["addr"], m["attrs"]) for m in rows["memory"]] == [
        (0xFFFFFFBDC3C15C30, "X"),
        (0xDFDFDFCF, "ABORTED"),
        (0x05011000, None),
        (0x304, "NM ISH INC"),  # LDR r1,{pc}+0x1a0 ; 0x304
    ]
    assert [i["pc"] for i in rows["instructions"]] == [0x815C]
    assert rows["events"][0]["text"].endswith("for next two lines")


# --- bytes that are not UTF-8 -----------------------------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        b"1 clk IT (1) 00008000 e3a00001 A sv\xffc_s : MOV r0,#1",  # the mode crashed the dictionary
        b"1 clk IT (1) 00008000 e3a00001 A \xc3 : MOV r0,#1",
        b"1 clk IT (1) 00008000 e3a00001 A svc_s : MOV r0,#1 ; \xe9",  # disassembly
        b"1 clk R r\xff0 00000001",
    ],
)
def test_lines_that_are_not_utf8_are_rejected(tarmac, line: bytes) -> None:
    rejected_alone(tarmac, line, "UTF-8 text")


def test_utf8_beyond_ascii_is_kept(tarmac) -> None:
    """The scanner leaves non-ASCII modes and disassembly to the full grammar, which keeps them."""
    text = (
        "1 clk IT (1) 00008000 e3a00001 A svc_s : MOV r0,#1 ; é\n"
        "2 clk IT (2) 00008004 e3a00001 A mødé : MOV"
    )
    rows = tables(tarmac(text, strict=True).store)
    assert [(i["mode"], i["disasm"]) for i in rows["instructions"]] == [
        ("svc_s", "MOV r0,#1 ; é"),
        ("mødé", "MOV"),
    ]


# --- lines past the cap -----------------------------------------------------------------

CAP = 100


@pytest.fixture
def small_cap(monkeypatch) -> None:
    monkeypatch.setattr(inputs, "MAX_LINE_BYTES", CAP)
    monkeypatch.setattr(inputs, "CHUNK_BYTES", 256)


@pytest.mark.parametrize("compressed", [False, True], ids=["mapped", "gzip"])
def test_lines_past_the_cap_are_cut_and_rejected(small_cap, tarmac, compressed: bool) -> None:
    long_disasm = f"2 clk {INSN} ; " + "x" * 1000  # an instruction line: the scanner's shape
    long_garbage = "z" * 5000  # runs past the chunk and the cap: cut while reading
    lines = [f"1 clk {INSN}", long_disasm, long_garbage, f"4 clk {INSN}", "5 clk R r0 00000001"]
    data = "\n".join(lines).encode()
    name = "t.tarmac.gz" if compressed else "t.tarmac"
    if compressed:
        data = gzip.compress(data)
    with pytest.raises(TraceFormatError, match=rf":2: expected a line of at most {CAP} bytes"):
        tarmac(data, name=name, strict=True)
    result = tarmac(data, name=name)
    rows = tables(result.store)
    assert result.manifest["warnings"]["count"] == 2
    events = [(e["src"], e["text"]) for e in rows["events"]]
    assert events == [(2, long_disasm[:CAP]), (3, long_garbage[:CAP])]
    assert [(i["src"], i["time"]) for i in rows["instructions"]] == [(1, 1), (4, 4)]
    assert [(r["src"], r["seq"]) for r in rows["registers"]] == [(5, 1)]


def test_a_line_at_the_cap_is_kept(small_cap, tarmac) -> None:
    line = f"1 clk {INSN} ; "
    line += "x" * (CAP - len(line))
    assert len(line) == CAP
    rows = tables(tarmac(line, strict=True).store)
    assert rows["instructions"][0]["disasm"].endswith("x")


# --- a flow-only trace without its image -------------------------------------------------

FLOW = (
    "0 clk E 00008020 00000001 CoreEvent_Reset\n"
    "14 clk FD (14) 00008008 00008068 A\n"
    "20 clk FI (20) 00008070 0000800c A\n"
)


def test_flow_only_trace_without_image_warns(tarmac) -> None:
    result = tarmac(FLOW)
    assert result.manifest["counts"]["instructions"] == 0
    assert result.manifest["warnings"]["count"] == 1
    (sample,) = result.manifest["warnings"]["samples"]
    assert "/t.tarmac:2: a flow-only trace (FD/FI records" in sample
    assert "--image" in sample
    # the records are all kept
    assert [e["kind"] for e in tables(result.store)["events"]] == ["exception", "branch", "branch"]


def test_flow_only_trace_without_image_is_an_error_with_strict(tarmac) -> None:
    with pytest.raises(CputraceError, match=r"t\.tarmac:2: a flow-only trace .*--image"):
        tarmac(FLOW, strict=True)


def test_flow_records_beside_instructions_need_no_image(tarmac) -> None:
    result = tarmac(f"1 clk {INSN}\n" + FLOW, strict=True)
    assert result.manifest["warnings"]["count"] == 0


# --- options ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("option", "value", "allowed"),
    [
        ("default_isa", "0xfffffffffffffffff", "one of A32, T32, A64, SPARC"),
        ("default_isa", "T32EE", "one of A32, T32, A64, SPARC"),
        ("default_isa", "", "one of A32, T32, A64, SPARC"),
        ("byte_order", "middle", "one of little, big"),
    ],
)
def test_a_bad_option_value_is_bad_usage_naming_option_value_and_what_is_allowed(
    tarmac, tmp_path: Path, option: str, value: str, allowed: str
) -> None:
    """A UsageError (exit 2 on the command line), not a KeyError from the ISA table."""
    with pytest.raises(UsageError) as error:
        tarmac(INSN, options={option: value})
    assert str(error.value) == f"option {option}: expected {allowed}, got {value!r}"
    path = tmp_path / "t.tarmac"
    args = ["ingest", str(path), "--option", f"{option}={value}", "-o", str(tmp_path / "o")]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2 and f"option {option}: expected {allowed}" in result.output, result.output
    assert not (tmp_path / "o").exists()


def test_option_choices_are_read_in_any_case(tarmac) -> None:
    """`default_isa=a64` is A64 (as `--default-isa A64`), `byte_order=BIG` big-endian."""
    line = "1 clk cpu0 IT (1) 00008000 d503201f svc_s : NOP"  # no ISA letter: the default ISA
    result = tarmac(line, options={"default_isa": "a64", "byte_order": "BIG"}, strict=True)
    assert [r["isa"] for r in tables(result.store)["instructions"]] == ["A64"]
