"""LEON3/GR740 trace buffers: decoding encoded ITB dumps of a unicorn run gives the run back."""

from __future__ import annotations

import contextlib
import functools
import json
from pathlib import Path

import leon_encoder as enc
import pyarrow as pa
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from paths import DATA

from cputrace.cli import cli
from cputrace.errors import TraceFormatError
from cputrace.formats import get_decoder, sniff
from cputrace.formats.base import DecodeContext
from cputrace.ingest import ingest
from cputrace.inputs import InputFile
from cputrace.model import SCHEMAS, Flag
from cputrace.trace import Trace

ELF = DATA / "leon" / "itb_demo.elf"


@functools.cache
def recording() -> tuple[enc.Step, ...]:
    return tuple(enc.record(str(ELF)))


def decode(path: Path, fmt: str, *, image: bool = False, strict: bool = False) -> dict[str, pa.Table]:
    ctx = DecodeContext(strict=strict, options={"images": [str(ELF)]} if image else {})
    batches = list(get_decoder(fmt).decode(InputFile(path), ctx))
    tables = {name: pa.concat_tables([b[name] for b in batches]) for name in SCHEMAS}
    for name, table in tables.items():
        assert table.schema == SCHEMAS[name]
    return tables


def write_raw(
    tmp_path: Path, lines: list[int], size: int, start: int = 0, tfilt: int = 0, cpu: int = 3
) -> Path:
    dump, pointer = enc.buffer(lines, size, start)
    path = tmp_path / f"itb{cpu}.bin"
    path.write_bytes(dump)
    Path(str(path) + ".json").write_text(json.dumps({"itbc0": hex(tfilt << 28 | pointer), "cpu": cpu}))
    return path


def assert_matches(tables: dict[str, pa.Table], steps: list[enc.Step]) -> None:
    """Instructions, register writes, stores and loads agree with the recording."""
    rows = tables["instructions"].to_pylist()
    assert [(r["pc"], r["opcode"]) for r in rows] == [(s.pc, s.opcode) for s in steps]
    assert all(r["disasm"] for r in rows)
    written: dict[int, dict[str, int]] = {}
    for r in tables["registers"].to_pylist():
        written.setdefault(r["seq"], {})[r["reg"]] = r["value"]
    for seq, step in enumerate(steps):
        regs = written.get(seq, {})
        for name, value in regs.items():
            assert step.regs[name] == value, (hex(step.pc), name)
        previous = steps[seq - 1].regs if seq else None
        if previous is not None and not step.trap:
            changed = {n for n in enc.REGISTERS if step.regs[n] != previous[n]}
            assert changed <= set(regs), (hex(step.pc), changed)
    memory = tables["memory"].to_pylist()
    stores = [(m["seq"], m["addr"], m["value"]) for m in memory if m["op"] == "W" and m["addr"] is not None]
    expected = [(i, a, v) for i, s in enumerate(steps) if not s.reads for a, _, v in enc._words(s.writes)]
    assert stores == expected
    loads = [(m["seq"], m["value"]) for m in memory if m["op"] == "R"]
    assert loads == [(i, v) for i, s in enumerate(steps) for _, _, v in enc._words(s.reads)]
    atomic = [(m["seq"], m["value"]) for m in memory if m["op"] == "W" and m["addr"] is None]
    assert atomic == [(i, v) for i, s in enumerate(steps) if s.reads for _, _, v in enc._words(s.writes)]


def test_recording_exercises_the_multi_cycle_cases() -> None:
    mnemonics = {enc.Step(0, s.opcode).op3 for s in recording() if s.op == 3}
    assert {0x03, 0x07, 0x0D, 0x0F, 0x04, 0x05, 0x06} <= mnemonics  # LDD STD LDSTUB SWAP ST STB STH
    assert recording()[-1].trap


def test_unwrapped_buffer_gives_the_run_back(tmp_path: Path) -> None:
    steps = list(recording())
    lines = enc.entries(steps)
    tables = decode(write_raw(tmp_path, lines, 256), "leon-itb")
    assert_matches(tables, steps)
    last = tables["instructions"].to_pylist()[-1]
    assert last["flags"] & Flag.TRAP and last["executed"] is False
    traps = [e for e in tables["events"].to_pylist() if e["kind"] == "exception"]
    assert [(t["seq"], t["number"], t["value"]) for t in traps] == [(len(steps) - 1, 0x80, steps[-1].pc)]


def test_time_tags_unwrap_across_2_pow_30(tmp_path: Path) -> None:
    steps = list(recording())
    tables = decode(write_raw(tmp_path, enc.entries(steps, first_time=(1 << 30) - 40), 256), "leon-itb")
    times = tables["instructions"].column("time").to_pylist()
    assert times[0] == (1 << 30) - 40 and times[-1] > 1 << 30
    assert times == sorted(times)
    entries_before = [0]
    for s in steps[:-1]:
        entries_before.append(entries_before[-1] + len(enc.results(s)))
    assert times == [(1 << 30) - 40 + 3 * n for n in entries_before]


@pytest.mark.parametrize("start", [0, 5, 63])
def test_wrapped_buffer_gives_the_newest_instructions(tmp_path: Path, start: int) -> None:
    steps = list(recording())
    lines = enc.entries(steps)
    tables = decode(write_raw(tmp_path, lines, 64, start), "leon-itb")
    kept = lines[-64:]
    orphans = next(i for i, line in enumerate(kept) if not line & enc.MULTI)
    first = len(steps) - sum(1 for line in kept[orphans:] if not line & enc.MULTI)
    assert_matches(tables, steps[first:])
    gaps = [e for e in tables["events"].to_pylist() if e["kind"] == "trace_gap"]
    assert len(gaps) == orphans  # an oldest entry whose instruction was overwritten: reported


def test_text_form_with_two_cpus_is_sniffed(tmp_path: Path) -> None:
    steps = list(recording())
    dump0, pointer0 = enc.buffer(enc.entries(steps), 256)
    dump1, pointer1 = enc.buffer(enc.entries(steps[:40]), 32, 7)
    path = tmp_path / "itb.txt"
    listing = enc.text(dump0, kind="itb", cpu=0, itbc0=pointer0) + enc.text(dump1, cpu=1, itbc0=pointer1)
    path.write_text(listing)
    assert sniff(path.read_bytes()[:4096], str(path)).name == "leon-text"
    tables = decode(path, "leon-text")
    cpus = tables["instructions"].column("cpu").to_pylist()
    assert cpus.count(0) == len(steps) and cpus.count(1) > 0
    assert tables["instructions"].column("seq").to_pylist() == list(range(len(cpus)))
    assert tables["instructions"].column("src").to_pylist()[0] == 2  # the line number under the header


def test_control_flow_filter_without_image_marks_gaps(tmp_path: Path) -> None:
    steps = list(recording())
    kept = enc.control_flow(steps)
    tables = decode(write_raw(tmp_path, enc.entries(kept), 256, tfilt=2), "leon-itb")
    assert tables["instructions"].column("pc").to_pylist() == [s.pc for s in kept]
    events = tables["events"].to_pylist()
    assert [e["number"] for e in events if e["kind"] == "header"] == [2]
    assert sum(e["kind"] == "trace_gap" for e in events) > 0


def test_control_flow_filter_with_image_rebuilds_the_run(tmp_path: Path) -> None:
    steps = list(recording())
    kept = enc.control_flow(steps)
    tables = decode(write_raw(tmp_path, enc.entries(kept), 256, tfilt=2), "leon-itb", image=True)
    rows = tables["instructions"].to_pylist()
    ran = [r for r in rows if r["executed"] is not False or r["flags"] & Flag.TRAP]
    first = steps.index(kept[0])
    assert [r["pc"] for r in ran] == [s.pc for s in steps[first:]]
    traced = {id(s) for s in kept}
    assert [not r["flags"] & Flag.RECONSTRUCTED for r in ran] == [id(s) in traced for s in steps[first:]]
    assert all(r["flags"] & Flag.RECONSTRUCTED for r in rows if r["executed"] is False and r not in ran)
    assert [e for e in tables["events"].to_pylist() if e["kind"] == "trace_gap"] == []


@pytest.mark.parametrize("start", [0, 9])
def test_wrapped_control_flow_buffer_with_image(tmp_path: Path, start: int) -> None:
    steps = list(recording())
    kept = enc.control_flow(steps)
    lines = enc.entries(kept)
    window = lines[-24:]
    orphans = next(i for i, line in enumerate(window) if not line & enc.MULTI)
    first_kept = kept[len(kept) - sum(1 for line in window[orphans:] if not line & enc.MULTI)]
    tables = decode(write_raw(tmp_path, lines, 24, start, tfilt=2), "leon-itb", image=True)
    rows = tables["instructions"].to_pylist()
    ran = [r["pc"] for r in rows if r["executed"] is not False or r["flags"] & Flag.TRAP]
    assert ran == [s.pc for s in steps[steps.index(first_kept) :]]


def test_buffers_of_two_cpus_in_one_ingest(tmp_path: Path) -> None:
    steps = list(recording())
    paths = [write_raw(tmp_path, enc.entries(steps[:n]), 256, cpu=cpu) for cpu, n in ((0, 50), (1, 70))]
    result = ingest(paths, tmp_path / "two.ctrace", format="leon-itb")
    counts = Trace(result.store).sql("select cpu, count(*) as n from instructions group by cpu order by cpu")
    assert counts.to_pylist() == [{"cpu": 0, "n": 50}, {"cpu": 1, "n": 70}]


def test_filtered_trace_leaving_the_image_is_a_gap(tmp_path: Path) -> None:
    steps = list(recording())
    lines = enc.entries(enc.control_flow(steps))
    lines[5] = (lines[5] & ~(0xFFFFFFFC << 32)) | 0x50000000 << 32  # a traced pc the image lacks
    tables = decode(write_raw(tmp_path, lines, 256, tfilt=2), "leon-itb", image=True)
    gaps = [e for e in tables["events"].to_pylist() if e["kind"] == "trace_gap"]
    assert gaps and any("0x50000000" in (e["text"] or "") for e in gaps)
    pcs = tables["instructions"].column("pc").to_pylist()
    assert pcs[-1] == steps[-1].pc  # the walk resumes at the next traced transfer


def test_error_mode_and_inconsistent_continuations(tmp_path: Path) -> None:
    steps = list(recording())[:12]
    lines = enc.entries(steps)
    lines[3] |= enc.ERROR
    store = next(i for i, line in enumerate(lines) if line & enc.MULTI)
    lines[store] ^= 0x40 << 32  # its pc no longer matches the store it continues
    tables = decode(write_raw(tmp_path, lines, 64), "leon-itb")
    rows = tables["instructions"].to_pylist()
    assert rows[3]["flags"] & Flag.ERROR_MODE
    events = tables["events"].to_pylist()
    assert any(e["kind"] == "mode_change" and e["name"] == "error_mode" for e in events)
    corrupt = [e for e in events if e["kind"] == "trace_gap" and e["name"] == "corrupt"]
    assert len(corrupt) == 1 and corrupt[0]["src"] == 16 * store
    with pytest.raises(TraceFormatError, match=f"byte {16 * store}"):
        decode(write_raw(tmp_path, lines, 64), "leon-itb", strict=True)


def test_ahb_buffer_is_a_bus_trace(tmp_path: Path) -> None:
    lines = [
        enc.ahb_line(100, 0x40010004, 0x00000005, write=True, master=1),
        enc.ahb_line(104, 0x40010021, 0x00180000, write=True, hsize=0, htrans=2, locked=True),
        enc.ahb_line(108, 0x40010000, 0, write=False, htrans=0),  # IDLE: no transfer
        enc.ahb_line(112, 0x40010022, 0x00000018, write=False, hsize=1, hburst=1, htrans=3, breakpoint=True),
    ]
    dump, pointer = enc.buffer(lines, 8)
    path = tmp_path / "ahb.bin"
    path.write_bytes(dump)
    Path(str(path) + ".json").write_text(json.dumps({"kind": "ahb", "control": pointer, "cpu": 2}))
    tables = decode(path, "leon-ahb")
    memory = tables["memory"].to_pylist()
    assert [(m["op"], m["addr"], m["size"], m["value"], m["source"]) for m in memory] == [
        ("W", 0x40010004, 4, 5, "bus"), ("W", 0x40010021, 1, 0x18, "bus"), ("R", 0x40010022, 2, 0x18, "bus"),
    ]  # fmt: skip
    assert memory[0]["attrs"] == "master=1 htrans=NONSEQ hsize=2 hburst=SINGLE hresp=OKAY"
    assert memory[1]["attrs"].startswith("L ")
    assert {m["cpu"] for m in memory} == {2}
    hits = [e for e in tables["events"].to_pylist() if e["kind"] == "trigger"]
    assert [(h["time"], h["value"]) for h in hits] == [(112, 0x40010022)]


def test_cli_ingest_of_a_raw_dump_and_a_filtered_text_form(tmp_path: Path) -> None:
    steps = list(recording())
    runner = CliRunner()
    raw = write_raw(tmp_path, enc.entries(steps), 256)
    done = runner.invoke(cli, ["ingest", "--format", "leon-itb", str(raw), "-o", str(tmp_path / "a.ctrace")])
    assert done.exit_code == 0, done.output
    shown = runner.invoke(cli, ["list", str(tmp_path / "a.ctrace"), "--limit", "3"])
    assert "sethi" in shown.output
    dump, pointer = enc.buffer(enc.entries(enc.control_flow(steps)), 64)
    text = tmp_path / "cf.itb.txt"
    text.write_text(enc.text(dump, kind="itb", cpu=1, itbc0=2 << 28 | pointer))
    done = runner.invoke(cli, ["ingest", str(text), "--image", str(ELF), "-o", str(tmp_path / "b.ctrace")])
    assert done.exit_code == 0, done.output
    query = "select count(*) as n from instructions where executed is not false or flags % 2 = 1"
    count = runner.invoke(cli, ["sql", str(tmp_path / "b.ctrace"), query])
    first = steps.index(enc.control_flow(steps)[0])
    assert str(len(steps) - first) in count.output


def test_raw_dump_of_partial_lines_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "bad.bin"
    path.write_bytes(bytes(40))
    with pytest.raises(TraceFormatError, match="16-byte"):
        decode(path, "leon-itb")


@settings(max_examples=60, deadline=None)
@given(data=st.binary(min_size=16, max_size=16 * 40), control=st.integers(0, 0xFFFFFFFF))
def test_random_lines_never_crash(tmp_path_factory, data: bytes, control: int) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "itb.bin"
    path.write_bytes(data[: len(data) - len(data) % 16])
    Path(str(path) + ".json").write_text(json.dumps({"itbc0": control}))
    for image in (False, True):
        for strict in (False, True):
            try:
                decode(path, "leon-itb", image=image, strict=strict)
            except TraceFormatError:
                assert strict
    decode(path, "leon-ahb")  # every AHB line decodes


@settings(max_examples=60, deadline=None)
@given(text=st.text(alphabet="0123456789abcdefx# =\nkindcpuitb", max_size=400))
def test_random_text_never_crashes(tmp_path_factory, text: str) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "itb.txt"
    path.write_text(text)
    with contextlib.suppress(TraceFormatError):
        decode(path, "leon-text")
