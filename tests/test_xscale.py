"""XScale trace buffers: encoded from recorded runs, decoded back to the part of the run they cover."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from paths import DATA, shared
from xscale_encoder import Buffer, Truth, as_openocd, as_text, covered, encode, fill_once_series, wrap_buffer

import cputrace
from cputrace.cli import cli
from cputrace.errors import CputraceError, TraceFormatError, UsageError
from cputrace.formats import sniff
from cputrace.formats.base import DecodeContext
from cputrace.formats.xscale.buffers import TraceBuffer, Unread, read_buffers
from cputrace.formats.xscale.decoder import XscaleDecoder
from cputrace.formats.xscale.messages import Kind, parse_messages
from cputrace.image import load_elf, load_image_specs
from cputrace.inputs import InputFile, compression_of
from cputrace.isa import BlockCache
from cputrace.model import SCHEMAS, Flag

CORPUS = Path(__file__).parent / "corpus"
ARMV5 = CORPUS / "calls-armv5te.elf"
THUMB5 = CORPUS / "calls-armv5te-thumb.elf"
SAMPLES = [DATA / "xscale" / "calls-armv5te-wrap.txt", DATA / "xscale" / "calls-armv5te-fill.dump"]


@pytest.fixture(scope="module")
def armv5(tmp_path_factory) -> tuple[Truth, BlockCache, Path]:
    """calls-armv5te recorded on an XScale (PXA270) model: A32 and Thumb, an SWI at low vectors."""
    record = pytest.importorskip("cputrace.record")
    trace = tmp_path_factory.mktemp("xscale") / "calls-armv5te.tarmac"
    record.record(ARMV5, trace, cpu="pxa270")
    return Truth.of_trace(cputrace.open(trace)), BlockCache(load_elf(ARMV5)), ARMV5


@pytest.fixture(scope="module")
def thumb5(tmp_path_factory) -> tuple[Truth, BlockCache, Path]:
    """calls-armv5te-thumb recorded on a PXA270 model: Thumb code calling through BL/BLX pairs."""
    record = pytest.importorskip("cputrace.record")
    trace = tmp_path_factory.mktemp("xscale") / "calls-armv5te-thumb.tarmac"
    record.record(THUMB5, trace, cpu="pxa270")
    return Truth.of_trace(cputrace.open(trace)), BlockCache(load_elf(THUMB5)), THUMB5


@pytest.fixture(scope="module")
def exceptions32(tmp_path_factory) -> tuple[Truth, BlockCache, Path]:
    """exceptions-a32: SWI, undefined instruction and BKPT (prefetch abort) from A32 and T32,
    vectors at VBAR 0x8000, returns into either state."""
    record = pytest.importorskip("cputrace.record")
    elf = CORPUS / "exceptions-a32.elf"
    trace = tmp_path_factory.mktemp("xscale") / "exceptions-a32.tarmac"
    record.record(elf, trace)
    return Truth.of_trace(cputrace.open(trace)), BlockCache(load_elf(elf)), elf


@pytest.fixture(scope="module")
def calculator32(open_input) -> tuple[Truth, BlockCache, Path]:
    samples = "tarmac-trace-utilities", "samples"
    elf = shared(*samples, "calculator-aarch32.elf")
    truth = Truth.of_trace(open_input(shared(*samples, "calculator-aarch32-fastmodel.tarmac")))
    return truth, BlockCache(load_elf(elf)), elf


def decode(path: Path, elf: Path | None, images: tuple[str, ...] = (), **options) -> dict[str, pa.Table]:
    image = load_image_specs([*images, *([] if elf is None else [elf])])
    return decode_in(path, DecodeContext(options=options, image=image))


def decode_in(path: Path, ctx: DecodeContext) -> dict[str, pa.Table]:
    """The tables of decoding `path` in `ctx`, each checked to be in seq order as it came."""
    batches = list(XscaleDecoder().decode(InputFile(path), ctx))
    tables = {
        name: pa.concat_tables([b[name] for b in batches if name in b] + [SCHEMAS[name].empty_table()])
        for name in ("instructions", "events")
    }
    for table in tables.values():
        seq = table.column("seq").to_pylist()
        assert seq == sorted(seq), "rows out of seq order"
    return tables


def write_text(tmp_path: Path, buffers: list[Buffer]) -> Path:
    path = tmp_path / "trace.txt"
    path.write_text(as_text(buffers))
    return path


def events_named(tables: dict[str, pa.Table], name: str) -> list[dict]:
    return [e for e in tables["events"].to_pylist() if e["name"] == name]


def assert_tail(tables: dict[str, pa.Table], truth: Truth, first: int, stop: int) -> None:
    """The decoded instructions are the run from `first` to `stop`, in order, numbered from 0."""
    instructions = tables["instructions"]
    assert instructions.column("pc").to_pylist() == truth.pc[first:stop]
    assert instructions.column("isa").to_pylist() == [isa.name for isa in truth.isa[first:stop]]
    assert instructions.column("seq").to_pylist() == list(range(stop - first))
    executed = instructions.column("executed").to_pylist()
    ran = [not flags & Flag.CANCELLED for flags in instructions.column("flags").to_pylist()]
    want = truth.executed[first:stop]
    assert all(got is None or got == w or not r for got, w, r in zip(executed, want, ran, strict=True))


def anchor_of(buffer: Buffer, truth: Truth, blocks: BlockCache, elf: Path, tables) -> int:
    """Where the decoded run must start: after the unanchored instructions the gap counts (as
    the core counts them: a BL/BLX pair is two)."""
    gaps = events_named(tables, "unanchored")
    assert len(gaps) == 1
    return truth.after_counted(buffer.covered, gaps[0]["value"])


@pytest.mark.parametrize("checkpoints", [0, 1, 2])
@pytest.mark.parametrize("stop", [300, 2_000, 9_001, 21_990])
def test_wrapped_buffers_give_the_tail_of_the_run_back(armv5, tmp_path, stop, checkpoints) -> None:
    truth, blocks, elf = armv5
    buffer = wrap_buffer(truth, blocks, stop, checkpoints=checkpoints)
    tables = decode(write_text(tmp_path, [buffer]), elf)
    first = anchor_of(buffer, truth, blocks, elf, tables)
    assert first < stop
    assert_tail(tables, truth, first, stop)
    assert events_named(tables, "debug_entry")[0]["value"] == truth.pc[stop]
    gaps = [e["name"] for e in tables["events"].to_pylist() if e["kind"] == "trace_gap"]
    assert gaps == ["unanchored"]
    marked = int(parse_messages(TraceBuffer(buffer.data, range(256))).messages["checkpointed"].sum())
    assert len(events_named(tables, "checkpoint")) == marked
    assert marked == checkpoints or stop == 300  # a short run: no room for them


def test_a_checkpoint_anchors_before_the_first_indirect_address(armv5, tmp_path) -> None:
    truth, blocks, elf = armv5
    stop = 2_000
    plain = decode(write_text(tmp_path, [wrap_buffer(truth, blocks, stop)]), elf)
    buffer = wrap_buffer(truth, blocks, stop, checkpoints=2)
    checked = decode(write_text(tmp_path, [buffer]), elf)
    assert checked["instructions"].num_rows >= plain["instructions"].num_rows
    registers = {e["number"]: e["value"] for e in events_named(checked, "checkpoint")}
    assert registers == {0: buffer.chkpt0, 1: buffer.chkpt1}


def test_exceptions_enter_their_vectors_and_the_walk_goes_on_there(exceptions32, tmp_path) -> None:
    truth, blocks, elf = exceptions32
    stop = len(truth.pc) - 1
    buffer = wrap_buffer(truth, blocks, stop)
    tables = decode(write_text(tmp_path, [buffer]), elf, vector_base="0x8000")
    first = anchor_of(buffer, truth, blocks, elf, tables)
    assert_tail(tables, truth, first, stop)
    exceptions = [e for e in tables["events"].to_pylist() if e["kind"] == "exception"]
    taken = {i: v for i, v in truth.exceptions.items() if i >= first - 1}  # the anchor's: before seq 0
    expected = [(max(i - first, 0), 0x8000 + v) for i, v in taken.items()]
    assert [(e["seq"], e["value"]) for e in exceptions] == expected
    assert {e["name"] for e in exceptions} == {"swi", "undefined", "prefetch_abort"}
    instructions = tables["instructions"]
    rows = instructions.select(["seq", "flags"]).to_pylist()
    cancelled = [r["seq"] + first for r in rows if r["flags"] & Flag.CANCELLED]
    assert cancelled == [i for i, v in taken.items() if v == 0xC]  # the prefetch abort's instruction: not run
    assert "T32" in instructions.column("isa").to_pylist()  # SVC, UDF and returns in Thumb state


def test_high_vectors_move_the_exception_entry(armv5, tmp_path) -> None:
    truth, blocks, elf = armv5
    (swi,) = [i for i, v in truth.exceptions.items() if v == 8]
    tables = decode(write_text(tmp_path, [wrap_buffer(truth, blocks, swi + 40)]), elf, high_vectors="true")
    (exception,) = [e for e in tables["events"].to_pylist() if e["kind"] == "exception"]
    assert exception["value"] == 0xFFFF0008
    gaps = [e for e in tables["events"].to_pylist() if e["name"] == "no_code"]
    assert gaps and gaps[0]["value"] == 0xFFFF0008  # the image has no code there: a gap, no guess


def test_thumb_state_from_bit_0_or_from_mapping_symbols(armv5, tmp_path) -> None:
    truth, blocks, elf = armv5
    stop = next(i for i in range(len(truth.pc)) if truth.isa[i].name == "T32") + 200
    for thumb_bit in (True, False):
        buffer = wrap_buffer(truth, blocks, stop, thumb_bit=thumb_bit)
        tables = decode(write_text(tmp_path, [buffer]), elf)
        assert "T32" in tables["instructions"].column("isa").to_pylist()
        assert_tail(tables, truth, anchor_of(buffer, truth, blocks, elf, tables), stop)


def test_a_fill_once_series_decodes_as_one_run(armv5, tmp_path) -> None:
    truth, blocks, elf = armv5
    series = fill_once_series(truth, blocks, 5, 6)
    for form, path in (("text", write_text(tmp_path, series)), ("openocd", tmp_path / "dump.bin")):
        if form == "openocd":
            path.write_bytes(as_openocd(series))
        tables = decode(path, elf)
        gaps = events_named(tables, "unanchored")
        assert [g["value"] for g in gaps] == [1]  # only the debugger's return into the first buffer
        assert_tail(tables, truth, series[0].covered, series[-1].stop)
        assert [e["value"] for e in events_named(tables, "debug_entry")] == [b.pc for b in series]


def test_a_buffer_that_has_not_wrapped_starts_after_its_zero_fill(armv5, tmp_path) -> None:
    truth, blocks, elf = armv5
    start = 1_000
    branches = (
        i for i in range(start, len(truth.pc)) if truth.taken(i, blocks) and truth.indirect(i, blocks)
    )
    stop = next(branches) + 30
    buffer = wrap_buffer(truth, blocks, stop, start=start)
    assert buffer.data.startswith(b"\0" * 5)
    parsed = parse_messages(TraceBuffer(buffer.data, range(256)))
    assert not parsed.wrapped and parsed.fill == len(buffer.data) - len(buffer.data.lstrip(b"\0"))
    tables = decode(write_text(tmp_path, [buffer]), elf)
    assert_tail(tables, truth, anchor_of(buffer, truth, blocks, elf, tables), stop)
    assert buffer.covered == start


@pytest.mark.parametrize("stop", [5_000, 60_000])
def test_a_fast_model_run_is_recovered_from_a_wrapped_buffer(calculator32, tmp_path, stop) -> None:
    truth, blocks, elf = calculator32
    stop = min(stop, len(truth.pc) - 1)
    buffer = wrap_buffer(truth, blocks, stop, checkpoints=2)
    tables = decode(write_text(tmp_path, [buffer]), elf)
    assert_tail(tables, truth, anchor_of(buffer, truth, blocks, elf, tables), stop)


def test_the_raw_form_takes_its_registers_from_options(armv5, tmp_path) -> None:
    truth, blocks, elf = armv5
    buffer = wrap_buffer(truth, blocks, 3_000, checkpoints=1)
    path = tmp_path / "buffer.bin"
    path.write_bytes(buffer.data)
    tables = decode(path, elf, xscale_chkpt0=hex(buffer.chkpt0), xscale_pc=hex(buffer.pc))
    assert_tail(tables, truth, anchor_of(buffer, truth, blocks, elf, tables), 3_000)
    assert events_named(tables, "checkpoint")[0]["value"] == buffer.chkpt0


def test_the_committed_samples_are_the_encoders_and_decode_to_the_run(armv5) -> None:
    truth, blocks, elf = armv5
    wrap = wrap_buffer(truth, blocks, 9_001, checkpoints=2)
    series = fill_once_series(truth, blocks, 5, 3)
    assert (DATA / "xscale" / "calls-armv5te-wrap.txt").read_text() == as_text([wrap])
    assert (DATA / "xscale" / "calls-armv5te-fill.dump").read_bytes() == as_openocd(series)
    tables = decode(DATA / "xscale" / "calls-armv5te-fill.dump", elf)
    assert_tail(tables, truth, series[0].covered, series[-1].stop)
    assert [e["name"] for e in tables["events"].to_pylist() if e["kind"] == "exception"] == ["swi"]


def test_ingest_and_sniffing(armv5, tmp_path) -> None:
    truth, blocks, elf = armv5
    series = fill_once_series(truth, blocks, 5, 2)
    text = write_text(tmp_path, series)
    dump = tmp_path / "dump.bin"
    dump.write_bytes(as_openocd(series))
    for path in (text, dump):
        assert sniff(path.read_bytes(), str(path)).name == "xscale"
        trace = cputrace.open(path, images=[elf])
        pcs = trace.sql("SELECT pc FROM instructions ORDER BY seq").column("pc").to_pylist()
        assert pcs == truth.pc[series[0].covered : series[-1].stop]


def test_the_cli_takes_decoder_options(armv5, tmp_path) -> None:
    truth, blocks, elf = armv5
    buffer = wrap_buffer(truth, blocks, 3_000, checkpoints=1)
    raw = tmp_path / "buffer.bin"
    raw.write_bytes(buffer.data)
    store = tmp_path / "raw.ctrace"
    args = ["ingest", str(raw), "--format", "xscale", "--image", str(elf), "-o", str(store)]
    options = ["--option", f"xscale_chkpt0={buffer.chkpt0:#x}", "--option", f"xscale_pc={buffer.pc:#x}"]
    result = CliRunner().invoke(cli, args + options)
    assert result.exit_code == 0, result.output
    trace = cputrace.open(store)
    assert trace.sql("SELECT max(pc) AS pc FROM instructions").to_pylist()[0]["pc"] is not None
    entry = trace.sql("SELECT value FROM events WHERE name = 'debug_entry'").to_pylist()
    assert entry == [{"value": buffer.pc}]
    assert CliRunner().invoke(cli, [*args, "--option", "high_vectors"]).exit_code == 2
    perhaps = CliRunner().invoke(cli, [*args, "--option", "high_vectors=perhaps"])
    assert perhaps.exit_code == 2, perhaps.output  # bad usage, as a bad value of any option is
    expected = "true or false (yes/no, on/off, 1/0)"
    assert f"option high_vectors: expected {expected}, got 'perhaps'" in perhaps.output


def test_without_an_image_the_error_says_to_give_one(armv5, tmp_path) -> None:
    truth, blocks, _ = armv5
    with pytest.raises(CputraceError, match="--image"):
        decode(write_text(tmp_path, [wrap_buffer(truth, blocks, 500)]), None)


NOP = 0xE1A00000  # mov r0, r0


@pytest.mark.parametrize(("vector", "cancelled"), [(6, []), (7, []), (4, [0x1008])])
def test_interrupts_and_data_aborts_count_the_instructions_before_them(tmp_path, vector, cancelled) -> None:
    """IRQ, FIQ and data abort: the count includes the last instruction (which an abort cancels)."""
    words = {
        0x18: 0xEA000038,
        0x1C: 0xEA000037,
        0x10: 0xEA00003A,
        0x100: 0xE25EF004,
    }  # b 0x100; subs pc, lr, #4
    words |= {0x1000 + 4 * i: NOP for i in range(5)}
    image = bytearray(0x1014)
    for address, word in words.items():
        image[address : address + 4] = word.to_bytes(4, "little")
    (tmp_path / "image.bin").write_bytes(image)
    messages = [
        *(0x1000).to_bytes(4, "big"), 0x90,  # the anchor: resume at 0x1000
        vector << 4 | 3,  # three instructions, then the exception
        0x80,  # b 0x100 at the vector
        *(0x100C).to_bytes(4, "big"), 0x90,  # subs pc, lr, #4 back to 0x100c
    ]  # fmt: skip
    buffer = Buffer(bytes(messages), pc=0x1010)
    tables = decode(write_text(tmp_path, [buffer]), None, images=[f"{tmp_path / 'image.bin'}@0"])
    instructions = tables["instructions"].to_pylist()
    assert [r["pc"] for r in instructions] == [0x1000, 0x1004, 0x1008, 4 * vector, 0x100, 0x100C]
    assert [r["pc"] for r in instructions if r["flags"] & Flag.CANCELLED] == cancelled
    (exception,) = [e for e in tables["events"].to_pylist() if e["kind"] == "exception"]
    assert (exception["seq"], exception["value"], exception["value1"]) == (2, 4 * vector, 3)


# -- corrupt buffers: reported where they are, turned into gaps --------------------------------


def test_a_bad_message_type_drops_the_older_bytes_and_says_where(armv5, tmp_path) -> None:
    truth, blocks, elf = armv5
    stop = 4_000
    buffer = wrap_buffer(truth, blocks, stop)
    entries = encode(truth, blocks, 0, stop)
    # the message byte 100 entries before the end becomes type 1010 (reserved)
    index = len(buffer.data) - sum(len(e.data) for e in entries[-100:]) + len(entries[-100].data) - 1
    corrupt = bytearray(buffer.data)
    corrupt[index] = 0xA3
    tables = decode(write_text(tmp_path, [Buffer(bytes(corrupt), pc=buffer.pc)]), elf)
    (bad,) = events_named(tables, "bad_message")
    assert bad["number"] == index and f"byte {index}" in bad["text"]
    covered = entries[-99].first
    assert_tail(tables, truth, covered + events_named(tables, "unanchored")[0]["value"], stop)


def test_strict_mode_stops_at_a_bad_message(tmp_path) -> None:
    path = tmp_path / "b.bin"
    path.write_bytes(bytes([0x80, 0xB1, 0x81]))
    ctx = DecodeContext(strict=True, image=load_elf(ARMV5))
    with pytest.raises(TraceFormatError, match="byte 1"):
        list(XscaleDecoder().decode(InputFile(path), ctx))


def test_inconsistent_checkpoints_are_reported_and_not_used(armv5, tmp_path) -> None:
    truth, blocks, elf = armv5
    buffer = wrap_buffer(truth, blocks, 2_000, checkpoints=2)
    wrong = Buffer(buffer.data, buffer.chkpt0 + 8, buffer.chkpt1 + 4, buffer.pc)
    tables = decode(write_text(tmp_path, [wrong]), elf)
    mismatches = events_named(tables, "checkpoint_mismatch")
    assert mismatches and all("byte" in m["text"] for m in mismatches)


@pytest.mark.parametrize("stop", [2_000, 9_001, 21_990])
def test_three_checkpointed_messages_map_the_newest_two(armv5, tmp_path, stop) -> None:
    """A wrapped buffer can still hold a checkpointed message whose register two newer
    checkpoints have overwritten (the manual: one is CHKPT0's, of two the older is CHKPT1's)."""
    truth, blocks, elf = armv5
    buffer = wrap_buffer(truth, blocks, stop, checkpoints=3)
    assert parse_messages(TraceBuffer(buffer.data, range(256))).messages["checkpointed"].sum() == 3
    tables = decode(write_text(tmp_path, [buffer]), elf)
    assert not events_named(tables, "checkpoint_mismatch")
    checkpoints = events_named(tables, "checkpoint")
    assert [(e["number"], e["value"]) for e in checkpoints] == [(1, buffer.chkpt1), (0, buffer.chkpt0)]
    assert_tail(tables, truth, anchor_of(buffer, truth, blocks, elf, tables), stop)


def test_with_three_checkpointed_messages_a_wrong_register_is_still_reported(armv5, tmp_path) -> None:
    truth, blocks, elf = armv5
    buffer = wrap_buffer(truth, blocks, 9_001, checkpoints=3)
    wrong = Buffer(buffer.data, buffer.chkpt0 + 0x40, buffer.chkpt1, buffer.pc)
    tables = decode(write_text(tmp_path, [wrong]), elf)
    (mismatch,) = events_named(tables, "checkpoint_mismatch")
    assert "CHKPT0" in mismatch["text"]


def test_without_the_debug_pc_the_pending_run_is_reported_left_out(armv5, tmp_path) -> None:
    truth, blocks, elf = armv5
    buffer = wrap_buffer(truth, blocks, 2_000)
    path = tmp_path / "buffer.bin"
    path.write_bytes(buffer.data)
    tables = decode(path, elf)
    assert events_named(tables, "no_debug_pc")
    pending = buffer.stop - encode(truth, blocks, 0, buffer.stop)[-1].end
    first = anchor_of(buffer, truth, blocks, elf, tables)
    assert_tail(tables, truth, first, buffer.stop - pending)


def test_an_address_outside_the_image_is_a_gap_with_its_byte(armv5, tmp_path) -> None:
    truth, blocks, elf = armv5
    stop = 2_000
    buffer = wrap_buffer(truth, blocks, stop)
    parsed = parse_messages(TraceBuffer(buffer.data, range(256)))
    last = int(parsed.messages["index"][parsed.messages["kind"] == Kind.INDIRECT][-1])
    corrupt = bytearray(buffer.data)
    corrupt[last - 4 : last] = (0x7000000).to_bytes(4, "big")
    tables = decode(write_text(tmp_path, [Buffer(bytes(corrupt), pc=buffer.pc)]), elf)
    (gap,) = events_named(tables, "no_code")
    assert gap["value"] == 0x7000000
    assert gap["src"] is not None


def test_an_unreachable_debug_pc_is_a_gap(armv5, tmp_path) -> None:
    truth, blocks, elf = armv5
    buffer = wrap_buffer(truth, blocks, 2_000)
    tables = decode(write_text(tmp_path, [Buffer(buffer.data, pc=0x123456)]), elf)
    assert events_named(tables, "debug_pc_unreached")
    assert not events_named(tables, "debug_entry")


def test_bad_text_and_dump_inputs_name_the_line_or_byte(tmp_path) -> None:
    strict = DecodeContext(strict=True, options={"xscale_input": "text"})
    with pytest.raises(TraceFormatError, match="line 3"):
        list(read_buffers(b"chkpt0=0\npc=0x100\n80 81 zz\n", "t", strict))
    dump = bytes(12) + (300).to_bytes(4, "big")
    with pytest.raises(TraceFormatError, match="byte 12"):
        list(read_buffers(dump, "d", DecodeContext(strict=True, options={"xscale_input": "openocd"})))


# -- Thumb BL/BLX pairs: two instructions to an ARMv5 core, one row ------------------------------


def test_a_thumb_program_is_decoded_whole_from_a_fill_once_series(thumb5, tmp_path) -> None:
    """The messages count each BL/BLX pair as two instructions, and a roll-over can end
    between its halves; the decode is the recorded run, every instruction."""
    truth, blocks, elf = thumb5
    entries = encode(truth, blocks, 5, len(truth.pc) - 1)
    straddling = [e for e in entries if e.data == b"\xff" and e.end in truth.pairs]
    assert len(truth.pairs) > 100 and straddling  # what this test is about
    series = fill_once_series(truth, blocks, 5, 40)
    assert series[-1].stop == entries[-1].end  # the buffers hold every message
    series = series[: next(i for i, b in enumerate(series) if b.stop == entries[-1].end) + 1]
    for path in (write_text(tmp_path, series), tmp_path / "dump.bin"):
        if path.suffix == ".bin":
            path.write_bytes(as_openocd(series))
        tables = decode(path, elf)
        assert_tail(tables, truth, series[0].covered, series[-1].stop)
        gaps = [(e["name"], e["value"]) for e in tables["events"].to_pylist() if e["kind"] == "trace_gap"]
        assert gaps == [("unanchored", 1)]  # only the debugger's return into the first buffer
        rows = tables["instructions"].select(["isa", "size"]).to_pylist()
        assert sum(row == {"isa": "T32", "size": 4} for row in rows) == len(truth.pairs)  # a pair: one row


@pytest.mark.parametrize("stop", [3_700, 9_000, 15_321, 28_000])
def test_wrapped_buffers_of_a_thumb_program_give_the_tail_of_the_run(thumb5, tmp_path, stop) -> None:
    truth, blocks, elf = thumb5
    buffer = wrap_buffer(truth, blocks, stop, checkpoints=2)
    tables = decode(write_text(tmp_path, [buffer]), elf)
    first = anchor_of(buffer, truth, blocks, elf, tables)
    assert any(first <= pair < stop for pair in truth.pairs)
    assert_tail(tables, truth, first, stop)
    assert [e["name"] for e in tables["events"].to_pylist() if e["kind"] == "trace_gap"] == ["unanchored"]


# -- options, damaged and cut inputs ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("option", "value"),
    [("xscale_pc", -1), ("xscale_pc", "0x100000000"), ("xscale_chkpt0", 1 << 32), ("xscale_chkpt1", "-4"),
     ("vector_base", "-0x20")],
)  # fmt: skip
def test_register_options_must_fit_32_bits(tmp_path, option, value) -> None:
    raw = tmp_path / "buffer.bin"
    raw.write_bytes(bytes([0x80, 0x81]))
    with pytest.raises(UsageError, match=f"option {option}: expected a number from 0 to 0xffffffff"):
        decode(raw, ARMV5, **{option: value})
    args = ["ingest", str(raw), "--format", "xscale", "--image", str(ARMV5), "-o", str(tmp_path / "s.ctrace")]
    result = CliRunner().invoke(cli, [*args, "--option", f"{option}={value}"])
    assert result.exit_code == 2 and f"option {option}" in result.output and "Traceback" not in result.output


@pytest.mark.parametrize(
    ("option", "value"), [("xscale_input", "trace32"), ("xscale_input", ""), ("xscale_pc", "pc")]
)
def test_other_bad_option_values_are_usage_errors(tmp_path, option, value) -> None:
    raw = tmp_path / "buffer.bin"
    raw.write_bytes(bytes([0x80, 0x81]))
    with pytest.raises(UsageError, match=f"option {option}: expected .*, got '{value}'$"):
        decode(raw, ARMV5, **{option: value})
    upper, lower = decode(raw, ARMV5, xscale_input="RAW"), decode(raw, ARMV5, xscale_input="raw")
    assert upper["events"].equals(lower["events"])  # a form is named in any case


def test_a_text_buffer_with_a_bad_line_is_read_around_it(armv5, tmp_path) -> None:
    """Sniffed and decoded as text (not taken for a raw buffer): strict names the line; lenient
    keeps it as a text event with a warning and decodes the bytes newer than it."""
    truth, blocks, elf = armv5
    stop, k = 9_001, 10  # the k-th line of 16 bytes goes bad (lines 1-4: a comment and the registers)
    buffer = wrap_buffer(truth, blocks, stop, checkpoints=2)
    lines = as_text([buffer]).splitlines()
    bad = lines[4 + k][:6] + "zz" + lines[4 + k][8:]
    lines[4 + k] = bad
    path = tmp_path / "bad.txt"
    path.write_text("\n".join(lines) + "\n")
    assert sniff(path.read_bytes(), str(path)).name == "xscale"
    with pytest.raises(TraceFormatError, match=f":line {5 + k}: expected hex bytes"):
        decode_in(path, DecodeContext(strict=True, image=load_elf(elf)))
    ctx = DecodeContext(image=load_elf(elf))
    tables = decode_in(path, ctx)
    assert ctx.warnings == 1 and f"line {5 + k}" in ctx.warning_samples[0]
    (text,) = [e for e in tables["events"].to_pylist() if e["kind"] == "text"]
    assert (text["text"], text["src"]) == (bad, 5 + k)
    (dropped,) = events_named(tables, "dropped_bytes")
    assert dropped["value"] == 16 * k
    entries = encode(truth, blocks, 0, stop)
    kept_from = sum(len(e.data) for e in entries) - 256 + 16 * (k + 1)
    unanchored = events_named(tables, "unanchored")[0]["value"]
    first = truth.after_counted(covered(entries, kept_from, stop), unanchored)
    assert_tail(tables, truth, first, stop)


def test_a_second_buffer_anchored_on_a_checkpoint_after_a_bad_line_keeps_seq_order(tmp_path) -> None:
    """The fuzz case: the wrap sample twice, a line of the second copy bad. What lenient
    reading left out is at the second buffer's first instruction; so is its anchor's
    checkpoint, which used to go to the first buffer's last instruction, after them."""
    sample = (DATA / "xscale" / "calls-armv5te-wrap.txt").read_text().splitlines()
    first = decode(DATA / "xscale" / "calls-armv5te-wrap.txt", ARMV5)["instructions"].num_rows
    lines = sample + sample[1:]  # registers after bytes start the next buffer
    bad = len(sample) + 13  # line 33: the 10th line of bytes of the second buffer
    lines[bad - 1] = lines[bad - 1][:6] + "zz" + lines[bad - 1][8:]
    path = tmp_path / "two.txt"
    path.write_text("\n".join(lines) + "\n")
    tables = decode(path, ARMV5)  # checks every table's seq order
    second = [e for e in tables["events"].to_pylist() if e["seq"] >= first]
    assert [(e["seq"], e["kind"], e["name"], e["src"]) for e in second[:4]] == [
        (first, "text", None, bad),
        (first, "trace_gap", "dropped_bytes", len(sample) + 4),
        (first, "trace_gap", "unanchored", bad + 2),
        (first, "debug", "checkpoint", bad + 2),
    ]
    assert second[3]["value"] == int(sample[1].split("=")[1], 16)  # CHKPT0
    assert tables["instructions"].column("seq").to_pylist()[first] == first


def test_a_buffer_that_places_no_instruction_keeps_its_events_after_the_bytes_left_out(tmp_path) -> None:
    """The fuzz case: the fill dump with 32 bytes of its second record cut out. The record's
    newest entry words are misread; the bytes older than a malformed one are left out (an
    event at the buffer's first seq), and what is left anchors at a vector where the image
    has no code, so the buffer places no instruction. Its events at the instruction before
    them (the end's `debug_pc_unreached`) used to go to the first buffer's last one, behind
    the left-out bytes' event."""
    sample = DATA / "xscale" / "calls-armv5te-fill.dump"
    data = sample.read_bytes()
    path = tmp_path / "cut.dump"
    path.write_bytes(data[:1095] + data[1127:])
    intact = decode(sample, ARMV5)
    count = events_named(intact, "debug_entry")[0]["seq"] + 1  # the first buffer's instructions
    tables = decode(path, ARMV5)  # checks every table's seq order
    pcs = tables["instructions"].column("pc").to_pylist()
    assert pcs[:count] == intact["instructions"].column("pc").to_pylist()[:count]
    dropped = [e for e in events_named(tables, "dropped_bytes") if e["text"].startswith("buffer 2:")]
    unreached = [e for e in events_named(tables, "debug_pc_unreached") if e["text"].startswith("buffer 2:")]
    assert [e["seq"] for e in dropped + unreached] == [count, count]
    next_one = tables["instructions"].column("src").to_pylist()[count]
    assert next_one > unreached[0]["src"]  # buffer 2 placed no instruction


def test_a_truncated_dump_keeps_its_whole_records(armv5, tmp_path) -> None:
    truth, blocks, elf = armv5
    series = fill_once_series(truth, blocks, 5, 3)
    data = (DATA / "xscale" / "calls-armv5te-fill.dump").read_bytes()
    third = sum(16 + 4 * len(b.data) for b in series[:2])
    path = tmp_path / "cut.dump"
    path.write_bytes(data[: third + 16 + 4 * 100 + 2])
    expected = f":byte {third + 16}: expected {len(series[2].data)} entry words"
    with pytest.raises(TraceFormatError, match=expected):
        decode_in(path, DecodeContext(strict=True, image=load_elf(elf)))
    ctx = DecodeContext(image=load_elf(elf))
    tables = decode_in(path, ctx)
    assert ctx.warnings == 1
    assert [e["value"] for e in events_named(tables, "dropped_bytes")] == [100]
    assert_tail(tables, truth, series[0].covered, series[1].stop)


def test_a_malformed_dump_word_drops_only_the_older_bytes_of_its_buffer(armv5, tmp_path) -> None:
    truth, blocks, elf = armv5
    series = fill_once_series(truth, blocks, 5, 3)
    data = bytearray((DATA / "xscale" / "calls-armv5te-fill.dump").read_bytes())
    word = 16 + 4 * 200  # the 201st entry word of the first buffer
    data[word + 1] = 0x22  # bits 23:16, the type: 0x22 is none
    path = tmp_path / "bad.dump"
    path.write_bytes(bytes(data))
    with pytest.raises(TraceFormatError, match=f":byte {word}: expected an entry word"):
        decode_in(path, DecodeContext(strict=True, image=load_elf(elf)))
    ctx = DecodeContext(image=load_elf(elf))
    tables = decode_in(path, ctx)
    assert ctx.warnings == 1 and [e["value"] for e in events_named(tables, "dropped_bytes")] == [201]
    pcs = tables["instructions"].column("pc").to_pylist()
    run = truth.pc[series[0].covered : series[-1].stop]
    assert pcs and pcs == run[len(run) - len(pcs) :]  # the rest of the run, up to its end


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda p: p.name)
def test_every_cut_of_a_sample_sniffs_and_reads_or_is_a_format_error_at_its_place(sample) -> None:
    data = sample.read_bytes()
    whole = [b for b in read_buffers(data, "whole", DecodeContext()) if isinstance(b, TraceBuffer)]
    for n in range(1, len(data)):
        cut = data[:n]
        try:
            assert sniff(cut, "cut").name == "xscale"
        except TraceFormatError as exc:
            assert (exc.path, exc.where) == ("cut", "0")
        try:
            list(read_buffers(cut, "cut", DecodeContext(strict=True)))
        except TraceFormatError as exc:
            assert exc.path == "cut" and re.fullmatch(r"(byte|line) \d+", exc.where), exc
        ctx = DecodeContext()
        items = list(read_buffers(cut, "cut", ctx))
        buffers = [b for b in items if isinstance(b, TraceBuffer)]
        unread = [u for u in items if isinstance(u, Unread)]
        assert_warned(ctx, items)
        if sample.suffix == ".txt":  # what is left of its one buffer
            assert len(buffers) <= 1 and whole[0].data.startswith(buffers[0].data if buffers else b"")
        elif n >= 20:  # the dump's whole records before the cut, as they were
            ends = np.cumsum([16 + 4 * len(b.data) for b in whole])
            assert [b.data for b in buffers] == [b.data for b in whole[: len(buffers)]]
            assert len(buffers) == np.count_nonzero(ends <= n)
            assert bool(unread) == (n not in ends)
        else:  # a header and no entry word: nothing says it is a dump, it is read as a raw buffer
            assert [b.data for b in buffers] == [cut]


PLACE = r"(byte|line) \d+|buffer \d+ byte \d+ \((offset|line) \d+\)"
"""Where a TraceFormatError of an XScale input says it is."""


def assert_warned(ctx: DecodeContext, items: list[TraceBuffer | Unread]) -> None:
    """A warning for each line left out, and at least one when bytes were (a bad line's drop
    of the older bytes of its buffer has the line's warning)."""
    unread = [u for u in items if isinstance(u, Unread)]
    assert ctx.warnings >= max(sum(u.is_line for u in unread), bool(unread))


def decode_damaged(path: Path, data: bytes, strict: bool) -> dict[str, pa.Table] | None:
    """Decode `data` as XScale in strict or lenient mode: rows in the model's schema numbered
    from 0, events in seq order among them (a walk's gap can be at the instruction that would
    have come next), a warning for everything kept aside; or, in strict mode only, a
    TraceFormatError naming the input and the place."""
    path.write_bytes(data)
    ctx = DecodeContext(strict=strict, image=load_elf(ARMV5))
    try:
        tables = decode_in(path, ctx)
    except TraceFormatError as exc:
        assert strict, exc
        assert exc.path == str(path) and re.fullmatch(PLACE, exc.where), exc
        return None
    instructions, events = tables["instructions"], tables["events"]
    assert instructions.schema == SCHEMAS["instructions"] and events.schema == SCHEMAS["events"]
    assert instructions.column("seq").to_pylist() == list(range(instructions.num_rows))
    assert all(0 <= seq <= instructions.num_rows for seq in events.column("seq").to_pylist())
    rows = events.to_pylist()
    warned = [e for e in rows if e["kind"] == "text" or e["name"] == "bad_message"]  # a warning each
    kept_aside = warned + [e for e in rows if e["name"] == "dropped_bytes"]  # a bad line's or its own
    assert ctx.warnings >= max(len(warned), bool(kept_aside))
    assert not (strict and kept_aside)
    return tables


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sample=st.sampled_from(SAMPLES), where=st.floats(0, 1, exclude_max=True), strict=st.booleans())
def test_a_cut_sample_decodes_or_fails_at_its_place(tmp_path, sample, where, strict) -> None:
    data = sample.read_bytes()
    cut = data[: int(where * len(data))]
    assume(cut)
    tables = decode_damaged(tmp_path / sample.name, cut, strict)
    if tables is not None and sample.suffix == ".dump":  # the walk of the whole records before the cut
        whole = decode(sample, ARMV5)["instructions"].column("pc").to_pylist()
        pcs = tables["instructions"].column("pc").to_pylist()
        assert pcs == whole[: len(pcs)]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sample=st.sampled_from(SAMPLES), where=st.floats(0, 1, exclude_max=True), bit=st.integers(0, 7),
       strict=st.booleans())  # fmt: skip
def test_a_sample_with_a_flipped_bit_decodes_or_fails_at_its_place(tmp_path, sample, where, bit, strict):
    data = bytearray(sample.read_bytes())
    data[int(where * len(data))] ^= 1 << bit
    decode_damaged(tmp_path / sample.name, bytes(data), strict)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(min_size=1, max_size=256))
def test_any_buffer_parses_as_the_manual_reads_it(data: bytes) -> None:
    """The compiled parse against a plain reading of the manual's rules (13.13), byte by byte
    from the newest: every field of every message, the fill, the cut and the bad byte."""
    parsed = parse_messages(TraceBuffer(data, range(len(data))))
    messages, fill, cut, bad = _read_as_the_manual_says(data)
    fields = ("kind", "count", "index", "checkpointed", "vector", "has_address", "address")
    assert [tuple(m[f].item() for f in fields) for m in parsed.messages] == messages
    assert (parsed.fill, parsed.cut, parsed.bad_index) == (fill, cut, bad)


def _read_as_the_manual_says(data: bytes) -> tuple[list[tuple], int, int, int | None]:
    """Messages oldest first as (kind, count, index, checkpointed, vector, has_address,
    address), and the fill, cut and bad byte (see messages.Parsed)."""
    found, p = [], len(data) - 1
    padding = 256 - len(data)
    first_set = next((i for i, b in enumerate(data) if b), len(data))
    while p >= 0:
        if p < first_set:
            return found[::-1], p + 1 + padding, 0, None
        byte = data[p]
        if byte >> 4 in (0x9, 0xD):
            whole = p >= 4
            address = int.from_bytes(data[p - 4 : p], "big") if whole else 0
            found.append((Kind.INDIRECT, byte & 0xF, p, byte >> 4 == 0xD, 0, whole, address))
            if not whole:
                return found[::-1], 0, p, None
            p -= 5
            continue
        if byte < 0x80:
            found.append((Kind.EXCEPTION, byte & 0xF, p, False, byte >> 4, False, 0))
        elif byte >> 4 in (0x8, 0xC):
            found.append((Kind.DIRECT, byte & 0xF, p, byte >> 4 == 0xC, 0, False, 0))
        elif byte == 0xFF:
            found.append((Kind.ROLL_OVER, 0, p, False, 0, False, 0))
        else:
            return found[::-1], 0, 0, p
        p -= 1
    return found[::-1], padding, 0, None


@settings(max_examples=300, deadline=None)
@given(
    text=st.lists(
        st.one_of(
            st.sampled_from(["chkpt0=0x8000", "chkpt1=12", "pc=0x100", "pc=zz", "# note", "", "9x", "80 81"]),
            st.binary(max_size=40).map(bytes.hex),
        ),
        max_size=30,
    ),
    dump=st.binary(max_size=300),
    strict=st.booleans(),
)
def test_any_text_or_dump_reads_or_fails_with_a_format_error(text: list[str], dump: bytes, strict: bool):
    for data, form in (("\n".join(text).encode(), "text"), (dump, "openocd"), (dump, None)):
        ctx = DecodeContext(strict=strict, options={"xscale_input": form} if form else {})
        try:
            items = list(read_buffers(data, "input", ctx))
        except TraceFormatError:
            assert strict
            continue
        buffers = [b for b in items if isinstance(b, TraceBuffer)]
        assert all(0 < len(b.data) <= 256 and len(b.src) == len(b.data) for b in buffers)
        assert_warned(ctx, items)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(min_size=1, max_size=256), pc=st.integers(0, 0x3000), strict=st.booleans())
def test_any_buffer_decodes_to_rows_or_gaps(tmp_path_factory, data: bytes, pc: int, strict: bool) -> None:
    assume(compression_of(data) is None)  # a compressed-looking head is the input layer's business
    path = tmp_path_factory.mktemp("fuzz") / "b.bin"
    path.write_bytes(data)
    registers = {"xscale_pc": pc, "xscale_chkpt0": pc, "xscale_chkpt1": pc + 4}
    ctx = DecodeContext(strict=strict, options={"xscale_input": "raw", **registers}, image=load_elf(ARMV5))
    try:
        tables = decode_in(path, ctx)
    except TraceFormatError as exc:
        assert strict and re.fullmatch(PLACE, exc.where), exc
        return
    assert tables["instructions"].column("seq").to_pylist() == list(range(tables["instructions"].num_rows))
    assert ctx.warnings == len(events_named(tables, "bad_message"))
