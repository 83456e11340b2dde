"""CoreSight formatter frames and snapshot directories (shared by every CoreSight protocol)."""

from __future__ import annotations

import contextlib
import itertools
import random
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from click.testing import CliRunner
from etm_encoder import FULL_SYNC, format_frames, port_capture
from hypothesis import given, settings
from hypothesis import strategies as st
from paths import DATA, shared

from cputrace.cli import cli
from cputrace.coresight.events import in_seq_order
from cputrace.coresight.frames import Deformatter, deformat
from cputrace.coresight.snapshot import read_snapshot
from cputrace.coresight.sniff import is_snapshot_ini, sniff_layout
from cputrace.errors import CputraceError
from cputrace.formats.base import DecodeContext
from cputrace.formats.coresight import source_walk
from cputrace.formats.coresight.capture import open_captures
from cputrace.formats.coresight.decoder import decode_captures
from cputrace.model import SCHEMAS

TC2 = DATA / "etmv3" / "tc2"  # a copy of ../shared/data/tc2-etmv3 (see its NOTICE)


def _streams(found: dict) -> dict[int, bytes]:
    return {trace_id: bytes(source.data) for trace_id, source in found.items()}


def test_tc2_buffer_sources_and_offsets() -> None:
    buffer = (TC2 / "cstrace.bin").read_bytes()
    found, stats = deformat(buffer)
    assert {k: len(v) for k, v in found.items()} == {0x10: 10873, 0x11: 10619, 0x12: 3153, 0x13: 4533}
    assert stats.frames == len(buffer) // 16
    assert stats.dropped_bytes == 58  # the first frame (before any ID) and the null-ID tail
    raw = np.frombuffer(buffer, dtype=np.uint8)
    for source in found.values():
        offsets = source.offsets
        assert np.all(np.diff(offsets) > 0)
        assert np.all(offsets % 16 != 15)  # never the flag byte
        odd = offsets % 2 == 1
        assert np.array_equal(raw[offsets[odd]], source.data[odd])
        assert np.array_equal(raw[offsets[~odd]] & 0xFE, source.data[~odd] & 0xFE)
    # the first A-sync of source 0x10 sits at buffer offset 0x35a
    at = int(np.searchsorted(found[0x10].offsets, 0x35A))
    assert bytes(found[0x10].data[at : at + 6]) == b"\x00" * 5 + b"\x80"


def test_tc2_chunked_feeding_matches_whole() -> None:
    buffer = (TC2 / "cstrace.bin").read_bytes()
    whole, _ = deformat(buffer)
    deformatter = Deformatter()
    parts: dict[int, list[bytes]] = {}
    cuts = [0, 5, 16, 1000, 1001, 7777, 20000, len(buffer)]
    for start, end in itertools.pairwise(cuts):
        for trace_id, source in deformatter.feed(buffer[start:end], start, final=end == len(buffer)).items():
            parts.setdefault(trace_id, []).append(bytes(source.data))
    assert {k: b"".join(v) for k, v in parts.items()} == _streams(whole)


def test_id_change_flag_gives_the_next_byte_to_the_old_id() -> None:
    # ID 0x10 with data, then at byte 2 an ID change to 0x11 whose flag (bit 1 of byte 15)
    # says byte 3 still belongs to 0x10
    frame = bytes([0x21, 0xA1, 0x23, 0xB3, 0xC4, 0xC5]) + bytes([0x01, 0x00] * 4) + b"\x00" + bytes([0x02])
    found, _ = deformat(frame)
    assert _streams(found) == {0x10: b"\xa1\xb3", 0x11: b"\xc4\xc5"}


def test_data_bit0_comes_from_the_flag_byte() -> None:
    frame = bytes([0x21, 0x10, 0x22, 0x33]) + bytes(10) + b"\x00" + bytes([0b10])
    found, _ = deformat(frame)
    assert bytes(found[0x10].data[:3]) == b"\x10\x23\x33"


@settings(max_examples=150, deadline=None)
@given(
    chunks=st.lists(
        st.tuples(st.sampled_from([0x01, 0x10, 0x11, 0x12, 0x6F]), st.binary(min_size=1, max_size=40)),
        min_size=1, max_size=12,
    ),
    seed=st.integers(0, 2**16),
)  # fmt: skip
def test_frames_round_trip(chunks: list[tuple[int, bytes]], seed: int) -> None:
    """Streams packed into frames by the test formatter come back out, in memory and as a
    port capture with frame syncs, fed whole or in pieces."""
    want: dict[int, bytes] = {}
    for trace_id, data in chunks:
        want[trace_id] = want.get(trace_id, b"") + data
    frames = format_frames(chunks)
    assert _streams(deformat(frames)[0]) == want
    rng = random.Random(seed)
    capture = port_capture(frames, rng)
    found, stats = deformat(capture, "dstream_coresight")
    assert _streams(found) == want
    assert stats.unaligned_bytes == 3 and stats.broken_frames == 0
    deformatter = Deformatter("dstream_coresight")
    parts: dict[int, bytes] = {}
    position = 0
    while position < len(capture):
        step = rng.randint(1, 40)
        piece = capture[position : position + step]
        final = position + step >= len(capture)
        for trace_id, source in deformatter.feed(piece, position, final=final).items():
            parts[trace_id] = parts.get(trace_id, b"") + bytes(source.data)
            assert np.all(np.frombuffer(capture, dtype=np.uint8)[source.offsets] & 0xFE == source.data & 0xFE)
        position += step
    assert parts == want


def test_padding_frames_reset_the_source() -> None:
    body = format_frames([(0x10, b"abcdefgh")])
    found, stats = deformat(body + FULL_SYNC * 4 + body)
    assert _streams(found) == {0x10: b"abcdefgh" * 2}
    assert stats.padding_frames == 1


def test_port_capture_sync_cutting_a_frame_drops_it() -> None:
    frames = format_frames([(0x10, bytes(range(1, 40)))])  # 14, 15 and 10 bytes a frame
    capture = FULL_SYNC + frames[:16] + frames[16:24] + FULL_SYNC + frames[32:]
    found, stats = deformat(capture, "dstream_coresight")
    assert stats.broken_frames == 1
    assert bytes(found[0x10].data) == bytes(range(1, 15)) + bytes(range(30, 40))


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=300), layout=st.sampled_from(["coresight", "dstream_coresight"]))
def test_any_bytes_deformat_without_error(data: bytes, layout: str) -> None:
    found, _ = deformat(data, layout)
    for trace_id, source in found.items():
        assert 0 < trace_id < 0x70
        assert len(source.data) == len(source.offsets)
        assert np.all((source.offsets >= 0) & (source.offsets < len(data)))


def test_sniff_layout() -> None:
    assert sniff_layout(FULL_SYNC + b"\x21") == "dstream_coresight"
    assert sniff_layout(b"\x00" * 5 + b"\x80\x08") == "source_data"
    assert sniff_layout(b"\x00" * 7 + b"\x80\x08") == "source_data"
    assert sniff_layout(b"\x84\xa8\x84\xbc") == "coresight"
    assert sniff_layout(b"\x12\x34" + FULL_SYNC) == "dstream_coresight"
    assert sniff_layout(bytes(16) + FULL_SYNC * 4 + bytes(16)) == "coresight"  # padding frame


def test_tc2_snapshot() -> None:
    snapshot = read_snapshot(TC2)
    assert [d.name for d in snapshot.cores] == ["cpu_0", "cpu_1", "cpu_2", "cpu_3", "cpu_4"]
    assert [(d.name, d.protocol) for d in snapshot.sources] == [
        ("ETM_0", "ETM3"), ("ETM_1", "ETM3"), ("ETM_2", "ETM3"), ("PTM_0", "PTM1"), ("PTM_1", "PTM1"),
        ("ITM_0", "ITM"),
    ]  # fmt: skip
    etm1 = snapshot.device("etm_1")
    assert etm1.registers == {
        "ETMCR": 0x10001860, "ETMIDR": 0x410CF250, "ETMCCER": 0x344008F2, "ETMTRACEIDR": 0x11
    }  # fmt: skip
    core = snapshot.core_of(etm1)
    assert core.name == "cpu_1" and core.type == "Cortex-A7" and snapshot.cpu_of(core) == 1
    buffer = snapshot.buffer_of(etm1)
    assert (buffer.name, buffer.path.name, buffer.format) == ("ETB_0", "cstrace.bin", "coresight")
    assert is_snapshot_ini((TC2 / "snapshot.ini").read_bytes())
    assert not is_snapshot_ini(b"[etm]\netmcr=1\n")


def test_snapshot_core_memory() -> None:
    """The cores' [dump] sections load through cputrace.image (the dump is in the shared corpus)."""
    snapshot = read_snapshot(shared("tc2-etmv3"))
    memory = snapshot.memory(snapshot.cores[1])
    assert memory.read(0xC0008000, 4) == shared("tc2-etmv3", "kernel_dump.bin").read_bytes()[:4]


def test_a_snapshot_reads_its_dumps_once_and_warns_of_a_missing_one_at_every_decode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cores' dump files are mapped at the first decode of a snapshot, not again at the
    next (each decode parsed every core file twice and mapped every dump); a dump that is not
    there is still a warning of each decode, naming its line, and the two decodes agree."""
    from cputrace.coresight import snapshot as snapshot_module

    mapped: list[Path] = []
    real_load = snapshot_module.load_snapshot_dumps
    def load(ini: Path, dumps: list) -> object:
        mapped.append(ini)
        return real_load(ini, dumps)

    monkeypatch.setattr(snapshot_module, "load_snapshot_dumps", load)
    captures = open_captures(TC2)
    first, second = (list(decode_captures(captures, DecodeContext(), {})) for _ in range(2))
    assert len(mapped) == 1 and mapped[0].name == "cpu_0.ini"  # the other cores share cpu_0's image
    assert pa.concat_tables(b["instructions"] for b in first if "instructions" in b).equals(
        pa.concat_tables(b["instructions"] for b in second if "instructions" in b)
    )
    assert sum(b["instructions"].num_rows for b in first if "instructions" in b) > 0
    lacking = tmp_path / "tc2"
    shutil.copytree(TC2, lacking, ignore=shutil.ignore_patterns("kernel_dump.bin*"))
    captures = open_captures(lacking)
    for _ in range(2):
        ctx = DecodeContext()
        list(decode_captures(captures, ctx, {}))
        missing = "cpu_0.ini:11: dump of kernel_dump.bin at 0xc0008000: no such file"
        assert any(missing in warning for warning in ctx.warning_samples)


def test_snapshot_errors(tmp_path: Path) -> None:
    with pytest.raises(CputraceError, match=r"no snapshot\.ini"):
        read_snapshot(tmp_path)
    (tmp_path / "snapshot.ini").write_text("[device_list]\ndevice0=dev.ini\n[trace]\nmetadata=trace.ini\n")
    device = "[device]\nname=ETM_0\nclass=trace_source\ntype=ETM3.3\n"
    (tmp_path / "dev.ini").write_text(device + "[regs]\nETMCR=zz\n")
    with pytest.raises(CputraceError, match=r"dev.ini:6: expected etmcr= a number, got 'zz'"):
        read_snapshot(tmp_path)
    (tmp_path / "dev.ini").write_text(device)
    (tmp_path / "trace.ini").write_text("[trace_buffers]\nbuffers=buffer0\n[buffer0]\nname=ETB\n")
    with pytest.raises(CputraceError, match=r"trace.ini: \[buffer0\] has no file="):
        read_snapshot(tmp_path)


# The TC2 snapshot with one file edited: (file, text replaced, replacement; old None: the whole
# file, new None: the file removed) and what the error says: the file at fault, the line where
# there is one, what was expected. Each was a traceback or a silent acceptance before.
HOSTILE = {
    "unknown format": ("trace.ini", "format=coresight", "format=bogus",
                       r"trace\.ini:7: expected format= coresight, dstream_coresight or source_data, "
                       r"got 'bogus'"),
    "missing buffer": ("trace.ini", "file=cstrace.bin", "file=gone.bin",
                       r"trace\.ini:6: expected file= naming the buffer's file .*gone\.bin is not a file"),
    "buffer is a folder": ("trace.ini", "file=cstrace.bin", "file=.", r"trace\.ini:6: expected file="),
    "empty core file": ("cpu_0.ini", None, "",
                        r"cpu_0\.ini:\[device\]: expected class=core \(\[core_trace_sources\] names "
                        r"cpu_0 the core of ETM_0\), got 'no class="),
    "missing core file": ("cpu_0.ini", None, None,
                          r"snapshot\.ini:5: expected device0= naming a file in .*, got 'cpu_0\.ini'"),
    "device name with NULs": ("snapshot.ini", "device_9.ini", "devi\0\0\1\0.ini",
                              r"snapshot\.ini:14: expected text, got a NUL byte"),
    "device name too long": ("snapshot.ini", "device_9.ini", "x" * 5000,
                             r"snapshot\.ini:14: expected device9= naming a file in .*, got 'xxx"),
    "device name a number": ("snapshot.ini", "device_8.ini", "4294967296",
                             r"snapshot\.ini:13: expected device8= naming a file in .*, got '4294967296'"),
    "missing trace.ini": ("snapshot.ini", "metadata=trace.ini", "metadata=gone.ini",
                          r"snapshot\.ini:18: expected metadata= naming a file in .*, got 'gone\.ini'"),
    "buffer name too long": ("trace.ini", "file=cstrace.bin", "file=" + "x" * 5000,
                             r"trace\.ini:6: expected file="),
    "a line over 1 MiB": ("device_5.ini", "type=ETM3.5", "type=" + "5" * (1 << 20),
                          r"device_5\.ini:4: expected a line of at most 1,048,576 bytes"),
    "ETMIDR of a PTM": ("device_5.ini", "=0x410CF250", "=0x411CF312",
                        r"device_5\.ini:\[regs\] ETMIDR: expected an ETMv3 ETMIDR .*, got '0x411CF312'"),
    "a source as a core": ("trace.ini", "cpu_0=ETM_0", "ETM_1=ETM_0",
                           r"device_6\.ini:\[device\]: expected class=core .*got 'class=trace_source'"),
    "register not a number": ("device_5.ini", "=0x10001860", "=0x1000zz", r"device_5\.ini:7: expected etmcr"),
    "negative register": ("device_5.ini", "=0x10001860", "=-1",
                          r"device_5\.ini:7: expected etmcr\(0x000\)= a register value from 0 to "
                          r"0xF+, got '-1'"),
    "register over 64 bits": ("device_5.ini", "=0x410CF250", "=0x1234567890410CF250",
                              r"device_5\.ini:8: expected etmidr\(0x079\)= a register value"),
    "ETM register over 32 bits": ("device_5.ini", "=0x10001860", "=0x110001860",
                                  r"device_5\.ini: \[regs\] ETMCR=0x110001860: expected a 32-bit "),
    "reserved trace ID": ("device_5.ini", "=0x00000010", "=0x7a",
                          r"device_5\.ini: ETMTRACEIDR gives trace ID 0x7a, .*expected 0x01 to 0x6F"),
    "not ASCII": ("device_5.ini", "ETM_0", b"ETM_\xff", r"device_5\.ini:2: not ASCII text"),
    "not key=value": ("device_5.ini", "[regs]", "[regs]\nETMCR",
                      r"device_5\.ini:7: expected \[section\] or key=value"),
    "no buffers=": ("trace.ini", "buffers=buffer0", "", r"trace\.ini: \[trace_buffers\] has no buffers="),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_snapshot_is_a_clear_error(case: str, tmp_path: Path) -> None:
    """Opening it is a CputraceError with that message; `ingest` and `etm packets` exit 1 with
    it, never with a traceback."""
    file, old, new, error = HOSTILE[case]
    for path in TC2.iterdir():
        if path.is_file() and path.suffix != ".xz":
            shutil.copy(path, tmp_path)
    target = tmp_path / file
    if new is None:
        target.unlink()
    elif old is None:
        target.write_text(new)
    else:
        text = target.read_bytes()
        assert old.encode() in text
        target.write_bytes(text.replace(old.encode(), new if isinstance(new, bytes) else new.encode()))
    snapshot = tmp_path / "snapshot.ini"
    with pytest.raises(CputraceError, match=error):
        open_captures(snapshot)
    store = str(tmp_path / "s.ctrace")
    for command in (["ingest", str(snapshot), "-o", store], ["etm", "packets", str(snapshot)]):
        result = CliRunner().invoke(cli, command)
        assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
        assert f"error: {tmp_path}" in result.output


@settings(max_examples=200, deadline=None)
@given(
    file=st.sampled_from(["snapshot.ini", "trace.ini", "device_5.ini", "cpu_0.ini"]),
    lines=st.lists(st.one_of(
        st.sampled_from([
            "[device]", "[regs]", "[dump]", "[device_list]", "[trace]", "[trace_buffers]", "[buffer0]",
            "[source_buffers]", "[core_trace_sources]", "name=ETM_0", "class=core", "class=trace_source",
            "type=ETM3.5", "type=", "ETMCR(0x000)=0x10001860", "ETMCR(0x000)=-1", "ETMCR=0x1" + "0" * 30,
            "ETMIDR(0x079)=0x410CF250", "ETMTRACEIDR(0x080)=0x10", "ETMTRACEIDR(0x080)=0x7f",
            "ETMTRACEIDR=zz", "device0=cpu_0.ini", "device5=device_5.ini", "device9=.", "metadata=trace.ini",
            "metadata=gone.ini",
            "buffers=buffer0", "buffers=,", "file=cstrace.bin", "file=gone.bin", "format=coresight",
            "format=source_data", "format=nonsense", "ETM_0=ETB_0", "cpu_0=ETM_0", "ETM_0=ETM_0",
            "file=kernel_dump.bin", "address=0xC0008000", "address=-1", "length=0x50000", "=", "[", "]",
        ]),
        st.text(max_size=30),
    ), max_size=12),
)  # fmt: skip
def test_any_snapshot_file_is_read_or_refused_clearly(
    tmp_path_factory: pytest.TempPathFactory, file: str, lines: list[str]
) -> None:
    """Whatever one of its ini files holds, opening the TC2 snapshot succeeds or is a
    CputraceError (exit 1), never another exception."""
    folder = tmp_path_factory.mktemp("snapshot")
    for path in TC2.iterdir():
        if path.is_file() and path.suffix != ".xz":
            shutil.copy(path, folder)
    (folder / file).write_text("\n".join(lines), encoding="utf-8")
    with contextlib.suppress(CputraceError):
        open_captures(folder / "snapshot.ini")


@given(st.lists(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 40)), max_size=200), max_size=4))
@settings(max_examples=60, deadline=None)
def test_event_tables_merge_like_a_stable_sort_by_seq_then_offset(tables: list[list[tuple]]) -> None:
    """`in_seq_order` against pyarrow's stable sort of all rows by (seq, src), tables in order
    for ties; both when few runs are sliced and many are taken row by row."""
    schema = SCHEMAS["events"]
    made = []
    for table, rows in enumerate(tables):
        rows = sorted(rows)
        n = len(rows)
        columns = {f.name: pa.nulls(n, f.type) for f in schema}
        columns["seq"] = pa.array([seq for seq, _ in rows], pa.int64())
        columns["src"] = pa.array([src for _, src in rows], pa.int64())
        columns["cpu"] = pa.array([table] * n, pa.uint16())
        made.append(pa.table(columns, schema=schema))
    merged = in_seq_order(made)
    everything = pa.concat_tables([schema.empty_table(), *made])
    expected = everything.take(pc.sort_indices(everything, [("seq", "ascending"), ("src", "ascending")]))
    shown = ["seq", "src", "cpu"]
    assert merged.select(shown).to_pylist() == expected.select(shown).to_pylist()


def _decoded_by_cpu(snapshot: Path) -> dict[str, dict[int, list[pa.Table]]]:
    """Each table's batches of a snapshot's decode, by the cpu of their rows."""
    made: dict[str, dict[int, list[pa.Table]]] = {"instructions": {}, "events": {}}
    for batch in decode_captures(open_captures(snapshot), DecodeContext(), {}):
        for name, tables in made.items():
            if name in batch and batch[name].num_rows:
                tables.setdefault(batch[name]["cpu"][0].as_py(), []).append(batch[name])
    return made


def test_a_small_source_comes_out_as_one_table_of_each_and_a_large_in_several(monkeypatch) -> None:
    """Snowball's two PTM sources, each fewer rows than ROW_BUDGET, come out as one
    instructions table and one events table each; with a budget of 16 rows, as several of
    each, holding the same rows, the events in seq then offset order either way."""
    snapshot = shared("opencsd-snapshots", "Snowball")
    whole = _decoded_by_cpu(snapshot)
    assert sorted(whole["instructions"]) == sorted(whole["events"]) and len(whole["instructions"]) == 2
    assert all(len(tables) == 1 for made in whole.values() for tables in made.values())
    monkeypatch.setattr(source_walk, "ROW_BUDGET", 16)
    cut = _decoded_by_cpu(snapshot)
    assert all(len(cut["instructions"][cpu]) > 1 for cpu in whole["instructions"])
    for name, made in whole.items():
        for cpu, (table,) in made.items():
            assert pa.concat_tables(cut[name][cpu]).equals(table)
    for (events,) in whole["events"].values():
        order = pc.sort_indices(events, [("seq", "ascending"), ("src", "ascending")])
        assert np.array_equal(order.to_numpy(), np.arange(events.num_rows))
