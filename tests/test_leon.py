"""LEON3/GR740 trace buffers: decoding encoded ITB dumps of a unicorn or QEMU run gives the run back."""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import re
import subprocess
import sys
from pathlib import Path

import leon_encoder as enc
import numpy as np
import pyarrow as pa
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from paths import DATA

from cputrace.cli import cli
from cputrace.errors import TraceFormatError, UsageError
from cputrace.flow.ops import GapReason
from cputrace.formats import get_decoder, sniff
from cputrace.formats.base import DecodeContext
from cputrace.formats.leon import filtered
from cputrace.image import Image, Region, load_elf
from cputrace.ingest import ingest
from cputrace.inputs import InputFile
from cputrace.isa.sparc import sparc_insn, transfers_or_undefined
from cputrace.model import SCHEMAS, Flag
from cputrace.store.trace import Trace

ELF = DATA / "leon" / "itb_demo.elf"
TRAPS_ELF = DATA / "leon" / "itb_traps.elf"


@functools.cache
def recording() -> tuple[enc.Step, ...]:
    return tuple(enc.record(str(ELF)))


@functools.cache
def trap_run() -> tuple[enc.Step, ...]:
    """itb_traps.S as QEMU ran it: traps, their returns and DCTI couples."""
    return tuple(enc.record_qemu(str(TRAPS_ELF), str(DATA / "leon" / "itb_traps.qemu.txt")))


def decode(
    path: Path, fmt: str, *, image: bool = False, strict: bool = False, elf: Path = ELF,
    ctx: DecodeContext | None = None,
) -> dict[str, pa.Table]:  # fmt: skip
    ctx = ctx or DecodeContext(strict=strict, image=load_elf(elf) if image else None)
    batches = list(get_decoder(fmt).decode(InputFile(path), ctx))
    tables = {name: pa.concat_tables([b[name] for b in batches]) for name in SCHEMAS}
    for name, table in tables.items():
        assert table.schema == SCHEMAS[name]
    assert tables["events"].column("seq").to_pylist() == sorted(tables["events"].column("seq").to_pylist())
    return tables


def ran(tables: dict[str, pa.Table]) -> list[tuple[int, int]]:
    """(pc, opcode) of each instruction row, in order."""
    rows = tables["instructions"]
    return list(zip(rows.column("pc").to_pylist(), rows.column("opcode").to_pylist(), strict=True))


def gaps(tables: dict[str, pa.Table]) -> list[dict]:
    return [e for e in tables["events"].to_pylist() if e["kind"] == "trace_gap"]


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


def test_control_flow_filter_with_image_gives_the_unfiltered_rows(tmp_path: Path) -> None:
    """The filtered buffer rebuilt through the image gives the rows of the unfiltered buffer
    of the same run (from the first traced line): annulled delay slots, which the hardware
    never traces, are left out of both."""
    steps = list(recording())
    kept = enc.control_flow(steps)
    unfiltered = decode(write_raw(tmp_path, enc.entries(steps), 256), "leon-itb")
    path = write_raw(tmp_path, enc.entries(kept), 256, tfilt=2, cpu=4)
    tables = decode(path, "leon-itb", image=True, strict=True)
    first = steps.index(kept[0])
    assert ran(tables) == ran(unfiltered)[first:] == [(s.pc, s.opcode) for s in steps[first:]]
    rows = tables["instructions"].to_pylist()
    traced = {id(s) for s in kept}
    assert [not r["flags"] & Flag.RECONSTRUCTED for r in rows] == [id(s) in traced for s in steps[first:]]
    assert [r["executed"] for r in rows] == [not s.trap for s in steps[first:]]
    assert gaps(tables) == []


@pytest.mark.parametrize("start", [0, 9])
def test_wrapped_control_flow_buffer_with_image(tmp_path: Path, start: int) -> None:
    steps = list(recording())
    kept = enc.control_flow(steps)
    lines = enc.entries(kept)
    window = lines[-24:]
    orphans = next(i for i, line in enumerate(window) if not line & enc.MULTI)
    first_kept = kept[len(kept) - sum(1 for line in window[orphans:] if not line & enc.MULTI)]
    tables = decode(write_raw(tmp_path, lines, 24, start, tfilt=2), "leon-itb", image=True)
    assert ran(tables) == [(s.pc, s.opcode) for s in steps[steps.index(first_kept) :]]


def test_qemu_run_returns_from_traps_through_dcti_couples() -> None:
    """The ground truth itself: QEMU ran each trap return as the V8 manual's couple, one
    instruction at the jmp's target (%l1 or %l2), then the rett's (%l2 or %l2 + 4)."""
    steps = list(trap_run())
    returns = [i for i in range(1, len(steps) - 3) if steps[i].is_jmpl() and steps[i + 1].op3 == 0x39]
    assert len(returns) == 6  # three traps in each of two rounds
    assert {(steps[i].opcode >> 14) & 0x1F for i in returns} == {17, 18}  # jmp %l1 and jmp %l2
    for i in returns:
        before = steps[i - 1].regs  # the handler's registers when jmp and rett read them
        jmp_target = before["l1"] if (steps[i].opcode >> 14) & 0x1F == 17 else before["l2"]
        rett_target = before["l2"] + (steps[i + 1].opcode & 0x1FFF)
        assert (steps[i + 2].pc, steps[i + 3].pc) == (jmp_target, rett_target)
    assert sum(s.trap for s in steps) == 7 and steps[-1].trap
    couples = [i for i in range(len(steps) - 1) if steps[i].is_transfer() and steps[i + 1].is_transfer()]
    assert len(couples) > len(returns)  # and the couples of ordinary branches
    annulling = [(b, after) for b, after in itertools.pairwise(steps) if b.op == 0 and b.opcode >> 29 & 1]
    assert any(after.pc == b.pc + 8 for b, after in annulling)  # a delay slot passed over: no step


def test_filtered_traps_and_couples_give_the_unfiltered_rows(tmp_path: Path) -> None:
    steps = list(trap_run())
    kept = enc.control_flow(steps)
    unfiltered = decode(write_raw(tmp_path, enc.entries(steps), 512), "leon-itb")
    assert ran(unfiltered) == [(s.pc, s.opcode) for s in steps]
    tables = decode(
        write_raw(tmp_path, enc.entries(kept), 512, tfilt=2, cpu=4), "leon-itb", image=True, strict=True,
        elf=TRAPS_ELF,
    )  # fmt: skip
    first = steps.index(kept[0])
    assert ran(tables) == ran(unfiltered)[first:]
    rows = tables["instructions"].to_pylist()
    traced = {id(s) for s in kept}
    assert [not r["flags"] & Flag.RECONSTRUCTED for r in rows] == [id(s) in traced for s in steps[first:]]
    assert [r["executed"] for r in rows] == [not s.trap for s in steps[first:]]
    assert gaps(tables) == []
    traps = [e["seq"] for e in tables["events"].to_pylist() if e["kind"] == "exception"]
    assert traps == [i - first for i, s in enumerate(steps) if s.trap]


def test_filtered_traps_and_couples_without_image_mark_what_was_left_out(tmp_path: Path) -> None:
    steps = list(trap_run())
    kept = enc.control_flow(steps)
    tables = decode(write_raw(tmp_path, enc.entries(kept), 512, tfilt=2), "leon-itb", strict=True)
    assert ran(tables) == [(s.pc, s.opcode) for s in kept]
    filtered_before = {e["seq"] for e in gaps(tables) if e["name"] == "filtered"}
    position = {id(s): i for i, s in enumerate(steps)}
    left_out = [position[id(b)] - position[id(a)] > 1 for a, b in itertools.pairwise(kept)]
    assert filtered_before == {k + 1 for k, out in enumerate(left_out) if out}


def test_a_trap_handler_whose_first_instruction_is_not_traced_follows_a_gap(tmp_path: Path) -> None:
    """Handlers start at trap table entries (16-byte aligned): a line after a trap elsewhere
    means the filter left the handler's first instructions out, which the walk cannot place."""
    steps = list(trap_run())
    kept = enc.control_flow(steps)
    entries = [k for k in range(1, len(kept)) if kept[k - 1].trap and not kept[k].is_transfer()]
    assert len(entries) == 2  # the ta 3 handler's `mov %psr, %l0`, in both rounds
    dropped = {id(kept[k]) for k in entries}
    lines = enc.entries([s for s in kept if id(s) not in dropped])
    path = write_raw(tmp_path, lines, 512, tfilt=2)
    tables = decode(path, "leon-itb", image=True, strict=True, elf=TRAPS_ELF)
    first = steps.index(kept[0])
    assert ran(tables) == [(s.pc, s.opcode) for s in steps[first:] if id(s) not in dropped]
    rows = tables["instructions"].to_pylist()
    after_entry = kept[entries[0]].pc + 4
    assert [(rows[e["seq"]]["pc"], e["name"]) for e in gaps(tables)] == [(after_entry, "filtered")] * 2


@pytest.mark.parametrize("program", ["demo", "traps"])
def test_every_window_of_a_filtered_buffer_gives_the_run_from_its_oldest_line(tmp_path: Path, program: str):
    """Buffers read out at any moment, holding any number of the newest lines: the oldest
    line may be anywhere, in a delay slot or between a trap and its return too. When it ran
    in a delay slot (its npc not the next word), the trace may fit both readings of what
    followed it: then the rows from the next traced line on are the run's."""
    steps = list(recording() if program == "demo" else trap_run())
    elf = ELF if program == "demo" else TRAPS_ELF
    kept = enc.control_flow(steps)
    position = {id(s): i for i, s in enumerate(steps)}
    in_delay_slots = 0
    for end in (len(kept), len(kept) - 7):
        for size in range(2, end, 3):
            window = kept[end - size : end]
            lines = enc.entries(window)
            path = write_raw(tmp_path, lines, len(lines), start=size % len(lines), tfilt=2)  # wrapped
            tables = decode(path, "leon-itb", image=True, elf=elf, strict=True)
            first, last = position[id(window[0])], position[id(window[-1])]
            expected = [(s.pc, s.opcode) for s in steps[first : last + 1]]
            if window[0].npc in (None, window[0].pc + 4):
                assert ran(tables) == expected, (end, size)
                continue
            in_delay_slots += 1
            flags = tables["instructions"].column("flags").to_pylist()
            second = [k for k, f in enumerate(flags) if not f & Flag.RECONSTRUCTED][1]
            assert ran(tables)[second:] == expected[position[id(window[1])] - first :]
    assert in_delay_slots or program == "demo"  # unicorn's steps have no npc: the demo has no couples


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


def test_an_ahb_buffer_after_an_itb_buffer_in_one_text_input_numbers_on(tmp_path: Path) -> None:
    """The shipped ITB and AHB examples as one text input: the AHB rows come after the ITB's
    instructions in seq (they used to get seq 0, behind the ITB's rows: out of seq order)."""
    examples = Path(__file__).resolve().parents[1] / "examples"
    itb = (examples / "leon-cf.txt").read_text()
    ahb = enc.text((examples / "leon-ahb.bin").read_bytes(), kind="ahb", cpu=0, control="0x54")
    path = tmp_path / "both.txt"
    path.write_text(itb + ahb)
    alone = decode(examples / "leon-ahb.bin", "leon-ahb")
    both = decode(path, "leon-text")
    count = both["instructions"].num_rows
    assert count == decode(examples / "leon-cf.txt", "leon-text")["instructions"].num_rows > 0
    bus = both["memory"].filter(pa.compute.equal(both["memory"].column("source"), "bus"))
    assert bus.num_rows == alone["memory"].num_rows > 0
    assert set(bus.column("seq").to_pylist()) == {count}  # after the ITB's last instruction
    columns = ["op", "addr", "size", "value", "time", "attrs"]
    assert bus.select(columns).to_pylist() == alone["memory"].select(columns).to_pylist()
    for table in ("memory", "events"):
        seq = both[table].column("seq").to_pylist()
        assert seq == sorted(seq)
    result = ingest([path], tmp_path / "both.ctrace", format="leon-text")  # the writer checks the order
    assert result.manifest["counts"]["memory"] == both["memory"].num_rows


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


def test_transfers_or_undefined_agrees_with_the_instruction_facts() -> None:
    """The whole-image check of filtered runs classifies words as sparc_insn does, one by one."""
    words = np.random.default_rng(7).integers(0, 1 << 32, 20_000, dtype=np.uint64).astype(np.uint32)
    facts = [sparc_insn(int(w), 0x40000000) for w in words]
    assert transfers_or_undefined(words).tolist() == [i.is_branch or i.is_undefined for i in facts]


def write_sidecar(tmp_path: Path, settings: dict | str) -> Path:
    path = tmp_path / "itb.bin"
    path.write_bytes(enc.buffer(enc.entries(list(recording())[:8]), 16)[0])
    text = settings if isinstance(settings, str) else json.dumps(settings)
    Path(str(path) + ".json").write_text(text)
    return path


@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize(
    ("settings", "where", "expected"),
    [
        ({"cpu": -1}, "cpu", "a CPU number from 0 to 65535"),
        ({"cpu": 1 << 16}, "cpu", "a CPU number from 0 to 65535"),
        ({"cpu": "0x10000"}, "cpu", "a CPU number"),
        ({"cpu": True}, "cpu", "a CPU number"),
        ({"cpu": 1.5}, "cpu", "a CPU number"),
        ({"itbc0": -1}, "itbc0", "a 32-bit control register value"),
        ({"itbc0": 1 << 32}, "itbc0", "a 32-bit control register value"),
        ({"control": "0x1_0000_0000"}, "control", "a 32-bit control register value"),
        ({"kind": "etm"}, "kind", "kind itb or ahb"),
        ('{"cpu": ' + "9" * 5000 + "}", "0", "a JSON object"),
        ("[" * 100_000, "0", "a JSON object"),
        ('{"pad": "' + "x" * (2 << 20) + '"}', "byte 1048576", "a JSON object of trace buffer settings"),
    ],
)
def test_bad_sidecar_settings_are_errors_in_both_modes(
    tmp_path: Path, settings: dict | str, where: str, expected: str, strict: bool
) -> None:
    """Settings are how the whole buffer is read, not a record that could be kept as text."""
    path = write_sidecar(tmp_path, settings)
    with pytest.raises(TraceFormatError, match=re.escape(f"itb.bin.json:{where}: expected {expected}")):
        decode(path, "leon-itb", strict=strict)


@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("cpu=-1", "line 1, cpu: expected a CPU number from 0 to 65535, got '-1'"),
        ("cpu=65536", "line 1, cpu: expected a CPU number"),
        ("itbc0=0x100000000", "line 1, itbc0: expected a 32-bit control register value"),
        ("itbc0=twelve", "line 1, itbc0: expected a 32-bit control register value"),
        ("kind=itb cpu=1\n0c000010 40001018 40001014 01000000\n# cpu=" + "7" * 5000, "line 3, cpu"),
    ],
)
def test_bad_header_settings_are_errors_in_both_modes(
    tmp_path: Path, header: str, expected: str, strict: bool
) -> None:
    path = tmp_path / "itb.txt"
    path.write_text(f"# leon-trace {header}\n0c000010 40001018 40001014 01000000\n")
    with pytest.raises(TraceFormatError, match=re.escape(f"itb.txt:{expected}")):
        decode(path, "leon-text", strict=strict)


@pytest.mark.parametrize(("option", "value"), [("cpu", "-1"), ("cpu", "70000"), ("itbc0", str(1 << 32))])
def test_bad_settings_given_as_options_are_errors(tmp_path: Path, option: str, value: str) -> None:
    path = write_sidecar(tmp_path, {})
    with pytest.raises(UsageError, match=f"option {option}: expected .*, got '{value}'"):
        decode(path, "leon-itb", ctx=DecodeContext(options={option: value}))
    store = tmp_path / "s.ctrace"
    args = ["ingest", "--format", "leon-itb", str(path), "--option", f"{option}={value}", "-o", str(store)]
    done = CliRunner().invoke(cli, args)
    assert isinstance(done.exception, SystemExit) and done.exit_code == 2  # bad usage, no traceback
    assert f"option {option}: expected" in done.output
    assert not store.exists()


def test_cli_reports_a_bad_sidecar_as_bad_input(tmp_path: Path) -> None:
    path = write_sidecar(tmp_path, {"cpu": -1})
    done = CliRunner().invoke(cli, ["ingest", "--format", "leon-itb", str(path), "-o", str(tmp_path / "s")])
    assert done.exit_code == 1, done.output
    assert "itb.bin.json:cpu: expected a CPU number from 0 to 65535, got '-1'" in done.output
    assert done.exception is None or isinstance(done.exception, SystemExit)


def _listing_with_a_bad_line(steps: list[enc.Step], bad: bytes) -> tuple[bytes, int, int]:
    """A wrapped text listing of `steps` whose line for one single-entry instruction is `bad`:
    the listing, that line's number and the instruction's index."""
    lines = enc.entries(steps)
    start = 17
    dump, pointer = enc.buffer(lines, len(lines), start)
    listing = enc.text(dump, kind="itb", cpu=2, itbc0=pointer).encode().splitlines()
    single = [k for k in range(1, len(lines) - 1) if not (lines[k] | lines[k + 1]) & enc.MULTI]
    k = single[len(single) // 2]  # the k-th oldest line, in slot (start + k) % len(lines)
    number = (start + k) % len(lines) + 2  # under the header line
    listing[number - 1] = bad
    return b"\n".join(listing) + b"\n", number, sum(1 for line in lines[:k] if not line & enc.MULTI)


@pytest.mark.parametrize("bad", [b"zzz not a trace line", b"0c000010 40001018 4000101", b"\xff\xfe\x00 \x80"])
def test_a_bad_line_of_a_text_listing_is_kept_as_text(tmp_path: Path, bad: bytes) -> None:
    """Lenient: the bad line becomes a text event and a warning, and keeps its place in the
    buffer (so the pointer still orders the rest right); strict stops there, naming it."""
    steps = list(recording())
    listing, number, step = _listing_with_a_bad_line(steps, bad)
    path = tmp_path / "itb.txt"
    path.write_bytes(listing)
    ctx = DecodeContext()
    tables = decode(path, "leon-text", ctx=ctx)
    assert ran(tables) == [(s.pc, s.opcode) for k, s in enumerate(steps) if k != step]
    texts = [e for e in tables["events"].to_pylist() if e["kind"] == "text"]
    assert [(e["src"], e["text"], e["cpu"]) for e in texts] == [(number, bad.decode("utf-8", "replace"), 2)]
    assert ctx.warnings == 1 and f"line {number}: kept as text" in ctx.warning_samples[0]
    with pytest.raises(TraceFormatError, match=f"itb.txt:line {number}: expected four 8-digit hex words"):
        decode(path, "leon-text", strict=True)


def test_text_listing_of_bad_lines_only_ingests_leniently(tmp_path: Path) -> None:
    path = tmp_path / "itb.txt"
    path.write_text("# leon-trace kind=ahb cpu=1\nnot a line\n\nnor this\n")
    result = ingest([path], tmp_path / "s.ctrace")
    assert result.manifest["counts"]["events"] == 2 and result.manifest["warnings"]["count"] == 2
    assert result.manifest["event_kinds"] == {"text": 2}


_HEADER_WITHOUT_SETTINGS = """
import sys
from pathlib import Path
from cputrace.formats import get_decoder
from cputrace.formats.base import DecodeContext
from cputrace.inputs import InputFile
from cputrace.isa.sparc import sparc_insn, transfers_or_undefined
path = Path(sys.argv[1])
long = 4 << 20
path.write_text("# " + "a" * long + "\\n" + "b" * long + "\\n0c000010 40001018 40001014 01000000\\n")
batches = list(get_decoder("leon-text").decode(InputFile(path), DecodeContext()))
print(batches[0]["instructions"].num_rows, batches[0]["events"].num_rows)
"""


def test_long_lines_of_a_text_listing_take_linear_time(tmp_path: Path) -> None:
    """A 4 MiB header line without `=` and a 4 MiB bad line: read in linear time. The settings
    pattern used to backtrack (40 KB took 18 s; this would take days); the bound is generous."""
    done = subprocess.run(
        [sys.executable, "-c", _HEADER_WITHOUT_SETTINGS, str(tmp_path / "long.txt")],
        capture_output=True, text=True, timeout=300, check=True,
    )  # fmt: skip
    assert done.stdout.split() == ["1", "1"]


def test_corrupt_lines_cost_a_bounded_walk_each(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A filtered buffer of random lines through the image: the walk does a bounded number of
    steps per line, the image is scanned once, and only runs that become rows are read."""
    calls = {"arrive": 0, "scans": 0, "words": 0}
    arrive, scan, words = filtered._arrive, filtered.StraightCode._find_barriers, filtered.StraightCode.words

    def counted_arrive(*args):
        calls["arrive"] += 1
        return arrive(*args)

    def counted_scan(self):
        calls["scans"] += 1
        return scan(self)

    def counted_words(self, start, count):
        calls["words"] += count
        return words(self, start, count)

    monkeypatch.setattr(filtered, "_arrive", counted_arrive)
    monkeypatch.setattr(filtered.StraightCode, "_find_barriers", counted_scan)
    monkeypatch.setattr(filtered.StraightCode, "words", counted_words)
    rng = np.random.default_rng(3)
    lines = 5000
    data = rng.integers(0, 1 << 32, (lines, 4), dtype=np.uint64).astype(">u4")
    data[:, 2] = 0x40000000 + 4 * rng.integers(0, 40, lines)  # pcs in the image, flags clear
    data[::2, 3] = 0x10800003  # and every other one a branch (ba), so runs and targets happen
    path = tmp_path / "corrupt.bin"
    path.write_bytes(data.tobytes())
    Path(str(path) + ".json").write_text(json.dumps({"itbc0": hex(2 << 28)}))
    ctx = DecodeContext(image=load_elf(ELF))
    tables = decode(path, "leon-itb", ctx=ctx)
    rebuilt = sum(1 for f in tables["instructions"].column("flags").to_pylist() if f & Flag.RECONSTRUCTED)
    assert ctx.warnings > lines // 4 and rebuilt > 0
    assert calls["arrive"] <= 40 * lines
    assert calls["scans"] == 1
    assert calls["words"] == rebuilt


def test_straight_code_finds_what_a_run_cannot_pass() -> None:
    nop, ba, unimp = 0x01000000, 0x10800003, 0x00000000
    words = [nop, nop, ba, nop, unimp, nop]
    code = b"".join(w.to_bytes(4, "big") for w in words)
    image = Image([
        Region(0x1000, code, "text"), Region(0x1018, nop.to_bytes(4, "big") * 2, "adjacent"),
        Region(0x2002, b"\x00\x00" + nop.to_bytes(4, "big"), "unaligned"),
    ])  # fmt: skip
    straight = filtered.StraightCode(image)
    assert straight.check(0x1000, 2) is None
    assert straight.check(0x1000, 3) == (GapReason.MISMATCH, 0x1008)
    assert straight.check(0x100C, 2) == (GapReason.UNDEFINED, 0x1010)
    assert straight.check(0x1014, 3) is None  # on into the adjacent region
    assert straight.check(0x1014, 4) == (GapReason.NO_CODE, 0x1020)
    assert straight.check(0x0FFC, 1) == (GapReason.NO_CODE, 0x0FFC)
    assert straight.check(0x2004, 1) is None and straight.check(0x2004, 2) == (GapReason.NO_CODE, 0x2008)
    assert straight.words(0x1014, 3).tolist() == [nop, nop, nop]
