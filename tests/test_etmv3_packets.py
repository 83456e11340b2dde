"""ETMv3 packets: the real TC2 trace against its reference decode, every packet kind from
streams built by the test encoder, errors and resynchronisation, chunking, fuzzing, the CLI."""

from __future__ import annotations

import contextlib
import json
import lzma
import random
import re
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from etm_encoder import EtmEncoder, format_frames
from hypothesis import given, settings
from hypothesis import strategies as st
from packet_checks import check_fed_in_pieces, check_tiling
from paths import DATA

from cputrace.cli import cli
from cputrace.errors import CputraceError, TraceFormatError, UsageError
from cputrace.formats import sniff
from cputrace.formats.coresight.bare import bare_buffer_settings
from cputrace.formats.coresight.capture import PacketReader, open_captures
from cputrace.formats.etmv3.config import EtmConfig
from cputrace.formats.etmv3.packets import PacketDecoder, Packets, decode_packets
from cputrace.formats.etmv3.protocol import ErrorReason, Flag, Kind
from cputrace.model import Isa

TC2 = DATA / "etmv3" / "tc2"  # a copy of ../shared/data/tc2-etmv3 (see its NOTICE)
BUFFER = TC2 / "cstrace.bin"
ISAS = {"A32": Isa.A32, "T32": Isa.T32, "T32EE": Isa.T32EE, "Jazelle": Isa.JAZELLE}


def config_for(enc: EtmEncoder, *, data_value: bool = False, gray: bool = False, m: bool = False,
               virtualization: bool = True, minor: int = 5, vmid: bool = False) -> EtmConfig:  # fmt: skip
    """The registers that make an ETM produce what `enc` encodes."""
    etmcr = (enc.cycle_accurate << 12) | ({0: 0, 1: 1, 2: 2, 4: 3}[enc.context_id_bytes] << 14)
    etmcr |= (data_value << 2) | (enc.data_address << 3) | (enc.data_only << 20) | (1 << 28) | (vmid << 30)
    etmidr = 0x4100F200 | (minor << 4) | (enc.alt_branch << 20)
    etmccer = (enc.timestamp_64 << 29) | ((not gray) << 28) | (virtualization << 26)
    return EtmConfig(etmcr, etmidr, etmccer, core="Cortex-M3" if m else "Cortex-A7")


def decode(enc: EtmEncoder, **config) -> Packets:
    return decode_packets(enc.data, config_for(enc, **config))


def synced(**settings) -> EtmEncoder:
    return EtmEncoder(**settings).a_sync()


def same(a: Packets, b: Packets) -> bool:
    """Equal packets, field by field (records have a padding byte that holds anything)."""
    return len(a) == len(b) and all(np.array_equal(a[name], b[name]) for name in a.table.dtype.names)


def kinds(packets: Packets) -> list[str]:
    return [Kind(k).name.lower() for k in packets["kind"].tolist()]


def only(packets: Packets, kind: Kind) -> np.ndarray:
    return packets.table[packets["kind"] == kind]


def ds5_rows() -> list[list[str]]:
    """The DS-5 decode of source 0x10: record type, index, address, opcode, cycles, ... fail."""
    lines = lzma.decompress((TC2 / "ds5-dumps" / "etmv3_0x10.txt.xz").read_bytes()).decode().splitlines()
    return [line.split("\t") for line in lines[1:]]


def tc2_packets(trace_id: int) -> Packets:
    (capture,) = open_captures(TC2, {"source": trace_id})
    return Packets.concatenate([batch for _, batch in PacketReader(capture)])


# --- the real trace -------------------------------------------------------------------------


def test_tc2_source_0x10_agrees_with_the_reference_decode() -> None:
    """Atoms, I-sync addresses, cycle counts, timestamps and exception returns of source 0x10
    match what the independent DS-5 decode shows."""
    packets = tc2_packets(0x10)
    rows = ds5_rows()
    assert kinds(packets).count("error") == 0 and kinds(packets).count("unsynced") == 1
    after_sync = packets.table[np.argmax(packets["kind"] == Kind.I_SYNC) :]
    headers = after_sync[after_sync["kind"] == Kind.P_HEADER]
    executed = sum(bin(int(a)).count("1") for a in headers["atoms"])
    assert (int(headers["count"].sum()), int(headers["count"].sum()) - executed) == (7205, 455)
    instructions = [r for r in rows if r[0] == "Instruction"]
    assert len(instructions) == 7205 and sum(r[7] == "fail" for r in instructions) == 455
    syncs = only(packets, Kind.I_SYNC)
    assert syncs["address"][0] == int(instructions[0][2][2:], 16) and syncs["isa"][0] == Isa.T32
    assert set(syncs["address"].tolist()) <= {int(r[2][2:], 16) for r in instructions}
    counted = syncs[syncs["cycles"] >= 0]
    assert len(counted) == sum(r[0] == "Cycle Count" for r in rows) == 135
    assert (counted["info"] == 1).all()  # trace enabled, as DS-5's "Tracing enabled" records
    stamps = packets["value"][packets["kind"] == Kind.TIMESTAMP].tolist()
    assert stamps[1:] == [int(r[5].split(": ")[1]) for r in rows if r[0] == "Timestamp"]
    returns = sum(r[5] == "Return from exception" for r in rows)
    assert kinds(packets).count("exception_exit") == returns == 5


@pytest.mark.parametrize("trace_id", [0x11, 0x12])
def test_tc2_other_sources_decode_without_errors(trace_id: int) -> None:
    packets = tc2_packets(trace_id)
    assert kinds(packets).count("error") == 0
    assert kinds(packets)[:2] == ["unsynced", "a_sync"] and kinds(packets).count("i_sync") > 20


def test_tc2_offsets_point_into_the_buffer() -> None:
    buffer = (TC2 / "cstrace.bin").read_bytes()
    packets = tc2_packets(0x10)
    for index in np.flatnonzero(packets["kind"] == Kind.I_SYNC)[:20]:
        offset = int(packets["offset"][index])
        assert buffer[offset] in (0x08, 0x70)  # headers at odd positions are stored whole
    assert int(packets["offset"][1]) == 0x35A and packets.raw(1) == b"\x00" * 5 + b"\x80"


# --- every packet kind ----------------------------------------------------------------------


def test_i_sync_forms() -> None:
    enc = synced(context_id_bytes=4)
    enc.i_sync(0x8000, "A32", reason=1, context_id=0xDEADBEEF)
    enc.i_sync(0xC002115C, "T32", reason=2, ns=True, hyp=True, cycles=7695, context_id=7)
    enc.i_sync(0x9000, "T32EE", alt_isa=True, lsip=0x9004)
    enc.i_sync(0x12345677, "Jazelle", reason=3)
    syncs = only(decode(enc), Kind.I_SYNC)
    assert syncs["address"].tolist() == [0x8000, 0xC002115C, 0x9000, 0x12345677]
    assert syncs["isa"].tolist() == [Isa.A32, Isa.T32, Isa.T32EE, Isa.JAZELLE]
    assert syncs["info"].tolist() == [1, 2, 0, 3]
    assert syncs["cycles"].tolist() == [-1, 7695, -1, -1]
    assert syncs["value"].tolist() == [0xDEADBEEF, 7, 0, 0]
    assert syncs["flags"][1] == Flag.NS | Flag.HYP and syncs["flags"][2] == Flag.ALT_ISA | Flag.LSIP
    assert syncs["address2"][2] == 0x9004


def test_i_sync_bits_by_version() -> None:
    """AltISA exists from ETMv3.3, Hyp with the Virtualization Extensions."""
    enc = synced().i_sync(0x100, "T32EE", alt_isa=True, hyp=True)
    old = only(decode(enc, minor=2, virtualization=False), Kind.I_SYNC)
    assert old["isa"][0] == Isa.T32 and old["flags"][0] == 0


def test_i_sync_data_only_has_no_address() -> None:
    enc = synced(data_only=True, context_id_bytes=2).i_sync(0x8000, context_id=0x1234)
    sync = only(decode(enc, data_value=True), Kind.I_SYNC)
    assert (sync["bits"][0], sync["value"][0], sync["size"][0]) == (0, 0x1234, 4)


@pytest.mark.parametrize("alt", [False, True])
def test_branch_address_compression(alt: bool) -> None:
    enc = synced(alt_branch=alt).i_sync(0xC0000000, "A32")
    targets = [(0xC0000040, "A32"), (0xC0001000, "A32"), (0xC0007FFC, "A32"), (0x00000100, "A32"),
               (0x00000102, "T32"), (0x00000180, "T32"), (0x80000000, "T32"), (0x80000001, "Jazelle"),
               (0x80000010, "Jazelle"), (0x80000010, "A32")]  # fmt: skip
    for address, isa in targets:
        enc.branch(address, isa)
    branches = only(decode(enc), Kind.BRANCH)
    assert branches["address"].tolist() == [a for a, _ in targets]
    assert branches["isa"].tolist() == [ISAS[i] for _, i in targets]
    assert branches["size"].tolist()[:3] == [1, 2, 3 if alt else 2]


@settings(max_examples=200, deadline=None)
@given(
    alt=st.booleans(),
    steps=st.lists(
        st.tuples(st.integers(0, 2**32 - 1), st.sampled_from(["A32", "T32", "T32EE", "Jazelle"])),
        min_size=1, max_size=20,
    ),
)  # fmt: skip
def test_branch_addresses_round_trip(alt: bool, steps: list[tuple[int, str]]) -> None:
    enc = synced(alt_branch=alt).i_sync(0x1000, "A32")
    want = []
    for address, isa in steps:
        aligned = address & ~((1 << {"A32": 2, "T32": 1, "T32EE": 1, "Jazelle": 0}[isa]) - 1)
        enc.branch(aligned, isa)
        want.append((aligned, ISAS[isa]))
    branches = only(decode(enc), Kind.BRANCH)
    assert list(zip(branches["address"].tolist(), branches["isa"].tolist(), strict=True)) == want


@pytest.mark.parametrize("alt", [False, True])
def test_branch_exceptions(alt: bool) -> None:
    enc = synced(alt_branch=alt).i_sync(0x8000, "A32")
    enc.branch(0x18, exception=14, cancel=True, ns=True)  # IRQ, cancelling the last instruction
    enc.branch(0x8000, "T32", exception=3, hyp=True, resume=5)  # Hyp trap
    enc.branch(0x8010, "T32EE")  # exception bytes with number 0 carry the switch to ThumbEE
    enc.branch(0x8020, "T32EE", exception=10, ns=False, resume=2)
    branches = only(decode(enc), Kind.BRANCH)
    assert branches["exception"].tolist() == [14, 3, 0, 10]
    assert branches["info"].tolist() == [0, 5, 0, 2]  # resume
    assert branches["isa"].tolist() == [Isa.A32, Isa.T32, Isa.T32EE, Isa.T32EE]
    flags = branches["flags"].tolist()
    assert flags[0] == Flag.EXCEPTION | Flag.CANCEL | Flag.NS
    assert flags[1] == Flag.EXCEPTION | Flag.HYP
    assert flags[2] == Flag.EXCEPTION | Flag.HYP | Flag.ALT_ISA
    assert branches["address"].tolist() == [0x18, 0x8000, 0x8010, 0x8020]
    if alt:  # the alternative encoding carries an exception after a short address
        assert branches["size"][2] < 5 + 1


def test_branch_exception_numbers_v7m() -> None:
    enc = synced(alt_branch=True).i_sync(0x100, "T32")
    enc.branch(0x200, "T32", exception=0x11)  # Reset (number 17 needs the second byte)
    enc.branch(0x300, "T32", exception=40)  # IRQ24
    branches = only(decode(enc, m=True), Kind.BRANCH)
    assert branches["exception"].tolist() == [0x11, 40]


def test_deprecated_exception_encoding() -> None:
    enc = synced().i_sync(0x8000, "T32").deprecated_exception(0x1C, code=5, cancel=True)  # FIQ
    branch = only(decode(enc), Kind.BRANCH)
    assert (branch["address"][0], branch["isa"][0], branch["exception"][0]) == (0x1C, Isa.A32, 15)
    assert branch["flags"][0] & (Flag.DEPRECATED | Flag.CANCEL) == Flag.DEPRECATED | Flag.CANCEL
    enc = synced().i_sync(0x8000).deprecated_exception(0x1C, code=2).a_sync()  # code 2 is reserved
    assert kinds(decode(enc))[-2:] == ["error", "a_sync"]


def test_p_headers_not_cycle_accurate() -> None:
    enc = synced().i_sync(0x8000).atoms("E" * 15 + "N").atoms("N")
    enc.atoms_format2("N", "E").atoms_format2("E", "E")
    headers = only(decode(enc), Kind.P_HEADER)
    assert headers["count"].tolist() == [16, 1, 2, 2]
    assert headers["atoms"].tolist() == [0x7FFF, 0, 0b10, 0b11]
    assert headers["info"].tolist() == [1, 1, 2, 2] and (headers["cycles"] == -1).all()
    for reserved in (0x92, 0xA2, 0xC2):  # b1001xx10, b101xxx10, b11xxxx10
        assert kinds(decode(synced().raw(bytes([reserved]))))[-1] == "error"


def test_p_headers_cycle_accurate() -> None:
    enc = synced(cycle_accurate=True).i_sync(0x8000)
    enc.ca_format1(3, True).ca_format2("E", "N").ca_format3(8, True).ca_format3(1, False).ca_format4("N")
    headers = only(decode(enc), Kind.P_HEADER)
    assert headers["info"].tolist() == [1, 2, 3, 3, 4]
    assert headers["count"].tolist() == [4, 2, 1, 0, 1]
    assert headers["atoms"].tolist() == [0b0111, 0b01, 1, 0, 0]
    assert headers["cycles"].tolist() == [4, 1, 8, 1, 0]
    for reserved in (0x80, 0xA2):
        packets = decode(synced(cycle_accurate=True).raw(bytes([reserved])))
        assert kinds(packets)[-1] == "error" and packets["info"][-1] == ErrorReason.RESERVED_P_HEADER


def test_cycle_counts() -> None:
    enc = synced().cycle_count(0).cycle_count(127).cycle_count(128).cycle_count(2**32 - 1)
    counts = only(decode(enc), Kind.CYCLE_COUNT)
    assert counts["cycles"].tolist() == [0, 127, 128, 2**32 - 1]
    assert counts["size"].tolist() == [2, 2, 3, 6]


@pytest.mark.parametrize("wide", [False, True])
def test_timestamps(wide: bool) -> None:
    top = 2**64 - 1 if wide else 2**48 - 1
    values = [0x123456789A, 0x123456789B, 0x1234567F00, top, 5]
    enc = synced(timestamp_64=wide)
    for value in values:
        enc.timestamp(value, clock_changed=value == 5)
    stamps = only(decode(enc), Kind.TIMESTAMP)
    assert stamps["value"].tolist() == values
    assert stamps["size"].tolist()[:2] == [7, 2]  # the second sends only its low byte
    assert stamps["flags"].tolist() == [0, 0, 0, 0, Flag.CLOCK_CHANGED]


@settings(max_examples=100, deadline=None)
@given(wide=st.booleans(), values=st.lists(st.integers(0, 2**48 - 1), min_size=1, max_size=12))
def test_timestamps_round_trip(wide: bool, values: list[int]) -> None:
    enc = synced(timestamp_64=wide)
    for value in values:
        enc.timestamp(value)
    assert only(decode(enc), Kind.TIMESTAMP)["value"].tolist() == values


@settings(max_examples=100, deadline=None)
@given(
    steps=st.lists(st.tuples(st.integers(0, 2**32 - 1), st.booleans(), st.sampled_from([0, 1, 2, 4])),
                   min_size=1, max_size=12),
)  # fmt: skip
def test_data_addresses_round_trip(steps: list[tuple[int, bool, int]]) -> None:
    enc = synced(data_address=True)
    for address, big_endian, size in steps:
        enc.normal_data(address & ((1 << 8 * size) - 1), size, address=address, big_endian=big_endian)
    data = only(decode(enc, data_value=True), Kind.NORMAL_DATA)
    assert data["address"].tolist() == [a for a, _, _ in steps]
    assert data["count"].tolist() == [size for _, _, size in steps]
    endian = [bool(f & Flag.BIG_ENDIAN) for f in data["flags"]]
    assert endian == [b for _, b, _ in steps]


def test_timestamps_gray_coded() -> None:
    binary = 0x0123456789AB
    gray = binary ^ (binary >> 1)
    stamps = only(decode(synced().timestamp(gray), gray=True), Kind.TIMESTAMP)
    assert stamps["value"][0] == binary


@pytest.mark.parametrize("size", [1, 2, 4])
def test_context_id_and_vmid(size: int) -> None:
    enc = synced(context_id_bytes=size).context_id(0x89ABCDEF).vmid(0x42)
    packets = decode(enc, vmid=True)
    assert only(packets, Kind.CONTEXT_ID)["value"][0] == 0x89ABCDEF & ((1 << 8 * size) - 1)
    assert only(packets, Kind.VMID)["value"][0] == 0x42


def test_single_byte_packets() -> None:
    enc = synced(data_address=True).trigger().ignore().exception_exit().exception_entry()
    enc.store_failed().data_suppressed()
    assert kinds(decode(enc, data_value=True))[1:] == [
        "trigger", "ignore", "exception_exit", "exception_entry", "store_failed", "data_suppressed",
    ]  # fmt: skip


def test_data_packets() -> None:
    enc = synced(data_address=True).i_sync(0x8000)
    enc.normal_data(0x11223344, 4, address=0x20000000)
    enc.normal_data(0x55, 1, address=0x20000004)  # one address byte: the rest is unchanged
    enc.normal_data(0xABCD, 2)  # a later transfer of the same instruction: no address
    enc.normal_data(0, 0, address=0x20000008, big_endian=True)  # a full address with the E bit
    enc.ooo_data(2, 0x99, 1).ooo_placeholder(3, address=0x20004000).value_not_traced(address=0x30000000)
    packets = decode(enc, data_value=True)
    data = packets.table[packets["kind"] >= Kind.NORMAL_DATA]
    assert kinds(packets)[2:] == ["normal_data"] * 4 + ["ooo_data", "ooo_placeholder", "value_not_traced"]
    assert data["address"].tolist() == [0x20000000, 0x20000004, 0x20000004, 0x20000008, 0x20000008,
                                        0x20004000, 0x30000000]  # fmt: skip
    assert data["bits"].tolist() == [32, 7, 0, 32, 0, 21, 32]
    assert data["value"].tolist()[:5] == [0x11223344, 0x55, 0xABCD, 0, 0x99]
    assert data["count"].tolist()[:5] == [4, 1, 2, 0, 1]
    assert data["info"].tolist()[4:6] == [2, 3]  # out-of-order tags
    assert [bool(f & Flag.BIG_ENDIAN) for f in data["flags"]] == [False] * 3 + [True] * 4


# --- errors and resynchronisation -------------------------------------------------------------


def test_reserved_header_is_reported_then_resynchronised() -> None:
    enc = synced().i_sync(0x8000).atoms("EE").raw(b"\x10\x84\x84").a_sync().i_sync(0x9000).atoms("E")
    packets = decode(enc)
    assert kinds(packets) == [
        "a_sync", "i_sync", "p_header", "error", "unsynced", "a_sync", "i_sync", "p_header",
    ]  # fmt: skip
    error = only(packets, Kind.ERROR)
    assert (error["offset"][0], error["info"][0], error["size"][0]) == (13, ErrorReason.RESERVED_HEADER, 1)
    assert only(packets, Kind.I_SYNC)["address"].tolist() == [0x8000, 0x9000]


@pytest.mark.parametrize(
    ("stream", "reason"),
    [
        (b"\x02", ErrorReason.DATA_TRACE_OFF),  # normal data with data tracing off
        (b"\x20\x00", ErrorReason.DATA_TRACE_OFF),  # out-of-order data
        (b"\x6e\x01", ErrorReason.CONTEXT_ID_OFF),
        (b"\x00\x00\x00\x80", ErrorReason.BAD_A_SYNC),  # too few zeros
        (b"\x81\x80\x80\x80\x00", ErrorReason.RESERVED_ISA),  # byte 5 names no ISA
        (b"\x08\x00\x00", ErrorReason.TRUNCATED),
    ],
)  # fmt: skip
def test_malformed_packets(stream: bytes, reason: ErrorReason) -> None:
    packets = decode(synced().raw(stream))
    errors = only(packets, Kind.ERROR)
    assert errors["info"].tolist() == [reason]
    assert errors["offset"][0] == 6


def test_extra_zeros_before_an_a_sync() -> None:
    packets = decode(synced().raw(b"\x00\x00").a_sync().i_sync(0x10))
    assert kinds(packets) == ["a_sync", "error", "a_sync", "i_sync"]
    assert only(packets, Kind.ERROR)["size"][0] == 2


def test_stream_start_before_any_a_sync() -> None:
    packets = decode(EtmEncoder().raw(b"\x84\x08\x00\x00\x00\x00\x00\x00").a_sync().i_sync(0x40))
    assert kinds(packets) == ["unsynced", "a_sync", "i_sync"]
    assert packets["size"][0] == 8  # zeros beyond the five before 0x80 are not the A-sync's


def _kinds_of_batches(decoder: PacketDecoder, stream: bytes, cuts: list[int]) -> Packets:
    data = np.frombuffer(stream, dtype=np.uint8)
    offsets = np.arange(len(data), dtype=np.int64)
    batches = []
    for start, end in zip([0, *cuts], [*cuts, len(data)], strict=True):
        batches.extend(decoder.feed(data[start:end], offsets[start:end]))
    batches.extend(decoder.finish())
    return Packets.concatenate(batches)


def _mixed_stream() -> tuple[EtmEncoder, EtmConfig]:
    enc = EtmEncoder(context_id_bytes=2, data_address=True, timestamp_64=True)
    enc.raw(b"\x33\x00\x00").a_sync().i_sync(0xC0001000, "T32", cycles=300, context_id=9).atoms("EEN")
    enc.branch(0xC0002000).timestamp(2**40 + 3).normal_data(7, 4, address=0x1000).raw(b"\x14\x00")
    enc.a_sync().i_sync(0x8000).branch(0x8100, exception=14, resume=1).atoms("NEEE").raw(b"\x70\x81")
    return enc, config_for(enc, data_value=True)


@settings(max_examples=100, deadline=None)
@given(cuts=st.lists(st.integers(0, 200), max_size=8).map(sorted), batch=st.integers(2, 9))
def test_chunked_decoding_matches_whole(cuts: list[int], batch: int) -> None:
    enc, config = _mixed_stream()
    stream = enc.data
    whole = decode_packets(stream, config)
    pieces = _kinds_of_batches(PacketDecoder(config, batch), stream, [min(c, len(stream)) for c in cuts])
    assert same(pieces, whole)
    assert [pieces.raw(i) for i in range(len(pieces))] == [whole.raw(i) for i in range(len(whole))]


def test_chunked_decoding_of_tc2() -> None:
    (capture,) = open_captures(TC2, {"source": 0x10})
    whole = tc2_packets(0x10)
    small = Packets.concatenate([b for _, b in PacketReader(capture, chunk_bytes=1000)])
    assert same(small, whole)


@settings(max_examples=300, deadline=None)
@given(
    data=st.one_of(
        st.binary(max_size=300),
        st.lists(st.sampled_from([b"\x00" * 5 + b"\x80", b"\x08", b"\x70", b"\x01", b"\x81", b"\xc1",
                                  b"\x42", b"\x46", b"\x6e", b"\x02", b"\x2e", b"\x80", b"\x00", b"\xff",
                                  b"\x3c", b"\x04"]), max_size=60).map(b"".join),
    ),
    etmcr=st.integers(0, 2**31 - 1),
    etmidr=st.sampled_from([0x4100F230, 0x4100F240, 0x4114F250]),
    etmccer=st.integers(0, 2**32 - 1),
    cuts=st.lists(st.integers(0, 400), max_size=6).map(sorted),
)  # fmt: skip
def test_any_bytes_decode_to_packets_covering_them(
    data: bytes, etmcr: int, etmidr: int, etmccer: int, cuts: list[int]
) -> None:
    """Random bytes never crash the decoder; the packets tile the stream exactly; fed in
    pieces to a decoder of small batches, the same packets."""
    cfg = EtmConfig(etmcr, etmidr, etmccer)
    packets = decode_packets(data, cfg)
    check_tiling(data, packets)
    assert set(packets["kind"].tolist()) <= {int(k) for k in Kind}
    check_fed_in_pieces(PacketDecoder(cfg, batch_packets=3), data, cuts, packets)


# --- configuration ----------------------------------------------------------------------------


def test_config_from_tc2_registers() -> None:
    config = EtmConfig(0x10001860, 0x410CF250, 0x344008F2)
    assert (config.version, config.cycle_accurate, config.context_id_bytes) == ("3.5", True, 0)
    assert (config.timestamps, config.timestamp_64, config.timestamp_gray) == (True, True, False)
    assert (config.alt_branch, config.data_value, config.data_address, config.virtualization) == (
        False, False, False, True,
    )  # fmt: skip
    with pytest.raises(CputraceError, match="ETMIDR 0x411CF312: expected an ETMv3 ETMIDR"):
        EtmConfig(0x10001000, 0x411CF312)  # the PTM of the same board
    with pytest.raises(CputraceError, match=r"ETMCR=-0x1: expected a 32-bit register value"):
        EtmConfig(-1)


def test_bare_buffer_settings(tmp_path: Path) -> None:
    ini = tmp_path / "etm.ini"
    ini.write_text("[etm]\netmcr = 0x10001860   ; cycle-accurate\netmidr=0x410CF250\ntrace_id=0x11\n")
    settings = bare_buffer_settings(BUFFER, {"etm_config": str(ini), "etmccer": 0x344008F2})
    assert settings.config == EtmConfig(0x10001860, 0x410CF250, 0x344008F2, 0x11)
    as_json = tmp_path / "etm.json"
    as_json.write_text('{"etmcr": "0x1000", "format": "source_data"}')
    settings = bare_buffer_settings(BUFFER, {"etm_config": str(as_json), "source": 0x12})
    assert (settings.config.etmcr, settings.config.trace_id, settings.layout) == (0x1000, 0x12, "source_data")
    device = bare_buffer_settings(BUFFER, {"etm_config": str(TC2 / "device_6.ini")})
    assert device.config == EtmConfig(0x10001860, 0x410CF250, 0x344008F2, 0x11)
    with pytest.raises(CputraceError, match=r"cstrace\.bin: a bare ETMv3 buffer needs the ETM's registers"):
        bare_buffer_settings(BUFFER, {})
    as_json.write_text('{"etmcr": 1, "colour": "red"}')
    with pytest.raises(CputraceError, match="unknown ETM settings colour"):
        bare_buffer_settings(BUFFER, {"etm_config": str(as_json)})


ETMCR = {"etmcr": 0x1000}
TOO_BIG = "expected a number from 0 to 0xffffffff"


@pytest.mark.parametrize(
    ("settings", "error"),
    [
        ({"etmcr": -1}, rf"option etmcr: {TOO_BIG}, got -1$"),
        ({"etmcr": 1 << 40}, rf"option etmcr: {TOO_BIG}, got 1099511627776"),
        ({**ETMCR, "etmidr": "0x1410CF250"}, rf"option etmidr: {TOO_BIG}, got '0x1410CF250'"),
        ({**ETMCR, "etmidr": "-1"}, rf"option etmidr: {TOO_BIG}, got '-1'"),
        ({**ETMCR, "etmidr": "0x4100F440"}, r"option etmidr: expected an ETMv3 or PTM ETMIDR .*'0x4100F440'"),
        ({**ETMCR, "source": 0x90}, r"option source: expected a trace ID from 0x01 to 0x6F, got 144"),
        ({**ETMCR, "source": 0}, r"option source: expected a trace ID from 0x01 to 0x6F, got 0"),
        ({**ETMCR, "source": ""}, r"option source: expected a number, got ''"),
        ({**ETMCR, "source": "none"}, r"option source: expected a number, got 'none'"),
        ({**ETMCR, "buffer_format": "etb"}, r"option buffer_format: expected one of coresight, .*'etb'"),
        ({**ETMCR, "etm_config": "0xfffffffffffffffff"},
         r"option etm_config: expected an ETM configuration file \(ini or JSON\), got '0xfffffffffffffffff'"),
        ({**ETMCR, "etm_config": "9" * 5000},  # a name too long for any file system
         r"option etm_config: expected an ETM configuration file \(ini or JSON\), got '9999"),
    ],
)  # fmt: skip
def test_bad_bare_buffer_options_are_usage_errors_naming_the_option(settings: dict, error: str) -> None:
    """An option's value is range-checked where it is read, and a bad one is bad usage naming the
    option as the user wrote it (`source`, not the trace ID it stands for), never a value
    masked or wrapped silently."""
    with pytest.raises(UsageError, match=error):
        bare_buffer_settings(BUFFER, settings)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ('{"etmcr": 123456789012345678901234567890}', r"etmcr: expected a 32-bit register value"),
        ('{"etmcr": 1, "etmidr": "0x4100F440"}', r"etmidr: expected an ETMv3 or PTM ETMIDR .*'0x4100F440'"),
        ('{"etmcr": 1, "trace_id": 0}', r"trace_id: expected a trace ID from 0x01 to 0x6F, got '0'"),
        ('{"etmcr": 1, "format": "etb"}', r"format: expected one of coresight, .*'etb'"),
    ],
)
def test_a_bad_config_file_value_is_bad_input_naming_the_file_and_key(
    tmp_path: Path, text: str, error: str
) -> None:
    path = tmp_path / "etm.json"
    path.write_text(text)
    with pytest.raises(TraceFormatError, match=re.escape(f"{path}:") + error):
        bare_buffer_settings(BUFFER, {"etm_config": str(path)})


@settings(max_examples=150, deadline=None)
@given(text=st.one_of(
    st.text(max_size=120),
    st.lists(st.sampled_from(["[etm]", "[regs]", "etmcr=0x1000", "etmidr=0x411CF312", "etmcr=", "trace_id=ff",
                              "format=raw", "core=Cortex-M4", "{", "}", '"etmcr": [1]', '"core": 5', "=",
                              "ETMCR(0x000)=0x1000", "; comment"]), max_size=8).map("\n".join),
))  # fmt: skip
def test_any_config_file_is_read_or_refused_clearly(
    tmp_path_factory: pytest.TempPathFactory, text: str
) -> None:
    """Whatever a configuration file holds, the only error is a CputraceError (exit 1)."""
    path = tmp_path_factory.mktemp("cfg") / "etm.cfg"
    path.write_text(text, encoding="utf-8")
    with contextlib.suppress(CputraceError):
        bare_buffer_settings(BUFFER, {"etm_config": str(path)})


def test_sniffing() -> None:
    assert sniff((TC2 / "snapshot.ini").read_bytes(), "snapshot.ini").name == "coresight"
    assert sniff(b"\x00" * 5 + b"\x80\x08\x00", "raw.bin").name == "coresight"
    assert sniff(b"\xff\xff\xff\x7f\x21\x00", "tpiu.bin").name == "coresight"


# --- inputs and the command line --------------------------------------------------------------


def test_bare_buffers_of_every_layout(tmp_path: Path) -> None:
    enc, config = _mixed_stream()
    want = decode_packets(enc.data, config)
    raw = tmp_path / "raw.bin"
    raw.write_bytes(enc.data)
    framed = tmp_path / "etb.bin"
    rng = random.Random(3)
    cuts = sorted(rng.sample(range(1, len(enc.data)), 12))
    pieces = [(0x21, b"junk")]
    pieces += [(0x10, enc.data[a:b]) for a, b in zip([0, *cuts], [*cuts, len(enc.data)], strict=True)]
    framed.write_bytes(format_frames(pieces))
    registers = {"etmcr": config.etmcr, "etmidr": config.etmidr, "etmccer": config.etmccer}
    (single,) = open_captures(raw, {**registers, "buffer_format": "source_data"})
    got = Packets.concatenate([b for _, b in PacketReader(single, chunk_bytes=7)])
    assert got["kind"].tolist() == want["kind"].tolist() and got["offset"].tolist() == want["pos"].tolist()
    (formatted,) = open_captures(framed, {**registers, "source": 0x10})
    got = Packets.concatenate([b for s, b in PacketReader(formatted) if s.trace_id == 0x10])
    assert got["kind"].tolist() == want["kind"].tolist()
    (everything,) = open_captures(framed, registers)
    reader = PacketReader(everything)
    assert {s.trace_id for s, _ in reader} == {0x10, 0x21}
    assert sorted((s.trace_id, s.cpu) for s in reader.discovered) == [(0x10, 0x10), (0x21, 0x21)]


def test_cli_packets_text() -> None:
    result = CliRunner().invoke(cli, ["etm", "packets", str(TC2), "--limit", "14"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["offset", "id", "raw", "bytes", "packet"]
    assert lines[1].startswith("0x00000018  0x10  82 a4 84 a4") and lines[1].endswith("unsynced bytes=776")
    assert lines[2].endswith("a_sync") and "00 00 00 00 00 80" in lines[2]
    assert lines[3].endswith("timestamp timestamp=562536959293 bits=64")
    assert lines[4].endswith("p_header atoms=WWWWWWWW cycles=8")
    assert lines[12].endswith("i_sync address=0xc002115c isa=T32 reason=periodic")
    assert lines[13].endswith("p_header atoms=WE cycles=1")
    assert "source 0x10 ETM_0, cpu_0 (Cortex-A7): ETMv3.5, cycle-accurate, 64-bit timestamps" in result.stderr


def test_cli_packets_csv_and_jsonl() -> None:
    snapshot = str(TC2 / "snapshot.ini")
    result = CliRunner().invoke(cli, ["etm", "packets", snapshot, "--source", "0x12", "--format", "csv"])
    assert result.exit_code == 0, result.output
    rows = result.stdout.splitlines()
    assert rows[0].startswith("source,offset,size,raw,kind,address,isa,atoms,cycles")
    assert len(rows) == 1 + len(tc2_packets(0x12)) and rows[2].startswith("18,7342,6,000000000080,a_sync")
    result = CliRunner().invoke(cli, ["etm", "packets", snapshot, "--source", "17", "--format", "jsonl"])
    records = [json.loads(line) for line in result.stdout.splitlines()]
    sync = next(r for r in records if r["kind"] == "i_sync")
    assert set(sync) >= {"source", "offset", "size", "raw", "address", "isa", "reason"}
    assert sync["source"] == 17


def test_cli_packets_bad_input(tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(cli, ["etm", "packets", str(TC2), "--source", "0x15"])
    assert result.exit_code == 1 and "no ETMv3, PTM or ETMv4 source with trace ID 0x15" in result.stderr
    result = runner.invoke(cli, ["etm", "packets", str(TC2 / "cstrace.bin")])
    assert result.exit_code == 1 and "--etmcr" in result.stderr
    assert f"error: {TC2 / 'cstrace.bin'}: a bare ETMv3 buffer needs" in result.stderr  # names the buffer
    result = runner.invoke(cli, ["etm", "packets", str(TC2), "--etmcr", "0x1000"])
    assert result.exit_code == 2 and "option etmcr: bare buffers only" in result.stderr
    result = runner.invoke(cli, ["etm", "packets", str(TC2), "--source", "sixteen"])
    assert result.exit_code == 2
    for args in ([str(TC2)], [str(TC2 / "cstrace.bin"), "--etmcr", "0x1000"]):  # no source has ID 0x90
        result = runner.invoke(cli, ["etm", "packets", *args, "--source", "0x90"])
        assert result.exit_code == 2, result.output
        assert "option source: expected a trace ID from 0x01 to 0x6F, got 144" in result.stderr

