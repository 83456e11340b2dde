"""PTM (PFT) packets: byte sequences of ARM IHI 0035B, 4.5, decoded one by one; any bytes
decoded without a crash into packets that tile the stream and resynchronise at the next A-sync;
chunking that changes nothing; and each real PTM buffer, corrupted, decoded leniently (trace
gaps naming the offsets) or refused in strict mode with a message that names the offset."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from packet_checks import check_fed_in_pieces, check_tiling
from paths import shared

import cputrace
from cputrace.cli import cli
from cputrace.coresight.packets import Packets
from cputrace.errors import CputraceError
from cputrace.formats.coresight.capture import open_captures, source_packets
from cputrace.formats.ptm.config import PtmConfig
from cputrace.formats.ptm.packets import PacketDecoder, decode_packets
from cputrace.formats.ptm.protocol import ErrorReason, Flag, Kind
from cputrace.ingest import ingest
from cputrace.model import Isa

A_SYNC = bytes([0, 0, 0, 0, 0, 0x80])
PFT_1_1 = 0x411CF312


def config(etmcr: int = 0, etmccer: int = 0, etmidr: int = PFT_1_1) -> PtmConfig:
    return PtmConfig(etmcr, etmidr, etmccer)


CYCLE_ACCURATE = 1 << 12
CONTEXT_ID_4 = 3 << 14


def i_sync(address: int, info: int = 0x20, tail: bytes = b"") -> bytes:
    """An I-sync at `address` (bit 0: Thumb) with information byte `info` (default: trace on, secure)."""
    return bytes([0x08, *address.to_bytes(4, "little"), info]) + tail


def packets_of(data: bytes, cfg: PtmConfig | None = None) -> Packets:
    return decode_packets(data, cfg or config())


def kinds(packets: Packets) -> list[str]:
    return [Kind(k).name.lower() for k in packets["kind"]]


def test_i_sync_and_atoms() -> None:
    """Atom headers hold one to five atoms, the oldest in the highest bit, 0 for E (4.5.3)."""
    data = A_SYNC + i_sync(0x80000554, 0x68) + bytes([0x84, 0x86, 0x8A, 0x9C, 0xB4, 0xD0])
    p = packets_of(data)
    assert kinds(p) == ["a_sync", "i_sync"] + ["atom"] * 6
    assert (p["address"][1], p["isa"][1], p["info"][1]) == (0x80000554, Isa.A32, 3)  # debug exit
    assert p["flags"][1] & Flag.NS
    pairs = zip(p["atoms"][2:], p["count"][2:], strict=True)
    atoms = ["".join("E" if (a >> i) & 1 else "N" for i in range(c)) for a, c in pairs]
    assert atoms == ["E", "N", "EN", "NNE", "NENE", "ENEEE"]


def test_branch_addresses_by_instruction_set() -> None:
    """Five-byte branch addresses give the instruction set in the last byte (ARM b001, Thumb
    b01, Jazelle b1 in bits 5:3); shorter ones replace the low bits of the last address."""
    arm = bytes([0x81 | (0x3F << 1), 0xFF, 0xFF, 0xFF, 0x08 | 0x07])  # 0xFFFFFFFC
    thumb = bytes([0x80 | (0x11 << 1) | 1, 0x80, 0x80, 0x80, 0x10 | 0x0C])  # 0xC0000022
    short = bytes([0x01 | (0x04 << 1)])  # Thumb: bits 6:1 = 0x08
    jazelle = bytes([0x81, 0x80, 0x80, 0x80, 0x20 | 0x1F])  # 0xF8000000, every byte address
    p = packets_of(A_SYNC + i_sync(0x1000) + arm + thumb + short + jazelle)
    branches = p.table[p["kind"] == Kind.BRANCH]
    assert branches["address"].tolist() == [0xFFFFFFFC, 0xC0000022, 0xC0000008, 0xF8000000]
    assert branches["isa"].tolist() == [Isa.A32, Isa.T32, Isa.T32, Isa.JAZELLE]
    assert branches["bits"].tolist() == [32, 32, 7, 32]


def test_branch_exceptions() -> None:
    """Exception bytes: NS in bit 0, the number in bits 4:1 (and a second byte's bits 4:0
    above it, Hyp in bit 5), AltISA in bit 6 (ThumbEE rather than Thumb)."""
    irq = bytes([0x8D, 0x80, 0xFE, 0xFF, 0x4F, 0x1D])  # OpenCSD's Snowball IRQ to 0xFFFF0018
    hyp = bytes([0x81, 0x80, 0x80, 0x80, 0x50, 0x86 | 0x40, 0x20])  # Thumb, Hyp trap, ThumbEE, Hyp mode
    p = packets_of(A_SYNC + i_sync(0x1000) + irq + hyp)
    branches = p.table[p["kind"] == Kind.BRANCH]
    assert branches["address"].tolist() == [0xFFFF0018, 0]
    assert branches["exception"].tolist() == [14, 3]
    assert branches["isa"].tolist() == [Isa.A32, Isa.T32EE]
    assert [bool(f & Flag.NS) for f in branches["flags"]] == [True, False]
    assert [bool(f & Flag.HYP) for f in branches["flags"]] == [False, True]


def test_cycle_accurate_packets() -> None:
    """Cycle counts: bits 5:2 of the first byte, bit 6 more; then 7 bits a byte (4.5.3). In an
    atom header the header is that first byte; an I-sync that is not periodic, a branch
    address and a timestamp carry one after their other bytes."""
    cfg = config(CYCLE_ACCURATE)
    timestamp = bytes([0x42, 0xE7, 0xF0, 0xAE, 0xC8, 0x8E, 0x8B, 0x00, 0x0C])
    data = (A_SYNC + i_sync(0xC0036328, 0x28, bytes([0xF0, 0x17])) + bytes([0xFA, 0x01, 0x86])
            + bytes([0xA7, 0xEA, 0x0E, 0x44, 0x01]) + timestamp)
    p = packets_of(data, cfg)
    assert kinds(p) == ["a_sync", "i_sync", "atom", "atom", "branch", "timestamp"]
    assert p["cycles"].tolist() == [-1, 380, 30, 1, 17, 3]
    assert p["atoms"][2:4].tolist() == [0, 0]  # both N
    assert p["address"][4] == 0xC0076A4C


def test_context_id_vmid_and_single_byte_packets() -> None:
    cfg = config(CONTEXT_ID_4)
    data = (A_SYNC + i_sync(0x2000, 0x20, bytes([0x78, 0x56, 0x34, 0x12])) + bytes([0x6E, 1, 2, 3, 4])
            + bytes([0x3C, 0x2E, 0x0C, 0x66, 0x76]))
    p = packets_of(data, cfg)
    assert kinds(p) == ["a_sync", "i_sync", "context_id", "vmid", "trigger", "ignore", "exception_return"]
    assert p["value"][1:4].tolist() == [0x12345678, 0x04030201, 0x2E]


def test_waypoint_update() -> None:
    """The address of the last instruction executed, compressed as a branch address's (4.5.5)."""
    p = packets_of(A_SYNC + i_sync(0xC0010E00) + bytes([0x72, 0x79]))
    assert kinds(p)[-1] == "waypoint_update" and p["address"][-1] == 0xC0010EF0 and p["bits"][-1] == 8


def test_timestamps_64_bit_and_gray() -> None:
    """PFT 1.1 with ETMCCER bit 29: 64-bit timestamps, the ninth byte 8 bits; bit 28 natural
    binary. PFT 1.0: 48 bits, Gray-coded."""
    wide = config(etmccer=(1 << 29) | (1 << 28))
    value = 0xFEDCBA9876543210
    payload = [((value >> (7 * i)) & 0x7F) | 0x80 for i in range(8)] + [value >> 56]
    p = packets_of(A_SYNC + bytes([0x46, *payload]), wide)
    assert (p["value"][1], p["bits"][1], bool(p["flags"][1] & Flag.CLOCK_CHANGED)) == (value, 64, True)
    binary = 0x123456789AB
    gray = binary ^ (binary >> 1)
    payload = [((gray >> (7 * i)) & 0x7F) | 0x80 for i in range(6)] + [gray >> 42]
    p = packets_of(A_SYNC + bytes([0x42, *payload]), config(etmidr=0x411CF301))
    assert p["value"][1] == binary


def test_errors_and_resynchronisation() -> None:
    """A reserved header is an error packet; the bytes to the next A-sync are skipped; a
    packet cut by the end of the trace is an error too."""
    data = A_SYNC + i_sync(0x1000) + bytes([0x04, 0x84, 0x84]) + A_SYNC + bytes([0x84, 0x81, 0x80])
    p = packets_of(data)
    assert kinds(p) == ["a_sync", "i_sync", "error", "unsynced", "a_sync", "atom", "error"]
    assert p["info"][2] == ErrorReason.RESERVED_HEADER and p["info"][6] == ErrorReason.TRUNCATED
    assert p["offset"][2] == 12 and p["offset"][6] == len(data) - 2
    p = packets_of(A_SYNC + bytes([0x6E, 0x01]))  # no context ID bytes traced
    assert p["info"][1] == ErrorReason.CONTEXT_ID_OFF


def test_registers_the_decoder_cannot_follow_are_refused() -> None:
    with pytest.raises(CputraceError, match="expected a PTM ETMIDR"):
        config(etmidr=0x410CF250)  # an ETMv3.5


@settings(max_examples=300, deadline=None)
@given(
    data=st.binary(max_size=300),
    etmcr=st.sampled_from([0, CYCLE_ACCURATE, CONTEXT_ID_4 | CYCLE_ACCURATE, 1 << 14]),
    cuts=st.lists(st.integers(0, 400), max_size=6).map(sorted),
)
def test_any_bytes_decode_into_packets_that_tile_them(data: bytes, etmcr: int, cuts: list[int]) -> None:
    """After an A-sync, any bytes: packets cover them exactly, in order; after an error, only
    unsynchronised bytes until an A-sync; fed in pieces to a decoder of small batches, the
    same packets."""
    cfg = config(etmcr, etmccer=1 << 29)
    stream = A_SYNC + data
    whole = decode_packets(stream, cfg)
    check_tiling(stream, whole)
    check_fed_in_pieces(PacketDecoder(cfg, batch_packets=3), stream, cuts, whole)


# --- real buffers, corrupted --------------------------------------------------------------------

SNAPSHOTS = {  # the snapshot, the PTM source, its buffer
    "Snowball": (("opencsd-snapshots", "Snowball"), 0x10, "cstrace.bin"),
    "tc2-ptm-rstk-t32": (("opencsd-snapshots", "tc2-ptm-rstk-t32"), 0x02, "PTM_0_2.bin"),
    "trace_cov_a15": (("opencsd-snapshots", "trace_cov_a15"), 0x02, "PTM_0_2.bin"),
    "TC2": (("tc2-etmv3",), 0x13, "cstrace.bin"),
}


def corrupted_copy(name: str, tmp_path: Path, seed: int) -> tuple[Path, int]:
    """The snapshot with its buffer corrupted: a reserved header (0x04) over the header of one
    of the PTM source's packets (at an odd buffer offset, which a formatter frame holds as it
    is), so that an error in synchronised trace is certain, and random bytes at random places
    after it. Returns the snapshot.ini and the offset of the reserved header."""
    parts, trace_id, buffer = SNAPSHOTS[name]
    folder = shared(*parts)
    for path in folder.iterdir():
        if path.is_file() and path.name != buffer:
            (tmp_path / path.name).symlink_to(path)
    data = bytearray((folder / buffer).read_bytes())
    (capture,) = open_captures(folder / "snapshot.ini", {"source": trace_id})
    packets = Packets.concatenate([b for _, batches in source_packets(capture) for b in batches])
    rng = random.Random(seed)
    synced = int(packets["offset"][np.argmax(packets["kind"] == Kind.I_SYNC)])  # the first I-sync
    headers = [int(o) for o, k in zip(packets["offset"], packets["kind"], strict=True)
               if k in (Kind.ATOM, Kind.BRANCH, Kind.I_SYNC) and o % 2 and o > synced]  # fmt: skip
    planted = rng.choice(headers)
    data[planted] = 0x04
    for _ in range(max(1, len(data) // 2000)):
        data[rng.randrange(planted, len(data))] = rng.randrange(256)
    (tmp_path / buffer).write_bytes(bytes(data))
    return tmp_path / "snapshot.ini", planted


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("name", SNAPSHOTS)
def test_a_corrupted_buffer_is_a_trace_gap_or_a_clear_error(name: str, seed: int, tmp_path: Path) -> None:
    """Lenient: the store is written, with a warning and a trace gap for each error, the first
    at the reserved header planted. Strict: exit 1, naming the buffer's folder, the
    offset and what was expected."""
    snapshot, planted = corrupted_copy(name, tmp_path, seed)
    trace_id = SNAPSHOTS[name][1]
    result = ingest([snapshot], tmp_path / "lenient.ctrace", options={"source": trace_id})
    gaps = cputrace.Trace(result.store).sql(
        "SELECT src, text FROM events WHERE kind = 'trace_gap' AND name = 'error'"
    ).to_pylist()
    assert gaps and all("no instructions until the next I-sync" in g["text"] for g in gaps)
    assert min(g["src"] for g in gaps) == planted
    assert result.manifest["warnings"]["count"] >= len(gaps)
    strict = ["--strict", "--source", str(trace_id), "-o", str(tmp_path / "s.ctrace")]
    run = CliRunner().invoke(cli, ["ingest", str(snapshot), *strict])
    assert run.exit_code == 1 and "Traceback" not in run.output
    assert "offset 0x" in run.stderr and "expected " in run.stderr and str(snapshot.parent) in run.stderr
