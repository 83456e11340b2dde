"""ETMv4 instructions and events of real snapshots, against OpenCSD 1.8.0's decode of the same
snapshots (`reference/*.ppl.xz`) and, for juno_r1_1's source 0x11, against Arm DS-5's.

Every instruction range (first and last address, count, the last instruction's size and
whether it executed), exception (number, preferred return address), exception return,
trace-on and timestamp is compared, source by source. Snapshots whose code the dumps do not
hold decode to no instruction in either decoder; their events are compared all the same."""

from __future__ import annotations

import functools
import random
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from click.testing import CliRunner
from etmv4_encoder import Etmv4Encoder, encode_run, encoded_snapshot, recorded_a64
from opencsd_reference import Check, Decode, nullable, range_disagreements, read_reference
from paths import open_input, shared
from test_etmv3_decode import CORPUS, blocks_of

import cputrace
from cputrace.cli import cli
from cputrace.coresight.packets import PACKET, Packets
from cputrace.flow.ops import EXCEPTION_NO_VECTOR, NO_TIME, WAYPOINT_BEFORE_ADDRESS, WAYPOINT_TAKEN, Op
from cputrace.flow.program import Program
from cputrace.formats.coresight.capture import open_captures, source_packets
from cputrace.formats.etmv4.instructions import Etmv4SourceWalk
from cputrace.formats.etmv4.ops import new_state, packet_ops
from cputrace.formats.etmv4.protocol import Flag, Kind
from cputrace.ingest import ingest
from cputrace.model import Isa


def snapshot_file(*parts: str) -> Path:
    """A file of the reference decoder's snapshots, in the shared corpus: a test without it is
    skipped (failed in CI) when it asks, not the module when it is collected."""
    return shared("opencsd-snapshots", *parts)


@dataclass(frozen=True)
class Source:
    snapshot: str
    trace_id: int
    cpu: int
    stops: int | None = None  # the reference stopped decoding here (a fatal error, its listing says)


SOURCES = {
    **{f"juno_r1_1-0x{0x10 + i:02x}": Source("juno_r1_1", 0x10 + i, i) for i in range(6)},
    "bugfix-exact-match": Source("bugfix-exact-match", 0x12, 1),
    "a57_single_step": Source("a57_single_step", 0x10, 0),
    "init-short-addr": Source("init-short-addr", 0, 0),
    "armv8_1m_branches": Source("armv8_1m_branches", 0, 0),  # Cortex-M55: WLS and LE loops
    # These three name dump files the corpus does not hold: decoded without them (a warning
    # each), the walk finds no instruction, as OpenCSD's decode finds none (ADDR_NACC)
    "juno-uname-001": Source("juno-uname-001", 0x10, 0),
    **{f"juno-ret-stck-0x{0x10 + i:02x}": Source("juno-ret-stck", 0x10 + i, i) for i in range(6)},
    # OpenCSD stops at its second bad sequence ("Data Path fatal error ... processed 516
    # bytes"); cputrace resynchronises and goes on: compared up to there
    "a55-test-tpiu": Source("a55-test-tpiu", 0x01, 0, stops=516),
}
"""The sources to compare."""



@functools.cache
def store_of(snapshot: str) -> cputrace.Trace:
    """Not strict: the dumps hold a fraction of the code the trace runs through, and the
    walk loses its place wherever it leaves them (as OpenCSD's does: ADDR_NACC), which a
    strict ingest takes for the image of another program."""
    return open_input(snapshot_file(snapshot, "snapshot.ini"))


@functools.cache
def _reference(snapshot: str) -> dict[int, Decode]:
    return read_reference(snapshot_file("reference", f"{snapshot}.ppl.xz"))


def reference_of(source: Source) -> Decode:
    return _reference(source.snapshot).get(source.trace_id, Decode())


def rows(trace: cputrace.Trace, query: str) -> list[tuple]:
    return [tuple(r.values()) for r in trace.sql(query).to_pylist()]


def disagreements(instructions: pa.Table, reference: Decode) -> list[str]:
    """Where the instructions (pc, size, isa, executed; in seq order) and the reference's
    ranges differ: each range is its count of instructions in sequence from its start to its
    end, of its ISA, its last one with its size and whether it executed (an instruction the
    trace passes in sequence, not a branch, may have it unknown: null)."""
    isa = instructions["isa"].combine_chunks().dictionary_encode()
    isa = np.array(isa.dictionary.to_pylist() or [""])[isa.indices.to_numpy()]
    executed, known = nullable(instructions["executed"])

    def checks(first: np.ndarray, last: np.ndarray, within: np.ndarray, ranges: np.ndarray) -> list[Check]:
        def isas(i: int) -> str:
            return f"ISA {sorted(set(isa[first[i] : last[i] + 1].tolist()))}, expected {ranges['isa'][i]}"

        def executions(i: int) -> str:
            ours = bool(executed[last[i]]) if known[last[i]] else None
            return f"executed {ours}, expected {ranges['executed'][i]}"

        other_isa = np.zeros(len(ranges), np.bool_)
        other_isa[within[isa[: len(within)] != np.repeat(ranges["isa"], ranges["count"])]] = True
        as_listed = known[last] & (executed[last] == ranges["executed"])
        return [(other_isa, isas), (~as_listed & (known[last] | (ranges["last"] != "---")), executions)]

    address, size = (instructions[name].to_numpy() for name in ("pc", "size"))
    return range_disagreements(address, size, reference.ranges, checks)


@pytest.mark.parametrize("name", SOURCES)
def test_instructions_are_the_reference_decoders(name: str) -> None:
    source = SOURCES[name]
    trace, reference = store_of(source.snapshot), reference_of(source)
    query = f"SELECT pc, size, isa, executed FROM instructions WHERE cpu = {source.cpu} ORDER BY seq"
    instructions = trace.sql(query)
    assert disagreements(instructions, reference) == []
    assert instructions.num_rows == reference.instructions


@pytest.mark.parametrize("name", SOURCES)
def test_events_are_the_reference_decoders(name: str) -> None:
    """Exceptions (number, preferred return address), exception returns, trace-ons and
    timestamps, in order, each from the reference's packet: its `Idx` is the packet's byte in
    a raw stream; in a formatted buffer it can fall short of it by the frame's ID bytes, so
    our packet's offset is within the 16 bytes from it (as test_etmv4_packets compares)."""
    source = SOURCES[name]
    trace, reference = store_of(source.snapshot), reference_of(source)

    def ours(kind: str, columns: str) -> list[tuple]:
        where = f"cpu = {source.cpu} AND kind = '{kind}'"
        if source.stops is not None:
            where += f" AND src < {source.stops}"
        return rows(trace, f"SELECT src, {columns} FROM events WHERE {where} ORDER BY seq, src")

    def theirs(kind: str, *fields: str) -> list[tuple]:
        return [(e.index, *(getattr(e, f) for f in fields)) for e in reference.of(kind)]

    for kind, columns, fields in (
        ("exception", "number, value", ("value", "address")), ("exception_return", "kind", ()),
        ("trace_on", "kind", ()), ("timestamp", "value", ("value",)),
    ):  # fmt: skip
        mine, listed = ours(kind, columns), theirs(kind, *fields)
        assert len(mine) == len(listed), kind
        for (src, *values), (index, *expected) in zip(mine, listed, strict=True):
            assert 0 <= src - index < 16, f"{kind} from the packet at {src}, expected at {index}"
            assert values[: len(expected)] == expected, f"{kind} at {src}"


DS5_REPORT = ("juno_r1_1", "ds-5-dumps", "Trace_Report_0x11_cpu_1_2015Sep17_104748.txt")
DS5_INSTRUCTION = re.compile(r"EL\w+:0x([0-9A-F]+)\t([0-9A-F]{8})\t")


def test_juno_source_0x11_is_ds5s_instruction_for_instruction() -> None:
    """DS-5's Trace Report of source 0x11 lists the instructions whose code the dump holds
    (`Cannot access target memory` for the others). The one difference: before `Return from
    exception` it lists 11 of the 20 instructions that the E atom of packet 6038 covers (up to
    the ERET at 0xFFFFFFC000083DF8, a branch and so a P0 instruction in IHI 0064), leaving out
    the last 9; OpenCSD decodes all 20, as we do."""
    report = [DS5_INSTRUCTION.match(line) for line in snapshot_file(*DS5_REPORT).read_text().splitlines()]
    theirs = [(int(m[1], 16), int(m[2], 16)) for m in report if m]
    ours = rows(store_of("juno_r1_1"), "SELECT pc, opcode FROM instructions WHERE cpu = 1 ORDER BY seq")
    left_out = [(0xFFFFFFC000083DD8 + 4 * i) for i in range(9)]
    at = ours.index((0xFFFFFFC000083DD4, 0xA8C13FEE)) + 1
    assert [pc for pc, _ in ours[at : at + 9]] == left_out
    assert ours[at + 8][1] == 0xD69F03E0  # eret
    assert ours[:at] + ours[at + 9 :] == theirs


# The op builder on hand-made packets: speculation as the architecture resolves it (IHI 0064:
# speculative execution; the commit, cancel and mispredict packets).


def packet_table(*packets: dict) -> Packets:
    table = np.zeros(len(packets), PACKET)
    table["cycles"] = -1
    for i, fields in enumerate(packets):
        table["offset"][i] = i
        for name, value in fields.items():
            table[name][i] = value
    return Packets(table, np.zeros(0, np.uint8), 0)


def atoms(pattern: str) -> dict:
    """An atom packet: E and N, oldest first."""
    bits = sum(1 << i for i, a in enumerate(pattern) if a == "E")
    return {"kind": Kind.ATOM, "atoms": bits, "count": len(pattern), "info": 6}


TRACE_INFO = {"kind": Kind.TRACE_INFO}


def address(value: int) -> dict:
    return {"kind": Kind.ADDRESS_LONG, "address": value, "isa": Isa.A64}


def built(*packets: dict, max_speculation: int = 0) -> list[tuple]:
    """(op kind, flags, address, packet offset) of each op the packets make."""
    state, queue = new_state()
    table = packet_table(*packets)
    returns = np.zeros(len(table), np.uint64)
    made = packet_ops(table, state, queue, returns, return_stack=False, max_speculation=max_speculation).ops
    return [(Op(k).name, int(f), int(a), int(s)) for k, f, a, s in zip(
        made.kind, made.flags, made.address, made.src, strict=True)]  # fmt: skip


E, N = ("WAYPOINT", WAYPOINT_TAKEN), ("WAYPOINT", 0)


def test_without_speculation_each_element_is_committed_as_it_comes() -> None:
    assert built(atoms("EN"), TRACE_INFO, atoms("EN"), address(0x1000), atoms("E")) == [
        (*E, 0, 2), (*N, 0, 2), ("TARGET", 0, 0x1000, 3), (*E, 0, 4),
    ]  # fmt: skip


def test_commit_cancel_and_mispredict_resolve_the_speculative_elements() -> None:
    commit = {"kind": Kind.COMMIT}
    ops = built(
        TRACE_INFO, atoms("EN"), address(0x1000), atoms("E"),  # E N [0x1000] E waiting
        {**commit, "value": 1},  # E
        {"kind": Kind.CANCEL, "info": 1, "value": 1},  # the newest E goes, and 0x1000 after N
        {"kind": Kind.MISPREDICT},  # N was E
        atoms("N"), {**commit, "value": 2},  # E N
        max_speculation=8,
    )  # fmt: skip
    assert ops == [(*E, 0, 1), (*E, 0, 1), (*N, 0, 7)]


def test_an_exception_runs_to_its_preferred_return_address_then_waits_for_its_vector() -> None:
    exception = {"kind": Kind.EXCEPTION, "exception": 0xE}
    assert built(TRACE_INFO, exception, address(0x2004), address(0x8000), atoms("E")) == [
        ("WAYPOINT", WAYPOINT_BEFORE_ADDRESS, 0x2004, 1), ("EXCEPTION", EXCEPTION_NO_VECTOR, 0, 1),
        ("TARGET", 0, 0x8000, 3), (*E, 0, 4),
    ]  # fmt: skip
    branch_target = {**exception, "info": 0b10}  # the address is also the last branch's target
    assert built(TRACE_INFO, branch_target, address(0x2004))[0] == ("TARGET", 0, 0x2004, 1)


def test_an_error_stops_the_walk_until_the_next_trace_info() -> None:
    error = {"kind": Kind.ERROR, "info": 1}
    assert built(TRACE_INFO, atoms("E"), error, atoms("E"), TRACE_INFO, atoms("N")) == [
        (*E, 0, 1), ("GAP", 0, 0, 2), (*N, 0, 5),
    ]  # fmt: skip


def test_a_cycle_count_is_the_last_committed_atoms_and_a_timestamp_the_time_after_it() -> None:
    state, queue = new_state()
    table = packet_table(
        TRACE_INFO, atoms("EN"), {"kind": Kind.CYCLE_COUNT, "cycles": 7},
        {"kind": Kind.TIMESTAMP, "value": 1234}, atoms("E"),
    )  # fmt: skip
    made = packet_ops(table, state, queue, np.zeros(len(table), np.uint64), return_stack=False,
                      max_speculation=0).ops  # fmt: skip
    assert made.cycles.tolist() == [NO_TIME, 7, NO_TIME]
    assert made.time.tolist() == [NO_TIME, NO_TIME, 1234]


def test_q_discard_and_trace_on_stop_the_walk_until_an_address() -> None:
    q = {"kind": Kind.Q, "value": 12, "flags": Flag.Q_ADDRESS, "address": 0x3000, "isa": Isa.A64}
    ops = built(TRACE_INFO, atoms("E"), q, atoms("N"), {"kind": Kind.DISCARD}, {"kind": Kind.TRACE_ON},
                address(0x4000), atoms("N"))  # fmt: skip
    assert ops == [
        (*E, 0, 1), ("GAP", 0, 0, 2), ("TARGET", 0, 0x3000, 2), (*N, 0, 3), ("GAP", 0, 0, 4),
        ("GAP", 0, 0, 5), ("TARGET", 0, 0x4000, 6), (*N, 0, 7),
    ]  # fmt: skip


@pytest.mark.parametrize("name", ["juno_r1_1-0x10", "juno_r1_1-0x13", "juno_r1_1-0x15"])  # with exceptions
def test_an_exception_cut_from_its_address_packet_by_a_batch_end_keeps_its_return_address(name: str) -> None:
    """Every batch ends right after an exception packet, before the address packet that
    completes it: each exception still has the reference's number, preferred return address
    and packet."""
    source = SOURCES[name]
    (capture,) = open_captures(snapshot_file(source.snapshot, "snapshot.ini"))
    etm, batches = next((etm, b) for etm, b in source_packets(capture) if etm.trace_id == source.trace_id)
    packets = Packets.concatenate(list(batches))
    walk = Etmv4SourceWalk(etm, Program(capture.snapshot.memory(etm.core, lambda dump: None)))
    cuts = np.flatnonzero(packets["kind"] == Kind.EXCEPTION) + 1
    parts = [Packets(packets.table[a:b], packets.stream, packets.stream_pos)
             for a, b in zip([0, *cuts], [*cuts, len(packets)], strict=True)]  # fmt: skip
    events = [b["events"] for part in parts for b in walk.batch(part) if "events" in b]
    events += [b["events"] for b in walk.finish() if "events" in b]
    table = pa.concat_tables(events)
    exceptions = table.filter(pc.equal(table["kind"], "exception"))
    mine = list(zip(*(exceptions[c].to_pylist() for c in ("src", "number", "value")), strict=True))
    theirs = [(e.index, e.value, e.address) for e in reference_of(source).of("exception")]
    assert len(cuts) == len(theirs) > 0
    assert [(number, value) for _, number, value in mine] == [(n, a) for _, n, a in theirs]
    assert all(0 <= src - index < 16 for (src, *_), (index, *_) in zip(mine, theirs, strict=True))


ENCODED_MODES = {  # what encode_run is given, and what the trace unit's registers then say
    "plain": {},
    "speculative": {"speculation": 16},
    "speculative, cycle counts": {"speculation": 12, "cycle_counting": True, "threshold": 4},
    "speculative, return stack": {"speculation": 8, "return_stack": True},
    "speculative, Q elements": {"speculation": 16, "q_every": 20},
}
@pytest.mark.parametrize("program", ["calls-a64.elf", "exceptions-a64.elf"])
@pytest.mark.parametrize("mode", ENCODED_MODES)
def test_encoded_speculative_runs_decode_to_the_recording(program: str, mode: str, tmp_path: Path) -> None:
    """A corpus program's recorded run (unicorn), encoded by the test's ETMv4 encoder with the
    speculation of a guessing core (wrong-way atoms mispredicted, wrong-path atoms cancelled,
    commits at random, as cycle counts in one mode), Q elements and the return stack: every
    instruction of the run, each waypoint executed as the run went, with its cycles; each Q
    element a trace gap with its instruction count; each exception with its type and preferred
    return address, each exception return."""
    settings = ENCODED_MODES[mode]
    steps = recorded_a64(CORPUS / program, tmp_path)
    enc = Etmv4Encoder().a_sync().trace_info(cycle_counting=settings.get("cycle_counting", False),
                                             threshold=settings.get("threshold", 0))  # fmt: skip
    expected = encode_run(enc, steps, blocks_of(program), rng=random.Random(11), **settings)
    calls = program == "calls-a64.elf"  # exceptions-a64 runs 129 instructions, calls-a64 thousands
    if settings.get("speculation") and calls:
        assert expected.mispredicts > 20 and expected.cancels > 20
    assert (expected.returns_from_stack > 10) == (settings.get("return_stack", False) and calls)
    assert bool(expected.q_counts) == bool(settings.get("q_every")) or not calls
    assert len(expected.exceptions) == expected.exception_returns == (0 if calls else 5)
    snapshot = encoded_snapshot(tmp_path / "snapshot", enc.data, settings)
    trace = cputrace.Trace(ingest([snapshot], tmp_path / "encoded.ctrace", strict=True,
                                  images=[CORPUS / program]).store)  # fmt: skip
    assert rows(trace, "SELECT pc, executed, cycles FROM instructions ORDER BY seq") == expected.rows
    q_gaps = rows(trace, "SELECT number FROM events WHERE kind = 'trace_gap' AND name = 'q' ORDER BY seq")
    assert q_gaps == [(count,) for count in expected.q_counts]
    exceptions = rows(trace, "SELECT number, value FROM events WHERE kind = 'exception' ORDER BY seq")
    assert exceptions == expected.exceptions
    returns = rows(trace, "SELECT count(*) FROM events WHERE kind = 'exception_return'")
    assert returns == [(expected.exception_returns,)]


def test_a_damaged_trace_gives_each_exception_and_q_element_once_in_seq_order(tmp_path: Path) -> None:
    """A speculative trace damaged so that its walk loses its place around an exception (a fuzz
    campaign's input, tests/data/etmv4-damaged/README.md) ingests in seq order, with one
    exception event per exception packet and one gap per Q packet, as `etm packets` lists
    them: the events of a source's packet batches and of its walk were merged batch by batch,
    which gave the exception twice, one gap after a later seq (an internal error from the
    store writer) and lost the last Q element's gap."""
    snapshot = tmp_path / "snapshot"
    shutil.copytree(Path(__file__).parents[1] / "fuzz" / "corpus" / "etmv4-speculative", snapshot)
    damaged = Path(__file__).parent / "data" / "etmv4-damaged" / "speculative-trace.bin"
    shutil.copy(damaged, snapshot / "trace.bin")
    listing = CliRunner().invoke(cli, ["etm", "packets", str(snapshot / "snapshot.ini")])
    assert listing.exit_code == 0, listing.output
    packets = [line.split() for line in listing.output.splitlines() if line.startswith("0x")]
    exception_packets = sum(1 for fields in packets if "exception" in fields)
    q_packets = sum(1 for fields in packets if "q" in fields)
    assert (exception_packets, q_packets) == (1, 66)
    result = ingest([snapshot / "snapshot.ini"], tmp_path / "s.ctrace", images=[CORPUS / "calls-a64.elf"])
    with cputrace.open(result.store) as trace:
        events = trace.events.select(["seq", "kind", "text"]).to_pylist()
    seqs = [event["seq"] for event in events]
    assert seqs == sorted(seqs)
    assert sum(1 for event in events if event["kind"] == "exception") == exception_packets
    q_gaps = [e for e in events if e["kind"] == "trace_gap" and e["text"].startswith("Q element")]
    assert len(q_gaps) == q_packets
