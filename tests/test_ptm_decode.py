"""PTM (PFT v1.0, v1.1) instructions and events of real snapshots, against OpenCSD 1.8.0's
decode of the same snapshots (`reference/*.ppl.xz`): Snowball (PFT 1.0, cycle-accurate, with
timestamps), tc2-ptm-rstk-t32 (PFT 1.1, Thumb code, return stack), trace_cov_a15 and TC2's two
PTM sources beside its three ETMv3 ones. Every instruction range (addresses, count, the last
instruction's size, executed and cycle count), exception, exception return, trace-on and
timestamp is compared, with the packet each comes from."""

from __future__ import annotations

import functools
import lzma
import random
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from opencsd_reference import RANGE, Check, Decode, nullable, range_disagreements, read_reference
from paths import DATA, open_input, shared
from ptm_encoder import PtmEncoder, encode_run
from test_etmv3_decode import CORPUS, blocks_of, recorded

import cputrace
from cputrace.coresight.packets import Packets
from cputrace.coresight.snapshot import read_snapshot
from cputrace.flow.ops import LOSS_NAMES
from cputrace.formats.coresight.capture import open_captures, source_packets
from cputrace.formats.ptm.config import PtmConfig
from cputrace.formats.ptm.protocol import KIND_NAMES, Kind
from cputrace.ingest import ingest


@dataclass(frozen=True)
class Source:
    snapshot: tuple[str, ...]  # under the shared corpus
    reference: str  # the .ppl.xz under opencsd-snapshots/reference
    trace_id: int
    cpu: int
    packets_id: int  # the trace ID the lister gives its packets: 0 in a raw stream
    gray: bool = False  # PFT v1.0 timestamps: Gray-coded, which the reference reads as binary


SOURCES = {
    "Snowball-0x10": Source(("opencsd-snapshots", "Snowball"), "Snowball", 0x10, 0, 0x10, gray=True),
    "Snowball-0x11": Source(("opencsd-snapshots", "Snowball"), "Snowball", 0x11, 1, 0x11, gray=True),
    "tc2-ptm-rstk-t32": Source(("opencsd-snapshots", "tc2-ptm-rstk-t32"), "tc2-ptm-rstk-t32", 0x02, 0, 0),
    "trace_cov_a15": Source(("opencsd-snapshots", "trace_cov_a15"), "trace_cov_a15", 0x02, 0, 0),
    "TC2-0x13": Source(("tc2-etmv3",), "TC2", 0x13, 3, 0x13),
    "TC2-0x14": Source(("tc2-etmv3",), "TC2", 0x14, 4, 0x14),
}
LISTER_NAMES = {
    "ASYNC": Kind.A_SYNC, "ISYNC": Kind.I_SYNC, "ATOM": Kind.ATOM, "BRANCH_ADDRESS": Kind.BRANCH,
    "WP_UPDATE": Kind.WAYPOINT_UPDATE, "TRIGGER": Kind.TRIGGER, "CTXTID": Kind.CONTEXT_ID, "VMID": Kind.VMID,
    "TIMESTAMP": Kind.TIMESTAMP, "ERET": Kind.EXCEPTION_RETURN, "IGNORE": Kind.IGNORE,
}  # fmt: skip
"""The packet lister's names of PFT packets (NOTSYNC, its unsynchronised bytes, aside)."""


def store_of(source: Source) -> cputrace.Trace:
    return open_input(shared(*source.snapshot, "snapshot.ini"), strict=True)


@functools.cache
def _reference(name: str) -> dict[int, Decode]:
    return read_reference(shared("opencsd-snapshots", "reference", f"{name}.ppl.xz"))


def reference_of(source: Source) -> Decode:
    return _reference(source.reference).get(source.trace_id, Decode())


@functools.cache
def packets_of(name: str) -> Packets:
    """Our packets of a source (all of them, as `cputrace etm packets` lists them)."""
    source = SOURCES[name]
    captures = open_captures(shared(*source.snapshot, "snapshot.ini"), {"source": source.trace_id})
    batches = [batch for capture in captures for _, decoded in source_packets(capture) for batch in decoded]
    return Packets.concatenate(batches)


def packet_numbers(name: str) -> tuple[dict[int, int], dict[int, int]]:
    """Where each packet starts, in ours and in the reference's listing, to its position among
    the source's synchronised packets (the two listings cut unsynchronised bytes differently).
    The packet is what both decoders agree on, not its byte index: after a formatter frame's
    ID byte the lister indexes the next source byte one too low (Snowball 0x10's atom packet
    0xCA 0x01 at byte 1274 is `Idx:1273`)."""
    ours = packets_of(name)
    synced = [int(o) for o, k in zip(ours["offset"], ours["kind"], strict=True) if k != Kind.UNSYNCED]
    source = SOURCES[name]
    listed = _reference(source.reference).get(source.packets_id, Decode()).packets
    theirs = [p.index for p in listed if p.name != "NOTSYNC"]
    return {o: n for n, o in enumerate(synced)}, {i: n for n, i in enumerate(theirs)}


@pytest.mark.parametrize("name", SOURCES)
def test_packets_are_the_reference_decoders(name: str) -> None:
    """The same packets, kind and bytes, in the same order (unsynchronised bytes aside)."""
    ours = packets_of(name)
    source = SOURCES[name]
    listed = _reference(source.reference).get(source.packets_id, Decode()).packets
    theirs = [(KIND_NAMES[LISTER_NAMES[p.name]], p.raw) for p in listed if p.name != "NOTSYNC"]
    mine = [(KIND_NAMES[k], ours.raw(i)) for i, k in enumerate(ours["kind"]) if k != Kind.UNSYNCED]
    assert mine == theirs


def rows(trace: cputrace.Trace, query: str) -> list[tuple]:
    return [tuple(r.values()) for r in trace.sql(query).to_pylist()]


def disagreements(instructions: pa.Table, reference: Decode, name: str) -> list[str]:
    """Where the instructions (pc, size, executed, cycles, src; in seq order) and the
    reference's ranges differ: each range is its count of instructions in sequence from its
    start to its end, from its packet, the last one with its size, executed and cycles, the
    others without cycles."""
    ours, theirs = packet_numbers(name)
    src = instructions["src"].to_numpy()
    packet = np.array([ours.get(offset, -1) for offset in src.tolist()], np.int64)
    executed, known = nullable(instructions["executed"])
    cycles, counted = nullable(instructions["cycles"])

    def checks(first: np.ndarray, last: np.ndarray, within: np.ndarray, ranges: np.ndarray) -> list[Check]:
        def packets(i: int) -> str:
            return f"from packets at {sorted(set(src[first[i] : last[i] + 1].tolist()))}"

        def executions(i: int) -> str:
            if ranges["last"][i] == "---":
                return "its last instruction did not execute"
            ours = bool(executed[last[i]]) if known[last[i]] else None
            return f"executed {ours}, expected {ranges['executed'][i]}"

        def counts(i: int) -> str:
            span = slice(first[i], last[i] + 1)
            run = np.where(counted[span], cycles[span], None).tolist()
            return f"cycles {run}, expected {ranges['cycles'][i]} on the last"

        listed = np.array([theirs[index] for index in ranges["index"].tolist()], np.int64)
        other_packet = np.zeros(len(ranges), np.bool_)
        other_packet[within[packet[: len(within)] != np.repeat(listed, ranges["count"])]] = True
        update = ranges["last"] == "---"  # a waypoint update's last instruction: executed, or not known
        as_listed = known[last] & (executed[last] == ranges["executed"])
        wrong_execution = np.where(update, known[last] & ~executed[last], ~as_listed)
        not_last = np.ones(len(within), np.bool_)
        not_last[last] = False
        early = np.zeros(len(ranges), np.bool_)  # cycles on an instruction before a range's last
        early[within[counted[: len(within)] & not_last]] = True
        wrong_cycles = np.where(counted[last], cycles[last], -1) != ranges["cycles"]
        return [(other_packet, packets), (wrong_execution, executions), (wrong_cycles | early, counts)]

    address, size = (instructions[column].to_numpy() for column in ("pc", "size"))
    return range_disagreements(address, size, reference.ranges, checks)


@pytest.mark.parametrize("name", SOURCES)
def test_instructions_are_the_reference_decoders(name: str) -> None:
    source = SOURCES[name]
    trace, reference = store_of(source), reference_of(source)
    query = f"SELECT pc, size, executed, cycles, src FROM instructions WHERE cpu = {source.cpu} ORDER BY seq"
    instructions = trace.sql(query)
    assert disagreements(instructions, reference, name) == []
    assert instructions.num_rows == reference.instructions


def from_gray(value: int) -> int:
    """A Gray-coded number in natural binary: bit i is the parity of bits i and up."""
    return sum(1 << i for i in range(64) if bin(value >> i).count("1") % 2)


def trace_ons(trace: cputrace.Trace, cpu: int) -> list[tuple]:
    """The trace-on events OpenCSD reports: I-syncs whose reason is not periodic, and the first
    I-sync after the start or after a packet error (not after the walk lost its place: that
    waits for an address, not an I-sync). As (packet, cycles)."""
    events = rows(trace, f"SELECT kind, name, value1, src FROM events WHERE cpu = {cpu} ORDER BY seq, src")
    found, resync = [], True
    for kind, name, cycles, src in events:
        if kind == "trace_gap" and name not in LOSS_NAMES:
            resync = True
        elif kind == "trace_on" and name != "cycle_count":
            if resync or name != "periodic":
                found.append((src, cycles))
            resync = False
    return found


@pytest.mark.parametrize("name", SOURCES)
def test_events_are_the_reference_decoders(name: str) -> None:
    """Exceptions (number, cycles), exception returns, trace-ons (cycles since the trace
    stopped) and timestamps (value, cycles), each from the same packet as the reference's."""
    source = SOURCES[name]
    trace, reference = store_of(source), reference_of(source)
    our_packet, their_packet = packet_numbers(name)

    def ours(kind: str, columns: str) -> list[tuple]:
        where = f"cpu = {source.cpu} AND kind = '{kind}'"
        found = rows(trace, f"SELECT src, {columns} FROM events WHERE {where} ORDER BY seq, src")
        return [(our_packet[src], *rest) for src, *rest in found]

    def theirs(kind: str, *fields: str) -> list[tuple]:
        return [(their_packet[e.index], *(getattr(e, f) for f in fields)) for e in reference.of(kind)]

    assert ours("exception", "number, value1") == theirs("exception", "value", "cycles")
    assert ours("exception_return", "number") == [(*e, None) for e in theirs("exception_return")]
    timestamps = theirs("timestamp", "value", "cycles")
    if source.gray:  # the reference's values are the raw Gray codes (docs/formats.md, PTM)
        timestamps = [(packet, from_gray(value), cycles) for packet, value, cycles in timestamps]
    assert ours("timestamp", "value, value1") == timestamps
    assert [(our_packet[src], c) for src, c in trace_ons(trace, source.cpu)] == theirs("trace_on", "cycles")


@pytest.mark.parametrize("name", ["Snowball-0x10", "Snowball-0x11"])
def test_pft_1_0_timestamps_are_gray_coded(name: str) -> None:
    """PFT v1.0 timestamps are Gray-coded (ARM IHI 0035B, chapter 3, ETMCCER bit 28: the choice
    of natural binary comes with v1.1). Read so, Snowball's rise through the trace of each core, as
    time does; read as natural binary (OpenCSD 1.8.0) they go back and forth."""
    source = SOURCES[name]
    values = [v for (v,) in rows(store_of(source), f"SELECT value FROM events WHERE kind = 'timestamp' "
                                                   f"AND cpu = {source.cpu} ORDER BY seq, src")]  # fmt: skip
    assert len(values) > 5 and values == sorted(values)
    raw = [e.value for e in reference_of(source).of("timestamp")]
    assert raw != sorted(raw)


def test_the_reference_covers_what_is_compared() -> None:
    """The comparisons above compare something: ranges with cycle counts, exceptions and
    exception returns, timestamps, waypoint updates, return-stack returns and Thumb code."""
    decodes = [reference_of(s) for s in SOURCES.values()]
    ranges = np.concatenate([d.ranges for d in decodes])
    elements = [e for d in decodes for e in d.elements]
    assert ranges["count"].sum() > 200_000
    assert set(ranges["isa"].tolist()) == {"A32", "T32"}
    assert (ranges["cycles"] > 0).any() and (ranges["last"] == "---").any()
    assert {e.kind for e in elements} == {"exception", "exception_return", "trace_on", "timestamp"}


def test_a_return_with_no_address_takes_the_return_stacks() -> None:
    """tc2-ptm-rstk-t32 traces returns (indirect branches with an E atom and no branch
    address) that only the return stack resolves; OpenCSD follows them, and so does the walk."""
    source = SOURCES["tc2-ptm-rstk-t32"]
    ranges = reference_of(source).ranges
    within_packet = np.append(ranges["index"][1:] == ranges["index"][:-1], False)  # not its packet's last
    returns = within_packet & (ranges["last"] == "iBR") & ranges["executed"]
    assert np.count_nonzero(returns) > 1000  # indirect branches taken within an atom packet: from the stack
    trace = store_of(source)
    assert rows(trace, "SELECT count(*) FROM events WHERE kind = 'trace_gap'") == [(0,)]


# --- snapshots: which source reads which buffer ---------------------------------------------------


@pytest.mark.parametrize("snapshot", ["tc2-ptm-rstk-t32", "trace_cov_a15"])
def test_a_source_not_listed_gets_no_other_sources_buffer(snapshot: str) -> None:
    """These DS-5 snapshots list one buffer, for PTM_0_2, and keep the device files of the
    other trace sources (three ETMv3 and another PTM) that traced nothing: only PTM_0_2 is
    decoded, with its own registers."""
    folder = shared("opencsd-snapshots", snapshot)
    read = read_snapshot(folder)
    assert [d.name for d in read.sources if read.buffer_of(d) is not None] == ["PTM_0_2"]
    captures = open_captures(folder / "snapshot.ini")
    assert [(c.path.name, [s.name for s in c.sources]) for c in captures] == [("PTM_0_2.bin", ["PTM_0_2"])]
    config = captures[0].sources[0].config
    assert isinstance(config, PtmConfig) and config.return_stack and config.minor_version == 1


def test_the_only_buffer_still_serves_a_snapshot_that_lists_none(tmp_path: Path) -> None:
    """Without [source_buffers] entries the one buffer is every source's."""
    folder = shared("opencsd-snapshots", "trace_cov_a15")
    for path in folder.iterdir():
        (tmp_path / path.name).symlink_to(path)
    trace_ini = (folder / "trace.ini").read_text().replace("PTM_0_2=PTM_0_2", "")
    (tmp_path / "trace.ini").unlink()
    (tmp_path / "trace.ini").write_text(trace_ini)
    read = read_snapshot(tmp_path)
    assert all(read.buffer_of(d) is not None for d in read.sources)


# --- recorded runs, encoded ----------------------------------------------------------------------

MODES = {
    "plain": {},
    "cycle-accurate": {"cycle_accurate": True},
    "return-stack": {"return_stack": True},
    "branch-broadcast": {"broadcast": True},
    "all": {"cycle_accurate": True, "return_stack": True, "broadcast": True},
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("program", ["calls-t32.elf", "calls-a32.elf"])
def test_encoded_runs_decode_to_the_recording(program: str, mode: str, tmp_path: Path) -> None:
    """A corpus program's recorded run (unicorn), encoded by the test's PTM encoder and given
    as a bare raw stream with the registers of the mode: every instruction of the run, each
    waypoint executed as the run went, with its cycles; the return stack answers returns."""
    settings = MODES[mode]
    steps = recorded(program, tmp_path)
    enc = PtmEncoder(cycle_accurate=settings.get("cycle_accurate", False)).a_sync()
    expected = encode_run(enc, steps, blocks_of(program), return_stack=settings.get("return_stack", False),
                          broadcast=settings.get("broadcast", False), rng=random.Random(3))  # fmt: skip
    assert settings.get("return_stack", False) == (expected.returns_from_stack > 10)
    stream = tmp_path / "ptm.bin"
    stream.write_bytes(enc.data)
    etmcr = (settings.get("cycle_accurate", False) << 12) | (settings.get("return_stack", False) << 29)
    etmcr |= settings.get("broadcast", False) << 8
    options = {"etmcr": etmcr, "etmidr": 0x411CF312, "etmccer": 0, "buffer_format": "source_data"}
    result = ingest([stream], tmp_path / "ptm.ctrace", format="coresight", strict=True, options=options,
                    images=[CORPUS / program])  # fmt: skip
    query = "SELECT pc, isa, executed, cycles FROM instructions ORDER BY seq"
    assert rows(cputrace.Trace(result.store), query) == expected.rows


DMB_WAYPOINTS = {  # snapshot, its PTM device files, the sources and their cores
    "Snowball": (("opencsd-snapshots", "Snowball"), ("device_2.ini", "device_3.ini"), {0x10: 0, 0x11: 1}),
    "TC2": (("tc2-etmv3",), ("device_8.ini", "device_9.ini"), {0x13: 3}),
}


def listed_ranges(name: str) -> dict[int, np.ndarray]:
    """The ranges of tests/data/ptm-dmb-waypoints (README there) by trace ID, as RANGE records:
    packet index, first address, end address, instructions, and the last one's size and
    whether it executed."""
    with lzma.open(DATA / "ptm-dmb-waypoints" / f"{name}.ranges.xz", "rt") as listing:
        lines = [line.split() for line in listing]
    ranges: dict[int, list[tuple]] = {}
    for trace_id, index, start, end, count, _, executed, size in lines:
        ranges.setdefault(int(trace_id, 16), []).append(
            (int(index), int(start, 16), int(end, 16), int(count), int(size), "", executed == "1", "", -1)
        )
    return {trace_id: np.array(listed, RANGE) for trace_id, listed in ranges.items()}


def listed_disagreements(instructions: pa.Table, ranges: np.ndarray) -> list[str]:
    """Where the instructions (pc, size, executed; in seq order) and `listed_ranges` differ:
    each range is its count of instructions in sequence from its start to its end, the last
    one with its size and whether it executed (known)."""
    executed, known = nullable(instructions["executed"])

    def checks(first: np.ndarray, last: np.ndarray, within: np.ndarray, listed: np.ndarray) -> list[Check]:
        def executions(i: int) -> str:
            ours = bool(executed[last[i]]) if known[last[i]] else None
            return f"executed {ours}, expected {listed['executed'][i]}"

        return [(~(known[last] & (executed[last] == listed["executed"])), executions)]

    address, size = (instructions[column].to_numpy() for column in ("pc", "size"))
    return range_disagreements(address, size, ranges, checks)


@pytest.mark.parametrize("name", DMB_WAYPOINTS)
def test_dmb_and_dsb_are_waypoints_when_etmccer_bit_24_says_so(name: str, tmp_path: Path) -> None:
    """The snapshot's PTMs given ETMCCER bit 24: every instruction range (addresses, count, the
    last one's size and whether it executed) is OpenCSD's decode of the same snapshot, and not
    what it decodes to without the bit."""
    where, devices, sources = DMB_WAYPOINTS[name]
    snapshot = tmp_path / name
    shutil.copytree(shared(*where), snapshot)
    for device in devices:
        text = (snapshot / device).read_text()
        etmccer = re.search(r"ETMCCER\([^)]*\)=(0x[0-9A-Fa-f]+)", text)
        assert etmccer is not None
        (snapshot / device).write_text(text.replace(etmccer[1], f"0x{int(etmccer[1], 16) | 1 << 24:08X}"))
    trace = open_input(snapshot / "snapshot.ini", strict=True)
    for trace_id, ranges in listed_ranges(name).items():
        query = f"SELECT pc, size, executed FROM instructions WHERE cpu = {sources[trace_id]} ORDER BY seq"
        assert listed_disagreements(trace.sql(query), ranges) == [], f"source 0x{trace_id:x}"
        plain = next(s for s in SOURCES.values() if s.snapshot == where and s.trace_id == trace_id)
        assert reference_of(plain).ranges[["start", "end"]].tolist() != ranges[["start", "end"]].tolist()
