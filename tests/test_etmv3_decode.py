"""ETMv3 instructions: the real TC2 trace against DS-5's decode, and runs recorded from the
corpus programs, encoded into ETM packets by the test encoder, decoded and compared with the
recording (cycle-accurate or not, alternative branch encoding, exceptions with and without
cancel, trace off and on, overflow, timestamps, packet errors)."""

from __future__ import annotations

import lzma
import random
import re
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from ds5_listing import read_ds5_listing
from etm_encoder import EtmEncoder, Step, encode_run, format_frames
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from paths import DATA

import cputrace
from cputrace.cli import cli
from cputrace.errors import TraceFormatError, UsageError
from cputrace.flow.ops import Op
from cputrace.formats.base import DecodeContext
from cputrace.formats.coresight import capture
from cputrace.formats.coresight.capture import open_captures
from cputrace.formats.coresight.decoder import decode_captures
from cputrace.formats.etmv3.config import EtmConfig
from cputrace.formats.etmv3.ops import new_state, packet_ops
from cputrace.formats.etmv3.packets import HEADER_KINDS, Packets, decode_packets
from cputrace.formats.etmv3.protocol import Flag as PacketFlag
from cputrace.formats.etmv3.protocol import Kind
from cputrace.image import load_elf
from cputrace.ingest import ingest
from cputrace.isa import BlockCache
from cputrace.model import SCHEMAS, TABLES, Flag, Isa
from cputrace.record import record
from cputrace.store.manifest import table_path
from cputrace.store.write import STORED_SCHEMAS

TC2 = DATA / "etmv3" / "tc2"
CORPUS = Path(__file__).parent / "corpus"
# Tarmac exception names -> ETMv3 exception numbers; the cancelling ones
EXCEPTIONS = {"CoreEvent_SWI": 10, "CoreEvent_UndefinedInstr": 9, "CoreEvent_PrefetchAbort": 11}
CANCELLING = {9, 11}


@pytest.fixture(scope="module")
def tc2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The TC2 snapshot with its kernel memory dump (committed xz-compressed)."""
    folder = tmp_path_factory.mktemp("tc2")
    for path in TC2.iterdir():
        if path.is_file() and path.suffix != ".xz":
            shutil.copy(path, folder)
    (folder / "kernel_dump.bin").write_bytes(lzma.decompress((TC2 / "kernel_dump.bin.xz").read_bytes()))
    return folder


@pytest.fixture(scope="module")
def tc2_store(tc2: Path, tmp_path_factory: pytest.TempPathFactory) -> cputrace.Trace:
    result = ingest([tc2 / "snapshot.ini"], tmp_path_factory.mktemp("store") / "s.ctrace", strict=True)
    return cputrace.Trace(result.store)


# --- the real trace -----------------------------------------------------------------------------


def test_tc2_source_0x10_equals_ds5(tc2: Path, tmp_path: Path) -> None:
    """Every instruction of source 0x10 (address, opcode, executed) and its cycle count are
    DS-5's; so are the cycles of each trace-off period and the timestamps."""
    listing = read_ds5_listing(TC2 / "ds5-dumps" / "etmv3_0x10.txt.xz")
    result = ingest([tc2 / "snapshot.ini"], tmp_path / "s.ctrace", strict=True, options={"source": 0x10})
    t = cputrace.Trace(result.store)
    rows = t.sql("SELECT pc, opcode, executed, cycles, flags FROM instructions ORDER BY seq").to_pylist()
    want = [(r.address, r.opcode, not r.failed, r.cycles) for r in listing.instructions]
    got = [(r["pc"], r["opcode"], r["executed"], r["cycles"]) for r in rows]
    assert got == want
    assert (len(got), sum(not r[2] for r in got), sum(r[3] for r in got)) == (7205, 455, 24968)
    assert all(r["flags"] == Flag.RECONSTRUCTED for r in rows)
    events = t.sql("SELECT kind, name, value, value1 FROM events ORDER BY seq").to_pylist()
    trace_on = [e["value1"] for e in events if e["kind"] == "trace_on" and e["name"] == "trace_on"]
    assert trace_on == listing.cycle_counts
    stamps = [e["value"] for e in events if e["kind"] == "timestamp"]
    assert stamps[1:] == listing.timestamps  # DS-5 leaves out the one before the first I-sync
    assert sum(e["kind"] == "exception_return" for e in events) == 5
    assert not [e for e in events if e["kind"] == "trace_gap"]


def test_tc2_all_sources_decode_without_errors(tc2_store: cputrace.Trace) -> None:
    """The three ETMv3 sources and the PTM source that traced (0x13, core 3; 0x14 has no
    bytes); the PTM's walk leaves the kernel dump 16 times, where OpenCSD reports as many
    inaccessible addresses (ADDR_NACC)."""
    counts = tc2_store.sql(
        "SELECT cpu, count(*) AS n FROM instructions GROUP BY cpu ORDER BY cpu"
    ).to_pylist()
    assert [r["n"] for r in counts] == [7205, 7471, 1947, 9548]
    gaps = tc2_store.sql("SELECT cpu, name, count(*) AS n FROM events WHERE kind = 'trace_gap' GROUP BY ALL")
    assert gaps.to_pylist() == [{"cpu": 3, "name": "no_code", "n": 16}]
    seqs = tc2_store.sql("SELECT count(DISTINCT seq) AS d, count(*) AS n FROM instructions").to_pylist()[0]
    assert seqs["d"] == seqs["n"]  # one seq order over the three interleaved sources


def test_cores_that_dump_the_same_memory_share_one_program(tc2: Path) -> None:
    """TC2's cores all dump the one kernel image: it is decoded once for the three sources."""
    programs: dict = {}
    for _ in decode_captures(open_captures(tc2 / "snapshot.ini", {}), DecodeContext(), programs):
        pass
    assert len(programs) == 1


def test_a_source_without_trace_needs_no_memory(tc2: Path, tmp_path: Path) -> None:
    """A snapshot source with no bytes in the buffer (its trace ID is not there) decodes to
    nothing, even when its core's memory dump is missing; the others decode as ever."""
    edits = {"device_7.ini": ("=0x00000012", "=0x00000015"), "cpu_2.ini": ("kernel_dump.bin", "gone.bin")}
    for path in tc2.iterdir():
        if path.name in edits:
            (tmp_path / path.name).write_text(path.read_text().replace(*edits[path.name]))
        else:
            (tmp_path / path.name).symlink_to(path)
    t = cputrace.Trace(ingest([tmp_path / "snapshot.ini"], tmp_path / "s.ctrace", strict=True).store)
    counts = t.sql("SELECT cpu, count(*) AS n FROM instructions GROUP BY cpu ORDER BY cpu").to_pylist()
    assert [(r["cpu"], r["n"]) for r in counts] == [(0, 7205), (1, 7471), (3, 9548)]


def test_timestamps_give_instruction_times(tc2_store: cputrace.Trace) -> None:
    """Instructions take the time of the last timestamp before them."""
    rows = tc2_store.sql(
        "SELECT min(time) AS lo, max(time) AS hi, count(time) AS n FROM instructions WHERE cpu = 0"
    ).to_pylist()[0]
    assert rows["lo"] == 562536959293 and rows["n"] == 7205
    assert rows["hi"] <= 562537011402


def test_cli_ingest_and_list(tc2: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    store = str(tmp_path / "s.ctrace")
    result = runner.invoke(cli, ["ingest", str(tc2 / "snapshot.ini"), "--source", "0x10", "-o", store])
    assert result.exit_code == 0, result.output
    listed = runner.invoke(cli, ["list", store, "--limit", "3"])
    assert listed.exit_code == 0 and "c002115c" in listed.output.lower()


def test_ingest_takes_a_snapshot_folder_as_its_snapshot_ini(
    tc2: Path, tc2_store: cputrace.Trace, tmp_path: Path
) -> None:
    """`ingest FOLDER` of a snapshot reads its snapshot.ini, as `etm packets FOLDER` does (it was
    refused: "is a directory"); a folder without one is bad usage naming it."""
    store = tmp_path / "s.ctrace"
    result = CliRunner().invoke(cli, ["ingest", str(tc2), "--strict", "-o", str(store)])
    assert result.exit_code == 0, result.output
    assert cputrace.Trace(store).instructions.equals(tc2_store.instructions)
    empty = tmp_path / "empty"
    empty.mkdir()
    refused = CliRunner().invoke(cli, ["ingest", str(empty), "-o", str(tmp_path / "t.ctrace")])
    assert refused.exit_code == 2 and f"{empty} is a folder without a snapshot.ini" in refused.output


def test_a_snapshot_without_its_memory_dump_is_decoded_without_it_or_refused_strictly(tmp_path: Path) -> None:
    """As OpenCSD's lister reads such a snapshot: the dump left out with a warning naming it,
    so no instruction can be found (the walk's gaps say where); --strict refuses it, naming
    the device file's line, and leaves nothing behind."""
    snapshot = tmp_path / "tc2"
    shutil.copytree(TC2, snapshot, ignore=shutil.ignore_patterns("kernel_dump.bin*"))
    ini, store = str(snapshot / "snapshot.ini"), tmp_path / "s"
    named = r"cpu_\d\.ini:11: dump of kernel_dump\.bin at 0xc0008000: no such file"
    result = CliRunner().invoke(cli, ["ingest", ini, "-o", str(store)])
    assert result.exit_code == 0 and re.search(named, result.stderr)
    trace = cputrace.Trace(store)
    assert trace.sql("SELECT count(*) AS n FROM instructions").to_pylist() == [{"n": 0}]
    assert trace.sql("SELECT count(*) AS n FROM events WHERE name = 'no_code'").to_pylist()[0]["n"] > 0
    strict = CliRunner().invoke(cli, ["ingest", ini, "--strict", "-o", str(tmp_path / "t")])
    assert strict.exit_code == 1 and re.search(named, strict.stderr)
    assert not (tmp_path / "t").exists()


def test_a_truncated_buffer_is_a_warning_or_refused_strictly(tc2: Path, tmp_path: Path) -> None:
    """TC2's buffer cut at 777 bytes: 48 whole 16-byte formatter frames and 9 bytes of a 49th,
    and in those frames source 0x10's bytes (from offset 0x18) hold no A-sync. Each was decoded
    in silence, 0 instructions, exit 0 even with --strict: now each is a warning naming its
    offset, and --strict refuses the cut frame, leaving nothing behind."""
    snapshot = tmp_path / "tc2"
    shutil.copytree(tc2, snapshot)
    (snapshot / "cstrace.bin").write_bytes((tc2 / "cstrace.bin").read_bytes()[:777])
    ini = str(snapshot / "snapshot.ini")
    result = CliRunner().invoke(cli, ["ingest", ini, "-o", str(tmp_path / "s")])
    assert result.exit_code == 0 and "2 warnings" in result.stderr
    assert "cstrace.bin:offset 0x300: expected whole formatter frames, got 9 bytes" in result.stderr
    assert "cstrace.bin:offset 0x18 (source 0x10): no sync in its 692 bytes: nothing decoded" in result.stderr
    strict = CliRunner().invoke(cli, ["ingest", ini, "--strict", "-o", str(tmp_path / "t")])
    assert strict.exit_code == 1
    assert "cstrace.bin:offset 0x300: expected whole formatter frames" in strict.stderr
    assert not (tmp_path / "t").exists()


def test_the_snapshot_as_shipped_reads_its_compressed_dump(tc2_store: cputrace.Trace, tmp_path: Path) -> None:
    """tests/data holds kernel_dump.bin as kernel_dump.bin.xz only (as the README's example
    ingests it): the same rows as from the decompressed dump."""
    assert not (TC2 / "kernel_dump.bin").exists()
    shipped = cputrace.Trace(ingest([TC2 / "snapshot.ini"], tmp_path / "s.ctrace", strict=True).store)
    assert shipped.instructions.equals(tc2_store.instructions)


def test_the_source_option_is_read_as_a_number_in_any_base(tc2_store: cputrace.Trace, tmp_path: Path) -> None:
    """`--option source=0x11` (a string) picks the source `--source 0x11` does; a value that is no
    trace ID is bad usage naming the option (it was a ValueError from a format code)."""
    given = ingest([TC2 / "snapshot.ini"], tmp_path / "s.ctrace", options={"source": "0x11"})
    picked = cputrace.Trace(given.store).sql("SELECT pc, cpu FROM instructions ORDER BY seq").to_pylist()
    cpus = {r["cpu"] for r in picked}
    assert len(cpus) == 1 and picked == tc2_store.sql(
        f"SELECT pc, cpu FROM instructions WHERE cpu = {cpus.pop()} ORDER BY seq"
    ).to_pylist()
    with pytest.raises(UsageError, match=r"^option source: expected a number, got 'none'$"):
        ingest([TC2 / "snapshot.ini"], tmp_path / "t.ctrace", options={"source": "none"})
    args = ["ingest", str(TC2 / "snapshot.ini"), "--option", "source=none", "-o", str(tmp_path / "t.ctrace")]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2 and "option source: expected a number, got 'none'" in result.stderr
    assert not (tmp_path / "t.ctrace").exists()


@pytest.mark.parametrize("cut", [None, 8192])
def test_a_bare_buffer_decodes_every_source_in_one_seq_order(
    tc2: Path, tc2_store: cputrace.Trace, tmp_path: Path, cut: int | None
) -> None:
    """The TC2 buffer given bare, without `source`: instructions stored numbered 0, 1, 2, ...
    across the switches between trace IDs (they were stored out of order at one: fuzz crasher
    etmv3-3362fc3ef7a5, the buffer's first 8 KiB), every other table in seq order, and each
    ETMv3 source's instructions those of the snapshot's decode."""
    buffer = tmp_path / "cstrace.bin"
    buffer.write_bytes((tc2 / "cstrace.bin").read_bytes()[:cut])
    options = {"etmcr": "0x10001860", "etmidr": "0x410CF250", "etmccer": "0x344008F2"}
    images = [f"{tc2 / 'kernel_dump.bin'}@0xC0008000"]
    store = ingest([buffer], tmp_path / "s.ctrace", format="coresight", options=options, images=images).store
    seq = pq.read_table(table_path(store, "instructions"), columns=["seq"]).column("seq").to_numpy()
    assert np.array_equal(seq, np.arange(len(seq))) and len(seq) > 1000
    for table in ("registers", "memory", "events"):  # at most the seq the next instruction would have
        rows = pq.read_table(table_path(store, table), columns=["seq"]).column("seq").to_numpy()
        assert np.all(np.diff(rows) >= 0) and np.all(rows <= len(seq)), table
    if cut is None:
        t = cputrace.Trace(store)
        bare = [_pcs(t, cpu) for cpu in (0x10, 0x11, 0x12)]  # a bare buffer's core number is its trace ID
        assert sorted(bare) == sorted(_pcs(tc2_store, cpu) for cpu in (0, 1, 2))  # the ETMv3 cores


def _pcs(trace: cputrace.Trace, cpu: int) -> list[int]:
    return trace.sql(f"SELECT pc FROM instructions WHERE cpu = {cpu} ORDER BY seq").column("pc").to_pylist()


# --- recorded runs, encoded ----------------------------------------------------------------------


def recorded(program: str, tmp_path: Path) -> list[Step]:
    """The run of a corpus program as steps, with the exceptions it took."""
    record(CORPUS / program, tmp_path / "run.tarmac")
    t = cputrace.Trace(ingest([tmp_path / "run.tarmac"], tmp_path / "run.ctrace", strict=True).store)
    rows = t.sql("SELECT seq, pc, isa, executed FROM instructions ORDER BY seq").to_pylist()
    taken = {
        e["seq"]: EXCEPTIONS[e["name"]]
        for e in t.sql("SELECT seq, name FROM events WHERE kind = 'exception'").to_pylist()
        if e["name"] in EXCEPTIONS
    }
    return [
        Step(r["pc"], r["isa"], r["executed"], taken.get(r["seq"]), taken.get(r["seq"]) in CANCELLING)
        for r in rows
    ]


def registers(enc: EtmEncoder) -> dict[str, int]:
    """Ingest options: the ETM registers for what `enc` produces (timestamps on, binary)."""
    etmidr = 0x4100F250 | (enc.alt_branch << 20)
    return {"etmcr": (enc.cycle_accurate << 12) | (1 << 28), "etmidr": etmidr, "etmccer": 0x10000000}


def decoded(
    enc: EtmEncoder, program: str, tmp_path: Path, strict: bool = True
) -> tuple[list[tuple], list[str]]:
    stream = tmp_path / "etm.bin"
    stream.write_bytes(enc.data)
    options = {**registers(enc), "buffer_format": "source_data"}
    result = ingest([stream], tmp_path / "etm.ctrace", format="coresight", strict=strict, options=options,
                    images=[CORPUS / program])  # fmt: skip
    t = cputrace.Trace(result.store)
    rows = t.sql("SELECT pc, isa, executed, flags, cycles, time FROM instructions ORDER BY seq").to_pylist()
    got = [(r["pc"], r["isa"], r["executed"], bool(r["flags"] & Flag.CANCELLED), r["cycles"], r["time"])
           for r in rows]  # fmt: skip
    events = [e["kind"] for e in t.sql("SELECT kind FROM events ORDER BY seq, src").to_pylist()]
    return got, events


def blocks_of(program: str) -> BlockCache:
    return BlockCache(load_elf(CORPUS / program))


@pytest.mark.parametrize("program", ["calls-t32.elf", "calls-a32.elf", "exceptions-a32.elf"])
@pytest.mark.parametrize(
    "mode",
    [{"cycle_accurate": True}, {"cycle_accurate": False}, {"cycle_accurate": True, "alt_branch": True}],
)
def test_encoded_runs_decode_to_the_recording(program: str, mode: dict, tmp_path: Path) -> None:
    steps = recorded(program, tmp_path)
    enc = EtmEncoder(**mode).a_sync()
    expected = encode_run(enc, steps, blocks_of(program), rng=random.Random(7), timestamp_every=50)
    got, events = decoded(enc, program, tmp_path)
    assert got == expected.rows
    assert events == expected.events
    assert len(got) > 100


def test_p_headers_full_of_atoms_make_an_op_each() -> None:
    """Non-cycle-accurate P-headers carry up to 16 atoms: an ATOM op each, in order, and each
    packet knows how many ops the packets before it made."""
    enc = EtmEncoder().a_sync().i_sync(0x8000).atoms(("E" * 15 + "N") * 500)
    packets = decode_packets(enc.data, EtmConfig(0x10000000, 0x4100F250, 0x10000000))
    built = packet_ops(packets, new_state(), cycle_accurate=False)
    atoms = built.ops.kind == Op.ATOM
    assert atoms.sum() == 16 * 500 > 2 * len(packets.table)
    assert built.ops.flags[atoms].tolist() == ([1] * 15 + [0]) * 500
    assert (built.ops.kind[0], built.ops.address[0]) == (Op.SYNC, 0x8000)
    assert built.before.tolist() == np.searchsorted(built.packet, np.arange(len(packets.table))).tolist()


def test_context_id_and_vmid_changes_are_events(tmp_path: Path) -> None:
    """The I-sync's context ID, then each change of context ID or VMID (repeats are not)."""
    steps = recorded("calls-a32.elf", tmp_path)
    enc = EtmEncoder(context_id_bytes=2).a_sync()
    expected = encode_run(enc, steps[:50], blocks_of("calls-a32.elf"))
    enc.context_id(0x1234).context_id(0x1234).vmid(3).vmid(3).context_id(0x99).vmid(4)
    stream = tmp_path / "etm.bin"
    stream.write_bytes(enc.data)
    options = {**registers(enc), "buffer_format": "source_data"}
    options["etmcr"] |= (2 << 14) | (1 << 30)  # 2-byte context IDs, VMID
    result = ingest([stream], tmp_path / "c.ctrace", format="coresight", strict=True, options=options,
                    images=[CORPUS / "calls-a32.elf"])  # fmt: skip
    t = cputrace.Trace(result.store)
    rows = t.sql("SELECT name, value, seq FROM events WHERE kind = 'context' ORDER BY seq, src").to_pylist()
    last = len(expected.rows) - 1
    assert [(r["name"], r["value"]) for r in rows] == [
        ("context_id", 0), ("context_id", 0x1234), ("vmid", 3), ("context_id", 0x99), ("vmid", 4)
    ]
    assert [r["seq"] for r in rows][1:] == [last] * 4


def test_exceptions_cancel_the_instruction_they_interrupt(tmp_path: Path) -> None:
    steps = recorded("exceptions-a32.elf", tmp_path)
    assert {s.exception for s in steps} >= {9, 10, 11}
    enc = EtmEncoder(cycle_accurate=True).a_sync()
    expected = encode_run(enc, steps, blocks_of("exceptions-a32.elf"), rng=random.Random(1))
    got, _ = decoded(enc, "exceptions-a32.elf", tmp_path)
    cancelled = [r for r in got if r[3]]
    assert cancelled and all(not r[2] for r in cancelled)
    assert len(cancelled) == sum(s.cancels for s in steps)
    assert got == expected.rows


def test_trace_off_and_overflow_resume_at_their_i_sync(tmp_path: Path) -> None:
    steps = recorded("calls-t32.elf", tmp_path)
    resumes = {100: (140, 1), 400: (460, 2)}  # stop after step 100, resume at 140; overflow at 400
    enc = EtmEncoder(cycle_accurate=True).a_sync()
    expected = encode_run(enc, steps, blocks_of("calls-t32.elf"), rng=random.Random(3), off=resumes.get)
    got, events = decoded(enc, "calls-t32.elf", tmp_path)
    assert got == expected.rows
    assert len(got) == len(steps) - 39 - 59
    assert events == expected.events and events.count("overflow") == 1 and events.count("trace_on") == 3


def test_an_i_sync_with_a_load_store_in_progress(tmp_path: Path) -> None:
    """LSiP: the load/store at the I-sync address ran; the trace goes on at the address after."""
    steps = recorded("calls-t32.elf", tmp_path)
    blocks = blocks_of("calls-t32.elf")
    m = next(
        i for i in range(300, len(steps))
        if blocks.insn_at(steps[i - 1].pc, Isa[steps[i - 1].isa]).is_load and steps[i - 1].isa == steps[i].isa
    )  # fmt: skip
    enc = EtmEncoder(cycle_accurate=True).a_sync()
    expected = encode_run(enc, steps, blocks, rng=random.Random(5), off={200: (m, 1, True)}.get)
    got, events = decoded(enc, "calls-t32.elf", tmp_path)
    assert got == expected.rows
    assert (got[201][0], got[201][2], got[202][0]) == (steps[m - 1].pc, True, steps[m].pc)
    assert events.count("trace_on") == 2


def test_a_packet_error_is_a_gap_until_the_next_i_sync(tmp_path: Path) -> None:
    steps = recorded("calls-a32.elf", tmp_path)
    reserved = next(b for b in range(256) if HEADER_KINDS[b] == Kind.ERROR)
    blocks = blocks_of("calls-a32.elf")
    enc = EtmEncoder(cycle_accurate=False).a_sync()
    first = encode_run(enc, steps[:200], blocks)
    enc.raw(bytes([reserved, 0x55, 0x66])).a_sync()
    second = encode_run(enc, steps[300:], blocks)
    got, events = decoded(enc, "calls-a32.elf", tmp_path, strict=False)
    assert got == first.rows + second.rows
    assert events.count("trace_gap") == 1 and events.count("trace_on") == 2
    assert cputrace.Trace(tmp_path / "etm.ctrace").manifest["warnings"]["count"] == 1


def test_an_indirect_branch_without_its_address_loses_the_place(tmp_path: Path) -> None:
    """Atoms after an indirect branch whose address packet is missing are not guessed."""
    steps = recorded("calls-a32.elf", tmp_path)
    blocks = blocks_of("calls-a32.elf")
    enc = EtmEncoder().a_sync()
    branch, dropped = enc.branch, []

    def drop_one(address: int, isa: str | None = None, **kw) -> EtmEncoder:
        if dropped or kw.get("exception") is not None:
            return branch(address, isa, **kw)
        dropped.append(address)
        return enc

    enc.branch = drop_one  # type: ignore[method-assign]
    encode_run(enc, steps, blocks)
    assert dropped
    got, events = decoded(enc, "calls-a32.elf", tmp_path)
    assert "trace_gap" in events
    assert len(got) < len(steps)


def well_formed(batches: list[dict], packets: Packets) -> dict[str, pa.Table]:
    """The decode's tables, checked: each batch in the model's schema with no nulls where the
    store allows none; each table in seq order; no more instructions than the packets' atoms
    (and LSiP I-syncs), no more packet-error gaps than error and skipped-bytes packets."""
    tables = {}
    for name in TABLES:
        parts = [b[name] for b in batches if name in b]
        for part in parts:
            assert part.schema.equals(SCHEMAS[name])
            for field in STORED_SCHEMAS[name]:
                assert field.nullable or part.column(field.name).null_count == 0
        tables[name] = pa.concat_tables(parts) if parts else SCHEMAS[name].empty_table()
        assert np.all(np.diff(tables[name]["seq"].to_numpy()) >= 0)
    kinds, lsip = packets["kind"], packets["flags"] & PacketFlag.LSIP
    atoms = int(packets["count"][kinds == Kind.P_HEADER].sum()) + int(np.count_nonzero(lsip))
    seqs = tables["instructions"]["seq"].to_numpy()
    assert len(seqs) <= atoms and np.array_equal(seqs, np.arange(len(seqs)))
    breaks = int(np.count_nonzero((kinds == Kind.ERROR) | (kinds == Kind.UNSYNCED)))
    names = tables["events"]["name"].to_pylist()
    assert names.count("error") + names.count("unsynced") <= breaks
    return tables


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=200))
def test_any_bytes_after_an_i_sync_decode_or_fail_cleanly(data: bytes, tmp_path: Path) -> None:
    """Lenient: well-formed tables, a warning per packet error; strict: the first packet error
    fails the decode, and nothing else does."""
    enc = EtmEncoder(cycle_accurate=True).a_sync().i_sync(0x8000, "A32", 1, cycles=0)
    stream = tmp_path / "etm.bin"
    stream.write_bytes(enc.data + data)
    options = {**registers(enc), "buffer_format": "source_data"}
    config = EtmConfig(options["etmcr"], options["etmidr"], options["etmccer"])
    packets = decode_packets(enc.data + data, config)
    errors = int(np.count_nonzero(packets["kind"] == Kind.ERROR))
    image = load_elf(CORPUS / "calls-a32.elf")
    ctx = DecodeContext(options=options, image=image)
    well_formed(list(decode_captures(open_captures(stream, options), ctx)), packets)
    assert ctx.warnings == errors
    strict = DecodeContext(strict=True, options=options, image=image)
    if errors:
        with pytest.raises(TraceFormatError, match=rf"{stream}:offset 0x[0-9a-f]+: expected "):
            list(decode_captures(open_captures(stream, options), strict))
    else:
        list(decode_captures(open_captures(stream, options), strict))


def test_strict_stops_at_the_first_packet_error(tmp_path: Path) -> None:
    """A reserved header (0x3e) after two instructions: --strict names the buffer, the offset and
    what was expected; lenient keeps going (a warning, a trace gap, the trace after the next
    A-sync and I-sync)."""
    enc = EtmEncoder().a_sync().i_sync(0x8000, "A32", 1).atoms("EE")
    bad = len(enc.data)
    enc.raw(b"\x3e\x00\x00").a_sync().i_sync(0x8000, "A32", 1).atoms("EE")
    stream = tmp_path / "etm.bin"
    stream.write_bytes(enc.data)
    args = ["ingest", str(stream), "--format", "coresight", "--etmcr", "0", "--buffer-format", "source_data",
            "--image", str(CORPUS / "calls-a32.elf")]  # fmt: skip
    strict = CliRunner().invoke(cli, [*args, "--strict", "-o", str(tmp_path / "strict.ctrace")])
    assert strict.exit_code == 1
    assert f"{stream}:offset 0x{bad:x}: expected an ETMv3 packet header, got '3e'" in strict.stderr
    assert not (tmp_path / "strict.ctrace").exists()
    lenient = ingest([stream], tmp_path / "lenient.ctrace", format="coresight", options={
        "etmcr": 0, "buffer_format": "source_data"}, images=[CORPUS / "calls-a32.elf"])  # fmt: skip
    assert lenient.manifest["warnings"]["count"] == 1
    assert f"offset 0x{bad:x}" in lenient.manifest["warnings"]["samples"][0]
    t = cputrace.Trace(lenient.store)
    assert t.manifest["counts"]["instructions"] == 4
    gaps = t.sql("SELECT name, src FROM events WHERE kind = 'trace_gap'").to_pylist()
    assert gaps == [{"name": "error", "src": bad}]


def test_a_formatted_source_error_names_its_trace_id(tmp_path: Path) -> None:
    enc = EtmEncoder().a_sync().i_sync(0x8000, "A32", 1).atoms("EE").raw(b"\x3e")
    buffer = tmp_path / "etb.bin"
    buffer.write_bytes(format_frames([(0x21, enc.data)]))
    options = {"etmcr": 0, "buffer_format": "coresight"}
    with pytest.raises(TraceFormatError, match=r"etb\.bin:offset 0x[0-9a-f]+ \(source 0x21\): expected an "):
        ingest([buffer], tmp_path / "s.ctrace", format="coresight", strict=True, options=options,
               images=[CORPUS / "calls-a32.elf"])  # fmt: skip


def nops(tmp_path: Path, count: int = 16) -> str:
    """An image of `count` A32 NOPs at 0x8000 (its --image spec)."""
    code = tmp_path / "nops.bin"
    code.write_bytes(bytes.fromhex("00f020e3") * count)
    return f"{code}@0x8000"


def test_triggers_and_cycle_counts_are_events(tmp_path: Path) -> None:
    """A trigger packet is a `trigger` event. A cycle-count packet is the trace-off time of the
    trace-on I-sync before it that had none (the architecture: its Ws go before the most recent
    non-periodic I-sync), as OpenCSD reports it: cycles of no instruction, a `trace_on` event
    `cycle_count` (0: the counter overflowed, not known). Instruction cycles and the trace-on
    events' value1 add up to every cycle the stream counts."""
    enc = EtmEncoder(cycle_accurate=True).a_sync().i_sync(0x8000, "A32", 1, cycles=5)
    enc.ca_format1(3, False).trigger()  # three instructions (a cycle each), then the trigger
    enc.ca_format3(4, False)  # four cycles and no instruction: the trace stops
    enc.i_sync(0x8000, "A32", 1).cycle_count(77)  # on again; the time it was off comes after
    enc.ca_format1(2, False).cycle_count(0)  # two more; a count that overflowed
    stream = tmp_path / "etm.bin"
    stream.write_bytes(enc.data)
    options = {"etmcr": 1 << 12, "buffer_format": "source_data"}
    result = ingest([stream], tmp_path / "s.ctrace", format="coresight", strict=True, options=options,
                    images=[nops(tmp_path)])  # fmt: skip
    t = cputrace.Trace(result.store)
    cycles = t.sql("SELECT cycles FROM instructions ORDER BY seq").column("cycles").to_pylist()
    assert cycles == [1] * 5
    events = t.sql("SELECT seq, kind, name, value1 FROM events ORDER BY seq, src").to_pylist()
    assert [tuple(e.values()) for e in events] == [
        (0, "trace_on", "trace_on", 5), (2, "trigger", "trigger", None), (2, "trace_on", "trace_on", 4),
        (2, "trace_on", "cycle_count", 77), (4, "trace_on", "cycle_count", None),
    ]  # fmt: skip
    assert sum(cycles) + sum(e["value1"] or 0 for e in events) == 5 + 3 + 4 + 77 + 2  # what the encoder sent
    args = ["etm", "packets", str(stream), "--etmcr", str(1 << 12), "--format", "csv"]
    listed = CliRunner().invoke(cli, args)
    kinds = [line.split(",")[4] for line in listed.output.splitlines()[1:]]
    assert (kinds.count("trigger"), kinds.count("cycle_count")) == (1, 2)


def test_a_bare_buffer_without_an_image_is_a_clear_error(tmp_path: Path) -> None:
    stream = tmp_path / "etm.bin"
    stream.write_bytes(EtmEncoder().a_sync().i_sync(0x8000, "A32", 1).atoms("EEN").data)
    args = [
        "ingest",
        str(stream),
        "--format",
        "etmv3",
        "--etmcr",
        "0x10000000",
        "--buffer-format",
        "source_data",
    ]
    result = CliRunner().invoke(cli, [*args, "-o", str(tmp_path / "s")])
    assert result.exit_code == 1 and "--image" in result.stderr


def test_the_deprecated_exception_encoding(tmp_path: Path) -> None:
    """ETMv3.0's byte-5 exception form (ARM state only, no SVC or Undef code): each exception
    of the run sent as an IRQ to the same ARM vector decodes to the same instructions."""
    steps = recorded("exceptions-a32.elf", tmp_path)
    enc = EtmEncoder().a_sync()
    branch = enc.branch

    def deprecated(address: int, isa: str | None = None, *, exception: int | None = None, **kw) -> EtmEncoder:
        if exception is None or isa != "A32":
            return branch(address, isa, exception=exception, **kw)
        return enc.deprecated_exception(address, 1, kw.get("cancel", False))  # code 1: IRQ

    enc.branch = deprecated  # type: ignore[method-assign]
    expected = encode_run(enc, steps, blocks_of("exceptions-a32.elf"))
    got, _ = decoded(enc, "exceptions-a32.elf", tmp_path)
    assert got == expected.rows
    store = cputrace.Trace(tmp_path / "etm.ctrace")
    names = store.sql("SELECT name FROM events WHERE kind = 'exception'").column("name").to_pylist()
    assert names and set(names) == {"IRQ"}


def test_a_buffer_read_in_chunks_decodes_the_same(
    tc2: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A buffer that fits in one chunk is split by trace ID once; a longer one is read once per
    source, in chunks: the same store either way (TC2's 32 KiB buffer read in 4 KiB chunks)."""
    whole = ingest([tc2 / "snapshot.ini"], tmp_path / "whole.ctrace", strict=True)
    monkeypatch.setattr(capture, "CHUNK_BYTES", 4096)
    chunked = ingest([tc2 / "snapshot.ini"], tmp_path / "chunked.ctrace", strict=True)
    for table in ("instructions", "events", "memory"):
        a, b = cputrace.Trace(whole.store), cputrace.Trace(chunked.store)
        query = f"SELECT * FROM {table} ORDER BY seq, src"
        assert a.sql(query).to_pylist() == b.sql(query).to_pylist(), table
