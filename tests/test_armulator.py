"""ARMulator Tracer decoder and the shared cycle-word parser."""

from __future__ import annotations

import contextlib
import gzip
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cputrace import inputs
from cputrace.errors import TraceFormatError
from cputrace.formats.armulator import decoder
from cputrace.formats.armulator import sniff as armulator_sniff
from cputrace.formats.armulator.decoder import ArmulatorDecoder
from cputrace.formats.armulator.fetch import FETCH_WINDOW
from cputrace.formats.base import DecodeContext
from cputrace.formats.cycleword import CycleWord, parse_cycle_word
from cputrace.inputs import InputFile, compression_of
from cputrace.model import SCHEMAS

DATA = Path(__file__).parent / "data" / "armulator"
SEED = DATA / "seed_example.trc"
DECODER = ArmulatorDecoder()


def decode_file(path: Path, strict: bool = False) -> tuple[dict[str, list[dict]], DecodeContext]:
    """All rows per table (schemas checked) and the context after decoding `path`."""
    ctx = DecodeContext(strict=strict)
    parts: dict[str, list[pa.Table]] = {name: [] for name in SCHEMAS}
    for batch in DECODER.decode(InputFile(path), ctx):
        for name, table in batch.items():
            assert table.schema == SCHEMAS[name]
            parts[name].append(table)
    rows = {name: pa.concat_tables(t).to_pylist() if t else [] for name, t in parts.items()}
    return rows, ctx


def decode_text(
    tmp_path: Path, text: str | bytes, strict: bool = False
) -> tuple[dict[str, list[dict]], DecodeContext]:
    path = tmp_path / "trace.trc"
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return decode_file(path, strict)


def pick(rows: list[dict], *columns: str) -> list[tuple]:
    return [tuple(row[c] for c in columns) for row in rows]


# --- the seed example (ARM DUI0058D 2.3.2) -------------------------------------------------


def test_seed_example_keeps_its_no_break_spaces() -> None:
    assert "\u00a0" in SEED.read_text(encoding="utf-8")


def test_seed_example_instructions() -> None:
    rows, ctx = decode_file(SEED)
    assert ctx.warnings == 0
    assert pick(rows["instructions"], "seq", "pc", "opcode", "size", "isa", "executed", "src") == [
        (0, 0x8000, 0xE28F8090, 4, "A32", True, 10),
        (1, 0x8004, 0xE898000F, 4, "A32", True, 12),
        (2, 0x8008, 0xE0800008, 4, "A32", True, 25),
        (3, 0x800C, 0xE0811008, 4, "A32", True, 27),
    ]
    assert [row["disasm"] for row in rows["instructions"]] == [
        "ADD      r8,pc,#0x90 ; #0x8098",
        "LDMIA    r8,{r0-r3}",
        "ADD      r0,r0,r8",
        "ADD      r1,r1,r8",
    ]
    assert {row["cpu"] for row in rows["instructions"]} == {0}
    assert all(row["time"] is None for table in rows.values() for row in table)


def test_seed_example_core_cycles() -> None:
    rows, _ = decode_file(SEED)
    core = [row for row in rows["memory"] if row["source"] == "core"]
    assert pick(core, "seq", "op", "size", "addr", "value", "attrs", "src") == [
        (0, "F", 4, 0x8000, 0xE28F8090, "N O", 9),
        (1, "F", 4, 0x8004, 0xE898000F, "N O", 11),
        (1, "R", 8, 0x8098, 0x00007828_00007804, "N", 18),
        (1, "R", 8, 0x80A0, 0x00007840_00007828, "N", 23),
        (2, "F", 4, 0x8008, 0xE0800008, "N O", 24),
        (3, "F", 4, 0x800C, 0xE0811008, "N O", 26),
        # fetched ahead, but no instruction at 0x8010 follows: stays with the one in progress
        (3, "F", 4, 0x8010, 0xE0822008, "N O", 28),
    ]


def test_seed_example_bus_cycles() -> None:
    rows, _ = decode_file(SEED)
    bus = [row for row in rows["memory"] if row["source"] == "bus"]
    assert pick(bus, "seq", "op", "size", "addr", "value", "attrs", "src") == [
        (0, "F", 4, 0xA0000000, 0x00000C1E, "N O", 4),
        (0, "F", 8, 0x8000, 0xE898000F_E28F8090, "N O", 5),
        (0, "F", 8, 0x8008, 0xE0811008_E0800008, "S O", 6),
        (0, "F", 8, 0x8010, 0xE0833008_E0822008, "S O", 7),
        (0, "F", 8, 0x8018, 0xE242C001_E240B001, "S O", 8),
        (1, "F", 4, 0xA0000000, 0x00000C1E, "N O", 13),
        (1, "F", 8, 0x8098, 0x00007828_00007804, "N O", 14),
        (1, "F", 8, 0x8080, 0xE3C44003_10844009, "S O", 15),
        (1, "F", 8, 0x8088, 0x24847004_E2555004, "S O", 16),
        (1, "F", 8, 0x8090, 0xEAFFFFF2_8AFFFFFC, "S O", 17),
        (1, "F", 8, 0x80A0, 0x00007840_00007828, "N O", 19),
        (1, "F", 8, 0x80A8, 0xE1A0F00E_E3A00840, "S O", 20),
        (1, "F", 8, 0x80B0, 0xE28F0014_E92D400C, "S O", 21),
        (1, "F", 8, 0x80B8, 0xE5900004_E5901000, "S O", 22),
    ]
    assert len(rows["memory"]) == 7 + 14
    assert all(row["wide"] is None and row["paddr"] is None for row in rows["memory"])


def test_seed_example_header() -> None:
    rows, ctx = decode_file(SEED)
    assert pick(rows["events"], "seq", "kind", "name", "src") == [
        (0, "header", "date", 1),
        (0, "header", "source", 2),
        (0, "header", "options", 3),
    ]
    assert rows["events"][1]["text"] == "Source: Armul"
    assert ctx.notes["armulator"] == {
        "date": "Thu Aug 9 16:41:36 2001",
        "source": "Armul",
        "options": "Trace Instructions (Disassemble) Trace Memory Cycles",
    }
    assert rows["registers"] == []


# --- record types ---------------------------------------------------------------------------


def test_register_lines(tmp_path: Path) -> None:
    rows, ctx = decode_text(
        tmp_path,
        "R r0=00000001\n"
        "IT 00008000 e28f8090 ADD r8,pc,#0x90\n"
        "R r14=20000060, cpsr=200000d3\n"
        "R r1=2 sp=00001000,R8_fiq=DEADBEEF\n"
        "RCP p15c1=0x00000078\n",
    )
    assert ctx.warnings == 0
    assert pick(rows["registers"], "seq", "reg", "size", "value", "src") == [
        (0, "r0", 4, 1, 1),
        (0, "r14", 4, 0x20000060, 3),
        (0, "cpsr", 4, 0x200000D3, 3),
        (0, "r1", 1, 2, 4),  # size: the bytes printed
        (0, "r13", 4, 0x1000, 4),
        (0, "r8_fiq", 4, 0xDEADBEEF, 4),
        (0, "p15c1", 4, 0x78, 5),
    ]


def test_wide_register_value(tmp_path: Path) -> None:
    rows, _ = decode_text(tmp_path, "R q0=00112233445566778899aabbccddeeff\n")
    (row,) = rows["registers"]
    assert row["value"] is None and row["size"] == 16
    assert row["wide"] == bytes.fromhex("00112233445566778899aabbccddeeff")[::-1]


def test_register_values_up_to_the_size_column(tmp_path: Path) -> None:
    """`size` is uint16: 65,535 bytes are kept, one more is rejected where it is read."""
    digits = "0123456789abcdef" * (65535 * 2 // 16) + "0123456789abcd"
    rows, ctx = decode_text(tmp_path, f"R z0={digits}\n", strict=True)
    (row,) = rows["registers"]
    assert row["size"] == 65535 and row["wide"] == bytes.fromhex(digits)[::-1]
    line = f"R z0={digits}00"
    with pytest.raises(TraceFormatError, match=r":1: expected register values of at most 65,535 bytes"):
        decode_text(tmp_path, line, strict=True)
    rows, ctx = decode_text(tmp_path, line)
    assert ctx.warnings == 1 and rows["registers"] == []
    assert pick(rows["events"], "kind", "text") == [("text", line)]


def test_times_up_to_the_time_column(tmp_path: Path) -> None:
    """`time` is int64: T 7fffffffffffffff is kept, T 8000000000000000 rejected where it is read."""
    rows, _ = decode_text(tmp_path, "T 7fffffffffffffff IT 00008000 e28f8090\n", strict=True)
    assert pick(rows["instructions"], "time", "pc") == [(2**63 - 1, 0x8000)]
    line = "T 8000000000000000 IT 00008000 e28f8090"
    with pytest.raises(TraceFormatError, match=r":1: expected T <hex time below 2\^63>"):
        decode_text(tmp_path, line, strict=True)
    rows, ctx = decode_text(tmp_path, line)
    assert ctx.warnings == 1 and rows["instructions"] == []
    assert pick(rows["events"], "kind", "text") == [("text", line)]


@pytest.mark.parametrize("compressed", [False, True], ids=["mapped", "gzip"])
def test_lines_past_the_cap_are_rejected(tmp_path: Path, monkeypatch, compressed: bool) -> None:
    """A line past inputs.MAX_LINE_BYTES is a text event of its first bytes (an error with
    --strict), cut while reading when it runs past the buffer; the lines after it are whole."""
    monkeypatch.setattr(inputs, "MAX_LINE_BYTES", 64)
    monkeypatch.setattr(decoder, "CHUNK_BYTES", 128)
    long_insn = "IT 00008004 e28f8090 " + "x" * 100  # past the cap, inside a chunk
    long_garbage = "z" * 3000  # past the chunk: cut while reading
    text = "\n".join(["IT 00008000 e28f8090", long_insn, long_garbage, "R r0=00000001"]) + "\n"
    data = gzip.compress(text.encode()) if compressed else text.encode()
    with pytest.raises(TraceFormatError, match=r":2: expected a line of at most 64 bytes"):
        decode_text(tmp_path, data, strict=True)
    rows, ctx = decode_text(tmp_path, data)
    assert ctx.warnings == 2
    assert pick(rows["events"], "kind", "text", "src") == [
        ("text", long_insn[:64], 2),
        ("text", long_garbage[:64], 3),
    ]
    assert pick(rows["instructions"], "pc", "src") == [(0x8000, 1)]
    assert pick(rows["registers"], "reg", "src") == [("r0", 4)]


def test_event_lines(tmp_path: Path) -> None:
    rows, ctx = decode_text(
        tmp_path,
        "IT 00008000 e28f8090\n"
        "E 00000048 00000000 10005\n"
        "E 00008004 00000000 1\n"
        "E 00000008 000000d3 19\n"
        "E 00000018 00000000 7 MyIRQName\n"
        "E 00001000 00000000 a\n"
        "E 00000000 00000000 50005\n"
        "E 00000001 00000002 100003\n",
    )
    assert ctx.warnings == 0
    events = rows["events"]
    assert pick(events, "seq", "kind", "number", "name", "value", "value1") == [
        (0, "ttw", 0x10005, "ITLBWalk", 0x48, 0),
        (0, "exception", 0x1, "Reset", 0x8004, 0),
        (0, "mode_change", 0x19, "ModeChange", 0x8, 0xD3),
        (0, "exception", 0x7, "MyIRQName", 0x18, 0),
        (0, "debug", 0xA, "Watchpoint", 0x1000, 0),
        (0, "sysop", 0x50005, "EndiannessChanged", 0, 0),
        (0, "signal", 0x100003, None, 1, 2),
    ]
    assert events[0]["text"] == "E 00000048 00000000 10005"


def test_timestamp_prefix(tmp_path: Path) -> None:
    rows, ctx = decode_text(
        tmp_path,
        "T 0000abcd MNR4O___ 00008000 E28F8090\n"
        "T 0000abce IT 00008000 e28f8090 ADD r8,pc,#0x90\n"
        "T 0000abcf R r8=00008098\n"
        "T 0000abd0\n"
        "T 0000abd1 E 00000000 00000000 19\n",
    )
    assert ctx.warnings == 0
    assert pick(rows["memory"], "time", "addr") == [(0xABCD, 0x8000)]
    assert pick(rows["instructions"], "time", "pc") == [(0xABCE, 0x8000)]
    assert pick(rows["registers"], "time", "reg") == [(0xABCF, "r8")]
    assert pick(rows["events"], "time", "kind", "value") == [
        (0xABD0, "timestamp", 0xABD0),
        (0xABD1, "mode_change", 0),
    ]


def test_sdt25_upper_case_opcode_with_trailing_space(tmp_path: Path) -> None:
    rows, ctx = decode_text(
        tmp_path, "IT 00008000 E28F8090 ADD r8,pc,#0x90 \r\nIS 00008004 0A000001 \r\n"
    )
    assert ctx.warnings == 0
    assert pick(rows["instructions"], "pc", "opcode", "executed", "isa", "disasm") == [
        (0x8000, 0xE28F8090, True, "A32", "ADD r8,pc,#0x90"),
        (0x8004, 0x0A000001, False, "A32", None),
    ]


def test_thumb_bl_pair(tmp_path: Path) -> None:
    rows, ctx = decode_text(
        tmp_path,
        "MNR2O___ 00008100 F000\n"
        "IT 00008100 f000 (1st instr of BL pair)\n"
        "MNR2O___ 00008102 F802\n"
        "IT 00008102 f802 BL       0x8104\n",
    )
    assert ctx.warnings == 0
    assert pick(rows["instructions"], "seq", "pc", "opcode", "size", "isa", "disasm") == [
        (0, 0x8100, 0xF000, 2, "T32", "(1st instr of BL pair)"),
        (1, 0x8102, 0xF802, 2, "T32", "BL       0x8104"),
    ]
    assert pick(rows["memory"], "seq", "op", "size", "addr") == [
        (0, "F", 2, 0x8100),
        (1, "F", 2, 0x8102),
    ]


def test_wait_and_abort_cycles(tmp_path: Path) -> None:
    rows, ctx = decode_text(
        tmp_path,
        "MNR4O___ 00008000 (wait)\n"
        "MNR4O___ 00008000 E5901000\n"
        "IT 00008000 e5901000 LDR r1,[r0,#0]\n"
        "MNR4____ 00001000 (wait)\n"
        "MNR4____ 00001000 (abort)\n"
        "MNW1____ 00002000 5A (poke)\n",
    )
    assert ctx.warnings == 0
    assert pick(rows["memory"], "seq", "op", "size", "addr", "value", "attrs") == [
        (0, "F", 4, 0x8000, None, "N O wait"),
        (0, "F", 4, 0x8000, 0xE5901000, "N O"),
        (0, "R", 4, 0x1000, None, "N wait"),
        (0, "R", 4, 0x1000, None, "N abort"),
        (0, "W", 1, 0x2000, 0x5A, "N poke"),
    ]


def test_idle_and_coprocessor_cycles(tmp_path: Path) -> None:
    rows, ctx = decode_text(
        tmp_path, "IT 00008000 e28f8090\nMI\nMC\nMIO\nBI\u00a0\nMNW2_L__ 00001000 1234\n"
    )
    assert ctx.warnings == 0
    assert pick(rows["events"], "seq", "kind", "name", "text") == [
        (0, "signal", "idle", "MI"),
        (0, "signal", "coprocessor", "MC"),
        (0, "signal", "instruction_idle", "MIO"),
        (0, "signal", "idle", "BI"),
    ]
    assert pick(rows["memory"], "op", "size", "value", "attrs") == [("W", 2, 0x1234, "N L")]


def test_multi_word_accesses(tmp_path: Path) -> None:
    rows, ctx = decode_text(
        tmp_path,
        "MNR8____ 00001000 11223344 55667788\n"
        "MNW8____ 00001008 0000000A 0000000B\n"
        "MW16 00001010 00000001 00000002 00000003 00000004\n",
    )
    assert ctx.warnings == 0
    assert pick(rows["memory"], "op", "size", "addr", "value") == [
        ("R", 8, 0x1000, 0x55667788_11223344),
        ("W", 8, 0x1008, 0x0000000B_0000000A),
        ("W", 16, 0x1010, None),
    ]
    assert rows["memory"][2]["wide"] == bytes([1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0])


def test_fetch_ahead_goes_to_its_instruction(tmp_path: Path) -> None:
    rows, _ = decode_text(
        tmp_path,
        "MNR4O___ 00008000 E3A00001\n"
        "MNR4O___ 00008004 E3A01002\n"
        "MNR4O___ 00008008 EAFFFFFE\n"
        "IT 00008000 e3a00001\n"
        "BNR4____ 00001000 00000000\n"
        "MNR4O___ 0000800C E3A02003\n"
        "IT 00008004 e3a01002\n"
        "IT 00008008 eafffffe\n"
        "IT 00008100 e1a00000\n",
    )
    assert pick(rows["memory"], "seq", "source", "addr", "src") == [
        (0, "core", 0x8000, 1),
        (0, "bus", 0x1000, 5),
        (0, "core", 0x800C, 6),  # never executed (branch): stays with the instruction in progress
        (1, "core", 0x8004, 2),  # claimed fetches move after the rows of earlier instructions
        (2, "core", 0x8008, 3),
    ]


def test_fetches_claimed_across_a_damaged_instruction_stay_in_seq_order(tmp_path: Path) -> None:
    """The fuzz case: the seed's last lines repeated, one `IT` damaged to `I\x14`.

    The fetch before the damaged line is still pending when the next `IT` at its address
    claims it, and the fetch printed between them stays with the instruction in progress, so
    the claimed rows must move after it (the store refuses rows out of seq order).
    """
    seed = SEED.read_bytes()
    data = seed[:1084] + seed[974:1084] * 1000 + seed[1084:]
    data = data[:22128] + bytes([data[22128] ^ 1 << 6]) + data[22129:]
    rows, ctx = decode_text(tmp_path, data)
    assert ctx.warnings == data.count(b"\nI\x14") + data.count(b"\n,r8")  # the damaged line, the cut one
    memory_lines = [n for n, line in enumerate(data.split(b"\n"), 1) if line[:1] in (b"M", b"B")]
    assert sorted(row["src"] for row in rows["memory"]) == memory_lines
    keys = pick(rows["memory"], "seq", "src")
    assert keys == sorted(keys)  # seq order, input order within an instruction
    fetched = {(row["seq"], row["addr"]) for row in rows["memory"] if row["source"] == "core"}
    assert all((row["seq"], row["pc"]) in fetched for row in rows["instructions"])


def test_fetches_expire_after_the_window(tmp_path: Path) -> None:
    lines = ["IT 00008000 e1a00000", "MNR4O___ 00009000 E1A00000"]
    lines += [f"IT {0x8004 + 4 * i:08X} e1a00000" for i in range(FETCH_WINDOW)]
    lines.append("IT 00009000 e1a00000")
    rows, _ = decode_text(tmp_path, "\n".join(lines))
    assert pick(rows["memory"], "seq", "addr") == [(0, 0x9000)]


@pytest.mark.parametrize("chunk_bytes", [1, 30, 64, 100, 250])
def test_where_batches_end_changes_no_row(tmp_path, monkeypatch, chunk_bytes) -> None:
    """A core that fetches two instructions ahead always has a fetch pending: chunks (a batch
    each) of a few lines give the rows one chunk gives, every table, and stay bounded."""
    lines = ["Date: Thu Aug  9 16:41:36 2001", "MNR4O___ 00008000 E1A00000", "MNR4O___ 00008004 E1A00000"]
    for i in range(40):
        pc = 0x8000 + 4 * i
        lines += [f"MNR4O___ {pc + 8:08X} E1A00000", f"BNR4____ {0x1000 + 4 * i:08X} 00000000"]
        lines.append(f"IT {pc:08X} e1a00000")
    path = tmp_path / "trace.trc"
    path.write_text("\n".join(lines) + "\n")
    whole = list(DECODER.decode(InputFile(path), DecodeContext()))
    monkeypatch.setattr(decoder, "CHUNK_BYTES", chunk_bytes)
    batches = list(DECODER.decode(InputFile(path), DecodeContext()))
    chunk_lines = chunk_bytes // len("IT 00008000 e1a00000\n") + 1  # at most, the shortest lines
    assert len(whole) == 2  # the chunk, then the fetches still pending at the end
    assert len(batches) > len(lines) // (chunk_lines + 2 * FETCH_WINDOW)
    for table in ("instructions", "memory", "events"):
        assert _joined(batches, table).to_pylist() == _joined(whole, table).to_pylist()
    memory = _joined(whole, "memory").to_pylist()
    fetches = [(row["seq"], row["addr"]) for row in memory if row["source"] == "core"]
    executed = [(seq, addr) for seq, addr in fetches if addr < 0x8000 + 4 * 40]  # the last two never ran
    assert executed == [(i, 0x8000 + 4 * i) for i in range(40)]  # each with its instruction


def _joined(batches: list[dict[str, pa.Table]], table: str) -> pa.Table:
    return pa.concat_tables([batch[table] for batch in batches if table in batch]).combine_chunks()


def test_raw_nbsp_byte_crlf_and_compression(tmp_path: Path) -> None:
    body = b"IT\xa000008000\xa0e28f8090\xa0ADD r8,pc,#0x90\r\nMNR4O___\xa000008004\xa0E898000F\r\n"
    path = tmp_path / "trace.trc.gz"
    path.write_bytes(gzip.compress(body))
    rows, ctx = decode_file(path)
    assert ctx.warnings == 0
    assert pick(rows["instructions"], "pc", "disasm") == [(0x8000, "ADD r8,pc,#0x90")]
    assert pick(rows["memory"], "addr", "value") == [(0x8004, 0xE898000F)]


# --- bad input ------------------------------------------------------------------------------

BAD = (
    "IT 00008000 e28f8090\n"
    "this is not a trace line\n"
    "IT 00008004 e28f80\n"
    "MNR4O___ 00008000 E28F8090 E28F8090\n"
    "MNR4O___ zzzz E28F8090\n"
    "R r0\n"
    "E 00000000 1\n"
    "T\n"
    "MNR4____ 00001000\n"
    "MNR4____ 00001000 (oops)\n"
    "MNR8____ 00001000 11223344 556677889\n"
)


def test_bad_lines_are_kept_as_text_in_lenient_mode(tmp_path: Path) -> None:
    rows, ctx = decode_text(tmp_path, BAD)
    bad = BAD.splitlines()[1:]
    assert ctx.warnings == len(bad)
    assert all(str(tmp_path / "trace.trc") in sample for sample in ctx.warning_samples)
    assert pick(rows["events"], "seq", "kind", "text", "src") == [
        (0, "text", text, line) for line, text in enumerate(bad, start=2)
    ]
    assert len(rows["instructions"]) == 1
    assert rows["memory"] == []


def test_lines_that_are_not_utf8_are_rejected_not_altered(tmp_path: Path) -> None:
    """A byte that is not UTF-8 (Latin-1 `\xe9`, a lone continuation byte) is not silently
    replaced in the record's text: its line is kept as a text event with U+FFFD and a warning,
    an error in strict mode naming the line. A raw 0xA0 byte stays a no-break space."""
    lines = SEED.read_bytes().split(b"\n")
    assert lines[9].startswith(b"IT") and lines[11].startswith(b"IT")
    lines[9] = lines[9].replace(b"ADD", b"ADD\xe9")  # line 10: the first instruction
    lines[11] = lines[11] + b" \x80"  # line 12: the second
    lines[24] = lines[24].replace(b"\xc2\xa0", b"\xa0")  # line 25: the third, raw NBSP bytes
    data = b"\n".join(lines)
    rows, ctx = decode_text(tmp_path, data)
    assert ctx.warnings == 2
    path = tmp_path / "trace.trc"
    assert ctx.warning_samples == [f"{path}:{n}: kept as text: expected UTF-8 text" for n in (10, 12)]
    assert pick(rows["instructions"], "pc", "src") == [(0x8008, 25), (0x800C, 27)]
    texts = [(row["kind"], row["src"], row["text"]) for row in rows["events"] if row["kind"] == "text"]
    assert texts == [
        ("text", 10, lines[9].decode("utf-8", "replace").replace("\xa0", " ")),
        ("text", 12, lines[11].decode("utf-8", "replace").replace("\xa0", " ")),
    ]
    assert "\ufffd" in texts[0][2] and "\ufffd" in texts[1][2]
    with pytest.raises(TraceFormatError) as info:
        decode_text(tmp_path, data, strict=True)
    assert (info.value.where, info.value.expected) == ("10", "UTF-8 text")


def test_bad_line_raises_in_strict_mode(tmp_path: Path) -> None:
    with pytest.raises(TraceFormatError) as info:
        decode_text(tmp_path, BAD, strict=True)
    assert info.value.path == str(tmp_path / "trace.trc")
    assert info.value.where == "2"
    assert "trace.trc:2:" in str(info.value)
    assert info.value.got == "this is not a trace line"


# --- sniffing -------------------------------------------------------------------------------


def test_sniff_scores() -> None:
    seed = SEED.read_bytes()
    assert armulator_sniff.sniff(seed) >= 90
    body = b"".join(seed.splitlines(True)[3:])
    assert b"Source" not in body
    assert armulator_sniff.sniff(body) >= 60
    tarmac = (
        b"0 clk IT (0) 00008000 e28f8090 A svc_s : ADD r8,pc,#0x90\n"
        b"0 clk R r8 00008098\n"
        b"1 clk MNR4O__I 00008004 e898000f\n"
        b"10 ns IT (1) 00008004 e898000f A svc_s : LDM r8,{r0-r3}\n"
    )
    assert armulator_sniff.sniff(tarmac) < 30
    assert armulator_sniff.sniff(b"") == 0
    assert armulator_sniff.sniff(bytes(range(256)) * 4) < 30
    assert armulator_sniff.sniff(b"hello\nworld\nIT 00008000 e28f8090\n") < 30


# --- cycle words ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        ("MNR4O___", CycleWord(False, "N", "R", 4, "O", True, False)),
        ("BSR8O___", CycleWord(True, "S", "R", 8, "O", True, False)),
        ("BNR4O___", CycleWord(True, "N", "R", 4, "O", True, False)),
        ("MNR8____", CycleWord(False, "N", "R", 8, "", False, False)),
        ("MI", CycleWord(False, "I", "", 0, "", False, False)),
        ("MC", CycleWord(False, "C", "", 0, "", False, False)),
        ("MIO", CycleWord(False, "I", "", 0, "O", False, False)),
        ("BI", CycleWord(True, "I", "", 0, "", False, False)),
        ("MNW2_L__", CycleWord(False, "N", "W", 2, "L", False, False)),
        ("MAR4O___", CycleWord(False, "A", "R", 4, "O", True, False)),
        ("MNR4O__4", CycleWord(False, "N", "R", 4, "O4", True, False)),
        ("MNR4O__I", CycleWord(False, "N", "R", 4, "OI", True, False)),
        ("MNW4___D", CycleWord(False, "N", "W", 4, "D", False, True)),
        ("MSW4___D", CycleWord(False, "S", "W", 4, "D", False, True)),
        ("MNW4____", CycleWord(False, "N", "W", 4, "", False, False)),
        ("MCW4___R", CycleWord(False, "C", "W", 4, "R", False, False)),
        ("MR4_D", CycleWord(False, "", "R", 4, "D", False, False)),  # only 8-char words
        ("MR2_I", CycleWord(False, "", "R", 2, "I", True, False)),
        ("MR4", CycleWord(False, "", "R", 4, "", False, False)),
        ("MW16", CycleWord(False, "", "W", 16, "", False, False)),
        ("MR8X", CycleWord(False, "", "R", 8, "X", False, False)),
        ("MR1", CycleWord(False, "", "R", 1, "", False, False)),
    ],
)
def test_cycle_words(word: str, expected: CycleWord) -> None:
    assert parse_cycle_word(word) == expected


@pytest.mark.parametrize(
    "word", ["", "M", "B", "IT", "R", "MU4_ADD", "MR3", "MNR4Z___", "XNR4O___", "mnr4o___", "MR4 "]
)
def test_not_cycle_words(word: str) -> None:
    assert parse_cycle_word(word) is None


# --- robustness -----------------------------------------------------------------------------

_TOKENS = st.sampled_from(
    [
        "IT", "IS", "T", "R", "RCP", "E", "MI", "MC", "MIO", "MNR4O___", "BSR8O___", "MNW2_L__",
        "MW16", "Date:", "Source:", "00008000", "e28f8090", "f000", "E28F8090", "0", "ffffffff",
        "r0=1", "cpsr=200000d3,", "p15c1=0x78", "(wait)", "(abort)", "(peek)", "19", "10005",
        "\u00a0", "\t", "=", ",", "(", "1" * 20, "\ufffd",
    ]
)
_LINES = st.lists(
    st.one_of(st.lists(_TOKENS, max_size=6).map(" ".join), st.text(max_size=40)), max_size=12
).map("\n".join)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One file reused by every example (function-scoped tmp_path does not mix with @given)."""
    return tmp_path_factory.mktemp("fuzz") / "fuzz.trc"


def _decode_never_crashes(path: Path, data: bytes) -> None:
    """Lenient decoding never raises; strict decoding raises only TraceFormatError.

    Inputs that look compressed are left out: a broken compressed stream is the input layer's
    TraceFormatError in either mode.
    """
    path.write_bytes(data)
    decode_file(path)  # lenient: never raises
    with contextlib.suppress(TraceFormatError):
        decode_file(path, strict=True)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=300).filter(lambda data: compression_of(data) is None))
def test_arbitrary_bytes(scratch: Path, data: bytes) -> None:
    _decode_never_crashes(scratch, data)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_LINES)
def test_arbitrary_lines(scratch: Path, text: str) -> None:
    _decode_never_crashes(scratch, text.encode("utf-8", "surrogatepass"))
